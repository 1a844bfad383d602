//! The audit log's request side (issue #36): who acted, from where, in
//! which request ([`Origin`]), and what happened ([`Event`]).
//!
//! An [`Origin`] is made where a request is authenticated or authorized
//! (`ServerContext::authorize`, `authorize_system_admin`, and
//! [`Origin::of`] for the operations on one's own account): every grant
//! ([`crate::authz::OrgAccess`], [`crate::authz::SystemAdmin`]) carries
//! the origin of its request, so a datastore function that changes state
//! with a grant records its event with `grant.origin()` in its own
//! transaction, as its last statement (`db::datastore::audit::record`,
//! the one place an audit row is written). Nothing secret is ever part of
//! an event: ids, names, scopes and reasons only (never a token, key,
//! password, their hashes or a request body).

use uuid::Uuid;

/// Who acted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActorKind {
    /// A person logged in (an access token of a session).
    User,
    /// A personal access token (a person's, or a service account's: then
    /// `user_id` is the service account's user).
    Token,
    /// A deployment key (an agent's OpenAI-compatible access).
    DeploymentKey,
    /// The server itself (maintenance, retention).
    System,
    /// Nobody authenticated (a failed login, a signup).
    Anonymous,
}

impl ActorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ActorKind::User => "user",
            ActorKind::Token => "token",
            ActorKind::DeploymentKey => "deployment_key",
            ActorKind::System => "system",
            ActorKind::Anonymous => "anonymous",
        }
    }
}

/// The actor of an event: its kind, its id (the user, token or
/// deployment) and the user behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Actor {
    pub kind: ActorKind,
    pub id: Option<Uuid>,
    pub user_id: Option<Uuid>,
}

impl Actor {
    /// A logged-in user, or the personal access token they presented.
    pub fn user(user_id: Uuid, token_id: Option<Uuid>) -> Actor {
        match token_id {
            Some(token) => Actor {
                kind: ActorKind::Token,
                id: Some(token),
                user_id: Some(user_id),
            },
            None => Actor {
                kind: ActorKind::User,
                id: Some(user_id),
                user_id: Some(user_id),
            },
        }
    }

    pub const SYSTEM: Actor = Actor {
        kind: ActorKind::System,
        id: None,
        user_id: None,
    };

    pub const ANONYMOUS: Actor = Actor {
        kind: ActorKind::Anonymous,
        id: None,
        user_id: None,
    };
}

/// The longest user agent kept (characters).
pub const USER_AGENT_MAX: usize = 512;

/// Who made a request and from where: the actor, the client's address (as
/// `http.trusted_proxies` resolves it), its user agent (cut to
/// [`USER_AGENT_MAX`] characters) and dropshot's request id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    pub actor: Actor,
    pub address: Option<String>,
    pub user_agent: Option<String>,
    pub request_id: Option<String>,
}

impl Origin {
    /// The origin of a request by `actor` from `address`, with its
    /// headers (the user agent) and request id (see
    /// `ServerContext::origin`).
    pub fn of(
        actor: Actor,
        address: std::net::IpAddr,
        headers: &http::HeaderMap,
        request_id: &str,
    ) -> Origin {
        let user_agent = headers
            .get(http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(|ua| ua.chars().take(USER_AGENT_MAX).collect());
        Origin {
            actor,
            address: Some(address.to_string()),
            user_agent,
            request_id: Some(request_id.to_string()),
        }
    }

    /// The origin of what the server does by itself.
    pub fn system() -> Origin {
        Origin {
            actor: Actor::SYSTEM,
            address: None,
            user_agent: None,
            request_id: None,
        }
    }

    /// The same request, by another actor (a login that just succeeded).
    pub fn with_actor(&self, actor: Actor) -> Origin {
        Origin {
            actor,
            ..self.clone()
        }
    }
}

/// How an event ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// Tried and failed (a wrong password).
    Failure,
    /// Refused by authorization.
    Denied,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failure => "failure",
            Outcome::Denied => "denied",
        }
    }
}

/// One event: its organization (`None`: a system-level event, on the
/// system chain), action (`area.verb`, see README's list), target,
/// outcome and details (a small JSON object of names and ids; never a
/// secret).
#[derive(Clone, Debug)]
pub struct Event {
    pub org_id: Option<Uuid>,
    pub action: &'static str,
    pub target_kind: Option<&'static str>,
    pub target_id: Option<String>,
    pub outcome: Outcome,
    pub details: serde_json::Value,
}

