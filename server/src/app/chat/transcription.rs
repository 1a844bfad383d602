//! Speech to text for the chat composer.

use crate::authz::OrgAccess;
use crate::context::ServerContext;
use crate::error::Error;

// ---- transcription ----

fn bad_audio(code: &'static str, message: impl Into<String>) -> Error {
    Error::invalid(code, message)
}

/// The audio of a transcription request: the `file` part of a multipart
/// body, or the raw body.
async fn audio_bytes(
    content_type: Option<&str>,
    declared: Option<&str>,
    body: &[u8],
) -> Result<bytes::Bytes, Error> {
    if let Some(ct) = content_type
        && ct.to_ascii_lowercase().starts_with("multipart/form-data")
    {
        let boundary = multer::parse_boundary(ct)
            .map_err(|_| bad_audio("invalid_audio", "the multipart body has no boundary"))?;
        let data = bytes::Bytes::copy_from_slice(body);
        let stream = futures::stream::once(async move { Ok::<_, std::io::Error>(data) });
        let mut form = multer::Multipart::new(stream, boundary);
        while let Some(field) = form
            .next_field()
            .await
            .map_err(|e| bad_audio("invalid_audio", format!("malformed multipart body: {e}")))?
        {
            if field.name() == Some("file") {
                return field.bytes().await.map_err(|e| {
                    bad_audio("invalid_audio", format!("malformed multipart body: {e}"))
                });
            }
        }
        return Err(bad_audio(
            "invalid_audio",
            "the form has no part named `file`",
        ));
    }
    match declared {
        None => Err(bad_audio(
            "unsupported_audio_format",
            "send multipart/form-data with a `file` part, or raw audio with the content_type \
             parameter",
        )),
        Some(t) if !crate::transcribe::declared_audio(t) => Err(bad_audio(
            "unsupported_audio_format",
            "audio formats: MP3, WAV, M4A, OGG, FLAC, WebM",
        )),
        Some(_) => Ok(bytes::Bytes::copy_from_slice(body)),
    }
}

pub async fn transcribe(
    cx: &ServerContext,
    access: &OrgAccess,
    query: workspace_api::chat::TranscribeQuery,
    content_type: Option<String>,
    body: &[u8],
) -> Result<workspace_api::chat::TranscribeResponse, Error> {
    let Some(transcriber) = &cx.transcriber else {
        return Err(Error::NotConfigured {
            code: "transcription_unavailable",
            message: "no transcription service is configured: set `[transcription] base_url` \
                      (or WORKSPACE_TRANSCRIPTION_URL) to an OpenAI-compatible \
                      /audio/transcriptions service (OpenAI, Groq, a whisper.cpp or \
                      faster-whisper server) and its key (`api_key_env` or \
                      WORKSPACE_TRANSCRIPTION_API_KEY)"
                .into(),
        });
    };
    let language = match &query.language {
        None => None,
        Some(l) => Some(
            crate::transcribe::LANGUAGES
                .iter()
                .find(|(code, _)| code == l)
                .map(|(_, iso)| iso.to_string())
                .ok_or_else(|| {
                    bad_audio(
                        "unsupported_language",
                        "languages: en-US, en-GB, es-ES, fr-FR, de-DE, it-IT, pt-BR, ja-JP, \
                         ko-KR, zh-CN",
                    )
                })?,
        ),
    };
    let bytes = audio_bytes(content_type.as_deref(), query.content_type.as_deref(), body).await?;
    if bytes.is_empty() {
        return Err(bad_audio("invalid_audio", "the audio is empty"));
    }
    let max = cx.config.transcription.max_bytes;
    if bytes.len() > max {
        return Err(Error::TooLarge {
            code: "file_too_large",
            message: format!("audio is at most {max} bytes"),
        });
    }
    let (sniffed, ext) = crate::transcribe::sniff_audio(&bytes).ok_or_else(|| {
        bad_audio(
            "unsupported_audio_format",
            "audio formats: MP3, WAV, M4A, OGG, FLAC, WebM (decided by the content)",
        )
    })?;
    let audio = crate::transcribe::Audio {
        bytes,
        content_type: sniffed,
        filename: format!("audio.{ext}"),
        language,
    };
    let started = std::time::Instant::now();
    let transcribed = transcriber.transcribe(&audio).await;
    // Recorded without tokens in (audio) and the text's estimate out.
    let (out, outcome) = match &transcribed {
        Ok(text) => (crate::usage::estimate_tokens(text.len()), "complete"),
        Err(_) => (0, "transcription_failed"),
    };
    cx.usage.record_call(
        crate::app::usage::member(access),
        "transcription",
        &cx.config.transcription.model,
        "openai",
        (0, out, false),
        started,
        outcome,
    );
    let text = transcribed.map_err(|e| {
        slog::warn!(access.log(), "transcription failed"; "error" => %e);
        Error::NotConfigured {
            code: "transcription_failed",
            message: "the transcription service failed; try again later".into(),
        }
    })?;
    Ok(workspace_api::chat::TranscribeResponse {
        text,
        language: query.language,
    })
}
