//! The server's own keys, kept apart from the data they protect.
//!
//! Two kinds of key: the HS256 secret that signs access tokens, and the
//! keys that seal secrets at rest (see [`crate::secrets`]). Each comes from
//! the configuration (`auth.jwt_secret` / `WORKSPACE_JWT_SECRET`,
//! `secrets.keys` / `WORKSPACE_SECRET_KEYS`) or, for what the configuration
//! leaves out, from a **key file**: `secrets.key_file` /
//! `WORKSPACE_KEY_FILE`, by default `<data dir>/server.keys` with the
//! embedded database. Never from the database: whoever reads the database
//! (a backup, a replica, a reporting user) must not be able to mint tokens
//! or unseal what it holds.
//!
//! - With the embedded database, a missing key file is generated at the
//!   first start (mode 0600, written whole or not at all).
//! - With `DATABASE_URL`, nothing is generated at start: a missing key is a
//!   start error that names the command making one
//!   (`workspace-server keys generate --file PATH`); every instance reads
//!   the same file (or the same configuration).
//! - Earlier versions kept generated keys in the table `server_secrets`.
//!   They are moved into the key file (the same keys: nobody is logged out
//!   and every sealed value still opens), then deleted from the database:
//!   at the next start with the embedded database, by
//!   `workspace-server keys export --file PATH` with `DATABASE_URL`.
//! - The database keeps a fingerprint of each key that came from a key file
//!   (SHA-256 of a label and the key: it says nothing of the key), so a
//!   server started with another key file than the one its data was sealed
//!   with (a restore onto a new machine without the key file) refuses to
//!   start instead of logging everyone out and failing to open secrets.

use crate::db::Datastore;
use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The name of the key file in the data directory.
pub const KEY_FILE_NAME: &str = "server.keys";
/// The largest key file read (a real one is under 1 KiB).
const KEY_FILE_MAX_BYTES: u64 = 64 * 1024;
/// Names of the keys older versions kept in `server_secrets`.
const LEGACY_JWT: &str = "jwt_hs256";
const LEGACY_SEAL: &str = "secrets_key_0";
const LEGACY_LINKS: &str = "download_links_hmac";

/// The contents of a key file.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyFile {
    /// The access-token signing secret (64 bytes when generated).
    pub jwt_secret: Vec<u8>,
    /// Sealing keys by id (0 is the generated key).
    pub sealing_keys: Vec<(u8, [u8; 32])>,
    /// The id of the key that seals new values.
    pub write_key: u8,
    /// The key that signs download links of the local file store (32
    /// bytes; derived from the token secret when absent).
    pub link_key: Option<Vec<u8>>,
    /// The key of the audit log's chain and checkpoints (32 bytes; see
    /// [`crate::audit::AuditKeys`]). Key files written before it existed
    /// have none: the audit key is then derived from the token secret
    /// (HMAC-SHA256 under a label of its own), so upgrading needs no new
    /// file and the key is still never in the database.
    pub audit_key: Option<Vec<u8>>,
}

impl std::fmt::Debug for KeyFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyFile")
            .field("jwt_secret", &"[redacted]")
            .field(
                "sealing_keys",
                &self
                    .sealing_keys
                    .iter()
                    .map(|(id, _)| id)
                    .collect::<Vec<_>>(),
            )
            .field("write_key", &self.write_key)
            .finish()
    }
}

/// The key file on disk: TOML, keys in base64.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFileToml {
    version: u32,
    jwt_secret: String,
    /// `ID:BASE64` entries.
    secret_keys: Vec<String>,
    write_key: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    link_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    audit_key: Option<String>,
}

const HEADER: &str = "\
# Workspace server keys: the secret that signs access tokens and the keys
# that seal secrets at rest. Keep this file apart from the database and
# its backups (mode 0600), the same on every instance. Losing it logs
# everyone out and makes sealed secrets (provider keys, OAuth tokens,
# invitation links) unreadable: back it up on its own.
";

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

