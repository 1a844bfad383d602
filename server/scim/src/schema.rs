//! The attribute table (the single definition of every attribute this
//! service provider supports) and what derives directly from it: the
//! `/Schemas`, `/ResourceTypes` and `/ServiceProviderConfig` documents,
//! attribute path resolution and the validation of resources (`sanitize`).

use serde_json::{Map, Value, json};

use crate::error::{ENTERPRISE_USER_URN, GROUP_URN, ScimError, USER_URN};

/// Maximum length in bytes of a string value.
pub const MAX_STRING_BYTES: usize = 4096;
/// Maximum number of values of a multi-valued attribute (except Group members).
pub const MAX_VALUES: usize = 100;
/// Maximum number of Group members.
pub const MAX_MEMBERS: usize = 10000;

/// The two resource types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `urn:ietf:params:scim:schemas:core:2.0:User`.
    User,
    /// `urn:ietf:params:scim:schemas:core:2.0:Group`.
    Group,
}

impl Kind {
    /// The endpoint name: "Users" or "Groups".
    pub fn endpoint(self) -> &'static str {
        match self {
            Kind::User => "Users",
            Kind::Group => "Groups",
        }
    }

    /// The resource type name: "User" or "Group".
    pub fn name(self) -> &'static str {
        match self {
            Kind::User => "User",
            Kind::Group => "Group",
        }
    }

    /// The URN of the core schema.
    pub fn schema_urn(self) -> &'static str {
        match self {
            Kind::User => USER_URN,
            Kind::Group => GROUP_URN,
        }
    }

    /// The core schema definition.
    pub fn core(self) -> &'static SchemaDef {
        match self {
            Kind::User => &USER_SCHEMA,
            Kind::Group => &GROUP_SCHEMA,
        }
    }

    /// The extension schemas a resource of this kind may carry.
    pub fn extensions(self) -> &'static [SchemaDef] {
        match self {
            Kind::User => USER_EXTENSIONS,
            Kind::Group => &[],
        }
    }
}

/// An attribute data type (RFC 7643 §2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttrType {
    /// `string`.
    String,
    /// `boolean`.
    Boolean,
    /// `integer`.
    Integer,
    /// `decimal`.
    Decimal,
    /// `dateTime` (an RFC 3339 string).
    DateTime,
    /// `reference` (a URI string).
    Reference,
    /// `binary` (a base64 string).
    Binary,
    /// `complex` (an object of sub-attributes).
    Complex,
}

impl AttrType {
    /// The name used in `/Schemas`.
    pub fn as_str(self) -> &'static str {
        match self {
            AttrType::String => "string",
            AttrType::Boolean => "boolean",
            AttrType::Integer => "integer",
            AttrType::Decimal => "decimal",
            AttrType::DateTime => "dateTime",
            AttrType::Reference => "reference",
            AttrType::Binary => "binary",
            AttrType::Complex => "complex",
        }
    }
}

/// Mutability (RFC 7643 §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutability {
    /// Set by the service provider only.
    ReadOnly,
    /// Freely modifiable.
    ReadWrite,
    /// Settable only while unassigned.
    Immutable,
    /// Never returned.
    WriteOnly,
}

/// When an attribute is returned (RFC 7643 §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returned {
    /// Always, even when not requested.
    Always,
    /// Never.
    Never,
    /// Unless excluded.
    Default,
    /// Only when requested.
    Request,
}

/// Uniqueness (RFC 7643 §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uniqueness {
    /// No uniqueness.
    None,
    /// Unique within the service provider (here: the organization).
    Server,
    /// Globally unique.
    Global,
}

/// One attribute definition with all its RFC 7643 §7 characteristics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    /// Canonical name.
    pub name: &'static str,
    /// Data type.
    pub ty: AttrType,
    /// Whether the attribute holds a list of values.
    pub multi: bool,
    /// Description for `/Schemas`.
    pub description: &'static str,
    /// Whether a resource must carry the attribute.
    pub required: bool,
    /// Whether string comparisons are case sensitive.
    pub case_exact: bool,
    /// Mutability.
    pub mutability: Mutability,
    /// Returnability.
    pub returned: Returned,
    /// Uniqueness.
    pub uniqueness: Uniqueness,
    /// Sub-attributes of a complex attribute.
    pub sub: &'static [Attr],
    /// Canonical values (suggestions, not enforced).
    pub canonical: &'static [&'static str],
    /// Reference types of a reference attribute.
    pub refs: &'static [&'static str],
    /// A common attribute (RFC 7643 §3.1: id, externalId, meta).
    pub common: bool,
}

