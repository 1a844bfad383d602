//! An answer's history, bounded by the model's context window.
//!
//! A chat or a conversation session grows without end; its answers send
//! only the most recent turns that fit. The budget of the earlier messages
//! is the model's `context_tokens` less what is always sent: a reserve for
//! the answer (`max_tokens` of the run, else of the model, else
//! [`ANSWER_RESERVE_TOKENS`]), the system prompt, the tools' specs and the
//! new message (which carries the retrieved sources and the uploads'
//! text). The oldest turns drop first, never a turn in the middle: the
//! history sent starts with a user message. At most
//! [`HISTORY_MAX_MESSAGES`] earlier messages are sent, whatever the budget.
//!
//! Tokens are estimated, not counted (no tokenizer runs): see
//! [`estimate_tokens`]. The database applies the same estimate when it
//! reads a history (newest rows first, stopping at the budget: see
//! `HistoryBound`), so neither reads a whole long history.

use crate::media::{ImageDetail, anthropic_image_tokens, openai_image_tokens};
use crate::providers::{Attachment, ChatMessage, ModelEntry, Role};

/// Tokens kept for the answer when neither the run nor the model sets
/// `max_tokens` (Anthropic's default `max_tokens` here too).
pub const ANSWER_RESERVE_TOKENS: u32 = 4_096;

/// The most earlier messages an answer reads and sends, whatever its
/// budget: 100 turns.
pub const HISTORY_MAX_MESSAGES: usize = 200;

/// Tokens counted for each message besides its text: its role and the
/// provider's framing.
pub const MESSAGE_OVERHEAD_TOKENS: u32 = 4;

/// A cheap, conservative estimate of a text's tokens: its UTF-8 bytes / 3,
/// rounded up. Current tokenizers take about 4 bytes of English prose and
/// about 3 of code or CJK text per token, so this rarely estimates low: a
/// history cut to a budget fits the context it was cut for. The database
/// computes the same in SQL (`(octet_length(content) + 2) / 3`).
pub fn estimate_tokens(text: &str) -> u32 {
    u32::try_from(text.len().div_ceil(3)).unwrap_or(u32::MAX)
}

/// Tokens counted for each page of a PDF sent whole: providers read a
/// page as its text and as an image of it (Anthropic documents 1,500 to
/// 3,000 tokens a page), so the upper figure is used.
pub const PDF_PAGE_TOKENS: u32 = 3_000;

/// The tokens an attachment costs with `provider`'s published formula:
/// Anthropic's `width × height / 750` for an image, OpenAI's tiles for
/// every other provider (all speak its format); [`PDF_PAGE_TOKENS`] a page.
pub fn attachment_tokens(attachment: &Attachment, provider: &str) -> u32 {
    match attachment {
        Attachment::Image {
            width,
            height,
            detail,
            ..
        } => match provider {
            "anthropic" => anthropic_image_tokens(*width, *height),
            _ => openai_image_tokens(*width, *height, *detail),
        },
        Attachment::Pdf { pages, .. } => pages.saturating_mul(PDF_PAGE_TOKENS),
    }
}

/// A message's estimated tokens with `provider`: its text, tool calls and
/// attachments, plus [`MESSAGE_OVERHEAD_TOKENS`].
pub fn message_tokens(message: &ChatMessage, provider: &str) -> u32 {
    let calls = message.tool_calls.iter().fold(0u32, |n, c| {
        n.saturating_add(estimate_tokens(&c.name))
            .saturating_add(estimate_tokens(&c.arguments))
    });
    let attached = message.attachments.iter().fold(0u32, |n, a| {
        n.saturating_add(attachment_tokens(a, provider))
    });
    estimate_tokens(&message.content)
        .saturating_add(calls)
        .saturating_add(attached)
        .saturating_add(MESSAGE_OVERHEAD_TOKENS)
}

/// The detail an image is sent with (OpenAI's `detail`): `auto`, which
/// lets the provider choose and is counted as `high`.
pub const IMAGE_DETAIL: ImageDetail = ImageDetail::Auto;

/// The tokens the earlier messages may take: the model's context less the
/// answer's reserve (`max_tokens`, else the model's, else
/// [`ANSWER_RESERVE_TOKENS`]) and `fixed` (what is always sent); 0 when
/// those fill it.
pub fn history_budget(model: &ModelEntry, max_tokens: Option<u32>, fixed: u32) -> u32 {
    let reserve = max_tokens
        .or(model.max_tokens)
        .unwrap_or(ANSWER_RESERVE_TOKENS);
    model
        .context_tokens
        .saturating_sub(reserve)
        .saturating_sub(fixed)
}

