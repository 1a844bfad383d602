//! Turning a provider's Server-Sent Events response into a [`ChatStream`].
//!
//! The SSE framing (fields, multi-line data, comments, CRLF) is parsed by
//! the `eventsource-stream` crate; each provider supplies a [`Decoder`] for
//! its JSON payloads.

use super::{ChatEvent, ChatStream, ProviderError, ProviderErrorKind};
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::StreamExt;
use std::collections::VecDeque;

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
    events: futures::stream::BoxStream<'static, Result<Event, EventStreamError<reqwest::Error>>>,
    decoder: D,
    pending: VecDeque<ChatEvent>,
    finished: bool,
}

/// Streams the decoded events of `response`'s body.
pub(crate) fn decode<D: Decoder>(response: reqwest::Response, decoder: D) -> ChatStream {
    let events = response.bytes_stream().eventsource().boxed();
    decode_events(events, decoder)
}

fn decode_events<D: Decoder>(
    events: futures::stream::BoxStream<'static, Result<Event, EventStreamError<reqwest::Error>>>,
    decoder: D,
) -> ChatStream {
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
                Some(Err(EventStreamError::Transport(e))) => {
                    Err(ProviderError::from_reqwest(&e, true))
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

    pub(crate) async fn run<D: Decoder>(
        text: &str,
        decoder: D,
    ) -> Vec<Result<ChatEvent, ProviderError>> {
        let bytes: Vec<Result<bytes::Bytes, std::convert::Infallible>> =
            vec![Ok(bytes::Bytes::from(text.to_string()))];
        let events = futures::stream::iter(bytes)
            .eventsource()
            .map(|r| {
                r.map_err(|e| match e {
                    EventStreamError::Utf8(e) => EventStreamError::Utf8(e),
                    EventStreamError::Parser(e) => EventStreamError::Parser(e),
                    EventStreamError::Transport(never) => match never {},
                })
            })
            .boxed();
        decode_events(events, decoder).collect().await
    }
}
