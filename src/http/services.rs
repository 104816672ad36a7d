//! The services beside the API, each mounted under a prefix of its own — Supabase's Auth at
//! `/auth/v1`, Storage at `/storage/v1`, Realtime at `/realtime/v1` — registered the same way
//! ([`Service`]): the route table finds a request's service by its prefix, every service
//! identifies and admits its callers through `identify`, and each says a refusal in its own
//! API's shape. A new service is one more implementation and one registration in
//! `server::start_state`.

use std::net::IpAddr;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use http::{header, Request, Response, StatusCode};
use hyper::body::Incoming;

use super::{api, identify, plain, AppState};
use crate::error::Error;
use crate::response::{error_response, Body};

/// A service mounted under a path prefix.
pub trait Service: Send + Sync {
    /// Where it is mounted (`/storage/v1`): the paths below it are its own.
    fn prefix(&self) -> &'static str;

    /// Answers `req`, whose path below the prefix is `rest`, from `client`.
    fn serve<'a>(
        &'a self,
        state: &'a AppState,
        req: Request<Incoming>,
        rest: &'a str,
        client: IpAddr,
    ) -> BoxFuture<'a, Response<Body>>;

    /// A refusal before the service is reached (the client's rate limit), as its API says one.
    fn refused(&self, error: &Error) -> Response<Body> {
        error_response(error)
    }

    /// Its metrics, in Prometheus text.
    fn render_metrics(&self, _out: &mut String) {}
}

/// The service a path is below, if any, and the path below its prefix.
pub fn find<'s, 'p>(services: &'s [Box<dyn Service>], path: &'p str) -> Option<(&'s dyn Service, &'p str)> {
    services.iter().find_map(|s| {
        let rest = path.strip_prefix(s.prefix()).filter(|rest| rest.starts_with('/'))?;
        Some((s.as_ref(), rest))
    })
}

/// Supabase Auth's endpoints: the calling application is admitted by its API key; a user's
/// token is checked by the endpoints that take one.
pub struct AuthService(pub Arc<crate::accounts::Accounts>);

impl Service for AuthService {
    fn prefix(&self) -> &'static str {
        "/auth/v1"
    }

    fn serve<'a>(
        &'a self,
        state: &'a AppState,
        req: Request<Incoming>,
        rest: &'a str,
        client: IpAddr,
    ) -> BoxFuture<'a, Response<Body>> {
        Box::pin(async move {
            let (parts, incoming) = req.into_parts();
            // Browsers open these from a mail's link or a provider's redirect, without the
            // application's key (Supabase's gateway lets them through too): each carries its own
            // proof, a code or a signed state.
            let opened_by_browser =
                matches!(rest.trim_end_matches('/'), "/verify" | "/authorize" | "/callback");
            let keyless = opened_by_browser && identify::api_key(state, &parts.headers).is_none();
            // The dashboard's administrator is both the application and the caller.
            let admin = identify::dashboard_admin(state, &parts.headers).await;
            if admin.is_none() && !keyless {
                if let Err(e) = identify::admit_application(state, &parts.headers).await {
                    return self.refused(&e);
                }
            }
            let body = match api::read_body(incoming, 64 * 1024, state.config.server.read_timeout).await {
                Ok(b) => b,
                Err(e) => return error_response(&e),
            };
            let authorization = parts.headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
            let as_caller = |p: crate::auth::Principal| Some(crate::accounts::Caller::of(&p.role, &p.claims));
            let credentials = match (admin, authorization.and_then(crate::auth::bearer_token)) {
                (Some(admin), _) => admin.map(as_caller),
                (None, Some(token)) if !token.is_empty() => {
                    state.auth.authenticate(authorization).map(as_caller)
                }
                _ => Ok(None),
            };
            self.0.handle(&parts, client, body, credentials).await
        })
    }

    fn refused(&self, error: &Error) -> Response<Body> {
        crate::accounts::refused(error)
    }
}

/// Supabase Storage's endpoints, each request run as its caller.
pub struct StorageService(pub Arc<crate::storage::Storage>);

