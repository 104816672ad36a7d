//! The dashboard's own endpoints under `/_/api/`: `state`, `setup`, `login`, `logout` (before a
//! session), then, with a session and its CSRF token, `tables` (the schema cache's view, and the
//! table editor), `sql` (the console), `rules`, `config` and `backups` (`backups.rs`). Rows, users, files and changes are
//! not here: the page uses the API, `/auth/v1`, `/storage/v1` and `/realtime/v1` themselves.

use std::net::IpAddr;

use http::request::Parts;
use http::{header, Method, Response, StatusCode};
use serde::Deserialize;
use serde_json::json;

use super::store::Admin;
use super::tables::{NewColumn, NewTable};
use super::{invalid, json, now, session, signed_out, AdminSignIn, Dashboard, Setup};
use crate::apikey::admin::KeyCommand;
use crate::error::{code, Error};
use crate::response::{error_response, Body};

/// Answers `endpoint` (the path below `/_/api/`).
pub async fn serve(
    dashboard: &Dashboard,
    parts: &Parts,
    body: &[u8],
    endpoint: &str,
    client: IpAddr,
) -> Response<Body> {
    if let Err(e) = same_origin(&parts.headers) {
        return error_response(&e);
    }
    let secure = parts.headers.get("x-forwarded-proto").is_some_and(|v| v.as_bytes() == b"https");
    let segments: Vec<&str> = endpoint.trim_end_matches('/').split('/').collect();
    let answer = match (&parts.method, segments.as_slice()) {
        (&Method::GET, ["state"]) => state_of(dashboard, &parts.headers).await,
        (&Method::POST, ["setup"]) => setup(dashboard, body, secure).await,
        (&Method::POST, ["login"]) => login(dashboard, body, client, secure).await,
        (&Method::POST, ["logout"]) => logout(dashboard, &parts.headers).await,
        (method, path) => match dashboard.admin(&parts.headers).await {
            None => Err(signed_out()),
            Some(Err(e)) => Err(e),
            Some(Ok(_)) => signed_in(dashboard, method, path, body).await,
        },
    };
    answer.unwrap_or_else(|e| error_response(&e))
}

