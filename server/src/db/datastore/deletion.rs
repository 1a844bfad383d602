//! Deleting organizations and accounts: the requests (the transaction that
//! makes an organization or an account unusable at once and queues its
//! job), the durable `deletion_jobs` as their workers see them, and the
//! bounded batches the jobs delete in. (An account's export reads are
//! `account_export`.)
//!
//! A job is not a request: its authority is the claimed row itself, whose
//! subject (an organization or a user) filters every statement here. Every
//! write of a worker first checks, in its transaction, that it still holds
//! the job's lease (as `kb_jobs` do), so a worker that lost its job changes
//! nothing.

use super::audit;
use super::{Datastore, Tx};
use crate::audit::Event;
use crate::authz::{OrgAccess, Owner, on, perm};
use crate::db::enums::{
    DeletionJobKind, DeletionJobState, InvitationStatus, KbJobState, McpSessionStatus,
};
use crate::db::row::db_row;
use crate::error::Error;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// The NOTIFY channel on which new deletion jobs wake idle workers.
pub const DELETION_JOBS_CHANNEL: &str = "deletion_jobs";

/// The `last_error` of ingestion jobs cancelled by their organization's
/// deletion.
pub const CANCELLED: &str = "cancelled: the organization is being deleted";

db_row! {
    /// A deletion job as its status shows it.
    pub struct DeletionJobRow {
        pub id: Uuid = "j.id",
        pub kind: DeletionJobKind = "j.kind",
        pub organization_id: Option<Uuid> = "j.organization_id",
        pub user_id: Option<Uuid> = "j.user_id",
        pub subject_name: String = "j.subject_name",
        pub state: DeletionJobState = "j.state",
        pub step: String = "j.step",
        pub rows_deleted: i64 = "j.rows_deleted",
        pub files_deleted: i64 = "j.files_deleted",
        pub grants_revoked: i32 = "j.grants_revoked",
        pub grants_unrevoked: i32 = "j.grants_unrevoked",
        pub attempts: i32 = "j.attempts",
        pub last_error: Option<String> = "j.last_error",
        pub created_at: DateTime<Utc> = "j.created_at",
        pub updated_at: DateTime<Utc> = "j.updated_at",
        pub finished_at: Option<DateTime<Utc>> = "j.finished_at",
    }
}

/// A job this worker holds.
#[derive(Clone, Debug)]
pub struct ClaimedDeletion {
    pub id: Uuid,
    pub kind: DeletionJobKind,
    /// The organization (an organization's deletion) or the user (an
    /// account's).
    pub subject: Uuid,
    /// The step to resume at.
    pub step: String,
    /// This attempt's number, from 1.
    pub attempts: i32,
    pub max_attempts: i32,
    /// The worker holding the lease.
    pub worker: Uuid,
}

impl ClaimedDeletion {
    /// Whether this attempt is the job's last.
    pub fn last_attempt(&self) -> bool {
        self.attempts >= self.max_attempts
    }
}

/// What an account deletion request found.
pub enum AccountDeletion {
    /// Refused: the caller is the only owner of these organizations, which
    /// have other members (their names).
    SoleOwner(Vec<String>),
    /// The account is anonymised, its memberships gone; the jobs delete
    /// the rest (the account's, then one per organization it alone held).
    Requested {
        account: DeletionJobRow,
        organizations: Vec<DeletionJobRow>,
    },
}

/// An MCP grant to revoke at its provider.
pub struct Grant {
    pub session_id: Uuid,
    pub server_url: String,
    pub tokens_sealed: Vec<u8>,
}

/// What became of one grant (see [`Datastore::deletion_revoke_grant`]).
pub enum GrantOutcome {
    /// Revoked at the provider (or nothing there to revoke): the session
    /// goes.
    Revoked,
    /// The revocation failed for good (the job's last attempt): the
    /// session goes all the same, counted as unrevoked.
    Unrevoked,
    /// The revocation failed; the session stays for the next attempt.
    Kept,
}

