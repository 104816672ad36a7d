//! Backups of the SQLite default (docs/reliability.md): one `.tar.gz` holding a consistent copy
//! of the file (`VACUUM INTO`, one read transaction, while the server goes on writing), the
//! stored files that copy's storage rows name, and the access rules. `rowgate backup`, the
//! scheduled backups (`schedule.rs`) and the dashboard make them; `rowgate restore` puts one
//! back. Files a delete removes while a backup copies are kept for it (`Disk::hold_for_backup`),
//! so the copy's rows and files agree.

pub mod command;
pub mod s3;
pub mod schedule;

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::storage::files::disk::Disk;

/// The archive's first entry: what it holds.
const MANIFEST: &str = "rowgate-backup.json";
/// The database file's entry.
const DATABASE: &str = "database.db";
/// The access rules' entry.
const RULES: &str = "rules.toml";
/// The folder of the stored files' entries (`storage/<version>`).
const FILES: &str = "storage/";
/// The archive format this version writes and reads.
const FORMAT: u32 = 1;

/// What a backup is taken from, and restored to.
#[derive(Debug, Clone)]
pub struct Sources {
    /// The SQLite file.
    pub database: PathBuf,
    /// `storage-dir`, when storage keeps its files there (not in an S3 bucket).
    pub storage_dir: Option<PathBuf>,
    /// The access rules file.
    pub rules: Option<PathBuf>,
}

impl Sources {
    /// The sources of `config`'s SQLite file; `None` on PostgreSQL (or in memory), which is
    /// backed up with PostgreSQL's own tools.
    pub fn of(config: &crate::config::Config) -> Option<Sources> {
        let Some(crate::config::SqliteTarget::File(database)) = &config.db.sqlite else { return None };
        let storage_dir =
            (config.storage.enabled && config.storage.s3.is_none()).then(|| config.storage.dir.clone());
        Some(Sources { database: database.clone(), storage_dir, rules: config.db.rules_file() })
    }
}

/// What an archive holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The archive's format.
    pub format: u32,
    /// When the copy of the database was taken (RFC 3339, UTC).
    pub taken_at: String,
    /// The copy's size in bytes.
    pub database_bytes: u64,
    /// The stored files it holds.
    pub files: u64,
    /// Their bytes.
    pub file_bytes: u64,
    /// Whether it holds the access rules.
    pub rules: bool,
}

/// What went wrong taking or restoring a backup.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// Reading or writing a file.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// SQLite refused.
    #[error("SQLite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The archive is not one rowgate wrote, or is damaged.
    #[error("not a rowgate backup: {0}")]
    Invalid(String),
    /// The target is there, or in use.
    #[error("{0}")]
    Refused(String),
}

