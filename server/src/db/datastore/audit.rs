//! The audit log (`audit_events`, issue #36; see `migrations/V38__audit_log.sql`
//! for the table, its partitions, the append-only trigger and the chain).
//!
//! [`record`] is the one place an audit row is written: inside the
//! transaction of the change it records, as that transaction's last
//! statement (so the chain head's row lock, which serializes the writers
//! of one organization, is held only until the commit that follows). A
//! change rolled back takes its audit row with it; a committed change has
//! one. Events that are not part of a change (a refused authorization, a
//! failed login) are written by [`Datastore::audit_record`] in a
//! transaction of their own.
//!
//! Each row's hash is HMAC-SHA256, under the chain key of the server's
//! key file ([`crate::audit::AuditKeys`], never in the database), of the
//! previous row's hash, the row's `seq` (8 bytes, big-endian) and
//! [`canonical`] (the row's other columns, length-prefixed). The server
//! locks the chain's head, computes the hash and advances the head with
//! the row's insert. Rows before the chain's `keyed_from` were written by
//! an earlier version with plain SHA-256 ([`chain_hash`]; migration
//! `V46`). [`Datastore::audit_verify_chain`] walks every row of a chain,
//! past its head too, recomputes each hash, and compares the chain with
//! the newest signed checkpoint published outside the database
//! (`app::audit`).

use super::{Datastore, Tx};
use crate::audit::{Checkpoint, Event, Origin};
use crate::error::Error;
use chrono::{DateTime, Utc};
use sha2::Digest;
use uuid::Uuid;

/// The chain of system-level events (no organization).
pub const SYSTEM_CHAIN: Uuid = Uuid::nil();

/// Months of partitions created ahead of the current one.
pub const PARTITIONS_AHEAD: i32 = 3;

/// Rows read per statement by verification.
const VERIFY_PAGE: i64 = 1000;

/// A page of a chain's rows from a seq on, in order (every row: past the
/// head too).
const VERIFY_SQL: &str = "SELECT id, occurred_at, chain_id, seq, prev_hash, hash, \
     organization_id, actor_kind, actor_id, actor_user_id, action, target_kind, target_id, \
     outcome, address, user_agent, request_id, details FROM audit_events \
     WHERE chain_id = $1 AND seq >= $2 ORDER BY seq LIMIT $3";

/// The advisory lock of the maintenance (partitions ahead, retention): one
/// instance at a time does it; the others skip that round.
const MAINTENANCE_LOCK: i64 = 0x6175_6469_745f_6d61; // "audit_ma"

const ENSURE_HEAD: &str =
    "INSERT INTO audit_chain_heads (chain_id) VALUES ($1) ON CONFLICT DO NOTHING";

/// The chain's head, locked until the recording transaction ends (the
/// writers of one chain take turns).
const LOCK_HEAD: &str = "SELECT seq, hash FROM audit_chain_heads WHERE chain_id = $1 FOR UPDATE";

/// Advances the locked head to `$2` with the hash `$16` and inserts the
/// row it hashes, in one statement.
const RECORD: &str = "WITH head AS ( \
        UPDATE audit_chain_heads \
           SET seq = $2::bigint, prev_hash = hash, hash = $16 \
         WHERE chain_id = $1 AND seq = $2::bigint - 1 \
     RETURNING seq, prev_hash, hash) \
     INSERT INTO audit_events (occurred_at, chain_id, seq, prev_hash, hash, organization_id, \
         actor_kind, actor_id, actor_user_id, action, target_kind, target_id, outcome, \
         address, user_agent, request_id, details) \
     SELECT $3, $1, seq, prev_hash, hash, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15 \
       FROM head RETURNING id, seq, encode(hash, 'hex') AS hash";

