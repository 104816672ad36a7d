//! Supabase's Edge Functions at `/functions/v1/<name>` (docs/functions.md): each function a
//! directory of `functions-dir` with its `index.ts` — Supabase's own layout, `_shared/` beside
//! them — run by Deno in a process of its own ([`worker`]), started on its first invocation and
//! replaced when its files change, so a deploy needs no restart. The request reaches the
//! function as Supabase's gateway passes it (the path below `/functions/v1`, the caller's
//! headers); what the runtime answers of its own — an unknown function, a failed start, a
//! bound reached — is Supabase's JSON. `deploy.rs` writes functions over HTTP.

pub mod deploy;
mod logs;
pub mod metrics;
mod worker;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use futures_util::StreamExt;
use http::{header, HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;

use crate::config::FunctionsSettings;
use crate::response::Body;
use worker::{Failure, Launch, Worker};

const HOST: &str = include_str!("host.ts");

/// The entry points a function may have, in order of preference.
const ENTRIES: [&str; 5] = ["index.ts", "index.js", "index.mts", "index.mjs", "index.tsx"];

/// A function's entry in `[functions.<name>]` of the `config.toml` beside `functions-dir`
/// (Supabase's `supabase/config.toml`).
#[derive(Debug, Clone, Default, serde::Deserialize)]
struct Declared {
    verify_jwt: Option<bool>,
    enabled: Option<bool>,
    entrypoint: Option<String>,
}

/// What the runtime knows of one function.
#[derive(Default)]
struct Slot {
    worker: Option<Arc<Worker>>,
    /// Its files' fingerprint and when it was taken.
    checked: Option<(Instant, u64)>,
    /// The fingerprint of files that failed to start, and when: not tried again for a while,
    /// so that calls to a broken function cost no process each.
    failed: Option<(u64, Instant)>,
    /// When its last process was started: a function whose processes die as they start is not
    /// started again more often than every [`RESTART_GAP`].
    started: Option<Instant>,
}

/// The shortest time between two starts of one function's process.
const RESTART_GAP: Duration = Duration::from_millis(250);

/// How long a function that failed to start is answered 503 without another try.
const BOOT_RETRY: Duration = Duration::from_secs(5);

/// Where a request below `/functions/v1` goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// Function `name`, which needs a verified caller when `verify_jwt`.
    Function { name: String, verify_jwt: bool },
    /// The deploy endpoints below `/_admin`.
    Admin,
    /// No such function.
    Unknown,
}

/// The functions of `functions-dir`.
pub struct Functions {
    settings: FunctionsSettings,
    /// `host.ts`, the import map, and the processes' sockets.
    runtime: tempfile::TempDir,
    /// What every process's environment holds (rowgate's own is never passed on).
    env: Mutex<Vec<(String, String)>>,
    slots: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Slot>>>>,
    /// The entry points and declarations of the functions there are, each looked up again a
    /// second after it was.
    entries: Mutex<HashMap<String, (Instant, PathBuf, Declared)>>,
}

