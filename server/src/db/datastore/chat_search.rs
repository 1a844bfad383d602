//! The search across one's chats (issue #35): titles and the text of every
//! message (any branch) of the caller's own chats in one organization.
//!
//! A text matches when its words match (PostgreSQL full text, `simple`
//! configuration, `websearch_to_tsquery`, over `chat_messages.search_vector`
//! for messages) or when it contains the query as typed (`LIKE` on the
//! folded text: parts of words, Japanese and Chinese, emoji). Both sides go
//! through `chat_fold` (V36), which lowers every script whatever the
//! database's locale. See `migrations/V36__chat_search_folders.sql` for the
//! indexes and why each exists.

use super::Datastore;
use crate::authz::OrgAccess;
use crate::db::enums::{ChatRole, ChatStatus};
use crate::db::row::db_row;
use crate::error::Error;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Characters of the excerpt read around a message's first match (the app
/// layer cuts the snippet from it).
pub const EXCERPT_CHARS: i32 = 600;
/// How far before the first match the excerpt starts.
pub const EXCERPT_BEFORE: i32 = 150;

/// Where a page ends: the sort key of its last result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchKey {
    pub title_hit: bool,
    pub rank: i64,
    pub updated_at: DateTime<Utc>,
    pub chat_id: Uuid,
}

/// What to look for, and which page.
pub struct SearchQuery<'a> {
    /// For `websearch_to_tsquery` (empty: no word matching).
    pub words: &'a str,
    /// The query as typed, `LIKE`-escaped (`\`, `%`, `_`).
    pub like: &'a str,
    /// Where the excerpt of a message is centred: the first occurrence of
    /// any of these.
    pub needles: &'a [String],
    pub status: Option<ChatStatus>,
    pub folder_id: Option<Uuid>,
    pub limit: i64,
    /// Results after this key.
    pub after: Option<SearchKey>,
}

db_row! {
    /// A chat found, with its best matching message.
    pub struct SearchRow {
        pub chat_id: Uuid = "p.id",
        pub title: String = "p.title",
        pub status: ChatStatus = "p.status",
        pub pinned_at: Option<DateTime<Utc>> = "p.pinned_at",
        pub folder_id: Option<Uuid> = "p.folder_id",
        pub updated_at: DateTime<Utc> = "p.updated_at",
        pub title_hit: bool = "p.title_hit",
        pub rank: i64 = "p.rank",
        pub message_id: Option<Uuid> = "m.id",
        pub role: Option<ChatRole> = "m.role",
        pub message_created_at: Option<DateTime<Utc>> = "m.created_at",
        /// Up to [`EXCERPT_CHARS`] characters of the message around its
        /// first match.
        pub excerpt: Option<String> = "substr(m.content, w.start, $13)",
        /// Where `excerpt` starts in the message (1-based, characters).
        pub excerpt_start: Option<i32> = "w.start",
        /// The message's length in characters.
        pub content_chars: Option<i32> = "length(m.content)",
    }
}

impl SearchRow {
    /// The key that continues after this row.
    pub fn key(&self) -> SearchKey {
        SearchKey {
            title_hit: self.title_hit,
            rank: self.rank,
            updated_at: self.updated_at,
            chat_id: self.chat_id,
        }
    }
}

/// The caller's chats of the search (the same in both halves).
const MINE: &str = "c.organization_id = $1 AND c.user_id = $2 \
     AND CASE WHEN $3::text IS NULL THEN c.status <> 'DELETED' ELSE c.status = $3::text END \
     AND ($4::uuid IS NULL OR c.folder_id = $4)";

/// The word query and the typed text, folded like the texts.
const WORDS: &str = "websearch_to_tsquery('simple', chat_fold($5))";
const TYPED: &str = "('%' || chat_fold($6) || '%')";

