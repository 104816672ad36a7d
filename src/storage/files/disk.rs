//! Blobs under `storage-dir`, one file per version in 256 folders by its first two characters.
//! An upload streams into `tmp/`, is fsynced and renamed into place (and the folder fsynced)
//! before it is kept.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use tokio::io::AsyncWriteExt;

use super::{next_chunk, valid_version, Chunks, FileStore, ReadAllError, ReceiveError, Received, Staged};
use crate::response::Body;

/// The files of `storage-dir`.
#[derive(Debug, Clone)]
pub struct Disk {
    root: PathBuf,
}

/// A received file in `tmp/`, removed when dropped unless kept.
struct InTmp {
    path: PathBuf,
    target: PathBuf,
    file: Option<tokio::fs::File>,
}

impl Drop for InTmp {
    fn drop(&mut self) {
        if self.file.is_some() || self.path.exists() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Staged for InTmp {
    fn keep(mut self: Box<Self>) -> BoxFuture<'static, io::Result<()>> {
        async move {
            if let Some(file) = self.file.take() {
                file.sync_all().await?;
            }
            let dir = self.target.parent().expect("objects/xx").to_owned();
            tokio::fs::create_dir_all(&dir).await?;
            tokio::fs::rename(&self.path, &self.target).await?;
            // The rename itself is durable once its folder is.
            tokio::fs::File::open(&dir).await?.sync_all().await
        }
        .boxed()
    }
}

impl Disk {
    /// The files under `root`, creating its folders if missing.
    pub fn open(root: &Path) -> io::Result<Disk> {
        std::fs::create_dir_all(root.join("tmp"))?;
        std::fs::create_dir_all(root.join("objects"))?;
        Ok(Disk { root: root.to_owned() })
    }

    /// The file of `version`.
    pub fn path(&self, version: &str) -> Option<PathBuf> {
        valid_version(version).then(|| self.root.join("objects").join(&version[..2]).join(version))
    }

