//! Listings: `POST /object/list/:bucket` (the folders and objects directly under a folder,
//! paged by offset) and `POST /object/list-v2/:bucket` (objects under any prefix, flat or folded
//! into folders at `/`, paged by cursor).

use base64::Engine;
use http::{Response, StatusCode};
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::StorageError;
use super::objects::meta;
use super::store::{ListQuery, ObjectRow, PageQuery, Who};
use super::{answer, valid_bucket, Storage};
use crate::response::Body;

/// `POST /object/list/:bucket`'s body.
#[derive(Debug, Deserialize)]
pub struct ListBody {
    prefix: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
    #[serde(default)]
    offset: Option<i64>,
    #[serde(default, rename = "sortBy")]
    sort_by: Option<SortBy>,
    #[serde(default)]
    search: Option<String>,
}

#[derive(Debug, Deserialize)]
struct SortBy {
    column: Option<String>,
    order: Option<String>,
}

impl Storage {
    pub(super) async fn list(
        &self,
        who: Who,
        bucket: &str,
        body: ListBody,
    ) -> Result<Response<Body>, StorageError> {
        valid_bucket(bucket)?;
        let prefix = body
            .prefix
            .ok_or_else(|| StorageError::invalid_request("body must have required property 'prefix'"))?;
        let prefix = match prefix.trim_start_matches('/') {
            "" => String::new(),
            p if p.ends_with('/') => p.to_owned(),
            p => format!("{p}/"),
        };
        let sort = body.sort_by.unwrap_or(SortBy { column: None, order: None });
        let column = match sort.column.as_deref().unwrap_or("name") {
            "updated_at" => "updated_at",
            "created_at" => "created_at",
            "last_accessed_at" => "last_accessed_at",
            _ => "name",
        };
        let query = ListQuery {
            prefix,
            search: body.search.unwrap_or_default(),
            limit: body.limit.unwrap_or(100).clamp(1, 1500),
            offset: body.offset.unwrap_or(0).max(0),
            column,
            descending: sort.order.as_deref().is_some_and(|o| o.eq_ignore_ascii_case("desc")),
        };
        let entries = self.store.list(who, bucket.to_owned(), query).await?;
        let list: Vec<Value> = entries
            .iter()
            .map(|e| match &e.object {
                Some(o) => json!({
                    "name": e.name,
                    "id": o.id,
                    "updated_at": o.updated_at,
                    "created_at": o.created_at,
                    "last_accessed_at": o.last_accessed_at,
                    "metadata": meta(o),
                }),
                None => json!({
                    "name": e.name, "id": null, "updated_at": null, "created_at": null,
                    "last_accessed_at": null, "metadata": null,
                }),
            })
            .collect();
        Ok(answer(StatusCode::OK, &Value::Array(list)))
    }
}

/// `POST /object/list-v2/:bucket`'s body.
#[derive(Debug, Deserialize)]
pub struct ListV2Body {
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    with_delimiter: Option<bool>,
    #[serde(default, rename = "sortBy")]
    sort_by: Option<SortBy>,
}

/// Where a list-v2 page ends: Supabase's continuation token, base64 of `l:<last name>`,
/// `o:<order>`, `c:<column>`, `a:<that row's timestamp>` lines.
#[derive(Debug, Default, PartialEq, Eq)]
struct Cursor {
    after: String,
    order: Option<String>,
    column: Option<String>,
    after_value: Option<String>,
}

impl Cursor {
    fn encode(&self) -> String {
        let mut lines = vec![format!("l:{}", self.after)];
        for (k, v) in [("o", &self.order), ("c", &self.column), ("a", &self.after_value)] {
            if let Some(v) = v {
                lines.push(format!("{k}:{v}"));
            }
        }
        base64::engine::general_purpose::STANDARD.encode(lines.join("\n"))
    }

    fn decode(token: &str) -> Result<Cursor, StorageError> {
        let bad = || StorageError::invalid_parameter("continuation token");
        let bytes = base64::engine::general_purpose::STANDARD.decode(token).map_err(|_| bad())?;
        let text = String::from_utf8(bytes).map_err(|_| bad())?;
        let mut cursor = Cursor::default();
        for line in text.split('\n') {
            match line.split_once(':') {
                Some(("l", v)) => cursor.after = v.to_owned(),
                Some(("o", v)) => cursor.order = Some(v.to_owned()),
                Some(("c", v)) => cursor.column = Some(v.to_owned()),
                Some(("a", v)) => cursor.after_value = Some(v.to_owned()),
                _ => return Err(bad()),
            }
        }
        Ok(cursor)
    }
}

/// What follows every name starting with `folder` (which ends in `/`) in byte order: the same
/// text with its final `/` stepped to the next byte, `0`.
fn past(folder: &str) -> String {
    format!("{}0", &folder[..folder.len() - 1])
}

/// A list-v2 object; folded at `/`, with its `key`: the segment of its name at the prefix's
/// level.
fn object_entry(o: &ObjectRow, level: Option<usize>) -> Value {
    let mut entry = json!({
        "id": o.id,
        "name": o.name,
        "bucket_id": o.bucket_id,
        "metadata": meta(o),
        "updated_at": o.updated_at,
        "created_at": o.created_at,
        "last_accessed_at": o.last_accessed_at,
    });
    if let Some(level) = level {
        entry["key"] = json!(o.name.split('/').nth(level).unwrap_or_default());
    }
    entry
}

