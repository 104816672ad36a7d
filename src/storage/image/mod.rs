//! The image work of a transform, as Supabase Storage's imgproxy does it: resize a stored PNG,
//! JPEG, WebP or GIF to the requested size (`cover` crops to fill, `contain` fits inside,
//! `fill` stretches; never enlarged), re-encode it at `quality`, in its own format or WebP.
//!
//! The work is CPU-bound: it runs on the renderer's own threads, one per core, taking the
//! clients' jobs in turn (`queue.rs`), and a source is refused before it is decoded when its
//! file or its declared size is past the budget (a small file can declare a huge image;
//! `source.rs`). Results are kept in a bounded cache keyed by the object's version and the
//! parameters, so a changed object is never answered from it; decoded sources in another, by
//! version — a large one kept reduced to what any bounded transform needs — so an image asked
//! for at many sizes is decoded once, and by one thread at a time. A client decodes on at most
//! half the threads at once: one client cannot keep every image thread decoding.

mod queue;
mod source;

pub use source::{decode, render, render_source, target, RenderError, Rendered, Source};

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use self::queue::FairQueue;
use self::source::{load, Loaded};
use super::error::StorageError;
use super::files::{Files, ReadAllError};
use super::transform::{Format, Transform};

/// The largest source file transformed.
const MAX_SOURCE_BYTES: u64 = 25 * 1024 * 1024;

/// What a rendering is kept under: the object's version and what was done to it (with whether
/// the client's `Accept` chose WebP, when the transform left the format to it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct RenderKey {
    version: String,
    t: Transform,
    webp: bool,
}

/// Transforms images on its own threads, one per core (each keeps its buffers warm), with
/// bounded caches of results and of decoded sources (an image asked for at many sizes is
/// decoded once).
pub struct Renderer {
    jobs: Arc<FairQueue>,
    results: moka::sync::Cache<RenderKey, Rendered>,
    sources: moka::sync::Cache<String, Arc<Source>>,
    /// Sources read but not yet rendered, at most two per thread: bounds the memory that
    /// encoded sources waiting for a thread take.
    fetches: Arc<tokio::sync::Semaphore>,
    /// Per version being decoded, the lock its decoders take: one decodes, the others then
    /// find it kept.
    decoding: Arc<std::sync::Mutex<HashMap<String, Arc<std::sync::Mutex<()>>>>>,
    /// Sources decoded, and renderings made (not found cached), for `/rowgate/metrics`.
    counts: Arc<Counts>,
    /// Per client with decodes waiting or running, its turns: at most half the threads' worth
    /// run at once, the others waiting for them (not for the other clients').
    clients: Arc<std::sync::Mutex<HashMap<IpAddr, Arc<tokio::sync::Semaphore>>>>,
    per_client: usize,
}

/// What the renderer has done.
#[derive(Default)]
struct Counts {
    decoded: std::sync::atomic::AtomicU64,
    rendered: std::sync::atomic::AtomicU64,
}

/// A client's turn to decode, from when it waits for it until it is dropped.
struct Turn {
    clients: Arc<std::sync::Mutex<HashMap<IpAddr, Arc<tokio::sync::Semaphore>>>>,
    client: IpAddr,
    turns: Arc<tokio::sync::Semaphore>,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        drop(self.permit.take());
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        // The map's and this one: nobody else of the client's waits or runs.
        if Arc::strong_count(&self.turns) == 2 {
            clients.remove(&self.client);
        }
    }
}

/// A client's decodes waiting for its turns at most; past it, a further one is refused (503),
/// as when the server's queue is full.
const WAITING_PER_CLIENT: usize = 64;

/// How long a transform may wait to read its source before it is refused (503).
const FETCH_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Transforms waiting for a thread, per thread, beyond which a request is refused (503).
const QUEUE_PER_THREAD: usize = 64;

