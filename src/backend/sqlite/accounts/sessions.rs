//! An account's sessions in the SQLite file: a session is the live refresh tokens that share a
//! `session_id`; started by a sign-in, listed for the dashboard, ended by a logout.

use rusqlite::Connection;

use super::tokens::store_refresh;
use super::{sqlite_error, sqlite_user, USER_BY_ID};
use crate::accounts::store::{Scope, SessionClient, SessionSummary, Started, User};
use crate::error::Error;

/// A new session of `user_id` (held by the application `client`, if any), signed in now by
/// `method`; `None` if the account is gone.
pub(in crate::backend::sqlite) fn start_session(
    tx: &rusqlite::Connection,
    user_id: &str,
    method: &str,
    now: i64,
    client: Option<SessionClient>,
) -> Result<Option<(User, Started)>, Error> {
    let signed_in = tx
        .prepare_cached(
            "UPDATE _rowgate_users SET last_sign_in_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
             WHERE id = ?1 AND deleted_at IS NULL",
        )
        .and_then(|mut q| q.execute([user_id]))
        .map_err(sqlite_error)?;
    if signed_in == 0 {
        return Ok(None);
    }
    let user = tx.query_row(USER_BY_ID, [user_id], sqlite_user).map_err(sqlite_error)?;
    let started = store_refresh(tx, user_id, now, method, client).map_err(sqlite_error)?;
    Ok(Some((user, started)))
}

/// The sessions of `user_id`, newest first: its live refresh tokens, grouped (rotation keeps
/// one of each; a revoked one stays a while).
pub(super) fn list(c: &Connection, user_id: &str) -> rusqlite::Result<Vec<SessionSummary>> {
    let mut q = c.prepare_cached(
        "SELECT coalesce(session_id, token_hash),
                strftime('%Y-%m-%dT%H:%M:%SZ', min(signed_in_at), 'unixepoch'),
                max(method), max(aal), max(client_id)
         FROM _rowgate_refresh_tokens
         WHERE user_id = ?1 AND revoked = 0 AND expires_at > unixepoch()
         GROUP BY coalesce(session_id, token_hash)
         ORDER BY min(signed_in_at) DESC",
    )?;
    let rows = q.query_map([user_id], |r| {
        Ok(SessionSummary {
            id: r.get(0)?,
            signed_in_at: r.get(1)?,
            method: r.get(2)?,
            aal: r.get(3)?,
            client_id: r.get(4)?,
        })
    })?;
    rows.collect()
}

/// Ends sessions of `user_id`: all of them, `session` only, or all others.
pub(super) fn end(c: &Connection, user_id: &str, session: Option<String>, scope: Scope) -> Result<(), Error> {
    // Gone rather than revoked, as GoTrue deletes a session: a token of an ended session is no
    // stolen one whose use should revoke the user's other sessions.
    const END: &str = "DELETE FROM _rowgate_refresh_tokens WHERE user_id = ?1";
    let done = match (scope, session) {
        (Scope::Local, Some(s)) => c.execute(&format!("{END} AND session_id = ?2"), [user_id, &s]),
        (Scope::Others, Some(s)) => {
            c.execute(&format!("{END} AND (session_id IS NULL OR session_id <> ?2)"), [user_id, &s])
        }
        _ => c.execute(END, [user_id]),
    };
    done.map(drop).map_err(sqlite_error)
}
