//! Rows read as the server (a public bucket's, a signed URL's object), kept between storage
//! writes: this process is the SQLite file's only writer, so a storage write here is every
//! write, and each one empties the cache once it has committed. A read that started before a
//! write keeps its answer out of the cache (the generation it started in has passed), so no
//! entry is older than the last write.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::storage::store::{Bucket, ObjectRow};

/// How many rows of each kind are kept at most.
const ENTRIES: u64 = 10_000;

pub(super) struct ServerReads {
    generation: AtomicU64,
    /// Held while a write empties the cache and while a read stores in it.
    turn: Mutex<()>,
    buckets: moka::sync::Cache<String, Option<Arc<Bucket>>>,
    objects: moka::sync::Cache<(String, String), Option<Arc<ObjectRow>>>,
}

/// A read's ticket: the generation it started in.
#[derive(Clone, Copy)]
pub(super) struct Ticket(u64);

impl ServerReads {
    pub(super) fn new() -> ServerReads {
        ServerReads {
            generation: AtomicU64::new(0),
            turn: Mutex::new(()),
            buckets: moka::sync::Cache::new(ENTRIES),
            objects: moka::sync::Cache::new(ENTRIES),
        }
    }

    /// The ticket of a read starting now.
    pub(super) fn ticket(&self) -> Ticket {
        Ticket(self.generation.load(Ordering::Acquire))
    }

    pub(super) fn bucket(&self, id: &str) -> Option<Option<Arc<Bucket>>> {
        self.buckets.get(id)
    }

    pub(super) fn object(&self, bucket: &str, name: &str) -> Option<Option<Arc<ObjectRow>>> {
        self.objects.get(&(bucket.to_owned(), name.to_owned()))
    }

    /// Keeps what a read found, unless a write committed since its ticket.
    pub(super) fn keep_bucket(&self, ticket: Ticket, id: String, found: Option<Arc<Bucket>>) {
        let _turn = self.turn.lock().unwrap_or_else(|e| e.into_inner());
        if self.generation.load(Ordering::Acquire) == ticket.0 {
            self.buckets.insert(id, found);
        }
    }

    /// Keeps what a read found, unless a write committed since its ticket.
    pub(super) fn keep_object(
        &self,
        ticket: Ticket,
        bucket: String,
        name: String,
        found: Option<Arc<ObjectRow>>,
    ) {
        let _turn = self.turn.lock().unwrap_or_else(|e| e.into_inner());
        if self.generation.load(Ordering::Acquire) == ticket.0 {
            self.objects.insert((bucket, name), found);
        }
    }

    /// After a write has committed (or failed): nothing read before it is kept or served.
    pub(super) fn written(&self) {
        let _turn = self.turn.lock().unwrap_or_else(|e| e.into_inner());
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.buckets.invalidate_all();
        self.objects.invalidate_all();
    }
}