impl KeyFile {
    /// New random keys.
    pub fn generate() -> KeyFile {
        let mut jwt = [0u8; 64];
        rand::fill(&mut jwt);
        let mut seal = [0u8; 32];
        rand::fill(&mut seal);
        let mut links = [0u8; 32];
        rand::fill(&mut links);
        let mut audit = [0u8; 32];
        rand::fill(&mut audit);
        KeyFile {
            jwt_secret: jwt.to_vec(),
            sealing_keys: vec![(crate::secrets::GENERATED_KEY_ID, seal)],
            write_key: crate::secrets::GENERATED_KEY_ID,
            link_key: Some(links.to_vec()),
            audit_key: Some(audit.to_vec()),
        }
    }

    fn to_text(&self) -> Result<String> {
        let body = toml::to_string(&KeyFileToml {
            version: 1,
            jwt_secret: b64().encode(&self.jwt_secret),
            secret_keys: self
                .sealing_keys
                .iter()
                .map(|(id, key)| format!("{id}:{}", b64().encode(key)))
                .collect(),
            write_key: self.write_key,
            link_key: self.link_key.as_ref().map(|k| b64().encode(k)),
            audit_key: self.audit_key.as_ref().map(|k| b64().encode(k)),
        })?;
        Ok(format!("{HEADER}{body}"))
    }

    fn parse(text: &str) -> Result<KeyFile> {
        let raw: KeyFileToml = toml::from_str(text)?;
        if raw.version != 1 {
            bail!("unknown key file version {}", raw.version);
        }
        let jwt_secret = b64()
            .decode(raw.jwt_secret.trim())
            .map_err(|_| anyhow!("jwt_secret is not valid base64"))?;
        if jwt_secret.len() < 32 {
            bail!("jwt_secret must be at least 32 bytes");
        }
        let mut sealing_keys = Vec::new();
        for entry in &raw.secret_keys {
            let (id, key) = entry
                .split_once(':')
                .ok_or_else(|| anyhow!("a secret key is `ID:BASE64`"))?;
            let id: u8 = id
                .trim()
                .parse()
                .map_err(|_| anyhow!("a secret key id is 0 to 255"))?;
            let key: [u8; 32] = b64()
                .decode(key.trim())
                .ok()
                .and_then(|k| k.try_into().ok())
                .ok_or_else(|| anyhow!("secret key {id} is not 32 bytes of base64"))?;
            if sealing_keys.iter().any(|(other, _)| *other == id) {
                bail!("secret key {id} is listed twice");
            }
            sealing_keys.push((id, key));
        }
        if !sealing_keys.iter().any(|(id, _)| *id == raw.write_key) {
            bail!("write_key {} is not among secret_keys", raw.write_key);
        }
        let link_key = match raw.link_key {
            Some(key) => Some(
                b64()
                    .decode(key.trim())
                    .ok()
                    .filter(|k| k.len() >= 32)
                    .ok_or_else(|| anyhow!("link_key is not 32 bytes of base64"))?,
            ),
            None => None,
        };
        let audit_key = match raw.audit_key {
            Some(key) => Some(
                b64()
                    .decode(key.trim())
                    .ok()
                    .filter(|k| k.len() >= 32)
                    .ok_or_else(|| anyhow!("audit_key is not 32 bytes of base64"))?,
            ),
            None => None,
        };
        Ok(KeyFile {
            jwt_secret,
            sealing_keys,
            write_key: raw.write_key,
            link_key,
            audit_key,
        })
    }

