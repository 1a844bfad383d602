//! A fake OpenAI-compatible `/audio/transcriptions` service on 127.0.0.1:
//! it reads the real `multipart/form-data` request (parsed with `multer`,
//! the parser of hyper-based servers), records its fields and answers
//! `{"text": ...}` like OpenAI does.

use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One received transcription request.
#[derive(Clone, Debug, Default)]
pub struct TranscriptionRequest {
    pub path: String,
    pub authorization: Option<String>,
    /// Text fields (`model`, `language`, `response_format`).
    pub fields: Vec<(String, String)>,
    pub file_name: Option<String>,
    pub file_type: Option<String>,
    pub file: Vec<u8>,
}

impl TranscriptionRequest {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

pub struct FakeTranscriber {
    pub addr: std::net::SocketAddr,
    pub requests: Arc<Mutex<Vec<TranscriptionRequest>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeTranscriber {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeTranscriber {
    /// Answers every request with `text`, or with `status` 500 when
    /// `fail` is set.
    pub async fn start(text: &str, fail: bool) -> FakeTranscriber {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let requests: Arc<Mutex<Vec<TranscriptionRequest>>> = Default::default();
        let shared = requests.clone();
        let text = text.to_string();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let shared = shared.clone();
                let text = text.clone();
                tokio::spawn(async move {
                    let _ = serve(socket, shared, &text, fail).await;
                });
            }
        });
        FakeTranscriber {
            addr,
            requests,
            task,
        }
    }

    /// The API root to configure (`.../v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn requests(&self) -> Vec<TranscriptionRequest> {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

async fn serve(
    mut socket: TcpStream,
    requests: Arc<Mutex<Vec<TranscriptionRequest>>>,
    text: &str,
    fail: bool,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let header_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        let n = socket.read(&mut tmp).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
    let mut lines = head.split("\r\n");
    let path = lines
        .next()
        .unwrap_or("")
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let length: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[header_end + 4..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut tmp).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&tmp[..n]);
    }
    let mut request = TranscriptionRequest {
        path,
        authorization: header("authorization"),
        ..Default::default()
    };
    let parsed = async {
        let boundary = multer::parse_boundary(header("content-type").unwrap_or_default())
            .map_err(|e| e.to_string())?;
        let data = bytes::Bytes::from(body);
        let stream = futures::stream::once(async move { Ok::<_, std::io::Error>(data) });
        let mut form = multer::Multipart::new(stream, boundary);
        while let Some(field) = form.next_field().await.map_err(|e| e.to_string())? {
            let name = field.name().unwrap_or_default().to_string();
            if name == "file" {
                request.file_name = field.file_name().map(str::to_string);
                request.file_type = field.content_type().map(|m| m.to_string());
                request.file = field.bytes().await.map_err(|e| e.to_string())?.to_vec();
            } else {
                let value = field.text().await.map_err(|e| e.to_string())?;
                request.fields.push((name, value));
            }
        }
        Ok::<_, String>(())
    }
    .await;
    let (status, answer) = match (&parsed, fail) {
        (Err(e), _) => (400, serde_json::json!({"error": {"message": e}})),
        (Ok(()), true) => (500, serde_json::json!({"error": {"message": "boom"}})),
        (Ok(()), false) => (200, serde_json::json!({"text": text})),
    };
    requests
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(request);
    let body = answer.to_string();
    let response = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(response.as_bytes()).await?;
    socket.flush().await
}