impl Attr {
    const fn new(name: &'static str, ty: AttrType, description: &'static str) -> Attr {
        Attr {
            name,
            ty,
            multi: false,
            description,
            required: false,
            case_exact: false,
            mutability: Mutability::ReadWrite,
            returned: Returned::Default,
            uniqueness: Uniqueness::None,
            sub: &[],
            canonical: &[],
            refs: &[],
            common: false,
        }
    }
    const fn multi(mut self) -> Attr {
        self.multi = true;
        self
    }
    const fn required(mut self) -> Attr {
        self.required = true;
        self
    }
    const fn case_exact(mut self) -> Attr {
        self.case_exact = true;
        self
    }
    const fn read_only(mut self) -> Attr {
        self.mutability = Mutability::ReadOnly;
        self
    }
    const fn immutable(mut self) -> Attr {
        self.mutability = Mutability::Immutable;
        self
    }
    const fn always(mut self) -> Attr {
        self.returned = Returned::Always;
        self
    }
    const fn unique(mut self) -> Attr {
        self.uniqueness = Uniqueness::Server;
        self
    }
    const fn sub(mut self, sub: &'static [Attr]) -> Attr {
        self.sub = sub;
        self
    }
    const fn canonical(mut self, c: &'static [&'static str]) -> Attr {
        self.canonical = c;
        self
    }
    const fn refs(mut self, r: &'static [&'static str]) -> Attr {
        self.refs = r;
        self
    }
    const fn common(mut self) -> Attr {
        self.common = true;
        self
    }

    /// The sub-attribute named `name` (case-insensitive).
    pub fn sub_attr(&self, name: &str) -> Option<&'static Attr> {
        self.sub.iter().find(|a| a.name.eq_ignore_ascii_case(name))
    }

    /// Whether this is a complex attribute.
    pub fn is_complex(&self) -> bool {
        self.ty == AttrType::Complex
    }

    /// The maximum number of values of a multi-valued attribute.
    pub fn max_values(&self) -> usize {
        if self.name == "members" {
            MAX_MEMBERS
        } else {
            MAX_VALUES
        }
    }

    fn json_repr(&self) -> Value {
        let mut o = Map::new();
        o.insert("name".into(), json!(self.name));
        o.insert("type".into(), json!(self.ty.as_str()));
        o.insert("multiValued".into(), json!(self.multi));
        o.insert("description".into(), json!(self.description));
        o.insert("required".into(), json!(self.required));
        if !self.is_complex() {
            o.insert("caseExact".into(), json!(self.case_exact));
        }
        if !self.canonical.is_empty() {
            o.insert("canonicalValues".into(), json!(self.canonical));
        }
        if !self.refs.is_empty() {
            o.insert("referenceTypes".into(), json!(self.refs));
        }
        let m = match self.mutability {
            Mutability::ReadOnly => "readOnly",
            Mutability::ReadWrite => "readWrite",
            Mutability::Immutable => "immutable",
            Mutability::WriteOnly => "writeOnly",
        };
        o.insert("mutability".into(), json!(m));
        let r = match self.returned {
            Returned::Always => "always",
            Returned::Never => "never",
            Returned::Default => "default",
            Returned::Request => "request",
        };
        o.insert("returned".into(), json!(r));
        let u = match self.uniqueness {
            Uniqueness::None => "none",
            Uniqueness::Server => "server",
            Uniqueness::Global => "global",
        };
        o.insert("uniqueness".into(), json!(u));
        if self.is_complex() {
            let subs: Vec<Value> = self.sub.iter().map(Attr::json_repr).collect();
            o.insert("subAttributes".into(), Value::Array(subs));
        }
        Value::Object(o)
    }
}

/// A schema: its URN, name, description and attributes.
#[derive(Debug, PartialEq, Eq)]
pub struct SchemaDef {
    /// The schema URN (its id).
    pub urn: &'static str,
    /// Short name.
    pub name: &'static str,
    /// Description.
    pub description: &'static str,
    /// Top-level attributes.
    pub attrs: &'static [Attr],
    /// Whether this schema is an extension (stored under its URN key).
    pub extension: bool,
}

impl SchemaDef {
    /// The top-level attribute named `name` (case-insensitive).
    pub fn attr(&self, name: &str) -> Option<&'static Attr> {
        self.attrs
            .iter()
            .find(|a| a.name.eq_ignore_ascii_case(name))
    }
}

use AttrType as T;

const ID: Attr = Attr::new(
    "id",
    T::String,
    "Unique identifier for the SCIM resource as defined by the Service Provider.",
)
.case_exact()
.read_only()
.always()
.unique()
.common();
const EXTERNAL_ID: Attr = Attr::new(
    "externalId",
    T::String,
    "A String that is an identifier for the resource as defined by the provisioning client.",
)
.case_exact()
.common();
const META_SUB: &[Attr] = &[
    Attr::new("resourceType", T::String, "The name of the resource type of the resource.").case_exact().read_only(),
    Attr::new("created", T::DateTime, "The DateTime that the resource was added to the service provider.").read_only(),
    Attr::new("lastModified", T::DateTime, "The most recent DateTime that the details of this resource were updated at the service provider.").read_only(),
    Attr::new("location", T::Reference, "The URI of the resource being returned.").case_exact().read_only().refs(&["uri"]),
    Attr::new("version", T::String, "The version of the resource being returned.").case_exact().read_only(),
];
const META: Attr = Attr::new(
    "meta",
    T::Complex,
    "A complex attribute containing resource metadata.",
)
.read_only()
.sub(META_SUB)
.common();

