//! Typed views of the streams for the tests, over the client's one
//! Server-Sent Events reader ([`workspace_client::sse`]).

use workspace_api::conversations::ConversationStreamEvent;
use workspace_client::ByteStream;
use workspace_client::sse::SseReader;

/// Reads the typed events of a conversation stream as they arrive.
pub struct EventReader {
    inner: SseReader,
}

impl EventReader {
    pub fn new(stream: ByteStream) -> EventReader {
        EventReader {
            inner: SseReader::from_byte_stream(stream),
        }
    }

    /// The next event; `None` when the body ended (or broke).
    pub async fn next(&mut self) -> Option<ConversationStreamEvent> {
        let event = self.inner.next().await?.ok()?;
        Some(
            event
                .json()
                .unwrap_or_else(|e| panic!("bad event {:?}: {e}", event.data)),
        )
    }

    /// All remaining events.
    pub async fn collect(mut self) -> Vec<ConversationStreamEvent> {
        let mut events = Vec::new();
        while let Some(e) = self.next().await {
            events.push(e);
        }
        events
    }
}

/// The text of the `content` events.
pub fn content(events: &[ConversationStreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ConversationStreamEvent::Content { content } => Some(content.as_str()),
            _ => None,
        })
        .collect()
}

/// Reads numbered events (`id: N` and `data: <json>`, as the chat
/// streams send them) from a raw streamed response, as they arrive.
pub struct NumberedReader {
    inner: SseReader,
}

impl NumberedReader {
    pub fn new(response: reqwest::Response) -> NumberedReader {
        NumberedReader {
            inner: SseReader::from_response(response),
        }
    }

    /// The next event and its number (`None` for an unnumbered event);
    /// `None` when the body ended (or broke).
    pub async fn next(&mut self) -> Option<(Option<i32>, serde_json::Value)> {
        let event = self.inner.next().await?.ok()?;
        if let Some(id) = &event.id {
            assert!(event.number().is_some(), "a numeric event id: {id:?}");
        }
        Some((event.number(), event.json().expect("a JSON event")))
    }

    /// All remaining events.
    pub async fn collect(mut self) -> Vec<(Option<i32>, serde_json::Value)> {
        let mut out = Vec::new();
        while let Some(e) = self.next().await {
            out.push(e);
        }
        out
    }
}

/// The data of every event of a streamed response, in order, once it has
/// ended.
pub async fn data_of(response: reqwest::Response) -> Vec<String> {
    let mut reader = SseReader::from_response(response);
    let mut out = Vec::new();
    while let Some(event) = reader.next().await {
        out.push(event.expect("a readable stream").data);
    }
    out
}

/// Every event of a streamed response as JSON, in order, once it has
/// ended.
pub async fn json_of(response: reqwest::Response) -> Vec<serde_json::Value> {
    data_of(response)
        .await
        .iter()
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("bad event {d:?}: {e}")))
        .collect()
}