/// Takes a backup of `sources` into the archive `out` (written beside it, then renamed: a
/// backup cut short leaves no archive), blocking; says what it holds.
pub fn take(sources: &Sources, out: &Path) -> Result<Manifest, BackupError> {
    let dir = out.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let staging = tempfile::Builder::new().prefix(".rowgate-backup-").tempdir_in(dir)?;
    let files = sources.storage_dir.as_deref().map(Disk::open).transpose()?;
    // Held from before the copy is taken until its files are read: what a delete removes
    // meanwhile is kept for this backup.
    let hold = files.as_ref().map(Disk::hold_for_backup).transpose()?;
    let copy = staging.path().join(DATABASE);
    // (Read-write: a read-only connection cannot open a file in WAL mode whose log no server
    // has open. VACUUM INTO only reads it.)
    let conn = rusqlite::Connection::open(&sources.database)?;
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    conn.execute("VACUUM INTO ?1", [copy.to_string_lossy()])?;
    drop(conn);
    let taken_at = crate::storage::time::iso(std::time::SystemTime::now());
    let versions = match &files {
        Some(_) => stored_versions(&copy)?,
        None => Vec::new(),
    };
    let rules = sources.rules.as_ref().filter(|p| p.is_file());
    let partial = staging.path().join("archive.tar.gz");
    let gz = flate2::write::GzEncoder::new(std::fs::File::create(&partial)?, flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    let mut manifest = Manifest {
        format: FORMAT,
        taken_at,
        database_bytes: std::fs::metadata(&copy)?.len(),
        files: 0,
        file_bytes: 0,
        rules: rules.is_some(),
    };
    // The manifest goes first, so a restore knows what it reads before it reads it; its counts
    // are the files found now (one a crash lost already is not counted).
    let mut found = Vec::new();
    if let Some(disk) = &files {
        for version in &versions {
            if let Some(path) = disk.backed_up(version) {
                manifest.file_bytes += std::fs::metadata(&path)?.len();
                found.push((version, path));
            } else {
                tracing::warn!(version, "backup: a stored file its row names is missing");
            }
        }
    }
    manifest.files = found.len() as u64;
    let text = serde_json::to_vec_pretty(&manifest).map_err(|e| BackupError::Invalid(e.to_string()))?;
    append(&mut tar, MANIFEST, &mut text.as_slice(), text.len() as u64)?;
    tar.append_path_with_name(&copy, DATABASE)?;
    if let Some(rules) = rules {
        tar.append_path_with_name(rules, RULES)?;
    }
    for (version, _) in found {
        let disk = files.as_ref().expect("files found on a disk");
        let mut file = open_backed_up(disk, version)?
            .ok_or_else(|| io::Error::other(format!("stored file {version} went during the backup")))?;
        tar.append_file(format!("{FILES}{version}"), &mut file)?;
    }
    drop(hold);
    if let Some(disk) = &files {
        disk.release_kept();
    }
    let file = tar.into_inner()?.finish()?;
    file.sync_all()?;
    std::fs::rename(&partial, out)?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(manifest)
}

/// Opens a stored file for a backup, wherever it is (a removal may move it to `kept/` between
/// the look and the open).
fn open_backed_up(disk: &Disk, version: &str) -> io::Result<Option<std::fs::File>> {
    for _ in 0..2 {
        let Some(path) = disk.backed_up(version) else { return Ok(None) };
        match std::fs::File::open(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            other => return other.map(Some),
        }
    }
    Ok(None)
}

fn append<W: Write>(tar: &mut tar::Builder<W>, name: &str, data: &mut dyn Read, len: u64) -> io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(len);
    header.set_mode(0o644);
    header.set_mtime(crate::accounts::store::unix_now().max(0) as u64);
    header.set_cksum();
    tar.append_data(&mut header, name, data)
}

/// The versions of stored files the copy's storage rows name (none without storage's tables).
fn stored_versions(copy: &Path) -> rusqlite::Result<Vec<String>> {
    let conn = rusqlite::Connection::open_with_flags(copy, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let has_storage: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '_rowgate_storage_objects')",
        [],
        |r| r.get(0),
    )?;
    if !has_storage {
        return Ok(Vec::new());
    }
    let mut q =
        conn.prepare("SELECT DISTINCT version FROM _rowgate_storage_objects WHERE version IS NOT NULL")?;
    let versions = q.query_map([], |r| r.get(0))?.collect();
    versions
}