impl Service for StorageService {
    fn prefix(&self) -> &'static str {
        "/storage/v1"
    }

    fn serve<'a>(
        &'a self,
        state: &'a AppState,
        req: Request<Incoming>,
        rest: &'a str,
        client: IpAddr,
    ) -> BoxFuture<'a, Response<Body>> {
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            let caller = identify::storage_caller(state, &parts.headers).await;
            self.0.handle(parts, body, rest, caller, client).await
        })
    }

    fn render_metrics(&self, out: &mut String) {
        self.0.render_metrics(out);
    }
}

/// Supabase Realtime: `/websocket` (the socket runs as its `apikey` query parameter or headers
/// make it) and `/api/broadcast` (as its headers make it).
pub struct RealtimeService(pub Arc<crate::realtime::Realtime>);

impl Service for RealtimeService {
    fn prefix(&self) -> &'static str {
        "/realtime/v1"
    }

    fn serve<'a>(
        &'a self,
        state: &'a AppState,
        req: Request<Incoming>,
        rest: &'a str,
        _client: IpAddr,
    ) -> BoxFuture<'a, Response<Body>> {
        Box::pin(async move {
            let rt = &self.0;
            if rest == "/websocket" && req.method() == http::Method::GET {
                let apikey = crate::realtime::query_value(req.uri().query(), "apikey");
                let csrf = crate::realtime::query_value(req.uri().query(), "rowgate_csrf");
                return match identify::socket_caller(state, req.headers(), apikey.as_deref(), csrf.as_deref())
                    .await
                {
                    Ok(principal) => crate::realtime::upgrade(rt, req, principal),
                    Err(e) => self.refused(&e),
                };
            }
            let Some(topic) = rest.strip_prefix("/api/broadcast") else {
                return plain(StatusCode::NOT_FOUND);
            };
            if req.method() != http::Method::POST {
                return plain(StatusCode::METHOD_NOT_ALLOWED);
            }
            if let Err(e) = identify::admit(state, req.headers()).await {
                return self.refused(&e);
            }
            let content_type =
                req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_owned);
            let query = req.uri().query().map(str::to_owned);
            let limit = state.config.realtime.max_message_size;
            let body = match api::read_body(req.into_body(), limit, state.config.server.read_timeout).await {
                Ok(b) => b,
                Err(e) => return error_response(&e),
            };
            crate::realtime::broadcast_api(rt, topic, query.as_deref(), content_type.as_deref(), body)
        })
    }

    /// Supabase Realtime's body; one beyond a rate limit, the limit's.
    fn refused(&self, error: &Error) -> Response<Body> {
        let mut r = error_response(error);
        if r.status() != StatusCode::TOO_MANY_REQUESTS {
            *r.body_mut() = Body::from(
                serde_json::json!({"message": "Unauthorized", "error": error.to_string()}).to_string(),
            );
        }
        r
    }

    fn render_metrics(&self, out: &mut String) {
        self.0.render_metrics(out);
    }
}

/// The dashboard at `/_/`: its page and its API (its sessions are a credential the other
/// services accept, through `identify`).
pub struct DashboardService(pub Arc<crate::dashboard::Dashboard>);

impl Service for DashboardService {
    fn prefix(&self) -> &'static str {
        crate::dashboard::PREFIX
    }

    fn serve<'a>(
        &'a self,
        state: &'a AppState,
        req: Request<Incoming>,
        rest: &'a str,
        client: IpAddr,
    ) -> BoxFuture<'a, Response<Body>> {
        Box::pin(async move {
            let (parts, incoming) = req.into_parts();
            let writes = matches!(parts.method, http::Method::POST | http::Method::PUT | http::Method::PATCH);
            let body = match writes && self.0.allows(client) {
                true => match api::read_body(
                    incoming,
                    crate::dashboard::MAX_BODY,
                    state.config.server.read_timeout,
                )
                .await
                {
                    Ok(b) => b,
                    Err(e) => return error_response(&e),
                },
                false => Default::default(),
            };
            self.0.handle(&parts, body, rest, client).await
        })
    }
}

/// Supabase's Edge Functions: a function with `verify_jwt` needs a caller identified by a valid
/// token or API key (Supabase's gateway answers 401 otherwise); the deploy endpoints, the
/// service role.
pub struct FunctionsService(pub Arc<crate::functions::Functions>);

