//! The audit log's reads (issue #36): the list with its opaque cursor,
//! the JSON Lines export streamed page by page, the verification of the
//! chains against their newest signed checkpoints, and the publishing of
//! those checkpoints. Writing is the data layer's
//! (`db::datastore::audit::record`, inside each change's transaction).
//!
//! The export's bound: a writer task reads [`EXPORT_PAGE`] events at a
//! time by the list's keyset cursor and hands chunks of about
//! [`CHUNK_BYTES`] to the response through a channel of
//! [`CHUNKS_IN_FLIGHT`], waiting while the client has not read them (as
//! the feedback export does).
//!
//! Checkpoints: every instance verifies each chain from its last
//! checkpoint and publishes a signed statement of the chain's last row
//! ([`Checkpoint`]: chain, seq, hash, first keyed seq, time; HMAC under a
//! key derived from the key file's audit key) to its log, to its
//! checkpoint file (appended, 0600) and to the bucket when the file store
//! is S3 ([`Checkpoints`]). Verification reads the newest one it can reach
//! (file, bucket): rows removed at the end of a chain, or a chain rewritten
//! from before a checkpoint, contradict it.

use crate::audit::{AuditKeys, Checkpoint};
use crate::context::{AuditReader, ServerContext};
use crate::db::datastore::audit::{AuditFilter, AuditRow, ChainProblem, SYSTEM_CHAIN};
use crate::error::Error;
use base64::Engine;
use bytes::Bytes;
use tokio::sync::mpsc;
use workspace_api::audit as api;

/// Events read per page of the export.
pub const EXPORT_PAGE: i64 = 500;
/// The size a chunk of the export is sent at.
const CHUNK_BYTES: usize = 64 * 1024;
/// Chunks waiting for the client at most.
const CHUNKS_IN_FLIGHT: usize = 4;

type Chunk = Result<Bytes, std::io::Error>;

/// The filters, checked: `action` ending with `*` is a prefix.
#[allow(clippy::too_many_arguments)]
fn filter(
    actor_id: Option<uuid::Uuid>,
    action: Option<String>,
    target_kind: Option<String>,
    target_id: Option<String>,
    outcome: Option<api::AuditOutcome>,
    from: Option<chrono::DateTime<chrono::Utc>>,
    to: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<AuditFilter, Error> {
    for text in [&action, &target_kind, &target_id].into_iter().flatten() {
        if text.is_empty() || text.chars().count() > api::FILTER_MAX_CHARS {
            return Err(Error::invalid(
                workspace_api::extract::INVALID_REQUEST,
                format!("filters are 1 to {} characters", api::FILTER_MAX_CHARS),
            ));
        }
    }
    let (action, action_prefix) = match action {
        Some(a) => match a.strip_suffix('*') {
            Some(prefix) => (Some(prefix.to_string()), true),
            None => (Some(a), false),
        },
        None => (None, false),
    };
    Ok(AuditFilter {
        actor_id,
        action,
        action_prefix,
        target_kind,
        target_id,
        from,
        to,
        outcome: outcome.map(|o| outcome_name(o).to_string()),
    })
}

fn outcome_name(o: api::AuditOutcome) -> &'static str {
    match o {
        api::AuditOutcome::Success => "success",
        api::AuditOutcome::Failure => "failure",
        api::AuditOutcome::Denied => "denied",
    }
}

