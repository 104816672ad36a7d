//! The `rowgate` command.

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use rowgate::backend::Install;
use rowgate::config::{Config, ServeArgs};

mod apikey_command;
mod demo;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Threads for blocking work (file reads and writes, SQLite's reads, password hashing) at
/// most, eight a core (at least 16); more work waits its turn. Tokio's default of 512 let a
/// burst of uploads and downloads start hundreds of threads on two cores, each holding memory
/// of its own in the allocator, and the resident set grew past a gigabyte.
fn blocking_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()).saturating_mul(8).max(16)
}

/// A PostgREST-compatible REST API for PostgreSQL.
#[derive(Parser)]
#[command(name = "rowgate", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a PostgreSQL database as a REST API.
    Serve(Box<ServeArgs>),
    /// Set up what a Supabase app needs of a PostgreSQL database, in one go (as a superuser):
    /// the roles `anon`, `authenticated`, `service_role` and the one rowgate connects as, their
    /// grants on schema `public`, then accounts, storage and realtime. Safe to run again.
    Install {
        /// Connection URI of a superuser.
        #[arg(long = "db-uri", env = "ROWGATE_DB_URI", value_name = "URI")]
        db_uri: Option<String>,
        /// The login role rowgate connects as (its db-uri's); created, without a password, if
        /// missing.
        #[arg(long, default_value = "authenticator")]
        role: String,
        /// The login role realtime's change feed connects as (`db-uri-replication`): it gets
        /// REPLICATION.
        #[arg(long = "replication-role")]
        replication_role: Option<String>,
    },
    /// Set up database webhooks in a PostgreSQL database (also part of `rowgate install`):
    /// pg_net's `net.http_get`, `net.http_post` and `net.http_delete` and Supabase's
    /// `supabase_functions.http_request`, whose requests rowgate sends after commit.
    Webhooks {
        /// Connection URI of a superuser.
        #[arg(long = "db-uri", env = "ROWGATE_DB_URI", global = true, value_name = "URI")]
        db_uri: Option<String>,
        #[command(subcommand)]
        action: RoleInstall,
    },
    /// Set up pg_cron's `cron.schedule`, `cron.unschedule`, `cron.job` and
    /// `cron.job_run_details` in a PostgreSQL database, the jobs run by rowgate (also part of
    /// `rowgate install`).
    Cron {
        /// Connection URI of a superuser.
        #[arg(long = "db-uri", env = "ROWGATE_DB_URI", global = true, value_name = "URI")]
        db_uri: Option<String>,
        #[command(subcommand)]
        action: RoleInstall,
    },
    /// Set up the built-in accounts (`accounts-enabled`) in a PostgreSQL database.
    Accounts {
        /// Connection URI of a role that may create the `rowgate` schema or owns it.
        #[arg(long = "db-uri", env = "ROWGATE_DB_URI", global = true, value_name = "URI")]
        db_uri: Option<String>,
        #[command(subcommand)]
        action: AccountsAction,
    },
    /// Set up Supabase Storage's tables (`storage-enabled`) in a PostgreSQL database.
    Storage {
        /// Connection URI of a role that may create the `storage` schema or owns it.
        #[arg(long = "db-uri", env = "ROWGATE_DB_URI", global = true, value_name = "URI")]
        db_uri: Option<String>,
        #[command(subcommand)]
        action: RoleInstall,
    },
    /// Set up what Supabase Realtime's API (`realtime-enabled`) needs of a PostgreSQL database.
    Realtime {
        /// Connection URI of a superuser (or of a role that may create publications).
        #[arg(long = "db-uri", env = "ROWGATE_DB_URI", global = true, value_name = "URI")]
        db_uri: Option<String>,
        #[command(subcommand)]
        action: RealtimeAction,
    },
    /// Manage the dashboard's administrators (not the application's users).
    Admin {
        /// The database: an SQLite file (`sqlite:rowgate.db`, the default) or PostgreSQL (after
        /// `rowgate install`).
        #[arg(long = "db-uri", env = "ROWGATE_DB_URI", global = true, value_name = "URI")]
        db_uri: Option<String>,
        #[command(subcommand)]
        action: AdminAction,
    },
    /// PocketBase's `superuser` command: its superusers are the dashboard's administrators.
    Superuser {
        /// The database, as for `rowgate admin`.
        #[arg(long = "db-uri", env = "ROWGATE_DB_URI", global = true, value_name = "URI")]
        db_uri: Option<String>,
        #[command(subcommand)]
        action: SuperuserAction,
    },
    /// Manage API keys (stored hashed in the `rowgate` schema of the database).
    Apikey {
        /// Connection URI of a role that may create the `rowgate` schema or owns it.
        #[arg(long = "db-uri", env = "ROWGATE_DB_URI", global = true, value_name = "URI")]
        db_uri: Option<String>,
        #[command(subcommand)]
        action: apikey_command::ApikeyAction,
    },
    /// Install or remove the triggers that keep the response cache current.
    Cache {
        /// Connection URI of a table owner or superuser (a superuser also gets DDL flushes).
        #[arg(long = "db-uri", env = "ROWGATE_DB_URI", global = true, value_name = "URI")]
        db_uri: Option<String>,
        #[command(subcommand)]
        action: CacheAction,
    },
    /// Start or stop a throwaway PostgreSQL cluster in a directory kept between runs (the
    /// benchmarks' database; PostgreSQL's server programs must be installed).
    Cluster {
        #[command(subcommand)]
        action: ClusterAction,
    },
    /// Ask a running rowgate whether it can serve (`GET /ready`): exit 0 if it answers 200, 1
    /// otherwise. For container health checks, where no curl is at hand.
    Health {
        /// The readiness URL (plain HTTP).
        #[arg(default_value = "http://127.0.0.1:3000/ready")]
        url: String,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 5)]
        timeout: u64,
    },
    /// Serve one fixed answer with rowgate's HTTP stack (the benchmarks' ceiling).
    Ceiling {
        /// The body to answer with.
        #[arg(long = "body-file", value_name = "FILE")]
        body_file: std::path::PathBuf,
        /// Its Content-Type.
        #[arg(long = "content-type", default_value = "application/json; charset=utf-8")]
        content_type: String,
        /// Port to serve on (127.0.0.1).
        #[arg(long = "server-port", default_value_t = 3001)]
        server_port: u16,
    },
    /// Take a backup of the SQLite file, with storage's files and the access rules, while it
    /// serves (the same options, variables and file as `rowgate serve`).
    Backup(Box<rowgate::backup::command::BackupArgs>),
    /// Restore a backup `rowgate backup` took (the server stopped).
    Restore(Box<rowgate::backup::command::RestoreArgs>),
    /// Print the keys a Supabase client is made with: `ANON_KEY` and `SERVICE_ROLE_KEY`, JWTs
    /// signed with `jwt-secret` (the same options, variables and file as `rowgate serve`).
    Keys(Box<ServeArgs>),
    /// Generate code from the database's schema.
    Gen {
        #[command(subcommand)]
        what: GenWhat,
    },
    /// Serve a small demo schema: an SQLite file in a temporary directory (the embedded
    /// default), or with --postgres a throwaway PostgreSQL (Ctrl-C stops it).
    Demo {
        /// Port to serve the API on.
        #[arg(long = "server-port", default_value_t = 3000)]
        server_port: u16,
        /// Start a throwaway PostgreSQL instead (needs PostgreSQL installed).
        #[arg(long)]
        postgres: bool,
    },
}

