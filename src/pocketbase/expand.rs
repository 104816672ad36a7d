//! `expand=`: the records a record's relation fields point at (`author`), and the records whose
//! relation field points at it (`comments_via_post`), nested by dots (`author.company`), put
//! under the record's `expand` key. Each level is one read per relation, as the caller — a
//! related record the caller may not view is not expanded, as in PocketBase.

use rowgate_request::{Field as Column, Filter as Leaf, Operation, QueryParams, SelectItem};
use serde_json::{Map, Value};

use super::collection::Collection;
use super::error::PbError;
use super::records::read;
use super::Context;

/// PocketBase expands at most six levels.
const MAX_DEPTH: usize = 6;

/// The most records one back-relation expands into, as PocketBase's limit.
const MAX_BACK: usize = 1000;

/// The paths asked for, as a tree of names.
#[derive(Default)]
pub struct Expand(Vec<(String, Expand)>);

impl Expand {
    /// Parses `expand=`: comma-separated paths of dot-separated names.
    pub fn parse(text: Option<&str>) -> Expand {
        let mut tree = Expand::default();
        for path in text.unwrap_or("").split(',') {
            let names: Vec<&str> = path.trim().split('.').map(str::trim).collect();
            if names.iter().any(|n| n.is_empty()) {
                continue;
            }
            let mut level = &mut tree;
            for name in names.into_iter().take(MAX_DEPTH) {
                let at = match level.0.iter().position(|(n, _)| n == name) {
                    Some(at) => at,
                    None => {
                        level.0.push((name.to_owned(), Expand::default()));
                        level.0.len() - 1
                    }
                };
                level = &mut level.0[at].1;
            }
        }
        tree
    }

    /// Whether nothing is asked for.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Expands `records` of `c` as asked; a name that is no relation of `c` is skipped. Asked
    /// for anything, each record has an `expand` object, empty where nothing was found.
    pub async fn apply(
        &self,
        cx: &Context<'_>,
        c: &Collection,
        records: &mut [Map<String, Value>],
    ) -> Result<(), PbError> {
        if self.is_empty() {
            return Ok(());
        }
        for record in records.iter_mut() {
            expanded(record);
        }
        for (name, nested) in &self.0 {
            if let Some(target) =
                c.field(name).and_then(|f| f.relation.as_ref()).map(|l| l.collection.as_str())
            {
                let Some(target) = Collection::find(cx.schema, &c.relation.name.schema, target) else {
                    continue;
                };
                let keys = distinct(records.iter().filter_map(|r| key(r.get(name))));
                let found = related(cx, &target, "id", keys, nested).await?;
                for record in records.iter_mut() {
                    let Some(k) = key(record.get(name)) else { continue };
                    if let Some(hit) = found.iter().find(|r| key(r.get("id")).as_deref() == Some(k.as_str()))
                    {
                        expanded(record).insert(name.clone(), Value::Object(hit.clone()));
                    }
                }
            } else if let Some((source, field)) = name.split_once("_via_") {
                let Some(source) = Collection::find(cx.schema, &c.relation.name.schema, source) else {
                    continue;
                };
                if source.field(field).and_then(|f| f.relation.as_ref()).map(|l| l.collection.as_str())
                    != Some(c.name())
                {
                    continue;
                }
                let keys = distinct(records.iter().filter_map(|r| key(r.get("id"))));
                let found = related(cx, &source, field, keys, nested).await?;
                for record in records.iter_mut() {
                    let Some(k) = key(record.get("id")) else { continue };
                    let pointing: Vec<Value> = found
                        .iter()
                        .filter(|r| key(r.get(field)).as_deref() == Some(k.as_str()))
                        .take(MAX_BACK)
                        .map(|r| Value::Object(r.clone()))
                        .collect();
                    if !pointing.is_empty() {
                        expanded(record).insert(name.clone(), Value::Array(pointing));
                    }
                }
            }
        }
        Ok(())
    }
}

/// The records of `c` whose `column` is one of `keys`, as the caller reads them, expanded
/// further as `nested` asks.
async fn related(
    cx: &Context<'_>,
    c: &Collection,
    column: &str,
    keys: Vec<String>,
    nested: &Expand,
) -> Result<Vec<Map<String, Value>>, PbError> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut query = QueryParams { select: vec![SelectItem::Star], ..Default::default() };
    let field = Column { name: column.to_owned(), json_path: Vec::new() };
    query.filters.push((Vec::new(), Leaf { field, negated: false, operation: Operation::In(keys) }));
    let rows = match read(cx, c, query, None).await {
        Ok((rows, _)) => rows,
        // A collection the caller may not read at all has nothing to expand, as PocketBase
        // leaves out what a view rule hides.
        Err(e) if e.status == http::StatusCode::FORBIDDEN => Vec::new(),
        Err(e) => return Err(e),
    };
    let mut records: Vec<Map<String, Value>> = rows.into_iter().map(|r| c.record(r)).collect();
    Box::pin(nested.apply(cx, c, &mut records)).await?;
    Ok(records)
}

/// A relation's value as the text it is compared by.
fn key(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn distinct(keys: impl Iterator<Item = String>) -> Vec<String> {
    let mut all: Vec<String> = keys.collect();
    all.sort();
    all.dedup();
    all
}

/// The record's `expand` object, made if it has none.
fn expanded(record: &mut Map<String, Value>) -> &mut Map<String, Value> {
    let entry = record.entry("expand").or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(o) => o,
        _ => unreachable!("made an object above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(e: &Expand) -> Vec<String> {
        e.0.iter()
            .flat_map(|(n, nested)| {
                std::iter::once(n.clone()).chain(names(nested).into_iter().map(move |m| format!("{n}.{m}")))
            })
            .collect()
    }

    #[test]
    fn paths_become_one_tree() {
        let e = Expand::parse(Some("author.company, author.friends,comments_via_post,,bad..path"));
        assert_eq!(names(&e), ["author", "author.company", "author.friends", "comments_via_post"]);
        let deep = Expand::parse(Some("a.b.c.d.e.f.g.h"));
        assert_eq!(names(&deep).len(), MAX_DEPTH);
    }
}
