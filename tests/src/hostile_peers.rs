//! Crafted upstreams on 127.0.0.1 for the hostile-upstream tests: an S3
//! bucket whose listing can be endless or hold keys no URL can name, which
//! answers a GET only for the exact key (the path decoded once, as S3
//! does), and an MCP server that answers every request with given bytes.
//! Neither checks signatures or credentials (the real peers do that).

use crate::strict_oauth::{Reply, read_request, write_reply};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// `%XX` escapes decoded once (nothing else: `+` stays `+`).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A crafted S3 bucket (path-style, any bucket name).
pub struct CraftedS3 {
    pub addr: SocketAddr,
    /// Listing requests received.
    pub lists: Arc<AtomicUsize>,
    /// Object keys requested by GET, decoded once.
    pub gets: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl CraftedS3 {
    /// Serves `objects` (key, body); with `endless`, every listing page
    /// is empty and says more follow (`IsTruncated`, a new token each time).
    pub async fn start(objects: Vec<(String, Vec<u8>)>, endless: bool) -> CraftedS3 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding the crafted S3");
        let addr = listener.local_addr().expect("address");
        let lists = Arc::new(AtomicUsize::new(0));
        let gets = Arc::new(Mutex::new(Vec::new()));
        let objects: Arc<HashMap<String, Vec<u8>>> = Arc::new(objects.into_iter().collect());
        let (l, g) = (lists.clone(), gets.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let (lists, gets, objects) = (l.clone(), g.clone(), objects.clone());
                tokio::spawn(async move {
                    let Some(r) = read_request(&mut socket).await else {
                        return;
                    };
                    let reply = answer(&r.path, &r.query, endless, &lists, &gets, &objects);
                    write_reply(&mut socket, reply).await;
                });
            }
        });
        CraftedS3 {
            addr,
            lists,
            gets,
            task,
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for CraftedS3 {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn xml(status: u16, body: String) -> Reply {
    Reply {
        status,
        headers: vec![("Content-Type".into(), "application/xml".into())],
        body: body.into_bytes(),
    }
}

fn answer(
    path: &str,
    query: &str,
    endless: bool,
    lists: &AtomicUsize,
    gets: &Mutex<Vec<String>>,
    objects: &HashMap<String, Vec<u8>>,
) -> Reply {
    // `/bucket` or `/bucket/` with a query: a listing.
    let rest = path.trim_start_matches('/');
    let (_, key) = rest.split_once('/').unwrap_or((rest, ""));
    if key.is_empty() && query.contains("list-type=2") {
        let n = lists.fetch_add(1, Ordering::SeqCst);
        if endless {
            return xml(
                200,
                format!(
                    "<ListBucketResult><Name>b</Name><KeyCount>0</KeyCount>\
                     <IsTruncated>true</IsTruncated>\
                     <NextContinuationToken>page-{}</NextContinuationToken></ListBucketResult>",
                    n + 1
                ),
            );
        }
        let mut keys: Vec<&String> = objects.keys().collect();
        keys.sort();
        let contents: String = keys
            .iter()
            .map(|k| {
                format!(
                    "<Contents><Key>{}</Key><Size>{}</Size></Contents>",
                    xml_escape(k),
                    objects[*k].len()
                )
            })
            .collect();
        return xml(
            200,
            format!(
                "<ListBucketResult><Name>b</Name>{contents}<IsTruncated>false</IsTruncated></ListBucketResult>"
            ),
        );
    }
    // An object: the key is the path after the bucket, decoded once.
    let decoded = percent_decode(key);
    gets.lock().expect("gets").push(decoded.clone());
    match objects.get(&decoded) {
        Some(body) => Reply {
            status: 200,
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body: body.clone(),
        },
        None => xml(
            404,
            "<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>"
                .to_string(),
        ),
    }
}

/// A crafted MCP server: every request is answered with `status`,
/// `content_type` and `body`.
pub struct CraftedMcp {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl CraftedMcp {
    pub async fn start(status: u16, content_type: &str, body: Vec<u8>) -> CraftedMcp {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding the crafted MCP server");
        let addr = listener.local_addr().expect("address");
        let content_type = content_type.to_string();
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let (content_type, body) = (content_type.clone(), body.clone());
                tokio::spawn(async move {
                    if read_request(&mut socket).await.is_none() {
                        return;
                    }
                    let reply = Reply {
                        status,
                        headers: vec![("Content-Type".into(), content_type)],
                        body,
                    };
                    write_reply(&mut socket, reply).await;
                });
            }
        });
        CraftedMcp { addr, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

impl Drop for CraftedMcp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A hostile web site on 127.0.0.1 for knowledge-base web sources
/// (`/robots.txt` answers 404 at once, so every path may be fetched):
/// - `/slow…`: a slow-loris page: its head at once, then one byte of an
///   endless HTML body every 200 ms;
/// - `/lie-close…`: `Content-Length: 100000`, 64 bytes of text, then the
///   connection closed;
/// - `/lie-open…`: the same 64 bytes, then the connection held open
///   (nothing more ever comes);
/// - anything else: 404.
///
/// Every connection ends within two minutes.
pub struct HostileSite {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl HostileSite {
    pub async fn start() -> HostileSite {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding the hostile site");
        let addr = listener.local_addr().expect("address");
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let Some(r) = read_request(&mut socket).await else {
                        return;
                    };
                    let serve = async {
                        if r.path.starts_with("/slow") {
                            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\
                                        Transfer-Encoding: chunked\r\n\r\n";
                            socket.write_all(head.as_bytes()).await?;
                            socket.write_all(b"6\r\n<html>\r\n").await?;
                            loop {
                                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                                socket.write_all(b"1\r\nx\r\n").await?;
                                socket.flush().await?;
                            }
                        } else if r.path.starts_with("/lie-") {
                            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\
                                        Content-Length: 100000\r\n\r\n";
                            socket.write_all(head.as_bytes()).await?;
                            socket.write_all(&[b'a'; 64]).await?;
                            socket.flush().await?;
                            if r.path.starts_with("/lie-open") {
                                std::future::pending::<()>().await;
                            }
                            Ok::<(), std::io::Error>(())
                        } else {
                            write_reply(
                                &mut socket,
                                Reply {
                                    status: 404,
                                    headers: vec![("Content-Type".into(), "text/plain".into())],
                                    body: b"not here".to_vec(),
                                },
                            )
                            .await;
                            Ok(())
                        }
                    };
                    let _ = tokio::time::timeout(std::time::Duration::from_secs(120), serve).await;
                });
            }
        });
        HostileSite { addr, task }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for HostileSite {
    fn drop(&mut self) {
        self.task.abort();
    }
}
