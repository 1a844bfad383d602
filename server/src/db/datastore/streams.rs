//! The numbered events of streamed answers and the leases of answers
//! being generated, for both areas that stream resumable answers: chat
//! (`chat_messages`, `chat_stream_events`) and conversations
//! (`conversation_messages`, `conversation_stream_events`). The two pairs of
//! tables have the same shape; [`StreamKind`] picks one.
//!
//! These functions address an answer by its id alone: callers check that
//! the caller may see the answer first (`chat_answer_of_caller`,
//! `conversation_answer`).

use super::Datastore;
use super::chat::STREAM_CHANNEL;
use crate::error::Error;
use serde_json::Value;
use uuid::Uuid;

/// Which area's answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamKind {
    Chat,
    Conversation,
}

impl StreamKind {
    pub const ALL: [StreamKind; 2] = [StreamKind::Chat, StreamKind::Conversation];

    pub fn as_str(self) -> &'static str {
        match self {
            StreamKind::Chat => "chat",
            StreamKind::Conversation => "conversation",
        }
    }

    fn messages(self) -> &'static str {
        match self {
            StreamKind::Chat => "chat_messages",
            StreamKind::Conversation => "conversation_messages",
        }
    }

    fn events(self) -> &'static str {
        match self {
            StreamKind::Chat => "chat_stream_events",
            StreamKind::Conversation => "conversation_stream_events",
        }
    }

    /// What else the sweeper sets on an answer it closes.
    fn swept_extra(self) -> &'static str {
        match self {
            StreamKind::Chat => {
                ", metadata = m.metadata || jsonb_build_object('error_code', $1::text)"
            }
            StreamKind::Conversation => ", updated_at = now()",
        }
    }
}

impl Datastore {
    /// Appends numbered events (`first_seq`, `first_seq + 1`, ...; each
    /// JSON text, stored as `jsonb`) of an answer and announces the last on
    /// [`STREAM_CHANNEL`], in one statement.
    pub async fn stream_events_append(
        &self,
        kind: StreamKind,
        message_id: Uuid,
        first_seq: i32,
        events: &[&str],
    ) -> Result<(), Error> {
        let conn = self.conn().await?;
        let seqs: Vec<i32> = (0..events.len() as i32).map(|i| first_seq + i).collect();
        let last = first_seq + events.len() as i32 - 1;
        conn.query(
            &format!(
                "WITH i AS (INSERT INTO {} (message_id, seq, event) \
                     SELECT $1::uuid, s, e::jsonb FROM unnest($2::int[], $3::text[]) AS t(s, e) \
                     RETURNING 1) \
                 SELECT pg_notify($4::text, $1::uuid::text || ':' || $5::int::text) \
                 FROM (SELECT count(*) FROM i) x",
                kind.events()
            ),
            &[&message_id, &seqs, &events, &STREAM_CHANNEL, &last],
        )
        .await?;
        Ok(())
    }

