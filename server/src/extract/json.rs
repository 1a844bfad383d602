//! JSON documents as text, read without recursion.
//!
//! A JSON file of a few hundred kilobytes can nest 100,000 deep. A
//! recursive parser overflows its stack on it (or, bounded, refuses it),
//! and kept as raw text it is a run of brackets with no word boundary,
//! which nothing downstream can split sensibly. So a document that is JSON
//! is read here by a pushdown scanner whose stack lives on the heap (one
//! small frame per open container: memory linear in the input, time linear
//! in the input, whatever the depth). A shallow document keeps its raw
//! text (readable as it is, to people and models); one nested deeper than
//! [`MAX_RAW_DEPTH`] becomes its values, one per line, each after the
//! nearest key that names it (`title: Harbour lights`).

use std::rc::Rc;

/// Deepest JSON kept as raw text; deeper documents are flattened.
pub const MAX_RAW_DEPTH: usize = 64;

/// What a scan of a JSON document found.
pub struct Scanned {
    /// The deepest nesting of containers.
    pub depth: usize,
    /// The values, one per line (`key: value`), cut after `max_bytes`.
    pub flat: String,
}

/// Where the scanner is in the grammar.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// A value is expected (after `:` or `,` in an array, or at the start).
    Value,
    /// After `[`: a value or `]`.
    FirstItem,
    /// After `{`: a key or `}`.
    FirstKey,
    /// After `,` in an object: a key.
    Key,
    /// After a key: `:`.
    Colon,
    /// After a value: `,`, the end of the container, or the end of input.
    After,
}

/// One open container.
struct Frame {
    array: bool,
    /// An object's current key.
    key: Option<Rc<str>>,
    /// The key that names this container (its own, or its parent's):
    /// shared, so deep nesting never copies a key.
    label: Option<Rc<str>>,
}

/// Scans `text` as JSON: `None` when it is not (valid) JSON, else its
/// depth and its values as lines (at most about `max_bytes` of them).
pub fn scan(text: &str, max_bytes: usize) -> Option<Scanned> {
    let bytes = text.as_bytes();
    let mut stack: Vec<Frame> = Vec::new();
    let mut state = State::Value;
    let mut depth = 0usize;
    let mut flat = String::new();
    let mut i = 0usize;
    loop {
        while i < bytes.len() && matches!(bytes[i], b' ' | b'\t' | b'\n' | b'\r') {
            i += 1;
        }
        let Some(&c) = bytes.get(i) else {
            return (state == State::After && stack.is_empty()).then_some(Scanned { depth, flat });
        };
        match state {
            State::Value | State::FirstItem => {
                if state == State::FirstItem && c == b']' {
                    stack.pop();
                    state = State::After;
                    i += 1;
                    continue;
                }
                let label = stack.last().and_then(|f| {
                    if f.array {
                        f.label.clone()
                    } else {
                        f.key.clone()
                    }
                });
                match c {
                    b'{' | b'[' => {
                        stack.push(Frame {
                            array: c == b'[',
                            key: None,
                            label,
                        });
                        depth = depth.max(stack.len());
                        state = if c == b'[' {
                            State::FirstItem
                        } else {
                            State::FirstKey
                        };
                        i += 1;
                        continue;
                    }
                    b'"' => {
                        let (value, next) = string(text, i)?;
                        leaf(&mut flat, label.as_deref(), &value, max_bytes);
                        i = next;
                    }
                    b'-' | b'0'..=b'9' => {
                        let next = number(bytes, i)?;
                        leaf(&mut flat, label.as_deref(), &text[i..next], max_bytes);
                        i = next;
                    }
                    _ => {
                        let rest = &bytes[i..];
                        let literal = [&b"true"[..], b"false", b"null"]
                            .into_iter()
                            .find(|l| rest.starts_with(l))?;
                        if literal != b"null" {
                            let word = &text[i..i + literal.len()];
                            leaf(&mut flat, label.as_deref(), word, max_bytes);
                        }
                        i += literal.len();
                    }
                }
                state = State::After;
            }
            State::FirstKey | State::Key => {
                if state == State::FirstKey && c == b'}' {
                    stack.pop();
                    state = State::After;
                    i += 1;
                    continue;
                }
                if c != b'"' {
                    return None;
                }
                let (key, next) = string(text, i)?;
                stack.last_mut()?.key = Some(Rc::from(key));
                state = State::Colon;
                i = next;
            }
            State::Colon => {
                if c != b':' {
                    return None;
                }
                state = State::Value;
                i += 1;
            }
            State::After => {
                let top = stack.last()?;
                state = match (c, top.array) {
                    (b',', true) => State::Value,
                    (b',', false) => State::Key,
                    (b']', true) | (b'}', false) => {
                        stack.pop();
                        State::After
                    }
                    _ => return None,
                };
                i += 1;
            }
        }
    }
}

