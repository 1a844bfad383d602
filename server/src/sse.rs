//! Server-Sent Events responses fed from a channel.

use bytes::Bytes;
use hyper::body::Frame;
use serde::Serialize;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// A response body that writes each received item as `data: <json>\n\n`
/// and ends when the sender is dropped. Dropping the body (the client went
/// away) closes the channel, which the sender notices.
struct EventBody<T> {
    events: mpsc::Receiver<T>,
}

impl<T: Serialize> hyper::body::Body for EventBody<T> {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.events.poll_recv(cx).map(|event| {
            event.map(|event| {
                let json = serde_json::to_string(&event)
                    .unwrap_or_else(|_| r#"{"type":"error","error_code":"internal_error","message":"unserialisable event"}"#.to_string());
                Ok(Frame::data(Bytes::from(format!("data: {json}\n\n"))))
            })
        })
    }
}

/// A `200 text/event-stream` response streaming `events`.
pub fn response<T: Serialize + Send + Sync + 'static>(
    events: mpsc::Receiver<T>,
) -> Result<http::Response<dropshot::Body>, dropshot::HttpError> {
    http::Response::builder()
        .status(http::StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "text/event-stream")
        .header(http::header::CACHE_CONTROL, "no-cache")
        // Ask reverse proxies not to buffer the stream.
        .header("x-accel-buffering", "no")
        .body(dropshot::Body::wrap(EventBody { events }))
        .map_err(|e| {
            dropshot::HttpError::for_internal_error(format!("building the SSE response: {e}"))
        })
}

/// A body writing `(id, event)` pairs (the event's JSON text) as `id: N`
/// (when numbered) and `data: <json>` lines (resumable chat and
/// conversation streams).
struct NumberedBody {
    events: mpsc::Receiver<(Option<i32>, Box<str>)>,
}

impl hyper::body::Body for NumberedBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.events.poll_recv(cx).map(|event| {
            event.map(|(id, event)| {
                let text = match id {
                    Some(id) => format!("id: {id}\ndata: {event}\n\n"),
                    None => format!("data: {event}\n\n"),
                };
                Ok(Frame::data(Bytes::from(text)))
            })
        })
    }
}

/// A `200 text/event-stream` response of numbered events.
pub fn numbered_response(
    events: mpsc::Receiver<(Option<i32>, Box<str>)>,
) -> Result<http::Response<dropshot::Body>, dropshot::HttpError> {
    http::Response::builder()
        .status(http::StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "text/event-stream")
        .header(http::header::CACHE_CONTROL, "no-cache")
        .header("x-accel-buffering", "no")
        .body(dropshot::Body::wrap(NumberedBody { events }))
        .map_err(|e| {
            dropshot::HttpError::for_internal_error(format!("building the SSE response: {e}"))
        })
}

/// A body writing each received string as it is (each a complete SSE
/// frame, e.g. `data: [DONE]\n\n`), ending when the sender is dropped.
struct RawBody {
    frames: mpsc::Receiver<String>,
}

impl hyper::body::Body for RawBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.frames
            .poll_recv(cx)
            .map(|frame| frame.map(|f| Ok(Frame::data(Bytes::from(f)))))
    }
}

/// A response (status and headers from `builder`) streaming `frames`.
pub fn raw_response(
    builder: http::response::Builder,
    frames: mpsc::Receiver<String>,
) -> Result<http::Response<dropshot::Body>, http::Error> {
    builder.body(dropshot::Body::wrap(RawBody { frames }))
}

/// Whether the request's `Accept` header names `text/event-stream` (with
/// a non-zero quality).
pub fn accepts_event_stream(headers: &http::HeaderMap) -> bool {
    headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default();
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            media.eq_ignore_ascii_case("text/event-stream") && !refused
        })
}

#[cfg(test)]
mod accept_tests {
    use super::accepts_event_stream;

    #[test]
    fn event_stream_is_accepted_by_its_name() {
        let headers = |v: &str| {
            let mut h = http::HeaderMap::new();
            h.insert(http::header::ACCEPT, v.parse().unwrap());
            h
        };
        assert!(accepts_event_stream(&headers("text/event-stream")));
        assert!(accepts_event_stream(&headers(
            "application/json, Text/Event-Stream;q=0.9"
        )));
        assert!(!accepts_event_stream(&headers("application/json")));
        assert!(!accepts_event_stream(&headers("*/*")));
        assert!(!accepts_event_stream(&headers("text/event-stream;q=0")));
        assert!(!accepts_event_stream(&http::HeaderMap::new()));
    }
}
