//! The SCIM error type (RFC 7644 §3.12) and the message URNs.

use serde_json::{Value, json};

/// URN of the SCIM error message schema.
pub const ERROR_URN: &str = "urn:ietf:params:scim:api:messages:2.0:Error";
/// URN of the SCIM list response message schema.
pub const LIST_RESPONSE_URN: &str = "urn:ietf:params:scim:api:messages:2.0:ListResponse";
/// URN of the SCIM PATCH operation message schema.
pub const PATCH_OP_URN: &str = "urn:ietf:params:scim:api:messages:2.0:PatchOp";
/// URN of the SCIM search request message schema.
pub const SEARCH_REQUEST_URN: &str = "urn:ietf:params:scim:api:messages:2.0:SearchRequest";
/// URN of the core User schema.
pub const USER_URN: &str = "urn:ietf:params:scim:schemas:core:2.0:User";
/// URN of the core Group schema.
pub const GROUP_URN: &str = "urn:ietf:params:scim:schemas:core:2.0:Group";
/// URN of the enterprise User extension schema.
pub const ENTERPRISE_USER_URN: &str = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User";

/// A SCIM error: an HTTP status, an optional `scimType` and a detail message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScimError {
    /// HTTP status code.
    pub status: u16,
    /// RFC 7644 §3.12 `scimType` (only for 400 and a few others).
    pub scim_type: Option<&'static str>,
    /// Human-readable detail.
    pub detail: String,
}

impl ScimError {
    /// Builds an error.
    pub fn new(status: u16, scim_type: Option<&'static str>, detail: impl Into<String>) -> Self {
        ScimError {
            status,
            scim_type,
            detail: detail.into(),
        }
    }

    /// The error as a SCIM error response body (status rendered as a string).
    pub fn body(&self) -> Value {
        let mut body = json!({
            "schemas": [ERROR_URN],
            "status": self.status.to_string(),
            "detail": self.detail,
        });
        if let (Some(t), Some(obj)) = (self.scim_type, body.as_object_mut()) {
            obj.insert("scimType".to_owned(), Value::String(t.to_owned()));
        }
        body
    }

    /// 400 `invalidSyntax`: the request body is not a valid SCIM message.
    pub fn invalid_syntax(detail: impl Into<String>) -> Self {
        Self::new(400, Some("invalidSyntax"), detail)
    }

    /// 400 `invalidValue`: a value is missing, of the wrong type or out of bounds.
    pub fn invalid_value(detail: impl Into<String>) -> Self {
        Self::new(400, Some("invalidValue"), detail)
    }

    /// 400 `invalidFilter`: the filter cannot be parsed or is not supported.
    pub fn invalid_filter(detail: impl Into<String>) -> Self {
        Self::new(400, Some("invalidFilter"), detail)
    }

    /// 400 `invalidPath`: a PATCH path is malformed or names an unknown attribute.
    pub fn invalid_path(detail: impl Into<String>) -> Self {
        Self::new(400, Some("invalidPath"), detail)
    }

    /// 400 `noTarget`: a PATCH path matched nothing, or `remove` has no path.
    pub fn no_target(detail: impl Into<String>) -> Self {
        Self::new(400, Some("noTarget"), detail)
    }

    /// 400 `mutability`: the operation is not allowed by the attribute's mutability.
    pub fn mutability(detail: impl Into<String>) -> Self {
        Self::new(400, Some("mutability"), detail)
    }

    /// 409 `uniqueness`: a unique attribute value is already taken.
    pub fn uniqueness(detail: impl Into<String>) -> Self {
        Self::new(409, Some("uniqueness"), detail)
    }

    /// 400 `tooMany`: the query would return too many results.
    pub fn too_many(detail: impl Into<String>) -> Self {
        Self::new(400, Some("tooMany"), detail)
    }

    /// 404: the resource does not exist.
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(404, None, detail)
    }

    /// 412: the `If-Match` version does not match.
    pub fn precondition_failed(detail: impl Into<String>) -> Self {
        Self::new(412, None, detail)
    }
}

impl std::fmt::Display for ScimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.scim_type {
            Some(t) => write!(f, "{} {}: {}", self.status, t, self.detail),
            None => write!(f, "{}: {}", self.status, self.detail),
        }
    }
}

impl std::error::Error for ScimError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_has_string_status_and_optional_type() {
        let e = ScimError::invalid_filter("bad");
        assert_eq!(
            e.body(),
            json!({"schemas":[ERROR_URN],"status":"400","scimType":"invalidFilter","detail":"bad"})
        );
        let e = ScimError::not_found("gone");
        assert_eq!(
            e.body(),
            json!({"schemas":[ERROR_URN],"status":"404","detail":"gone"})
        );
    }
}
