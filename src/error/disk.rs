//! A full disk, wherever rowgate meets it — SQLite's file, PostgreSQL's `53100 disk_full`,
//! `storage-dir` — is the operator's condition, not a client's mistake nor rowgate's bug: the
//! request is answered 503 with `Retry-After` ([`RETRY_AFTER`]), each one is counted for
//! `/rowgate/metrics`, and the log says so without repeating itself for every request.

use std::sync::atomic::{AtomicU64, Ordering};

/// The seconds a client is told to wait: long enough for an operator (or a delete) to free
/// room, short enough that writes resume soon after.
pub const RETRY_AFTER: u32 = 30;

/// Requests refused for a full disk since start.
static REFUSED: AtomicU64 = AtomicU64::new(0);

/// When the last log line about a full disk was written (seconds since the epoch).
static LOGGED: AtomicU64 = AtomicU64::new(0);

/// How often, at most, a full disk is logged (state changes are logged where they happen).
const LOG_EVERY_SECS: u64 = 10;

/// Counts one request refused because `place` (`SQLite`, `PostgreSQL`, `storage-dir`, ...) is
/// out of room, and logs it unless that was done in the last [`LOG_EVERY_SECS`].
pub fn refused(place: &str, detail: &dyn std::fmt::Display) {
    let total = REFUSED.fetch_add(1, Ordering::Relaxed) + 1;
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let last = LOGGED.load(Ordering::Relaxed);
    if now >= last + LOG_EVERY_SECS
        && LOGGED.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    {
        tracing::warn!(place, error = %detail, refused_so_far = total, "the disk is full: writes are refused until there is room");
    }
}

/// `rowgate_disk_full_refusals_total` in Prometheus text.
pub fn render_metrics(out: &mut String) {
    out.push_str(
        "# HELP rowgate_disk_full_refusals_total Requests answered 503 because a disk (the database's or storage's) was full.\n\
         # TYPE rowgate_disk_full_refusals_total counter\n",
    );
    out.push_str(&format!("rowgate_disk_full_refusals_total {}\n", REFUSED.load(Ordering::Relaxed)));
}
