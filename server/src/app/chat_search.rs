//! Search across the caller's chats (issue #35): the rules of the query,
//! the opaque cursor, and the highlighted snippets. The matching and the
//! ranking are SQL ([`crate::db::datastore::chat_search`]).
//!
//! Snippets are HTML a frontend can insert as is: every character of the
//! text is escaped (`&`, `<`, `>`, `"`, `'`), and the only markup is
//! `<mark>`…`</mark>` around matches. Highlighting here is for the eye:
//! which chats match is decided by the database alone.

use crate::authz::OrgAccess;
use crate::context::ServerContext;
use crate::db::datastore::chat_search::{SearchKey, SearchQuery, SearchRow};
use crate::db::enums::{ChatRole, ChatStatus};
use crate::error::Error;
use base64::Engine;
use chrono::{DateTime, Utc};
use uuid::Uuid;
use workspace_api::chat::{ChatRole as ApiRole, ChatStatus as ApiStatus};
use workspace_api::chat_search::{
    ChatSearchPage, ChatSearchQuery, ChatSearchResult, HIGHLIGHT_CLOSE, HIGHLIGHT_OPEN,
    SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT, SEARCH_QUERY_MAX_CHARS,
};

/// The longest snippet, in characters of text (before escaping).
const SNIPPET_CHARS: usize = 200;
/// How much text a snippet shows before its first match.
const SNIPPET_LEAD: usize = 60;
/// At most this many words of the query are highlighted.
const MAX_NEEDLES: usize = 16;

/// A query, checked and taken apart.
#[derive(Debug, PartialEq)]
struct Parsed {
    /// The query trimmed: what "contains the query as typed" looks for.
    typed: String,
    /// The query for `websearch_to_tsquery`; empty when it has no word to
    /// look for (only exclusions or operators).
    words: String,
    /// What is highlighted: the typed query, then its words (without
    /// quotes, operators and excluded words).
    needles: Vec<String>,
}

fn invalid_query() -> Error {
    Error::invalid(
        "invalid_query",
        format!("q must be 1 to {SEARCH_QUERY_MAX_CHARS} characters, not blank"),
    )
}

fn parse(q: &str) -> Result<Parsed, Error> {
    if q.chars().count() > SEARCH_QUERY_MAX_CHARS || q.contains('\0') {
        return Err(invalid_query());
    }
    let typed = q.trim();
    if typed.is_empty() {
        return Err(invalid_query());
    }
    let mut needles = vec![typed.to_string()];
    let mut positive = false;
    for token in typed.split_whitespace() {
        if token.starts_with('-') || token.eq_ignore_ascii_case("or") {
            continue;
        }
        let word = token.trim_matches(|c: char| c == '"');
        if word.is_empty() {
            continue;
        }
        if word.chars().any(char::is_alphanumeric) {
            positive = true;
        }
        if needles.len() < MAX_NEEDLES && !needles.iter().any(|n| n == word) {
            needles.push(word.to_string());
        }
    }
    Ok(Parsed {
        typed: typed.to_string(),
        words: if positive {
            typed.to_string()
        } else {
            String::new()
        },
        needles,
    })
}

/// `text` as a `LIKE` pattern's literal part.
fn like_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | '%' | '_') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

// ---- the cursor ----

const CURSOR_VERSION: &str = "c1";

