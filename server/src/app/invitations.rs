//! Invitations: who may invite whom with which role, tokens, e-mails, and
//! acceptance (`signup_invite`). `POST /api/users/invite` is an invitation
//! too and is built here.

use crate::app::auth::{
    check_password_policy, hash_password, normalize_email, validate_email, validate_name,
};
use crate::authz::{AdminRole, Grant, Invites, OrgAccess, on, perm};
use crate::context::ServerContext;
use crate::db::datastore::invitations::{AcceptOutcome, Acceptance, InvitationRow, NewInvitation};
use crate::db::enums::InvitationStatus as DbStatus;
use crate::error::Error;
use crate::mailer::Email;
use base64::Engine;
use sha2::{Digest, Sha256};
use uuid::Uuid;
use workspace_api::invitations::{
    Invitation, InvitationBulkCreateRequest, InvitationBulkCreateResponse,
    InvitationBulkItemStatus, InvitationBulkResult, InvitationCreateRequest, InvitationListItem,
    InvitationPublic, InvitationResendResponse, InvitationResent, InvitationRevokeResponse,
    InvitationStatus, InvitationValidation, NamedRef, SignupInviteRequest, SignupInviteResponse,
};
use workspace_api::users::{Membership, UserInviteRequest, UserInviteResponse};

/// Lifetime of an invitation, from creation or the last resend.
pub const INVITATION_LIFETIME_SECS: i64 = 7 * 24 * 3600;
pub const MESSAGE_MAX_CHARS: usize = 2000;
pub const BULK_MAX_ITEMS: usize = 100;
/// Longer "tokens" are not looked up at all.
const TOKEN_MAX_CHARS: usize = 128;

/// A new token: 256 random bits as URL-safe base64, and its SHA-256 (the
/// only form stored).
pub fn new_token() -> (String, Vec<u8>) {
    let mut bytes = [0u8; 32];
    rand::fill(&mut bytes);
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let hash = hash_token(&token);
    (token, hash)
}

pub fn hash_token(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

fn status_of(status: DbStatus) -> InvitationStatus {
    match status {
        DbStatus::Pending => InvitationStatus::Pending,
        DbStatus::Accepted => InvitationStatus::Accepted,
        DbStatus::Expired => InvitationStatus::Expired,
        DbStatus::Revoked => InvitationStatus::Revoked,
    }
}

fn db_status(status: InvitationStatus) -> DbStatus {
    match status {
        InvitationStatus::Pending => DbStatus::Pending,
        InvitationStatus::Accepted => DbStatus::Accepted,
        InvitationStatus::Expired => DbStatus::Expired,
        InvitationStatus::Revoked => DbStatus::Revoked,
    }
}

/// The associated data that binds a sealed token to its invitation.
fn token_binding(invitation_id: Uuid) -> String {
    format!("invitation-token:{invitation_id}")
}

/// The invitation's token, unsealed. `None` for invitations created before
/// tokens were kept; an error when the keys cannot open it (a key that
/// sealed it was removed from the configuration).
fn token_of(cx: &ServerContext, row: &InvitationRow) -> Result<Option<String>, Error> {
    let Some(sealed) = &row.token_sealed else {
        return Ok(None);
    };
    let bytes = cx
        .secrets
        .open(sealed, token_binding(row.id).as_bytes())
        .map_err(|e| Error::internal(format!("opening the token of invitation {}: {e}", row.id)))?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| Error::internal("a sealed invitation token is not UTF-8"))
}

fn inviter(row: &InvitationRow) -> Option<NamedRef> {
    row.invited_by.map(|id| NamedRef {
        id,
        name: row.invited_by_name.clone().unwrap_or_default(),
    })
}