/// The endpoints for a signed-in administrator.
async fn signed_in(
    dashboard: &Dashboard,
    method: &Method,
    path: &[&str],
    body: &[u8],
) -> Result<Response<Body>, Error> {
    let done = || json(StatusCode::OK, &json!({"ok": true}));
    match (method, path) {
        (&Method::GET, ["tables"]) => Ok(json(StatusCode::OK, &tables(dashboard)?)),
        (&Method::POST, ["tables"]) => {
            dashboard.db.create_table(parsed::<NewTable>(body)?).await?;
            Ok(json(StatusCode::CREATED, &tables(dashboard)?))
        }
        (&Method::DELETE, ["tables", table]) => {
            dashboard.db.drop_table(table.to_string(), None).await.map(|()| done())
        }
        (&Method::POST, ["tables", table, "columns"]) => {
            dashboard.db.add_column(table.to_string(), parsed::<NewColumn>(body)?).await?;
            Ok(json(StatusCode::CREATED, &tables(dashboard)?))
        }
        (&Method::DELETE, ["tables", table, "columns", column]) => {
            dashboard.db.drop_table(table.to_string(), Some(column.to_string())).await.map(|()| done())
        }
        (&Method::POST, ["sql"]) => {
            #[derive(Deserialize)]
            struct Query {
                query: String,
            }
            let query = parsed::<Query>(body)?.query;
            if query.trim().is_empty() {
                return Err(invalid("the query is empty"));
            }
            let result = dashboard.db.console(query).await?;
            Ok(json(StatusCode::OK, &serde_json::to_value(result).unwrap_or_default()))
        }
        (&Method::GET, ["rules"]) => Ok(json(
            StatusCode::OK,
            &serde_json::to_value(dashboard.db.access_rules().await?).unwrap_or_default(),
        )),
        (&Method::PUT, ["rules"]) => {
            #[derive(Deserialize)]
            struct Text {
                text: String,
            }
            dashboard.db.save_rules(parsed::<Text>(body)?.text).await?;
            Ok(json(
                StatusCode::OK,
                &serde_json::to_value(dashboard.db.access_rules().await?).unwrap_or_default(),
            ))
        }
        (&Method::GET, ["config"]) => Ok(json(StatusCode::OK, &effective_config(&dashboard.config))),
        (&Method::GET, ["channels"]) => match &dashboard.channels {
            Some(list) => Ok(json(StatusCode::OK, &json!({"channels": list()}))),
            None => Err(Error::api(code::DASHBOARD_NOT_FOUND, "realtime is off (--realtime-enabled true)")),
        },
        (&Method::GET, ["users", id, "sessions"]) => {
            Ok(json(StatusCode::OK, &json!({"sessions": dashboard.db.user_sessions(id.to_string()).await?})))
        }
        (&Method::DELETE, ["users", id, "sessions"]) => {
            dashboard.db.end_user_sessions(id.to_string()).await.map(|()| done())
        }
        (&Method::GET, ["requests"]) => {
            Ok(json(StatusCode::OK, &json!({"requests": dashboard.recent.look()})))
        }
        (&Method::GET, ["keys"]) => {
            let lines = dashboard.db.api_keys(KeyCommand::List).await?;
            Ok(json(StatusCode::OK, &table_of(&lines)))
        }
        (&Method::POST, ["keys"]) => {
            #[derive(Deserialize)]
            #[serde(deny_unknown_fields)]
            struct NewKey {
                role: String,
                name: String,
                #[serde(default)]
                expires_in_days: Option<u64>,
            }
            let k = parsed::<NewKey>(body)?;
            if k.role.trim().is_empty() || k.name.trim().is_empty() {
                return Err(invalid("a key needs a role and a name"));
            }
            let command = KeyCommand::Create {
                role: k.role,
                name: k.name,
                expires: k.expires_in_days.map(|d| d.saturating_mul(86_400)),
                claims: serde_json::Map::new(),
            };
            let key = dashboard.db.api_keys(command).await?.into_iter().next().unwrap_or_default();
            Ok(json(StatusCode::CREATED, &json!({"key": key})))
        }
        (&Method::DELETE, ["keys", which]) => {
            let revoked = dashboard.db.api_keys(KeyCommand::Revoke { which: which.to_string() }).await?;
            Ok(json(StatusCode::OK, &json!({"revoked": revoked.first().and_then(|n| n.parse::<u64>().ok())})))
        }
        (method, ["backups"]) => super::backups::serve(dashboard, method, None).await,
        (method, ["backups", name]) => super::backups::serve(dashboard, method, Some(name)).await,
        _ => Err(Error::api(code::DASHBOARD_NOT_FOUND, "no such dashboard endpoint")),
    }
}

/// Tab-separated lines with a header line (`rowgate apikey list`'s) as `{columns, rows}`.
fn table_of(lines: &[String]) -> serde_json::Value {
    let mut lines = lines.iter().map(|l| l.split('\t').collect::<Vec<_>>());
    let columns = lines.next().unwrap_or_default();
    json!({"columns": columns, "rows": lines.collect::<Vec<_>>()})
}

/// A request from another site's page is refused whatever it carries: browsers say where a
/// request comes from (`Sec-Fetch-Site`, and `Origin` on writes).
fn same_origin(headers: &http::HeaderMap) -> Result<(), Error> {
    let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if matches!(site, Some("cross-site" | "same-site")) {
        return Err(super::forbidden("the dashboard's API answers its own page only"));
    }
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    match (origin, host) {
        (Some(origin), Some(host)) if origin.split_once("://").map(|(_, h)| h) != Some(host) => {
            Err(super::forbidden("the dashboard's API answers its own page only"))
        }
        _ => Ok(()),
    }
}

