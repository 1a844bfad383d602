//! Bounded password hashing.
//!
//! argon2id with the OWASP parameters takes 19 MiB and tens of
//! milliseconds of CPU per hash. Without a bound, a burst of logins (even
//! to unknown addresses, which are verified against a dummy hash) runs
//! them all at once: 400 concurrent logins took the server to 8.7 GB.
//! Here at most `concurrency` hashes run at a time (on the blocking pool);
//! up to `queue` more requests wait, each for at most `max_wait`; beyond
//! that the request is refused at once with `503 server_busy` and a
//! `Retry-After` header.
//!
//! Hashes run on `concurrency` threads of their own, not on tokio's
//! blocking pool: glibc keeps a freed 19 MiB block in the arena of the
//! thread that used it, so hashes spread over hundreds of blocking
//! threads would leave hundreds of such blocks resident.

use crate::error::Error;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use argon2::{Algorithm, Argon2, Params, Version};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// argon2id with OWASP's first recommended configuration: m = 19 MiB,
/// t = 2, p = 1.
fn argon2() -> Argon2<'static> {
    let params = Params::new(19 * 1024, 2, 1, None).expect("valid argon2 parameters");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// Hashes a password (blocking: run it through
/// [`HashPermit::hash`]).
pub fn hash_password_blocking(password: &str) -> Result<String, Error> {
    argon2()
        .hash_password(password.as_bytes())
        .map(|h| h.to_string())
        .map_err(|e| Error::internal(format!("hashing password: {e}")))
}

/// Verifies a password (blocking: run it through
/// [`HashPermit::verify`]). With no stored hash (unknown
/// user) it verifies against a fixed dummy hash so that timing does not
/// reveal whether the account exists.
pub fn verify_password_blocking(password: &str, hash: Option<&str>) -> bool {
    let known = hash.is_some();
    let ok = argon2()
        .verify_password(password.as_bytes(), hash.unwrap_or(DUMMY_HASH))
        .is_ok();
    ok && known
}

/// argon2id hash of a random string, same parameters as real hashes.
const DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$Gu7mEyeGOY3KYcFe7cmwrKsIgcaQpyTaOsFfoSHKj/A";

type Job = Box<dyn FnOnce() + Send>;

pub struct PasswordHashing {
    /// Sends work to the hashing threads (which end when it is dropped).
    jobs: std::sync::Mutex<std::sync::mpsc::Sender<Job>>,
    semaphore: Arc<Semaphore>,
    concurrency: usize,
    queue: usize,
    max_wait: Duration,
    waiting: AtomicUsize,
    rejected: AtomicU64,
}

/// The right to run one hash.
pub struct HashPermit {
    permit: OwnedSemaphorePermit,
    jobs: std::sync::mpsc::Sender<Job>,
}

fn busy() -> Error {
    Error::Busy {
        code: "server_busy",
        message: "the server is busy; retry shortly".to_string(),
        retry_after_secs: 1,
    }
}

/// Decrements the waiting count however the wait ends.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl PasswordHashing {
    pub fn new(concurrency: usize, queue: usize, max_wait: Duration) -> PasswordHashing {
        let concurrency = concurrency.max(1);
        return_large_blocks_to_the_os();
        let (jobs, receiver) = std::sync::mpsc::channel::<Job>();
        let receiver = Arc::new(std::sync::Mutex::new(receiver));
        for i in 0..concurrency {
            let receiver = receiver.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("password-hash-{i}"))
                .spawn(move || {
                    loop {
                        let job = match receiver.lock() {
                            Ok(r) => r.recv(),
                            Err(_) => return,
                        };
                        match job {
                            // A panicking job loses its answer, not the thread.
                            Ok(job) => {
                                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                            }
                            Err(_) => return,
                        }
                    }
                });
            // Without threads every hash fails with an internal error
            // (reported then), rather than the server not starting.
            drop(spawned);
        }
        PasswordHashing {
            jobs: std::sync::Mutex::new(jobs),
            semaphore: Arc::new(Semaphore::new(concurrency)),
            concurrency,
            queue,
            max_wait,
            waiting: AtomicUsize::new(0),
            rejected: AtomicU64::new(0),
        }
    }

    /// Hashes now running.
    pub fn running(&self) -> usize {
        self.concurrency - self.semaphore.available_permits()
    }

    /// Requests waiting for a permit.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Requests refused because the queue was full or the wait too long.
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// Waits for a permit: at once when one is free, in the queue while it
    /// has room, else `503 server_busy`.
    pub async fn permit(&self) -> Result<HashPermit, Error> {
        if let Ok(permit) = self.semaphore.clone().try_acquire_owned() {
            return Ok(self.wrap(permit));
        }
        if self.waiting.fetch_add(1, Ordering::Relaxed) >= self.queue {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            self.rejected.fetch_add(1, Ordering::Relaxed);
            return Err(busy());
        }
        let _waiting = Waiting(&self.waiting);
        match tokio::time::timeout(self.max_wait, self.semaphore.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(self.wrap(permit)),
            Ok(Err(closed)) => Err(Error::internal(format!("hashing semaphore: {closed}"))),
            Err(_elapsed) => {
                self.rejected.fetch_add(1, Ordering::Relaxed);
                Err(busy())
            }
        }
    }
}