fn event(row: AuditRow) -> api::AuditEvent {
    let actor_kind = match row.actor_kind.as_str() {
        "user" => api::AuditActorKind::User,
        "token" => api::AuditActorKind::Token,
        "deployment_key" => api::AuditActorKind::DeploymentKey,
        "anonymous" => api::AuditActorKind::Anonymous,
        _ => api::AuditActorKind::System,
    };
    let outcome = match row.outcome.as_str() {
        "failure" => api::AuditOutcome::Failure,
        "denied" => api::AuditOutcome::Denied,
        _ => api::AuditOutcome::Success,
    };
    api::AuditEvent {
        id: row.id,
        occurred_at: row.occurred_at,
        org_id: row.organization_id,
        seq: row.seq,
        actor_kind,
        actor_id: row.actor_id,
        actor_user_id: row.actor_user_id,
        action: row.action,
        target_kind: row.target_kind,
        target_id: row.target_id,
        outcome,
        address: row.address,
        user_agent: row.user_agent,
        request_id: row.request_id,
        details: row.details,
        hash: row.hash.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

pub async fn list(
    cx: &ServerContext,
    reader: &AuditReader,
    query: api::AuditListQuery,
) -> Result<api::AuditPage, Error> {
    let limit = query.limit.unwrap_or(api::LIST_DEFAULT_LIMIT);
    if !(1..=api::LIST_MAX_LIMIT).contains(&limit) {
        return Err(Error::invalid(
            "invalid_pagination",
            format!("limit must be 1 to {}", api::LIST_MAX_LIMIT),
        ));
    }
    let before = query.cursor.as_deref().map(decode_cursor).transpose()?;
    let filter = filter(
        query.actor_id,
        query.action,
        query.target_kind,
        query.target_id,
        query.outcome,
        query.from,
        query.to,
    )?;
    let mut rows = cx
        .datastore
        .audit_page(reader.scope(), &filter, before, i64::from(limit) + 1)
        .await?;
    let next_cursor = if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        rows.last().map(|r| encode_cursor(r.id))
    } else {
        None
    };
    Ok(api::AuditPage {
        items: rows.into_iter().map(event).collect(),
        next_cursor,
    })
}

/// An opaque cursor: URL-safe base64 of the last event's id (8 bytes).
fn encode_cursor(id: i64) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.to_be_bytes())
}

fn decode_cursor(text: &str) -> Result<i64, Error> {
    let invalid = || {
        Error::invalid(
            "invalid_cursor",
            "cursor is not a `next_cursor` of this list",
        )
    };
    // Any 11 characters of the alphabet are a cursor (the document's
    // pattern): the 2 bits past the id's 64 are ignored.
    const LENIENT: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
        &base64::alphabet::URL_SAFE,
        base64::engine::GeneralPurposeConfig::new()
            .with_encode_padding(false)
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::RequireNone),
    );
    let bytes = LENIENT.decode(text.trim()).map_err(|_| invalid())?;
    let id: [u8; 8] = bytes.try_into().map_err(|_| invalid())?;
    Ok(i64::from_be_bytes(id))
}

pub async fn export(
    cx: &ServerContext,
    reader: AuditReader,
    query: api::AuditExportQuery,
) -> Result<http::Response<dropshot::Body>, Error> {
    let filter = filter(
        query.actor_id,
        query.action,
        query.target_kind,
        query.target_id,
        query.outcome,
        query.from,
        query.to,
    )?;
    let first = cx
        .datastore
        .audit_page(reader.scope(), &filter, None, EXPORT_PAGE)
        .await?;
    let (tx, rx) = mpsc::channel::<Chunk>(CHUNKS_IN_FLIGHT);
    let datastore = cx.datastore.clone();
    crate::telemetry::spawn(async move {
        let log = reader.log().clone();
        match write_all(&datastore, &reader, &filter, first, &tx).await {
            Ok(()) | Err(Stop::ClientGone) => {}
            Err(Stop::Failed(e)) => {
                slog::warn!(log, "the audit export failed part-way; ending its response";
                    "error" => %e);
                let _ = tx.send(Err(std::io::Error::other("export failed"))).await;
            }
        }
    });
    let frames = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|chunk| (chunk.map(hyper::body::Frame::data), rx))
    });
    http::Response::builder()
        .status(http::StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "application/jsonl")
        .header(
            http::header::CONTENT_DISPOSITION,
            "attachment; filename=\"audit.jsonl\"",
        )
        .header(http::header::CACHE_CONTROL, "no-store")
        .body(dropshot::Body::wrap(http_body_util::StreamBody::new(
            frames,
        )))
        .map_err(Error::internal)
}