/// The columns an event is stored with (what [`canonical`] encodes).
#[derive(Clone, Debug, PartialEq)]
pub struct Stored<'a> {
    pub occurred_at: DateTime<Utc>,
    pub chain_id: Uuid,
    pub organization_id: Option<Uuid>,
    pub actor_kind: &'a str,
    pub actor_id: Option<Uuid>,
    pub actor_user_id: Option<Uuid>,
    pub action: &'a str,
    pub target_kind: Option<&'a str>,
    pub target_id: Option<&'a str>,
    pub outcome: &'a str,
    pub address: Option<&'a str>,
    pub user_agent: Option<&'a str>,
    pub request_id: Option<&'a str>,
    pub details: &'a serde_json::Value,
}

/// The canonical encoding of a row's columns (all but `id`, `seq` and the
/// hashes): a version tag, then each column in a fixed order as `0x00`
/// (NULL) or `0x01`, a 4-byte big-endian length and its bytes. Times are
/// microseconds since the epoch (what PostgreSQL keeps), uuids their 16
/// bytes, `details` JSON with the keys of every object sorted, so that
/// what the database returns (jsonb reorders keys) encodes the same.
pub fn canonical(row: &Stored<'_>) -> Vec<u8> {
    fn field(out: &mut Vec<u8>, value: Option<&[u8]>) {
        match value {
            None => out.push(0),
            Some(bytes) => {
                out.push(1);
                out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
                out.extend_from_slice(bytes);
            }
        }
    }
    let mut out = b"workspace-audit-v1".to_vec();
    field(
        &mut out,
        Some(&row.occurred_at.timestamp_micros().to_be_bytes()),
    );
    field(&mut out, Some(row.chain_id.as_bytes()));
    field(
        &mut out,
        row.organization_id.as_ref().map(|u| &u.as_bytes()[..]),
    );
    field(&mut out, Some(row.actor_kind.as_bytes()));
    field(&mut out, row.actor_id.as_ref().map(|u| &u.as_bytes()[..]));
    field(
        &mut out,
        row.actor_user_id.as_ref().map(|u| &u.as_bytes()[..]),
    );
    field(&mut out, Some(row.action.as_bytes()));
    field(&mut out, row.target_kind.map(str::as_bytes));
    field(&mut out, row.target_id.map(str::as_bytes));
    field(&mut out, Some(row.outcome.as_bytes()));
    field(&mut out, row.address.map(str::as_bytes));
    field(&mut out, row.user_agent.map(str::as_bytes));
    field(&mut out, row.request_id.map(str::as_bytes));
    field(&mut out, Some(canonical_json(row.details).as_bytes()));
    out
}

/// JSON with every object's keys sorted (recursively), no whitespace.
fn canonical_json(value: &serde_json::Value) -> String {
    fn sorted(value: &serde_json::Value) -> serde_json::Value {
        match value {
            serde_json::Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                // serde_json's map keeps insertion order only with the
                // `preserve_order` feature; sorted either way.
                serde_json::Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&map[k])))
                        .collect(),
                )
            }
            serde_json::Value::Array(items) => {
                serde_json::Value::Array(items.iter().map(sorted).collect())
            }
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

/// The hash of a row written before the chain was keyed: SHA-256 of
/// `prev_hash`, `seq` and the payload (what earlier versions computed in
/// the database).
pub fn chain_hash(prev_hash: &[u8], seq: i64, payload: &[u8]) -> Vec<u8> {
    let mut h = sha2::Sha256::new();
    h.update(prev_hash);
    h.update(seq.to_be_bytes());
    h.update(payload);
    h.finalize().to_vec()
}

