//! Second factors on SQLite: TOTP and WebAuthn factors and their challenges in tables of the file
//! (Supabase's `auth.mfa_factors` and `auth.mfa_challenges`, as far as rowgate uses them); a
//! session's assurance level rides on its refresh tokens (`aal`, `factor_id`, `second_factor`).

use rusqlite::OptionalExtension;

use super::tokens::{random_stamped, sqlite_key};
use super::{sqlite_error, sqlite_user, USER_BY_ID};
use crate::accounts::store::{
    expires, unix_now, Challenged, Enrolled, NewFactor, SessionClient, Started, User,
};
use crate::error::Error;

/// The factors and their challenges.
pub(super) const SQLITE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS _rowgate_mfa_factors (
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES _rowgate_users (id) ON DELETE CASCADE,
  friendly_name TEXT,
  factor_type TEXT NOT NULL DEFAULT 'totp',
  status TEXT NOT NULL DEFAULT 'unverified',
  secret TEXT,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  last_challenged_at TEXT
);
CREATE INDEX IF NOT EXISTS _rowgate_mfa_factors_user_id ON _rowgate_mfa_factors (user_id, created_at);
CREATE TABLE IF NOT EXISTS _rowgate_mfa_challenges (
  id TEXT PRIMARY KEY,
  factor_id TEXT NOT NULL REFERENCES _rowgate_mfa_factors (id) ON DELETE CASCADE,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  verified_at TEXT
);";

/// Columns added since: a WebAuthn factor's credential, and what a challenge's ceremony keeps.
pub(super) const SQLITE_FACTORS_ADDED: [(&str, &str); 1] = [("web_authn_credential", "TEXT")];
pub(super) const SQLITE_CHALLENGES_ADDED: [(&str, &str); 1] = [("web_authn_session_data", "TEXT")];

