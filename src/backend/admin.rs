//! The `rowgate` commands that administer a database directly, on a connection of their own
//! rather than the server's pool: the installs (`cache`, `accounts`, `realtime`, `storage`, `webhooks`, `cron`),
//! the API-key store, the dashboard's administrators, the schema read once for `rowgate gen types`, and the demo's SQLite file. The command line
//! (`main.rs`) reaches the databases only through these.

use super::{postgres, sqlite, Backend};
use crate::apikey::admin::KeyCommand;
use crate::config::Config;
use crate::schema::SchemaCache;

/// What `rowgate ... install` sets up in a PostgreSQL database (SQLite's come with the file).
#[derive(Debug, Clone)]
pub enum Install {
    /// `rowgate cache install`: the response cache's change feed (triggers, or a publication
    /// for logical decoding).
    Cache {
        /// Triggers even where logical decoding is available.
        triggers: bool,
    },
    /// `rowgate cache uninstall`.
    CacheUninstall,
    /// `rowgate accounts install`: the built-in accounts' schema, usable by `role`.
    Accounts {
        /// The role rowgate connects as.
        role: String,
    },
    /// `rowgate realtime install`: the publication, and REPLICATION for the change feed's role.
    Realtime {
        /// The login role of `db-uri-replication`.
        replication_role: Option<String>,
    },
    /// `rowgate storage install`: storage's schema, under row-level security, usable by `role`.
    Storage {
        /// The role rowgate connects as.
        role: String,
    },
    /// `rowgate webhooks install`: pg_net's `net.http_*` and `supabase_functions.http_request`,
    /// their requests sent by rowgate connecting as `role`.
    Webhooks {
        /// The role rowgate connects as.
        role: String,
    },
    /// `rowgate cron install`: pg_cron's `cron.schedule` and its tables, the jobs run by
    /// rowgate connecting as `role`.
    Cron {
        /// The role rowgate connects as.
        role: String,
    },
    /// `rowgate install`: all a Supabase app needs — the roles and their grants, then the
    /// accounts, storage and realtime installs.
    Supabase {
        /// The login role rowgate connects as (created if missing).
        role: String,
        /// The login role of `db-uri-replication`.
        replication_role: Option<String>,
    },
}

impl Backend {
    /// Runs `what` on the PostgreSQL database `uri` names, on a direct connection (as a role
    /// that may create schemas); returns what to tell the user.
    pub async fn install(uri: &str, what: Install) -> Result<String, String> {
        let target = postgres::PgTarget::parse(uri)?;
        let c = postgres::connect(&target).await.map_err(|e| format!("cannot connect: {e}"))?;
        match what {
            Install::Cache { triggers } => postgres::changes::install::install(&c, triggers).await,
            Install::CacheUninstall => postgres::changes::install::uninstall(&c).await,
            Install::Accounts { role } => postgres::accounts_install::install(&c, &role)
                .await
                .map(|()| format!("accounts installed in schema rowgate; role {role} may use them")),
            Install::Realtime { replication_role } => {
                postgres::changes::install::install_realtime(&c, replication_role.as_deref())
                    .await
                    .map(|summary| format!("realtime installed: {summary}"))
            }
            Install::Supabase { role, replication_role } => {
                postgres::supabase_install::install(&c, &role, replication_role.as_deref())
                    .await
                    .map(|done| format!("installed\n  {}", done.join("\n  ")))
            }
            Install::Webhooks { role } => postgres::net::install(&c, &role).await.map(|()| {
                format!(
                    "webhooks installed: net.http_get/post/delete and supabase_functions.http_request queue \
                     requests that role {role}'s servers send"
                )
            }),
            Install::Cron { role } => postgres::cron::install(&c, &role).await.map(|()| {
                format!("cron installed: cron.schedule's jobs run by role {role}'s servers, each as the role that scheduled it")
            }),
            Install::Storage { role } => postgres::storage::install(&c, &role).await.map(|()| {
                format!(
                    "storage installed in schema storage (row-level security on, no policies yet); \
                     role {role} and the roles it may become may use it"
                )
            }),
        }
    }

