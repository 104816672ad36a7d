//! rowgate as an OAuth server on SQLite: its clients, authorizations and consents in tables of
//! the file as GoTrue's `auth.oauth_*` keep them (lists comma-joined, deleted clients marked);
//! the sessions an application holds are refresh tokens with its `client_id`.

use futures_util::future::BoxFuture;
use rusqlite::OptionalExtension;

use super::{atomically, sqlite_error, start_session, SqliteAccounts};
use crate::accounts::oauth_server_store::{Authorization, Grant, OAuthClient, OAuthServerStore};
use crate::accounts::store::{SessionClient, Started, User};
use crate::error::Error;

pub(super) const SQLITE_OAUTH_SERVER: &str = "
CREATE TABLE IF NOT EXISTS _rowgate_oauth_clients (
  id TEXT PRIMARY KEY,
  client_secret_hash TEXT,
  registration_type TEXT NOT NULL CHECK (registration_type IN ('dynamic', 'manual')),
  client_type TEXT NOT NULL CHECK (client_type IN ('public', 'confidential')),
  token_endpoint_auth_method TEXT NOT NULL
    CHECK (token_endpoint_auth_method IN ('client_secret_basic', 'client_secret_post', 'none')),
  redirect_uris TEXT NOT NULL,
  grant_types TEXT NOT NULL,
  client_name TEXT CHECK (length(client_name) <= 1024),
  client_uri TEXT CHECK (length(client_uri) <= 2048),
  logo_uri TEXT CHECK (length(logo_uri) <= 2048),
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  deleted_at TEXT
);
CREATE TABLE IF NOT EXISTS _rowgate_oauth_authorizations (
  authorization_id TEXT PRIMARY KEY,
  client_id TEXT NOT NULL REFERENCES _rowgate_oauth_clients (id) ON DELETE CASCADE,
  user_id TEXT REFERENCES _rowgate_users (id) ON DELETE CASCADE,
  redirect_uri TEXT NOT NULL,
  scope TEXT NOT NULL,
  state TEXT,
  resource TEXT,
  code_challenge TEXT NOT NULL,
  code_challenge_method TEXT NOT NULL,
  nonce TEXT,
  status TEXT NOT NULL DEFAULT 'pending',
  authorization_code TEXT UNIQUE,
  expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS _rowgate_oauth_authorizations_expires_at ON _rowgate_oauth_authorizations (expires_at);
CREATE TABLE IF NOT EXISTS _rowgate_oauth_consents (
  user_id TEXT NOT NULL REFERENCES _rowgate_users (id) ON DELETE CASCADE,
  client_id TEXT NOT NULL REFERENCES _rowgate_oauth_clients (id) ON DELETE CASCADE,
  scopes TEXT NOT NULL,
  granted_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  revoked_at TEXT,
  PRIMARY KEY (user_id, client_id)
);
CREATE INDEX IF NOT EXISTS _rowgate_refresh_tokens_client ON _rowgate_refresh_tokens (client_id) WHERE client_id IS NOT NULL;";

const AUTHORIZATION_COLUMNS: &str =
    "authorization_id, client_id, user_id, redirect_uri, scope, state, resource, \
     code_challenge, code_challenge_method, nonce, status, expires_at";

fn sqlite_authorization(r: &rusqlite::Row) -> rusqlite::Result<Authorization> {
    Ok(Authorization {
        id: r.get(0)?,
        client_id: r.get(1)?,
        user_id: r.get(2)?,
        redirect_uri: r.get(3)?,
        scope: r.get(4)?,
        state: r.get(5)?,
        resource: r.get(6)?,
        code_challenge: r.get(7)?,
        code_challenge_method: r.get(8)?,
        nonce: r.get(9)?,
        status: r.get(10)?,
        expires_at: r.get(11)?,
    })
}

/// Scopes as a list, from text (space-separated).
fn scope_list(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}

const CLIENT_COLUMNS: &str =
    "id, registration_type, client_type, token_endpoint_auth_method, client_secret_hash, \
     redirect_uris, grant_types, client_name, client_uri, logo_uri, created_at, updated_at";

fn sqlite_client(r: &rusqlite::Row) -> rusqlite::Result<OAuthClient> {
    let list = |i: usize| -> rusqlite::Result<Vec<String>> {
        let text: String = r.get(i)?;
        Ok(text.split(',').filter(|s| !s.is_empty()).map(str::to_owned).collect())
    };
    Ok(OAuthClient {
        id: r.get(0)?,
        registration_type: r.get(1)?,
        client_type: r.get(2)?,
        token_endpoint_auth_method: r.get(3)?,
        secret_hash: r.get(4)?,
        redirect_uris: list(5)?,
        grant_types: list(6)?,
        client_name: r.get(7)?,
        client_uri: r.get(8)?,
        logo_uri: r.get(9)?,
        created_at: r.get(10)?,
        updated_at: r.get(11)?,
    })
}

fn live(c: &rusqlite::Connection, id: &str) -> rusqlite::Result<Option<OAuthClient>> {
    c.query_row(
        &format!("SELECT {CLIENT_COLUMNS} FROM _rowgate_oauth_clients WHERE id = ?1 AND deleted_at IS NULL"),
        [id],
        sqlite_client,
    )
    .optional()
}

impl OAuthServerStore for SqliteAccounts {
    fn add_oauth_client(&self, client: OAuthClient) -> BoxFuture<'_, Result<OAuthClient, Error>> {
        Box::pin(self.db.with_writer(move |c| {
            c.execute(
                "INSERT INTO _rowgate_oauth_clients (id, registration_type, client_type, token_endpoint_auth_method, \
                   client_secret_hash, redirect_uris, grant_types, client_name, client_uri, logo_uri) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                rusqlite::params![
                    client.id,
                    client.registration_type,
                    client.client_type,
                    client.token_endpoint_auth_method,
                    client.secret_hash,
                    client.redirect_uris.join(","),
                    client.grant_types.join(","),
                    client.client_name,
                    client.client_uri,
                    client.logo_uri
                ],
            )
            .map_err(sqlite_error)?;
            live(c, &client.id).map_err(sqlite_error)?.ok_or_else(|| Error::Unavailable("no client was added".into()))
        }))
    }

    fn oauth_client(&self, id: String) -> BoxFuture<'_, Result<Option<OAuthClient>, Error>> {
        Box::pin(self.db.with_reader(move |c| live(c, &id)))
    }

    fn oauth_clients(
        &self,
        offset: u64,
        limit: u64,
    ) -> BoxFuture<'_, Result<(Vec<OAuthClient>, u64), Error>> {
        let (offset, limit) = (offset.min(i64::MAX as u64) as i64, limit.min(i64::MAX as u64) as i64);
        Box::pin(self.db.with_reader(move |c| {
            let clients = c
                .prepare(&format!(
                    "SELECT {CLIENT_COLUMNS} FROM _rowgate_oauth_clients WHERE deleted_at IS NULL \
                     ORDER BY created_at DESC, id LIMIT ?1 OFFSET ?2"
                ))?
                .query_map([limit, offset], sqlite_client)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let total: i64 = c.query_row(
                "SELECT count(*) FROM _rowgate_oauth_clients WHERE deleted_at IS NULL",
                [],
                |r| r.get(0),
            )?;
            Ok((clients, total as u64))
        }))
    }

    fn save_oauth_client(&self, client: OAuthClient) -> BoxFuture<'_, Result<Option<OAuthClient>, Error>> {
        Box::pin(self.db.with_writer(move |c| {
            c.execute(
                "UPDATE _rowgate_oauth_clients SET token_endpoint_auth_method = ?2, \
                   redirect_uris = ?3, grant_types = ?4, client_name = ?5, client_uri = ?6, logo_uri = ?7, \
                   updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
                 WHERE id = ?1 AND deleted_at IS NULL",
                rusqlite::params![
                    client.id,
                    client.token_endpoint_auth_method,
                    client.redirect_uris.join(","),
                    client.grant_types.join(","),
                    client.client_name,
                    client.client_uri,
                    client.logo_uri
                ],
            )
            .map_err(sqlite_error)?;
            live(c, &client.id).map_err(sqlite_error)
        }))
    }

    fn set_oauth_client_secret(
        &self,
        id: String,
        secret_hash: String,
    ) -> BoxFuture<'_, Result<Option<OAuthClient>, Error>> {
        Box::pin(self.db.with_writer(move |c| {
            c.execute(
                "UPDATE _rowgate_oauth_clients SET client_secret_hash = ?2, \
                   updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?1 AND deleted_at IS NULL",
                [&id, &secret_hash],
            )
            .map_err(sqlite_error)?;
            live(c, &id).map_err(sqlite_error)
        }))
    }

    fn delete_oauth_client(&self, id: String) -> BoxFuture<'_, Result<bool, Error>> {
        Box::pin(self.db.with_writer(move |c| {
            let n = c
                .execute(
                    "UPDATE _rowgate_oauth_clients SET deleted_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
                     WHERE id = ?1 AND deleted_at IS NULL",
                    [&id],
                )
                .map_err(sqlite_error)?;
            Ok(n > 0)
        }))
    }

    fn begin_authorization(&self, a: Authorization) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(self.db.with_writer(move |c| {
            c.execute("DELETE FROM _rowgate_oauth_authorizations WHERE expires_at < unixepoch('now')", [])
                .map_err(sqlite_error)?;
            c.execute(
                &format!(
                    "INSERT INTO _rowgate_oauth_authorizations ({AUTHORIZATION_COLUMNS}) \
                          VALUES (?1, ?2, NULL, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'pending', ?10)"
                ),
                rusqlite::params![
                    a.id,
                    a.client_id,
                    a.redirect_uri,
                    a.scope,
                    a.state,
                    a.resource,
                    a.code_challenge,
                    a.code_challenge_method,
                    a.nonce,
                    a.expires_at
                ],
            )
            .map_err(sqlite_error)?;
            Ok(())
        }))
    }

    fn authorization(&self, id: String) -> BoxFuture<'_, Result<Option<Authorization>, Error>> {
        Box::pin(self.db.with_reader(move |c| {
            c.query_row(
                &format!("SELECT {AUTHORIZATION_COLUMNS} FROM _rowgate_oauth_authorizations WHERE authorization_id = ?1"),
                [&id],
                sqlite_authorization,
            )
            .optional()
        }))
    }

    fn claim_authorization(
        &self,
        id: String,
        user_id: String,
    ) -> BoxFuture<'_, Result<Option<Authorization>, Error>> {
        Box::pin(self.db.with_writer(move |c| {
            c.query_row(
                &format!(
                    "UPDATE _rowgate_oauth_authorizations SET user_id = ?2 \
                     WHERE authorization_id = ?1 AND status = 'pending' AND expires_at > unixepoch('now') \
                       AND (user_id IS NULL OR user_id = ?2) \
                     RETURNING {AUTHORIZATION_COLUMNS}"
                ),
                [&id, &user_id],
                sqlite_authorization,
            )
            .optional()
            .map_err(sqlite_error)
        }))
    }

    fn decide_authorization(
        &self,
        id: String,
        user_id: String,
        code_hash: Option<String>,
    ) -> BoxFuture<'_, Result<Option<Authorization>, Error>> {
        Box::pin(self.db.with_writer(move |c| {
            atomically(c, |tx| {
                let decided = tx
                    .query_row(
                        &format!(
                            "UPDATE _rowgate_oauth_authorizations \
                             SET status = CASE WHEN ?3 IS NULL THEN 'denied' ELSE 'approved' END, authorization_code = ?3 \
                             WHERE authorization_id = ?1 AND user_id = ?2 AND status = 'pending' \
                               AND expires_at > unixepoch('now') \
                             RETURNING {AUTHORIZATION_COLUMNS}"
                        ),
                        rusqlite::params![id, user_id, code_hash],
                        sqlite_authorization,
                    )
                    .optional()
                    .map_err(sqlite_error)?;
                let Some(a) = decided else { return Ok(None) };
                if code_hash.is_some() {
                    let kept: Option<(String, Option<String>)> = tx
                        .query_row(
                            "SELECT scopes, revoked_at FROM _rowgate_oauth_consents WHERE user_id = ?1 AND client_id = ?2",
                            [&user_id, &a.client_id],
                            |r| Ok((r.get(0)?, r.get(1)?)),
                        )
                        .optional()
                        .map_err(sqlite_error)?;
                    // What the user consented to before (unless revoked), and now these too.
                    let mut scopes = match kept {
                        Some((scopes, None)) => scope_list(&scopes),
                        _ => Vec::new(),
                    };
                    for s in scope_list(&a.scope) {
                        if !scopes.contains(&s) {
                            scopes.push(s);
                        }
                    }
                    tx.execute(
                        "INSERT INTO _rowgate_oauth_consents (user_id, client_id, scopes) VALUES (?1, ?2, ?3) \
                         ON CONFLICT (user_id, client_id) DO UPDATE SET scopes = excluded.scopes, \
                           granted_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), revoked_at = NULL",
                        [&user_id, &a.client_id, &scopes.join(" ")],
                    )
                    .map_err(sqlite_error)?;
                }
                Ok(Some(a))
            })
        }))
    }

    fn take_authorization_code(
        &self,
        code_hash: String,
        client_id: String,
    ) -> BoxFuture<'_, Result<Option<Authorization>, Error>> {
        Box::pin(self.db.with_writer(move |c| {
            c.query_row(
                &format!(
                    "DELETE FROM _rowgate_oauth_authorizations \
                     WHERE authorization_code = ?1 AND status = 'approved' AND client_id = ?2 \
                     RETURNING {AUTHORIZATION_COLUMNS}"
                ),
                [&code_hash, &client_id],
                sqlite_authorization,
            )
            .optional()
            .map_err(sqlite_error)
        }))
    }

    fn consent(
        &self,
        user_id: String,
        client_id: String,
    ) -> BoxFuture<'_, Result<Option<Vec<String>>, Error>> {
        Box::pin(self.db.with_reader(move |c| {
            let scopes: Option<String> = c
                .query_row(
                    "SELECT scopes FROM _rowgate_oauth_consents \
                     WHERE user_id = ?1 AND client_id = ?2 AND revoked_at IS NULL",
                    [&user_id, &client_id],
                    |r| r.get(0),
                )
                .optional()?;
            Ok(scopes.map(|s| scope_list(&s)))
        }))
    }

    fn grants(&self, user_id: String) -> BoxFuture<'_, Result<Vec<Grant>, Error>> {
        Box::pin(self.db.with_reader(move |c| {
            let columns = CLIENT_COLUMNS
                .split(", ")
                .map(|col| format!("o.{}", col.trim()))
                .collect::<Vec<_>>()
                .join(", ");
            c.prepare(&format!(
                "SELECT {columns}, g.scopes, g.granted_at FROM _rowgate_oauth_consents AS g \
                 JOIN _rowgate_oauth_clients AS o ON o.id = g.client_id AND o.deleted_at IS NULL \
                 WHERE g.user_id = ?1 AND g.revoked_at IS NULL ORDER BY g.granted_at DESC"
            ))?
            .query_map([&user_id], |r| {
                Ok(Grant {
                    client: sqlite_client(r)?,
                    scopes: scope_list(&r.get::<_, String>(12)?),
                    granted_at: r.get(13)?,
                })
            })?
            .collect()
        }))
    }

    fn revoke_grant(&self, user_id: String, client_id: String) -> BoxFuture<'_, Result<bool, Error>> {
        Box::pin(self.db.with_writer(move |c| {
            let revoked = c
                .execute(
                    "UPDATE _rowgate_oauth_consents SET revoked_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
                     WHERE user_id = ?1 AND client_id = ?2 AND revoked_at IS NULL",
                    [&user_id, &client_id],
                )
                .map_err(sqlite_error)?;
            if revoked == 0 {
                return Ok(false);
            }
            c.execute(
                "DELETE FROM _rowgate_refresh_tokens WHERE user_id = ?1 AND client_id = ?2",
                [&user_id, &client_id],
            )
            .map_err(sqlite_error)?;
            Ok(true)
        }))
    }

    fn sign_in_client(
        &self,
        user_id: String,
        method: String,
        client_id: String,
        scopes: String,
        now: i64,
    ) -> BoxFuture<'_, Result<Option<(User, Started)>, Error>> {
        let client = SessionClient { client_id, scopes };
        Box::pin(self.db.with_writer(move |c| {
            atomically(c, |tx| start_session(tx, &user_id, &method, now, Some(client)))
        }))
    }
}
