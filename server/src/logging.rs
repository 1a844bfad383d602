//! Log redaction: credentials that the API carries in URIs must not reach
//! the logs, but dropshot logs every request's URI. [`redacting`] wraps the
//! server's logger so that in any logged value
//! - the values of credential query parameters ([`SECRET_PARAMS`]:
//!   invitation tokens, OAuth callback `code` and `state`, signed download
//!   links' `signature`, WebSocket `ticket`s, ...) and
//! - credential path segments ([`SECRET_PATH_PREFIXES`]: the MCP gateway's
//!   `/api/mcp/gateway/{secret}`, a chat share page's `/share/wsshare_…`)
//!
//! are replaced by `[redacted]`.
//!
//! The same layer escapes control characters ([`escape_controls`]) in every
//! message and string value, whatever its source (upstream bodies and
//! headers, file names, user input): a value cannot end a log line and
//! forge the next one, nor carry terminal escapes, NUL or bidirectional
//! overrides into the log.

use slog::{Drain, KV, Key, OwnedKVList, Record, Serializer};
use std::borrow::Cow;
use std::fmt;

/// Query parameters whose values never reach the logs.
const SECRET_PARAMS: &[&str] = &[
    "token",
    "invite_token",
    "access_token",
    "refresh_token",
    "code",
    "state",
    "signature",
    "ticket",
    "secret",
    "client_secret",
    "api_key",
    "password",
];

/// Paths whose next segment is a credential (compared case-insensitively).
const SECRET_PATH_PREFIXES: &[&str] = &["/api/mcp/gateway/", "/share/wsshare_"];

/// Replaces the segment after each [`SECRET_PATH_PREFIXES`] prefix (up to
/// the next `/`, `?`, `#`, quote or white space) with `[redacted]`, in the
/// order they appear. Every value of every log line passes here: a value
/// without `/` (most: ids, numbers, names) is decided by one byte scan,
/// and nothing is copied or lower-cased unless a prefix is found.
fn redact_path(value: &str) -> Cow<'_, str> {
    let bytes = value.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut from = 0;
    while let Some(slash) = bytes[from..].iter().position(|&b| b == b'/') {
        let at = from + slash;
        from = at + 1;
        // The prefixes are ASCII: a match ends on a character boundary.
        let Some(prefix) = SECRET_PATH_PREFIXES.iter().find(|p| {
            bytes
                .get(at..at + p.len())
                .is_some_and(|b| b.eq_ignore_ascii_case(p.as_bytes()))
        }) else {
            continue;
        };
        let start = at + prefix.len();
        let end = value[start..]
            .find(|c: char| matches!(c, '/' | '?' | '#' | '"' | '\'') || c.is_whitespace())
            .map_or(value.len(), |e| start + e);
        if end == start {
            continue;
        }
        let buf = out.get_or_insert_with(String::new);
        buf.push_str(&value[copied..start]);
        buf.push_str("[redacted]");
        copied = end;
        from = end;
    }
    match out {
        Some(mut buf) => {
            buf.push_str(&value[copied..]);
            Cow::Owned(buf)
        }
        None => Cow::Borrowed(value),
    }
}

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

/// Redacts the credentials of a logged value: [`redact_path`], then the
/// values of [`SECRET_PARAMS`] in its query string: names compared
/// case-insensitively and percent-decoded, pairs split on `&` (and on an
/// encoded `%26`), the query starting at `?` or at an encoded `%3F`.
pub fn redact_query(value: &str) -> Cow<'_, str> {
    match redact_path(value) {
        Cow::Borrowed(value) => redact_query_string(value),
        Cow::Owned(path_redacted) => Cow::Owned(redact_query_string(&path_redacted).into_owned()),
    }
}