impl Functions {
    /// The functions of `settings.dir`; `env` is each process's environment before the
    /// functions' own `.env`.
    pub fn new(
        mut settings: FunctionsSettings,
        env: Vec<(String, String)>,
    ) -> Result<Arc<Functions>, String> {
        // Deno is given file URLs and permissions, which need whole paths.
        settings.dir = settings.dir.map(|d| std::path::absolute(&d).unwrap_or(d));
        let runtime = tempfile::Builder::new()
            .prefix("rowgate-functions-")
            .tempdir()
            .map_err(|e| format!("the functions' runtime directory cannot be made: {e}"))?;
        let empty = runtime.path().join("edge-runtime.d.ts");
        let write = |path: &Path, text: &str| {
            std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
        };
        write(&runtime.path().join("host.ts"), HOST)?;
        write(&empty, "export {};\n")?;
        // Supabase's template imports the runtime's types; they mean nothing to Deno itself.
        let types = url::Url::from_file_path(&empty).map(String::from).unwrap_or_default();
        let map = serde_json::json!({"imports": {
            "jsr:@supabase/functions-js/edge-runtime.d.ts": types,
            "jsr:@supabase/functions-js@2/edge-runtime.d.ts": types,
            "jsr:@supabase/functions-js@^2/edge-runtime.d.ts": types,
            "@supabase/functions-js/edge-runtime.d.ts": types,
        }});
        write(&runtime.path().join("import_map.json"), &map.to_string())?;
        let functions = Arc::new(Functions {
            settings,
            runtime,
            env: Mutex::new(env),
            slots: Mutex::default(),
            entries: Mutex::default(),
        });
        let reaper = Arc::downgrade(&functions);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(5)).await;
                let Some(functions) = reaper.upgrade() else { return };
                functions.stop_idle();
            }
        });
        Ok(functions)
    }

    /// Sets one variable of every process started from now on (`SUPABASE_URL` once the
    /// server's port is known).
    pub fn set_env(&self, name: &str, value: String) {
        let mut env = self.env.lock().unwrap_or_else(|e| e.into_inner());
        env.retain(|(n, _)| n != name);
        env.push((name.to_owned(), value));
    }

    /// `functions-dir`, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.settings.dir.as_deref()
    }

    /// Where `rest` (the path below `/functions/v1`) goes.
    pub fn route(&self, rest: &str) -> Route {
        let name = rest.trim_start_matches('/').split('/').next().unwrap_or_default();
        if name == "_admin" {
            return Route::Admin;
        }
        match self.entry(name) {
            Some((_, declared)) => Route::Function {
                name: name.to_owned(),
                verify_jwt: declared.verify_jwt.unwrap_or(self.settings.verify_jwt),
            },
            None => Route::Unknown,
        }
    }

    /// A function's entry point and declaration, if it is one that may run.
    fn entry(&self, name: &str) -> Option<(PathBuf, Declared)> {
        if !deploy::valid_name(name) {
            return None;
        }
        if let Some((at, entry, declared)) = self.entries.lock().unwrap_or_else(|e| e.into_inner()).get(name)
        {
            if at.elapsed() < Duration::from_secs(1) {
                return Some((entry.clone(), declared.clone()));
            }
        }
        let found = self.look_up(name);
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match &found {
            // Only functions that exist are kept: unknown names cost a look each, not memory.
            Some((entry, declared)) => {
                entries.insert(name.to_owned(), (Instant::now(), entry.clone(), declared.clone()));
            }
            None => {
                entries.remove(name);
            }
        }
        found
    }

    fn look_up(&self, name: &str) -> Option<(PathBuf, Declared)> {
        let dir = self.settings.dir.as_ref()?;
        let declared = declared(dir, name);
        if declared.enabled == Some(false) {
            return None;
        }
        let here = dir.join(name);
        let entry = match &declared.entrypoint {
            Some(e) => Some(dir.parent().unwrap_or(dir).join(e)).filter(|p| p.is_file()),
            None => ENTRIES.iter().map(|e| here.join(e)).find(|p| p.is_file()),
        }?;
        Some((entry, declared))
    }

    /// Runs function `name` on `request` (its URI already the path the function sees), whose
    /// body may be at most `max_body` bytes.
    pub async fn invoke(&self, name: &str, request: Request<Incoming>, max_body: usize) -> Response<Body> {
        let declared =
            request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > max_body as u64) {
            return answer(
                StatusCode::PAYLOAD_TOO_LARGE,
                "PAYLOAD_TOO_LARGE",
                "The request body is too large",
            );
        }
        let request = request.map(|body| http_body_util::Limited::new(body, max_body));
        let Some((entry, _)) = self.entry(name) else { return not_found() };
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots.entry(name.to_owned()).or_default().clone()
        };
        let worker = {
            let mut slot = slot.lock().await;
            let fingerprint = match slot.checked {
                Some((at, f)) if at.elapsed() < Duration::from_secs(1) => f,
                _ => {
                    let f = self.fingerprint(name);
                    slot.checked = Some((Instant::now(), f));
                    f
                }
            };
            match slot.worker.take() {
                Some(w) if w.alive() && w.fingerprint == fingerprint => slot.worker = Some(w),
                Some(old) => retire(old, self.settings.timeout),
                None => {}
            }
            match &slot.worker {
                Some(w) => w.clone(),
                // Removed meanwhile (the entry cache is a second old at most).
                None if !entry.is_file() => {
                    self.entries.lock().unwrap_or_else(|e| e.into_inner()).remove(name);
                    return not_found();
                }
                None if slot.failed.is_some_and(|(f, at)| f == fingerprint && at.elapsed() < BOOT_RETRY) => {
                    metrics::invoked(name, "boot_error");
                    return boot_error();
                }
                None if slot.started.is_some_and(|at| at.elapsed() < RESTART_GAP) => {
                    metrics::invoked(name, "error");
                    return worker_error(StatusCode::SERVICE_UNAVAILABLE);
                }
                None => match self.start(name, &entry, fingerprint).await {
                    Ok(w) => {
                        slot.worker = Some(w.clone());
                        slot.started = Some(Instant::now());
                        w
                    }
                    Err(reason) => {
                        tracing::error!(function = name, error = %reason, "an Edge Function could not start");
                        metrics::invoked(name, "boot_error");
                        metrics::boot_failed(name);
                        slot.failed = Some((fingerprint, Instant::now()));
                        return boot_error();
                    }
                },
            }
        };
        worker.in_flight.fetch_add(1, Ordering::AcqRel);
        let busy = InFlight(worker.clone());
        let deadline = tokio::time::Instant::now() + self.settings.timeout;
        let failure = tokio::select! {
            sent = tokio::time::timeout_at(deadline, worker.send(request)) => match sent {
                Ok(Ok(response)) => {
                    metrics::invoked(name, "ok");
                    return relay(response, deadline, busy);
                }
                Ok(Err(Failure::TooLarge)) => return too_large(),
                Ok(Err(failure)) => failure,
                Err(_) => {
                    worker.stop(true);
                    Failure::Died {
                        limit: true,
                        reason: format!("an invocation ran past functions-timeout ({:?})", self.settings.timeout),
                    }
                }
            },
            () = cpu_spent(&worker, self.settings.cpu) => {
                worker.stop(true);
                Failure::Died {
                    limit: true,
                    reason: format!("an invocation used more than functions-cpu ({:?})", self.settings.cpu),
                }
            }
        };
        // The process is gone or going: the next invocation starts another.
        {
            let mut slot = slot.lock().await;
            if slot.worker.as_ref().is_some_and(|w| Arc::ptr_eq(w, &worker)) {
                slot.worker = None;
            }
        }
        match failure {
            // Answered above: the process is fine.
            Failure::TooLarge => too_large(),
            Failure::Died { limit: true, reason } => {
                worker.stop(true);
                tracing::warn!(function = name, error = %reason, "an Edge Function was stopped at a limit");
                metrics::invoked(name, "limit");
                answer(
                    StatusCode::from_u16(546).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                    "WORKER_LIMIT",
                    "Worker failed to respond due to a resource limit (please check logs)",
                )
            }
            Failure::Died { reason, .. } | Failure::Boot(reason) => {
                worker.stop(false);
                tracing::error!(function = name, error = %reason, "an Edge Function failed");
                metrics::invoked(name, "error");
                worker_error(StatusCode::INTERNAL_SERVER_ERROR)
            }
        }
    }

    async fn start(&self, name: &str, entry: &Path, fingerprint: u64) -> Result<Arc<Worker>, String> {
        let dir = self.settings.dir.as_deref().unwrap_or(Path::new("."));
        let mut env = self.env.lock().unwrap_or_else(|e| e.into_inner()).clone();
        env.extend(dotenv(&dir.join(".env")));
        let here = dir.join(name);
        // A directory of its own: a function may reach its own socket only.
        let sockets = self.runtime.path().join(name);
        std::fs::create_dir_all(&sockets).map_err(|e| format!("{}: {e}", sockets.display()))?;
        let socket = sockets.join(format!("{fingerprint:x}.sock"));
        let launch = Launch {
            deno: &self.settings.deno,
            host: &self.runtime.path().join("host.ts"),
            import_map: &self.runtime.path().join("import_map.json"),
            socket,
            dir: &here,
            entry: entry.to_owned(),
            readable: vec![here.clone(), dir.join("_shared")],
            memory_mib: self.settings.memory_mib,
            env,
        };
        Worker::start(name, launch, fingerprint).await.map_err(|f| match f {
            Failure::Boot(reason) | Failure::Died { reason, .. } => reason,
            Failure::TooLarge => "a body too large".to_owned(),
        })
    }

    /// A fingerprint of what a function's process runs: its directory, `_shared` and `.env`
    /// (their files' paths, sizes and times).
    fn fingerprint(&self, name: &str) -> u64 {
        use std::hash::Hasher;
        let mut hash = std::collections::hash_map::DefaultHasher::new();
        if let Some(dir) = &self.settings.dir {
            for path in [
                dir.join(name),
                dir.join("_shared"),
                dir.join(".env"),
                dir.parent().unwrap_or(dir).join("config.toml"),
            ] {
                hash_tree(&path, &mut hash, 0);
            }
        }
        hash.finish()
    }

    /// Stops the processes unused for `functions-idle`.
    fn stop_idle(&self) {
        let slots: Vec<_> = self.slots.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
        for slot in slots {
            let Ok(mut slot) = slot.try_lock() else { continue };
            if slot.worker.as_ref().and_then(|w| w.idle_for()).is_some_and(|idle| idle >= self.settings.idle)
            {
                if let Some(w) = slot.worker.take() {
                    tracing::debug!(function = %w.name, "an idle Edge Function's process stopped");
                    w.stop(false);
                }
            }
        }
    }

    /// Stops function `name`'s process (it was removed or replaced).
    pub async fn forget(&self, name: &str) {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).remove(name);
        let slot = self.slots.lock().unwrap_or_else(|e| e.into_inner()).remove(name);
        if let Some(slot) = slot {
            if let Some(w) = slot.lock().await.worker.take() {
                retire(w, self.settings.timeout);
            }
        }
    }

    /// The functions there are, with whether each needs a verified caller and runs now.
    pub fn list(&self) -> Vec<serde_json::Value> {
        let Some(dir) = &self.settings.dir else { return Vec::new() };
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|d| d.filter_map(Result::ok).filter_map(|e| e.file_name().into_string().ok()).collect())
            .unwrap_or_default();
        names.sort();
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        names
            .into_iter()
            .filter_map(|name| {
                let (_, declared) = self.entry(&name)?;
                let running = slots
                    .get(&name)
                    .and_then(|s| s.try_lock().ok().map(|s| s.worker.as_ref().is_some_and(|w| w.alive())))
                    .unwrap_or(false);
                Some(serde_json::json!({
                    "slug": name,
                    "name": name,
                    "verify_jwt": declared.verify_jwt.unwrap_or(self.settings.verify_jwt),
                    "running": running,
                }))
            })
            .collect()
    }
}

