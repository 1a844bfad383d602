//! Reading export files: which format a file is (a first pass that only
//! looks at keys and counts entries, keeping nothing), then each chat of
//! it as a [`RawChat`] (a second pass with serde structs whose fields are
//! all optional and whose unknown fields are ignored).
//!
//! Each chat is read on its own ([`Lenient`]): a chat with wrong types is
//! reported, the others are read.
//!
//! An answer's thinking becomes its reasoning, never its content:
//! `workspace.chat.v1`'s `reasoning`; ChatGPT's `thoughts` nodes (handed
//! to the next answer by [`super::tree`]; its `reasoning_recap` nodes are
//! left out); Open WebUI's `<details type="reasoning">` blocks (and an
//! older leading `<think>` block) taken out of the content; Claude's
//! `thinking` content blocks; LibreChat's `think` content parts (and an
//! older leading `:::thinking` block of its text). A file nested deeper than
//! [`MAX_NESTING`] levels anywhere is refused first, by one scan without
//! recursion (`invalid_import_file`); both passes then parse the bounded
//! bytes with serde_json, whose recursion limit refuses the next level.

use super::tree::{RawChat, RawMessage, RawNode, no_parent};
use crate::db::enums::{ChatMessageStatus, ChatRole, ChatStatus};
use crate::error::Error;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;
use uuid::Uuid;
use workspace_api::chat_transfer::{
    CHAT_EXPORT_FORMAT, ChatImportFormat, ChatImportSource, IMPORT_MAX_CHATS, IMPORT_MAX_MESSAGES,
};

/// The formats, as the error messages name them.
const EXPECTED: &str = "this service's JSON export (`workspace.chat.v1`), ChatGPT's \
                        conversations.json, Open WebUI's chat export, Claude's \
                        conversations.json or LibreChat's conversation export";

fn unrecognized(message: impl Into<String>) -> Error {
    Error::invalid(
        "unrecognized_import_format",
        format!("{}; expected {EXPECTED}", message.into()),
    )
}

fn invalid_file(e: serde_json::Error) -> Error {
    Error::invalid(
        "invalid_import_file",
        format!("the file is not valid JSON: {e}"),
    )
}

/// One entry of a file: a chat to build, or why it cannot be read.
pub enum Entry {
    Chat(RawChat),
    Invalid {
        source_id: Option<String>,
        title: Option<String>,
        message: String,
    },
}

/// A file read: its format and its entries, in order.
pub struct ParsedFile {
    pub format: ChatImportSource,
    pub entries: Vec<Entry>,
}

/// The deepest nesting of arrays and objects a file may have: below
/// serde_json's recursion limit (it refuses the 128th level), which the
/// second pass reaches wherever values are kept.
pub const MAX_NESTING: usize = 127;

/// Reads `bytes` as `requested` (`auto`: whatever it is).
pub fn parse(bytes: &[u8], requested: ChatImportFormat) -> Result<ParsedFile, Error> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    // Refused for its nesting wherever it is, before any format is looked
    // for: the same answer whether the deep part sits where a format is
    // read or where it would only be skipped.
    if nesting_exceeds(bytes, MAX_NESTING) {
        return Err(Error::invalid(
            "invalid_import_file",
            format!(
                "the file's JSON is nested {} levels deep or more (at most {MAX_NESTING})",
                MAX_NESTING + 1
            ),
        ));
    }
    let top: TopProbe = serde_json::from_slice(bytes).map_err(invalid_file)?;
    let (format, kinds, messages) = detect(&top)?;
    if let Some(wanted) = wanted_source(requested)
        && wanted != format
    {
        return Err(unrecognized(format!(
            "the file is {}, not {}",
            describe(format),
            describe(wanted)
        )));
    }
    if kinds.is_empty() {
        return Err(Error::invalid("empty_import", "the file holds no chat"));
    }
    if kinds.len() > IMPORT_MAX_CHATS || messages > IMPORT_MAX_MESSAGES {
        return Err(Error::invalid(
            "import_limits_exceeded",
            format!(
                "the file holds {} chats and {messages} messages; one import takes at most \
                 {IMPORT_MAX_CHATS} chats and {IMPORT_MAX_MESSAGES} messages (split the file)",
                kinds.len()
            ),
        ));
    }
    let entries = match format {
        ChatImportSource::Workspace => {
            let file: WsFile = serde_json::from_slice(bytes).map_err(invalid_file)?;
            read_entries(file.chats, &kinds, format, workspace)
        }
        ChatImportSource::Chatgpt => read(bytes, &top, &kinds, format, chatgpt)?,
        ChatImportSource::Openwebui => read(bytes, &top, &kinds, format, openwebui)?,
        ChatImportSource::Claude => read(bytes, &top, &kinds, format, claude)?,
        ChatImportSource::Librechat => read(bytes, &top, &kinds, format, librechat)?,
    };
    Ok(ParsedFile { format, entries })
}

/// Whether arrays and objects in `bytes` nest deeper than `max`: one pass
/// over the bytes without recursion, skipping strings (with their
/// escapes). Not a validator: malformed JSON is left to the parser.
fn nesting_exceeds(bytes: &[u8], max: usize) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

fn wanted_source(requested: ChatImportFormat) -> Option<ChatImportSource> {
    match requested {
        ChatImportFormat::Auto => None,
        ChatImportFormat::Workspace => Some(ChatImportSource::Workspace),
        ChatImportFormat::Chatgpt => Some(ChatImportSource::Chatgpt),
        ChatImportFormat::Openwebui => Some(ChatImportSource::Openwebui),
        ChatImportFormat::Claude => Some(ChatImportSource::Claude),
        ChatImportFormat::Librechat => Some(ChatImportSource::Librechat),
    }
}

fn describe(format: ChatImportSource) -> &'static str {
    match format {
        ChatImportSource::Workspace => "this service's JSON export",
        ChatImportSource::Chatgpt => "a ChatGPT export",
        ChatImportSource::Openwebui => "an Open WebUI export",
        ChatImportSource::Claude => "a Claude export",
        ChatImportSource::Librechat => "a LibreChat export",
    }
}