/// What a cursor is bound to: the query and its filters.
fn binding(typed: &str, status: Option<ApiStatus>, folder_id: Option<Uuid>) -> String {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    hasher.update(typed.as_bytes());
    hasher.update([0]);
    hasher.update(format!("{status:?}").as_bytes());
    hasher.update([0]);
    hasher.update(folder_id.map(|f| f.to_string()).unwrap_or_default());
    let digest = hasher.finalize();
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

fn encode_cursor(bound: &str, key: &SearchKey) -> String {
    let text = format!(
        "{CURSOR_VERSION}|{bound}|{}|{}|{}|{}",
        u8::from(key.title_hit),
        key.rank,
        key.updated_at.timestamp_micros(),
        key.chat_id
    );
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
}

fn invalid_cursor() -> Error {
    Error::invalid(
        "invalid_cursor",
        "cursor is not a next_cursor of this query (same q, status and folder_id)",
    )
}

fn decode_cursor(cursor: &str, bound: &str) -> Result<SearchKey, Error> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor.as_bytes())
        .map_err(|_| invalid_cursor())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid_cursor())?;
    let parts: Vec<&str> = text.split('|').collect();
    let [version, their_bound, title_hit, rank, micros, chat_id] = parts[..] else {
        return Err(invalid_cursor());
    };
    if version != CURSOR_VERSION || their_bound != bound {
        return Err(invalid_cursor());
    }
    let title_hit = match title_hit {
        "0" => false,
        "1" => true,
        _ => return Err(invalid_cursor()),
    };
    let updated_at = micros
        .parse::<i64>()
        .ok()
        .and_then(DateTime::<Utc>::from_timestamp_micros)
        .ok_or_else(invalid_cursor)?;
    Ok(SearchKey {
        title_hit,
        rank: rank.parse().map_err(|_| invalid_cursor())?,
        updated_at,
        chat_id: chat_id.parse().map_err(|_| invalid_cursor())?,
    })
}

// ---- snippets ----

/// One character folded for comparison (one for one, so positions hold).
fn fold_char(c: char) -> char {
    let mut lower = c.to_lowercase();
    match (lower.next(), lower.next()) {
        (Some(l), None) => l,
        _ => c,
    }
}

/// The ranges (in characters of `text`) where any needle occurs, longest
/// needle first at each position, without overlaps.
fn matches(text: &[char], needles: &[Vec<char>]) -> Vec<(usize, usize)> {
    let folded: Vec<char> = text.iter().map(|c| fold_char(*c)).collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < folded.len() {
        let hit = needles
            .iter()
            .filter(|n| !n.is_empty() && folded[i..].starts_with(n))
            .map(Vec::len)
            .max();
        match hit {
            Some(len) => {
                found.push((i, i + len));
                i += len;
            }
            None => i += 1,
        }
    }
    found
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        '"' => out.push_str("&quot;"),
        '\'' => out.push_str("&#39;"),
        c => out.push(c),
    }
}

/// `text` as escaped HTML with the needles' matches marked, cut to about
/// [`SNIPPET_CHARS`] characters around the first match. `cut_before` and
/// `cut_after` say that `text` is itself a piece of a longer text.
fn highlight(text: &str, needles: &[Vec<char>], cut_before: bool, cut_after: bool) -> String {
    let chars: Vec<char> = text.chars().collect();
    let found = matches(&chars, needles);
    let (start, end) = if chars.len() <= SNIPPET_CHARS {
        (0, chars.len())
    } else {
        let first = found.first().map_or(0, |m| m.0);
        let start = first
            .saturating_sub(SNIPPET_LEAD)
            .min(chars.len() - SNIPPET_CHARS);
        (start, start + SNIPPET_CHARS)
    };
    let mut out = String::with_capacity((end - start) * 2);
    if cut_before || start > 0 {
        out.push('…');
    }
    let mut marks = found.iter().peekable();
    let mut open_until: Option<usize> = None;
    let mut last_space = false;
    for (i, &c) in chars.iter().enumerate().take(end).skip(start) {
        if open_until == Some(i) {
            out.push_str(HIGHLIGHT_CLOSE);
            open_until = None;
        }
        while marks.peek().is_some_and(|m| m.1 <= i) {
            marks.next();
        }
        if open_until.is_none()
            && let Some(&&(from, to)) = marks.peek()
            && from <= i
        {
            out.push_str(HIGHLIGHT_OPEN);
            open_until = Some(to);
            marks.next();
        }
        // Line breaks and tabs read as spaces; runs of them as one; other
        // control characters are left out.
        if c.is_whitespace() {
            if !last_space {
                out.push(' ');
            }
            last_space = true;
            continue;
        }
        last_space = false;
        if c.is_control() {
            continue;
        }
        push_escaped(&mut out, c);
    }
    if open_until.is_some() {
        out.push_str(HIGHLIGHT_CLOSE);
    }
    if cut_after || end < chars.len() {
        out.push('…');
    }
    out
}