/// Completes once the invocation it watches has used `budget` of CPU: its share of what its
/// process used while it ran (the process's time split evenly among what it was answering).
async fn cpu_spent(worker: &Worker, budget: Duration) {
    let mut last = worker.cpu_time();
    let mut charged = Duration::ZERO;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = worker.cpu_time();
        if let (Some(before), Some(after)) = (last, now) {
            let sharing = u32::try_from(worker.in_flight.load(Ordering::Acquire).max(1)).unwrap_or(u32::MAX);
            charged += after.saturating_sub(before) / sharing;
        }
        last = now;
        if charged > budget {
            return;
        }
    }
}

/// Stops `worker` once what it is answering is done (or its time is up).
fn retire(worker: Arc<Worker>, timeout: Duration) {
    tokio::spawn(async move {
        let until = Instant::now() + timeout;
        while worker.in_flight.load(Ordering::Acquire) > 0 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        worker.stop(false);
    });
}

fn hash_tree(path: &Path, hash: &mut impl std::hash::Hasher, depth: usize) {
    use std::hash::Hash;
    let Ok(meta) = std::fs::metadata(path) else { return };
    path.hash(hash);
    meta.len().hash(hash);
    meta.modified().ok().and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok()).hash(hash);
    if meta.is_dir() && depth < 8 {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        entries.sort();
        for entry in entries.iter().filter(|e| e.file_name().is_some_and(|n| n != "node_modules")) {
            hash_tree(entry, hash, depth + 1);
        }
    }
}

