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
        }
    }
}

impl NetSettings {
    /// The settings from the flags and variables `a`, then the file `f`, then the defaults.
    pub(super) fn from_args(a: &PlatformArgs, f: &PlatformArgs) -> Result<NetSettings, ConfigError> {
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
        Ok(NetSettings {
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
