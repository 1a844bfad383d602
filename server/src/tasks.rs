//! The instance's background tasks under one driver.
//!
//! Every long-running task of the composition root (the LISTEN fan-out,
//! the answers' heartbeat and sweeper, the janitors, the ingestion
//! workers, the metrics listener) is started or registered here under a
//! name, so that `/metrics` reports whether each one is still running
//! (`workspace_background_task_running{task="…"}`: a task that died shows
//! `0`) and shutdown stops them all in one place.

use std::future::Future;
use std::sync::Mutex;
use tokio::task::{AbortHandle, JoinHandle};

/// The named background tasks of one server instance.
#[derive(Default)]
pub struct BackgroundTasks {
    tasks: Mutex<Vec<(String, AbortHandle)>>,
}

impl BackgroundTasks {
    /// Starts `task` under `name`.
    pub fn spawn(&self, name: &str, task: impl Future<Output = ()> + Send + 'static) {
        self.adopt(name, &tokio::spawn(task));
    }

    /// Registers a task started elsewhere (its owner keeps the handle).
    pub fn adopt(&self, name: &str, task: &JoinHandle<()>) {
        self.lock().push((name.to_string(), task.abort_handle()));
    }

    /// Each task's name and whether it is still running, in start order.
    pub fn states(&self) -> Vec<(String, bool)> {
        self.lock()
            .iter()
            .map(|(name, handle)| (name.clone(), !handle.is_finished()))
            .collect()
    }

    /// Stops every task.
    pub fn abort_all(&self) {
        for (_, handle) in self.lock().iter() {
            handle.abort();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, AbortHandle)>> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tasks_report_whether_they_run_and_stop_together() {
        let tasks = BackgroundTasks::default();
        tasks.spawn("forever", std::future::pending());
        tasks.spawn("done", async {});
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert_eq!(
            tasks.states(),
            [("forever".to_string(), true), ("done".to_string(), false)]
        );
        tasks.abort_all();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(tasks.states().iter().all(|(_, running)| !running));
    }
}
