//! The HTTP front: a hyper server with limits and graceful shutdown, the route table
//! (`/live`, `/ready`, everything else to the API), and the handler that runs the pipeline.
//!
//! The handler reads top to bottom as PostgREST's does: parse → plan → SQL → database →
//! response, each step's error converting into [`Error`], which becomes a response in exactly
//! one place ([`error_response`]).

mod context;
mod cors;
mod static_files;

pub use cors::Cors;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::FutureExt;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::auth::Authenticator;
use crate::backend::postgres::reload::Reloader;
use crate::backend::postgres::Db;
use crate::cache::ResponseCache;
use crate::config::Config;
use crate::error::{code, Error};
use crate::plan::Plan;
use crate::schema::SharedSchema;

/// `X-Cache: hit|miss|bypass`, with the response cache on.
const X_CACHE: http::HeaderName = http::HeaderName::from_static("x-cache");

/// The response body type.
pub type Body = Full<Bytes>;

/// What every request handler shares.
pub struct AppState {
    /// The configuration.
    pub config: Arc<Config>,
    /// The connection pool.
    pub db: Db,
    /// The schema cache.
    pub schema: Arc<SharedSchema>,
    /// Asks for a schema cache reload.
    pub reloader: Reloader,
    /// Verifies bearer tokens.
    pub auth: Arc<Authenticator>,
    /// The CORS policy.
    pub cors: Cors,
    /// Verifies API keys.
    pub keys: Arc<crate::apikey::KeyStore>,
    /// The response cache, when `cache-enabled`.
    pub cache: Option<Arc<crate::cache::ResponseCache>>,
    /// The SQLite database, when `db-uri` names one (then `db` is unused).
    pub sqlite: Option<Arc<crate::backend::sqlite::db::SqliteBackend>>,
    /// The built-in accounts (`accounts-enabled`).
    pub accounts: Option<Arc<crate::accounts::Accounts>>,
}

/// Serves `listener` until `shutdown` completes, then lets in-flight requests finish (for at
/// most `grace`).
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) {
    let max_header_size = state.config.server_max_header_size;
    let handler = move |req| {
        let state = state.clone();
        // The request's future holds the state of every route (about 12 KB): boxed once here,
        // it moves as a pointer; by value it was copied whole into hyper's service wrapper and
        // its dispatcher.
        Box::pin(async move { handle(&state, req).await })
    };
    serve_with(listener, max_header_size, handler, shutdown, grace).await
}

