//! Invitations, their acceptance, and the roles they may carry.
//!
//! The stored `status` is `pending`, `accepted`, `revoked` or (only for an
//! expired invitation replaced by a newer one) `expired`; every read
//! derives `expired` for a `pending` row whose `expires_at` has passed, so
//! no background job is needed.

use super::audit;
use super::{Datastore, is_unique_violation};
use crate::audit::Event;
use crate::authz::{AdminRole, Grant, Invites, OrgAccess, on};
use crate::db::enums::{InvitationStatus, MembershipStatus};
use crate::error::Error;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// The effective status of `invitations i`.
const STATUS_SQL: &str = "CASE WHEN i.status = 'pending' AND i.expires_at <= now() \
     THEN 'expired' ELSE i.status END";

fn select_sql(filter: &str) -> String {
    format!(
        "SELECT i.id, i.organization_id, o.name AS org_name, o.slug AS org_slug, i.email, \
                i.role_id, r.name AS role_name, i.invited_by, \
                CASE WHEN u.id IS NULL THEN NULL ELSE u.first_name || ' ' || u.last_name END \
                    AS inviter_name, \
                i.invited_user_id, i.message, {STATUS_SQL} AS status, i.created_at, i.expires_at, \
                i.token_sealed \
         FROM invitations i \
         JOIN organizations o ON o.id = i.organization_id \
         JOIN roles r ON r.id = i.role_id AND r.organization_id = i.organization_id \
         LEFT JOIN users u ON u.id = i.invited_by \
         WHERE {filter}"
    )
}

/// An invitation with the names it refers to.
#[derive(Clone, Debug)]
pub struct InvitationRow {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub organization_name: String,
    pub organization_slug: String,
    pub email: String,
    pub role_id: Uuid,
    pub role_name: String,
    pub invited_by: Option<Uuid>,
    pub invited_by_name: Option<String>,
    pub invited_user_id: Option<Uuid>,
    pub message: Option<String>,
    /// Effective: `expired` for a `pending` row past its expiry.
    pub status: InvitationStatus,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// The token, sealed with the server's secrets key (`None` for rows
    /// created before tokens were kept).
    pub token_sealed: Option<Vec<u8>>,
}

impl InvitationRow {
    fn from_row(row: &tokio_postgres::Row) -> InvitationRow {
        InvitationRow {
            id: row.get("id"),
            organization_id: row.get("organization_id"),
            organization_name: row.get("org_name"),
            organization_slug: row.get("org_slug"),
            email: row.get("email"),
            role_id: row.get("role_id"),
            role_name: row.get("role_name"),
            invited_by: row.get("invited_by"),
            invited_by_name: row.get("inviter_name"),
            invited_user_id: row.get("invited_user_id"),
            message: row.get("message"),
            status: row.get("status"),
            created_at: row.get("created_at"),
            expires_at: row.get("expires_at"),
            token_sealed: row.get("token_sealed"),
        }
    }
}

/// A new invitation (already validated by the app layer).
pub struct NewInvitation<'a> {
    pub id: Uuid,
    /// Normalised.
    pub email: &'a str,
    pub role_id: Uuid,
    pub invited_by: Uuid,
    pub message: Option<&'a str>,
    pub token_hash: &'a [u8],
    /// The token sealed for this invitation's id.
    pub token_sealed: &'a [u8],
    pub lifetime_secs: i64,
    /// For `POST /api/users/invite`: the invitee's first and last name. The
    /// user is pre-created (no password) unless the address has an account,
    /// and gets an `invited` membership.
    pub invitee: Option<(&'a str, &'a str)>,
}

/// What acceptance writes.
pub struct Acceptance<'a> {
    pub token_hash: &'a [u8],
    pub first_name: &'a str,
    pub last_name: &'a str,
    pub password_hash: &'a str,
    pub personal_org_name: &'a str,
}

/// The account an acceptance created or completed.
pub struct AcceptedUser {
    pub id: Uuid,
    pub email: String,
    pub first_name: String,
    pub last_name: String,
}

