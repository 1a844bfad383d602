//! Typed fixtures: the tools, categories, agents, knowledge bases,
//! deployments and conversations tests need, created
//! through the generated client, so that a fixture's request is checked
//! against the contract (its JSON body must be the operation's request
//! type) and its answer is typed.

use serde_json::Value;
use uuid::Uuid;
use workspace_client::{Client, types};

/// A client acting for the holder of `token` on the instance at
/// `base_url`.
pub fn client_for(base_url: &str, token: &str) -> Client {
    Client::authenticated(base_url, token).expect("a client")
}

/// The id of the model named `name` offered to `org`.
pub async fn model_id(client: &Client, org: Uuid, name: &str) -> Uuid {
    let models = client
        .models_list()
        .org_id(org)
        .send()
        .await
        .expect("models/list")
        .into_inner();
    models
        .iter()
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("no model {name} in {models:?}"))
        .id
}

/// The id of the offline model, offered to every organization.
pub async fn offline_model(client: &Client, org: Uuid) -> Uuid {
    client
        .models_list()
        .org_id(org)
        .send()
        .await
        .expect("models/list")
        .into_inner()
        .into_iter()
        .find(|m| m.provider == "offline")
        .expect("the offline model is offered")
        .id
}

/// The request body of `value`, as the operation's request type.
fn body<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("not a valid request body ({e}): {value}"))
}

/// Creates a tool category named `name`; its id.
pub async fn category(client: &Client, org: Uuid, name: &str) -> Uuid {
    client
        .tools_create_category()
        .org_id(org)
        .body(body::<types::CategoryCreate>(
            serde_json::json!({"name": name, "description": "d"}),
        ))
        .send()
        .await
        .expect("tools/create_category")
        .into_inner()
        .id
}

/// Creates a tool from a `ToolCreate` body; its id.
pub async fn tool(client: &Client, org: Uuid, tool: Value) -> Uuid {
    client
        .tools_create()
        .org_id(org)
        .body(body::<types::ToolCreate>(tool))
        .send()
        .await
        .expect("tools/create")
        .into_inner()
        .id
}

/// Creates an agent from an `AgentCreate` body; its id.
pub async fn agent(client: &Client, org: Uuid, agent: Value) -> Uuid {
    client
        .agents_create()
        .org_id(org)
        .body(body::<types::AgentCreate>(agent))
        .send()
        .await
        .expect("agents/create")
        .into_inner()
        .id
}

/// Creates a knowledge base from a `KbCreate` body.
pub async fn knowledge_base(client: &Client, org: Uuid, kb: Value) -> types::KbCreated {
    client
        .kb_create()
        .org_id(org)
        .body(body::<types::KbCreate>(kb))
        .send()
        .await
        .expect("kb/create")
        .into_inner()
}

/// Deploys an agent from a `DeploymentCreate` body (the answer carries
/// the key, shown once).
pub async fn deployment(
    client: &Client,
    agent: Uuid,
    deployment: Value,
) -> types::DeploymentWithKey {
    client
        .deployments_create()
        .agent_id(agent)
        .body(body::<types::DeploymentCreate>(deployment))
        .send()
        .await
        .expect("agent_deploy/create")
        .into_inner()
}

/// Creates a conversation from a `ConversationCreate` body.
pub async fn conversation(client: &Client, org: Uuid, conversation: Value) -> types::Conversation {
    client
        .conversation_create()
        .org_id(org)
        .body(body::<types::ConversationCreate>(conversation))
        .send()
        .await
        .expect("conversation/create")
        .into_inner()
}

/// An answered chat message: the chat it went to and the answer's events,
/// typed by the contract's `ChatStreamEvent`.
pub struct Answered {
    pub chat_id: Uuid,
    /// The question answered (`start.user_message_id`).
    pub question_id: Uuid,
    pub message_id: Uuid,
    pub events: Vec<types::ChatStreamEvent>,
}

impl Answered {
    /// The answer's text (its `content` events).
    pub fn text(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match e {
                types::ChatStreamEvent::Content(c) => Some(c.content.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// Sends a chat message from a `SendMessageRequest` body (a new chat
/// without `chat_id`) and reads the answer to its last event.
pub async fn chat_message(client: &Client, org: Uuid, message: Value) -> Answered {
    let stream = client
        .chat_send_message()
        .org_id(org)
        .body(body::<types::SendMessageRequest>(message))
        .send()
        .await
        .expect("chat/send_message")
        .into_inner();
    answered(stream).await
}

/// Edits a question from an `EditMessageRequest` body and reads the new
/// answer to its last event.
pub async fn chat_edit(client: &Client, org: Uuid, edit: Value) -> Answered {
    let stream = client
        .chat_edit_message()
        .org_id(org)
        .body(body::<types::EditMessageRequest>(edit))
        .send()
        .await
        .expect("chat/edit_message")
        .into_inner();
    answered(stream).await
}

/// Regenerates an answer from a `RegenerateRequest` body and reads the new
/// answer to its last event.
pub async fn chat_regenerate(client: &Client, org: Uuid, regenerate: Value) -> Answered {
    let stream = client
        .chat_regenerate()
        .org_id(org)
        .body(body::<types::RegenerateRequest>(regenerate))
        .send()
        .await
        .expect("chat/regenerate")
        .into_inner();
    answered(stream).await
}

/// Reads a chat answer's stream to its last event.
pub async fn answered(stream: workspace_client::ByteStream) -> Answered {
    let mut reader = workspace_client::sse::SseReader::from_byte_stream(stream);
    let mut events = Vec::new();
    while let Some(event) = reader.next().await {
        let event: types::ChatStreamEvent = event
            .expect("the answer's stream")
            .json()
            .expect("a ChatStreamEvent");
        let last = matches!(
            event,
            types::ChatStreamEvent::End(_) | types::ChatStreamEvent::Error(_)
        );
        events.push(event);
        if last {
            break;
        }
    }
    let Some(types::ChatStreamEvent::Start(start)) = events.first() else {
        panic!("the answer starts with `start`: {events:?}");
    };
    Answered {
        chat_id: start.chat_id,
        question_id: start.user_message_id,
        message_id: start.message_id,
        events,
    }
}
