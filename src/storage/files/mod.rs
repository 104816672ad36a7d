//! The stored bytes: one blob per object version, named by the version (a UUID, never by the
//! object's name, so no name can reach outside the store). Two homes behind one seam,
//! [`FileStore`]: `storage-dir` on the local disk ([`disk`]), or an S3-compatible bucket
//! ([`s3`], `storage-s3-url`).
//!
//! Either way an upload streams into a blob of a new version that is complete and durable
//! before its row is written; a row names only complete blobs, and a blob no row names (a write
//! that failed, or one a crash cut short) is swept once it is old.

pub mod disk;
pub mod s3;

use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;

use crate::response::Body;

/// An upload's bytes as they arrive.
pub type Chunks = BoxStream<'static, Result<Bytes, String>>;

/// What storage needs of a place to keep bytes. Versions given to it are rowgate's own UUIDs.
pub trait FileStore: Send + Sync {
    /// Streams `chunks` into the blob of a new version, refusing more than `limit` bytes. The
    /// blob is nobody's until [`Received::keep`]; dropped before that, it goes.
    fn receive(&self, chunks: Chunks, limit: u64) -> BoxFuture<'_, Result<Received, ReceiveError>>;
    /// A second blob, `to`, with `from`'s bytes (a copy).
    fn duplicate<'a>(&'a self, from: &'a str, to: &'a str) -> BoxFuture<'a, io::Result<()>>;
    /// Removes `version`'s blob; one already gone is not an error.
    fn remove<'a>(&'a self, version: &'a str) -> BoxFuture<'a, io::Result<()>>;
    /// `len` bytes of `version`'s blob from `start`, as a body.
    fn read<'a>(&'a self, version: &'a str, start: u64, len: u64) -> BoxFuture<'a, io::Result<Body>>;
    /// The size of `version`'s blob (an error of kind `NotFound` when it is not there).
    fn size<'a>(&'a self, version: &'a str) -> BoxFuture<'a, io::Result<u64>>;
    /// All of `version`'s blob, when it is at most `max` bytes.
    fn read_all<'a>(&'a self, version: &'a str, max: u64) -> BoxFuture<'a, Result<Vec<u8>, ReadAllError>>;
    /// Removes what uploads cut short left behind once older than `age`, saying how many; and
    /// names the blobs older than `age` (some of which no row may name).
    fn old(&self, age: Duration) -> BoxFuture<'_, io::Result<(usize, Vec<String>)>>;
}

/// Why an upload's bytes were not kept.
#[derive(Debug)]
pub enum ReceiveError {
    /// More than the limit.
    TooLarge,
    /// The client's body broke off or was malformed.
    Body(String),
    /// The store failed.
    Io(io::Error),
}

/// Why [`FileStore::read_all`] gave no bytes.
#[derive(Debug)]
pub enum ReadAllError {
    /// Past the limit: its size.
    TooLarge(u64),
    /// Missing, or the store failed.
    Io(io::Error),
}

/// An upload's bytes, received as a new version's blob but not yet kept.
pub struct Received {
    /// The version the bytes were received as.
    pub version: String,
    /// Bytes.
    pub size: u64,
    staged: Box<dyn Staged>,
}

impl std::fmt::Debug for Received {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Received").field("version", &self.version).field("size", &self.size).finish()
    }
}

/// A store's hold on a received blob: kept, or removed when dropped.
pub trait Staged: Send + Sync {
    /// Makes the blob its version's for good: durable when this returns.
    fn keep(self: Box<Self>) -> BoxFuture<'static, io::Result<()>>;
}

impl Received {
    /// A received blob of `version`, `size` bytes, which `staged` keeps or drops.
    pub fn new(version: String, size: u64, staged: Box<dyn Staged>) -> Received {
        Received { version, size, staged }
    }

    /// Makes the bytes the blob of [`Received::version`]: durable before this returns, so that
    /// a row written after it never names bytes a crash could lose.
    pub async fn keep(self) -> io::Result<()> {
        self.staged.keep().await
    }
}

/// An upload's next chunk, its bytes counted into `size` and refused past `limit`.
pub(super) async fn next_chunk(
    chunks: &mut Chunks,
    size: &mut u64,
    limit: u64,
) -> Result<Option<Bytes>, ReceiveError> {
    use futures_util::StreamExt;
    let Some(chunk) = chunks.next().await else { return Ok(None) };
    let chunk = chunk.map_err(ReceiveError::Body)?;
    *size += chunk.len() as u64;
    if *size > limit {
        return Err(ReceiveError::TooLarge);
    }
    Ok(Some(chunk))
}

