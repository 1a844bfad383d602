//! From the nodes a file gives to the rows of a chat tree: new ids, each
//! kept message under its nearest kept ancestor, the tree columns of
//! `migrations/V34__chat_tree.sql` (`depth`, `sibling_index`, `children`,
//! `on_path`, `selected_at`, the chat's `leaf_id` and `roots`), and the
//! checks a file can fail (duplicate ids, parents outside the chat,
//! cycles, depth, message size). Every walk is iterative and linear in the
//! number of nodes: no input can make it recurse or loop.
//!
//! Reasoning: an answer keeps its own (a file's thinking, read apart from
//! the content by [`super::formats`]) and the thinking of the left-out
//! nodes right above it (ChatGPT's `thoughts` nodes, see
//! [`RawNode::thinking`]), cut to [`REASONING_MAX_BYTES`]; a question
//! keeps none.

use crate::app::answer::REASONING_MAX_BYTES;
use crate::db::datastore::chat_transfer::{NewImportedChat, NewImportedMessage};
use crate::db::enums::{ChatMessageStatus, ChatRole, ChatStatus};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use std::collections::HashMap;
use uuid::Uuid;
use workspace_api::chat_transfer::{
    ChatImportSource, IMPORT_MAX_DEPTH, IMPORT_MAX_MESSAGE_BYTES, ImportSkipReason,
};

/// The title of an imported chat without one.
pub const UNTITLED: &str = "Imported chat";
/// Longest title, in characters.
const TITLE_MAX_CHARS: usize = crate::app::TITLE_MAX_CHARS;
/// Longest model name or source id kept in a message's metadata.
const NAME_MAX_CHARS: usize = 200;

/// A chat as a file gives it.
#[derive(Debug, Default)]
pub struct RawChat {
    pub source_id: Option<String>,
    pub title: Option<String>,
    pub status: Option<ChatStatus>,
    pub settings: Option<Value>,
    pub created_at: Option<DateTime<Utc>>,
    pub updated_at: Option<DateTime<Utc>>,
    /// In the file's order.
    pub nodes: Vec<RawNode>,
    /// The node the active path ends at, if the file says.
    pub leaf: Option<String>,
}

/// A node of a file's tree: a message to keep, or one left out (a system
/// or tool message, a hidden one, an empty node) whose children follow
/// its nearest kept ancestor.
#[derive(Debug, Default)]
pub struct RawNode {
    pub id: String,
    /// `None`: a first message.
    pub parent: Option<String>,
    /// The order of its children, when the file gives one (others follow
    /// in the file's order).
    pub children: Vec<String>,
    pub message: Option<RawMessage>,
    /// On a node left out: thinking it showed (ChatGPT's `thoughts`),
    /// which becomes part of the reasoning of the first answer below it
    /// reached through left-out nodes only (a question in between ends
    /// it; of several such answers, the first in the tree's order takes
    /// it).
    pub thinking: Option<String>,
}

#[derive(Debug)]
pub struct RawMessage {
    pub role: ChatRole,
    pub content: String,
    /// The model's thinking, apart from the content (an answer's only).
    pub reasoning: Option<String>,
    pub status: ChatMessageStatus,
    pub created_at: Option<DateTime<Utc>>,
    /// Kept when it is one of this service's models.
    pub model_id: Option<Uuid>,
    /// The model's name in the file.
    pub model: Option<String>,
}

/// Why a chat is not imported.
#[derive(Debug)]
pub struct Skip {
    pub reason: ImportSkipReason,
    pub message: String,
}

fn skip(reason: ImportSkipReason, message: impl Into<String>) -> Skip {
    Skip {
        reason,
        message: message.into(),
    }
}

fn broken(message: impl Into<String>) -> Skip {
    skip(ImportSkipReason::BrokenTree, message)
}

/// A chat ready to store, and how many nodes were left out.
pub struct Built {
    pub chat: NewImportedChat,
    pub left_out: u32,
}

