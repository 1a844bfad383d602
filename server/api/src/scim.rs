//! Types of SCIM 2.0 provisioning (issue #37): an organization's admins
//! turn it on and get its bearer token (`/api/org/scim`); the
//! organization's identity provider then provisions Users and Groups at
//! `/scim/v2` (RFC 7643/7644) with that token. The `Scim*` resource schemas
//! here describe the wire format for the document; the server validates
//! resources against the schemas it publishes at `/scim/v2/Schemas`.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

/// The prefix of a SCIM bearer token.
pub const TOKEN_PREFIX: &str = "wscim_";
/// The most group-to-role mappings.
pub const ROLE_MAPPINGS_MAX: usize = 100;
/// The most resources one list answers (`count` above it is lowered).
pub const MAX_RESULTS: u32 = 200;
/// The media type of SCIM requests and answers.
pub const MEDIA_TYPE: &str = "application/scim+json";

/// One SCIM group (by `displayName`) and the role its members get.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ScimRoleMapping {
    /// A Group's `displayName` (1 to 200 characters, compared exactly).
    pub group: String,
    /// The name of a role of the organization (a system role or a custom
    /// one); never `owner`.
    pub role: String,
}

/// Body of `PUT /api/org/scim`: how provisioned groups map to roles.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScimConfigInput {
    /// Groups and the roles their members get; for a person in several
    /// mapped groups the first mapping wins. At most 100.
    #[serde(default)]
    pub role_mappings: Vec<ScimRoleMapping>,
    /// The role of a provisioned person in none of the mapped groups.
    /// Default `member`; never `owner`.
    #[serde(default = "default_role")]
    pub default_role: String,
}

fn default_role() -> String {
    "member".to_string()
}

/// An organization's SCIM provisioning (never its token).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ScimConfig {
    /// The organization.
    pub organization_id: Uuid,
    /// The base URL to give the identity provider (`…/scim/v2`).
    pub base_url: String,
    /// Whether a bearer token is issued (provisioning works only then).
    pub token_set: bool,
    /// The token's first characters, to recognise it.
    #[schemars(with = "crate::schema::Nullable<String>")]
    pub token_prefix: Option<String>,
    /// When the token was issued.
    #[schemars(with = "crate::schema::Nullable<DateTime<Utc>>")]
    pub token_created_at: Option<DateTime<Utc>>,
    /// When the token was last used (to the minute).
    #[schemars(with = "crate::schema::Nullable<DateTime<Utc>>")]
    pub token_last_used_at: Option<DateTime<Utc>>,
    /// Groups and the roles their members get, in order.
    pub role_mappings: Vec<ScimRoleMapping>,
    /// The role of a provisioned person in none of the mapped groups.
    pub default_role: String,
    /// How many Users are provisioned.
    pub users: i64,
    /// How many Groups are provisioned.
    pub groups: i64,
    /// When provisioning was turned on.
    pub created_at: DateTime<Utc>,
    /// When its settings or token last changed.
    pub updated_at: DateTime<Utc>,
}

/// Answer of `POST /api/org/scim/token`: the new token, shown once.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ScimTokenIssued {
    /// The bearer token (`wscim_…`): give it to the identity provider. It
    /// is shown only now; the previous token stops working.
    pub token: String,
    /// The provisioning settings after the change.
    pub config: ScimConfig,
}

/// Query of `GET /scim/v2/Users` and `GET /scim/v2/Groups` (RFC 7644
/// §3.4.2). Values are read by the server as RFC 7644 says (a `startIndex`
/// below 1 is 1, a negative `count` is 0), never refused by type.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ScimListQuery {
    /// A filter (RFC 7644 §3.4.2.2), e.g. `userName eq "ada@example.com"`.
    #[serde(default)]
    pub filter: Option<String>,
    /// The 1-based index of the first result (default 1).
    #[serde(default, rename = "startIndex")]
    pub start_index: Option<String>,
    /// The most results (default and most: 200).
    #[serde(default)]
    pub count: Option<String>,
    /// Only these attributes (comma-separated; `id` and `schemas` always).
    #[serde(default)]
    pub attributes: Option<String>,
    /// All attributes but these (comma-separated).
    #[serde(default, rename = "excludedAttributes")]
    pub excluded_attributes: Option<String>,
    /// Not supported (`sort.supported` is false): ignored.
    #[serde(default, rename = "sortBy")]
    pub sort_by: Option<String>,
    /// Not supported: ignored.
    #[serde(default, rename = "sortOrder")]
    pub sort_order: Option<String>,
}

/// Query of one resource's `GET` (RFC 7644 §3.4.1, §3.9).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ScimResourceQuery {
    /// Only these attributes (comma-separated).
    #[serde(default)]
    pub attributes: Option<String>,
    /// All attributes but these (comma-separated).
    #[serde(default, rename = "excludedAttributes")]
    pub excluded_attributes: Option<String>,
}