impl Event {
    /// A successful `action` in `org_id`, without target or details.
    pub fn new(org_id: Option<Uuid>, action: &'static str) -> Event {
        Event {
            org_id,
            action,
            target_kind: None,
            target_id: None,
            outcome: Outcome::Success,
            details: serde_json::Value::Object(Default::default()),
        }
    }

    /// A successful `action` in the organization `org_id`.
    pub fn org(org_id: Uuid, action: &'static str) -> Event {
        Event::new(Some(org_id), action)
    }

    /// A successful system-level `action` (no organization).
    pub fn system(action: &'static str) -> Event {
        Event::new(None, action)
    }

    /// What the event is about.
    pub fn target(mut self, kind: &'static str, id: impl ToString) -> Event {
        self.target_kind = Some(kind);
        self.target_id = Some(id.to_string());
        self
    }

    pub fn outcome(mut self, outcome: Outcome) -> Event {
        self.outcome = outcome;
        self
    }

    /// Details: a JSON object (names, ids, counts; never a secret).
    pub fn details(mut self, details: serde_json::Value) -> Event {
        self.details = details;
        self
    }
}

/// The audit log's keys: the chain's MAC key and the checkpoints' signing
/// key, both derived (HMAC-SHA256 with a label of their own) from the
/// audit key of the key file (`keys::KeyFile::audit_key`, or derived from
/// the token secret when the key file predates it). Never in the
/// database: whoever can write the database but lacks the key file can
/// neither make a row that verifies nor sign a checkpoint.
pub struct AuditKeys {
    chain: [u8; 32],
    checkpoint: [u8; 32],
}

impl std::fmt::Debug for AuditKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditKeys([redacted])")
    }
}

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    use hmac::Mac;
    // HMAC takes a key of any length: `new_from_slice` cannot fail.
    let mut mac = match HmacSha256::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts keys of any length"),
    };
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

impl AuditKeys {
    /// The keys derived from `audit_key`.
    pub fn derive(audit_key: &[u8]) -> AuditKeys {
        AuditKeys {
            chain: hmac(audit_key, &[b"workspace audit chain v1"]),
            checkpoint: hmac(audit_key, &[b"workspace audit checkpoint v1"]),
        }
    }

    /// A keyed row's hash: HMAC-SHA256 of the previous hash, the row's
    /// `seq` (8 bytes, big-endian) and its canonical columns.
    pub fn chain_mac(&self, prev_hash: &[u8], seq: i64, payload: &[u8]) -> Vec<u8> {
        hmac(&self.chain, &[prev_hash, &seq.to_be_bytes(), payload]).to_vec()
    }

    fn checkpoint_mac(&self, message: &[u8]) -> [u8; 32] {
        hmac(&self.checkpoint, &[message])
    }
}

/// The keys in force in this process (installed by `keys::load`; the
/// datastore's `record` reads them). Every instance of one deployment has
/// the same key file, so several servers in one process (tests) share them.
static KEYS: std::sync::RwLock<Option<std::sync::Arc<AuditKeys>>> = std::sync::RwLock::new(None);

/// Installs the audit keys of this process.
pub fn install_keys(keys: AuditKeys) {
    let mut slot = KEYS.write().unwrap_or_else(|p| p.into_inner());
    *slot = Some(std::sync::Arc::new(keys));
}

/// The audit keys of this process (`None` before the keys are loaded).
pub fn keys() -> Option<std::sync::Arc<AuditKeys>> {
    KEYS.read().unwrap_or_else(|p| p.into_inner()).clone()
}

/// A signed statement of a chain's state, published outside the database
/// (the server's log, the checkpoint file, object storage): at `at`, the
/// chain's row `seq` had the hash `hash`, and rows from `keyed_from` on
/// are keyed (the ones before were written by a version that hashed with
/// plain SHA-256). A row later found missing, changed, or a chain that no
/// longer reaches `seq`, contradicts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub chain_id: Uuid,
    pub seq: i64,
    pub hash: Vec<u8>,
    pub keyed_from: i64,
    pub at: chrono::DateTime<chrono::Utc>,
}

/// A checkpoint as a line of the checkpoint file (and the object stored).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckpointLine {
    #[serde(rename = "type")]
    kind: String,
    chain_id: Uuid,
    seq: i64,
    hash: String,
    keyed_from: i64,
    at: chrono::DateTime<chrono::Utc>,
    mac: String,
}

const CHECKPOINT_TYPE: &str = "workspace.audit_checkpoint.v1";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