fn to_invitation(row: InvitationRow, token: Option<String>) -> Invitation {
    Invitation {
        id: row.id,
        status: status_of(row.status),
        role: NamedRef {
            id: row.role_id,
            name: row.role_name.clone(),
        },
        organization: NamedRef {
            id: row.organization_id,
            name: row.organization_name.clone(),
        },
        invited_by: inviter(&row),
        token,
        email: row.email,
        message: row.message,
        created_at: row.created_at,
        expires_at: row.expires_at,
    }
}

fn validate_message(message: Option<&str>) -> Result<Option<String>, Error> {
    let Some(message) = message.map(str::trim).filter(|m| !m.is_empty()) else {
        return Ok(None);
    };
    if message.chars().count() > MESSAGE_MAX_CHARS {
        return Err(Error::invalid(
            "invalid_message",
            format!("message must be at most {MESSAGE_MAX_CHARS} characters"),
        ));
    }
    Ok(Some(message.to_string()))
}

fn accept_link(cx: &ServerContext, token: &str) -> String {
    format!("{}/invite/accept?token={token}", cx.config.mail.link_base())
}

fn invitation_email(cx: &ServerContext, row: &InvitationRow, token: &str) -> Email {
    let inviter = row
        .invited_by_name
        .clone()
        .unwrap_or_else(|| "Someone".to_string());
    let greeting = match row.invited_user_id {
        Some(_) => "Hello,\n\n".to_string(),
        None => String::new(),
    };
    let mut body = format!(
        "{greeting}{inviter} invited you to join {} on Workspace as {}.\n\n",
        row.organization_name, row.role_name
    );
    if let Some(message) = &row.message {
        body.push_str(&format!("Their message:\n\n{message}\n\n"));
    }
    body.push_str(&format!(
        "To accept, open this link and choose a password:\n\n{}\n\n\
         The link works once and expires on {} (UTC). If you did not expect \
         this invitation, ignore this e-mail.\n",
        accept_link(cx, token),
        row.expires_at.format("%Y-%m-%d %H:%M")
    ));
    Email {
        to: row.email.clone(),
        subject: format!(
            "You are invited to join {} on Workspace",
            row.organization_name
        ),
        body_text: body,
        kind: if row.invited_user_id.is_some() {
            "user_invite"
        } else {
            "invitation"
        },
    }
}

/// Sends after the commit; a failure is logged and does not fail the
/// caller's request (the invitation exists and can be resent).
async fn send_logged(access: &OrgAccess, cx: &ServerContext, email: &Email, invitation_id: Uuid) {
    if let Err(e) = cx.mailer.send(email).await {
        slog::error!(access.log(), "invitation e-mail not delivered";
            "invitation_id" => invitation_id.to_string(), "error" => e.to_string());
    }
}

/// Validates and creates one invitation, then e-mails it. Returns the row
/// and the token.
async fn create_one(
    cx: &ServerContext,
    grant: &impl Invites,
    email: &str,
    role_id: Uuid,
    message: Option<&str>,
    invitee: Option<(&str, &str)>,
) -> Result<(InvitationRow, String), Error> {
    let access = grant.access();
    let email = normalize_email(email);
    validate_email(&email)?;
    crate::app::orgs::assignable_role(cx, access, role_id).await?;
    let (token, token_hash) = new_token();
    let id = Uuid::new_v4();
    let token_sealed = cx
        .secrets
        .seal(token.as_bytes(), token_binding(id).as_bytes());
    let row = cx
        .datastore
        .invitation_create(
            grant,
            &NewInvitation {
                id,
                email: &email,
                role_id,
                invited_by: access.user_id(),
                message,
                token_hash: &token_hash,
                token_sealed: &token_sealed,
                lifetime_secs: INVITATION_LIFETIME_SECS,
                invitee,
            },
        )
        .await?;
    send_logged(access, cx, &invitation_email(cx, &row, &token), row.id).await;
    Ok((row, token))
}

