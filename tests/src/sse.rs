//! Reading the Server-Sent Events of `conversation_stream_chat` from the
//! generated client's `ByteStream`.

use futures::StreamExt;
use workspace_api::conversations::ConversationStreamEvent;
use workspace_client::ByteStream;

type Inner = std::pin::Pin<
    Box<dyn futures::Stream<Item = Result<bytes::Bytes, reqwest::Error>> + Send + Sync>,
>;

/// Parses `data: <json>` events from a byte stream as they arrive.
pub struct EventReader {
    inner: Inner,
    buffer: String,
}

impl EventReader {
    pub fn new(stream: ByteStream) -> EventReader {
        EventReader {
            inner: stream.into_inner(),
            buffer: String::new(),
        }
    }

    /// The next event; `None` when the body ended (or broke).
    pub async fn next(&mut self) -> Option<ConversationStreamEvent> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let data: String = block
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect::<Vec<_>>()
                    .join("\n");
                if data.is_empty() {
                    continue;
                }
                return Some(
                    serde_json::from_str(&data)
                        .unwrap_or_else(|e| panic!("bad event {data:?}: {e}")),
                );
            }
            match self.inner.next().await {
                Some(Ok(bytes)) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                _ => return None,
            }
        }
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

/// Reads numbered events (`id: N` and `data: <json>` lines, as the chat
/// streams send them) from a raw streamed response, as they arrive.
pub struct NumberedReader {
    response: reqwest::Response,
    buffer: String,
}

impl NumberedReader {
    pub fn new(response: reqwest::Response) -> NumberedReader {
        NumberedReader {
            response,
            buffer: String::new(),
        }
    }

    /// The next event and its number (`None` for an unnumbered event);
    /// `None` when the body ended (or broke).
    pub async fn next(&mut self) -> Option<(Option<i32>, serde_json::Value)> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut id = None;
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        id = Some(v.parse().expect("a numeric event id"));
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data.push_str(v);
                    }
                }
                if data.is_empty() {
                    continue;
                }
                return Some((id, serde_json::from_str(&data).expect("a JSON event")));
            }
            match self.response.chunk().await {
                Ok(Some(bytes)) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                _ => return None,
            }
        }
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
