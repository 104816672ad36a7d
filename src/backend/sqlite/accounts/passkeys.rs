//! Passkeys on SQLite: the credentials and ceremonies in tables of the file, as Supabase's
//! `auth.webauthn_credentials` and `auth.webauthn_challenges` keep them.

use futures_util::future::BoxFuture;
use rusqlite::OptionalExtension;

use super::{atomically, sqlite_error, SqliteAccounts};
use crate::accounts::passkey_store::{Ceremony, NewPasskey, Passkey, PasskeyAdded, PasskeyStore};
use crate::error::Error;

pub(super) const SQLITE_PASSKEYS: &str = "
CREATE TABLE IF NOT EXISTS _rowgate_webauthn_credentials (
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES _rowgate_users (id) ON DELETE CASCADE,
  credential_id TEXT NOT NULL UNIQUE,
  credential TEXT NOT NULL,
  friendly_name TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  last_used_at TEXT
);
CREATE INDEX IF NOT EXISTS _rowgate_webauthn_credentials_user_id ON _rowgate_webauthn_credentials (user_id);
CREATE TABLE IF NOT EXISTS _rowgate_webauthn_challenges (
  id TEXT PRIMARY KEY,
  user_id TEXT REFERENCES _rowgate_users (id) ON DELETE CASCADE,
  challenge_type TEXT NOT NULL,
  session_data TEXT NOT NULL,
  expires_at INTEGER NOT NULL
);";

const PASSKEY_COLUMNS: &str = "id, user_id, friendly_name, created_at, last_used_at, credential";

fn sqlite_passkey(r: &rusqlite::Row) -> rusqlite::Result<Passkey> {
    Ok(Passkey {
        id: r.get(0)?,
        user_id: r.get(1)?,
        friendly_name: r.get(2)?,
        created_at: r.get(3)?,
        last_used_at: r.get(4)?,
        credential: r.get(5)?,
    })
}

fn by_id(c: &rusqlite::Connection, id: &str) -> rusqlite::Result<Option<Passkey>> {
    c.query_row(
        &format!("SELECT {PASSKEY_COLUMNS} FROM _rowgate_webauthn_credentials WHERE id = ?1"),
        [id],
        sqlite_passkey,
    )
    .optional()
}

impl PasskeyStore for SqliteAccounts {
    fn begin_ceremony(
        &self,
        id: String,
        kind: Ceremony,
        user_id: Option<String>,
        state: String,
        expires_at: i64,
    ) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(self.db.with_writer(move |c| {
            c.execute("DELETE FROM _rowgate_webauthn_challenges WHERE expires_at < unixepoch('now')", [])
                .map_err(sqlite_error)?;
            c.execute(
                "INSERT INTO _rowgate_webauthn_challenges (id, user_id, challenge_type, session_data, expires_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                rusqlite::params![id, user_id, kind.name(), state, expires_at],
            )
            .map_err(sqlite_error)?;
            Ok(())
        }))
    }

    fn take_ceremony(
        &self,
        id: String,
        kind: Ceremony,
        user_id: Option<String>,
    ) -> BoxFuture<'_, Result<Option<(String, i64)>, Error>> {
        Box::pin(self.db.with_writer(move |c| {
            c.query_row(
                "DELETE FROM _rowgate_webauthn_challenges WHERE id = ?1 AND challenge_type = ?2 AND user_id IS ?3 \
                 RETURNING session_data, expires_at",
                rusqlite::params![id, kind.name(), user_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(sqlite_error)
        }))
    }

    fn passkeys(&self, user_id: String) -> BoxFuture<'_, Result<Vec<Passkey>, Error>> {
        Box::pin(self.db.with_reader(move |c| {
            c.prepare(&format!(
                "SELECT {PASSKEY_COLUMNS} FROM _rowgate_webauthn_credentials WHERE user_id = ?1 ORDER BY created_at, id"
            ))?
            .query_map([&user_id], sqlite_passkey)?
            .collect()
        }))
    }

    fn add_passkey(
        &self,
        user_id: String,
        passkey: NewPasskey,
        max: i64,
    ) -> BoxFuture<'_, Result<PasskeyAdded, Error>> {
        Box::pin(self.db.with_writer(move |c| {
            atomically(c, |tx| {
                let count: i64 = tx
                    .query_row("SELECT count(*) FROM _rowgate_webauthn_credentials WHERE user_id = ?1", [&user_id], |r| {
                        r.get(0)
                    })
                    .map_err(sqlite_error)?;
                if count >= max {
                    return Ok(PasskeyAdded::TooMany);
                }
                let added = tx
                    .execute(
                        "INSERT INTO _rowgate_webauthn_credentials (id, user_id, credential_id, credential, friendly_name) \
                         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
                        rusqlite::params![
                            passkey.id,
                            user_id,
                            passkey.credential_id,
                            passkey.credential,
                            passkey.friendly_name
                        ],
                    )
                    .map_err(sqlite_error)?;
                if added == 0 {
                    return Ok(PasskeyAdded::Exists);
                }
                let added = by_id(tx, &passkey.id).map_err(sqlite_error)?;
                added.map(PasskeyAdded::Done).ok_or_else(|| Error::Unavailable("a passkey added went".into()))
            })
        }))
    }

    fn passkey_by_credential(&self, credential_id: String) -> BoxFuture<'_, Result<Option<Passkey>, Error>> {
        Box::pin(self.db.with_reader(move |c| {
            c.query_row(
                &format!(
                    "SELECT {PASSKEY_COLUMNS} FROM _rowgate_webauthn_credentials WHERE credential_id = ?1"
                ),
                [&credential_id],
                sqlite_passkey,
            )
            .optional()
        }))
    }

    fn passkey_used(&self, id: String, credential: String) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(self.db.with_writer(move |c| {
            c.execute(
                "UPDATE _rowgate_webauthn_credentials SET credential = ?2, \
                   last_used_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
                 WHERE id = ?1",
                [&id, &credential],
            )
            .map_err(sqlite_error)?;
            Ok(())
        }))
    }

    fn rename_passkey(
        &self,
        user_id: String,
        id: String,
        friendly_name: String,
    ) -> BoxFuture<'_, Result<Option<Passkey>, Error>> {
        Box::pin(self.db.with_writer(move |c| {
            let renamed = c
                .execute(
                    "UPDATE _rowgate_webauthn_credentials SET friendly_name = ?3, \
                       updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
                     WHERE id = ?1 AND user_id = ?2",
                    [&id, &user_id, &friendly_name],
                )
                .map_err(sqlite_error)?;
            if renamed == 0 {
                return Ok(None);
            }
            by_id(c, &id).map_err(sqlite_error)
        }))
    }

    fn delete_passkey(&self, user_id: String, id: String) -> BoxFuture<'_, Result<bool, Error>> {
        Box::pin(self.db.with_writer(move |c| {
            let deleted = c
                .execute(
                    "DELETE FROM _rowgate_webauthn_credentials WHERE id = ?1 AND user_id = ?2",
                    [&id, &user_id],
                )
                .map_err(sqlite_error)?;
            Ok(deleted > 0)
        }))
    }
}