enum Stop {
    ClientGone,
    Failed(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Failed(e)
    }
}

async fn write_all(
    datastore: &crate::db::Datastore,
    reader: &AuditReader,
    filter: &AuditFilter,
    first: Vec<AuditRow>,
    tx: &mpsc::Sender<Chunk>,
) -> Result<(), Stop> {
    let mut page = first;
    let mut buffer = Vec::new();
    loop {
        let full = page.len() as i64 == EXPORT_PAGE;
        let after = page.last().map(|r| r.id);
        for row in page {
            serde_json::to_writer(&mut buffer, &event(row)).map_err(Error::internal)?;
            buffer.push(b'\n');
            if buffer.len() >= CHUNK_BYTES {
                let chunk = Bytes::from(std::mem::take(&mut buffer));
                tx.send(Ok(chunk)).await.map_err(|_| Stop::ClientGone)?;
            }
        }
        if !full {
            break;
        }
        page = datastore
            .audit_page(reader.scope(), filter, after, EXPORT_PAGE)
            .await?;
    }
    if !buffer.is_empty() {
        tx.send(Ok(Bytes::from(buffer)))
            .await
            .map_err(|_| Stop::ClientGone)?;
    }
    Ok(())
}

pub async fn verify(
    cx: &ServerContext,
    reader: &AuditReader,
) -> Result<api::AuditVerification, Error> {
    let sinks = Checkpoints::from_config(&cx.config).map_err(Error::internal)?;
    let chains = cx.datastore.audit_chains(reader.scope()).await?;
    let newest = sinks.newest(&chains, reader.log()).await;
    let mut checks = Vec::new();
    for chain in chains {
        let check = cx
            .datastore
            .audit_verify_chain(chain, newest.get(&chain), false)
            .await?;
        checks.push(api::AuditChainCheck {
            org_id: (check.chain_id != SYSTEM_CHAIN).then_some(check.chain_id),
            checked: check.checked,
            head_seq: check.head_seq,
            ok: check.broken_at.is_none(),
            first_broken_seq: check.broken_at,
            reason: check.problem.map(|p| p.describe().to_string()),
            problem: check.problem.map(problem),
            keyed_from_seq: check.keyed_from,
            checkpoint: check.checkpoint.map(|c| api::AuditCheckpoint {
                seq: c.seq,
                hash: hex(&c.hash),
                at: c.at,
                keyed_from_seq: c.keyed_from,
            }),
        });
    }
    Ok(api::AuditVerification {
        ok: checks.iter().all(|c| c.ok),
        chains: checks,
    })
}

