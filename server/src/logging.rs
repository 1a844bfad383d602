//! Log redaction: secrets that the spec puts in query strings (invitation
//! tokens in `GET /api/invitations/validate?token=…`) must not reach the
//! logs, but dropshot logs every request's URI. [`redacting`] wraps the
//! server's logger so that the values of sensitive query parameters in any
//! logged value are replaced by `[redacted]`.

use slog::{Drain, KV, Key, OwnedKVList, Record, Serializer};
use std::borrow::Cow;
use std::fmt;

/// Query parameters whose values never reach the logs.
const SECRET_PARAMS: &[&str] = &["token", "invite_token", "access_token", "code", "state"];

/// Wraps `log` so that secrets in logged values are redacted. Records
/// below `level` are dropped first, before any of their values is
/// formatted (redaction formats every value of a record it passes on).
pub fn redacting(log: slog::Logger, level: slog::Level) -> slog::Logger {
    slog::Logger::root(
        slog::LevelFilter::new(Redact { inner: log }, level).fuse(),
        slog::o!(),
    )
}

/// Percent-decodes (lossily) and lower-cases, for comparisons only.
fn decoded_lower(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .to_lowercase()
}

/// Whether a query parameter's name, as it may be garbled by a mangled
/// link, names a secret: compared case-insensitively (`Token`), after
/// percent-decoding (`%74oken`) and after the last `;` (`&amp;token`
/// splits into `amp;token`).
fn is_secret_name(raw: &str) -> bool {
    let name = decoded_lower(raw);
    let name = name.rsplit(';').next().unwrap_or_default().trim();
    SECRET_PARAMS.contains(&name)
}

/// Redacts one `name=value` pair of a query string, or `None` to keep it.
fn redact_pair(pair: &str) -> Option<String> {
    if let Some((name, _)) = pair.split_once('=') {
        return is_secret_name(name).then(|| format!("{name}=[redacted]"));
    }
    // An encoded `=` (`token%3Dabc`): the name is what precedes it.
    let decoded = decoded_lower(pair);
    let (name, _) = decoded.split_once('=')?;
    let name = name.rsplit(';').next().unwrap_or_default().trim();
    SECRET_PARAMS
        .contains(&name)
        .then(|| "[redacted]".to_string())
}

/// Replaces the values of [`SECRET_PARAMS`] in a URI or query string:
/// names compared case-insensitively and percent-decoded, pairs split on
/// `&` (and on an encoded `%26`), the query starting at `?` or at an
/// encoded `%3F`.
pub fn redact_query(value: &str) -> Cow<'_, str> {
    let lower = value.to_ascii_lowercase();
    let start = match (value.find('?'), lower.find("%3f")) {
        (Some(q), Some(e)) if e < q => e + 3,
        (Some(q), _) => q + 1,
        (None, Some(e)) => e + 3,
        (None, None) => return Cow::Borrowed(value),
    };
    let (head, query) = value.split_at(start);
    let (query, fragment) = match query.find('#') {
        Some(f) => query.split_at(f),
        None => (query, ""),
    };
    let mut changed = false;
    let parts: Vec<String> = query
        .split('&')
        .map(|pair| {
            // `%26` is an encoded `&`: redact inside it too.
            let pieces: Vec<String> = split_encoded_amp(pair)
                .into_iter()
                .map(|piece| match redact_pair(piece) {
                    Some(r) => {
                        changed = true;
                        r
                    }
                    None => piece.to_string(),
                })
                .collect();
            pieces.join("%26")
        })
        .collect();
    if !changed {
        return Cow::Borrowed(value);
    }
    Cow::Owned(format!("{head}{}{fragment}", parts.join("&")))
}

/// Splits on `%26` in any case.
fn split_encoded_amp(pair: &str) -> Vec<&str> {
    let lower = pair.to_ascii_lowercase();
    let mut pieces = Vec::new();
    let mut last = 0;
    for (i, _) in lower.match_indices("%26") {
        pieces.push(&pair[last..i]);
        last = i + 3;
    }
    pieces.push(&pair[last..]);
    pieces
}

struct Redact {
    inner: slog::Logger,
}

/// The logger's key-value pairs, with redacted values.
struct Collected(Vec<(Key, String)>);

impl Serializer for Collected {
    fn emit_arguments(&mut self, key: Key, val: &fmt::Arguments<'_>) -> slog::Result {
        let text = val.to_string();
        self.0.push((key, redact_query(&text).into_owned()));
        Ok(())
    }
}

impl KV for Collected {
    fn serialize(&self, _record: &Record<'_>, serializer: &mut dyn Serializer) -> slog::Result {
        for (key, value) in &self.0 {
            serializer.emit_str(key.clone(), value)?;
        }
        Ok(())
    }
}

impl Drain for Redact {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &Record<'_>, values: &OwnedKVList) -> Result<(), slog::Never> {
        let mut collected = Collected(Vec::new());
        let _ = values.serialize(record, &mut collected);
        let values = OwnedKVList::from(slog::OwnedKV(collected));
        Drain::log(&self.inner, record, &values)
    }
}

#[cfg(test)]
mod tests {
    use super::redact_query;

    #[test]
    fn secrets_in_query_strings_are_redacted() {
        assert_eq!(
            redact_query("/api/invitations/validate?token=abc123"),
            "/api/invitations/validate?token=[redacted]"
        );
        assert_eq!(
            redact_query("/x?a=1&token=s&b=2#f"),
            "/x?a=1&token=[redacted]&b=2#f"
        );
        assert_eq!(redact_query("/x?tokenish=1"), "/x?tokenish=1");
        assert_eq!(redact_query("/api/org/list"), "/api/org/list");
        assert_eq!(
            redact_query("/cb?code=c&state=s"),
            "/cb?code=[redacted]&state=[redacted]"
        );
    }

    #[test]
    fn mangled_links_are_redacted_too() {
        let secret = "s3cr3tT0ken";
        for uri in [
            "/api/invitations/validate?a=1&amp;token=s3cr3tT0ken",
            "/api/invitations/validate?Token=s3cr3tT0ken",
            "/api/invitations/validate?TOKEN=s3cr3tT0ken",
            "/api/invitations/validate?token%3Ds3cr3tT0ken",
            "/api/invitations/validate?token%3ds3cr3tT0ken&x=1",
            "/api/invitations/validate?%74oken=s3cr3tT0ken",
            "/api/invitations/validate%3Ftoken=s3cr3tT0ken",
            "/api/invitations/validate?x=1%26token%3Ds3cr3tT0ken",
            "/api/invitations/validate?x=1%26token=s3cr3tT0ken",
            "/api/auth/x?Invite_Token=s3cr3tT0ken",
        ] {
            let out = redact_query(uri);
            assert!(!out.contains(secret), "{uri} -> {out}");
            assert!(out.contains("[redacted]"), "{uri} -> {out}");
        }
        assert_eq!(
            redact_query("/x?tokens=1&mytoken=2"),
            "/x?tokens=1&mytoken=2"
        );
    }
}
