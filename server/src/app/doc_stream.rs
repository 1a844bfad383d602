//! Documents streamed as they are read (the account export, the chat
//! exports): a writer task serialises one page at a time into chunks of
//! about [`CHUNK_BYTES`] and hands them to the response through a channel
//! of [`CHUNKS_IN_FLIGHT`]; it waits while the client has not read them,
//! so the server holds at most one page and a few chunks of a document,
//! whatever its size. A failure part-way ends the response with an error
//! (the client sees an aborted body, not a shorter document).

use crate::error::Error;
use bytes::Bytes;
use serde::Serialize;
use tokio::sync::mpsc;

/// The size a chunk is sent at.
const CHUNK_BYTES: usize = 64 * 1024;
/// Chunks waiting for the client at most.
const CHUNKS_IN_FLIGHT: usize = 4;

type Chunk = Result<Bytes, std::io::Error>;

/// Why writing stopped early.
pub enum Stop {
    /// The client went away: nothing more to do.
    ClientGone,
    Failed(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Failed(e)
    }
}

/// Collects text into chunks of about [`CHUNK_BYTES`] for the response.
pub struct Writer {
    buffer: String,
    tx: mpsc::Sender<Chunk>,
}

impl Writer {
    pub fn push(&mut self, text: &str) {
        self.buffer.push_str(text);
    }

    /// Sends the buffer once it is a chunk's worth (waiting while the
    /// client has not read the chunks before it).
    pub async fn flush_full(&mut self) -> Result<(), Stop> {
        if self.buffer.len() >= CHUNK_BYTES {
            self.flush().await?;
        }
        Ok(())
    }

    pub async fn flush(&mut self) -> Result<(), Stop> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::take(&mut self.buffer));
        self.tx.send(Ok(chunk)).await.map_err(|_| Stop::ClientGone)
    }

    /// Adds an item of an array (a comma before all but the first).
    pub async fn item(&mut self, first: &mut bool, text: &str) -> Result<(), Stop> {
        if !std::mem::take(first) {
            self.push(",");
        }
        self.push(text);
        self.flush_full().await
    }
}

pub fn json(value: &impl Serialize) -> Result<String, Error> {
    serde_json::to_string(value).map_err(Error::internal)
}

/// `value` serialised with its last field, the empty array `field`, left
/// open: `{..., "field":[`.
pub fn opened(value: &impl Serialize, field: &str) -> Result<String, Error> {
    let mut text = json(value)?;
    let end = format!("\"{field}\":[]}}");
    if !text.ends_with(&end) {
        return Err(Error::internal(format!(
            "the document's `{field}` is not the last field"
        )));
    }
    text.truncate(text.len() - 2);
    Ok(text)
}

/// A `200` whose body is what `write` writes into the [`Writer`] it is
/// given, which starts with `head`; `write` runs as a task of its own.
/// `log` gets a warning when it fails part-way.
pub fn response<F, Fut>(
    content_type: &str,
    filename: &str,
    head: String,
    log: slog::Logger,
    write: F,
) -> Result<http::Response<dropshot::Body>, Error>
where
    F: FnOnce(Writer) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = (Writer, Result<(), Stop>)> + Send + 'static,
{
    let (tx, rx) = mpsc::channel::<Chunk>(CHUNKS_IN_FLIGHT);
    let mut out = Writer {
        buffer: String::new(),
        tx,
    };
    out.push(&head);
    crate::telemetry::spawn(async move {
        let (out, result) = write(out).await;
        match result {
            Ok(()) | Err(Stop::ClientGone) => {}
            Err(Stop::Failed(e)) => {
                slog::warn!(log, "a streamed document failed part-way; ending its response";
                    "error" => %e);
                // The client sees an aborted body, not a shorter document.
                let _ = out
                    .tx
                    .send(Err(std::io::Error::other("the document failed")))
                    .await;
            }
        }
    });
    let frames = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|chunk| (chunk.map(hyper::body::Frame::data), rx))
    });
    http::Response::builder()
        .status(http::StatusCode::OK)
        .header(http::header::CONTENT_TYPE, content_type)
        .header(
            http::header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{filename}\""),
        )
        .header(http::header::CACHE_CONTROL, "no-store")
        .body(dropshot::Body::wrap(http_body_util::StreamBody::new(
            frames,
        )))
        .map_err(Error::internal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_opened_object_ends_in_its_array() {
        #[derive(Serialize)]
        struct T {
            a: u8,
            list: Vec<u8>,
        }
        assert_eq!(
            opened(&T { a: 1, list: vec![] }, "list").unwrap(),
            "{\"a\":1,\"list\":["
        );
        #[derive(Serialize)]
        struct Wrong {
            list: Vec<u8>,
            a: u8,
        }
        assert!(opened(&Wrong { list: vec![], a: 1 }, "list").is_err());
    }
}
