//! What each exposed relation reads, for the response cache: the tables whose changes can change
//! a read of it, or that nothing bounds what it reads. Each backend derives them from its own
//! catalog (`backend::postgres::dependencies`, `backend::sqlite::introspect`).

use std::collections::{HashMap, HashSet};

/// What a read depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reads {
    /// Exactly these tables (OIDs): a committed change to any of them changes the answer.
    Tables(Vec<u32>),
    /// Any table (a user function is involved, which may read anything).
    AnyTable,
    /// Not cacheable: rowgate cannot bound it.
    Unbounded,
}

/// Cache dependencies of the whole schema cache.
#[derive(Debug, Default)]
pub struct Dependencies {
    /// By relation OID.
    pub relations: HashMap<u32, Reads>,
    /// Every table of the database carries the trigger (a user function may read any of them).
    pub all_tables_watched: bool,
    /// No user function reads `request.headers` / `request.cookies`, which the cache key leaves
    /// out, so that calling one can be cached.
    pub functions_cacheable: bool,
    /// Relations that read themselves again through a view or policy: an answer restricted to
    /// some of their rows still depends on all of them (the other rows decide what it shows).
    pub self_reading: HashSet<u32>,
    /// SQLite: some writes fire no update hook — to a `WITHOUT ROWID` table, or a `DELETE`
    /// without `WHERE` in a trigger (SQLite's truncate optimization) — so a commit names
    /// no tables reliably and must flush the response cache.
    pub writes_unreported: bool,
}

impl Dependencies {
    /// What a call of a user function of this volatility depends on.
    pub fn function(&self, volatile: bool) -> Reads {
        if volatile || !self.functions_cacheable || !self.all_tables_watched {
            Reads::Unbounded
        } else {
            Reads::AnyTable
        }
    }
}