/// The file's format, the format of each entry (`None`: not a chat of
/// any format), and how many messages the entries hold.
fn detect(
    top: &TopProbe,
) -> Result<(ChatImportSource, Vec<Option<ChatImportSource>>, usize), Error> {
    match top {
        TopProbe::Object(object) => match object.format.as_deref() {
            Some(CHAT_EXPORT_FORMAT) => {
                let chats = object.chats.as_deref().unwrap_or(&[]);
                let kinds = chats
                    .iter()
                    .map(|c| c.object.then_some(ChatImportSource::Workspace))
                    .collect();
                let messages = chats.iter().map(|c| c.messages.unwrap_or(0)).sum();
                Ok((ChatImportSource::Workspace, kinds, messages))
            }
            Some(other) if other.starts_with("workspace.") => Err(unrecognized(format!(
                "the file is a `{other}` document, not a chat export"
            ))),
            _ => match object.kind() {
                Some(kind) => Ok((kind, vec![Some(kind)], object.message_count())),
                None => Err(unrecognized("the file is not a chat export")),
            },
        },
        TopProbe::Array(items) => {
            let Some(format) = items.iter().find_map(ElementProbe::kind) else {
                if items.is_empty() {
                    return Err(Error::invalid("empty_import", "the file holds no chat"));
                }
                return Err(unrecognized("the file's entries are not chats"));
            };
            let kinds = items
                .iter()
                .map(|i| i.kind().filter(|k| *k == format))
                .collect();
            let messages = items.iter().map(ElementProbe::message_count).sum();
            Ok((format, kinds, messages))
        }
        TopProbe::Other => Err(unrecognized(
            "the file is neither a JSON array nor an object",
        )),
    }
}

/// Reads the entries of a file of one of the other services (an array
/// of chats, or one chat).
fn read<T: DeserializeOwned>(
    bytes: &[u8],
    top: &TopProbe,
    kinds: &[Option<ChatImportSource>],
    format: ChatImportSource,
    convert: fn(T) -> RawChat,
) -> Result<Vec<Entry>, Error> {
    let items: Vec<Lenient<T>> = match top {
        TopProbe::Array(_) => serde_json::from_slice(bytes).map_err(invalid_file)?,
        _ => vec![serde_json::from_slice(bytes).map_err(invalid_file)?],
    };
    Ok(read_entries(items, kinds, format, convert))
}

fn read_entries<T>(
    items: Vec<Lenient<T>>,
    kinds: &[Option<ChatImportSource>],
    format: ChatImportSource,
    convert: fn(T) -> RawChat,
) -> Vec<Entry> {
    items
        .into_iter()
        .zip(kinds)
        .map(|(item, kind)| match (item.value, kind) {
            (Ok(chat), Some(_)) => Entry::Chat(convert(chat)),
            (_, None) => Entry::Invalid {
                source_id: item.source_id,
                title: item.title,
                message: format!("the entry is not a chat of {}", describe(format)),
            },
            (Err(e), Some(_)) => Entry::Invalid {
                source_id: item.source_id,
                title: item.title,
                message: format!("the chat cannot be read: {e}"),
            },
        })
        .collect()
}

// ---- the first pass: keys and counts ----

/// The top of a file.
#[derive(Default)]
enum TopProbe {
    Array(Vec<ElementProbe>),
    Object(ElementProbe),
    #[default]
    Other,
}

/// What an entry (or the top object) holds, as far as recognising a
/// format needs.
#[derive(Default)]
struct ElementProbe {
    object: bool,
    format: Option<String>,
    mapping: Option<usize>,
    chat_messages: Option<usize>,
    chat: Option<ChatProbe>,
    conversation_id: bool,
    messages: Option<usize>,
    chats: Option<Vec<ElementProbe>>,
}

impl ElementProbe {
    fn kind(&self) -> Option<ChatImportSource> {
        if self.mapping.is_some() {
            Some(ChatImportSource::Chatgpt)
        } else if self.chat_messages.is_some() {
            Some(ChatImportSource::Claude)
        } else if self.chat.as_ref().is_some_and(|c| c.object) {
            Some(ChatImportSource::Openwebui)
        } else if self.conversation_id && self.messages.is_some() {
            Some(ChatImportSource::Librechat)
        } else {
            None
        }
    }

    fn message_count(&self) -> usize {
        match self.kind() {
            Some(ChatImportSource::Chatgpt) => self.mapping.unwrap_or(0),
            Some(ChatImportSource::Claude) => self.chat_messages.unwrap_or(0),
            Some(ChatImportSource::Openwebui) => self
                .chat
                .as_ref()
                .map(|c| c.history.max(c.messages))
                .unwrap_or(0),
            Some(ChatImportSource::Librechat) => self.messages.unwrap_or(0),
            _ => 0,
        }
    }
}

/// Open WebUI's `chat`: how many messages its history and its list hold.
#[derive(Default)]
struct ChatProbe {
    object: bool,
    history: usize,
    messages: usize,
}

/// The scalar visits of a probe that accepts anything: not an object or
/// array, so nothing to look at.
macro_rules! anything_else {
    () => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
    };
}

fn skip_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

fn skip_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

impl<'de> Deserialize<'de> for TopProbe {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TopProbe;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON array or object")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TopProbe, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<ElementProbe>()? {
                    items.push(item);
                }
                Ok(TopProbe::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<TopProbe, A::Error> {
                ElementProbe::of_map(map).map(TopProbe::Object)
            }
            anything_else!();
        }
        d.deserialize_any(V)
    }
}

impl ElementProbe {
    fn of_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<ElementProbe, A::Error> {
        let mut probe = ElementProbe {
            object: true,
            ..Default::default()
        };
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "format" => probe.format = map.next_value::<LooseString>()?.0,
                "mapping" => probe.mapping = Some(map.next_value::<Count>()?.0),
                "chat_messages" => probe.chat_messages = Some(map.next_value::<Count>()?.0),
                "messages" => probe.messages = Some(map.next_value::<Count>()?.0),
                "conversationId" => {
                    map.next_value::<IgnoredAny>()?;
                    probe.conversation_id = true;
                }
                "chat" => probe.chat = Some(map.next_value::<ChatProbe>()?),
                "chats" => probe.chats = Some(map.next_value::<ProbeList>()?.0),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(probe)
    }
}

impl<'de> Deserialize<'de> for ElementProbe {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ElementProbe;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ElementProbe, A::Error> {
                ElementProbe::of_map(map)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<ElementProbe, A::Error> {
                skip_seq(seq).map(|()| ElementProbe::default())
            }
            anything_else!();
        }
        d.deserialize_any(V)
    }
}

/// The entries of a `chats` array (anything else: none).
#[derive(Default)]
struct ProbeList(Vec<ElementProbe>);