const NAME_SUB: &[Attr] = &[
    Attr::new(
        "formatted",
        T::String,
        "The full name, including all middle names, titles, and suffixes as appropriate, formatted for display (e.g., 'Ms. Barbara J Jensen, III').",
    ),
    Attr::new(
        "familyName",
        T::String,
        "The family name of the User, or last name in most Western languages (e.g., 'Jensen' given the full name 'Ms. Barbara J Jensen, III').",
    ),
    Attr::new(
        "givenName",
        T::String,
        "The given name of the User, or first name in most Western languages (e.g., 'Barbara' given the full name 'Ms. Barbara J Jensen, III').",
    ),
    Attr::new(
        "middleName",
        T::String,
        "The middle name(s) of the User (e.g., 'Jane' given the full name 'Ms. Barbara J Jensen, III').",
    ),
    Attr::new(
        "honorificPrefix",
        T::String,
        "The honorific prefix(es) of the User, or title in most Western languages (e.g., 'Ms.' given the full name 'Ms. Barbara J Jensen, III').",
    ),
    Attr::new(
        "honorificSuffix",
        T::String,
        "The honorific suffix(es) of the User, or suffix in most Western languages (e.g., 'III' given the full name 'Ms. Barbara J Jensen, III').",
    ),
];
const EMAILS_SUB: &[Attr] = &[
    Attr::new(
        "value",
        T::String,
        "Email addresses for the user. The value SHOULD be canonicalized by the service provider, e.g., 'bjensen@example.com' instead of 'bjensen@EXAMPLE.COM'. Canonical type values of 'work', 'home', and 'other'.",
    ),
    Attr::new(
        "display",
        T::String,
        "A human-readable name, primarily used for display purposes. READ-ONLY.",
    ),
    Attr::new(
        "type",
        T::String,
        "A label indicating the attribute's function, e.g., 'work' or 'home'.",
    )
    .canonical(&["work", "home", "other"]),
    Attr::new(
        "primary",
        T::Boolean,
        "A Boolean value indicating the 'primary' or preferred attribute value for this attribute, e.g., the preferred mailing address or primary email address. The primary attribute value 'true' MUST appear no more than once.",
    ),
];
const PHONES_SUB: &[Attr] = &[
    Attr::new("value", T::String, "Phone number of the User."),
    Attr::new(
        "display",
        T::String,
        "A human-readable name, primarily used for display purposes. READ-ONLY.",
    ),
    Attr::new(
        "type",
        T::String,
        "A label indicating the attribute's function, e.g., 'work', 'home', 'mobile'.",
    )
    .canonical(&["work", "home", "mobile", "fax", "pager", "other"]),
    Attr::new(
        "primary",
        T::Boolean,
        "A Boolean value indicating the 'primary' or preferred attribute value for this attribute, e.g., the preferred phone number or primary phone number. The primary attribute value 'true' MUST appear no more than once.",
    ),
];
const USER_GROUPS_SUB: &[Attr] = &[
    Attr::new("value", T::String, "The identifier of the User's group.")
        .case_exact()
        .read_only(),
    Attr::new(
        "$ref",
        T::Reference,
        "The URI of the corresponding 'Group' resource to which the user belongs.",
    )
    .case_exact()
    .read_only()
    .refs(&["User", "Group"]),
    Attr::new(
        "display",
        T::String,
        "A human-readable name, primarily used for display purposes. READ-ONLY.",
    )
    .read_only(),
    Attr::new(
        "type",
        T::String,
        "A label indicating the attribute's function, e.g., 'direct' or 'indirect'.",
    )
    .read_only()
    .canonical(&["direct", "indirect"]),
];

const USER_ATTRS: &[Attr] = &[
    ID,
    EXTERNAL_ID,
    Attr::new("userName", T::String, "Unique identifier for the User, typically used by the user to directly authenticate to the service provider. Each User MUST include a non-empty userName value. This identifier MUST be unique across the service provider's entire set of Users. REQUIRED.")
        .required()
        .unique(),
    Attr::new("name", T::Complex, "The components of the user's real name. Providers MAY return just the full name as a single string in the formatted sub-attribute, or they MAY return just the individual component attributes using the other sub-attributes, or they MAY return both.").sub(NAME_SUB),
    Attr::new("displayName", T::String, "The name of the User, suitable for display to end-users. The name SHOULD be the full name of the User being described, if known."),
    Attr::new("nickName", T::String, "The casual way to address the user in real life, e.g., 'Bob' or 'Bobby' instead of 'Robert'."),
    Attr::new("profileUrl", T::Reference, "A fully qualified URL pointing to a page representing the User's online profile.").refs(&["external"]),
    Attr::new("title", T::String, "The user's title, such as \"Vice President.\""),
    Attr::new("userType", T::String, "Used to identify the relationship between the organization and the user. Typical values used might be 'Contractor', 'Employee', 'Intern', 'Temp', 'External', and 'Unknown', but any value may be used."),
    Attr::new("preferredLanguage", T::String, "Indicates the User's preferred written or spoken language. Generally used for selecting a localized user interface; e.g., 'en_US' specifies the language English and country US."),
    Attr::new("locale", T::String, "Used to indicate the User's default location for purposes of localizing items such as currency, date time format, or numerical representations."),
    Attr::new("timezone", T::String, "The User's time zone in the 'Olson' time zone database format, e.g., 'America/Los_Angeles'."),
    Attr::new("active", T::Boolean, "A Boolean value indicating the User's administrative status."),
    Attr::new("emails", T::Complex, "Email addresses for the user. The value SHOULD be canonicalized by the service provider, e.g., 'bjensen@example.com' instead of 'bjensen@EXAMPLE.COM'. Canonical type values of 'work', 'home', and 'other'.").multi().sub(EMAILS_SUB),
    Attr::new("phoneNumbers", T::Complex, "Phone numbers for the User. The value SHOULD be canonicalized by the service provider according to the format specified in RFC 3966, e.g., 'tel:+1-201-555-0123'. Canonical type values of 'work', 'home', 'mobile', 'fax', 'pager', and 'other'.").multi().sub(PHONES_SUB),
    Attr::new("groups", T::Complex, "A list of groups to which the user belongs, either through direct membership, through nested groups, or dynamically calculated.").multi().read_only().sub(USER_GROUPS_SUB),
    META,
];

