//! `/render/image/{authenticated,public,sign}/:bucket/*`: an object's image, transformed. Who
//! may read it is decided as for a download (the caller's rights, a public bucket, or a signed
//! URL whose token carries the transform); [`super::image`] does the work.

use http::request::Parts;
use http::{header, HeaderValue, Response};

use super::error::StorageError;
use super::objects::{describe, value, Stamp};
use super::transform::{accepts_webp, Format, Transform};
use super::{bucket_and_key, Caller, Storage};
use crate::response::Body;

impl Storage {
    pub(super) async fn render(
        &self,
        parts: &Parts,
        caller: Caller,
        client: std::net::IpAddr,
        scope: &str,
        rest: &str,
    ) -> Result<Response<Body>, StorageError> {
        let (bucket, key) = bucket_and_key(rest)?;
        let query: Vec<(String, String)> =
            form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes()).into_owned().collect();
        let (object, transform, expires) = match scope {
            "sign" => {
                let token = super::sign::token(parts)?;
                let claims = self.signer.verify(&token, "download", &format!("{bucket}/{key}"))?;
                let object = self.store.object(None, bucket.clone(), key.clone()).await?;
                let transform = Transform::from_claim(claims.transformations.as_deref().unwrap_or(""));
                (object.ok_or_else(StorageError::no_such_key)?, transform, Some(claims.exp))
            }
            "public" | "authenticated" => {
                let transform = Transform::from_query(&query)?;
                (self.readable(caller, scope == "public", &bucket, &key).await?, transform, None)
            }
            _ => return Err(StorageError::no_route(&parts.method, parts.uri.path())),
        };
        let version = object.version.as_deref().ok_or_else(StorageError::bytes_missing)?;
        let accept = parts.headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
        let webp = transform.format == Format::Auto && accepts_webp(accept);
        let rendered = self.renderer.render(&self.files, version, transform, webp, client).await?;
        // Nothing of this request changes the rendering's usual headers: they are made once.
        let usual = expires.is_none()
            && !parts.headers.contains_key(header::IF_NONE_MATCH)
            && !query.iter().any(|(k, _)| k == "download");
        let mut r = Response::new(Body::default());
        match rendered.head.get().filter(|_| usual) {
            Some(head) => *r.headers_mut() = head.clone(),
            None => {
                if transform.format == Format::Auto {
                    r.headers_mut().insert(header::VARY, HeaderValue::from_static("Accept"));
                }
                let header = transform.header();
                if !header.is_empty() {
                    r.headers_mut().insert("x-transformations", value(&header));
                }
                if describe(&mut r, parts, Stamp::of(&object), rendered.mime, &rendered.etag, expires) {
                    return Ok(r);
                }
                r.headers_mut().insert(header::CONTENT_LENGTH, value(&rendered.bytes.len().to_string()));
                if usual {
                    let _ = rendered.head.set(r.headers().clone());
                }
            }
        }
        if parts.method != http::Method::HEAD {
            *r.body_mut() = Body::from(rendered.bytes);
        }
        Ok(r)
    }
}
