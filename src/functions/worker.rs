//! One function's Deno process: started on its first invocation, reached over a Unix socket,
//! kept while it is used, stopped when idle, replaced when its files change, and killed when
//! an invocation outlives `functions-timeout` (a loop that never yields holds every request of
//! its process, and only its process: each function has its own).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::UnixStream;
use tokio::process::{Child, Command};

use super::logs::LogPump;

/// How long a process may take to listen (a first start downloads its npm packages).
const BOOT_TIMEOUT: Duration = Duration::from_secs(60);

/// A request's body as it is passed on: the caller's, streamed, cut off past `server-max-body-size`.
pub type RequestBody = http_body_util::Limited<hyper::body::Incoming>;

/// How a process is started.
pub struct Launch<'a> {
    pub deno: &'a Path,
    /// The host script (`host.ts`) and the import map beside it.
    pub host: &'a Path,
    pub import_map: &'a Path,
    pub socket: PathBuf,
    /// The function's directory and its entry point in it.
    pub dir: &'a Path,
    pub entry: PathBuf,
    /// The directories the function may read (its own and `_shared`).
    pub readable: Vec<PathBuf>,
    pub memory_mib: u32,
    /// Its environment, the whole of it.
    pub env: Vec<(String, String)>,
}

/// Why a process could not serve.
#[derive(Debug)]
pub enum Failure {
    /// It did not start listening: what it said last.
    Boot(String),
    /// It died or was stopped while answering; `limit` when a bound stopped it.
    Died { limit: bool, reason: String },
    /// The caller's body ran past its limit (the process is fine).
    TooLarge,
}

/// A running process.
pub struct Worker {
    pub name: String,
    socket: PathBuf,
    child: Mutex<Option<Child>>,
    pub in_flight: AtomicUsize,
    last_used: Mutex<Instant>,
    /// The files it was started from.
    pub fingerprint: u64,
    logs: Arc<LogPump>,
    /// Set when a bound stopped it (its memory, its time).
    limited: std::sync::atomic::AtomicBool,
    /// Its stdin, never written: the process ends when this closes, with rowgate if need be.
    _lifeline: Option<tokio::process::ChildStdin>,
    /// Connections to it kept between requests.
    pool: Mutex<Vec<hyper::client::conn::http1::SendRequest<RequestBody>>>,
}

/// Connections kept to one process at most.
const POOLED: usize = 64;

