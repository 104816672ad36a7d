//! Signed URLs' tokens, as Supabase Storage makes them: HS256 JWTs signed with `jwt-secret`,
//! `{url: "bucket/key", scope: "download", iat, exp}` for a download (with `transformations`
//! for a transformed image's) and `{owner, url, upsert,
//! scope: "upload", iat, exp}` for an upload.

use jsonwebtoken::{decode, encode, Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use super::error::StorageError;

/// What a signed URL's token says.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Claims {
    /// `bucket/key`.
    pub url: String,
    /// `download` or `upload`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// For an upload: who uploads (its `sub`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// For an upload: whether it may replace an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upsert: Option<bool>,
    /// For a render URL: the transform, as [`super::transform::Transform::to_claim`] writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transformations: Option<String>,
    /// Issued at (seconds).
    pub iat: u64,
    /// Expires at (seconds).
    pub exp: u64,
}

/// Signs and verifies the tokens of signed URLs.
pub struct Signer {
    encoding: EncodingKey,
    decoding: DecodingKey,
}

/// Seconds since 1970.
pub fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Signer {
    /// A signer with the HMAC `secret`.
    pub fn new(secret: &[u8]) -> Signer {
        Signer { encoding: EncodingKey::from_secret(secret), decoding: DecodingKey::from_secret(secret) }
    }

    /// A token for `claims`.
    pub fn sign(&self, claims: &Claims) -> String {
        encode(&Header::new(Algorithm::HS256), claims, &self.encoding).expect("HS256 signing cannot fail")
    }

    /// The claims of a token for `url` in `scope`, or why it is refused (Supabase's messages).
    pub fn verify(&self, token: &str, scope: &str, url: &str) -> Result<Claims, StorageError> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = 0;
        validation.validate_aud = false;
        validation.required_spec_claims = ["exp".to_owned()].into_iter().collect();
        let claims = decode::<Claims>(token, &self.decoding, &validation).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind;
            StorageError::invalid_jwt(match e.kind() {
                ErrorKind::ExpiredSignature => "\"exp\" claim timestamp check failed",
                ErrorKind::InvalidSignature => "signature verification failed",
                _ => "Invalid Compact JWS",
            })
        })?;
        let c = claims.claims;
        let scoped = match c.scope.as_deref() {
            Some(s) => s == scope,
            // Tokens of older servers carry no scope: an upload's has `upsert`.
            None => (scope == "upload") == c.upsert.is_some(),
        };
        if !scoped {
            return Err(StorageError::invalid_signature(format!("Token is not scoped for {scope}")));
        }
        if c.url != url {
            return Err(StorageError::invalid_signature("Invalid signature"));
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_opens_its_object_only_in_its_scope_until_it_expires() {
        let signer = Signer::new(b"a secret of at least thirty-two bytes!!");
        let claims = Claims {
            url: "b/k.txt".into(),
            scope: Some("download".into()),
            owner: None,
            upsert: None,
            transformations: None,
            iat: now(),
            exp: now() + 60,
        };
        let token = signer.sign(&claims);
        assert_eq!(signer.verify(&token, "download", "b/k.txt"), Ok(claims.clone()));
        assert_eq!(
            signer.verify(&token, "download", "b/other.txt").unwrap_err().message,
            "Invalid signature"
        );
        assert_eq!(
            signer.verify(&token, "upload", "b/k.txt").unwrap_err().message,
            "Token is not scoped for upload"
        );
        let old = signer.sign(&Claims { exp: now() - 10, iat: now() - 70, ..claims });
        assert_eq!(
            signer.verify(&old, "download", "b/k.txt").unwrap_err().message,
            "\"exp\" claim timestamp check failed"
        );
        assert_eq!(signer.verify("nonsense", "download", "b/k.txt").unwrap_err().code, "InvalidJWT");
    }
}
