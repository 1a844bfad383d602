//! Users.

use crate::authn::Actor;
use crate::context::ServerContext;
use crate::error::Error;
use workspace_api::users::{CurrentUser, Membership};

pub async fn me(cx: &ServerContext, actor: &Actor) -> Result<CurrentUser, Error> {
    let user = cx.datastore.user_get(actor.user_id).await?;
    let memberships = cx.datastore.user_active_memberships(actor.user_id).await?;
    Ok(CurrentUser {
        id: user.id,
        full_name: format!("{} {}", user.first_name, user.last_name),
        email: user.email,
        first_name: user.first_name,
        last_name: user.last_name,
        created_at: user.created_at,
        organizations: memberships
            .into_iter()
            .map(|m| Membership {
                id: m.organization_id,
                name: m.organization_name,
                slug: m.slug,
                role_id: m.role_id,
                role_name: m.role_name,
            })
            .collect(),
    })
}
