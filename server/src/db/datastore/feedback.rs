//! Feedback on answers (`message_feedback`, issue #35): a person's rating
//! of an answer of one of their chats or of one of the organization's
//! conversations, and the organization's list of them.
//!
//! Chats are private: a chat answer is found only through a chat of the
//! caller (organization AND user), as in `chat.rs`. Conversations are the
//! organization's: their answers are found by organization. A rating is
//! written by one statement that finds the answer and upserts the row, so
//! an answer deleted meanwhile is simply not found.

use super::Datastore;
use crate::authz::{Admin, Grant, OrgAccess, on, perm};
use crate::db::enums::{
    ChatMessageStatus, ChatRole, FeedbackArea, FeedbackRating, MessageRole, MessageStatus,
};
use crate::db::row::db_row;
use crate::error::Error;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use uuid::Uuid;

db_row! {
    /// A person's feedback on one answer.
    pub struct FeedbackRow {
        pub message_id: Uuid = "coalesce(f.chat_message_id, f.conversation_message_id)",
        pub area: FeedbackArea = "f.area",
        pub rating: FeedbackRating = "f.rating",
        pub comment: Option<String> = "f.comment",
        pub tags: Vec<String> = "f.tags",
        pub created_at: DateTime<Utc> = "f.created_at",
        pub updated_at: DateTime<Utc> = "f.updated_at",
    }
}

db_row! {
    /// A rating with the exchange it is about (the organization's list).
    pub struct FeedbackItemRow {
        pub id: Uuid = "f.id",
        pub area: FeedbackArea = "f.area",
        pub message_id: Uuid = "coalesce(f.chat_message_id, f.conversation_message_id)",
        pub chat_id: Option<Uuid> = "f.chat_id",
        pub conversation_id: Option<Uuid> = "f.conversation_id",
        pub rating: FeedbackRating = "f.rating",
        pub comment: Option<String> = "f.comment",
        pub tags: Vec<String> = "f.tags",
        pub model_id: Option<Uuid> = "f.model_id",
        pub model_name: Option<String> = "md.name",
        pub kb_ids: Vec<Uuid> = "coalesce(kb.ids, '{}')",
        pub kb_names: Vec<Option<String>> = "coalesce(kb.names, '{}')",
        pub question: Option<String> = "coalesce(cq.content, vq.content)",
        pub answer: String = "coalesce(cm.content, vm.content, '')",
        pub user_id: Uuid = "u.id",
        pub user_email: String = "u.email",
        pub user_name: String = "btrim(u.first_name || ' ' || u.last_name)",
        pub created_at: DateTime<Utc> = "f.created_at",
        pub updated_at: DateTime<Utc> = "f.updated_at",
    }
}

/// What a rating says (validated by the app layer).
pub struct NewFeedback<'a> {
    pub rating: FeedbackRating,
    pub comment: Option<&'a str>,
    pub tags: &'a [String],
}

/// The organization's list filters (all optional, combined).
#[derive(Clone, Debug, Default)]
pub struct FeedbackFilter {
    pub rating: Option<FeedbackRating>,
    pub model_id: Option<Uuid>,
    pub user_id: Option<Uuid>,
    pub area: Option<FeedbackArea>,
    /// Lowercase.
    pub tag: Option<String>,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
}

/// A position in the list's order (`created_at DESC, id DESC`): the page
/// starts after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeedbackPosition {
    pub created_at: DateTime<Utc>,
    pub id: Uuid,
}

/// What a rate statement that wrote nothing found about the message.
struct Found {
    is_answer: bool,
    streaming: bool,
}

/// The upsert's columns and conflict action, shared by both areas: the
/// whole feedback is replaced; `created_at` stays.
const UPSERT_TAIL: &str = "DO UPDATE SET rating = EXCLUDED.rating, comment = EXCLUDED.comment, \
         tags = EXCLUDED.tags, model_id = EXCLUDED.model_id, updated_at = now()";

