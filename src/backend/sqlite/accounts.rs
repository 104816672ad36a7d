//! SQLite's accounts store: tables `_rowgate_users` / `_rowgate_refresh_tokens` in the SQLite
//! file (hidden from the API by their prefix), created when the accounts are first set up.
//! Writes go through the one writer thread.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use rusqlite::OptionalExtension;

use super::db::SqliteDb;
use crate::accounts::store::{expires, random_token, token_hash, AccountStore, User};
use crate::error::Error;

/// The accounts' tables in an SQLite file (hidden from the API by their prefix).
const SQLITE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS _rowgate_users (
  id TEXT PRIMARY KEY,
  email TEXT NOT NULL UNIQUE COLLATE NOCASE,
  password_hash TEXT NOT NULL,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE TABLE IF NOT EXISTS _rowgate_refresh_tokens (
  token_hash TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES _rowgate_users (id) ON DELETE CASCADE,
  expires_at INTEGER NOT NULL,
  revoked INTEGER NOT NULL DEFAULT 0
);";

/// Columns added since the first release of the accounts' tables: (column, definition).
/// `successor`: the stamp of the token a used one was exchanged for (see [`stamped`]).
const SQLITE_ADDED: [(&str, &str); 2] = [("revoked_at", "INTEGER"), ("successor", "TEXT")];

const USER_BY_ID: &str = "SELECT id, email, created_at FROM _rowgate_users WHERE id = ?1";

/// The accounts in an SQLite database.
pub struct SqliteAccounts {
    db: Arc<SqliteDb>,
}

impl SqliteAccounts {
    /// The store in `db`, its tables created (or brought up to date) first.
    pub fn open(db: Arc<SqliteDb>) -> Result<SqliteAccounts, String> {
        db.setup(SQLITE_SCHEMA).map_err(|e| format!("creating the accounts tables: {e}"))?;
        let columns = db.column_names("_rowgate_refresh_tokens").map_err(|e| e.to_string())?;
        for (column, definition) in SQLITE_ADDED {
            if !columns.iter().any(|c| c == column) {
                db.setup(&format!("ALTER TABLE _rowgate_refresh_tokens ADD COLUMN {column} {definition}"))
                    .map_err(|e| format!("updating the accounts tables: {e}"))?;
            }
        }
        Ok(SqliteAccounts { db })
    }
}

impl AccountStore for SqliteAccounts {
    fn create(
        &self,
        id: String,
        email: String,
        password_hash: String,
        now: i64,
    ) -> BoxFuture<'_, Result<Option<(User, String)>, Error>> {
        Box::pin(self.db.with_writer(move |c| {
            match c.execute(
                "INSERT INTO _rowgate_users (id, email, password_hash) VALUES (?1, ?2, ?3)",
                [&id, &email, &password_hash],
            ) {
                Ok(_) => {}
                Err(rusqlite::Error::SqliteFailure(f, _))
                    if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE =>
                {
                    return Ok(None)
                }
                Err(e) => return Err(sqlite_error(e)),
            }
            let user = c.query_row(USER_BY_ID, [&id], sqlite_user).map_err(sqlite_error)?;
            let refresh = store_refresh(c, &user.id, now).map_err(sqlite_error)?;
            Ok(Some((user, refresh)))
        }))
    }

    fn by_email(&self, email: String) -> BoxFuture<'_, Result<Option<(User, String)>, Error>> {
        Box::pin(self.db.with_reader(move |c| {
            c.prepare_cached(
                "SELECT id, email, created_at, password_hash FROM _rowgate_users WHERE email = ?1",
            )?
            .query_row([&email], |r| Ok((sqlite_user(r)?, r.get::<_, String>(3)?)))
            .optional()
        }))
    }

    fn user(&self, id: String) -> BoxFuture<'_, Result<Option<User>, Error>> {
        Box::pin(
            self.db
                .with_reader(move |c| c.prepare_cached(USER_BY_ID)?.query_row([&id], sqlite_user).optional()),
        )
    }

    fn new_session(&self, user_id: String, now: i64) -> BoxFuture<'_, Result<String, Error>> {
        Box::pin(self.db.with_writer(move |c| store_refresh(c, &user_id, now).map_err(sqlite_error)))
    }

    fn rotate(
        &self,
        token: String,
        successor: String,
        now: i64,
        reuse: i64,
    ) -> BoxFuture<'_, Result<Option<(User, String)>, Error>> {
        Box::pin(self.db.with_writer(move |c| rotate(c, &token, &successor, now, reuse)))
    }

    fn logout(&self, user_id: String) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(self.db.with_writer(move |c| {
            c.execute(
                "UPDATE _rowgate_refresh_tokens SET revoked = 1, revoked_at = NULL WHERE user_id = ?1",
                [&user_id],
            )
            .map(drop)
            .map_err(sqlite_error)
        }))
    }
}

fn sqlite_error(e: rusqlite::Error) -> Error {
    Error::Unavailable(e.to_string())
}