fn redact_query_string(value: &str) -> Cow<'_, str> {
    let encoded_question_mark = value
        .as_bytes()
        .windows(3)
        .position(|w| w.eq_ignore_ascii_case(b"%3f"));
    let start = match (value.find('?'), encoded_question_mark) {
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
    // The usual query (`?org_id=...&limit=...`): ASCII, nothing encoded,
    // no `;`, no secret's name. Decided without allocating.
    if query.is_ascii()
        && !query.contains(['%', ';'])
        && query.split('&').all(|pair| {
            let name = pair.split_once('=').map_or(pair, |(name, _)| name).trim();
            !SECRET_PARAMS.iter().any(|s| name.eq_ignore_ascii_case(s))
        })
    {
        return Cow::Borrowed(value);
    }
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

/// Whether `c` is written escaped: C0 and C1 controls, DEL, the Unicode
/// line and paragraph separators and the bidirectional controls.
fn is_escaped(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{061c}'
        )
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// `text` with control characters as visible escapes: `\n`, `\r`, `\t`,
/// `\0`, `\e` (ESC) and `\u{..}` for the others (see [`is_escaped`]).
/// Borrowed when there is nothing to escape.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_escaped) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\0' => out.push_str("\\0"),
            '\u{1b}' => out.push_str("\\e"),
            c if is_escaped(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A logged string as it is written: redacted ([`redact_query`]), then
/// escaped ([`escape_controls`]).
fn clean(value: &str) -> Cow<'_, str> {
    match redact_query(value) {
        Cow::Borrowed(v) => escape_controls(v),
        Cow::Owned(redacted) => Cow::Owned(escape_controls(&redacted).into_owned()),
    }
}

struct Redact {
    inner: slog::Logger,
}

/// A serializer that redacts values on their way to another serializer:
/// nothing is collected or allocated for values without a query string.
struct RedactingSerializer<'a> {
    inner: &'a mut dyn Serializer,
}

impl Serializer for RedactingSerializer<'_> {
    fn emit_arguments(&mut self, key: Key, val: &fmt::Arguments<'_>) -> slog::Result {
        // Plain text without arguments (most keys' values are formatted
        // lazily, so this is the usual path only for literals).
        if let Some(text) = val.as_str() {
            return match clean(text) {
                Cow::Borrowed(_) => self.inner.emit_arguments(key, val),
                Cow::Owned(cleaned) => self.inner.emit_str(key, &cleaned),
            };
        }
        let text = val.to_string();
        match clean(&text) {
            Cow::Borrowed(_) => self.inner.emit_str(key, &text),
            Cow::Owned(cleaned) => self.inner.emit_str(key, &cleaned),
        }
    }

    // Values that cannot hold a query string pass through untouched.
    fn emit_usize(&mut self, key: Key, val: usize) -> slog::Result {
        self.inner.emit_usize(key, val)
    }
    fn emit_isize(&mut self, key: Key, val: isize) -> slog::Result {
        self.inner.emit_isize(key, val)
    }
    fn emit_bool(&mut self, key: Key, val: bool) -> slog::Result {
        self.inner.emit_bool(key, val)
    }
    fn emit_u8(&mut self, key: Key, val: u8) -> slog::Result {
        self.inner.emit_u8(key, val)
    }
    fn emit_u16(&mut self, key: Key, val: u16) -> slog::Result {
        self.inner.emit_u16(key, val)
    }
    fn emit_u32(&mut self, key: Key, val: u32) -> slog::Result {
        self.inner.emit_u32(key, val)
    }
    fn emit_u64(&mut self, key: Key, val: u64) -> slog::Result {
        self.inner.emit_u64(key, val)
    }
    fn emit_i8(&mut self, key: Key, val: i8) -> slog::Result {
        self.inner.emit_i8(key, val)
    }
    fn emit_i16(&mut self, key: Key, val: i16) -> slog::Result {
        self.inner.emit_i16(key, val)
    }
    fn emit_i32(&mut self, key: Key, val: i32) -> slog::Result {
        self.inner.emit_i32(key, val)
    }
    fn emit_i64(&mut self, key: Key, val: i64) -> slog::Result {
        self.inner.emit_i64(key, val)
    }
    fn emit_f64(&mut self, key: Key, val: f64) -> slog::Result {
        self.inner.emit_f64(key, val)
    }
    fn emit_unit(&mut self, key: Key) -> slog::Result {
        self.inner.emit_unit(key)
    }
    fn emit_none(&mut self, key: Key) -> slog::Result {
        self.inner.emit_none(key)
    }
    fn emit_str(&mut self, key: Key, val: &str) -> slog::Result {
        match clean(val) {
            Cow::Borrowed(v) => self.inner.emit_str(key, v),
            Cow::Owned(cleaned) => self.inner.emit_str(key, &cleaned),
        }
    }
    fn emit_char(&mut self, key: Key, val: char) -> slog::Result {
        if is_escaped(val) {
            self.inner
                .emit_str(key, &escape_controls(val.encode_utf8(&mut [0; 4])))
        } else {
            self.inner.emit_char(key, val)
        }
    }
}

