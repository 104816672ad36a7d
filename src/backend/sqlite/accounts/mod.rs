//! SQLite's accounts store: tables `_rowgate_users` / `_rowgate_refresh_tokens` in the SQLite
//! file (hidden from the API by their prefix), created when the accounts are first set up.
//! Writes go through the one writer thread.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use rusqlite::OptionalExtension;

use super::db::SqliteDb;
use crate::accounts::store::{
    merged, AccountStore, Attached, Challenged, Created, Enrolled, ExternalIdentity, Flow, Hook, Issued,
    Linked, NewFactor, NewUser, OneTime, Redeem, Scope, SessionSummary, Started, TakenFlow, Updated, User,
    UserChanges, WithHash,
};
use crate::error::Error;

/// The accounts' tables in an SQLite file (hidden from the API by their prefix): the users with
/// the columns of Supabase's `auth.users` that rowgate uses, and the refresh tokens, whose
/// `session_id` groups the tokens of one sign-in.
/// The users' table's columns (those added later are in [`SQLITE_USERS_ADDED`]).
macro_rules! users_table {
    () => {
        "(
  id TEXT PRIMARY KEY,
  email TEXT UNIQUE COLLATE NOCASE,
  phone TEXT UNIQUE,
  encrypted_password TEXT,
  role TEXT NOT NULL DEFAULT 'authenticated',
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  email_confirmed_at TEXT,
  last_sign_in_at TEXT,
  banned_until TEXT,
  raw_app_meta_data TEXT NOT NULL DEFAULT '{}',
  raw_user_meta_data TEXT NOT NULL DEFAULT '{}',
  is_anonymous INTEGER NOT NULL DEFAULT 0
)"
    };
}

const SQLITE_SCHEMA: &str = concat!(
    "CREATE TABLE IF NOT EXISTS _rowgate_users ",
    users_table!(),
    ";
CREATE TABLE IF NOT EXISTS _rowgate_refresh_tokens (
  token_hash TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES _rowgate_users (id) ON DELETE CASCADE,
  expires_at INTEGER NOT NULL,
  revoked INTEGER NOT NULL DEFAULT 0
);"
);

/// The users' table of the first releases (id, email, password_hash, created_at) rebuilt in
/// the shape above, its accounts kept (none with a confirmed address), as SQLite's own
/// procedure for a table's change does it: foreign keys off around it, so that dropping the
/// old table drops no refresh token.
const SQLITE_USERS_REBUILT: &str = concat!(
    "PRAGMA foreign_keys = OFF;
BEGIN;
CREATE TABLE _rowgate_users_rebuilt ",
    users_table!(),
    ";
INSERT INTO _rowgate_users_rebuilt (id, email, encrypted_password, created_at, updated_at, raw_app_meta_data)
  SELECT id, lower(email), password_hash, created_at, created_at,
         '{\"provider\":\"email\",\"providers\":[\"email\"]}'
  FROM _rowgate_users;
DROP TABLE _rowgate_users;
ALTER TABLE _rowgate_users_rebuilt RENAME TO _rowgate_users;
COMMIT;
PRAGMA foreign_keys = ON;"
);

/// Columns added to the users' table since: when an invitation made the account, the codes
/// sent by mail (their hashes) and when, whether the address was taken without proof
/// (autoconfirm: confirmed, yet nothing proved it the user's), and when a soft delete took the
/// account away (its row staying for what references it).
const SQLITE_USERS_ADDED: [(&str, &str); 17] = [
    ("phone_confirmed_at", "TEXT"),
    ("phone_change", "TEXT"),
    ("phone_change_token", "TEXT"),
    ("phone_change_sent_at", "TEXT"),
    ("email_unproved", "INTEGER NOT NULL DEFAULT 0"),
    ("deleted_at", "TEXT"),
    ("invited_at", "TEXT"),
    ("reauthentication_token", "TEXT"),
    ("reauthentication_sent_at", "TEXT"),
    ("email_change_token_current", "TEXT"),
    ("confirmation_token", "TEXT"),
    ("confirmation_sent_at", "TEXT"),
    ("recovery_token", "TEXT"),
    ("recovery_sent_at", "TEXT"),
    ("email_change", "TEXT"),
    ("email_change_token_new", "TEXT"),
    ("email_change_sent_at", "TEXT"),
];

