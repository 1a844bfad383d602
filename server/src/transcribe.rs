//! Speech to text for `POST /api/chat/transcribe`: one trait,
//! [`Transcriber`], and its OpenAI-compatible implementation
//! (`POST {base_url}/audio/transcriptions`, `multipart/form-data` with
//! `file`, `model`, `language`, `response_format=json`), which OpenAI,
//! Groq, whisper.cpp's server and faster-whisper servers all speak.

use serde::Deserialize;
use std::time::Duration;

/// The `[transcription]` section. Without `base_url` no transcriber is
/// configured and the operation answers `503 transcription_unavailable`.
#[derive(Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TranscriptionConfig {
    /// The OpenAI-compatible API root, e.g. `https://api.openai.com/v1`,
    /// `https://api.groq.com/openai/v1` or `http://127.0.0.1:8080/v1`
    /// (env `WORKSPACE_TRANSCRIPTION_URL`).
    pub base_url: Option<String>,
    /// The API key (prefer `api_key_env`; env `WORKSPACE_TRANSCRIPTION_API_KEY`).
    pub api_key: Option<String>,
    /// The environment variable that holds the API key.
    pub api_key_env: Option<String>,
    /// The model, e.g. `whisper-1`, `whisper-large-v3`.
    pub model: String,
    /// The longest wait for a transcript, in seconds.
    pub timeout_secs: u64,
    /// The largest audio accepted, in bytes.
    pub max_bytes: usize,
}

impl Default for TranscriptionConfig {
    fn default() -> Self {
        TranscriptionConfig {
            base_url: None,
            api_key: None,
            api_key_env: None,
            model: "whisper-1".to_string(),
            timeout_secs: 120,
            max_bytes: 25 * 1024 * 1024,
        }
    }
}

impl std::fmt::Debug for TranscriptionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TranscriptionConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_env", &self.api_key_env)
            .field("model", &self.model)
            .field("timeout_secs", &self.timeout_secs)
            .finish()
    }
}

impl TranscriptionConfig {
    /// The environment overrides of this section.
    pub fn apply_env(&mut self, get: &impl Fn(&str) -> Option<String>) {
        if let Some(url) = get("WORKSPACE_TRANSCRIPTION_URL").filter(|v| !v.is_empty()) {
            self.base_url = Some(url);
        }
        if let Some(key) = get("WORKSPACE_TRANSCRIPTION_API_KEY").filter(|v| !v.is_empty()) {
            self.api_key = Some(key);
        }
        if self.api_key.is_none()
            && let Some(var) = &self.api_key_env
        {
            self.api_key = get(var).filter(|v| !v.is_empty());
        }
    }
}

/// Audio to transcribe.
pub struct Audio {
    pub bytes: bytes::Bytes,
    /// The sniffed MIME type.
    pub content_type: &'static str,
    /// A file name with the format's extension (providers look at it).
    pub filename: String,
    /// ISO-639-1, e.g. `en`.
    pub language: Option<String>,
}

/// What a transcriber failed with (the detail is for the log only).
#[derive(Debug, thiserror::Error)]
#[error("transcription failed: {0}")]
pub struct TranscribeError(pub String);

#[async_trait::async_trait]
pub trait Transcriber: Send + Sync {
    async fn transcribe(&self, audio: &Audio) -> Result<String, TranscribeError>;
}

/// An OpenAI-compatible `/audio/transcriptions` endpoint.
pub struct OpenAiTranscriber {
    http: reqwest::Client,
    url: String,
    api_key: Option<String>,
    model: String,
    timeout: Duration,
}

impl OpenAiTranscriber {
    pub fn new(http: reqwest::Client, config: &TranscriptionConfig) -> Option<OpenAiTranscriber> {
        let base = config.base_url.as_deref()?.trim_end_matches('/');
        Some(OpenAiTranscriber {
            http,
            url: format!("{base}/audio/transcriptions"),
            api_key: config.api_key.clone(),
            model: config.model.clone(),
            timeout: Duration::from_secs(config.timeout_secs),
        })
    }
}

/// A `multipart/form-data` body of text fields and one file part.
fn multipart(boundary: &str, fields: &[(&str, &str)], audio: &Audio) -> Vec<u8> {
    let mut body = Vec::with_capacity(audio.bytes.len() + 1024);
    for (name, value) in fields {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{}\"\r\n\
             Content-Type: {}\r\n\r\n",
            audio.filename, audio.content_type
        )
        .as_bytes(),
    );
    body.extend_from_slice(&audio.bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    body
}

