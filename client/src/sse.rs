//! One reader for the Server-Sent Event streams of the API (chat,
//! conversations, knowledge-base queries, deployments, the MCP
//! playground), used by the CLI, the tests and the benchmarks.
//!
//! [`SseReader`] follows the event-stream rules of the HTML standard:
//! lines end with LF, CRLF or CR; `data:` lines (one optional space after
//! the colon) join with `\n`; `id:` and `event:` apply to the event being
//! read; lines starting with `:` are comments (keep-alives); a blank line
//! ends an event, and an event without data is not one. Text is decoded
//! only once a line is complete, so a character split between two chunks
//! arrives whole. The last `id` seen is kept for resuming a stream
//! (`Last-Event-ID`, or the chat streams' `after` parameter).

use futures::{Stream, StreamExt};
use serde::de::DeserializeOwned;

/// The longest event accepted, in bytes (a stream that sends more without
/// a line end is refused rather than buffered without bound).
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One event of a stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `id` field: the event's number in the numbered streams.
    pub id: Option<String>,
    /// The `event` field (`None`: the default, `message`).
    pub event: Option<String>,
    /// The data lines, joined with `\n`.
    pub data: String,
}

impl SseEvent {
    /// The event's number, when its `id` is one.
    pub fn number(&self) -> Option<i32> {
        self.id.as_deref().and_then(|id| id.trim().parse().ok())
    }

    /// The data as JSON of type `T` (an event schema of the contract, or
    /// `serde_json::Value`).
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(&self.data)
    }
}

/// Why a stream could not be read.
#[derive(Debug)]
pub enum SseError {
    /// The connection failed or broke.
    Transport(reqwest::Error),
    /// An event longer than [`MAX_EVENT_BYTES`].
    TooLong,
}

impl std::fmt::Display for SseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SseError::Transport(e) => write!(f, "the event stream broke: {e}"),
            SseError::TooLong => write!(f, "an event is longer than {MAX_EVENT_BYTES} bytes"),
        }
    }
}

impl std::error::Error for SseError {}

type Chunks =
    std::pin::Pin<Box<dyn Stream<Item = Result<bytes::Bytes, reqwest::Error>> + Send + Sync>>;

/// Reads the events of a streamed response as they arrive.
pub struct SseReader {
    chunks: Chunks,
    buffer: Vec<u8>,
    /// Where the next line starts in `buffer`.
    start: usize,
    /// The event being read.
    event: SseEvent,
    has_data: bool,
    /// The previous chunk ended with CR: an LF starting this one belongs
    /// to that line end.
    after_cr: bool,
    last_id: Option<String>,
    ended: bool,
}

impl SseReader {
    /// A reader of any stream of byte chunks.
    pub fn new(
        chunks: impl Stream<Item = Result<bytes::Bytes, reqwest::Error>> + Send + Sync + 'static,
    ) -> SseReader {
        SseReader {
            chunks: Box::pin(chunks),
            buffer: Vec::new(),
            start: 0,
            event: SseEvent::default(),
            has_data: false,
            after_cr: false,
            last_id: None,
            ended: false,
        }
    }

    /// A reader of a response's body.
    pub fn from_response(response: reqwest::Response) -> SseReader {
        SseReader::new(response.bytes_stream())
    }

    /// A reader of a streamed operation's body, as the generated client
    /// returns it.
    pub fn from_byte_stream(stream: crate::ByteStream) -> SseReader {
        SseReader::new(stream.into_inner())
    }

    /// The `id` of the last event read (to resume from).
    pub fn last_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// The next event; `None` when the stream ended.
    pub async fn next(&mut self) -> Option<Result<SseEvent, SseError>> {
        loop {
            while let Some(line) = self.next_line() {
                if let Some(event) = self.field(&line) {
                    return Some(Ok(event));
                }
            }
            if self.ended {
                return None;
            }
            if self.buffer.len() - self.start > MAX_EVENT_BYTES {
                self.ended = true;
                return Some(Err(SseError::TooLong));
            }
            match self.chunks.next().await {
                Some(Ok(bytes)) => {
                    self.buffer.drain(..self.start);
                    self.start = 0;
                    let mut bytes = &bytes[..];
                    if self.after_cr && bytes.first() == Some(&b'\n') {
                        bytes = &bytes[1..];
                    }
                    self.after_cr = bytes.last() == Some(&b'\r');
                    self.buffer.extend_from_slice(bytes);
                }
                Some(Err(e)) => {
                    self.ended = true;
                    return Some(Err(SseError::Transport(e)));
                }
                // An event not ended by a blank line is dropped (the
                // standard's rule).
                None => self.ended = true,
            }
        }
    }

