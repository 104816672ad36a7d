//! `/bucket` routes: list, get, create, update, delete, empty.

use http::request::Parts;
use http::{Response, StatusCode};
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::StorageError;
use super::store::{Bucket, BucketChange, BucketDeleted, BucketQuery, NewBucket, Who};
use super::{answer, message, valid_bucket, Storage};
use crate::response::Body;

/// A bucket's JSON (`type` only in lists, as Supabase's).
fn bucket_json(b: &Bucket, with_type: bool) -> Value {
    let mut v = json!({
        "id": b.id,
        "name": b.name,
        "owner": b.owner.clone().unwrap_or_default(),
        "public": b.public,
        "file_size_limit": b.file_size_limit,
        "allowed_mime_types": b.allowed_mime_types,
        "created_at": b.created_at,
        "updated_at": b.updated_at,
    });
    if with_type {
        v["type"] = json!("STANDARD");
    }
    v
}

/// `POST /bucket`'s body.
#[derive(Debug, Deserialize)]
pub struct CreateBucket {
    id: Option<String>,
    name: Option<String>,
    #[serde(default)]
    public: Option<bool>,
    #[serde(default)]
    file_size_limit: Option<Value>,
    #[serde(default)]
    allowed_mime_types: Option<Vec<String>>,
}

/// `PUT /bucket/:id`'s body: what is there is changed.
#[derive(Debug, Deserialize)]
pub struct UpdateBucket {
    #[serde(default)]
    public: Option<bool>,
    #[serde(default, deserialize_with = "present")]
    file_size_limit: Option<Option<Value>>,
    #[serde(default, deserialize_with = "present")]
    allowed_mime_types: Option<Option<Vec<String>>>,
}

/// A field that is there, even as `null` (`Some(None)`), unlike one that is missing (`None`).
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// A size limit as Supabase takes it: bytes, or `"20MB"`-style text in decimal units.
fn size_limit(v: &Value) -> Result<Option<i64>, StorageError> {
    let bad = || StorageError::invalid_request("Invalid file size format, hint: use 20GB / 20MB / 30KB / 3B");
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => n.as_i64().filter(|n| *n >= 0).map(Some).ok_or_else(bad),
        Value::String(s) => {
            let s = s.trim().to_ascii_lowercase();
            let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
            let (number, unit) = s.split_at(split);
            let number: f64 = number.parse().map_err(|_| bad())?;
            let scale = match unit.trim() {
                "gb" => 1e9,
                "mb" => 1e6,
                "kb" => 1e3,
                "b" => 1.0,
                _ => return Err(bad()),
            };
            Ok(Some((number * scale) as i64))
        }
        _ => Err(bad()),
    }
}

/// Media types as Supabase checks them: `type/subtype` (with an optional charset), or `*`.
fn mime_types(types: Option<Vec<String>>) -> Result<Option<Vec<String>>, StorageError> {
    let Some(types) = types else { return Ok(None) };
    let types: Vec<String> = types.into_iter().filter(|t| !t.is_empty()).collect();
    for t in &types {
        let essence = t.split(';').next().unwrap_or("");
        let part =
            |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || "-+.*".contains(c));
        let ok = t.len() <= 1000
            && (essence == "*" || essence.split_once('/').is_some_and(|(a, b)| part(a) && part(b)));
        if !ok {
            return Err(StorageError::mime_not_allowed(t));
        }
    }
    Ok(Some(types))
}