/// Codes are looked up by their hash.
const SQLITE_TOKEN_INDEXES: &str = "
CREATE INDEX IF NOT EXISTS _rowgate_users_confirmation_token ON _rowgate_users (confirmation_token);
CREATE INDEX IF NOT EXISTS _rowgate_users_recovery_token ON _rowgate_users (recovery_token);
CREATE INDEX IF NOT EXISTS _rowgate_users_email_change_token_new ON _rowgate_users (email_change_token_new);
CREATE INDEX IF NOT EXISTS _rowgate_users_email_change_token_current ON _rowgate_users (email_change_token_current);
CREATE INDEX IF NOT EXISTS _rowgate_users_reauthentication_token ON _rowgate_users (reauthentication_token);
CREATE INDEX IF NOT EXISTS _rowgate_users_phone_change_token ON _rowgate_users (phone_change_token);";

/// Columns added since the first release of the refresh tokens' table: (column, definition).
/// `successor`: the stamp of the token a used one was exchanged for (see [`stamped`]);
/// `session_id`: the sign-in it continues.
/// `aal`: the session's assurance level (none: `aal1`), and `factor_id` the factor that raised it;
/// `signed_in_at`: when the session began, and `method` how it signed in (GoTrue's `amr`);
/// `second_factor`: at `aal2`, the factor's method (`totp`, `mfa/webauthn`).
const SQLITE_ADDED: [(&str, &str); 10] = [
    ("client_id", "TEXT"),
    ("scopes", "TEXT"),
    ("second_factor", "TEXT"),
    ("method", "TEXT"),
    ("signed_in_at", "INTEGER"),
    ("revoked_at", "INTEGER"),
    ("successor", "TEXT"),
    ("session_id", "TEXT"),
    ("aal", "TEXT"),
    ("factor_id", "TEXT"),
];

/// A user's columns, in the order [`sqlite_user`] reads them (from `_rowgate_users AS u`).
macro_rules! user_columns {
    () => {
        "u.id, u.email, u.phone, u.role, u.created_at, u.updated_at, u.email_confirmed_at, \
         u.last_sign_in_at, u.banned_until, \
         coalesce(u.banned_until > strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), 0), \
         u.raw_app_meta_data, u.raw_user_meta_data, u.is_anonymous, \
         u.confirmation_sent_at, u.recovery_sent_at, u.email_change_sent_at, nullif(u.email_change, ''), \
         (SELECT json_group_array(json_object('id', f.id, 'friendly_name', f.friendly_name, \
            'factor_type', f.factor_type, 'status', f.status, 'created_at', f.created_at, 'updated_at', f.updated_at)) \
          FROM (SELECT * FROM _rowgate_mfa_factors WHERE user_id = u.id ORDER BY created_at) AS f), \
         (SELECT json_group_array(json_object('identity_id', i.id, 'id', i.provider_id, 'user_id', i.user_id, \
            'identity_data', json(i.identity_data), 'provider', i.provider, 'last_sign_in_at', i.last_sign_in_at, \
            'created_at', i.created_at, 'updated_at', i.updated_at, 'email', i.email)) \
          FROM (SELECT * FROM _rowgate_identities WHERE user_id = u.id ORDER BY created_at) AS i), \
         u.invited_at, u.email_confirmed_at IS NOT NULL AND NOT u.email_unproved, \
         u.phone_confirmed_at, nullif(u.phone_change, '')"
    };
}

// After the macro, which they use.
mod codes;
mod external;
mod mfa;
mod oauth_server;
mod passkeys;
mod sessions;
mod tokens;
mod users;

use sessions::start_session;
use tokens::{rotate, store_refresh};
use users::{insert_user, update};