/// The HTTP/1.1 server loop: every connection of `listener` answered by `handler`, with
/// rowgate's limits, until `shutdown`.
pub async fn serve_with<H, F>(
    listener: TcpListener,
    max_header_size: usize,
    handler: H,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.max_header_size(max_header_size).timer(hyper_util::rt::TokioTimer::new());
    http.header_read_timeout(Duration::from_secs(30));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, _) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and similar: back off instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let handler = handler.clone();
                let service = service_fn(move |req| {
                    let response = handler(req);
                    async move { Ok::<_, Infallible>(response.await) }
                });
                let conn = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
                tokio::spawn(async move {
                    let _ = conn.await;
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    if tokio::time::timeout(grace, graceful.shutdown()).await.is_err() {
        tracing::warn!("shutdown grace period ended with requests still in flight");
    }
}

/// Serves one fixed answer (`body` with `content_type`, and an ETag) to every request with the
/// same server loop: the ceiling the benchmarks compare cached answers with.
pub async fn serve_static(
    listener: TcpListener,
    body: Bytes,
    content_type: HeaderValue,
    shutdown: impl Future<Output = ()>,
) {
    let etag =
        HeaderValue::from_str(&format!("\"{:x}\"", body.len())).unwrap_or(HeaderValue::from_static("\"0\""));
    let handler = move |_req| {
        let (body, content_type, etag) = (body.clone(), content_type.clone(), etag.clone());
        async move {
            let mut r = Response::new(Body::from(body));
            r.headers_mut().insert(header::CONTENT_TYPE, content_type);
            r.headers_mut().insert(header::ETAG, etag);
            r
        }
    };
    serve_with(listener, 32 * 1024, handler, shutdown, Duration::from_secs(1)).await
}

/// Binds the configured address.
pub async fn bind(config: &Config) -> std::io::Result<TcpListener> {
    listen(SocketAddr::new(config.server_host, config.server_port))
}

/// Connections the kernel queues before they are accepted. Tokio's default (1,024) overflows when
/// a thousand clients connect at once while the workers are busy; a dropped SYN is retried only
/// a second later, which shows as a one-second stall (PocketBase's benchmark at c=1000). The
/// kernel caps this at `net.core.somaxconn`.
const LISTEN_BACKLOG: u32 = 8192;

/// Listens on `addr` with [`LISTEN_BACKLOG`].
pub fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket =
        if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    // As `TcpListener::bind` does: a restart may rebind at once.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Answers one request; a panic inside becomes a 500 instead of taking the server down.
pub async fn handle(state: &AppState, req: Request<Incoming>) -> Response<Body> {
    match AssertUnwindSafe(route(state, req)).catch_unwind().await {
        Ok(response) => response,
        Err(_) => {
            tracing::error!("request handler panicked");
            error_response(&Error::api(code::INTERNAL, "Internal server error"))
        }
    }
}

async fn route(state: &AppState, req: Request<Incoming>) -> Response<Body> {
    if tracing::enabled!(tracing::Level::INFO) {
        let started = std::time::Instant::now();
        let (method, uri) = (req.method().clone(), req.uri().clone());
        let response = dispatch(state, req).await;
        tracing::info!(%method, %uri, status = response.status().as_u16(), elapsed = ?started.elapsed(), "request");
        return response;
    }
    dispatch(state, req).await
}

async fn dispatch(state: &AppState, req: Request<Incoming>) -> Response<Body> {
    if let Some(preflight) = state.cors.preflight(&req) {
        return preflight;
    }
    let origin = req.headers().get(header::ORIGIN).cloned();
    let mut response = endpoint(state, req).await;
    state.cors.decorate(origin.as_ref(), &mut response);
    response
}

async fn endpoint(state: &AppState, req: Request<Incoming>) -> Response<Body> {
    let uri = req.uri().clone();
    match uri.path() {
        "/live" => plain(StatusCode::OK),
        "/ready" => ready(state).await,
        "/rowgate/metrics" if matches!(*req.method(), http::Method::GET | http::Method::HEAD) => {
            metrics(state)
        }
        "/rowgate/apikey" if matches!(*req.method(), http::Method::GET | http::Method::HEAD) => {
            describe_api_key(state, req.headers()).await.unwrap_or_else(|e| error_response(&e))
        }
        path if path.starts_with("/auth/v1/") && state.accounts.is_some() => {
            let accounts = state.accounts.as_ref().expect("checked");
            let (parts, incoming) = req.into_parts();
            let body = match read_body(incoming, 64 * 1024).await {
                Ok(b) => b,
                Err(e) => return error_response(&e),
            };
            let authorization = parts.headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
            let verify = |authorization: Option<&str>| {
                let principal = state.auth.authenticate(authorization).ok().filter(|p| !p.anonymous)?;
                let claims: serde_json::Value = serde_json::from_str(&principal.claims).ok()?;
                claims.get("sub").and_then(|s| s.as_str()).map(str::to_owned)
            };
            accounts.handle(&parts.method, path, uri.query(), authorization, body, verify).await
        }
        path => {
            let config = &state.config;
            if let Some(rest) = under(path, &config.api_prefix) {
                let mut req = req;
                if config.api_prefix != "/" {
                    // The API sees its paths as if it were at the root.
                    let target = match req.uri().query() {
                        Some(q) => format!("{rest}?{q}"),
                        None => rest.to_owned(),
                    };
                    match target.parse() {
                        Ok(uri) => *req.uri_mut() = uri,
                        Err(_) => return plain(StatusCode::BAD_REQUEST),
                    }
                }
                return match api(state, req).await {
                    Ok(response) => response,
                    Err(e) => error_response(&e),
                };
            }
            match (&config.static_dir, under(path, &config.static_prefix)) {
                (Some(dir), Some(rest)) => static_files::serve(dir, rest, req.method(), req.headers()).await,
                _ => plain(StatusCode::NOT_FOUND),
            }
        }
    }
}

/// The rest of `path` below `prefix` (`/` for the prefix itself), if it is below it.
fn under<'p>(path: &'p str, prefix: &str) -> Option<&'p str> {
    if prefix == "/" {
        return Some(path);
    }
    match path.strip_prefix(prefix)? {
        "" => Some("/"),
        rest if rest.starts_with('/') => Some(rest),
        _ => None,
    }
}

