//! Writes to an account's own row in `_rowgate_users`: a new account, and changes to one.

use rusqlite::OptionalExtension;

use super::{sqlite_error, sqlite_user, USER_BY_ID};
use crate::accounts::store::{merged, NewUser, Updated, UserChanges};
use crate::error::Error;

/// [`crate::accounts::store::AccountStore::update`] on SQLite: on the writer thread, so reading the metadata, merging
/// and writing it back cannot interleave with another change.
pub(super) fn update(tx: &rusqlite::Connection, id: &str, changes: UserChanges) -> Result<Updated, Error> {
    let Some(current) = tx.query_row(USER_BY_ID, [id], sqlite_user).optional().map_err(sqlite_error)? else {
        return Ok(Updated::NotFound);
    };
    let user_metadata = changes.user_metadata.as_deref().map(|p| merged(&current.user_metadata, p));
    let app_metadata = changes.app_metadata.as_deref().map(|p| merged(&current.app_metadata, p));
    let (ban, until) = (changes.banned_until.is_some(), changes.banned_until.flatten());
    let result = tx.execute(
        "UPDATE _rowgate_users SET \
           email = coalesce(?2, email), phone = coalesce(?3, phone), \
           encrypted_password = coalesce(?4, encrypted_password), \
           raw_user_meta_data = coalesce(?5, raw_user_meta_data), raw_app_meta_data = coalesce(?6, raw_app_meta_data), \
           email_confirmed_at = CASE WHEN ?7 AND email_confirmed_at IS NULL \
             THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now') ELSE email_confirmed_at END, \
           email_unproved = CASE WHEN ?2 IS NOT NULL AND ?2 IS NOT email THEN ?12 OR NOT ?7 \
             WHEN ?7 THEN 0 ELSE email_unproved END, \
           banned_until = CASE WHEN ?8 THEN strftime('%Y-%m-%dT%H:%M:%fZ', ?9, 'unixepoch') ELSE banned_until END, \
           is_anonymous = coalesce(?10, is_anonymous), role = coalesce(?11, role), \
           updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
         WHERE id = ?1",
        rusqlite::params![
            id,
            changes.email,
            changes.phone,
            changes.password_hash,
            user_metadata,
            app_metadata,
            changes.confirm_email,
            ban,
            until,
            changes.is_anonymous,
            changes.role,
            changes.unproved,
        ],
    );
    match result {
        Ok(_) => {}
        Err(rusqlite::Error::SqliteFailure(f, _))
            if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE =>
        {
            return Ok(Updated::Taken)
        }
        Err(e) => return Err(sqlite_error(e)),
    }
    Ok(Updated::Done(Box::new(tx.query_row(USER_BY_ID, [id], sqlite_user).map_err(sqlite_error)?)))
}

/// Inserts the account `user` (signed in now if `signed_in`); false if its id, address or phone
/// is taken.
pub(super) fn insert_user(tx: &rusqlite::Connection, user: &NewUser, signed_in: bool) -> Result<bool, Error> {
    let inserted = tx.execute(
        "INSERT INTO _rowgate_users (id, email, phone, encrypted_password, role, raw_app_meta_data, \
         raw_user_meta_data, is_anonymous, email_confirmed_at, last_sign_in_at, banned_until, invited_at, \
         email_unproved, phone_confirmed_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, \
           CASE WHEN ?9 AND ?2 IS NOT NULL THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now') END, \
           CASE WHEN ?10 THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now') END, \
           strftime('%Y-%m-%dT%H:%M:%fZ', ?11, 'unixepoch'), \
           CASE WHEN ?12 THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now') END, ?13, \
           CASE WHEN ?14 AND ?3 IS NOT NULL THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now') END)",
        rusqlite::params![
            user.id,
            user.email,
            user.phone,
            user.password_hash,
            user.role,
            user.app_metadata,
            user.user_metadata,
            user.is_anonymous,
            user.confirmed,
            signed_in,
            user.banned_until,
            user.invited,
            user.unproved,
            user.phone_confirmed,
        ],
    );
    match inserted {
        Ok(_) => Ok(true),
        Err(rusqlite::Error::SqliteFailure(f, _))
            if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY =>
        {
            Ok(false)
        }
        Err(e) => Err(sqlite_error(e)),
    }
}

/// [`crate::accounts::store::AccountStore::delete`]'s soft delete on SQLite, in the transaction
/// `tx`: whether there is such an account.
pub(super) fn soft_delete(tx: &rusqlite::Connection, id: &str) -> Result<bool, Error> {
    type Personal = (Option<String>, Option<String>, Option<String>, Option<String>);
    let found: Option<Personal> = tx
        .query_row(
            "SELECT email, phone, email_change, deleted_at FROM _rowgate_users WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()
        .map_err(sqlite_error)?;
    let Some((email, phone, email_change, deleted_at)) = found else { return Ok(false) };
    if deleted_at.is_some() {
        return Ok(true);
    }
    let hidden = |value: &str| crate::accounts::store::obfuscated(id, value);
    tx.execute(
        "UPDATE _rowgate_users SET email = ?2, phone = ?3, email_change = ?4, encrypted_password = NULL, \
           confirmation_token = NULL, recovery_token = NULL, email_change_token_new = NULL, \
           email_change_token_current = NULL, reauthentication_token = NULL, \
           raw_user_meta_data = '{}', raw_app_meta_data = '{}', \
           deleted_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
         WHERE id = ?1",
        rusqlite::params![
            id,
            email.as_deref().map(hidden),
            phone.as_deref().map(|p| hidden(p)[..15].to_owned()),
            email_change.as_deref().filter(|e| !e.is_empty()).map(hidden),
        ],
    )
    .map_err(sqlite_error)?;
    let identities: Vec<(String, String, String)> = tx
        .prepare("SELECT id, provider, provider_id FROM _rowgate_identities WHERE user_id = ?1")
        .and_then(|mut q| q.query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect())
        .map_err(sqlite_error)?;
    for (identity, provider, subject) in identities {
        tx.execute(
            "UPDATE _rowgate_identities SET identity_data = '{}', provider_id = ?2, \
               updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?1",
            [&identity, &hidden(&format!("{provider}:{subject}"))],
        )
        .map_err(sqlite_error)?;
    }
    for table in [
        "_rowgate_mfa_factors",
        "_rowgate_webauthn_credentials",
        "_rowgate_refresh_tokens",
        "_rowgate_flow_state",
    ] {
        tx.execute(&format!("DELETE FROM {table} WHERE user_id = ?1"), [id]).map_err(sqlite_error)?;
    }
    Ok(true)
}
