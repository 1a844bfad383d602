//! Types of feedback on answers (issue #35): a person rates an answer of
//! one of their chats (`/api/chat/feedback`) or of a conversation
//! (`/api/conversation/feedback`); the organization's admins list and
//! export what was given (`/api/org/feedback/list`, `/export`).

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The longest comment, in characters.
pub const COMMENT_MAX_CHARS: usize = 2000;
/// The most tags on one rating.
pub const TAGS_MAX: usize = 10;
/// The longest tag, in characters.
pub const TAG_MAX_CHARS: usize = 40;
/// What a tag is: 1 to 40 ASCII letters, digits, `_` and `-`, starting
/// with a letter or digit (stored lowercased).
pub const TAG_PATTERN: &str = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$";
/// The default `limit` of `GET /api/org/feedback/list`.
pub const LIST_DEFAULT_LIMIT: u32 = 50;
/// The largest `limit` of `GET /api/org/feedback/list`.
pub const LIST_MAX_LIMIT: u32 = 200;

/// A rating: thumbs up or down.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum FeedbackRating {
    Up,
    Down,
}

/// Where a rated answer is: a chat (private to its user) or a conversation
/// (the organization's).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum FeedbackArea {
    Chat,
    Conversation,
}

/// The format of `GET /api/org/feedback/export`.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum FeedbackExportFormat {
    /// `text/csv`: RFC 4180, a header row, one row per rating.
    Csv,
    /// `application/jsonl`: JSON Lines, one `FeedbackListItem` per line.
    Jsonl,
}

/// Body of `POST /api/chat/feedback`: rates an answer of one of the
/// caller's chats. The whole feedback is replaced each time.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatFeedbackWrite {
    /// The answer (a `MODEL` message of one of the caller's chats).
    pub message_id: Uuid,
    pub rating: FeedbackRating,
    /// 1 to 2000 characters; blank or absent: no comment.
    #[serde(default)]
    #[schemars(length(min = 1, max = 2000))]
    pub comment: Option<String>,
    /// At most 10 tags, each 1 to 40 ASCII letters, digits, `_` or `-`
    /// (starting with a letter or digit); stored lowercased, duplicates
    /// once. Absent: none.
    #[serde(default)]
    #[schemars(
        length(max = 10),
        inner(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$"))
    )]
    pub tags: Option<Vec<String>>,
}

/// Body of `POST /api/conversation/feedback`: rates an answer of one of
/// the organization's conversations. The whole feedback is replaced each
/// time.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConversationFeedbackWrite {
    /// The answer: an assistant message's id (the `message_id` of its
    /// stream's `start` event; an opaque string, currently a UUID).
    #[schemars(length(min = 1, max = 100))]
    pub message_id: String,
    pub rating: FeedbackRating,
    /// 1 to 2000 characters; blank or absent: no comment.
    #[serde(default)]
    #[schemars(length(min = 1, max = 2000))]
    pub comment: Option<String>,
    /// At most 10 tags, each 1 to 40 ASCII letters, digits, `_` or `-`
    /// (starting with a letter or digit); stored lowercased, duplicates
    /// once. Absent: none.
    #[serde(default)]
    #[schemars(
        length(max = 10),
        inner(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$"))
    )]
    pub tags: Option<Vec<String>>,
}

/// A person's feedback on one answer: what the rate operations answer, and
/// what a message shows of its reader's own rating.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct MessageFeedback {
    /// The rated answer (a chat message's UUID, or a conversation
    /// message's opaque id).
    pub message_id: String,
    pub area: FeedbackArea,
    pub rating: FeedbackRating,
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub comment: Option<String>,
    /// Lowercase, in the order given.
    pub tags: Vec<String>,
    /// When the answer was first rated.
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    /// When the rating was last given.
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// Response of the feedback delete operations.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct FeedbackDeleted {
    pub message_id: String,
    /// Whether there was a rating to remove (false: the answer was not
    /// rated by the caller).
    pub deleted: bool,
}

/// Query of `GET /api/org/feedback/list`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct FeedbackListQuery {
    /// The organization.
    pub org_id: Uuid,
    /// Only this rating.
    pub rating: Option<FeedbackRating>,
    /// Only answers of this model.
    pub model_id: Option<Uuid>,
    /// Only ratings given by this user.
    pub user_id: Option<Uuid>,
    /// Only answers of chats, or of conversations.
    pub area: Option<FeedbackArea>,
    /// Only ratings with this tag (case-insensitive).
    #[schemars(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$"))]
    pub tag: Option<String>,
    /// Only ratings first given at or after this time (RFC 3339).
    pub from: Option<DateTime<Utc>>,
    /// Only ratings first given before this time (RFC 3339).
    pub to: Option<DateTime<Utc>>,
    /// Where the page starts: the `next_cursor` of the page before (opaque;
    /// absent: the newest rating).
    #[schemars(regex(pattern = r"^[A-Za-z0-9_-]{32}$"))]
    pub cursor: Option<String>,
    /// Items per page: 1 to 200, default 50.
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<u32>,
}

