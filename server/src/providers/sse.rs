//! Turning a provider's Server-Sent Events response into a [`ChatStream`].
//!
//! The SSE framing (fields, multi-line data, comments, CRLF) is parsed by
//! the `eventsource-stream` crate; each provider supplies a [`Decoder`] for
//! its JSON payloads.
//!
//! What a provider sends is bounded before that crate buffers it: it keeps
//! an event's bytes until the blank line that ends it, without a limit of
//! its own, so an event longer than [`MAX_EVENT_BYTES`] ends the answer
//! with a [`ProviderErrorKind::Malformed`] error. Decoders bound what they
//! accumulate across events (thinking blocks, a tool call's arguments) by
//! [`MAX_ACCUMULATED`].

use super::{ChatEvent, ChatStream, ProviderError, ProviderErrorKind};
use bytes::Bytes;
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::StreamExt;
use futures::stream::BoxStream;
use std::collections::VecDeque;

/// The longest SSE event accepted, in bytes (its lines, without their line
/// ends). Far above any real event: the largest are an Anthropic
/// `redacted_thinking` block's opaque `data` and a thinking block's
/// `signature`, which arrive whole in one event.
pub(crate) const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

/// The most text a decoder accumulates across events: of one answer's
/// reasoning blocks kept to be sent back, of one tool call's arguments.
pub(crate) const MAX_ACCUMULATED: usize = 4 * 1024 * 1024;

/// Appends `piece` to `buffer` unless that makes it longer than
/// [`MAX_ACCUMULATED`]: then a [`ProviderErrorKind::Malformed`] error
/// naming `what`.
pub(crate) fn append_bounded(
    buffer: &mut String,
    piece: &str,
    what: &str,
) -> Result<(), ProviderError> {
    if buffer.len().saturating_add(piece.len()) > MAX_ACCUMULATED {
        return Err(ProviderError::new(
            ProviderErrorKind::Malformed,
            format!("{what} is over {MAX_ACCUMULATED} bytes"),
        ));
    }
    buffer.push_str(piece);
    Ok(())
}

/// Why the bytes of a body stopped.
#[derive(Debug)]
pub(crate) enum Source {
    Transport(reqwest::Error),
    /// An event went past [`MAX_EVENT_BYTES`].
    EventTooLong,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Transport(e) => write!(f, "{e}"),
            Source::EventTooLong => write!(f, "an event is over {MAX_EVENT_BYTES} bytes"),
        }
    }
}

/// The length of the SSE event being received: the bytes of its lines
/// since the last blank line (which ends an event). Lines end with CRLF,
/// LF or CR, as the SSE specification allows.
#[derive(Default)]
struct EventLength {
    event: usize,
    line: usize,
    after_cr: bool,
}

impl EventLength {
    /// Counts `chunk`; false once the event is over [`MAX_EVENT_BYTES`].
    fn feed(&mut self, chunk: &[u8]) -> bool {
        for &byte in chunk {
            match byte {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    if self.line == 0 {
                        self.event = 0;
                    }
                    self.line = 0;
                    self.after_cr = byte == b'\r';
                }
                _ => {
                    self.after_cr = false;
                    self.line += 1;
                    self.event += 1;
                }
            }
        }
        self.event <= MAX_EVENT_BYTES
    }
}

type Events = BoxStream<'static, Result<Event, EventStreamError<Source>>>;

/// The SSE events of `bytes`, ending with [`Source::EventTooLong`] when an
/// event grows past [`MAX_EVENT_BYTES`].
fn bounded_events(
    bytes: impl futures::Stream<Item = Result<Bytes, Source>> + Send + 'static,
) -> Events {
    let mut length = EventLength::default();
    bytes
        .map(move |item| match item {
            Ok(chunk) if !length.feed(&chunk) => Err(Source::EventTooLong),
            other => other,
        })
        .eventsource()
        .boxed()
}

/// A provider's interpretation of SSE events.
pub(crate) trait Decoder: Send + 'static {
    /// Handles one event; returns what it completed.
    fn event(&mut self, event: &Event) -> Result<Vec<ChatEvent>, ProviderError>;
    /// Whether the provider said the answer is complete (no more events are
    /// needed).
    fn done(&self) -> bool;
    /// The body ended. Returns the last events, or an error when the answer
    /// was not complete.
    fn eof(&mut self) -> Result<Vec<ChatEvent>, ProviderError>;
}

struct State<D> {
    events: Events,
    decoder: D,
    pending: VecDeque<ChatEvent>,
    finished: bool,
}

/// Streams the decoded events of `response`'s body.
pub(crate) fn decode<D: Decoder>(response: reqwest::Response, decoder: D) -> ChatStream {
    let bytes = response
        .bytes_stream()
        .map(|r| r.map_err(Source::Transport));
    decode_events(bounded_events(bytes), decoder)
}

