//! What access tokens are signed with: `jwt-secret` (HS256), or the first of
//! `accounts-signing-keys` (ES256 or RS256, its `kid` in the header); and the key set published at
//! `/auth/v1/.well-known/jwks.json` (the public keys of all of them; an HMAC secret is never
//! published), which supabase-js's `getClaims()` verifies tokens with.

use serde::Serialize;

use crate::config::signing_keys::SigningKey;

pub struct Keys {
    header: jsonwebtoken::Header,
    key: jsonwebtoken::EncodingKey,
    /// The JSON of the published key set.
    pub jwks: String,
}

impl Keys {
    pub fn new(secret: &[u8], signing: &[SigningKey]) -> Keys {
        let jwks = serde_json::json!({
            "keys": signing.iter().map(|k| {
                let mut jwk = k.public_jwk.clone();
                if let serde_json::Value::Object(fields) = &mut jwk {
                    fields.insert("kid".into(), k.kid.clone().into());
                    fields.insert("alg".into(), format!("{:?}", k.alg).into());
                    fields.insert("use".into(), "sig".into());
                    fields.insert("key_ops".into(), serde_json::json!(["verify"]));
                }
                jwk
            }).collect::<Vec<_>>(),
        })
        .to_string();
        match signing.first() {
            Some(k) => {
                let mut header = jsonwebtoken::Header::new(k.alg);
                header.kid = Some(k.kid.clone());
                let key = match k.alg {
                    jsonwebtoken::Algorithm::RS256 => jsonwebtoken::EncodingKey::from_rsa_der(&k.der),
                    _ => jsonwebtoken::EncodingKey::from_ec_der(&k.der),
                };
                Keys { header, key, jwks }
            }
            None => Keys {
                header: jsonwebtoken::Header::default(),
                key: jsonwebtoken::EncodingKey::from_secret(secret),
                jwks,
            },
        }
    }

    /// Whether tokens are signed with a key pair (ES256 or RS256), whose public key others can
    /// check them with: an OpenID Connect ID token needs one.
    pub fn asymmetric(&self) -> bool {
        self.header.alg != jsonwebtoken::Algorithm::HS256
    }

    /// The algorithm tokens are signed with (`HS256`, `ES256`, `RS256`).
    pub fn algorithm(&self) -> String {
        format!("{:?}", self.header.alg)
    }

    /// A token of `claims`.
    pub fn sign(&self, claims: &impl Serialize) -> jsonwebtoken::errors::Result<String> {
        jsonwebtoken::encode(&self.header, claims, &self.key)
    }

    /// An OpenID Connect ID token of `claims`, typed as one (`typ: id_token+jwt`, RFC 8725's
    /// explicit typing) so that no verifier of rowgate's takes it for an access token.
    pub fn sign_id_token(&self, claims: &impl Serialize) -> jsonwebtoken::errors::Result<String> {
        let header =
            jsonwebtoken::Header { typ: Some(crate::auth::ID_TOKEN_TYPE.into()), ..self.header.clone() };
        jsonwebtoken::encode(&header, claims, &self.key)
    }
}
