//! Blobs in an S3-compatible bucket (`storage-s3-url`, through `object_store`): one object per
//! version under `<prefix>/objects/`. An upload streams into its version's object as it arrives
//! (one PUT when small, a multipart upload of bounded parts when not, so memory stays bounded
//! whatever the size); it is complete and durable when the store acknowledges it, before its row
//! is written. An upload that fails or is cut short is aborted, or its object removed.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::buffered::BufWriter;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use tokio::io::AsyncWriteExt;

use super::{next_chunk, valid_version, Chunks, FileStore, ReadAllError, ReceiveError, Received, Staged};
use crate::config::S3Settings;
use crate::response::Body;

/// An upload's part: S3's parts are at least 5 MiB, and an upload holds at most
/// `PART_BYTES * (PARTS_IN_FLIGHT + 1)` in memory.
const PART_BYTES: usize = 8 * 1024 * 1024;
const PARTS_IN_FLIGHT: usize = 2;

/// The blobs of a bucket.
#[derive(Debug, Clone)]
pub struct S3 {
    store: Arc<dyn ObjectStore>,
    /// `<prefix>/objects`.
    objects: Path,
}

impl S3 {
    /// The bucket `settings` name, with its access key, or else credentials from the
    /// environment as AWS's tools take them (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_SESSION_TOKEN`, a container's or an instance's role). Nothing is asked of the bucket
    /// yet: see [`S3::check`].
    pub fn open(settings: &S3Settings) -> Result<S3, String> {
        let rest = settings
            .url
            .strip_prefix("s3://")
            .ok_or_else(|| format!("storage-s3-url {:?}: expected s3://bucket[/prefix]", settings.url))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(format!("storage-s3-url {:?}: no bucket", settings.url));
        }
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
        if let Some(endpoint) = &settings.endpoint {
            builder = builder.with_endpoint(endpoint).with_allow_http(endpoint.starts_with("http://"));
        }
        if let (Some(id), Some(secret)) = (&settings.access_key_id, &settings.secret_access_key) {
            builder = builder.with_access_key_id(id).with_secret_access_key(secret);
        }
        if let Some(region) = &settings.region {
            builder = builder.with_region(region);
        }
        let store = builder.build().map_err(|e| format!("storage-s3-url {:?}: {e}", settings.url))?;
        let objects = Path::from(prefix).join("objects");
        Ok(S3 { store: Arc::new(store), objects })
    }

    /// Whether the bucket answers (it exists and the credentials may list it).
    pub async fn check(&self) -> Result<(), String> {
        self.store.list_with_delimiter(Some(&self.objects)).await.map(|_| ()).map_err(|e| e.to_string())
    }

    fn key(&self, version: &str) -> io::Result<Path> {
        valid_version(version)
            .then(|| self.objects.clone().join(version))
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    async fn receive_into(&self, mut chunks: Chunks, limit: u64) -> Result<Received, ReceiveError> {
        let version = crate::uuid_v4();
        let key = self.key(&version).map_err(ReceiveError::Io)?;
        let mut upload = Upload::new(Arc::clone(&self.store), key.clone());
        let mut size = 0u64;
        while let Some(chunk) = next_chunk(&mut chunks, &mut size, limit).await? {
            upload.put(chunk).await.map_err(ReceiveError::Io)?;
        }
        upload.finish().await.map_err(ReceiveError::Io)?;
        let staged = InBucket { store: Arc::clone(&self.store), key: Some(key) };
        Ok(Received::new(version, size, Box::new(staged)))
    }

    async fn read_range(&self, version: &str, start: u64, len: u64) -> io::Result<Body> {
        let key = self.key(version)?;
        if len == 0 {
            return Ok(Body::default());
        }
        let range = Some(GetRange::Bounded(start..start + len));
        let got =
            self.store.get_opts(&key, GetOptions { range, ..Default::default() }).await.map_err(io_error)?;
        if len <= 64 * 1024 {
            return Ok(Body::from(got.bytes().await.map_err(io_error)?));
        }
        Ok(Body::stream(got.into_stream().map_err(io_error), len))
    }

    async fn read_whole(&self, version: &str, max: u64) -> Result<Vec<u8>, ReadAllError> {
        let key = self.key(version).map_err(ReadAllError::Io)?;
        let got = self.store.get(&key).await.map_err(|e| ReadAllError::Io(io_error(e)))?;
        if got.meta.size > max {
            return Err(ReadAllError::TooLarge(got.meta.size));
        }
        Ok(got.bytes().await.map_err(|e| ReadAllError::Io(io_error(e)))?.to_vec())
    }

    async fn old_objects(&self, age: Duration) -> io::Result<(usize, Vec<String>)> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let before = now.saturating_sub(age).as_secs() as i64;
        let mut listed = self.store.list(Some(&self.objects));
        let mut old = Vec::new();
        while let Some(meta) = listed.next().await {
            let meta = meta.map_err(io_error)?;
            match meta.location.filename() {
                Some(name) if valid_version(name) && meta.last_modified.timestamp() < before => {
                    old.push(name.to_owned())
                }
                _ => {}
            }
        }
        Ok((0, old))
    }
}

