//! Identities at OpenID providers, in `_rowgate_identities` (GoTrue's `auth.identities`): which
//! account a sign-in through a provider belongs to.

use rusqlite::OptionalExtension;

use super::users::insert_user;
use super::{sqlite_error, sqlite_user, USER_BY_ID};
use crate::accounts::store::{merged, Attached, ExternalIdentity, Linked, NewUser, User};
use crate::error::Error;

/// The identities' table: one row per account and provider subject.
pub(super) const SQLITE_IDENTITIES: &str = "
CREATE TABLE IF NOT EXISTS _rowgate_identities (
  id TEXT PRIMARY KEY,
  provider_id TEXT NOT NULL,
  user_id TEXT NOT NULL REFERENCES _rowgate_users (id) ON DELETE CASCADE,
  identity_data TEXT NOT NULL,
  provider TEXT NOT NULL,
  last_sign_in_at TEXT,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  email TEXT GENERATED ALWAYS AS (lower(json_extract(identity_data, '$.email'))) VIRTUAL,
  UNIQUE (provider_id, provider)
);
CREATE INDEX IF NOT EXISTS _rowgate_identities_user_id ON _rowgate_identities (user_id);";

/// [`crate::accounts::store::AccountStore::link_identity`], in the transaction `tx`.
pub(super) fn link(
    tx: &rusqlite::Connection,
    identity: &ExternalIdentity,
    new: NewUser,
    create: bool,
) -> Result<Linked, Error> {
    let owner: Option<String> = tx
        .query_row(
            "UPDATE _rowgate_identities SET identity_data = ?3, \
               last_sign_in_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), \
               updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
             WHERE provider = ?1 AND provider_id = ?2 RETURNING user_id",
            [&identity.provider, &identity.subject, &identity.data],
            |r| r.get(0),
        )
        .optional()
        .map_err(sqlite_error)?;
    if let Some(user_id) = owner {
        return Ok(Linked::Existing(Box::new(gained(tx, &user_id, identity)?)));
    }
    if let (true, Some(email)) = (identity.email_verified, &identity.email) {
        let holder: Option<(String, bool)> = tx
            .query_row(
                "SELECT id, email_confirmed_at IS NOT NULL AND NOT email_unproved FROM _rowgate_users \
                 WHERE email = ?1 AND NOT is_anonymous",
                [email],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(sqlite_error)?;
        if let Some((user_id, confirmed)) = holder {
            insert_identity(tx, &user_id, identity)?;
            if !confirmed {
                tx.execute(
                    "UPDATE _rowgate_users SET encrypted_password = NULL, email_unproved = 0, \
                       email_confirmed_at = coalesce(email_confirmed_at, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) \
                     WHERE id = ?1",
                    [&user_id],
                )
                .map_err(sqlite_error)?;
            }
            return Ok(Linked::Added(Box::new(gained(tx, &user_id, identity)?)));
        }
    }
    if !create {
        return Ok(Linked::WouldCreate);
    }
    let mut new = new;
    if !insert_user(tx, &new, true)? {
        // The address is another account's, unverified by the provider: the new account goes
        // without it rather than taking it.
        new.email = None;
        if !insert_user(tx, &new, true)? {
            return Err(Error::Unavailable("a new account's id was taken".into()));
        }
    }
    insert_identity(tx, &new.id, identity)?;
    let user = tx.query_row(USER_BY_ID, [&new.id], sqlite_user).map_err(sqlite_error)?;
    Ok(Linked::Created(Box::new(user)))
}

/// [`crate::accounts::store::AccountStore::attach_identity`], in the transaction `tx`.
pub(super) fn attach(
    tx: &rusqlite::Connection,
    user_id: &str,
    identity: &ExternalIdentity,
) -> Result<Attached, Error> {
    let owner: Option<String> = tx
        .query_row(
            "SELECT user_id FROM _rowgate_identities WHERE provider = ?1 AND provider_id = ?2",
            [&identity.provider, &identity.subject],
            |r| r.get(0),
        )
        .optional()
        .map_err(sqlite_error)?;
    match owner {
        Some(owner) if owner == user_id => return Ok(Attached::AlreadyTheirs),
        Some(_) => return Ok(Attached::Others),
        None => {}
    }
    let Some(user) = tx.query_row(USER_BY_ID, [user_id], sqlite_user).optional().map_err(sqlite_error)?
    else {
        return Ok(Attached::NoUser);
    };
    insert_identity(tx, user_id, identity)?;
    if let (None, true, Some(email)) = (&user.email, identity.email_verified, &identity.email) {
        // Taken by another account, the address stays where it is.
        tx.execute(
            "UPDATE _rowgate_users SET email = ?2, email_confirmed_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), \
               email_unproved = 0, is_anonymous = 0 \
             WHERE id = ?1 AND NOT EXISTS (SELECT 1 FROM _rowgate_users WHERE email = ?2)",
            [user_id, email],
        )
        .map_err(sqlite_error)?;
    }
    let (app,): (String,) = tx
        .query_row("SELECT raw_app_meta_data FROM _rowgate_users WHERE id = ?1", [user_id], |r| {
            Ok((r.get(0)?,))
        })
        .map_err(sqlite_error)?;
    tx.execute(
        "UPDATE _rowgate_users SET raw_app_meta_data = ?2, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
         WHERE id = ?1",
        [user_id, &with_provider(&app, &identity.provider)],
    )
    .map_err(sqlite_error)?;
    Ok(Attached::Done(Box::new(tx.query_row(USER_BY_ID, [user_id], sqlite_user).map_err(sqlite_error)?)))
}

/// [`crate::accounts::store::AccountStore::detach_identity`], in the transaction `tx`.
pub(super) fn detach(
    tx: &rusqlite::Connection,
    user_id: &str,
    identity_id: &str,
) -> Result<Option<User>, Error> {
    let provider: Option<String> = tx
        .query_row(
            "DELETE FROM _rowgate_identities WHERE id = ?1 AND user_id = ?2 RETURNING provider",
            [identity_id, user_id],
            |r| r.get(0),
        )
        .optional()
        .map_err(sqlite_error)?;
    let Some(provider) = provider else { return Ok(None) };
    let (app, still): (String, bool) = tx
        .query_row(
            "SELECT raw_app_meta_data, EXISTS (SELECT 1 FROM _rowgate_identities WHERE user_id = ?1 AND provider = ?2) \
             FROM _rowgate_users WHERE id = ?1",
            [user_id, &provider],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(sqlite_error)?;
    if !still {
        tx.execute(
            "UPDATE _rowgate_users SET raw_app_meta_data = ?2, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
             WHERE id = ?1",
            [user_id, &without_provider(&app, &provider)],
        )
        .map_err(sqlite_error)?;
    }
    tx.query_row(USER_BY_ID, [user_id], sqlite_user).optional().map_err(sqlite_error)
}

fn insert_identity(
    tx: &rusqlite::Connection,
    user_id: &str,
    identity: &ExternalIdentity,
) -> Result<(), Error> {
    tx.execute(
        "INSERT INTO _rowgate_identities (id, provider_id, user_id, identity_data, provider, last_sign_in_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
        [&crate::uuid_v4(), &identity.subject, user_id, &identity.data, &identity.provider],
    )
    .map(drop)
    .map_err(sqlite_error)
}

/// The account `user_id` after it gained or used `identity`: the provider among its
/// `app_metadata.providers`, the identity's data merged into its `user_metadata`.
fn gained(tx: &rusqlite::Connection, user_id: &str, identity: &ExternalIdentity) -> Result<User, Error> {
    let (app, user): (String, String) = tx
        .query_row(
            "SELECT raw_app_meta_data, raw_user_meta_data FROM _rowgate_users WHERE id = ?1",
            [user_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(sqlite_error)?;
    tx.execute(
        "UPDATE _rowgate_users SET raw_app_meta_data = ?2, raw_user_meta_data = ?3, \
           updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?1",
        [user_id, &with_provider(&app, &identity.provider), &merged(&user, &identity.data)],
    )
    .map_err(sqlite_error)?;
    tx.query_row(USER_BY_ID, [user_id], sqlite_user).map_err(sqlite_error)
}

/// `app_metadata` (a JSON object, as text) with `provider` among its `providers`, and as its
/// `provider` if it had none.
fn with_provider(app_metadata: &str, provider: &str) -> String {
    let mut app = match serde_json::from_str::<serde_json::Value>(app_metadata) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    app.entry("provider").or_insert_with(|| provider.into());
    let providers = app.entry("providers").or_insert_with(|| serde_json::Value::Array(Vec::new()));
    if let serde_json::Value::Array(list) = providers {
        if !list.iter().any(|p| p == provider) {
            list.push(provider.into());
        }
    }
    serde_json::Value::Object(app).to_string()
}

/// `app_metadata` without `provider` among its `providers` (its `provider` then the first left).
fn without_provider(app_metadata: &str, provider: &str) -> String {
    let mut app = match serde_json::from_str::<serde_json::Value>(app_metadata) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    let mut left = Vec::new();
    if let Some(serde_json::Value::Array(list)) = app.get_mut("providers") {
        list.retain(|p| p != provider);
        left.clone_from(list);
    }
    if app.get("provider").is_some_and(|p| p == provider) {
        match left.first() {
            Some(first) => app.insert("provider".into(), first.clone()),
            None => app.remove("provider"),
        };
    }
    serde_json::Value::Object(app).to_string()
}
