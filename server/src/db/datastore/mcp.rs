//! The MCP catalog (global), its tool cache, and users' sessions and
//! instances. A session or instance is private to its (organization, user):
//! every query of them filters by the caller's organization AND user.

use super::Datastore;
use super::audit;
use crate::audit::Event;
use crate::authz::{Grant, OAuthCallbackGrant, OrgAccess, on, perm};
use crate::db::enums::McpSessionStatus;
use crate::db::row::db_row;
use crate::error::Error;
use chrono::{DateTime, Utc};
use uuid::Uuid;

db_row! {
    /// A catalog entry as stored.
    #[derive(Clone, Debug)]
    pub struct McpServerRow {
        pub id: Uuid = "s.id",
        pub name: String = "s.name",
        pub toolkit_name: String = "s.toolkit_name",
        pub toolkit_slug: String = "s.toolkit_slug",
        pub toolkit_logo: Option<String> = "s.toolkit_logo",
        pub url: String = "s.url",
        pub auth: String = "s.auth",
        pub created_at: DateTime<Utc> = "s.created_at",
        /// The caller's instances of the server in the organization.
        pub instance_count: i64 = "(SELECT count(*) FROM mcp_instances i \
            WHERE i.server_id = s.id AND i.organization_id = $1 AND i.user_id = $2)",
    }
}

/// What the catalog sync writes for one configured server.
pub struct McpServerSpec<'a> {
    pub name: &'a str,
    pub toolkit_name: &'a str,
    pub toolkit_slug: &'a str,
    pub toolkit_logo: Option<&'a str>,
    pub url: &'a str,
    pub auth: &'a str,
}

const SERVER_COLUMNS: &str = McpServerRow::COLUMNS;

db_row! {
    /// An instance with its session's state and server.
    #[derive(Clone, Debug)]
    pub struct McpInstanceRow {
        pub id: Uuid = "i.id",
        pub name: String = "i.name",
        pub server_id: Uuid = "i.server_id",
        pub session_id: Uuid = "i.session_id",
        pub toolkit_name: String = "s.toolkit_name",
        pub toolkit_slug: String = "s.toolkit_slug",
        pub status: McpSessionStatus = "ss.status",
        pub created_at: DateTime<Utc> = "i.created_at",
        pub updated_at: DateTime<Utc> = "i.updated_at",
    }
}

const INSTANCE_COLUMNS: &str = McpInstanceRow::COLUMNS;
const INSTANCE_FROM: &str = "mcp_instances i JOIN mcp_servers s ON s.id = i.server_id \
     JOIN mcp_sessions ss ON ss.id = i.session_id";

/// A pending session taken by its `state` in the OAuth callback.
pub struct PendingSession {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub user_id: Uuid,
    pub server_id: Uuid,
    pub flow_type: Option<String>,
    pub flow_sealed: Option<Vec<u8>>,
    /// Whether the state had expired (the session is then failed).
    pub expired: bool,
}

/// What a deleted instance leaves to clean up at the provider.
pub struct DeletedInstance {
    pub session_id: Uuid,
    pub server_id: Uuid,
    pub tokens_sealed: Option<Vec<u8>>,
}

/// Sessions counted by the `mcp_sessions` quota: every live one of the
/// organization (all users).
const LIVE_SESSIONS: &str = "SELECT count(*) AS live FROM mcp_sessions \
     WHERE organization_id = $1 AND (status IN ($2, $3) \
        OR (status = $4 AND state_expires_at > now()))";