/// How many columns [`user_columns`] names.
pub(super) const USER_COLUMNS: usize = 23;

pub(super) const USER_BY_ID: &str =
    concat!("SELECT ", user_columns!(), " FROM _rowgate_users AS u WHERE u.id = ?1 AND u.deleted_at IS NULL");

/// The accounts in an SQLite database.
pub struct SqliteAccounts {
    db: Arc<SqliteDb>,
}

impl SqliteAccounts {
    /// The store in `db`, its tables created (or brought up to date) first.
    pub fn open(db: Arc<SqliteDb>) -> Result<SqliteAccounts, String> {
        let users = db.column_names("_rowgate_users").map_err(|e| e.to_string())?;
        if users.iter().any(|c| c == "password_hash") {
            db.setup(SQLITE_USERS_REBUILT).map_err(|e| format!("updating the accounts tables: {e}"))?;
        }
        db.setup(SQLITE_SCHEMA).map_err(|e| format!("creating the accounts tables: {e}"))?;
        db.setup(mfa::SQLITE_SCHEMA).map_err(|e| format!("creating the MFA tables: {e}"))?;
        for (table, added) in [
            ("_rowgate_users", &SQLITE_USERS_ADDED[..]),
            ("_rowgate_refresh_tokens", &SQLITE_ADDED[..]),
            ("_rowgate_mfa_factors", &mfa::SQLITE_FACTORS_ADDED[..]),
            ("_rowgate_mfa_challenges", &mfa::SQLITE_CHALLENGES_ADDED[..]),
        ] {
            let columns = db.column_names(table).map_err(|e| e.to_string())?;
            for (column, definition) in added {
                if !columns.iter().any(|c| c == column) {
                    db.setup(&format!("ALTER TABLE {table} ADD COLUMN {column} {definition}"))
                        .map_err(|e| format!("updating the accounts tables: {e}"))?;
                }
            }
        }
        db.setup(SQLITE_TOKEN_INDEXES).map_err(|e| format!("updating the accounts tables: {e}"))?;
        db.setup(codes::SQLITE_FLOWS).map_err(|e| format!("creating the PKCE flows' table: {e}"))?;
        db.setup(external::SQLITE_IDENTITIES).map_err(|e| format!("creating the identities' table: {e}"))?;
        db.setup(passkeys::SQLITE_PASSKEYS).map_err(|e| format!("creating the passkeys' tables: {e}"))?;
        db.setup(oauth_server::SQLITE_OAUTH_SERVER)
            .map_err(|e| format!("creating the OAuth clients' table: {e}"))?;
        Ok(SqliteAccounts { db })
    }
}