/// How an acceptance ended.
pub enum AcceptOutcome {
    Accepted(AcceptedUser),
    /// No invitation has this token.
    UnknownToken,
    /// The invitation is in this effective state, not `pending`.
    NotPending(InvitationStatus),
    /// The address already has an account with a password.
    EmailTaken,
}

fn conflict_on_pending(e: tokio_postgres::Error) -> Error {
    if is_unique_violation(&e, "invitations_pending_email_key") {
        Error::conflict(
            "invitation_pending",
            "an invitation for this e-mail address is already pending in this organization",
        )
    } else {
        e.into()
    }
}

fn already_member() -> Error {
    Error::conflict(
        "already_member",
        "this e-mail address belongs to a member of the organization",
    )
}

impl Datastore {
    /// Creates an invitation in one transaction: refuses members
    /// (`409 already_member`) and a pending, unexpired invitation for the
    /// address (`409 invitation_pending`), marks an expired pending one as
    /// replaced, and for `users/invite` pre-creates the user and the
    /// `invited` membership.
    pub async fn invitation_create(
        &self,
        grant: &impl Invites,
        new: &NewInvitation<'_>,
    ) -> Result<InvitationRow, Error> {
        let org_id = grant.access().org_id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let member = tx
            .query_opt(
                "SELECT 1 FROM memberships m JOIN users u ON u.id = m.user_id \
                 WHERE m.organization_id = $1 AND u.email_normalized = $2 \
                   AND m.status IN ($3, $4)",
                &[
                    &org_id,
                    &new.email,
                    &MembershipStatus::Active,
                    &MembershipStatus::Suspended,
                ],
            )
            .await?;
        if member.is_some() {
            return Err(already_member());
        }
        tx.execute(
            "UPDATE invitations SET status = $4, updated_at = now() \
             WHERE organization_id = $1 AND email = $2 AND status = $3 \
               AND expires_at <= now()",
            &[
                &org_id,
                &new.email,
                &InvitationStatus::Pending,
                &InvitationStatus::Expired,
            ],
        )
        .await?;

        let mut invited_user_id: Option<Uuid> = None;
        if let Some((first_name, last_name)) = new.invitee {
            // A pre-created user (no password) takes the latest names; an
            // existing account keeps its own.
            let upserted = tx
                .query_opt(
                    "INSERT INTO users (id, email, email_normalized, first_name, last_name, password_hash) \
                     VALUES ($1, $2, $2, $3, $4, NULL) \
                     ON CONFLICT ON CONSTRAINT users_email_normalized_key DO UPDATE \
                        SET first_name = EXCLUDED.first_name, last_name = EXCLUDED.last_name, \
                            updated_at = now() \
                        WHERE users.password_hash IS NULL \
                     RETURNING id",
                    &[&Uuid::new_v4(), &new.email, &first_name, &last_name],
                )
                .await?;
            let user_id: Uuid = match upserted {
                Some(row) => row.get("id"),
                None => tx
                    .query_one(
                        "SELECT id FROM users WHERE email_normalized = $1",
                        &[&new.email],
                    )
                    .await?
                    .get("id"),
            };
            let membership =
                join_membership(&tx, user_id, org_id, new.role_id, MembershipStatus::Invited)
                    .await?;
            if membership == 0 {
                return Err(already_member());
            }
            invited_user_id = Some(user_id);
        }

        let id = new.id;
        let lifetime = new.lifetime_secs as f64;
        tx.execute(
            "INSERT INTO invitations (id, organization_id, email, role_id, invited_by, \
                                      invited_user_id, token_hash, message, expires_at, \
                                      token_sealed) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now() + make_interval(secs => $9), $10)",
            &[
                &id,
                &org_id,
                &new.email,
                &new.role_id,
                &new.invited_by,
                &invited_user_id,
                &new.token_hash,
                &new.message,
                &lifetime,
                &new.token_sealed,
            ],
        )
        .await
        .map_err(conflict_on_pending)?;
        let row = tx
            .query_one(&select_sql("i.id = $1"), &[&id])
            .await
            .map(|r| InvitationRow::from_row(&r))?;
        let event = Event::org(org_id, "invitation.create")
            .target("invitation", id)
            .details(serde_json::json!({ "email": new.email, "role_id": new.role_id }));
        audit::record(&tx, grant.access().origin(), &event).await?;
        tx.commit().await.map_err(conflict_on_pending)?;
        Ok(row)
    }

