//! The text-valued states of the data model as Rust enums.
//!
//! Each is stored as `text` with a `CHECK` constraint listing the same
//! values (see `migrations/`), and converts to and from SQL itself
//! (`FromSql`/`ToSql`), so no state is compared as a string outside this
//! file and an unknown value read from the database is an error, not a
//! silent mismatch.
//!
//! Statements bind these values as parameters. A state stays a literal in
//! SQL only where the planner must see it or where no parameter can go:
//! predicates that select a partial index (`status = 'streaming'` in the
//! stream sweeps, `state IN ('queued', 'running')` in the job claim), the
//! select-list expressions of `db_row!` declarations and shared constants
//! spliced into statements with their own parameters (the authorization
//! statement, `users/me`, which the API benchmark also runs through
//! pgbench, the users list). The test `every_state_literal_in_sql_is_a_known_value`
//! checks each such literal against these enums.

use tokio_postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

type BoxError = Box<dyn std::error::Error + Sync + Send>;

macro_rules! text_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// Every stored value.
            #[allow(dead_code)]
            pub const VALUES: &'static [&'static str] = &[$($text),+];

            /// The value as stored.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl<'a> FromSql<'a> for $name {
            fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
                match <&str as FromSql>::from_sql(ty, raw)? {
                    $($text => Ok(Self::$variant),)+
                    other => Err(format!(
                        concat!("unknown ", stringify!($name), " {:?}"),
                        other
                    )
                    .into()),
                }
            }

            fn accepts(ty: &Type) -> bool {
                <&str as FromSql>::accepts(ty)
            }
        }

        impl ToSql for $name {
            fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, BoxError> {
                self.as_str().to_sql(ty, out)
            }

            fn accepts(ty: &Type) -> bool {
                <&str as ToSql>::accepts(ty)
            }

            to_sql_checked!();
        }
    };
}

text_enum! {
    /// A user's membership in an organization.
    MembershipStatus {
        Invited = "invited",
        Active = "active",
        Suspended = "suspended",
        Deleted = "deleted",
    }
}

text_enum! {
    /// An invitation. `expired` is also derived when a `pending`
    /// invitation's `expires_at` has passed.
    InvitationStatus {
        Pending = "pending",
        Accepted = "accepted",
        Revoked = "revoked",
        Expired = "expired",
    }
}

text_enum! {
    /// A row of the users list: a member (active or suspended) or an open
    /// invitation.
    UserListStatus {
        Active = "active",
        Pending = "pending",
        Expired = "expired",
        Suspended = "suspended",
    }
}

text_enum! {
    /// A conversation chat session.
    SessionStatus {
        Active = "active",
        Completed = "completed",
    }
}

text_enum! {
    /// The author of a conversation message.
    MessageRole {
        User = "user",
        Assistant = "assistant",
    }
}

text_enum! {
    /// How a stored answer ended.
    MessageStatus {
        Complete = "complete",
        Cancelled = "cancelled",
        Failed = "failed",
        Streaming = "streaming",
    }
}

text_enum! {
    /// The kind of a knowledge-base source.
    KbSourceType {
        File = "file",
        Web = "web",
        ObjectStore = "object_store",
    }
}

text_enum! {
    /// The lifecycle state of an agent.
    AgentStatus {
        Created = "created",
        Configured = "configured",
        Testing = "testing",
        Ready = "ready",
        Deployed = "deployed",
        Active = "active",
    }
}

text_enum! {
    /// A knowledge-base source's ingestion state.
    KbSourceStatus {
        Processing = "processing",
        Completed = "completed",
        Failed = "failed",
    }
}

text_enum! {
    /// Where a deployment of an agent is used.
    DeploymentChannel {
        Widget = "widget",
        Api = "api",
        Sdk = "sdk",
        Iframe = "iframe",
    }
}

text_enum! {
    /// A knowledge-base document's ingestion state.
    KbDocumentStatus {
        Pending = "pending",
        Processing = "processing",
        Completed = "completed",
        Failed = "failed",
    }
}

text_enum! {
    /// What an ingestion job does: list a source's documents, or ingest one.
    KbJobKind {
        Expand = "expand",
        Ingest = "ingest",
    }
}

text_enum! {
    /// An ingestion job's state.
    KbJobState {
        Queued = "queued",
        Running = "running",
        Done = "done",
        Failed = "failed",
    }
}

text_enum! {
    /// What a running ingest job is doing (its progress, shown by
    /// `GET /api/kb/ingestion_status`).
    KbIngestStage {
        Extracting = "extracting",
        Embedding = "embedding",
        Storing = "storing",
    }
}

text_enum! {
    /// Whether a deployment accepts requests.
    DeploymentStatus {
        Active = "active",
        Paused = "paused",
    }
}

// ---- Chat area ----

text_enum! {
    /// A chat session's state.
    ChatStatus {
        Active = "ACTIVE",
        Archived = "ARCHIVED",
        Deleted = "DELETED",
    }
}

text_enum! {
    /// Who wrote a chat message.
    ChatRole {
        User = "USER",
        Model = "MODEL",
    }
}

text_enum! {
    /// A chat message's state.
    ChatMessageStatus {
        Streaming = "streaming",
        Complete = "complete",
        Stopped = "stopped",
        Failed = "failed",
    }
}

// ---- Webhooks ----

text_enum! {
    /// A webhook delivery's state (`webhook_deliveries.status`).
    WebhookDeliveryState {
        Pending = "pending",
        Sending = "sending",
        Delivered = "delivered",
        Failed = "failed",
    }
}

