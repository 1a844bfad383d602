//! Single sign-on (migration V43): an organization's OpenID Connect
//! provider and the domains it vouches for (managed by its admins, through
//! their grant), sign-ins under way (by the hash of their `state`, so any
//! instance finishes them) and the provider's subjects linked to accounts.
//!
//! A sign-in is not a request of a member: its authority is the spent
//! `state` row, whose organization filters every statement that follows.

use super::{Datastore, audit};
use crate::audit::Event;
use crate::authz::{Admin, Grant, on, perm};
use crate::db::row::db_row;
use crate::error::Error;
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

db_row! {
    /// An organization's provider, its secret still sealed.
    pub struct ProviderRow {
        pub org_id: Uuid = "p.organization_id",
        pub issuer: String = "p.issuer",
        pub client_id: String = "p.client_id",
        pub client_secret: Vec<u8> = "p.client_secret",
        pub groups_claim: String = "p.groups_claim",
        pub role_mappings: Value = "p.role_mappings",
        pub default_role: Option<String> = "p.default_role",
        pub enforced: bool = "p.enforced",
        pub domains: Vec<String> =
            "ARRAY(SELECT d.domain FROM sso_domains d WHERE d.organization_id = p.organization_id ORDER BY d.domain)",
        pub created_at: DateTime<Utc> = "p.created_at",
        pub updated_at: DateTime<Utc> = "p.updated_at",
    }
}

db_row! {
    /// A sign-in under way, spent by reading it.
    pub struct LoginRow {
        pub org_id: Uuid = "l.organization_id",
        pub nonce: String = "l.nonce",
        pub pkce_verifier: String = "l.pkce_verifier",
        pub redirect_uri: String = "l.redirect_uri",
        pub expired: bool = "l.expires_at <= now()",
    }
}

/// A provider as its admins set it.
pub struct NewProvider<'a> {
    pub issuer: &'a str,
    pub client_id: &'a str,
    /// Sealed; `None` keeps the stored one.
    pub client_secret: Option<&'a [u8]>,
    pub groups_claim: &'a str,
    pub role_mappings: &'a Value,
    pub default_role: Option<&'a str>,
    pub enforced: bool,
    pub domains: &'a [String],
}

/// A sign-in to remember.
pub struct NewLogin<'a> {
    pub state_hash: &'a [u8],
    pub org_id: Uuid,
    pub nonce: &'a str,
    pub pkce_verifier: &'a str,
    pub redirect_uri: &'a str,
    pub lifetime_secs: i64,
}

/// Who signed in, as the provider vouched.
pub struct Person<'a> {
    pub issuer: &'a str,
    pub subject: &'a str,
    /// Normalized, verified by the provider and in the organization's
    /// domains.
    pub email_normalized: &'a str,
    pub email: &'a str,
    pub first_name: &'a str,
    pub last_name: &'a str,
    /// The role their groups give (a role name of the organization).
    pub role: &'a str,
    /// An argon2 hash of a random secret, for an account created now
    /// (nobody knows its password; a reset sets one).
    pub unusable_password_hash: &'a str,
}

/// What signing in found or did.
pub enum SignIn {
    /// The user to start a session for.
    User(Uuid),
    /// The address is another account's, not a member of the organization.
    EmailTaken,
    /// The member is suspended in the organization.
    Suspended,
    /// The role to give does not exist (any more).
    UnknownRole,
    /// Another sign-in of the same person made their account or link at
    /// the same moment: nothing was written; sign in again (it finds them).
    Raced,
}

const PROVIDER_SQL: &str = "SELECT {cols} FROM sso_providers p WHERE p.organization_id = $1";

impl Datastore {
    /// The organization's provider.
    pub async fn sso_provider(&self, org_id: Uuid) -> Result<Option<ProviderRow>, Error> {
        let conn = self.quick().await?;
        let sql = PROVIDER_SQL.replace("{cols}", ProviderRow::COLUMNS);
        let row = conn.query_opt(&sql, &[&org_id]).await?;
        Ok(row.as_ref().map(ProviderRow::from_row))
    }

