//! What the dashboard asks of the database, implemented by each backend (`backend::dashboard`):
//! where its administrators and their sessions are kept (`_rowgate_admins` in the SQLite file,
//! `rowgate.dashboard_admins` in PostgreSQL; administrators are not application users, and a
//! session is known by its token's SHA-256), the SQL console, the table editor, the access
//! rules. What crosses is data.

use futures_util::future::BoxFuture;

use super::tables::{NewColumn, NewTable};
use crate::accounts::store::SessionSummary;
use crate::error::Error;

/// An administrator, with the hash of their password.
#[derive(Debug, Clone)]
pub struct Admin {
    /// A UUID.
    pub id: String,
    /// Their address, lower case.
    pub email: String,
    /// The PHC string of their password's hash.
    pub password_hash: String,
    /// When they were added (RFC 3339, UTC; as the store keeps it once added).
    pub created: String,
}

/// A signed-in administrator.
#[derive(Debug, Clone)]
pub struct AdminSession {
    /// Who.
    pub admin_id: String,
    /// Their address.
    pub email: String,
    /// Until when (Unix seconds).
    pub expires_at: i64,
}

/// The store every backend implements.
pub trait AdminStore: Send + Sync {
    /// How many administrators there are.
    fn count(&self) -> BoxFuture<'_, Result<u64, Error>>;

    /// Adds an administrator; with `first`, only if there is none yet (the setup link's
    /// promise). `false` when the address is taken, or `first` and one exists.
    fn add(&self, admin: Admin, first: bool) -> BoxFuture<'_, Result<bool, Error>>;

    /// Adds an administrator, or gives the one with this address `admin`'s password and ends
    /// their sessions (`rowgate superuser upsert`); `true` if added.
    fn upsert(&self, admin: Admin) -> BoxFuture<'_, Result<bool, Error>>;

    /// The administrator with this address.
    fn by_email(&self, email: String) -> BoxFuture<'_, Result<Option<Admin>, Error>>;

    /// Keeps a new session, its expired ones dropped on the way.
    fn start_session(
        &self,
        token_hash: String,
        admin_id: String,
        now: i64,
        expires_at: i64,
    ) -> BoxFuture<'_, Result<(), Error>>;

    /// The session whose token hashes to `token_hash`, if it has not expired by `now`.
    fn session(&self, token_hash: String, now: i64) -> BoxFuture<'_, Result<Option<AdminSession>, Error>>;

    /// Ends a session.
    fn end_session(&self, token_hash: String) -> BoxFuture<'_, Result<(), Error>>;
}

/// What the SQL console's statements did: the rows of the last one that returned any (its
/// columns' names, values as JSON), and how many rows the others changed.
#[derive(Debug, Default, serde::Serialize)]
pub struct SqlResult {
    /// The last row-returning statement's columns.
    pub columns: Vec<String>,
    /// Its rows, at most the console's limit.
    pub rows: Vec<Vec<serde_json::Value>>,
    /// Whether it returned more rows than those.
    pub truncated: bool,
    /// Rows changed by the statements that returned none.
    pub affected: u64,
}

/// The rest of what the dashboard asks of the database.
pub trait DashboardDatabase: Send + Sync {
    /// The administrators and their sessions.
    fn admins(&self) -> &dyn AdminStore;

    /// Runs the SQL console's statements.
    fn console(&self, sql: String) -> BoxFuture<'_, Result<SqlResult, Error>>;

    /// Creates a table, and waits for the schema cache to know it.
    fn create_table(&self, table: NewTable) -> BoxFuture<'_, Result<(), Error>>;

    /// Adds a column, and waits for the schema cache to know it.
    fn add_column(&self, table: String, column: NewColumn) -> BoxFuture<'_, Result<(), Error>>;

    /// Drops a table (or, with `column`, one of its columns), and waits for the schema cache to
    /// forget it.
    fn drop_table(&self, table: String, column: Option<String>) -> BoxFuture<'_, Result<(), Error>>;

    /// Who may do what: SQLite's rules file, or PostgreSQL's policies.
    fn access_rules(&self) -> BoxFuture<'_, Result<AccessRules, Error>>;

    /// Replaces SQLite's rules file.
    fn save_rules(&self, text: String) -> BoxFuture<'_, Result<(), Error>>;

    /// Runs an API-key command (`rowgate apikey`'s) on the key store; the lines it prints.
    fn api_keys(
        &self,
        command: crate::apikey::admin::KeyCommand,
    ) -> BoxFuture<'_, Result<Vec<String>, Error>>;

    /// An application user's sessions (with `accounts-enabled`).
    fn user_sessions(&self, user_id: String) -> BoxFuture<'_, Result<Vec<SessionSummary>, Error>>;

    /// Ends every session of an application user: their refresh tokens stop working.
    fn end_user_sessions(&self, user_id: String) -> BoxFuture<'_, Result<(), Error>>;
}

/// The access rules as the dashboard shows them.
#[derive(Debug, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AccessRules {
    /// SQLite's rules file: its text (empty when there is none yet) and where it is.
    File {
        /// Where.
        path: String,
        /// What it says.
        text: String,
    },
    /// PostgreSQL's row-level security, per table.
    Policies {
        /// Each table of the exposed schema.
        tables: Vec<TablePolicies>,
    },
}

/// A table's row-level security: whether it is on, and its policies.
#[derive(Debug, serde::Serialize)]
pub struct TablePolicies {
    /// The table.
    pub table: String,
    /// `ALTER TABLE ... ENABLE ROW LEVEL SECURITY`.
    pub rls_enabled: bool,
    /// Its policies: name, command, roles, `USING` and `WITH CHECK`.
    pub policies: Vec<serde_json::Value>,
}
