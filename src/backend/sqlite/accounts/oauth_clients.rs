//! The OAuth server's clients on SQLite, in a table of the file as GoTrue's
//! `auth.oauth_clients` keeps them (lists comma-joined, deleted ones marked).

use futures_util::future::BoxFuture;
use rusqlite::OptionalExtension;

use super::{sqlite_error, SqliteAccounts};
use crate::accounts::oauth_server_store::{OAuthClient, OAuthServerStore};
use crate::error::Error;

pub(super) const SQLITE_OAUTH_CLIENTS: &str = "
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
);";

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
                "UPDATE _rowgate_oauth_clients SET token_endpoint_auth_method = ?2, client_secret_hash = ?3, \
                   redirect_uris = ?4, grant_types = ?5, client_name = ?6, client_uri = ?7, logo_uri = ?8, \
                   updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
                 WHERE id = ?1 AND deleted_at IS NULL",
                rusqlite::params![
                    client.id,
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
            live(c, &client.id).map_err(sqlite_error)
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
}
