//! Folders of chats (issue #35): private to their user in an
//! organization, as chats are. Deleting a folder moves its chats out of
//! it; it never deletes a chat. Pinning and putting a single chat into a
//! folder go through `PUT /api/chat` (see [`crate::app::chat::update`]).

use crate::authz::{Grant, OrgAccess, on, perm};
use crate::context::ServerContext;
use crate::db::datastore::chat_folders::FolderRow;
use crate::error::Error;
use uuid::Uuid;
use workspace_api::chat_folders::{
    ChatFolder, ChatFolderDeleted, ChatFolderWrite, ChatMoveRequest, ChatMoveResponse,
    FOLDER_NAME_MAX_CHARS, MOVE_MAX_CHATS,
};

fn folder_view(r: FolderRow) -> ChatFolder {
    ChatFolder {
        id: r.id,
        name: r.name,
        org_id: r.org_id,
        user_id: r.user_id,
        chat_count: r.chat_count,
        created_at: r.created_at,
        updated_at: r.updated_at,
    }
}

/// The name trimmed: 1 to 100 characters, without NUL.
fn valid_name(name: &str) -> Result<&str, Error> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > FOLDER_NAME_MAX_CHARS || name.contains('\0') {
        return Err(Error::invalid(
            "invalid_name",
            format!("the name must be 1 to {FOLDER_NAME_MAX_CHARS} characters, not blank"),
        ));
    }
    Ok(name)
}

pub async fn list(cx: &ServerContext, access: &OrgAccess) -> Result<Vec<ChatFolder>, Error> {
    let rows = cx.datastore.chat_folder_list(access).await?;
    Ok(rows.into_iter().map(folder_view).collect())
}

pub async fn create(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsWrite>,
    body: ChatFolderWrite,
) -> Result<ChatFolder, Error> {
    let name = valid_name(&body.name)?;
    Ok(folder_view(
        cx.datastore.chat_folder_create(grant, name).await?,
    ))
}

pub async fn rename(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsWrite>,
    id: Uuid,
    body: ChatFolderWrite,
) -> Result<ChatFolder, Error> {
    let name = valid_name(&body.name)?;
    Ok(folder_view(
        cx.datastore.chat_folder_rename(grant, id, name).await?,
    ))
}

pub async fn delete(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsWrite>,
    id: Uuid,
) -> Result<ChatFolderDeleted, Error> {
    let moved = cx.datastore.chat_folder_delete(grant, id).await?;
    Ok(ChatFolderDeleted {
        message: "folder deleted".into(),
        chats_moved: moved,
    })
}

pub async fn move_chats(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsWrite>,
    body: ChatMoveRequest,
) -> Result<ChatMoveResponse, Error> {
    if body.chat_ids.is_empty() || body.chat_ids.len() > MOVE_MAX_CHATS {
        return Err(Error::invalid(
            workspace_api::extract::INVALID_REQUEST,
            format!("chat_ids holds 1 to {MOVE_MAX_CHATS} ids"),
        ));
    }
    let mut ids: Vec<Uuid> = Vec::with_capacity(body.chat_ids.len());
    for id in body.chat_ids {
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    let moved = cx
        .datastore
        .chat_folder_move(grant, &ids, body.folder_id)
        .await?;
    Ok(ChatMoveResponse {
        message: match body.folder_id {
            Some(_) => format!("{moved} chats moved into the folder"),
            None => format!("{moved} chats moved out of their folders"),
        },
        moved,
    })
}
