//! Start-up and shutdown: logging, the pool, the schema cache with its reload triggers, the
//! listener, and a graceful stop on SIGTERM or SIGINT.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::backend::postgres::reload::{self, Reloader};
use crate::backend::postgres::Db;
use crate::config::Config;
use crate::http::AppState;
use crate::schema::SharedSchema;

/// How long in-flight requests may run after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Installs the log subscriber for `config.log_level` (RUST_LOG overrides it).
pub fn init_logging(config: &Config) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("rowgate={}", config.log_level.directive()))
    });
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_target(false).try_init();
}

/// Builds the shared state and starts the schema cache's loading and reload triggers.
pub fn start_state(config: Arc<Config>) -> Arc<AppState> {
    let shared = Arc::new(SharedSchema::default());
    let cache = config.cache_enabled.then(|| crate::cache::ResponseCache::new(&config));
    if let Some(target) = config.sqlite.clone() {
        return start_sqlite(config, shared, target, cache);
    }
    let reloader = Reloader::start(config.clone(), shared.clone(), cache.clone());
    reload::spawn_sigusr1(reloader.clone());
    let auth = Arc::new(crate::auth::Authenticator::new(&config));
    crate::auth::spawn_jwks_refresh(auth.clone(), config.jwt_jwks_url.clone(), config.jwt_jwks_refresh);
    let keys =
        Arc::new(crate::apikey::KeyStore::new(config.api_key_cache_max_entries, config.db_anon_role.clone()));
    let flush = keys.clone();
    reload::spawn_listener(config.clone(), reloader.clone(), Arc::new(move || flush.invalidate()));
    let accounts = config.db_uri.parse().ok().and_then(|pg| {
        accounts(&config, crate::accounts::Store::Postgres(Box::new(crate::accounts::PgStore::new(pg))))
    });
    Arc::new(AppState {
        keys,
        db: Db::new(&config),
        auth,
        cors: crate::http::Cors::new(config.server_cors_allowed_origins.clone()),
        config,
        schema: shared,
        reloader,
        cache,
        sqlite: None,
        accounts,
    })
}

/// The built-in accounts on `store`, when `accounts-enabled` (signing with `jwt-secret`).
fn accounts(config: &Config, store: crate::accounts::Store) -> Option<Arc<crate::accounts::Accounts>> {
    if !config.accounts_enabled {
        return None;
    }
    let secret = config.jwt_secret.clone().unwrap_or_default();
    let key = if config.jwt_secret_is_base64 {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(secret.trim()).unwrap_or_default()
    } else {
        secret.into_bytes()
    };
    match crate::accounts::Accounts::new(
        store,
        &key,
        config.jwt_aud.clone(),
        config.accounts_refresh_reuse_interval,
    ) {
        Ok(a) => Some(Arc::new(a)),
        Err(e) => {
            tracing::error!(error = %e, "the accounts could not be set up");
            None
        }
    }
}