/// A list-v2 folder (its name ends with `/`): its `key` is its last segment, without it.
fn folder_entry(name: &str, bucket: &str) -> Value {
    let key = name.trim_end_matches('/').rsplit('/').next().unwrap_or_default();
    json!({"id": null, "name": name, "key": key, "bucket_id": bucket})
}

impl Storage {
    pub(super) async fn list_v2(
        &self,
        who: Who,
        bucket: &str,
        body: ListV2Body,
    ) -> Result<Response<Body>, StorageError> {
        valid_bucket(bucket)?;
        let limit = body.limit.unwrap_or(1000).clamp(1, 1000);
        let prefix = body.prefix.unwrap_or_default();
        let folded = body.with_delimiter.unwrap_or(false);
        // An empty cursor is none (as storage-js sends before the first page).
        let cursor = body.cursor.as_deref().filter(|c| !c.is_empty()).map(Cursor::decode).transpose()?;
        let sort = body.sort_by.unwrap_or(SortBy { column: None, order: None });
        let order = cursor.as_ref().and_then(|c| c.order.clone()).or(sort.order);
        let descending = order.as_deref().is_some_and(|o| o.eq_ignore_ascii_case("desc"));
        let column = match cursor.as_ref().and_then(|c| c.column.clone()).or(sort.column).as_deref() {
            Some("created_at") => Some("created_at"),
            Some("updated_at") => Some("updated_at"),
            _ => None,
        };
        // Folded listings go by name, ascending: a folder is listed once, where its first name
        // would be.
        let (column, descending) = if folded { (None, false) } else { (column, descending) };
        let mut query = PageQuery { prefix: prefix.clone(), column, descending, ..PageQuery::default() };
        if let Some(c) = cursor {
            match folded && c.after.ends_with('/') {
                true => query.from = Some(past(&c.after)),
                false => {
                    query.after = Some(c.after);
                    query.after_value = c.after_value.filter(|_| column.is_some());
                }
            }
        }
        // One entry more than the page shows whether there is a next page.
        let mut folders: Vec<String> = Vec::new();
        let mut objects: Vec<ObjectRow> = Vec::new();
        let mut last: Option<(String, Option<String>)> = None;
        let mut more = false;
        'pages: loop {
            let wanted = limit + 1 - (folders.len() + objects.len()) as i64;
            query.limit = wanted;
            let rows = self.store.page(who.clone(), bucket.to_owned(), query.clone()).await?;
            let full = rows.len() as i64 == wanted;
            for row in rows {
                if (folders.len() + objects.len()) as i64 == limit {
                    more = true;
                    break 'pages;
                }
                let folder = folded
                    .then(|| {
                        row.name[prefix.len()..]
                            .find('/')
                            .map(|i| row.name[..prefix.len() + i + 1].to_owned())
                    })
                    .flatten();
                match folder {
                    Some(folder) => {
                        // Skip the folder's other names: ask again from past it.
                        query.after = None;
                        query.from = Some(past(&folder));
                        last = Some((folder.clone(), None));
                        folders.push(folder);
                        continue 'pages;
                    }
                    None => {
                        let value = column.map(|c| {
                            if c == "created_at" {
                                row.created_at.clone()
                            } else {
                                row.updated_at.clone()
                            }
                        });
                        last = Some((row.name.clone(), value));
                        objects.push(row);
                    }
                }
            }
            if !full {
                break;
            }
            if let Some((name, value)) = &last {
                query.after = Some(name.clone());
                query.after_value = value.clone();
                query.from = None;
            }
        }
        let level = folded.then(|| prefix.matches('/').count());
        let next = last.filter(|_| more).map(|(name, value)| {
            let cursor = Cursor {
                after: name.clone(),
                order: order.clone(),
                column: column.map(str::to_owned),
                after_value: value,
            };
            (cursor.encode(), name)
        });
        Ok(answer(
            StatusCode::OK,
            &json!({
                "hasNext": next.is_some(),
                "nextCursor": next.as_ref().map(|n| &n.0),
                "nextCursorKey": next.as_ref().map(|n| &n.1),
                "folders": folders.iter().map(|f| folder_entry(f, bucket)).collect::<Vec<_>>(),
                "objects": objects.iter().map(|o| object_entry(o, level)).collect::<Vec<_>>(),
            }),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_and_a_bad_one_is_refused() {
        let c =
            Cursor { after: "a/b.png".into(), order: Some("desc".into()), column: None, after_value: None };
        assert_eq!(Cursor::decode(&c.encode()), Ok(c));
        assert_eq!(Cursor::decode("not base64!").unwrap_err().code, "InvalidParameter");
        assert_eq!(past("photos/2024/"), "photos/20240");
        assert!(
            "photos/2024/zzz" < past("photos/2024/").as_str()
                && "photos/2025" > past("photos/2024/").as_str()
        );
    }
}
