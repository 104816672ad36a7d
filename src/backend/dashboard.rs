//! What the dashboard asks of a database, on either backend: its administrators' store, the
//! SQL console, the table editor, and the access rules (SQLite's file, PostgreSQL's policies).
//! Answers are data; the dashboard's front door (`crate::dashboard`) makes them HTTP.

use std::sync::Arc;

use super::{postgres, sqlite, Backend};
use crate::config::Config;
use futures_util::future::BoxFuture;

use crate::dashboard::store::{AccessRules, AdminStore, DashboardDatabase, SqlResult};
use crate::dashboard::tables::{NewColumn, NewTable};
use crate::error::Error;
use crate::schema::SharedSchema;

/// The rows the console returns at most.
pub const CONSOLE_ROWS: usize = 1000;
/// How long the console's statements may run on SQLite, where every write waits for them.
pub const CONSOLE_TIME: std::time::Duration = std::time::Duration::from_secs(30);

/// The dashboard's way into the database.
pub struct DashboardDb {
    backend: Arc<Backend>,
    schema: Arc<SharedSchema>,
    /// The exposed schema tables are made in.
    exposed: String,
    /// PostgreSQL's console connection (`dashboard-db-uri`, else `db-uri`).
    console: Option<postgres::dashboard::ConsoleConnection>,
    /// Where the key store is administered: `dashboard-db-uri`, else `db-uri`.
    admin_uri: String,
    /// The application's accounts, with `accounts-enabled`.
    accounts: Option<Arc<dyn crate::accounts::AccountStore>>,
    admins: Arc<dyn AdminStore>,
}

impl DashboardDb {
    /// The dashboard's way into `backend` (SQLite's tables are created here), with the application's
    /// `accounts` when they are on.
    pub fn open(
        backend: Arc<Backend>,
        schema: Arc<SharedSchema>,
        config: &Config,
        accounts: Option<Arc<dyn crate::accounts::AccountStore>>,
    ) -> Result<DashboardDb, String> {
        let exposed = config.db.schemas[0].clone();
        let (admins, console): (Arc<dyn AdminStore>, _) = match &*backend {
            Backend::Postgres(pg) => {
                let uri = config.dashboard.db_uri.as_deref().unwrap_or(&config.db.uri);
                let target = postgres::PgTarget::parse(uri).map_err(|e| e.to_string())?;
                (Arc::new(pg.account_store()), Some(postgres::dashboard::ConsoleConnection::new(target)))
            }
            Backend::Sqlite(lite) => {
                (Arc::new(sqlite::dashboard::SqliteAdmins::open(lite.db.clone())?), None)
            }
        };
        let admin_uri = config.dashboard.db_uri.clone().unwrap_or_else(|| config.db.uri.clone());

        Ok(DashboardDb { backend, schema, exposed, console, admins, admin_uri, accounts })
    }

    async fn run_console(&self, sql: String) -> Result<SqlResult, Error> {
        match (&*self.backend, &self.console) {
            (Backend::Postgres(_), Some(c)) => {
                postgres::dashboard::console(&*c.client().await?, &sql, CONSOLE_ROWS).await
            }
            (Backend::Sqlite(lite), _) => {
                sqlite::dashboard::console(&lite.db, sql, CONSOLE_ROWS, CONSOLE_TIME).await
            }
            (Backend::Postgres(_), None) => Err(Error::internal("no console connection")),
        }
    }

    async fn make_table(&self, table: NewTable) -> Result<(), Error> {
        let name = table.name.clone();
        match (&*self.backend, &self.console) {
            (Backend::Sqlite(lite), _) => sqlite::dashboard::create_table(&lite.db, table).await?,
            (_, Some(c)) => {
                postgres::dashboard::create_table(&*c.client().await?, &self.exposed, table).await?
            }
            _ => return Err(Error::internal("no console connection")),
        }
        super::schema_shows(&self.backend, &self.schema, |s| s.relation(&self.exposed, &name).is_some()).await
    }

    async fn make_column(&self, table: &str, column: NewColumn) -> Result<(), Error> {
        let name = column.name.clone();
        match (&*self.backend, &self.console) {
            (Backend::Sqlite(lite), _) => sqlite::dashboard::add_column(&lite.db, table, column).await?,
            (_, Some(c)) => {
                postgres::dashboard::add_column(&*c.client().await?, &self.exposed, table, column).await?
            }
            _ => return Err(Error::internal("no console connection")),
        }
        super::schema_shows(&self.backend, &self.schema, |s| {
            s.relation(&self.exposed, table).is_some_and(|r| has_column(r, &name))
        })
        .await
    }