const MEMBERS_SUB: &[Attr] = &[
    Attr::new(
        "value",
        T::String,
        "Identifier of the member of this Group.",
    )
    .case_exact()
    .immutable(),
    Attr::new(
        "$ref",
        T::Reference,
        "The URI corresponding to a SCIM resource that is a member of this Group.",
    )
    .case_exact()
    .immutable()
    .refs(&["User", "Group"]),
    Attr::new(
        "display",
        T::String,
        "A human-readable name, primarily used for display purposes.",
    ),
    Attr::new(
        "type",
        T::String,
        "A label indicating the type of resource, e.g., 'User' or 'Group'.",
    )
    .immutable()
    .canonical(&["User", "Group"]),
];

const GROUP_ATTRS: &[Attr] = &[
    ID,
    EXTERNAL_ID,
    Attr::new(
        "displayName",
        T::String,
        "A human-readable name for the Group. REQUIRED.",
    )
    .required(),
    Attr::new("members", T::Complex, "A list of members of the Group.")
        .multi()
        .sub(MEMBERS_SUB),
    META,
];

const MANAGER_SUB: &[Attr] = &[
    Attr::new(
        "value",
        T::String,
        "The id of the SCIM resource representing the User's manager.",
    )
    .case_exact(),
    Attr::new(
        "$ref",
        T::Reference,
        "The URI of the SCIM resource representing the User's manager.",
    )
    .case_exact()
    .refs(&["User"]),
    Attr::new(
        "displayName",
        T::String,
        "The displayName of the User's manager.",
    )
    .read_only(),
];

const ENTERPRISE_ATTRS: &[Attr] = &[
    Attr::new("employeeNumber", T::String, "Numeric or alphanumeric identifier assigned to a person, typically based on order of hire or association with an organization."),
    Attr::new("costCenter", T::String, "Identifies the name of a cost center."),
    Attr::new("organization", T::String, "Identifies the name of an organization."),
    Attr::new("division", T::String, "Identifies the name of a division."),
    Attr::new("department", T::String, "Identifies the name of a department."),
    Attr::new("manager", T::Complex, "The User's manager. A complex type that optionally allows service providers to represent organizational hierarchy by referencing the 'id' attribute of another User.").sub(MANAGER_SUB),
];

static USER_SCHEMA: SchemaDef = SchemaDef {
    urn: USER_URN,
    name: "User",
    description: "User Account",
    attrs: USER_ATTRS,
    extension: false,
};

static GROUP_SCHEMA: SchemaDef = SchemaDef {
    urn: GROUP_URN,
    name: "Group",
    description: "Group",
    attrs: GROUP_ATTRS,
    extension: false,
};

static USER_EXTENSIONS: &[SchemaDef] = &[SchemaDef {
    urn: ENTERPRISE_USER_URN,
    name: "EnterpriseUser",
    description: "Enterprise User",
    attrs: ENTERPRISE_ATTRS,
    extension: true,
}];

/// Whether the common attributes (id, externalId, meta) are listed in `/Schemas`.
const DECLARE_COMMON: bool = true;

fn schema_json(def: &SchemaDef, base_url: &str) -> Value {
    let attrs: Vec<Value> = def
        .attrs
        .iter()
        .filter(|a| DECLARE_COMMON || !a.common)
        .map(Attr::json_repr)
        .collect();
    json!({
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Schema"],
        "id": def.urn,
        "name": def.name,
        "description": def.description,
        "attributes": attrs,
        "meta": {
            "resourceType": "Schema",
            "location": format!("{base_url}/Schemas/{}", def.urn),
        },
    })
}

/// The `/Schemas` resources.
pub fn schemas(base_url: &str) -> Vec<Value> {
    let mut out = vec![
        schema_json(&USER_SCHEMA, base_url),
        schema_json(&GROUP_SCHEMA, base_url),
    ];
    out.extend(USER_EXTENSIONS.iter().map(|d| schema_json(d, base_url)));
    out
}

/// The `/ResourceTypes` resources.
pub fn resource_types(base_url: &str) -> Vec<Value> {
    [Kind::User, Kind::Group]
        .into_iter()
        .map(|kind| {
            let ext: Vec<Value> = kind
                .extensions()
                .iter()
                .map(|e| json!({"schema": e.urn, "required": false}))
                .collect();
            let mut rt = json!({
                "schemas": ["urn:ietf:params:scim:schemas:core:2.0:ResourceType"],
                "id": kind.name(),
                "name": kind.name(),
                "endpoint": format!("/{}", kind.endpoint()),
                "description": kind.name(),
                "schema": kind.schema_urn(),
                "meta": {
                    "resourceType": "ResourceType",
                    "location": format!("{base_url}/ResourceTypes/{}", kind.name()),
                },
            });
            if let (false, Some(o)) = (ext.is_empty(), rt.as_object_mut()) {
                o.insert("schemaExtensions".into(), Value::Array(ext));
            }
            rt
        })
        .collect()
}