    /// Reads a key file, refusing one that others can read.
    pub fn read(path: &Path) -> Result<KeyFile> {
        use std::io::Read;
        use std::os::unix::fs::PermissionsExt;
        let file =
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            bail!("{} is not a file", path.display());
        }
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            bail!(
                "the key file {} can be read by others (mode {mode:o}): chmod 600 it",
                path.display()
            );
        }
        let mut text = String::new();
        file.take(KEY_FILE_MAX_BYTES + 1)
            .read_to_string(&mut text)
            .with_context(|| format!("reading {}", path.display()))?;
        if text.len() as u64 > KEY_FILE_MAX_BYTES {
            bail!("{} is not a key file (too large)", path.display());
        }
        KeyFile::parse(&text).with_context(|| format!("{} is not a valid key file", path.display()))
    }

    /// Writes the key file at `path` unless one is there already: the file
    /// appears whole (mode 0600) or not at all. Returns the file now at
    /// `path` (another process's, when it won the race).
    pub fn write_new(&self, path: &Path) -> Result<KeyFile> {
        use std::os::unix::fs::OpenOptionsExt;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        let mut suffix = [0u8; 8];
        rand::fill(&mut suffix);
        let tmp = path.with_extension(format!(
            "tmp-{}",
            suffix
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        ));
        let written = (|| -> Result<()> {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)
                .with_context(|| format!("creating {}", tmp.display()))?;
            file.write_all(self.to_text()?.as_bytes())?;
            file.sync_all()?;
            // A hard link appears atomically and never replaces a file.
            match std::fs::hard_link(&tmp, path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                Err(e) => Err(e).with_context(|| format!("writing {}", path.display())),
            }
        })();
        let _ = std::fs::remove_file(&tmp);
        written?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
            && let Ok(dir) = std::fs::File::open(parent)
        {
            let _ = dir.sync_all();
        }
        KeyFile::read(path)
    }

    /// The key file with the keys an older version kept in the database
    /// (rows of `server_secrets`), the rest generated.
    fn from_legacy(legacy: &[(String, Vec<u8>)]) -> Result<KeyFile> {
        let mut keys = KeyFile::generate();
        for (name, value) in legacy {
            match name.as_str() {
                LEGACY_JWT => keys.jwt_secret = value.clone(),
                LEGACY_SEAL => {
                    let key: [u8; 32] = value.as_slice().try_into().map_err(|_| {
                        anyhow!("the sealing key kept in the database is not 32 bytes")
                    })?;
                    keys.sealing_keys = vec![(crate::secrets::GENERATED_KEY_ID, key)];
                }
                LEGACY_LINKS => keys.link_key = Some(value.clone()),
                _ => {}
            }
        }
        Ok(keys)
    }

    /// Whether this file holds every key in `legacy`, unchanged.
    fn holds(&self, legacy: &[(String, Vec<u8>)]) -> bool {
        legacy.iter().all(|(name, value)| match name.as_str() {
            LEGACY_JWT => &self.jwt_secret == value,
            LEGACY_SEAL => self
                .sealing_keys
                .iter()
                .any(|(id, key)| *id == crate::secrets::GENERATED_KEY_ID && key[..] == value[..]),
            LEGACY_LINKS => self.link_key.as_ref() == Some(value),
            _ => true,
        })
    }

    /// Fingerprints by name (recorded in the database).
    fn fingerprints(&self) -> Vec<(String, Vec<u8>)> {
        let mut out = vec![("jwt".to_string(), fingerprint("jwt", &self.jwt_secret))];
        for (id, key) in &self.sealing_keys {
            let name = format!("seal:{id}");
            out.push((name.clone(), fingerprint(&name, key)));
        }
        if let Some(key) = &self.audit_key {
            out.push(("audit".to_string(), fingerprint("audit", key)));
        }
        out
    }
}

fn fingerprint(name: &str, key: &[u8]) -> Vec<u8> {
    let mut hash = Sha256::new();
    hash.update(b"workspace key fingerprint\0");
    hash.update(name.as_bytes());
    hash.update([0]);
    hash.update(key);
    hash.finalize().to_vec()
}

/// Where the keys come from: the configuration, and the key file for what
/// it leaves out.
#[derive(Clone, Debug)]
pub struct KeySource {
    pub jwt_secret: Option<Vec<u8>>,
    pub sealing_keys: Option<crate::config::SecretKeys>,
    /// The key file (configured, or the data directory's default).
    pub key_file: Option<PathBuf>,
    /// Whether a missing key file may be generated (the embedded database;
    /// never with `DATABASE_URL`).
    pub may_create: bool,
}

impl KeySource {
    pub fn from_config(config: &crate::config::Config) -> Result<KeySource> {
        Ok(KeySource {
            jwt_secret: config
                .auth
                .jwt_secret
                .as_ref()
                .map(|s| s.as_bytes().to_vec()),
            sealing_keys: config.secrets.parsed()?,
            key_file: config.secrets.key_file.clone(),
            may_create: config.secrets.generate_key_file,
        })
    }

    fn file_needed(&self) -> bool {
        self.jwt_secret.is_none() || self.sealing_keys.is_none()
    }

    fn file_hint(&self) -> String {
        self.key_file
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "/etc/workspace/server.keys".to_string())
    }
}

