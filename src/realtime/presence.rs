//! Presence: who is on a topic, as Phoenix.Presence keeps it. Each key (a user's chosen
//! `presence.key`, or one made for the channel) holds the metas its channels tracked, each
//! with a `phx_ref`; changes go to every member of the topic as `presence_diff`, and a
//! joining channel gets the whole state as `presence_state`. Pure.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

/// One topic's presences.
#[derive(Default)]
pub struct Presence {
    /// Per key, its metas: the connection that tracked it, its ref, its payload.
    keys: BTreeMap<String, Vec<Meta>>,
}

struct Meta {
    conn: u64,
    phx_ref: String,
    /// The payload as compact JSON: a parsed one would hold many times its size for as long
    /// as it is tracked.
    payload: Box<str>,
}

impl Meta {
    fn to_json(&self, prev: Option<&str>) -> Value {
        let mut m: Map<String, Value> = serde_json::from_str(&self.payload).unwrap_or_default();
        m.insert("phx_ref".into(), Value::String(self.phx_ref.clone()));
        if let Some(prev) = prev {
            m.insert("phx_ref_prev".into(), Value::String(prev.to_owned()));
        }
        Value::Object(m)
    }
}

impl Presence {
    /// Whether nobody is present.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// How many keys are present.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// `presence_state`: `{key: {"metas": [...]}}`.
    pub fn state(&self) -> Value {
        Value::Object(
            self.keys
                .iter()
                .map(|(k, metas)| {
                    (k.clone(), json!({ "metas": metas.iter().map(|m| m.to_json(None)).collect::<Vec<_>>() }))
                })
                .collect(),
        )
    }

    /// Tracks `payload` for connection `conn` under `key` (replacing what it tracked before);
    /// returns the `presence_diff`.
    pub fn track(&mut self, conn: u64, key: &str, payload: &Map<String, Value>) -> Value {
        let phx_ref = new_ref();
        let left = self.take(conn);
        let prev = left.iter().find(|(k, _)| k == key).map(|(_, m)| m.phx_ref.clone());
        let meta = Meta { conn, phx_ref, payload: Value::Object(payload.clone()).to_string().into() };
        let joined = json!({ key: { "metas": [meta.to_json(prev.as_deref())] } });
        self.keys.entry(key.to_owned()).or_default().push(meta);
        json!({ "joins": joined, "leaves": leaves(&left) })
    }

    /// Forgets what connection `conn` tracked; the `presence_diff`, if it had tracked anything.
    pub fn untrack(&mut self, conn: u64) -> Option<Value> {
        let left = self.take(conn);
        (!left.is_empty()).then(|| json!({ "joins": {}, "leaves": leaves(&left) }))
    }

    fn take(&mut self, conn: u64) -> Vec<(String, Meta)> {
        let mut left = Vec::new();
        self.keys.retain(|key, metas| {
            let (gone, kept): (Vec<Meta>, Vec<Meta>) =
                std::mem::take(metas).into_iter().partition(|m| m.conn == conn);
            left.extend(gone.into_iter().map(|m| (key.clone(), m)));
            *metas = kept;
            !metas.is_empty()
        });
        left
    }
}

fn leaves(left: &[(String, Meta)]) -> Value {
    let mut out = Map::new();
    for (key, meta) in left {
        let entry = out.entry(key.clone()).or_insert_with(|| json!({ "metas": [] }));
        if let Some(Value::Array(metas)) = entry.get_mut("metas") {
            metas.push(meta.to_json(None));
        }
    }
    Value::Object(out)
}

/// A random reference, as Phoenix's are opaque.
fn new_ref() -> String {
    let mut b = [0u8; 8];
    let _ = getrandom::fill(&mut b);
    crate::hex(&b)
}

/// A key for a channel that named none (Supabase makes a UUID).
pub fn new_key() -> String {
    let mut b = [0u8; 16];
    let _ = getrandom::fill(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = crate::hex(&b);
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metas(v: &Value, key: &str) -> Vec<String> {
        v[key]["metas"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap().to_owned()).collect()
    }

    #[test]
    fn tracking_joins_and_retracking_replaces() {
        let mut p = Presence::default();
        let d = p.track(1, "u1", json!({"name": "a"}).as_object().unwrap());
        assert_eq!(metas(&d["joins"], "u1"), ["a"]);
        assert_eq!(d["leaves"], json!({}));
        let d = p.track(1, "u1", json!({"name": "b"}).as_object().unwrap());
        assert_eq!(metas(&d["joins"], "u1"), ["b"]);
        assert_eq!(metas(&d["leaves"], "u1"), ["a"]);
        assert!(d["joins"]["u1"]["metas"][0]["phx_ref_prev"].is_string());
        p.track(2, "u1", json!({"name": "c"}).as_object().unwrap());
        assert_eq!(metas(&p.state(), "u1"), ["b", "c"]);
        let d = p.untrack(1).unwrap();
        assert_eq!(metas(&d["leaves"], "u1"), ["b"]);
        assert!(p.untrack(1).is_none());
        p.untrack(2);
        assert!(p.is_empty());
    }
}