/// A resource's id in a SCIM path (any text: an unknown id is `404`).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ScimIdPath {
    /// The resource's `id`.
    pub id: String,
}

/// The `meta` of a SCIM resource (RFC 7643 §3.1).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScimMeta {
    /// `User`, `Group`, `Schema`, `ResourceType` or `ServiceProviderConfig`.
    pub resource_type: String,
    /// When the resource was created.
    #[serde(default)]
    #[schemars(with = "DateTime<Utc>")]
    pub created: Option<DateTime<Utc>>,
    /// When it last changed.
    #[serde(default)]
    #[schemars(with = "DateTime<Utc>")]
    pub last_modified: Option<DateTime<Utc>>,
    /// Its URL.
    pub location: String,
    /// Its version, a weak entity tag (also the `ETag` header).
    #[serde(default)]
    #[schemars(with = "String")]
    pub version: Option<String>,
}

/// A multi-valued attribute's value (`emails`, `phoneNumbers`).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ScimMultiValue {
    /// The value.
    pub value: String,
    /// A label for people.
    #[serde(default)]
    #[schemars(with = "String")]
    pub display: Option<String>,
    /// `work`, `home`, `other`…
    #[serde(default, rename = "type")]
    #[schemars(with = "String")]
    pub kind: Option<String>,
    /// At most one value is primary.
    #[serde(default)]
    #[schemars(with = "bool")]
    pub primary: Option<bool>,
}

/// A reference to a Group or User (`groups` of a User, `members` of a
/// Group).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ScimReference {
    /// The referenced resource's `id`.
    pub value: String,
    /// Its URL.
    #[serde(default, rename = "$ref")]
    #[schemars(with = "String")]
    pub reference: Option<String>,
    /// Its name.
    #[serde(default)]
    #[schemars(with = "String")]
    pub display: Option<String>,
    /// `User` or `Group`.
    #[serde(default, rename = "type")]
    #[schemars(with = "String")]
    pub kind: Option<String>,
}

/// A person's name (RFC 7643 §4.1.1).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScimName {
    #[serde(default)]
    #[schemars(with = "String")]
    pub formatted: Option<String>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub family_name: Option<String>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub given_name: Option<String>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub middle_name: Option<String>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub honorific_prefix: Option<String>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub honorific_suffix: Option<String>,
}

/// A SCIM User (`urn:ietf:params:scim:schemas:core:2.0:User`, RFC 7643
/// §4.1; the attributes the server keeps are those of
/// `GET /scim/v2/Schemas`). Its account is the one of its primary e-mail
/// address (else the first, else `userName` when it is an address).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScimUser {
    /// The schemas of the resource.
    pub schemas: Vec<String>,
    /// Assigned by the server.
    #[serde(default)]
    #[schemars(with = "String")]
    pub id: Option<String>,
    /// The provider's own id of the person.
    #[serde(default)]
    #[schemars(with = "String")]
    pub external_id: Option<String>,
    /// Unique in the organization (compared without case).
    pub user_name: String,
    #[serde(default)]
    #[schemars(with = "ScimName")]
    pub name: Option<ScimName>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub display_name: Option<String>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub nick_name: Option<String>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub profile_url: Option<String>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub title: Option<String>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub user_type: Option<String>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub preferred_language: Option<String>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub locale: Option<String>,
    #[serde(default)]
    #[schemars(with = "String")]
    pub timezone: Option<String>,
    /// `false` (or deleting the User) suspends the person's membership in
    /// the organization at once.
    #[serde(default)]
    #[schemars(with = "bool")]
    pub active: Option<bool>,
    #[serde(default)]
    pub emails: Vec<ScimMultiValue>,
    #[serde(default)]
    pub phone_numbers: Vec<ScimMultiValue>,
    /// The Groups the User is a member of (read-only).
    #[serde(default)]
    pub groups: Vec<ScimReference>,
    /// The enterprise extension's attributes, when any.
    #[serde(
        default,
        rename = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"
    )]
    #[schemars(with = "Map<String, Value>")]
    pub enterprise: Option<Map<String, Value>>,
    #[serde(default)]
    #[schemars(with = "ScimMeta")]
    pub meta: Option<ScimMeta>,
}

/// A SCIM Group (`urn:ietf:params:scim:schemas:core:2.0:Group`, RFC 7643
/// §4.2). Its members get the role `PUT /api/org/scim` maps its
/// `displayName` to.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScimGroup {
    /// The schemas of the resource.
    pub schemas: Vec<String>,
    /// Assigned by the server.
    #[serde(default)]
    #[schemars(with = "String")]
    pub id: Option<String>,
    /// The provider's own id of the group.
    #[serde(default)]
    #[schemars(with = "String")]
    pub external_id: Option<String>,
    /// The group's name (what role mappings name).
    pub display_name: String,
    /// Users (or Groups) of the organization's provisioned resources.
    #[serde(default)]
    pub members: Vec<ScimReference>,
    #[serde(default)]
    #[schemars(with = "ScimMeta")]
    pub meta: Option<ScimMeta>,
}