    /// Appends the numbered events of many answers (`message_ids[i]`,
    /// `seqs[i]`, `events[i]`: JSON text, stored as `jsonb`) and announces the last of each answer on
    /// [`STREAM_CHANNEL`], in one statement: all of them or none (one
    /// answer deleted meanwhile fails the whole statement). Returns how
    /// many rows were stored.
    pub async fn stream_events_append_many(
        &self,
        kind: StreamKind,
        message_ids: &[Uuid],
        seqs: &[i32],
        events: &[&str],
    ) -> Result<usize, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "WITH i AS (INSERT INTO {} (message_id, seq, event) \
                         SELECT m, s, e::jsonb FROM unnest($1::uuid[], $2::int[], $3::text[]) \
                             AS t(m, s, e) \
                         RETURNING message_id, seq) \
                     SELECT count(*)::int AS n, \
                         pg_notify($4::text, message_id::text || ':' || max(seq)::text) \
                     FROM i GROUP BY message_id",
                    kind.events()
                ),
                &[&message_ids, &seqs, &events, &STREAM_CHANNEL],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get::<_, i32>("n") as usize).sum())
    }

    /// The events of an answer after `after`, in order.
    pub async fn stream_events_after(
        &self,
        kind: StreamKind,
        message_id: Uuid,
        after: i32,
    ) -> Result<Vec<(i32, Value)>, Error> {
        let conn = self.conn().await?;
        Ok(conn
            .query(
                &format!(
                    "SELECT seq, event FROM {} WHERE message_id = $1 AND seq > $2 ORDER BY seq",
                    kind.events()
                ),
                &[&message_id, &after],
            )
            .await?
            .iter()
            .map(|r| (r.get("seq"), r.get("event")))
            .collect())
    }

    /// Whether an answer is still `streaming` (`None`: no such answer).
    pub async fn stream_answer_streaming(
        &self,
        kind: StreamKind,
        message_id: Uuid,
    ) -> Result<Option<bool>, Error> {
        let conn = self.conn().await?;
        Ok(conn
            .query_opt(
                &format!(
                    "SELECT status = 'streaming' AS streaming FROM {} WHERE id = $1",
                    kind.messages()
                ),
                &[&message_id],
            )
            .await?
            .map(|r| r.get("streaming")))
    }

    /// Deletes the stream events of answers that ended before
    /// `older_than_secs` seconds ago; returns how many.
    pub async fn stream_events_expire(
        &self,
        kind: StreamKind,
        older_than_secs: i64,
    ) -> Result<u64, Error> {
        let conn = self.conn().await?;
        Ok(conn
            .execute(
                &format!(
                    "DELETE FROM {} e USING {} m \
                     WHERE e.message_id = m.id AND m.status <> 'streaming' \
                       AND e.created_at < now() - make_interval(secs => $1::bigint::double precision)",
                    kind.events(),
                    kind.messages()
                ),
                &[&older_than_secs],
            )
            .await?)
    }

    /// Renews the leases of the given answers (this instance generates
    /// them); returns those still `streaming` (the others ended, were
    /// deleted, or were closed by a sweeper).
    pub async fn stream_heartbeat(
        &self,
        kind: StreamKind,
        ids: &[Uuid],
    ) -> Result<Vec<Uuid>, Error> {
        let conn = self.conn().await?;
        Ok(conn
            .query(
                &format!(
                    "UPDATE {} SET heartbeat_at = now() \
                     WHERE id = ANY($1) AND status = 'streaming' RETURNING id",
                    kind.messages()
                ),
                &[&ids],
            )
            .await?
            .iter()
            .map(|r| r.get("id"))
            .collect())
    }

    /// Closes at most `limit` answers still `streaming` whose heartbeat is
    /// older than `lease_secs` (their instance died): see
    /// [`Datastore::stream_close`]. Rows another sweeper holds are skipped
    /// (`FOR UPDATE SKIP LOCKED`). Returns the closed answers' ids.
    pub async fn stream_sweep(
        &self,
        kind: StreamKind,
        lease_secs: i64,
        limit: i64,
        error_code: &str,
        event: &Value,
    ) -> Result<Vec<Uuid>, Error> {
        self.stream_close(
            kind,
            "heartbeat_at < now() - make_interval(secs => $4::bigint::double precision) \
             ORDER BY heartbeat_at LIMIT $5 FOR UPDATE SKIP LOCKED",
            &[&error_code, event, &STREAM_CHANNEL, &lease_secs, &limit],
        )
        .await
    }

    /// Closes these answers if they are still `streaming` (this instance's
    /// own, at the end of a shutdown's grace period): see
    /// [`Datastore::stream_close`]. Returns the closed answers' ids.
    pub async fn stream_interrupt(
        &self,
        kind: StreamKind,
        ids: &[Uuid],
        error_code: &str,
        event: &Value,
    ) -> Result<Vec<Uuid>, Error> {
        self.stream_close(
            kind,
            "id = ANY($4) FOR UPDATE",
            &[&error_code, event, &STREAM_CHANNEL, &ids],
        )
        .await
    }

    /// Closes the `streaming` answers `which` selects (a condition and
    /// locking clause over `$4`, `$5`…): status `failed` with `error_code`
    /// (`$1`), text kept, and `event` (`$2`) appended as their next (last)
    /// stream event and announced on `$3`, in one statement. The text kept
    /// is the stored `content` events joined, when they hold more than the
    /// answer's last periodic save: every piece a client received is
    /// stored as an event before it is sent, so none of it is lost.
    async fn stream_close(
        &self,
        kind: StreamKind,
        which: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<Uuid>, Error> {
        let conn = self.conn().await?;
        let messages = kind.messages();
        let events = kind.events();
        let extra = kind.swept_extra();
        Ok(conn
            .query(
                &format!(
                    "WITH dead AS ( \
                         SELECT id FROM {messages} WHERE status = 'streaming' AND {which}), \
                     rebuilt AS ( \
                         SELECT d.id, string_agg(e.event->>'content', '' ORDER BY e.seq) AS text \
                         FROM dead d JOIN {events} e \
                           ON e.message_id = d.id AND e.event->>'type' = 'content' \
                         GROUP BY d.id), \
                     swept AS ( \
                         UPDATE {messages} m SET status = 'failed', error_code = $1, \
                             content = CASE WHEN length(r.text) > length(m.content) \
                                            THEN r.text ELSE m.content END {extra} \
                         FROM dead LEFT JOIN rebuilt r ON r.id = dead.id \
                         WHERE m.id = dead.id RETURNING m.id), \
                     added AS ( \
                         INSERT INTO {events} (message_id, seq, event) \
                         SELECT s.id, COALESCE((SELECT max(e.seq) FROM {events} e \
                                                WHERE e.message_id = s.id), 0) + 1, $2::jsonb \
                         FROM swept s RETURNING message_id, seq) \
                     SELECT message_id, pg_notify($3::text, message_id::text || ':' || seq::text) \
                     FROM added"
                ),
                params,
            )
            .await?
            .iter()
            .map(|r| r.get("message_id"))
            .collect())
    }
}