impl Datastore {
    /// Upserts the configured servers by name and returns their ids in the
    /// same order; servers no longer configured are kept (their sessions
    /// refer to them) but marked unconfigured and no longer listed. Rows
    /// are written in name order so that instances starting at once cannot
    /// deadlock.
    pub async fn mcp_servers_sync(
        &self,
        servers: &[McpServerSpec<'_>],
    ) -> Result<Vec<Uuid>, Error> {
        let mut order: Vec<usize> = (0..servers.len()).collect();
        order.sort_by_key(|&i| servers[i].name);
        let mut ids = vec![Uuid::nil(); servers.len()];
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        for i in order {
            let s = &servers[i];
            let row = tx
                .query_one(
                    "INSERT INTO mcp_servers \
                        (id, name, toolkit_name, toolkit_slug, toolkit_logo, url, auth) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7) \
                     ON CONFLICT (name) DO UPDATE SET \
                        toolkit_name = EXCLUDED.toolkit_name, \
                        toolkit_slug = EXCLUDED.toolkit_slug, \
                        toolkit_logo = EXCLUDED.toolkit_logo, \
                        url = EXCLUDED.url, auth = EXCLUDED.auth, configured = true, \
                        updated_at = now() \
                     RETURNING id",
                    &[
                        &Uuid::new_v4(),
                        &s.name,
                        &s.toolkit_name,
                        &s.toolkit_slug,
                        &s.toolkit_logo,
                        &s.url,
                        &s.auth,
                    ],
                )
                .await?;
            ids[i] = row.get("id");
        }
        tx.execute(
            "UPDATE mcp_servers SET configured = false, updated_at = now() \
             WHERE configured AND NOT (id = ANY($1))",
            &[&ids],
        )
        .await?;
        tx.commit().await?;
        Ok(ids)
    }

    /// The configured servers, by name, with the caller's instance counts.
    pub async fn mcp_servers_list(&self, access: &OrgAccess) -> Result<Vec<McpServerRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {SERVER_COLUMNS} FROM mcp_servers s \
                     WHERE s.configured ORDER BY s.name"
                ),
                &[&access.org_id(), &access.user_id()],
            )
            .await?;
        Ok(rows.iter().map(McpServerRow::from_row).collect())
    }

    /// One configured server (`404` otherwise).
    pub async fn mcp_server_get(
        &self,
        access: &OrgAccess,
        id: Uuid,
    ) -> Result<McpServerRow, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                &format!(
                    "SELECT {SERVER_COLUMNS} FROM mcp_servers s \
                     WHERE s.configured AND s.id = $3"
                ),
                &[&access.org_id(), &access.user_id(), &id],
            )
            .await?
            .ok_or(Error::NotFound { what: "MCP server" })?;
        Ok(McpServerRow::from_row(&row))
    }

    /// The cached tool list of a server listed from `url`, and its age in
    /// seconds.
    pub async fn mcp_tool_cache_get(
        &self,
        server_id: Uuid,
        url: &str,
    ) -> Result<Option<(serde_json::Value, f64)>, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "SELECT tools, extract(epoch FROM now() - fetched_at)::float8 AS age \
                 FROM mcp_tool_cache WHERE server_id = $1 AND url = $2",
                &[&server_id, &url],
            )
            .await?;
        Ok(row.map(|r| (r.get("tools"), r.get("age"))))
    }

    /// Stores a server's freshly listed tools.
    pub async fn mcp_tool_cache_put(
        &self,
        server_id: Uuid,
        url: &str,
        tools: &serde_json::Value,
    ) -> Result<(), Error> {
        let conn = self.conn().await?;
        conn.execute(
            "INSERT INTO mcp_tool_cache (server_id, url, tools) VALUES ($1, $2, $3) \
             ON CONFLICT (server_id) DO UPDATE \
                SET url = EXCLUDED.url, tools = EXCLUDED.tools, fetched_at = now()",
            &[&server_id, &url, tools],
        )
        .await?;
        Ok(())
    }

    /// The stored dynamic registration of a server for a redirect URI.
    pub async fn mcp_oauth_client_get(
        &self,
        server_id: Uuid,
        redirect_uri: &str,
    ) -> Result<Option<Vec<u8>>, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "SELECT client_sealed FROM mcp_oauth_clients \
                 WHERE server_id = $1 AND redirect_uri = $2",
                &[&server_id, &redirect_uri],
            )
            .await?;
        Ok(row.map(|r| r.get("client_sealed")))
    }

    /// Stores a dynamic registration (the first one stored wins).
    pub async fn mcp_oauth_client_put(
        &self,
        server_id: Uuid,
        redirect_uri: &str,
        sealed: &[u8],
    ) -> Result<(), Error> {
        let conn = self.conn().await?;
        conn.execute(
            "INSERT INTO mcp_oauth_clients (server_id, redirect_uri, client_sealed) \
             VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
            &[&server_id, &redirect_uri, &sealed],
        )
        .await?;
        Ok(())
    }

    /// Creates a session under the organization's `mcp_sessions` quota (in
    /// one transaction, serialized per organization by an advisory lock so
    /// that concurrent connections cannot overshoot it). `None` for
    /// `pending`: an active session with its instance named `name`.
    /// Returns the instance id of an active session. `402
    /// mcp_sessions_quota_exceeded` when the quota is used up.
    #[allow(clippy::too_many_arguments)]
    pub async fn mcp_session_create(
        &self,
        grant: &Grant<on::Org, perm::McpWrite>,
        session_id: Uuid,
        server_id: Uuid,
        quota: u32,
        flow_type: Option<&str>,
        pending: Option<(&[u8], DateTime<Utc>, &[u8])>,
        instance_name: &str,
    ) -> Result<Option<Uuid>, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('mcp_sessions:' || $1::uuid::text, 0))",
            &[&grant.org_id()],
        )
        .await?;
        let live: i64 = tx
            .query_one(
                LIVE_SESSIONS,
                &[
                    &grant.org_id(),
                    &McpSessionStatus::Active,
                    &McpSessionStatus::NeedsReauth,
                    &McpSessionStatus::Pending,
                ],
            )
            .await?
            .get("live");
        if live >= i64::from(quota) {
            return Err(Error::PaymentRequired {
                code: "mcp_sessions_quota_exceeded",
                message: format!(
                    "the organization's MCP connection quota ({quota}) is used up: \
                     delete an instance or ask for a larger quota"
                ),
            });
        }
        let (status, state_hash, expires, flow) = match pending {
            Some((hash, expires, flow)) => (
                McpSessionStatus::Pending,
                Some(hash),
                Some(expires),
                Some(flow),
            ),
            None => (McpSessionStatus::Active, None, None, None),
        };
        tx.execute(
            "INSERT INTO mcp_sessions (id, organization_id, user_id, server_id, status, \
                flow_type, state_hash, state_expires_at, flow_sealed) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[
                &session_id,
                &grant.org_id(),
                &grant.user_id(),
                &server_id,
                &status,
                &flow_type,
                &state_hash,
                &expires,
                &flow,
            ],
        )
        .await?;
        let instance = if pending.is_none() {
            let id = Uuid::new_v4();
            tx.execute(
                "INSERT INTO mcp_instances (id, organization_id, user_id, server_id, session_id, name) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &id,
                    &grant.org_id(),
                    &grant.user_id(),
                    &server_id,
                    &session_id,
                    &instance_name,
                ],
            )
            .await?;
            Some(id)
        } else {
            None
        };
        tx.commit().await?;
        Ok(instance)
    }

    /// Takes the pending session of an OAuth `state` (by its hash): the
    /// state is cleared in the same statement, so it works once. An expired
    /// state's session is marked `failed`.
    pub async fn mcp_session_take_state(
        &self,
        state_hash: &[u8],
    ) -> Result<Option<PendingSession>, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "UPDATE mcp_sessions SET state_hash = NULL, updated_at = now(), \
                    status = CASE WHEN state_expires_at > now() THEN status ELSE $3 END \
                 WHERE state_hash = $1 AND status = $2 \
                 RETURNING id, organization_id, user_id, server_id, flow_type, flow_sealed, \
                    state_expires_at <= now() AS expired",
                &[
                    &state_hash,
                    &McpSessionStatus::Pending,
                    &McpSessionStatus::Failed,
                ],
            )
            .await?;
        Ok(row.map(|r| PendingSession {
            id: r.get("id"),
            organization_id: r.get("organization_id"),
            user_id: r.get("user_id"),
            server_id: r.get("server_id"),
            flow_type: r.get("flow_type"),
            flow_sealed: r.get("flow_sealed"),
            expired: r.get("expired"),
        }))
    }

    /// Marks a pending session failed (a provider error or a failed code
    /// exchange).
    pub async fn mcp_session_fail(&self, grant: &OAuthCallbackGrant) -> Result<(), Error> {
        let conn = self.conn().await?;
        conn.execute(
            "UPDATE mcp_sessions SET status = $3, flow_sealed = NULL, updated_at = now() \
             WHERE id = $1 AND status = $2",
            &[
                &grant.session_id(),
                &McpSessionStatus::Pending,
                &McpSessionStatus::Failed,
            ],
        )
        .await?;
        Ok(())
    }

    /// Activates a pending session with its sealed tokens and creates its
    /// instance (one transaction). Returns the instance id; `None` when the
    /// session is no longer pending.
    #[allow(clippy::too_many_arguments)]
    pub async fn mcp_session_activate(
        &self,
        grant: &OAuthCallbackGrant,
        session: &PendingSession,
        tokens_sealed: &[u8],
        token_expires_at: Option<DateTime<Utc>>,
        flow_sealed: &[u8],
        instance_name: &str,
        origin: &crate::audit::Origin,
    ) -> Result<Option<Uuid>, Error> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let n = tx
            .execute(
                "UPDATE mcp_sessions SET status = $6, tokens_sealed = $2, \
                    token_expires_at = $3, flow_sealed = $4, updated_at = now() \
                 WHERE id = $1 AND status = $5",
                &[
                    &grant.session_id(),
                    &tokens_sealed,
                    &token_expires_at,
                    &flow_sealed,
                    &McpSessionStatus::Pending,
                    &McpSessionStatus::Active,
                ],
            )
            .await?;
        if n != 1 {
            return Ok(None);
        }
        let id = Uuid::new_v4();
        tx.execute(
            "INSERT INTO mcp_instances (id, organization_id, user_id, server_id, session_id, name) \
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &id,
                &session.organization_id,
                &session.user_id,
                &session.server_id,
                &session.id,
                &instance_name,
            ],
        )
        .await?;
        audit::record(
            &tx,
            &origin.with_actor(crate::audit::Actor::user(session.user_id, None)),
            &Event::org(session.organization_id, "mcp.connect").target("mcp_instance", id).details(serde_json::json!({"server_id": session.server_id, "session_id": session.id, "name": instance_name})),
        )
        .await?;
        tx.commit().await?;
        Ok(Some(id))
    }

    /// The caller's instances in the organization, oldest first.
    pub async fn mcp_instances_list(
        &self,
        access: &OrgAccess,
        server_id: Option<Uuid>,
    ) -> Result<Vec<McpInstanceRow>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {INSTANCE_COLUMNS} FROM {INSTANCE_FROM} \
                     WHERE i.organization_id = $1 AND i.user_id = $2 \
                       AND ($3::uuid IS NULL OR i.server_id = $3) \
                     ORDER BY i.created_at, i.id"
                ),
                &[&access.org_id(), &access.user_id(), &server_id],
            )
            .await?;
        Ok(rows.iter().map(McpInstanceRow::from_row).collect())
    }

    /// Renames one of the caller's instances.
    pub async fn mcp_instance_rename(
        &self,
        grant: &Grant<on::Org, perm::McpWrite>,
        id: Uuid,
        name: &str,
    ) -> Result<McpInstanceRow, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                &format!(
                    "WITH u AS (UPDATE mcp_instances SET name = $4, updated_at = now() \
                        WHERE organization_id = $1 AND user_id = $2 AND id = $3 RETURNING *) \
                     SELECT {INSTANCE_COLUMNS} FROM u i \
                     JOIN mcp_servers s ON s.id = i.server_id \
                     JOIN mcp_sessions ss ON ss.id = i.session_id"
                ),
                &[&grant.org_id(), &grant.user_id(), &id, &name],
            )
            .await?
            .ok_or(Error::NotFound {
                what: "MCP instance",
            })?;
        Ok(McpInstanceRow::from_row(&row))
    }

    /// Deletes one of the caller's instances with its session (the
    /// instance goes with it by cascade). Returns what is left to revoke.
    pub async fn mcp_instance_delete(
        &self,
        grant: &Grant<on::Org, perm::McpWrite>,
        id: Uuid,
    ) -> Result<DeletedInstance, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "DELETE FROM mcp_sessions ss USING mcp_instances i \
                 WHERE i.organization_id = $1 AND i.user_id = $2 AND i.id = $3 \
                   AND ss.id = i.session_id \
                 RETURNING ss.id, ss.server_id, ss.tokens_sealed",
                &[&grant.org_id(), &grant.user_id(), &id],
            )
            .await?
            .ok_or(Error::NotFound {
                what: "MCP instance",
            })?;
        Ok(DeletedInstance {
            session_id: row.get("id"),
            server_id: row.get("server_id"),
            tokens_sealed: row.get("tokens_sealed"),
        })
    }

    /// Sets a new gateway secret (its hash) on the caller's instance of the
    /// session and server; returns the session's state.
    pub async fn mcp_instance_set_gateway(
        &self,
        grant: &Grant<on::Org, perm::McpWrite>,
        server_id: Uuid,
        session_id: Uuid,
        secret_hash: &[u8],
    ) -> Result<McpSessionStatus, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                "UPDATE mcp_instances i SET gateway_secret_hash = $5, updated_at = now() \
                 FROM mcp_sessions ss \
                 WHERE i.organization_id = $1 AND i.user_id = $2 AND i.server_id = $3 \
                   AND i.session_id = $4 AND ss.id = i.session_id \
                 RETURNING ss.status",
                &[
                    &grant.org_id(),
                    &grant.user_id(),
                    &server_id,
                    &session_id,
                    &secret_hash,
                ],
            )
            .await?
            .ok_or(Error::NotFound {
                what: "MCP session",
            })?;
        Ok(row.get("status"))
    }
}