fn decode_events<D: Decoder>(events: Events, decoder: D) -> ChatStream {
    let state = State {
        events,
        decoder,
        pending: VecDeque::new(),
        finished: false,
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.pending.pop_front() {
                return Some((Ok(event), state));
            }
            if state.finished {
                return None;
            }
            if state.decoder.done() {
                // Complete: whatever follows (nothing, normally) is ignored.
                state.finished = true;
                continue;
            }
            let result = match state.events.next().await {
                Some(Ok(event)) => state.decoder.event(&event),
                Some(Err(EventStreamError::Transport(Source::Transport(e)))) => {
                    Err(ProviderError::from_reqwest(&e, true))
                }
                Some(Err(EventStreamError::Transport(Source::EventTooLong))) => {
                    Err(ProviderError::new(
                        ProviderErrorKind::Malformed,
                        Source::EventTooLong.to_string(),
                    ))
                }
                Some(Err(e)) => Err(ProviderError::new(
                    ProviderErrorKind::Malformed,
                    format!("unreadable event stream: {e}"),
                )),
                None => {
                    state.finished = true;
                    state.decoder.eof()
                }
            };
            match result {
                Ok(events) => state.pending.extend(events),
                Err(error) => {
                    state.finished = true;
                    state.pending.clear();
                    return Some((Err(error), state));
                }
            }
        }
    })
    .boxed()
}

/// Parses an event's data as JSON.
pub(crate) fn json(event: &Event) -> Result<serde_json::Value, ProviderError> {
    serde_json::from_str(&event.data).map_err(|e| {
        ProviderError::new(
            ProviderErrorKind::Malformed,
            format!(
                "event data is not JSON ({e}): {}",
                super::scrub(&event.data, None)
            ),
        )
    })
}

#[cfg(test)]
pub(crate) mod testing {
    //! Feeding raw SSE text through a decoder, without HTTP.
    use super::*;

    /// The events `decoder` makes of `text`, received in one piece.
    pub(crate) async fn run<D: Decoder>(
        text: &str,
        decoder: D,
    ) -> Vec<Result<ChatEvent, ProviderError>> {
        run_chunks(&[text], decoder).await
    }

    /// The events `decoder` makes of `chunks`, received one after another.
    pub(crate) async fn run_chunks<D: Decoder>(
        chunks: &[&str],
        decoder: D,
    ) -> Vec<Result<ChatEvent, ProviderError>> {
        let bytes: Vec<Result<Bytes, Source>> = chunks
            .iter()
            .map(|c| Ok(Bytes::from(c.to_string())))
            .collect();
        decode_events(bounded_events(futures::stream::iter(bytes)), decoder)
            .collect()
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::testing::run_chunks;
    use super::*;

    /// Passes every event's data on as text.
    struct Echo;

    impl Decoder for Echo {
        fn event(&mut self, event: &Event) -> Result<Vec<ChatEvent>, ProviderError> {
            Ok(vec![ChatEvent::Text(event.data.len().to_string())])
        }
        fn done(&self) -> bool {
            false
        }
        fn eof(&mut self) -> Result<Vec<ChatEvent>, ProviderError> {
            Ok(Vec::new())
        }
    }

    #[tokio::test]
    async fn an_event_past_the_limit_ends_the_answer() {
        let long = "x".repeat(MAX_EVENT_BYTES / 2);
        // Two lines of one event, sent in pieces: together over the limit.
        let events = run_chunks(
            &[
                "data: a\n\n",
                "data: ",
                &long,
                "\r\n",
                "data: ",
                &long,
                "\n\n",
            ],
            Echo,
        )
        .await;
        assert_eq!(events.len(), 2, "{:?}", events.last());
        assert_eq!(events[0], Ok(ChatEvent::Text("1".into())));
        let error = events[1].as_ref().unwrap_err();
        assert_eq!(error.kind, ProviderErrorKind::Malformed);
        assert!(error.detail.contains("over"), "{}", error.detail);
    }

    #[tokio::test]
    async fn many_events_may_add_up_past_the_limit() {
        let line = format!("data: {}\r\n\r\n", "x".repeat(MAX_EVENT_BYTES / 3));
        let events = run_chunks(&[&line, &line, &line, &line], Echo).await;
        assert_eq!(events.len(), 4);
        assert!(events.iter().all(Result::is_ok));
    }

    #[test]
    fn append_bounded_refuses_past_the_limit() {
        let mut buffer = "x".repeat(MAX_ACCUMULATED - 1);
        append_bounded(&mut buffer, "y", "text").unwrap();
        let error = append_bounded(&mut buffer, "z", "a thinking block").unwrap_err();
        assert_eq!(error.kind, ProviderErrorKind::Malformed);
        assert_eq!(buffer.len(), MAX_ACCUMULATED);
    }
}
