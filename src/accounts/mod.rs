//! Built-in user accounts (`accounts-enabled`, SQLite backend so far): sign-up, password login
//! and token refresh at Supabase Auth's (GoTrue's) endpoints, so that supabase-js's `auth`
//! works unchanged; the access tokens are JWTs signed with `jwt-secret`, which rowgate itself
//! then verifies (`role: authenticated`, `sub`: the user's id).
//!
//! - `POST /auth/v1/signup` `{email, password}` → a session;
//! - `POST /auth/v1/token?grant_type=password` `{email, password}` → a session;
//! - `POST /auth/v1/token?grant_type=refresh_token` `{refresh_token}` → a new session (the
//!   refresh token is rotated; presenting a used one again within `accounts-refresh-reuse-interval`
//!   gives the same successor again, as GoTrue's reuse interval; after it, revokes all of the user's);
//! - `GET /auth/v1/user` (bearer) → the user; `POST /auth/v1/logout` (bearer) → 204.
//!
//! Passwords are hashed with Argon2id and never logged or returned. Wrong passwords are limited
//! per client and address, per client and per address (`limits`: 429 until the window passes;
//! the last never stops a client the user has used, so strangers lock out no one but themselves). Errors have GoTrue's
//! shape: `{"code": 400, "error_code": "invalid_credentials", "msg": "..."}`.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use argon2::password_hash::{PasswordHash, SaltString};
use argon2::Argon2;
use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderValue, Method, Response, StatusCode};
use serde::Serialize;
use serde_json::{json, Value};
use sha2::Digest;

use crate::response::Body;

/// Access tokens live this long.
const TOKEN_LIFETIME: Duration = Duration::from_secs(3600);
/// Refresh tokens live this long.
const REFRESH_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);
/// The longest an e-mail address can be (RFC 5321's path limit, less its brackets).
const MAX_EMAIL: usize = 254;
/// GoTrue's default minimum password length.
const MIN_PASSWORD: usize = 6;

mod limits;
pub mod store;

/// What a login for an unknown address is checked against: it costs a full verification too,
/// so timing does not tell who is registered.
const DUMMY_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$9mX1Sx1N2Ly9rXQ4m2Wn3Cj1nDQ7q8l6zvN4KJ0kQk8";

pub use store::{AccountStore, User};

/// The accounts service of a server.
pub struct Accounts {
    store: Arc<dyn AccountStore>,
    /// `accounts-refresh-reuse-interval`.
    reuse_interval: i64,
    /// The HMAC secret (successor refresh tokens are derived with it).
    secret: Vec<u8>,
    key: jsonwebtoken::EncodingKey,
    audience: String,
    /// How many wrong passwords logins may still try.
    limits: limits::LoginLimits,
    /// `accounts-signup-enabled`.
    signups_enabled: bool,
    hashing: Arc<Hashing>,
}

/// How sign-ups are taken: at all (`accounts-signup-enabled`), and how many from one client
/// (`accounts-signup-rate-limit`).
#[derive(Debug, Clone, Copy)]
pub struct Signups {
    /// Whether anyone may sign up.
    pub enabled: bool,
    /// Sign-ups per client, if limited.
    pub rate: Option<crate::config::Rate>,
}

/// Where passwords are checked: blocking threads, one check per core at a time (more only
/// share the cores), each with Argon2's working memory kept from the check before. Allocated
/// afresh, its 19 MiB came from the kernel as new pages every time, faulted in and zeroed:
/// a sixth of a login's CPU.
struct Hashing {
    turns: tokio::sync::Semaphore,
    memories: Mutex<Vec<Vec<argon2::Block>>>,
}

impl Hashing {
    /// Whether `password` is the one `phc` (a PHC string, as stored) was made from; `None` if
    /// the check could not run.
    async fn verify(self: &Arc<Self>, password: String, phc: String) -> Option<bool> {
        self.with_memory(move |memory| verify_password(password.as_bytes(), &phc, memory)).await
    }

    /// The PHC string of a new hash of `password`; `None` if it could not be made.
    async fn hash(self: &Arc<Self>, password: String) -> Option<String> {
        self.with_memory(move |memory| hash_password(password.as_bytes(), memory)).await.flatten()
    }