/// `[functions.<name>]` of the config.toml beside `dir`, if any.
fn declared(dir: &Path, name: &str) -> Declared {
    let file = dir.parent().unwrap_or(dir).join("config.toml");
    let Ok(text) = std::fs::read_to_string(file) else { return Declared::default() };
    let Ok(table) = text.parse::<toml::Table>() else { return Declared::default() };
    table
        .get("functions")
        .and_then(|f| f.get(name))
        .and_then(|d| d.clone().try_into::<Declared>().ok())
        .unwrap_or_default()
}

/// `KEY=VALUE` lines of a `.env` file (the Supabase CLI's secrets), comments and blanks skipped.
fn dotenv(path: &Path) -> Vec<(String, String)> {
    let Ok(text) = std::fs::read_to_string(path) else { return Vec::new() };
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let line = line.strip_prefix("export ").unwrap_or(line);
            let (key, value) = line.split_once('=')?;
            let key = key.trim();
            if key.is_empty() || key.starts_with('#') || key.starts_with("ROWGATE_") {
                return None;
            }
            let value = value.trim();
            let value = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(value);
            Some((key.to_owned(), value.to_owned()))
        })
        .collect()
}

/// Counts an invocation out when its answer has been sent (or dropped).
struct InFlight(Arc<Worker>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The function's answer, streamed to the client until it ends or the invocation's time is up.
fn relay(response: Response<Incoming>, deadline: tokio::time::Instant, busy: InFlight) -> Response<Body> {
    let (mut parts, incoming) = response.into_parts();
    for hop in [header::CONNECTION, header::TRANSFER_ENCODING, header::UPGRADE, header::TE, header::TRAILER] {
        parts.headers.remove(hop);
    }
    parts.headers.remove("keep-alive");
    let frames = http_body_util::BodyStream::new(incoming).filter_map(|frame| async move {
        match frame {
            Ok(frame) => frame.into_data().ok().map(Ok),
            Err(e) => Some(Err(std::io::Error::other(e))),
        }
    });
    let bounded =
        futures_util::stream::unfold((Box::pin(frames), busy), move |(mut frames, busy)| async move {
            match tokio::time::timeout_at(deadline, frames.next()).await {
                Ok(Some(chunk)) => Some((chunk, (frames, busy))),
                Ok(None) => None,
                Err(_) => Some((
                    Err(std::io::Error::other("the function's answer ran past functions-timeout")),
                    (frames, busy),
                )),
            }
        });
    let length = parts.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let body = match length {
        Some(n) => Body::stream(bounded, n),
        None => Body::Open(Box::pin(bounded)),
    };
    Response::from_parts(parts, body)
}

/// The runtime's own answer, in Supabase's shape.
pub fn answer(status: StatusCode, code: &str, message: &str) -> Response<Body> {
    let body = serde_json::json!({"code": code, "message": message}).to_string();
    let mut response = Response::new(Body::from(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A caller's body past `server-max-body-size` (the function's process goes on).
fn too_large() -> Response<Body> {
    answer(StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE", "The request body is too large")
}

/// A function whose process failed.
fn worker_error(status: StatusCode) -> Response<Body> {
    answer(status, "WORKER_ERROR", "Function exited due to an error (please check logs)")
}

/// A function that could not start.
fn boot_error() -> Response<Body> {
    answer(StatusCode::SERVICE_UNAVAILABLE, "BOOT_ERROR", "Worker failed to boot (please check logs)")
}

/// An unknown function.
pub fn not_found() -> Response<Body> {
    answer(StatusCode::NOT_FOUND, "NOT_FOUND", "Requested function was not found")
}
