//! Share links of chats (issue #35): the rules of a snapshot (what of a
//! chat's active path a reader sees, its bounds), the link's token (shown
//! once, stored as its SHA-256), and reading a link without an account.

use super::auth::{Limited, rate_limit};
use crate::authz::{Grant, OrgAccess, on, perm};
use crate::context::ServerContext;
use crate::db::datastore::chat_shares::{NewShare, PathMessageRow, ShareCreated, ShareRow};
use crate::db::enums::{ChatMessageStatus, ChatRole};
use crate::error::Error;
use std::net::IpAddr;
use uuid::Uuid;
use workspace_api::chat::ChatRole as ApiRole;
use workspace_api::chat_shares::{
    ChatShare, ChatShareCreated, ChatSharesQuery, SHARE_BYTES_MAX, SHARE_MESSAGES_MAX,
    SHARE_PAGE_PREFIX, SHARE_TOKEN_PREFIX, SHARES_PER_USER_MAX, SharedChat, SharedMessage,
    SharedMessageStatus,
};
use workspace_api::orgs::MessageResponse;

/// The one answer to a link that cannot be read, whatever the reason
/// (unknown, malformed, revoked, deleted): no oracle.
fn not_found() -> Error {
    Error::NotFound {
        what: "shared chat",
    }
}

/// The messages of a snapshot, from the active path read oldest first: a
/// message still streaming ends the snapshot (nothing after it is
/// shown); a message without text (an answer that failed or was stopped
/// before its first word) is left out; an answer's model is named by its
/// name only.
pub(crate) fn snapshot_messages(rows: Vec<PathMessageRow>) -> Vec<SharedMessage> {
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let status = match row.status {
            ChatMessageStatus::Streaming => break,
            ChatMessageStatus::Complete => SharedMessageStatus::Complete,
            ChatMessageStatus::Stopped => SharedMessageStatus::Stopped,
            ChatMessageStatus::Failed => SharedMessageStatus::Failed,
        };
        if row.content.trim().is_empty() {
            continue;
        }
        let (role, model) = match row.role {
            ChatRole::User => (ApiRole::User, None),
            ChatRole::Model => (ApiRole::Model, row.model),
        };
        out.push(SharedMessage {
            role,
            content: row.content,
            created_at: row.created_at,
            model,
            status,
        });
    }
    out
}

fn too_large(messages: i64, bytes: i64) -> Error {
    Error::conflict(
        "share_too_large",
        format!(
            "the chat's active path has {messages} messages and {bytes} bytes of text; a share \
             link holds at most {SHARE_MESSAGES_MAX} messages and {SHARE_BYTES_MAX} bytes"
        ),
    )
}

fn summary(row: ShareRow) -> ChatShare {
    ChatShare {
        id: row.id,
        chat_id: row.chat_id,
        title: row.title,
        message_count: u32::try_from(row.message_count).unwrap_or(0),
        views: row.views,
        created_at: row.created_at,
        revoked_at: row.revoked_at,
    }
}

/// `POST /api/chat/share`: snapshots the caller's chat's active path now
/// and stores it under a new token's hash; the answer shows the token.
pub async fn create(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsWrite>,
    chat_id: Uuid,
) -> Result<ChatShareCreated, Error> {
    let path = cx
        .datastore
        .chat_share_path(
            grant,
            chat_id,
            SHARE_MESSAGES_MAX as i64,
            SHARE_BYTES_MAX as i64,
        )
        .await?
        .ok_or(Error::NotFound { what: "chat" })?;
    if path.messages > SHARE_MESSAGES_MAX as i64 || path.bytes > SHARE_BYTES_MAX as i64 {
        return Err(too_large(path.messages, path.bytes));
    }
    let messages = snapshot_messages(path.rows);
    if messages.is_empty() {
        return Err(Error::conflict(
            "nothing_to_share",
            "the chat has no finished message to share yet",
        ));
    }
    let snapshot = serde_json::to_value(&messages)
        .map_err(|e| Error::internal(format!("serializing a snapshot: {e}")))?;
    let (token, hash) = crate::authn::new_secret(SHARE_TOKEN_PREFIX);
    let message_count = messages.len() as i32;
    let stored = cx
        .datastore
        .chat_share_create(
            grant,
            &NewShare {
                chat_id,
                token_hash: &hash,
                title: &path.title,
                snapshot,
                message_count,
                live_max: SHARES_PER_USER_MAX,
            },
        )
        .await?;
    let row = match stored {
        ShareCreated::Created(row) => row,
        ShareCreated::NoChat => return Err(Error::NotFound { what: "chat" }),
        ShareCreated::TooMany => {
            return Err(Error::conflict(
                "too_many_shares",
                format!(
                    "you hold {SHARES_PER_USER_MAX} live share links in this organization, the \
                     most there can be; revoke one first"
                ),
            ));
        }
    };
    let page = format!("{SHARE_PAGE_PREFIX}{token}");
    let url = format!("{}{page}", cx.config.mail.link_base());
    let ChatShare {
        id,
        chat_id,
        title,
        message_count,
        created_at,
        ..
    } = summary(row);
    Ok(ChatShareCreated {
        id,
        chat_id,
        title,
        message_count,
        created_at,
        token,
        path: page,
        url,
    })
}