impl<'de> Deserialize<'de> for ProbeList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ProbeList;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ProbeList, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<ElementProbe>()? {
                    items.push(item);
                }
                Ok(ProbeList(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ProbeList, A::Error> {
                skip_map(map).map(|()| ProbeList::default())
            }
            anything_else!();
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for ChatProbe {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ChatProbe;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ChatProbe, A::Error> {
                let mut probe = ChatProbe {
                    object: true,
                    ..Default::default()
                };
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "history" => probe.history = map.next_value::<HistoryCount>()?.0,
                        "messages" => probe.messages = map.next_value::<Count>()?.0,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(probe)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<ChatProbe, A::Error> {
                skip_seq(seq).map(|()| ChatProbe::default())
            }
            anything_else!();
        }
        d.deserialize_any(V)
    }
}

/// How many entries `history.messages` holds.
#[derive(Default)]
struct HistoryCount(usize);

impl<'de> Deserialize<'de> for HistoryCount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = HistoryCount;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<HistoryCount, A::Error> {
                let mut count = 0;
                while let Some(key) = map.next_key::<String>()? {
                    if key == "messages" {
                        count = map.next_value::<Count>()?.0;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(HistoryCount(count))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<HistoryCount, A::Error> {
                skip_seq(seq).map(|()| HistoryCount::default())
            }
            anything_else!();
        }
        d.deserialize_any(V)
    }
}

/// How many entries a JSON object or array has (anything else: 0), read
/// without keeping them.
#[derive(Default)]
struct Count(usize);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Count;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Count, A::Error> {
                let mut n = 0;
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Count(n))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Count, A::Error> {
                let mut n = 0;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Count(n))
            }
            anything_else!();
        }
        d.deserialize_any(V)
    }
}

/// A string, or nothing for any other value.
#[derive(Default)]
struct LooseString(Option<String>);

impl<'de> Deserialize<'de> for LooseString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(LooseString(text_of(Value::deserialize(d)?)))
    }
}

// ---- the second pass: each chat on its own ----

/// An entry read as `T`, or why it could not be (the entry is read as a
/// JSON value first, so a wrong type in one entry spoils only that one),
/// with its id and title when they could be seen.
struct Lenient<T> {
    value: Result<T, String>,
    source_id: Option<String>,
    title: Option<String>,
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        let field = |keys: &[&str]| {
            keys.iter()
                .find_map(|k| value.get(k).cloned().and_then(text_of))
        };
        let source_id = field(&["id", "uuid", "conversation_id", "conversationId"]);
        let title = field(&["title", "name"]);
        Ok(Lenient {
            value: serde_json::from_value(value).map_err(|e| e.to_string()),
            source_id,
            title,
        })
    }
}

/// A string, or a number as text; nothing for anything else.
fn text_of(value: Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn loose_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(text_of(Value::deserialize(d)?))
}

fn loose_bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(matches!(Value::deserialize(d)?, Value::Bool(true)))
}

/// A time as the services write them: seconds (or milliseconds) since
/// the epoch, RFC 3339, or a date and time without a zone (UTC);
/// anything else is no time.
fn loose_time<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
    Ok(time_of(&Value::deserialize(d)?))
}

pub(super) fn time_of(value: &Value) -> Option<DateTime<Utc>> {
    let from_number = |n: f64| {
        if !n.is_finite() || n < 0.0 {
            return None;
        }
        // Past 10^11 seconds (year 5138) it is milliseconds.
        let secs = if n > 1e11 { n / 1000.0 } else { n };
        DateTime::from_timestamp(secs.trunc() as i64, ((secs.fract()) * 1e9) as u32)
    };
    match value {
        Value::Number(n) => n.as_f64().and_then(from_number),
        Value::String(s) => {
            let s = s.trim();
            DateTime::parse_from_rfc3339(s)
                .map(|t| t.with_timezone(&Utc))
                .ok()
                .or_else(|| {
                    ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"]
                        .iter()
                        .find_map(|f| chrono::NaiveDateTime::parse_from_str(s, f).ok())
                        .map(|t| t.and_utc())
                })
                .or_else(|| s.parse::<f64>().ok().and_then(from_number))
        }
        _ => None,
    }
}

fn node_id(id: Option<String>, position: usize) -> String {
    id.filter(|i| !i.is_empty())
        .unwrap_or_else(|| format!("#{position}"))
}

fn parent_of(id: Option<String>) -> Option<String> {
    id.filter(|p| !no_parent(p))
}

fn complete(role: ChatRole, content: String, created_at: Option<DateTime<Utc>>) -> RawMessage {
    RawMessage {
        role,
        content,
        reasoning: None,
        status: ChatMessageStatus::Complete,
        created_at,
        model_id: None,
        model: None,
    }
}

fn archived(yes: bool) -> Option<ChatStatus> {
    yes.then_some(ChatStatus::Archived)
}

// ---- reasoning written into content ----

/// The text of the content parts of type `kind`, each read from its field
/// `field` (Claude's `{type: "thinking", thinking}`, LibreChat's `{type:
/// "think", think}`) and passed through `clean`, joined by blank lines;
/// `None` when there is none.
fn typed_parts(
    content: &Value,
    kind: &str,
    field: &str,
    clean: fn(&str) -> &str,
) -> Option<String> {
    let Value::Array(parts) = content else {
        return None;
    };
    let texts: Vec<&str> = parts
        .iter()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some(kind))
        .filter_map(|p| p.get(field).and_then(Value::as_str))
        .map(clean)
        .filter(|t| !t.is_empty())
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n\n"))
}

/// A block `open` … `close` at the start of `text` (after white space):
/// its inner text and what follows it; `None` without one (or without
/// its end).
fn leading_block<'a>(text: &'a str, open: &str, close: &str) -> Option<(&'a str, &'a str)> {
    let rest = text.trim_start().strip_prefix(open)?;
    let end = rest.find(close)?;
    Some((&rest[..end], &rest[end + close.len()..]))
}