/// Writes one value as a line, after its label.
fn leaf(out: &mut String, label: Option<&str>, value: &str, max_bytes: usize) {
    if out.len() > max_bytes || value.trim().is_empty() {
        return;
    }
    if let Some(label) = label.filter(|l| !l.trim().is_empty()) {
        out.push_str(label);
        out.push_str(": ");
    }
    out.push_str(value);
    out.push('\n');
}

/// The string starting at the quote at `start`, unescaped, and the index
/// after its closing quote.
fn string(text: &str, start: usize) -> Option<(String, usize)> {
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut i = start + 1;
    let mut run = i;
    loop {
        match *bytes.get(i)? {
            b'"' => {
                out.push_str(&text[run..i]);
                return Some((out, i + 1));
            }
            b'\\' => {
                out.push_str(&text[run..i]);
                let escape = *bytes.get(i + 1)?;
                i += 2;
                match escape {
                    b'"' => out.push('"'),
                    b'\\' => out.push('\\'),
                    b'/' => out.push('/'),
                    b'b' | b'f' | b'n' | b'r' | b't' => out.push(match escape {
                        b'n' | b'r' => '\n',
                        _ => ' ',
                    }),
                    b'u' => {
                        let high = hex4(bytes, i)?;
                        i += 4;
                        let c = if (0xD800..0xDC00).contains(&high)
                            && bytes.get(i..i + 2) == Some(b"\\u")
                            && let Some(low) = hex4(bytes, i + 2)
                            && (0xDC00..0xE000).contains(&low)
                        {
                            i += 6;
                            char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
                        } else {
                            char::from_u32(high)
                        };
                        out.push(c.unwrap_or('\u{fffd}'));
                    }
                    _ => return None,
                }
                run = i;
            }
            c if c < 0x20 => return None,
            _ => i += 1,
        }
    }
}

fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = std::str::from_utf8(bytes.get(at..at + 4)?).ok()?;
    u32::from_str_radix(digits, 16).ok()
}

/// The index after the number starting at `start`.
fn number(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start;
    let digits = |i: &mut usize| {
        let from = *i;
        while bytes.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i > from
    };
    if bytes.get(i) == Some(&b'-') {
        i += 1;
    }
    if !digits(&mut i) {
        return None;
    }
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return None;
        }
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(&mut i) {
            return None;
        }
    }
    Some(i)
}

/// The text of a document that may be JSON: its values as lines when it
/// is JSON nested deeper than [`MAX_RAW_DEPTH`], else `None` (keep the raw
/// text).
pub fn deep_json_text(text: &str, max_bytes: usize) -> Option<String> {
    let start = text.trim_start_matches('\u{feff}').trim_start();
    if !start.starts_with(['{', '[']) {
        return None;
    }
    let scanned = scan(start, max_bytes)?;
    (scanned.depth > MAX_RAW_DEPTH).then_some(scanned.flat)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_become_lines_after_their_keys() {
        let doc = r#"{"title": "Harbour \"lights\"", "tags": ["tide", "fog"],
            "n": -1.5e3, "ok": true, "none": null, "nested": {"deep": [{"x": "\u00e9\ud83d\ude00"}]}}"#;
        let scanned = scan(doc, 1 << 20).unwrap();
        assert_eq!(scanned.depth, 4);
        assert_eq!(
            scanned.flat,
            "title: Harbour \"lights\"\ntags: tide\ntags: fog\nn: -1.5e3\nok: true\nx: é😀\n"
        );
    }

    #[test]
    fn invalid_json_is_not_json() {
        for doc in [
            "{",
            "[1,]",
            "{\"a\" 1}",
            "[1] trailing",
            "{\"a\":tru}",
            "[\"\n\"]",
            "[01x]",
            "",
        ] {
            assert!(scan(doc, 1024).is_none(), "{doc:?}");
        }
        assert!(scan("[]", 1024).is_some());
    }

    #[test]
    fn nesting_100_000_deep_is_read_in_linear_time_without_recursion() {
        let depth = 100_000;
        let doc = "{\"a\":[".repeat(depth) + "\"the middle\"" + &"]}".repeat(depth);
        let started = std::time::Instant::now();
        let text = deep_json_text(&doc, 1 << 20).unwrap();
        assert_eq!(text, "a: the middle\n");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        let brackets = "[".repeat(depth) + &"]".repeat(depth);
        assert_eq!(deep_json_text(&brackets, 1024).as_deref(), Some(""));
        // Shallow JSON keeps its raw text.
        assert_eq!(deep_json_text("{\"a\": [1, 2]}", 1024), None);
        // Deep but broken: not JSON, the raw text stays.
        assert_eq!(deep_json_text(&"[".repeat(depth), 1024), None);
    }

    #[test]
    fn flattened_text_stops_at_the_budget() {
        let doc = format!("[{}]", vec!["\"word\""; 10_000].join(","));
        let doc = "[".repeat(100) + &doc + &"]".repeat(100);
        let text = deep_json_text(&doc, 100).unwrap();
        assert!(text.len() <= 100 + 5, "{}", text.len());
    }
}
