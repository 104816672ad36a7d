//! Refresh tokens on SQLite: issued stamped with their time (so their keys ascend), stored by
//! hash, and rotated.

use rusqlite::OptionalExtension;

use super::{sqlite_error, sqlite_user, USER_COLUMNS};
use crate::accounts::store::{expires, random_token, token_hash, SessionClient, Started, User};
use crate::error::Error;

/// Starts a session of `user_id` (held by the application `client`, if any): its first refresh
/// token, stored.
pub(super) fn store_refresh(
    c: &rusqlite::Connection,
    user_id: &str,
    now: i64,
    method: &str,
    client: Option<SessionClient>,
) -> rusqlite::Result<Started> {
    let token = stamped(&stamp(), &random_token());
    let session_id = crate::uuid_v4();
    let (client_id, scopes) = (client.as_ref().map(|c| &c.client_id), client.as_ref().map(|c| &c.scopes));
    // Cached: a refresh is a write on the one writer thread, where parsing SQL costs everyone.
    c.prepare_cached(
        "INSERT INTO _rowgate_refresh_tokens (token_hash, user_id, expires_at, session_id, signed_in_at, method, \
           client_id, scopes) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(rusqlite::params![sqlite_key(&token), user_id, expires(now), session_id, now, method, client_id, scopes])?;
    Ok(Started {
        refresh: token,
        session_id,
        aal: "aal1".into(),
        signed_in_at: now,
        method: method.into(),
        second_factor: None,
        client,
    })
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
pub(super) fn sqlite_key(token: &str) -> String {
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
    /// The sign-in it continues (none for a token issued before sessions were kept).
    session_id: Option<String>,
    /// The session's assurance level (none: `aal1`), the factor that raised it and its method.
    aal: Option<String>,
    factor_id: Option<String>,
    second_factor: Option<String>,
    /// When the session began (none for a token issued before this was kept).
    signed_in_at: Option<i64>,
    /// How it signed in (none for a token issued before this was kept: a password).
    method: Option<String>,
    /// The application holding the session, and the scopes granted it.
    client_id: Option<String>,
    scopes: Option<String>,
}

/// [`AccountStore::rotate`] on SQLite.
pub(super) fn rotate(
    c: &rusqlite::Connection,
    token: &str,
    secret: &str,
    now: i64,
    reuse: i64,
    client: Option<&str>,
) -> Result<Option<(User, Started)>, Error> {
    let key = sqlite_key(token);
    // The token and its user in one statement: the writer thread runs every write in turn, so
    // each statement saved here is throughput.
    let found = c
        .prepare_cached(concat!(
            "SELECT ",
            user_columns!(),
            ", t.revoked, t.revoked_at, t.expires_at, t.successor, t.session_id, t.aal, t.factor_id, t.signed_in_at, \
               t.method, t.second_factor, t.client_id, t.scopes \
             FROM _rowgate_refresh_tokens AS t JOIN _rowgate_users AS u ON u.id = t.user_id \
             WHERE t.token_hash = ?1"
        ))
        .and_then(|mut q| {
            q.query_row([&key], |r| {
                Ok(StoredToken {
                    user: sqlite_user(r)?,
                    used: r.get::<_, i64>(USER_COLUMNS)? != 0,
                    used_at: r.get(USER_COLUMNS + 1)?,
                    expires_at: r.get(USER_COLUMNS + 2)?,
                    successor: r.get(USER_COLUMNS + 3)?,
                    session_id: r.get(USER_COLUMNS + 4)?,
                    aal: r.get(USER_COLUMNS + 5)?,
                    factor_id: r.get(USER_COLUMNS + 6)?,
                    signed_in_at: r.get(USER_COLUMNS + 7)?,
                    method: r.get(USER_COLUMNS + 8)?,
                    second_factor: r.get(USER_COLUMNS + 9)?,
                    client_id: r.get(USER_COLUMNS + 10)?,
                    scopes: r.get(USER_COLUMNS + 11)?,
                })
            })
            .optional()
        })
        .map_err(sqlite_error)?;
    let Some(StoredToken {
        user,
        used,
        used_at,
        expires_at,
        successor,
        session_id,
        aal,
        factor_id,
        signed_in_at,
        method,
        second_factor,
        client_id,
        scopes,
    }) = found
    else {
        return Ok(None);
    };
    // Only the session's holder refreshes it; another's attempt changes nothing.
    if client_id.as_deref() != client {
        return Ok(None);
    }
    let started = |refresh: String| Started {
        refresh,
        session_id: session_id.clone().unwrap_or_default(),
        aal: aal.clone().unwrap_or_else(|| "aal1".into()),
        signed_in_at: signed_in_at.unwrap_or(now),
        method: method.clone().unwrap_or_else(|| "password".into()),
        second_factor: second_factor.clone(),
        client: client_id
            .clone()
            .map(|client_id| SessionClient { client_id, scopes: scopes.clone().unwrap_or_default() }),
    };
    if used {
        if used_at.is_none_or(|at| now - at >= reuse) {
            // An application's replay ends its own session only: a third party's fault is not the
            // user's other sessions' end.
            c.execute(
                "UPDATE _rowgate_refresh_tokens SET revoked = 1, revoked_at = NULL \
                 WHERE user_id = ?1 AND (?2 IS NULL OR session_id = ?3)",
                rusqlite::params![user.id, client, session_id],
            )
            .map_err(sqlite_error)?;
            return Ok(None);
        }
        if expires_at <= now {
            return Ok(None);
        }
        return match successor {
            // Stored at the first use: the same token again.
            Some(stamp) => Ok(Some((user, started(stamped(&stamp, secret))))),
            // Used before stamps: its successor was the secret alone, stored then.
            None => Ok(Some((user, started(secret.to_owned())))),
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
        "INSERT INTO _rowgate_refresh_tokens (token_hash, user_id, expires_at, session_id, aal, factor_id, signed_in_at, \
           method, second_factor, client_id, scopes) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )
    .and_then(|mut q| {
        q.execute(rusqlite::params![
            sqlite_key(&successor),
            user.id,
            expires(now),
            session_id,
            aal,
            factor_id,
            signed_in_at,
            method,
            second_factor,
            client_id,
            scopes
        ])
    })
    .map_err(sqlite_error)?;
    Ok(Some((user, started(successor))))
}

/// A new refresh token, stamped with the time now.
pub(super) fn random_stamped() -> String {
    stamped(&stamp(), &random_token())
}
