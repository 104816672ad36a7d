//! PocketBase's API at `/api/`: a second front door over the same backends as the REST API.
//! A PocketBase request is made into the API's own requests (`records.rs`), planned and run as
//! its caller, so what a caller may see is decided where it is for every door — SQLite's rules,
//! PostgreSQL's row-level security — and the rows come back as PocketBase's records in its
//! JSON. `filter.rs` parses PocketBase's filter language, `compile.rs` resolves it against a
//! collection (`collection.rs`) into the API's filters, `expand.rs` is `expand=`, `fields.rs`
//! `fields=`, `error.rs` PocketBase's error body. `auth.rs` is the `users` auth collection over
//! `/auth/v1`'s accounts, `superusers.rs` `_superusers` over the dashboard's administrators,
//! `realtime.rs` `/api/realtime`'s server-sent events over the realtime engine.
//! `collections.rs` is `/api/collections` (a collection's definition is `definition.rs`, its
//! rules made into each backend's access by `rules.rs`, its values checked by `validate.rs`).

mod auth;
mod collection;
mod collections;
mod compile;
mod definition;
mod error;
mod expand;
mod fields;
pub mod filter;
mod realtime;
mod records;
mod rules;
mod superusers;
mod validate;

use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use serde_json::json;

use crate::accounts::Accounts;
use crate::auth::{Principal, SERVICE_ROLE};
use crate::backend::collections::CollectionsDb;
use crate::backend::Backend;
use crate::config::Config;
use crate::dashboard::Dashboard;
use crate::realtime::Realtime;
use crate::response::Body;
use crate::schema::{SchemaCache, SharedSchema};
use collection::Collection;
use error::{respond, PbError};
use records::Query;

/// PocketBase's API.
pub struct PocketBase {
    backend: Arc<Backend>,
    schema: Arc<SharedSchema>,
    config: Arc<Config>,
    /// The accounts of `/auth/v1`, which the `users` auth collection is.
    accounts: Option<Arc<Accounts>>,
    /// The dashboard, whose administrators are the superusers.
    dashboard: Option<Arc<Dashboard>>,
    /// The realtime engine `/api/realtime`'s streams are served by, when it runs.
    realtime: Option<Arc<Realtime>>,
    /// Those streams.
    clients: Arc<realtime::Clients>,
    /// The collections made through the collections API.
    collections: collections::Collections,
}

/// What one request's handlers share.
pub struct Context<'a> {
    backend: &'a Backend,
    config: &'a Config,
    schema: &'a SchemaCache,
    /// The schema collections are tables of (the first of `db-schemas`).
    exposed: &'a str,
    principal: &'a Principal,
    /// The path below `/api`, for `request.path`.
    path: &'a str,
}

impl Context<'_> {
    /// A superuser: the service role (its key, or the dashboard's administrators).
    fn superuser(&self) -> bool {
        &*self.principal.role == SERVICE_ROLE
    }

    /// The claims of the caller's token, if one signed in.
    fn claims(&self) -> Option<serde_json::Value> {
        claims_of(self.principal)
    }
}

/// The claims of `principal`'s token, if it signed in.
fn claims_of(principal: &Principal) -> Option<serde_json::Value> {
    match principal.anonymous {
        true => None,
        false => serde_json::from_str(&principal.claims).ok(),
    }
}

impl PocketBase {
    /// The API over `backend`.
    pub fn new(
        backend: Arc<Backend>,
        schema: Arc<SharedSchema>,
        config: Arc<Config>,
        accounts: Option<Arc<Accounts>>,
        dashboard: Option<Arc<Dashboard>>,
        realtime: Option<Arc<Realtime>>,
    ) -> Result<PocketBase, String> {
        let collections =
            collections::Collections::new(CollectionsDb::open(backend.clone(), schema.clone(), &config)?);
        Ok(PocketBase {
            backend,
            schema,
            config,
            accounts,
            dashboard,
            realtime,
            clients: Arc::default(),
            collections,
        })
    }

    /// Answers a request for `path` (below `/api`) from `principal` at `client`.
    pub async fn handle(
        &self,
        method: &Method,
        path: &str,
        query: Option<&str>,
        body: Bytes,
        principal: &Principal,
        client: IpAddr,
    ) -> Response<Body> {
        match self.route(method, path, query, &body, principal, client).await {
            Ok(r) => r,
            Err(e) => e.response(),
        }
    }