/// Records `event` by `origin` in the transaction `tx`: the one place an
/// audit row is written. Call it as the transaction's last statement
/// before `commit` (it locks the chain's head until the transaction
/// ends).
pub(crate) async fn record(tx: &Tx<'_>, origin: &Origin, event: &Event) -> Result<(), Error> {
    let chain_id = event.org_id.unwrap_or(SYSTEM_CHAIN);
    // PostgreSQL keeps microseconds: hash what is stored.
    let now = Utc::now();
    let occurred_at = DateTime::from_timestamp_micros(now.timestamp_micros()).unwrap_or(now);
    let stored = Stored {
        occurred_at,
        chain_id,
        organization_id: event.org_id,
        actor_kind: origin.actor.kind.as_str(),
        actor_id: origin.actor.id,
        actor_user_id: origin.actor.user_id,
        action: event.action,
        target_kind: event.target_kind,
        target_id: event.target_id.as_deref(),
        outcome: event.outcome.as_str(),
        address: origin.address.as_deref(),
        user_agent: origin.user_agent.as_deref(),
        request_id: origin.request_id.as_deref(),
        details: &event.details,
    };
    let payload = canonical(&stored);
    let keys =
        crate::audit::keys().ok_or_else(|| Error::internal("the audit key is not loaded"))?;
    let [_, head] = tx
        .pipeline([(ENSURE_HEAD, &[&chain_id]), (LOCK_HEAD, &[&chain_id])])
        .await?;
    let [head] = head.as_slice() else {
        return Err(Error::internal("the audit chain's head is missing"));
    };
    let seq = head.get::<_, i64>("seq") + 1;
    let hash = keys.chain_mac(head.get::<_, &[u8]>("hash"), seq, &payload);
    let inserted = tx
        .query(
            RECORD,
            &[
                &chain_id,
                &seq,
                &stored.occurred_at,
                &stored.organization_id,
                &stored.actor_kind,
                &stored.actor_id,
                &stored.actor_user_id,
                &stored.action,
                &stored.target_kind,
                &stored.target_id,
                &stored.outcome,
                &stored.address,
                &stored.user_agent,
                &stored.request_id,
                stored.details,
                &hash,
            ],
        )
        .await?;
    let [row] = inserted.as_slice() else {
        return Err(Error::internal("the audit chain's head is missing"));
    };
    // Webhooks subscribed to `audit.<action>` (or `audit.*`) hear of it in
    // the same transaction: the event as `GET /api/audit/events` shows it.
    if let Some(org_id) = event.org_id {
        let data = serde_json::json!({
            "id": row.get::<_, i64>("id"),
            "occurred_at": stored.occurred_at,
            "org_id": org_id,
            "seq": row.get::<_, i64>("seq"),
            "actor_kind": stored.actor_kind,
            "actor_id": stored.actor_id,
            "actor_user_id": stored.actor_user_id,
            "action": stored.action,
            "target_kind": stored.target_kind,
            "target_id": stored.target_id,
            "outcome": stored.outcome,
            "address": stored.address,
            "user_agent": stored.user_agent,
            "request_id": stored.request_id,
            "details": stored.details,
            "hash": row.get::<_, String>("hash"),
        });
        let event_type = format!("audit.{}", event.action);
        super::webhook_outbox::enqueue(tx, org_id, &event_type, &data, None).await?;
    }
    Ok(())
}

/// A stored audit row.
#[derive(Clone, Debug)]
pub struct AuditRow {
    pub id: i64,
    pub occurred_at: DateTime<Utc>,
    pub chain_id: Uuid,
    pub seq: i64,
    pub prev_hash: Vec<u8>,
    pub hash: Vec<u8>,
    pub organization_id: Option<Uuid>,
    pub actor_kind: String,
    pub actor_id: Option<Uuid>,
    pub actor_user_id: Option<Uuid>,
    pub action: String,
    pub target_kind: Option<String>,
    pub target_id: Option<String>,
    pub outcome: String,
    pub address: Option<String>,
    pub user_agent: Option<String>,
    pub request_id: Option<String>,
    pub details: serde_json::Value,
}

impl AuditRow {
    fn from_row(row: &tokio_postgres::Row) -> AuditRow {
        AuditRow {
            id: row.get("id"),
            occurred_at: row.get("occurred_at"),
            chain_id: row.get("chain_id"),
            seq: row.get("seq"),
            prev_hash: row.get("prev_hash"),
            hash: row.get("hash"),
            organization_id: row.get("organization_id"),
            actor_kind: row.get("actor_kind"),
            actor_id: row.get("actor_id"),
            actor_user_id: row.get("actor_user_id"),
            action: row.get("action"),
            target_kind: row.get("target_kind"),
            target_id: row.get("target_id"),
            outcome: row.get("outcome"),
            address: row.get("address"),
            user_agent: row.get("user_agent"),
            request_id: row.get("request_id"),
            details: row.get("details"),
        }
    }