/// A parent id that names no message: absent, empty, or the root
/// sentinels of Claude (`00000000-0000-4000-8000-000000000000`) and
/// LibreChat (the nil UUID).
pub fn no_parent(id: &str) -> bool {
    id.is_empty()
        || id == "00000000-0000-4000-8000-000000000000"
        || id == "00000000-0000-0000-0000-000000000000"
}

/// A title cut to [`TITLE_MAX_CHARS`] characters without control
/// characters, or [`UNTITLED`].
pub fn clean_title(title: Option<&str>) -> String {
    let spaced: String = title
        .unwrap_or("")
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let cut: String = spaced.trim().chars().take(TITLE_MAX_CHARS).collect();
    let cut = cut.trim_end();
    if cut.is_empty() {
        UNTITLED.to_string()
    } else {
        cut.to_string()
    }
}

fn short(text: &str) -> String {
    text.chars().take(NAME_MAX_CHARS).collect()
}

/// Builds the chat's rows from `raw`, as of `now`.
pub fn build(raw: RawChat, source: ChatImportSource, now: DateTime<Utc>) -> Result<Built, Skip> {
    let n = raw.nodes.len();
    // Ids, each once.
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(n);
    for (i, node) in raw.nodes.iter().enumerate() {
        if index.insert(node.id.as_str(), i).is_some() {
            return Err(broken(format!(
                "two messages have the id {:?}",
                short(&node.id)
            )));
        }
    }
    // Parents inside the chat.
    let mut parent: Vec<Option<usize>> = Vec::with_capacity(n);
    for node in &raw.nodes {
        match node.parent.as_deref() {
            None => parent.push(None),
            Some(p) => match index.get(p) {
                Some(&j) => parent.push(Some(j)),
                None => {
                    return Err(broken(format!(
                        "message {:?} names a parent that is not in the chat ({:?})",
                        short(&node.id),
                        short(p)
                    )));
                }
            },
        }
    }
    // Children in order: the file's explicit order first, then the file's
    // order of the nodes.
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut placed = vec![false; n];
    for (i, node) in raw.nodes.iter().enumerate() {
        for child in &node.children {
            if let Some(&j) = index.get(child.as_str())
                && parent[j] == Some(i)
                && !placed[j]
            {
                placed[j] = true;
                children[i].push(j);
            }
        }
    }
    let mut roots = Vec::new();
    for j in 0..n {
        match parent[j] {
            None => roots.push(j),
            Some(p) if !placed[j] => children[p].push(j),
            Some(_) => {}
        }
    }
    // Preorder from the first messages; a node never reached is in (or
    // under) a cycle of parents.
    let mut order: Vec<usize> = Vec::with_capacity(n);
    let mut stack: Vec<usize> = roots.iter().rev().copied().collect();
    while let Some(i) = stack.pop() {
        order.push(i);
        stack.extend(children[i].iter().rev());
    }
    if order.len() != n {
        let mut seen = vec![false; n];
        for &i in &order {
            seen[i] = true;
        }
        let stray = (0..n).find(|&i| !seen[i]).unwrap_or(0);
        return Err(broken(format!(
            "the parents of message {:?} form a cycle",
            short(&raw.nodes[stray].id)
        )));
    }

    // Kept messages: each under its nearest kept ancestor (parents come
    // first in preorder, so theirs is known).
    let kept = |i: usize| raw.nodes[i].message.is_some();
    let mut kept_above: Vec<Option<usize>> = vec![None; n];
    for &i in &order {
        kept_above[i] = parent[i].and_then(|p| if kept(p) { Some(p) } else { kept_above[p] });
    }
    let kept_order: Vec<usize> = order.iter().copied().filter(|&i| kept(i)).collect();
    if kept_order.is_empty() {
        return Err(skip(
            ImportSkipReason::NoMessages,
            "the chat has no user or assistant message",
        ));
    }
    let left_out = (n - kept_order.len()) as u32;

    // Sizes, depths, positions among siblings, children counts.
    let mut depth = vec![0usize; n];
    let mut position = vec![0i32; n];
    let mut child_count = vec![0i32; n];
    let mut last_child: Vec<Option<usize>> = vec![None; n];
    let mut root_count = 0i32;
    for &i in &kept_order {
        let message = raw.nodes[i].message.as_ref().map(|m| m.content.len());
        if message.unwrap_or(0) > IMPORT_MAX_MESSAGE_BYTES {
            return Err(skip(
                ImportSkipReason::MessageTooLarge,
                format!(
                    "message {:?} is larger than {IMPORT_MAX_MESSAGE_BYTES} bytes",
                    short(&raw.nodes[i].id)
                ),
            ));
        }
        match kept_above[i] {
            None => {
                root_count += 1;
                position[i] = root_count;
            }
            Some(p) => {
                depth[i] = depth[p] + 1;
                child_count[p] += 1;
                position[i] = child_count[p];
                last_child[p] = Some(i);
            }
        }
        if depth[i] > IMPORT_MAX_DEPTH {
            return Err(skip(
                ImportSkipReason::TooDeep,
                format!("the chat is deeper than {IMPORT_MAX_DEPTH} messages"),
            ));
        }
    }

    // Times: the file's, never later than now; a message without one
    // takes its parent's (or the chat's).
    let clamp = |t: DateTime<Utc>| t.min(now);
    let first_time = kept_order
        .iter()
        .filter_map(|&i| raw.nodes[i].message.as_ref().and_then(|m| m.created_at))
        .min();
    let chat_created = clamp(raw.created_at.or(first_time).unwrap_or(now));
    let mut time = vec![chat_created; n];
    for &i in &kept_order {
        let own = raw.nodes[i].message.as_ref().and_then(|m| m.created_at);
        let inherited = kept_above[i].map(|p| time[p]).unwrap_or(chat_created);
        time[i] = clamp(own.unwrap_or(inherited));
    }
    let last_time = kept_order.iter().map(|&i| time[i]).max();
    let chat_updated = clamp(
        raw.updated_at
            .or(last_time)
            .unwrap_or(chat_created)
            .max(chat_created),
    );

    // The leaf: the file's (its nearest kept ancestor when it was left
    // out), else the newest message; continued to the newest child until
    // a message without children.
    let named = raw
        .leaf
        .as_deref()
        .and_then(|l| index.get(l).copied())
        .and_then(|i| if kept(i) { Some(i) } else { kept_above[i] });
    let mut leaf = match named {
        Some(i) => i,
        None => {
            // The newest; among equals, the last in the tree's order.
            let mut best = kept_order[0];
            for &i in &kept_order {
                if time[i] >= time[best] {
                    best = i;
                }
            }
            best
        }
    };
    while let Some(c) = last_child[leaf] {
        leaf = c;
    }
    let mut on_path = vec![false; n];
    let mut at = Some(leaf);
    while let Some(i) = at {
        on_path[i] = true;
        at = kept_above[i];
    }

    let ids: Vec<Uuid> = (0..n).map(|_| Uuid::new_v4()).collect();
    // Off the path, a message was last selected when it was written; the
    // path was selected now (so that switching descends along it).
    let before_now = now - chrono::Duration::milliseconds(1);
    let mut messages = Vec::with_capacity(kept_order.len());
    let mut nodes = raw.nodes;
    hand_down_thinking(&mut nodes, &order, &parent);
    for &i in &kept_order {
        let node = std::mem::take(&mut nodes[i]);
        let Some(message) = node.message else {
            continue;
        };
        let model = message.model.as_deref().map(short);
        let mut metadata = json!({ "imported_from": source_name(source) });
        if let Some(model) = &model {
            metadata["model"] = Value::String(model.clone());
        }
        if !node.id.starts_with('#') {
            metadata["source_id"] = Value::String(short(&node.id));
        }
        messages.push(NewImportedMessage {
            id: ids[i],
            parent_id: kept_above[i].map(|p| ids[p]),
            role: message.role,
            content: message.content.replace('\0', ""),
            reasoning: match message.role {
                ChatRole::Model => message.reasoning.and_then(bounded_reasoning),
                ChatRole::User => None,
            },
            status: message.status,
            model_id: message.model_id,
            model_name: model,
            metadata,
            created_at: time[i],
            depth: depth[i] as i32,
            sibling_index: position[i],
            children: child_count[i],
            on_path: on_path[i],
            selected_at: if on_path[i] {
                now
            } else {
                time[i].min(before_now)
            },
        });
    }
    Ok(Built {
        chat: NewImportedChat {
            id: Uuid::new_v4(),
            title: clean_title(raw.title.as_deref()),
            status: raw.status.unwrap_or(ChatStatus::Active),
            settings: raw.settings,
            created_at: chat_created,
            updated_at: chat_updated,
            leaf_id: Some(ids[leaf]),
            roots: root_count,
            messages,
        },
        left_out,
    })
}