/// The keys in force.
pub struct ServerKeys {
    pub jwt_secret: Vec<u8>,
    pub secrets: crate::secrets::Secrets,
    /// Signs the local file store's download links.
    pub link_key: Vec<u8>,
    /// The audit log's key (installed by [`load`] for the datastore: see
    /// [`crate::audit::install_keys`]).
    pub audit_key: Vec<u8>,
}

/// The audit key of a key file without one (or of keys configured without
/// a file): HMAC-SHA256 of a label under the token secret. Deterministic,
/// so every instance and every start derives the same key; one-way, so it
/// says nothing of the token secret.
fn derived_audit_key(jwt_secret: &[u8]) -> Vec<u8> {
    use hmac::Mac;
    let mut mac = match hmac::Hmac::<Sha256>::new_from_slice(jwt_secret) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts keys of any length"),
    };
    mac.update(b"workspace audit key v1");
    mac.finalize().into_bytes().to_vec()
}

/// Loads the keys (see the module's description): moves keys an older
/// version kept in the database into the key file when allowed, checks the
/// key file against the fingerprints the database keeps.
pub async fn load(
    source: &KeySource,
    datastore: &Datastore,
    log: &slog::Logger,
) -> Result<ServerKeys> {
    let legacy = datastore
        .legacy_server_keys()
        .await
        .map_err(|e| anyhow!("reading the keys table: {e}"))?;
    let file = match &source.key_file {
        Some(path) if path.exists() => Some(KeyFile::read(path)?),
        _ => None,
    };
    let file = match file {
        Some(file) => {
            if !legacy.is_empty() {
                adopt_legacy(&file, &legacy, source, datastore, log).await?;
            }
            Some(file)
        }
        None if !legacy.is_empty() || source.file_needed() => {
            let path = match (&source.key_file, source.may_create) {
                (Some(path), true) => path.clone(),
                _ if !legacy.is_empty() => bail!(
                    "this database still holds the server's keys (table server_secrets, \
                     written by an earlier version): move them into a key file with \
                     `workspace-server keys export --file {}`, then set WORKSPACE_KEY_FILE \
                     (secrets.key_file) to it on every instance",
                    source.file_hint()
                ),
                (Some(path), false) => bail!(
                    "the key file {} does not exist: make one with \
                     `workspace-server keys generate --file {}` (the same file on every \
                     instance), or set WORKSPACE_JWT_SECRET and WORKSPACE_SECRET_KEYS",
                    path.display(),
                    path.display()
                ),
                (None, _) => bail!(
                    "no keys are configured: with DATABASE_URL, make a key file with \
                     `workspace-server keys generate --file {}` and set WORKSPACE_KEY_FILE \
                     to it (the same file on every instance), or set WORKSPACE_JWT_SECRET \
                     and WORKSPACE_SECRET_KEYS (see README, Configuration)",
                    source.file_hint()
                ),
            };
            if !legacy.is_empty() {
                let file = KeyFile::from_legacy(&legacy)?.write_new(&path)?;
                adopt_legacy(&file, &legacy, source, datastore, log).await?;
                slog::info!(log, "moved the server's keys out of the database into the key file";
                    "key_file" => path.display().to_string());
                Some(file)
            } else {
                if !datastore
                    .key_fingerprints()
                    .await
                    .map_err(|e| anyhow!("reading key fingerprints: {e}"))?
                    .is_empty()
                {
                    bail!(
                        "the key file {} is missing, and this database's tokens and sealed \
                         secrets were made with the keys it held: put it back (from your \
                         backup of it, or from the machine the database came from)",
                        path.display()
                    );
                }
                let file = KeyFile::generate().write_new(&path)?;
                slog::info!(log, "generated the server's keys into the key file (back it up \
                    apart from the database)"; "key_file" => path.display().to_string());
                Some(file)
            }
        }
        None => None,
    };
    if let Some(file) = &file {
        check_fingerprints(file, source, datastore).await?;
    }
    let keys = resolve(source, file.as_ref())?;
    crate::audit::install_keys(crate::audit::AuditKeys::derive(&keys.audit_key));
    Ok(keys)
}

