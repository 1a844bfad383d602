//! Types of single sign-on (issue #37, `/api/org/sso` and
//! `/api/auth/sso`): an organization's admins register its OpenID Connect
//! provider; its members sign in through it (authorization code with PKCE,
//! `state`, `nonce`, the issuer and the ID token checked) and get the same
//! sessions as a password login, scoped to that organization.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The most e-mail domains one provider vouches for.
pub const DOMAINS_MAX: usize = 20;
/// The most group-to-role mappings of one provider.
pub const ROLE_MAPPINGS_MAX: usize = 100;
/// How long a started sign-in may take, in seconds.
pub const LOGIN_LIFETIME_SECS: i64 = 600;

/// One group of the provider's group claim and the role it gives.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SsoRoleMapping {
    /// A value of the group claim (1 to 200 characters, compared exactly).
    pub group: String,
    /// The name of a role of the organization (a system role or a custom
    /// one); never `owner`.
    pub role: String,
}

/// Body of `PUT /api/org/sso`: the organization's provider, replaced whole.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SsoConfigInput {
    /// The provider's issuer (`https://`, or `http://` for a loopback
    /// address or where the server's configuration allows it). Its
    /// `/.well-known/openid-configuration` must name this exact issuer.
    pub issuer: String,
    /// The client id registered at the provider for this organization.
    pub client_id: String,
    /// The client's secret (`client_secret_basic` at the token endpoint).
    /// Write-only: stored sealed, never answered. Required the first
    /// time; omitted, the stored one is kept.
    #[serde(default)]
    pub client_secret: Option<String>,
    /// The e-mail domains the provider vouches for (`example.com`; 1 to
    /// 20, lowercase, unique across organizations). A sign-in whose
    /// address is in none of them is refused; `POST /api/auth/sso/start`
    /// finds the organization by them.
    pub domains: Vec<String>,
    /// The claim (of the ID token or the UserInfo answer) holding the
    /// person's groups: an array of strings, or one string. Default
    /// `groups`.
    #[serde(default)]
    pub groups_claim: Option<String>,
    /// Groups and the roles they give; the first mapping whose group the
    /// person has wins. At most 100.
    #[serde(default)]
    pub role_mappings: Vec<SsoRoleMapping>,
    /// The role of a person in none of the mapped groups; `null` refuses
    /// them (`403 sso_not_assigned`). Default `member`.
    #[serde(default = "default_role")]
    pub default_role: Option<String>,
    /// Whether the organization requires single sign-on: its members'
    /// password sessions and their personal access tokens made outside
    /// a single sign-on session are refused in it (`403 sso_required`).
    /// Its owners keep password access (so a broken provider cannot lock
    /// the organization out), and service accounts are not affected.
    #[serde(default)]
    pub enforced: bool,
}

fn default_role() -> Option<String> {
    Some("member".to_string())
}

/// An organization's single sign-on provider (never its client secret).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct SsoConfig {
    /// The organization.
    pub organization_id: Uuid,
    /// The provider's issuer.
    pub issuer: String,
    /// The client id registered at the provider.
    pub client_id: String,
    /// Always `true`: a secret is stored (it is never answered).
    pub client_secret_set: bool,
    /// The e-mail domains the provider vouches for, sorted.
    pub domains: Vec<String>,
    /// The claim holding the person's groups.
    pub groups_claim: String,
    /// Groups and the roles they give, in order.
    pub role_mappings: Vec<SsoRoleMapping>,
    /// The role of a person in none of the mapped groups (`null`: refused).
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub default_role: Option<String>,
    /// Whether the organization requires single sign-on.
    pub enforced: bool,
    /// When the provider was first registered.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// Body of `POST /api/auth/sso/start`: which organization (by the
/// person's e-mail address or by id) and where the provider sends them
/// back.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SsoStartRequest {
    /// The person's e-mail address: its domain names the organization.
    #[serde(default)]
    pub email: Option<String>,
    /// The organization, when the e-mail address is not given.
    #[serde(default)]
    pub organization_id: Option<Uuid>,
    /// The page the provider redirects to with `code`, `state` and `iss`
    /// (registered at the provider for the client; `https://`, or
    /// `http://` on a loopback address). It hands them to
    /// `POST /api/auth/sso/callback`.
    pub redirect_uri: String,
}

/// Answer of `POST /api/auth/sso/start`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct SsoStart {
    /// Send the person's browser here.
    pub authorization_url: String,
    /// The `state` of this sign-in (also inside `authorization_url`).
    pub state: String,
    /// The organization whose provider the sign-in goes through.
    pub organization_id: Uuid,
    /// The sign-in must end (`POST /api/auth/sso/callback`) before this.
    pub expires_at: DateTime<Utc>,
}

/// Body of `POST /api/auth/sso/callback`: what the provider's redirect
/// carried.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SsoCallbackRequest {
    /// The redirect's `state` parameter (the one `POST /api/auth/sso/start`
    /// answered).
    pub state: String,
    /// The redirect's `code` parameter: the authorization code.
    pub code: String,
    /// The redirect's `iss` parameter (RFC 9207), when it had one.
    #[serde(default)]
    pub iss: Option<String>,
}
