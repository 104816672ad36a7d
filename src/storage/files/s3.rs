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
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, MultipartUpload, ObjectStore, ObjectStoreExt, PutPayload, UploadPart,
};

use super::{next_chunk, valid_version, Chunks, FileStore, ReadAllError, ReceiveError, Received, Staged};
use crate::config::S3Settings;
use crate::response::Body;

/// An upload's part: S3's are at least 5 MiB (but the last), and some services want them all
/// the same size. An upload holds at most `PART_BYTES * (PARTS_IN_FLIGHT + 1)` in memory.
const PART_BYTES: usize = 5 * 1024 * 1024;
const PARTS_IN_FLIGHT: usize = 2;
/// The most bytes all uploads together may hold in memory (received, not yet sent), reserved a
/// part at a time: past it, uploads wait their turn, their clients held back by TCP's flow
/// control, rather than the server running out.
const UPLOADS_MEMORY: usize = 256 * 1024 * 1024;

/// The blobs of a bucket.
#[derive(Debug, Clone)]
pub struct S3 {
    store: Arc<dyn ObjectStore>,
    /// `<prefix>/objects`.
    objects: Path,
    /// Permits for [`UPLOADS_MEMORY`], one per byte.
    buffered: Arc<tokio::sync::Semaphore>,
}

impl S3 {
    /// The bucket `settings` name, with its access key, or else credentials from the
    /// environment as AWS's tools take them (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_SESSION_TOKEN`, a container's or an instance's role). Nothing is asked of the bucket
    /// yet: see [`S3::check`].
    pub fn open(settings: &S3Settings) -> Result<S3, String> {
        let (store, prefix) = bucket(settings, "storage-s3-url")?;
        let objects = prefix.join("objects");
        let buffered = Arc::new(tokio::sync::Semaphore::new(UPLOADS_MEMORY));
        Ok(S3 { store: Arc::new(store), objects, buffered })
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
        let mut upload = Upload::new(Arc::clone(&self.store), key.clone(), Arc::clone(&self.buffered));
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

    fn size<'a>(&'a self, version: &'a str) -> BoxFuture<'a, io::Result<u64>> {
        async move { self.store.head(&self.key(version)?).await.map(|m| m.size).map_err(io_error) }.boxed()
    }

    fn read_all<'a>(&'a self, version: &'a str, max: u64) -> BoxFuture<'a, Result<Vec<u8>, ReadAllError>> {
        self.read_whole(version, max).boxed()
    }

    fn old(&self, age: Duration) -> BoxFuture<'_, io::Result<(usize, Vec<String>)>> {
        self.old_objects(age).boxed()
    }
}

/// The bucket `settings` names (`option`, for its errors) and the prefix under it.
pub fn bucket(settings: &S3Settings, option: &str) -> Result<(object_store::aws::AmazonS3, Path), String> {
    let rest = settings
        .url
        .strip_prefix("s3://")
        .ok_or_else(|| format!("{option} {:?}: expected s3://bucket[/prefix]", settings.url))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(format!("{option} {:?}: no bucket", settings.url));
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
    let store = builder.build().map_err(|e| format!("{option} {:?}: {e}", settings.url))?;
    Ok((store, Path::from(prefix)))
}

fn io_error(e: object_store::Error) -> io::Error {
    match e {
        object_store::Error::NotFound { .. } => io::Error::new(io::ErrorKind::NotFound, e),
        // A server out of room (MinIO's `XMinioStorageFull`) answers 507; object_store keeps the
        // status only in its message.
        e if e.to_string().contains("507 Insufficient Storage") => {
            io::Error::new(io::ErrorKind::StorageFull, e)
        }
        e => io::Error::other(e),
    }
}

/// An upload under way: its bytes gathered into parts of [`PART_BYTES`]. One that ends within its
/// first part goes up as one PUT; a longer one as a multipart upload, [`PARTS_IN_FLIGHT`] parts
/// at a time. Dropped unfinished (its request went away, a part failed), the multipart upload is
/// aborted once its parts in flight have settled, so the bucket keeps none of it.
struct Upload {
    state: Option<Parts>,
}

struct Parts {
    store: Arc<dyn ObjectStore>,
    key: Path,
    buffered: Arc<tokio::sync::Semaphore>,
    /// The reservation of the part being gathered.
    held: Option<tokio::sync::OwnedSemaphorePermit>,
    pending: std::collections::VecDeque<Bytes>,
    pending_len: usize,
    multipart: Option<Box<dyn MultipartUpload>>,
    in_flight: FuturesUnordered<UploadPart>,
}