/// Checks that `file` holds the keys the database still keeps, then
/// deletes them from the database.
async fn adopt_legacy(
    file: &KeyFile,
    legacy: &[(String, Vec<u8>)],
    source: &KeySource,
    datastore: &Datastore,
    log: &slog::Logger,
) -> Result<()> {
    if !file.holds(legacy) {
        bail!(
            "this database holds keys (table server_secrets, from an earlier version) \
             other than the ones in the key file {}: use the key file made for this \
             database, or move the database's keys into a new file with \
             `workspace-server keys export --file NEW_PATH`",
            source.file_hint()
        );
    }
    let names: Vec<String> = legacy.iter().map(|(n, _)| n.clone()).collect();
    datastore
        .legacy_server_keys_remove(&names)
        .await
        .map_err(|e| anyhow!("removing the keys from the database: {e}"))?;
    slog::info!(log, "removed the server's keys from the database (they are in the key file)";
        "keys" => names.join(","));
    Ok(())
}

/// Records the key file's fingerprints, refusing keys other than the ones
/// recorded before.
async fn check_fingerprints(
    file: &KeyFile,
    source: &KeySource,
    datastore: &Datastore,
) -> Result<()> {
    let mine = file.fingerprints();
    let recorded = datastore
        .key_fingerprints_record(&mine)
        .await
        .map_err(|e| anyhow!("recording key fingerprints: {e}"))?;
    for (name, fp) in &recorded {
        if let Some((_, own)) = mine.iter().find(|(n, _)| n == name)
            && own != fp
        {
            bail!(
                "the key file {} does not hold the keys this database was made with \
                 (key {name:?} differs): tokens would not verify and sealed secrets would \
                 not open. Use the key file from the machine (or backup) the database \
                 came from",
                source.file_hint()
            );
        }
    }
    Ok(())
}

/// The keys in force: the configuration's, and the file's for the rest.
fn resolve(source: &KeySource, file: Option<&KeyFile>) -> Result<ServerKeys> {
    let jwt_secret = match (&source.jwt_secret, file) {
        (Some(secret), _) => secret.clone(),
        (None, Some(file)) => file.jwt_secret.clone(),
        (None, None) => bail!("no token secret is configured"),
    };
    let mut keys: Vec<(u8, [u8; 32])> = Vec::new();
    if let Some(file) = file {
        keys.extend(file.sealing_keys.iter().copied());
    }
    let write_key = match &source.sealing_keys {
        Some((configured, write)) => {
            for (id, key) in configured {
                match keys.iter().find(|(other, _)| other == id) {
                    Some((_, existing)) if existing != key => bail!(
                        "secret key {id} is configured with another value than the key file's"
                    ),
                    Some(_) => {}
                    None => keys.push((*id, *key)),
                }
            }
            *write
        }
        None => match file {
            Some(file) => file.write_key,
            None => bail!("no sealing key is configured"),
        },
    };
    let link_key = match file.and_then(|f| f.link_key.clone()) {
        Some(key) => key,
        None => {
            let mut hash = Sha256::new();
            hash.update(b"workspace download links\0");
            hash.update(&jwt_secret);
            hash.finalize().to_vec()
        }
    };
    let audit_key = match file.and_then(|f| f.audit_key.clone()) {
        Some(key) => key,
        None => derived_audit_key(&jwt_secret),
    };
    Ok(ServerKeys {
        jwt_secret,
        secrets: crate::secrets::Secrets::new(&keys, write_key)?,
        link_key,
        audit_key,
    })
}

/// `workspace-server keys generate --file PATH`: a new key file (refusing
/// to replace one).
pub fn generate_file(path: &Path) -> Result<()> {
    if path.exists() {
        bail!(
            "{} exists already: a new key would log everyone out and make sealed \
             secrets unreadable. Remove it first if that is what you want",
            path.display()
        );
    }
    let wanted = KeyFile::generate();
    let written = wanted.write_new(path)?;
    if written != wanted {
        bail!(
            "{} was created by another process meanwhile",
            path.display()
        );
    }
    Ok(())
}