impl Checkpoint {
    /// A checkpoint of `seq` and `hash` now (microseconds, as stored).
    pub fn now(chain_id: Uuid, seq: i64, hash: Vec<u8>, keyed_from: i64) -> Checkpoint {
        let now = chrono::Utc::now();
        let at = chrono::DateTime::from_timestamp_micros(now.timestamp_micros()).unwrap_or(now);
        Checkpoint {
            chain_id,
            seq,
            hash,
            keyed_from,
            at,
        }
    }

    /// What is signed: a label, then each field in a fixed encoding.
    fn message(&self) -> Vec<u8> {
        let mut out = CHECKPOINT_TYPE.as_bytes().to_vec();
        out.push(0);
        out.extend_from_slice(self.chain_id.as_bytes());
        out.extend_from_slice(&self.seq.to_be_bytes());
        out.extend_from_slice(&(self.hash.len() as u32).to_be_bytes());
        out.extend_from_slice(&self.hash);
        out.extend_from_slice(&self.keyed_from.to_be_bytes());
        out.extend_from_slice(&self.at.timestamp_micros().to_be_bytes());
        out
    }

    /// The signed checkpoint as one line of JSON (no newline).
    pub fn to_line(&self, keys: &AuditKeys) -> String {
        let line = CheckpointLine {
            kind: CHECKPOINT_TYPE.to_string(),
            chain_id: self.chain_id,
            seq: self.seq,
            hash: hex(&self.hash),
            keyed_from: self.keyed_from,
            at: self.at,
            mac: hex(&keys.checkpoint_mac(&self.message())),
        };
        // A struct of strings and numbers always serializes.
        serde_json::to_string(&line).unwrap_or_default()
    }

    /// A line of the checkpoint file, if it is a checkpoint signed with
    /// `keys` (anything else, a forged or damaged line, is `Err` with why).
    pub fn from_line(line: &str, keys: &AuditKeys) -> Result<Checkpoint, &'static str> {
        let raw: CheckpointLine =
            serde_json::from_str(line).map_err(|_| "not a checkpoint line")?;
        if raw.kind != CHECKPOINT_TYPE {
            return Err("not a checkpoint line");
        }
        let checkpoint = Checkpoint {
            chain_id: raw.chain_id,
            seq: raw.seq,
            hash: unhex(&raw.hash).ok_or("a checkpoint's hash is not hex")?,
            keyed_from: raw.keyed_from,
            at: raw.at,
        };
        let mac = unhex(&raw.mac).ok_or("a checkpoint's mac is not hex")?;
        // Compared in constant time (`verify_slice`).
        use hmac::Mac;
        let mut check = match HmacSha256::new_from_slice(&keys.checkpoint) {
            Ok(mac) => mac,
            Err(_) => unreachable!("HMAC accepts keys of any length"),
        };
        check.update(&checkpoint.message());
        check
            .verify_slice(&mac)
            .map_err(|_| "a checkpoint's signature does not match (not signed with this key)")?;
        Ok(checkpoint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_round_trip_and_forgeries_are_refused() {
        let keys = AuditKeys::derive(b"one key of 32 bytes or so.......");
        let other = AuditKeys::derive(b"another key.....................");
        let cp = Checkpoint::now(Uuid::from_u128(5), 17, vec![7; 32], 3);
        let line = cp.to_line(&keys);
        assert_eq!(Checkpoint::from_line(&line, &keys), Ok(cp.clone()));
        assert!(Checkpoint::from_line(&line, &other).is_err());
        for (from, to) in [
            ("\"seq\":17", "\"seq\":18"),
            ("\"keyed_from\":3", "\"keyed_from\":1"),
        ] {
            let forged = line.replace(from, to);
            assert_ne!(forged, line);
            assert!(Checkpoint::from_line(&forged, &keys).is_err(), "{forged}");
        }
        assert!(Checkpoint::from_line("{}", &keys).is_err());
    }

    #[test]
    fn the_chain_mac_needs_the_key() {
        let keys = AuditKeys::derive(b"k");
        let mac = keys.chain_mac(&[0; 32], 1, b"payload");
        assert_eq!(mac.len(), 32);
        assert_ne!(
            mac,
            AuditKeys::derive(b"j").chain_mac(&[0; 32], 1, b"payload")
        );
        assert_ne!(mac, keys.chain_mac(&[0; 32], 2, b"payload"));
        // Not the unkeyed hash.
        use sha2::Digest;
        let mut plain = sha2::Sha256::new();
        plain.update([0u8; 32]);
        plain.update(1i64.to_be_bytes());
        plain.update(b"payload");
        assert_ne!(mac, plain.finalize().to_vec());
    }
}