pub async fn create(
    cx: &ServerContext,
    grant: &Grant<on::Org, AdminRole>,
    request: InvitationCreateRequest,
) -> Result<Invitation, Error> {
    let message = validate_message(request.message.as_deref())?;
    let (row, token) = create_one(
        cx,
        grant,
        &request.email,
        request.role_id,
        message.as_deref(),
        None,
    )
    .await?;
    Ok(to_invitation(row, Some(token)))
}

pub async fn bulk_create(
    cx: &ServerContext,
    grant: &Grant<on::Org, AdminRole>,
    request: InvitationBulkCreateRequest,
) -> Result<InvitationBulkCreateResponse, Error> {
    if request.invitations.is_empty() || request.invitations.len() > BULK_MAX_ITEMS {
        return Err(Error::invalid(
            "invalid_request",
            format!("invitations must hold 1 to {BULK_MAX_ITEMS} items"),
        ));
    }
    let message = validate_message(request.message.as_deref())?;
    let mut results = Vec::with_capacity(request.invitations.len());
    for item in &request.invitations {
        let outcome = create_one(
            cx,
            grant,
            &item.email,
            item.role_id,
            message.as_deref(),
            None,
        )
        .await;
        results.push(match outcome {
            Ok((row, _token)) => InvitationBulkResult {
                id: Some(row.id),
                email: row.email,
                status: InvitationBulkItemStatus::Pending,
                error_code: None,
                error: None,
            },
            // A broken database fails the whole request.
            Err(e @ (Error::Internal { .. } | Error::Unavailable { .. } | Error::Busy { .. })) => {
                return Err(e);
            }
            Err(e) => {
                let http = dropshot::HttpError::from(e);
                InvitationBulkResult {
                    id: None,
                    email: item.email.clone(),
                    status: InvitationBulkItemStatus::Failed,
                    error_code: http.error_code,
                    error: Some(http.external_message),
                }
            }
        });
    }
    let created = results
        .iter()
        .filter(|r| r.status == InvitationBulkItemStatus::Pending)
        .count() as u32;
    let failed = results.len() as u32 - created;
    Ok(InvitationBulkCreateResponse {
        success: failed == 0,
        created,
        failed,
        invitations: results,
    })
}

pub async fn list(
    cx: &ServerContext,
    access: &OrgAccess,
    status: Option<InvitationStatus>,
    page: crate::db::datastore::Page,
) -> Result<Vec<InvitationListItem>, Error> {
    let rows = cx
        .datastore
        .invitation_list(access, status.map(db_status), page)
        .await?;
    Ok(rows
        .into_iter()
        .map(|row| InvitationListItem {
            id: row.id,
            status: status_of(row.status),
            role: NamedRef {
                id: row.role_id,
                name: row.role_name.clone(),
            },
            invited_by: inviter(&row),
            email: row.email,
            message: row.message,
            created_at: row.created_at,
            expires_at: row.expires_at,
        })
        .collect())
}

/// The invitation with its token (the one issued at creation).
pub async fn get(
    cx: &ServerContext,
    access: &OrgAccess,
    invitation_id: Uuid,
) -> Result<Invitation, Error> {
    let row = cx
        .datastore
        .invitation_get(access, invitation_id)
        .await?
        .ok_or(Error::NotFound { what: "invitation" })?;
    let token = token_of(cx, &row)?;
    Ok(to_invitation(row, token))
}

