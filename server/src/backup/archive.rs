//! The backup archive of `db dump`: one tar stream holding, in this order,
//!
//! - `workspace-backup.json`: what the archive is ([`Header`]: format
//!   version, where the server kept its files);
//! - `database.dump`: the database in `pg_dump`'s custom format;
//! - `files/<key>`: each uploaded file of the local file store that the
//!   database refers to, under its storage key;
//! - `manifest.json`, last ([`Manifest`]): the database dump's and every
//!   file's size and SHA-256, the file count and bytes, the files the
//!   database refers to that were not found, and (S3) the bucket's objects
//!   the database refers to.
//!
//! Entries are written and read one at a time, streamed: neither side holds
//! a file in memory. A tar stream is not compressed, so what a restore
//! writes out is never more than the archive's own size.
//!
//! Reading trusts nothing in the archive: only regular-file entries, only
//! the names above, storage keys of plain segments (no absolute path, no
//! `.` or `..`, a small character set), no name twice, and every byte
//! checked against the manifest before a restore uses any of it.

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

pub const FORMAT: &str = "workspace-backup";
pub const VERSION: u32 = 1;
const HEADER_NAME: &str = "workspace-backup.json";
const DATABASE_NAME: &str = "database.dump";
const FILES_PREFIX: &str = "files/";
const MANIFEST_NAME: &str = "manifest.json";
/// The header is a few hundred bytes.
const MAX_HEADER_BYTES: u64 = 64 * 1024;
/// A manifest line is about 170 bytes a file: room for millions.
const MAX_MANIFEST_BYTES: u64 = 1024 * 1024 * 1024;

/// The first entry: what the archive is and where its server kept files.
#[derive(Debug, Serialize, Deserialize)]
pub struct Header {
    pub format: String,
    pub version: u32,
    pub created_at: String,
    pub server_version: String,
    /// `local` (the files are in the archive) or `s3` (they are in
    /// `bucket`, not in the archive).
    pub storage: String,
    #[serde(default)]
    pub bucket: Option<String>,
    #[serde(default)]
    pub endpoint: Option<String>,
}

/// The last entry: what the archive holds, to check it against.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Manifest {
    pub database: Checked,
    pub file_count: u64,
    pub file_bytes: u64,
    /// Every file in the archive, by storage key.
    pub files: BTreeMap<String, Checked>,
    /// Files the database refers to that were not in the file store when
    /// the backup was made (so not in the archive).
    pub missing: Vec<String>,
    /// S3: the objects of the bucket the database refers to.
    pub bucket_objects: Vec<String>,
}

/// A size and a SHA-256 (hex).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checked {
    pub bytes: u64,
    pub sha256: String,
}

/// Whether `key` is a storage key a restore accepts: relative, plain
/// segments of letters, digits, `-`, `_`, `.` and `=` (never `.` or `..`
/// alone), at most 1024 bytes. The server's keys are
/// `orgs/<uuid>/files/<uuid>`.
pub fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 1024
        && key.split('/').all(|part| {
            !part.is_empty()
                && part != "."
                && part != ".."
                && part.len() <= 255
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.=".contains(&b))
        })
}

/// What kind of backup a file holds, from its first bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum Format {
    /// This module's archive.
    Archive,
    /// A bare `pg_dump` custom-format file: what `db dump` wrote before
    /// it held files.
    DatabaseOnly,
}

