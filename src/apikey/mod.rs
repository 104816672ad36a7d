//! API keys: opaque random keys that map to a role and claims, for services and for the
//! Supabase `apikey` convention.
//!
//! Only a SHA-256 of a key is stored, by the backend (`rowgate apikey` creates them). Look-ups
//! ([`KeyLookup`], implemented by each backend) are cached: valid keys until the backend says
//! the store changed (a revoke takes effect everywhere within a second) or for a minute at
//! most, unknown keys for one second. Concurrent requests with the same uncached key share one
//! look-up, so a flood of bad keys reaches the database at most once per key per second.

pub mod admin;
pub mod jwt;

use futures_util::future::BoxFuture;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::auth::Principal;
use crate::error::{code, Error};

/// A key as its store holds it.
#[derive(Debug, Clone)]
pub struct StoredKey {
    /// The SHA-256 of the key.
    pub hash: Vec<u8>,
    /// The key's name.
    pub name: String,
    /// The role requests with the key run as.
    pub role: String,
    /// Extra claims, a JSON object.
    pub claims: String,
    /// Expiry, seconds since the epoch.
    pub expires_at: Option<f64>,
    /// Whether the key was revoked.
    pub revoked: bool,
}

/// Where keys are looked up by the SHA-256 of the key: the backend's key store.
pub trait KeyLookup: Send + Sync {
    /// The key with this hash, if any.
    fn lookup<'a>(&'a self, hash: &'a [u8; 32]) -> BoxFuture<'a, Result<Option<StoredKey>, Error>>;
}

/// A verified key, as `GET /rowgate/apikey` describes it.
#[derive(Debug, Clone)]
pub struct ApiKey {
    /// The key's name.
    pub name: Arc<str>,
    /// Who requests with this key run as.
    pub principal: Principal,
    /// Expiry, seconds since the epoch.
    pub expires_at: Option<f64>,
}

/// What a look-up found.
#[derive(Debug, Clone)]
enum Found {
    Key(ApiKey),
    Revoked,
    Unknown,
}

/// Verifies API keys with a cache in front of the database.
pub struct KeyStore {
    cache: moka::future::Cache<[u8; 32], Found>,
    anon_role: Option<String>,
}

/// Valid (and revoked) keys are kept for a minute, unknown ones for a second.
struct FoundExpiry;

impl moka::Expiry<[u8; 32], Found> for FoundExpiry {
    fn expire_after_create(&self, _: &[u8; 32], found: &Found, _: std::time::Instant) -> Option<Duration> {
        Some(match found {
            Found::Unknown => Duration::from_secs(1),
            Found::Key(_) | Found::Revoked => Duration::from_secs(60),
        })
    }
}

impl KeyStore {
    /// A store whose caches hold up to `max_entries` keys each (0: no caching).
    pub fn new(max_entries: u64, anon_role: Option<String>) -> KeyStore {
        let cache =
            moka::future::Cache::builder().max_capacity(max_entries).expire_after(FoundExpiry).build();
        KeyStore { cache, anon_role }
    }

    /// Forgets every cached look-up (the key table changed, or its notifications were lost).
    pub fn invalidate(&self) {
        self.cache.invalidate_all();
    }

    /// Verifies `key`: 403 for an unknown, revoked or expired key.
    pub async fn verify(&self, key: &str, store: &dyn KeyLookup) -> Result<ApiKey, Error> {
        let hash: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        let found = match self.cache.get(&hash).await {
            Some(found) => found,
            // A miss: one look-up shared by every concurrent request for the key. Boxed: moka's
            // loader future is ~16 KB, which every request's future carried (and copied at each
            // `.await` above it), API key or not.
            None => Box::pin(self.cache.try_get_with(hash, self.lookup(&hash, store)))
                .await
                .map_err(|e| e.duplicate())?,
        };
        match found {
            Found::Key(k) if k.expires_at.is_some_and(|e| e <= now()) => Err(forbidden("API key expired")),
            Found::Key(k) => Ok(k),
            Found::Revoked => Err(forbidden("API key revoked")),
            Found::Unknown => Err(forbidden("Invalid API key")),
        }
    }

    async fn lookup(&self, hash: &[u8; 32], store: &dyn KeyLookup) -> Result<Found, Error> {
        let Some(stored) = store.lookup(hash).await? else { return Ok(Found::Unknown) };
        // The database matched on the hash; compare again without timing differences.
        if !bool::from(stored.hash.as_slice().ct_eq(hash)) {
            return Ok(Found::Unknown);
        }
        if stored.revoked {
            return Ok(Found::Revoked);
        }
        let mut claims: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&stored.claims).unwrap_or_default();
        claims.insert("role".into(), serde_json::Value::String(stored.role.clone()));
        let anonymous = self.anon_role.as_deref() == Some(stored.role.as_str());
        Ok(Found::Key(ApiKey {
            name: Arc::from(stored.name),
            principal: Principal {
                role: Arc::from(stored.role),
                claims: serde_json::Value::Object(claims).to_string().into(),
                anonymous,
            },
            expires_at: stored.expires_at,
        }))
    }
}

/// 403 for a key that is not (or no longer) valid.
pub fn forbidden(message: &str) -> Error {
    Error::api(code::API_KEY_INVALID, message)
}

/// 401 for a missing key where one is required.
pub fn missing() -> Error {
    Error::api(code::API_KEY_MISSING, "API key required")
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}