fn parsed<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, Error> {
    serde_json::from_slice(body)
        .map_err(|e| invalid(format!("the body is not what this endpoint takes: {e}")))
}

/// What the page needs to know first: whether setup is needed, whether this request's session
/// is signed in (and its CSRF token), and — once signed in — what this server runs.
async fn state_of(dashboard: &Dashboard, headers: &http::HeaderMap) -> Result<Response<Body>, Error> {
    let setup = match dashboard.setup().await {
        Setup::Needed(_) => json!(true),
        Setup::Done => json!(false),
        // Why is the operator's to read (the banner, the log), not a stranger's.
        Setup::Unavailable(why) => {
            tracing::error!(error = %why, "the dashboard's store cannot be read");
            json!({"unavailable": "the dashboard's store cannot be read: see the server's log"})
        }
    };
    let token = session::cookie_token(headers);
    let signed_in = match token {
        Some(token) => {
            dashboard.db.admins().session(session::token_hash(token), now()).await?.map(|s| (s, token))
        }
        None => None,
    };
    let Some((s, token)) = signed_in else {
        return Ok(json(StatusCode::OK, &json!({"setup_needed": setup, "admin": null})));
    };
    let c = &dashboard.config;
    Ok(json(
        StatusCode::OK,
        &json!({
            "setup_needed": setup,
            "admin": {"email": s.email, "expires_at": s.expires_at},
            "csrf": session::csrf_of(token),
            "backend": if c.db.sqlite.is_some() { "sqlite" } else { "postgresql" },
            "schema": c.db.schemas[0],
            // Where the page reaches the API: Supabase's path beside the root, or `api-prefix`.
            "api": if c.api_prefix == "/" { "/rest/v1" } else { c.api_prefix.as_str() },
            "services": {
                "auth": c.accounts.enabled,
                "storage": c.storage.enabled,
                "realtime": c.realtime.enabled,
            },
            "realtime_tables": c.realtime.tables,
        }),
    ))
}

#[derive(Deserialize)]
struct Credentials {
    email: String,
    password: String,
    #[serde(default)]
    token: Option<String>,
}

/// The first administrator, by the setup link's token; signed in at once.
async fn setup(dashboard: &Dashboard, body: &[u8], secure: bool) -> Result<Response<Body>, Error> {
    let c: Credentials = parsed(body)?;
    let token = c.token.as_deref().unwrap_or("");
    if !bool::from(subtle::ConstantTimeEq::ct_eq(token.as_bytes(), dashboard.setup_token.as_bytes())) {
        return Err(super::forbidden("the setup link is not this server's (it changes at every start)"));
    }
    let admin = super::new_admin(&dashboard.hashing, &c.email, &c.password).await?;
    if !dashboard.db.admins().add(admin.clone(), true).await? {
        return Err(Error::api(code::DASHBOARD_CONFLICT, "the dashboard is set up already: sign in"));
    }
    start_session(dashboard, &admin, StatusCode::CREATED, secure).await
}

async fn login(
    dashboard: &Dashboard,
    body: &[u8],
    client: IpAddr,
    secure: bool,
) -> Result<Response<Body>, Error> {
    let c: Credentials = parsed(body)?;
    match dashboard.check_admin(&c.email, &c.password, client).await? {
        AdminSignIn::Admin(admin) => start_session(dashboard, &admin, StatusCode::OK, secure).await,
        AdminSignIn::Wrong => Err(Error::api(code::DASHBOARD_SIGNED_OUT, "wrong e-mail address or password")),
        AdminSignIn::Wait(wait) => Err(Error::api(
            code::RATE_LIMITED,
            format!("too many sign-ins from this address: try again in {wait} s"),
        )),
    }
}

async fn start_session(
    dashboard: &Dashboard,
    admin: &Admin,
    status: StatusCode,
    secure: bool,
) -> Result<Response<Body>, Error> {
    let token = session::new_token();
    let now = now();
    let expires_at = now + session::LIFETIME.as_secs() as i64;
    dashboard
        .db
        .admins()
        .start_session(session::token_hash(&token), admin.id.clone(), now, expires_at)
        .await?;
    let mut r = json(
        status,
        &json!({"email": admin.email, "csrf": session::csrf_of(&token), "expires_at": expires_at}),
    );
    r.headers_mut().insert(header::SET_COOKIE, session::set_cookie(&token, secure));
    Ok(r)
}