/// Query of `GET /api/org/feedback/export`: the list's filters and the
/// format.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct FeedbackExportQuery {
    /// The organization.
    pub org_id: Uuid,
    /// `csv` or `jsonl`.
    pub format: FeedbackExportFormat,
    /// Only this rating.
    pub rating: Option<FeedbackRating>,
    /// Only answers of this model.
    pub model_id: Option<Uuid>,
    /// Only ratings given by this user.
    pub user_id: Option<Uuid>,
    /// Only answers of chats, or of conversations.
    pub area: Option<FeedbackArea>,
    /// Only ratings with this tag (case-insensitive).
    #[schemars(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$"))]
    pub tag: Option<String>,
    /// Only ratings first given at or after this time (RFC 3339).
    pub from: Option<DateTime<Utc>>,
    /// Only ratings first given before this time (RFC 3339).
    pub to: Option<DateTime<Utc>>,
}

/// A model, by id and name.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct FeedbackModel {
    pub id: Uuid,
    pub name: String,
}

/// A knowledge base an answer was given with.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct FeedbackKnowledgeBase {
    pub id: Uuid,
    /// `null` when the knowledge base was deleted since.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub name: Option<String>,
}

/// The person who rated.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct FeedbackRater {
    pub id: Uuid,
    pub email: String,
    /// First and last name.
    pub name: String,
}

/// One rating with the exchange it is about, as the organization's admins
/// see it.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct FeedbackListItem {
    /// The rating's id.
    pub id: Uuid,
    pub area: FeedbackArea,
    /// The rated answer.
    pub message_id: String,
    /// The answer's chat (area `chat`).
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub chat_id: Option<Uuid>,
    /// The answer's conversation (area `conversation`).
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub conversation_id: Option<Uuid>,
    pub rating: FeedbackRating,
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub comment: Option<String>,
    pub tags: Vec<String>,
    /// The model that answered (`null` when unknown).
    #[schemars(with = "crate::schema::Nullable<FeedbackModel>")]
    pub model: Option<FeedbackModel>,
    /// The knowledge bases the answer was given with (a chat answer's
    /// `metadata.knowledge_base_ids`; none for conversations).
    pub knowledge_bases: Vec<FeedbackKnowledgeBase>,
    /// The question: the text of the message the answer replies to (`null`
    /// when it is gone).
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub question: Option<String>,
    /// The answer's text.
    pub answer: String,
    pub user: FeedbackRater,
    #[serde(serialize_with = "crate::time::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// One page of `GET /api/org/feedback/list`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct FeedbackPage {
    /// Newest first (by when each answer was first rated).
    pub items: Vec<FeedbackListItem>,
    /// The `cursor` of the next page; `null` on the last page.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub next_cursor: Option<String>,
}

/// Declares the `200` of `org_feedback_export` (its handler builds a raw
/// response, which dropshot documents as any content): `text/csv` text or
/// `application/jsonl` lines of `FeedbackListItem`.
pub(crate) fn patch_document(doc: &mut openapiv3::OpenAPI) {
    use openapiv3::{MediaType, ReferenceOr, Response, Schema, SchemaKind, StatusCode, Type};
    let Some(ReferenceOr::Item(item)) = doc.paths.paths.get_mut("/api/org/feedback/export") else {
        return;
    };
    let Some(op) = item.get.as_mut() else {
        return;
    };
    let mut response = Response {
        description: "The filtered feedback, streamed: CSV (`format=csv`) or JSON Lines of \
                      `FeedbackListItem` (`format=jsonl`)"
            .to_string(),
        ..Default::default()
    };
    response.content.insert(
        "text/csv".to_string(),
        MediaType {
            schema: Some(ReferenceOr::Item(Schema {
                schema_data: Default::default(),
                schema_kind: SchemaKind::Type(Type::String(Default::default())),
            })),
            ..Default::default()
        },
    );
    response.content.insert(
        "application/jsonl".to_string(),
        MediaType {
            schema: Some(ReferenceOr::Reference {
                reference: "#/components/schemas/FeedbackListItem".to_string(),
            }),
            ..Default::default()
        },
    );
    op.responses.default = None;
    op.responses
        .responses
        .insert(StatusCode::Code(200), ReferenceOr::Item(response));
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_schema_pattern_is_the_constant() {
        // The attribute needs a literal; this keeps the two the same.
        let schema = schemars::schema_for!(super::ChatFeedbackWrite);
        let text = serde_json::to_string(&schema).unwrap();
        assert!(text.contains(&serde_json::to_string(super::TAG_PATTERN).unwrap()));
    }
}
