//! The dashboard at `/_/`: a page embedded in the binary (`assets.rs`, built from `dashboard/`)
//! and its API under `/_/api/` (`api.rs`). Administrators are not the application's users: the
//! first is made through a one-time setup link printed at start (or `rowgate admin create`),
//! and each signs in to a session (`session.rs`) whose credential the other services accept as
//! the service role's (`http::identify`; the route table mounts the dashboard as a service):
//! rows, users, files and changes are read and written through the same endpoints and paths as
//! every client's, so the response cache and realtime see the edits.

mod api;
mod assets;
mod backups;
pub mod recent;
pub mod session;
pub mod store;
pub mod tables;

use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};

use crate::accounts::store::unix_now as now;
use crate::accounts::Hashing;
use crate::auth::{Principal, SERVICE_ROLE};
use crate::config::Config;
use crate::error::{code, Error};
use crate::response::Body;
use crate::schema::SharedSchema;
use store::DashboardDatabase;

/// Where the dashboard is.
pub const PREFIX: &str = "/_";

/// The largest body the dashboard's endpoints read (rules files and SQL included).
pub const MAX_BODY: usize = 1024 * 1024;

/// The dashboard's state: its database, the setup link's token, the sign-in limit.
pub struct Dashboard {
    db: Arc<dyn DashboardDatabase>,
    config: Arc<Config>,
    schema: Arc<SharedSchema>,
    hashing: Arc<Hashing>,
    /// The one-time setup link's token, good while there is no administrator (a new one each
    /// start, on each instance).
    setup_token: String,
    logins: session::LoginLimit,
    /// The latest requests, while the Activity page is watched.
    pub recent: recent::RecentRequests,
    /// Realtime's channels, when realtime is on.
    channels: Option<Channels>,
}

/// What lists realtime's channels (`Realtime::channels`).
pub type Channels = Box<dyn Fn() -> serde_json::Value + Send + Sync>;

/// Whether the first administrator is still to be made.
pub enum Setup {
    /// Not yet: the link that makes them.
    Needed(String),
    /// There is one.
    Done,
    /// The store cannot be read (on PostgreSQL, not installed): why.
    Unavailable(String),
}

impl Dashboard {
    /// The dashboard over `db`, describing the schema cache `schema`.
    pub fn new(db: Arc<dyn DashboardDatabase>, config: Arc<Config>, schema: Arc<SharedSchema>) -> Dashboard {
        Dashboard {
            db,
            config,
            schema,
            hashing: Arc::new(Hashing::new()),
            setup_token: session::new_token(),
            logins: session::LoginLimit::default(),
            recent: recent::RecentRequests::default(),
            channels: None,
        }
    }

    /// The dashboard, with realtime's channels to list.
    pub fn with_channels(self, channels: Channels) -> Dashboard {
        Dashboard { channels: Some(channels), ..self }
    }

    /// Answers a request below `/_` (`rest`), its body read, from `client`.
    pub async fn handle(&self, parts: &Parts, body: Bytes, rest: &str, client: IpAddr) -> Response<Body> {
        if !self.allows(client) {
            return crate::response::error_response(&forbidden("this address may not use the dashboard"));
        }
        let mut response = match rest.strip_prefix("/api/") {
            Some(endpoint) => api::serve(self, parts, &body, endpoint, client).await,
            None => assets::serve(rest, &parts.method),
        };
        let h = response.headers_mut();
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
        h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
        response
    }

    /// Whether the setup link is still good, and its path (below the server's base URL).
    pub async fn setup(&self) -> Setup {
        match self.db.admins().count().await {
            Ok(0) => Setup::Needed(format!("{PREFIX}/#/setup/{}", self.setup_token)),
            Ok(_) => Setup::Done,
            Err(e) => Setup::Unavailable(e.to_string()),
        }
    }