/// The list's rows: the rating, its rater, the model, the answer and its
/// question (a chat answer's parent; for a conversation answer, the user
/// message of the same session stored with it: the nearest earlier one
/// written in the same transaction, else the nearest earlier one), and
/// the knowledge bases named by a chat answer's metadata. Parameters: $1
/// the organization, $2..$8 the filters, $9/$10 the position after which
/// the page starts, $11 the limit, $12 the user role of conversations.
fn page_sql() -> String {
    format!(
        "SELECT {COLUMNS} FROM message_feedback f \
         JOIN users u ON u.id = f.user_id \
         LEFT JOIN models md ON md.id = f.model_id \
         LEFT JOIN chat_messages cm \
             ON cm.id = f.chat_message_id AND cm.organization_id = f.organization_id \
         LEFT JOIN chat_messages cq \
             ON cq.id = cm.parent_message_id AND cq.chat_id = cm.chat_id \
         LEFT JOIN conversation_messages vm \
             ON vm.id = f.conversation_message_id AND vm.organization_id = f.organization_id \
         LEFT JOIN LATERAL ( \
             SELECT near.content FROM ( \
                 SELECT p.content, p.created_at, p.seq FROM conversation_messages p \
                 WHERE p.session_id = vm.session_id AND p.seq < vm.seq AND p.role = $12 \
                 ORDER BY p.seq DESC LIMIT 8) near \
             ORDER BY (near.created_at = vm.created_at) DESC, near.seq DESC LIMIT 1) vq \
             ON true \
         LEFT JOIN LATERAL ( \
             SELECT array_agg(v.id ORDER BY e.n) AS ids, array_agg(k.name ORDER BY e.n) AS names \
             FROM jsonb_array_elements_text(CASE \
                     WHEN jsonb_typeof(cm.metadata -> 'knowledge_base_ids') = 'array' \
                     THEN cm.metadata -> 'knowledge_base_ids' ELSE '[]'::jsonb END) \
                 WITH ORDINALITY AS e(txt, n) \
             CROSS JOIN LATERAL (SELECT CASE WHEN e.txt ~* \
                 '^[0-9a-f]{{8}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{12}}$' \
                 THEN e.txt::uuid END AS id) v \
             LEFT JOIN knowledge_bases k \
                 ON k.id = v.id AND k.organization_id = f.organization_id \
             WHERE v.id IS NOT NULL) kb ON true \
         WHERE f.organization_id = $1 \
           AND ($2::text IS NULL OR f.rating = $2::text) \
           AND ($3::uuid IS NULL OR f.model_id = $3) \
           AND ($4::uuid IS NULL OR f.user_id = $4) \
           AND ($5::text IS NULL OR f.area = $5::text) \
           AND ($6::text IS NULL OR $6::text = ANY(f.tags)) \
           AND ($7::timestamptz IS NULL OR f.created_at >= $7) \
           AND ($8::timestamptz IS NULL OR f.created_at < $8) \
           AND ($9::timestamptz IS NULL OR (f.created_at, f.id) < ($9, $10)) \
         ORDER BY f.created_at DESC, f.id DESC \
         LIMIT $11",
        COLUMNS = FeedbackItemRow::COLUMNS,
    )
}