/// Keeps the most recent of `earlier` (oldest first, the new message not
/// among them) that fit in `budget` tokens, at most
/// [`HISTORY_MAX_MESSAGES`]: the oldest drop first, then any message left
/// at the start that is not a user message (an answer or a tool result
/// whose question was dropped), so the kept history starts a turn.
/// Returns how many were dropped.
pub fn fit_history(earlier: &mut Vec<ChatMessage>, budget: u32, provider: &str) -> usize {
    let mut used = 0u64;
    let mut keep = 0usize;
    for m in earlier.iter().rev() {
        let cost = u64::from(message_tokens(m, provider));
        if keep == HISTORY_MAX_MESSAGES || used + cost > u64::from(budget) {
            break;
        }
        used += cost;
        keep += 1;
    }
    let mut start = earlier.len() - keep;
    while start < earlier.len() && earlier[start].role != Role::User {
        start += 1;
    }
    earlier.drain(..start);
    start
}

impl super::RunSpec {
    /// Drops the oldest turns of the history that do not fit the model's
    /// context beside the system prompt, the tools, the answer's reserve
    /// and the new message (the history's last, always kept); see
    /// [`fit_history`]. Returns how many messages were dropped.
    pub fn fit_context(&mut self) -> usize {
        let Some(new) = self.history.pop() else {
            return 0;
        };
        let tools = self.tools.iter().fold(0u32, |n, t| {
            let s = t.spec();
            n.saturating_add(estimate_tokens(&s.name))
                .saturating_add(estimate_tokens(&s.description))
                .saturating_add(estimate_tokens(&s.parameters.to_string()))
        });
        let system = match self.system_prompt.is_empty() {
            true => 0,
            false => estimate_tokens(&self.system_prompt).saturating_add(MESSAGE_OVERHEAD_TOKENS),
        };
        let fixed = system
            .saturating_add(tools)
            .saturating_add(message_tokens(&new, &self.model.provider));
        let budget = history_budget(&self.model, self.max_tokens, fixed);
        let dropped = fit_history(&mut self.history, budget, &self.model.provider);
        self.history.push(new);
        if dropped > 0 {
            slog::debug!(self.log, "history cut to the model's context";
                "dropped" => dropped, "kept" => self.history.len() - 1, "budget" => budget);
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::ChatMessage as M;

    fn turns(n: usize, text: &str) -> Vec<M> {
        (0..n)
            .flat_map(|i| {
                [
                    M::user(format!("{text}{i}")),
                    M::assistant(format!("{text}{i}")),
                ]
            })
            .collect()
    }

    #[test]
    fn estimates_bytes_over_three_plus_the_framing() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abc"), 1);
        assert_eq!(estimate_tokens("abcd"), 2);
        // 3 bytes a character: one token each.
        assert_eq!(estimate_tokens("日本語"), 3);
        assert_eq!(
            message_tokens(&M::user("abcdef"), "openai"),
            2 + MESSAGE_OVERHEAD_TOKENS
        );
    }

    #[test]
    fn keeps_the_newest_whole_turns_that_fit() {
        // Each message "xxxxxN" (6 bytes): 2 + 4 = 6 tokens.
        let mut h = turns(10, "xxxxx");
        // 4 turns (48 tokens) and half of a fifth: the fifth's answer
        // fits, its question does not, so the answer goes too.
        let dropped = fit_history(&mut h, 54, "openai");
        assert_eq!(dropped, 12);
        assert_eq!(h.len(), 8);
        assert_eq!(h[0], M::user("xxxxx6"));
        assert_eq!(h[7], M::assistant("xxxxx9"));
    }

    #[test]
    fn an_empty_budget_keeps_nothing_and_a_large_one_keeps_all() {
        let mut h = turns(3, "x");
        assert_eq!(fit_history(&mut h, 0, "openai"), 6);
        assert!(h.is_empty());
        let mut h = turns(3, "x");
        assert_eq!(fit_history(&mut h, u32::MAX, "openai"), 0);
        assert_eq!(h.len(), 6);
    }

    #[test]
    fn never_starts_with_an_answer_or_a_tool_result() {
        let mut h = vec![
            M::assistant("orphan"),
            M::tool_result("c1", "result"),
            M::user("question"),
            M::assistant("answer"),
        ];
        assert_eq!(fit_history(&mut h, u32::MAX, "openai"), 2);
        assert_eq!(h[0], M::user("question"));
    }

    #[test]
    fn at_most_the_row_cap_whatever_the_budget() {
        let mut h = turns(HISTORY_MAX_MESSAGES, "x");
        fit_history(&mut h, u32::MAX, "openai");
        assert_eq!(h.len(), HISTORY_MAX_MESSAGES);
        assert_eq!(h[0], M::user(format!("x{}", HISTORY_MAX_MESSAGES / 2)));
    }
}