    /// Runs `f` on a blocking thread when a turn is free, with a kept working memory.
    async fn with_memory<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Vec<argon2::Block>) -> T + Send + 'static,
    ) -> Option<T> {
        let _turn = self.turns.acquire().await.ok()?;
        let hashing = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut memory =
                hashing.memories.lock().unwrap_or_else(|e| e.into_inner()).pop().unwrap_or_default();
            let result = f(&mut memory);
            hashing.memories.lock().unwrap_or_else(|e| e.into_inner()).push(memory);
            result
        })
        .await
        .ok()
    }
}

/// Argon2's own `hash_password` (Argon2id, its default parameters, a random salt), in `memory`.
fn hash_password(password: &[u8], memory: &mut Vec<argon2::Block>) -> Option<String> {
    use argon2::password_hash::{Output, ParamsString};
    let salt = SaltString::generate(&mut argon2::password_hash::rand_core::OsRng);
    let mut salt_bytes = [0u8; argon2::password_hash::Salt::MAX_LENGTH];
    let raw_salt = salt.as_salt().decode_b64(&mut salt_bytes).ok()?;
    let argon = Argon2::default();
    let params = argon.params().clone();
    grow(memory, &params);
    let output = Output::init_with(argon2::Params::DEFAULT_OUTPUT_LEN, |out| {
        argon
            .hash_password_into_with_memory(password, raw_salt, out, &mut memory[..])
            .map_err(|_| argon2::password_hash::Error::Password)
    })
    .ok()?;
    let phc = PasswordHash {
        algorithm: argon2::Algorithm::Argon2id.ident(),
        version: Some(argon2::Version::V0x13.into()),
        params: ParamsString::try_from(&params).ok()?,
        salt: Some(salt.as_salt()),
        hash: Some(output),
    };
    Some(phc.to_string())
}

/// Makes `memory` large enough for a hash with `params`.
fn grow(memory: &mut Vec<argon2::Block>, params: &argon2::Params) {
    if memory.len() < params.block_count() {
        memory.resize(params.block_count(), argon2::Block::default());
    }
}

/// Argon2's own `verify_password`, in `memory` (grown as the hash's parameters need).
fn verify_password(password: &[u8], phc: &str, memory: &mut Vec<argon2::Block>) -> bool {
    let Ok(hash) = PasswordHash::new(phc) else { return false };
    let (Ok(algorithm), Ok(params), Some(expected), Some(salt)) =
        (argon2::Algorithm::try_from(hash.algorithm), argon2::Params::try_from(&hash), hash.hash, hash.salt)
    else {
        return false;
    };
    let version = match hash.version.map(argon2::Version::try_from) {
        None => argon2::Version::default(),
        Some(Ok(v)) => v,
        Some(Err(_)) => return false,
    };
    let mut salt_bytes = [0u8; argon2::password_hash::Salt::MAX_LENGTH];
    let Ok(salt) = salt.decode_b64(&mut salt_bytes) else { return false };
    grow(memory, &params);
    let mut out = vec![0u8; expected.len()];
    Argon2::new(algorithm, version, params)
        .hash_password_into_with_memory(password, salt, &mut out, &mut memory[..])
        .is_ok()
        // Output's comparison takes the same time wherever the bytes differ.
        && argon2::password_hash::Output::new(&out).is_ok_and(|o| o == expected)
}