    fn found(&self, version: &str) -> io::Result<PathBuf> {
        self.path(version).ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    async fn receive_into(&self, mut chunks: Chunks, limit: u64) -> Result<Received, ReceiveError> {
        let version = crate::uuid_v4();
        let target = self.found(&version).map_err(ReceiveError::Io)?;
        let path = self.root.join("tmp").join(&version);
        let file = tokio::fs::File::create(&path).await.map_err(ReceiveError::Io)?;
        let mut staged = Box::new(InTmp { path, target, file: Some(file) });
        let mut out = tokio::io::BufWriter::with_capacity(256 * 1024, staged.file.take().expect("just made"));
        let mut size = 0u64;
        while let Some(chunk) = next_chunk(&mut chunks, &mut size, limit).await? {
            out.write_all(&chunk).await.map_err(ReceiveError::Io)?;
        }
        out.flush().await.map_err(ReceiveError::Io)?;
        staged.file = Some(out.into_inner());
        Ok(Received::new(version, size, staged))
    }

    async fn duplicate_file(&self, from: &str, to: &str) -> io::Result<()> {
        let (source, target) = (self.found(from)?, self.found(to)?);
        let dir = target.parent().expect("objects/xx").to_owned();
        tokio::fs::create_dir_all(&dir).await?;
        if tokio::fs::hard_link(&source, &target).await.is_ok() {
            // A link keeps the source's age: made young, so that the sweep leaves it alone
            // until its row is written.
            let file = tokio::fs::OpenOptions::new().write(true).open(&target).await?.into_std().await;
            file.set_modified(std::time::SystemTime::now())?;
        } else {
            tokio::fs::copy(&source, &target).await?;
            tokio::fs::File::open(&target).await?.sync_all().await?;
        }
        tokio::fs::File::open(&dir).await?.sync_all().await
    }

    async fn remove_file(&self, version: &str) -> io::Result<()> {
        let path = self.found(version)?;
        if self.backup_running() {
            // The backup's copy of the database may still name it.
            tokio::fs::create_dir_all(self.root.join(KEPT)).await?;
            return match tokio::fs::rename(&path, self.root.join(KEPT).join(version)).await {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            };
        }
        match tokio::fs::remove_file(path).await {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    async fn read_file(&self, version: &str, start: u64, len: u64) -> io::Result<Body> {
        use tokio::io::{AsyncReadExt, AsyncSeekExt};
        let path = self.found(version)?;
        if len <= 64 * 1024 {
            // A small file in one trip to the blocking pool, rather than one per open, seek
            // and read.
            let bytes = tokio::task::spawn_blocking(move || {
                use std::io::{Read, Seek};
                let mut file = std::fs::File::open(&path)?;
                file.seek(io::SeekFrom::Start(start))?;
                let mut bytes = vec![0; len as usize];
                file.read_exact(&mut bytes)?;
                Ok::<_, io::Error>(bytes)
            })
            .await
            .map_err(io::Error::other)??;
            return Ok(Body::from(bytes));
        }
        let mut file = tokio::fs::File::open(&path).await?;
        if start > 0 {
            file.seek(io::SeekFrom::Start(start)).await?;
        }
        let chunks = tokio_util::io::ReaderStream::with_capacity(file.take(len), 256 * 1024);
        Ok(Body::stream(chunks, len))
    }

    async fn read_whole(&self, version: &str, max: u64) -> Result<Vec<u8>, ReadAllError> {
        let path = self.found(version).map_err(ReadAllError::Io)?;
        tokio::task::spawn_blocking(move || {
            use std::io::Read;
            let file = std::fs::File::open(path).map_err(ReadAllError::Io)?;
            let len = file.metadata().map_err(ReadAllError::Io)?.len();
            if len > max {
                return Err(ReadAllError::TooLarge(len));
            }
            let mut bytes = Vec::with_capacity(len as usize);
            io::BufReader::new(file).take(max).read_to_end(&mut bytes).map_err(ReadAllError::Io)?;
            Ok(bytes)
        })
        .await
        .map_err(|e| ReadAllError::Io(io::Error::other(e)))?
    }

    /// Removes files in `tmp/` older than `age` (uploads a crash cut short); names the files
    /// under `objects/` older than `age`.
    async fn old_files(&self, age: Duration) -> io::Result<(usize, Vec<String>)> {
        let old =
            |m: &std::fs::Metadata| m.modified().ok().and_then(|t| t.elapsed().ok()).is_some_and(|e| e > age);
        let mut removed = 0;
        let mut tmp = tokio::fs::read_dir(self.root.join("tmp")).await?;
        while let Some(entry) = tmp.next_entry().await? {
            if entry.metadata().await.is_ok_and(|m| old(&m))
                && tokio::fs::remove_file(entry.path()).await.is_ok()
            {
                removed += 1;
            }
        }
        let mut versions = Vec::new();
        let mut shards = tokio::fs::read_dir(self.root.join("objects")).await?;
        while let Some(shard) = shards.next_entry().await? {
            let mut files = tokio::fs::read_dir(shard.path()).await?;
            while let Some(file) = files.next_entry().await? {
                let name = file.file_name().to_string_lossy().into_owned();
                if valid_version(&name) && file.metadata().await.is_ok_and(|m| old(&m)) {
                    versions.push(name);
                }
            }
        }
        Ok((removed, versions))
    }
}

/// The file a backup holds locked while it runs (`Disk::hold_for_backup`).
const BACKUP_LOCK: &str = "backing-up";
/// Where files removed while a backup runs wait for it to end.
const KEPT: &str = "kept";

impl Disk {
    /// Locks out removals for a backup (any process's) until the returned file is dropped:
    /// meanwhile a removed file is moved to `kept/` instead, where [`Disk::backed_up`] finds it.
    /// Waits for a backup already running.
    pub fn hold_for_backup(&self) -> io::Result<std::fs::File> {
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.root.join(BACKUP_LOCK))?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)?;
        Ok(lock)
    }

    /// Whether a backup holds the lock (one that died has let go of it).
    fn backup_running(&self) -> bool {
        let Ok(lock) = std::fs::File::open(self.root.join(BACKUP_LOCK)) else { return false };
        let tried = rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockShared);
        tried == Err(rustix::io::Errno::WOULDBLOCK)
    }

    /// Where a restored file of `version` is written before it is renamed into place.
    pub fn staging_path(&self, version: &str) -> PathBuf {
        self.root.join("tmp").join(format!("restore-{version}"))
    }

    /// The file of `version` for a backup: in place, or kept since the backup began.
    pub fn backed_up(&self, version: &str) -> Option<PathBuf> {
        let kept = self.root.join(KEPT).join(version);
        [self.path(version)?, kept].into_iter().find(|p| p.is_file())
    }