/// Whether `version` can name a blob: rowgate's versions are UUIDs.
pub fn valid_version(version: &str) -> bool {
    version.len() >= 8 && version.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// Blobs up to this size are kept in memory once read.
const SMALL_BLOB: u64 = 64 * 1024;
/// How many bytes of small blobs are kept.
const SMALL_BLOBS_BYTES: u64 = 32 * 1024 * 1024;

/// The stored bytes of a server, wherever they are kept. Small blobs are kept in memory once
/// read: a version's bytes never change, so nothing kept can be stale.
#[derive(Clone)]
pub struct Files {
    store: Arc<dyn FileStore>,
    small: moka::sync::Cache<String, Bytes>,
}

/// A version's bytes as a download needs them: a small blob whole, a larger one by its size.
#[derive(Debug, Clone)]
pub enum Blob {
    Small(Bytes),
    Large(u64),
}

impl Blob {
    /// Its size in bytes.
    pub fn size(&self) -> u64 {
        match self {
            Blob::Small(bytes) => bytes.len() as u64,
            Blob::Large(len) => *len,
        }
    }
}

impl Files {
    /// Bytes kept in `store`.
    pub fn new(store: Arc<dyn FileStore>) -> Files {
        let small = moka::sync::Cache::builder()
            .max_capacity(SMALL_BLOBS_BYTES)
            .weigher(|v: &String, b: &Bytes| (v.len() + b.len()).try_into().unwrap_or(u32::MAX))
            .build();
        Files { store, small }
    }

    /// `version`'s blob: a small one's bytes (from memory after the first read), a larger
    /// one's size; an error of kind `NotFound` when it is not there.
    pub async fn blob(&self, version: &str) -> io::Result<Blob> {
        if let Some(bytes) = self.small.get(version) {
            return Ok(Blob::Small(bytes));
        }
        let size = self.store.size(version).await?;
        if size > SMALL_BLOB {
            return Ok(Blob::Large(size));
        }
        let bytes = match self.store.read_all(version, SMALL_BLOB).await {
            Ok(bytes) => Bytes::from(bytes),
            Err(ReadAllError::Io(e)) => return Err(e),
            // Replaced in between: not a version's bytes (they never change).
            Err(ReadAllError::TooLarge(_)) => return Err(io::Error::other("a blob changed size")),
        };
        self.small.insert(version.to_owned(), bytes.clone());
        Ok(Blob::Small(bytes))
    }

    /// `len` bytes of `blob` (the blob of `version`) from `start`.
    pub async fn body(&self, version: &str, blob: Blob, start: u64, len: u64) -> io::Result<Body> {
        match blob {
            Blob::Small(bytes) => Ok(Body::from(bytes.slice(start as usize..(start + len) as usize))),
            Blob::Large(_) => self.store.read(version, start, len).await,
        }
    }

    /// See [`FileStore::receive`].
    pub async fn receive(&self, chunks: Chunks, limit: u64) -> Result<Received, ReceiveError> {
        self.store.receive(chunks, limit).await
    }

    /// See [`FileStore::duplicate`].
    pub async fn duplicate(&self, from: &str, to: &str) -> io::Result<()> {
        self.store.duplicate(from, to).await
    }

    /// Removes the blobs of `versions` (those that no row names any more); a failure is logged
    /// and left to the sweep.
    pub async fn remove(&self, versions: impl IntoIterator<Item = String>) {
        for version in versions {
            self.small.invalidate(&version);
            if let Err(e) = self.store.remove(&version).await {
                tracing::warn!(error = %e, version, "a stored file could not be removed");
            }
        }
    }

    /// See [`FileStore::read_all`].
    pub async fn read_all(&self, version: &str, max: u64) -> Result<Vec<u8>, ReadAllError> {
        self.store.read_all(version, max).await
    }

    /// Removes what uploads cut short left behind, and the blobs no row names (`in_use` says
    /// which of a batch do), once older than `age`; says how many went.
    pub async fn sweep<F, Fut>(&self, age: Duration, in_use: F) -> io::Result<usize>
    where
        F: Fn(Vec<String>) -> Fut,
        Fut: std::future::Future<Output = Option<Vec<String>>>,
    {
        let (mut removed, old) = self.store.old(age).await?;
        for batch in old.chunks(500) {
            // Unknown (the database unreachable): keep everything.
            let Some(used) = in_use(batch.to_vec()).await else { continue };
            let orphans: Vec<String> = batch.iter().filter(|v| !used.contains(v)).cloned().collect();
            removed += orphans.len();
            self.remove(orphans).await;
        }
        Ok(removed)
    }
}