impl FileStore for S3 {
    fn receive(&self, chunks: Chunks, limit: u64) -> BoxFuture<'_, Result<Received, ReceiveError>> {
        self.receive_into(chunks, limit).boxed()
    }

    fn duplicate<'a>(&'a self, from: &'a str, to: &'a str) -> BoxFuture<'a, io::Result<()>> {
        async move { self.store.copy(&self.key(from)?, &self.key(to)?).await.map_err(io_error) }.boxed()
    }

    fn remove<'a>(&'a self, version: &'a str) -> BoxFuture<'a, io::Result<()>> {
        async move {
            match self.store.delete(&self.key(version)?).await {
                Err(object_store::Error::NotFound { .. }) | Ok(()) => Ok(()),
                Err(e) => Err(io_error(e)),
            }
        }
        .boxed()
    }

    fn read<'a>(&'a self, version: &'a str, start: u64, len: u64) -> BoxFuture<'a, io::Result<Body>> {
        self.read_range(version, start, len).boxed()
    }

    fn size<'a>(&'a self, version: &'a str) -> BoxFuture<'a, Option<u64>> {
        async move { self.store.head(&self.key(version).ok()?).await.ok().map(|m| m.size) }.boxed()
    }

    fn read_all<'a>(&'a self, version: &'a str, max: u64) -> BoxFuture<'a, Result<Vec<u8>, ReadAllError>> {
        self.read_whole(version, max).boxed()
    }

    fn old(&self, age: Duration) -> BoxFuture<'_, io::Result<(usize, Vec<String>)>> {
        self.old_objects(age).boxed()
    }
}

fn io_error(e: object_store::Error) -> io::Error {
    match e {
        object_store::Error::NotFound { .. } => io::Error::new(io::ErrorKind::NotFound, e),
        e => io::Error::other(e),
    }
}

/// An upload under way. Dropped before it finished (its request went away), it is aborted so
/// the bucket keeps no parts; dropped while finishing, its object (if it was made) is removed.
struct Upload {
    store: Arc<dyn ObjectStore>,
    key: Path,
    writer: Option<BufWriter>,
    finishing: bool,
}

impl Upload {
    fn new(store: Arc<dyn ObjectStore>, key: Path) -> Upload {
        let writer = BufWriter::with_capacity(Arc::clone(&store), key.clone(), PART_BYTES)
            .with_max_concurrency(PARTS_IN_FLIGHT);
        Upload { store, key, writer: Some(writer), finishing: false }
    }

    async fn put(&mut self, chunk: Bytes) -> io::Result<()> {
        self.writer.as_mut().expect("not finished").put(chunk).await.map_err(io_error)
    }

    async fn finish(mut self) -> io::Result<()> {
        self.finishing = true;
        self.writer.as_mut().expect("not finished").shutdown().await?;
        self.writer = None;
        Ok(())
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        let Some(mut writer) = self.writer.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let (store, key, finishing) = (Arc::clone(&self.store), self.key.clone(), self.finishing);
        runtime.spawn(async move {
            let cleaned = if finishing { store.delete(&key).await } else { writer.abort().await };
            if let Err(e) = cleaned {
                tracing::warn!(error = %e, key = %key, "storage: an unfinished upload could not be cleaned up");
            }
        });
    }
}

/// A received object, removed when dropped unless kept.
struct InBucket {
    store: Arc<dyn ObjectStore>,
    key: Option<Path>,
}

impl Staged for InBucket {
    fn keep(mut self: Box<Self>) -> BoxFuture<'static, io::Result<()>> {
        // The store acknowledged the whole object when the upload finished: it is durable.
        self.key = None;
        async { Ok(()) }.boxed()
    }
}

impl Drop for InBucket {
    fn drop(&mut self) {
        let Some(key) = self.key.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let store = Arc::clone(&self.store);
        runtime.spawn(async move {
            if let Err(e) = store.delete(&key).await {
                tracing::warn!(error = %e, key = %key, "storage: a refused upload's object could not be removed");
            }
        });
    }
}
