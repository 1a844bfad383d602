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