#[derive(Subcommand)]
enum GenWhat {
    /// Types of the exposed schemas for a typed client.
    Types {
        #[command(subcommand)]
        language: GenLanguage,
    },
}

#[derive(Subcommand)]
enum GenLanguage {
    /// The `Database` type `supabase gen types typescript` prints, for
    /// `createClient<Database>()`: the schemas of `db-schemas`, read from `db-uri` (the same
    /// options, variables and file as `rowgate serve`).
    Typescript(Box<ServeArgs>),
}

#[derive(Subcommand)]
enum CacheAction {
    /// Report every table's changes: by logical decoding where `wal_level = logical` (as a
    /// superuser), else by a change trigger on every table; and, as a superuser, the DDL event
    /// triggers.
    Install {
        /// Use triggers even where logical decoding is available.
        #[arg(long)]
        triggers: bool,
    },
    /// Remove them.
    Uninstall,
}

#[derive(Subcommand)]
enum ClusterAction {
    /// Start the cluster of DIR (created first if DIR/data holds none) on a free loopback port
    /// and print {"port", "uri", "bin", "data", "pid"} as one JSON line; it runs on after this
    /// command ends.
    Start {
        /// The cluster's directory (data, socket, log).
        #[arg(long)]
        dir: std::path::PathBuf,
        /// A server setting beside rowgate's own, e.g. `--setting max_connections=600`.
        #[arg(long = "setting", value_name = "NAME=VALUE")]
        settings: Vec<String>,
        /// Make DIR a streaming replica of the cluster running in this directory (copied with
        /// pg_basebackup when DIR/data holds none).
        #[arg(long = "replica-of", value_name = "PRIMARY_DIR")]
        replica_of: Option<std::path::PathBuf>,
    },
    /// Stop the cluster of DIR, if it runs.
    Stop {
        /// The cluster's directory.
        #[arg(long)]
        dir: std::path::PathBuf,
        /// `fast` (sessions end, a checkpoint is written) or `immediate`.
        #[arg(long, default_value = "fast")]
        mode: String,
    },
}

