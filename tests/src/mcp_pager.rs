//! A tiny MCP server (streamable HTTP, JSON answers, no authentication) on
//! 127.0.0.1 with one paginated tool, `list_messages`: each page carries
//! `nextPageToken` and `resultSizeEstimate` as Gmail-style APIs do (in
//! `structuredContent` and as the JSON text content), the last page none.
//! It records the arguments of every call.

use crate::strict_oauth::{Reply, json, read_request, write_reply};
use serde_json::{Value, json as j};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// The pages: (the `pageToken` that asks for it, messages, next token).
const PAGES: &[(Option<&str>, &[&str], Option<&str>)] = &[
    (None, &["m1", "m2"], Some("page-2")),
    (Some("page-2"), &["m3", "m4"], Some("page-3")),
    (Some("page-3"), &["m5"], None),
];

/// The total `resultSizeEstimate` of every page.
pub const PAGER_ESTIMATE: i64 = 5;

/// A request's JSON-RPC method and `traceparent` header.
pub type Traced = (String, Option<String>);

pub struct McpPager {
    pub addr: SocketAddr,
    calls: Arc<Mutex<Vec<Value>>>,
    /// Every request's JSON-RPC method with its `traceparent` header.
    traces: Arc<Mutex<Vec<Traced>>>,
    task: tokio::task::JoinHandle<()>,
}

impl McpPager {
    pub async fn start() -> McpPager {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding the MCP pager");
        let addr = listener.local_addr().expect("address");
        let calls = Arc::new(Mutex::new(Vec::new()));
        let traces = Arc::new(Mutex::new(Vec::new()));
        let (shared, shared_traces) = (calls.clone(), traces.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let calls = shared.clone();
                let traces = shared_traces.clone();
                tokio::spawn(async move {
                    if let Some(request) = read_request(&mut socket).await {
                        let method = serde_json::from_slice::<Value>(&request.body)
                            .ok()
                            .and_then(|v| v["method"].as_str().map(str::to_string))
                            .unwrap_or_default();
                        traces
                            .lock()
                            .expect("traces")
                            .push((method, request.headers.get("traceparent").cloned()));
                        let reply = handle(&calls, &request.method, &request.body);
                        write_reply(&mut socket, reply).await;
                    }
                });
            }
        });
        McpPager {
            addr,
            calls,
            traces,
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Every request so far: its JSON-RPC method (empty for a `GET` or a
    /// `DELETE`) and its `traceparent` header.
    pub fn traces(&self) -> Vec<Traced> {
        self.traces.lock().expect("traces").clone()
    }

    /// The arguments of every `list_messages` call so far.
    pub fn calls(&self) -> Vec<Value> {
        self.calls.lock().expect("calls").clone()
    }
}

impl Drop for McpPager {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn handle(calls: &Mutex<Vec<Value>>, method: &str, body: &[u8]) -> Reply {
    if method != "POST" {
        return Reply {
            status: 405,
            headers: Vec::new(),
            body: Vec::new(),
        };
    }
    let request: Value = serde_json::from_slice(body).unwrap_or_default();
    let Some(id) = request.get("id").cloned() else {
        // A notification.
        return Reply {
            status: 202,
            headers: Vec::new(),
            body: Vec::new(),
        };
    };
    let result = match request["method"].as_str().unwrap_or_default() {
        "initialize" => j!({
            "protocolVersion": request["params"]["protocolVersion"].as_str().unwrap_or("2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "pager", "version": "1"},
        }),
        "tools/list" => j!({"tools": [{
            "name": "list_messages",
            "description": "Lists the mailbox's messages, a page at a time.",
            "inputSchema": {"type": "object", "properties": {
                "pageToken": {"type": "string", "description": "The page to read (from nextPageToken)"},
                "label": {"type": "string"},
            }},
        }]}),
        "tools/call" => {
            let args = request["params"]["arguments"].clone();
            calls.lock().expect("calls").push(args.clone());
            let token = args["pageToken"].as_str();
            match PAGES.iter().find(|(t, _, _)| *t == token) {
                Some((_, messages, next)) => {
                    let mut page = j!({
                        "messages": messages,
                        "resultSizeEstimate": PAGER_ESTIMATE,
                    });
                    if let Some(next) = next {
                        page["nextPageToken"] = (*next).into();
                    }
                    j!({
                        "content": [{"type": "text", "text": page.to_string()}],
                        "structuredContent": page,
                        "isError": false,
                    })
                }
                None => j!({
                    "content": [{"type": "text", "text": "unknown pageToken"}],
                    "isError": true,
                }),
            }
        }
        "ping" => j!({}),
        other => {
            return json(
                200,
                j!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("no method {other}")}}),
            );
        }
    };
    json(200, j!({"jsonrpc": "2.0", "id": id, "result": result}))
}
