//! The codes sent by mail, on SQLite: stored (their hashes) in the users' table, as GoTrue keeps
//! them in `auth.users`, and redeemed.

use rusqlite::OptionalExtension;

use super::{sqlite_error, sqlite_user, USER_BY_ID};
use crate::accounts::store::{Flow, Issued, OneTime, Redeem, TakenFlow, User};
use crate::error::Error;

/// The column a code of `kind` is kept in, and the one saying when it went out.
fn token_columns(kind: OneTime) -> (&'static str, &'static str) {
    match kind {
        OneTime::Confirmation => ("confirmation_token", "confirmation_sent_at"),
        OneTime::Recovery => ("recovery_token", "recovery_sent_at"),
        OneTime::EmailChange => ("email_change_token_new", "email_change_sent_at"),
        OneTime::EmailChangeCurrent => ("email_change_token_current", "email_change_sent_at"),
        OneTime::Reauthentication => ("reauthentication_token", "reauthentication_sent_at"),
        // Shared with the address's confirmation, as GoTrue shares it, but marked (`sms_`).
        OneTime::PhoneConfirmation => ("confirmation_token", "confirmation_sent_at"),
        OneTime::PhoneChange => ("phone_change_token", "phone_change_sent_at"),
    }
}

/// [`AccountStore::issue`] on SQLite.
pub(super) fn issue(
    c: &rusqlite::Connection,
    user_id: &str,
    kind: OneTime,
    token_hash: &str,
    new_email: Option<String>,
    interval: i64,
) -> Result<Issued, Error> {
    let (token, sent_at) = token_columns(kind);
    // Seconds since the last one went out (none: -1), if the user exists.
    let since: Option<i64> = c
        .query_row(
            &format!(
                "SELECT coalesce(unixepoch('now') - unixepoch({sent_at}), -1) FROM _rowgate_users WHERE id = ?1"
            ),
            [user_id],
            |r| r.get(0),
        )
        .optional()
        .map_err(sqlite_error)?;
    match since {
        None => return Ok(Issued::NotFound),
        Some(s) if s >= 0 && s < interval => return Ok(Issued::TooSoon((interval - s).max(1))),
        Some(_) => {}
    }
    let stamp =
        format!("UPDATE _rowgate_users SET {token} = ?2, {sent_at} = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')");
    match kind {
        OneTime::EmailChange => c.execute(
            &format!("{stamp}, email_change = ?3, email_change_token_current = NULL WHERE id = ?1"),
            rusqlite::params![user_id, token_hash, new_email],
        ),
        OneTime::PhoneChange => c.execute(
            &format!("{stamp}, phone_change = ?3 WHERE id = ?1"),
            rusqlite::params![user_id, token_hash, new_email],
        ),
        // Marked, so that no address's confirmation redeems it.
        OneTime::PhoneConfirmation => {
            c.execute(&format!("{stamp} WHERE id = ?1"), [user_id, &format!("sms_{token_hash}")])
        }
        _ => c.execute(&format!("{stamp} WHERE id = ?1"), [user_id, token_hash]),
    }
    .map_err(sqlite_error)?;
    Ok(Issued::Stored)
}