/// Restores the archive `archive` to `targets`, blocking: refused if the database file is in
/// use (a server running on it), or exists and `replace` is not set. The stored files are put
/// in place first (new names beside the files there), then the database file is swapped in
/// whole, its old log removed, and the rules written.
pub fn restore(archive: &Path, targets: &Sources, replace: bool) -> Result<Manifest, BackupError> {
    if targets.database.exists() {
        if !replace {
            return Err(BackupError::Refused(format!(
                "{} exists: --force replaces it (with the server stopped)",
                targets.database.display()
            )));
        }
        in_use(&targets.database)?;
    }
    let dir = targets.database.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let staging = tempfile::Builder::new().prefix(".rowgate-restore-").tempdir_in(dir)?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(std::fs::File::open(archive)?));
    let mut entries = tar.entries()?;
    let manifest: Manifest = match entries.next() {
        Some(entry) => {
            let mut entry = entry?;
            if entry.path()?.to_str() != Some(MANIFEST) {
                return Err(BackupError::Invalid(format!("its first entry is not {MANIFEST}")));
            }
            let mut text = Vec::new();
            entry.by_ref().take(1 << 20).read_to_end(&mut text)?;
            serde_json::from_slice(&text).map_err(|e| BackupError::Invalid(e.to_string()))?
        }
        None => return Err(BackupError::Invalid("it is empty".into())),
    };
    if manifest.format != FORMAT {
        return Err(BackupError::Invalid(format!(
            "format {} (this rowgate reads {FORMAT})",
            manifest.format
        )));
    }
    let files = match (&targets.storage_dir, manifest.files) {
        (Some(dir), _) => Some(Disk::open(dir)?),
        (None, 0) => None,
        (None, n) => {
            return Err(BackupError::Refused(format!(
                "the backup holds {n} stored files but storage is not enabled"
            )))
        }
    };
    let (mut database, mut rules) = (None, None);
    for entry in entries {
        let mut entry = entry?;
        let name = entry.path()?.to_string_lossy().into_owned();
        match name.as_str() {
            DATABASE => database = Some(unpack(&mut entry, staging.path().join(DATABASE))?),
            RULES => rules = Some(unpack(&mut entry, staging.path().join(RULES))?),
            _ => match (name.strip_prefix(FILES), &files) {
                (Some(version), Some(disk)) => {
                    let target =
                        disk.path(version).ok_or_else(|| BackupError::Invalid(format!("entry {name}")))?;
                    if !target.exists() {
                        // Staged in storage-dir itself: the rename stays on its file system.
                        let partial = unpack(&mut entry, disk.staging_path(version))?;
                        std::fs::create_dir_all(target.parent().unwrap_or(Path::new(".")))?;
                        std::fs::rename(&partial, &target)?;
                    }
                }
                _ => return Err(BackupError::Invalid(format!("an unknown entry {name}"))),
            },
        }
    }
    let database = database.ok_or_else(|| BackupError::Invalid(format!("no {DATABASE}")))?;
    let check: String =
        rusqlite::Connection::open(&database)?.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
    if check != "ok" {
        return Err(BackupError::Invalid(format!("its database fails SQLite's check: {check}")));
    }
    for suffix in ["-wal", "-shm"] {
        let mut old = targets.database.clone().into_os_string();
        old.push(suffix);
        match std::fs::remove_file(PathBuf::from(old)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
    }
    std::fs::rename(&database, &targets.database)?;
    if let (Some(from), Some(to)) = (rules, &targets.rules) {
        // The rules may live on another file system than the database.
        if std::fs::rename(&from, to).is_err() {
            std::fs::copy(&from, to)?;
            std::fs::File::open(to)?.sync_all()?;
        }
    }
    std::fs::File::open(dir)?.sync_all()?;
    Ok(manifest)
}

/// Writes an entry to `path`, synced.
fn unpack(entry: &mut dyn Read, path: PathBuf) -> io::Result<PathBuf> {
    let mut file = std::fs::File::create(&path)?;
    io::copy(entry, &mut file)?;
    file.sync_all()?;
    Ok(path)
}

/// Refuses a database file some connection has open in WAL mode: leaving WAL needs it alone.
fn in_use(database: &Path) -> Result<(), BackupError> {
    let conn = rusqlite::Connection::open(database)?;
    let mode: String = conn.query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0)).unwrap_or_default();
    match mode.eq_ignore_ascii_case("delete") {
        true => Ok(()),
        false => {
            Err(BackupError::Refused(format!("{} is in use: stop the server first", database.display())))
        }
    }
}

/// A backup in a folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Listed {
    /// Its file name.
    pub name: String,
    /// Its size in bytes.
    pub bytes: u64,
}

/// The name a backup taken at `at` gets: sorts by time.
pub fn file_name(at: std::time::SystemTime) -> String {
    let stamp = crate::storage::time::iso(at).replace([':', '-'], "").replace('.', "-");
    format!("rowgate-{stamp}.tar.gz")
}

/// Whether `name` is one [`file_name`] made (and so safe to join to the folder).
pub fn is_backup_name(name: &str) -> bool {
    name.starts_with("rowgate-")
        && name.ends_with(".tar.gz")
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.'))
}

/// The backups in `dir`, newest first.
pub fn list(dir: &Path) -> io::Result<Vec<Listed>> {
    let mut found = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(found),
        other => other?,
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if is_backup_name(&name) {
            found.push(Listed { name, bytes: entry.metadata()?.len() });
        }
    }
    found.sort_by(|a, b| b.name.cmp(&a.name));
    Ok(found)
}

/// Removes all but the newest `keep` backups in `dir`; says how many went.
pub fn prune(dir: &Path, keep: usize) -> io::Result<usize> {
    let old = list(dir)?.into_iter().skip(keep).collect::<Vec<_>>();
    for b in &old {
        std::fs::remove_file(dir.join(&b.name))?;
    }
    Ok(old.len())
}