    /// Creates the SQLite file `path` with `script` run in it (the demo's schema and rows).
    pub fn create_sqlite(path: &std::path::Path, script: &str) -> Result<(), String> {
        rusqlite::Connection::open(path).and_then(|c| c.execute_batch(script)).map_err(|e| e.to_string())
    }

    /// `rowgate apikey`: runs `command` on the key store of the database `uri` names, on a
    /// direct connection (on PostgreSQL, a role that may create the `rowgate` schema, or owns
    /// it); returns the lines to print.
    pub async fn apikey_admin(uri: &str, command: KeyCommand) -> Result<Vec<String>, String> {
        use KeyCommand::*;
        if let Some(target) = crate::config::SqliteTarget::from_uri(uri) {
            let c = sqlite::db::connect_admin(&target).map_err(|e| format!("cannot open {uri}: {e}"))?;
            return match command {
                Install => sqlite::apikey::install(&c).map(|()| Vec::new()),
                Create { role, name, expires, claims } => {
                    sqlite::apikey::create(&c, &role, &name, expires, &claims).map(|key| vec![key])
                }
                List => sqlite::apikey::list(&c),
                Revoke { which } => sqlite::apikey::revoke(&c, &which).map(|n| vec![n.to_string()]),
            };
        }
        let target = postgres::PgTarget::parse(uri)?;
        let c = postgres::connect(&target).await.map_err(|e| format!("cannot connect: {e}"))?;
        match command {
            Install => postgres::apikey::install(&c).await.map(|()| Vec::new()),
            Create { role, name, expires, claims } => {
                postgres::apikey::create(&c, &role, &name, expires, &claims).await.map(|key| vec![key])
            }
            List => postgres::apikey::list(&c).await,
            Revoke { which } => postgres::apikey::revoke(&c, &which).await.map(|n| vec![n.to_string()]),
        }
    }

    /// `rowgate admin create`: adds a dashboard administrator to the database `uri` names, on a
    /// direct connection; `false` if one has that address. With `replace` (`rowgate superuser
    /// upsert`), the one with that address gets this password instead, their sessions ended.
    pub async fn add_admin(
        uri: &str,
        admin: crate::dashboard::store::Admin,
        replace: bool,
    ) -> Result<bool, String> {
        use crate::dashboard::store::AdminStore;
        if let Some(target) = crate::config::SqliteTarget::from_uri(uri) {
            let c = sqlite::db::connect_admin(&target).map_err(|e| format!("cannot open {uri}: {e}"))?;
            return sqlite::dashboard::add_directly(&c, &admin, replace).map_err(|e| e.to_string());
        }
        let store = postgres::accounts::PgAccounts::new(postgres::PgTarget::parse(uri)?);
        let added = match replace {
            true => store.upsert(admin).await,
            false => store.add(admin, false).await,
        };
        added.map_err(|e| format!("{e} (has `rowgate install` been run?)"))
    }

    /// The schema cache of the database `config` names, read once on a connection of its own
    /// (`rowgate gen types`): nothing else is started.
    pub async fn read_schema(config: &Config) -> Result<SchemaCache, String> {
        if let Some(target) = &config.db.sqlite {
            let c = sqlite::db::connect_admin(target)
                .map_err(|e| format!("cannot open {}: {e}", config.db.uri))?;
            return sqlite::introspect::load(&c, &config.db.schemas[0]).map_err(|e| e.to_string());
        }
        let target = postgres::PgTarget::parse(&config.db.uri)?;
        let mut c = postgres::connect(&target).await.map_err(|e| format!("cannot connect: {e}"))?;
        postgres::introspect::load(&mut c, &config.db.schemas, None).await.map_err(|e| e.to_string())
    }
}