/// The API pipeline: request → ApiRequest → Plan → statements → rows → response.
async fn api(state: &AppState, req: Request<Incoming>) -> Result<Response<Body>, Error> {
    let config = &state.config;
    let target_len = req.uri().path_and_query().map_or(0, |pq| pq.as_str().len());
    if target_len > config.server_max_url_length {
        return Err(Error::api(
            code::URL_TOO_LONG,
            format!("The URL is longer than server-max-url-length ({} bytes)", config.server_max_url_length),
        ));
    }
    let declared_body = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .unwrap_or(0);
    if declared_body > config.server_max_body_size as u64 {
        return Err(body_too_large(config.server_max_body_size));
    }
    let (parts, incoming) = req.into_parts();
    let principal = identify(state, &parts.headers).await?;
    let mut lookup = None;
    if let Some(cache) =
        state.cache.as_ref().filter(|_| matches!(parts.method, http::Method::GET | http::Method::HEAD))
    {
        // Another process may have written the SQLite file: what it changed is unknown.
        if let Some(sqlite) = &state.sqlite {
            sqlite.db.foreign_commits(|| cache.flush()).await;
        }
        // The change position before the schema snapshot is taken: a reload between the two
        // flushes the cache after this position, so an answer planned on the old snapshot is
        // never stored as current.
        let start = cache.changes.position();
        let key = cache.key(&parts.method, &parts.uri, &parts.headers, &principal.role, &principal.claims);
        match cache.lookup(&key) {
            crate::cache::Lookup::Hit(entry) => {
                let mut r = Response::new(Body::from(entry.body.clone()));
                *r.status_mut() = entry.status;
                *r.headers_mut() = entry.headers.clone();
                return Ok(not_modified(&parts.headers, r));
            }
            crate::cache::Lookup::Miss => lookup = Some((cache, key, start)),
            crate::cache::Lookup::Bypass => {}
        }
    }
    let ctx = context::RequestContext::new(&parts, config)?;
    let api_request = ctx.parse()?;
    let body = match api_request.method {
        rowgate_request::Method::Post | rowgate_request::Method::Patch | rowgate_request::Method::Put => {
            read_body(incoming, config.server_max_body_size).await?
        }
        _ => Bytes::new(),
    };
    let schema = state.schema.load().ok_or_else(|| {
        Error::api(
            code::SCHEMA_CACHE_NOT_READY,
            "Could not query the database for the schema cache. Retrying.",
        )
    })?;
    let profile = |schema: &str| (config.db_schemas.len() > 1).then(|| schema.to_owned());
    if let Some(sqlite) = &state.sqlite {
        let response = match Plan::build(&api_request, &body, &schema, config)? {
            Plan::Read(plan) => {
                let rules = sqlite_row_rules(sqlite, &plan, &schema, &principal, config)?;
                let route = parts.uri.path().trim_start_matches('/');
                let cacheable = cacheable(lookup.take(), route, &plan, &schema);
                let response = sqlite_read(&sqlite.db, &plan, &rules, profile(&plan.schema).as_deref()).await;
                Ok(remember(state, config, route, cacheable, response?))
            }
            Plan::Options(allow) => {
                let mut r = plain(StatusCode::OK);
                r.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
                Ok(r)
            }
            Plan::Mutate(plan) => {
                let profile = profile(&plan.schema);
                sqlite_write(sqlite, plan, &schema, &principal, config, profile).await
            }
        };
        return response.map(|r| not_modified(&parts.headers, r));
    }
    let response = match Plan::build(&api_request, &body, &schema, config)? {
        Plan::Read(plan) => {
            let route = parts.uri.path().trim_start_matches('/');
            let cacheable = cacheable(lookup.take(), route, &plan, &schema);
            let statements = crate::backend::postgres::sql::render_read(&plan, config.db_max_rows);
            let mut settings = ctx.session_settings(&plan.schema, &principal, plan.timezone.as_deref());
            let profile = profile(&plan.schema);
            if plan.transaction.is_some_and(|t| t.read_only) {
                settings.set(crate::backend::postgres::Setting::ReadOnly, "on".into());
            }
            let mut conn = state.db.get().await?;
            if let Some(explain) = &plan.explain {
                let stmt = crate::backend::postgres::sql::explain(&statements.main, explain);
                if plan.transaction.is_some_and(|t| !t.read_only) {
                    // EXPLAIN ANALYZE runs the call: whatever it writes is rolled back.
                    let result = conn.write(&settings, &stmt, true, principal.anonymous).await?;
                    conn.finish(false, principal.anonymous).await?;
                    return Ok(crate::response::plan(explain, &result.rows));
                }
                let result = conn.read(&settings, &stmt, None, principal.anonymous).await?;
                return Ok(crate::response::plan(explain, &result.rows));
            }
            let mut marker = None;
            let response = match plan.transaction {
                None => {
                    if plan.call.as_ref().is_some_and(|c| c.volatile) {
                        // It may change session settings: if the request is dropped midway, the
                        // record must not claim to know them.
                        conn.settings.forget();
                    }
                    let result = conn
                        .read(&settings, &statements.main, statements.explain.as_ref(), principal.anonymous)
                        .await?;
                    crate::response::read(&plan, &statements, result, config.db_max_rows, profile.as_deref())
                }
                // POST /rpc: in a transaction rowgate ends once it has seen the result.
                Some(tx) => {
                    let result = conn.write(&settings, &statements.main, true, principal.anonymous).await?;
                    let read = crate::backend::postgres::ReadResult { rows: result.rows, explain: None };
                    let response = crate::response::read(
                        &plan,
                        &statements,
                        read,
                        config.db_max_rows,
                        profile.as_deref(),
                    );
                    marker = end_write(
                        &mut conn,
                        response.is_ok() && !tx.rollback,
                        state.cache.as_ref(),
                        principal.anonymous,
                    )
                    .await?;
                    response
                }
            };
            if plan.call.as_ref().is_some_and(|c| c.volatile) {
                // A volatile function may have changed session settings behind the cache's back.
                conn.settings.forget();
            }
            drop(conn);
            if let Some(marker) = marker {
                marker.wait().await;
            }
            match plan.transaction {
                // POST /rpc: never cached, never marked.
                Some(_) => response,
                None => response.map(|r| remember(state, config, route, cacheable, r)),
            }
        }
        Plan::Options(allow) => {
            let mut r = plain(StatusCode::OK);
            r.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
            Ok(r)
        }
        Plan::Mutate(plan) => {
            let settings = ctx.session_settings(&plan.schema, &principal, plan.timezone.as_deref());
            let profile = profile(&plan.schema);
            let blind = plan.commits_blind();
            // Boxed: the write's future (~9 KB) would otherwise be part of every request's,
            // reads included, and copied whole at each `.await` above this one.
            let write = Box::pin(write(
                state.db.clone(),
                state.cache.clone(),
                plan,
                settings,
                principal.anonymous,
                profile,
            ));
            if blind {
                // Its whole transaction is queued on the connection at once (PgConn::write_committed):
                // a client going away cannot interrupt it midway, so no task of its own is needed.
                write.await
            } else {
                // The write runs on a task of its own, so that a client going away mid-write
                // cannot leave its transaction open on a pooled connection: it commits or rolls back.
                tokio::spawn(write)
                    .await
                    .unwrap_or_else(|_| Err(Error::api(code::INTERNAL, "Internal server error")))
            }
        }
    };
    if let Err(Error::SchemaChanged) = response {
        state.reloader.request();
    }
    response.map(|r| not_modified(&parts.headers, r))
}