    /// The administrator a request's session credential names, as who it runs as on every
    /// service: the service role (which bypasses row-level security and SQLite's rules, as
    /// Supabase's service key does). `None` when the request carries no such credential.
    pub async fn admin(&self, headers: &HeaderMap) -> Option<Result<Principal, Error>> {
        let token = match session::credential(headers)? {
            Ok(token) => token,
            Err(()) => return Some(Err(forbidden("the request's CSRF token is not its session's"))),
        };
        Some(match self.db.admins().session(session::token_hash(token), now()).await {
            Ok(Some(s)) => Ok(Principal {
                role: SERVICE_ROLE.into(),
                claims: serde_json::json!({
                    "role": SERVICE_ROLE,
                    "email": s.email,
                    "rowgate_dashboard": true,
                })
                .to_string()
                .into(),
                anonymous: false,
            }),
            Ok(None) => Err(signed_out()),
            Err(e) => Err(e),
        })
    }

    /// Whether a request from `client` carrying `headers` is refused before anything: a
    /// dashboard session's credential from an address `dashboard-allowed-ips` leaves out (the
    /// credential is the service role's on every service, not only below `/_`).
    pub fn refuses(&self, client: IpAddr, headers: &HeaderMap) -> Option<Error> {
        (!self.allows(client) && session::credential(headers).is_some())
            .then(|| forbidden("this address may not use the dashboard"))
    }

    /// An administrator's address and password checked as the dashboard's sign-in checks them —
    /// counted against the client address's limit, an unknown address costing a whole check —
    /// for the dashboard and for another door (PocketBase's `_superusers`).
    pub async fn check_admin(
        &self,
        email: &str,
        password: &str,
        client: IpAddr,
    ) -> Result<AdminSignIn, Error> {
        if let Err(wait) = self.logins.attempt(client) {
            return Ok(AdminSignIn::Wait(wait));
        }
        let found = self.admin_by_email(email).await?;
        // An unknown address costs a whole check too: timing does not tell who is an administrator.
        let hash = found.as_ref().map_or(crate::accounts::DUMMY_HASH, |a| a.password_hash.as_str());
        let right = self.hashing.verify(password.to_owned(), hash.to_owned()).await.unwrap_or(false);
        Ok(match found {
            Some(admin) if right => {
                self.logins.succeeded(client);
                AdminSignIn::Admin(admin)
            }
            _ => AdminSignIn::Wrong,
        })
    }

    /// The administrator with this address, if there is one.
    pub async fn admin_by_email(&self, email: &str) -> Result<Option<store::Admin>, Error> {
        self.db.admins().by_email(email.trim().to_lowercase()).await
    }

    /// Whether `client` may use the dashboard (`dashboard-allowed-ips`).
    pub fn allows(&self, client: IpAddr) -> bool {
        let allowed = &self.config.dashboard.allowed_ips;
        allowed.is_empty() || allowed.iter().any(|net| net.contains(&client))
    }
}

/// What an administrator's sign-in came to.
pub enum AdminSignIn {
    /// Who signed in.
    Admin(store::Admin),
    /// A wrong address or password.
    Wrong,
    /// The client address is held off for this many seconds.
    Wait(u64),
}

/// An administrator made from an address and a password, both checked, the password hashed.
pub async fn new_admin(hashing: &Arc<Hashing>, email: &str, password: &str) -> Result<store::Admin, Error> {
    let email = email.trim().to_lowercase();
    if email.len() > 255 || !email.contains('@') || email.starts_with('@') || email.ends_with('@') {
        return Err(invalid("an administrator needs an e-mail address"));
    }
    if password.chars().count() < MIN_PASSWORD {
        return Err(invalid(format!("an administrator's password has at least {MIN_PASSWORD} characters")));
    }
    if password.len() > 1024 {
        return Err(invalid("a password has at most 1024 bytes"));
    }
    let hash = hashing.hash(password.to_owned()).await.ok_or_else(|| Error::internal("hashing failed"))?;
    let created = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    Ok(store::Admin { id: crate::uuid_v4(), email, password_hash: hash, created })
}

/// The shortest administrator's password.
pub const MIN_PASSWORD: usize = 10;

fn forbidden(message: &str) -> Error {
    Error::api(code::DASHBOARD_FORBIDDEN, message)
}

fn signed_out() -> Error {
    Error::api(code::DASHBOARD_SIGNED_OUT, "not signed in to the dashboard, or the session expired")
}

fn invalid(message: impl Into<String>) -> Error {
    Error::api(code::DASHBOARD_INVALID, message)
}

/// A JSON answer.
fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let mut r = Response::new(Body::from(value.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json; charset=utf-8"));
    r
}
