//! `rowgate apikey install|create|list|revoke`: managing the key store with a direct
//! connection (a role that may create the `rowgate` schema, or owns it).

use base64::Engine;
use sha2::{Digest, Sha256};
use tokio_postgres::Client;

use super::INSTALL_SQL;

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

/// A new key: `rg_` and 32 random bytes, base64url. Printed once, never stored.
pub fn generate() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness available: {e}"))?;
    Ok(format!("rg_{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)))
}

/// `30d`, `12h`, `15m`, `90s`, `2w` → seconds.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (n, unit) = text.split_at(split);
    let n: u64 = n.parse().map_err(|_| format!("invalid duration {text:?}: expected e.g. 30d, 12h, 15m"))?;
    let scale = match unit {
        "s" | "" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return Err(format!("invalid duration {text:?}: the unit must be s, m, h, d or w")),
    };
    n.checked_mul(scale).ok_or_else(|| format!("invalid duration {text:?}: too long"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30d"), Ok(2_592_000));
        assert_eq!(parse_duration("12h"), Ok(43_200));
        assert_eq!(parse_duration("90"), Ok(90));
        assert!(parse_duration("3 weeks").is_err());
        assert!(parse_duration("h").is_err());
    }

    #[test]
    fn keys_are_random_and_long() {
        let (a, b) = (generate().unwrap(), generate().unwrap());
        assert_ne!(a, b);
        assert!(a.starts_with("rg_") && a.len() == 46, "{a}");
    }
}