/// Gives the thinking of left-out nodes (see [`RawNode::thinking`]) to
/// the answers below them: each answer's reasoning becomes the thinking
/// above it, top first, then its own, joined by blank lines. `order` is a
/// preorder of the nodes (parents first). Linear: a node's thinking is
/// taken once, and a walk up stops at thinking already taken (everything
/// above it was taken with it).
fn hand_down_thinking(nodes: &mut [RawNode], order: &[usize], parent: &[Option<usize>]) {
    let n = nodes.len();
    // The nearest left-out node with thinking at or above each left-out
    // node, in its run of left-out nodes; for such a node, the next one
    // above it in the run.
    let mut nearest: Vec<Option<usize>> = vec![None; n];
    let mut next_up: Vec<Option<usize>> = vec![None; n];
    for &i in order {
        let above = parent[i]
            .filter(|&p| nodes[p].message.is_none())
            .and_then(|p| nearest[p]);
        let Some(message) = nodes[i].message.as_ref() else {
            if nodes[i].thinking.as_ref().is_some_and(|t| !t.is_empty()) {
                next_up[i] = above;
                nearest[i] = Some(i);
            } else {
                nearest[i] = above;
            }
            continue;
        };
        if message.role != ChatRole::Model {
            continue;
        }
        let mut taken = Vec::new();
        let mut at = above;
        while let Some(j) = at {
            let Some(text) = nodes[j].thinking.take() else {
                break;
            };
            taken.push(text);
            at = next_up[j];
        }
        if taken.is_empty() {
            continue;
        }
        taken.reverse();
        let own = nodes[i].message.as_mut().and_then(|m| m.reasoning.take());
        taken.extend(own.filter(|t| !t.trim().is_empty()));
        if let Some(message) = nodes[i].message.as_mut() {
            message.reasoning = Some(taken.join("\n\n"));
        }
    }
}

