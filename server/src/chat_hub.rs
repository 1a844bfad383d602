//! PostgreSQL `LISTEN` on one dedicated (not pooled) connection per
//! server instance, fanned out in process: the cross-instance signals of
//! the chat area and conversations (new stream events and stop requests of
//! answers, WebSocket notices) and of memberships (a member's access in an
//! organization changed: their streams there re-check it) arrive here
//! whichever instance sent them.
//!
//! Notifications can be lost while the connection is re-established, so
//! every subscriber also re-reads the database now and then (and when it
//! receives [`Notice::reconnected`]); a notification only says "look now".

use crate::db::datastore::chat::{LIVE_CHANNEL, STOP_CHANNEL, STREAM_CHANNEL};
use crate::db::datastore::deletion::DELETION_JOBS_CHANNEL;
use crate::db::datastore::kb_jobs::KB_JOBS_CHANNEL;
use crate::db::datastore::organizations::MEMBERSHIP_CHANNEL;
use crate::db::datastore::webhooks::WEBHOOKS_CHANNEL;
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
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

/// The in-process fan-out of this instance's `LISTEN` connection, routed
/// by key so that a subscriber only wakes for its own notices: stream
/// events and stop requests by answer id, WebSocket and membership notices
/// by `<org_id>:<user_id>`.
pub struct Hub {
    routes: Mutex<Routes>,
    connected: tokio::sync::watch::Sender<bool>,
}

#[derive(Default)]
struct Routes {
    map: HashMap<(String, String), broadcast::Sender<Notice>>,
    /// The size at which routes without subscribers are dropped.
    prune_at: usize,
}

/// The routing key of a notification's payload.
fn key_of(channel: &str, payload: &str) -> Option<String> {
    match channel {
        STREAM_CHANNEL => payload.split_once(':').map(|(id, _)| id.to_string()),
        STOP_CHANNEL => Some(payload.to_string()),
        // Job wake-ups: one route, every idle worker.
        KB_JOBS_CHANNEL | DELETION_JOBS_CHANNEL | WEBHOOKS_CHANNEL => Some(String::new()),
        // `<org_id>:<user_id>`, sent by a trigger on `memberships`.
        MEMBERSHIP_CHANNEL => Some(payload.to_string()),
        LIVE_CHANNEL => {
            let mut parts = payload.splitn(3, ':');
            let org = parts.next()?;
            let user = parts.next()?;
            Some(format!("{org}:{user}"))
        }
        _ => None,
    }
}

/// The notices a route keeps for a subscriber that has not read them yet:
/// a broadcast channel allocates them all up front, and every answer being
/// generated holds a route for its stop requests (10,000 answers × 256 ×
/// ~80 bytes would be 200 MB). A subscriber that falls further behind gets
/// `Lagged` and re-reads the database, as after a reconnect; an answer
/// reads its stop route between every two events.
fn capacity(channel: &str) -> usize {
    match channel {
        // Held by every answer being generated, like stop requests; any
        // notice (or a lag) only means "re-check".
        STOP_CHANNEL | MEMBERSHIP_CHANNEL => 4,
        STREAM_CHANNEL => 16,
        _ => 256,
    }
}

impl Hub {
    /// The notices of `channel` with routing key `key` (see [`Hub`]), and
    /// [`Notice::reconnected`].
    pub fn subscribe(&self, channel: &str, key: &str) -> broadcast::Receiver<Notice> {
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        if routes.map.len() >= routes.prune_at {
            routes.map.retain(|_, tx| tx.receiver_count() > 0);
            routes.prune_at = (routes.map.len() * 2).max(1024);
        }
        routes
            .map
            .entry((channel.to_string(), key.to_string()))
            .or_insert_with(|| broadcast::channel(capacity(channel)).0)
            .subscribe()
    }

    fn dispatch(&self, notice: Notice) {
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        if notice.is_reconnected() {
            routes.map.retain(|_, tx| tx.send(notice.clone()).is_ok());
            return;
        }
        let Some(key) = key_of(&notice.channel, &notice.payload) else {
            return;
        };
        let route = (notice.channel.clone(), key);
        if let Some(tx) = routes.map.get(&route)
            && tx.send(notice).is_err()
        {
            // Nobody listens any more.
            routes.map.remove(&route);
        }
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
        let (connected, _) = tokio::sync::watch::channel(false);
        let hub = Arc::new(Hub {
            routes: Mutex::new(Routes::default()),
            connected,
        });
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
                        "LISTEN {STREAM_CHANNEL}; LISTEN {STOP_CHANNEL}; LISTEN {LIVE_CHANNEL}; \
                         LISTEN {KB_JOBS_CHANNEL}; LISTEN {DELETION_JOBS_CHANNEL}; \
                         LISTEN {MEMBERSHIP_CHANNEL}; LISTEN {WEBHOOKS_CHANNEL}"
                    ))
                    .await;
                match listened {
                    Err(e) => slog::warn!(log, "chat listener: LISTEN failed"; "error" => %e),
                    Ok(()) => {
                        let _ = hub.connected.send_replace(true);
                        hub.dispatch(Notice::reconnected());
                        slog::debug!(log, "chat listener: listening");
                        while let Some(notice) = nrx.recv().await {
                            hub.dispatch(notice);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_are_routed_by_key() {
        assert_eq!(key_of(STREAM_CHANNEL, "m1:7").as_deref(), Some("m1"));
        assert_eq!(key_of(STOP_CHANNEL, "m1").as_deref(), Some("m1"));
        assert_eq!(
            key_of(LIVE_CHANNEL, "o:u:{\"a\":1}").as_deref(),
            Some("o:u")
        );
        assert_eq!(key_of(LIVE_CHANNEL, "o"), None);
        assert_eq!(key_of(MEMBERSHIP_CHANNEL, "o:u").as_deref(), Some("o:u"));
        assert_eq!(key_of("other", "x"), None);
    }

    #[tokio::test]
    async fn subscribers_get_their_own_notices_only() {
        let (connected, _) = tokio::sync::watch::channel(false);
        let hub = Hub {
            routes: Mutex::new(Routes::default()),
            connected,
        };
        let mut a = hub.subscribe(STOP_CHANNEL, "a");
        let mut b = hub.subscribe(STOP_CHANNEL, "b");
        let notice = |p: &str| Notice {
            channel: STOP_CHANNEL.to_string(),
            payload: p.to_string(),
        };
        hub.dispatch(notice("a"));
        assert_eq!(a.try_recv().unwrap().payload, "a");
        assert!(b.try_recv().is_err());
        hub.dispatch(Notice::reconnected());
        assert!(a.try_recv().unwrap().is_reconnected());
        assert!(b.try_recv().unwrap().is_reconnected());
        drop(a);
        hub.dispatch(notice("a"));
        let routes = hub.routes.lock().unwrap();
        assert_eq!(routes.map.len(), 1, "the route without subscribers went");
    }
}
