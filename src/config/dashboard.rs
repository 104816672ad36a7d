//! `dashboard-*`: the dashboard at `/_/`.

use super::{invalid, ConfigError, ServeArgs};

/// How the dashboard runs (`dashboard-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DashboardSettings {
    /// `dashboard-enabled`.
    pub enabled: bool,
    /// `dashboard-db-uri`: PostgreSQL, the connection its SQL console and table editor use.
    pub db_uri: Option<String>,
    /// `dashboard-allowed-ips`: the client addresses it answers (none: every one).
    pub allowed_ips: Vec<ipnet::IpNet>,
}

impl Default for DashboardSettings {
    fn default() -> Self {
        DashboardSettings { enabled: true, db_uri: None, allowed_ips: Vec::new() }
    }
}

impl DashboardSettings {
    /// The settings from the flags and variables `a`, then the file `f`, then the defaults.
    pub(super) fn from_args(a: &ServeArgs, f: &ServeArgs) -> Result<DashboardSettings, ConfigError> {
        let allowed = a.dashboard_allowed_ips.as_deref().or(f.dashboard_allowed_ips.as_deref()).unwrap_or("");
        Ok(DashboardSettings {
            enabled: a.dashboard_enabled.or(f.dashboard_enabled).unwrap_or(true),
            db_uri: a
                .dashboard_db_uri
                .clone()
                .or_else(|| f.dashboard_db_uri.clone())
                .filter(|u| !u.is_empty()),
            allowed_ips: super::rate_limit::parse_proxies(allowed)
                .map_err(|e| invalid("dashboard-allowed-ips", e))?,
        })
    }
}
