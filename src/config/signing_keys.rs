//! `accounts-signing-keys`: the asymmetric keys the accounts sign access tokens with (ES256,
//! P-256 private keys in PEM, PKCS#8 or SEC1), the first signing and every one published at
//! `/auth/v1/.well-known/jwks.json` and trusted by the API — so a key can be added, then made
//! the signing one, then dropped, without a token going bad.

use base64::Engine;
use p256::pkcs8::{DecodePrivateKey, EncodePrivateKey};
use sha2::Digest;

/// One signing key: its `kid` (the RFC 7638 thumbprint of its public key), the private key as
/// PKCS#8 DER, and the public key as a JWK (`kty`, `crv`, `x`, `y`).
#[derive(Clone, PartialEq, Eq)]
pub struct SigningKey {
    pub kid: String,
    pub pkcs8_der: Vec<u8>,
    pub public_jwk: serde_json::Value,
}

impl std::fmt::Debug for SigningKey {
    // The private key never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey").field("kid", &self.kid).finish_non_exhaustive()
    }
}

/// The keys of `list`: comma-separated PEMs, each inline or `@file`.
pub fn parse(list: &str) -> Result<Vec<SigningKey>, String> {
    list.split(',').map(str::trim).filter(|k| !k.is_empty()).map(one).collect()
}

fn one(value: &str) -> Result<SigningKey, String> {
    let pem = super::jwt_secret::read_value(value)?;
    let secret = p256::SecretKey::from_pkcs8_pem(pem.trim())
        .or_else(|_| p256::SecretKey::from_sec1_pem(pem.trim()))
        .map_err(|_| format!("{}: not a P-256 private key in PEM (ES256)", shown(value)))?;
    let jwk = secret.public_key().to_jwk();
    let public_jwk: serde_json::Value = serde_json::from_str(&jwk.to_string()).map_err(|e| e.to_string())?;
    let text = |k: &str| public_jwk.get(k).and_then(|v| v.as_str()).unwrap_or("").to_owned();
    // RFC 7638: the required members, in lexicographic order, without spaces.
    let canonical = format!(
        r#"{{"crv":"{}","kty":"{}","x":"{}","y":"{}"}}"#,
        text("crv"),
        text("kty"),
        text("x"),
        text("y")
    );
    let kid =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(canonical.as_bytes()));
    let pkcs8_der = secret.to_pkcs8_der().map_err(|e| e.to_string())?.as_bytes().to_vec();
    Ok(SigningKey { kid, pkcs8_der, public_jwk })
}

/// How a key is named in an error: its file, never its text.
fn shown(value: &str) -> &str {
    if value.starts_with('@') {
        value
    } else {
        "the inline key"
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn a_p256_key_gives_its_public_jwk_and_thumbprint() {
        // A throwaway key, made for this test (`openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`).
        let pem = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg6CLQlDGDOc1HPVIt\nOouKJs0v3ojbZJT2KXCD2aKQ8dGhRANCAAQvCQDm12u0hQ+yYZlKQcaY2Rx0fcE9\nI3kH8mGdUILPd4qoMU6B3969dku8NwzN5GZxNQTPwcW7PUtbHLvNyKvB\n-----END PRIVATE KEY-----\n";
        let keys = parse(pem).expect("a key");
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].public_jwk["kty"], "EC");
        assert_eq!(keys[0].public_jwk["crv"], "P-256");
        assert_eq!(keys[0].kid.len(), 43);
        assert!(!format!("{:?}", keys[0]).contains("pkcs8"), "the private key stays out of logs");
        assert!(parse("-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----").is_err());
    }
}