pub fn detect(path: &Path) -> Result<Format> {
    let mut head = Vec::with_capacity(512);
    std::fs::File::open(path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .take(512)
        .read_to_end(&mut head)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if head.starts_with(b"PGDMP") {
        return Ok(Format::DatabaseOnly);
    }
    if head.len() == 512 && &head[257..262] == b"ustar" {
        return Ok(Format::Archive);
    }
    bail!(
        "{} is not a backup made by `workspace-server db dump` (neither its archive nor a \
         pg_dump custom-format file)",
        path.display()
    )
}

/// Writes an archive entry by entry.
pub struct Writer<W: Write> {
    tar: tar::Builder<W>,
    manifest: Manifest,
}

impl<W: Write> Writer<W> {
    pub fn new(output: W, header: &Header) -> Result<Writer<W>> {
        let mut writer = Writer {
            tar: tar::Builder::new(output),
            manifest: Manifest::default(),
        };
        let json = serde_json::to_vec_pretty(header)?;
        writer.entry(HEADER_NAME, json.len() as u64, json.as_slice())?;
        Ok(writer)
    }

    /// The database dump (`bytes` long), streamed from `data`.
    pub fn database(&mut self, bytes: u64, data: impl Read) -> Result<()> {
        self.manifest.database = self.entry(DATABASE_NAME, bytes, data)?;
        Ok(())
    }

    /// The stored file `key` (`bytes` long), streamed from `data`; returns
    /// its size and SHA-256.
    pub fn file(&mut self, key: &str, bytes: u64, data: impl Read) -> Result<Checked> {
        if !valid_key(key) {
            bail!("not a storage key a restore accepts: {key:?}");
        }
        let checked = self.entry(&format!("{FILES_PREFIX}{key}"), bytes, data)?;
        self.manifest.file_count += 1;
        self.manifest.file_bytes += bytes;
        self.manifest.files.insert(key.to_string(), checked.clone());
        Ok(checked)
    }

    /// Writes the manifest (with `missing` and `bucket_objects`) and ends
    /// the archive; returns the output and the manifest.
    pub fn finish(
        mut self,
        missing: Vec<String>,
        bucket_objects: Vec<String>,
    ) -> Result<(W, Manifest)> {
        self.manifest.missing = missing;
        self.manifest.bucket_objects = bucket_objects;
        let json = serde_json::to_vec(&self.manifest)?;
        self.entry(MANIFEST_NAME, json.len() as u64, json.as_slice())?;
        let mut output = self.tar.into_inner().context("ending the archive")?;
        output.flush().context("writing the backup")?;
        Ok((output, self.manifest))
    }

    fn entry(&mut self, name: &str, bytes: u64, data: impl Read) -> Result<Checked> {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(bytes);
        header.set_mode(0o600);
        header.set_mtime(0);
        let mut reader = Exact {
            inner: data.take(bytes),
            left: bytes,
            hasher: Sha256::new(),
        };
        self.tar
            .append_data(&mut header, name, &mut reader)
            .with_context(|| format!("writing {name} into the backup"))?;
        Ok(Checked {
            bytes,
            sha256: hex(&reader.hasher.finalize()),
        })
    }
}

/// Reads exactly `left` bytes from `inner`, hashing them: a source that
/// ends early (a file truncated while it was read) is an error, not a
/// short entry that would break the archive silently.
struct Exact<R> {
    inner: R,
    left: u64,
    hasher: Sha256,
}

impl<R: Read> Read for Exact<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        let n = self.inner.read(buf)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("{} bytes short (changed while it was read)", self.left),
            ));
        }
        self.hasher.update(&buf[..n]);
        self.left -= n as u64;
        Ok(n)
    }
}

/// An archive unpacked into a staging directory and checked against its
/// manifest.
#[derive(Debug)]
pub struct Unpacked {
    pub header: Header,
    pub manifest: Manifest,
    /// `<staging>/database.dump`.
    pub database: PathBuf,
    /// `<staging>/files`: the stored files under their keys (files 0600,
    /// folders 0700), empty when the archive holds none.
    pub files: PathBuf,
}

