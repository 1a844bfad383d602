//! panva's `oidc-provider` as an organization's single sign-on provider
//! (`tests/peers/oidc-sso.mjs`), killed on drop: one confidential client
//! (`workspace` / `sso-secret`) for one redirect URI, PKCE required,
//! RFC 9207 `iss`, a signing key made at each start (so
//! [`OidcSso::restart`] rotates it), people and their claims set by the
//! test ([`OidcSso::set_account`]).

use crate::mcp_peers::{free_port, peer_file, provider_sign_in, start_listening};

pub const CLIENT_ID: &str = "workspace";
pub const CLIENT_SECRET: &str = "sso-secret";

pub struct OidcSso {
    child: std::process::Child,
    port: u16,
    /// What the provider says its issuer is.
    pub issuer: String,
    /// Where it is reached (the issuer, unless it answers for another).
    pub url: String,
    pub redirect_uri: String,
    claimed_issuer: Option<String>,
}

impl OidcSso {
    /// A provider whose issuer is its own address.
    pub async fn start(redirect_uri: &str) -> OidcSso {
        Self::start_on(free_port(), redirect_uri, None).await
    }

    /// A provider that answers for `issuer`, another issuer than its
    /// address.
    pub async fn start_claiming(redirect_uri: &str, issuer: &str) -> OidcSso {
        Self::start_on(free_port(), redirect_uri, Some(issuer.to_string())).await
    }

    async fn start_on(port: u16, redirect_uri: &str, claimed: Option<String>) -> OidcSso {
        let mut command = std::process::Command::new("node");
        command
            .arg(peer_file("oidc-sso.mjs"))
            .env("OIDC_PORT", port.to_string())
            .env("REDIRECT_URI", redirect_uri);
        if let Some(issuer) = &claimed {
            command.env("ISSUER", issuer);
        }
        let child = start_listening("oidc-sso.mjs", command, &[port]).await;
        let url = format!("http://127.0.0.1:{port}");
        OidcSso {
            child,
            port,
            issuer: claimed.clone().unwrap_or_else(|| url.clone()),
            url,
            redirect_uri: redirect_uri.to_string(),
            claimed_issuer: claimed,
        }
    }

    /// Stops the provider and starts it again on the same address with a
    /// new signing key (its people are forgotten: set them again).
    pub async fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let next = Self::start_on(self.port, &self.redirect_uri, self.claimed_issuer.clone()).await;
        *self = next;
    }

    /// The current signing key's id.
    pub async fn kid(&self) -> String {
        let answer: serde_json::Value = reqwest::get(format!("{}/peer/kid", self.url))
            .await
            .expect("the peer's kid")
            .json()
            .await
            .expect("JSON");
        answer["kid"].as_str().expect("a kid").to_string()
    }

    /// Sets the claims of the person who signs in as `login`.
    pub async fn set_account(&self, login: &str, claims: serde_json::Value) {
        let status = reqwest::Client::new()
            .post(format!("{}/peer/accounts", self.url))
            .json(&serde_json::json!({ login: claims }))
            .send()
            .await
            .expect("the peer's accounts")
            .status();
        assert_eq!(status, 204);
    }

    /// The browser's part: from the authorization URL through the login
    /// and consent pages as `login`, to where the provider sends the
    /// browser back (the redirect URI with `code`, `state`, `iss`).
    pub async fn sign_in(&self, authorization_url: &str, login: &str) -> reqwest::Url {
        let back = provider_sign_in(&self.url, authorization_url, login).await;
        reqwest::Url::parse(&back).expect("a redirect URL")
    }
}

impl Drop for OidcSso {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
