//! The dashboard on PostgreSQL: its administrators and sessions in `rowgate.dashboard_admins`
//! and `rowgate.dashboard_sessions` (`dashboard.sql`, made by the accounts install), its SQL
//! console and table editor on a connection of their own (`dashboard-db-uri`, else `db-uri`),
//! and the row-level security policies of the exposed schema.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, SimpleQueryMessage};

use super::accounts::PgAccounts;
use crate::backend::push_ident;
use crate::dashboard::store::{Admin, AdminSession, AdminStore, SqlResult, TablePolicies};
use crate::dashboard::tables::{self, Dialect, NewColumn, NewTable};
use crate::error::Error;

/// The SQL that makes the dashboard's tables (idempotent).
pub const INSTALL_SQL: &str = include_str!("dashboard.sql");

/// The column types the table editor offers (`identity`: a bigint numbered by the database).
pub const TYPES: [&str; 11] = [
    "text",
    "integer",
    "bigint",
    "identity",
    "numeric",
    "double precision",
    "boolean",
    "jsonb",
    "timestamptz",
    "date",
    "uuid",
];

/// Lets `role` (quoted) use the dashboard's tables.
pub fn grants(role: &str) -> String {
    format!("GRANT SELECT, INSERT, UPDATE, DELETE ON rowgate.dashboard_admins, rowgate.dashboard_sessions TO {role};")
}

impl PgAccounts {
    /// A statement on the administrators' tables: missing (no `rowgate install` yet) or not
    /// granted, the dashboard says so, and nothing is logged as the accounts' own failure.
    async fn admin_query(
        &self,
        sql: &str,
        params: &[(&(dyn tokio_postgres::types::ToSql + Sync), Type)],
    ) -> Result<Vec<tokio_postgres::Row>, Error> {
        let client = self.client().await?;
        client.query_typed(sql, params).await.map_err(|e| match e.as_db_error().map(|d| d.code().code()) {
            Some("42P01" | "3F000" | "42501") => Error::Unavailable(
                "the dashboard's tables are missing or not granted to this role: run `rowgate install` (or `rowgate accounts install`)".into(),
            ),
            _ => super::db_error(e, false),
        })
    }
}

impl AdminStore for PgAccounts {
    fn count(&self) -> BoxFuture<'_, Result<u64, Error>> {
        Box::pin(async move {
            let rows = self.admin_query("SELECT count(*) FROM rowgate.dashboard_admins", &[]).await?;
            Ok(rows.first().map_or(0, |r| r.get::<_, i64>(0)) as u64)
        })
    }

    fn add(&self, admin: Admin, first: bool) -> BoxFuture<'_, Result<bool, Error>> {
        Box::pin(async move {
            let setup: Option<bool> = first.then_some(true);
            let rows = self
                .admin_query(
                    "INSERT INTO rowgate.dashboard_admins (id, email, password_hash, made_by_setup)
                     SELECT $1::text::uuid, $2, $3, $4
                     WHERE NOT $4 IS TRUE OR NOT EXISTS (SELECT 1 FROM rowgate.dashboard_admins)
                     ON CONFLICT DO NOTHING RETURNING id",
                    &[
                        (&admin.id, Type::TEXT),
                        (&admin.email, Type::TEXT),
                        (&admin.password_hash, Type::TEXT),
                        (&setup, Type::BOOL),
                    ],
                )
                .await?;
            Ok(!rows.is_empty())
        })
    }

    fn upsert(&self, admin: Admin) -> BoxFuture<'_, Result<bool, Error>> {
        Box::pin(async move {
            // A password replaced is one that may have leaked: the sessions it began end.
            let rows = self
                .admin_query(
                    "WITH ended AS (DELETE FROM rowgate.dashboard_sessions s USING rowgate.dashboard_admins a
                                    WHERE a.id = s.admin_id AND a.email = $2)
                     INSERT INTO rowgate.dashboard_admins (id, email, password_hash) VALUES ($1::text::uuid, $2, $3)
                     ON CONFLICT (email) DO UPDATE SET password_hash = EXCLUDED.password_hash
                     RETURNING id::text = $1",
                    &[(&admin.id, Type::TEXT), (&admin.email, Type::TEXT), (&admin.password_hash, Type::TEXT)],
                )
                .await?;
            Ok(rows.first().is_some_and(|r| r.get::<_, bool>(0)))
        })
    }

    fn by_email(&self, email: String) -> BoxFuture<'_, Result<Option<Admin>, Error>> {
        Box::pin(async move {
            let rows = self
                .admin_query(
                    "SELECT id::text, email, password_hash,
                            to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')
                     FROM rowgate.dashboard_admins WHERE email = $1",
                    &[(&email, Type::TEXT)],
                )
                .await?;
            Ok(rows.first().map(|r| Admin {
                id: r.get(0),
                email: r.get(1),
                password_hash: r.get(2),
                created: r.get(3),
            }))
        })
    }

    fn start_session(
        &self,
        token_hash: String,
        admin_id: String,
        now: i64,
        expires_at: i64,
    ) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            self.admin_query(
                "WITH expired AS (DELETE FROM rowgate.dashboard_sessions WHERE expires_at <= $3)
                 INSERT INTO rowgate.dashboard_sessions (token_hash, admin_id, created_at, expires_at)
                 VALUES ($1, $2::text::uuid, $3, $4)",
                &[
                    (&token_hash, Type::TEXT),
                    (&admin_id, Type::TEXT),
                    (&now, Type::INT8),
                    (&expires_at, Type::INT8),
                ],
            )
            .await?;
            Ok(())
        })
    }

    fn session(&self, token_hash: String, now: i64) -> BoxFuture<'_, Result<Option<AdminSession>, Error>> {
        Box::pin(async move {
            let rows = self.admin_query(
                    "SELECT s.admin_id::text, a.email, s.expires_at FROM rowgate.dashboard_sessions s
                     JOIN rowgate.dashboard_admins a ON a.id = s.admin_id WHERE s.token_hash = $1 AND s.expires_at > $2",
                    &[(&token_hash, Type::TEXT), (&now, Type::INT8)],
                )
                .await?;
            Ok(rows.first().map(|r| AdminSession {
                admin_id: r.get(0),
                email: r.get(1),
                expires_at: r.get(2),
            }))
        })
    }

    fn end_session(&self, token_hash: String) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            self.admin_query(
                "DELETE FROM rowgate.dashboard_sessions WHERE token_hash = $1",
                &[(&token_hash, Type::TEXT)],
            )
            .await?;
            Ok(())
        })
    }
}