impl Accounts {
    /// The service on `store`, signing with the HMAC `secret`, letting a refresh token be used
    /// again for `reuse_interval` seconds, taking sign-ups as `signups` says.
    pub fn new(
        store: Arc<dyn AccountStore>,
        secret: &[u8],
        audience: Option<String>,
        reuse_interval: u64,
        signups: Signups,
    ) -> Result<Accounts, String> {
        Ok(Accounts {
            signups_enabled: signups.enabled,
            reuse_interval: reuse_interval as i64,
            store,
            key: jsonwebtoken::EncodingKey::from_secret(secret),
            secret: secret.to_vec(),
            audience: audience.unwrap_or_else(|| "authenticated".into()),
            limits: limits::LoginLimits::new(signups.rate),
            hashing: Arc::new(Hashing {
                turns: tokio::sync::Semaphore::new(
                    std::thread::available_parallelism().map_or(2, |n| n.get()),
                ),
                memories: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Answers a request to `/auth/v1/...` from `client`; `verify` checks a bearer token as the
    /// API does.
    pub async fn handle(
        &self,
        request: &Parts,
        client: IpAddr,
        body: Bytes,
        verify: impl Fn(Option<&str>) -> Option<String>,
    ) -> Response<Body> {
        let (method, path) = (&request.method, request.uri.path());
        let authorization = request.headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        let grant = request
            .uri
            .query()
            .and_then(|q| {
                form_urlencoded::parse(q.as_bytes()).find(|(k, _)| k == "grant_type").map(|(_, v)| v)
            })
            .unwrap_or_default();
        let result = match (method, path, grant.as_ref()) {
            (&Method::POST, "/auth/v1/signup", _) => self.signup(&body, client).await,
            (&Method::POST, "/auth/v1/token", "password") => self.login(&body, client).await,
            (&Method::POST, "/auth/v1/token", "refresh_token") => self.refresh(&body).await,
            (&Method::POST, "/auth/v1/token", _) => {
                Err(fail(StatusCode::BAD_REQUEST, "unsupported_grant_type", "Unsupported grant type"))
            }
            (&Method::GET, "/auth/v1/user", _) => match verify(authorization) {
                Some(id) => self.user(&id).await.map(|u| (StatusCode::OK, Some(to_json(&UserJson::of(&u))))),
                None => Err(fail(
                    StatusCode::UNAUTHORIZED,
                    "no_authorization",
                    "A valid bearer token is required",
                )),
            },
            (&Method::POST, "/auth/v1/logout", _) => match verify(authorization) {
                Some(id) => self.logout(&id).await.map(|()| (StatusCode::NO_CONTENT, None)),
                None => Err(fail(
                    StatusCode::UNAUTHORIZED,
                    "no_authorization",
                    "A valid bearer token is required",
                )),
            },
            _ => Err(fail(StatusCode::NOT_FOUND, "not_found", "Not found")),
        };
        let (status, body) = result.unwrap_or_else(|e| e);
        respond(status, body)
    }

    async fn signup(&self, body: &[u8], client: IpAddr) -> Result<Answer, Answer> {
        if !self.signups_enabled {
            return Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "signup_disabled",
                "Signups not allowed for this instance",
            ));
        }
        let (email, password) = credentials(body)?;
        if !email.contains('@') || email.len() > MAX_EMAIL {
            return Err(fail(
                StatusCode::BAD_REQUEST,
                "validation_failed",
                "Unable to validate email address: invalid format",
            ));
        }
        if password.chars().count() < MIN_PASSWORD {
            return Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "weak_password",
                &format!("Password should be at least {MIN_PASSWORD} characters."),
            ));
        }
        // Counted before the password is hashed: the hashing is what a flood would cost.
        if !self.limits.sign_up(client) {
            return Err(fail(
                StatusCode::TOO_MANY_REQUESTS,
                "over_request_rate_limit",
                "Too many sign-ups from this client: try again later",
            ));
        }
        let hash = self.hashing.hash(password).await.ok_or_else(internal)?;
        let id = crate::uuid_v4();
        let now = unix_now();
        // The account and its first session commit together.
        let created = self.store.create(id, email, hash, now).await.map_err(|_| internal())?;
        let Some((user, refresh)) = created else {
            return Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "user_already_exists",
                "User already registered",
            ));
        };
        self.limits.signed_up(client, &user.email.to_lowercase());
        self.session(&user, refresh, now).map(|s| (StatusCode::OK, Some(s)))
    }

    async fn login(&self, body: &[u8], client: IpAddr) -> Result<Answer, Answer> {
        let (email, password) = credentials(body)?;
        if email.len() > MAX_EMAIL {
            return Err(fail(StatusCode::BAD_REQUEST, "invalid_credentials", "Invalid login credentials"));
        }
        let who = email.to_lowercase();
        // Counted while its password is checked: parallel guesses cannot all pass the limit
        // before their failures are recorded.
        let Some(mut attempt) = self.limits.attempt(client, &who) else {
            return Err(fail(
                StatusCode::TOO_MANY_REQUESTS,
                "over_request_rate_limit",
                "Too many failed logins: try again later",
            ));
        };
        let found = self.store.by_email(email).await.map_err(|_| internal())?;
        let hash = found.as_ref().map_or(DUMMY_HASH, |(_, h)| h.as_str()).to_owned();
        let ok = self.hashing.verify(password, hash).await.unwrap_or(false);
        let Some((user, _)) = found.filter(|_| ok) else {
            attempt.outcome = Some(false);
            return Err(fail(StatusCode::BAD_REQUEST, "invalid_credentials", "Invalid login credentials"));
        };
        attempt.outcome = Some(true);
        drop(attempt);
        let now = unix_now();
        let refresh = self.store.new_session(user.id.clone(), now).await.map_err(|_| internal())?;
        self.session(&user, refresh, now).map(|s| (StatusCode::OK, Some(s)))
    }

    async fn refresh(&self, body: &[u8]) -> Result<Answer, Answer> {
        let token = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v.get("refresh_token").and_then(Value::as_str).map(str::to_owned))
            .ok_or_else(|| fail(StatusCode::BAD_REQUEST, "validation_failed", "refresh_token is required"))?;
        let now = unix_now();
        let successor = self.successor(&token);
        let rotated =
            self.store.rotate(token, successor, now, self.reuse_interval).await.map_err(|_| internal())?;
        let Some((user, refresh)) = rotated else {
            return Err(fail(StatusCode::BAD_REQUEST, "refresh_token_not_found", "Invalid Refresh Token"));
        };
        self.session(&user, refresh, now).map(|s| (StatusCode::OK, Some(s)))
    }

    async fn logout(&self, user_id: &str) -> Result<(), Answer> {
        self.store.logout(user_id.to_owned()).await.map_err(|_| internal())
    }

    async fn user(&self, id: &str) -> Result<User, Answer> {
        self.store
            .user(id.to_owned())
            .await
            .map_err(|_| internal())?
            .ok_or_else(|| fail(StatusCode::NOT_FOUND, "user_not_found", "User not found"))
    }

    /// The refresh token that replaces `token`: the same every time (a keyed hash), so a token
    /// used again within the reuse interval gets the session its first use got, not another
    /// one that would live on beside it.
    fn successor(&self, token: &str) -> String {
        use base64::Engine;
        let mut h = sha2::Sha256::new();
        h.update((self.secret.len() as u64).to_le_bytes());
        h.update(&self.secret);
        h.update(b"rowgate refresh successor");
        h.update(token.as_bytes());
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(h.finalize())
    }

    /// A session: a new access token beside the refresh token just stored.
    fn session(&self, user: &User, refresh: String, now: i64) -> Result<String, Answer> {
        let exp = now + TOKEN_LIFETIME.as_secs() as i64;
        let claims = Claims {
            sub: &user.id,
            aud: &self.audience,
            role: "authenticated",
            email: &user.email,
            email_verified: false,
            iat: now,
            exp,
        };
        let access = jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &self.key)
            .map_err(|_| internal())?;
        Ok(to_json(&Session {
            access_token: &access,
            token_type: "bearer",
            expires_in: TOKEN_LIFETIME.as_secs(),
            expires_at: exp,
            refresh_token: &refresh,
            user: UserJson::of(user),
        }))
    }
}

