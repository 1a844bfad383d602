//! Types of the search across one's chats (`GET /api/chat/search`).

use crate::chat::{ChatRole, ChatStatus};
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The longest query, in characters.
pub const SEARCH_QUERY_MAX_CHARS: usize = 200;
/// Results per page by default.
pub const SEARCH_DEFAULT_LIMIT: u32 = 20;
/// The most results in one page.
pub const SEARCH_MAX_LIMIT: u32 = 50;
/// The opening highlight marker of `snippet` and `title_highlight`.
pub const HIGHLIGHT_OPEN: &str = "<mark>";
/// The closing highlight marker.
pub const HIGHLIGHT_CLOSE: &str = "</mark>";

/// Query of `GET /api/chat/search`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatSearchQuery {
    /// The organization.
    pub org_id: Uuid,
    /// What to look for: 1 to 200 characters, not blank, without NUL.
    /// Words in any order (`"a phrase"`, `or`, `-word` as in web search
    /// engines), or any part of a text as typed (parts of words, Japanese
    /// or Chinese without spaces, emoji); case-insensitive. (The pattern's
    /// blanks are those the server trims, Unicode's White_Space.)
    #[schemars(
        length(min = 1, max = 200),
        regex(
            pattern = r"^[^\x00]*[^\x00\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\x00]*$"
        )
    )]
    pub q: String,
    /// Results per page: 1 to 50, default 20.
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u32>,
    /// The `next_cursor` of the previous page (same `q`, `status` and
    /// `folder_id`).
    #[serde(default)]
    pub cursor: Option<String>,
    /// Only chats in this state (default: `ACTIVE` and `ARCHIVED`; `DELETED`
    /// chats are searched only when asked for).
    #[serde(default)]
    pub status: Option<ChatStatus>,
    /// Only the chats in this folder of the caller's.
    #[serde(default)]
    pub folder_id: Option<Uuid>,
}

/// One chat found, with its best matching message.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatSearchResult {
    pub chat_id: Uuid,
    /// The chat's title, as stored (plain text).
    pub title: String,
    /// The title as HTML: escaped, matches wrapped in `<mark>`…`</mark>`.
    pub title_highlight: String,
    /// Whether the title matches (such chats come first).
    pub title_match: bool,
    /// The best matching message, `null` when only the title matches.
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub message_id: Option<Uuid>,
    /// Who wrote that message.
    #[schemars(with = "crate::schema::Nullable<ChatRole>")]
    pub role: Option<ChatRole>,
    #[schemars(with = "crate::schema::Nullable<DateTime<Utc>>")]
    #[serde(serialize_with = "crate::time::serialize_opt")]
    pub message_created_at: Option<DateTime<Utc>>,
    /// An excerpt of that message around the match (of the title when no
    /// message matches), at most about 200 characters, as HTML: the text is
    /// escaped (`&amp;`, `&lt;`, `&gt;`, `&quot;`, `&#39;`), matches are
    /// wrapped in `<mark>`…`</mark>`, and nothing else is markup; `…` marks
    /// a cut. Safe to insert as HTML.
    pub snippet: String,
    pub status: ChatStatus,
    pub pinned: bool,
    #[schemars(with = "crate::schema::Nullable<Uuid>")]
    pub folder_id: Option<Uuid>,
    #[serde(serialize_with = "crate::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// A page of search results.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ChatSearchPage {
    /// Best first: chats whose title matches, then the others; within
    /// each, better matches first, then the most recently updated.
    pub results: Vec<ChatSearchResult>,
    /// Pass as `cursor` for the next page; `null` on the last page.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub next_cursor: Option<String>,
}