impl Upload {
    fn new(store: Arc<dyn ObjectStore>, key: Path, buffered: Arc<tokio::sync::Semaphore>) -> Upload {
        let parts = Parts {
            store,
            key,
            buffered,
            held: None,
            pending: std::collections::VecDeque::new(),
            pending_len: 0,
            multipart: None,
            in_flight: FuturesUnordered::new(),
        };
        Upload { state: Some(parts) }
    }

    async fn put(&mut self, chunk: Bytes) -> io::Result<()> {
        let parts = self.state.as_mut().expect("not finished");
        if parts.held.is_none() {
            // A whole part's worth at once: an upload waiting here holds none, so those that hold
            // some can always fill and send their part (no two uploads wait on each other).
            let part = Arc::clone(&parts.buffered).acquire_many_owned(PART_BYTES as u32).await;
            parts.held = Some(part.map_err(|_| io::Error::other("the upload memory is closed"))?);
        }
        parts.pending_len += chunk.len();
        parts.pending.push_back(chunk);
        while parts.pending_len >= PART_BYTES {
            let part = parts.take(PART_BYTES);
            parts.send(part).await?;
        }
        Ok(())
    }

    /// Completes the upload on a task of its own, so that a request going away cannot leave it
    /// half-done; if nobody waits for it any more by then, its object is removed.
    async fn finish(mut self) -> io::Result<()> {
        let parts = self.state.take().expect("not finished");
        let (answer, answered) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let (store, key) = (Arc::clone(&parts.store), parts.key.clone());
            let done = parts.complete().await;
            if let Err(Ok(())) = answer.send(done) {
                if let Err(e) = store.delete(&key).await {
                    tracing::warn!(error = %e, key = %key, "storage: an abandoned upload's object could not be removed");
                }
            }
        });
        answered.await.unwrap_or_else(|_| Err(io::Error::other("the upload's task ended")))
    }
}

impl Parts {
    /// The first `len` pending bytes, as one payload.
    fn take(&mut self, len: usize) -> PutPayload {
        let mut taken = Vec::new();
        let mut left = len;
        while left > 0 {
            let Some(mut chunk) = self.pending.pop_front() else { break };
            if chunk.len() > left {
                self.pending.push_front(chunk.split_off(left));
            }
            left -= chunk.len();
            taken.push(chunk);
        }
        self.pending_len -= len;
        taken.into_iter().collect()
    }

    async fn send(&mut self, part: PutPayload) -> io::Result<()> {
        if self.multipart.is_none() {
            self.multipart = Some(self.store.put_multipart(&self.key).await.map_err(io_error)?);
        }
        while self.in_flight.len() >= PARTS_IN_FLIGHT {
            if let Some(sent) = self.in_flight.next().await {
                sent.map_err(io_error)?;
            }
        }
        // The part's reservation is held until it has been sent; the next part makes its own.
        let permit = self.held.take();
        let sending = self.multipart.as_mut().expect("just begun").put_part(part);
        self.in_flight.push(Box::pin(async move {
            let sent = sending.await;
            drop(permit);
            sent
        }));
        Ok(())
    }

    async fn complete(mut self) -> io::Result<()> {
        let rest: PutPayload = std::mem::take(&mut self.pending).into_iter().collect();
        let Some(mut multipart) = self.multipart.take() else {
            return self.store.put(&self.key, rest).await.map(|_| ()).map_err(io_error);
        };
        if self.pending_len > 0 {
            self.in_flight.push(multipart.put_part(rest));
        }
        let mut sent = Ok(());
        while let Some(part) = self.in_flight.next().await {
            sent = sent.and(part);
        }
        let completed = match sent {
            Ok(()) => multipart.complete().await.map(|_| ()),
            Err(e) => Err(e),
        };
        if completed.is_err() {
            if let Err(e) = multipart.abort().await {
                tracing::warn!(error = %e, key = %self.key, "storage: a failed upload could not be aborted");
            }
        }
        completed.map_err(io_error)
    }

    /// Lets the parts in flight settle, then aborts the multipart upload.
    async fn abort(mut self) {
        let Some(mut multipart) = self.multipart.take() else { return };
        while self.in_flight.next().await.is_some() {}
        if let Err(e) = multipart.abort().await {
            tracing::warn!(error = %e, key = %self.key, "storage: an unfinished upload could not be aborted");
        }
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        let Some(parts) = self.state.take() else { return };
        if parts.multipart.is_none() {
            return; // Nothing was sent.
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(parts.abort());
        }
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
