//! Conversations, their model sessions and their messages. Every query is
//! filtered by organization.

use super::Datastore;
use super::organizations::Pending;
use crate::authz::{Grant, OrgAccess, on, perm};
use crate::db::enums::{MessageRole, MessageStatus, SessionStatus};
use crate::db::row::db_row;
use crate::error::Error;
use chrono::{DateTime, Utc};
use uuid::Uuid;

pub struct ConversationRow {
    pub id: Uuid,
    pub title: String,
    pub is_archived: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl ConversationRow {
    fn from_row(row: &tokio_postgres::Row) -> ConversationRow {
        ConversationRow {
            id: row.get("id"),
            title: row.get("title"),
            is_archived: row.get("is_archived"),
            created_at: row.get("created_at"),
            updated_at: row.get("updated_at"),
        }
    }
}

db_row! {
    pub struct SessionRow {
        pub id: Uuid = "s.id",
        pub conversation_id: Uuid = "s.conversation_id",
        pub model_id: Uuid = "s.model_id",
        pub model_name: String = "m.name",
        pub model_provider: String = "m.provider",
        pub status: SessionStatus = "s.status",
        pub created_at: DateTime<Utc> = "s.created_at",
        pub updated_at: DateTime<Utc> = "s.updated_at",
    }
}

const SESSION_COLUMNS: &str = SessionRow::COLUMNS;

pub struct MessageRow {
    pub id: Uuid,
    pub session_id: Uuid,
    pub role: MessageRole,
    pub content: String,
    pub status: MessageStatus,
    pub created_at: DateTime<Utc>,
    /// An answer's reasoning (not read with a history: never sent back).
    pub reasoning: Option<String>,
}

impl MessageRow {
    fn from_row(row: &tokio_postgres::Row) -> MessageRow {
        MessageRow {
            id: row.get("id"),
            session_id: row.get("session_id"),
            role: row.get("role"),
            content: row.get("content"),
            status: row.get("status"),
            created_at: row.get("created_at"),
            reasoning: row.get("reasoning"),
        }
    }
}

/// A finished (or cut short) assistant answer to store.
pub struct NewAnswer<'a> {
    pub id: Uuid,
    pub content: std::borrow::Cow<'a, str>,
    /// `complete`, `cancelled` or `failed`.
    pub status: MessageStatus,
    pub error_code: Option<&'a str>,
    pub input_tokens: Option<i32>,
    pub output_tokens: Option<i32>,
    pub cached_tokens: Option<i32>,
    /// The model's reasoning, kept apart from the content.
    pub reasoning: Option<&'a str>,
}

/// The conversations of an organization, most recently updated first.
/// Public for the API benchmark (pgbench runs the same SQL).
pub const CONVERSATION_LIST: &str = "SELECT id, title, is_archived, created_at, updated_at \
     FROM conversations WHERE organization_id = $1 ORDER BY updated_at DESC, id \
     LIMIT $2 OFFSET $3";

/// How much of a history the database reads: the newest rows first, at
/// most `rows`, and only while their estimated tokens (summed newest
/// first, see [`ROW_TOKENS`]) stay within `tokens`; the newest row always.
/// An answer's start so reads a bounded part of a long history (see
/// `runtime::context`, which cuts it exactly).
#[derive(Clone, Copy, Debug)]
pub struct HistoryBound {
    pub rows: i64,
    pub tokens: i64,
}

/// A history row's estimated tokens, in SQL: `runtime::context`'s estimate
/// (UTF-8 bytes / 3 rounded up, plus 4 for the message); an empty answer
/// (failed before its first piece; never sent) counts nothing.
/// `octet_length` reads a long text's stored length, not the text.
pub(crate) const ROW_TOKENS: &str =
    "CASE WHEN content = '' THEN 0 ELSE (octet_length(content) + 2) / 3 + 4 END";

