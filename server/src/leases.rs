//! The leases of the answers this instance generates (chat and
//! conversations): in-memory state shared by the generators, the heartbeat
//! that renews them and the shutdown that interrupts them. The heartbeat,
//! sweeper and the streams themselves are `app::streams`.

use crate::db::datastore::streams::StreamKind;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use uuid::Uuid;

/// The answers this instance generates, whose leases
/// `app::streams::heartbeat` renews.
pub struct Leases {
    held: Mutex<HashMap<Uuid, (StreamKind, watch::Sender<bool>)>>,
    /// `true` once the shutdown's grace period ended ([`Leases::interrupt`]).
    interrupted: watch::Sender<bool>,
}

impl Default for Leases {
    fn default() -> Leases {
        Leases {
            held: Mutex::default(),
            interrupted: watch::Sender::new(false),
        }
    }
}

/// The lease of one answer, held while it is generated (dropping it ends
/// the renewals).
pub struct Lease {
    leases: Arc<Leases>,
    id: Uuid,
    lost: watch::Receiver<bool>,
    interrupted: watch::Receiver<bool>,
}

/// Why an answer's generation must end early (see [`Lease::ended`]).
pub enum LeaseEnd {
    /// A sweeper closed the answer (this instance had lost touch with the
    /// database for longer than the lease), or it was deleted: nothing
    /// more to write.
    Lost,
    /// The instance stops and its grace period ended: close the answer as
    /// `answer_interrupted` (its events so far stored, a last `error` event).
    Interrupted,
}

impl Leases {
    /// Takes the lease of an answer whose row is stored (`streaming`).
    pub fn hold(self: &Arc<Self>, kind: StreamKind, id: Uuid) -> Lease {
        let (tx, rx) = watch::channel(false);
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, (kind, tx));
        Lease {
            leases: self.clone(),
            id,
            lost: rx,
            interrupted: self.interrupted.subscribe(),
        }
    }

    /// Ends the shutdown's grace period: every answer still generated here
    /// closes as `answer_interrupted` through its own generator.
    pub fn interrupt(&self) {
        self.interrupted.send_replace(true);
    }

    pub(crate) fn ids(&self, kind: StreamKind) -> Vec<Uuid> {
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, (k, _))| *k == kind)
            .map(|(id, _)| *id)
            .collect()
    }

    /// Whether this instance generates no answer.
    pub fn is_empty(&self) -> bool {
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    pub(crate) fn lose(&self, id: Uuid) {
        if let Some((_, tx)) = self.held.lock().unwrap_or_else(|e| e.into_inner()).get(&id) {
            let _ = tx.send(true);
        }
    }
}

impl Lease {
    /// Resolves when the answer's generation must end early: the answer is
    /// no longer this instance's ([`LeaseEnd::Lost`]), or the instance
    /// stops ([`LeaseEnd::Interrupted`]). Never resolves otherwise.
    pub async fn ended(&mut self) -> LeaseEnd {
        async fn set(flag: &mut watch::Receiver<bool>) {
            if flag.wait_for(|set| *set).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        tokio::select! {
            biased;
            _ = set(&mut self.lost) => LeaseEnd::Lost,
            _ = set(&mut self.interrupted) => LeaseEnd::Interrupted,
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.leases
            .held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
    }
}
