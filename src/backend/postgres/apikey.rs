//! PostgreSQL's API-key store: `rowgate.api_keys`, read through the SECURITY DEFINER function
//! `rowgate.lookup_api_key` so that no API role needs the table, and managed by `rowgate
//! apikey` on a direct connection (a role that may create the `rowgate` schema, or owns it).
//! A trigger announces every change on [`CHANNEL`], which every rowgate listens on.

use sha2::{Digest, Sha256};
use tokio_postgres::Client;

use super::{db_error, Db, RawValue};
use crate::apikey::admin::generate;
use crate::apikey::StoredKey;
use crate::error::Error;

/// The SQL that creates the key store (idempotent).
pub const INSTALL_SQL: &str = include_str!("apikey.sql");
/// The channel the key store's trigger notifies.
pub const CHANNEL: &str = "rowgate_api_keys";

const LOOKUP: &str =
    "SELECT key_hash, name, role, claims, expires_at, revoked FROM rowgate.lookup_api_key($1::text::bytea)";

/// The key whose SHA-256 is `hash`, if any. Without a key store (or one the authenticator may
/// not read) no key exists: the caller gets the same answer as for any unknown key, and the
/// operator a warning.
pub async fn lookup(db: &Db, hash: &[u8; 32]) -> Result<Option<StoredKey>, Error> {
    let mut conn = db.get_as_server().await?;
    // bytea in text form: `\x` and hex, so the parameter stays a text-format value.
    let hex = format!("\\x{}", crate::hex(hash));
    let rows = match conn.query_text(LOOKUP, &[hex]).await {
        Ok(rows) => rows,
        Err(e) if store_unreadable(&e) => {
            static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
            if !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
                tracing::warn!(error = %e, "an API key was presented, but the key store cannot be read: \
                    run `rowgate apikey install` (or create a key), as a role that may grant the authenticator its use");
            }
            return Ok(None);
        }
        Err(e) => return Err(db_error(e, false)),
    };
    let Some(row) = rows.first() else { return Ok(None) };
    let stored: RawValue = row.get(0);
    Ok(Some(StoredKey {
        hash: stored.0.to_vec(),
        name: row.get(1),
        role: row.get(2),
        claims: row.get(3),
        expires_at: row.get(4),
        revoked: row.get(5),
    }))
}

/// Whether a look-up failed because there is no key store (no schema, table or function) or
/// the authenticator may not use it.
fn store_unreadable(e: &tokio_postgres::Error) -> bool {
    e.as_db_error().is_some_and(|d| matches!(d.code().code(), "42P01" | "3F000" | "42883" | "42501"))
}

/// Creates the key store if it is missing (idempotent; concurrent runs wait for each other).
pub async fn install(client: &Client) -> Result<(), String> {
    client
        .batch_execute(&format!("BEGIN; SELECT pg_advisory_xact_lock(7317001); {INSTALL_SQL} COMMIT;"))
        .await
        .map_err(message)
}

/// A driver error as one readable line (the server's message for database errors).
pub fn message(e: tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => e.to_string(),
    }
}

/// Stores a new key for `role` and returns it.
pub async fn create(
    client: &Client,
    role: &str,
    name: &str,
    expires_in: Option<u64>,
    claims: &serde_json::Map<String, serde_json::Value>,
) -> Result<String, String> {
    install(client).await?;
    let exists =
        client.query_opt("SELECT 1 FROM pg_roles WHERE rolname = $1", &[&role]).await.map_err(message)?;
    if exists.is_none() {
        return Err(format!("role {role:?} does not exist"));
    }
    let key = generate()?;
    let hash: Vec<u8> = Sha256::digest(key.as_bytes()).to_vec();
    let claims = serde_json::Value::Object(claims.clone()).to_string();
    let expires = expires_in.map(|s| s as f64);
    client
        .execute(
            "INSERT INTO rowgate.api_keys (name, key_hash, key_prefix, role, claims, expires_at)
             VALUES ($1, $2, $3, $4, $5::text::jsonb, now() + make_interval(secs => $6))",
            &[&name, &hash, &&key[..10], &role, &claims, &expires],
        )
        .await
        .map_err(message)?;
    Ok(key)
}

/// One line per key: id, name, role, prefix, created, expires, state.
pub async fn list(client: &Client) -> Result<Vec<String>, String> {
    install(client).await?;
    let rows = client
        .query(
            "SELECT id, name, role, key_prefix, to_char(created_at, 'YYYY-MM-DD HH24:MI'),
                    coalesce(to_char(expires_at, 'YYYY-MM-DD HH24:MI'), 'never'),
                    CASE WHEN revoked_at IS NOT NULL THEN 'revoked'
                         WHEN expires_at <= now() THEN 'expired' ELSE 'active' END
             FROM rowgate.api_keys ORDER BY id",
            &[],
        )
        .await
        .map_err(message)?;
    let mut lines = vec!["id\tname\trole\tprefix\tcreated\texpires\tstate".to_owned()];
    for r in rows {
        lines.push(format!(
            "{}\t{}\t{}\t{}…\t{}\t{}\t{}",
            r.get::<_, i64>(0),
            r.get::<_, &str>(1),
            r.get::<_, &str>(2),
            r.get::<_, &str>(3),
            r.get::<_, &str>(4),
            r.get::<_, &str>(5),
            r.get::<_, &str>(6)
        ));
    }
    Ok(lines)
}

/// Revokes the keys named by id, by name, or by the key itself; returns how many.
pub async fn revoke(client: &Client, which: &str) -> Result<u64, String> {
    install(client).await?;
    let hash: Vec<u8> = Sha256::digest(which.as_bytes()).to_vec();
    let id: Option<i64> = which.parse().ok();
    client
        .execute(
            "UPDATE rowgate.api_keys SET revoked_at = now()
             WHERE revoked_at IS NULL AND (id = $1 OR name = $2 OR key_hash = $3)",
            &[&id, &which, &hash],
        )
        .await
        .map_err(message)
}