    async fn drop_named(&self, table: &str, column: Option<&str>) -> Result<(), Error> {
        match (&*self.backend, &self.console) {
            (Backend::Sqlite(lite), _) => sqlite::dashboard::drop_named(&lite.db, table, column).await?,
            (_, Some(c)) => {
                postgres::dashboard::drop_named(&*c.client().await?, &self.exposed, table, column).await?
            }
            _ => return Err(Error::internal("no console connection")),
        }
        super::schema_shows(&self.backend, &self.schema, |s| {
            match (s.relation(&self.exposed, table), column) {
                (None, _) => true,
                (Some(r), Some(column)) => !has_column(r, column),
                (Some(_), None) => false,
            }
        })
        .await
    }

    async fn read_rules(&self) -> Result<AccessRules, Error> {
        match (&*self.backend, &self.console) {
            (Backend::Sqlite(lite), _) => {
                let (text, path) = lite.rules_text()?;
                Ok(AccessRules::File { path: path.display().to_string(), text })
            }
            (_, Some(c)) => Ok(AccessRules::Policies {
                tables: postgres::dashboard::policies(&*c.client().await?, &self.exposed).await?,
            }),
            _ => Err(Error::internal("no console connection")),
        }
    }

    /// Replaces SQLite's rules file (PostgreSQL's policies are SQL: the console makes them).
    async fn write_rules(&self, text: &str) -> Result<(), Error> {
        match &*self.backend {
            Backend::Sqlite(lite) => lite.save_rules(text).await,
            Backend::Postgres(_) => Err(Error::api(
                crate::error::code::DASHBOARD_INVALID,
                "on PostgreSQL, row-level security policies are written in SQL (CREATE POLICY) in the console",
            )),
        }
    }

    fn accounts(&self) -> Result<&dyn crate::accounts::AccountStore, Error> {
        self.accounts.as_deref().ok_or_else(|| {
            Error::api(
                crate::error::code::DASHBOARD_NOT_FOUND,
                "the accounts are off (--accounts-enabled true)",
            )
        })
    }
}

/// Whether `relation` has a column `name`.
fn has_column(relation: &crate::schema::Relation, name: &str) -> bool {
    relation.columns.iter().any(|c| c.name == name)
}

impl DashboardDatabase for DashboardDb {
    fn admins(&self) -> &dyn AdminStore {
        &*self.admins
    }

    fn console(&self, sql: String) -> BoxFuture<'_, Result<SqlResult, Error>> {
        Box::pin(self.run_console(sql))
    }

    fn create_table(&self, table: NewTable) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(self.make_table(table))
    }

    fn add_column(&self, table: String, column: NewColumn) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move { self.make_column(&table, column).await })
    }

    fn drop_table(&self, table: String, column: Option<String>) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move { self.drop_named(&table, column.as_deref()).await })
    }

    fn access_rules(&self) -> BoxFuture<'_, Result<AccessRules, Error>> {
        Box::pin(self.read_rules())
    }

    fn save_rules(&self, text: String) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move { self.write_rules(&text).await })
    }

    fn api_keys(
        &self,
        command: crate::apikey::admin::KeyCommand,
    ) -> BoxFuture<'_, Result<Vec<String>, Error>> {
        Box::pin(async move {
            // The key store is administered as `rowgate apikey` does it: on PostgreSQL by a role
            // that may create the `rowgate` schema (dashboard-db-uri's), on SQLite in the file.
            Backend::apikey_admin(&self.admin_uri, command).await.map_err(|e| {
                Error::api(crate::error::code::DASHBOARD_INVALID, format!("the key store refused: {e}"))
            })
        })
    }

    fn user_sessions(
        &self,
        user_id: String,
    ) -> BoxFuture<'_, Result<Vec<crate::accounts::store::SessionSummary>, Error>> {
        Box::pin(async move { self.accounts()?.sessions(user_id).await })
    }

    fn end_user_sessions(&self, user_id: String) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            self.accounts()?.logout(user_id, None, crate::accounts::store::Scope::Global).await
        })
    }
}