impl Worker {
    /// Starts the process and waits until it listens.
    pub async fn start(name: &str, launch: Launch<'_>, fingerprint: u64) -> Result<Arc<Worker>, Failure> {
        let _ = std::fs::remove_file(&launch.socket);
        // Its own files, the host's, and its socket's directory — not the others' sockets.
        let sockets = launch.socket.parent().unwrap_or(Path::new("/tmp"));
        let mut readable = launch.readable.clone();
        readable.extend([launch.host.to_owned(), launch.import_map.to_owned(), sockets.to_owned()]);
        if let Some(types) = launch.host.parent() {
            readable.push(types.join("edge-runtime.d.ts"));
        }
        let readable = readable.iter().map(|p| p.display().to_string()).collect::<Vec<_>>();
        let mut command = Command::new(launch.deno);
        command
            .arg("run")
            .args(["--quiet", "--no-prompt", "--allow-net", "--allow-env", "--allow-sys"])
            .arg(format!("--allow-read={}", readable.join(",")))
            .arg(format!("--allow-write={}", sockets.display()))
            .arg(format!("--v8-flags=--max-old-space-size={}", launch.memory_mib));
        // A function with its own deno.json or import map resolves by it.
        let own_config =
            ["deno.json", "deno.jsonc", "import_map.json"].iter().any(|f| launch.dir.join(f).exists());
        if !own_config {
            command.arg("--import-map").arg(launch.import_map);
        }
        command
            .arg(launch.host)
            .current_dir(launch.dir)
            .env_clear()
            .envs(launch.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("ROWGATE_FUNCTION_SOCKET", &launch.socket)
            .env(
                "ROWGATE_FUNCTION_ENTRY",
                url::Url::from_file_path(&launch.entry).map(String::from).unwrap_or_default(),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| Failure::Boot(format!("{} cannot be run: {e}", launch.deno.display())))?;
        let logs = LogPump::start(name, child.stdout.take(), child.stderr.take());
        let lifeline = child.stdin.take();
        let started = Instant::now();
        loop {
            if UnixStream::connect(&launch.socket).await.is_ok() {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                tokio::time::sleep(Duration::from_millis(50)).await;
                return Err(Failure::Boot(format!("it exited ({status}): {}", logs.last_lines())));
            }
            if started.elapsed() > BOOT_TIMEOUT {
                return Err(Failure::Boot(format!(
                    "it did not listen within {BOOT_TIMEOUT:?}: {}",
                    logs.last_lines()
                )));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        super::metrics::booted(name, started.elapsed());
        Ok(Arc::new(Worker {
            name: name.to_owned(),
            socket: launch.socket,
            child: Mutex::new(Some(child)),
            in_flight: AtomicUsize::new(0),
            last_used: Mutex::new(Instant::now()),
            fingerprint,
            logs,
            limited: Default::default(),
            _lifeline: lifeline,
            pool: Mutex::default(),
        }))
    }

    /// The CPU time the process has used (Linux's `/proc/<pid>/stat`), if it runs.
    pub fn cpu_time(&self) -> Option<Duration> {
        let pid = self.child.lock().unwrap_or_else(|e| e.into_inner()).as_ref()?.id()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // After the command's name (in parentheses, which may hold spaces): state is the first
        // field, user and system time the 12th and 13th, in USER_HZ ticks (100 a second).
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(Duration::from_millis(ticks * 10))
    }

    /// Whether the process still runs.
    pub fn alive(&self) -> bool {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        matches!(child.as_mut().map(Child::try_wait), Some(Ok(None)))
    }

    /// How long it has gone unused, if nothing is in flight.
    pub fn idle_for(&self) -> Option<Duration> {
        (self.in_flight.load(Ordering::Acquire) == 0)
            .then(|| self.last_used.lock().unwrap_or_else(|e| e.into_inner()).elapsed())
    }

    /// Stops the process; `limit` says a bound did.
    pub fn stop(&self, limit: bool) {
        if limit {
            self.limited.store(true, Ordering::Release);
        }
        if let Some(mut child) = self.child.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = child.start_kill();
            tokio::spawn(async move {
                let _ = child.wait().await;
            });
        }
        let _ = std::fs::remove_file(&self.socket);
    }

    /// Sends `request` and returns the response's head and streaming body, or why not.
    pub async fn send(
        self: &Arc<Self>,
        request: http::Request<RequestBody>,
    ) -> Result<http::Response<hyper::body::Incoming>, Failure> {
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        let sent = async {
            let mut sender = match self.pooled() {
                Some(sender) => sender,
                None => {
                    let stream = UnixStream::connect(&self.socket).await?;
                    let (sender, connection) =
                        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                            .await
                            .map_err(std::io::Error::other)?;
                    tokio::spawn(connection);
                    sender
                }
            };
            let response = sender.send_request(request).await.map_err(|e| {
                let mut source: Option<&dyn std::error::Error> = Some(&e);
                while let Some(s) = source {
                    if s.is::<http_body_util::LengthLimitError>() {
                        return std::io::Error::new(
                            std::io::ErrorKind::FileTooLarge,
                            "the body is too large",
                        );
                    }
                    source = s.source();
                }
                std::io::Error::other(e)
            })?;
            // Ready again once this answer's body has been read.
            let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
            if pool.len() < POOLED {
                pool.push(sender);
            }
            Ok::<_, std::io::Error>(response)
        };
        match sent.await {
            Ok(response) => Ok(response),
            Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => Err(Failure::TooLarge),
            Err(e) => Err(self.died(e.to_string()).await),
        }
    }

    /// A kept connection to the process that is ready for a request, if any; closed ones are
    /// dropped, busy ones kept.
    fn pooled(&self) -> Option<hyper::client::conn::http1::SendRequest<RequestBody>> {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        pool.retain(|s| !s.is_closed());
        let ready = pool.iter().position(|s| s.is_ready())?;
        Some(pool.swap_remove(ready))
    }

    /// Why a request failed: the process's end, if it ended (a process dying is given a moment
    /// to be seen dead).
    async fn died(&self, error: String) -> Failure {
        let mut status = None;
        for _ in 0..50 {
            status = {
                let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
                match child.as_mut() {
                    Some(c) => c.try_wait().ok().flatten(),
                    None => break,
                }
            };
            if status.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let limited = self.limited.load(Ordering::Acquire);
        // V8 aborts a heap past --max-old-space-size with SIGTRAP (exit 133 through a shell).
        let out_of_memory = status.is_some_and(|s| {
            use std::os::unix::process::ExitStatusExt;
            s.signal() == Some(5) || s.code() == Some(133)
        }) || self.logs.last_lines().contains("out of memory");
        let reason = match status {
            Some(s) if out_of_memory => format!("it ran out of memory ({s}): {}", self.logs.last_lines()),
            Some(s) => format!("it exited ({s}): {}", self.logs.last_lines()),
            None => error,
        };
        Failure::Died { limit: limited || out_of_memory, reason }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop(false);
    }
}