/// Unpacks the archive read from `input` into `staging` (an empty folder)
/// and checks every entry against the manifest. Anything unexpected is an
/// error naming it: an entry that is not a regular file (links, folders,
/// devices), a name outside the layout or a storage key a restore does not
/// accept (absolute, `..`), a name twice, bytes that differ from the
/// manifest.
pub fn unpack(input: impl Read, staging: &Path) -> Result<Unpacked> {
    let database = staging.join(DATABASE_NAME);
    let files = staging.join("files");
    private_dir(&files)?;
    let mut archive = tar::Archive::new(input);
    let mut header: Option<Header> = None;
    let mut manifest: Option<Manifest> = None;
    let mut database_seen: Option<Checked> = None;
    let mut unpacked: BTreeMap<String, Checked> = BTreeMap::new();
    for entry in archive.entries().context("reading the backup")? {
        let mut entry = entry.context("reading the backup")?;
        let name = String::from_utf8(entry.path_bytes().into_owned())
            .map_err(|_| anyhow!("refused: the backup has an entry whose name is not UTF-8"))?;
        let kind = entry.header().entry_type();
        if kind != tar::EntryType::Regular {
            bail!("refused: the backup's entry {name:?} is not a regular file ({kind:?})");
        }
        if manifest.is_some() {
            bail!("refused: the backup has an entry after its manifest ({name:?})");
        }
        let size = entry.size();
        match name.as_str() {
            HEADER_NAME if header.is_none() && unpacked.is_empty() => {
                let read: Header = serde_json::from_slice(&small(&mut entry, MAX_HEADER_BYTES)?)
                    .context("refused: the backup's header is not valid")?;
                if read.format != FORMAT || read.version != VERSION {
                    bail!(
                        "refused: a backup of format {} version {}; this server reads {FORMAT} \
                         version {VERSION}",
                        read.format,
                        read.version
                    );
                }
                header = Some(read);
            }
            _ if header.is_none() => {
                bail!("refused: the backup does not start with {HEADER_NAME} (it has {name:?})")
            }
            DATABASE_NAME if database_seen.is_none() => {
                database_seen = Some(copy_to(&mut entry, size, &database)?);
            }
            MANIFEST_NAME => {
                manifest = Some(
                    serde_json::from_slice(&small(&mut entry, MAX_MANIFEST_BYTES)?)
                        .context("refused: the backup's manifest is not valid")?,
                );
            }
            _ => {
                let Some(key) = name.strip_prefix(FILES_PREFIX).filter(|k| valid_key(k)) else {
                    bail!(
                        "refused: the backup's entry {name:?} is not a database dump or a \
                         stored file (absolute paths, `..` and names outside files/ are \
                         never written)"
                    );
                };
                if unpacked.contains_key(key) {
                    bail!("refused: the backup holds {name:?} twice");
                }
                let path = files.join(key);
                if let Some(parent) = path.parent() {
                    private_dir(parent)?;
                }
                let checked = copy_to(&mut entry, size, &path)?;
                unpacked.insert(key.to_string(), checked);
            }
        }
    }
    let header = header.ok_or_else(|| anyhow!("refused: the backup is empty"))?;
    let manifest = manifest
        .ok_or_else(|| anyhow!("refused: the backup has no manifest (it was cut short)"))?;
    let database_seen =
        database_seen.ok_or_else(|| anyhow!("refused: the backup holds no database dump"))?;
    if database_seen != manifest.database {
        bail!("refused: the backup's database dump does not match its manifest (damaged)");
    }
    if unpacked != manifest.files
        || manifest.file_count != unpacked.len() as u64
        || manifest.file_bytes != unpacked.values().map(|c| c.bytes).sum::<u64>()
    {
        let differs = manifest
            .files
            .keys()
            .chain(unpacked.keys())
            .find(|k| manifest.files.get(*k) != unpacked.get(*k))
            .map(|k| format!(" (first: {k})"))
            .unwrap_or_default();
        bail!("refused: the backup's files do not match its manifest{differs} (damaged)");
    }
    Ok(Unpacked {
        header,
        manifest,
        database,
        files,
    })
}

/// A small entry's bytes, at most `max`.
fn small(entry: &mut impl Read, max: u64) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    entry.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        bail!("refused: an entry of the backup is larger than {max} bytes");
    }
    Ok(bytes)
}

/// Streams `size` bytes of `entry` into a new file `path` (mode 0600, never
/// an existing file or link), hashing them.
fn copy_to(entry: &mut impl Read, size: u64, path: &Path) -> Result<Checked> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = entry.read(&mut buf).context("reading the backup")?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        file.write_all(&buf[..n])
            .with_context(|| format!("writing {}", path.display()))?;
        total += n as u64;
    }
    if total != size {
        bail!("refused: the backup was cut short");
    }
    file.sync_all()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(Checked {
        bytes: total,
        sha256: hex(&hasher.finalize()),
    })
}