/// A page of resources (`urn:ietf:params:scim:api:messages:2.0:ListResponse`).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ScimListResponse {
    pub schemas: Vec<String>,
    /// How many resources match the filter.
    #[serde(rename = "totalResults")]
    pub total_results: i64,
    /// The 1-based index of the first resource of this page.
    #[serde(rename = "startIndex")]
    pub start_index: i64,
    /// How many resources this page holds.
    #[serde(rename = "itemsPerPage")]
    pub items_per_page: i64,
    /// The resources (Users, Groups, Schemas or ResourceTypes).
    #[serde(rename = "Resources")]
    pub resources: Vec<Map<String, Value>>,
}

/// One PATCH operation (RFC 7644 §3.5.2).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ScimPatchOperation {
    /// `add`, `replace` or `remove` (any case).
    pub op: String,
    /// The attribute path (`emails[type eq "work"].value`); without it,
    /// `value` is an object of attributes.
    #[serde(default)]
    #[schemars(with = "String")]
    pub path: Option<String>,
    /// The value(s).
    #[serde(default)]
    #[schemars(with = "Value")]
    pub value: Option<Value>,
}

/// Body of a SCIM PATCH (`urn:ietf:params:scim:api:messages:2.0:PatchOp`).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ScimPatchRequest {
    pub schemas: Vec<String>,
    /// Applied in order, all or none.
    #[serde(rename = "Operations")]
    pub operations: Vec<ScimPatchOperation>,
}

/// A SCIM error (`urn:ietf:params:scim:api:messages:2.0:Error`, RFC 7644
/// §3.12): the body of every SCIM error answer.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ScimError {
    pub schemas: Vec<String>,
    /// The HTTP status, as a string.
    pub status: String,
    /// RFC 7644's error type: `invalidFilter`, `tooMany`, `uniqueness`,
    /// `mutability`, `invalidSyntax`, `invalidPath`, `noTarget`,
    /// `invalidValue`, `invalidVers`, `sensitive`.
    #[serde(default, rename = "scimType")]
    #[schemars(with = "String")]
    pub scim_type: Option<String>,
    /// What went wrong, for people.
    #[serde(default)]
    #[schemars(with = "String")]
    pub detail: Option<String>,
}

/// What the SCIM service supports (`urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig`,
/// RFC 7643 §5): `patch`, `filter` (with `maxResults`), `etag` supported;
/// `bulk`, `sort`, `changePassword` not.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScimServiceProviderConfig {
    pub schemas: Vec<String>,
    /// `{"supported": true}`.
    pub patch: Map<String, Value>,
    /// `{"supported": false, "maxOperations": 0, "maxPayloadSize": 0}`.
    pub bulk: Map<String, Value>,
    /// `{"supported": true, "maxResults": 200}`.
    pub filter: Map<String, Value>,
    /// `{"supported": false}`.
    pub change_password: Map<String, Value>,
    /// `{"supported": false}`.
    pub sort: Map<String, Value>,
    /// `{"supported": true}`.
    pub etag: Map<String, Value>,
    /// The bearer token scheme.
    pub authentication_schemes: Vec<Map<String, Value>>,
    pub meta: ScimMeta,
}

/// A resource type (`urn:ietf:params:scim:schemas:core:2.0:ResourceType`,
/// RFC 7643 §6): `User` (with the enterprise extension) or `Group`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScimResourceType {
    pub schemas: Vec<String>,
    /// `User` or `Group`.
    pub id: String,
    /// `User` or `Group`.
    pub name: String,
    /// `/Users` or `/Groups`.
    pub endpoint: String,
    /// The core schema's URN.
    pub schema: String,
    /// The extensions (`[{schema, required}]`).
    #[serde(default)]
    pub schema_extensions: Vec<Map<String, Value>>,
    pub meta: ScimMeta,
}

/// A schema (`urn:ietf:params:scim:schemas:core:2.0:Schema`, RFC 7643
/// §7): its attributes with their characteristics.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ScimSchema {
    pub schemas: Vec<String>,
    /// The schema's URN.
    pub id: String,
    /// Its name.
    pub name: String,
    /// What it describes.
    #[serde(default)]
    #[schemars(with = "String")]
    pub description: Option<String>,
    /// Each attribute: `name`, `type`, `multiValued`, `required`,
    /// `caseExact`, `mutability`, `returned`, `uniqueness`,
    /// `subAttributes`…
    pub attributes: Vec<Map<String, Value>>,
    pub meta: ScimMeta,
}