#[derive(Subcommand)]
enum AccountsAction {
    /// Create the accounts' tables and functions, and let `--role` (the role rowgate serves as,
    /// its db-uri's) call the functions. Safe to run again.
    Install {
        /// The role rowgate connects as.
        #[arg(long)]
        role: String,
    },
}

/// `rowgate storage|webhooks|cron install`.
#[derive(Subcommand)]
enum RoleInstall {
    /// Create the schema's tables and functions, and let `--role` (the role rowgate serves as)
    /// and the roles it may become use them. Safe to run again.
    Install {
        /// The role rowgate connects as.
        #[arg(long)]
        role: String,
    },
}

#[derive(Subcommand)]
enum RealtimeAction {
    /// Create the publication `supabase_realtime` if missing (add tables to it to publish
    /// their changes), give `--replication-role` REPLICATION, and as a superuser an event
    /// trigger that tells running instances when the publication changes. Safe to run again.
    Install {
        /// The login role the change feed connects as (`db-uri-replication`): it gets
        /// REPLICATION. Not the authenticator, whose requests would then reach everything a
        /// replication connection can read.
        #[arg(long = "replication-role")]
        replication_role: Option<String>,
    },
}

#[derive(Subcommand)]
enum AdminAction {
    /// Add an administrator of the dashboard at /_/.
    Create {
        /// Their e-mail address (what they sign in with).
        #[arg(long)]
        email: String,
        /// Their password, at least 10 characters.
        #[arg(long, env = "ROWGATE_ADMIN_PASSWORD", hide_env_values = true)]
        password: String,
    },
}