    /// The columns [`canonical`] encodes.
    pub fn stored(&self) -> Stored<'_> {
        Stored {
            occurred_at: self.occurred_at,
            chain_id: self.chain_id,
            organization_id: self.organization_id,
            actor_kind: &self.actor_kind,
            actor_id: self.actor_id,
            actor_user_id: self.actor_user_id,
            action: &self.action,
            target_kind: self.target_kind.as_deref(),
            target_id: self.target_id.as_deref(),
            outcome: &self.outcome,
            address: self.address.as_deref(),
            user_agent: self.user_agent.as_deref(),
            request_id: self.request_id.as_deref(),
            details: &self.details,
        }
    }
}

/// Which events a reader may see: one organization's, or (a system
/// administrator) every one, optionally narrowed to one organization.
#[derive(Clone, Copy, Debug)]
pub enum AuditScope<'a> {
    Org(&'a crate::authz::OrgAccess),
    All(&'a crate::authz::SystemAdmin, Option<Uuid>),
}

impl AuditScope<'_> {
    /// The organization the reads are limited to (`None`: all).
    pub fn org_id(&self) -> Option<Uuid> {
        match self {
            AuditScope::Org(access) => Some(access.org_id()),
            AuditScope::All(_, org) => *org,
        }
    }
}

/// The list's filters (all optional, combined).
#[derive(Clone, Debug, Default)]
pub struct AuditFilter {
    /// The actor's id or the user behind it.
    pub actor_id: Option<Uuid>,
    pub action: Option<String>,
    /// `action` is a prefix (it ended with `*`).
    pub action_prefix: bool,
    pub target_kind: Option<String>,
    pub target_id: Option<String>,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    pub outcome: Option<String>,
}

const PAGE_SQL: &str = "SELECT id, occurred_at, chain_id, seq, prev_hash, hash, organization_id, \
     actor_kind, actor_id, actor_user_id, action, target_kind, target_id, outcome, address, \
     user_agent, request_id, details FROM audit_events \
     WHERE ($1::uuid IS NULL OR organization_id = $1) \
       AND ($2::uuid IS NULL OR actor_id = $2 OR actor_user_id = $2) \
       AND ($3::text IS NULL OR (CASE WHEN $4 THEN left(action, length($3)) = $3 \
                                      ELSE action = $3 END)) \
       AND ($5::text IS NULL OR target_kind = $5) \
       AND ($6::text IS NULL OR target_id = $6) \
       AND ($7::timestamptz IS NULL OR occurred_at >= $7) \
       AND ($8::timestamptz IS NULL OR occurred_at < $8) \
       AND ($9::text IS NULL OR outcome = $9) \
       AND id < $10 \
     ORDER BY id DESC LIMIT $11";

