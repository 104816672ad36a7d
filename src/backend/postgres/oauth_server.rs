//! rowgate as an OAuth server on PostgreSQL: GoTrue's `auth.oauth_clients`,
//! `auth.oauth_authorizations` and `auth.oauth_consents`, and `auth.sessions`' client, through
//! the `rowgate.oauth_*` functions (oauth_server.sql).

use futures_util::future::BoxFuture;
use tokio_postgres::types::Type;

use super::accounts::PgAccounts;
use crate::accounts::oauth_server_store::{Authorization, Grant, OAuthClient, OAuthServerStore};
use crate::accounts::store::{SessionClient, Started, User};
use crate::error::Error;

/// A client from the columns of `rowgate.oauth_client`; its lists are kept comma-joined, as
/// GoTrue keeps them.
fn pg_oauth_client(r: &tokio_postgres::Row) -> OAuthClient {
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
            rows.first().map(pg_oauth_client).ok_or_else(|| Error::Unavailable("no client was added".into()))
        })
    }

    fn oauth_client(&self, id: String) -> BoxFuture<'_, Result<Option<OAuthClient>, Error>> {
        Box::pin(async move {
            let rows = self.query("SELECT * FROM rowgate.oauth_client_get($1)", &[(&id, Type::TEXT)]).await?;
            Ok(rows.first().map(pg_oauth_client))
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
            Ok((rows.iter().map(pg_oauth_client).collect(), total))
        })
    }

    fn save_oauth_client(&self, c: OAuthClient) -> BoxFuture<'_, Result<Option<OAuthClient>, Error>> {
        Box::pin(async move {
            let (uris, grants) = (c.redirect_uris.join(","), c.grant_types.join(","));
            let rows = self
                .query(
                    "SELECT * FROM rowgate.oauth_client_save($1, $2, $3, $4, $5, $6, $7)",
                    &[
                        (&c.id, Type::TEXT),
                        (&c.token_endpoint_auth_method, Type::TEXT),
                        (&uris, Type::TEXT),
                        (&grants, Type::TEXT),
                        (&c.client_name, Type::TEXT),
                        (&c.client_uri, Type::TEXT),
                        (&c.logo_uri, Type::TEXT),
                    ],
                )
                .await?;
            Ok(rows.first().map(pg_oauth_client))
        })
    }

    fn set_oauth_client_secret(
        &self,
        id: String,
        secret_hash: String,
    ) -> BoxFuture<'_, Result<Option<OAuthClient>, Error>> {
        Box::pin(async move {
            let rows = self
                .query(
                    "SELECT * FROM rowgate.oauth_client_secret($1, $2)",
                    &[(&id, Type::TEXT), (&secret_hash, Type::TEXT)],
                )
                .await?;
            Ok(rows.first().map(pg_oauth_client))
        })
    }

    fn delete_oauth_client(&self, id: String) -> BoxFuture<'_, Result<bool, Error>> {
        Box::pin(async move {
            let rows = self.query("SELECT rowgate.oauth_client_delete($1)", &[(&id, Type::TEXT)]).await?;
            Ok(rows.first().is_some_and(|r| r.get::<_, bool>(0)))
        })
    }

    fn begin_authorization(&self, a: Authorization) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            self.query(
                "SELECT rowgate.oauth_authorization_begin($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                &[
                    (&a.id, Type::TEXT),
                    (&a.client_id, Type::TEXT),
                    (&a.redirect_uri, Type::TEXT),
                    (&a.scope, Type::TEXT),
                    (&a.state, Type::TEXT),
                    (&a.resource, Type::TEXT),
                    (&a.code_challenge, Type::TEXT),
                    (&a.code_challenge_method, Type::TEXT),
                    (&a.nonce, Type::TEXT),
                    (&a.expires_at, Type::INT8),
                ],
            )
            .await
            .map(|_| ())
        })
    }

    fn authorization(&self, id: String) -> BoxFuture<'_, Result<Option<Authorization>, Error>> {
        Box::pin(async move {
            let rows =
                self.query("SELECT * FROM rowgate.oauth_authorization_get($1)", &[(&id, Type::TEXT)]).await?;
            Ok(rows.first().map(pg_authorization))
        })
    }

    fn claim_authorization(
        &self,
        id: String,
        user_id: String,
    ) -> BoxFuture<'_, Result<Option<Authorization>, Error>> {
        Box::pin(async move {
            let rows = self
                .query(
                    "SELECT * FROM rowgate.oauth_authorization_claim($1, $2)",
                    &[(&id, Type::TEXT), (&user_id, Type::TEXT)],
                )
                .await?;
            Ok(rows.first().map(pg_authorization))
        })
    }

    fn decide_authorization(
        &self,
        id: String,
        user_id: String,
        code_hash: Option<String>,
    ) -> BoxFuture<'_, Result<Option<Authorization>, Error>> {
        Box::pin(async move {
            let rows = self
                .query(
                    "SELECT * FROM rowgate.oauth_authorization_decide($1, $2, $3)",
                    &[(&id, Type::TEXT), (&user_id, Type::TEXT), (&code_hash, Type::TEXT)],
                )
                .await?;
            Ok(rows.first().map(pg_authorization))
        })
    }

    fn take_authorization_code(
        &self,
        code_hash: String,
        client_id: String,
    ) -> BoxFuture<'_, Result<Option<Authorization>, Error>> {
        Box::pin(async move {
            let rows = self
                .query(
                    "SELECT * FROM rowgate.oauth_code_take($1, $2)",
                    &[(&code_hash, Type::TEXT), (&client_id, Type::TEXT)],
                )
                .await?;
            Ok(rows.first().map(pg_authorization))
        })
    }

    fn consent(
        &self,
        user_id: String,
        client_id: String,
    ) -> BoxFuture<'_, Result<Option<Vec<String>>, Error>> {
        Box::pin(async move {
            let rows = self
                .query(
                    "SELECT rowgate.oauth_consent_get($1, $2)",
                    &[(&user_id, Type::TEXT), (&client_id, Type::TEXT)],
                )
                .await?;
            let scopes: Option<String> = rows.first().and_then(|r| r.get(0));
            Ok(scopes.map(|s| s.split_whitespace().map(str::to_owned).collect()))
        })
    }

    fn grants(&self, user_id: String) -> BoxFuture<'_, Result<Vec<Grant>, Error>> {
        Box::pin(async move {
            let rows = self
                .query(
                    "SELECT (g.client).*, g.scopes, g.granted_at FROM rowgate.oauth_grants($1) g",
                    &[(&user_id, Type::TEXT)],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|r| Grant {
                    client: pg_oauth_client(r),
                    scopes: r.get::<_, String>(12).split_whitespace().map(str::to_owned).collect(),
                    granted_at: r.get(13),
                })
                .collect())
        })
    }

    fn revoke_grant(&self, user_id: String, client_id: String) -> BoxFuture<'_, Result<bool, Error>> {
        Box::pin(async move {
            let rows = self
                .query(
                    "SELECT rowgate.oauth_grant_revoke($1, $2)",
                    &[(&user_id, Type::TEXT), (&client_id, Type::TEXT)],
                )
                .await?;
            Ok(rows.first().is_some_and(|r| r.get::<_, bool>(0)))
        })
    }

    fn sign_in_client(
        &self,
        user_id: String,
        method: String,
        client_id: String,
        scopes: String,
        now: i64,
    ) -> BoxFuture<'_, Result<Option<(User, Started)>, Error>> {
        Box::pin(self.start_session(user_id, method, Some(SessionClient { client_id, scopes }), now))
    }
}

/// An authorization from the columns of `rowgate.oauth_authorization`.
fn pg_authorization(r: &tokio_postgres::Row) -> Authorization {
    Authorization {
        id: r.get(0),
        client_id: r.get(1),
        user_id: r.get(2),
        redirect_uri: r.get(3),
        scope: r.get(4),
        state: r.get(5),
        resource: r.get(6),
        code_challenge: r.get::<_, Option<String>>(7).unwrap_or_default(),
        code_challenge_method: r.get::<_, Option<String>>(8).unwrap_or_default(),
        nonce: r.get(9),
        status: r.get(10),
        expires_at: r.get(11),
    }
}