/// The rows of each table a read on SQLite reads that the caller's access rules allow; a
/// permission denied error for the first table it may not read at all.
fn sqlite_row_rules(
    sqlite: &crate::backend::sqlite::db::SqliteBackend,
    plan: &crate::plan::ReadPlan,
    schema: &crate::schema::SchemaCache,
    principal: &crate::auth::Principal,
    config: &Config,
) -> Result<crate::backend::sqlite::sql::RowRules, Error> {
    let tables = crate::backend::sqlite::sql::tables(plan);
    sqlite_read_rules(sqlite, &tables, &plan.schema, schema, principal, config)
}

/// The read rules of `tables` for `principal`: the condition of each table it may read only in
/// part; permission denied for the first it may not read at all.
fn sqlite_read_rules(
    sqlite: &crate::backend::sqlite::db::SqliteBackend,
    tables: &[&str],
    schema_name: &str,
    schema: &crate::schema::SchemaCache,
    principal: &crate::auth::Principal,
    config: &Config,
) -> Result<crate::backend::sqlite::sql::RowRules, Error> {
    let mut rules = crate::backend::sqlite::sql::RowRules::new();
    for table in tables {
        if rules.contains_key(*table) {
            continue;
        }
        let op = crate::backend::sqlite::rules::Operation::Select;
        let rule = sqlite_rule(sqlite, table, op, schema_name, schema, principal, config)?;
        rules.insert((*table).to_owned(), rule);
    }
    Ok(rules)
}

/// The rows of `table` the caller's rule for `op` allows: `None` for every row, the condition
/// otherwise (the OR of the entries that apply, `@jwt` values bound); permission denied when
/// no entry applies.
fn sqlite_rule(
    sqlite: &crate::backend::sqlite::db::SqliteBackend,
    table: &str,
    op: crate::backend::sqlite::rules::Operation,
    schema_name: &str,
    schema: &crate::schema::SchemaCache,
    principal: &crate::auth::Principal,
    config: &Config,
) -> Result<Option<crate::plan::Condition>, Error> {
    use crate::backend::sqlite::rules::Access;
    use crate::plan::Condition;
    match sqlite.rules.access(principal, table, op) {
        Access::Denied => Err(crate::backend::sqlite::rules::denied(principal, table)),
        Access::All => Ok(None),
        Access::Rows(filters) => {
            let relation = schema
                .relation(schema_name, table)
                .ok_or_else(|| crate::backend::sqlite::rules::denied(principal, table))?;
            let mut any = Vec::new();
            for query in &filters {
                let mut all = crate::plan::row_filter(relation, schema, query, config)?;
                if !crate::backend::sqlite::rules::bind_claims(&mut all, &principal.claims) {
                    // A claim the entry names is missing: the entry allows no row.
                    continue;
                }
                any.push(Condition::Logic {
                    negated: false,
                    op: rowgate_request::LogicOp::And,
                    children: all,
                });
            }
            Ok(Some(Condition::Logic { negated: false, op: rowgate_request::LogicOp::Or, children: any }))
        }
    }
}

/// Two rules that must both hold (`None`: every row).
fn both(
    a: Option<crate::plan::Condition>,
    b: Option<crate::plan::Condition>,
) -> Option<crate::plan::Condition> {
    match (a, b) {
        (Some(a), Some(b)) => Some(crate::plan::Condition::Logic {
            negated: false,
            op: rowgate_request::LogicOp::And,
            children: vec![a, b],
        }),
        (a, b) => a.or(b),
    }
}

