//! Typed fixtures: the tools, categories and agents tests need, created
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
