//! Where accounts live: tables `_rowgate_users` / `_rowgate_refresh_tokens` in the SQLite file,
//! or on PostgreSQL schema `rowgate`'s tables behind SECURITY DEFINER functions
//! (`install.sql`, run by `rowgate accounts install`). Each operation is one transaction.

use std::sync::Arc;

use tokio_postgres::Client;

use super::{random_token, token_hash, User, REFRESH_LIFETIME};
use crate::backend::sqlite::db::SqliteDb;
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

/// The SQL `rowgate accounts install` runs on PostgreSQL.
pub const INSTALL_SQL: &str = include_str!("install.sql");

const USER_BY_ID: &str = "SELECT id, email, created_at FROM _rowgate_users WHERE id = ?1";

/// The accounts' storage.
pub enum Store {
    /// In the SQLite database served.
    Sqlite(Arc<SqliteDb>),
    /// In PostgreSQL, on a connection of its own (pooled ones carry requests' session roles).
    Postgres(Box<PgStore>),
}

/// A PostgreSQL connection as the authenticator, opened on first use and again after a drop.
pub struct PgStore {
    config: tokio_postgres::Config,
    client: tokio::sync::Mutex<Option<Arc<Client>>>,
}

impl PgStore {
    /// A store on the database `config` connects to.
    pub fn new(mut config: tokio_postgres::Config) -> PgStore {
        config.application_name("rowgate accounts");
        PgStore { config, client: tokio::sync::Mutex::new(None) }
    }

    async fn client(&self) -> Result<Arc<Client>, Error> {
        let mut held = self.client.lock().await;
        if let Some(c) = held.as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let client = Arc::new(crate::backend::postgres::connect(&self.config).await.map_err(pg_error)?);
        *held = Some(client.clone());
        Ok(client)
    }

