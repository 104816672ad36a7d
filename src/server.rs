//! Start-up and shutdown: logging, the pool, the schema cache with its reload triggers, the
//! listener, and a graceful stop on SIGTERM or SIGINT.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::backend::Backend;
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

/// Builds the shared state: opens the database and starts keeping the schema cache current. An
/// SQLite file, its access rules and its schema are read before the first request; what
/// cannot be is the error.
pub fn start_state(config: Arc<Config>) -> Result<Arc<AppState>, String> {
    let schema = Arc::new(SharedSchema::default());
    let cache = config.cache.enabled.then(|| crate::cache::ResponseCache::new(&config));
    let keys = Arc::new(crate::apikey::KeyStore::new(
        config.api_keys.cache_max_entries,
        config.db.anon_role.clone(),
    ));
    let flush = keys.clone();
    let auth = Arc::new(crate::auth::Authenticator::new(&config));
    crate::auth::spawn_jwks_refresh(auth.clone(), config.jwt.jwks_url.clone(), config.jwt.jwks_refresh);
    // PocketBase's realtime needs the engine on SQLite, where that API is on by default, whether
    // or not Supabase's `/realtime/v1` is served.
    let engine = config.realtime.enabled || (config.pocketbase.enabled && config.db.sqlite.is_some());
    let realtime = engine.then(|| {
        crate::realtime::Realtime::start(
            config.realtime.clone(),
            config.server.max_connections,
            auth.clone(),
            schema.clone(),
        )
    });
    let backend = Arc::new(Backend::start(
        config.clone(),
        schema.clone(),
        cache.clone(),
        realtime.clone(),
        Arc::new(move || flush.invalidate()),
    )?);
    if let Some(rt) = &realtime {
        rt.set_access(Arc::new(crate::backend::Rights::new(backend.clone(), schema.clone(), config.clone())));
    }
    // One store serves `/auth/v1` and the dashboard's users (SQLite's tables are made once).
    let account_store = match config.accounts.enabled {
        true => Some(backend.account_store().map_err(|e| format!("the accounts could not be set up: {e}"))?),
        false => None,
    };
    let accounts = accounts(&config, account_store.clone())?;
    let static_files = crate::http::StaticFiles::new(&config);
    let storage = storage(&config, &backend)?;
    crate::backup::schedule::start(&config);
    // The services beside the API, each under its prefix.
    let mut services: Vec<Box<dyn crate::http::Service>> = Vec::new();
    services.extend(
        accounts.clone().map(|a| Box::new(crate::http::AuthService(a)) as Box<dyn crate::http::Service>),
    );
    services
        .extend(storage.map(|s| Box::new(crate::http::StorageService(s)) as Box<dyn crate::http::Service>));
    services.extend(
        (realtime.clone().filter(|_| config.realtime.enabled))
            .map(|r| Box::new(crate::http::RealtimeService(r)) as Box<dyn crate::http::Service>),
    );
    let dashboard = match config.dashboard.enabled {
        true => {
            let db = crate::backend::dashboard::DashboardDb::open(
                backend.clone(),
                schema.clone(),
                &config,
                account_store,
            )
            .map_err(|e| format!("the dashboard could not be set up: {e}"))?;
            let dashboard = crate::dashboard::Dashboard::new(Arc::new(db), config.clone(), schema.clone());
            Some(Arc::new(match &realtime {
                Some(rt) => {
                    let rt = rt.clone();
                    dashboard.with_channels(Box::new(move || rt.channels()))
                }
                None => dashboard,
            }))
        }
        false => None,
    };
    if let Some(d) = &dashboard {
        services.push(Box::new(crate::http::DashboardService(d.clone())));
    }
    let functions = functions(&config)?;
    if config.pocketbase.enabled {
        let pocketbase = crate::pocketbase::PocketBase::new(
            backend.clone(),
            schema.clone(),
            config.clone(),
            accounts,
            dashboard.clone(),
            realtime.clone(),
        )
        .map_err(|e| format!("PocketBase's API could not be set up: {e}"))?;
        services.push(Box::new(crate::http::PocketBaseService(Arc::new(pocketbase))));
    }
    if let Some(f) = &functions {
        services.push(Box::new(crate::http::FunctionsService(f.clone())));
    }
    Ok(Arc::new(AppState {
        dashboard,
        functions,
        services,
        static_files,
        keys,
        backend,
        auth,
        cors: crate::http::Cors::new(config.server.cors_allowed_origins.clone()),
        rate_limits: crate::http::RateLimiter::new(&config.rate_limits),
        config,
        schema,
        cache,
        draining: std::sync::atomic::AtomicBool::new(false),
    }))
}