impl Renderer {
    /// A renderer with one thread per core, keeping up to `cache_bytes` of results and as many
    /// of decoded sources.
    pub fn new(cache_bytes: u64) -> Renderer {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let jobs = Arc::new(FairQueue::new(threads * QUEUE_PER_THREAD));
        for i in 0..threads {
            let queue = Arc::clone(&jobs);
            let spawned = std::thread::Builder::new().name(format!("rowgate-image-{i}")).spawn(move || {
                while let Some(job) = queue.pop() {
                    // A panic is the job's failure (its caller sees the answer dropped), not the thread's.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                }
            });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "storage: an image thread could not be started");
            }
        }
        let results = moka::sync::Cache::builder()
            .max_capacity(cache_bytes)
            .weigher(|k: &RenderKey, v: &Rendered| {
                (k.version.len() + v.bytes.len()).try_into().unwrap_or(u32::MAX)
            })
            .build();
        let sources = moka::sync::Cache::builder()
            .max_capacity(cache_bytes)
            .weigher(|_, s: &Arc<Source>| s.weight())
            .build();
        let fetches = Arc::new(tokio::sync::Semaphore::new(threads * 2));
        Renderer {
            jobs,
            results,
            sources,
            fetches,
            decoding: Arc::default(),
            counts: Arc::default(),
            clients: Arc::default(),
            per_client: (threads / 2).max(1),
        }
    }

    /// Its counters, in Prometheus text.
    pub fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write;
        let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        let _ = write!(
            out,
            "# HELP rowgate_storage_image_decodes_total Source images decoded for transforms\n\
             # TYPE rowgate_storage_image_decodes_total counter\n\
             rowgate_storage_image_decodes_total {}\n\
             # HELP rowgate_storage_image_transforms_total Transformed images made (not found cached)\n\
             # TYPE rowgate_storage_image_transforms_total counter\n\
             rowgate_storage_image_transforms_total {}\n",
            load(&self.counts.decoded),
            load(&self.counts.rendered)
        );
    }

    /// A turn for `client` to decode, once one of its own is free: waiting longer than a fetch
    /// may, or behind too many of its own, is refused (503).
    async fn turn(&self, client: IpAddr) -> Result<Turn, StorageError> {
        let turns = {
            let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
            let per_client = self.per_client;
            Arc::clone(
                clients.entry(client).or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(per_client))),
            )
        };
        let mut turn =
            Turn { clients: Arc::clone(&self.clients), client, turns: Arc::clone(&turns), permit: None };
        if Arc::strong_count(&turns) > 2 + self.per_client + WAITING_PER_CLIENT {
            return Err(StorageError::busy());
        }
        let permit = tokio::time::timeout(FETCH_WAIT, turns.acquire_owned()).await;
        turn.permit = Some(permit.ok().and_then(Result::ok).ok_or_else(StorageError::busy)?);
        Ok(turn)
    }

    /// `version`'s image (its bytes in `files`) transformed by `t`, from the cache or made now.
    pub async fn render(
        &self,
        files: &Files,
        version: &str,
        t: Transform,
        accepts_webp: bool,
        client: IpAddr,
    ) -> Result<Rendered, StorageError> {
        let key =
            RenderKey { version: version.to_owned(), t, webp: accepts_webp && t.format == Format::Auto };
        if let Some(hit) = self.results.get(&key) {
            return Ok(hit);
        }
        let client = crate::client_key(client);
        // The source's bytes are fetched here, off the image threads, unless it is decoded
        // already (large enough for this transform).
        let input = match self.sources.get(version).filter(|s| s.serves(t)) {
            Some(source) => Input::Decoded(source),
            None => {
                let turn = self.turn(client).await?;
                // Waiting for a turn is bounded like the queue is: past it, the server is busy.
                let fetch = tokio::time::timeout(FETCH_WAIT, Arc::clone(&self.fetches).acquire_owned());
                let permit = fetch.await.ok().and_then(Result::ok).ok_or_else(StorageError::busy)?;
                let bytes = files.read_all(version, MAX_SOURCE_BYTES).await.map_err(|e| match e {
                    ReadAllError::TooLarge(len) => {
                        StorageError::from(RenderError::TooBig(format!("{len} bytes")))
                    }
                    ReadAllError::Io(e) => StorageError::bytes_unreadable(e),
                })?;
                Input::Encoded(bytes, permit, turn)
            }
        };
        let (results, sources, decoding, counts) =
            (self.results.clone(), self.sources.clone(), self.decoding.clone(), self.counts.clone());
        let version = version.to_owned();
        let (answer, answered) = tokio::sync::oneshot::channel();
        let job = move || {
            // Another request may have made it while this one waited.
            let made = match results.get(&key) {
                Some(hit) => Ok(hit),
                None => make(input, &version, t, accepts_webp, &sources, &decoding, &counts).map(|r| {
                    counts.rendered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    // One tag per rendering: the object's version and what was done to it.
                    let digest = Sha256::digest(format!("{}/{}/{}", key.version, t.to_claim(), key.webp));
                    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
                    let r = Rendered { etag: Arc::from(format!("\"{hex}\"")), ..r };
                    results.insert(key, r.clone());
                    r
                }),
            };
            let _ = answer.send(made);
        };
        self.jobs.push(client, Box::new(job)).map_err(|_| StorageError::busy())?;
        answered
            .await
            .map_err(|_| StorageError::internal("The image could not be transformed"))?
            .map_err(StorageError::from)
    }
}

/// What a rendering starts from: a decoded source, or a stored image's bytes (holding one of
/// the renderer's fetch permits and the client's turn to decode until done with them).
enum Input {
    Decoded(Arc<Source>),
    Encoded(Vec<u8>, tokio::sync::OwnedSemaphorePermit, Turn),
}

impl Drop for Renderer {
    fn drop(&mut self) {
        self.jobs.close();
    }
}

/// A rendering of `version` from its decoded source, decoding and keeping that first (one
/// thread at a time per version) if neither `input` nor `sources` has one large enough.
fn make(
    input: Input,
    version: &str,
    t: Transform,
    accepts_webp: bool,
    sources: &moka::sync::Cache<String, Arc<Source>>,
    decoding: &std::sync::Mutex<HashMap<String, Arc<std::sync::Mutex<()>>>>,
    counts: &Counts,
) -> Result<Rendered, RenderError> {
    let (bytes, _permit, _turn) = match input {
        Input::Decoded(source) => return render_source(&source, t, accepts_webp),
        Input::Encoded(bytes, permit, turn) => (bytes, permit, turn),
    };
    let lock =
        Arc::clone(decoding.lock().unwrap_or_else(|e| e.into_inner()).entry(version.to_owned()).or_default());
    let made = {
        let _decoding = lock.lock().unwrap_or_else(|e| e.into_inner());
        match sources.get(version).filter(|s| s.serves(t)) {
            Some(source) => render_source(&source, t, accepts_webp),
            None => match load(&bytes, Some((t, accepts_webp)))? {
                Loaded::Untouched(r) => Ok(r),
                Loaded::Decoded(source) => {
                    counts.decoded.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let (kept, full) = source.keep()?;
                    sources.insert(version.to_owned(), Arc::clone(&kept));
                    match full.filter(|_| !kept.serves(t)) {
                        Some(full) => render_source(&full, t, accepts_webp),
                        None => render_source(&kept, t, accepts_webp),
                    }
                }
            },
        }
    };
    // The last one done with the version's lock takes it out.
    let mut locks = decoding.lock().unwrap_or_else(|e| e.into_inner());
    if Arc::strong_count(&lock) == 2 {
        locks.remove(version);
    }
    made
}