/// Outcome of a failed attempt of a job.
pub enum JobFailure<'a> {
    /// Retry after `backoff_secs`.
    Retry { error: &'a str, backoff_secs: f64 },
    /// Fail for good.
    Final { error: &'a str },
}

/// The lease check every write of a worker starts with.
const HOLDS_LEASE: &str = "SELECT 1 FROM deletion_jobs WHERE id = $1 AND locked_by = $2 \
     AND state = $3 FOR UPDATE";

/// The batches of an organization's deletion after its grants and files,
/// in order: each statement deletes at most `$2` rows of the organization
/// `$1`, reaching them through indexed paths (children before parents, so
/// that no cascade grows a batch). What they leave (small tables, and any
/// table added later) goes with the organization's row, whose foreign keys
/// cascade.
pub const ORG_BATCHES: &[(&str, &str)] = &[
    (
        "vectors",
        "DELETE FROM kb_chunks WHERE id IN (SELECT c.id FROM knowledge_bases k \
         JOIN kb_chunks c ON c.kb_id = k.id WHERE k.organization_id = $1 LIMIT $2)",
    ),
    (
        "kb_jobs",
        "DELETE FROM kb_jobs WHERE id IN (SELECT j.id FROM knowledge_bases k \
         JOIN kb_sources s ON s.kb_id = k.id JOIN kb_jobs j ON j.source_id = s.id \
         WHERE k.organization_id = $1 LIMIT $2)",
    ),
    (
        "kb_documents",
        "DELETE FROM kb_documents WHERE id IN (SELECT d.id FROM knowledge_bases k \
         JOIN kb_documents d ON d.kb_id = k.id WHERE k.organization_id = $1 LIMIT $2)",
    ),
    (
        "kb_sources",
        "DELETE FROM kb_sources WHERE id IN (SELECT s.id FROM knowledge_bases k \
         JOIN kb_sources s ON s.kb_id = k.id WHERE k.organization_id = $1 LIMIT $2)",
    ),
    (
        "knowledge_bases",
        "DELETE FROM knowledge_bases WHERE id IN (SELECT id FROM knowledge_bases \
         WHERE organization_id = $1 LIMIT $2)",
    ),
    // Feedback on answers first, in batches of its own (it would go with
    // the messages, but a conversation answer may carry many ratings).
    (
        "message_feedback",
        "DELETE FROM message_feedback WHERE id IN (SELECT id FROM message_feedback \
         WHERE organization_id = $1 LIMIT $2)",
    ),
    // Usage records (one per model call), in batches of their own.
    (
        "usage_records",
        "DELETE FROM usage_records WHERE id IN (SELECT id FROM usage_records \
         WHERE organization_id = $1 LIMIT $2)",
    ),
    (
        "chat_stream_events",
        "DELETE FROM chat_stream_events WHERE (message_id, seq) IN ( \
         SELECT e.message_id, e.seq FROM chats c JOIN chat_messages m ON m.chat_id = c.id \
         JOIN chat_stream_events e ON e.message_id = m.id WHERE c.organization_id = $1 \
         LIMIT $2)",
    ),
    (
        "chat_messages",
        "DELETE FROM chat_messages WHERE id IN (SELECT m.id FROM chats c \
         JOIN chat_messages m ON m.chat_id = c.id WHERE c.organization_id = $1 LIMIT $2)",
    ),
    (
        "chats",
        "DELETE FROM chats WHERE id IN (SELECT id FROM chats WHERE organization_id = $1 \
         LIMIT $2)",
    ),
    (
        "conversation_stream_events",
        "DELETE FROM conversation_stream_events WHERE (message_id, seq) IN ( \
         SELECT e.message_id, e.seq FROM conversation_messages m \
         JOIN conversation_stream_events e ON e.message_id = m.id \
         WHERE m.organization_id = $1 LIMIT $2)",
    ),
    (
        "conversation_messages",
        "DELETE FROM conversation_messages WHERE id IN (SELECT id FROM conversation_messages \
         WHERE organization_id = $1 LIMIT $2)",
    ),
    (
        "conversation_sessions",
        "DELETE FROM conversation_sessions WHERE id IN (SELECT id FROM conversation_sessions \
         WHERE organization_id = $1 LIMIT $2)",
    ),
    (
        "conversations",
        "DELETE FROM conversations WHERE id IN (SELECT id FROM conversations \
         WHERE organization_id = $1 LIMIT $2)",
    ),
    (
        "deployments",
        "DELETE FROM agent_deployments WHERE id IN (SELECT d.id FROM agents a \
         JOIN agent_deployments d ON d.agent_id = a.id WHERE a.organization_id = $1 LIMIT $2)",
    ),
    // The organization's public tools leave the agents of other
    // organizations that use them (a tool of a deleted organization runs
    // nowhere).
    (
        "tool_uses",
        "DELETE FROM agent_tools WHERE (agent_id, tool_id) IN (SELECT at.agent_id, at.tool_id \
         FROM tools t JOIN agent_tools at ON at.tool_id = t.id WHERE t.organization_id = $1 \
         LIMIT $2)",
    ),
    (
        "agents",
        "DELETE FROM agents WHERE id IN (SELECT id FROM agents WHERE organization_id = $1 \
         LIMIT $2)",
    ),
    (
        "tools",
        "DELETE FROM tools WHERE id IN (SELECT id FROM tools WHERE organization_id = $1 \
         LIMIT $2)",
    ),
    (
        "mcp_sessions",
        "DELETE FROM mcp_sessions WHERE id IN (SELECT id FROM mcp_sessions \
         WHERE organization_id = $1 LIMIT $2)",
    ),
    (
        "invitations",
        "DELETE FROM invitations WHERE id IN (SELECT id FROM invitations \
         WHERE organization_id = $1 LIMIT $2)",
    ),
];

/// The batches of an account's deletion after its grants and chat
/// uploads: each statement deletes (or, for the conversation messages that
/// stay, detaches) at most `$2` rows of the user `$1`. The user's row goes
/// last; its foreign keys cascade (memberships, tickets, sessions) or set
/// null (authorship of what organizations keep).
pub const ACCOUNT_BATCHES: &[(&str, &str)] = &[
    // The account's ratings of answers, in every organization (its
    // comments are its own).
    (
        "message_feedback",
        "DELETE FROM message_feedback WHERE id IN (SELECT id FROM message_feedback \
         WHERE user_id = $1 LIMIT $2)",
    ),
    // The account's usage records stay with their organizations, detached.
    (
        "usage_records",
        "UPDATE usage_records SET user_id = NULL WHERE id IN (SELECT id FROM usage_records \
         WHERE user_id = $1 LIMIT $2)",
    ),
    (
        "chat_stream_events",
        "DELETE FROM chat_stream_events WHERE (message_id, seq) IN ( \
         SELECT e.message_id, e.seq FROM chats c JOIN chat_messages m ON m.chat_id = c.id \
         JOIN chat_stream_events e ON e.message_id = m.id WHERE c.user_id = $1 LIMIT $2)",
    ),
    (
        "chat_messages",
        "DELETE FROM chat_messages WHERE id IN (SELECT m.id FROM chats c \
         JOIN chat_messages m ON m.chat_id = c.id WHERE c.user_id = $1 LIMIT $2)",
    ),
    (
        "chats",
        "DELETE FROM chats WHERE id IN (SELECT id FROM chats WHERE user_id = $1 LIMIT $2)",
    ),
    (
        "authorship",
        "UPDATE conversation_messages SET created_by = NULL WHERE id IN ( \
         SELECT id FROM conversation_messages WHERE created_by = $1 LIMIT $2)",
    ),
    (
        "mcp_sessions",
        "DELETE FROM mcp_sessions WHERE id IN (SELECT id FROM mcp_sessions WHERE user_id = $1 \
         LIMIT $2)",
    ),
];

/// The e-mail an anonymised account keeps until its row is deleted: not
/// an address (no `@`), unique, and never what signup normalises anything
/// to.
fn tombstone(user_id: Uuid) -> String {
    format!("deleted:{user_id}")
}

/// What makes an organization unusable at once, in the transaction that
/// requests its deletion (the authorization statement already refuses its
/// members once `deletion_requested_at` is set): deployment keys, gateway
/// URLs, pending OAuth callbacks, pending invitations and WebSocket tickets
/// stop working; queued and running ingestion jobs are cancelled (a worker
/// holding one loses its lease and writes nothing more); answers being
/// generated are told to stop, on whichever instance generates them.
async fn make_unusable(tx: &Tx<'_>, org_id: Uuid) -> Result<(), Error> {
    tx.execute(
        "DELETE FROM agent_deployments WHERE organization_id = $1",
        &[&org_id],
    )
    .await?;
    tx.execute(
        "UPDATE mcp_instances SET gateway_secret_hash = NULL, updated_at = now() \
         WHERE organization_id = $1 AND gateway_secret_hash IS NOT NULL",
        &[&org_id],
    )
    .await?;
    tx.execute(
        "UPDATE mcp_sessions SET state_hash = NULL, status = $3, updated_at = now() \
         WHERE organization_id = $1 AND status = $2",
        &[
            &org_id,
            &McpSessionStatus::Pending,
            &McpSessionStatus::Failed,
        ],
    )
    .await?;
    tx.execute(
        "UPDATE invitations SET status = $3, revoked_at = now(), updated_at = now() \
         WHERE organization_id = $1 AND status = $2",
        &[
            &org_id,
            &InvitationStatus::Pending,
            &InvitationStatus::Revoked,
        ],
    )
    .await?;
    tx.execute(
        "DELETE FROM chat_ws_tickets WHERE organization_id = $1",
        &[&org_id],
    )
    .await?;
    stop_org_work(tx, org_id).await
}

/// Cancels the organization's ingestion jobs and tells its answers being
/// generated to stop (`NOTIFY chat_stop`, delivered at commit). Run when
/// the deletion is requested and again by the job's first step (for work
/// that requests authorized just before started meanwhile).
async fn stop_org_work(tx: &Tx<'_>, org_id: Uuid) -> Result<(), Error> {
    tx.execute(
        "UPDATE kb_jobs SET state = $2, locked_by = NULL, locked_until = NULL, \
             last_error = $3, updated_at = now() \
         WHERE organization_id = $1 AND state IN ('queued', 'running')",
        &[&org_id, &KbJobState::Failed, &CANCELLED],
    )
    .await?;
    tx.query(
        "SELECT pg_notify($2, id::text) FROM chat_messages \
         WHERE status = 'streaming' AND organization_id = $1",
        &[&org_id, &super::chat::STOP_CHANNEL],
    )
    .await?;
    tx.query(
        "SELECT pg_notify($2, id::text) FROM conversation_messages \
         WHERE status = 'streaming' AND organization_id = $1",
        &[&org_id, &super::chat::STOP_CHANNEL],
    )
    .await?;
    Ok(())
}

/// Marks the organization deleting, makes it unusable and queues its job;
/// inside the caller's transaction, which holds the organization's row.
async fn request_org_deletion(
    tx: &Tx<'_>,
    org_id: Uuid,
    subject_name: &str,
    requested_by: Uuid,
    max_attempts: i32,
) -> Result<DeletionJobRow, Error> {
    tx.execute(
        "UPDATE organizations SET deletion_requested_at = now(), updated_at = now() \
         WHERE id = $1",
        &[&org_id],
    )
    .await?;
    make_unusable(tx, org_id).await?;
    let row = tx
        .query_one(
            &format!(
                "WITH j AS (INSERT INTO deletion_jobs (id, kind, organization_id, subject_name, \
                     requested_by, step, max_attempts) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *) \
                 SELECT {} FROM j",
                DeletionJobRow::COLUMNS
            ),
            &[
                &Uuid::new_v4(),
                &DeletionJobKind::Organization,
                &org_id,
                &subject_name,
                &requested_by,
                &ORG_FIRST_STEP,
                &max_attempts,
            ],
        )
        .await?;
    Ok(DeletionJobRow::from_row(&row))
}

/// The organizations that go with the account `user_id`: those it alone
/// owns and alone belongs to (id, and the name its job keeps: not a
/// personal organization's, which is the person's). `Err` with the names
/// of the organizations it alone owns that have other members (active,
/// suspended or invited), which refuse the deletion. Locks the rows of
/// the user's organizations (in id order, so that concurrent requests
/// cannot deadlock), so that no member joins one meanwhile.
async fn sole_owned(
    tx: &Tx<'_>,
    user_id: Uuid,
) -> Result<Result<Vec<(Uuid, String)>, Vec<String>>, Error> {
    tx.query(
        "SELECT o.id FROM memberships m JOIN organizations o ON o.id = m.organization_id \
         WHERE m.user_id = $1 ORDER BY o.id FOR UPDATE OF o",
        &[&user_id],
    )
    .await?;
    let orgs = tx
        .query(
            "SELECT o.id, o.name, o.is_personal, \
                 (m.status = 'active' AND r.is_system_role AND r.name = 'owner') AS is_owner, \
                 EXISTS (SELECT 1 FROM memberships m2 JOIN roles r2 ON r2.id = m2.role_id \
                         WHERE m2.organization_id = o.id AND m2.user_id <> $1 \
                           AND m2.status = 'active' AND r2.is_system_role \
                           AND r2.name = 'owner') AS other_owner, \
                 EXISTS (SELECT 1 FROM memberships m3 \
                         WHERE m3.organization_id = o.id AND m3.user_id <> $1 \
                           AND m3.status IN ('active', 'suspended', 'invited')) \
                     AS other_members \
             FROM memberships m JOIN organizations o ON o.id = m.organization_id \
             JOIN roles r ON r.id = m.role_id \
             WHERE m.user_id = $1 AND o.deletion_requested_at IS NULL \
             ORDER BY o.name, o.id",
            &[&user_id],
        )
        .await?;
    let sole =
        |r: &&tokio_postgres::Row| r.get::<_, bool>("is_owner") && !r.get::<_, bool>("other_owner");
    let refused: Vec<String> = orgs
        .iter()
        .filter(sole)
        .filter(|r| r.get::<_, bool>("other_members"))
        .map(|r| r.get("name"))
        .collect();
    if !refused.is_empty() {
        return Ok(Err(refused));
    }
    Ok(Ok(orgs
        .iter()
        .filter(sole)
        .map(|r| {
            let name = if r.get("is_personal") {
                "personal organization".to_string()
            } else {
                r.get("name")
            };
            (r.get("id"), name)
        })
        .collect()))
}

/// What makes an account unusable at once, in the transaction that
/// requests its deletion: its memberships are removed, its MCP gateway
/// URLs, pending OAuth callbacks and WebSocket tickets stop working, its
/// chat answers being generated are told to stop, and its row is
/// anonymised (e-mail, names and password gone: its tokens are refused,
/// and the address can sign up again).
async fn make_account_unusable(tx: &Tx<'_>, user_id: Uuid) -> Result<(), Error> {
    tx.execute("DELETE FROM memberships WHERE user_id = $1", &[&user_id])
        .await?;
    tx.execute(
        "UPDATE mcp_instances SET gateway_secret_hash = NULL, updated_at = now() \
         WHERE user_id = $1 AND gateway_secret_hash IS NOT NULL",
        &[&user_id],
    )
    .await?;
    tx.execute(
        "UPDATE mcp_sessions SET state_hash = NULL, status = $3, updated_at = now() \
         WHERE user_id = $1 AND status = $2",
        &[
            &user_id,
            &McpSessionStatus::Pending,
            &McpSessionStatus::Failed,
        ],
    )
    .await?;
    tx.execute(
        "DELETE FROM chat_ws_tickets WHERE user_id = $1",
        &[&user_id],
    )
    .await?;
    tx.query(
        "SELECT pg_notify($2, m.id::text) FROM chats c \
         JOIN chat_messages m ON m.chat_id = c.id \
         WHERE c.user_id = $1 AND m.status = 'streaming'",
        &[&user_id, &super::chat::STOP_CHANNEL],
    )
    .await?;
    tx.execute(
        "UPDATE users SET email = $2, email_normalized = $2, first_name = '', \
             last_name = '', password_hash = NULL, is_system_admin = false, \
             last_active_at = NULL, updated_at = now() \
         WHERE id = $1",
        &[&user_id, &tombstone(user_id)],
    )
    .await?;
    Ok(())
}

/// The step an organization's deletion starts at (the app layer names
/// the others).
pub const ORG_FIRST_STEP: &str = "stop";
/// The step an account's deletion starts at.
pub const ACCOUNT_FIRST_STEP: &str = "grants";

impl Datastore {
    /// Requests the deletion of the caller's organization (the caller was
    /// authorized as its owner): `409 personal_organization` for a personal
    /// organization (it goes with its account), `400 confirmation_mismatch`
    /// unless `confirm_name` is its exact name. In one transaction that
    /// holds the organization's row: marked deleting, made unusable (see
    /// [`make_unusable`]) and its job queued.
    pub async fn org_deletion_request(
        &self,
        grant: &crate::authz::Grant<on::Org, Owner<perm::OrganizationAdmin>>,
        confirm_name: &str,
        max_attempts: i32,
    ) -> Result<DeletionJobRow, Error> {
        let access: &OrgAccess = grant;
        let org_id = grant.id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let org = tx
            .query_opt(
                "SELECT name, is_personal, deletion_requested_at IS NOT NULL AS deleting \
                 FROM organizations WHERE id = $1 FOR UPDATE",
                &[&org_id],
            )
            .await?
            .ok_or_else(|| Error::forbidden("you are not a member of this organization"))?;
        if org.get::<_, bool>("deleting") {
            return Err(Error::forbidden(
                "you are not a member of this organization",
            ));
        }
        if org.get::<_, bool>("is_personal") {
            return Err(Error::conflict(
                "personal_organization",
                "a personal organization is deleted with its account \
                 (POST /api/users/me/delete)",
            ));
        }
        let name: String = org.get("name");
        if name != confirm_name {
            return Err(Error::invalid(
                "confirmation_mismatch",
                "confirm_name must be the organization's exact name",
            ));
        }
        let job = request_org_deletion(&tx, org_id, &name, access.user_id(), max_attempts).await?;
        tx.execute(&format!("NOTIFY {DELETION_JOBS_CHANNEL}"), &[])
            .await?;
        audit::record(
            &tx,
            grant.origin(),
            &Event::org(org_id, "org.delete")
                .target("organization", org_id)
                .details(serde_json::json!({"name": name, "job_id": job.id})),
        )
        .await?;
        tx.commit().await?;
        Ok(job)
    }

    /// Requests the deletion of the account `user_id` (authenticated, its
    /// password checked). In one transaction, holding the user's row and
    /// the rows of their organizations (in id order, so that concurrent
    /// requests cannot deadlock): refused ([`AccountDeletion::SoleOwner`])
    /// while the user is the only owner of an organization with other
    /// members (active, suspended or invited); else the organizations the
    /// user alone belongs to as their owner (the personal one among them)
    /// are marked deleting with their jobs, every membership of the user is
    /// removed, the user's MCP gateway URLs, pending OAuth callbacks and
    /// WebSocket tickets stop working, their chat answers being generated
    /// are told to stop, and the row is anonymised (e-mail, names and
    /// password gone: no token of theirs is accepted any more, and the
    /// address can sign up again) until the account's job deletes it.
    pub async fn account_deletion_request(
        &self,
        user_id: Uuid,
        max_attempts: i32,
    ) -> Result<AccountDeletion, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.query_opt(
            "SELECT 1 FROM users WHERE id = $1 AND password_hash IS NOT NULL FOR UPDATE",
            &[&user_id],
        )
        .await?
        .ok_or_else(crate::authn::invalid_token)?;
        let orgs = match sole_owned(&tx, user_id).await? {
            Ok(orgs) => orgs,
            Err(refused) => return Ok(AccountDeletion::SoleOwner(refused)),
        };
        let mut organizations = Vec::new();
        for (org_id, name) in orgs {
            organizations
                .push(request_org_deletion(&tx, org_id, &name, user_id, max_attempts).await?);
        }
        make_account_unusable(&tx, user_id).await?;
        let account = tx
            .query_one(
                &format!(
                    "WITH j AS (INSERT INTO deletion_jobs (id, kind, user_id, subject_name, \
                         requested_by, step, max_attempts) \
                     VALUES ($1, $2, $3, $4, $3, $5, $6) RETURNING *) \
                     SELECT {} FROM j",
                    DeletionJobRow::COLUMNS
                ),
                &[
                    &Uuid::new_v4(),
                    &DeletionJobKind::Account,
                    &user_id,
                    &"account",
                    &ACCOUNT_FIRST_STEP,
                    &max_attempts,
                ],
            )
            .await?;
        tx.execute(&format!("NOTIFY {DELETION_JOBS_CHANNEL}"), &[])
            .await?;
        tx.commit().await?;
        Ok(AccountDeletion::Requested {
            account: DeletionJobRow::from_row(&account),
            organizations,
        })
    }

    /// The deletion of `org_id` that `requested_by` asked for (`None`: no
    /// such deletion, or someone else's).
    pub async fn org_deletion_status(
        &self,
        requested_by: Uuid,
        org_id: Uuid,
    ) -> Result<Option<DeletionJobRow>, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                &format!(
                    "SELECT {} FROM deletion_jobs j \
                     WHERE j.organization_id = $1 AND j.requested_by = $2",
                    DeletionJobRow::COLUMNS
                ),
                &[&org_id, &requested_by],
            )
            .await?;
        Ok(row.as_ref().map(DeletionJobRow::from_row))
    }

    // ---- the workers' side ----

    /// Claims the next due job (queued and due, or running with an expired
    /// lease) for `worker`.
    pub async fn deletion_job_claim(
        &self,
        worker: Uuid,
        lease_secs: f64,
    ) -> Result<Option<ClaimedDeletion>, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "WITH next AS ( \
                     SELECT id FROM deletion_jobs \
                     WHERE (state = 'queued' AND run_after <= now()) \
                        OR (state = 'running' AND locked_until < now()) \
                     ORDER BY run_after, created_at \
                     LIMIT 1 FOR UPDATE SKIP LOCKED) \
                 UPDATE deletion_jobs j SET state = $3, attempts = j.attempts + 1, \
                     locked_by = $1, locked_until = now() + make_interval(secs => $2), \
                     updated_at = now() \
                 FROM next WHERE j.id = next.id \
                 RETURNING j.id, j.kind, coalesce(j.organization_id, j.user_id) AS subject, \
                     j.step, j.attempts, j.max_attempts",
                &[&worker, &lease_secs, &DeletionJobState::Running],
            )
            .await?;
        Ok(row.map(|r| ClaimedDeletion {
            id: r.get("id"),
            kind: r.get("kind"),
            subject: r.get("subject"),
            step: r.get("step"),
            attempts: r.get("attempts"),
            max_attempts: r.get("max_attempts"),
            worker,
        }))
    }

    /// Renews the lease; `false` when the job is no longer this worker's.
    pub async fn deletion_job_heartbeat(
        &self,
        job: &ClaimedDeletion,
        lease_secs: f64,
    ) -> Result<bool, Error> {
        let conn = self.conn().await?;
        let n = conn
            .execute(
                "UPDATE deletion_jobs SET locked_until = now() + make_interval(secs => $3) \
                 WHERE id = $1 AND locked_by = $2 AND state = $4",
                &[
                    &job.id,
                    &job.worker,
                    &lease_secs,
                    &DeletionJobState::Running,
                ],
            )
            .await?;
        Ok(n == 1)
    }

    /// Hands a claimed job back (its instance stops): queued and due at
    /// once, the attempt not counted.
    pub async fn deletion_job_release(&self, job: &ClaimedDeletion) -> Result<bool, Error> {
        let conn = self.conn().await?;
        let n = conn
            .execute(
                "UPDATE deletion_jobs SET state = $4, attempts = greatest(attempts - 1, 0), \
                     locked_by = NULL, locked_until = NULL, run_after = now(), \
                     updated_at = now() \
                 WHERE id = $1 AND locked_by = $2 AND state = $3",
                &[
                    &job.id,
                    &job.worker,
                    &DeletionJobState::Running,
                    &DeletionJobState::Queued,
                ],
            )
            .await?;
        Ok(n == 1)
    }

    /// Moves the job to `step`; `false` when it is no longer this worker's.
    pub async fn deletion_job_advance(
        &self,
        job: &ClaimedDeletion,
        step: &str,
    ) -> Result<bool, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        if !holds_lease(&tx, job).await? {
            return Ok(false);
        }
        tx.execute(
            "UPDATE deletion_jobs SET step = $2, updated_at = now() WHERE id = $1",
            &[&job.id, &step],
        )
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Marks the job done.
    pub async fn deletion_job_finish(&self, job: &ClaimedDeletion) -> Result<bool, Error> {
        let conn = self.conn().await?;
        let n = conn
            .execute(
                "UPDATE deletion_jobs SET state = $4, step = 'done', locked_by = NULL, \
                     locked_until = NULL, last_error = NULL, finished_at = now(), \
                     updated_at = now() \
                 WHERE id = $1 AND locked_by = $2 AND state = $3",
                &[
                    &job.id,
                    &job.worker,
                    &DeletionJobState::Running,
                    &DeletionJobState::Done,
                ],
            )
            .await?;
        Ok(n == 1)
    }

    /// Records a failed attempt: queued again after a backoff (resuming at
    /// its step), or failed for good.
    pub async fn deletion_job_fail(
        &self,
        job: &ClaimedDeletion,
        failure: JobFailure<'_>,
    ) -> Result<(), Error> {
        let conn = self.conn().await?;
        match failure {
            JobFailure::Retry {
                error,
                backoff_secs,
            } => {
                conn.execute(
                    "UPDATE deletion_jobs SET state = $4, locked_by = NULL, locked_until = NULL, \
                         run_after = now() + make_interval(secs => $5), last_error = $6, \
                         updated_at = now() \
                     WHERE id = $1 AND locked_by = $2 AND state = $3",
                    &[
                        &job.id,
                        &job.worker,
                        &DeletionJobState::Running,
                        &DeletionJobState::Queued,
                        &backoff_secs,
                        &error,
                    ],
                )
                .await?;
            }
            JobFailure::Final { error } => {
                conn.execute(
                    "UPDATE deletion_jobs SET state = $4, locked_by = NULL, locked_until = NULL, \
                         last_error = $5, finished_at = now(), updated_at = now() \
                     WHERE id = $1 AND locked_by = $2 AND state = $3",
                    &[
                        &job.id,
                        &job.worker,
                        &DeletionJobState::Running,
                        &DeletionJobState::Failed,
                        &error,
                    ],
                )
                .await?;
            }
        }
        Ok(())
    }

    /// The organization job's first step: cancels ingestion and stops
    /// answers again (see [`stop_org_work`]). `false` when the job is no
    /// longer this worker's.
    pub async fn deletion_stop_org(&self, job: &ClaimedDeletion) -> Result<bool, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        if !holds_lease(&tx, job).await? {
            return Ok(false);
        }
        stop_org_work(&tx, job.subject).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Runs one batch statement of [`ORG_BATCHES`] or [`ACCOUNT_BATCHES`]
    /// (at most `limit` rows of the job's subject) and counts its rows, in
    /// one transaction; `None` when the job is no longer this worker's.
    pub async fn deletion_batch(
        &self,
        job: &ClaimedDeletion,
        sql: &str,
        limit: i64,
    ) -> Result<Option<u64>, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        if !holds_lease(&tx, job).await? {
            return Ok(None);
        }
        let n = tx.execute(sql, &[&job.subject, &limit]).await?;
        count(&tx, job, Counter::Rows, n).await?;
        tx.commit().await?;
        Ok(Some(n))
    }

    /// Deletes the job's subject row: the organization (its remaining rows
    /// cascade) or the user; counts the rows and moves to `next_step`, in
    /// one transaction. `false` when the job is no longer this worker's.
    pub async fn deletion_subject_row(
        &self,
        job: &ClaimedDeletion,
        next_step: &str,
    ) -> Result<bool, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        if !holds_lease(&tx, job).await? {
            return Ok(false);
        }
        let mut n = 0;
        let sql = match job.kind {
            DeletionJobKind::Organization => {
                // Uses of its public tools that other organizations' agents
                // added since the `tool_uses` step (they would hold the
                // tools, and so the organization, back).
                n += tx
                    .execute(
                        "DELETE FROM agent_tools WHERE tool_id IN \
                         (SELECT id FROM tools WHERE organization_id = $1)",
                        &[&job.subject],
                    )
                    .await?;
                "DELETE FROM organizations WHERE id = $1"
            }
            DeletionJobKind::Account => "DELETE FROM users WHERE id = $1",
        };
        n += tx.execute(sql, &[&job.subject]).await?;
        count(&tx, job, Counter::Rows, n).await?;
        tx.execute(
            "UPDATE deletion_jobs SET step = $2, updated_at = now() WHERE id = $1",
            &[&job.id, &next_step],
        )
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// The next MCP grants (sessions holding tokens) of the job's subject
    /// after `after`, at most `limit`, in id order.
    pub async fn deletion_grants(
        &self,
        job: &ClaimedDeletion,
        after: Uuid,
        limit: i64,
    ) -> Result<Vec<Grant>, Error> {
        let conn = self.conn().await?;
        let sql = match job.kind {
            DeletionJobKind::Organization => {
                "SELECT s.id, v.url, s.tokens_sealed FROM mcp_sessions s \
                 JOIN mcp_servers v ON v.id = s.server_id \
                 WHERE s.organization_id = $1 AND s.tokens_sealed IS NOT NULL AND s.id > $2 \
                 ORDER BY s.id LIMIT $3"
            }
            DeletionJobKind::Account => {
                "SELECT s.id, v.url, s.tokens_sealed FROM mcp_sessions s \
                 JOIN mcp_servers v ON v.id = s.server_id \
                 WHERE s.user_id = $1 AND s.tokens_sealed IS NOT NULL AND s.id > $2 \
                 ORDER BY s.id LIMIT $3"
            }
        };
        Ok(conn
            .query(sql, &[&job.subject, &after, &limit])
            .await?
            .iter()
            .map(|r| Grant {
                session_id: r.get("id"),
                server_url: r.get("url"),
                tokens_sealed: r.get("tokens_sealed"),
            })
            .collect())
    }

    /// Revokes one grant and deletes its session (its instance and hints
    /// cascade) in one transaction that holds the session's refresh lock
    /// (the advisory lock of its user and server, as refreshing does, then
    /// its row), so that a refresh cannot rotate the tokens under the
    /// revocation. `revoke` gets the tokens as stored once the lock is
    /// held and says what became of them ([`GrantOutcome`]). `None` when
    /// the job is no longer this worker's.
    pub async fn deletion_revoke_grant<F, Fut>(
        &self,
        job: &ClaimedDeletion,
        session_id: Uuid,
        revoke: F,
    ) -> Result<Option<GrantOutcome>, Error>
    where
        F: FnOnce(Option<Vec<u8>>) -> Fut,
        Fut: std::future::Future<Output = GrantOutcome>,
    {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        if !holds_lease(&tx, job).await? {
            return Ok(None);
        }
        let Some(owner) = tx
            .query_opt(
                "SELECT user_id, server_id FROM mcp_sessions WHERE id = $1",
                &[&session_id],
            )
            .await?
        else {
            return Ok(Some(GrantOutcome::Revoked));
        };
        let (user, server): (Uuid, Uuid) = (owner.get("user_id"), owner.get("server_id"));
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('mcp_refresh:' || $1::uuid::text || ':' || $2::uuid::text, 0))",
            &[&user, &server],
        )
        .await?;
        let Some(row) = tx
            .query_opt(
                "SELECT tokens_sealed FROM mcp_sessions WHERE id = $1 FOR UPDATE",
                &[&session_id],
            )
            .await?
        else {
            return Ok(Some(GrantOutcome::Revoked));
        };
        let outcome = revoke(row.get("tokens_sealed")).await;
        let counter = match outcome {
            GrantOutcome::Kept => return Ok(Some(GrantOutcome::Kept)),
            GrantOutcome::Revoked => Counter::Revoked,
            GrantOutcome::Unrevoked => Counter::Unrevoked,
        };
        let n = tx
            .execute("DELETE FROM mcp_sessions WHERE id = $1", &[&session_id])
            .await?;
        count(&tx, job, counter, 1).await?;
        count(&tx, job, Counter::Rows, n).await?;
        tx.commit().await?;
        Ok(Some(outcome))
    }

    /// The next uploads of the job's subject, at most `limit`: every file
    /// of an organization; the uploads of an account's private chats.
    /// Their id and storage key.
    pub async fn deletion_files(
        &self,
        job: &ClaimedDeletion,
        limit: i64,
    ) -> Result<Vec<(Uuid, String)>, Error> {
        let conn = self.conn().await?;
        let sql = match job.kind {
            DeletionJobKind::Organization => {
                "SELECT id, storage_key FROM files WHERE organization_id = $1 LIMIT $2"
            }
            DeletionJobKind::Account => {
                "SELECT f.id, f.storage_key FROM files f \
                 WHERE f.organization_id IN (SELECT DISTINCT organization_id FROM chats \
                                             WHERE user_id = $1) \
                   AND f.chat_id IN (SELECT id FROM chats WHERE user_id = $1) \
                 LIMIT $2"
            }
        };
        Ok(conn
            .query(sql, &[&job.subject, &limit])
            .await?
            .iter()
            .map(|r| (r.get("id"), r.get("storage_key")))
            .collect())
    }

    /// Deletes the rows of uploads whose bytes were deleted from the store
    /// and counts them; `None` when the job is no longer this worker's.
    pub async fn deletion_files_forget(
        &self,
        job: &ClaimedDeletion,
        ids: &[Uuid],
    ) -> Result<Option<u64>, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        if !holds_lease(&tx, job).await? {
            return Ok(None);
        }
        let n = tx
            .execute("DELETE FROM files WHERE id = ANY($1)", &[&ids])
            .await?;
        count(&tx, job, Counter::Files, n).await?;
        count(&tx, job, Counter::Rows, n).await?;
        tx.commit().await?;
        Ok(Some(n))
    }

    /// Counts objects deleted from the store without a row (the sweep of
    /// an organization's folder); `false` when the job is no longer this
    /// worker's.
    pub async fn deletion_count_files(&self, job: &ClaimedDeletion, n: u64) -> Result<bool, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        if !holds_lease(&tx, job).await? {
            return Ok(false);
        }
        count(&tx, job, Counter::Files, n).await?;
        tx.commit().await?;
        Ok(true)
    }
}