/// The built-in accounts in `store` (the database's), when `accounts-enabled` (signing with
/// `jwt-secret`). Accounts that cannot be set up (their tables, a hook that names no function, a
/// mail template that does not parse) stop the start: a server running without the `/auth/v1`
/// its configuration asks for would answer every sign-in with 404.
fn accounts(
    config: &Config,
    store: Option<Arc<dyn crate::accounts::AccountStore>>,
) -> Result<Option<Arc<crate::accounts::Accounts>>, String> {
    let Some(store) = store else { return Ok(None) };
    let key = config.jwt.hmac_secret().unwrap_or_default();
    crate::accounts::Accounts::new(store, &key, config.jwt.aud.clone(), &config.accounts)
        .map(|a| Some(Arc::new(a)))
        .map_err(|e| format!("the accounts could not be set up: {e}"))
}

/// Storage, when `storage-enabled`: its rows in `backend`'s database, its bytes under
/// `storage-dir`. A storage that cannot be set up stops the start.
fn storage(config: &Config, backend: &Backend) -> Result<Option<Arc<crate::storage::Storage>>, String> {
    if !config.storage.enabled {
        return Ok(None);
    }
    let store = backend.storage_store()?;
    let files = match &config.storage.s3 {
        Some(settings) => {
            let bucket = crate::storage::files::s3::S3::open(settings)?;
            let checked = bucket.clone();
            let url = settings.url.clone();
            // Not a reason to refuse to start (the bucket may be back in a moment), but never silent.
            tokio::spawn(async move {
                match checked.check().await {
                    Ok(()) => tracing::info!(bucket = %url, "storage: objects' bytes are kept in S3"),
                    Err(e) => {
                        tracing::error!(bucket = %url, error = %e, "storage: the S3 bucket cannot be used")
                    }
                }
            });
            crate::storage::files::Files::new(Arc::new(bucket))
        }
        None => {
            let disk = crate::storage::files::disk::Disk::open(&config.storage.dir)
                .map_err(|e| format!("storage-dir {}: {e}", config.storage.dir.display()))?;
            crate::storage::files::Files::new(Arc::new(disk))
        }
    };
    let secret = config.jwt.hmac_secret().ok_or("storage-enabled needs an HMAC jwt-secret")?;
    let storage = Arc::new(crate::storage::Storage::new(
        store,
        files,
        &secret,
        config.storage.file_size_limit,
        config.server.read_timeout,
        config.storage.transform_cache_size,
    ));
    storage.spawn_sweeper();
    Ok(Some(storage))
}