/// `GET /api/chat/shares/list`.
pub async fn list(
    cx: &ServerContext,
    access: &OrgAccess,
    query: ChatSharesQuery,
) -> Result<Vec<ChatShare>, Error> {
    let page = super::page(query.limit, query.offset)?;
    Ok(cx
        .datastore
        .chat_share_list(access, query.chat_id, page)
        .await?
        .into_iter()
        .map(summary)
        .collect())
}

/// `DELETE /api/chat/share/revoke`.
pub async fn revoke(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsWrite>,
    share_id: Uuid,
) -> Result<MessageResponse, Error> {
    if !cx.datastore.chat_share_revoke(grant, share_id).await? {
        return Err(Error::NotFound { what: "share link" });
    }
    Ok(MessageResponse {
        message: "share link revoked".into(),
    })
}

/// `GET /api/shared`: counted against the client address's limit first
/// (found or not, so guessing is bounded), then a token of the wrong shape
/// is not looked up; every failure is the same `404 not_found`.
pub async fn read(cx: &ServerContext, token: &str, client: IpAddr) -> Result<SharedChat, Error> {
    rate_limit(cx, Limited::SharedChat, client).await?;
    if !crate::authn::is_secret_shaped(token, SHARE_TOKEN_PREFIX) {
        return Err(not_found());
    }
    let hash = crate::authn::hash_secret(token);
    let row = cx
        .datastore
        .chat_shared_read(&hash)
        .await?
        .ok_or_else(not_found)?;
    let messages: Vec<SharedMessage> = serde_json::from_value(row.snapshot)
        .map_err(|e| Error::internal(format!("a stored snapshot does not parse: {e}")))?;
    Ok(SharedChat {
        title: row.title,
        created_at: row.created_at,
        messages,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn row(role: ChatRole, content: &str, status: ChatMessageStatus) -> PathMessageRow {
        PathMessageRow {
            role,
            content: content.to_string(),
            status,
            created_at: Utc::now(),
            model: Some("gpt-x".to_string()),
        }
    }

    #[test]
    fn a_snapshot_keeps_what_a_reader_needs() {
        use ChatMessageStatus as S;
        let rows = vec![
            row(ChatRole::User, "hi", S::Complete),
            row(ChatRole::Model, "", S::Failed),
            row(ChatRole::User, "again", S::Complete),
            row(ChatRole::Model, "half an ans", S::Stopped),
            row(ChatRole::User, "more", S::Complete),
            row(ChatRole::Model, "still writ", S::Streaming),
            row(ChatRole::User, "after", S::Complete),
        ];
        let out = snapshot_messages(rows);
        let texts: Vec<&str> = out.iter().map(|m| m.content.as_str()).collect();
        assert_eq!(texts, ["hi", "again", "half an ans", "more"]);
        assert_eq!(out[0].model, None, "a question names no model");
        assert_eq!(out[2].model.as_deref(), Some("gpt-x"));
        assert_eq!(out[2].status, SharedMessageStatus::Stopped);
        let mut keys: Vec<String> = serde_json::to_value(&out[2])
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        keys.sort();
        assert_eq!(keys, ["content", "created_at", "model", "role", "status"]);
    }
}