    /// The provider of the organization whose provider vouches for
    /// `domain`.
    pub async fn sso_provider_for_domain(
        &self,
        domain: &str,
    ) -> Result<Option<ProviderRow>, Error> {
        let conn = self.quick().await?;
        let sql = format!(
            "SELECT {} FROM sso_providers p JOIN sso_domains sd \
             ON sd.organization_id = p.organization_id WHERE sd.domain = $1",
            ProviderRow::COLUMNS
        );
        let row = conn.query_opt(&sql, &[&domain]).await?;
        Ok(row.as_ref().map(ProviderRow::from_row))
    }

    /// The roles named that single sign-on or SCIM provisioning may not
    /// give: missing from the organization, or `owner`.
    pub async fn ungivable_roles(
        &self,
        grant: &Grant<on::Org, Admin<perm::OrganizationAdmin>>,
        names: &[String],
    ) -> Result<Vec<String>, Error> {
        let conn = self.quick().await?;
        let rows = conn
            .query(
                "SELECT n FROM unnest($2::text[]) n WHERE NOT EXISTS \
                 (SELECT 1 FROM roles r WHERE r.organization_id = $1 AND r.name = n \
                  AND NOT (r.is_system_role AND r.name = 'owner'))",
                &[&grant.org_id(), &names],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Registers or replaces the organization's provider and its domains,
    /// in one transaction. `Err(Conflict sso_domain_taken)` when another
    /// organization vouches for one of the domains; `Ok(None)` when no
    /// secret is given and none is stored.
    pub async fn sso_provider_put(
        &self,
        grant: &Grant<on::Org, Admin<perm::OrganizationAdmin>>,
        new: &NewProvider<'_>,
    ) -> Result<Option<ProviderRow>, Error> {
        let org_id = grant.org_id();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let written = tx
            .execute(
                "INSERT INTO sso_providers AS p (organization_id, issuer, client_id, \
                     client_secret, groups_claim, role_mappings, default_role, enforced) \
                 SELECT $1, $2, $3, $4::bytea, $5, $6, $7, $8 WHERE $4::bytea IS NOT NULL \
                 ON CONFLICT (organization_id) DO UPDATE SET issuer = EXCLUDED.issuer, \
                     client_id = EXCLUDED.client_id, \
                     client_secret = coalesce($4::bytea, p.client_secret), \
                     groups_claim = EXCLUDED.groups_claim, \
                     role_mappings = EXCLUDED.role_mappings, \
                     default_role = EXCLUDED.default_role, enforced = EXCLUDED.enforced, \
                     updated_at = now()",
                &[
                    &org_id,
                    &new.issuer,
                    &new.client_id,
                    &new.client_secret,
                    &new.groups_claim,
                    &new.role_mappings,
                    &new.default_role,
                    &new.enforced,
                ],
            )
            .await?;
        if written == 0 {
            // No secret given: an update of a stored provider only.
            let n = tx
                .execute(
                    "UPDATE sso_providers SET issuer = $2, client_id = $3, groups_claim = $4, \
                         role_mappings = $5, default_role = $6, enforced = $7, \
                         updated_at = now() \
                     WHERE organization_id = $1",
                    &[
                        &org_id,
                        &new.issuer,
                        &new.client_id,
                        &new.groups_claim,
                        &new.role_mappings,
                        &new.default_role,
                        &new.enforced,
                    ],
                )
                .await?;
            if n == 0 {
                return Ok(None);
            }
        }
        tx.execute(
            "DELETE FROM sso_domains WHERE organization_id = $1 AND domain <> ALL($2)",
            &[&org_id, &new.domains],
        )
        .await?;
        let taken = tx
            .query(
                "INSERT INTO sso_domains (domain, organization_id) \
                 SELECT d, $1 FROM unnest($2::text[]) d \
                 ON CONFLICT (domain) DO UPDATE SET organization_id = EXCLUDED.organization_id \
                     WHERE sso_domains.organization_id = EXCLUDED.organization_id \
                 RETURNING domain",
                &[&org_id, &new.domains],
            )
            .await?;
        if taken.len() != new.domains.len() {
            return Err(Error::conflict(
                "sso_domain_taken",
                "another organization's single sign-on vouches for one of these domains",
            ));
        }
        let event = Event::org(org_id, "sso.configured").details(serde_json::json!({
            "issuer": new.issuer,
            "client_id": new.client_id,
            "domains": new.domains,
            "enforced": new.enforced,
            "secret_changed": new.client_secret.is_some(),
        }));
        audit::record(&tx, grant.origin(), &event).await?;
        let sql = PROVIDER_SQL.replace("{cols}", ProviderRow::COLUMNS);
        let row = tx.query_one(&sql, &[&org_id]).await?;
        tx.commit().await?;
        Ok(Some(ProviderRow::from_row(&row)))
    }

    /// Removes the organization's provider (its domains and sign-ins under
    /// way with it). `false` when there was none.
    pub async fn sso_provider_delete(
        &self,
        grant: &Grant<on::Org, Admin<perm::OrganizationAdmin>>,
    ) -> Result<bool, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let n = tx
            .execute(
                "DELETE FROM sso_providers WHERE organization_id = $1",
                &[&grant.org_id()],
            )
            .await?;
        if n == 0 {
            return Ok(false);
        }
        let event = Event::org(grant.org_id(), "sso.removed");
        audit::record(&tx, grant.origin(), &event).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Remembers a sign-in under way (and forgets expired ones).
    pub async fn sso_login_begin(&self, new: &NewLogin<'_>) -> Result<(), Error> {
        let conn = self.quick().await?;
        conn.execute(
            "WITH gone AS (DELETE FROM sso_logins WHERE expires_at < now() - interval '1 hour') \
             INSERT INTO sso_logins (state_hash, organization_id, nonce, pkce_verifier, \
                 redirect_uri, expires_at) \
             VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6))",
            &[
                &new.state_hash,
                &new.org_id,
                &new.nonce,
                &new.pkce_verifier,
                &new.redirect_uri,
                &(new.lifetime_secs as f64),
            ],
        )
        .await?;
        Ok(())
    }

    /// Spends the sign-in of `state_hash`: it works once, on any instance.
    pub async fn sso_login_take(&self, state_hash: &[u8]) -> Result<Option<LoginRow>, Error> {
        let conn = self.quick().await?;
        let sql = format!(
            "DELETE FROM sso_logins l WHERE l.state_hash = $1 RETURNING {}",
            LoginRow::COLUMNS
        );
        let row = conn.query_opt(&sql, &[&state_hash]).await?;
        Ok(row.as_ref().map(LoginRow::from_row))
    }

    /// Finds or creates the person of a sign-in and their membership, and
    /// gives it the role their groups give (an owner keeps theirs), in one
    /// transaction: the subject's linked account; else the organization's
    /// member with that address (linked now); else a new account (its
    /// personal organization too) and membership. `org_id` is the spent
    /// sign-in's.
    pub async fn sso_sign_in(
        &self,
        org_id: Uuid,
        person: &Person<'_>,
        origin: &crate::audit::Origin,
    ) -> Result<SignIn, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        // The role first: every path needs it.
        let role: Option<Uuid> = tx
            .query_opt(
                "SELECT id FROM roles WHERE organization_id = $1 AND name = $2 \
                 AND NOT (is_system_role AND name = 'owner')",
                &[&org_id, &person.role],
            )
            .await?
            .map(|r| r.get(0));
        let Some(role_id) = role else {
            return Ok(SignIn::UnknownRole);
        };
        let linked: Option<Uuid> = tx
            .query_opt(
                "UPDATE sso_identities SET last_login_at = now() \
                 WHERE organization_id = $1 AND issuer = $2 AND subject = $3 RETURNING user_id",
                &[&org_id, &person.issuer, &person.subject],
            )
            .await?
            .map(|r| r.get(0));
        let user_id = match linked {
            Some(user_id) => user_id,
            None => {
                let existing: Option<(Uuid, bool)> = tx
                    .query_opt(
                        "SELECT u.id, EXISTS (SELECT 1 FROM memberships m \
                             WHERE m.user_id = u.id AND m.organization_id = $2) \
                         FROM users u WHERE u.email_normalized = $1 FOR UPDATE OF u",
                        &[&person.email_normalized, &org_id],
                    )
                    .await?
                    .map(|r| (r.get(0), r.get(1)));
                let user_id = match existing {
                    Some((user_id, true)) => {
                        // An invited member who never signed up gets an
                        // account that can hold sessions.
                        tx.execute(
                            "UPDATE users SET password_hash = $2 \
                             WHERE id = $1 AND password_hash IS NULL",
                            &[&user_id, &person.unusable_password_hash],
                        )
                        .await?;
                        user_id
                    }
                    Some((_, false)) => return Ok(SignIn::EmailTaken),
                    None => {
                        let user_id = Uuid::new_v4();
                        let made = tx
                            .execute(
                                "INSERT INTO users (id, email, email_normalized, first_name, \
                                 last_name, password_hash) VALUES ($1, $2, $3, $4, $5, $6) \
                             ON CONFLICT (email_normalized) DO NOTHING",
                                &[
                                    &user_id,
                                    &person.email,
                                    &person.email_normalized,
                                    &person.first_name,
                                    &person.last_name,
                                    &person.unusable_password_hash,
                                ],
                            )
                            .await?;
                        if made == 0 {
                            return Ok(SignIn::Raced);
                        }
                        // As a signup makes it.
                        let name =
                            format!("{} {}'s organization", person.first_name, person.last_name);
                        let slug_base = person.email_normalized.split('@').next().unwrap_or("org");
                        super::organizations::insert_with_system_roles(
                            &tx, &name, slug_base, user_id, true,
                        )
                        .await?;
                        let event = Event::system("user.signup")
                            .target("user", user_id)
                            .details(serde_json::json!({ "sso_organization_id": org_id }));
                        audit::record(&tx, origin, &event).await?;
                        user_id
                    }
                };
                let linked = tx
                    .execute(
                        "INSERT INTO sso_identities (organization_id, issuer, subject, user_id) \
                         VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                        &[&org_id, &person.issuer, &person.subject, &user_id],
                    )
                    .await?;
                if linked == 0 {
                    return Ok(SignIn::Raced);
                }
                user_id
            }
        };
        // The membership: created, or its role set from the groups (an
        // owner's stays, and a person provisioned by SCIM keeps the role
        // provisioning gives); a suspended member stays suspended.
        let status: Option<String> = tx
            .query_opt(
                "SELECT m.status::text FROM memberships m \
                 WHERE m.user_id = $1 AND m.organization_id = $2 FOR UPDATE",
                &[&user_id, &org_id],
            )
            .await?
            .map(|r| r.get(0));
        match status.as_deref() {
            None => {
                tx.execute(
                    "INSERT INTO memberships (organization_id, user_id, role_id, status) \
                     VALUES ($1, $2, $3, 'active')",
                    &[&org_id, &user_id, &role_id],
                )
                .await?;
                let event = Event::org(org_id, "member.joined")
                    .target("user", user_id)
                    .details(serde_json::json!({ "role": person.role, "via": "sso" }));
                audit::record(&tx, origin, &event).await?;
            }
            Some("active" | "invited") => {
                let changed = tx
                    .execute(
                        "UPDATE memberships m SET role_id = $3, status = 'active', \
                             updated_at = now() \
                         WHERE m.user_id = $1 AND m.organization_id = $2 \
                           AND (m.role_id <> $3 OR m.status <> 'active') \
                           AND NOT EXISTS (SELECT 1 FROM roles r WHERE r.id = m.role_id \
                                           AND r.is_system_role AND r.name = 'owner') \
                           AND NOT EXISTS (SELECT 1 FROM scim_resources s \
                                           WHERE s.organization_id = m.organization_id \
                                             AND s.user_id = m.user_id)",
                        &[&user_id, &org_id, &role_id],
                    )
                    .await?;
                if changed == 1 {
                    let event = Event::org(org_id, "member.role_changed")
                        .target("user", user_id)
                        .details(serde_json::json!({ "role": person.role, "via": "sso" }));
                    audit::record(&tx, origin, &event).await?;
                }
            }
            Some(_) => return Ok(SignIn::Suspended),
        }
        tx.commit().await?;
        Ok(SignIn::User(user_id))
    }
}