impl Storage {
    pub(super) async fn list_buckets(&self, parts: &Parts, who: Who) -> Result<Response<Body>, StorageError> {
        let mut query = BucketQuery::default();
        for (k, v) in form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes()) {
            match &*k {
                "search" if !v.is_empty() => query.search = Some(v.into_owned()),
                "sortColumn" => {
                    query.sort_column = Some(match &*v {
                        "id" => "id",
                        "name" => "name",
                        "created_at" => "created_at",
                        "updated_at" => "updated_at",
                        _ => {
                            return Err(StorageError::invalid_request(
                                "querystring/sortColumn must be equal to one of the allowed values",
                            ))
                        }
                    })
                }
                "sortOrder" => query.descending = v.eq_ignore_ascii_case("desc"),
                "limit" => {
                    query.limit = Some(
                        v.parse()
                            .ok()
                            .filter(|n| *n >= 1)
                            .ok_or_else(|| StorageError::invalid_parameter("limit"))?,
                    )
                }
                "offset" => {
                    query.offset = Some(
                        v.parse()
                            .ok()
                            .filter(|n| *n >= 0)
                            .ok_or_else(|| StorageError::invalid_parameter("offset"))?,
                    )
                }
                _ => {}
            }
        }
        let buckets = self.store.list_buckets(who, query).await?;
        Ok(answer(StatusCode::OK, &Value::Array(buckets.iter().map(|b| bucket_json(b, true)).collect())))
    }

    pub(super) async fn get_bucket(&self, who: Who, id: &str) -> Result<Response<Body>, StorageError> {
        let bucket =
            self.store.bucket(Some(who), id.to_owned()).await?.ok_or_else(StorageError::no_such_bucket)?;
        Ok(answer(StatusCode::OK, &bucket_json(&bucket, false)))
    }

    pub(super) async fn create_bucket(
        &self,
        who: Who,
        body: CreateBucket,
    ) -> Result<Response<Body>, StorageError> {
        let name = body
            .name
            .ok_or_else(|| StorageError::invalid_request("body must have required property 'name'"))?;
        valid_bucket(&name)?;
        let id = body.id.unwrap_or_else(|| name.clone());
        valid_bucket(&id)?;
        let file_size_limit = body.file_size_limit.as_ref().map(size_limit).transpose()?.flatten();
        if file_size_limit.is_some_and(|l| l as u64 > self.file_size_limit) {
            return Err(StorageError::too_large());
        }
        let bucket = NewBucket {
            id,
            name: name.clone(),
            public: body.public.unwrap_or(false),
            file_size_limit,
            allowed_mime_types: mime_types(body.allowed_mime_types)?,
        };
        self.store.create_bucket(who, bucket).await?;
        Ok(answer(StatusCode::OK, &json!({ "name": name })))
    }

    pub(super) async fn update_bucket(
        &self,
        who: Who,
        id: &str,
        body: UpdateBucket,
    ) -> Result<Response<Body>, StorageError> {
        let file_size_limit = match body.file_size_limit {
            Some(Some(v)) => Some(size_limit(&v)?),
            Some(None) => Some(None),
            None => None,
        };
        if file_size_limit.flatten().is_some_and(|l| l as u64 > self.file_size_limit) {
            return Err(StorageError::too_large());
        }
        let allowed_mime_types = match body.allowed_mime_types {
            Some(types) => Some(mime_types(types)?),
            None => None,
        };
        if body.public.is_none() && file_size_limit.is_none() && allowed_mime_types.is_none() {
            return Err(StorageError::invalid_request("No content provided"));
        }
        let change = BucketChange { public: body.public, file_size_limit, allowed_mime_types };
        match self.store.update_bucket(who, id.to_owned(), change).await? {
            true => Ok(message("Successfully updated")),
            false => Err(StorageError::no_such_bucket()),
        }
    }

    pub(super) async fn delete_bucket(&self, who: Who, id: &str) -> Result<Response<Body>, StorageError> {
        match self.store.delete_bucket(who, id.to_owned()).await? {
            BucketDeleted::Deleted => Ok(message("Successfully deleted")),
            BucketDeleted::NotFound => Err(StorageError::no_such_bucket()),
            BucketDeleted::NotEmpty => Err(StorageError::bucket_not_empty()),
        }
    }

    /// Deletes what the caller may delete of the bucket's objects, at once (Supabase queues
    /// the deletion and allows it to the service role only; here row-level security decides,
    /// object by object, as for any deletion).
    pub(super) async fn empty_bucket(&self, who: Who, id: &str) -> Result<Response<Body>, StorageError> {
        if self.store.bucket(Some(who.clone()), id.to_owned()).await?.is_none() {
            return Err(StorageError::no_such_bucket());
        }
        let versions = self.store.empty_bucket(who, id.to_owned()).await?;
        self.files.remove(versions).await;
        Ok(message("Successfully emptied"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_limits_read_as_supabase_reads_them() {
        assert_eq!(size_limit(&json!(1000)), Ok(Some(1000)));
        assert_eq!(size_limit(&json!("20mb")), Ok(Some(20_000_000)));
        assert_eq!(size_limit(&json!("1.5KB")), Ok(Some(1500)));
        assert_eq!(size_limit(&json!(null)), Ok(None));
        assert!(size_limit(&json!("20 parsecs")).is_err());
        assert!(size_limit(&json!(-1)).is_err());
    }
}