    async fn route(
        &self,
        method: &Method,
        path: &str,
        query: Option<&str>,
        body: &Bytes,
        principal: &Principal,
        client: IpAddr,
    ) -> Result<Response<Body>, PbError> {
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        if segments == ["health"] && matches!(*method, Method::GET | Method::HEAD) {
            return Ok(respond(
                StatusCode::OK,
                &json!({"message": "API is healthy.", "code": 200, "data": {}}),
            ));
        }
        let exposed = self.config.db.schemas.first().map_or("public", String::as_str);
        if segments == ["realtime"] {
            let Some(rt) = &self.realtime else {
                return Err(PbError::with_status(
                    StatusCode::NOT_FOUND,
                    "Realtime is off: on PostgreSQL, set realtime-enabled.",
                    String::new(),
                ));
            };
            return match *method {
                Method::GET => realtime::connect(rt, &self.clients),
                Method::POST => {
                    realtime::subscribe(rt, &self.clients, &self.schema, exposed, principal, body)
                }
                _ => Err(PbError::no_route()),
            };
        }
        let schema =
            self.schema.load().ok_or_else(|| PbError::bad_request("the schema cache is not loaded"))?;
        let cx = Context {
            backend: &self.backend,
            config: &self.config,
            schema: &schema,
            exposed,
            principal,
            path,
        };
        let query = Query::parse(query);
        match segments.as_slice() {
            ["collections"] | ["collections", _] | ["collections", _, "truncate"] => {
                return collections::route(
                    &cx,
                    &self.collections,
                    &schema,
                    method,
                    &segments[1..],
                    body,
                    &query,
                )
                .await;
            }
            _ => {}
        }
        let ["collections", collection, rest @ ..] = segments.as_slice() else {
            return Err(PbError::no_route());
        };
        let name = percent_encoding::percent_decode_str(collection).decode_utf8_lossy();
        if let Some(dashboard) = self.dashboard.as_deref() {
            if name == superusers::SUPERUSERS || name == superusers::SUPERUSERS_ID {
                return superusers::route(&cx, dashboard, method, rest, body, &query, client).await;
            }
        }
        // The accounts are `users`, unless a table of that name is a collection of its own.
        if let Some(accounts) = self.accounts.as_deref().filter(|_| name == auth::USERS) {
            if schema.relation(exposed, auth::USERS).is_none() {
                return auth::route(&cx, accounts, method, rest, body, &query, client).await;
            }
        }
        let ["records", rest @ ..] = rest else {
            return Err(PbError::no_route());
        };
        let all = self.collections.of(&schema).await?;
        let c = match collections::defined(&all, &name) {
            Some(d) => Collection::find(&schema, exposed, d.name()).map(|c| c.defined_by(d)),
            None => Collection::named(&schema, exposed, &name),
        };
        let c = c.ok_or_else(PbError::no_collection)?;
        // An action whose rule is not set is the superusers' alone, whatever the database allows.
        let action = match (rest, method) {
            ([], &Method::GET) => Some(0),
            ([_], &Method::GET) => Some(1),
            ([], &Method::POST) => Some(2),
            ([_], &Method::PATCH) => Some(3),
            ([_], &Method::DELETE) => Some(4),
            _ => None,
        };
        let unruled = |rules: &[Option<String>; 5]| action.is_some_and(|a| rules[a].is_none());
        if c.rules.as_ref().is_some_and(unruled) && !cx.superuser() {
            return Err(PbError::forbidden("Only superusers can perform this action."));
        }
        match (rest, method) {
            ([], &Method::GET) => records::list(&cx, &c, &query).await,
            ([], &Method::POST) => records::create(&cx, &c, body, &query).await,
            ([id], &Method::GET) => records::view(&cx, &c, &decoded(id), &query).await,
            ([id], &Method::PATCH) => records::update(&cx, &c, &decoded(id), body, &query).await,
            ([id], &Method::DELETE) => records::delete(&cx, &c, &decoded(id)).await,
            _ => Err(PbError::no_route()),
        }
    }
}

/// A request refused before it reached the API (a rate limit, a body too large), in
/// PocketBase's body.
pub fn refused(e: &crate::error::Error) -> Response<Body> {
    let status = e.to_response().status;
    let message = match status {
        StatusCode::TOO_MANY_REQUESTS => "Too Many Requests.",
        StatusCode::PAYLOAD_TOO_LARGE => "Request entity too large.",
        StatusCode::UNAUTHORIZED => error::UNAUTHORIZED,
        StatusCode::FORBIDDEN => "The authorized record is not allowed to perform this action.",
        _ => "Something went wrong while processing your request.",
    };
    let mut r = PbError::with_status(status, message, e.to_string()).response();
    if let Some(seconds) = e.to_response().retry_after {
        if let Ok(v) = http::HeaderValue::from_str(&seconds.to_string()) {
            r.headers_mut().insert(http::header::RETRY_AFTER, v);
        }
    }
    r
}

fn decoded(segment: &str) -> String {
    percent_encoding::percent_decode_str(segment).decode_utf8_lossy().into_owned()
}
