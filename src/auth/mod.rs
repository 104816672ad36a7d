//! Who the caller is: the `Authorization: Bearer` token → [`Principal`] { role, claims }.
//!
//! As PostgREST does it: no token (or an empty one, or another scheme) means the anonymous
//! role; a token is verified against `jwt-secret`'s keys, its `exp`, `nbf` and `iat` checked
//! with 30 seconds of clock skew and its `aud` against `jwt-aud`; the role comes from
//! `jwt-role-claim-key` (default `.role`), else the anonymous role. Verified tokens are cached
//! (bounded by `jwt-cache-max-entries`), so a signature is checked once per token, and a cached
//! token is still refused once its `exp` has passed.

mod jwks;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{decode, decode_header, Validation};
use serde_json::{Map, Value};

pub use jwks::spawn_refresh as spawn_jwks_refresh;

use crate::config::jwt_secret::{parse as parse_keys, VerificationKey};
use crate::config::{Config, RolePath};
use crate::error::{code, Error};

/// Clock skew allowed on `exp`, `nbf` and `iat`, in seconds (PostgREST's 30 s).
const SKEW: u64 = 30;
/// Tokens longer than this are refused before any parsing.
const MAX_TOKEN_LEN: usize = 16 * 1024;

/// Supabase's service role: its key bypasses row-level security (and SQLite's access rules);
/// the dashboard's administrators run as it.
pub const SERVICE_ROLE: &str = "service_role";

/// The caller as the database sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The role the request runs as.
    pub role: Arc<str>,
    /// `request.jwt.claims`: the token's claims as JSON (for anonymous callers `{"role": ...}`).
    pub claims: Arc<str>,
    /// Whether the role is the anonymous role (a 42501 is then 401, not 403).
    pub anonymous: bool,
}

/// A verified token, cached until its expiry.
#[derive(Clone)]
struct Verified {
    principal: Principal,
    exp: Option<u64>,
}

/// Verifies tokens; built once from the configuration.
pub struct Authenticator {
    keys: Vec<VerificationKey>,
    /// Keys fetched from `jwt-jwks-url`, replaced whole on every refresh.
    remote: arc_swap::ArcSwap<Vec<VerificationKey>>,
    /// Whether `jwt-jwks-url` is set (tokens are then expected even before the first fetch).
    has_remote: bool,
    /// Asks the JWKS task for an early refresh (a token named a `kid` no key has).
    refresh: tokio::sync::Notify,
    audience: Option<String>,
    role_path: RolePath,
    anon_role: Option<Arc<str>>,
    anon: Option<Principal>,
    cache: Option<moka::sync::Cache<Arc<str>, Verified>>,
    /// Look-ups in `cache`, hits, and entries it evicted for room.
    cache_stats: Arc<[AtomicU64; 3]>,
}

impl Authenticator {
    /// Builds the authenticator; the keys were validated when the configuration was loaded.
    pub fn new(config: &Config) -> Authenticator {
        let mut keys = config
            .jwt
            .secret
            .as_deref()
            .map(|s| parse_keys(s, config.jwt.secret_is_base64).unwrap_or_default())
            .unwrap_or_default();
        // The accounts' own signing keys: their tokens are the API's too.
        if config.accounts.enabled {
            keys.extend(config.accounts.signing_keys.iter().filter_map(|k| {
                let text = |name: &str| k.public_jwk.get(name).and_then(|v| v.as_str()).unwrap_or("");
                let key = match k.alg {
                    jsonwebtoken::Algorithm::RS256 => {
                        jsonwebtoken::DecodingKey::from_rsa_components(text("n"), text("e"))
                    }
                    _ => jsonwebtoken::DecodingKey::from_ec_components(text("x"), text("y")),
                }
                .ok()?;
                Some(VerificationKey { kid: Some(k.kid.clone()), key, algorithms: vec![k.alg] })
            }));
        }
        let anon_role: Option<Arc<str>> = config.db.anon_role.as_deref().map(Arc::from);
        let anon = anon_role.as_ref().map(|role| Principal {
            role: role.clone(),
            claims: Value::Object(Map::from_iter([("role".to_owned(), Value::String(role.to_string()))]))
                .to_string()
                .into(),
            anonymous: true,
        });
        let cache_stats: Arc<[AtomicU64; 3]> = Arc::default();
        let evicted = cache_stats.clone();
        let cache = (config.jwt.cache_max_entries > 0).then(|| {
            moka::sync::Cache::builder()
                .max_capacity(config.jwt.cache_max_entries)
                .eviction_listener(move |_, _, cause| {
                    if cause.was_evicted() {
                        evicted[2].fetch_add(1, Ordering::Relaxed);
                    }
                })
                .build()
        });
        Authenticator {
            keys,
            remote: arc_swap::ArcSwap::from_pointee(Vec::new()),
            has_remote: config.jwt.jwks_url.is_some(),
            refresh: tokio::sync::Notify::new(),
            audience: config.jwt.aud.clone(),
            role_path: config.jwt.role_claim_key.clone(),
            anon_role,
            anon,
            cache,
            cache_stats,
        }
    }