/// The state of a server on an SQLite database: opened (created if missing) and its schema
/// loaded before the first request. If that fails, the error is logged and the state has no
/// database ([`run`] then stops).
fn start_sqlite(
    config: Arc<Config>,
    shared: Arc<SharedSchema>,
    target: crate::backend::sqlite::db::SqliteTarget,
    cache: Option<Arc<crate::cache::ResponseCache>>,
) -> Arc<AppState> {
    let exposed = config.db_schemas[0].clone();
    let rules = match &config.db_rules {
        Some(path) => match crate::backend::sqlite::rules::Rules::load(path) {
            Ok(rules) => match unkeyed_claims(&config, &rules) {
                // Callers that differ in such a claim would share cached answers.
                Some(missing) => {
                    tracing::error!(
                        claims = %missing,
                        "the access rules read claims that cache-key-claims leaves out of the cache key"
                    );
                    None
                }
                None => Some(rules),
            },
            Err(e) => {
                tracing::error!(error = %e, "the access rules could not be loaded");
                None
            }
        },
        None => {
            tracing::warn!("no db-rules file: no caller may read any table");
            Some(crate::backend::sqlite::rules::Rules::default())
        }
    };
    let sqlite =
        match (crate::backend::sqlite::db::SqliteDb::open(target, config.db_sqlite_synchronous), rules) {
            (_, None) => None,
            (Ok(db), Some(rules)) => match db.load_schema(&exposed) {
                Ok((schema, version)) => {
                    tracing::info!(relations = schema.relations.len(), "schema cache loaded");
                    shared.store(schema);
                    db.watch_schema(
                        exposed.clone(),
                        shared.clone(),
                        version,
                        std::time::Duration::from_millis(500),
                    );
                    Some(Arc::new(crate::backend::sqlite::db::SqliteBackend { db, rules }))
                }
                Err(e) => {
                    tracing::error!(error = %e, "reading the SQLite schema failed");
                    None
                }
            },
            (Err(e), _) => {
                tracing::error!(error = %e, "opening the SQLite database failed");
                None
            }
        };
    let accounts = match &sqlite {
        Some(backend) => accounts(&config, crate::accounts::Store::Sqlite(backend.db.clone())),
        None => None,
    };
    if let (Some(cache), Some(backend)) = (&cache, &sqlite) {
        // rowgate's writer reports every commit's tables; other processes' commits are looked
        // for before each lookup (http::route).
        cache.without_listener();
        let (told, schema) = (cache.clone(), shared.clone());
        backend.db.listen(Box::new(move |changed| match changed {
            crate::backend::sqlite::db::Changed::Tables(tables) => match schema.load() {
                Some(s) => told.tables_changed(&s, &exposed, tables.iter()),
                None => told.flush(),
            },
            crate::backend::sqlite::db::Changed::Schema => told.flush(),
        }));
    }
    let reloader = Reloader::idle(config.clone(), shared.clone(), None);
    Arc::new(AppState {
        accounts,
        keys: Arc::new(crate::apikey::KeyStore::new(
            config.api_key_cache_max_entries,
            config.db_anon_role.clone(),
        )),
        db: Db::new(&config),
        auth: Arc::new(crate::auth::Authenticator::new(&config)),
        cors: crate::http::Cors::new(config.server_cors_allowed_origins.clone()),
        sqlite,
        config,
        schema: shared,
        reloader,
        cache,
    })
}

/// Serves on `listener` (and the admin server, if configured) until SIGTERM or SIGINT, then
/// drains in-flight requests. Fails only if the admin port cannot be bound.
pub async fn run(config: Arc<Config>, listener: TcpListener) -> Result<(), String> {
    if config.db_uri == crate::config::DEFAULT_DB_URI {
        // Whatever the log level: where the data goes must never be a surprise.
        eprintln!("rowgate: no db-uri given: serving the SQLite file ./rowgate.db (created if missing)");
    } else if let Some(target) = &config.sqlite {
        tracing::info!(database = ?target, "serving an SQLite database");
    }
    let state = start_state(config);
    if state.config.sqlite.is_some() && state.sqlite.is_none() {
        return Err("the SQLite database or its access rules could not be loaded (see the log)".into());
    }
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "rowgate listening");
    }
    if let Some(port) = state.config.admin_server_port {
        match TcpListener::bind((state.config.server_host, port)).await {
            Ok(admin) => {
                tracing::info!(port, "admin server listening (/live, /ready, /metrics)");
                let state = state.clone();
                let handler = move |req| {
                    let state = state.clone();
                    async move { crate::http::admin(&state, req).await }
                };
                tokio::spawn(crate::http::serve_with(
                    admin,
                    8192,
                    handler,
                    std::future::pending(),
                    SHUTDOWN_GRACE,
                ));
            }
            Err(e) => {
                return Err(format!(
                    "cannot listen on {}:{port} (admin-server-port): {e}",
                    state.config.server_host
                ))
            }
        }
    }
    crate::http::serve(listener, state.clone(), shutdown_signal(), SHUTDOWN_GRACE).await;
    if let Some(cache) = &state.cache {
        cache.goodbye().await;
    }
    tracing::info!("rowgate stopped");
    Ok(())
}

/// Completes on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut int = signal(SignalKind::interrupt()).ok();
    tokio::select! {
        _ = async { match term.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => {}
        _ = async { match int.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => {}
    }
    tracing::info!("shutdown signal received; finishing in-flight requests");
}

/// The claims the access rules read that a narrowed response-cache key (`cache-key-claims`)
/// leaves out, comma-separated; `None` when the key covers them all.
fn unkeyed_claims(config: &Config, rules: &crate::backend::sqlite::rules::Rules) -> Option<String> {
    let keyed = config.cache_key_claims.as_ref().filter(|_| config.cache_enabled)?;
    let missing: Vec<String> = rules.claims().into_iter().filter(|c| !keyed.contains(c)).collect();
    (!missing.is_empty()).then(|| missing.join(", "))
}
