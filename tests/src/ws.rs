//! The chat WebSocket (`GET /api/chat/ws`) from a test or a benchmark:
//! a ticket, the connection, the next JSON message.

use futures::StreamExt;
use serde_json::Value;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;
use uuid::Uuid;

pub type Ws = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

/// A single-use ticket for `user_token`'s WebSocket in `org`, from the
/// instance at `base` (`http://host:port`).
pub async fn ticket(base: &str, token: &str, org: Uuid) -> String {
    let response = reqwest::Client::new()
        .post(format!("{base}/api/chat/ws_ticket"))
        .bearer_auth(token)
        .query(&[("org_id", org.to_string())])
        .send()
        .await
        .expect("ws_ticket");
    assert_eq!(response.status().as_u16(), 201, "ws_ticket");
    let body: Value = response.json().await.expect("ws_ticket body");
    body["ticket"].as_str().expect("ticket").to_string()
}

/// Opens the WebSocket of the instance at `base` with `ticket`.
pub async fn open(base: &str, org: Uuid, ticket: &str) -> Ws {
    let addr = base.trim_start_matches("http://");
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let url = format!("ws://{addr}/api/chat/ws?org_id={org}&ticket={ticket}");
    let (ws, response) = tokio_tungstenite::client_async(url, stream)
        .await
        .expect("websocket handshake");
    assert_eq!(response.status().as_u16(), 101);
    ws
}

/// The next JSON message; `None` when the socket closed or `wait` passed.
pub async fn next(ws: &mut Ws, wait: Duration) -> Option<Value> {
    loop {
        match tokio::time::timeout(wait, ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => {
                return Some(serde_json::from_str(&t).expect("a JSON message"));
            }
            Ok(Some(Ok(Message::Close(_)))) | Ok(None) | Ok(Some(Err(_))) | Err(_) => return None,
            Ok(Some(Ok(_))) => continue,
        }
    }
}

/// Reads until the server closes the socket and returns the close code
/// (`None`: closed without a close frame, or `wait` passed).
pub async fn close_code(ws: &mut Ws, wait: Duration) -> Option<u16> {
    let read = async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Close(frame))) => return frame.map(|f| u16::from(f.code)),
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return None,
            }
        }
    };
    tokio::time::timeout(wait, read).await.ok().flatten()
}
