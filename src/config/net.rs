//! `net-*`: the requests rowgate sends on the database's behalf (pg_net's `net.http_*`,
//! Supabase's database webhooks): where they may go, how much they may bring back, how often
//! they are tried.

use std::time::Duration;

use ipnet::IpNet;

use super::{invalid, list, ConfigError, PlatformArgs};

/// Outbound requests (docs/webhooks.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetSettings {
    /// `net-allow`: ranges reachable although refused by default.
    pub allow: Vec<IpNet>,
    /// `net-deny`: ranges refused besides the default ones.
    pub deny: Vec<IpNet>,
    /// `net-max-response-bytes`.
    pub max_response_bytes: usize,
    /// `net-concurrency`.
    pub concurrency: usize,
    /// `net-max-retries`: the retries of a request that does not say how many.
    pub max_retries: u32,
    /// `net-ttl`: how long a response is kept.
    pub ttl: Duration,
    /// SQLite: the `[[webhooks]]` of the configuration file.
    pub webhooks: Vec<SqliteWebhook>,
}

/// A database webhook on an SQLite file: a request sent after each committed change of `table`
/// of the kinds `events` names, with Supabase's payload (docs/webhooks.md).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqliteWebhook {
    /// Its name (letters, digits, `_`), unique.
    pub name: String,
    /// The table whose changes it sends.
    pub table: String,
    /// Which changes: `INSERT`, `UPDATE`, `DELETE` [default: all three].
    #[serde(default = "all_events")]
    pub events: Vec<String>,
    /// Where to.
    pub url: String,
    /// `POST` (the payload as JSON) or `GET` [default: POST].
    #[serde(default = "post")]
    pub method: String,
    /// Headers sent with it.
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    /// Query parameters added to the URL.
    #[serde(default)]
    pub params: std::collections::BTreeMap<String, String>,
    /// How long it may take [default: 5000].
    #[serde(default = "five_seconds")]
    pub timeout_ms: u32,
    /// Its retries [default: `net-max-retries`].
    pub max_retries: Option<u32>,
}

fn all_events() -> Vec<String> {
    ["INSERT", "UPDATE", "DELETE"].map(String::from).to_vec()
}

fn post() -> String {
    "POST".into()
}

fn five_seconds() -> u32 {
    5000
}

impl Default for NetSettings {
    fn default() -> Self {
        NetSettings {
            allow: Vec::new(),
            deny: Vec::new(),
            max_response_bytes: 1 << 20,
            concurrency: 16,
            max_retries: 10,
            ttl: Duration::from_secs(6 * 3600),
            webhooks: Vec::new(),
        }
    }
}

impl NetSettings {
    /// The settings from the flags and variables `a`, then the file `f`, then the defaults.
    pub(super) fn from_args(
        a: &PlatformArgs,
        f: &PlatformArgs,
        sqlite: bool,
    ) -> Result<NetSettings, ConfigError> {
        let d = NetSettings::default();
        let ranges = |key: &'static str, value: &Option<String>| -> Result<Vec<IpNet>, ConfigError> {
            list(value.as_deref().unwrap_or(""))
                .iter()
                .map(|r| range(r).map_err(|e| invalid(key, e)))
                .collect()
        };
        let concurrency = a.net_concurrency.or(f.net_concurrency).unwrap_or(d.concurrency);
        if concurrency == 0 {
            return Err(invalid("net-concurrency", "at least one request at a time".into()));
        }
        let webhooks = a.webhooks.clone().or_else(|| f.webhooks.clone()).unwrap_or_default();
        if !webhooks.is_empty() && !sqlite {
            return Err(invalid(
                "webhooks",
                "on PostgreSQL a webhook is a trigger calling supabase_functions.http_request (docs/webhooks.md)".into(),
            ));
        }
        let mut names = std::collections::HashSet::new();
        for w in &webhooks {
            let why = if w.name.is_empty() || !w.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                Some("a name is letters, digits and '_'".to_owned())
            } else if !names.insert(w.name.as_str()) {
                Some("two webhooks have this name".into())
            } else if w.events.is_empty()
                || w.events.iter().any(|e| !["INSERT", "UPDATE", "DELETE"].contains(&e.as_str()))
            {
                Some("events are INSERT, UPDATE and DELETE".into())
            } else if !["POST", "GET"].contains(&w.method.as_str()) {
                Some("the method is POST or GET".into())
            } else if !(w.url.starts_with("http://") || w.url.starts_with("https://")) {
                Some("the url is an http or https URL".into())
            } else {
                None
            };
            if let Some(why) = why {
                return Err(invalid("webhooks", format!("{:?}: {why}", w.name)));
            }
        }
        Ok(NetSettings {
            webhooks,
            allow: ranges("net-allow", &a.net_allow.clone().or_else(|| f.net_allow.clone()))?,
            deny: ranges("net-deny", &a.net_deny.clone().or_else(|| f.net_deny.clone()))?,
            max_response_bytes: a
                .net_max_response_bytes
                .or(f.net_max_response_bytes)
                .unwrap_or(d.max_response_bytes),
            concurrency,
            max_retries: a.net_max_retries.or(f.net_max_retries).unwrap_or(d.max_retries),
            ttl: a.net_ttl.or(f.net_ttl).map_or(d.ttl, Duration::from_secs),
        })
    }
}

/// An address (`127.0.0.1`, `::1`) or a CIDR range (`10.0.0.0/8`).
fn range(text: &str) -> Result<IpNet, String> {
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(IpNet::from))
        .map_err(|_| format!("{text:?} is not an address or a CIDR range like 10.0.0.0/8"))
}