/// [`AccountStore::redeem`] on SQLite.
pub(super) fn redeem(
    tx: &rusqlite::Connection,
    kind: Redeem,
    token_hash: &str,
    email: Option<String>,
    expiry: i64,
) -> Result<Option<User>, Error> {
    if token_hash.is_empty() {
        return Ok(None);
    }
    let kinds = match kind {
        Some(k) => vec![k],
        None => vec![OneTime::Confirmation, OneTime::Recovery],
    };
    for k in kinds {
        if k == OneTime::EmailChange {
            // A secure change mails a code to each address: the first accepted waits for the other.
            let waiting: Option<String> = tx
                .query_row(
                    "UPDATE _rowgate_users SET \
                       email_change_token_new = CASE WHEN email_change_token_new IN (?1, 'pkce_' || ?1) \
                         THEN NULL ELSE email_change_token_new END, \
                       email_change_token_current = CASE WHEN email_change_token_current IN (?1, 'pkce_' || ?1) \
                         THEN NULL ELSE email_change_token_current END, \
                       updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
                     WHERE ((email_change_token_new IN (?1, 'pkce_' || ?1) AND coalesce(email_change_token_current, '') <> '') \
                         OR (email_change_token_current IN (?1, 'pkce_' || ?1) AND coalesce(email_change_token_new, '') <> '')) \
                       AND unixepoch(email_change_sent_at) > unixepoch('now') - ?2 AND coalesce(email_change, '') <> '' \
                       AND (?3 IS NULL OR email_change = lower(?3) OR email = lower(?3)) RETURNING id",
                    rusqlite::params![token_hash, expiry, email],
                    |r| r.get(0),
                )
                .optional()
                .map_err(sqlite_error)?;
            if let Some(id) = waiting {
                return tx.query_row(USER_BY_ID, [&id], sqlite_user).optional().map_err(sqlite_error);
            }
        }
        let (token, sent_at) = token_columns(k);
        let (address, effect) = match k {
            OneTime::EmailChange => (
                "(?3 IS NULL OR email_change = lower(?3) OR email = lower(?3)) AND coalesce(email_change, '') <> ''",
                "email = email_change, email_change = NULL, email_change_token_current = NULL, email_confirmed_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), \
                 email_unproved = 0, raw_app_meta_data = CASE WHEN is_anonymous \
                   THEN json_patch(raw_app_meta_data, '{\"provider\":\"email\",\"providers\":[\"email\"]}') \
                   ELSE raw_app_meta_data END, is_anonymous = 0",
            ),
            // Proves the address is still the user's, and changes nothing.
            OneTime::Reauthentication => ("(?3 IS NULL OR email = lower(?3))", "reauthentication_token = NULL"),
            OneTime::PhoneConfirmation => (
                "phone = ?3 AND deleted_at IS NULL",
                "phone_confirmed_at = coalesce(phone_confirmed_at, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')), is_anonymous = 0",
            ),
            OneTime::PhoneChange => (
                "phone_change = ?3 AND coalesce(phone_change, '') <> '' AND deleted_at IS NULL",
                "phone = phone_change, phone_change = NULL, \
                 phone_confirmed_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), is_anonymous = 0",
            ),
            _ => (
                "(?3 IS NULL OR email = lower(?3))",
                "email_confirmed_at = coalesce(email_confirmed_at, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')), email_unproved = 0",
            ),
        };
        // An email change is made by the new address's code or, in a secure change, by whichever
        // of the two codes comes back last.
        let matches = match k {
            OneTime::EmailChange => format!(
                "({token} IN (?1, 'pkce_' || ?1) OR email_change_token_current IN (?1, 'pkce_' || ?1))"
            ),
            OneTime::PhoneConfirmation => format!("{token} = 'sms_' || ?1"),
            OneTime::PhoneChange => format!("{token} = ?1"),
            _ => format!("{token} IN (?1, 'pkce_' || ?1) AND {token} NOT LIKE 'sms\\_%' ESCAPE '\\'"),
        };
        let id: Option<String> = tx
            .query_row(
                &format!(
                    "UPDATE _rowgate_users SET {token} = NULL, {effect}, \
                     updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
                     WHERE {matches} AND unixepoch({sent_at}) > unixepoch('now') - ?2 \
                       AND {address} RETURNING id"
                ),
                rusqlite::params![token_hash, expiry, email],
                |r| r.get(0),
            )
            .optional()
            .or_else(|e| match e {
                // An address another account took meanwhile: the change cannot be made.
                rusqlite::Error::SqliteFailure(f, _)
                    if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE =>
                {
                    Ok(None)
                }
                e => Err(e),
            })
            .map_err(sqlite_error)?;
        if let Some(id) = id {
            return tx.query_row(USER_BY_ID, [&id], sqlite_user).optional().map_err(sqlite_error);
        }
    }
    Ok(None)
}

/// PKCE flows (Supabase's `auth.flow_state`, as far as mail's links use it).
pub(super) const SQLITE_FLOWS: &str = "
CREATE TABLE IF NOT EXISTS _rowgate_flow_state (
  id TEXT PRIMARY KEY,
  user_id TEXT REFERENCES _rowgate_users (id) ON DELETE CASCADE,
  auth_code TEXT NOT NULL,
  code_challenge_method TEXT NOT NULL,
  code_challenge TEXT NOT NULL,
  authentication_method TEXT NOT NULL,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  auth_code_issued_at TEXT
);
CREATE INDEX IF NOT EXISTS _rowgate_flow_state_auth_code ON _rowgate_flow_state (auth_code);
CREATE INDEX IF NOT EXISTS _rowgate_flow_state_user ON _rowgate_flow_state (user_id, authentication_method);";

/// [`crate::accounts::store::AccountStore::start_flow`] on SQLite (flows older than a day go).
pub(super) fn start_flow(c: &rusqlite::Connection, flow: &Flow) -> Result<(), Error> {
    c.execute("DELETE FROM _rowgate_flow_state WHERE unixepoch(created_at) < unixepoch('now') - 86400", [])
        .map_err(sqlite_error)?;
    c.execute(
        "INSERT INTO _rowgate_flow_state (id, user_id, auth_code, code_challenge_method, code_challenge, \
         authentication_method) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        [
            &flow.id,
            &flow.user_id,
            &flow.auth_code,
            &flow.method,
            &flow.challenge,
            &flow.authentication_method,
        ],
    )
    .map(drop)
    .map_err(sqlite_error)
}

/// [`crate::accounts::store::AccountStore::flow_code`] on SQLite.
pub(super) fn flow_code(
    c: &rusqlite::Connection,
    user_id: &str,
    method: &str,
) -> Result<Option<String>, Error> {
    c.query_row(
        "UPDATE _rowgate_flow_state SET auth_code_issued_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
         WHERE id = (SELECT id FROM _rowgate_flow_state WHERE user_id = ?1 AND authentication_method = ?2 \
                     ORDER BY created_at DESC LIMIT 1) RETURNING auth_code",
        [user_id, method],
        |r| r.get(0),
    )
    .optional()
    .map_err(sqlite_error)
}

/// [`crate::accounts::store::AccountStore::take_flow`] on SQLite.
pub(super) fn take_flow(c: &rusqlite::Connection, auth_code: &str) -> Result<Option<TakenFlow>, Error> {
    c.query_row(
        "DELETE FROM _rowgate_flow_state WHERE auth_code = ?1 AND user_id IS NOT NULL \
         RETURNING user_id, code_challenge, code_challenge_method, unixepoch(auth_code_issued_at), \
           authentication_method",
        [auth_code],
        |r| {
            Ok(TakenFlow {
                user_id: r.get(0)?,
                challenge: r.get(1)?,
                method: r.get(2)?,
                issued_at: r.get(3)?,
                authentication_method: r.get(4)?,
            })
        },
    )
    .optional()
    .map_err(sqlite_error)
}
