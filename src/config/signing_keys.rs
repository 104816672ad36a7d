//! `accounts-signing-keys`: the asymmetric keys the accounts sign access tokens with — ES256
//! (P-256) or RS256 (RSA) private keys, in PEM (PKCS#8, SEC1 or PKCS#1) or as JWKs (one, an
//! array, or `{"keys": [...]}`: the Supabase CLI's `signing_keys.json`) — the first signing and
//! every one published at `/auth/v1/.well-known/jwks.json` and trusted by the API, so a key can
//! be added, then made the signing one, then dropped, without a token going bad.

use base64::Engine;
use p256::pkcs8::{DecodePrivateKey, EncodePrivateKey};
use rsa::pkcs1::{DecodeRsaPrivateKey, EncodeRsaPrivateKey};
use rsa::traits::PublicKeyParts;
use serde_json::Value;
use sha2::Digest;

/// One signing key: its `kid` (a JWK's own, else the RFC 7638 thumbprint of its public key), its
/// algorithm, the private key as DER (PKCS#8 for ES256, PKCS#1 for RS256), and the public key
/// as a JWK.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningKey {
    pub kid: String,
    pub alg: jsonwebtoken::Algorithm,
    pub der: Vec<u8>,
    pub public_jwk: Value,
}

impl std::fmt::Debug for SigningKey {
    // The private key never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey").field("kid", &self.kid).field("alg", &self.alg).finish_non_exhaustive()
    }
}

/// The keys of `list`: comma-separated PEMs or JWK sets, each inline or `@file`; or one JWK set
/// inline.
pub fn parse(list: &str) -> Result<Vec<SigningKey>, String> {
    let list = list.trim();
    if list.starts_with(['{', '[']) {
        return jwks(list, "the inline keys");
    }
    let mut keys = Vec::new();
    for value in list.split(',').map(str::trim).filter(|k| !k.is_empty()) {
        let text = super::jwt_secret::read_value(value)?;
        let text = text.trim();
        match text.starts_with(['{', '[']) {
            true => keys.extend(jwks(text, shown(value))?),
            false => keys.push(pem(text, shown(value))?),
        }
    }
    Ok(keys)
}

/// The keys of a JWK, an array of them, or a JWK set.
fn jwks(text: &str, shown: &str) -> Result<Vec<SigningKey>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("{shown}: not JSON: {e}"))?;
    let list = match v {
        Value::Array(list) => list,
        Value::Object(ref o) if o.contains_key("keys") => o["keys"].as_array().cloned().unwrap_or_default(),
        one => vec![one],
    };
    list.iter().map(|jwk| private_jwk(jwk, shown)).collect()
}

fn private_jwk(jwk: &Value, shown: &str) -> Result<SigningKey, String> {
    let text = |k: &str| jwk.get(k).and_then(Value::as_str).unwrap_or("");
    let kid = Some(text("kid")).filter(|k| !k.is_empty()).map(str::to_owned);
    match text("kty") {
        "EC" => {
            let secret = p256::SecretKey::from_jwk_str(&jwk.to_string())
                .map_err(|_| format!("{shown}: an EC JWK that is no P-256 private key"))?;
            ec(secret, kid)
        }
        "RSA" => {
            let int = |k: &str| {
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(text(k))
                    .map(|b| rsa::BigUint::from_bytes_be(&b))
                    .map_err(|_| format!("{shown}: an RSA JWK whose {k} is not base64url"))
            };
            let key = rsa::RsaPrivateKey::from_components(
                int("n")?,
                int("e")?,
                int("d")?,
                vec![int("p")?, int("q")?],
            )
            .map_err(|e| format!("{shown}: not an RSA private key: {e}"))?;
            rsa_key(key, kid)
        }
        other => Err(format!("{shown}: a JWK of kty {other:?}: EC (P-256) or RSA private keys only")),
    }
}

fn pem(text: &str, shown: &str) -> Result<SigningKey, String> {
    if let Ok(secret) =
        p256::SecretKey::from_pkcs8_pem(text).or_else(|_| p256::SecretKey::from_sec1_pem(text))
    {
        return ec(secret, None);
    }
    match rsa::RsaPrivateKey::from_pkcs8_pem(text).or_else(|_| rsa::RsaPrivateKey::from_pkcs1_pem(text)) {
        Ok(key) => rsa_key(key, None),
        Err(_) => Err(format!("{shown}: not a P-256 (ES256) or RSA (RS256) private key in PEM")),
    }
}

fn ec(secret: p256::SecretKey, kid: Option<String>) -> Result<SigningKey, String> {
    let public_jwk: Value =
        serde_json::from_str(&secret.public_key().to_jwk().to_string()).map_err(|e| e.to_string())?;
    let text = |k: &str| public_jwk.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    // RFC 7638: the required members, in lexicographic order, without spaces.
    let canonical = format!(
        r#"{{"crv":"{}","kty":"{}","x":"{}","y":"{}"}}"#,
        text("crv"),
        text("kty"),
        text("x"),
        text("y")
    );
    let der = secret.to_pkcs8_der().map_err(|e| e.to_string())?.as_bytes().to_vec();
    Ok(SigningKey {
        kid: kid.unwrap_or_else(|| thumbprint(&canonical)),
        alg: jsonwebtoken::Algorithm::ES256,
        der,
        public_jwk,
    })
}

fn rsa_key(key: rsa::RsaPrivateKey, kid: Option<String>) -> Result<SigningKey, String> {
    if key.size() < 256 {
        return Err("an RSA key of fewer than 2048 bits".into());
    }
    let b64 = |n: &rsa::BigUint| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(n.to_bytes_be());
    let (n, e) = (b64(key.n()), b64(key.e()));
    let canonical = format!(r#"{{"e":"{e}","kty":"RSA","n":"{n}"}}"#);
    let der = key.to_pkcs1_der().map_err(|e| e.to_string())?.as_bytes().to_vec();
    Ok(SigningKey {
        kid: kid.unwrap_or_else(|| thumbprint(&canonical)),
        alg: jsonwebtoken::Algorithm::RS256,
        der,
        public_jwk: serde_json::json!({"kty": "RSA", "n": n, "e": e}),
    })
}

fn thumbprint(canonical: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(canonical.as_bytes()))
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

    #[test]
    fn an_rsa_jwk_set_keeps_its_kid_and_signs_rs256() {
        // A throwaway RSA key, as the Supabase CLI's signing_keys.json holds one.
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/signing_keys.json");
        let keys = parse(&format!("@{file}")).expect("the key set");
        assert_eq!(keys.len(), 1);
        assert_eq!((keys[0].kid.as_str(), keys[0].alg), ("rowgate-test-rsa", jsonwebtoken::Algorithm::RS256));
        assert_eq!(keys[0].public_jwk["kty"], "RSA");
        assert!(keys[0].public_jwk.get("d").is_none(), "only the public part is published");
        let inline = std::fs::read_to_string(file).expect("the file");
        assert_eq!(parse(&inline).expect("inline JSON")[0].kid, "rowgate-test-rsa");
        let e = parse(r#"{"kty": "oct", "k": "c2VjcmV0"}"#).unwrap_err();
        assert!(e.contains("EC (P-256) or RSA private keys only"), "{e}");
    }
}