/// A write on SQLite: the operation's rule restricts and checks the rows, the read rules shape
/// the representation.
async fn sqlite_write(
    sqlite: &crate::backend::sqlite::db::SqliteBackend,
    plan: crate::plan::MutatePlan,
    schema: &crate::schema::SchemaCache,
    principal: &crate::auth::Principal,
    config: &Config,
    profile: Option<String>,
) -> Result<Response<Body>, Error> {
    use crate::backend::sqlite::rules::Operation;
    use crate::plan::{Mutation, Returning};
    let table = plan.relation.name.name.clone();
    let op = match plan.mutation {
        Mutation::Insert { .. } => Operation::Insert,
        Mutation::Update { .. } | Mutation::UpdateByKey { .. } => Operation::Update,
        Mutation::Delete => Operation::Delete,
    };
    let mut rule = sqlite_rule(sqlite, &table, op, &plan.schema, schema, principal, config)?;
    if op != Operation::Insert && !plan.conditions.is_empty() {
        // Filters read the rows: as PostgreSQL applies SELECT policies to an UPDATE or DELETE
        // with a WHERE clause, only rows the caller may read are matched (else a count or a
        // representation would tell of rows it may not see).
        let select = sqlite_rule(sqlite, &table, Operation::Select, &plan.schema, schema, principal, config)?;
        rule = both(rule, select);
    }
    // What the write reads besides its table: embedded resources its filters test, and for a
    // representation or a Location the written rows as the caller may read them.
    let mut tables = crate::backend::sqlite::sql::tables_of(&table, &[], &plan.conditions, &[]).split_off(1);
    match &plan.returning {
        Returning::Representation(columns) => tables.extend(crate::backend::sqlite::sql::tables_of(
            &table,
            columns,
            &plan.output_conditions,
            &[],
        )),
        Returning::Location(_) => tables.push(&table),
        _ => {}
    }
    let read_rules = sqlite_read_rules(sqlite, &tables, &plan.schema, schema, principal, config)?;
    // A merging upsert may update rows: the caller needs the update rule too, and the select
    // rule — PostgreSQL checks the row an ON CONFLICT DO UPDATE finds, and the rows it writes,
    // against SELECT policies as well, so a row the caller may not read is never updated.
    let update_rule = match &plan.mutation {
        Mutation::Insert { on_conflict: Some(c), .. } if c.merge => {
            let update =
                sqlite_rule(sqlite, &table, Operation::Update, &plan.schema, schema, principal, config)?;
            let select =
                sqlite_rule(sqlite, &table, Operation::Select, &plan.schema, schema, principal, config)?;
            both(update, select)
        }
        _ => None,
    };
    let statements =
        crate::backend::sqlite::sql::render_write(&plan, rule.as_ref(), update_rule.as_ref(), &read_rules)?;
    let rollback = plan.rollback;
    sqlite
        .db
        .write(statements, table, rollback, move |out| {
            let location = match (&plan.returning, &out.location) {
                (Returning::Location(pk), Some(values)) => {
                    let values: Vec<Option<&str>> = values.iter().map(|v| v.as_deref()).collect();
                    Some(crate::response::location(&plan.relation.name.name, pk, &values))
                }
                _ => None,
            };
            let (body, page) = out.representation.unwrap_or_default();
            let outcome = crate::response::WriteOutcome {
                affected: out.affected,
                inserted: out.inserted.unwrap_or(out.affected),
                page,
                location,
            };
            let single = matches!(plan.media, crate::plan::Media::Single { .. });
            crate::response::finish_write(&plan, outcome, profile.as_deref(), || {
                // The singular object: the array's one element.
                Ok(if single && body.len() >= 2 {
                    body.as_bytes()[1..body.len() - 1].to_vec()
                } else {
                    body.into_bytes()
                })
            })
        })
        .await
}

/// A read on SQLite: the body is built by SQLite itself (see `sql::sqlite`).
async fn sqlite_read(
    db: &Arc<crate::backend::sqlite::db::SqliteDb>,
    plan: &crate::plan::ReadPlan,
    rules: &crate::backend::sqlite::sql::RowRules,
    profile: Option<&str>,
) -> Result<Response<Body>, Error> {
    let statements = crate::backend::sqlite::sql::render_read(plan, rules)?;
    let out = db.read(statements.main, statements.count).await?;
    let single = matches!(plan.media, crate::plan::Media::Single { .. });
    if plan.media == crate::plan::Media::Csv {
        let header: Vec<String> =
            plan.columns.iter().filter(|c| c.is_output()).map(|c| c.key.clone()).collect();
        return crate::response::finish(plan, out.rows, out.total, profile, || {
            Ok(crate::backend::sqlite::sql::csv_from_json(&out.body, &header))
        });
    }
    crate::response::finish(plan, out.rows, out.total, profile, || {
        if single {
            if out.rows != 1 {
                return Err(crate::response::singular(out.rows));
            }
            // The array's one element: `[` + object + `]`.
            return Ok(out.body.as_bytes()[1..out.body.len() - 1].to_vec());
        }
        Ok(out.body.into_bytes())
    })
}