fn credentials(body: &[u8]) -> Result<(String, String), Answer> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|_| fail(StatusCode::BAD_REQUEST, "bad_json", "Could not parse request body as JSON"))?;
    let field = |name: &str| v.get(name).and_then(Value::as_str).map(str::to_owned);
    match (field("email"), field("password")) {
        (Some(e), Some(p)) if !e.is_empty() => Ok((e.trim().to_owned(), p)),
        _ => Err(fail(
            StatusCode::BAD_REQUEST,
            "validation_failed",
            "An email address and a password are required",
        )),
    }
}

/// An answer's status and JSON body (`None`: no body).
type Answer = (StatusCode, Option<String>);

/// An access token's claims. Typed rather than a `json!` map: a token refresh is a hot path
/// (s004), and building maps showed in its profile.
#[derive(Serialize)]
struct Claims<'a> {
    sub: &'a str,
    aud: &'a str,
    role: &'a str,
    email: &'a str,
    /// OpenID Connect's claim: no address is confirmed yet (there is no confirmation flow), so
    /// `email` says what the user typed, not what it owns.
    email_verified: bool,
    iat: i64,
    exp: i64,
}

/// A session as GoTrue answers it.
#[derive(Serialize)]
struct Session<'a> {
    access_token: &'a str,
    token_type: &'a str,
    expires_in: u64,
    expires_at: i64,
    refresh_token: &'a str,
    user: UserJson<'a>,
}