impl Datastore {
    /// Records an event that is not part of a change, in a transaction of
    /// its own (a refused authorization, a failed login).
    pub async fn audit_record(&self, origin: &Origin, event: &Event) -> Result<(), Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        record(&tx, origin, event).await?;
        tx.commit().await?;
        Ok(())
    }

    /// One page of the events `scope` may see, newest first (by id),
    /// after the id `before` (exclusive), at most `limit`.
    pub async fn audit_page(
        &self,
        scope: AuditScope<'_>,
        filter: &AuditFilter,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<AuditRow>, Error> {
        let conn = self.conn().await?;
        let before = before.unwrap_or(i64::MAX);
        let rows = conn
            .query(
                PAGE_SQL,
                &[
                    &scope.org_id(),
                    &filter.actor_id,
                    &filter.action,
                    &filter.action_prefix,
                    &filter.target_kind,
                    &filter.target_id,
                    &filter.from,
                    &filter.to,
                    &filter.outcome,
                    &before,
                    &limit,
                ],
            )
            .await?;
        Ok(rows.iter().map(AuditRow::from_row).collect())
    }

    /// The chains `scope` covers: its organization's, or every chain
    /// (with the system chain) for a system administrator without an
    /// organization.
    pub async fn audit_chains(&self, scope: AuditScope<'_>) -> Result<Vec<Uuid>, Error> {
        if let Some(org) = scope.org_id() {
            return Ok(vec![org]);
        }
        let conn = self.conn().await?;
        let rows = conn
            .query(
                "SELECT chain_id FROM audit_chain_heads ORDER BY chain_id",
                &[],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Verifies one chain (see [`ChainCheck`]) in one snapshot. Walks
    /// every row of the chain in `seq` order, past the head too (a row
    /// appended after the head is checked like any other): each `seq`
    /// follows the previous one's, each `prev_hash` is the previous hash,
    /// each hash is recomputed from the row's columns (HMAC-SHA256 under
    /// the chain key from `keyed_from` on, plain SHA-256 before). Then the
    /// last row must be the head, and the chain must reach `checkpoint`
    /// (the newest signed checkpoint, published outside the database) with
    /// its hash; the checkpoint's `keyed_from` is the one believed.
    ///
    /// Starts where retention left the chain (`audit_retention_marks`),
    /// else at seq 1 after 32 zero bytes; with `resume` (the checkpoint
    /// task), at the checkpoint's row instead, whose hash must be the
    /// checkpoint's.
    pub async fn audit_verify_chain(
        &self,
        chain_id: Uuid,
        checkpoint: Option<&Checkpoint>,
        resume: bool,
    ) -> Result<ChainCheck, Error> {
        let keys =
            crate::audit::keys().ok_or_else(|| Error::internal("the audit key is not loaded"))?;
        let mut conn = self.conn().await?;
        let tx = conn.snapshot().await?;
        let [head, mark] = tx
            .pipeline([
                (
                    "SELECT seq, hash, keyed_from FROM audit_chain_heads WHERE chain_id = $1",
                    &[&chain_id],
                ),
                (
                    "SELECT seq, hash FROM audit_retention_marks WHERE chain_id = $1",
                    &[&chain_id],
                ),
            ])
            .await?;
        let (head_seq, head_hash, stored_keyed_from): (i64, Vec<u8>, i64) = match head.first() {
            Some(row) => (row.get("seq"), row.get("hash"), row.get("keyed_from")),
            None => (0, vec![0; 32], 1),
        };
        let (mut expected_seq, mut expected_prev): (i64, Vec<u8>) = match mark.first() {
            Some(row) => (row.get::<_, i64>("seq") + 1, row.get("hash")),
            None => (1, vec![0; 32]),
        };
        // A checkpoint of a row retention has dropped since says nothing
        // of the rows left (but its `keyed_from` still holds).
        let reachable = checkpoint.filter(|c| c.seq >= expected_seq);
        let keyed_from = checkpoint.map_or(stored_keyed_from, |c| c.keyed_from);
        // Resuming: the checkpoint's row is taken as verified when its
        // hash is the checkpoint's.
        let mut anchor = reachable.filter(|_| resume);
        if let Some(c) = anchor {
            expected_seq = c.seq;
        }
        let mut check = ChainCheck {
            chain_id,
            checked: 0,
            head_seq,
            keyed_from,
            last_seq: expected_seq - 1,
            last_hash: expected_prev.clone(),
            broken_at: None,
            problem: None,
            checkpoint: checkpoint.cloned(),
        };
        let mut after = expected_seq - 1;
        'pages: loop {
            let rows = tx
                .query(VERIFY_SQL, &[&chain_id, &(after + 1), &VERIFY_PAGE])
                .await?;
            let full = rows.len() as i64 == VERIFY_PAGE;
            for row in rows.iter().map(AuditRow::from_row) {
                let broken = if let Some(c) = anchor.take() {
                    if row.seq != c.seq {
                        Some((c.seq, ChainProblem::MissingRows))
                    } else if row.hash != c.hash {
                        Some((c.seq, ChainProblem::CheckpointMismatch))
                    } else {
                        None
                    }
                } else if row.seq != expected_seq {
                    Some((expected_seq, ChainProblem::MissingRows))
                } else if row.prev_hash != expected_prev {
                    Some((row.seq, ChainProblem::PrevHashMismatch))
                } else {
                    let payload = canonical(&row.stored());
                    let hash = if row.seq < keyed_from {
                        chain_hash(&row.prev_hash, row.seq, &payload)
                    } else {
                        keys.chain_mac(&row.prev_hash, row.seq, &payload)
                    };
                    if hash != row.hash {
                        Some((row.seq, ChainProblem::MacMismatch))
                    } else if reachable.is_some_and(|c| c.seq == row.seq && c.hash != row.hash) {
                        Some((row.seq, ChainProblem::CheckpointMismatch))
                    } else {
                        None
                    }
                };
                if let Some((seq, problem)) = broken {
                    check.broken_at = Some(seq);
                    check.problem = Some(problem);
                    break 'pages;
                }
                check.checked += 1;
                expected_seq = row.seq + 1;
                after = row.seq;
                check.last_seq = row.seq;
                check.last_hash = row.hash.clone();
                expected_prev = row.hash;
            }
            if !full {
                break;
            }
        }
        tx.end_read();
        if check.broken_at.is_some() {
            return Ok(check);
        }
        let last = check.last_seq;
        let broken = if let Some(c) = anchor {
            // Resuming, and not even the checkpoint's row is there.
            Some((c.seq.min(last + 1), ChainProblem::MissingRows))
        } else if reachable.is_some_and(|c| c.seq > last) {
            // The chain stops short of a row a checkpoint vouched for:
            // rows removed at its end (and the head wound back).
            Some((last + 1, ChainProblem::MissingRows))
        } else if last > head_seq {
            Some((head_seq + 1, ChainProblem::RowsAfterHead))
        } else if last < head_seq {
            Some((last + 1, ChainProblem::MissingRows))
        } else if !resume && expected_prev != head_hash {
            Some((head_seq, ChainProblem::HeadMismatch))
        } else {
            None
        };
        if let Some((seq, problem)) = broken {
            check.broken_at = Some(seq);
            check.problem = Some(problem);
        }
        Ok(check)
    }

    /// Every chain's id (the checkpoint task's round).
    pub async fn audit_chain_ids(&self) -> Result<Vec<Uuid>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                "SELECT chain_id FROM audit_chain_heads ORDER BY chain_id",
                &[],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get("chain_id")).collect())
    }

    /// The maintenance of the log, by whichever instance takes the lock
    /// first (the others skip this round): creates the partitions of the
    /// current month and [`PARTITIONS_AHEAD`] more, and, with a retention,
    /// drops the partitions whose every row is older than `retention_days`
    /// (recording `audit.partition_drop` on the system chain for each).
    /// Returns the dropped partitions' names.
    pub async fn audit_maintain(&self, retention_days: Option<u32>) -> Result<Vec<String>, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let locked: bool = tx
            .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&MAINTENANCE_LOCK])
            .await?
            .get(0);
        if !locked {
            return Ok(Vec::new());
        }
        tx.execute("SELECT audit_ensure_partitions($1)", &[&PARTITIONS_AHEAD])
            .await?;
        let mut dropped = Vec::new();
        if let Some(days) = retention_days {
            let before = Utc::now() - chrono::Duration::days(i64::from(days));
            let rows = tx
                .query("SELECT audit_drop_partitions($1)", &[&before])
                .await?;
            dropped = rows.iter().map(|r| r.get::<_, String>(0)).collect();
            for name in &dropped {
                let event = Event::system("audit.partition_drop")
                    .target("audit_partition", name)
                    .details(serde_json::json!({ "retention_days": days }));
                record(&tx, &Origin::system(), &event).await?;
            }
        }
        tx.commit().await?;
        Ok(dropped)
    }
}