db_row! {
    /// What the gateway needs of the instance behind a secret.
    pub struct GatewayTarget {
        pub instance_id: Uuid = "i.id",
        pub session_id: Uuid = "ss.id",
        pub server_id: Uuid = "ss.server_id",
        pub user_id: Uuid = "ss.user_id",
        pub url: String = "s.url",
        pub status: McpSessionStatus = "ss.status",
        pub tokens_sealed: Option<Vec<u8>> = "ss.tokens_sealed",
        pub token_expires_at: Option<DateTime<Utc>> = "ss.token_expires_at",
    }
}

const TARGET_COLUMNS: &str = GatewayTarget::COLUMNS;

impl Datastore {
    /// The instance whose gateway secret hashes to `secret_hash`. Not
    /// tenant-scoped: the unguessable secret is the credential (the
    /// gateway acts for the instance's own user only).
    pub async fn mcp_gateway_target(
        &self,
        secret_hash: &[u8],
    ) -> Result<Option<GatewayTarget>, Error> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                &format!(
                    "SELECT {TARGET_COLUMNS} \
                     FROM mcp_instances i JOIN mcp_sessions ss ON ss.id = i.session_id \
                     JOIN mcp_servers s ON s.id = i.server_id \
                     WHERE i.gateway_secret_hash = $1"
                ),
                &[&secret_hash],
            )
            .await?;
        Ok(row.as_ref().map(GatewayTarget::from_row))
    }

    /// Runs `refresh` on a session's current tokens while holding the
    /// refresh lock of its (user, server) (a transaction-scoped advisory
    /// lock, so one refresh at a time across instances of the service:
    /// servers that rotate refresh tokens invalidate the old one on first
    /// use). `refresh` sees the tokens as stored after the lock was taken
    /// (another instance may just have refreshed them) and returns the new
    /// sealed tokens to store (or `None` to keep them) and a value handed
    /// back. `None` when the session is no longer active.
    #[allow(clippy::type_complexity)]
    pub async fn mcp_session_refresh<F, Fut, T>(
        &self,
        target: &GatewayTarget,
        refresh: F,
    ) -> Result<Option<T>, Error>
    where
        F: FnOnce(Option<Vec<u8>>, Option<DateTime<Utc>>) -> Fut,
        Fut: std::future::Future<
                Output = Result<(Option<(Vec<u8>, Option<DateTime<Utc>>)>, T), Error>,
            >,
    {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('mcp_refresh:' || $1::uuid::text || ':' || $2::uuid::text, 0))",
            &[&target.user_id, &target.server_id],
        )
        .await?;
        let Some(row) = tx
            .query_opt(
                "SELECT tokens_sealed, token_expires_at FROM mcp_sessions \
                 WHERE id = $1 AND status = $2",
                &[&target.session_id, &McpSessionStatus::Active],
            )
            .await?
        else {
            return Ok(None);
        };
        let (store, value) = refresh(row.get("tokens_sealed"), row.get("token_expires_at")).await?;
        if let Some((sealed, expires)) = store {
            tx.execute(
                "UPDATE mcp_sessions SET tokens_sealed = $2, token_expires_at = $3, \
                    updated_at = now() WHERE id = $1",
                &[&target.session_id, &sealed, &expires],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(Some(value))
    }

    /// Marks a session whose grant no longer works `needs_reauth`.
    pub async fn mcp_session_needs_reauth(&self, session_id: Uuid) -> Result<(), Error> {
        let conn = self.conn().await?;
        conn.execute(
            "UPDATE mcp_sessions SET status = $3, updated_at = now() \
             WHERE id = $1 AND status = $2",
            &[
                &session_id,
                &McpSessionStatus::Active,
                &McpSessionStatus::NeedsReauth,
            ],
        )
        .await?;
        Ok(())
    }
}

