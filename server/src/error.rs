//! The one domain error type and its mapping to HTTP.
//!
//! Every variant carries a stable `error_code` (snake_case) that clients may
//! match on; messages are lowercase sentences meant for people. Internal
//! errors keep their detail in the log only: the client sees
//! `internal_error` and a generic message.

use dropshot::{ClientErrorStatusCode, ErrorStatusCode, HttpError};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// 400: the request is malformed or a field is invalid.
    #[error("{message}")]
    InvalidRequest { code: &'static str, message: String },
    /// 401: missing, malformed, expired or otherwise invalid credentials.
    #[error("{message}")]
    Unauthenticated { code: &'static str, message: String },
    /// 402: a quota of the organization is exhausted.
    #[error("{message}")]
    PaymentRequired { code: &'static str, message: String },
    /// 403: authenticated, but not allowed.
    #[error("{message}")]
    Forbidden { code: &'static str, message: String },
    /// 404: the object does not exist (or is not visible to the caller).
    #[error("{what} not found")]
    NotFound { what: &'static str },
    /// 409: the request conflicts with existing state.
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    /// 410: the object existed but can no longer be used (e.g. a used,
    /// revoked or expired invitation token).
    #[error("{message}")]
    Gone { code: &'static str, message: String },
    /// 413: the request body (an upload) is larger than allowed.
    #[error("{message}")]
    TooLarge { code: &'static str, message: String },
    /// 415: the content's type is not accepted.
    #[error("{message}")]
    UnsupportedType { code: &'static str, message: String },
    /// 422: well-formed input that fails a validation rule.
    #[error("{message}")]
    Unprocessable { code: &'static str, message: String },
    /// 429: too many requests; retry after the given number of seconds.
    #[error("{message}")]
    TooManyRequests {
        code: &'static str,
        message: String,
        retry_after_secs: u64,
    },
    /// 503: a dependency (the database) is unavailable.
    #[error("{message}")]
    Unavailable { code: &'static str, message: String },
    /// 500: a bug or an unexpected failure; `internal` is only logged.
    #[error("internal error: {internal}")]
    Internal { internal: String },
}

impl Error {
    pub fn invalid(code: &'static str, message: impl Into<String>) -> Error {
        Error::InvalidRequest {
            code,
            message: message.into(),
        }
    }
    pub fn unprocessable(code: &'static str, message: impl Into<String>) -> Error {
        Error::Unprocessable {
            code,
            message: message.into(),
        }
    }
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Error {
        Error::Conflict {
            code,
            message: message.into(),
        }
    }
    pub fn gone(code: &'static str, message: impl Into<String>) -> Error {
        Error::Gone {
            code,
            message: message.into(),
        }
    }
    pub fn forbidden(message: impl Into<String>) -> Error {
        Error::Forbidden {
            code: "forbidden",
            message: message.into(),
        }
    }
    pub fn unauthenticated(code: &'static str, message: impl Into<String>) -> Error {
        Error::Unauthenticated {
            code,
            message: message.into(),
        }
    }
    pub fn internal(internal: impl std::fmt::Display) -> Error {
        Error::Internal {
            internal: internal.to_string(),
        }
    }
}

impl From<tokio_postgres::Error> for Error {
    fn from(error: tokio_postgres::Error) -> Error {
        // PostgreSQL text cannot hold NUL characters; any input that carries
        // one is the client's error, whatever field it came in.
        if error.code() == Some(&tokio_postgres::error::SqlState::CHARACTER_NOT_IN_REPERTOIRE) {
            return Error::invalid("invalid_request", "text must not contain NUL characters");
        }
        Error::internal(format!("database: {error}"))
    }
}

impl From<deadpool_postgres::PoolError> for Error {
    fn from(error: deadpool_postgres::PoolError) -> Error {
        Error::Unavailable {
            code: "database_unavailable",
            message: format!("database unavailable: {error}"),
        }
    }
}

fn client(code: &str, status: ClientErrorStatusCode, message: String) -> HttpError {
    HttpError::for_client_error(Some(code.to_string()), status, message)
}

impl From<Error> for HttpError {
    fn from(error: Error) -> HttpError {
        match error {
            Error::InvalidRequest { code, message } => {
                client(code, ClientErrorStatusCode::BAD_REQUEST, message)
            }
            Error::Unauthenticated { code, message } => {
                let mut e = client(code, ClientErrorStatusCode::UNAUTHORIZED, message);
                let _ = e.add_header(http::header::WWW_AUTHENTICATE, "Bearer");
                e
            }
            Error::PaymentRequired { code, message } => {
                client(code, ClientErrorStatusCode::PAYMENT_REQUIRED, message)
            }
            Error::Forbidden { code, message } => {
                client(code, ClientErrorStatusCode::FORBIDDEN, message)
            }
            Error::NotFound { what } => client(
                "not_found",
                ClientErrorStatusCode::NOT_FOUND,
                format!("{what} not found"),
            ),
            Error::Conflict { code, message } => {
                client(code, ClientErrorStatusCode::CONFLICT, message)
            }
            Error::Gone { code, message } => client(code, ClientErrorStatusCode::GONE, message),
            Error::Unprocessable { code, message } => {
                client(code, ClientErrorStatusCode::UNPROCESSABLE_ENTITY, message)
            }
            Error::TooLarge { code, message } => {
                client(code, ClientErrorStatusCode::PAYLOAD_TOO_LARGE, message)
            }
            Error::UnsupportedType { code, message } => {
                client(code, ClientErrorStatusCode::UNSUPPORTED_MEDIA_TYPE, message)
            }
            Error::TooManyRequests {
                code,
                message,
                retry_after_secs,
            } => {
                let mut e = client(code, ClientErrorStatusCode::TOO_MANY_REQUESTS, message);
                let _ = e.add_header(http::header::RETRY_AFTER, retry_after_secs.to_string());
                e
            }
            Error::Unavailable { code, message } => HttpError {
                status_code: ErrorStatusCode::SERVICE_UNAVAILABLE,
                error_code: Some(code.to_string()),
                external_message: "service unavailable".to_string(),
                internal_message: message,
                headers: None,
            },
            Error::Internal { internal } => HttpError {
                status_code: ErrorStatusCode::INTERNAL_SERVER_ERROR,
                error_code: Some("internal_error".to_string()),
                external_message: "internal error".to_string(),
                internal_message: internal,
                headers: None,
            },
        }
    }
}