/// What verifying one chain found.
#[derive(Clone, Debug)]
pub struct ChainCheck {
    pub chain_id: Uuid,
    /// Rows whose hash was recomputed and matched.
    pub checked: i64,
    /// The chain head's seq (its length, retention aside).
    pub head_seq: i64,
    /// The first keyed seq believed (the checkpoint's, else the
    /// database's).
    pub keyed_from: i64,
    /// The last row verified and its hash (what a new checkpoint states).
    pub last_seq: i64,
    pub last_hash: Vec<u8>,
    /// The first seq found broken (changed, missing, or added).
    pub broken_at: Option<i64>,
    pub problem: Option<ChainProblem>,
    /// The checkpoint the chain was compared with.
    pub checkpoint: Option<Checkpoint>,
}

/// How a chain is broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainProblem {
    /// A row's hash is not the MAC (or, before `keyed_from`, the SHA-256)
    /// of its columns: changed, or made without the key.
    MacMismatch,
    /// A row's `prev_hash` is not the previous row's hash.
    PrevHashMismatch,
    /// Rows are missing: a gap, the chain short of its head, or short of a
    /// checkpoint (rows removed at the end, the head wound back).
    MissingRows,
    /// Rows follow the chain's head (the head wound back, rows kept).
    RowsAfterHead,
    /// The head's hash is not the last row's.
    HeadMismatch,
    /// The row a checkpoint vouched for has another hash.
    CheckpointMismatch,
}

