//! The `/metrics` listener: a separate, minimal HTTP/1 server so that
//! metrics are not on the public API address (and not in its OpenAPI
//! document). Optional bearer token.

use crate::metrics::Source;
use anyhow::Result;
use http::{Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::time::Duration;

type Body = http_body_util::Full<bytes::Bytes>;

fn answer(status: StatusCode, content_type: &str, body: String) -> Response<Body> {
    let mut response = Response::new(Body::new(bytes::Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = http::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, value);
    }
    response
}

fn authorized(headers: &http::HeaderMap, token: Option<&str>) -> bool {
    let Some(token) = token else {
        return true;
    };
    let Some(value) = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let Some((scheme, given)) = value.trim().split_once(' ') else {
        return false;
    };
    // Compared in constant time.
    use sha2::{Digest, Sha256};
    scheme.eq_ignore_ascii_case("bearer")
        && Sha256::digest(given.trim().as_bytes()) == Sha256::digest(token.as_bytes())
}

pub async fn start(
    bind: SocketAddr,
    source: Source,
    token: Option<String>,
    log: slog::Logger,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(bind).await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        loop {
            let (socket, _) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    slog::warn!(log, "metrics accept failed"; "error" => %e);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let source = source.clone();
            let token = token.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    move |request: http::Request<hyper::body::Incoming>| {
                        let source = source.clone();
                        let token = token.clone();
                        async move {
                            let response = if request.uri().path() != "/metrics" {
                                answer(
                                    StatusCode::NOT_FOUND,
                                    "application/json",
                                    r#"{"error_code":"not_found","message":"not found"}"#
                                        .to_string(),
                                )
                            } else if request.method() != http::Method::GET {
                                answer(
                                    StatusCode::METHOD_NOT_ALLOWED,
                                    "application/json",
                                    r#"{"error_code":"method_not_allowed","message":"use GET"}"#
                                        .to_string(),
                                )
                            } else if !authorized(request.headers(), token.as_deref()) {
                                answer(StatusCode::UNAUTHORIZED, "application/json",
                                r#"{"error_code":"unauthenticated","message":"a bearer token is required"}"#.to_string())
                            } else {
                                answer(
                                    StatusCode::OK,
                                    "text/plain; version=0.0.4; charset=utf-8",
                                    source.render(),
                                )
                            };
                            Ok::<_, std::convert::Infallible>(response)
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(Duration::from_secs(10))
                    .serve_connection(TokioIo::new(socket), service)
                    .await;
            });
        }
    });
    Ok((addr, task))
}
