//! API keys: opaque random keys that map to a role and claims, for services and for the
//! Supabase `apikey` convention.
//!
//! Only a SHA-256 of a key is stored (in `rowgate.api_keys`, created by `rowgate apikey`).
//! Look-ups go through the SECURITY DEFINER function `rowgate.lookup_api_key` and are cached:
//! valid keys until the table changes (every rowgate listens on `rowgate_api_keys`, which a
//! trigger notifies, so a revoke takes effect everywhere at once) or for a minute at most,
//! unknown keys for one second. Concurrent requests with the same uncached key share one
//! look-up, so a flood of bad keys reaches the database at most once per key per second.

pub mod admin;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::auth::Principal;
use crate::backend::postgres::{db_error, Db, RawValue};
use crate::error::{code, Error};

/// The SQL that creates the key store (idempotent).
pub const INSTALL_SQL: &str = include_str!("install.sql");
/// The channel the key store's trigger notifies.
pub const CHANNEL: &str = "rowgate_api_keys";

const LOOKUP: &str =
    "SELECT key_hash, name, role, claims, expires_at, revoked FROM rowgate.lookup_api_key($1::text::bytea)";

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
    pub async fn verify(&self, key: &str, db: &Db) -> Result<ApiKey, Error> {
        let hash: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        let found = match self.cache.get(&hash).await {
            Some(found) => found,
            // A miss: one look-up shared by every concurrent request for the key. Boxed: moka's
            // loader future is ~16 KB, which every request's future carried (and copied at each
            // `.await` above it), API key or not.
            None => Box::pin(self.cache.try_get_with(hash, self.lookup(&hash, db)))
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

    async fn lookup(&self, hash: &[u8; 32], db: &Db) -> Result<Found, Error> {
        let mut conn = db.get().await?;
        let stmt = conn.prepare_cached(LOOKUP).await.map_err(lookup_error)?;
        // bytea in text form: `\x` and hex, so the parameter stays a text-format value.
        let hex = format!("\\x{}", crate::hex(hash));
        let rows = conn.client.query(&stmt, &[&hex]).await.map_err(lookup_error)?;
        let Some(row) = rows.first() else { return Ok(Found::Unknown) };
        let stored: RawValue = row.get(0);
        // The database matched on the hash; compare again without timing differences.
        if !bool::from(stored.0.ct_eq(hash)) {
            return Ok(Found::Unknown);
        }
        if row.get::<_, bool>(5) {
            return Ok(Found::Revoked);
        }
        let role: String = row.get(2);
        let mut claims: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(row.get::<_, &str>(3)).unwrap_or_default();
        claims.insert("role".into(), serde_json::Value::String(role.clone()));
        let anonymous = self.anon_role.as_deref() == Some(role.as_str());
        Ok(Found::Key(ApiKey {
            name: Arc::from(row.get::<_, &str>(1)),
            principal: Principal {
                role: Arc::from(role),
                claims: serde_json::Value::Object(claims).to_string().into(),
                anonymous,
            },
            expires_at: row.get(4),
        }))
    }
}

/// A failed look-up: a missing key store is a configuration problem worth saying plainly.
fn lookup_error(e: tokio_postgres::Error) -> Error {
    if e.as_db_error().is_some_and(|d| {
        d.code().code() == "42P01" || d.code().code() == "3F000" || d.code().code() == "42883"
    }) {
        return Error::api(
            code::API_KEY_STORE_MISSING,
            "The API-key store is not installed: run `rowgate apikey install` (or create a key)",
        );
    }
    db_error(e, false)
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