impl Datastore {
    /// The caller's instances among `ids` with what calling their server
    /// needs, and each one's `toolkit_slug`; `404` unless every id is the
    /// caller's in the organization.
    pub async fn mcp_instance_targets(
        &self,
        access: &OrgAccess,
        ids: &[Uuid],
    ) -> Result<Vec<(String, GatewayTarget)>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {TARGET_COLUMNS}, s.toolkit_slug \
                     FROM mcp_instances i JOIN mcp_sessions ss ON ss.id = i.session_id \
                     JOIN mcp_servers s ON s.id = i.server_id \
                     WHERE i.organization_id = $1 AND i.user_id = $2 AND i.id = ANY($3) \
                     ORDER BY i.created_at, i.id"
                ),
                &[&access.org_id(), &access.user_id(), &ids],
            )
            .await?;
        let distinct: std::collections::HashSet<&Uuid> = ids.iter().collect();
        if rows.len() != distinct.len() {
            return Err(Error::NotFound {
                what: "MCP instance",
            });
        }
        Ok(rows
            .iter()
            .map(|r| (r.get("toolkit_slug"), GatewayTarget::from_row(r)))
            .collect())
    }
}

/// A remembered pagination hint of a tool's output.
#[derive(Clone, Debug, PartialEq)]
pub struct PaginationHint {
    pub tool: String,
    pub next_page_token: String,
    pub result_size_estimate: Option<i64>,
}