#[derive(Subcommand)]
enum SuperuserAction {
    /// Add a superuser, or give the one with this address a new password (ending their sessions).
    Upsert {
        /// Their e-mail address.
        email: String,
        /// Their password, at least 10 characters.
        password: String,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // A wrong flag is a configuration error: one line, exit status 2.
            let text = e.to_string();
            eprintln!(
                "rowgate: {}",
                text.lines().next().unwrap_or("invalid arguments").trim_start_matches("error: ")
            );
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(blocking_threads())
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rowgate: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match cli.command {
        Command::Serve(args) => {
            let config = match Config::load(&args) {
                Ok(c) => Arc::new(c),
                Err(e) => {
                    eprintln!("rowgate: {e}");
                    return ExitCode::from(2);
                }
            };
            runtime.block_on(serve(config))
        }
        Command::Demo { server_port, postgres } => runtime.block_on(demo::demo(server_port, postgres)),
        Command::Install { db_uri, role, replication_role } => {
            runtime.block_on(install(db_uri, Install::Supabase { role, replication_role }))
        }
        Command::Accounts { db_uri, action: AccountsAction::Install { role } } => {
            runtime.block_on(install(db_uri, Install::Accounts { role }))
        }
        Command::Realtime { db_uri, action: RealtimeAction::Install { replication_role } } => {
            runtime.block_on(install(db_uri, Install::Realtime { replication_role }))
        }
        Command::Storage { db_uri, action: RoleInstall::Install { role } } => {
            runtime.block_on(install(db_uri, Install::Storage { role }))
        }
        Command::Webhooks { db_uri, action: RoleInstall::Install { role } } => {
            runtime.block_on(install(db_uri, Install::Webhooks { role }))
        }
        Command::Cron { db_uri, action: RoleInstall::Install { role } } => {
            runtime.block_on(install(db_uri, Install::Cron { role }))
        }
        Command::Admin { db_uri, action: AdminAction::Create { email, password } } => {
            runtime.block_on(admin_create(db_uri, email, password, false))
        }
        Command::Superuser { db_uri, action: SuperuserAction::Upsert { email, password } } => {
            runtime.block_on(admin_create(db_uri, email, password, true))
        }
        Command::Apikey { db_uri, action } => runtime.block_on(apikey_command::run(db_uri, action)),
        Command::Cache { db_uri, action } => runtime.block_on(install(
            db_uri,
            match action {
                CacheAction::Install { triggers } => Install::Cache { triggers },
                CacheAction::Uninstall => Install::CacheUninstall,
            },
        )),
        Command::Cluster { action } => cluster(action),
        Command::Gen { what: GenWhat::Types { language: GenLanguage::Typescript(args) } } => {
            runtime.block_on(gen_typescript(&args))
        }
        Command::Keys(args) => keys(&args),
        Command::Backup(args) => rowgate::backup::command::backup(&args),
        Command::Restore(args) => rowgate::backup::command::restore_command(&args),
        Command::Health { url, timeout } => health(&url, std::time::Duration::from_secs(timeout)),
        Command::Ceiling { body_file, content_type, server_port } => {
            runtime.block_on(ceiling(body_file, content_type, server_port))
        }
    }
}

async fn gen_typescript(args: &ServeArgs) -> ExitCode {
    let config = match Config::load(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rowgate: {e}");
            return ExitCode::from(2);
        }
    };
    match rowgate::backend::Backend::read_schema(&config).await {
        Ok(schema) => {
            print!("{}", rowgate::openapi::typescript::database_type(&schema, &config.db.schemas, "14"));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rowgate: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(config: Arc<Config>) -> ExitCode {
    rowgate::server::init_logging(&config);
    let listener = match rowgate::http::bind(&config).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("rowgate: cannot listen on {}:{}: {e}", config.server.host, config.server.port);
            return ExitCode::from(2);
        }
    };
    match rowgate::server::run(config, listener).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rowgate: {e}");
            ExitCode::from(2)
        }
    }
}

