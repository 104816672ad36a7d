//! What a function prints: each line of its stdout and stderr into rowgate's log, with the
//! function's name — at most [`LINES_PER_SECOND`] a second and [`LINE_BYTES`] a line, so a
//! function that floods its output costs the server a counter, not its log — and the last
//! lines of stderr kept to say why a process would not start.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};

/// Lines a function may log per second; the rest are counted and dropped.
pub const LINES_PER_SECOND: u32 = 100;

/// The longest line logged whole.
pub const LINE_BYTES: usize = 2048;

/// The lines kept for a boot error.
const KEPT: usize = 10;

/// A function's output, read.
pub struct LogPump {
    last: Mutex<VecDeque<String>>,
    budget: Mutex<(Instant, u32, u64)>,
}

impl LogPump {
    /// Reads `stdout` and `stderr` until they close.
    pub fn start(
        name: &str,
        stdout: Option<impl AsyncRead + Unpin + Send + 'static>,
        stderr: Option<impl AsyncRead + Unpin + Send + 'static>,
    ) -> Arc<LogPump> {
        let pump = Arc::new(LogPump { last: Mutex::default(), budget: Mutex::new((Instant::now(), 0, 0)) });
        if let Some(out) = stdout {
            tokio::spawn(pump.clone().read(name.to_owned(), out, false));
        }
        if let Some(err) = stderr {
            tokio::spawn(pump.clone().read(name.to_owned(), err, true));
        }
        pump
    }

    async fn read(self: Arc<Self>, name: String, from: impl AsyncRead + Unpin, stderr: bool) {
        let mut lines = BufReader::new(from);
        let mut buffer = Vec::new();
        loop {
            buffer.clear();
            // A line without an end is cut at the limit rather than read whole into memory.
            match (&mut lines).take(LINE_BYTES as u64 + 1).read_until(b'\n', &mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let mut line = String::from_utf8_lossy(&buffer).trim_end().to_owned();
            if line.len() > LINE_BYTES {
                let mut end = LINE_BYTES;
                while !line.is_char_boundary(end) {
                    end -= 1;
                }
                line.truncate(end);
                line.push('…');
            }
            if stderr {
                let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
                if last.len() == KEPT {
                    last.pop_front();
                }
                last.push_back(line.clone());
            }
            let dropped = {
                let mut budget = self.budget.lock().unwrap_or_else(|e| e.into_inner());
                if budget.0.elapsed().as_secs() >= 1 {
                    let dropped = budget.2;
                    *budget = (Instant::now(), 0, 0);
                    if dropped > 0 {
                        tracing::warn!(function = %name, dropped, "a function logged more than {LINES_PER_SECOND} lines a second: lines dropped");
                    }
                }
                budget.1 += 1;
                if budget.1 > LINES_PER_SECOND {
                    budget.2 += 1;
                    super::metrics::log_dropped(&name);
                    true
                } else {
                    false
                }
            };
            if dropped {
                continue;
            }
            match stderr {
                true => tracing::warn!(function = %name, "{line}"),
                false => tracing::info!(function = %name, "{line}"),
            }
        }
    }

    /// The last lines of stderr, joined.
    pub fn last_lines(&self) -> String {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        last.iter().cloned().collect::<Vec<_>>().join(" | ")
    }
}