/// glibc serves allocations above a dynamic threshold with `mmap`, but
/// raises that threshold (up to 32 MiB) whenever such a block is freed, so
/// after the first hash every 19 MiB argon2 block comes from, and stays
/// in, the heap arena of the thread that used it (measured: about 300 MB
/// resident after a burst of 400 logins). Pinning the threshold at 1 MiB
/// keeps large blocks mapped only while in use.
fn return_large_blocks_to_the_os() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: mallopt only changes allocator parameters; it is
            // called once, before the hashing threads exist.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, 1024 * 1024);
            }
        });
    }
}

impl PasswordHashing {
    fn wrap(&self, permit: OwnedSemaphorePermit) -> HashPermit {
        let jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner()).clone();
        HashPermit { permit, jobs }
    }
}

impl HashPermit {
    /// Runs `work` on a hashing thread; the permit is held until it is
    /// done, even if the request goes away meanwhile.
    async fn run<T: Send + 'static>(
        self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Error> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let permit = self.permit;
        self.jobs
            .send(Box::new(move || {
                let result = work();
                // The slot is free before the answer is delivered.
                drop(permit);
                let _ = tx.send(result);
            }))
            .map_err(|_| Error::internal("the password-hashing threads are gone"))?;
        rx.await
            .map_err(|_| Error::internal("a password-hashing thread failed"))
    }

    /// Hashes a password.
    pub async fn hash(self, password: String) -> Result<String, Error> {
        self.run(move || hash_password_blocking(&password)).await?
    }

    /// Verifies a password (against a dummy hash when `hash` is `None`, so
    /// that timing does not reveal unknown accounts).
    pub async fn verify(self, password: String, hash: Option<String>) -> Result<bool, Error> {
        self.run(move || verify_password_blocking(&password, hash.as_deref()))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dummy_hash_parses_with_real_parameters() {
        let parsed = argon2::PasswordHash::new(DUMMY_HASH).expect("dummy hash parses");
        assert_eq!(parsed.algorithm.as_str(), "argon2id");
        assert!(argon2().verify_password(b"anything", DUMMY_HASH).is_err());
    }

    #[test]
    fn hash_then_verify() {
        let hash = hash_password_blocking("correct horse battery").unwrap();
        assert!(hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"));
        assert!(verify_password_blocking(
            "correct horse battery",
            Some(&hash)
        ));
        assert!(!verify_password_blocking(
            "wrong horse battery",
            Some(&hash)
        ));
        assert!(!verify_password_blocking("anything", None));
    }

    #[tokio::test]
    async fn at_most_concurrency_run_and_the_queue_is_bounded() {
        let hashing = Arc::new(PasswordHashing::new(2, 3, Duration::from_secs(30)));
        let a = hashing.permit().await.unwrap();
        let _b = hashing.permit().await.unwrap();
        assert_eq!(hashing.running(), 2);
        // Three may wait; the fourth is refused at once.
        let mut waiters = Vec::new();
        for _ in 0..3 {
            let h = hashing.clone();
            waiters.push(tokio::spawn(async move { h.permit().await.map(|_| ()) }));
        }
        while hashing.waiting() < 3 {
            tokio::task::yield_now().await;
        }
        match hashing.permit().await {
            Err(Error::Busy { code, .. }) => assert_eq!(code, "server_busy"),
            other => panic!("expected busy, got {:?}", other.err()),
        }
        assert_eq!(hashing.rejected(), 1);
        drop(a);
        drop(_b);
        for w in waiters {
            w.await.unwrap().unwrap();
        }
        assert_eq!(hashing.waiting(), 0);
    }

    #[tokio::test]
    async fn hashes_run_on_the_pool() {
        let hashing = PasswordHashing::new(2, 4, Duration::from_secs(30));
        let hash = hashing
            .permit()
            .await
            .unwrap()
            .hash("correct horse battery".into())
            .await
            .unwrap();
        let ok = hashing.permit().await.unwrap();
        assert!(
            ok.verify("correct horse battery".into(), Some(hash))
                .await
                .unwrap()
        );
        assert_eq!(hashing.running(), 0);
    }

    #[tokio::test]
    async fn waiting_too_long_is_refused() {
        let hashing = PasswordHashing::new(1, 10, Duration::from_millis(50));
        let _held = hashing.permit().await.unwrap();
        assert!(matches!(hashing.permit().await, Err(Error::Busy { .. })));
        assert_eq!(hashing.waiting(), 0);
    }
}
