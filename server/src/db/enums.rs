//! The text-valued states of the data model as Rust enums.
//!
//! Each is stored as `text` with a `CHECK` constraint listing the same
//! values (see `migrations/`), and converts to and from SQL itself
//! (`FromSql`/`ToSql`), so no state is compared as a string outside this
//! file and an unknown value read from the database is an error, not a
//! silent mismatch.

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
    /// A row of the users list: an active member or an open invitation.
    UserListStatus {
        Active = "active",
        Pending = "pending",
        Expired = "expired",
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

#[cfg(test)]
mod tests {
    use super::*;

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