/// Key-values whose serialization goes through [`RedactingSerializer`].
struct RedactedKV<T>(T);

impl<T: KV> KV for RedactedKV<T> {
    fn serialize(&self, record: &Record<'_>, serializer: &mut dyn Serializer) -> slog::Result {
        self.0
            .serialize(record, &mut RedactingSerializer { inner: serializer })
    }
}

impl Drain for Redact {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &Record<'_>, values: &OwnedKVList) -> Result<(), slog::Never> {
        // The logger's values (where dropshot puts the URI) and the
        // record's own, both redacted lazily when the inner drain
        // serializes them; cloning an OwnedKVList is an Arc clone.
        let values = OwnedKVList::from(slog::OwnedKV(RedactedKV(values.clone())));
        let kv = RedactedKV(record.kv());
        let statics = slog::RecordStatic {
            location: record.location(),
            tag: record.tag(),
            level: record.level(),
        };
        // The message escaped too: formatted only when it is not a plain
        // literal without control characters (the usual case).
        let literal = record.msg().as_str().filter(|m| !m.chars().any(is_escaped));
        if literal.is_some() {
            let record = Record::new(&statics, record.msg(), slog::BorrowedKV(&kv));
            return Drain::log(&self.inner, &record, &values);
        }
        let text = record.msg().to_string();
        let message = escape_controls(&text);
        Drain::log(
            &self.inner,
            &Record::new(&statics, &format_args!("{message}"), slog::BorrowedKV(&kv)),
            &values,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::redact_query;
    use std::borrow::Cow;

    #[test]
    fn credentials_in_paths_and_links_are_redacted() {
        let gateway = "GET /api/mcp/gateway/gw_5ecret-Value_1 HTTP/1.1";
        assert_eq!(
            redact_query(gateway),
            "GET /api/mcp/gateway/[redacted] HTTP/1.1"
        );
        assert_eq!(
            redact_query("http://h/API/MCP/Gateway/abc?x=1&ticket=t1"),
            "http://h/API/MCP/Gateway/[redacted]?x=1&ticket=[redacted]"
        );
        assert_eq!(
            redact_query("/api/files/download?file_id=1&expires=2&signature=ab12"),
            "/api/files/download?file_id=1&expires=2&signature=[redacted]"
        );
        assert_eq!(redact_query("/api/mcp/gateway/"), "/api/mcp/gateway/");
        // A chat's share page; the owner's operations keep their names.
        assert_eq!(
            redact_query("GET /share/wsshare_AbC-d_e HTTP/1.1"),
            "GET /share/wsshare_[redacted] HTTP/1.1"
        );
        assert!(matches!(
            redact_query("/api/chat/share/revoke?org_id=1&share_id=2"),
            Cow::Borrowed(_)
        ));
        assert!(matches!(
            redact_query("/api/mcp/list_servers?org_id=1"),
            Cow::Borrowed(_)
        ));
        // Both kinds in one value, whichever comes first (a share link
        // before a gateway's was once left whole), and one repeated.
        assert_eq!(
            redact_query("/share/wsshare_S1 then /API/mcp/gateway/g2 and /share/WSSHARE_s3/x"),
            "/share/wsshare_[redacted] then /API/mcp/gateway/[redacted] and /share/WSSHARE_[redacted]/x"
        );
        // Non-ASCII around a prefix.
        assert_eq!(
            redact_query("é/api/mcp/gateway/ü€\tnext"),
            "é/api/mcp/gateway/[redacted]\tnext"
        );
        assert!(matches!(redact_query("no slash at all"), Cow::Borrowed(_)));
    }

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
    fn the_drain_redacts_logger_and_record_values() {
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Capture(Arc<Mutex<Vec<String>>>);
        struct Collect<'a>(&'a mut Vec<String>);
        impl slog::Serializer for Collect<'_> {
            fn emit_arguments(
                &mut self,
                key: slog::Key,
                val: &std::fmt::Arguments<'_>,
            ) -> slog::Result {
                self.0.push(format!("{key}={val}"));
                Ok(())
            }
        }
        impl slog::Drain for Capture {
            type Ok = ();
            type Err = slog::Never;
            fn log(
                &self,
                record: &slog::Record<'_>,
                values: &slog::OwnedKVList,
            ) -> Result<(), slog::Never> {
                use slog::KV;
                let mut out = Vec::new();
                let _ = record.kv().serialize(record, &mut Collect(&mut out));
                let _ = values.serialize(record, &mut Collect(&mut out));
                self.0.lock().unwrap().extend(out);
                Ok(())
            }
        }
        let capture = Capture::default();
        let inner = slog::Logger::root(capture.clone(), slog::o!());
        let log = super::redacting(inner, slog::Level::Info)
            .new(slog::o!("uri" => "/api/invitations/validate?token=SECRET", "n" => 3u32));
        slog::info!(log, "request completed"; "path" => "/x?code=SECRET2", "status" => 200u16);
        slog::debug!(log, "dropped below the level"; "uri" => "/y?token=SECRET3");
        let lines = capture.0.lock().unwrap().clone();
        let joined = lines.join(" ");
        assert!(!joined.contains("SECRET"), "{joined}");
        assert!(joined.contains("token=[redacted]"), "{joined}");
        assert!(joined.contains("code=[redacted]"), "{joined}");
        assert!(joined.contains("status=200"), "{joined}");
        assert!(joined.contains("n=3"), "{joined}");
        assert_eq!(lines.len(), 4, "{joined}");
    }

    #[test]
    fn control_characters_are_escaped_in_messages_and_values() {
        use super::escape_controls;
        assert_eq!(
            escape_controls("a\nb\r\nc\0d\u{1b}[31me\tf\u{7f}\u{202e}g\u{85}"),
            "a\\nb\\r\\nc\\0d\\e[31me\\tf\\u{7f}\\u{202e}g\\u{85}"
        );
        assert!(matches!(escape_controls("plain é ✓"), Cow::Borrowed(_)));

        // Through the drain: every message, logger value and record value
        // comes out without a raw control character.
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Capture(Arc<Mutex<Vec<String>>>);
        struct Collect<'a>(&'a mut Vec<String>);
        impl slog::Serializer for Collect<'_> {
            fn emit_arguments(
                &mut self,
                key: slog::Key,
                val: &std::fmt::Arguments<'_>,
            ) -> slog::Result {
                self.0.push(format!("{key}={val}"));
                Ok(())
            }
        }
        impl slog::Drain for Capture {
            type Ok = ();
            type Err = slog::Never;
            fn log(
                &self,
                record: &slog::Record<'_>,
                values: &slog::OwnedKVList,
            ) -> Result<(), slog::Never> {
                use slog::KV;
                let mut out = vec![format!("msg={}", record.msg())];
                let _ = record.kv().serialize(record, &mut Collect(&mut out));
                let _ = values.serialize(record, &mut Collect(&mut out));
                self.0.lock().unwrap().extend(out);
                Ok(())
            }
        }
        let capture = Capture::default();
        let inner = slog::Logger::root(capture.clone(), slog::o!());
        let forged = "x\n[2026-01-01] INFO admin logged in\r\u{0}\u{1b}[2J";
        let log = super::redacting(inner, slog::Level::Info)
            .new(slog::o!("upstream" => forged.to_string()));
        slog::info!(log, "answer: {}", forged; "body" => forged, "display" => %forged,
            "debug" => ?forged, "c" => '\n');
        let lines = capture.0.lock().unwrap().clone();
        assert_eq!(lines.len(), 6, "{lines:?}");
        for line in &lines {
            assert!(!line.chars().any(super::is_escaped), "{line:?}");
        }
        assert!(
            lines[0].contains("x\\n[2026-01-01] INFO admin logged in\\r\\0\\e[2J"),
            "{lines:?}"
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

/// Where the server binary's log lines go: a buffer in memory that a
/// background thread writes to stderr every [`FLUSH_EVERY`] (and when the
/// returned [`LogFlusher`] is dropped). A line costs no system call and
/// wakes no thread on the request path: at thousands of requests a second,
/// a `write(2)` and a cross-thread wake-up per access-log line were a fifth
/// of the server's CPU. Lines are formatted where they are logged, under a
/// short lock. If stderr stops draining and [`MAX_PENDING`] bytes are
/// waiting, further lines are dropped and counted, and a note says how many.
/// Timestamps are in UTC.
pub fn stderr_logger() -> (slog::Logger, LogFlusher) {
    let shared = std::sync::Arc::new(Pending::default());
    let writer = BatchWriter {
        shared: shared.clone(),
    };
    // Each record is formatted into its own buffer without a lock (the
    // sync decorator), then handed to the writer under its lock; UTC
    // timestamps need no time-zone lookup.
    let drain = slog_term::FullFormat::new(slog_term::PlainSyncDecorator::new(writer))
        .use_utc_timestamp()
        .build()
        .fuse();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let thread = {
        let shared = shared.clone();
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(FLUSH_EVERY);
                    shared.write_out();
                }
            })
            .ok()
    };
    (
        slog::Logger::root(drain, slog::o!()),
        LogFlusher {
            shared,
            stop,
            thread,
        },
    )
}

