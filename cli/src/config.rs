//! The credentials file.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

pub const DEFAULT_URL: &str = "http://127.0.0.1:8080";

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct Profile {
    pub url: String,
    /// The access token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The session's refresh token: the CLI renews `token` with it when it
    /// has expired or is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
pub struct Store {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    default_profile: Option<String>,
    #[serde(default)]
    profiles: BTreeMap<String, Profile>,
}

/// `WORKSPACE_CONFIG_DIR`, else `<config dir>/workspace`.
fn dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("WORKSPACE_CONFIG_DIR") {
        return Ok(PathBuf::from(dir));
    }
    Ok(dirs::config_dir()
        .context("no configuration directory")?
        .join("workspace"))
}

impl Store {
    pub fn load() -> Result<Store> {
        let path = dir()?.join("credentials.toml");
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Store::default()),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    pub fn default_profile(&self) -> &str {
        self.default_profile.as_deref().unwrap_or("default")
    }

    pub fn profile(&self, name: &str) -> Option<&Profile> {
        self.profiles.get(name)
    }

    /// Sets the profile's URL and tokens (`None`, `None`: logged out).
    pub fn set(
        &mut self,
        name: &str,
        url: &str,
        token: Option<String>,
        refresh_token: Option<String>,
    ) {
        self.profiles.insert(
            name.to_string(),
            Profile {
                url: url.to_string(),
                token,
                refresh_token,
            },
        );
    }

    /// Takes the credentials lock (a lock file beside the credentials),
    /// held until the guard is dropped: CLI processes refresh a profile's
    /// tokens one at a time, since a refresh token presented twice revokes
    /// its session.
    pub fn lock() -> Result<std::fs::File> {
        let dir = dir()?;
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join("credentials.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        file.lock()
            .with_context(|| format!("locking {}", path.display()))?;
        Ok(file)
    }

    /// Writes the file with mode 0600 (it holds bearer tokens).
    pub fn save(&self) -> Result<PathBuf> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let dir = dir()?;
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join("credentials.toml");
        let tmp = dir.join("credentials.toml.tmp");
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .with_context(|| format!("writing {}", tmp.display()))?;
        file.write_all(toml::to_string_pretty(self)?.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        Ok(path)
    }
}
