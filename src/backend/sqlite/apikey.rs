//! SQLite's API-key store: the table `_rowgate_api_keys` in the database file (hidden from the
//! API by its prefix, like the accounts' tables), created by `rowgate apikey` on first use.
//! Only a SHA-256 of each key is kept. A server notices keys created or revoked by the command
//! (another process) within [`SqliteDb::watch_schema`]'s period, by the table's fingerprint.

use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension};
use sha2::{Digest, Sha256};

use super::db::SqliteDb;
use crate::apikey::StoredKey;
use crate::error::Error;

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS _rowgate_api_keys (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  key_hash BLOB NOT NULL UNIQUE,
  key_prefix TEXT NOT NULL,
  role TEXT NOT NULL,
  claims TEXT NOT NULL DEFAULT '{}',
  created_at REAL NOT NULL DEFAULT (unixepoch('subsec')),
  expires_at REAL,
  revoked_at REAL
)";

/// Whether the key table exists (no key was ever created when it does not).
fn installed(c: &Connection) -> rusqlite::Result<bool> {
    c.prepare_cached("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '_rowgate_api_keys'")?
        .exists([])
}

/// The key whose SHA-256 is `hash`, if any.
pub async fn lookup(db: &Arc<SqliteDb>, hash: &[u8; 32]) -> Result<Option<StoredKey>, Error> {
    let hash = hash.to_vec();
    db.with_reader(move |c| {
        if !installed(c)? {
            return Ok(None);
        }
        c.prepare_cached(
            "SELECT key_hash, name, role, claims, expires_at, revoked_at IS NOT NULL \
             FROM _rowgate_api_keys WHERE key_hash = ?1",
        )?
        .query_row([&hash], |r| {
            Ok(StoredKey {
                hash: r.get(0)?,
                name: r.get(1)?,
                role: r.get(2)?,
                claims: r.get(3)?,
                expires_at: r.get(4)?,
                revoked: r.get(5)?,
            })
        })
        .optional()
    })
    .await
}

/// What changes whenever a key is created, revoked or deleted: compared between looks, it
/// tells a server to forget the keys it has verified.
pub fn fingerprint(c: &Connection) -> rusqlite::Result<Option<(i64, i64, i64)>> {
    if !installed(c)? {
        return Ok(None);
    }
    c.prepare_cached("SELECT count(*), coalesce(max(id), 0), count(revoked_at) FROM _rowgate_api_keys")?
        .query_row([], |r| Ok(Some((r.get(0)?, r.get(1)?, r.get(2)?))))
}

/// Creates the key table if it is missing.
pub fn install(c: &Connection) -> Result<(), String> {
    c.execute_batch(SCHEMA).map_err(|e| e.to_string())
}

/// Stores a new key for `role` (any name: the access rules decide what it may do) and returns
/// it.
pub fn create(
    c: &Connection,
    role: &str,
    name: &str,
    expires_in: Option<u64>,
    claims: &serde_json::Map<String, serde_json::Value>,
) -> Result<String, String> {
    install(c)?;
    let key = crate::apikey::admin::generate()?;
    let hash: Vec<u8> = Sha256::digest(key.as_bytes()).to_vec();
    let claims = serde_json::Value::Object(claims.clone()).to_string();
    c.execute(
        "INSERT INTO _rowgate_api_keys (name, key_hash, key_prefix, role, claims, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, unixepoch('subsec') + ?6)",
        rusqlite::params![name, hash, &key[..10], role, claims, expires_in.map(|s| s as f64)],
    )
    .map_err(|e| e.to_string())?;
    Ok(key)
}

/// One line per key: id, name, role, prefix, created, expires, state.
pub fn list(c: &Connection) -> Result<Vec<String>, String> {
    install(c)?;
    let mut q = c
        .prepare(
            "SELECT id, name, role, key_prefix, strftime('%Y-%m-%d %H:%M', created_at, 'unixepoch'),
                    coalesce(strftime('%Y-%m-%d %H:%M', expires_at, 'unixepoch'), 'never'),
                    CASE WHEN revoked_at IS NOT NULL THEN 'revoked'
                         WHEN expires_at <= unixepoch('subsec') THEN 'expired' ELSE 'active' END
             FROM _rowgate_api_keys ORDER BY id",
        )
        .map_err(|e| e.to_string())?;
    let rows = q
        .query_map([], |r| {
            Ok(format!(
                "{}\t{}\t{}\t{}…\t{}\t{}\t{}",
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, String>(6)?
            ))
        })
        .map_err(|e| e.to_string())?;
    let mut lines = vec!["id\tname\trole\tprefix\tcreated\texpires\tstate".to_owned()];
    for row in rows {
        lines.push(row.map_err(|e| e.to_string())?);
    }
    Ok(lines)
}

/// Revokes the keys named by id, by name, or by the key itself; returns how many.
pub fn revoke(c: &Connection, which: &str) -> Result<u64, String> {
    install(c)?;
    let hash: Vec<u8> = Sha256::digest(which.as_bytes()).to_vec();
    let id: Option<i64> = which.parse().ok();
    c.execute(
        "UPDATE _rowgate_api_keys SET revoked_at = unixepoch('subsec')
         WHERE revoked_at IS NULL AND (id = ?1 OR name = ?2 OR key_hash = ?3)",
        rusqlite::params![id, which, hash],
    )
    .map(|n| n as u64)
    .map_err(|e| e.to_string())
}
