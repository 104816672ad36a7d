//! The OAuth server's clients on PostgreSQL: GoTrue's `auth.oauth_clients`, through the
//! `rowgate.oauth_client_*` functions (oauth_server.sql).

use futures_util::future::BoxFuture;
use tokio_postgres::types::Type;

use super::accounts::PgAccounts;
use crate::accounts::oauth_server_store::{OAuthClient, OAuthServerStore};
use crate::error::Error;

/// A client from the columns of `rowgate.oauth_client`; its lists are kept comma-joined, as
/// GoTrue keeps them.
fn pg_client(r: &tokio_postgres::Row) -> OAuthClient {
    let list = |i: usize| -> Vec<String> {
        let text: String = r.get(i);
        text.split(',').filter(|s| !s.is_empty()).map(str::to_owned).collect()
    };
    OAuthClient {
        id: r.get(0),
        registration_type: r.get(1),
        client_type: r.get(2),
        token_endpoint_auth_method: r.get(3),
        secret_hash: r.get(4),
        redirect_uris: list(5),
        grant_types: list(6),
        client_name: r.get(7),
        client_uri: r.get(8),
        logo_uri: r.get(9),
        created_at: r.get(10),
        updated_at: r.get(11),
    }
}

impl OAuthServerStore for PgAccounts {
    fn add_oauth_client(&self, c: OAuthClient) -> BoxFuture<'_, Result<OAuthClient, Error>> {
        Box::pin(async move {
            let (uris, grants) = (c.redirect_uris.join(","), c.grant_types.join(","));
            let rows = self
                .query(
                    "SELECT * FROM rowgate.oauth_client_add($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                    &[
                        (&c.id, Type::TEXT),
                        (&c.registration_type, Type::TEXT),
                        (&c.client_type, Type::TEXT),
                        (&c.token_endpoint_auth_method, Type::TEXT),
                        (&c.secret_hash, Type::TEXT),
                        (&uris, Type::TEXT),
                        (&grants, Type::TEXT),
                        (&c.client_name, Type::TEXT),
                        (&c.client_uri, Type::TEXT),
                        (&c.logo_uri, Type::TEXT),
                    ],
                )
                .await?;
            rows.first().map(pg_client).ok_or_else(|| Error::Unavailable("no client was added".into()))
        })
    }

    fn oauth_client(&self, id: String) -> BoxFuture<'_, Result<Option<OAuthClient>, Error>> {
        Box::pin(async move {
            let rows = self.query("SELECT * FROM rowgate.oauth_client_get($1)", &[(&id, Type::TEXT)]).await?;
            Ok(rows.first().map(pg_client))
        })
    }

    fn oauth_clients(
        &self,
        offset: u64,
        limit: u64,
    ) -> BoxFuture<'_, Result<(Vec<OAuthClient>, u64), Error>> {
        Box::pin(async move {
            let (offset, limit) = (offset.min(i64::MAX as u64) as i64, limit.min(i64::MAX as u64) as i64);
            let rows = self
                .query(
                    "SELECT (l.client).*, l.total FROM rowgate.oauth_client_list($1, $2) l",
                    &[(&offset, Type::INT8), (&limit, Type::INT8)],
                )
                .await?;
            let total = match rows.first() {
                Some(r) => r.get::<_, i64>(12) as u64,
                // Past the last page: the count alone.
                None if offset > 0 => self.oauth_clients(0, 1).await?.1,
                None => 0,
            };
            Ok((rows.iter().map(pg_client).collect(), total))
        })
    }

    fn save_oauth_client(&self, c: OAuthClient) -> BoxFuture<'_, Result<Option<OAuthClient>, Error>> {
        Box::pin(async move {
            let (uris, grants) = (c.redirect_uris.join(","), c.grant_types.join(","));
            let rows = self
                .query(
                    "SELECT * FROM rowgate.oauth_client_save($1, $2, $3, $4, $5, $6, $7, $8)",
                    &[
                        (&c.id, Type::TEXT),
                        (&c.token_endpoint_auth_method, Type::TEXT),
                        (&c.secret_hash, Type::TEXT),
                        (&uris, Type::TEXT),
                        (&grants, Type::TEXT),
                        (&c.client_name, Type::TEXT),
                        (&c.client_uri, Type::TEXT),
                        (&c.logo_uri, Type::TEXT),
                    ],
                )
                .await?;
            Ok(rows.first().map(pg_client))
        })
    }

    fn delete_oauth_client(&self, id: String) -> BoxFuture<'_, Result<bool, Error>> {
        Box::pin(async move {
            let rows = self.query("SELECT rowgate.oauth_client_delete($1)", &[(&id, Type::TEXT)]).await?;
            Ok(rows.first().is_some_and(|r| r.get::<_, bool>(0)))
        })
    }
}