pub async fn validate(cx: &ServerContext, token: &str) -> Result<InvitationValidation, Error> {
    let invalid = InvitationValidation {
        valid: false,
        invitation: None,
        existing_account: false,
    };
    if token.is_empty() || token.chars().count() > TOKEN_MAX_CHARS {
        return Ok(invalid);
    }
    let Some(row) = cx
        .datastore
        .invitation_by_token_hash(&hash_token(token))
        .await?
    else {
        return Ok(invalid);
    };
    if row.status != DbStatus::Pending {
        return Ok(invalid);
    }
    // As `signup_invite` decides: an account with a password accepts with it.
    let existing_account = cx
        .datastore
        .user_credentials(&row.email)
        .await?
        .is_some_and(|user| user.password_hash.is_some());
    Ok(InvitationValidation {
        valid: true,
        existing_account,
        invitation: Some(InvitationPublic {
            id: row.id,
            invited_by: inviter(&row),
            email: row.email,
            organization: NamedRef {
                id: row.organization_id,
                name: row.organization_name,
            },
            role: NamedRef {
                id: row.role_id,
                name: row.role_name,
            },
            created_at: row.created_at,
            expires_at: row.expires_at,
        }),
    })
}

fn not_pending(status: DbStatus) -> Error {
    Error::conflict(
        "invitation_not_pending",
        format!("the invitation is {status}, not pending"),
    )
}

async fn current_status(
    cx: &ServerContext,
    access: &OrgAccess,
    invitation_id: Uuid,
) -> Result<DbStatus, Error> {
    Ok(cx
        .datastore
        .invitation_get(access, invitation_id)
        .await?
        .ok_or(Error::NotFound { what: "invitation" })?
        .status)
}

/// Extends a pending invitation's expiry and e-mails the same link again.
pub async fn resend(
    cx: &ServerContext,
    grant: &Grant<on::Invitation, AdminRole>,
) -> Result<InvitationResendResponse, Error> {
    let invitation_id = grant.id();
    let Some(row) = cx
        .datastore
        .invitation_extend(grant, INVITATION_LIFETIME_SECS)
        .await?
    else {
        return Err(not_pending(current_status(cx, grant, invitation_id).await?));
    };
    let token = token_of(cx, &row)?.ok_or_else(|| {
        Error::conflict(
            "invitation_token_unavailable",
            "this invitation predates stored tokens and cannot be resent; revoke it and \
             create a new one",
        )
    })?;
    cx.mailer
        .send(&invitation_email(cx, &row, &token))
        .await
        .map_err(|e| {
            slog::error!(grant.log(), "invitation e-mail not delivered";
                "invitation_id" => invitation_id.to_string(), "error" => e.to_string());
            Error::Unavailable {
                code: "mail_unavailable",
                message: format!("the e-mail could not be sent: {e}"),
            }
        })?;
    Ok(InvitationResendResponse {
        success: true,
        message: "invitation resent".to_string(),
        invitation: InvitationResent {
            id: row.id,
            status: status_of(row.status),
            email: row.email,
            expires_at: row.expires_at,
        },
    })
}

pub async fn revoke(
    cx: &ServerContext,
    grant: &Grant<on::Invitation, AdminRole>,
) -> Result<InvitationRevokeResponse, Error> {
    let invitation_id = grant.id();
    if !cx.datastore.invitation_revoke(grant).await? {
        return Err(not_pending(current_status(cx, grant, invitation_id).await?));
    }
    Ok(InvitationRevokeResponse {
        success: true,
        message: "invitation revoked".to_string(),
    })
}

fn unusable(status: DbStatus) -> Error {
    match status {
        DbStatus::Accepted => Error::gone("invitation_used", "the invitation was already accepted"),
        DbStatus::Revoked => Error::gone("invitation_revoked", "the invitation was revoked"),
        DbStatus::Expired => Error::gone("invitation_expired", "the invitation has expired"),
        DbStatus::Pending => Error::internal("a pending invitation reported as unusable"),
    }
}

fn unknown_token() -> Error {
    Error::invalid("invalid_invitation", "the invitation token is not valid")
}