fn problem(p: ChainProblem) -> api::AuditChainProblem {
    match p {
        ChainProblem::MacMismatch => api::AuditChainProblem::MacMismatch,
        ChainProblem::PrevHashMismatch => api::AuditChainProblem::PrevHashMismatch,
        ChainProblem::MissingRows => api::AuditChainProblem::MissingRows,
        ChainProblem::RowsAfterHead => api::AuditChainProblem::RowsAfterHead,
        ChainProblem::HeadMismatch => api::AuditChainProblem::HeadMismatch,
        ChainProblem::CheckpointMismatch => api::AuditChainProblem::CheckpointMismatch,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The name of the checkpoint file beside the key file.
pub const CHECKPOINT_FILE_NAME: &str = "audit-checkpoints.jsonl";

/// The folder of the checkpoints in object storage: one object per chain,
/// `audit-checkpoints/<chain id>.json`, replaced by each newer checkpoint.
const CHECKPOINT_PREFIX: &str = "audit-checkpoints";

/// Where this instance publishes its signed checkpoints besides its log,
/// and reads them back to verify: its checkpoint file, and the bucket when
/// the file store is S3 (shared by every instance).
pub struct Checkpoints {
    file: std::path::PathBuf,
    bucket: Option<object_store::aws::AmazonS3>,
}

impl Checkpoints {
    /// `audit.checkpoint_file`, else beside the key file, else in the data
    /// directory; the configured bucket.
    pub fn from_config(config: &crate::config::Config) -> anyhow::Result<Checkpoints> {
        let file = match (&config.audit.checkpoint_file, &config.secrets.key_file) {
            (Some(file), _) => file.clone(),
            (None, Some(key_file)) => key_file
                .parent()
                .map(|dir| dir.join(CHECKPOINT_FILE_NAME))
                .unwrap_or_else(|| CHECKPOINT_FILE_NAME.into()),
            (None, None) => crate::data_root(config).join(CHECKPOINT_FILE_NAME),
        };
        let bucket = match config.storage.backend {
            crate::kb_config::StorageBackend::S3 => {
                Some(crate::storage::s3_store(&config.storage.s3)?)
            }
            crate::kb_config::StorageBackend::Local => None,
        };
        Ok(Checkpoints { file, bucket })
    }

    /// The newest checkpoint (the highest `seq`) of each of `chains` signed
    /// with this server's key, from the file and the bucket. Lines and
    /// objects that are not such checkpoints (forged, damaged, another
    /// deployment's) are skipped; a source that cannot be read is logged
    /// and skipped.
    pub async fn newest(
        &self,
        chains: &[uuid::Uuid],
        log: &slog::Logger,
    ) -> std::collections::HashMap<uuid::Uuid, Checkpoint> {
        let mut newest = std::collections::HashMap::new();
        let Some(keys) = crate::audit::keys() else {
            return newest;
        };
        let mut keep = |c: Checkpoint| {
            if chains.contains(&c.chain_id) {
                let slot = newest.entry(c.chain_id).or_insert_with(|| c.clone());
                if c.seq > slot.seq {
                    *slot = c;
                }
            }
        };
        match tokio::fs::read_to_string(&self.file).await {
            Ok(text) => {
                for line in text.lines().filter(|l| !l.trim().is_empty()) {
                    if let Ok(c) = Checkpoint::from_line(line, &keys) {
                        keep(c);
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => slog::warn!(log, "cannot read the audit checkpoint file";
                "file" => self.file.display().to_string(), "error" => %e),
        }
        if let Some(bucket) = &self.bucket {
            use object_store::ObjectStoreExt as _;
            for chain in chains {
                let path =
                    object_store::path::Path::from(format!("{CHECKPOINT_PREFIX}/{chain}.json"));
                let got = match bucket.get(&path).await {
                    Ok(got) => got.bytes().await,
                    Err(e) => Err(e),
                };
                match got {
                    Ok(bytes) => {
                        if let Ok(c) =
                            Checkpoint::from_line(&String::from_utf8_lossy(&bytes), &keys)
                        {
                            keep(c);
                        }
                    }
                    Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => slog::warn!(log, "cannot read an audit checkpoint from the bucket";
                        "object" => path.to_string(), "error" => %e),
                }
            }
        }
        newest
    }

    /// Publishes `checkpoint`: to the log, appended to the file (made
    /// 0600), and to the bucket. A destination that fails is logged; the
    /// others still get it.
    async fn publish(&self, checkpoint: &Checkpoint, keys: &AuditKeys, log: &slog::Logger) {
        let line = checkpoint.to_line(keys);
        slog::info!(log, "audit checkpoint";
            "chain_id" => %checkpoint.chain_id, "seq" => checkpoint.seq,
            "checkpoint" => &line);
        if let Err(e) = append_line(&self.file, &line).await {
            slog::warn!(log, "cannot append to the audit checkpoint file";
                "file" => self.file.display().to_string(), "error" => %e);
        }
        if let Some(bucket) = &self.bucket {
            use object_store::ObjectStoreExt as _;
            let path = object_store::path::Path::from(format!(
                "{CHECKPOINT_PREFIX}/{}.json",
                checkpoint.chain_id
            ));
            if let Err(e) = bucket.put(&path, line.into_bytes().into()).await {
                slog::warn!(log, "cannot store an audit checkpoint in the bucket";
                    "object" => path.to_string(), "error" => %e);
            }
        }
    }
}

/// Appends one line to the checkpoint file (created 0600). One `write` of
/// a line opened with `O_APPEND`: instances sharing the file do not
/// interleave within a line.
async fn append_line(path: &std::path::Path, line: &str) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut file = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .await?;
    file.write_all(format!("{line}\n").as_bytes()).await?;
    file.flush().await
}

/// Publishes a signed checkpoint of every chain that grew, every
/// `interval` (and once at start), on every instance: each chain is first
/// verified from this instance's last checkpoint of it (the whole chain
/// the first time), and only a chain that verifies is checkpointed, so a
/// checkpoint never vouches for rows changed by hand. A broken chain is
/// logged as an error (once per broken `seq`).
pub async fn checkpoints(
    datastore: crate::db::Datastore,
    sinks: Checkpoints,
    interval: std::time::Duration,
    log: slog::Logger,
) {
    let mut last: std::collections::HashMap<uuid::Uuid, Checkpoint> = Default::default();
    let mut reported = std::collections::HashSet::new();
    let mut first = true;
    loop {
        if let Some(keys) = crate::audit::keys() {
            match datastore.audit_chain_ids().await {
                Ok(chains) => {
                    if first {
                        last = sinks.newest(&chains, &log).await;
                        first = false;
                    }
                    for chain in chains {
                        let prev = last.get(&chain);
                        match datastore.audit_verify_chain(chain, prev, true).await {
                            Ok(check) => {
                                if let (Some(seq), Some(p)) = (check.broken_at, check.problem) {
                                    if reported.insert((chain, seq)) {
                                        slog::error!(log, "the audit chain is broken: no checkpoint";
                                            "chain_id" => %chain, "first_broken_seq" => seq,
                                            "problem" => p.describe());
                                    }
                                } else if check.last_seq > prev.map_or(0, |c| c.seq) {
                                    let checkpoint = Checkpoint::now(
                                        chain,
                                        check.last_seq,
                                        check.last_hash,
                                        check.keyed_from,
                                    );
                                    sinks.publish(&checkpoint, &keys, &log).await;
                                    last.insert(chain, checkpoint);
                                }
                            }
                            Err(e) => slog::warn!(log, "verifying an audit chain failed";
                                "chain_id" => %chain, "error" => %e),
                        }
                    }
                }
                Err(e) => slog::warn!(log, "listing the audit chains failed"; "error" => %e),
            }
        }
        tokio::time::sleep(interval).await;
    }
}

/// The log's maintenance, every `interval` on every instance (one at a
/// time does the work: see `Datastore::audit_maintain`): partitions
/// ahead, and retention when `audit.retention_days` is set.
pub async fn maintenance(
    datastore: crate::db::Datastore,
    retention_days: Option<u32>,
    interval: std::time::Duration,
    log: slog::Logger,
) {
    loop {
        match datastore.audit_maintain(retention_days).await {
            Ok(dropped) if !dropped.is_empty() => {
                slog::info!(log, "audit retention dropped partitions";
                    "partitions" => dropped.join(","));
            }
            Ok(_) => {}
            Err(e) => slog::warn!(log, "audit maintenance failed"; "error" => %e),
        }
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        assert_eq!(decode_cursor(&encode_cursor(42)).unwrap(), 42);
        assert_eq!(encode_cursor(42).len(), 11);
        assert!(decode_cursor("nope").is_err());
        // Any 11 characters of the alphabet (the document's pattern).
        for edge in ["___________", "AAAAAAAAAAA", "AAAAAAAAAAB"] {
            assert!(decode_cursor(edge).is_ok(), "{edge}");
        }
        assert!(decode_cursor("").is_err());
    }
}