/// Whether `job` is still this worker's, locking its row for the
/// transaction.
async fn holds_lease(tx: &Tx<'_>, job: &ClaimedDeletion) -> Result<bool, Error> {
    Ok(tx
        .query_opt(
            HOLDS_LEASE,
            &[&job.id, &job.worker, &DeletionJobState::Running],
        )
        .await?
        .is_some())
}

/// A counter of a deletion job.
#[derive(Clone, Copy)]
enum Counter {
    Rows,
    Files,
    Revoked,
    Unrevoked,
}

/// Adds `n` to one of the job's counters.
async fn count(tx: &Tx<'_>, job: &ClaimedDeletion, counter: Counter, n: u64) -> Result<(), Error> {
    let sql = match counter {
        Counter::Rows => {
            "UPDATE deletion_jobs SET rows_deleted = rows_deleted + $2, updated_at = now() \
             WHERE id = $1"
        }
        Counter::Files => {
            "UPDATE deletion_jobs SET files_deleted = files_deleted + $2, updated_at = now() \
             WHERE id = $1"
        }
        Counter::Revoked => {
            "UPDATE deletion_jobs SET grants_revoked = grants_revoked + $2::bigint::int, \
             updated_at = now() WHERE id = $1"
        }
        Counter::Unrevoked => {
            "UPDATE deletion_jobs SET grants_unrevoked = grants_unrevoked + $2::bigint::int, \
             updated_at = now() WHERE id = $1"
        }
    };
    let n = i64::try_from(n).unwrap_or(i64::MAX);
    tx.execute(sql, &[&job.id, &n]).await?;
    Ok(())
}