/// The `/ServiceProviderConfig` resource.
pub fn service_provider_config(base_url: &str, max_results: u32) -> Value {
    json!({
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"],
        "patch": {"supported": true},
        "bulk": {"supported": false, "maxOperations": 0, "maxPayloadSize": 0},
        "filter": {"supported": true, "maxResults": max_results},
        "changePassword": {"supported": false},
        "sort": {"supported": false},
        "etag": {"supported": true},
        "authenticationSchemes": [{
            "type": "oauthbearertoken",
            "name": "OAuth Bearer Token",
            "description": "Authentication scheme using the OAuth Bearer Token Standard",
            "specUri": "https://www.rfc-editor.org/info/rfc6750",
            "primary": true,
        }],
        "meta": {
            "resourceType": "ServiceProviderConfig",
            "location": format!("{base_url}/ServiceProviderConfig"),
        },
    })
}

/// A resolved attribute path: the schema holding the attribute, the
/// attribute and optionally one of its sub-attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttrPath {
    /// The schema the attribute belongs to (core or extension).
    pub schema: &'static SchemaDef,
    /// The top-level attribute.
    pub attr: &'static Attr,
    /// The sub-attribute, if any.
    pub sub: Option<&'static Attr>,
}

impl AttrPath {
    /// The attribute whose characteristics apply (the sub-attribute if any).
    pub fn leaf(&self) -> &'static Attr {
        self.sub.unwrap_or(self.attr)
    }

    /// The canonical textual form (extension attributes URN-qualified).
    pub fn canonical(&self) -> String {
        let mut s = String::new();
        if self.schema.extension {
            s.push_str(self.schema.urn);
            s.push(':');
        }
        s.push_str(self.attr.name);
        if let Some(sub) = self.sub {
            s.push('.');
            s.push_str(sub.name);
        }
        s
    }
}

/// What a path string designates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolved {
    /// A whole extension object (the path was the bare extension URN).
    Extension(&'static SchemaDef),
    /// An attribute or sub-attribute.
    Attr(AttrPath),
}

/// Splits a possible schema URN prefix (case-insensitive) off `path`.
/// Returns the schema and the rest (empty when `path` is the bare URN).
pub(crate) fn split_urn(kind: Kind, path: &str) -> Option<(&'static SchemaDef, &str)> {
    let schemas = std::iter::once(kind.core()).chain(kind.extensions().iter());
    // Longest URN first so that an extension URN sharing a prefix wins.
    let mut best: Option<(&'static SchemaDef, &str)> = None;
    for def in schemas {
        let n = def.urn.len();
        let head = path.get(..n);
        if head.is_some_and(|h| h.eq_ignore_ascii_case(def.urn)) {
            let rest = &path[n..];
            let rest = if rest.is_empty() {
                Some("")
            } else {
                rest.strip_prefix(':')
            };
            if let Some(rest) = rest
                && best.is_none_or(|(b, _)| b.urn.len() < n)
            {
                best = Some((def, rest));
            }
        }
    }
    best
}

/// Resolves an attribute path (`userName`, `EMAILS.VALUE`, URN-qualified
/// forms, a bare extension URN). Names are case-insensitive.
pub fn resolve(kind: Kind, path: &str) -> Option<Resolved> {
    let (schema, rest) = match split_urn(kind, path) {
        Some((def, "")) if def.extension => return Some(Resolved::Extension(def)),
        Some((_, "")) => return None,
        Some((def, rest)) => (def, rest),
        None => (kind.core(), path),
    };
    let (name, sub) = match rest.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (rest, None),
    };
    let attr = schema.attr(name)?;
    let sub = match sub {
        Some(s) => Some(attr.sub_attr(s)?),
        None => None,
    };
    Some(Resolved::Attr(AttrPath { schema, attr, sub }))
}

/// Canonical attribute path of a filter/patch path given in any case, e.g.
/// `EMAILS.VALUE` → `emails.value`; URN-qualified core paths lose their URN,
/// extension paths keep it. `None` for an unknown attribute.
pub fn canonical_path(kind: Kind, path: &str) -> Option<String> {
    match resolve(kind, path)? {
        Resolved::Extension(def) => Some(def.urn.to_owned()),
        Resolved::Attr(p) => Some(p.canonical()),
    }
}

/// For PUT (RFC 7644 §3.5.1): checks that immutable attributes keep their
/// values. None of our top-level attributes is immutable (the immutable
/// Group `members` sub-attributes are replaced with the whole list), so this
/// accepts everything.
pub fn check_immutable(_kind: Kind, _old: &Value, _new: &Value) -> Result<(), ScimError> {
    Ok(())
}

/// How lenient value conversion is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// POST/PUT bodies.
    Strict,
    /// PATCH values: booleans may be given as "True"/"False" strings.
    Patch,
}

fn type_error(path: &str, expected: &str) -> ScimError {
    ScimError::invalid_value(format!("attribute '{path}' must be {expected}"))
}