    pub async fn invitation_get(
        &self,
        access: &OrgAccess,
        invitation_id: Uuid,
    ) -> Result<Option<InvitationRow>, Error> {
        let org_id = access.org_id();
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                &select_sql("i.organization_id = $1 AND i.id = $2"),
                &[&org_id, &invitation_id],
            )
            .await?;
        Ok(row.as_ref().map(InvitationRow::from_row))
    }

    /// The organization's invitations, newest first, optionally only those
    /// in one effective state.
    pub async fn invitation_list(
        &self,
        access: &OrgAccess,
        status: Option<InvitationStatus>,
        page: super::Page,
    ) -> Result<Vec<InvitationRow>, Error> {
        let org_id = access.org_id();
        let conn = self.conn().await?;
        let sql = format!(
            "{} ORDER BY i.created_at DESC, i.id LIMIT $3 OFFSET $4",
            select_sql(&format!(
                "i.organization_id = $1 AND ($2::text IS NULL OR {STATUS_SQL} = $2)"
            ))
        );
        let rows = conn
            .query(&sql, &[&org_id, &status, &page.limit, &page.offset])
            .await?;
        Ok(rows.iter().map(InvitationRow::from_row).collect())
    }

    /// The invitation holding this token hash (any state).
    pub async fn invitation_by_token_hash(
        &self,
        token_hash: &[u8],
    ) -> Result<Option<InvitationRow>, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(&select_sql("i.token_hash = $1"), &[&token_hash])
            .await?;
        Ok(row.as_ref().map(InvitationRow::from_row))
    }

    /// Gives a pending, unexpired invitation a new expiry `lifetime_secs`
    /// from now (its token stays). `None` when it is not pending.
    pub async fn invitation_extend(
        &self,
        grant: &Grant<on::Invitation, AdminRole>,
        lifetime_secs: i64,
    ) -> Result<Option<InvitationRow>, Error> {
        let invitation_id = grant.id();
        let org_id = grant.org_id();
        let conn = self.conn().await?;
        let lifetime = lifetime_secs as f64;
        let updated = conn
            .execute(
                "UPDATE invitations SET \
                        expires_at = now() + make_interval(secs => $3), updated_at = now() \
                 WHERE organization_id = $1 AND id = $2 \
                   AND status = $4 AND expires_at > now()",
                &[
                    &org_id,
                    &invitation_id,
                    &lifetime,
                    &InvitationStatus::Pending,
                ],
            )
            .await?;
        if updated == 0 {
            return Ok(None);
        }
        let row = conn
            .query_opt(
                &select_sql("i.organization_id = $1 AND i.id = $2"),
                &[&org_id, &invitation_id],
            )
            .await?;
        Ok(row.as_ref().map(InvitationRow::from_row))
    }

    /// Revokes a pending, unexpired invitation and removes the `invited`
    /// membership it created, in one transaction. False when it was not
    /// pending.
    pub async fn invitation_revoke(
        &self,
        grant: &Grant<on::Invitation, AdminRole>,
    ) -> Result<bool, Error> {
        let invitation_id = grant.id();
        let org_id = grant.org_id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let row = tx
            .query_opt(
                "UPDATE invitations SET status = $4, revoked_at = now(), updated_at = now() \
                 WHERE organization_id = $1 AND id = $2 \
                   AND status = $3 AND expires_at > now() \
                 RETURNING invited_user_id",
                &[
                    &org_id,
                    &invitation_id,
                    &InvitationStatus::Pending,
                    &InvitationStatus::Revoked,
                ],
            )
            .await?;
        let Some(row) = row else {
            return Ok(false);
        };
        let invited_user: Option<Uuid> = row.get("invited_user_id");
        if let Some(user_id) = invited_user {
            tx.execute(
                "DELETE FROM memberships \
                 WHERE organization_id = $1 AND user_id = $2 AND status = $3",
                &[&org_id, &user_id, &MembershipStatus::Invited],
            )
            .await?;
        }
        audit::record(
            &tx,
            grant.origin(),
            &Event::org(org_id, "invitation.revoke").target("invitation", invitation_id),
        )
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Accepts the invitation holding `token_hash`, in one transaction with
    /// the invitation row locked (so concurrent acceptances serialise and
    /// only the first succeeds): creates the user (or completes a
    /// pre-created one), their personal organization, the `active`
    /// membership with the invited role, and marks the invitation accepted.
    /// Accepts the invitation for `user_id`, an existing account whose
    /// password the caller has verified: the membership becomes `active`
    /// with the invited role (unless already active, which keeps its role),
    /// and the invitation `accepted`, in one transaction under the
    /// invitation's row lock (so the token is used once).
    pub async fn invitation_accept_existing(
        &self,
        token_hash: &[u8],
        user_id: Uuid,
        origin: &crate::audit::Origin,
    ) -> Result<AcceptOutcome, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let Some(inv) = tx
            .query_opt(
                &format!(
                    "SELECT i.id, i.organization_id, i.role_id, {STATUS_SQL} AS status \
                     FROM invitations i WHERE i.token_hash = $1 FOR UPDATE"
                ),
                &[&token_hash],
            )
            .await?
        else {
            return Ok(AcceptOutcome::UnknownToken);
        };
        let invitation_id: Uuid = inv.get("id");
        let org_id: Uuid = inv.get("organization_id");
        let role_id: Uuid = inv.get("role_id");
        let status: InvitationStatus = inv.get("status");
        if status != InvitationStatus::Pending {
            return Ok(AcceptOutcome::NotPending(status));
        }
        if join_membership(&tx, user_id, org_id, role_id, MembershipStatus::Active).await? > 0 {
            member_joined(&tx, org_id, user_id, role_id, invitation_id).await?;
        }
        tx.execute(
            "UPDATE invitations SET status = $3, accepted_at = now(), \
                    accepted_user_id = $2, updated_at = now() \
             WHERE id = $1",
            &[&invitation_id, &user_id, &InvitationStatus::Accepted],
        )
        .await?;
        let user = tx
            .query_one(
                "UPDATE users SET last_active_at = now() WHERE id = $1 \
                 RETURNING email, first_name, last_name",
                &[&user_id],
            )
            .await?;
        audit::record(
            &tx,
            &origin.with_actor(crate::audit::Actor::user(user_id, None)),
            &Event::org(org_id, "invitation.accept")
                .target("invitation", invitation_id)
                .details(serde_json::json!({"user_id": user_id, "role_id": role_id})),
        )
        .await?;
        tx.commit().await?;
        Ok(AcceptOutcome::Accepted(AcceptedUser {
            id: user_id,
            email: user.get("email"),
            first_name: user.get("first_name"),
            last_name: user.get("last_name"),
        }))
    }

    pub async fn invitation_accept(
        &self,
        a: &Acceptance<'_>,
        origin: &crate::audit::Origin,
    ) -> Result<AcceptOutcome, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let Some(inv) = tx
            .query_opt(
                &format!(
                    "SELECT i.id, i.organization_id, i.email, i.role_id, {STATUS_SQL} AS status \
                     FROM invitations i WHERE i.token_hash = $1 FOR UPDATE"
                ),
                &[&a.token_hash],
            )
            .await?
        else {
            return Ok(AcceptOutcome::UnknownToken);
        };
        let invitation_id: Uuid = inv.get("id");
        let org_id: Uuid = inv.get("organization_id");
        let email: String = inv.get("email");
        let role_id: Uuid = inv.get("role_id");
        let status: InvitationStatus = inv.get("status");
        if status != InvitationStatus::Pending {
            return Ok(AcceptOutcome::NotPending(status));
        }

        let existing = tx
            .query_opt(
                "SELECT id, password_hash FROM users WHERE email_normalized = $1 FOR UPDATE",
                &[&email],
            )
            .await?;
        let user_id = match existing {
            Some(row) => {
                let hash: Option<String> = row.get("password_hash");
                if hash.is_some() {
                    return Ok(AcceptOutcome::EmailTaken);
                }
                let id: Uuid = row.get("id");
                tx.execute(
                    "UPDATE users SET first_name = $2, last_name = $3, password_hash = $4, \
                            last_active_at = now(), updated_at = now() WHERE id = $1",
                    &[&id, &a.first_name, &a.last_name, &a.password_hash],
                )
                .await?;
                id
            }
            None => {
                let inserted = tx
                    .query_one(
                        "INSERT INTO users (id, email, email_normalized, first_name, last_name, \
                                            password_hash, last_active_at) \
                         VALUES ($1, $2, $2, $3, $4, $5, now()) RETURNING id",
                        &[
                            &Uuid::new_v4(),
                            &email,
                            &a.first_name,
                            &a.last_name,
                            &a.password_hash,
                        ],
                    )
                    .await;
                match inserted {
                    Ok(row) => row.get("id"),
                    Err(e) if is_unique_violation(&e, "users_email_normalized_key") => {
                        return Ok(AcceptOutcome::EmailTaken);
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        };
        let slug_base = email.split('@').next().unwrap_or("org").to_string();
        super::organizations::insert_with_system_roles(
            &tx,
            a.personal_org_name,
            &slug_base,
            user_id,
            true,
        )
        .await?;
        let joined =
            join_membership(&tx, user_id, org_id, role_id, MembershipStatus::Active).await?;
        if joined == 0 {
            return Err(Error::internal(
                "a user without a password holds a non-invited membership",
            ));
        }
        member_joined(&tx, org_id, user_id, role_id, invitation_id).await?;
        tx.execute(
            "UPDATE invitations SET status = $3, accepted_at = now(), \
                    accepted_user_id = $2, updated_at = now() \
             WHERE id = $1",
            &[&invitation_id, &user_id, &InvitationStatus::Accepted],
        )
        .await?;
        audit::record(
            &tx,
            &origin.with_actor(crate::audit::Actor::user(user_id, None)),
            &Event::org(org_id, "invitation.accept")
                .target("invitation", invitation_id)
                .details(serde_json::json!({"user_id": user_id, "role_id": role_id})),
        )
        .await?;
        tx.commit().await?;
        Ok(AcceptOutcome::Accepted(AcceptedUser {
            id: user_id,
            email,
            first_name: a.first_name.to_string(),
            last_name: a.last_name.to_string(),
        }))
    }
}

/// Gives the user a membership with `role_id` in `status` (`invited` for an
/// invitation, `active` when one is accepted): a new membership, or an
/// invited or deleted one revived. The rows changed (0: an active or
/// suspended membership is left as it is).
async fn join_membership(
    tx: &super::Tx<'_>,
    user_id: Uuid,
    org_id: Uuid,
    role_id: Uuid,
    status: MembershipStatus,
) -> Result<u64, Error> {
    Ok(tx
        .execute(
            "INSERT INTO memberships (user_id, organization_id, role_id, status) \
             VALUES ($1, $2, $3, $6) \
             ON CONFLICT (user_id, organization_id) DO UPDATE \
                SET role_id = EXCLUDED.role_id, status = $6, updated_at = now() \
                WHERE memberships.status IN ($4, $5)",
            &[
                &user_id,
                &org_id,
                &role_id,
                &MembershipStatus::Invited,
                &MembershipStatus::Deleted,
                &status,
            ],
        )
        .await?)
}

/// Queues the `member.joined` webhook event of an accepted invitation.
async fn member_joined(
    tx: &super::Tx<'_>,
    org_id: Uuid,
    user_id: Uuid,
    role_id: Uuid,
    invitation_id: Uuid,
) -> Result<(), Error> {
    let event = serde_json::json!({
        "user_id": user_id,
        "role_id": role_id,
        "via": "invitation",
        "invitation_id": invitation_id,
    });
    super::webhook_outbox::enqueue(tx, org_id, "member.joined", &event, None).await?;
    Ok(())
}
