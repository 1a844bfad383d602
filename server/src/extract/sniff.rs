//! What a file is, decided by its content: the upload allow-list and
//! the sniffing that checks a file against it (magic numbers through
//! `infer`; plain text, Markdown, CSV and SVG by their bytes and name).

use crate::error::Error;

/// The accepted types: (sniffed MIME type, stored content type).
const ALLOWED: &[(&str, &str)] = &[
    ("application/pdf", "application/pdf"),
    (
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ),
    (
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ),
    ("image/jpeg", "image/jpeg"),
    ("image/png", "image/png"),
    ("image/gif", "image/gif"),
    ("image/webp", "image/webp"),
    ("audio/mpeg", "audio/mpeg"),
    ("audio/x-wav", "audio/wav"),
    ("audio/m4a", "audio/mp4"),
    ("audio/ogg", "audio/ogg"),
    ("audio/x-flac", "audio/flac"),
    ("video/mp4", "video/mp4"),
    ("video/webm", "video/webm"),
    ("video/quicktime", "video/quicktime"),
    ("video/x-msvideo", "video/x-msvideo"),
];

fn unsupported() -> Error {
    Error::UnsupportedType {
        code: "unsupported_file_type",
        message: "allowed: PDF, TXT, DOCX, XLSX, CSV, MD, JPG, PNG, GIF, WebP, SVG, MP3, WAV, \
                  M4A, OGG, FLAC, MP4, WebM, MOV, AVI"
            .to_string(),
    }
}

/// Decides the content type from the first bytes (and, for plain text,
/// which cannot be told apart by content, the file name's extension).
pub fn sniff(head: &[u8], complete: bool, filename: &str) -> Result<&'static str, Error> {
    if let Some(kind) = infer::get(head) {
        return ALLOWED
            .iter()
            .find(|(sniffed, _)| *sniffed == kind.mime_type())
            .map(|(_, stored)| *stored)
            .ok_or_else(unsupported);
    }
    // Text: valid UTF-8 (a multi-byte character may be cut at the end of
    // an incomplete head) without NUL or other binary control bytes.
    let text = match std::str::from_utf8(head) {
        Ok(t) => t,
        Err(e) if !complete && e.error_len().is_none() => {
            std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or_default()
        }
        Err(_) => return Err(unsupported()),
    };
    if text
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t' | '\u{c}'))
    {
        return Err(unsupported());
    }
    let start = text.trim_start_matches('\u{feff}').trim_start();
    let lower_start: String = start.chars().take(512).collect::<String>().to_lowercase();
    if lower_start.starts_with("<svg")
        || (lower_start.starts_with("<?xml") && lower_start.contains("<svg"))
    {
        return Ok("image/svg+xml");
    }
    let ext = filename
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    Ok(match ext.as_str() {
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        _ => "text/plain",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffing_decides_by_content() {
        assert_eq!(
            sniff(b"%PDF-1.7\n...", true, "x.txt").unwrap(),
            "application/pdf"
        );
        assert_eq!(
            sniff(b"# Title\n", true, "notes.md").unwrap(),
            "text/markdown"
        );
        assert_eq!(sniff(b"a,b\n1,2\n", true, "t.CSV").unwrap(), "text/csv");
        assert_eq!(sniff(b"hello", true, "x.pdf").unwrap(), "text/plain");
        assert_eq!(
            sniff(b"<svg xmlns='x'/>", true, "a").unwrap(),
            "image/svg+xml"
        );
        assert!(sniff(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0", true, "a.txt").is_err());
        assert!(sniff(b"MZ\x90\0\x03\0\0\0", true, "a.txt").is_err());
        assert!(sniff(&[0xff, 0x00, 0x12], true, "a.txt").is_err());
    }
}