// ---- the operation ----

fn status_stored(s: ApiStatus) -> ChatStatus {
    match s {
        ApiStatus::Active => ChatStatus::Active,
        ApiStatus::Archived => ChatStatus::Archived,
        ApiStatus::Deleted => ChatStatus::Deleted,
    }
}

fn status_view(s: ChatStatus) -> ApiStatus {
    match s {
        ChatStatus::Active => ApiStatus::Active,
        ChatStatus::Archived => ApiStatus::Archived,
        ChatStatus::Deleted => ApiStatus::Deleted,
    }
}

fn result_view(row: SearchRow, needles: &[Vec<char>]) -> ChatSearchResult {
    let title_highlight = highlight(&row.title, needles, false, false);
    let snippet = match &row.excerpt {
        Some(excerpt) => {
            let start = row.excerpt_start.unwrap_or(1);
            let shown = i32::try_from(excerpt.chars().count()).unwrap_or(i32::MAX);
            let total = row.content_chars.unwrap_or(0);
            highlight(excerpt, needles, start > 1, start - 1 + shown < total)
        }
        None => title_highlight.clone(),
    };
    ChatSearchResult {
        chat_id: row.chat_id,
        title: row.title,
        title_highlight,
        title_match: row.title_hit,
        message_id: row.message_id,
        role: row.role.map(|r| match r {
            ChatRole::User => ApiRole::User,
            ChatRole::Model => ApiRole::Model,
        }),
        message_created_at: row.message_created_at,
        snippet,
        status: status_view(row.status),
        pinned: row.pinned_at.is_some(),
        folder_id: row.folder_id,
        updated_at: row.updated_at,
    }
}