    /// Removes what was kept for a backup, once it has let go of the lock. (A removal that
    /// decided to keep its file just before that lands after this; the next backup's end
    /// removes it.)
    pub fn release_kept(&self) {
        if let Ok(entries) = std::fs::read_dir(self.root.join(KEPT)) {
            for entry in entries.flatten() {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

impl FileStore for Disk {
    fn receive(&self, chunks: Chunks, limit: u64) -> BoxFuture<'_, Result<Received, ReceiveError>> {
        self.receive_into(chunks, limit).boxed()
    }

    fn duplicate<'a>(&'a self, from: &'a str, to: &'a str) -> BoxFuture<'a, io::Result<()>> {
        self.duplicate_file(from, to).boxed()
    }

    fn remove<'a>(&'a self, version: &'a str) -> BoxFuture<'a, io::Result<()>> {
        self.remove_file(version).boxed()
    }

    fn read<'a>(&'a self, version: &'a str, start: u64, len: u64) -> BoxFuture<'a, io::Result<Body>> {
        self.read_file(version, start, len).boxed()
    }

    fn size<'a>(&'a self, version: &'a str) -> BoxFuture<'a, io::Result<u64>> {
        async move { Ok(tokio::fs::metadata(self.found(version)?).await?.len()) }.boxed()
    }

    fn read_all<'a>(&'a self, version: &'a str, max: u64) -> BoxFuture<'a, Result<Vec<u8>, ReadAllError>> {
        self.read_whole(version, max).boxed()
    }

    fn old(&self, age: Duration) -> BoxFuture<'_, io::Result<(usize, Vec<String>)>> {
        self.old_files(age).boxed()
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;

    fn aged(path: &Path, age: Duration) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"x").unwrap();
        let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.set_modified(SystemTime::now() - age).unwrap();
    }

    #[tokio::test]
    async fn a_file_removed_while_a_backup_runs_is_kept_for_it_until_it_ends() {
        let root = tempfile::tempdir().unwrap();
        let disk = Disk::open(root.path()).unwrap();
        let (during, after) =
            ("aaaaaaaa-0000-4000-8000-000000000001", "bbbbbbbb-0000-4000-8000-000000000002");
        aged(&disk.path(during).unwrap(), Duration::ZERO);
        aged(&disk.path(after).unwrap(), Duration::ZERO);
        let hold = disk.hold_for_backup().unwrap();
        disk.remove_file(during).await.unwrap();
        assert!(!disk.path(during).unwrap().exists());
        assert_eq!(disk.backed_up(during), Some(root.path().join("kept").join(during)));
        drop(hold);
        disk.release_kept();
        assert_eq!(disk.backed_up(during), None);
        disk.remove_file(after).await.unwrap();
        assert_eq!(disk.backed_up(after), None, "removed outright once no backup runs");
    }

    #[tokio::test]
    async fn the_sweep_removes_old_files_no_row_names_and_nothing_else() {
        let root = tempfile::tempdir().unwrap();
        let disk = Disk::open(root.path()).unwrap();
        let files = super::super::Files::new(std::sync::Arc::new(disk.clone()));
        let day = Duration::from_secs(24 * 3600);
        let (orphan, kept, young) = (
            "aaaaaaaa-0000-4000-8000-000000000001",
            "bbbbbbbb-0000-4000-8000-000000000002",
            "cccccccc-0000-4000-8000-000000000003",
        );
        aged(&disk.path(orphan).unwrap(), 2 * day);
        aged(&disk.path(kept).unwrap(), 2 * day);
        aged(&disk.path(young).unwrap(), Duration::from_secs(60));
        aged(&root.path().join("tmp/cut-short"), 2 * day);
        let removed = files
            .sweep(day, |batch| async move { Some(batch.into_iter().filter(|v| v == kept).collect()) })
            .await
            .unwrap();
        assert_eq!(removed, 2);
        assert!(!disk.path(orphan).unwrap().exists());
        assert!(disk.path(kept).unwrap().exists());
        assert!(disk.path(young).unwrap().exists());
        assert!(!root.path().join("tmp/cut-short").exists());
        // The database unreachable: nothing is removed.
        aged(&disk.path(orphan).unwrap(), 2 * day);
        assert_eq!(files.sweep(day, |_| async { None }).await.unwrap(), 0);
        assert!(disk.path(orphan).unwrap().exists());
    }
}