// HISTORY_ORDER: a history is read newest first by its own index,
// (chat_id, seq) or (session_id, seq), never by the table-wide unique
// index on seq. Ordered by `seq` alone (`chat_id = $2` makes the
// chat_id key redundant), the planner may scan the seq index backward
// and filter: every newer message of every chat of the table until
// enough of this one are found (`cargo xtask bench history` with
// `HISTORY_EXPLAIN=1`: 71,516 rows filtered out, 16 ms, where the
// chat's index reads 201 rows in 0.4 ms). `= ANY(ARRAY[$2])` keeps the
// key in the order, which only the chat's or session's index gives.

/// Rows a conversation page may read (offset plus limit) and still run on
/// a shared connection (see [`crate::db::pipeline`]).
const QUICK_PAGE_ROWS: i64 = 200;

impl Datastore {
    pub async fn conversation_create(
        &self,
        grant: &Grant<on::Org, perm::ConversationWrite>,
        user_id: Uuid,
        title: &str,
        is_archived: bool,
    ) -> Result<ConversationRow, Error> {
        let org_id = grant.org_id();
        let conn = self.conn().await?;
        let row = conn
            .query_one(
                "INSERT INTO conversations (id, organization_id, created_by, title, is_archived) \
                 VALUES ($1, $2, $3, $4, $5) \
                 RETURNING id, title, is_archived, created_at, updated_at",
                &[&Uuid::new_v4(), &org_id, &user_id, &title, &is_archived],
            )
            .await?;
        Ok(ConversationRow::from_row(&row))
    }

    /// Most recently updated first, ties by id. Read with the
    /// authorization statement (see [`Pending`]): a page near the start
    /// goes out with it, on its connection.
    pub async fn conversation_list(
        &self,
        on: &Pending<'_>,
        page: super::Page,
    ) -> Result<Vec<ConversationRow>, Error> {
        let org_id = on.org_id();
        let params: super::Params = &[&org_id, &page.limit, &page.offset];
        // A page near the start (the sidebar's refresh, the hottest read
        // of a chat client) is an index range of a few hundred entries at
        // most, short enough for the shared connections; a deep page
        // scans its offset and takes a pooled connection.
        let rows = if page.offset + page.limit <= QUICK_PAGE_ROWS {
            on.query(CONVERSATION_LIST, params).await?
        } else {
            self.conn().await?.query(CONVERSATION_LIST, params).await?
        };
        Ok(rows.iter().map(ConversationRow::from_row).collect())
    }

