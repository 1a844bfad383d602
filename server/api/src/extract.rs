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
        <TypedBody<T> as ExclusiveExtractor>::from_request(rqctx, request)
            .await
            .map(|body| JsonBody(body.into_inner()))
            .map_err(tag)
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
        <Query<T> as SharedExtractor>::from_request(rqctx)
            .await
            .map(|query| QueryParams(query.into_inner()))
            .map_err(tag)
    }

    fn metadata(content_type: ApiEndpointBodyContentType) -> ExtractorMetadata {
        <Query<T> as SharedExtractor>::metadata(content_type)
    }
}