pub async fn search(
    cx: &ServerContext,
    access: &OrgAccess,
    query: ChatSearchQuery,
) -> Result<ChatSearchPage, Error> {
    let parsed = parse(&query.q)?;
    let limit = query.limit.unwrap_or(SEARCH_DEFAULT_LIMIT);
    if !(1..=SEARCH_MAX_LIMIT).contains(&limit) {
        return Err(Error::invalid(
            "invalid_pagination",
            format!("limit must be 1 to {SEARCH_MAX_LIMIT}"),
        ));
    }
    let bound = binding(&parsed.typed, query.status, query.folder_id);
    let after = query
        .cursor
        .as_deref()
        .map(|c| decode_cursor(c, &bound))
        .transpose()?;
    let like = like_escape(&parsed.typed);
    let mut rows = cx
        .datastore
        .chat_search(
            access,
            &SearchQuery {
                words: &parsed.words,
                like: &like,
                needles: &parsed.needles,
                status: query.status.map(status_stored),
                folder_id: query.folder_id,
                limit: i64::from(limit) + 1,
                after,
            },
        )
        .await?;
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let next_cursor = more
        .then(|| rows.last().map(|r| encode_cursor(&bound, &r.key())))
        .flatten();
    let needles: Vec<Vec<char>> = parsed
        .needles
        .iter()
        .map(|n| n.chars().map(fold_char).collect())
        .collect();
    Ok(ChatSearchPage {
        results: rows.into_iter().map(|r| result_view(r, &needles)).collect(),
        next_cursor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needles(words: &[&str]) -> Vec<Vec<char>> {
        words
            .iter()
            .map(|w| w.chars().map(fold_char).collect())
            .collect()
    }

    #[test]
    fn queries_are_bounded_and_taken_apart() {
        assert!(parse("").is_err());
        assert!(parse(" \u{3000}\n").is_err());
        assert!(parse("a\0b").is_err());
        assert!(parse(&"x".repeat(201)).is_err());
        assert!(parse(&"ж".repeat(200)).is_ok());
        let p = parse("  budget \"q3 report\" -draft or plan ").unwrap();
        assert_eq!(p.typed, "budget \"q3 report\" -draft or plan");
        assert_eq!(p.words, p.typed);
        assert_eq!(
            p.needles,
            vec![
                "budget \"q3 report\" -draft or plan",
                "budget",
                "q3",
                "report",
                "plan"
            ]
        );
        // Only exclusions or punctuation: no words to match, the typed
        // text still is.
        let p = parse("-draft").unwrap();
        assert_eq!(p.words, "");
        assert_eq!(p.needles, vec!["-draft"]);
        assert_eq!(parse("🎉").unwrap().words, "");
        assert_eq!(parse("天気").unwrap().words, "天気");
    }

    #[test]
    fn like_patterns_escape_wildcards() {
        assert_eq!(like_escape(r"50%_off\now"), r"50\%\_off\\now");
    }

    #[test]
    fn cursors_round_trip_and_belong_to_their_query() {
        let key = SearchKey {
            title_hit: true,
            rank: 1_234_567,
            updated_at: DateTime::<Utc>::from_timestamp_micros(1_790_000_000_123_456).unwrap(),
            chat_id: Uuid::new_v4(),
        };
        let bound = binding("budget", None, None);
        let cursor = encode_cursor(&bound, &key);
        assert_eq!(decode_cursor(&cursor, &bound).unwrap(), key);
        let other = binding("budget", Some(ApiStatus::Deleted), None);
        assert_ne!(bound, other);
        assert!(decode_cursor(&cursor, &other).is_err());
        for bad in ["", "!!", "YWJj", &cursor[..cursor.len() - 2]] {
            assert!(decode_cursor(bad, &bound).is_err(), "{bad}");
        }
    }

    #[test]
    fn snippets_escape_everything_but_the_marks() {
        let out = highlight(
            "<script>alert('x')</script> & \"budget\"",
            &needles(&["BUDGET"]),
            false,
            false,
        );
        assert_eq!(
            out,
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;<mark>budget</mark>&quot;"
        );
        // A needle that is markup is matched as text and escaped inside the
        // mark.
        let out = highlight("a <b> c", &needles(&["<b>"]), false, false);
        assert_eq!(out, "a <mark>&lt;b&gt;</mark> c");
    }

    #[test]
    fn snippets_mark_every_script_case_insensitively() {
        let n = needles(&["привет мир", "привет", "мир"]);
        assert_eq!(
            highlight("ПРИВЕТ МИР и мир", &n, false, false),
            "<mark>ПРИВЕТ МИР</mark> и <mark>мир</mark>"
        );
        assert_eq!(
            highlight("東京の天気は晴れ", &needles(&["天気"]), false, false),
            "東京の<mark>天気</mark>は晴れ"
        );
        assert_eq!(
            highlight(
                "Grüße aus STRASSE 🎉!",
                &needles(&["grüße", "🎉"]),
                false,
                false
            ),
            "<mark>Grüße</mark> aus STRASSE <mark>🎉</mark>!"
        );
    }

    #[test]
    fn long_texts_are_cut_around_the_first_match() {
        let text = format!("{} needle {}", "a".repeat(500), "b".repeat(500));
        let out = highlight(&text, &needles(&["needle"]), false, false);
        assert!(out.starts_with('…') && out.ends_with('…'), "{out}");
        assert!(out.contains("<mark>needle</mark>"), "{out}");
        assert!(out.chars().count() < SNIPPET_CHARS + 20, "{out}");
        // Line breaks read as single spaces.
        assert_eq!(
            highlight("one\n\n\ttwo", &needles(&["two"]), true, false),
            "…one <mark>two</mark>"
        );
    }
}