/// How often the log buffer is written out.
pub const FLUSH_EVERY: std::time::Duration = std::time::Duration::from_millis(20);
/// Bytes of log lines that may wait before new lines are dropped.
pub const MAX_PENDING: usize = 8 << 20;

#[derive(Default)]
struct Pending {
    buf: std::sync::Mutex<Vec<u8>>,
    dropped: std::sync::atomic::AtomicU64,
}

impl Pending {
    fn write_out(&self) {
        use std::io::Write;
        let out = {
            let mut buf = self.buf.lock().unwrap_or_else(|e| e.into_inner());
            if buf.is_empty() {
                return;
            }
            std::mem::take(&mut *buf)
        };
        let mut stderr = std::io::stderr().lock();
        let _ = stderr.write_all(&out);
        let dropped = self.dropped.swap(0, std::sync::atomic::Ordering::Relaxed);
        if dropped > 0 {
            let _ = writeln!(
                stderr,
                "[{dropped} log lines dropped: stderr was not draining]"
            );
        }
        let _ = stderr.flush();
    }
}

/// Writes the remaining log lines when dropped (keep it alive in `main`).
pub struct LogFlusher {
    shared: std::sync::Arc<Pending>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for LogFlusher {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.shared.write_out();
    }
}

/// The formatter's output: the sync decorator buffers each record and
/// writes it whole, so one record is one `write`, appended to the shared
/// buffer under its lock (or dropped and counted when the buffer is full).
struct BatchWriter {
    shared: std::sync::Arc<Pending>,
}

impl std::io::Write for BatchWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let mut buf = self.shared.buf.lock().unwrap_or_else(|e| e.into_inner());
        if buf.len() + data.len() > MAX_PENDING {
            self.shared
                .dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        } else {
            buf.extend_from_slice(data);
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