/// Converts a simple (non-complex, single) value.
fn simple_value(attr: &Attr, v: Value, path: &str, mode: Mode) -> Result<Value, ScimError> {
    match attr.ty {
        AttrType::String | AttrType::Reference => match v {
            Value::String(s) => {
                check_len(&s, path)?;
                Ok(Value::String(s))
            }
            _ => Err(type_error(path, "a string")),
        },
        AttrType::Boolean => match v {
            Value::Bool(b) => Ok(Value::Bool(b)),
            Value::String(s) if mode == Mode::Patch && s.eq_ignore_ascii_case("true") => {
                Ok(Value::Bool(true))
            }
            Value::String(s) if mode == Mode::Patch && s.eq_ignore_ascii_case("false") => {
                Ok(Value::Bool(false))
            }
            _ => Err(type_error(path, "a boolean")),
        },
        AttrType::Integer => match v {
            Value::Number(n) if n.is_i64() || n.is_u64() => Ok(Value::Number(n)),
            _ => Err(type_error(path, "an integer")),
        },
        AttrType::Decimal => match v {
            Value::Number(n) => Ok(Value::Number(n)),
            _ => Err(type_error(path, "a number")),
        },
        AttrType::DateTime => match v {
            Value::String(s) if is_rfc3339(&s) => Ok(Value::String(s)),
            _ => Err(type_error(path, "an RFC 3339 date-time string")),
        },
        AttrType::Binary => match v {
            Value::String(s) if is_base64(&s) => {
                check_len(&s, path)?;
                Ok(Value::String(s))
            }
            _ => Err(type_error(path, "a base64 string")),
        },
        AttrType::Complex => Err(type_error(path, "an object")),
    }
}

fn check_len(s: &str, path: &str) -> Result<(), ScimError> {
    if s.len() > MAX_STRING_BYTES {
        return Err(ScimError::invalid_value(format!(
            "attribute '{path}' is longer than {MAX_STRING_BYTES} bytes"
        )));
    }
    Ok(())
}

fn is_base64(s: &str) -> bool {
    let t = s.trim_end_matches('=');
    s.len() - t.len() <= 2
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'-' || b == b'_')
}

/// `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`.
pub(crate) fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| {
        b.get(r.clone())
            .is_some_and(|x| x.len() == r.len() && x.iter().all(u8::is_ascii_digit))
    };
    if !(digits(0..4)
        && b.get(4) == Some(&b'-')
        && digits(5..7)
        && b.get(7) == Some(&b'-')
        && digits(8..10)
        && matches!(b.get(10), Some(b'T' | b't' | b' '))
        && digits(11..13)
        && b.get(13) == Some(&b':')
        && digits(14..16)
        && b.get(16) == Some(&b':')
        && digits(17..19))
    {
        return false;
    }
    let mut i = 19;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    match b.get(i) {
        Some(b'Z' | b'z') => i + 1 == b.len(),
        Some(b'+' | b'-') => {
            digits(i + 1..i + 3)
                && b.get(i + 3) == Some(&b':')
                && digits(i + 4..i + 6)
                && i + 6 == b.len()
        }
        _ => false,
    }
}

/// Converts a complex single value (an object of sub-attributes).
/// Returns `None` when nothing is left (unassigned).
fn complex_value(
    attr: &Attr,
    v: Value,
    path: &str,
    mode: Mode,
) -> Result<Option<Value>, ScimError> {
    let Value::Object(obj) = v else {
        return Err(type_error(path, "an object"));
    };
    let mut out = Map::new();
    for (k, v) in obj {
        let Some(sub) = attr.sub_attr(&k) else {
            continue;
        };
        if sub.mutability == Mutability::ReadOnly || v.is_null() {
            continue;
        }
        let sub_path = format!("{path}.{}", sub.name);
        if let Some(v) = single_value(sub, v, &sub_path, mode)? {
            out.insert(sub.name.to_owned(), v);
        }
    }
    if out.is_empty() {
        return Ok(None);
    }
    for sub in attr.sub {
        if sub.required && !out.contains_key(sub.name) {
            return Err(ScimError::invalid_value(format!(
                "attribute '{path}.{}' is required",
                sub.name
            )));
        }
    }
    Ok(Some(Value::Object(out)))
}

/// One value of the attribute (ignoring `multi`). `None` = unassigned.
pub(crate) fn single_value(
    attr: &Attr,
    v: Value,
    path: &str,
    mode: Mode,
) -> Result<Option<Value>, ScimError> {
    if v.is_null() {
        return Ok(None);
    }
    if v.is_array() {
        return Err(ScimError::invalid_value(format!(
            "attribute '{path}' is single-valued"
        )));
    }
    if attr.is_complex() {
        complex_value(attr, v, path, mode)
    } else {
        simple_value(attr, v, path, mode).map(Some)
    }
}

/// Converts a value of `attr` (multi-valued or not) to its canonical form.
/// `None` = unassigned (null, empty array, empty object).
pub(crate) fn attr_value(
    attr: &Attr,
    v: Value,
    path: &str,
    mode: Mode,
) -> Result<Option<Value>, ScimError> {
    if !attr.multi {
        return single_value(attr, v, path, mode);
    }
    let items = match v {
        Value::Null => return Ok(None),
        Value::Array(items) => items,
        _ => {
            return Err(ScimError::invalid_value(format!(
                "attribute '{path}' is multi-valued and must be an array"
            )));
        }
    };
    if items.len() > attr.max_values() {
        return Err(ScimError::invalid_value(format!(
            "attribute '{path}' has more than {} values",
            attr.max_values()
        )));
    }
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        if let Some(v) = single_value(attr, item, path, mode)? {
            out.push(v);
        }
    }
    let primaries = out
        .iter()
        .filter(|v| v.get("primary") == Some(&Value::Bool(true)))
        .count();
    if primaries > 1 {
        return Err(ScimError::invalid_value(format!(
            "attribute '{path}' has more than one primary value"
        )));
    }
    if out.is_empty() {
        Ok(None)
    } else {
        Ok(Some(Value::Array(out)))
    }
}