impl Datastore {
    /// One page of the caller's chats matching `query`, best first (see
    /// the module documentation and `chat_search` in the API trait).
    ///
    /// Planned for the values of each call (`plan_cache_mode =
    /// force_custom_plan`, for this transaction): a generic plan cannot see
    /// that a pattern without trigrams (`天気` where pg_trgm ignores
    /// non-ASCII letters, any two-character query) would turn the trigram
    /// index into a scan of every user's messages, nor that a frequent word
    /// is better found through the caller's own messages than through the
    /// full-text index. Planning takes a few milliseconds.
    pub async fn chat_search(
        &self,
        access: &OrgAccess,
        query: &SearchQuery<'_>,
    ) -> Result<Vec<SearchRow>, Error> {
        let sql = format!(
            "WITH best AS ( \
                 SELECT DISTINCT ON (m.chat_id) m.chat_id, m.id, \
                     (chat_fold(m.content) LIKE {TYPED})::int \
                       + ts_rank_cd(m.search_vector, {WORDS}, 32) AS score \
                 FROM chats c JOIN chat_messages m ON m.chat_id = c.id \
                 WHERE {MINE} AND m.organization_id = $1 \
                   AND (m.search_vector @@ {WORDS} OR chat_fold(m.content) LIKE {TYPED}) \
                 ORDER BY m.chat_id, score DESC, m.created_at DESC, m.id DESC \
             ), ranked AS ( \
                 SELECT c.id, c.title, c.status, c.pinned_at, c.folder_id, c.updated_at, \
                     t.title_hit, \
                     (1000000 * CASE WHEN t.title_hit THEN t.score ELSE b.score END)::int8 \
                         AS rank, \
                     b.id AS message_id \
                 FROM chats c LEFT JOIN best b ON b.chat_id = c.id, \
                     LATERAL (SELECT chat_fold(c.title) LIKE {TYPED} AS typed, \
                                     to_tsvector('simple', chat_fold(c.title)) AS words) f, \
                     LATERAL (SELECT f.typed OR f.words @@ {WORDS} AS title_hit, \
                                     f.typed::int + ts_rank_cd(f.words, {WORDS}, 32) AS score) t \
                 WHERE {MINE} AND (t.title_hit OR b.chat_id IS NOT NULL) \
             ), p AS ( \
                 SELECT * FROM ranked \
                 WHERE $9::bool IS NULL \
                    OR (title_hit, rank, updated_at, id) < ($9::bool, $10::int8, $11, $12) \
                 ORDER BY title_hit DESC, rank DESC, updated_at DESC, id DESC \
                 LIMIT $8 \
             ) \
             SELECT {COLUMNS} FROM p \
             LEFT JOIN chat_messages m ON m.id = p.message_id \
             LEFT JOIN LATERAL ( \
                 SELECT greatest(1, coalesce( \
                     (SELECT min(nullif(strpos(x.folded, chat_fold(n)), 0)) \
                      FROM unnest($7::text[]) n), 1) - $14) AS start \
                 FROM (SELECT chat_fold(m.content) AS folded) x \
             ) w ON m.id IS NOT NULL \
             ORDER BY p.title_hit DESC, p.rank DESC, p.updated_at DESC, p.id DESC",
            COLUMNS = SearchRow::COLUMNS,
        );
        let after = query.after;
        let mut conn = self.conn().await?;
        let tx = conn.snapshot().await?;
        let rows = tx
            .query_after(
                "SELECT set_config('plan_cache_mode', 'force_custom_plan', true)",
                &[],
                &sql,
                &[
                    &access.org_id(),
                    &access.user_id(),
                    &query.status,
                    &query.folder_id,
                    &query.words,
                    &query.like,
                    &query.needles,
                    &query.limit,
                    &after.map(|k| k.title_hit),
                    &after.map(|k| k.rank),
                    &after.map(|k| k.updated_at),
                    &after.map(|k| k.chat_id),
                    &EXCERPT_CHARS,
                    &EXCERPT_BEFORE,
                ],
            )
            .await?;
        tx.end_read();
        Ok(rows.iter().map(SearchRow::from_row).collect())
    }
}