impl AccountStore for SqliteAccounts {
    fn create(&self, user: NewUser, session: bool, now: i64) -> BoxFuture<'_, Result<Created, Error>> {
        Box::pin(self.db.with_writer(move |c| {
            atomically(c, |tx| {
                if !insert_user(tx, &user, session)? {
                    return Ok(None);
                }
                let created = tx.query_row(USER_BY_ID, [&user.id], sqlite_user).map_err(sqlite_error)?;
                let started = match session {
                    true => {
                        let method = if user.is_anonymous { "anonymous" } else { "password" };
                        Some(store_refresh(tx, &created.id, now, method, None).map_err(sqlite_error)?)
                    }
                    false => None,
                };
                Ok(Some((created, started)))
            })
        }))
    }

    fn by_email(&self, email: String) -> BoxFuture<'_, Result<WithHash, Error>> {
        Box::pin(self.db.with_reader(move |c| {
            c.prepare_cached(concat!(
                "SELECT ",
                user_columns!(),
                ", u.encrypted_password FROM _rowgate_users AS u WHERE u.email = ?1 AND u.deleted_at IS NULL"
            ))?
            .query_row([&email], |r| Ok((sqlite_user(r)?, r.get::<_, Option<String>>(USER_COLUMNS)?)))
            .optional()
        }))
    }

    fn by_phone(&self, phone: String) -> BoxFuture<'_, Result<WithHash, Error>> {
        Box::pin(self.db.with_reader(move |c| {
            c.prepare_cached(concat!(
                "SELECT ",
                user_columns!(),
                ", u.encrypted_password FROM _rowgate_users AS u WHERE u.phone = ?1 AND u.deleted_at IS NULL"
            ))?
            .query_row([&phone], |r| Ok((sqlite_user(r)?, r.get::<_, Option<String>>(USER_COLUMNS)?)))
            .optional()
        }))
    }

    fn user(&self, id: String) -> BoxFuture<'_, Result<Option<User>, Error>> {
        Box::pin(
            self.db
                .with_reader(move |c| c.prepare_cached(USER_BY_ID)?.query_row([&id], sqlite_user).optional()),
        )
    }

    fn sign_in(
        &self,
        user_id: String,
        method: String,
        now: i64,
    ) -> BoxFuture<'_, Result<Option<(User, Started)>, Error>> {
        Box::pin(
            self.db.with_writer(move |c| atomically(c, |tx| start_session(tx, &user_id, &method, now, None))),
        )
    }

    fn rotate(
        &self,
        token: String,
        successor: String,
        now: i64,
        reuse: i64,
        client: Option<String>,
    ) -> BoxFuture<'_, Result<Option<(User, Started)>, Error>> {
        Box::pin(self.db.with_writer(move |c| rotate(c, &token, &successor, now, reuse, client.as_deref())))
    }

    fn update(&self, id: String, changes: UserChanges) -> BoxFuture<'_, Result<Updated, Error>> {
        Box::pin(self.db.with_writer(move |c| atomically(c, |tx| update(tx, &id, changes))))
    }

    fn list(&self, offset: u64, limit: u64) -> BoxFuture<'_, Result<(Vec<User>, u64), Error>> {
        Box::pin(self.db.with_reader(move |c| {
            let (offset, limit) = (offset.min(i64::MAX as u64) as i64, limit.min(i64::MAX as u64) as i64);
            let users = c
                .prepare_cached(concat!(
                    "SELECT ",
                    user_columns!(),
                    " FROM _rowgate_users AS u WHERE u.deleted_at IS NULL \
                      ORDER BY u.created_at DESC, u.id LIMIT ?2 OFFSET ?1"
                ))?
                .query_map([offset, limit], sqlite_user)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let total: i64 =
                c.query_row("SELECT count(*) FROM _rowgate_users WHERE deleted_at IS NULL", [], |r| {
                    r.get(0)
                })?;
            Ok((users, total.max(0) as u64))
        }))
    }

    fn delete(&self, id: String, soft: bool) -> BoxFuture<'_, Result<bool, Error>> {
        Box::pin(self.db.with_writer(move |c| {
            match soft {
                true => atomically(c, |tx| users::soft_delete(tx, &id)),
                false => c
                    .execute("DELETE FROM _rowgate_users WHERE id = ?1", [&id])
                    .map(|n| n > 0)
                    .map_err(sqlite_error),
            }
        }))
    }

    fn issue(
        &self,
        user_id: String,
        kind: OneTime,
        token_hash: String,
        new_email: Option<String>,
        interval: i64,
    ) -> BoxFuture<'_, Result<Issued, Error>> {
        Box::pin(
            self.db.with_writer(move |c| codes::issue(c, &user_id, kind, &token_hash, new_email, interval)),
        )
    }

    fn redeem(
        &self,
        kind: Redeem,
        token_hash: String,
        email: Option<String>,
        expiry: i64,
    ) -> BoxFuture<'_, Result<Option<User>, Error>> {
        Box::pin(
            self.db.with_writer(move |c| {
                atomically(c, |tx| codes::redeem(tx, kind, &token_hash, email, expiry))
            }),
        )
    }

    fn enroll_factor(
        &self,
        user_id: String,
        factor: NewFactor,
        aal2: bool,
        expiry: i64,
    ) -> BoxFuture<'_, Result<Enrolled, Error>> {
        Box::pin(
            self.db
                .with_writer(move |c| atomically(c, |tx| mfa::enroll(tx, &user_id, &factor, aal2, expiry))),
        )
    }

    fn challenge_factor(
        &self,
        user_id: String,
        factor_id: String,
        challenge_id: String,
        ceremony: Option<String>,
    ) -> BoxFuture<'_, Result<bool, Error>> {
        Box::pin(
            self.db.with_writer(move |c| mfa::challenge(c, &user_id, &factor_id, &challenge_id, ceremony)),
        )
    }

    fn challenged(
        &self,
        user_id: String,
        factor_id: String,
        challenge_id: String,
    ) -> BoxFuture<'_, Result<Option<Challenged>, Error>> {
        Box::pin(self.db.with_reader(move |c| mfa::challenged(c, &user_id, &factor_id, &challenge_id)))
    }

    fn elevate(
        &self,
        user_id: String,
        factor_id: String,
        challenge_id: String,
        session_id: String,
        credential: Option<String>,
    ) -> BoxFuture<'_, Result<Option<(User, Started)>, Error>> {
        Box::pin(self.db.with_writer(move |c| {
            atomically(c, |tx| {
                mfa::elevated_session(
                    tx,
                    &user_id,
                    &factor_id,
                    &challenge_id,
                    &session_id,
                    credential.as_deref(),
                )
            })
        }))
    }

    fn unenroll_factor(
        &self,
        user_id: String,
        factor_id: String,
        aal2: bool,
    ) -> BoxFuture<'_, Result<Option<bool>, Error>> {
        Box::pin(
            self.db.with_writer(move |c| atomically(c, |tx| mfa::unenroll(tx, &user_id, &factor_id, aal2))),
        )
    }

    fn start_flow(&self, flow: Flow) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(self.db.with_writer(move |c| codes::start_flow(c, &flow)))
    }

    fn flow_code(
        &self,
        user_id: String,
        authentication_method: String,
    ) -> BoxFuture<'_, Result<Option<String>, Error>> {
        Box::pin(self.db.with_writer(move |c| codes::flow_code(c, &user_id, &authentication_method)))
    }

    fn take_flow(&self, auth_code: String) -> BoxFuture<'_, Result<Option<TakenFlow>, Error>> {
        Box::pin(self.db.with_writer(move |c| codes::take_flow(c, &auth_code)))
    }

    fn check_hook(&self, hook: &str) -> Result<(), String> {
        let start = hook.trim_start().get(..6).unwrap_or("").to_ascii_uppercase();
        match start.starts_with("SELECT") || start.starts_with("WITH") {
            true => Ok(()),
            false => Err(format!("{hook:?}: on SQLite a hook is a SELECT")),
        }
    }

    fn run_hook(&self, kind: Hook, hook: String, event: String) -> BoxFuture<'_, Result<String, Error>> {
        Box::pin(self.db.with_reader(move |c| {
            let event: serde_json::Value = serde_json::from_str(&event).unwrap_or_default();
            let text = |v: Option<&serde_json::Value>| match v {
                Some(serde_json::Value::String(s)) => Some(s.clone()),
                Some(serde_json::Value::Null) | None => None,
                Some(other) => Some(other.to_string()),
            };
            let claims = text(event.get("claims")).unwrap_or_else(|| "{}".into());
            // The event's parts the SELECT names, as parameters.
            let values = [
                (":user_id", text(event.get("user_id"))),
                (":claims", Some(claims.clone())),
                (":email", text(event.pointer("/user/email"))),
                (":user_metadata", text(event.pointer("/user/user_metadata"))),
            ];
            let mut q = c.prepare(&hook)?;
            if !q.readonly() {
                return Err(rusqlite::Error::InvalidQuery);
            }
            let mut params: Vec<(&str, &dyn rusqlite::ToSql)> = Vec::new();
            for (name, value) in &values {
                if q.parameter_index(name)?.is_some() {
                    params.push((name, value));
                }
            }
            let answer: Option<String> = q.query_row(params.as_slice(), |r| r.get(0)).optional()?.flatten();
            Ok(match kind {
                Hook::CustomAccessToken => {
                    format!("{{\"claims\":{}}}", merged(&claims, answer.as_deref().unwrap_or("{}")))
                }
                // A message refuses the account; none lets it be made.
                Hook::BeforeUserCreated => match answer {
                    Some(message) => {
                        serde_json::json!({"error": {"http_code": 403, "message": message}}).to_string()
                    }
                    None => "{}".into(),
                },
            })
        }))
    }

    fn link_identity(
        &self,
        identity: ExternalIdentity,
        new: NewUser,
        create: bool,
    ) -> BoxFuture<'_, Result<Linked, Error>> {
        Box::pin(self.db.with_writer(move |c| atomically(c, |tx| external::link(tx, &identity, new, create))))
    }

    fn attach_identity(
        &self,
        user_id: String,
        identity: ExternalIdentity,
    ) -> BoxFuture<'_, Result<Attached, Error>> {
        Box::pin(self.db.with_writer(move |c| atomically(c, |tx| external::attach(tx, &user_id, &identity))))
    }

    fn detach_identity(
        &self,
        user_id: String,
        identity_id: String,
    ) -> BoxFuture<'_, Result<Option<User>, Error>> {
        Box::pin(
            self.db.with_writer(move |c| atomically(c, |tx| external::detach(tx, &user_id, &identity_id))),
        )
    }

    fn sessions(&self, user_id: String) -> BoxFuture<'_, Result<Vec<SessionSummary>, Error>> {
        Box::pin(self.db.with_reader(move |c| sessions::list(c, &user_id)))
    }

    fn logout(
        &self,
        user_id: String,
        session: Option<String>,
        scope: Scope,
    ) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(self.db.with_writer(move |c| sessions::end(c, &user_id, session, scope)))
    }
}

