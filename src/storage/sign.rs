//! Signed URLs: `POST /object/sign/...` makes them (one, or a batch), `GET /object/sign/...`
//! downloads through one, and the signed-upload pair lets a holder upload without a session.
//! A signed URL with a `transform` is a `/render/image/sign/...` URL whose token carries the
//! transform, so its holder cannot ask for another.

use http::request::Parts;
use http::{HeaderMap, Response, StatusCode};
use hyper::body::Incoming;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::StorageError;
use super::signed::{now, Claims};
use super::store::Who;
use super::transform::{Transform, TransformBody};
use super::{answer, valid_bucket, Storage};
use crate::response::Body;

/// `POST /object/sign/...`'s body.
#[derive(Debug, Deserialize)]
pub struct SignBody {
    #[serde(rename = "expiresIn")]
    expires_in: Option<Value>,
    #[serde(default)]
    paths: Option<Vec<String>>,
    #[serde(default)]
    transform: Option<TransformBody>,
}

/// `expiresIn`: whole seconds, at least 1; a string of digits counts as its number (Supabase's
/// validator coerces it, and storage3 for Python sends one).
fn expires_in(v: Option<&Value>) -> Result<u64, StorageError> {
    let seconds = v.and_then(|v| match v {
        Value::String(s) => s.trim().parse::<u64>().ok(),
        v => v.as_u64(),
    });
    seconds.filter(|n| *n >= 1 && *n < 10_u64.pow(10)).ok_or_else(|| match v {
        None => StorageError::invalid_request("body must have required property 'expiresIn'"),
        Some(_) => StorageError::invalid_parameter("expiresIn"),
    })
}

impl Storage {
    pub(super) async fn sign(
        &self,
        who: Who,
        bucket: &str,
        key: &str,
        body: SignBody,
    ) -> Result<Response<Body>, StorageError> {
        let expires = expires_in(body.expires_in.as_ref())?;
        let transform =
            body.transform.as_ref().map(TransformBody::transform).transpose()?.unwrap_or_default();
        if self.store.object(Some(who), bucket.to_owned(), key.to_owned()).await?.is_none() {
            return Err(StorageError::no_such_key());
        }
        Ok(answer(StatusCode::OK, &json!({ "signedURL": self.signed_url(bucket, key, expires, transform) })))
    }

    /// A signed download URL of `bucket/key` for `expires` seconds, relative to `/storage/v1`;
    /// a render URL when it carries a transform.
    fn signed_url(&self, bucket: &str, key: &str, expires: u64, transform: Transform) -> String {
        let url = format!("{bucket}/{key}");
        let transformations = (!transform.is_empty()).then(|| transform.to_claim());
        let route = if transformations.is_some() { "render/image" } else { "object" };
        let token = self.signer.sign(&Claims {
            url: url.clone(),
            scope: Some("download".into()),
            owner: None,
            upsert: None,
            transformations,
            iat: now(),
            exp: now() + expires,
        });
        format!("/{route}/sign/{url}?token={token}")
    }

    pub(super) async fn sign_many(
        &self,
        who: Who,
        bucket: &str,
        body: SignBody,
    ) -> Result<Response<Body>, StorageError> {
        valid_bucket(bucket)?;
        let expires = expires_in(body.expires_in.as_ref())?;
        let paths = body
            .paths
            .filter(|p| !p.is_empty() && p.len() <= 1000)
            .ok_or_else(|| StorageError::invalid_request("body/paths must have between 1 and 1000 items"))?;
        let visible = self.store.visible(who, bucket.to_owned(), paths.clone()).await?;
        let answers: Vec<Value> = paths
            .iter()
            .map(|p| match visible.contains(p) {
                true => json!({ "error": null, "path": p, "signedURL": self.signed_url(bucket, p, expires, Transform::default()) }),
                false => json!({
                    "error": "Either the object does not exist or you do not have access to it",
                    "path": p,
                    "signedURL": null,
                }),
            })
            .collect();
        Ok(answer(StatusCode::OK, &Value::Array(answers)))
    }

    pub(super) async fn signed_download(
        &self,
        parts: &Parts,
        bucket: &str,
        key: &str,
    ) -> Result<Response<Body>, StorageError> {
        valid_bucket(bucket)?;
        let token = token(parts)?;
        let claims = self.signer.verify(&token, "download", &format!("{bucket}/{key}"))?;
        // A token signed for a rendering (a thumbnail) opens that rendering only, not the
        // original it was made from.
        if claims.transformations.as_deref().is_some_and(|t| !t.is_empty()) {
            return Err(StorageError::invalid_signature("Invalid signature"));
        }
        let object = self.store.object(None, bucket.to_owned(), key.to_owned()).await?;
        let object = object.ok_or_else(StorageError::no_such_key)?;
        self.send(parts, &object, Some(claims.exp)).await
    }

    pub(super) async fn sign_upload(
        &self,
        who: Who,
        headers: &HeaderMap,
        bucket: &str,
        key: &str,
    ) -> Result<Response<Body>, StorageError> {
        self.bucket_settings(bucket).await?;
        let upsert = super::upsert_asked(headers);
        // The upload through the URL writes as the server: whoever signs it must be allowed
        // the write it stands for (an INSERT, and with upsert the UPDATE of what is there).
        self.may_put(&who, bucket, key, upsert).await?;
        let url = format!("{bucket}/{key}");
        let token = self.signer.sign(&Claims {
            url: url.clone(),
            scope: Some("upload".into()),
            owner: who.sub.clone(),
            upsert: Some(upsert),
            transformations: None,
            iat: now(),
            exp: now() + 2 * 3600,
        });
        Ok(answer(
            StatusCode::OK,
            &json!({ "url": format!("/object/upload/sign/{url}?token={token}"), "token": token }),
        ))
    }

    pub(super) async fn signed_upload(
        &self,
        parts: &Parts,
        body: Incoming,
        bucket: &str,
        key: &str,
    ) -> Result<Response<Body>, StorageError> {
        let token = token(parts)?;
        let claims = self.signer.verify(&token, "upload", &format!("{bucket}/{key}"))?;
        let settings = self.bucket_settings(bucket).await?;
        let upload = self.receive(&settings, &parts.headers, body).await?;
        let upsert = claims.upsert.unwrap_or(false);
        match self.store_upload(None, claims.owner, bucket, key, upload, upsert).await {
            Ok(_) => Ok(answer(StatusCode::OK, &json!({ "Key": format!("{bucket}/{key}") }))),
            Err(e) if e.code == "ResourceAlreadyExists" => Err(StorageError::key_exists()),
            Err(e) => Err(e),
        }
    }
}

/// The `token` query parameter.
pub(super) fn token(parts: &Parts) -> Result<String, StorageError> {
    super::query_param(parts, "token")
        .ok_or_else(|| StorageError::invalid_request("querystring must have required property 'token'"))
}