impl Datastore {
    /// Rates (or rates again) an answer of one of the caller's chats: the
    /// stored feedback. `404` unless `message_id` is a message of one of
    /// the caller's chats, `400 not_an_answer` for a question, `409
    /// answer_streaming` while the answer is generated.
    pub async fn feedback_rate_chat(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        message_id: Uuid,
        new: &NewFeedback<'_>,
    ) -> Result<FeedbackRow, Error> {
        let conn = self.conn().await?;
        let params: super::Params<'_> = &[
            &grant.org_id(),
            &grant.user_id(),
            &message_id,
            &ChatRole::Model,
            &ChatMessageStatus::Streaming,
            &Uuid::new_v4(),
            &FeedbackArea::Chat,
            &new.rating,
            &new.comment,
            &new.tags,
        ];
        let written = conn
            .query_opt(
                &format!(
                    "INSERT INTO message_feedback AS f (id, organization_id, user_id, area, \
                         chat_message_id, chat_id, rating, comment, tags, model_id) \
                     SELECT $6, c.organization_id, c.user_id, $7, m.id, m.chat_id, $8, $9, $10, \
                         m.model_id \
                     FROM chat_messages m JOIN chats c ON c.id = m.chat_id \
                     WHERE c.organization_id = $1 AND c.user_id = $2 AND m.id = $3 \
                       AND m.role = $4 AND m.status <> $5 \
                     ON CONFLICT ON CONSTRAINT message_feedback_chat_key {UPSERT_TAIL} \
                     RETURNING {}",
                    FeedbackRow::COLUMNS
                ),
                params,
            )
            .await?;
        if let Some(row) = written {
            return Ok(FeedbackRow::from_row(&row));
        }
        let found = conn
            .query_opt(
                "SELECT m.role = $4 AS is_answer, m.status = $5 AS streaming \
                 FROM chat_messages m JOIN chats c ON c.id = m.chat_id \
                 WHERE c.organization_id = $1 AND c.user_id = $2 AND m.id = $3",
                &[
                    &grant.org_id(),
                    &grant.user_id(),
                    &message_id,
                    &ChatRole::Model,
                    &ChatMessageStatus::Streaming,
                ],
            )
            .await?
            .map(|r| Found {
                is_answer: r.get("is_answer"),
                streaming: r.get("streaming"),
            });
        Err(not_rated(found))
    }

    /// Rates (or rates again) an answer of one of the organization's
    /// conversations, as [`Self::feedback_rate_chat`] does for chats.
    pub async fn feedback_rate_conversation(
        &self,
        grant: &Grant<on::Org, perm::ConversationWrite>,
        message_id: Uuid,
        new: &NewFeedback<'_>,
    ) -> Result<FeedbackRow, Error> {
        let conn = self.conn().await?;
        let params: super::Params<'_> = &[
            &grant.org_id(),
            &grant.user_id(),
            &message_id,
            &MessageRole::Assistant,
            &MessageStatus::Streaming,
            &Uuid::new_v4(),
            &FeedbackArea::Conversation,
            &new.rating,
            &new.comment,
            &new.tags,
        ];
        let written = conn
            .query_opt(
                &format!(
                    "INSERT INTO message_feedback AS f (id, organization_id, user_id, area, \
                         conversation_message_id, conversation_id, rating, comment, tags, \
                         model_id) \
                     SELECT $6, m.organization_id, $2, $7, m.id, m.conversation_id, $8, $9, $10, \
                         s.model_id \
                     FROM conversation_messages m \
                     JOIN conversation_sessions s ON s.id = m.session_id \
                     WHERE m.organization_id = $1 AND m.id = $3 \
                       AND m.role = $4 AND m.status <> $5 \
                     ON CONFLICT ON CONSTRAINT message_feedback_conversation_key {UPSERT_TAIL} \
                     RETURNING {}",
                    FeedbackRow::COLUMNS
                ),
                params,
            )
            .await?;
        if let Some(row) = written {
            return Ok(FeedbackRow::from_row(&row));
        }
        let found = conn
            .query_opt(
                "SELECT m.role = $3 AS is_answer, m.status = $4 AS streaming \
                 FROM conversation_messages m WHERE m.organization_id = $1 AND m.id = $2",
                &[
                    &grant.org_id(),
                    &message_id,
                    &MessageRole::Assistant,
                    &MessageStatus::Streaming,
                ],
            )
            .await?
            .map(|r| Found {
                is_answer: r.get("is_answer"),
                streaming: r.get("streaming"),
            });
        Err(not_rated(found))
    }

    /// Removes the caller's rating of a message of one of their chats:
    /// whether there was one. `404` unless the message is in one of the
    /// caller's chats.
    pub async fn feedback_delete_chat(
        &self,
        grant: &Grant<on::Org, perm::ChatsWrite>,
        message_id: Uuid,
    ) -> Result<bool, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_one(
                "WITH message AS ( \
                     SELECT m.id FROM chat_messages m JOIN chats c ON c.id = m.chat_id \
                     WHERE c.organization_id = $1 AND c.user_id = $2 AND m.id = $3), \
                 gone AS ( \
                     DELETE FROM message_feedback f USING message \
                     WHERE f.organization_id = $1 AND f.user_id = $2 \
                       AND f.chat_message_id = message.id \
                     RETURNING f.id) \
                 SELECT (SELECT count(*) FROM message) AS found, \
                        (SELECT count(*) FROM gone) AS deleted",
                &[&grant.org_id(), &grant.user_id(), &message_id],
            )
            .await?;
        deleted(&row)
    }

    /// Removes the caller's rating of a message of one of the
    /// organization's conversations: whether there was one. `404` unless
    /// the message is in the organization.
    pub async fn feedback_delete_conversation(
        &self,
        grant: &Grant<on::Org, perm::ConversationWrite>,
        message_id: Uuid,
    ) -> Result<bool, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_one(
                "WITH message AS ( \
                     SELECT m.id FROM conversation_messages m \
                     WHERE m.organization_id = $1 AND m.id = $3), \
                 gone AS ( \
                     DELETE FROM message_feedback f USING message \
                     WHERE f.organization_id = $1 AND f.user_id = $2 \
                       AND f.conversation_message_id = message.id \
                     RETURNING f.id) \
                 SELECT (SELECT count(*) FROM message) AS found, \
                        (SELECT count(*) FROM gone) AS deleted",
                &[&grant.org_id(), &grant.user_id(), &message_id],
            )
            .await?;
        deleted(&row)
    }

    /// The caller's own feedback on those of `ids` (messages of `area`)
    /// they rated, by message id: what a message shows of its reader's
    /// rating. Ids of other users' messages or organizations find nothing
    /// (the rows are the caller's).
    pub async fn feedback_of_messages(
        &self,
        access: &OrgAccess,
        area: FeedbackArea,
        ids: &[Uuid],
    ) -> Result<HashMap<Uuid, FeedbackRow>, Error> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        // By the unique index of the area's message column.
        let column = match area {
            FeedbackArea::Chat => "chat_message_id",
            FeedbackArea::Conversation => "conversation_message_id",
        };
        let conn = self.quick().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {} FROM message_feedback f \
                     WHERE f.{column} = ANY($3) AND f.user_id = $2 AND f.organization_id = $1",
                    FeedbackRow::COLUMNS
                ),
                &[&access.org_id(), &access.user_id(), &ids],
            )
            .await?;
        Ok(rows
            .iter()
            .map(FeedbackRow::from_row)
            .map(|r| (r.message_id, r))
            .collect())
    }

    /// One page of the organization's feedback, newest first, after
    /// `after` (see [`page_sql`]). Each page is one statement on a pooled
    /// connection, returned at once (the export pages through a long
    /// download without holding one).
    pub async fn feedback_page(
        &self,
        grant: &Grant<on::Org, Admin<perm::FeedbackRead>>,
        filter: &FeedbackFilter,
        after: Option<FeedbackPosition>,
        limit: i64,
    ) -> Result<Vec<FeedbackItemRow>, Error> {
        let (after_at, after_id) = match after {
            Some(p) => (Some(p.created_at), p.id),
            None => (None, Uuid::nil()),
        };
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &page_sql(),
                &[
                    &grant.org_id(),
                    &filter.rating,
                    &filter.model_id,
                    &filter.user_id,
                    &filter.area,
                    &filter.tag,
                    &filter.from,
                    &filter.to,
                    &after_at,
                    &after_id,
                    &limit,
                    &MessageRole::User,
                ],
            )
            .await?;
        Ok(rows.iter().map(FeedbackItemRow::from_row).collect())
    }
}

/// Why a rate statement wrote nothing: `404` for a message the caller
/// cannot see, `400 not_an_answer` for a question, `409
/// answer_streaming` for an answer still being generated.
fn not_rated(found: Option<Found>) -> Error {
    match found {
        None => Error::NotFound { what: "message" },
        Some(Found {
            is_answer: false, ..
        }) => Error::invalid(
            "not_an_answer",
            "only answers can be rated: this message is a question",
        ),
        Some(Found {
            streaming: true, ..
        }) => Error::conflict(
            "answer_streaming",
            "the answer is still being generated: rate it once it has ended",
        ),
        // Rated in between by a concurrent request that then lost the
        // row? Not possible (the statement upserts); an answer whose state
        // changed between the two statements: the caller may retry.
        Some(_) => Error::conflict(
            "answer_streaming",
            "the answer changed while it was rated: try again",
        ),
    }
}

/// The delete statements' answer: `404` when the message was not found.
fn deleted(row: &tokio_postgres::Row) -> Result<bool, Error> {
    if row.get::<_, i64>("found") == 0 {
        return Err(Error::NotFound { what: "message" });
    }
    Ok(row.get::<_, i64>("deleted") > 0)
}