    async fn query(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, Error> {
        let client = self.client().await?;
        client.query(sql, params).await.map_err(pg_error)
    }
}

fn pg_error(e: tokio_postgres::Error) -> Error {
    if e.as_db_error().is_some_and(|d| ["42883", "3F000", "42P01", "42501"].contains(&d.code().code())) {
        tracing::error!(error = %e, "the accounts are not installed for this role: run `rowgate accounts install --role <the db-uri's role>`");
    } else {
        tracing::error!(error = %e, "an accounts query failed");
    }
    Error::Unavailable(e.to_string())
}

fn sqlite_error(e: rusqlite::Error) -> Error {
    Error::Unavailable(e.to_string())
}

fn pg_user(r: &tokio_postgres::Row) -> User {
    User { id: r.get(0), email: r.get(1), created_at: r.get(2) }
}

fn sqlite_user(r: &rusqlite::Row<'_>) -> rusqlite::Result<User> {
    Ok(User { id: r.get(0)?, email: r.get(1)?, created_at: r.get(2)? })
}

/// Stores a new refresh token of `user_id` and returns it.
fn sqlite_store_refresh(c: &rusqlite::Connection, user_id: &str, now: i64) -> rusqlite::Result<String> {
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

fn expires(now: i64) -> i64 {
    now + REFRESH_LIFETIME.as_secs() as i64
}

impl Store {
    /// Creates the SQLite tables (PostgreSQL's are installed beforehand).
    pub fn setup(&self) -> Result<(), String> {
        let Store::Sqlite(db) = self else { return Ok(()) };
        db.setup(SQLITE_SCHEMA).map_err(|e| format!("creating the accounts tables: {e}"))?;
        let columns = db.column_names("_rowgate_refresh_tokens").map_err(|e| e.to_string())?;
        for (column, definition) in SQLITE_ADDED {
            if !columns.iter().any(|c| c == column) {
                db.setup(&format!("ALTER TABLE _rowgate_refresh_tokens ADD COLUMN {column} {definition}"))
                    .map_err(|e| format!("updating the accounts tables: {e}"))?;
            }
        }
        Ok(())
    }

    /// A new account with its first session (refresh token), or `None` if the address is taken.
    pub async fn create(
        &self,
        id: String,
        email: String,
        password_hash: String,
        now: i64,
    ) -> Result<Option<(User, String)>, Error> {
        match self {
            Store::Sqlite(db) => {
                db.with_writer(move |c| {
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
                    let refresh = sqlite_store_refresh(c, &user.id, now).map_err(sqlite_error)?;
                    Ok(Some((user, refresh)))
                })
                .await
            }
            Store::Postgres(pg) => {
                let refresh = random_token();
                let rows = pg
                    .query(
                        "SELECT * FROM rowgate.account_create($1, $2, $3, $4, $5)",
                        &[&id, &email, &password_hash, &token_hash(&refresh), &expires(now)],
                    )
                    .await?;
                Ok(rows.first().map(|r| (pg_user(r), refresh)))
            }
        }
    }

    /// The account of an address (any case) and its password hash.
    pub async fn by_email(&self, email: String) -> Result<Option<(User, String)>, Error> {
        match self {
            Store::Sqlite(db) => {
                db.with_reader(move |c| {
                    use rusqlite::OptionalExtension;
                    c.prepare_cached(
                        "SELECT id, email, created_at, password_hash FROM _rowgate_users WHERE email = ?1",
                    )?
                    .query_row([&email], |r| Ok((sqlite_user(r)?, r.get::<_, String>(3)?)))
                    .optional()
                })
                .await
            }
            Store::Postgres(pg) => {
                let rows = pg.query("SELECT * FROM rowgate.account_by_email($1)", &[&email]).await?;
                Ok(rows.first().map(|r| (pg_user(r), r.get(3))))
            }
        }
    }

    /// An account by id.
    pub async fn user(&self, id: String) -> Result<Option<User>, Error> {
        match self {
            Store::Sqlite(db) => {
                db.with_reader(move |c| {
                    use rusqlite::OptionalExtension;
                    c.prepare_cached(USER_BY_ID)?.query_row([&id], sqlite_user).optional()
                })
                .await
            }
            Store::Postgres(pg) => {
                Ok(pg.query("SELECT * FROM rowgate.account_by_id($1)", &[&id]).await?.first().map(pg_user))
            }
        }
    }

    /// A new session of `user_id`: its refresh token.
    pub async fn new_session(&self, user_id: String, now: i64) -> Result<String, Error> {
        match self {
            Store::Sqlite(db) => {
                db.with_writer(move |c| sqlite_store_refresh(c, &user_id, now).map_err(sqlite_error)).await
            }
            Store::Postgres(pg) => {
                let refresh = random_token();
                pg.query(
                    "SELECT rowgate.account_store_refresh($1, $2, $3)",
                    &[&user_id, &token_hash(&refresh), &expires(now)],
                )
                .await?;
                Ok(refresh)
            }
        }
    }

    /// Rotation in one transaction: `token` is used up and a successor stored, whose secret
    /// is `successor` (derived from `token`, so the same every time). One used within the last
    /// `reuse` seconds (a retry whose answer was lost, another tab) gets the same successor
    /// again; one used before that revokes all of its user's (it may have been stolen).
    /// `None`: refused.
    pub async fn rotate(
        &self,
        token: String,
        successor: String,
        now: i64,
        reuse: i64,
    ) -> Result<Option<(User, String)>, Error> {
        match self {
            Store::Sqlite(db) => {
                db.with_writer(move |c| sqlite_rotate(c, &token, &successor, now, reuse)).await
            }
            Store::Postgres(pg) => {
                let rows = pg
                    .query(
                        "SELECT * FROM rowgate.account_rotate($1, $2, $3, $4, $5)",
                        &[&token_hash(&token), &token_hash(&successor), &now, &expires(now), &reuse],
                    )
                    .await?;
                Ok(rows.first().map(|r| (pg_user(r), successor)))
            }
        }
    }

    /// Revokes every refresh token of `user_id`.
    pub async fn logout(&self, user_id: String) -> Result<(), Error> {
        match self {
            Store::Sqlite(db) => {
                db.with_writer(move |c| {
                    c.execute("UPDATE _rowgate_refresh_tokens SET revoked = 1, revoked_at = NULL WHERE user_id = ?1", [&user_id])
                        .map(drop)
                        .map_err(sqlite_error)
                })
                .await
            }
            Store::Postgres(pg) => pg.query("SELECT rowgate.account_logout($1)", &[&user_id]).await.map(drop),
        }
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

/// [`Store::rotate`] on SQLite.
fn sqlite_rotate(
    c: &rusqlite::Connection,
    token: &str,
    secret: &str,
    now: i64,
    reuse: i64,
) -> Result<Option<(User, String)>, Error> {
    use rusqlite::OptionalExtension;
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