fn cluster(action: ClusterAction) -> ExitCode {
    use rowgate::cluster::TempCluster;
    // PostgreSQL's programs run in the cluster's directory: a relative path would be read
    // from there.
    let absolute = |dir: std::path::PathBuf| std::path::absolute(&dir).unwrap_or(dir);
    let done = match action {
        ClusterAction::Start { dir, settings, replica_of } => match replica_of.map(absolute) {
            Some(primary) => TempCluster::start_in(&primary, &[])
                .and_then(|primary| TempCluster::start_replica(&absolute(dir), &primary, &settings)),
            None => TempCluster::start_in(&absolute(dir), &settings),
        }
        .map(|c| {
            let started = serde_json::json!({
                "port": c.port(),
                "uri": c.uri("postgres", "postgres"),
                "bin": c.bin_dir(),
                "data": c.dir().join("data"),
                "pid": c.pid(),
            });
            println!("{started}");
        }),
        ClusterAction::Stop { dir, mode } => TempCluster::stop_in(&absolute(dir), &mode),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rowgate cluster: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `rowgate health`: one `GET` of `url` over plain HTTP/1.1; success is a 200.
fn health(url: &str, timeout: std::time::Duration) -> ExitCode {
    match rowgate::http::probe::status_line(url, timeout) {
        Ok(line) if line.split_whitespace().nth(1) == Some("200") => ExitCode::SUCCESS,
        Ok(line) => {
            eprintln!("rowgate: {url}: {line}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("rowgate: {url}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `rowgate keys`: the anon and service_role keys, as a self-hosted Supabase's `.env` names them.
fn keys(args: &ServeArgs) -> ExitCode {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    match Config::load(args)
        .map_err(|e| e.to_string())
        .and_then(|c| rowgate::apikey::jwt::client_keys(&c, now))
    {
        Ok(keys) => {
            keys.iter().for_each(|(name, key)| println!("{name}={key}"));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rowgate: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn ceiling(body_file: std::path::PathBuf, content_type: String, port: u16) -> ExitCode {
    let body = match std::fs::read(&body_file) {
        Ok(b) => bytes::Bytes::from(b),
        Err(e) => {
            eprintln!("rowgate: cannot read {}: {e}", body_file.display());
            return ExitCode::from(2);
        }
    };
    let Ok(content_type) = http::HeaderValue::from_str(&content_type) else {
        eprintln!("rowgate: invalid --content-type");
        return ExitCode::from(2);
    };
    let listener = match rowgate::http::listen(([127, 0, 0, 1], port).into()) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("rowgate: cannot listen on 127.0.0.1:{port}: {e}");
            return ExitCode::from(2);
        }
    };
    rowgate::http::serve_static(listener, body, content_type, rowgate::server::shutdown_signal()).await;
    ExitCode::SUCCESS
}

/// `rowgate cache|accounts|realtime|storage install`, through the backend seam.
async fn install(db_uri: Option<String>, what: Install) -> ExitCode {
    let Some(uri) = db_uri else {
        eprintln!("rowgate: missing db-uri: set --db-uri or ROWGATE_DB_URI");
        return ExitCode::from(2);
    };
    match rowgate::backend::Backend::install(&uri, what).await {
        Ok(summary) => {
            println!("rowgate: {summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rowgate: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `rowgate admin create`: a dashboard administrator in the database `db_uri` names; with
/// `replace` (`rowgate superuser upsert`), the one with that address gets this password.
async fn admin_create(db_uri: Option<String>, email: String, password: String, replace: bool) -> ExitCode {
    let uri = db_uri.unwrap_or_else(|| rowgate::config::DEFAULT_DB_URI.to_owned());
    let hashing = std::sync::Arc::new(rowgate::accounts::Hashing::new());
    let admin = match rowgate::dashboard::new_admin(&hashing, &email, &password).await {
        Ok(a) => a,
        Err(e) => {
            eprintln!("rowgate: {e}");
            return ExitCode::from(2);
        }
    };
    match rowgate::backend::Backend::add_admin(&uri, admin, replace).await {
        Ok(true) => {
            println!("administrator {} added: sign in at /_/", email.trim().to_lowercase());
            ExitCode::SUCCESS
        }
        Ok(false) if replace => {
            println!(
                "administrator {}'s password replaced: their sessions ended",
                email.trim().to_lowercase()
            );
            ExitCode::SUCCESS
        }
        Ok(false) => {
            eprintln!("rowgate: an administrator with that address exists");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("rowgate: {e}");
            ExitCode::FAILURE
        }
    }
}