    /// The next event's data as JSON of type `T`, skipping nothing: an
    /// event that is not a `T` is an error.
    pub async fn next_json<T: DeserializeOwned>(
        &mut self,
    ) -> Option<Result<(Option<i32>, T), Box<dyn std::error::Error + Send + Sync>>> {
        Some(match self.next().await? {
            Ok(event) => event
                .json()
                .map(|value| (event.number(), value))
                .map_err(|e| format!("a malformed event {:?}: {e}", event.data).into()),
            Err(e) => Err(e.into()),
        })
    }

    /// The next complete line (without its end), if the buffer holds one.
    fn next_line(&mut self) -> Option<String> {
        let rest = &self.buffer[self.start..];
        let end = rest.iter().position(|&b| b == b'\n' || b == b'\r')?;
        let line = String::from_utf8_lossy(&rest[..end]).into_owned();
        let mut next = self.start + end + 1;
        if rest[end] == b'\r' && self.buffer.get(next) == Some(&b'\n') {
            next += 1;
        }
        self.start = next;
        Some(line)
    }

    /// Applies one line; returns the event a blank line ends.
    fn field(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            let had_data = std::mem::replace(&mut self.has_data, false);
            if event.id.is_some() {
                self.last_id.clone_from(&event.id);
            }
            return had_data.then_some(event);
        }
        if line.starts_with(':') {
            return None;
        }
        let (name, value) = match line.split_once(':') {
            Some((name, value)) => (name, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match name {
            "data" => {
                if self.has_data {
                    self.event.data.push('\n');
                }
                self.event.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.event.id = Some(value.to_string()),
            "event" => self.event.event = Some(value.to_string()),
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(chunks: &[&'static [u8]]) -> SseReader {
        let chunks: Vec<Result<bytes::Bytes, reqwest::Error>> = chunks
            .iter()
            .map(|c| Ok(bytes::Bytes::from_static(c)))
            .collect();
        SseReader::new(futures::stream::iter(chunks))
    }

    async fn all(mut r: SseReader) -> Vec<SseEvent> {
        let mut out = Vec::new();
        while let Some(e) = r.next().await {
            out.push(e.expect("an event"));
        }
        out
    }

    #[tokio::test]
    async fn events_split_anywhere_arrive_whole() {
        // "é" is split between two chunks, a CRLF too.
        let r = reader(&[
            b"id: 1\ndata: {\"t\":\"caf\xc3",
            b"\xa9\"}\r",
            b"\n\r\n: keep-alive\n\nevent: done\ndata: a\ndata:b\n\n",
            b"data: [DONE]\n\ndata: unterminated",
        ]);
        let events = all(r).await;
        assert_eq!(events.len(), 3, "{events:?}");
        assert_eq!(events[0].number(), Some(1));
        assert_eq!(events[0].data, "{\"t\":\"café\"}");
        assert_eq!(events[1].event.as_deref(), Some("done"));
        assert_eq!(events[1].data, "a\nb");
        assert_eq!(events[2].data, "[DONE]");
    }

    #[tokio::test]
    async fn the_last_id_is_kept_for_resuming() {
        let mut r = reader(&[b"id: 7\ndata: x\n\ndata: y\n\n"]);
        r.next().await;
        r.next().await;
        assert_eq!(r.last_id(), Some("7"));
    }

    #[tokio::test]
    async fn an_endless_event_is_refused() {
        static BIG: std::sync::LazyLock<Vec<u8>> =
            std::sync::LazyLock::new(|| vec![b'x'; MAX_EVENT_BYTES + 1]);
        let chunks: Vec<Result<bytes::Bytes, reqwest::Error>> = vec![
            Ok(bytes::Bytes::from_static(b"data: ")),
            Ok(bytes::Bytes::from(BIG.clone())),
        ];
        let mut r = SseReader::new(futures::stream::iter(chunks));
        assert!(matches!(r.next().await, Some(Err(SseError::TooLong))));
    }
}