    /// `404` unless the conversation is in the organization.
    pub async fn conversation_get(
        &self,
        access: &OrgAccess,
        conversation_id: Uuid,
    ) -> Result<ConversationRow, Error> {
        let org_id = access.org_id();
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "SELECT id, title, is_archived, created_at, updated_at FROM conversations \
                 WHERE organization_id = $1 AND id = $2",
                &[&org_id, &conversation_id],
            )
            .await?
            .ok_or(Error::NotFound {
                what: "conversation",
            })?;
        Ok(ConversationRow::from_row(&row))
    }

    /// Creates an `active` session and touches the conversation, in one
    /// transaction. `404` unless the conversation is in the organization.
    pub async fn session_create(
        &self,
        grant: &Grant<on::Org, perm::ConversationWrite>,
        conversation_id: Uuid,
        model_id: Uuid,
        user_id: Uuid,
    ) -> Result<SessionRow, Error> {
        let org_id = grant.org_id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let touched = tx
            .execute(
                "UPDATE conversations SET updated_at = now() \
                 WHERE organization_id = $1 AND id = $2",
                &[&org_id, &conversation_id],
            )
            .await?;
        if touched == 0 {
            return Err(Error::NotFound {
                what: "conversation",
            });
        }
        let id = Uuid::new_v4();
        tx.execute(
            "INSERT INTO conversation_sessions \
                (id, organization_id, conversation_id, model_id, created_by) \
             VALUES ($1, $2, $3, $4, $5)",
            &[&id, &org_id, &conversation_id, &model_id, &user_id],
        )
        .await?;
        let row = tx
            .query_one(
                &format!(
                    "SELECT {SESSION_COLUMNS} FROM conversation_sessions s \
                     JOIN models m ON m.id = s.model_id \
                     WHERE s.organization_id = $1 AND s.id = $2"
                ),
                &[&org_id, &id],
            )
            .await?;
        tx.commit().await?;
        Ok(SessionRow::from_row(&row))
    }

    /// The conversation's sessions, oldest first.
    pub async fn sessions_of(
        &self,
        access: &OrgAccess,
        conversation_id: Uuid,
    ) -> Result<Vec<SessionRow>, Error> {
        let org_id = access.org_id();
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {SESSION_COLUMNS} FROM conversation_sessions s \
                     JOIN models m ON m.id = s.model_id \
                     WHERE s.organization_id = $1 AND s.conversation_id = $2 \
                     ORDER BY s.created_at, s.id"
                ),
                &[&org_id, &conversation_id],
            )
            .await?;
        Ok(rows.iter().map(SessionRow::from_row).collect())
    }

    /// `404` unless the session is in the organization.
    pub async fn session_get(
        &self,
        access: &OrgAccess,
        session_id: Uuid,
    ) -> Result<SessionRow, Error> {
        let org_id = access.org_id();
        // A point lookup: on a shared pipelined connection, not a pooled one.
        let conn = self.quick().await?;
        let row = conn
            .query_opt(
                &format!(
                    "SELECT {SESSION_COLUMNS} FROM conversation_sessions s \
                     JOIN models m ON m.id = s.model_id \
                     WHERE s.organization_id = $1 AND s.id = $2"
                ),
                &[&org_id, &session_id],
            )
            .await?
            .ok_or(Error::NotFound { what: "session" })?;
        Ok(SessionRow::from_row(&row))
    }

    /// Stores the caller's message in the session and touches the session
    /// and its conversation, in one transaction. Returns the session's history
    /// up to and including the new message, oldest first: its most recent
    /// part within `bound` (the new message counts in it).
    ///
    /// The assistant's answer is inserted in the same transaction, empty and
    /// `streaming`, with the id `answer_id` (see [`Self::message_save_partial`]
    /// and [`Self::message_store_answer`]).
    ///
    /// The message counts towards the organization's `daily_chat_limit`
    /// (per UTC day), in the same transaction: at the limit nothing is
    /// written and the error is `429 daily_chat_limit_exceeded`.
    ///
    /// Three round trips on the pooled connection: `BEGIN`, the six
    /// statements sent together, `COMMIT` (none needs an earlier one's
    /// answer; the limit is judged from the count's rows and a refusal
    /// rolls everything back).
    pub async fn message_append_user(
        &self,
        grant: &Grant<on::Org, perm::ConversationWrite>,
        session: &SessionRow,
        content: &str,
        daily_limit: u32,
        answer_id: Uuid,
        bound: HistoryBound,
    ) -> Result<Vec<MessageRow>, Error> {
        let org_id = grant.org_id();
        let user_id = grant.user_id();
        let history_sql = format!(
            "SELECT h.id, h.session_id, h.role, h.content, h.status, h.created_at, \
                 NULL::text AS reasoning FROM ( \
                 SELECT id, session_id, role, content, status, created_at, seq, \
                     sum({ROW_TOKENS}) OVER w AS running, row_number() OVER w AS n \
                 FROM conversation_messages \
                 WHERE organization_id = $1 AND session_id = ANY(ARRAY[$2::uuid]) \
                   AND seq <= (SELECT seq FROM conversation_messages \
                               WHERE organization_id = $1 AND id = $3) \
                 WINDOW w AS (ORDER BY session_id DESC, seq DESC) \
                 ORDER BY session_id DESC, seq DESC LIMIT $4) h \
             WHERE h.n = 1 OR h.running <= $5 \
             ORDER BY h.seq"
        );
        let limit = daily_limit_param(daily_limit);
        let message_id = Uuid::new_v4();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let [counted, _, _, _, _, history] = tx
            .pipeline([
                (COUNT_DAILY_MESSAGE, &[&org_id, &limit]),
                (
                    "INSERT INTO conversation_messages \
                        (id, organization_id, conversation_id, session_id, role, content, \
                         created_by) \
                     VALUES ($1, $2, $3, $4, $7, $5, $6)",
                    &[
                        &message_id,
                        &org_id,
                        &session.conversation_id,
                        &session.id,
                        &content,
                        &user_id,
                        &MessageRole::User,
                    ],
                ),
                (
                    "INSERT INTO conversation_messages \
                        (id, organization_id, conversation_id, session_id, role, content, status) \
                     VALUES ($1, $2, $3, $4, $6, '', $5)",
                    &[
                        &answer_id,
                        &org_id,
                        &session.conversation_id,
                        &session.id,
                        &MessageStatus::Streaming,
                        &MessageRole::Assistant,
                    ],
                ),
                (TOUCH_SESSION, &[&org_id, &session.id]),
                (TOUCH_CONVERSATION, &[&org_id, &session.conversation_id]),
                (
                    history_sql.as_str(),
                    &[
                        &org_id,
                        &session.id,
                        &message_id,
                        &bound.rows,
                        &bound.tokens,
                    ],
                ),
            ])
            .await?;
        daily_message_counted(&counted, daily_limit)?;
        tx.commit().await?;
        Ok(history.iter().map(MessageRow::from_row).collect())
    }

    /// Saves the text of an answer that is still streaming (no-op once it
    /// is finished).
    pub async fn message_save_partial(
        &self,
        grant: &Grant<on::Org, perm::ConversationWrite>,
        answer_id: Uuid,
        content: &str,
    ) -> Result<(), Error> {
        let org_id = grant.org_id();
        let conn = self.conn().await?;
        conn.execute(
            "UPDATE conversation_messages SET content = $3, updated_at = now() \
             WHERE organization_id = $1 AND id = $2 AND status = $4",
            &[&org_id, &answer_id, &content, &MessageStatus::Streaming],
        )
        .await?;
        Ok(())
    }

    /// Stores the finished (or cut short) answer over its `streaming` row
    /// and touches the session and conversation. Idempotent, so it may be
    /// retried. An answer no longer `streaming` is left as it is (a sweeper
    /// closed it: see `stream_sweep`).
    pub async fn message_store_answer(
        &self,
        grant: &Grant<on::Org, perm::ConversationWrite>,
        session: &SessionRow,
        answer: &NewAnswer<'_>,
    ) -> Result<(), Error> {
        let org_id = grant.org_id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.execute(
            "UPDATE conversation_messages SET content = $3, status = $4, error_code = $5, \
                 input_tokens = $6, output_tokens = $7, cached_tokens = $8, updated_at = now(), \
                 reasoning = $10 \
             WHERE organization_id = $1 AND id = $2 AND status = $9",
            &[
                &org_id,
                &answer.id,
                &answer.content.as_ref(),
                &answer.status,
                &answer.error_code,
                &answer.input_tokens,
                &answer.output_tokens,
                &answer.cached_tokens,
                &MessageStatus::Streaming,
                &answer.reasoning,
            ],
        )
        .await?;
        if answer.status == MessageStatus::Complete {
            let event = serde_json::json!({
                "area": "conversation",
                "conversation_id": session.conversation_id,
                "session_id": session.id,
                "message_id": answer.id,
                "user_id": grant.user_id(),
                "model": session.model_name,
                "usage": {
                    "input_tokens": answer.input_tokens,
                    "output_tokens": answer.output_tokens,
                    "cached_tokens": answer.cached_tokens,
                },
            });
            // Sent with the touches (one round trip); queued once per
            // answer (see `webhook_outbox::enqueue`).
            let key = format!("answer:{}", answer.id);
            let traceparent = crate::telemetry::current_traceparent();
            tx.pipeline([
                (TOUCH_SESSION, &[&org_id, &session.id]),
                (TOUCH_CONVERSATION, &[&org_id, &session.conversation_id]),
                (
                    super::webhook_outbox::ENQUEUE_SQL,
                    &[&org_id, &"answer.completed", &event, &key, &traceparent],
                ),
            ])
            .await?;
        } else {
            touch(&tx, org_id, session).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The state of an assistant message (an answer) of the organization's
    /// conversations; `404` for any other id.
    pub async fn conversation_answer(
        &self,
        access: &OrgAccess,
        message_id: Uuid,
    ) -> Result<MessageStatus, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "SELECT status FROM conversation_messages \
                 WHERE organization_id = $1 AND id = $2 AND role = $3",
                &[&access.org_id(), &message_id, &MessageRole::Assistant],
            )
            .await?
            .ok_or(Error::NotFound { what: "message" })?;
        Ok(row.get("status"))
    }

    /// A page of the conversation's messages (all sessions, insertion
    /// order) and the total count.
    pub async fn messages_page(
        &self,
        access: &OrgAccess,
        conversation_id: Uuid,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<MessageRow>, i64), Error> {
        let org_id = access.org_id();
        let conn = self.conn().await?;
        let rows = conn
            .query(
                "SELECT id, session_id, role, content, status, created_at, reasoning \
                 FROM conversation_messages \
                 WHERE organization_id = $1 AND conversation_id = $2 \
                 ORDER BY seq LIMIT $3 OFFSET $4",
                &[&org_id, &conversation_id, &limit, &offset],
            )
            .await?;
        let total: i64 = conn
            .query_one(
                "SELECT count(*) AS total FROM conversation_messages \
                 WHERE organization_id = $1 AND conversation_id = $2",
                &[&org_id, &conversation_id],
            )
            .await?
            .get("total");
        Ok((rows.iter().map(MessageRow::from_row).collect(), total))
    }
}