/// A user as GoTrue shows one.
#[derive(Serialize)]
struct UserJson<'a> {
    id: &'a str,
    aud: &'a str,
    role: &'a str,
    email: &'a str,
    /// When the address was confirmed: never, so far (GoTrue's `null`).
    email_confirmed_at: Option<&'a str>,
    created_at: &'a str,
    updated_at: &'a str,
    app_metadata: AppMetadata,
    user_metadata: Empty,
    identities: [(); 0],
}

/// GoTrue's `app_metadata` of an account made with an email address.
#[derive(Serialize)]
struct AppMetadata {
    provider: &'static str,
    providers: [&'static str; 1],
}

/// `{}`.
#[derive(Serialize)]
struct Empty {}

impl<'a> UserJson<'a> {
    fn of(u: &'a User) -> UserJson<'a> {
        UserJson {
            id: &u.id,
            aud: "authenticated",
            role: "authenticated",
            email: &u.email,
            email_confirmed_at: None,
            created_at: &u.created_at,
            updated_at: &u.created_at,
            app_metadata: AppMetadata { provider: "email", providers: ["email"] },
            user_metadata: Empty {},
            identities: [],
        }
    }
}

/// The JSON text of one of the structs above (plain fields and string keys: cannot fail).
fn to_json(v: &impl Serialize) -> String {
    serde_json::to_string(v).expect("plain structs serialize")
}

/// GoTrue's shape of a request refused before it reaches the accounts: beyond a rate limit
/// (429 `over_request_rate_limit`, with `Retry-After`), or without the API key required (401)
/// or with one that is not valid (403).
pub fn refused(e: &crate::error::Error) -> Response<Body> {
    let parts = e.to_response();
    let error_code = match parts.status.as_u16() {
        429 => "over_request_rate_limit",
        401 => "no_authorization",
        _ => "invalid_credentials",
    };
    let (status, body) = fail(parts.status, error_code, &e.to_string());
    let mut r = respond(status, body);
    if let Some(secs) = parts.retry_after {
        r.headers_mut().insert(header::RETRY_AFTER, secs.into());
    }
    r
}

fn respond(status: StatusCode, body: Option<String>) -> Response<Body> {
    let has_body = body.is_some();
    let mut r = Response::new(body.map_or_else(Body::default, Body::from));
    *r.status_mut() = status;
    if has_body {
        r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    r
}

/// A GoTrue error.
fn fail(status: StatusCode, error_code: &str, msg: &str) -> Answer {
    (status, Some(json!({"code": status.as_u16(), "error_code": error_code, "msg": msg}).to_string()))
}

fn internal() -> Answer {
    fail(StatusCode::INTERNAL_SERVER_ERROR, "unexpected_failure", "Unexpected failure")
}

fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests {
    use argon2::password_hash::PasswordHasher;

    use super::*;

    #[test]
    fn a_password_is_verified_in_memory_kept_from_the_check_before() {
        let salt = SaltString::generate(&mut argon2::password_hash::rand_core::OsRng);
        let phc = Argon2::default().hash_password(b"correct horse", &salt).expect("hash").to_string();
        let mut memory = Vec::new();
        assert!(verify_password(b"correct horse", &phc, &mut memory));
        assert_eq!(memory.len(), argon2::Params::default().block_count());
        assert!(!verify_password(b"correct hors", &phc, &mut memory));
        assert!(verify_password(b"correct horse", &phc, &mut memory), "memory left by a check is reusable");
        assert!(!verify_password(b"correct horse", "not a hash", &mut memory));
    }

    #[test]
    fn a_hash_made_in_kept_memory_is_argon2s_own() {
        use argon2::password_hash::PasswordVerifier;
        let mut memory = Vec::new();
        let phc = hash_password(b"correct horse", &mut memory).expect("hash");
        assert!(phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{phc}");
        let parsed = PasswordHash::new(&phc).expect("a PHC string");
        assert!(Argon2::default().verify_password(b"correct horse", &parsed).is_ok());
        assert!(verify_password(b"correct horse", &phc, &mut memory));
        assert_ne!(phc, hash_password(b"correct horse", &mut memory).expect("hash"), "salted");
    }

    #[test]
    fn the_dummy_hash_costs_a_full_verification() {
        let mut memory = Vec::new();
        assert!(!verify_password(b"anything", DUMMY_HASH, &mut memory));
        // It ran Argon2 with the default parameters, not an early return on a parse error.
        assert_eq!(memory.len(), argon2::Params::default().block_count());
    }
}
