// Workspace patch (not in upstream dropshot 0.18.0).

//! Gives hyper's own error responses a JSON body.
//!
//! hyper answers a request it cannot parse itself, before dropshot sees it:
//! `400` (malformed), `414` (URI over 64 KiB) or `431` (too many or too
//! large headers), each with an empty body. Every other error response
//! carries the JSON error body (`request_id`, `error_code`, `message`).
//! [`ErrorBodies`] wraps a connection and rewrites exactly those responses:
//! a `400`, `414` or `431` head with `content-length: 0` and nothing after
//! it. Dropshot's own responses with these statuses always have a body, so
//! they are never touched.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub(crate) struct ErrorBodies<T> {
    inner: T,
    /// A replacement being written: its bytes, how many are written, and
    /// the length of the buffer it replaces (reported to hyper when done).
    pending: Option<(Vec<u8>, usize, usize)>,
}

impl<T> ErrorBodies<T> {
    pub(crate) fn new(inner: T) -> Self {
        ErrorBodies { inner, pending: None }
    }
}

/// The JSON-bodied replacement of `head` if it is one of hyper's empty
/// error responses.
fn replacement(head: &[u8]) -> Option<Vec<u8>> {
    let (status, code, message) = if head.starts_with(b"HTTP/1.1 431 ") {
        (
            "431 Request Header Fields Too Large",
            "headers_too_large",
            "the request's header section is too large",
        )
    } else if head.starts_with(b"HTTP/1.1 414 ") {
        ("414 URI Too Long", "uri_too_long", "the request URI is too long")
    } else if head.starts_with(b"HTTP/1.1 400 ") {
        (
            "400 Bad Request",
            "invalid_request",
            "the request is not valid HTTP/1.1",
        )
    } else {
        return None;
    };
    let end = head.windows(4).position(|w| w == b"\r\n\r\n")?;
    if end + 4 != head.len() {
        return None;
    }
    let text = std::str::from_utf8(&head[..end]).ok()?;
    let mut empty = false;
    let mut date = None;
    for line in text.split("\r\n").skip(1) {
        let (name, value) = line.split_once(':')?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            empty = value == "0";
        } else if name.eq_ignore_ascii_case("date") {
            date = Some(value);
        }
    }
    if !empty {
        return None;
    }
    let request_id = uuid::Uuid::new_v4().to_string();
    let body = serde_json::json!({
        "request_id": request_id,
        "error_code": code,
        "message": message,
    })
    .to_string();
    let mut out = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n\
         x-request-id: {request_id}\r\nconnection: close\r\n\
         content-length: {}\r\n",
        body.len()
    );
    if let Some(date) = date {
        out.push_str(&format!("date: {date}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(&body);
    Some(out.into_bytes())
}

impl<T: AsyncWrite + Unpin> ErrorBodies<T> {
    /// Writes the pending replacement; `Ready(Ok(n))` with the replaced
    /// buffer's length once it is all out.
    fn drive(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let Some((bytes, written, replaced)) = &mut self.pending else {
            return Poll::Ready(Ok(0));
        };
        while *written < bytes.len() {
            let n =
                ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
        }
        let replaced = *replaced;
        self.pending = None;
        Poll::Ready(Ok(replaced))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for ErrorBodies<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for ErrorBodies<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.pending.is_none() {
            match replacement(buf) {
                Some(bytes) => self.pending = Some((bytes, 0, buf.len())),
                None => return Pin::new(&mut self.inner).poll_write(cx, buf),
            }
        }
        self.drive(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.pending.is_none() {
            // hyper's error responses are a head alone, in one slice.
            let mut slices = bufs.iter().filter(|b| !b.is_empty());
            match (slices.next(), slices.next()) {
                (Some(only), None) => {
                    if let Some(bytes) = replacement(only) {
                        self.pending = Some((bytes, 0, only.len()));
                    }
                }
                _ => {}
            }
            if self.pending.is_none() {
                return Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
            }
        }
        self.drive(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        if self.pending.is_some() {
            ready!(self.drive(cx))?;
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        if self.pending.is_some() {
            ready!(self.drive(cx))?;
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