    /// PostgREST's JWT cache metrics, in Prometheus text.
    pub fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write;
        let [requests, hits, evictions] = &*self.cache_stats;
        let _ = write!(
            out,
            "# HELP pgrst_jwt_cache_requests_total The total number of JWT cache lookups\n\
             # TYPE pgrst_jwt_cache_requests_total counter\n\
             pgrst_jwt_cache_requests_total {}\n\
             # HELP pgrst_jwt_cache_hits_total The total number of JWT cache hits\n\
             # TYPE pgrst_jwt_cache_hits_total counter\n\
             pgrst_jwt_cache_hits_total {}\n\
             # HELP pgrst_jwt_cache_evictions_total The total number of JWT cache evictions\n\
             # TYPE pgrst_jwt_cache_evictions_total counter\n\
             pgrst_jwt_cache_evictions_total {}\n",
            requests.load(Ordering::Relaxed),
            hits.load(Ordering::Relaxed),
            evictions.load(Ordering::Relaxed)
        );
    }

    /// The principal of a request with this `Authorization` header value (if any).
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<Principal, Error> {
        if authorization.and_then(bearer_token).is_none() {
            // No token: no clock needed (the anonymous path is the hottest).
            return self.anon.clone().ok_or_else(anonymous_disabled);
        }
        self.authenticate_at(authorization, now())
    }

    /// [`Authenticator::authenticate`] at `now` (seconds since the epoch).
    fn authenticate_at(&self, authorization: Option<&str>, now: u64) -> Result<Principal, Error> {
        let Some(token) = authorization.and_then(bearer_token) else {
            return self.anon.clone().ok_or_else(anonymous_disabled);
        };
        if token.is_empty() {
            return Err(Error::Jwt("Empty JWT is sent in Authorization header".into()));
        }
        if self.keys.is_empty() && !self.has_remote {
            return Err(Error::api(code::JWT_SECRET_MISSING, "Server lacks JWT secret"));
        }
        if let Some(cache) = &self.cache {
            self.cache_stats[0].fetch_add(1, Ordering::Relaxed);
            if let Some(v) = cache.get(token) {
                self.cache_stats[1].fetch_add(1, Ordering::Relaxed);
                return match v.exp {
                    Some(exp) if now > exp + SKEW => Err(Error::JwtExpired),
                    _ => Ok(v.principal),
                };
            }
        }
        let verified = self.verify(token, now)?;
        if let Some(cache) = &self.cache {
            cache.insert(Arc::from(token), verified.clone());
        }
        Ok(verified.principal)
    }

    fn verify(&self, token: &str, now: u64) -> Result<Verified, Error> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(Error::Jwt("JWT is too large".into()));
        }
        let parts = token.split('.').count();
        if parts != 3 {
            return Err(Error::Jwt(format!("Expected 3 parts in JWT; got {parts}")));
        }
        let header = decode_header(token).map_err(|e| match unknown_algorithm(token) {
            true => Error::Jwt("Wrong or unsupported encoding algorithm".into()),
            false => refusal(&e),
        })?;
        // An ID token says who a user is to the application it was issued to; whoever holds one
        // is not that user.
        if header.typ.as_deref().is_some_and(|t| t.eq_ignore_ascii_case(ID_TOKEN_TYPE)) {
            return Err(Error::Jwt("An ID token is not an access token".into()));
        }
        let remote = self.remote.load();
        let all = || self.keys.iter().chain(remote.iter());
        if let Some(kid) = &header.kid {
            if self.has_remote && !all().any(|k| k.kid.as_ref() == Some(kid)) {
                // A key we have not seen: the provider may have rotated its keys.
                self.refresh.notify_one();
            }
        }
        let candidates = all()
            .filter(|k| header.kid.is_none() || k.kid.is_none() || k.kid == header.kid)
            .filter(|k| k.algorithms.contains(&header.alg));
        let mut validation = Validation::new(header.alg);
        // Time and audience claims are checked below, the way PostgREST checks them.
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        let mut last = Error::JwtSignature;
        for key in candidates {
            match decode::<Map<String, Value>>(token, &key.key, &validation) {
                Ok(data) => return self.principal(data.claims, now),
                Err(e) => last = refusal(&e),
            }
        }
        Err(last)
    }

    fn principal(&self, claims: Map<String, Value>, now: u64) -> Result<Verified, Error> {
        let time = |name: &str| -> Result<Option<u64>, Error> {
            match claims.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v
                    .as_f64()
                    .map(|n| Some(n.max(0.0) as u64))
                    .ok_or_else(|| Error::JwtClaims(format!("The JWT '{name}' claim must be a number"))),
            }
        };
        let exp = time("exp")?;
        if exp.is_some_and(|exp| now > exp + SKEW) {
            return Err(Error::JwtExpired);
        }
        if time("nbf")?.is_some_and(|nbf| nbf > now + SKEW) {
            return Err(Error::JwtClaims("JWT not yet valid".into()));
        }
        if time("iat")?.is_some_and(|iat| iat > now + SKEW) {
            return Err(Error::JwtClaims("JWT issued at future".into()));
        }
        // The claim's form is checked whatever `jwt-aud` says; its value only against it. An
        // empty list names no audience, as no claim does (PostgREST 13).
        let audiences: Vec<&str> = match claims.get("aud") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => vec![s.as_str()],
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
                items.iter().filter_map(Value::as_str).collect()
            }
            Some(_) => {
                return Err(Error::JwtClaims(
                    "The JWT 'aud' claim must be a string or an array of strings".into(),
                ))
            }
        };
        if let Some(aud) = &self.audience {
            if !audiences.is_empty() && !audiences.contains(&aud.as_str()) {
                return Err(Error::JwtClaims("JWT not in audience".into()));
            }
        }
        let role: Arc<str> = match self.role_path.lookup(&claims) {
            // PostgreSQL takes the role `none` as RESET ROLE: the request would run as the
            // authenticator itself.
            Some(role) if role.eq_ignore_ascii_case("none") => {
                return Err(Error::Jwt(format!("JWT role claim {role:?} is not a role requests may run as")))
            }
            Some(role) => Arc::from(role),
            None => self.anon_role.clone().ok_or_else(anonymous_disabled)?,
        };
        let anonymous = self.anon_role.as_ref() == Some(&role);
        let claims: Arc<str> = Value::Object(claims).to_string().into();
        Ok(Verified { principal: Principal { role, claims, anonymous }, exp })
    }
}

