//! The JWTs a Supabase client is made with (`rowgate keys`): the anon key (the anonymous
//! role's) and the service_role key, signed with `jwt-secret`, long-lived as Supabase's are.

use crate::config::Config;

/// Ten years, as self-hosted Supabase's keys.
const LIFETIME: u64 = 10 * 365 * 24 * 3600;

/// `ANON_KEY` and `SERVICE_ROLE_KEY`, issued at `now` (seconds since the epoch).
pub fn client_keys(config: &Config, now: u64) -> Result<[(&'static str, String); 2], String> {
    let secret = config.jwt.hmac_secret().ok_or(
        "the keys are signed with jwt-secret, which must be an HMAC secret (at least 32 characters)",
    )?;
    let key = jsonwebtoken::EncodingKey::from_secret(&secret);
    let sign = |role: &str| {
        let claims = serde_json::json!({"role": role, "iss": "rowgate", "iat": now, "exp": now + LIFETIME});
        jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &key).map_err(|e| e.to_string())
    };
    let anon = config.db.anon_role.as_deref().unwrap_or("anon");
    Ok([("ANON_KEY", sign(anon)?), ("SERVICE_ROLE_KEY", sign("service_role")?)])
}