/// Conditional GET: 304 without a body when the client's copy is current (RFC 9110 §13.1.2).
fn not_modified(request: &http::HeaderMap, response: Response<Body>) -> Response<Body> {
    let (Some(inm), Some(etag)) = (request.get(header::IF_NONE_MATCH), response.headers().get(header::ETAG))
    else {
        return response;
    };
    if let (Ok(inm), Ok(e)) = (inm.to_str(), etag.to_str()) {
        if crate::response::none_match(inm, e) {
            let mut r = plain(StatusCode::NOT_MODIFIED);
            for name in [header::ETAG, header::CACHE_CONTROL] {
                if let Some(v) = response.headers().get(&name) {
                    r.headers_mut().insert(name, v.clone());
                }
            }
            return r;
        }
    }
    response
}

/// A read the response cache may keep: the cache, the request's key, the change position
/// before it was planned, and what it reads.
type Cacheable = (Arc<ResponseCache>, Bytes, u64, crate::cache::Deps);

/// Whether a read missed in the cache may be stored, and with what.
fn cacheable(
    missed: Option<(&Arc<ResponseCache>, Bytes, u64)>,
    route: &str,
    plan: &crate::plan::ReadPlan,
    schema: &crate::schema::SchemaCache,
) -> Option<Cacheable> {
    let (cache, key, start) = missed.filter(|(cache, _, _)| cache.route_enabled(route))?;
    Some((cache.clone(), key, start, crate::cache::plan_deps(plan, schema)?))
}

/// A read's answer with the route's `Cache-Control`, stored in the response cache when it may
/// be, and marked `X-Cache: miss` (stored) or `bypass` (not).
fn remember(
    state: &AppState,
    config: &Config,
    route: &str,
    cacheable: Option<Cacheable>,
    mut r: Response<Body>,
) -> Response<Body> {
    let success = r.status().is_success();
    if let Some(v) = cache_control(config, route).filter(|_| success) {
        r.headers_mut().insert(header::CACHE_CONTROL, v.clone());
    }
    match cacheable {
        Some((cache, key, start, deps)) if success => {
            let body = r.body().clone();
            let bytes = futures_util::FutureExt::now_or_never(http_body_util::BodyExt::collect(body))
                .and_then(Result::ok)
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            // Stored as a hit will be answered, so a hit costs one header map clone.
            let mut headers = r.headers().clone();
            headers.insert(X_CACHE, HeaderValue::from_static("hit"));
            cache.store(key, deps, start, r.status(), headers, bytes);
            r.headers_mut().insert(X_CACHE, HeaderValue::from_static("miss"));
        }
        _ if state.cache.is_some() => {
            r.headers_mut().insert(X_CACHE, HeaderValue::from_static("bypass"));
        }
        _ => {}
    }
    r
}

/// The configured `Cache-Control` of a route (`cache-control`), or of every route (`*`).
fn cache_control<'c>(config: &'c Config, route: &str) -> Option<&'c HeaderValue> {
    let find = |r: &str| config.cache_control.iter().find(|(name, _)| name == r).map(|(_, v)| v);
    find(route).or_else(|| find("*"))
}

/// Ends a write's transaction. With the response cache on, a COMMIT carries the
/// read-your-writes marker, returned: the caller waits for it once the connection is back in
/// the pool, so that every instance has seen the write before the client learns of it.
async fn end_write(
    conn: &mut crate::backend::postgres::PgConn,
    commit: bool,
    cache: Option<&Arc<ResponseCache>>,
    anonymous: bool,
) -> Result<Option<crate::cache::Marker>, Error> {
    let marker = cache.filter(|_| commit).map(|c| c.marker());
    match marker.as_ref().and_then(|m| m.sql()) {
        Some(sql) => conn.commit_after(&sql, anonymous).await?,
        None => conn.finish(commit, anonymous).await?,
    }
    Ok(marker)
}