/// Converts the attributes of one schema found in `obj` into `out`.
fn schema_attrs(
    def: &SchemaDef,
    obj: Map<String, Value>,
    out: &mut Map<String, Value>,
    mode: Mode,
) -> Result<(), ScimError> {
    for (k, v) in obj {
        let Some(attr) = def.attr(&k) else {
            continue;
        };
        if attr.mutability == Mutability::ReadOnly {
            continue;
        }
        if let Some(v) = attr_value(attr, v, attr.name, mode)? {
            out.insert(attr.name.to_owned(), v);
        }
    }
    Ok(())
}

/// POST/PUT body → canonical stored document (see the crate documentation):
/// names canonicalized, readOnly and unknown attributes dropped, null and
/// empty values removed, types, sizes, `primary` and required attributes
/// checked; `schemas` rewritten to the core URN plus the extensions present.
pub fn sanitize(kind: Kind, body: Value) -> Result<Value, ScimError> {
    sanitize_mode(kind, body, Mode::Strict)
}

pub(crate) fn sanitize_mode(kind: Kind, body: Value, mode: Mode) -> Result<Value, ScimError> {
    let Value::Object(obj) = body else {
        return Err(ScimError::invalid_syntax(
            "the resource must be a JSON object",
        ));
    };
    let has_core = obj
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("schemas"))
        .and_then(|(_, v)| v.as_array())
        .is_some_and(|a| {
            a.iter().any(|s| {
                s.as_str()
                    .is_some_and(|s| s.eq_ignore_ascii_case(kind.schema_urn()))
            })
        });
    if !has_core {
        return Err(ScimError::invalid_syntax(format!(
            "'schemas' must contain '{}'",
            kind.schema_urn()
        )));
    }
    let mut core = Map::new();
    let mut ext_objs: Vec<(&'static SchemaDef, Map<String, Value>)> = Vec::new();
    for (k, v) in obj {
        if k.eq_ignore_ascii_case("schemas") {
            continue;
        }
        if let Some(def) = kind
            .extensions()
            .iter()
            .find(|d| d.urn.eq_ignore_ascii_case(&k))
        {
            match v {
                Value::Null => {}
                Value::Object(o) => {
                    let mut out = Map::new();
                    schema_attrs(def, o, &mut out, mode)?;
                    if let Some((_, existing)) = ext_objs.iter_mut().find(|(d, _)| d.urn == def.urn)
                    {
                        existing.extend(out);
                    } else {
                        ext_objs.push((def, out));
                    }
                }
                _ => {
                    return Err(ScimError::invalid_value(format!(
                        "extension '{}' must be an object",
                        def.urn
                    )));
                }
            }
            continue;
        }
        let mut one = Map::new();
        one.insert(k, v);
        schema_attrs(kind.core(), one, &mut core, mode)?;
    }
    let mut schemas = vec![Value::String(kind.schema_urn().to_owned())];
    for (def, o) in ext_objs {
        if o.is_empty() {
            continue;
        }
        check_required(def, &o)?;
        schemas.push(Value::String(def.urn.to_owned()));
        core.insert(def.urn.to_owned(), Value::Object(o));
    }
    check_required(kind.core(), &core)?;
    core.insert("schemas".to_owned(), Value::Array(schemas));
    Ok(Value::Object(core))
}

