//! The audit log's reads (issue #36): the list with its opaque cursor,
//! the JSON Lines export streamed page by page, and the verification of
//! the hash chains. Writing is the data layer's
//! (`db::datastore::audit::record`, inside each change's transaction).
//!
//! The export's bound: a writer task reads [`EXPORT_PAGE`] events at a
//! time by the list's keyset cursor and hands chunks of about
//! [`CHUNK_BYTES`] to the response through a channel of
//! [`CHUNKS_IN_FLIGHT`], waiting while the client has not read them (as
//! the feedback export does).

use crate::context::{AuditReader, ServerContext};
use crate::db::datastore::audit::{AuditFilter, AuditRow, SYSTEM_CHAIN};
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
    let mut chains = Vec::new();
    for chain in cx.datastore.audit_chains(reader.scope()).await? {
        let check = cx.datastore.audit_verify_chain(chain).await?;
        chains.push(api::AuditChainCheck {
            org_id: (check.chain_id != SYSTEM_CHAIN).then_some(check.chain_id),
            checked: check.checked,
            head_seq: check.head_seq,
            ok: check.broken_at.is_none(),
            first_broken_seq: check.broken_at,
            reason: check.reason,
        });
    }
    Ok(api::AuditVerification {
        ok: chains.iter().all(|c| c.ok),
        chains,
    })
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