#[async_trait::async_trait]
impl Transcriber for OpenAiTranscriber {
    async fn transcribe(&self, audio: &Audio) -> Result<String, TranscribeError> {
        let boundary = format!("workspace-{}", uuid::Uuid::new_v4().simple());
        let mut fields = vec![("model", self.model.as_str()), ("response_format", "json")];
        if let Some(language) = &audio.language {
            fields.push(("language", language.as_str()));
        }
        let body = multipart(&boundary, &fields, audio);
        let mut request = self
            .http
            .post(&self.url)
            .timeout(self.timeout)
            .header(
                reqwest::header::CONTENT_TYPE,
                format!("multipart/form-data; boundary={boundary}"),
            )
            .body(body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request
            .send()
            .await
            .map_err(|e| TranscribeError(format!("request: {e}")))?;
        let status = response.status();
        if !status.is_success() {
            let body = crate::fetch::read_limited(response, 64 * 1024)
                .await
                .unwrap_or_default();
            let text: String = String::from_utf8_lossy(&body).chars().take(300).collect();
            let text = match &self.api_key {
                Some(key) if !key.is_empty() => text.replace(key.as_str(), "<redacted>"),
                _ => text,
            };
            return Err(TranscribeError(format!("status {status}: {text}")));
        }
        #[derive(Deserialize)]
        struct Transcript {
            text: String,
        }
        let body = crate::fetch::read_limited(response, 4 << 20)
            .await
            .map_err(|e| TranscribeError(format!("malformed answer: {e}")))?;
        let t: Transcript = serde_json::from_slice(&body)
            .map_err(|e| TranscribeError(format!("malformed answer: {e}")))?;
        Ok(t.text.trim().to_string())
    }
}

/// The spec's languages, with their ISO-639-1 code for the provider.
pub const LANGUAGES: &[(&str, &str)] = &[
    ("en-US", "en"),
    ("en-GB", "en"),
    ("es-ES", "es"),
    ("fr-FR", "fr"),
    ("de-DE", "de"),
    ("it-IT", "it"),
    ("pt-BR", "pt"),
    ("ja-JP", "ja"),
    ("ko-KR", "ko"),
    ("zh-CN", "zh"),
];

/// The spec's audio formats: (sniffed MIME type, stored type, extension).
const FORMATS: &[(&str, &str, &str)] = &[
    ("audio/mpeg", "audio/mpeg", "mp3"),
    ("audio/x-wav", "audio/wav", "wav"),
    ("audio/m4a", "audio/mp4", "m4a"),
    ("audio/ogg", "audio/ogg", "ogg"),
    ("audio/x-flac", "audio/flac", "flac"),
    ("video/webm", "audio/webm", "webm"),
];

/// The audio format of `bytes`, decided by their content: (MIME type,
/// extension), or `None` when it is not one of MP3, WAV, M4A, OGG, FLAC,
/// WebM.
pub fn sniff_audio(bytes: &[u8]) -> Option<(&'static str, &'static str)> {
    let kind = infer::get(bytes)?;
    FORMATS
        .iter()
        .find(|(sniffed, _, _)| *sniffed == kind.mime_type())
        .map(|(_, stored, ext)| (*stored, *ext))
}

/// Whether a declared `content_type` names one of the accepted formats.
pub fn declared_audio(content_type: &str) -> bool {
    let t = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    matches!(
        t.as_str(),
        "audio/mpeg"
            | "audio/mp3"
            | "audio/wav"
            | "audio/x-wav"
            | "audio/wave"
            | "audio/mp4"
            | "audio/m4a"
            | "audio/x-m4a"
            | "audio/ogg"
            | "audio/flac"
            | "audio/x-flac"
            | "audio/webm"
            | "video/webm"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audio_is_sniffed() {
        let wav = b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00";
        assert_eq!(sniff_audio(wav), Some(("audio/wav", "wav")));
        assert_eq!(
            sniff_audio(b"fLaC\x00\x00\x00\x22"),
            Some(("audio/flac", "flac"))
        );
        assert_eq!(sniff_audio(b"%PDF-1.7\n"), None);
        assert_eq!(sniff_audio(b"hello"), None);
        assert!(declared_audio("audio/mpeg"));
        assert!(!declared_audio("text/plain"));
    }
}