/// Reasoning as an answer stores it: without NUL characters, at most
/// [`REASONING_MAX_BYTES`] (cut at a character boundary), none when it is
/// blank.
pub fn bounded_reasoning(mut text: String) -> Option<String> {
    if text.contains('\0') {
        text = text.replace('\0', "");
    }
    if text.len() > REASONING_MAX_BYTES {
        let end = text.floor_char_boundary(REASONING_MAX_BYTES);
        text.truncate(end);
    }
    (!text.trim().is_empty()).then_some(text)
}

/// The format's name as `metadata.imported_from` says it.
pub fn source_name(source: ChatImportSource) -> &'static str {
    match source {
        ChatImportSource::Workspace => "workspace",
        ChatImportSource::Chatgpt => "chatgpt",
        ChatImportSource::Openwebui => "openwebui",
        ChatImportSource::Claude => "claude",
        ChatImportSource::Librechat => "librechat",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(role: ChatRole, content: &str) -> Option<RawMessage> {
        Some(RawMessage {
            role,
            content: content.to_string(),
            reasoning: None,
            status: ChatMessageStatus::Complete,
            created_at: None,
            model_id: None,
            model: None,
        })
    }

    fn node(id: &str, parent: Option<&str>, m: Option<RawMessage>) -> RawNode {
        RawNode {
            id: id.to_string(),
            parent: parent.map(str::to_string),
            children: Vec::new(),
            message: m,
            thinking: None,
        }
    }

    fn chat(nodes: Vec<RawNode>, leaf: Option<&str>) -> RawChat {
        RawChat {
            nodes,
            leaf: leaf.map(str::to_string),
            ..Default::default()
        }
    }

    fn built(raw: RawChat) -> NewImportedChat {
        build(raw, ChatImportSource::Chatgpt, Utc::now())
            .map_err(|s| s.message)
            .unwrap()
            .chat
    }

    fn contents(chat: &NewImportedChat) -> Vec<&str> {
        chat.messages.iter().map(|m| m.content.as_str()).collect()
    }

    fn path(chat: &NewImportedChat) -> Vec<&str> {
        let mut p: Vec<&NewImportedMessage> = chat.messages.iter().filter(|m| m.on_path).collect();
        p.sort_by_key(|m| m.depth);
        p.iter().map(|m| m.content.as_str()).collect()
    }

    #[test]
    fn left_out_nodes_hand_their_children_to_the_nearest_kept_ancestor() {
        let c = built(chat(
            vec![
                node("root", None, None),
                node("sys", Some("root"), None),
                node("q", Some("sys"), message(ChatRole::User, "q")),
                node("tool", Some("q"), None),
                node("a1", Some("tool"), message(ChatRole::Model, "a1")),
                node("a2", Some("q"), message(ChatRole::Model, "a2")),
            ],
            Some("a1"),
        ));
        assert_eq!(contents(&c), ["q", "a1", "a2"]);
        let q = &c.messages[0];
        assert_eq!((q.parent_id, q.depth, q.children), (None, 0, 2));
        assert_eq!(c.messages[1].parent_id, Some(q.id));
        assert_eq!(
            (c.messages[1].sibling_index, c.messages[2].sibling_index),
            (1, 2)
        );
        assert_eq!(path(&c), ["q", "a1"]);
        assert_eq!(c.leaf_id, Some(c.messages[1].id));
        assert_eq!(c.roots, 1);
    }

    #[test]
    fn explicit_children_order_wins_and_a_leaf_continues_to_the_newest_child() {
        let mut q = node("q", None, message(ChatRole::User, "q"));
        q.children = vec!["b".into(), "a".into()];
        let c = built(chat(
            vec![
                q,
                node("a", Some("q"), message(ChatRole::Model, "a")),
                node("b", Some("q"), message(ChatRole::Model, "b")),
            ],
            Some("q"),
        ));
        assert_eq!(contents(&c), ["q", "b", "a"]);
        assert_eq!(path(&c), ["q", "a"]);
    }

    #[test]
    fn cycles_dangling_parents_and_duplicates_are_reported() {
        let cycle = chat(
            vec![
                node("q", None, message(ChatRole::User, "q")),
                node("x", Some("y"), message(ChatRole::User, "x")),
                node("y", Some("x"), message(ChatRole::User, "y")),
            ],
            None,
        );
        let e = build(cycle, ChatImportSource::Chatgpt, Utc::now())
            .err()
            .unwrap();
        assert_eq!(e.reason, ImportSkipReason::BrokenTree);
        assert!(e.message.contains("cycle"), "{}", e.message);
        let dangling = chat(
            vec![node("x", Some("nope"), message(ChatRole::User, "x"))],
            None,
        );
        let e = build(dangling, ChatImportSource::Chatgpt, Utc::now())
            .err()
            .unwrap();
        assert!(e.message.contains("not in the chat"), "{}", e.message);
        let twice = chat(
            vec![
                node("x", None, message(ChatRole::User, "x")),
                node("x", None, message(ChatRole::User, "x")),
            ],
            None,
        );
        let e = build(twice, ChatImportSource::Chatgpt, Utc::now())
            .err()
            .unwrap();
        assert!(e.message.contains("two messages"), "{}", e.message);
        let empty = chat(vec![node("r", None, None)], None);
        let e = build(empty, ChatImportSource::Chatgpt, Utc::now())
            .err()
            .unwrap();
        assert_eq!(e.reason, ImportSkipReason::NoMessages);
    }

    #[test]
    fn a_long_chain_is_bounded_without_recursion() {
        let n = IMPORT_MAX_DEPTH + 2;
        let nodes: Vec<RawNode> = (0..n)
            .map(|i| {
                let parent = (i > 0).then(|| (i - 1).to_string());
                node(
                    &i.to_string(),
                    parent.as_deref(),
                    message(ChatRole::User, "m"),
                )
            })
            .collect();
        let e = build(chat(nodes, None), ChatImportSource::Chatgpt, Utc::now())
            .err()
            .unwrap();
        assert_eq!(e.reason, ImportSkipReason::TooDeep);
    }

    fn thinking(id: &str, parent: &str, text: &str) -> RawNode {
        RawNode {
            thinking: Some(text.to_string()),
            ..node(id, Some(parent), None)
        }
    }

    fn reasoning(chat: &NewImportedChat) -> Vec<Option<&str>> {
        chat.messages
            .iter()
            .map(|m| m.reasoning.as_deref())
            .collect()
    }

    #[test]
    fn thinking_of_left_out_nodes_goes_to_the_first_answer_below() {
        let mut own = message(ChatRole::Model, "a2");
        if let Some(m) = own.as_mut() {
            m.reasoning = Some("own".into());
        }
        let c = built(chat(
            vec![
                node("q", None, message(ChatRole::User, "q")),
                thinking("t1", "q", "first"),
                node("recap", Some("t1"), None),
                node("call", Some("recap"), None),
                thinking("t2", "call", "second"),
                node("a", Some("t2"), message(ChatRole::Model, "a")),
                // A second answer under the same thinking: already taken.
                node("b", Some("t2"), message(ChatRole::Model, "b")),
                // A question between the thinking and an answer ends it.
                thinking("t3", "a", "lost"),
                node("q2", Some("t3"), message(ChatRole::User, "q2")),
                node("a2", Some("q2"), own),
            ],
            Some("a2"),
        ));
        assert_eq!(contents(&c), ["q", "a", "q2", "a2", "b"]);
        assert_eq!(
            reasoning(&c),
            [None, Some("first\n\nsecond"), None, Some("own"), None]
        );
        // The left-out nodes are counted as before; the answers sit under
        // their nearest kept ancestors.
        assert_eq!(c.messages[1].parent_id, Some(c.messages[0].id));
        assert_eq!(c.messages[4].parent_id, Some(c.messages[0].id));
        assert_eq!(c.messages[2].parent_id, Some(c.messages[1].id));
    }

    #[test]
    fn reasoning_is_bounded_at_a_character_boundary() {
        let long = format!("x{}", "é".repeat(REASONING_MAX_BYTES));
        let cut = bounded_reasoning(long).unwrap();
        assert!(cut.len() <= REASONING_MAX_BYTES && cut.len() > REASONING_MAX_BYTES - 2);
        assert!(cut.starts_with("xé"));
        assert_eq!(bounded_reasoning("a\0b".into()).as_deref(), Some("ab"));
        assert_eq!(bounded_reasoning(" \n".into()), None);
        // A question keeps no reasoning.
        let mut q = message(ChatRole::User, "q");
        if let Some(m) = q.as_mut() {
            m.reasoning = Some("no".into());
        }
        let c = built(chat(vec![node("q", None, q)], None));
        assert_eq!(reasoning(&c), [None]);
    }

    #[test]
    fn titles_are_cleaned() {
        assert_eq!(clean_title(None), UNTITLED);
        assert_eq!(clean_title(Some(" \n ")), UNTITLED);
        assert_eq!(clean_title(Some("a\nb\0")), "a b");
        assert_eq!(clean_title(Some(&"x".repeat(300))).chars().count(), 200);
    }
}