/// `workspace-server keys export --file PATH`: moves the keys an older
/// version kept in the database into the key file (creating it), checks
/// them against a file already there, and records the fingerprints.
pub async fn export(datastore: &Datastore, path: &Path, log: &slog::Logger) -> Result<bool> {
    let legacy = datastore
        .legacy_server_keys()
        .await
        .map_err(|e| anyhow!("reading the keys table: {e}"))?;
    if legacy.is_empty() {
        return Ok(false);
    }
    let source = KeySource {
        jwt_secret: None,
        sealing_keys: None,
        key_file: Some(path.to_path_buf()),
        may_create: true,
    };
    load(&source, datastore, log).await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_file_round_trips_and_is_written_0600() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested").join(KEY_FILE_NAME);
        let keys = KeyFile::generate();
        let read = keys.write_new(&path).unwrap();
        assert_eq!(read, keys);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{mode:o}");
        // A second writer gets the first one's keys, never replaces them.
        assert_eq!(KeyFile::generate().write_new(&path).unwrap(), keys);
        assert!(generate_file(&path).is_err());
        // No temporary files left beside it.
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(KEY_FILE_NAME)]);
    }

    #[test]
    fn a_key_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE_NAME);
        KeyFile::generate().write_new(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = KeyFile::read(&path).unwrap_err().to_string();
        assert!(error.contains("chmod 600"), "{error}");
    }

    #[test]
    fn malformed_key_files_are_refused() {
        for text in [
            "",
            "version = 2\njwt_secret = \"\"\nsecret_keys = []\nwrite_key = 0\n",
            "version = 1\njwt_secret = \"c2hvcnQ=\"\nsecret_keys = []\nwrite_key = 0\n",
            &format!(
                "version = 1\njwt_secret = \"{}\"\nsecret_keys = [\"0:c2hvcnQ=\"]\nwrite_key = 0\n",
                b64().encode([7u8; 64])
            ),
            &format!(
                "version = 1\njwt_secret = \"{}\"\nsecret_keys = [\"1:{}\"]\nwrite_key = 0\n",
                b64().encode([7u8; 64]),
                b64().encode([1u8; 32])
            ),
        ] {
            assert!(KeyFile::parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn configured_keys_join_the_files() {
        let file = KeyFile::generate();
        let source = KeySource {
            jwt_secret: Some(vec![9; 40]),
            sealing_keys: Some((vec![(3, [3; 32])], 3)),
            key_file: None,
            may_create: false,
        };
        let keys = resolve(&source, Some(&file)).unwrap();
        assert_eq!(keys.jwt_secret, vec![9; 40]);
        // Sealed with the configured writing key; the file's key 0 still opens.
        let sealed = keys.secrets.seal(b"x", b"ad");
        assert_eq!(sealed[1], 3);
        let old = crate::secrets::Secrets::new(&file.sealing_keys, 0)
            .unwrap()
            .seal(b"old", b"ad");
        assert_eq!(keys.secrets.open(&old, b"ad").unwrap(), b"old");
        // Nothing at all: an error, not a silent key.
        let none = KeySource {
            jwt_secret: None,
            sealing_keys: None,
            key_file: None,
            may_create: false,
        };
        assert!(resolve(&none, None).is_err());
    }

    #[test]
    fn the_audit_key_is_the_files_or_derived_from_the_token_secret() {
        let source = KeySource {
            jwt_secret: None,
            sealing_keys: None,
            key_file: None,
            may_create: false,
        };
        // A new key file has its own audit key, kept across a round trip.
        let file = KeyFile::generate();
        let own = file.audit_key.clone().unwrap();
        assert_eq!(own.len(), 32);
        assert_eq!(KeyFile::parse(&file.to_text().unwrap()).unwrap(), file);
        assert_eq!(resolve(&source, Some(&file)).unwrap().audit_key, own);
        // A key file from before it: derived from the token secret, the
        // same at every start and on every instance, and not the secret.
        let mut old = file.clone();
        old.audit_key = None;
        let text = old.to_text().unwrap();
        assert!(!text.contains("audit_key"));
        let derived = resolve(&source, Some(&KeyFile::parse(&text).unwrap()))
            .unwrap()
            .audit_key;
        assert_eq!(derived, resolve(&source, Some(&old)).unwrap().audit_key);
        assert_ne!(derived, own);
        assert_ne!(derived, old.jwt_secret);
        assert_eq!(derived, derived_audit_key(&old.jwt_secret));
        // Fingerprinted like the other keys (when the file holds one).
        assert!(file.fingerprints().iter().any(|(name, _)| name == "audit"));
        assert!(!old.fingerprints().iter().any(|(name, _)| name == "audit"));
    }
}
