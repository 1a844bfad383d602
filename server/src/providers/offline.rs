//! The offline development model: a deterministic stand-in that needs no
//! network or key, so a server with zero configuration streams answers.
//! It is plainly a development aid, named `offline-dev-model`.

use super::{
    ChatEvent, ChatModel, ChatRequest, ChatStream, FinishReason, ProviderError, Role, Usage,
};
use futures::StreamExt;
use std::time::Duration;

pub struct OfflineModel {
    /// Pause before each chunk.
    pub chunk_delay: Duration,
}

impl OfflineModel {
    /// The answer to `request`: it names itself, repeats the last user
    /// message and says how many earlier messages it was given.
    pub fn answer(request: &ChatRequest) -> String {
        let last = request
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| m.content.as_str())
            .unwrap_or("");
        let earlier = request.messages.len().saturating_sub(1);
        let mut answer = format!(
            "This is offline-dev-model, the built-in development model; no language model \
             provider is configured. You said: \"{last}\". Earlier messages in this session: {earlier}."
        );
        let attached = Self::attachments(request);
        if !attached.is_empty() {
            answer.push_str(&format!(" Attached: {}.", attached.join(", ")));
        }
        answer
    }

    /// What the last user message carries, as the model "sees" it: each
    /// image's type and size, each PDF's name and pages.
    fn attachments(request: &ChatRequest) -> Vec<String> {
        let Some(last) = request.messages.iter().rev().find(|m| m.role == Role::User) else {
            return Vec::new();
        };
        last.attachments
            .iter()
            .map(|a| match a {
                super::Attachment::Image {
                    media_type,
                    width,
                    height,
                    ..
                } => format!("an image ({media_type}, {width}x{height})"),
                super::Attachment::Pdf {
                    filename, pages, ..
                } => format!("a PDF ({filename}, {pages} pages)"),
            })
            .collect()
    }

    /// The reasoning shown before the answer when an effort is asked for.
    pub fn reasoning(request: &ChatRequest) -> Option<String> {
        match request.reasoning {
            Some(super::Reasoning::Effort(effort)) => Some(format!(
                "Thinking with {} effort: the user wrote {} words; I repeat them.",
                effort.as_str(),
                request
                    .messages
                    .iter()
                    .rev()
                    .find(|m| m.role == Role::User)
                    .map_or(0, |m| m.content.split_whitespace().count())
            )),
            _ => None,
        }
    }
}

/// Splits `text` into word-sized chunks that concatenate back to it.
pub fn chunks(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        current.push(c);
        if c == ' ' {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The offline model's tool convention, so the agent runtime's whole loop
/// runs with zero configuration: when tools are offered and the last
/// message is a user message `/tool NAME {json}`, the model calls tool NAME
/// with those arguments (`{}` when omitted); after a tool result it answers
/// `Tool NAME returned: RESULT`.
fn tool_turn(request: &ChatRequest) -> Option<Vec<ChatEvent>> {
    let last = request.messages.last()?;
    if last.role == Role::Tool {
        let id = last.tool_call_id.as_deref().unwrap_or_default();
        let name = request
            .messages
            .iter()
            .flat_map(|m| m.tool_calls.iter())
            .find(|c| c.id == id)
            .map(|c| c.name.as_str())
            .unwrap_or("unknown");
        return Some(vec![ChatEvent::Text(format!(
            "Tool {name} returned: {}",
            last.content
        ))]);
    }
    if last.role != Role::User || request.tools.is_empty() {
        return None;
    }
    let rest = last.content.trim().strip_prefix("/tool ")?.trim();
    let (name, args) = match rest.split_once(char::is_whitespace) {
        Some((n, a)) => (n, a.trim()),
        None => (rest, "{}"),
    };
    let calls = request
        .messages
        .iter()
        .filter(|m| !m.tool_calls.is_empty())
        .count();
    Some(vec![ChatEvent::ToolCall(super::ToolCall {
        id: format!("call_offline_{calls}"),
        name: name.to_string(),
        arguments: args.to_string(),
    })])
}

#[async_trait::async_trait]
impl ChatModel for OfflineModel {
    async fn stream(&self, request: &ChatRequest) -> Result<ChatStream, ProviderError> {
        if let Some(events) = tool_turn(request) {
            let finish = if matches!(events.first(), Some(ChatEvent::ToolCall(_))) {
                FinishReason::ToolCalls
            } else {
                FinishReason::Stop
            };
            let usage = Usage {
                input_tokens: request
                    .messages
                    .iter()
                    .map(|m| m.content.split_whitespace().count() as u32)
                    .sum(),
                output_tokens: 1,
                ..Default::default()
            };
            let tail = [ChatEvent::Usage(usage), ChatEvent::Finish(finish)];
            return Ok(futures::stream::iter(events.into_iter().chain(tail).map(Ok)).boxed());
        }
        let answer = Self::answer(request);
        let reasoning = Self::reasoning(request);
        let thought = reasoning.as_deref().map(chunks).unwrap_or_default();
        let pieces = chunks(&answer);
        let input_tokens: usize = request
            .messages
            .iter()
            .map(|m| m.content.split_whitespace().count())
            .sum();
        let usage = Usage {
            input_tokens: input_tokens as u32,
            output_tokens: (thought.len() + pieces.len()) as u32,
            cached_tokens: 0,
            reasoning_tokens: thought.len() as u32,
        };
        let delay = self.chunk_delay;
        let events = thought
            .into_iter()
            .map(ChatEvent::Reasoning)
            .chain(pieces.into_iter().map(ChatEvent::Text));
        let text = futures::stream::iter(events).then(move |event| async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Ok(event)
        });
        let tail = futures::stream::iter([
            Ok(ChatEvent::Usage(usage)),
            Ok(ChatEvent::Finish(FinishReason::Stop)),
        ]);
        Ok(text.chain(tail).boxed())
    }

    fn describe(&self) -> (&str, &str) {
        ("workspace", "offline")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn streams_the_whole_answer() {
        let model = OfflineModel {
            chunk_delay: Duration::ZERO,
        };
        let request = ChatRequest {
            messages: vec![super::super::ChatMessage::user("hello there")],
            ..Default::default()
        };
        let events: Vec<_> = model.stream(&request).await.unwrap().collect().await;
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                Ok(ChatEvent::Text(t)) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, OfflineModel::answer(&request));
        assert!(text.contains("hello there"));
        assert_eq!(
            events.last(),
            Some(&Ok(ChatEvent::Finish(FinishReason::Stop)))
        );
    }
}
