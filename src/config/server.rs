//! `server-*` and `admin-server-*`: where the server listens, what it bounds for every
//! connection and request, who it trusts for the client's address, and what it adds to every
//! answer (CORS, `Server-Timing`, the trace header).

use std::net::IpAddr;
use std::time::Duration;

use super::{invalid, list, rate_limit, ConfigError, ServeArgs};

/// How the server listens and what it bounds (`server-*`, `admin-server-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSettings {
    /// `server-host`.
    pub host: IpAddr,
    /// `server-port`.
    pub port: u16,
    /// `server-shutdown-delay`.
    pub shutdown_delay: Duration,
    /// `server-max-url-length`.
    pub max_url_length: usize,
    /// `server-max-body-size`.
    pub max_body_size: usize,
    /// `server-max-header-size`.
    pub max_header_size: usize,
    /// `server-max-connections`.
    pub max_connections: usize,
    /// `server-read-timeout`.
    pub read_timeout: Duration,
    /// `server-trusted-proxies`.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// `server-timing-enabled`.
    pub timing_enabled: bool,
    /// `server-trace-header`.
    pub trace_header: Option<http::HeaderName>,
    /// `server-cors-allowed-origins`; `None` allows any origin.
    pub cors_allowed_origins: Option<Vec<String>>,
    /// `admin-server-port`.
    pub admin_port: Option<u16>,
    /// `admin-server-host` (`server-host` unless given).
    pub admin_host: IpAddr,
}

impl ServerSettings {
    /// The settings from the flags and variables `a`, then the file `f`, then the defaults.
    pub(super) fn from_args(a: &ServeArgs, f: &ServeArgs) -> Result<ServerSettings, ConfigError> {
        let host = a.server_host.as_deref().or(f.server_host.as_deref()).unwrap_or("!4");
        let host = parse_host(host).ok_or_else(|| {
            invalid("server-host", format!("{host:?} is not an IP address, !4, *4, !6 or *6"))
        })?;
        let admin_host = match a.admin_server_host.as_deref().or(f.admin_server_host.as_deref()) {
            None => host,
            Some(h) => parse_host(h).ok_or_else(|| {
                invalid("admin-server-host", format!("{h:?} is not an IP address, !4, *4, !6 or *6"))
            })?,
        };
        let trace_header = match a.server_trace_header.as_deref().or(f.server_trace_header.as_deref()) {
            Some(name) if !name.is_empty() => Some(
                http::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| invalid("server-trace-header", format!("{name:?} is not a header name")))?,
            ),
            _ => None,
        };
        Ok(ServerSettings {
            host,
            port: a.server_port.or(f.server_port).unwrap_or(3000),
            shutdown_delay: Duration::try_from_secs_f64(
                a.server_shutdown_delay.or(f.server_shutdown_delay).unwrap_or(0.0),
            )
            .map_err(|_| invalid("server-shutdown-delay", "not a number of seconds".into()))?,
            max_url_length: a.server_max_url_length.or(f.server_max_url_length).unwrap_or(16 * 1024),
            max_body_size: a.server_max_body_size.or(f.server_max_body_size).unwrap_or(10 * 1024 * 1024),
            max_header_size: a
                .server_max_header_size
                .or(f.server_max_header_size)
                .unwrap_or(32 * 1024)
                .max(8192),
            max_connections: a.server_max_connections.or(f.server_max_connections).unwrap_or(10_000).max(1),
            read_timeout: Duration::from_secs(
                a.server_read_timeout.or(f.server_read_timeout).unwrap_or(30).max(1),
            ),
            trusted_proxies: rate_limit::parse_proxies(
                a.server_trusted_proxies.as_deref().or(f.server_trusted_proxies.as_deref()).unwrap_or(""),
            )
            .map_err(|e| invalid("server-trusted-proxies", e))?,
            timing_enabled: a.server_timing_enabled.or(f.server_timing_enabled).unwrap_or(false),
            trace_header,
            cors_allowed_origins: a
                .server_cors_allowed_origins
                .as_deref()
                .or(f.server_cors_allowed_origins.as_deref())
                .map(list)
                .filter(|l| !l.is_empty()),
            admin_port: a.admin_server_port.or(f.admin_server_port),
            admin_host,
        })
    }
}

/// PostgREST's host forms: `!4`/`*4` (any IPv4), `!6`/`*6`/`*` (any IPv6), or an address.
fn parse_host(host: &str) -> Option<IpAddr> {
    match host {
        "!4" | "*4" => Some(IpAddr::from([0, 0, 0, 0])),
        "!6" | "*6" | "*" => Some(IpAddr::from([0u16; 8])),
        "localhost" => Some(IpAddr::from([127, 0, 0, 1])),
        other => other.parse().ok(),
    }
}