/// Runs `f` in a savepoint of the writer's transaction: all of it is written, or none (the
/// batch's other writes are kept either way).
fn atomically<T>(
    c: &rusqlite::Connection,
    f: impl FnOnce(&rusqlite::Connection) -> Result<T, Error>,
) -> Result<T, Error> {
    c.execute_batch("SAVEPOINT rowgate_account").map_err(sqlite_error)?;
    let result = f(c);
    let end = match result {
        Ok(_) => "RELEASE rowgate_account",
        Err(_) => "ROLLBACK TO rowgate_account; RELEASE rowgate_account",
    };
    c.execute_batch(end).map_err(sqlite_error)?;
    result
}

pub(super) fn sqlite_error(e: rusqlite::Error) -> Error {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DiskFull) => Error::disk_full("the SQLite file", &e),
        _ => Error::Unavailable(e.to_string()),
    }
}

/// A user from the columns [`user_columns`] names, first in the row.
pub(super) fn sqlite_user(r: &rusqlite::Row<'_>) -> rusqlite::Result<User> {
    Ok(User {
        id: r.get(0)?,
        email: r.get(1)?,
        phone: r.get(2)?,
        role: r.get(3)?,
        created_at: r.get(4)?,
        updated_at: r.get(5)?,
        email_confirmed_at: r.get(6)?,
        last_sign_in_at: r.get(7)?,
        banned_until: r.get(8)?,
        is_banned: r.get::<_, i64>(9)? != 0,
        app_metadata: r.get(10)?,
        user_metadata: r.get(11)?,
        is_anonymous: r.get::<_, i64>(12)? != 0,
        confirmation_sent_at: r.get(13)?,
        recovery_sent_at: r.get(14)?,
        email_change_sent_at: r.get(15)?,
        new_email: r.get(16)?,
        factors: r.get(17)?,
        identities: r.get(18)?,
        invited_at: r.get(19)?,
        email_verified: r.get(20)?,
        phone_confirmed_at: r.get(21)?,
        new_phone: r.get(22)?,
    })
}