/// Ends the request's session (its CSRF token required: no other site can sign one out).
async fn logout(dashboard: &Dashboard, headers: &http::HeaderMap) -> Result<Response<Body>, Error> {
    match session::credential(headers) {
        Some(Ok(token)) => dashboard.db.admins().end_session(session::token_hash(token)).await?,
        Some(Err(())) => return Err(super::forbidden("the request's CSRF token is not its session's")),
        None => {}
    }
    let mut r = json(StatusCode::OK, &json!({"ok": true}));
    r.headers_mut().insert(header::SET_COOKIE, session::clear_cookie());
    Ok(r)
}

/// The exposed schema's tables and views as the schema cache knows them.
fn tables(dashboard: &Dashboard) -> Result<serde_json::Value, Error> {
    let schema = dashboard
        .schema
        .load()
        .ok_or_else(|| Error::api(code::SCHEMA_CACHE_NOT_READY, "the schema cache is not loaded yet"))?;
    let exposed = &dashboard.config.db.schemas[0];
    let mut relations: Vec<_> =
        schema.relations.values().filter(|r| r.name.schema == *exposed && !r.partition).collect();
    relations.sort_by(|a, b| a.name.name.cmp(&b.name.name));
    let list: Vec<serde_json::Value> = relations
        .iter()
        .map(|r| {
            let columns: Vec<serde_json::Value> = r
                .columns
                .iter()
                .map(|c| {
                    json!({
                        "name": c.name, "type": c.type_name, "nullable": c.nullable, "default": c.default,
                        "primary_key": r.primary_key.contains(&c.name),
                    })
                })
                .collect();
            let kind = match r.kind {
                crate::schema::RelationKind::View | crate::schema::RelationKind::MaterializedView => "view",
                _ => "table",
            };
            json!({"name": r.name.name, "kind": kind, "primary_key": r.primary_key, "columns": columns})
        })
        .collect();
    Ok(json!({"schema": exposed, "tables": list}))
}

/// The configuration in force, secrets masked.
fn effective_config(c: &crate::config::Config) -> serde_json::Value {
    let masked = |set: bool| if set { "set (hidden)" } else { "not set" };
    let db_uri = match url::Url::parse(&c.db.uri) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("hidden"));
            u.to_string()
        }
        _ => c.db.uri.clone(),
    };
    json!({
        "db-uri": db_uri,
        "db-schemas": c.db.schemas,
        "db-anon-role": c.db.anon_role,
        "db-rules": c.db.rules_file(),
        "db-pool": c.db.pool,
        "api-prefix": c.api_prefix,
        "jwt-secret": masked(c.jwt.hmac_secret().is_some()),
        "accounts-enabled": c.accounts.enabled,
        "accounts-site-url": c.accounts.mail.site_url,
        "accounts-smtp": c.accounts.mail.smtp.as_ref().map(|s| format!("{}:{}", s.host, s.port)),
        "storage-enabled": c.storage.enabled,
        "storage-dir": c.storage.dir,
        "storage-s3": c.storage.s3.as_ref().map(|s| s.url.clone()),
        "realtime-enabled": c.realtime.enabled,
        "realtime-tables": c.realtime.tables,
        "cache-enabled": c.cache.enabled,
        "server-cors-allowed-origins": c.server.cors_allowed_origins,
        "server-trusted-proxies": c.server.trusted_proxies.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
        "dashboard-allowed-ips": c.dashboard.allowed_ips.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
        "backup-dir": c.backup.dir.as_ref().map(|d| d.display().to_string()),
        "backup-schedule": c.backup.schedule,
        "backup-keep": c.backup.keep,
    })
}