fn check_required(def: &SchemaDef, obj: &Map<String, Value>) -> Result<(), ScimError> {
    for a in def.attrs {
        if a.required && !obj.contains_key(a.name) {
            return Err(ScimError::invalid_value(format!(
                "attribute '{}' is required",
                a.name
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_canonicalizes_and_drops() {
        let body = json!({
            "SCHEMAS": [USER_URN, ENTERPRISE_USER_URN],
            "id": "x", "meta": {"created": "2020-01-01T00:00:00Z"},
            "USERNAME": "Bob",
            "Name": {"GIVENNAME": "Bob", "familyName": null, "unknown": 1},
            "emails": [{"VALUE": "b@x.y", "Primary": true, "type": "work"}, null],
            "phoneNumbers": [],
            "groups": [{"value": "g"}],
            "nope": 3,
            "urn:ietf:params:scim:schemas:extension:enterprise:2.0:user": {
                "DEPARTMENT": "R&D",
                "manager": {"VALUE": "m1", "displayName": "dropped"}
            },
            "active": true,
            "title": null,
        });
        let out = sanitize(Kind::User, body).unwrap();
        assert_eq!(
            out,
            json!({
                "schemas": [USER_URN, ENTERPRISE_USER_URN],
                "userName": "Bob",
                "name": {"givenName": "Bob"},
                "emails": [{"value": "b@x.y", "primary": true, "type": "work"}],
                ENTERPRISE_USER_URN: {"department": "R&D", "manager": {"value": "m1"}},
                "active": true,
            })
        );
    }

    #[test]
    fn sanitize_drops_empty_extension_and_lists_only_core() {
        let body = json!({
            "schemas": [USER_URN, ENTERPRISE_USER_URN],
            "userName": "a",
            ENTERPRISE_USER_URN: {"manager": {"displayName": "x"}},
        });
        let out = sanitize(Kind::User, body).unwrap();
        assert_eq!(out, json!({"schemas": [USER_URN], "userName": "a"}));
    }

    #[test]
    fn sanitize_errors() {
        let cases = [
            (json!({"userName": "a"}), "invalidSyntax"),
            (
                json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:Grou"], "displayName": "a"}),
                "invalidSyntax",
            ),
            (json!([]), "invalidSyntax"),
            (json!({"schemas": [USER_URN]}), "invalidValue"),
            (
                json!({"schemas": [USER_URN], "userName": null}),
                "invalidValue",
            ),
            (
                json!({"schemas": [USER_URN], "userName": 3}),
                "invalidValue",
            ),
            (
                json!({"schemas": [USER_URN], "userName": ["a"]}),
                "invalidValue",
            ),
            (
                json!({"schemas": [USER_URN], "userName": "a", "active": "true"}),
                "invalidValue",
            ),
            (
                json!({"schemas": [USER_URN], "userName": "a", "emails": {"value": "x"}}),
                "invalidValue",
            ),
            (
                json!({"schemas": [USER_URN], "userName": "a", "emails": [{"value": "x", "primary": true}, {"value": "y", "primary": true}]}),
                "invalidValue",
            ),
            (
                json!({"schemas": [USER_URN], "userName": "a".repeat(4097)}),
                "invalidValue",
            ),
            (
                json!({"schemas": [GROUP_URN], "members": []}),
                "invalidValue",
            ),
            (
                json!({"schemas": [USER_URN], "userName": "a", "name": "x"}),
                "invalidValue",
            ),
        ];
        for (body, t) in cases {
            let e = sanitize(
                if body.to_string().contains("Group") {
                    Kind::Group
                } else {
                    Kind::User
                },
                body.clone(),
            )
            .unwrap_err();
            assert_eq!(e.scim_type, Some(t), "{body}");
            assert_eq!(e.status, 400);
        }
        let many: Vec<Value> = (0..101)
            .map(|i| json!({"value": format!("{i}@x")}))
            .collect();
        let e = sanitize(
            Kind::User,
            json!({"schemas": [USER_URN], "userName": "a", "emails": many}),
        )
        .unwrap_err();
        assert_eq!(e.scim_type, Some("invalidValue"));
        let members: Vec<Value> = (0..10000)
            .map(|i| json!({"value": format!("{i}")}))
            .collect();
        let ok = sanitize(
            Kind::Group,
            json!({"schemas": [GROUP_URN], "displayName": "g", "members": members}),
        );
        assert!(ok.is_ok());
    }

    #[test]
    fn group_roundtrip() {
        let body = json!({
            "schemas": [GROUP_URN],
            "displayName": "Admins",
            "externalId": "E1",
            "members": [{"value": "u1", "$REF": "https://h/Users/u1", "type": "User", "display": "U"}],
        });
        let out = sanitize(Kind::Group, body).unwrap();
        assert_eq!(out["members"][0]["$ref"], json!("https://h/Users/u1"));
        assert_eq!(out["externalId"], json!("E1"));
        assert_eq!(sanitize(Kind::Group, out.clone()).unwrap(), out);
    }

    #[test]
    fn resolve_paths() {
        assert_eq!(
            canonical_path(Kind::User, "EMAILS.VALUE").as_deref(),
            Some("emails.value")
        );
        assert_eq!(
            canonical_path(
                Kind::User,
                "urn:ietf:params:scim:schemas:core:2.0:User:userName"
            )
            .as_deref(),
            Some("userName")
        );
        assert_eq!(
            canonical_path(
                Kind::User,
                "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:Manager.Value"
            )
            .as_deref(),
            Some("urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:manager.value")
        );
        assert_eq!(
            canonical_path(Kind::Group, "members.$REF").as_deref(),
            Some("members.$ref")
        );
        assert_eq!(canonical_path(Kind::Group, "userName"), None);
        assert_eq!(canonical_path(Kind::User, "name.nope"), None);
    }

    #[test]
    fn schemas_have_characteristics() {
        let s = schemas("https://h/scim/v2");
        assert_eq!(s.len(), 3);
        let user = &s[0];
        assert_eq!(user["id"], json!(USER_URN));
        assert_eq!(
            user["meta"]["location"],
            json!(format!("https://h/scim/v2/Schemas/{USER_URN}"))
        );
        let attrs = user["attributes"].as_array().unwrap();
        let un = attrs.iter().find(|a| a["name"] == "userName").unwrap();
        assert_eq!(un["required"], json!(true));
        assert_eq!(un["uniqueness"], json!("server"));
        assert_eq!(un["caseExact"], json!(false));
        let emails = attrs.iter().find(|a| a["name"] == "emails").unwrap();
        assert_eq!(emails["multiValued"], json!(true));
        assert_eq!(
            emails["subAttributes"][2]["canonicalValues"],
            json!(["work", "home", "other"])
        );
        let groups = attrs.iter().find(|a| a["name"] == "groups").unwrap();
        assert_eq!(groups["mutability"], json!("readOnly"));
        let rts = resource_types("https://h");
        assert_eq!(rts[0]["schemaExtensions"][0]["required"], json!(false));
        assert_eq!(rts[1]["endpoint"], json!("/Groups"));
        assert!(rts[1].get("schemaExtensions").is_none());
        let spc = service_provider_config("https://h", 200);
        assert_eq!(spc["filter"]["maxResults"], json!(200));
    }

    #[test]
    fn rfc3339() {
        assert!(is_rfc3339("2026-11-29T01:02:03.123456Z"));
        assert!(is_rfc3339("2026-11-29T01:02:03+01:00"));
        assert!(!is_rfc3339("2026-11-29"));
        assert!(!is_rfc3339("2026-11-29T01:02:03"));
        assert!(!is_rfc3339("2026-11-29T01:02:03.Z"));
    }
}
