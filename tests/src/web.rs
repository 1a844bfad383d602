//! A small local web site for tests of web sources: fixed pages by path
//! (status, content type, body), HTTP/1.1 with `Connection: close`.
//! A gated site ([`Site::start_gated`]) holds its answers until a group of
//! requests has arrived, so that their documents finish together.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Clone)]
pub struct Page {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Page {
    pub fn ok(content_type: &str, body: impl Into<Vec<u8>>) -> Page {
        Page {
            status: 200,
            headers: vec![("Content-Type".into(), content_type.into())],
            body: body.into(),
        }
    }
    pub fn status(status: u16) -> Page {
        Page {
            status,
            headers: Vec::new(),
            body: format!("status {status}").into_bytes(),
        }
    }
    pub fn redirect(to: &str) -> Page {
        Page {
            status: 302,
            headers: vec![("Location".into(), to.into())],
            body: Vec::new(),
        }
    }
}

pub struct Site {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

/// Requests held until `size` of one group (the path's first segment)
/// have arrived, or `wait` has passed.
struct Gate {
    size: usize,
    wait: std::time::Duration,
    groups: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Barrier>>>,
}

impl Gate {
    async fn pass(&self, path: &str) {
        if path == "/robots.txt" {
            return;
        }
        let group = path.split('/').nth(1).unwrap_or_default().to_string();
        let barrier = self
            .groups
            .lock()
            .expect("gate")
            .entry(group)
            .or_insert_with(|| Arc::new(tokio::sync::Barrier::new(self.size)))
            .clone();
        let _ = tokio::time::timeout(self.wait, barrier.wait()).await;
    }
}

impl Site {
    pub async fn start(pages: Vec<(&str, Page)>) -> Site {
        Site::serve(pages, None).await
    }

    /// A site whose answers to paths `/<group>/…` are held until `size`
    /// requests of that group are waiting (at most `wait`), then all sent
    /// at once; `/robots.txt` is never held.
    pub async fn start_gated(
        pages: Vec<(&str, Page)>,
        size: usize,
        wait: std::time::Duration,
    ) -> Site {
        let gate = Gate {
            size,
            wait,
            groups: Default::default(),
        };
        Site::serve(pages, Some(Arc::new(gate))).await
    }

    async fn serve(pages: Vec<(&str, Page)>, gate: Option<Arc<Gate>>) -> Site {
        let pages: Arc<HashMap<String, Page>> = Arc::new(
            pages
                .into_iter()
                .map(|(p, page)| (p.to_string(), page))
                .collect(),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding the site");
        let addr = listener.local_addr().expect("address");
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let pages = pages.clone();
                let gate = gate.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&buf);
                    let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                    if let Some(gate) = &gate {
                        gate.pass(&path).await;
                    }
                    let page = pages
                        .get(&path)
                        .cloned()
                        .unwrap_or_else(|| Page::status(404));
                    let mut out = format!(
                        "HTTP/1.1 {} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                        page.status,
                        page.body.len()
                    );
                    for (k, v) in &page.headers {
                        out.push_str(&format!("{k}: {v}\r\n"));
                    }
                    out.push_str("\r\n");
                    let mut bytes = out.into_bytes();
                    bytes.extend_from_slice(&page.body);
                    let _ = socket.write_all(&bytes).await;
                    let _ = socket.shutdown().await;
                });
            }
        });
        Site { addr, task }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        self.task.abort();
    }
}