/// The Edge Functions of `functions-dir`, if any, with the environment Supabase's runtime gives
/// them: the project's URL and keys (and on PostgreSQL its database's URI), and of rowgate's
/// own environment only what Deno needs to find its cache and the package registry.
fn functions(config: &Config) -> Result<Option<Arc<crate::functions::Functions>>, String> {
    if config.functions.dir.is_none() {
        return Ok(None);
    }
    let mut env: Vec<(String, String)> = [
        "PATH",
        "HOME",
        "LANG",
        "TMPDIR",
        "DENO_DIR",
        "XDG_CACHE_HOME",
        "NPM_CONFIG_REGISTRY",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "SSL_CERT_FILE",
        "DENO_CERT",
        "DENO_TLS_CA_STORE",
    ]
    .into_iter()
    .filter_map(|name| std::env::var(name).ok().map(|v| (name.to_owned(), v)))
    .collect();
    for (name, value) in [("DENO_NO_PACKAGE_JSON", "1"), ("DENO_NO_UPDATE_CHECK", "1"), ("NO_COLOR", "1")] {
        env.push((name.into(), value.into()));
    }
    // The certificates the machine trusts, as well as Deno's own (a registry behind a proxy).
    if !env.iter().any(|(n, _)| n == "DENO_TLS_CA_STORE") {
        env.push(("DENO_TLS_CA_STORE".into(), "mozilla,system".into()));
    }
    env.push(("SUPABASE_URL".into(), local_url(config, config.server.port)));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    if let Ok(keys) = crate::apikey::jwt::client_keys(config, now) {
        for (name, key) in keys {
            let name = if name == "ANON_KEY" { "SUPABASE_ANON_KEY" } else { "SUPABASE_SERVICE_ROLE_KEY" };
            env.push((name.into(), key));
        }
    }
    if config.db.sqlite.is_none() {
        env.push(("SUPABASE_DB_URL".into(), config.db.uri.clone()));
    }
    crate::functions::Functions::new(config.functions.clone(), env).map(Some)
}

/// This server's own URL on `port`, as a process on the same machine reaches it.
fn local_url(config: &Config, port: u16) -> String {
    let host = match config.server.host {
        std::net::IpAddr::V4(v4) if v4.is_unspecified() => "127.0.0.1".to_owned(),
        std::net::IpAddr::V6(v6) if v6.is_unspecified() => "[::1]".to_owned(),
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
        ip => ip.to_string(),
    };
    format!("http://{host}:{port}")
}

/// Serves on `listener` (and the admin server, if configured) until SIGTERM or SIGINT, then
/// drains in-flight requests. Fails only if the admin port cannot be bound.
pub async fn run(config: Arc<Config>, listener: TcpListener) -> Result<(), String> {
    // Where the data goes is said by the banner, whatever the log level.
    if let Some(target) = &config.db.sqlite {
        tracing::info!(database = ?target, "serving an SQLite database");
    }
    if !config.ignored_postgrest_options.is_empty() {
        tracing::warn!(
            options = config.ignored_postgrest_options.join(", "),
            "PostgREST options rowgate does not have are ignored"
        );
    }
    let state = start_state(config)?;
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "rowgate listening");
        if let Some(f) = &state.functions {
            f.set_env("SUPABASE_URL", local_url(&state.config, addr.port()));
        }
        // Whatever the log level: a first run should say where it serves and what is missing.
        let setup = match &state.dashboard {
            Some(d) => Some(d.setup().await),
            None => None,
        };
        eprintln!("{}", crate::banner::lines(&state.config, addr, setup.as_ref()).join("\n"));
    }
    if let Some(port) = state.config.server.admin_port {
        match TcpListener::bind((state.config.server.admin_host, port)).await {
            Ok(admin) => {
                tracing::info!(port, "admin server listening (/live, /ready, /metrics)");
                let state = state.clone();
                let handler = move |req, _client| {
                    let state = state.clone();
                    async move { crate::http::admin(&state, req).await }
                };
                tokio::spawn(crate::http::serve_with(
                    admin,
                    crate::http::Limits::internal(),
                    handler,
                    std::future::pending(),
                    SHUTDOWN_GRACE,
                ));
            }
            Err(e) => {
                return Err(format!(
                    "cannot listen on {}:{port} (admin-server-port): {e}",
                    state.config.server.host
                ))
            }
        }
    }
    let draining = state.clone();
    let shutdown = async move {
        shutdown_signal().await;
        let delay = draining.config.server.shutdown_delay;
        if !delay.is_zero() {
            // Out of the load balancer's rotation first, still serving what it sends meanwhile.
            draining.draining.store(true, std::sync::atomic::Ordering::Relaxed);
            tracing::info!(?delay, "answering /ready with 503 before closing the listener");
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                // An operator who means it now (a second Ctrl-C) does not wait out the delay.
                () = shutdown_signal() => {}
            }
        }
    };
    crate::http::serve(listener, state.clone(), shutdown, SHUTDOWN_GRACE).await;
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
