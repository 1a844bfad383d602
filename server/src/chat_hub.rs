//! PostgreSQL `LISTEN` on one dedicated (not pooled) connection per
//! server instance, fanned out in process: the chat area's cross-instance
//! signals (new stream events, stop requests, WebSocket notices) arrive
//! here whichever instance sent them.
//!
//! Notifications can be lost while the connection is re-established, so
//! every subscriber also re-reads the database now and then (and when it
//! receives [`Notice::reconnected`]); a notification only says "look now".

use crate::db::datastore::chat::{LIVE_CHANNEL, STOP_CHANNEL, STREAM_CHANNEL};
use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;

/// One notification.
#[derive(Clone, Debug)]
pub struct Notice {
    pub channel: String,
    pub payload: String,
}

impl Notice {
    /// Sent after the listening connection was (re)established: something
    /// may have been missed.
    pub fn reconnected() -> Notice {
        Notice {
            channel: String::new(),
            payload: String::new(),
        }
    }
    pub fn is_reconnected(&self) -> bool {
        self.channel.is_empty()
    }
}

/// The in-process fan-out of this instance's `LISTEN` connection.
pub struct Hub {
    tx: broadcast::Sender<Notice>,
    connected: tokio::sync::watch::Sender<bool>,
}

impl Hub {
    pub fn subscribe(&self) -> broadcast::Receiver<Notice> {
        self.tx.subscribe()
    }

    /// Waits until the listener is connected (at most `timeout`).
    pub async fn ready(&self, timeout: Duration) -> bool {
        let mut rx = self.connected.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|c| *c))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Starts listening; the task reconnects (after a second) whenever the
    /// connection fails.
    pub fn start(
        url: String,
        tls: tokio_postgres_rustls::MakeRustlsConnect,
        log: slog::Logger,
    ) -> (Arc<Hub>, tokio::task::JoinHandle<()>) {
        let (tx, _) = broadcast::channel(4096);
        let (connected, _) = tokio::sync::watch::channel(false);
        let hub = Arc::new(Hub { tx, connected });
        let task = tokio::spawn(listen(hub.clone(), url, tls, log));
        (hub, task)
    }
}

async fn listen(
    hub: Arc<Hub>,
    url: String,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    log: slog::Logger,
) {
    loop {
        match tokio_postgres::connect(&url, tls.clone()).await {
            Err(e) => slog::warn!(log, "chat listener: connecting failed"; "error" => %e),
            Ok((client, mut connection)) => {
                let (ntx, mut nrx) = tokio::sync::mpsc::unbounded_channel();
                let driver = tokio::spawn(async move {
                    let mut messages =
                        futures::stream::poll_fn(move |cx| connection.poll_message(cx));
                    while let Some(message) = messages.next().await {
                        match message {
                            Ok(tokio_postgres::AsyncMessage::Notification(n)) => {
                                let _ = ntx.send(Notice {
                                    channel: n.channel().to_string(),
                                    payload: n.payload().to_string(),
                                });
                            }
                            Ok(_) => {}
                            Err(_) => break,
                        }
                    }
                });
                let listened = client
                    .batch_execute(&format!(
                        "LISTEN {STREAM_CHANNEL}; LISTEN {STOP_CHANNEL}; LISTEN {LIVE_CHANNEL}"
                    ))
                    .await;
                match listened {
                    Err(e) => slog::warn!(log, "chat listener: LISTEN failed"; "error" => %e),
                    Ok(()) => {
                        let _ = hub.connected.send_replace(true);
                        let _ = hub.tx.send(Notice::reconnected());
                        slog::debug!(log, "chat listener: listening");
                        while let Some(notice) = nrx.recv().await {
                            let _ = hub.tx.send(notice);
                        }
                        let _ = hub.connected.send_replace(false);
                        slog::warn!(log, "chat listener: connection lost; reconnecting");
                    }
                }
                driver.abort();
                drop(client);
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