impl Service for FunctionsService {
    fn prefix(&self) -> &'static str {
        "/functions/v1"
    }

    fn serve<'a>(
        &'a self,
        state: &'a AppState,
        req: Request<Incoming>,
        rest: &'a str,
        _client: IpAddr,
    ) -> BoxFuture<'a, Response<Body>> {
        use crate::functions::{answer, deploy, not_found, Route};
        Box::pin(async move {
            let unauthorized = |message: &str| {
                let mut r = Response::new(Body::from(serde_json::json!({ "msg": message }).to_string()));
                *r.status_mut() = StatusCode::UNAUTHORIZED;
                r.headers_mut()
                    .insert(header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
                r
            };
            match self.0.route(rest) {
                Route::Unknown => not_found(),
                Route::Admin => match identify::admit(state, req.headers()).await {
                    Ok(p) if &*p.role == crate::auth::SERVICE_ROLE => {
                        let (parts, body) = req.into_parts();
                        deploy::handle(&self.0, &parts.method, rest, body).await
                    }
                    Ok(_) => answer(
                        StatusCode::FORBIDDEN,
                        "FORBIDDEN",
                        "Deploying functions needs the service role",
                    ),
                    Err(_) => unauthorized("Invalid JWT"),
                },
                Route::Function { name, verify_jwt } => {
                    if verify_jwt {
                        let headers = req.headers();
                        let presented = headers.contains_key(header::AUTHORIZATION)
                            || identify::api_key(state, headers).is_some()
                            || identify::dashboard_admin(state, headers).await.is_some();
                        if !presented {
                            return unauthorized("Error: Missing authorization header");
                        }
                        if identify::admit(state, headers).await.is_err() {
                            return unauthorized("Invalid JWT");
                        }
                    }
                    // The function sees the path below /functions/v1, as Supabase's gateway passes it.
                    let (mut parts, body) = req.into_parts();
                    let target = match parts.uri.query() {
                        Some(q) => format!("{rest}?{q}"),
                        None => rest.to_owned(),
                    };
                    let Ok(uri) = target.parse() else { return not_found() };
                    parts.uri = uri;
                    parts.headers.remove(header::CONNECTION);
                    parts.headers.remove("keep-alive");
                    self.0
                        .invoke(&name, Request::from_parts(parts, body), state.config.server.max_body_size)
                        .await
                }
            }
        })
    }

    fn render_metrics(&self, out: &mut String) {
        crate::functions::metrics::render(out);
    }
}

/// PocketBase's API at `/api/`: its SDK sends a token without `Bearer`, and a token that does
/// not verify leaves the caller a guest, as PocketBase does.
pub struct PocketBaseService(pub Arc<crate::pocketbase::PocketBase>);

impl Service for PocketBaseService {
    fn prefix(&self) -> &'static str {
        "/api"
    }

    fn serve<'a>(
        &'a self,
        state: &'a AppState,
        req: Request<Incoming>,
        rest: &'a str,
        client: IpAddr,
    ) -> BoxFuture<'a, Response<Body>> {
        Box::pin(async move {
            let (mut parts, incoming) = req.into_parts();
            let bare = parts
                .headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .filter(|v| !v.is_empty() && crate::auth::bearer_token(v).is_none())
                .and_then(|token| http::HeaderValue::from_str(&format!("Bearer {token}")).ok());
            if let Some(bearer) = bare {
                parts.headers.insert(header::AUTHORIZATION, bearer);
            }
            let principal = match identify::admit(state, &parts.headers).await {
                Ok(p) => p,
                Err(e @ Error::RateLimited { .. }) => return self.refused(&e),
                Err(_) => {
                    parts.headers.remove(header::AUTHORIZATION);
                    match identify::admit(state, &parts.headers).await {
                        Ok(p) => p,
                        Err(e) => return self.refused(&e),
                    }
                }
            };
            let body = match api::read_body(
                incoming,
                state.config.server.max_body_size,
                state.config.server.read_timeout,
            )
            .await
            {
                Ok(b) => b,
                Err(e) => return crate::pocketbase::refused(&e),
            };
            self.0.handle(&parts.method, rest, parts.uri.query(), body, &principal, client).await
        })
    }

    fn refused(&self, error: &Error) -> Response<Body> {
        crate::pocketbase::refused(error)
    }
}
