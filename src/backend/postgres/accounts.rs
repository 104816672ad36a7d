//! PostgreSQL's accounts store: schema `rowgate`'s tables behind SECURITY DEFINER functions
//! (`accounts.sql`, run by `rowgate accounts install`), called on a connection of its own as
//! the authenticator (pooled ones carry requests' session roles).

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio_postgres::types::Type;
use tokio_postgres::Client;

use crate::accounts::store::{expires, random_token, token_hash, AccountStore, User};
use crate::error::Error;

/// The SQL `rowgate accounts install` runs.
const INSTALL_SQL: &str = include_str!("accounts.sql");

/// Creates (or updates) the accounts' tables and functions and lets `role` call the functions;
/// nothing else may (the tables hold password hashes).
pub async fn install(client: &Client, role: &str) -> Result<(), String> {
    let role = format!("\"{}\"", role.replace('"', "\"\""));
    let grants = format!(
        "GRANT USAGE ON SCHEMA rowgate TO {role};
         GRANT EXECUTE ON FUNCTION rowgate.account_create(text, text, text, text, bigint),
           rowgate.account_by_email(text), rowgate.account_by_id(text),
           rowgate.account_store_refresh(text, text, bigint),
           rowgate.account_rotate(text, text, bigint, bigint, bigint), rowgate.account_logout(text) TO {role};"
    );
    client
        .batch_execute(&format!(
            "BEGIN; SELECT pg_advisory_xact_lock(7317002); {INSTALL_SQL} {grants} COMMIT;"
        ))
        .await
        .map_err(super::apikey::message)
}

/// A PostgreSQL connection as the authenticator, opened on first use and again after a drop.
pub struct PgAccounts {
    target: super::PgTarget,
    client: tokio::sync::Mutex<Option<Arc<Client>>>,
}

impl PgAccounts {
    /// A store on the database `target` names.
    pub fn new(mut target: super::PgTarget) -> PgAccounts {
        target.config.application_name("rowgate accounts");
        PgAccounts { target, client: tokio::sync::Mutex::new(None) }
    }

    async fn client(&self) -> Result<Arc<Client>, Error> {
        let mut held = self.client.lock().await;
        if let Some(c) = held.as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let client = Arc::new(super::connect(&self.target).await.map_err(pg_error)?);
        *held = Some(client.clone());
        Ok(client)
    }

    /// Runs `sql` as an unnamed statement, its parameters' types given (one round trip, and
    /// nothing prepared that a pooler in transaction mode could lose).
    async fn query(
        &self,
        sql: &str,
        params: &[(&(dyn tokio_postgres::types::ToSql + Sync), Type)],
    ) -> Result<Vec<tokio_postgres::Row>, Error> {
        let client = self.client().await?;
        client.query_typed(sql, params).await.map_err(pg_error)
    }
}

fn pg_error(e: tokio_postgres::Error) -> Error {
    if e.as_db_error().is_some_and(|d| ["42883", "3F000", "42P01", "42501"].contains(&d.code().code())) {
        tracing::error!(error = %e, "the accounts are not installed for this role: run `rowgate accounts install --role <the db-uri's role>`");
    } else {
        tracing::error!(error = %e, "an accounts query failed");
    }
    Error::Unavailable(e.to_string())
}

fn pg_user(r: &tokio_postgres::Row) -> User {
    User { id: r.get(0), email: r.get(1), created_at: r.get(2) }
}

impl AccountStore for PgAccounts {
    fn create(
        &self,
        id: String,
        email: String,
        password_hash: String,
        now: i64,
    ) -> BoxFuture<'_, Result<Option<(User, String)>, Error>> {
        Box::pin(async move {
            let refresh = random_token();
            let rows = self
                .query(
                    "SELECT * FROM rowgate.account_create($1, $2, $3, $4, $5)",
                    &[
                        (&id, Type::TEXT),
                        (&email, Type::TEXT),
                        (&password_hash, Type::TEXT),
                        (&token_hash(&refresh), Type::TEXT),
                        (&expires(now), Type::INT8),
                    ],
                )
                .await?;
            Ok(rows.first().map(|r| (pg_user(r), refresh)))
        })
    }

    fn by_email(&self, email: String) -> BoxFuture<'_, Result<Option<(User, String)>, Error>> {
        Box::pin(async move {
            let rows =
                self.query("SELECT * FROM rowgate.account_by_email($1)", &[(&email, Type::TEXT)]).await?;
            Ok(rows.first().map(|r| (pg_user(r), r.get(3))))
        })
    }

    fn user(&self, id: String) -> BoxFuture<'_, Result<Option<User>, Error>> {
        Box::pin(async move {
            Ok(self
                .query("SELECT * FROM rowgate.account_by_id($1)", &[(&id, Type::TEXT)])
                .await?
                .first()
                .map(pg_user))
        })
    }

    fn new_session(&self, user_id: String, now: i64) -> BoxFuture<'_, Result<String, Error>> {
        Box::pin(async move {
            let refresh = random_token();
            self.query(
                "SELECT rowgate.account_store_refresh($1, $2, $3)",
                &[(&user_id, Type::TEXT), (&token_hash(&refresh), Type::TEXT), (&expires(now), Type::INT8)],
            )
            .await?;
            Ok(refresh)
        })
    }

    fn rotate(
        &self,
        token: String,
        successor: String,
        now: i64,
        reuse: i64,
    ) -> BoxFuture<'_, Result<Option<(User, String)>, Error>> {
        Box::pin(async move {
            let rows = self
                .query(
                    "SELECT * FROM rowgate.account_rotate($1, $2, $3, $4, $5)",
                    &[
                        (&token_hash(&token), Type::TEXT),
                        (&token_hash(&successor), Type::TEXT),
                        (&now, Type::INT8),
                        (&expires(now), Type::INT8),
                        (&reuse, Type::INT8),
                    ],
                )
                .await?;
            Ok(rows.first().map(|r| (pg_user(r), successor)))
        })
    }

    fn logout(&self, user_id: String) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            self.query("SELECT rowgate.account_logout($1)", &[(&user_id, Type::TEXT)]).await.map(drop)
        })
    }
}
