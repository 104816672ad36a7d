//! Room on the database file's disk. SQLite answers a write it has no room for with
//! `SQLITE_FULL`, and a delete needs room too (its pages go to the write-ahead log first), as
//! does the checkpoint that would shrink the log. So a file on disk keeps a reserve beside it
//! (`<file>-reserve`, [`RESERVE_BYTES`] of real blocks): the first write that finds the disk
//! full gives the reserve back, and from then on only what frees room runs (deletes, and work
//! that writes nothing) until the disk has room for the reserve and as much again; then the
//! reserve is taken back and every write runs. No restart: each refused write looks, at most
//! once a second.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The reserve's size: what the log of the deletes that free room, and the checkpoint that
/// copies it into the file, may need — the log is checkpointed at about 4 MB.
pub const RESERVE_BYTES: u64 = 16 << 20;

/// How often a refused write looks whether there is room again.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Whether a write needs room, or frees it (or writes nothing): what may run on a full disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Room {
    /// Inserts, updates, anything that may grow the file: refused while the disk is full.
    Needed,
    /// Deletes, and work that writes nothing: run while the disk is full.
    Freed,
}

/// The room a database file has: its reserve, and whether the disk has been found full.
pub struct DiskRoom {
    /// The reserve's path; `None` for a database in memory, which never fills a disk.
    reserve: Option<PathBuf>,
    full: AtomicBool,
    /// When a refused write last looked for room.
    looked: Mutex<Option<Instant>>,
}

impl DiskRoom {
    /// The room of the database file at `file` (`None`: in memory), its reserve made if missing.
    /// A disk without room for it is full from the start.
    pub fn new(file: Option<PathBuf>) -> DiskRoom {
        let reserve = file.map(|f| {
            let mut name = f.into_os_string();
            name.push("-reserve");
            PathBuf::from(name)
        });
        let room = DiskRoom { reserve, full: AtomicBool::new(false), looked: Mutex::new(None) };
        if let Some(path) = &room.reserve {
            if let Err(e) = make_reserve(path) {
                tracing::warn!(path = %path.display(), error = %e, "no room for the SQLite file's reserve: the disk counts as full");
                let _ = std::fs::remove_file(path);
                room.full.store(true, Ordering::SeqCst);
            }
        }
        room
    }

    /// Whether a write that needs room is refused: the disk was found full and still has no
    /// room for the reserve and as much again (looked at most every [`LOOK_EVERY`]).
    pub fn refuses(&self) -> bool {
        if !self.full.load(Ordering::SeqCst) {
            return false;
        }
        let Some(path) = &self.reserve else { return false };
        {
            let mut looked = self.looked.lock().unwrap_or_else(|e| e.into_inner());
            if looked.is_some_and(|at| at.elapsed() < LOOK_EVERY) {
                return true;
            }
            *looked = Some(Instant::now());
        }
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
        let free = match rustix::fs::statvfs(dir) {
            Ok(s) => s.f_bavail.saturating_mul(s.f_frsize),
            Err(_) => return true,
        };
        if free < 2 * RESERVE_BYTES {
            return true;
        }
        match make_reserve(path) {
            Ok(()) => {
                self.full.store(false, Ordering::SeqCst);
                tracing::info!(free_bytes = free, "the SQLite file's disk has room again: writes resume");
                false
            }
            Err(e) => {
                let _ = std::fs::remove_file(path);
                tracing::warn!(error = %e, "the SQLite file's reserve could not be made again");
                true
            }
        }
    }

    /// A write found the disk full: the reserve is given back, for deletes and the checkpoint.
    pub fn filled(&self) {
        let Some(path) = &self.reserve else { return };
        if self.full.swap(true, Ordering::SeqCst) {
            return;
        }
        *self.looked.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        let _ = std::fs::remove_file(path);
        tracing::warn!(
            reserve = %path.display(),
            "the SQLite file's disk is full: writes are refused (deletes still run) until there is room"
        );
    }

    /// Whether the disk was found full and has not had room since.
    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::SeqCst)
    }
}

/// Writes the reserve: bytes that no file system stores as a hole or compresses away, synced.
fn make_reserve(path: &std::path::Path) -> std::io::Result<()> {
    if std::fs::metadata(path).is_ok_and(|m| m.len() == RESERVE_BYTES) {
        return Ok(());
    }
    let mut block = vec![0u8; 64 * 1024];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for chunk in block.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
    let mut file = std::fs::File::create(path)?;
    for _ in 0..RESERVE_BYTES / block.len() as u64 {
        file.write_all(&block)?;
    }
    file.sync_all()
}