async fn touch(tx: &super::Tx<'_>, org_id: Uuid, session: &SessionRow) -> Result<(), Error> {
    tx.pipeline([
        (TOUCH_SESSION, &[&org_id, &session.id]),
        (TOUCH_CONVERSATION, &[&org_id, &session.conversation_id]),
    ])
    .await?;
    Ok(())
}

const TOUCH_SESSION: &str = "UPDATE conversation_sessions SET updated_at = now() \
                             WHERE organization_id = $1 AND id = $2";
const TOUCH_CONVERSATION: &str =
    "UPDATE conversations SET updated_at = now() WHERE organization_id = $1 AND id = $2";

/// Counts one message towards the organization's `daily_chat_limit` (per
/// UTC day) inside the caller's transaction; params: the organization and
/// [`daily_limit_param`]. At the limit it counts nothing and returns no
/// row: see [`daily_message_counted`]. Shared by conversations and chats.
pub(crate) const COUNT_DAILY_MESSAGE: &str = "INSERT INTO organization_daily_usage (organization_id, day, chat_messages) \
     SELECT $1, (now() AT TIME ZONE 'UTC')::date, 1 WHERE $2 > 0 \
     ON CONFLICT (organization_id, day) DO UPDATE \
         SET chat_messages = organization_daily_usage.chat_messages + 1 \
         WHERE organization_daily_usage.chat_messages < $2 \
     RETURNING chat_messages";

/// The limit as [`COUNT_DAILY_MESSAGE`]'s second parameter.
pub(crate) fn daily_limit_param(daily_limit: u32) -> i32 {
    i32::try_from(daily_limit).unwrap_or(i32::MAX)
}

/// [`COUNT_DAILY_MESSAGE`]'s rows judged: none means the limit is reached,
/// `429 daily_chat_limit_exceeded` with the seconds until the next UTC day
/// (the caller returns it, which rolls its transaction back).
pub(crate) fn daily_message_counted(
    rows: &[tokio_postgres::Row],
    daily_limit: u32,
) -> Result<(), Error> {
    if rows.is_empty() {
        let now = chrono::Utc::now();
        let midnight = (now.date_naive() + chrono::Days::new(1))
            .and_hms_opt(0, 0, 0)
            .map(|t| t.and_utc())
            .unwrap_or(now);
        let retry_after_secs = (midnight - now).num_seconds().max(1) as u64;
        return Err(Error::TooManyRequests {
            code: "daily_chat_limit_exceeded",
            message: format!(
                "the organization's daily chat limit ({daily_limit} messages) is reached"
            ),
            retry_after_secs,
        });
    }
    Ok(())
}