/// Runs a write from BEGIN to COMMIT or ROLLBACK and builds its response.
async fn write(
    db: Db,
    cache: Option<Arc<ResponseCache>>,
    plan: crate::plan::MutatePlan,
    settings: crate::backend::postgres::SessionSettings,
    anonymous: bool,
    profile: Option<String>,
) -> Result<Response<Body>, Error> {
    let statements = crate::backend::postgres::sql::render_write(&plan);
    let mut slot = db.get_for_write(plan.commits_blind()).await?;
    let conn = &mut slot.conn;
    if !plan.nested.is_empty() {
        let (response, marker) =
            nested_insert(conn, cache.as_ref(), &plan, &settings, anonymous, profile.as_deref()).await?;
        drop(slot);
        if let Some(marker) = marker {
            marker.wait().await;
        }
        return Ok(response);
    }
    if let Some(explain) = &plan.explain {
        // The plan of the write; with ANALYZE it runs, and is always rolled back.
        let stmt = crate::backend::postgres::sql::explain(&statements.main, explain);
        let result = conn.write(&settings, &stmt, true, anonymous).await?;
        conn.finish(false, anonymous).await?;
        return Ok(crate::response::plan(explain, &result.rows));
    }
    if plan.commits_blind() {
        let marker = cache.as_ref().map(|c| c.marker());
        let running = conn
            .write_committed(
                &settings,
                &statements.main,
                statements.returns_rows,
                marker.as_ref().and_then(|m| m.sql()),
                anonymous,
            )
            .await?;
        // The connection serves the next request while this one runs.
        let pipelined = slot.release_connection();
        let result = running.await?;
        drop(pipelined);
        if let Some(marker) = marker {
            marker.wait().await;
        }
        return crate::response::write(&plan, &statements, &result, profile.as_deref());
    }
    let result = conn.write(&settings, &statements.main, statements.returns_rows, anonymous).await?;
    let response = crate::response::write(&plan, &statements, &result, profile.as_deref());
    let marker = end_write(conn, response.is_ok() && !plan.rollback, cache.as_ref(), anonymous).await?;
    drop(slot);
    if let Some(marker) = marker {
        marker.wait().await;
    }
    response
}

/// rowgate's nested insert, in one transaction: each parent object inserted on its own (so its
/// generated key is known), then its children with their foreign key set to it; then the
/// representation read back by primary key, embeds showing the children.
async fn nested_insert(
    conn: &mut crate::backend::postgres::PgConn,
    cache: Option<&Arc<ResponseCache>>,
    plan: &crate::plan::MutatePlan,
    settings: &crate::backend::postgres::SessionSettings,
    anonymous: bool,
    profile: Option<&str>,
) -> Result<(Response<Body>, Option<crate::cache::Marker>), Error> {
    use serde_json::value::RawValue;
    let crate::plan::Mutation::Insert { payload, .. } = &plan.mutation else {
        unreachable!("nested inserts are inserts")
    };
    let objects: Vec<std::collections::HashMap<String, &RawValue>> = serde_json::from_str(&payload.json)
        .map_err(|_| {
            Error::Request(rowgate_request::RequestError::InvalidBody("Empty or invalid json".into()))
        })?;
    let raw_objects: Vec<&RawValue> = serde_json::from_str(&payload.json).map_err(|_| {
        Error::Request(rowgate_request::RequestError::InvalidBody("Empty or invalid json".into()))
    })?;
    // Returned per parent: the primary key, then every column a child links to.
    let mut returned: Vec<String> = plan.relation.primary_key.clone();
    for n in &plan.nested {
        for (_, _, parent_col) in &n.link {
            if !returned.contains(parent_col) {
                returned.push(parent_col.clone());
            }
        }
    }
    conn.begin(settings, anonymous).await?;
    let mut keys = Vec::with_capacity(objects.len());
    for (object, raw) in objects.iter().zip(&raw_objects) {
        let rows = conn
            .run(&crate::backend::postgres::sql::insert_parent(plan, raw.get(), &returned), anonymous)
            .await?;
        let values: Vec<String> = match rows.first() {
            Some(row) => {
                (0..returned.len()).map(|i| row.get::<_, Option<String>>(i).unwrap_or_default()).collect()
            }
            None => continue,
        };
        for n in &plan.nested {
            let Some(children) = object.get(&n.key).filter(|c| c.get().trim_start().starts_with('[')) else {
                continue;
            };
            let link: Vec<String> = n
                .link
                .iter()
                .map(|(_, _, p)| values[returned.iter().position(|r| r == p).unwrap_or(0)].clone())
                .collect();
            conn.run(&crate::backend::postgres::sql::insert_children(n, children.get(), &link), anonymous)
                .await?;
        }
        keys.push(values[..plan.relation.primary_key.len()].to_vec());
    }
    let inserted = keys.len() as u64;
    let response = match plan.representation_of(&keys) {
        Some(read) => {
            let statements = crate::backend::postgres::sql::render_read(&read, None);
            let rows = conn.run(&statements.main, anonymous).await?;
            let result = crate::backend::postgres::ReadResult { rows, explain: None };
            crate::response::read(&read, &statements, result, None, profile)
        }
        None => Ok(Response::new(Body::default())),
    };
    let response = response.and_then(|mut r| {
        if plan.max_affected.is_some_and(|m| inserted > m) {
            return Err(Error::max_affected(inserted));
        }
        *r.status_mut() = StatusCode::CREATED;
        let total = if plan.count { inserted.to_string() } else { "*".into() };
        if let Ok(v) = HeaderValue::from_str(&format!("*/{total}")) {
            r.headers_mut().insert(header::CONTENT_RANGE, v);
        }
        if !plan.applied.is_empty() {
            if let Ok(v) = HeaderValue::from_str(&plan.applied.join(", ")) {
                r.headers_mut().insert("preference-applied", v);
            }
        }
        Ok(r)
    });
    let marker = end_write(conn, response.is_ok() && !plan.rollback, cache, anonymous).await?;
    Ok((response?, marker))
}

