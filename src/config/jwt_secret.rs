//! The keys tokens are verified with, from `jwt-secret`: an HMAC secret (at least 32
//! characters, or base64 with `jwt-secret-is-base64`), a PEM public key (RSA, EC or Ed25519), a
//! JWK, or a JWKS `{"keys": [...]}`; any of them inline or as `@file`.

use base64::Engine;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey};

/// One verification key with the algorithms it may verify and its `kid`, if any.
pub struct VerificationKey {
    /// `kid` from a JWK, matched against the token header's `kid`.
    pub kid: Option<String>,
    /// The key.
    pub key: DecodingKey,
    /// Algorithms this key verifies; a token with another `alg` is refused.
    pub algorithms: Vec<Algorithm>,
}

const HMAC: [Algorithm; 3] = [Algorithm::HS256, Algorithm::HS384, Algorithm::HS512];
const RSA: [Algorithm; 6] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
];

/// Parses `jwt-secret` (already read from its file if it was `@file`).
pub fn parse(secret: &str, is_base64: bool) -> Result<Vec<VerificationKey>, String> {
    let trimmed = secret.trim();
    if trimmed.starts_with('{') {
        if let Ok(set) = serde_json::from_str::<JwkSet>(trimmed) {
            if set.keys.is_empty() {
                return Err("the JWKS has no keys".into());
            }
            return set.keys.iter().map(from_jwk).collect();
        }
        let jwk: Jwk = serde_json::from_str(trimmed).map_err(|e| format!("not a valid JWK or JWKS: {e}"))?;
        return Ok(vec![from_jwk(&jwk)?]);
    }
    if trimmed.starts_with("-----BEGIN") {
        let pem = trimmed.as_bytes();
        let (key, algorithms) = if let Ok(k) = DecodingKey::from_rsa_pem(pem) {
            (k, RSA.to_vec())
        } else if let Ok(k) = DecodingKey::from_ec_pem(pem) {
            (k, vec![Algorithm::ES256, Algorithm::ES384])
        } else if let Ok(k) = DecodingKey::from_ed_pem(pem) {
            (k, vec![Algorithm::EdDSA])
        } else {
            return Err("the PEM is not an RSA, EC or Ed25519 public key".into());
        };
        return Ok(vec![VerificationKey { kid: None, key, algorithms }]);
    }
    let bytes = if is_base64 { decode_base64(trimmed)? } else { secret.as_bytes().to_vec() };
    if bytes.len() < 32 {
        return Err("an HMAC secret must be at least 32 characters long".into());
    }
    Ok(vec![VerificationKey { kid: None, key: DecodingKey::from_secret(&bytes), algorithms: HMAC.to_vec() }])
}

/// The bytes of a base64 HMAC secret, standard or URL-safe (`jwt-secret-is-base64`): one
/// decoding for verifying tokens and for signing the accounts' own.
pub fn decode_base64(secret: &str) -> Result<Vec<u8>, String> {
    let trimmed = secret.trim();
    base64::engine::general_purpose::STANDARD
        .decode(trimmed)
        .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(trimmed))
        .or_else(|_| base64::engine::general_purpose::URL_SAFE.decode(trimmed))
        .map_err(|e| format!("not valid base64: {e}"))
}

fn from_jwk(jwk: &Jwk) -> Result<VerificationKey, String> {
    use jsonwebtoken::jwk::AlgorithmParameters as P;
    let key = DecodingKey::from_jwk(jwk).map_err(|e| format!("unusable JWK: {e}"))?;
    let algorithms = match (&jwk.common.key_algorithm, &jwk.algorithm) {
        (Some(alg), _) => {
            vec![Algorithm::from_str_lossy(&format!("{alg:?}"))].into_iter().flatten().collect()
        }
        (None, P::RSA(_)) => RSA.to_vec(),
        (None, P::EllipticCurve(ec)) => match format!("{:?}", ec.curve).as_str() {
            "P384" => vec![Algorithm::ES384],
            _ => vec![Algorithm::ES256],
        },
        (None, P::OctetKeyPair(_)) => vec![Algorithm::EdDSA],
        (None, P::OctetKey(_)) => HMAC.to_vec(),
    };
    if algorithms.is_empty() {
        return Err("the JWK's alg is not supported".into());
    }
    Ok(VerificationKey { kid: jwk.common.key_id.clone(), key, algorithms })
}

trait FromStrLossy: Sized {
    fn from_str_lossy(s: &str) -> Option<Self>;
}

impl FromStrLossy for Algorithm {
    /// `KeyAlgorithm`'s debug name (`RS256`, `EdDSA`, ...) as an `Algorithm`.
    fn from_str_lossy(s: &str) -> Option<Algorithm> {
        s.parse().ok()
    }
}

/// Reads `@file` values; anything else is the value itself.
pub fn read_value(value: &str) -> Result<String, String> {
    match value.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}")),
        None => Ok(value.to_owned()),
    }
}