impl Datastore {
    /// The caller's remembered pagination hints for an instance's tools.
    pub async fn mcp_pagination_hints(
        &self,
        access: &OrgAccess,
        instance_id: Uuid,
    ) -> Result<Vec<PaginationHint>, Error> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                "SELECT tool, next_page_token, result_size_estimate FROM mcp_pagination_hints \
                 WHERE organization_id = $1 AND user_id = $2 AND instance_id = $3 \
                 ORDER BY tool",
                &[&access.org_id(), &access.user_id(), &instance_id],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| PaginationHint {
                tool: r.get("tool"),
                next_page_token: r.get("next_page_token"),
                result_size_estimate: r.get("result_size_estimate"),
            })
            .collect())
    }

    /// Remembers the hint of a tool's latest output (`Some`), or forgets
    /// it (`None`: the output had no next page). Only for the caller's own
    /// instance (nothing happens for another's).
    pub async fn mcp_pagination_hint_put(
        &self,
        access: &OrgAccess,
        instance_id: Uuid,
        tool: &str,
        hint: Option<(&str, Option<i64>)>,
    ) -> Result<(), Error> {
        let conn = self.conn().await?;
        match hint {
            Some((token, estimate)) => {
                conn.execute(
                    "INSERT INTO mcp_pagination_hints \
                        (instance_id, tool, organization_id, user_id, next_page_token, \
                         result_size_estimate) \
                     SELECT i.id, $4, i.organization_id, i.user_id, $5, $6 FROM mcp_instances i \
                     WHERE i.id = $3 AND i.organization_id = $1 AND i.user_id = $2 \
                     ON CONFLICT (instance_id, tool) DO UPDATE SET \
                        next_page_token = EXCLUDED.next_page_token, \
                        result_size_estimate = EXCLUDED.result_size_estimate, \
                        updated_at = now()",
                    &[
                        &access.org_id(),
                        &access.user_id(),
                        &instance_id,
                        &tool,
                        &token,
                        &estimate,
                    ],
                )
                .await?;
            }
            None => {
                conn.execute(
                    "DELETE FROM mcp_pagination_hints \
                     WHERE organization_id = $1 AND user_id = $2 AND instance_id = $3 AND tool = $4",
                    &[&access.org_id(), &access.user_id(), &instance_id, &tool],
                )
                .await?;
            }
        }
        Ok(())
    }
}