pub async fn signup_invite(
    cx: &ServerContext,
    request: SignupInviteRequest,
    client: &crate::app::sessions::ClientInfo,
) -> Result<SignupInviteResponse, Error> {
    crate::app::auth::rate_limit(cx, crate::app::auth::Limited::Signup, client.address).await?;
    let first_name = validate_name("first_name", &request.first_name)?;
    let last_name = validate_name("last_name", &request.last_name)?;
    let token = request.invite_token.trim();
    if token.is_empty() || token.chars().count() > TOKEN_MAX_CHARS {
        return Err(unknown_token());
    }
    let token_hash = hash_token(token);
    // A first look, to report token problems before the (slow) hashing and
    // to check the password against the invitation's address. The decisive
    // check is repeated under a row lock by `invitation_accept`.
    let invitation = cx
        .datastore
        .invitation_by_token_hash(&token_hash)
        .await?
        .ok_or_else(unknown_token)?;
    if invitation.status != DbStatus::Pending {
        return Err(unusable(invitation.status));
    }
    // An existing account accepts by proving its password (names in the
    // request are ignored); failures count towards the login rate limit.
    if let Some(existing) = cx.datastore.user_credentials(&invitation.email).await?
        && existing.password_hash.is_some()
    {
        crate::app::auth::verify_login(cx, &invitation.email, request.password).await?;
        let outcome = cx
            .datastore
            .invitation_accept_existing(
                &token_hash,
                existing.id,
                &client.origin(crate::audit::Actor::ANONYMOUS),
            )
            .await?;
        return accepted(cx, outcome, client).await;
    }
    check_password_policy(&request.password, &invitation.email)?;
    let password_hash = hash_password(cx, request.password).await?;
    let personal_org_name = format!("{first_name} {last_name}'s organization");
    let outcome = cx
        .datastore
        .invitation_accept(
            &Acceptance {
                token_hash: &token_hash,
                first_name: &first_name,
                last_name: &last_name,
                password_hash: &password_hash,
                personal_org_name: &personal_org_name,
            },
            &client.origin(crate::audit::Actor::ANONYMOUS),
        )
        .await?;
    accepted(cx, outcome, client).await
}

/// The answer of an accepted invitation: the account and the tokens of a
/// new session (as a login starts).
async fn accepted(
    cx: &ServerContext,
    outcome: AcceptOutcome,
    client: &crate::app::sessions::ClientInfo,
) -> Result<SignupInviteResponse, Error> {
    let user = match outcome {
        AcceptOutcome::Accepted(user) => user,
        AcceptOutcome::UnknownToken => return Err(unknown_token()),
        AcceptOutcome::NotPending(status) => return Err(unusable(status)),
        // An account got a password between the first look and the lock:
        // the caller retries and takes the existing-account path.
        AcceptOutcome::EmailTaken => {
            return Err(Error::conflict(
                "email_taken",
                "an account with this e-mail address was just created; retry to accept \
                 with its password",
            ));
        }
    };
    let session = crate::app::sessions::start(cx, user.id, client).await?;
    Ok(SignupInviteResponse {
        access_token: session.access_token,
        expires_in: session.expires_in,
        refresh_token: session.refresh_token,
        refresh_expires_in: session.refresh_expires_in,
        session_id: session.session_id,
        id: user.id,
        email: user.email,
        first_name: user.first_name,
        last_name: user.last_name,
    })
}

/// `POST /api/users/invite`: `access` must grant `users:write`.
pub async fn invite_user(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::UsersWrite>,
    request: UserInviteRequest,
) -> Result<UserInviteResponse, Error> {
    let first_name = validate_name("first_name", &request.first_name)?;
    let last_name = validate_name("last_name", &request.last_name)?;
    let (row, _token) = create_one(
        cx,
        grant,
        &request.email,
        request.role,
        None,
        Some((&first_name, &last_name)),
    )
    .await?;
    Ok(UserInviteResponse {
        id: row.id,
        email: row.email,
        full_name: format!("{first_name} {last_name}"),
        first_name,
        last_name,
        organizations: Membership {
            id: row.organization_id,
            name: row.organization_name,
            slug: row.organization_slug,
            role_id: row.role_id,
            role_name: row.role_name,
        },
    })
}
