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

/// Replaces the values of [`SECRET_PARAMS`] in a URI or query string.
pub fn redact_query(value: &str) -> Cow<'_, str> {
    let Some(q) = value.find('?') else {
        return Cow::Borrowed(value);
    };
    let (head, query) = value.split_at(q + 1);
    let (query, fragment) = match query.find('#') {
        Some(f) => query.split_at(f),
        None => (query, ""),
    };
    let mut changed = false;
    let parts: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, _)) if SECRET_PARAMS.contains(&k) => {
                changed = true;
                format!("{k}=[redacted]")
            }
            _ => pair.to_string(),
        })
        .collect();
    if !changed {
        return Cow::Borrowed(value);
    }
    Cow::Owned(format!("{head}{}{fragment}", parts.join("&")))
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
}
