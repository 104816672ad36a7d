//! A `phx_join`'s payload: the channel's `config` (broadcast `self`/`ack`, presence, private,
//! `postgres_changes`) and its token, and each `postgres_changes` entry checked against the
//! schema cache and the tables that publish changes. The join reply echoes the entries as the
//! client sent them, each with an `id` derived from its content (as Supabase's `phash2`), so
//! that the client's position-by-position comparison holds.

use serde_json::{Map, Value};

use super::change::Kind;
use super::filter::Filter;
use super::hub::Binding;
use super::Published;
use crate::schema::{QualifiedName, SchemaCache};

/// What a join asks for.
#[derive(Debug, Default)]
pub struct JoinConfig {
    /// `broadcast.self`: the channel's own broadcasts come back to it.
    pub own: bool,
    /// `broadcast.ack`: broadcasts are answered.
    pub ack: bool,
    /// `presence.key` (empty: one is made).
    pub presence_key: String,
    /// Presence is on (`presence.enabled`, or absent as older clients send it).
    pub presence: bool,
    /// `private`: authorization by policies on the topic.
    pub private: bool,
    /// `postgres_changes`, as sent.
    pub postgres_changes: Vec<Value>,
    /// `access_token` (or the legacy `user_token`).
    pub access_token: Option<String>,
}

/// Reads a join's payload. What is malformed is ignored, as Supabase logs and ignores it.
pub fn config(payload: &Value) -> JoinConfig {
    let config = payload.get("config");
    let flag = |v: Option<&Value>| match v {
        Some(Value::Bool(b)) => Some(*b),
        Some(Value::String(s)) => s.parse().ok(),
        _ => None,
    };
    let at = |a: &str, b: &str| config.and_then(|c| c.get(a)).and_then(|v| v.get(b));
    let token = |k: &str| payload.get(k).and_then(Value::as_str).filter(|t| !t.is_empty()).map(str::to_owned);
    JoinConfig {
        own: flag(at("broadcast", "self")).unwrap_or(false),
        ack: flag(at("broadcast", "ack")).unwrap_or(false),
        presence_key: at("presence", "key").and_then(Value::as_str).unwrap_or_default().to_owned(),
        presence: flag(at("presence", "enabled")).unwrap_or(true),
        private: flag(config.and_then(|c| c.get("private"))).unwrap_or(false),
        postgres_changes: match config.and_then(|c| c.get("postgres_changes")) {
            Some(Value::Array(a)) => a.clone(),
            _ => Vec::new(),
        },
        access_token: token("access_token").or_else(|| token("user_token")),
    }
}

/// The id of a binding: a hash of the entry as sent (stable for equal entries), within
/// Supabase's range (0..2^27).
pub fn binding_id(entry: &Value) -> u32 {
    // FNV-1a over the canonical JSON (keys sorted: serde_json's map keeps insertion order).
    fn canonical(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for k in keys {
                    out.push_str(&serde_json::to_string(k).unwrap_or_default());
                    out.push(':');
                    canonical(&m[k], out);
                    out.push(',');
                }
                out.push('}');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut text = String::new();
    canonical(entry, &mut text);
    let mut h: u32 = 0x811c_9dc5;
    for b in text.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h & ((1 << 27) - 1)
}

/// Reads one `postgres_changes` entry into a binding: an error is the system message the
/// subscriber is sent.
pub fn binding(entry: &Value, schema: &SchemaCache, published: &Published) -> Result<Binding, String> {
    let empty = Map::new();
    let m = entry.as_object().unwrap_or(&empty);
    let text = |k: &str| m.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    let params = || {
        let mut p: Vec<String> = ["event", "schema", "table", "filter"]
            .iter()
            .filter_map(|k| text(k).map(|v| format!("{k}: {v}")))
            .collect();
        p.sort();
        format!("[{}]", p.join(", "))
    };
    let event = match text("event").map(str::to_ascii_uppercase).as_deref() {
        Some("*") => None,
        Some("INSERT") => Some(Kind::Insert),
        Some("UPDATE") => Some(Kind::Update),
        Some("DELETE") => Some(Kind::Delete),
        _ => {
            return Err(format!(
                "Unable to subscribe to changes with given parameters: unknown event {}",
                params()
            ))
        }
    };
    let (schema_name, table_name) = match (text("schema"), text("table")) {
        (None, None) => {
            return Err(format!(
                "No subscription params provided. Please provide at least a `schema` or `table` to subscribe to: {}",
                params()
            ))
        }
        (s, t) => (s.unwrap_or("public"), t),
    };
    let schema_name = (schema_name != "*").then(|| schema_name.to_owned());
    let table_name = table_name.filter(|t| *t != "*").map(str::to_owned);
    let filter = Filter::parse(text("filter").unwrap_or_default())?;
    let select = match m.get("select") {
        Some(Value::Array(cols)) => Some(
            cols.iter()
                .map(|c| c.as_str().map(str::to_owned).ok_or("`select` lists column names"))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        None | Some(Value::Null) => None,
        Some(_) => return Err("`select` lists column names".into()),
    };
    let unavailable = || {
        format!(
            "Unable to subscribe to changes with given parameters. Please check Realtime is enabled for the given connect parameters: {}",
            params()
        )
    };
    match (&schema_name, &table_name) {
        (Some(s), Some(t)) => {
            let name = QualifiedName { schema: s.clone(), name: t.clone() };
            let relation =
                schema.relations.get(&name).filter(|_| published.contains(&name)).ok_or_else(unavailable)?;
            let known = |c: &str| relation.columns.iter().any(|col| col.name == c);
            if let Some(c) = filter.columns().find(|c| !known(c)) {
                return Err(format!("invalid column for filter {c}"));
            }
            if let Some(c) = select.iter().flatten().find(|c| !known(c)) {
                return Err(format!("invalid column for select {c}"));
            }
        }
        _ if !filter.0.is_empty() || select.is_some() => {
            return Err(format!("`filter` and `select` need one table: {}", params()));
        }
        (Some(s), None) => {
            if !published.any_in(s, schema) {
                return Err(unavailable());
            }
        }
        (None, _) => {}
    }
    Ok(Binding { id: binding_id(entry), event, schema: schema_name, table: table_name, filter, select })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_depend_on_content_only() {
        let a = json!({"event": "*", "schema": "public", "table": "todos"});
        let b = json!({"table": "todos", "schema": "public", "event": "*"});
        assert_eq!(binding_id(&a), binding_id(&b));
        assert_ne!(
            binding_id(&a),
            binding_id(&json!({"event": "INSERT", "schema": "public", "table": "todos"}))
        );
        assert!(binding_id(&a) < 1 << 27);
    }

    #[test]
    fn a_join_payload_is_read_leniently() {
        let c = config(&json!({
            "config": {"broadcast": {"self": "true", "ack": true}, "presence": {"key": "u1", "enabled": false},
                       "postgres_changes": [{"event": "*", "schema": "public"}], "private": false},
            "access_token": "tok"
        }));
        assert!(c.own && c.ack && !c.presence && !c.private);
        assert_eq!((c.presence_key.as_str(), c.access_token.as_deref()), ("u1", Some("tok")));
        assert_eq!(c.postgres_changes.len(), 1);
        let c = config(&json!({"config": {"presence": {"key": ""}}, "user_token": "old"}));
        assert!(c.presence && !c.own);
        assert_eq!(c.access_token.as_deref(), Some("old"));
    }
}
