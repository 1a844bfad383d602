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
    /// 503: a dependency (the database) is unavailable; retry later.
    #[error("{message}")]
    Unavailable { code: &'static str, message: String },
    /// 503: the server is overloaded (e.g. the password-hashing queue is
    /// full); retry after the given number of seconds.
    #[error("{message}")]
    Busy {
        code: &'static str,
        message: String,
        retry_after_secs: u64,
    },
    /// 503: an optional service this operation needs is not configured
    /// (e.g. transcription); `message` says how to configure it.
    #[error("{message}")]
    NotConfigured { code: &'static str, message: String },
    /// 502: an external server this operation relies on (an MCP server or
    /// its authorization server) failed or could not be reached.
    #[error("{message}")]
    BadGateway { code: &'static str, message: String },
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

/// The message of an error and of every error in its `source()` chain,
/// joined by `: ` (tokio-postgres' own message is only "db error").
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let next = e.to_string();
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = e.source();
    }
    text
}

/// SQLSTATEs that mean the database server is going away or cannot take
/// the connection: class 08 (connection exception), 57P01-57P03 (admin or
/// crash shutdown, cannot connect now), 53300 (too many connections).
fn is_unavailable_state(code: &tokio_postgres::error::SqlState) -> bool {
    use tokio_postgres::error::SqlState;
    code.code().starts_with("08")
        || *code == SqlState::ADMIN_SHUTDOWN
        || *code == SqlState::CRASH_SHUTDOWN
        || *code == SqlState::CANNOT_CONNECT_NOW
        || *code == SqlState::TOO_MANY_CONNECTIONS
}

/// Whether a database error means "the database is unreachable" (the
/// connection closed, an I/O error, a timeout, a shutdown), as opposed to a
/// statement that failed.
pub fn is_connection_error(error: &tokio_postgres::Error) -> bool {
    if let Some(db) = error.as_db_error() {
        return is_unavailable_state(db.code());
    }
    if error.is_closed() {
        return true;
    }
    let mut source = std::error::Error::source(error);
    while let Some(e) = source {
        if e.is::<std::io::Error>() {
            return true;
        }
        source = e.source();
    }
    // The kinds without a public predicate; their messages are fixed.
    matches!(
        error.to_string().as_str(),
        "timeout waiting for server"
            | "error connecting to server"
            | "error communicating with the server"
            | "error performing TLS handshake"
    )
}

/// The `503 database_unavailable` error.
pub fn database_unavailable(internal: impl Into<String>) -> Error {
    Error::Unavailable {
        code: "database_unavailable",
        message: internal.into(),
    }
}

/// What a SCIM operation fails with (issue #37): a protocol error the
/// client gets as a SCIM error body, or a server error (the database
/// unavailable, a bug) answered with its status and a SCIM body.
#[derive(Debug)]
pub enum ScimFailure {
    Protocol(workspace_scim::ScimError),
    Server(Error),
}

impl From<Error> for ScimFailure {
    fn from(error: Error) -> ScimFailure {
        ScimFailure::Server(error)
    }
}

impl From<tokio_postgres::Error> for ScimFailure {
    fn from(error: tokio_postgres::Error) -> ScimFailure {
        ScimFailure::Server(error.into())
    }
}

impl From<workspace_scim::ScimError> for ScimFailure {
    fn from(error: workspace_scim::ScimError) -> ScimFailure {
        ScimFailure::Protocol(error)
    }
}

impl From<tokio_postgres::Error> for Error {
    fn from(error: tokio_postgres::Error) -> Error {
        // PostgreSQL text cannot hold NUL characters; any input that carries
        // one is the client's error, whatever field it came in.
        if error.code() == Some(&tokio_postgres::error::SqlState::CHARACTER_NOT_IN_REPERTOIRE) {
            return Error::invalid("invalid_request", "text must not contain NUL characters");
        }
        if is_connection_error(&error) {
            return database_unavailable(format!("database: {}", chain(&error)));
        }
        Error::internal(format!("database: {}", chain(&error)))
    }
}

impl From<deadpool_postgres::PoolError> for Error {
    fn from(error: deadpool_postgres::PoolError) -> Error {
        database_unavailable(format!("database unavailable: {}", chain(&error)))
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
            Error::Unavailable { code, message } => {
                let mut e = HttpError {
                    status_code: ErrorStatusCode::SERVICE_UNAVAILABLE,
                    error_code: Some(code.to_string()),
                    external_message: "service unavailable".to_string(),
                    internal_message: message,
                    headers: None,
                };
                let _ = e.add_header(http::header::RETRY_AFTER, "1");
                e
            }
            Error::Busy {
                code,
                message,
                retry_after_secs,
            } => {
                let mut e = HttpError {
                    status_code: ErrorStatusCode::SERVICE_UNAVAILABLE,
                    error_code: Some(code.to_string()),
                    external_message: message.clone(),
                    internal_message: message,
                    headers: None,
                };
                let _ = e.add_header(http::header::RETRY_AFTER, retry_after_secs.to_string());
                e
            }
            Error::NotConfigured { code, message } => HttpError {
                status_code: ErrorStatusCode::SERVICE_UNAVAILABLE,
                error_code: Some(code.to_string()),
                external_message: message.clone(),
                internal_message: message,
                headers: None,
            },
            Error::BadGateway { code, message } => HttpError {
                status_code: ErrorStatusCode::BAD_GATEWAY,
                error_code: Some(code.to_string()),
                external_message: message.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn is_unavailable(e: &Error) -> bool {
        matches!(
            e,
            Error::Unavailable {
                code: "database_unavailable",
                ..
            }
        )
    }

    #[test]
    fn timeouts_are_unavailable() {
        let e = Error::from(tokio_postgres::Error::__private_api_timeout());
        assert!(is_unavailable(&e), "{e:?}");
    }

    #[tokio::test]
    async fn refused_and_closed_connections_are_unavailable() {
        // Nothing listens on a port we bound and released.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let refused = tokio_postgres::connect(
            &format!("host=127.0.0.1 port={port} user=x connect_timeout=2"),
            tokio_postgres::NoTls,
        )
        .await
        .err()
        .expect("nothing listens");
        let e = Error::from(refused);
        assert!(is_unavailable(&e), "{e:?}");

        // A server that accepts and hangs up mid-handshake.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                drop(socket);
            }
        });
        let closed = tokio_postgres::connect(
            &format!("host=127.0.0.1 port={} user=x", addr.port()),
            tokio_postgres::NoTls,
        )
        .await
        .err()
        .expect("the peer hangs up");
        let e = Error::from(closed);
        assert!(is_unavailable(&e), "{e:?}");
        let http = HttpError::from(e);
        assert_eq!(http.status_code.as_u16(), 503);
        assert_eq!(http.error_code.as_deref(), Some("database_unavailable"));
    }

    #[test]
    fn chain_joins_sources() {
        let io = std::io::Error::other("connection reset");
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        assert_eq!(chain(&Outer(io)), "outer: connection reset");
    }
}