/// Runs an administrator's SQL (one or more statements, in one implicit transaction); the rows
/// of the last statement that returned any, as text, at most `max_rows` of them.
pub async fn console(client: &Client, sql: &str, max_rows: usize) -> Result<SqlResult, Error> {
    let messages = client.simple_query(sql).await.map_err(|e| super::db_error(e, false))?;
    let mut out = SqlResult::default();
    let mut fresh = true;
    for message in messages {
        match message {
            SimpleQueryMessage::RowDescription(columns) => {
                out.columns = columns.iter().map(|c| c.name().to_owned()).collect();
                out.rows.clear();
                out.truncated = false;
                fresh = false;
            }
            SimpleQueryMessage::Row(row) if out.rows.len() < max_rows => {
                out.rows.push(
                    (0..row.len()).map(|i| row.get(i).map_or(serde_json::Value::Null, Into::into)).collect(),
                );
            }
            SimpleQueryMessage::Row(_) => out.truncated = true,
            SimpleQueryMessage::CommandComplete(n) if fresh => out.affected += n,
            SimpleQueryMessage::CommandComplete(_) => fresh = true,
            _ => {}
        }
    }
    Ok(out)
}

/// PostgreSQL's table editor statements: tables in the exposed schema, `identity` a bigint
/// the database numbers.
struct Ddl<'a> {
    schema: &'a str,
}

impl Dialect for Ddl<'_> {
    fn types(&self) -> &[&str] {
        &TYPES
    }

    fn push_ident(&self, sql: &mut String, name: &str) {
        push_ident(sql, name);
    }

    fn push_table(&self, sql: &mut String, name: &str) {
        push_ident(sql, self.schema);
        sql.push('.');
        push_ident(sql, name);
    }

    fn push_type(&self, sql: &mut String, kind: &str) {
        match kind {
            "identity" => sql.push_str("bigint GENERATED BY DEFAULT AS IDENTITY"),
            kind => sql.push_str(kind),
        }
    }

    fn now_and_uuid(&self) -> (&str, &str) {
        ("now()", "gen_random_uuid()")
    }

    fn key_with_column(&self) -> bool {
        false
    }
}

/// Creates a table in `schema`.
pub async fn create_table(client: &Client, schema: &str, table: NewTable) -> Result<(), Error> {
    let sql = tables::create_table(&Ddl { schema }, &table)?;
    client.batch_execute(&sql).await.map_err(|e| super::db_error(e, false))
}

/// Adds a column to a table of `schema`.
pub async fn add_column(client: &Client, schema: &str, table: &str, column: NewColumn) -> Result<(), Error> {
    let sql = tables::add_column(&Ddl { schema }, table, &column)?;
    client.batch_execute(&sql).await.map_err(|e| super::db_error(e, false))
}

/// Drops a table of `schema`, or a column of one.
pub async fn drop_named(
    client: &Client,
    schema: &str,
    table: &str,
    column: Option<&str>,
) -> Result<(), Error> {
    let sql = tables::drop(&Ddl { schema }, table, column)?;
    client.batch_execute(&sql).await.map_err(|e| super::db_error(e, false))
}

/// The tables of `schema` with their row-level security and policies.
pub async fn policies(client: &Client, schema: &str) -> Result<Vec<TablePolicies>, Error> {
    let rows = client
        .query(
            "SELECT c.relname::text, c.relrowsecurity,
                    coalesce(json_agg(json_build_object('name', p.policyname, 'command', p.cmd,
                      'permissive', p.permissive, 'roles', p.roles, 'using', p.qual, 'check', p.with_check)
                      ORDER BY p.policyname) FILTER (WHERE p.policyname IS NOT NULL), '[]')::text
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             LEFT JOIN pg_policies p ON p.schemaname = n.nspname AND p.tablename = c.relname
             WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') GROUP BY 1, 2 ORDER BY 1",
            &[&schema],
        )
        .await
        .map_err(|e| super::db_error(e, false))?;
    Ok(rows
        .iter()
        .map(|r| TablePolicies {
            table: r.get(0),
            rls_enabled: r.get(1),
            policies: serde_json::from_str(r.get::<_, &str>(2)).unwrap_or_default(),
        })
        .collect())
}

/// A connection for the console and table editor, opened on first use and again after a drop.
pub struct ConsoleConnection {
    store: PgAccounts,
}

impl ConsoleConnection {
    /// On the database `target` names.
    pub fn new(target: super::PgTarget) -> ConsoleConnection {
        ConsoleConnection { store: PgAccounts::named(target, "rowgate dashboard") }
    }

    /// The connection.
    pub async fn client(&self) -> Result<Arc<Client>, Error> {
        self.store.client().await
    }
}