/// Makes `path` and its missing parents, mode 0700.
pub fn private_dir(path: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .with_context(|| format!("cannot create {}", path.display()))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            format: FORMAT.into(),
            version: VERSION,
            created_at: "now".into(),
            server_version: "test".into(),
            storage: "local".into(),
            bucket: None,
            endpoint: None,
        }
    }

    fn archive(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut writer = Writer::new(Vec::new(), &header()).unwrap();
        writer.database(5, &b"PGDMP"[..]).unwrap();
        for (key, bytes) in files {
            writer.file(key, bytes.len() as u64, *bytes).unwrap();
        }
        writer
            .finish(vec!["orgs/x/files/gone".into()], vec![])
            .unwrap()
            .0
    }

    #[test]
    fn an_archive_unpacks_and_checks() {
        let bytes = archive(&[("orgs/a/files/1", b"one"), ("orgs/b/files/2", b"")]);
        let staging = tempfile::tempdir().unwrap();
        let unpacked = unpack(bytes.as_slice(), staging.path()).unwrap();
        assert_eq!(std::fs::read(&unpacked.database).unwrap(), b"PGDMP");
        assert_eq!(
            std::fs::read(unpacked.files.join("orgs/a/files/1")).unwrap(),
            b"one"
        );
        assert_eq!(unpacked.manifest.file_count, 2);
        assert_eq!(unpacked.manifest.file_bytes, 3);
        assert_eq!(unpacked.manifest.missing, ["orgs/x/files/gone"]);
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&unpacked.files.join("orgs/a/files/1")), 0o600);
        assert_eq!(mode(&unpacked.files.join("orgs/a")), 0o700);
    }

    #[test]
    fn a_short_source_fails_the_dump() {
        let mut writer = Writer::new(Vec::new(), &header()).unwrap();
        let error = writer.database(10, &b"PGDMP"[..]).unwrap_err();
        assert!(format!("{error:#}").contains("5 bytes short"), "{error:#}");
    }

    #[test]
    fn keys_that_could_escape_are_refused() {
        for key in [
            "../x",
            "/etc/passwd",
            "a/../../x",
            "a//b",
            "a/./b",
            "a\\b",
            "",
            "a/b\0",
        ] {
            assert!(!valid_key(key), "{key:?}");
        }
        assert!(valid_key(
            "orgs/0b0e9c9e-2f7a-4b55-8b1a-000000000000/files/x.y"
        ));
    }

    /// A raw tar entry, written by hand so that names the builder refuses
    /// (`..`) can be made.
    fn raw_entry(out: &mut Vec<u8>, name: &str, kind: tar::EntryType, data: &[u8], link: &str) {
        let mut header = tar::Header::new_gnu();
        {
            let gnu = header.as_gnu_mut().unwrap();
            gnu.name[..name.len()].copy_from_slice(name.as_bytes());
            gnu.linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
        header.set_entry_type(kind);
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }

    fn crafted(name: &str, kind: tar::EntryType, link: &str) -> Vec<u8> {
        let mut out = Vec::new();
        let json = serde_json::to_vec(&header()).unwrap();
        raw_entry(&mut out, HEADER_NAME, tar::EntryType::Regular, &json, "");
        raw_entry(&mut out, name, kind, b"owned", link);
        out.resize(out.len() + 1024, 0);
        out
    }

    #[test]
    fn crafted_archives_do_not_escape_the_staging_folder() {
        let outside = tempfile::tempdir().unwrap();
        let staging = outside.path().join("staging");
        std::fs::create_dir(&staging).unwrap();
        for (name, kind, link) in [
            ("files/../../escaped", tar::EntryType::Regular, ""),
            ("files/../escaped", tar::EntryType::Regular, ""),
            ("/tmp/escaped", tar::EntryType::Regular, ""),
            ("../escaped", tar::EntryType::Regular, ""),
            ("files/orgs/a/link", tar::EntryType::Symlink, "/etc/passwd"),
            ("files/orgs/a/hard", tar::EntryType::Link, "/etc/passwd"),
            ("files/orgs/a", tar::EntryType::Directory, ""),
            ("escaped", tar::EntryType::Regular, ""),
        ] {
            let error = unpack(crafted(name, kind, link).as_slice(), &staging).unwrap_err();
            assert!(
                format!("{error:#}").contains("refused"),
                "{name}: {error:#}"
            );
            assert!(!outside.path().join("escaped").exists(), "{name}");
            assert!(!std::path::Path::new("/tmp/escaped").exists(), "{name}");
        }
        // The same file twice, and bytes that differ from the manifest.
        let mut twice = Vec::new();
        let json = serde_json::to_vec(&header()).unwrap();
        raw_entry(&mut twice, HEADER_NAME, tar::EntryType::Regular, &json, "");
        for _ in 0..2 {
            raw_entry(&mut twice, "files/a/b", tar::EntryType::Regular, b"x", "");
        }
        let staging = tempfile::tempdir().unwrap();
        let error = unpack(twice.as_slice(), staging.path()).unwrap_err();
        assert!(format!("{error:#}").contains("twice"), "{error:#}");
        let mut damaged = archive(&[("orgs/a/files/1", b"one")]);
        let at = damaged.windows(3).position(|w| w == b"one").unwrap();
        damaged[at] = b'O';
        let staging = tempfile::tempdir().unwrap();
        let error = unpack(damaged.as_slice(), staging.path()).unwrap_err();
        assert!(
            format!("{error:#}").contains("do not match its manifest"),
            "{error:#}"
        );
        // Cut short: no manifest.
        let whole = archive(&[("orgs/a/files/1", b"one")]);
        let staging = tempfile::tempdir().unwrap();
        let error = unpack(&whole[..2048], staging.path()).unwrap_err();
        assert!(format!("{error:#}").contains("refused"), "{error:#}");
    }
}
