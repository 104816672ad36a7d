//! The stored bytes, under `storage-dir`: one file per object version, named by the version (a
//! UUID, never by the object's name, so no name can reach outside the directory), in 256
//! folders by its first two characters. An upload streams into `tmp/`, is fsynced and renamed
//! into place, and only then is its row written; a row names only complete files, and a file no
//! row names (a write that failed or was cut short by a crash) is swept.

use std::io;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tokio::io::AsyncWriteExt;

/// The files of `storage-dir`.
#[derive(Debug, Clone)]
pub struct Files {
    root: PathBuf,
}

/// Why an upload's bytes were not kept.
#[derive(Debug)]
pub enum ReceiveError {
    /// More than the limit.
    TooLarge,
    /// The client's body broke off or was malformed.
    Body(String),
    /// The disk failed.
    Io(io::Error),
}

/// An upload's bytes in `tmp/`, removed when dropped unless kept.
#[derive(Debug)]
pub struct Received {
    path: PathBuf,
    /// Bytes.
    pub size: u64,
    file: Option<tokio::fs::File>,
}

impl Drop for Received {
    fn drop(&mut self) {
        if self.file.is_some() || self.path.exists() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Whether `version` can name a file: rowgate's versions are UUIDs.
fn valid_version(version: &str) -> bool {
    version.len() >= 8 && version.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

impl Files {
    /// The files under `root`, creating its folders if missing.
    pub fn open(root: &Path) -> io::Result<Files> {
        std::fs::create_dir_all(root.join("tmp"))?;
        std::fs::create_dir_all(root.join("objects"))?;
        Ok(Files { root: root.to_owned() })
    }

    /// The file of `version`.
    pub fn path(&self, version: &str) -> Option<PathBuf> {
        valid_version(version).then(|| self.root.join("objects").join(&version[..2]).join(version))
    }

    /// Streams `chunks` into a new file in `tmp/`, refusing more than `limit` bytes.
    pub async fn receive<E: std::fmt::Display>(
        &self,
        mut chunks: impl Stream<Item = Result<Bytes, E>> + Unpin,
        limit: u64,
    ) -> Result<Received, ReceiveError> {
        let path = self.root.join("tmp").join(crate::uuid_v4());
        let file = tokio::fs::File::create(&path).await.map_err(ReceiveError::Io)?;
        let mut received = Received { path, size: 0, file: Some(file) };
        let mut out =
            tokio::io::BufWriter::with_capacity(256 * 1024, received.file.take().expect("just made"));
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|e| ReceiveError::Body(e.to_string()))?;
            received.size += chunk.len() as u64;
            if received.size > limit {
                return Err(ReceiveError::TooLarge);
            }
            out.write_all(&chunk).await.map_err(ReceiveError::Io)?;
        }
        out.flush().await.map_err(ReceiveError::Io)?;
        received.file = Some(out.into_inner());
        Ok(received)
    }

    /// Makes `received` the file of `version`: on disk (fsynced) before this returns, so that a
    /// row written after it never names bytes a crash could lose.
    pub async fn keep(&self, mut received: Received, version: &str) -> io::Result<()> {
        let target = self.path(version).ok_or_else(|| io::Error::other("invalid version"))?;
        if let Some(file) = received.file.take() {
            file.sync_all().await?;
        }
        let dir = target.parent().expect("objects/xx").to_owned();
        tokio::fs::create_dir_all(&dir).await?;
        tokio::fs::rename(&received.path, &target).await?;
        // The rename itself is durable once its folder is.
        tokio::fs::File::open(&dir).await?.sync_all().await
    }

    /// A second name for `from`'s bytes as `to` (a copy): a hard link, or a copy where links
    /// cannot be made.
    pub async fn duplicate(&self, from: &str, to: &str) -> io::Result<()> {
        let (source, target) = match (self.path(from), self.path(to)) {
            (Some(s), Some(t)) => (s, t),
            _ => return Err(io::Error::other("invalid version")),
        };
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

    /// Removes the files of `versions` (those that no row names any more).
    pub async fn remove(&self, versions: impl IntoIterator<Item = String>) {
        for version in versions {
            if let Some(path) = self.path(&version) {
                if let Err(e) = tokio::fs::remove_file(&path).await {
                    if e.kind() != io::ErrorKind::NotFound {
                        tracing::warn!(error = %e, file = %path.display(), "a stored file could not be removed");
                    }
                }
            }
        }
    }

    /// Opens `version`'s file for reading from `start`, `len` bytes: a body of its chunks.
    pub async fn read(&self, version: &str, start: u64, len: u64) -> io::Result<crate::response::Body> {
        use tokio::io::{AsyncReadExt, AsyncSeekExt};
        let path = self.path(version).ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
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
            return Ok(crate::response::Body::from(bytes));
        }
        let mut file = tokio::fs::File::open(&path).await?;
        if start > 0 {
            file.seek(io::SeekFrom::Start(start)).await?;
        }
        let chunks = tokio_util::io::ReaderStream::with_capacity(file.take(len), 256 * 1024);
        Ok(crate::response::Body::stream(chunks, len))
    }

    /// The size of `version`'s file, if it is there.
    pub async fn size(&self, version: &str) -> Option<u64> {
        let path = self.path(version)?;
        tokio::fs::metadata(&path).await.ok().map(|m| m.len())
    }

    /// Files in `tmp/` older than `age` (uploads a crash cut short), removed; and files under
    /// `objects/` older than `age` that no row names (`in_use` says which of a batch do).
    pub async fn sweep<F, Fut>(&self, age: std::time::Duration, in_use: F) -> io::Result<usize>
    where
        F: Fn(Vec<String>) -> Fut,
        Fut: std::future::Future<Output = Option<Vec<String>>>,
    {
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
        let mut shards = tokio::fs::read_dir(self.root.join("objects")).await?;
        while let Some(shard) = shards.next_entry().await? {
            let mut candidates = Vec::new();
            let mut files = tokio::fs::read_dir(shard.path()).await?;
            while let Some(file) = files.next_entry().await? {
                let name = file.file_name().to_string_lossy().into_owned();
                if valid_version(&name) && file.metadata().await.is_ok_and(|m| old(&m)) {
                    candidates.push(name);
                }
            }
            for batch in candidates.chunks(500) {
                // Unknown (the database unreachable): keep everything.
                let Some(used) = in_use(batch.to_vec()).await else { continue };
                let orphans: Vec<String> = batch.iter().filter(|v| !used.contains(v)).cloned().collect();
                removed += orphans.len();
                self.remove(orphans).await;
            }
        }
        Ok(removed)
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
    async fn the_sweep_removes_old_files_no_row_names_and_nothing_else() {
        let root = tempfile::tempdir().unwrap();
        let files = Files::open(root.path()).unwrap();
        let day = Duration::from_secs(24 * 3600);
        let (orphan, kept, young) = (
            "aaaaaaaa-0000-4000-8000-000000000001",
            "bbbbbbbb-0000-4000-8000-000000000002",
            "cccccccc-0000-4000-8000-000000000003",
        );
        aged(&files.path(orphan).unwrap(), 2 * day);
        aged(&files.path(kept).unwrap(), 2 * day);
        aged(&files.path(young).unwrap(), Duration::from_secs(60));
        aged(&root.path().join("tmp/cut-short"), 2 * day);
        let removed = files
            .sweep(day, |batch| async move { Some(batch.into_iter().filter(|v| v == kept).collect()) })
            .await
            .unwrap();
        assert_eq!(removed, 2);
        assert!(!files.path(orphan).unwrap().exists());
        assert!(files.path(kept).unwrap().exists());
        assert!(files.path(young).unwrap().exists());
        assert!(!root.path().join("tmp/cut-short").exists());
        // The database unreachable: nothing is removed.
        aged(&files.path(orphan).unwrap(), 2 * day);
        assert_eq!(files.sweep(day, |_| async { None }).await.unwrap(), 0);
        assert!(files.path(orphan).unwrap().exists());
    }
}