/// 401 PGRST302: no credentials and no `db-anon-role`.
fn anonymous_disabled() -> Error {
    Error::api(code::NO_ANON_ROLE, "Anonymous access is disabled")
}

/// The token of `Bearer <token>`, the scheme case-insensitive; `None` for other schemes.
/// The `typ` of an OpenID Connect ID token (RFC 8725's explicit typing), which rowgate gives the
/// ID tokens it issues and refuses as credentials.
pub const ID_TOKEN_TYPE: &str = "id_token+jwt";

pub fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, rest) = header.trim().split_once(' ').unwrap_or((header.trim(), ""));
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
}

/// Whether the token's header reads but names an algorithm rowgate does not verify (`none`).
fn unknown_algorithm(token: &str) -> bool {
    use base64::Engine;
    let header = token.split('.').next().unwrap_or_default();
    let Ok(bytes) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(header.trim_end_matches('='))
    else {
        return false;
    };
    let alg =
        serde_json::from_slice::<Value>(&bytes).ok().and_then(|h| h.get("alg")?.as_str().map(str::to_owned));
    alg.is_some_and(|a| a.parse::<jsonwebtoken::Algorithm>().is_err())
}

/// A token that does not decode or verify, in PostgREST 13's words.
fn refusal(e: &jsonwebtoken::errors::Error) -> Error {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.kind() {
        K::InvalidSignature | K::InvalidKeyFormat | K::InvalidRsaKey(_) | K::InvalidEcdsaKey => {
            Error::JwtSignature
        }
        K::InvalidAlgorithm | K::InvalidAlgorithmName | K::MissingAlgorithm => {
            Error::Jwt("Wrong or unsupported encoding algorithm".into())
        }
        _ => Error::Jwt("JWT cryptographic operation failed".into()),
    }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests;