fn sqlite_user(r: &rusqlite::Row<'_>) -> rusqlite::Result<User> {
    Ok(User { id: r.get(0)?, email: r.get(1)?, created_at: r.get(2)? })
}

/// Stores a new refresh token of `user_id` and returns it.
fn store_refresh(c: &rusqlite::Connection, user_id: &str, now: i64) -> rusqlite::Result<String> {
    let token = stamped(&stamp(), &random_token());
    // Cached: a refresh is a write on the one writer thread, where parsing SQL costs everyone.
    c.prepare_cached(
        "INSERT INTO _rowgate_refresh_tokens (token_hash, user_id, expires_at) VALUES (?1, ?2, ?3)",
    )?
    .execute(rusqlite::params![sqlite_key(&token), user_id, expires(now)])?;
    Ok(token)
}

/// The time now in microseconds, as 16 hex digits: the stamp of a token issued now.
fn stamp() -> String {
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    format!("{micros:016x}")
}

/// A refresh token issued on SQLite: `<stamp>.<secret>`. The stamp leads the key the token is
/// stored under ([`sqlite_key`]), so the keys of new tokens ascend and each lands on the
/// index's last page, where a batch of refreshes shares one page write; keyed by the hash alone
/// each landed on a random page (s004's refresh: 1.5 pages written per refresh at c=100).
fn stamped(stamp: &str, secret: &str) -> String {
    format!("{stamp}.{secret}")
}

/// The key a refresh token is stored under in SQLite: `<stamp>.<SHA-256>` for a stamped one,
/// the SHA-256 alone for one issued before stamps (base64url has no `.`), which keeps working.
fn sqlite_key(token: &str) -> String {
    match token.split_once('.') {
        Some((stamp, _))
            if stamp.len() == 16 && stamp.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) =>
        {
            format!("{stamp}.{}", token_hash(token))
        }
        _ => token_hash(token),
    }
}

/// A refresh token's row and its user.
struct StoredToken {
    user: User,
    /// Exchanged already, or revoked (then `used_at` is `None`).
    used: bool,
    used_at: Option<i64>,
    expires_at: i64,
    /// The stamp of the token it was exchanged for (none if revoked, or used before stamps).
    successor: Option<String>,
}

/// [`AccountStore::rotate`] on SQLite.
fn rotate(
    c: &rusqlite::Connection,
    token: &str,
    secret: &str,
    now: i64,
    reuse: i64,
) -> Result<Option<(User, String)>, Error> {
    let key = sqlite_key(token);
    // The token and its user in one statement: the writer thread runs every write in turn, so
    // each statement saved here is throughput.
    let found = c
        .prepare_cached(
            "SELECT u.id, u.email, u.created_at, t.revoked, t.revoked_at, t.expires_at, t.successor \
             FROM _rowgate_refresh_tokens AS t JOIN _rowgate_users AS u ON u.id = t.user_id \
             WHERE t.token_hash = ?1",
        )
        .and_then(|mut q| {
            q.query_row([&key], |r| {
                Ok(StoredToken {
                    user: sqlite_user(r)?,
                    used: r.get::<_, i64>(3)? != 0,
                    used_at: r.get(4)?,
                    expires_at: r.get(5)?,
                    successor: r.get(6)?,
                })
            })
            .optional()
        })
        .map_err(sqlite_error)?;
    let Some(StoredToken { user, used, used_at, expires_at, successor }) = found else { return Ok(None) };
    if used {
        if used_at.is_none_or(|at| now - at >= reuse) {
            c.execute(
                "UPDATE _rowgate_refresh_tokens SET revoked = 1, revoked_at = NULL WHERE user_id = ?1",
                [&user.id],
            )
            .map_err(sqlite_error)?;
            return Ok(None);
        }
        if expires_at <= now {
            return Ok(None);
        }
        return match successor {
            // Stored at the first use: the same token again.
            Some(stamp) => Ok(Some((user, stamped(&stamp, secret)))),
            // Used before stamps: its successor was the secret alone, stored then.
            None => Ok(Some((user, secret.to_owned()))),
        };
    }
    let next = stamp();
    c.prepare_cached(
        "UPDATE _rowgate_refresh_tokens SET revoked = 1, revoked_at = ?2, successor = ?3 WHERE token_hash = ?1",
    )
    .and_then(|mut q| q.execute(rusqlite::params![key, now, next]))
    .map_err(sqlite_error)?;
    if expires_at <= now {
        return Ok(None);
    }
    let successor = stamped(&next, secret);
    c.prepare_cached(
        "INSERT INTO _rowgate_refresh_tokens (token_hash, user_id, expires_at) VALUES (?1, ?2, ?3)",
    )
    .and_then(|mut q| q.execute(rusqlite::params![sqlite_key(&successor), user.id, expires(now)]))
    .map_err(sqlite_error)?;
    Ok(Some((user, successor)))
}