/// [`crate::accounts::store::AccountStore::enroll_factor`] on SQLite.
pub(super) fn enroll(
    tx: &rusqlite::Connection,
    user_id: &str,
    factor: &NewFactor,
    aal2: bool,
    expiry: i64,
) -> Result<Enrolled, Error> {
    tx.execute(
        "DELETE FROM _rowgate_mfa_factors WHERE user_id = ?1 AND status = 'unverified' \
         AND unixepoch(created_at) < unixepoch('now') - ?2",
        rusqlite::params![user_id, expiry],
    )
    .map_err(sqlite_error)?;
    let (named, count, verified): (i64, i64, i64) = tx
        .query_row(
            "SELECT count(*) FILTER (WHERE friendly_name = ?2), count(*), count(*) FILTER (WHERE status = 'verified') \
             FROM _rowgate_mfa_factors WHERE user_id = ?1",
            [user_id, &factor.friendly_name],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .map_err(sqlite_error)?;
    if named > 0 {
        return Ok(Enrolled::NameTaken);
    }
    if count >= 10 {
        return Ok(Enrolled::TooMany);
    }
    if verified > 0 && !aal2 {
        return Ok(Enrolled::NeedsAal2);
    }
    tx.execute(
        "INSERT INTO _rowgate_mfa_factors (id, user_id, friendly_name, factor_type, secret) VALUES (?1, ?2, ?3, ?4, ?5)",
        rusqlite::params![factor.id, user_id, factor.friendly_name, factor.factor_type, factor.secret],
    )
    .map_err(sqlite_error)?;
    Ok(Enrolled::Done)
}

/// [`crate::accounts::store::AccountStore::challenge_factor`] on SQLite.
pub(super) fn challenge(
    c: &rusqlite::Connection,
    user_id: &str,
    factor_id: &str,
    challenge_id: &str,
    ceremony: Option<String>,
) -> Result<bool, Error> {
    let found = c
        .execute(
            "UPDATE _rowgate_mfa_factors SET last_challenged_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
             WHERE id = ?1 AND user_id = ?2",
            [factor_id, user_id],
        )
        .map_err(sqlite_error)?;
    if found == 0 {
        return Ok(false);
    }
    c.execute(
        "INSERT INTO _rowgate_mfa_challenges (id, factor_id, web_authn_session_data) VALUES (?1, ?2, ?3)",
        rusqlite::params![challenge_id, factor_id, ceremony],
    )
    .map_err(sqlite_error)?;
    Ok(true)
}

/// [`crate::accounts::store::AccountStore::challenged`] on SQLite.
pub(super) fn challenged(
    c: &rusqlite::Connection,
    user_id: &str,
    factor_id: &str,
    challenge_id: &str,
) -> rusqlite::Result<Option<Challenged>> {
    c.query_row(
        "SELECT f.factor_type, f.secret, f.web_authn_credential, f.status = 'verified', \
           unixepoch(ch.created_at), ch.web_authn_session_data, \
           (SELECT json_group_array(json(o.web_authn_credential)) FROM _rowgate_mfa_factors o \
            WHERE o.user_id = f.user_id AND o.id <> f.id AND o.web_authn_credential IS NOT NULL) \
         FROM _rowgate_mfa_factors f \
         LEFT JOIN _rowgate_mfa_challenges ch ON ch.id = ?3 AND ch.factor_id = f.id AND ch.verified_at IS NULL \
         WHERE f.id = ?1 AND f.user_id = ?2",
        [factor_id, user_id, challenge_id],
        |r| {
            Ok(Challenged {
                factor_type: r.get(0)?,
                secret: r.get(1)?,
                credential: r.get(2)?,
                verified: r.get::<_, i64>(3)? != 0,
                challenged_at: r.get(4)?,
                ceremony: r.get(5)?,
                others: crate::accounts::store::credentials(r.get(6)?),
            })
        },
    )
    .optional()
}

/// [`AccountStore::elevate`] on SQLite: the challenge answered, the session raised to `aal2` with a
/// new refresh token that keeps what the session was (its sign-in, its application).
pub(super) fn elevated_session(
    tx: &rusqlite::Connection,
    user_id: &str,
    factor_id: &str,
    challenge_id: &str,
    session_id: &str,
    credential: Option<&str>,
) -> Result<Option<(User, Started)>, Error> {
    let Some(second_factor) = elevate(tx, user_id, factor_id, challenge_id, session_id, credential)? else {
        return Ok(None);
    };
    let token = random_stamped();
    tx.prepare_cached(
            "INSERT INTO _rowgate_refresh_tokens (token_hash, user_id, expires_at, session_id, aal, factor_id, \
               second_factor, signed_in_at, method, client_id, scopes) \
             SELECT ?1, ?2, ?3, ?4, 'aal2', ?5, ?6, min(signed_in_at), max(method), max(client_id), max(scopes) \
             FROM _rowgate_refresh_tokens WHERE session_id = ?4",
        )
        .and_then(|mut q| {
            q.execute(rusqlite::params![
                sqlite_key(&token),
                user_id,
                expires(unix_now()),
                session_id,
                factor_id,
                second_factor
            ])
        })
        .map_err(sqlite_error)?;
    let user = tx.query_row(USER_BY_ID, [user_id], sqlite_user).map_err(sqlite_error)?;
    type SessionRow = (Option<i64>, Option<String>, Option<String>, Option<String>);
    let (signed_in_at, method, client_id, scopes): SessionRow = tx
            .query_row(
                "SELECT min(signed_in_at), max(method), max(client_id), max(scopes) FROM _rowgate_refresh_tokens \
                 WHERE session_id = ?1",
                [session_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .map_err(sqlite_error)?;
    let signed_in_at = signed_in_at.unwrap_or_else(unix_now);
    let method = method.unwrap_or_else(|| "password".into());
    let (aal, second_factor) = ("aal2".into(), Some(second_factor));
    let client = client_id.map(|client_id| SessionClient { client_id, scopes: scopes.unwrap_or_default() });
    let session_id = session_id.to_owned();
    Ok(Some((user, Started { refresh: token, session_id, aal, signed_in_at, method, second_factor, client })))
}

/// The challenge used up, the factor verified (a WebAuthn factor keeping `credential`), the
/// session's tokens at `aal2`: the factor's method (`totp`, `mfa/webauthn`) if the challenge was
/// still open.
pub(super) fn elevate(
    tx: &rusqlite::Connection,
    user_id: &str,
    factor_id: &str,
    challenge_id: &str,
    session_id: &str,
    credential: Option<&str>,
) -> Result<Option<String>, Error> {
    let answered = tx
        .execute(
            "UPDATE _rowgate_mfa_challenges SET verified_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
             WHERE id = ?1 AND factor_id = ?2 AND verified_at IS NULL \
               AND EXISTS (SELECT 1 FROM _rowgate_mfa_factors f WHERE f.id = ?2 AND f.user_id = ?3)",
            [challenge_id, factor_id, user_id],
        )
        .map_err(sqlite_error)?;
    if answered == 0 {
        return Ok(None);
    }
    let method: String = tx
        .query_row(
            "UPDATE _rowgate_mfa_factors SET status = 'verified', updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), \
               web_authn_credential = coalesce(?2, web_authn_credential) \
             WHERE id = ?1 \
             RETURNING CASE factor_type WHEN 'webauthn' THEN 'mfa/webauthn' ELSE 'totp' END",
            rusqlite::params![factor_id, credential],
            |r| r.get(0),
        )
        .map_err(sqlite_error)?;
    tx.execute(
        "UPDATE _rowgate_refresh_tokens SET aal = 'aal2', factor_id = ?3, second_factor = ?4 \
         WHERE user_id = ?1 AND session_id = ?2",
        [user_id, session_id, factor_id, &method],
    )
    .map_err(sqlite_error)?;
    Ok(Some(method))
}

/// [`crate::accounts::store::AccountStore::unenroll_factor`] on SQLite.
pub(super) fn unenroll(
    tx: &rusqlite::Connection,
    user_id: &str,
    factor_id: &str,
    aal2: bool,
) -> Result<Option<bool>, Error> {
    let status: Option<String> = tx
        .query_row(
            "SELECT status FROM _rowgate_mfa_factors WHERE id = ?1 AND user_id = ?2",
            [factor_id, user_id],
            |r| r.get(0),
        )
        .optional()
        .map_err(sqlite_error)?;
    match status.as_deref() {
        None => Ok(None),
        Some("verified") if !aal2 => Ok(Some(false)),
        Some(_) => {
            tx.execute(
                "UPDATE _rowgate_refresh_tokens SET aal = NULL, factor_id = NULL, second_factor = NULL WHERE factor_id = ?1",
                [factor_id],
            )
            .map_err(sqlite_error)?;
            tx.execute("DELETE FROM _rowgate_mfa_factors WHERE id = ?1", [factor_id])
                .map_err(sqlite_error)?;
            Ok(Some(true))
        }
    }
}
