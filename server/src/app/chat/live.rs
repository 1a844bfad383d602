//! The live channel: notices to a user's WebSocket clients on every
//! instance, and the WebSocket itself (tickets, serving, closing).

use crate::authz::perm::Permission as _;
use crate::authz::{Grant, LiveAccess, OrgAccess, on, perm};
use crate::context::{ServerContext, ShutdownPhase};
use crate::db::Datastore;
use crate::db::datastore::chat::LIVE_CHANNEL;
use crate::db::enums::ChatMessageStatus;
use crate::error::Error;
use futures::StreamExt;
use serde_json::{Value, json};
use std::time::Duration;
use uuid::Uuid;

// ---- live notices (WebSocket) ----

/// The payload of a live notice: `<org_id>:<user_id>:<json>`.
pub(super) fn live_payload(org_id: Uuid, user_id: Uuid, notice: &Value) -> String {
    format!("{org_id}:{user_id}:{notice}")
}

/// The live notice that an answer ended (`ChatLiveEvent::Message`).
pub(super) fn message_notice(chat_id: Uuid, message_id: Uuid, status: ChatMessageStatus) -> Value {
    json!({"type": "message", "chat_id": chat_id, "message_id": message_id,
        "status": status.as_str()})
}

/// Tells the owners' WebSocket clients, on every instance, that a sweeper
/// closed these chat answers (`failed`), as the answers' own instance
/// would have had it not stopped.
pub async fn announce_swept(datastore: &Datastore, answer_ids: &[Uuid], log: &slog::Logger) {
    let owners = match datastore.chat_answer_owners(answer_ids).await {
        Ok(owners) => owners,
        Err(e) => {
            slog::warn!(log, "finding the owners of swept answers failed"; "error" => %e);
            return;
        }
    };
    for owner in owners {
        let notice = message_notice(owner.chat_id, owner.message_id, ChatMessageStatus::Failed);
        let payload = live_payload(owner.org_id, owner.user_id, &notice);
        if let Err(e) = datastore.notify(LIVE_CHANNEL, &payload).await {
            slog::warn!(log, "sending the live notice failed"; "error" => %e);
        }
    }
}

/// Sends a notice to the caller's WebSocket clients of this organization
/// on every instance (payload `<org_id>:<user_id>:<json>`).
pub async fn live_notice(cx: &ServerContext, access: &OrgAccess, notice: Value) {
    if let Err(e) = cx
        .datastore
        .notify(
            LIVE_CHANNEL,
            &live_payload(access.org_id(), access.user_id(), &notice),
        )
        .await
    {
        slog::debug!(cx.log, "sending a live notice failed"; "error" => %e);
    }
}

// ---- WebSocket ----

/// How long a WebSocket ticket stays valid.
const TICKET_LIFETIME: Duration = Duration::from_secs(60);

pub async fn ws_ticket(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsRead>,
) -> Result<workspace_api::chat::WsTicket, Error> {
    use base64::Engine;
    let mut raw = [0u8; 32];
    rand::fill(&mut raw);
    let ticket = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw);
    let expires_at = chrono::Utc::now()
        + chrono::Duration::from_std(TICKET_LIFETIME).map_err(Error::internal)?;
    cx.datastore
        .chat_ws_ticket_insert(grant, &crate::authn::hash_ticket(&ticket), expires_at)
        .await?;
    Ok(workspace_api::chat::WsTicket { ticket, expires_at })
}

/// How often an open WebSocket re-checks its user's membership (besides
/// at once at each membership notice).
const WS_RECHECK: Duration = Duration::from_secs(30);

/// Whether the user is still an active member with `chats:read` (a
/// database outage keeps the socket open).
async fn ws_still_allowed(cx: &ServerContext, access: &LiveAccess) -> bool {
    use crate::db::datastore::organizations::AccessLookup;
    match cx
        .datastore
        .access_lookup_member(access.user_id(), crate::authz::Scope::Org(access.org_id()))
        .await
    {
        Ok(AccessLookup::Member { membership, .. }) => {
            crate::authz::permits(&membership.permissions, perm::ChatsRead::NAME.name())
        }
        Ok(_) => false,
        Err(_) => true,
    }
}

/// Resolves at the next notice of a route (or a reconnect of the
/// listener, or notices lost to a lag); never once the route is closed.
async fn notified(rx: &mut tokio::sync::broadcast::Receiver<crate::chat_hub::Notice>) {
    use tokio::sync::broadcast::error::RecvError;
    match rx.recv().await {
        Ok(_) | Err(RecvError::Lagged(_)) => {}
        Err(RecvError::Closed) => std::future::pending().await,
    }
}

/// Closes a WebSocket with a code and a reason (best effort: the client
/// may already be gone).
pub async fn ws_close<S>(
    ws: &mut tokio_tungstenite::WebSocketStream<S>,
    code: tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode,
    reason: &'static str,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio_tungstenite::tungstenite::protocol::CloseFrame;
    let _ = ws
        .close(Some(CloseFrame {
            code,
            reason: reason.into(),
        }))
        .await;
}

/// Serves an authenticated chat WebSocket until the client leaves (or the
/// server shuts down).
pub async fn ws_serve<S>(
    cx: &ServerContext,
    access: LiveAccess,
    mut ws: tokio_tungstenite::WebSocketStream<S>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use futures::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
    let (org_id, user_id) = (access.org_id(), access.user_id());
    let mut notices = cx
        .chat_hub
        .subscribe(LIVE_CHANNEL, &format!("{org_id}:{user_id}"));
    // A suspension, a removal or a role change of the user in this
    // organization, from any instance: re-checked at once.
    let mut membership = cx.chat_hub.subscribe(
        crate::db::datastore::organizations::MEMBERSHIP_CHANNEL,
        &format!("{org_id}:{user_id}"),
    );
    let mut shutdown = cx.shutdown.subscribe();
    if !ws_still_allowed(cx, &access).await {
        return Ok(());
    }
    let ready = workspace_api::chat::ChatLiveEvent::Ready { org_id, user_id };
    ws.send(Message::text(serde_json::to_string(&ready)?))
        .await?;
    let prefix = format!("{org_id}:{user_id}:");
    let mut recheck = tokio::time::interval(WS_RECHECK);
    recheck.tick().await;
    loop {
        tokio::select! {
            // The server shuts down: the client reconnects elsewhere.
            _ = async {
                shutdown.wait_for(|phase| *phase != ShutdownPhase::Serving).await.is_ok()
            } => {
                ws_close(&mut ws, CloseCode::Away, "the server is shutting down").await;
                break;
            }
            _ = recheck.tick() => {
                // A member who left, or lost chats:read, stops hearing.
                if !ws_still_allowed(cx, &access).await {
                    ws_close(&mut ws, CloseCode::Policy, "no longer allowed").await;
                    break;
                }
            }
            () = notified(&mut membership) => {
                if !ws_still_allowed(cx, &access).await {
                    ws_close(&mut ws, CloseCode::Policy, "no longer allowed").await;
                    break;
                }
            }
            notice = notices.recv() => match notice {
                Ok(n) if n.channel == LIVE_CHANNEL => {
                    if let Some(json) = n.payload.strip_prefix(&prefix)
                        && ws.send(Message::text(json.to_string())).await.is_err()
                    {
                        break;
                    }
                }
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            },
            incoming = ws.next() => match incoming {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => break,
                Some(Ok(_)) => {}
            },
        }
    }
    Ok(())
}
