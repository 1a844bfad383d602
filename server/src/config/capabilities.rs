//! What a model can take and give: its inputs (text, images, PDFs), how it
//! reasons, and its largest answer.
//!
//! A `[[models]]` entry may say each (`input`, `reasoning`,
//! `max_output_tokens`); what it leaves out comes from [`KNOWN`], a table
//! of model-name prefixes of current hosted models (the longest matching
//! prefix wins), else from the conservative default: text only, no
//! reasoning, 4,096 output tokens. The table follows the providers'
//! published model pages; a model released later is configured in the
//! file until the table learns it.

use workspace_api::conversations::{ModelInput, ReasoningMode};

/// A model's capabilities, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Always starts with [`ModelInput::Text`]; sorted, without repeats.
    pub input: Vec<ModelInput>,
    pub reasoning: ReasoningMode,
    pub max_output_tokens: u32,
}

impl Capabilities {
    pub fn takes(&self, input: ModelInput) -> bool {
        self.input.contains(&input)
    }
}

/// The output limit of a model neither configured nor known.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 4_096;

/// Text, images and PDFs.
const VISION_PDF: &[ModelInput] = &[ModelInput::Text, ModelInput::Image, ModelInput::Pdf];
const VISION: &[ModelInput] = &[ModelInput::Text, ModelInput::Image];
const TEXT: &[ModelInput] = &[ModelInput::Text];

/// Known model-name prefixes: (prefix, inputs, reasoning, output limit).
/// Documented in the README's table of models; the longest matching
/// prefix applies.
pub const KNOWN: &[(&str, &[ModelInput], ReasoningMode, u32)] = &[
    // OpenAI: GPT-5 and the o-series take `reasoning_effort`; GPT-4o and
    // GPT-4.1 read images and PDFs without reasoning.
    ("gpt-5", VISION_PDF, ReasoningMode::Effort, 128_000),
    ("gpt-4.1", VISION_PDF, ReasoningMode::None, 32_768),
    ("gpt-4o", VISION_PDF, ReasoningMode::None, 16_384),
    ("o1", VISION_PDF, ReasoningMode::Effort, 100_000),
    ("o3", VISION_PDF, ReasoningMode::Effort, 100_000),
    ("o4-mini", VISION_PDF, ReasoningMode::Effort, 100_000),
    // Anthropic: every current Claude reads images and PDFs; Claude 3.7
    // and the Claude 4 family think with a token budget.
    ("claude-", VISION_PDF, ReasoningMode::None, 8_192),
    (
        "claude-3-7-sonnet",
        VISION_PDF,
        ReasoningMode::Budget,
        64_000,
    ),
    ("claude-sonnet-4", VISION_PDF, ReasoningMode::Budget, 64_000),
    ("claude-haiku-4", VISION_PDF, ReasoningMode::Budget, 64_000),
    ("claude-opus-4", VISION_PDF, ReasoningMode::Budget, 32_000),
    // DeepSeek: the reasoner always reasons (`reasoning_content`).
    ("deepseek-chat", TEXT, ReasoningMode::None, 8_192),
    ("deepseek-reasoner", TEXT, ReasoningMode::Always, 64_000),
    // Gemini's OpenAI-compatible endpoint: images; 2.5 takes an effort.
    ("gemini-", VISION, ReasoningMode::None, 8_192),
    ("gemini-2.5", VISION, ReasoningMode::Effort, 65_536),
    // Open-weight reasoners as Ollama and vLLM name them.
    ("deepseek-r1", TEXT, ReasoningMode::Always, 32_768),
    ("qwq", TEXT, ReasoningMode::Always, 32_768),
];

/// The capabilities of a model named `name`, from `configured` (the
/// entry's own fields) and the table.
pub fn resolve(
    name: &str,
    input: Option<&[ModelInput]>,
    reasoning: Option<ReasoningMode>,
    max_output_tokens: Option<u32>,
) -> Capabilities {
    let known = KNOWN
        .iter()
        .filter(|(prefix, ..)| name.starts_with(prefix))
        .max_by_key(|(prefix, ..)| prefix.len());
    let mut inputs: Vec<ModelInput> = input
        .map(<[ModelInput]>::to_vec)
        .or_else(|| known.map(|k| k.1.to_vec()))
        .unwrap_or_else(|| TEXT.to_vec());
    inputs.push(ModelInput::Text);
    inputs.sort();
    inputs.dedup();
    Capabilities {
        input: inputs,
        reasoning: reasoning
            .or(known.map(|k| k.2))
            .unwrap_or(ReasoningMode::None),
        max_output_tokens: max_output_tokens
            .or(known.map(|k| k.3))
            .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS),
    }
}

/// The built-in offline model: it takes images and PDFs (it describes
/// them) and reasons when asked for an effort, so every path of the
/// model loop runs with zero configuration.
pub fn offline() -> Capabilities {
    Capabilities {
        input: VISION_PDF.to_vec(),
        reasoning: ReasoningMode::Effort,
        max_output_tokens: 8_192,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_prefix_wins_and_configuration_overrides() {
        let c = resolve("claude-sonnet-4-5", None, None, None);
        assert_eq!(c.reasoning, ReasoningMode::Budget);
        assert!(c.takes(ModelInput::Pdf));
        assert_eq!(
            resolve("claude-3-5-haiku", None, None, None).reasoning,
            ReasoningMode::None
        );
        assert_eq!(
            resolve("gpt-4o-mini", None, None, None).max_output_tokens,
            16_384
        );
        let local = resolve("llama3", None, None, None);
        assert_eq!(local.input, vec![ModelInput::Text]);
        assert_eq!(local.reasoning, ReasoningMode::None);
        assert_eq!(local.max_output_tokens, DEFAULT_MAX_OUTPUT_TOKENS);
        // Text is always taken, whatever the configuration lists.
        let c = resolve(
            "llava",
            Some(&[ModelInput::Image]),
            Some(ReasoningMode::Always),
            Some(99),
        );
        assert_eq!(c.input, vec![ModelInput::Text, ModelInput::Image]);
        assert_eq!(
            (c.reasoning, c.max_output_tokens),
            (ReasoningMode::Always, 99)
        );
        let c = resolve("gpt-5-mini", Some(&[ModelInput::Text]), None, None);
        assert!(!c.takes(ModelInput::Image));
        assert_eq!(c.reasoning, ReasoningMode::Effort);
    }
}
