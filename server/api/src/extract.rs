//! Request extractors that wrap dropshot's own so that every malformed
//! request is answered with a stable `error_code` (`invalid_request`), not
//! only with a message. The OpenAPI metadata is exactly that of the wrapped
//! extractor, so the published document is unchanged by the wrapping.

use async_trait::async_trait;
use dropshot::{
    ApiEndpointBodyContentType, ExclusiveExtractor, ExtractorMetadata, HttpError, Query,
    RequestContext, ServerContext, SharedExtractor, TypedBody,
};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

/// The `error_code` of every request that dropshot could not parse
/// (malformed JSON, a missing or mistyped field or query parameter).
pub const INVALID_REQUEST: &str = "invalid_request";

/// How long a request body may take to arrive, in seconds (see
/// [`set_body_read_timeout`]).
static BODY_READ_TIMEOUT_SECS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(30);

/// Sets the longest time a request body may take to arrive once its
/// headers are in (process-wide; the server sets it from its
/// configuration). A slower body is answered `408 request_timeout` and
/// its connection is closed.
pub fn set_body_read_timeout(timeout: std::time::Duration) {
    BODY_READ_TIMEOUT_SECS.store(
        timeout.as_secs().max(1),
        std::sync::atomic::Ordering::Relaxed,
    );
}

/// The longest time a request body may take to arrive (see
/// [`set_body_read_timeout`]).
pub fn body_read_timeout() -> std::time::Duration {
    std::time::Duration::from_secs(
        BODY_READ_TIMEOUT_SECS.load(std::sync::atomic::Ordering::Relaxed),
    )
}

/// Whether every percent-decoded part of a query string is UTF-8.
/// (dropshot decodes lossily: `%FF` would silently become U+FFFD.)
pub fn query_is_utf8(query: &str) -> bool {
    query.split('&').all(|pair| {
        percent_encoding::percent_decode_str(&pair.replace('+', " "))
            .decode_utf8()
            .is_ok()
    })
}

fn tag(mut error: HttpError) -> HttpError {
    if error.error_code.is_none() {
        error.error_code = Some(INVALID_REQUEST.to_string());
    }
    error
}

/// A JSON request body (like [`TypedBody`], with a stable error code).
pub struct JsonBody<T>(pub T);

impl<T> JsonBody<T> {
    pub fn into_inner(self) -> T {
        self.0
    }
}

#[async_trait]
impl<T> ExclusiveExtractor for JsonBody<T>
where
    T: JsonSchema + DeserializeOwned + Send + Sync + 'static,
{
    async fn from_request<Context: ServerContext>(
        rqctx: &RequestContext<Context>,
        request: hyper::Request<dropshot::Body>,
    ) -> Result<Self, HttpError> {
        let read = <TypedBody<T> as ExclusiveExtractor>::from_request(rqctx, request);
        match tokio::time::timeout(body_read_timeout(), read).await {
            Ok(result) => result.map(|body| JsonBody(body.into_inner())).map_err(tag),
            Err(_elapsed) => {
                let mut error = HttpError::for_client_error(
                    Some("request_timeout".to_string()),
                    dropshot::ClientErrorStatusCode::REQUEST_TIMEOUT,
                    "the request body did not arrive in time".to_string(),
                );
                let _ = error.add_header(http::header::CONNECTION, "close");
                Err(error)
            }
        }
    }

    fn metadata(content_type: ApiEndpointBodyContentType) -> ExtractorMetadata {
        <TypedBody<T> as ExclusiveExtractor>::metadata(content_type)
    }
}

/// Query-string parameters (like [`Query`], with a stable error code).
pub struct QueryParams<T>(pub T);

impl<T> QueryParams<T> {
    pub fn into_inner(self) -> T {
        self.0
    }
}

#[async_trait]
impl<T> SharedExtractor for QueryParams<T>
where
    T: JsonSchema + DeserializeOwned + Send + Sync + 'static,
{
    async fn from_request<Context: ServerContext>(
        rqctx: &RequestContext<Context>,
    ) -> Result<Self, HttpError> {
        if let Some(query) = rqctx.request.uri().query()
            && !query_is_utf8(query)
        {
            return Err(HttpError::for_bad_request(
                Some(INVALID_REQUEST.to_string()),
                "the query string is not valid UTF-8 once percent-decoded".to_string(),
            ));
        }
        <Query<T> as SharedExtractor>::from_request(rqctx)
            .await
            .map(|query| QueryParams(query.into_inner()))
            .map_err(tag)
    }

    fn metadata(content_type: ApiEndpointBodyContentType) -> ExtractorMetadata {
        <Query<T> as SharedExtractor>::metadata(content_type)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn query_utf8() {
        assert!(super::query_is_utf8("name=caf%C3%A9&x=1+2"));
        assert!(super::query_is_utf8(""));
        assert!(!super::query_is_utf8("name=%FF%FE"));
        assert!(!super::query_is_utf8("a=1&%C3=2"));
    }
}
