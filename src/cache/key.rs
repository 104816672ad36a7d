//! The cache key of a GET or HEAD request: everything that can change its answer — method,
//! path and query, the headers that matter, the caller's role and claims.

use bytes::Bytes;
use http::HeaderMap;

use super::ResponseCache;

/// The request headers that can change an answer (besides those the caller is known by).
const KEY_HEADERS: [http::HeaderName; 5] = [
    http::header::ACCEPT,
    http::HeaderName::from_static("accept-profile"),
    http::header::RANGE,
    http::HeaderName::from_static("range-unit"),
    http::HeaderName::from_static("prefer"),
];

impl ResponseCache {
    /// The key of a GET/HEAD request: everything that can change its answer. `role` and
    /// `claims` are the caller's (with `cache-key-claims`, only the named claims).
    pub fn key(
        &self,
        method: &http::Method,
        uri: &http::Uri,
        headers: &HeaderMap,
        role: &str,
        claims: &str,
    ) -> Bytes {
        let mut key = Vec::with_capacity(256);
        let mut part = |bytes: &[u8]| {
            key.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            key.extend_from_slice(bytes);
        };
        part(method.as_str().as_bytes());
        part(uri.path_and_query().map_or(b"" as &[u8], |pq| pq.as_str().as_bytes()));
        for name in &KEY_HEADERS {
            // Repeated headers are joined in order; an absent header differs from an empty one.
            let mut values = headers.get_all(name).iter().peekable();
            if values.peek().is_none() {
                part(b"\xff");
            }
            for v in values {
                part(v.as_bytes());
            }
        }
        part(role.as_bytes());
        match &self.key_claims {
            None => part(claims.as_bytes()),
            Some(names) => {
                let parsed: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_str(claims).unwrap_or_default();
                for name in names {
                    part(parsed.get(name).map(|v| v.to_string()).unwrap_or_default().as_bytes());
                }
            }
        }
        Bytes::from(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn the_key_holds_what_changes_the_answer() {
        let mut args =
            crate::config::ServeArgs { db_uri: Some("postgres://u@h/d".into()), ..Default::default() };
        let all = ResponseCache::new(&Config::load(&args).unwrap());
        args.cache_key_claims = Some("sub, role".into());
        let narrow = ResponseCache::new(&Config::load(&args).unwrap());
        let uri: http::Uri = "/films?id=eq.1".parse().unwrap();
        let get = http::Method::GET;
        let mut h = HeaderMap::new();
        let a = r#"{"role":"u","sub":"a","exp":1}"#;
        let a2 = r#"{"role":"u","sub":"a","exp":2}"#;
        let b = r#"{"role":"u","sub":"b","exp":1}"#;
        assert_ne!(all.key(&get, &uri, &h, "u", a), all.key(&get, &uri, &h, "u", a2));
        assert_eq!(narrow.key(&get, &uri, &h, "u", a), narrow.key(&get, &uri, &h, "u", a2));
        assert_ne!(narrow.key(&get, &uri, &h, "u", a), narrow.key(&get, &uri, &h, "u", b));
        assert_ne!(all.key(&get, &uri, &h, "u", a), all.key(&get, &uri, &h, "v", a));
        assert_ne!(all.key(&get, &uri, &h, "u", a), all.key(&http::Method::HEAD, &uri, &h, "u", a));
        let plain = all.key(&get, &uri, &h, "u", a);
        h.insert("accept", "text/csv".parse().unwrap());
        assert_ne!(plain, all.key(&get, &uri, &h, "u", a));
        h.clear();
        h.insert("accept", "".parse().unwrap());
        assert_ne!(plain, all.key(&get, &uri, &h, "u", a), "an empty header differs from none");
        h.clear();
        h.insert("x-other", "1".parse().unwrap());
        assert_eq!(plain, all.key(&get, &uri, &h, "u", a));
    }
}