impl ChainProblem {
    /// What to tell a reader.
    pub fn describe(self) -> &'static str {
        match self {
            ChainProblem::MacMismatch => "the row's hash does not match its columns under the key",
            ChainProblem::PrevHashMismatch => "the previous hash does not match",
            ChainProblem::MissingRows => "a row is missing",
            ChainProblem::RowsAfterHead => "rows follow the chain's head",
            ChainProblem::HeadMismatch => "the last row is not the chain's head",
            ChainProblem::CheckpointMismatch => "the row differs from the signed checkpoint of it",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(details: &serde_json::Value) -> Stored<'_> {
        Stored {
            occurred_at: DateTime::from_timestamp_micros(1_790_000_000_123_456).unwrap(),
            chain_id: Uuid::nil(),
            organization_id: None,
            actor_kind: "user",
            actor_id: Some(Uuid::from_u128(7)),
            actor_user_id: Some(Uuid::from_u128(7)),
            action: "token.create",
            target_kind: Some("token"),
            target_id: Some("x"),
            outcome: "success",
            address: Some("127.0.0.1"),
            user_agent: None,
            request_id: Some("r"),
            details,
        }
    }

    #[test]
    fn canonical_encoding_ignores_key_order_and_sees_every_column() {
        let a = serde_json::json!({"b": 1, "a": {"y": [1, 2], "x": "s"}});
        let b: serde_json::Value =
            serde_json::from_str(r#"{"a": {"x": "s", "y": [1, 2]}, "b": 1}"#).unwrap();
        assert_eq!(canonical(&sample(&a)), canonical(&sample(&b)));
        let base = canonical(&sample(&a));
        let mut changed = sample(&a);
        changed.target_id = None;
        assert_ne!(canonical(&changed), base);
        let mut changed = sample(&a);
        changed.target_id = Some("");
        assert_ne!(canonical(&changed), base);
        let mut changed = sample(&a);
        changed.outcome = "denied";
        assert_ne!(canonical(&changed), base);
    }

    #[test]
    fn the_hash_chains_seq_and_previous_hash() {
        let d = serde_json::json!({});
        let payload = canonical(&sample(&d));
        let zero = [0u8; 32];
        let first = chain_hash(&zero, 1, &payload);
        assert_eq!(first.len(), 32);
        assert_ne!(first, chain_hash(&zero, 2, &payload));
        assert_ne!(first, chain_hash(&first, 1, &payload));
    }
}