/// Reads a request body of at most `limit` bytes (413 beyond it).
async fn read_body(incoming: Incoming, limit: usize) -> Result<Bytes, Error> {
    use http_body_util::{BodyExt, LengthLimitError, Limited};
    match Limited::new(incoming, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => Err(body_too_large(limit)),
        Err(e) => Err(Error::api(code::BODY_UNREADABLE, format!("The request body could not be read: {e}"))),
    }
}

fn body_too_large(limit: usize) -> Error {
    Error::api(
        code::BODY_TOO_LARGE,
        format!("The request body is larger than server-max-body-size ({limit} bytes)"),
    )
}

/// The API key a request carries in one of the `api-key-headers`, if any.
fn api_key<'h>(state: &AppState, headers: &'h http::HeaderMap) -> Option<&'h str> {
    state
        .config
        .api_key_headers
        .iter()
        .find_map(|name| headers.get(name).and_then(|v| v.to_str().ok()))
        .map(str::trim)
        .filter(|k| !k.is_empty())
}

/// Who the request runs as. A bearer token identifies the user and wins; an API key identifies
/// the application: it must be valid whenever it is sent (and present with
/// `api-key-required`), and without a token its role and claims are used. A JWT sent as the
/// API key (Supabase's anon and service keys) is verified as a token.
async fn identify(state: &AppState, headers: &http::HeaderMap) -> Result<crate::auth::Principal, Error> {
    let authorization = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let key_principal = match api_key(state, headers) {
        Some(key) if key.split('.').count() == 3 && !key.starts_with("rg_") => {
            Some(state.auth.authenticate(Some(&format!("Bearer {key}")))?)
        }
        Some(key) => Some(state.keys.verify(key, &state.db).await?.principal),
        None if state.config.api_key_required => return Err(crate::apikey::missing()),
        None => None,
    };
    let has_token = authorization.and_then(crate::auth::bearer_token).is_some_and(|t| !t.is_empty());
    match key_principal {
        Some(p) if !has_token => Ok(p),
        _ => state.auth.authenticate(authorization),
    }
}

/// `GET /rowgate/apikey`: describes the request's API key (401 without one, 403 if invalid).
async fn describe_api_key(state: &AppState, headers: &http::HeaderMap) -> Result<Response<Body>, Error> {
    let key = api_key(state, headers).ok_or_else(crate::apikey::missing)?;
    let k = state.keys.verify(key, &state.db).await?;
    let body = serde_json::json!({
        "name": &*k.name,
        "role": &*k.principal.role,
        "expires_at": k.expires_at.map(crate::response::utc_timestamp),
    });
    let mut r = Response::new(Body::from(body.to_string()));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json; charset=utf-8"));
    Ok(r)
}

/// `/ready`: 200 once the schema cache is loaded and a pooled connection can be had.
async fn ready(state: &AppState) -> Response<Body> {
    let ready = state.schema.load().is_some() && (state.sqlite.is_some() || state.db.get().await.is_ok());
    plain(if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE })
}

/// The admin server's routes (PostgREST's `admin-server-port`): `/live`, `/ready`, `/metrics`.
pub async fn admin(state: &AppState, req: Request<Incoming>) -> Response<Body> {
    match req.uri().path() {
        "/live" => plain(StatusCode::OK),
        "/ready" => ready(state).await,
        "/metrics" => metrics(state),
        _ => plain(StatusCode::NOT_FOUND),
    }
}

/// `GET /rowgate/metrics`: counters in Prometheus text format.
fn metrics(state: &AppState) -> Response<Body> {
    let mut out = String::new();
    out.push_str("# HELP rowgate_cache_enabled Whether the response cache is on.\n# TYPE rowgate_cache_enabled gauge\n");
    out.push_str(&format!("rowgate_cache_enabled {}\n", u8::from(state.cache.is_some())));
    if let Some(cache) = &state.cache {
        cache.render_metrics(&mut out);
    }
    let mut r = Response::new(Body::from(out));
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    r
}

fn plain(status: StatusCode) -> Response<Body> {
    let mut r = Response::new(Body::default());
    *r.status_mut() = status;
    r
}

/// The one place where an [`Error`] becomes an HTTP response.
pub fn error_response(error: &Error) -> Response<Body> {
    let e = error.to_response();
    if e.status.is_server_error() {
        tracing::error!(status = e.status.as_u16(), error = %error, "request failed");
    }
    let mut r = Response::new(Body::from(e.body));
    *r.status_mut() = e.status;
    let headers = r.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json; charset=utf-8"));
    if let Some(secs) = e.retry_after {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    if let Some(v) = e.www_authenticate.and_then(|v| HeaderValue::from_str(&v).ok()) {
        headers.insert(header::WWW_AUTHENTICATE, v);
    }
    r
}