text_enum! {
    /// Why a webhook endpoint is disabled (`disabled_reason`).
    WebhookDisabledReason {
        Manual = "manual",
        Failing = "failing",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quoted words a statement compares a `status` or `state` with,
    /// or yields as one (`THEN 'x'`, `ELSE 'x'`, `'x' AS status`).
    fn state_literals(text: &str) -> Vec<String> {
        let mut found = Vec::new();
        let quoted_after = |rest: &str| -> Vec<String> {
            // `= 'a'`, `<> 'a'`, `IN ('a', 'b')`
            let rest = rest.trim_start();
            let rest = rest
                .strip_prefix("<>")
                .or_else(|| rest.strip_prefix('='))
                .or_else(|| rest.strip_prefix("IN"))
                .unwrap_or("");
            let rest = rest.trim_start().trim_start_matches('(').trim_start();
            let mut out = Vec::new();
            let mut rest = rest;
            while let Some(r) = rest.strip_prefix('\'') {
                let Some(end) = r.find('\'') else { break };
                out.push(r[..end].to_string());
                rest = r[end + 1..].trim_start();
                match rest.strip_prefix(',') {
                    Some(r) => rest = r.trim_start(),
                    None => break,
                }
            }
            out
        };
        for key in ["status", "state"] {
            for (i, _) in text.match_indices(key) {
                found.extend(quoted_after(&text[i + key.len()..]));
            }
        }
        for key in ["THEN '", "ELSE '"] {
            for (i, _) in text.match_indices(key) {
                let r = &text[i + key.len()..];
                if let Some(end) = r.find('\'') {
                    found.push(r[..end].to_string());
                }
            }
        }
        for (i, _) in text.match_indices("' AS status") {
            if let Some(start) = text[..i].rfind('\'') {
                found.push(text[start + 1..i].to_string());
            }
        }
        // States are words; other quoted text (an error message) is not one.
        found.retain(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_'));
        found
    }

    #[test]
    fn every_state_literal_in_sql_is_a_known_value() {
        let known: Vec<&str> = [
            MembershipStatus::VALUES,
            InvitationStatus::VALUES,
            UserListStatus::VALUES,
            SessionStatus::VALUES,
            MessageStatus::VALUES,
            AgentStatus::VALUES,
            KbSourceStatus::VALUES,
            KbDocumentStatus::VALUES,
            KbJobState::VALUES,
            KbIngestStage::VALUES,
            DeploymentStatus::VALUES,
            ChatStatus::VALUES,
            ChatMessageStatus::VALUES,
            McpSessionStatus::VALUES,
            DeletionJobKind::VALUES,
            DeletionJobState::VALUES,
            WebhookDeliveryState::VALUES,
            WebhookDisabledReason::VALUES,
        ]
        .concat();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/db/datastore");
        let mut seen = 0;
        let mut unknown = Vec::new();
        for entry in std::fs::read_dir(&dir)
            .expect("datastore sources")
            .flatten()
        {
            let text = std::fs::read_to_string(entry.path()).expect("readable source");
            for literal in state_literals(&text) {
                seen += 1;
                if !known.contains(&literal.as_str()) {
                    unknown.push(format!("{}: {literal:?}", entry.path().display()));
                }
            }
        }
        assert!(
            seen >= 15,
            "only {seen} state literals found: is the scan broken?"
        );
        assert!(unknown.is_empty(), "unknown states in SQL: {unknown:?}");
        assert_eq!(
            state_literals("WHERE status IN ('active', 'actve') AND x = 'y' THEN 'gone'"),
            ["active", "actve", "gone"]
        );
    }

    #[test]
    fn text_round_trip() {
        for s in [
            MembershipStatus::Invited,
            MembershipStatus::Active,
            MembershipStatus::Suspended,
            MembershipStatus::Deleted,
        ] {
            let mut buf = bytes::BytesMut::new();
            s.to_sql(&Type::TEXT, &mut buf).unwrap();
            assert_eq!(MembershipStatus::from_sql(&Type::TEXT, &buf).unwrap(), s);
        }
        assert!(MessageRole::from_sql(&Type::TEXT, b"system").is_err());
        assert!(<MessageRole as FromSql>::accepts(&Type::TEXT));
        assert!(!<MessageRole as FromSql>::accepts(&Type::INT4));
    }
}

text_enum! {
    /// A user's connection to an MCP server (`mcp_sessions.status`).
    McpSessionStatus {
        /// Waiting for the OAuth callback.
        Pending = "pending",
        /// Usable: the instance exists.
        Active = "active",
        /// The grant was revoked or cannot be refreshed: connect again.
        NeedsReauth = "needs_reauth",
        /// The OAuth flow failed or its state expired.
        Failed = "failed",
    }
}

text_enum! {
    /// What a deletion job deletes (`deletion_jobs.kind`).
    DeletionJobKind {
        Organization = "organization",
        Account = "account",
    }
}

text_enum! {
    /// A deletion job (`deletion_jobs.state`).
    DeletionJobState {
        Queued = "queued",
        Running = "running",
        Done = "done",
        Failed = "failed",
    }
}

// ---- Feedback on answers (issue #35) ----

text_enum! {
    /// A rating of an answer (`message_feedback.rating`).
    FeedbackRating {
        Up = "up",
        Down = "down",
    }
}

text_enum! {
    /// Where a rated answer is (`message_feedback.area`).
    FeedbackArea {
        Chat = "chat",
        Conversation = "conversation",
    }
}