/// An Open WebUI answer's content without its reasoning, and the
/// reasoning. Open WebUI keeps reasoning in the content, as
/// `<details type="reasoning" done="true" duration="N">` blocks (a
/// `<summary>` such as "Thought for N seconds", then the text, each line
/// quoted with `> `, HTML-escaped by newer versions), anywhere (one per
/// round of tool calls); older versions left a `<think>…</think>` block at
/// the start. The blocks' text (without the summary, unquoted, unescaped)
/// is the reasoning; the rest, the content. Content without such a block
/// is returned unchanged.
fn openwebui_reasoning(content: String) -> (String, Option<String>) {
    let mut thoughts: Vec<String> = Vec::new();
    let mut rest = content.as_str();
    for (open, close) in [("<think>", "</think>"), ("<thinking>", "</thinking>")] {
        if let Some((inner, after)) = leading_block(rest, open, close) {
            thoughts.push(inner.trim().to_string());
            rest = after;
            break;
        }
    }
    let mut kept: Vec<&str> = Vec::new();
    while let Some((start, body_start)) = reasoning_details(rest) {
        kept.push(&rest[..start]);
        let body = &rest[body_start..];
        let (body, after) = match body.find("</details>") {
            Some(end) => (&body[..end], &body[end + "</details>".len()..]),
            None => (body, ""),
        };
        thoughts.push(details_text(body));
        rest = after;
    }
    if thoughts.is_empty() {
        return (content, None);
    }
    kept.push(rest);
    let content = kept
        .iter()
        .map(|piece| piece.trim_matches(['\n', '\r']))
        .filter(|piece| !piece.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    let thoughts: Vec<String> = thoughts.into_iter().filter(|t| !t.is_empty()).collect();
    (
        content,
        (!thoughts.is_empty()).then(|| thoughts.join("\n\n")),
    )
}

/// Where the first `<details …>` tag whose `type` is `reasoning` starts in
/// `text`, and where its body starts (after the tag).
fn reasoning_details(text: &str) -> Option<(usize, usize)> {
    let mut from = 0;
    while let Some(at) = text[from..].find("<details") {
        let start = from + at;
        let tag_end = text[start..].find('>').map(|e| start + e + 1)?;
        let tag = &text[start..tag_end];
        if tag.contains("type=\"reasoning\"") || tag.contains("type='reasoning'") {
            return Some((start, tag_end));
        }
        from = tag_end;
    }
    None
}

/// The text of a reasoning block's body: without its `<summary>`, each
/// line's quote (`> `, or `&gt; ` escaped) taken off, HTML entities
/// unescaped.
fn details_text(body: &str) -> String {
    let mut body = body.trim_start();
    if let Some((_, after)) = leading_block(body, "<summary>", "</summary>") {
        body = after;
    }
    body.lines()
        .map(|line| {
            let line = ["&gt; ", "> ", "&gt;", ">"]
                .iter()
                .find_map(|quote| line.strip_prefix(quote))
                .unwrap_or(line);
            html_unescape(line)
        })
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

/// `text` with the entities an HTML escape writes (`&amp;`, `&lt;`,
/// `&gt;`, `&quot;`, `&#x27;`, `&#39;`) read back, in one pass.
fn html_unescape(text: &str) -> String {
    const ENTITIES: [(&str, char); 6] = [
        ("&amp;", '&'),
        ("&lt;", '<'),
        ("&gt;", '>'),
        ("&quot;", '"'),
        ("&#x27;", '\''),
        ("&#39;", '\''),
    ];
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        match ENTITIES.iter().find(|(e, _)| rest.starts_with(e)) {
            Some((entity, c)) => {
                out.push(*c);
                rest = &rest[entity.len()..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `text` trimmed, without the `<think>` and `</think>` around it.
fn without_think_tags(text: &str) -> &str {
    let text = text.trim();
    let text = text.strip_prefix("<think>").unwrap_or(text);
    text.strip_suffix("</think>").unwrap_or(text).trim()
}

/// A LibreChat answer's content and reasoning: its `think` content parts
/// (their `<think>` tags, when a model left them, taken off), or an older
/// leading `:::thinking` … `:::` block of its text.
fn librechat_reasoning(content: String, parts: &Value) -> (String, Option<String>) {
    if let Some(think) = typed_parts(parts, "think", "think", without_think_tags) {
        return (content, Some(think));
    }
    match leading_block(&content, ":::thinking", "\n:::") {
        Some((inner, after)) => {
            let reasoning = inner.trim().to_string();
            let content = after.trim_start_matches(['\n', '\r']).to_string();
            (content, (!reasoning.is_empty()).then_some(reasoning))
        }
        None => (content, None),
    }
}

// ---- this service's export ----

#[derive(Deserialize, Default)]
#[serde(default)]
struct WsFile {
    chats: Vec<Lenient<WsChat>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WsChat {
    #[serde(deserialize_with = "loose_text")]
    id: Option<String>,
    #[serde(deserialize_with = "loose_text")]
    title: Option<String>,
    #[serde(deserialize_with = "loose_text")]
    status: Option<String>,
    settings: Option<Value>,
    #[serde(deserialize_with = "loose_time")]
    created_at: Option<DateTime<Utc>>,
    #[serde(deserialize_with = "loose_time")]
    updated_at: Option<DateTime<Utc>>,
    #[serde(deserialize_with = "loose_text")]
    leaf_id: Option<String>,
    messages: Vec<WsMessage>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WsMessage {
    #[serde(deserialize_with = "loose_text")]
    id: Option<String>,
    #[serde(deserialize_with = "loose_text")]
    parent_id: Option<String>,
    #[serde(deserialize_with = "loose_text")]
    role: Option<String>,
    #[serde(deserialize_with = "loose_text")]
    content: Option<String>,
    /// Absent in files exported before answers had reasoning.
    #[serde(deserialize_with = "loose_text")]
    reasoning: Option<String>,
    #[serde(deserialize_with = "loose_text")]
    status: Option<String>,
    #[serde(deserialize_with = "loose_text")]
    model_id: Option<String>,
    #[serde(deserialize_with = "loose_text")]
    model_name: Option<String>,
    #[serde(deserialize_with = "loose_time")]
    created_at: Option<DateTime<Utc>>,
}

/// Chat settings within the chat area's bounds, else none.
fn valid_settings(settings: Option<Value>) -> Option<Value> {
    let parsed: workspace_api::chat::ChatSettings = serde_json::from_value(settings?).ok()?;
    let unit = |v: Option<f64>| v.is_none_or(|v| (0.0..=1.0).contains(&v));
    let tokens = parsed.max_tokens.is_none_or(|m| (1..=32000).contains(&m));
    if unit(parsed.temperature) && unit(parsed.top_p) && tokens {
        serde_json::to_value(parsed).ok()
    } else {
        None
    }
}

fn workspace(chat: WsChat) -> RawChat {
    let nodes = chat
        .messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            let role = match m.role.as_deref().map(str::to_ascii_lowercase).as_deref() {
                Some("user") => Some(ChatRole::User),
                Some("model" | "assistant") => Some(ChatRole::Model),
                _ => None,
            };
            let status = match m.status.as_deref() {
                Some("failed") => ChatMessageStatus::Failed,
                Some("stopped" | "streaming") => ChatMessageStatus::Stopped,
                _ => ChatMessageStatus::Complete,
            };
            RawNode {
                id: node_id(m.id, i),
                parent: parent_of(m.parent_id),
                children: Vec::new(),
                thinking: None,
                message: role.map(|role| RawMessage {
                    role,
                    content: m.content.unwrap_or_default(),
                    reasoning: m.reasoning,
                    status,
                    created_at: m.created_at,
                    model_id: m.model_id.and_then(|id| Uuid::parse_str(&id).ok()),
                    model: m.model_name,
                }),
            }
        })
        .collect();
    let status = match chat.status.as_deref() {
        Some("ARCHIVED") => Some(ChatStatus::Archived),
        Some("DELETED") => Some(ChatStatus::Deleted),
        _ => Some(ChatStatus::Active),
    };
    RawChat {
        source_id: chat.id,
        title: chat.title,
        status,
        settings: valid_settings(chat.settings),
        created_at: chat.created_at,
        updated_at: chat.updated_at,
        nodes,
        leaf: chat.leaf_id,
    }
}

// ---- ChatGPT ----

#[derive(Deserialize, Default)]
#[serde(default)]
struct GptConversation {
    #[serde(deserialize_with = "loose_text")]
    title: Option<String>,
    #[serde(deserialize_with = "loose_time")]
    create_time: Option<DateTime<Utc>>,
    #[serde(deserialize_with = "loose_time")]
    update_time: Option<DateTime<Utc>>,
    mapping: serde_json::Map<String, Value>,
    #[serde(deserialize_with = "loose_text")]
    current_node: Option<String>,
    #[serde(deserialize_with = "loose_text")]
    conversation_id: Option<String>,
    #[serde(deserialize_with = "loose_text")]
    id: Option<String>,
    #[serde(deserialize_with = "loose_bool")]
    is_archived: bool,
    #[serde(deserialize_with = "loose_text")]
    default_model_slug: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct GptNode {
    #[serde(deserialize_with = "loose_text")]
    id: Option<String>,
    message: Option<GptMessage>,
    #[serde(deserialize_with = "loose_text")]
    parent: Option<String>,
    children: Vec<Value>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct GptMessage {
    author: GptAuthor,
    #[serde(deserialize_with = "loose_time")]
    create_time: Option<DateTime<Utc>>,
    content: GptContent,
    metadata: GptMetadata,
    #[serde(deserialize_with = "loose_text")]
    recipient: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct GptAuthor {
    #[serde(deserialize_with = "loose_text")]
    role: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct GptContent {
    #[serde(deserialize_with = "loose_text")]
    content_type: Option<String>,
    parts: Vec<Value>,
    #[serde(deserialize_with = "loose_text")]
    text: Option<String>,
    /// Of a `thoughts` message: `[{summary, content}]`.
    thoughts: Value,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct GptMetadata {
    #[serde(deserialize_with = "loose_text")]
    model_slug: Option<String>,
    #[serde(deserialize_with = "loose_bool")]
    is_visually_hidden_from_conversation: bool,
}

/// The text of a ChatGPT message people saw, or `None` for what they
/// did not (tool calls, hidden context, reasoning: `thoughts`, read by
/// [`chatgpt_thoughts`], and `reasoning_recap`, a line such as "Thought
/// for 12 seconds").
fn chatgpt_text(content: &GptContent) -> Option<String> {
    match content.content_type.as_deref().unwrap_or("text") {
        "text" | "multimodal_text" => {
            let parts: Vec<String> = content
                .parts
                .iter()
                .filter_map(|p| match p {
                    Value::String(s) => Some(s.clone()),
                    Value::Object(o) => match o.get("text") {
                        Some(Value::String(t)) => Some(t.clone()),
                        _ => Some(format!(
                            "[{}]",
                            o.get("content_type")
                                .and_then(Value::as_str)
                                .unwrap_or("attachment")
                        )),
                    },
                    _ => None,
                })
                .collect();
            Some(parts.join("\n"))
        }
        "code" => content.text.clone(),
        _ => None,
    }
}

/// The text of a reasoning model's `thoughts` message: each thought's
/// summary (in bold, as ChatGPT shows it) and content, joined by blank
/// lines; `None` when there is none.
fn chatgpt_thoughts(thoughts: &Value) -> Option<String> {
    let Value::Array(thoughts) = thoughts else {
        return None;
    };
    let mut pieces = Vec::new();
    for thought in thoughts {
        let field = |k: &str| {
            thought
                .get(k)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|t| !t.is_empty())
        };
        if let Some(summary) = field("summary") {
            pieces.push(format!("**{summary}**"));
        }
        if let Some(content) = field("content") {
            pieces.push(content.to_string());
        }
    }
    (!pieces.is_empty()).then(|| pieces.join("\n\n"))
}

/// A ChatGPT message as a message to keep (what people saw), or as the
/// thinking of a left-out node (a `thoughts` message), or neither.
fn chatgpt_message(
    m: GptMessage,
    default_model: &Option<String>,
) -> (Option<RawMessage>, Option<String>) {
    let role = match m.author.role.as_deref() {
        Some("user") => ChatRole::User,
        Some("assistant") => ChatRole::Model,
        _ => return (None, None),
    };
    if role == ChatRole::Model && m.content.content_type.as_deref() == Some("thoughts") {
        return (None, chatgpt_thoughts(&m.content.thoughts));
    }
    let to_people = m.recipient.as_deref().is_none_or(|r| r == "all");
    if m.metadata.is_visually_hidden_from_conversation || !to_people {
        return (None, None);
    }
    let Some(content) = chatgpt_text(&m.content) else {
        return (None, None);
    };
    let model = match role {
        ChatRole::Model => m.metadata.model_slug.or_else(|| default_model.clone()),
        ChatRole::User => None,
    };
    let message = RawMessage {
        model,
        ..complete(role, content, m.create_time)
    };
    (Some(message), None)
}

fn chatgpt(c: GptConversation) -> RawChat {
    let default_model = c.default_model_slug;
    let nodes = c
        .mapping
        .into_iter()
        .map(|(key, value)| {
            // A node of the wrong shape is a node without a message.
            let node: GptNode = serde_json::from_value(value).unwrap_or_default();
            let (message, thinking) = match node.message {
                Some(m) => chatgpt_message(m, &default_model),
                None => (None, None),
            };
            RawNode {
                id: node.id.filter(|i| *i == key).unwrap_or(key),
                parent: parent_of(node.parent),
                children: node.children.into_iter().filter_map(text_of).collect(),
                message,
                thinking,
            }
        })
        .collect();
    RawChat {
        source_id: c.conversation_id.or(c.id),
        title: c.title,
        status: archived(c.is_archived),
        settings: None,
        created_at: c.create_time,
        updated_at: c.update_time,
        nodes,
        leaf: c.current_node,
    }
}

// ---- Open WebUI ----

#[derive(Deserialize, Default)]
#[serde(default)]
struct OwuiEntry {
    #[serde(deserialize_with = "loose_text")]
    id: Option<String>,
    #[serde(deserialize_with = "loose_text")]
    title: Option<String>,
    chat: OwuiChat,
    #[serde(deserialize_with = "loose_time")]
    created_at: Option<DateTime<Utc>>,
    #[serde(deserialize_with = "loose_time")]
    updated_at: Option<DateTime<Utc>>,
    #[serde(deserialize_with = "loose_bool")]
    archived: bool,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct OwuiChat {
    #[serde(deserialize_with = "loose_text")]
    title: Option<String>,
    history: OwuiHistory,
    messages: Vec<OwuiMessage>,
    #[serde(deserialize_with = "loose_time")]
    timestamp: Option<DateTime<Utc>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct OwuiHistory {
    messages: serde_json::Map<String, Value>,
    #[serde(rename = "currentId", deserialize_with = "loose_text")]
    current_id: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct OwuiMessage {
    #[serde(deserialize_with = "loose_text")]
    id: Option<String>,
    #[serde(rename = "parentId", deserialize_with = "loose_text")]
    parent_id: Option<String>,
    #[serde(rename = "childrenIds")]
    children_ids: Vec<Value>,
    #[serde(deserialize_with = "loose_text")]
    role: Option<String>,
    content: Value,
    #[serde(deserialize_with = "loose_time")]
    timestamp: Option<DateTime<Utc>>,
    #[serde(deserialize_with = "loose_text")]
    model: Option<String>,
    #[serde(rename = "modelName", deserialize_with = "loose_text")]
    model_name: Option<String>,
}

/// Text, or the text parts of a list of content parts (`{type: "text",
/// text}`, LibreChat's `{text: {value}}`), joined by blank lines.
fn parts_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.clone()),
                Value::Object(o) => {
                    let kind = o.get("type").and_then(Value::as_str).unwrap_or("text");
                    if kind != "text" {
                        return None;
                    }
                    match o.get("text") {
                        Some(Value::String(t)) => Some(t.clone()),
                        Some(Value::Object(t)) => {
                            t.get("value").and_then(Value::as_str).map(str::to_string)
                        }
                        _ => None,
                    }
                }
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n\n"),
        _ => String::new(),
    }
}

fn openwebui_node(m: OwuiMessage, key: Option<String>, position: usize) -> RawNode {
    let role = match m.role.as_deref() {
        Some("user") => Some(ChatRole::User),
        Some("assistant") => Some(ChatRole::Model),
        _ => None,
    };
    RawNode {
        id: node_id(m.id.or(key), position),
        parent: parent_of(m.parent_id),
        children: m.children_ids.into_iter().filter_map(text_of).collect(),
        thinking: None,
        message: role.map(|role| {
            let text = parts_text(&m.content);
            let (content, reasoning) = match role {
                ChatRole::Model => openwebui_reasoning(text),
                ChatRole::User => (text, None),
            };
            RawMessage {
                model: match role {
                    ChatRole::Model => m.model.or(m.model_name),
                    ChatRole::User => None,
                },
                reasoning,
                ..complete(role, content, m.timestamp)
            }
        }),
    }
}

fn openwebui(e: OwuiEntry) -> RawChat {
    let history = e.chat.history;
    let nodes: Vec<RawNode> = if history.messages.is_empty() {
        e.chat
            .messages
            .into_iter()
            .enumerate()
            .map(|(i, m)| openwebui_node(m, None, i))
            .collect()
    } else {
        history
            .messages
            .into_iter()
            .enumerate()
            .map(|(i, (key, value))| {
                let m: OwuiMessage = serde_json::from_value(value).unwrap_or_default();
                openwebui_node(m, Some(key), i)
            })
            .collect()
    };
    RawChat {
        source_id: e.id,
        title: e.title.or(e.chat.title),
        status: archived(e.archived),
        settings: None,
        created_at: e.created_at.or(e.chat.timestamp),
        updated_at: e.updated_at,
        nodes,
        leaf: history.current_id,
    }
}

// ---- Claude ----

#[derive(Deserialize, Default)]
#[serde(default)]
struct ClaudeConversation {
    #[serde(deserialize_with = "loose_text")]
    uuid: Option<String>,
    #[serde(deserialize_with = "loose_text")]
    name: Option<String>,
    #[serde(deserialize_with = "loose_time")]
    created_at: Option<DateTime<Utc>>,
    #[serde(deserialize_with = "loose_time")]
    updated_at: Option<DateTime<Utc>>,
    #[serde(deserialize_with = "loose_text")]
    model: Option<String>,
    chat_messages: Vec<ClaudeMessage>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ClaudeMessage {
    #[serde(deserialize_with = "loose_text")]
    uuid: Option<String>,
    #[serde(deserialize_with = "loose_text")]
    sender: Option<String>,
    #[serde(deserialize_with = "loose_text")]
    text: Option<String>,
    content: Value,
    #[serde(deserialize_with = "loose_time")]
    created_at: Option<DateTime<Utc>>,
    #[serde(deserialize_with = "loose_text")]
    parent_message_uuid: Option<String>,
}

fn claude(c: ClaudeConversation) -> RawChat {
    // Without any parent, the messages are one branch in order.
    let linked = c
        .chat_messages
        .iter()
        .any(|m| m.parent_message_uuid.is_some());
    let mut previous: Option<String> = None;
    let mut nodes = Vec::with_capacity(c.chat_messages.len());
    for (i, m) in c.chat_messages.into_iter().enumerate() {
        let id = node_id(m.uuid, i);
        let parent = if linked {
            parent_of(m.parent_message_uuid)
        } else {
            previous.replace(id.clone())
        };
        let role = match m.sender.as_deref() {
            Some("human") => Some(ChatRole::User),
            Some("assistant") => Some(ChatRole::Model),
            _ => None,
        };
        let text = m.text.filter(|t| !t.is_empty());
        // With thinking blocks, the text blocks are the answer (whatever
        // the `text` field made of the others).
        let reasoning = typed_parts(&m.content, "thinking", "thinking", str::trim);
        let from_blocks = reasoning
            .as_ref()
            .map(|_| parts_text(&m.content))
            .filter(|t| !t.is_empty());
        let content = from_blocks
            .or(text)
            .unwrap_or_else(|| parts_text(&m.content));
        nodes.push(RawNode {
            id,
            parent,
            children: Vec::new(),
            thinking: None,
            message: role.map(|role| RawMessage {
                model: match role {
                    ChatRole::Model => c.model.clone(),
                    ChatRole::User => None,
                },
                reasoning: reasoning.filter(|_| role == ChatRole::Model),
                ..complete(role, content, m.created_at)
            }),
        });
    }
    RawChat {
        source_id: c.uuid,
        title: c.name,
        status: None,
        settings: None,
        created_at: c.created_at,
        updated_at: c.updated_at,
        nodes,
        leaf: None,
    }
}

// ---- LibreChat ----

#[derive(Deserialize, Default)]
#[serde(default)]
struct LibreConversation {
    #[serde(rename = "conversationId", deserialize_with = "loose_text")]
    conversation_id: Option<String>,
    #[serde(deserialize_with = "loose_text")]
    title: Option<String>,
    #[serde(deserialize_with = "loose_text")]
    model: Option<String>,
    #[serde(rename = "createdAt", deserialize_with = "loose_time")]
    created_at: Option<DateTime<Utc>>,
    #[serde(rename = "updatedAt", deserialize_with = "loose_time")]
    updated_at: Option<DateTime<Utc>>,
    messages: Vec<LibreMessage>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct LibreMessage {
    #[serde(rename = "messageId", deserialize_with = "loose_text")]
    message_id: Option<String>,
    #[serde(rename = "parentMessageId", deserialize_with = "loose_text")]
    parent_message_id: Option<String>,
    #[serde(deserialize_with = "loose_text")]
    sender: Option<String>,
    #[serde(rename = "isCreatedByUser")]
    is_created_by_user: Option<Value>,
    #[serde(deserialize_with = "loose_text")]
    text: Option<String>,
    content: Value,
    #[serde(deserialize_with = "loose_text")]
    model: Option<String>,
    #[serde(rename = "createdAt", deserialize_with = "loose_time")]
    created_at: Option<DateTime<Utc>>,
    /// The tree form of an export: replies nested in their parent.
    children: Vec<LibreMessage>,
}

fn librechat(c: LibreConversation) -> RawChat {
    let mut nodes = Vec::new();
    // (message, the enclosing message's id in the tree form)
    let mut stack: Vec<(LibreMessage, Option<String>)> =
        c.messages.into_iter().rev().map(|m| (m, None)).collect();
    while let Some((mut m, enclosing)) = stack.pop() {
        let id = node_id(m.message_id.take(), nodes.len());
        for child in std::mem::take(&mut m.children).into_iter().rev() {
            stack.push((child, Some(id.clone())));
        }
        let by_user = match &m.is_created_by_user {
            Some(Value::Bool(b)) => *b,
            _ => m
                .sender
                .as_deref()
                .is_some_and(|s| s.eq_ignore_ascii_case("user")),
        };
        let role = if by_user {
            ChatRole::User
        } else {
            ChatRole::Model
        };
        let text = m.text.filter(|t| !t.is_empty());
        let content = text.unwrap_or_else(|| parts_text(&m.content));
        let (content, reasoning) = match role {
            ChatRole::Model => librechat_reasoning(content, &m.content),
            ChatRole::User => (content, None),
        };
        nodes.push(RawNode {
            id,
            parent: parent_of(m.parent_message_id).or(enclosing),
            children: Vec::new(),
            thinking: None,
            message: Some(RawMessage {
                model: match role {
                    ChatRole::Model => m.model.or_else(|| c.model.clone()),
                    ChatRole::User => None,
                },
                reasoning,
                ..complete(role, content, m.created_at)
            }),
        });
    }
    RawChat {
        source_id: c.conversation_id,
        title: c.title,
        status: None,
        settings: None,
        created_at: c.created_at,
        updated_at: c.updated_at,
        nodes,
        leaf: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_of(r: Result<ParsedFile, Error>) -> String {
        match r {
            Err(Error::InvalidRequest { code, .. }) => code.to_string(),
            Err(other) => format!("{other:?}"),
            Ok(f) => format!("ok {:?}", f.format),
        }
    }

    #[test]
    fn formats_are_recognised_by_their_shape() {
        let cases = [
            (r#"[{"title":"t","mapping":{}}]"#, ChatImportSource::Chatgpt),
            (
                r#"[{"id":"1","chat":{"history":{"messages":{}}}}]"#,
                ChatImportSource::Openwebui,
            ),
            (
                r#"[{"uuid":"1","chat_messages":[]}]"#,
                ChatImportSource::Claude,
            ),
            (
                r#"{"conversationId":"c","messages":[]}"#,
                ChatImportSource::Librechat,
            ),
            (
                r#"{"format":"workspace.chat.v1","chats":[{"messages":[]}]}"#,
                ChatImportSource::Workspace,
            ),
        ];
        for (text, format) in cases {
            let parsed = parse(text.as_bytes(), ChatImportFormat::Auto).unwrap();
            assert_eq!(parsed.format, format, "{text}");
            assert_eq!(parsed.entries.len(), 1);
        }
    }

    #[test]
    fn other_files_are_refused_with_a_code() {
        let auto = ChatImportFormat::Auto;
        assert_eq!(
            code_of(parse(b"[1, 2]", auto)),
            "unrecognized_import_format"
        );
        assert_eq!(
            code_of(parse(br#"{"a": 1}"#, auto)),
            "unrecognized_import_format"
        );
        assert_eq!(
            code_of(parse(b"\"text\"", auto)),
            "unrecognized_import_format"
        );
        assert_eq!(
            code_of(parse(
                br#"{"format":"workspace.account-export","chats":[]}"#,
                auto
            )),
            "unrecognized_import_format"
        );
        assert_eq!(code_of(parse(b"not json", auto)), "invalid_import_file");
        assert_eq!(code_of(parse(b"[]", auto)), "empty_import");
        assert_eq!(
            code_of(parse(br#"[{"mapping":{}}]"#, ChatImportFormat::Claude)),
            "unrecognized_import_format"
        );
        // Deep nesting is refused as such wherever it sits: at the top, in
        // a part a format reads, in a part it would skip, for any format
        // asked for; brackets inside strings do not count.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(code_of(parse(deep.as_bytes(), auto)), "invalid_import_file");
        for format in [auto, ChatImportFormat::Claude, ChatImportFormat::Workspace] {
            let skipped = format!(
                r#"[{{"mapping":{{}},"ignored":{}{}}}]"#,
                "{\"a\":".repeat(200),
                "}".repeat(200)
            );
            assert_eq!(
                code_of(parse(skipped.as_bytes(), format)),
                "invalid_import_file",
                "{format:?}"
            );
        }
        let at_the_limit = format!(
            r#"[{{"mapping":{{}},"ignored":{}1{}, "t": "{}"}}]"#,
            "[".repeat(MAX_NESTING - 2),
            "]".repeat(MAX_NESTING - 2),
            "[".repeat(1_000)
        );
        assert_ne!(
            code_of(parse(at_the_limit.as_bytes(), auto)),
            "invalid_import_file"
        );
        let deep_title = format!(
            r#"[{{"mapping":{{}},"title":{}{}}}]"#,
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        assert_eq!(
            code_of(parse(deep_title.as_bytes(), auto)),
            "invalid_import_file"
        );
    }

    #[test]
    fn a_broken_entry_spoils_only_itself() {
        let text = r#"[{"title":"good","mapping":{"a":{"message":{"author":{"role":"user"},"content":{"parts":["hi"]}}}}},
                       {"title":"bad","mapping":{"a":{"children":"nope"}},"is_archived":"x","create_time":{}},
                       {"title":7,"mapping":[]},
                       {"other":1}]"#;
        let parsed = parse(text.as_bytes(), ChatImportFormat::Auto).unwrap();
        assert_eq!(parsed.entries.len(), 4);
        assert!(matches!(parsed.entries[0], Entry::Chat(_)));
        // A node of the wrong shape is a node without a message.
        assert!(matches!(parsed.entries[1], Entry::Chat(_)));
        assert!(
            matches!(&parsed.entries[2], Entry::Invalid { message, title, .. } if message.contains("cannot be read") && title.as_deref() == Some("7"))
        );
        assert!(
            matches!(&parsed.entries[3], Entry::Invalid { message, .. } if message.contains("not a chat"))
        );
    }

    /// The messages of the file's first chat: (content, reasoning), with
    /// the thinking of left-out nodes as ("", thinking).
    fn read_one(text: &str) -> Vec<(String, Option<String>)> {
        let parsed = parse(text.as_bytes(), ChatImportFormat::Auto).unwrap();
        let Some(Entry::Chat(chat)) = parsed.entries.into_iter().next() else {
            panic!("a chat");
        };
        chat.nodes
            .into_iter()
            .filter_map(|n| match (n.message, n.thinking) {
                (Some(m), _) => Some((m.content, m.reasoning)),
                (None, Some(t)) => Some((String::new(), Some(t))),
                (None, None) => None,
            })
            .collect()
    }

    fn pair(content: &str, reasoning: Option<&str>) -> (String, Option<String>) {
        (content.to_string(), reasoning.map(str::to_string))
    }

    #[test]
    fn chatgpt_thoughts_are_thinking_and_the_recap_is_left_out() {
        let text = r#"[{"mapping":{
            "1q":{"id":"1q","parent":null,"message":{"author":{"role":"user"},"content":{"content_type":"text","parts":["Why?"]}}},
            "2t":{"id":"2t","parent":"1q","message":{"author":{"role":"assistant"},"content":{"content_type":"thoughts","thoughts":[{"summary":"Looking","content":"Because."},{"summary":"","content":"Sure."}]}}},
            "3r":{"id":"3r","parent":"2t","message":{"author":{"role":"assistant"},"content":{"content_type":"reasoning_recap","content":"Thought for 2 seconds"}}},
            "4a":{"id":"4a","parent":"3r","message":{"author":{"role":"assistant"},"content":{"content_type":"text","parts":["Because."]}}}}}]"#;
        assert_eq!(
            read_one(text),
            [
                pair("Why?", None),
                pair("", Some("**Looking**\n\nBecause.\n\nSure.")),
                pair("Because.", None)
            ]
        );
    }

    #[test]
    fn open_webui_reasoning_blocks_leave_the_content() {
        let (content, reasoning) = openwebui_reasoning(
            "<details type=\"reasoning\" done=\"true\" duration=\"3\">\n<summary>Thought for 3 \
             seconds</summary>\n&gt; a &lt;b&gt; &amp;amp;\n&gt; \n&gt; c\n</details>\n\
             <details type=\"tool_calls\" done=\"true\">x</details>\nAnswer\n\
             <details type=\"reasoning\" done=\"true\">\n<summary>S</summary>\n> d\n</details>\nMore"
                .to_string(),
        );
        assert_eq!(
            content,
            "<details type=\"tool_calls\" done=\"true\">x</details>\nAnswer\n\nMore"
        );
        assert_eq!(reasoning.as_deref(), Some("a <b> &amp;\n\nc\n\nd"));
        let (content, reasoning) = openwebui_reasoning("<think>\nhm\n</think>\n\nYes".into());
        assert_eq!(
            (content.as_str(), reasoning.as_deref()),
            ("Yes", Some("hm"))
        );
        let plain = "  <details>\nkept</details> text\n".to_string();
        assert_eq!(openwebui_reasoning(plain.clone()), (plain, None));
    }

    #[test]
    fn claude_thinking_blocks_and_librechat_think_parts_are_reasoning() {
        let claude = r#"[{"uuid":"c","chat_messages":[
            {"sender":"human","text":"Hi","content":[{"type":"text","text":"Hi"}]},
            {"sender":"assistant","text":"placeholder","content":[{"type":"thinking","thinking":"Greet back."},{"type":"text","text":"Hello!"}]}]}]"#;
        assert_eq!(
            read_one(claude),
            [pair("Hi", None), pair("Hello!", Some("Greet back."))]
        );
        let libre = r#"{"conversationId":"l","messages":[
            {"messageId":"1","isCreatedByUser":true,"text":"Hi"},
            {"messageId":"2","parentMessageId":"1","isCreatedByUser":false,"text":"","content":[{"type":"think","think":"<think>Plan.</think>"},{"type":"text","text":"Hello!"}]},
            {"messageId":"3","parentMessageId":"2","isCreatedByUser":false,"text":":::thinking\nOld.\n:::\nHey."}]}"#;
        assert_eq!(
            read_one(libre),
            [
                pair("Hi", None),
                pair("Hello!", Some("Plan.")),
                pair("Hey.", Some("Old."))
            ]
        );
    }

    #[test]
    fn times_are_read_loosely() {
        let t = |v: Value| time_of(&v).map(|t| t.to_rfc3339());
        assert_eq!(
            t(json_num(1_700_000_000.5)),
            Some("2023-11-14T22:13:20.500+00:00".into())
        );
        assert_eq!(
            t(json_num(1_700_000_000_000.0)),
            Some("2023-11-14T22:13:20+00:00".into())
        );
        assert_eq!(
            t(Value::String("2024-03-01T10:00:00.123456Z".into())),
            Some("2024-03-01T10:00:00.123456+00:00".into())
        );
        assert_eq!(
            t(Value::String("2024-03-01 10:00:00".into())),
            Some("2024-03-01T10:00:00+00:00".into())
        );
        assert_eq!(t(Value::Bool(true)), None);
        assert_eq!(t(json_num(-5.0)), None);
    }

    fn json_num(n: f64) -> Value {
        serde_json::json!(n)
    }
}
