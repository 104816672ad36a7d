//! The options of what rowgate does besides answering requests — outbound requests for
//! webhooks (`net-*`) and scheduled jobs (`cron-*`) — in a struct of their own beside
//! [`ServeArgs`]'s: a TOML key comes here by its prefix.

use clap::Args;
use serde::Deserialize;

use super::ServeArgs;

/// `net-*` and `cron-*`: flags, `ROWGATE_*` variables and TOML keys, all optional.
#[derive(Debug, Clone, Default, Args, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PlatformArgs {
    /// Comma-separated addresses or CIDR ranges outbound requests (webhooks, pg_net) may reach
    /// although they are refused by default (loopback, link-local and cloud metadata addresses),
    /// e.g. `127.0.0.1/32`.
    #[arg(long = "net-allow", env = "ROWGATE_NET_ALLOW", value_name = "LIST")]
    pub net_allow: Option<String>,
    /// Comma-separated addresses or CIDR ranges outbound requests may never reach, besides
    /// the default ones, e.g. `10.0.0.0/8, 192.168.0.0/16`.
    #[arg(long = "net-deny", env = "ROWGATE_NET_DENY", value_name = "LIST")]
    pub net_deny: Option<String>,
    /// Largest response body an outbound request keeps, in bytes [default: 1048576].
    #[arg(long = "net-max-response-bytes", env = "ROWGATE_NET_MAX_RESPONSE_BYTES", value_name = "BYTES")]
    pub net_max_response_bytes: Option<usize>,
    /// Outbound requests one instance sends at once [default: 16].
    #[arg(long = "net-concurrency", env = "ROWGATE_NET_CONCURRENCY", value_name = "N")]
    pub net_concurrency: Option<usize>,
    /// Times a request answered with a 5xx, 429 or 408, or not answered, is sent again (with
    /// doubling waits from a second up to ten minutes) when it does not say [default: 10].
    #[arg(long = "net-max-retries", env = "ROWGATE_NET_MAX_RETRIES", value_name = "N")]
    pub net_max_retries: Option<u32>,
    /// Seconds a response stays in `net._http_response` [default: 21600, pg_net's six hours].
    #[arg(long = "net-ttl", env = "ROWGATE_NET_TTL", value_name = "SECONDS")]
    pub net_ttl: Option<u64>,
    /// PostgreSQL: the connection pg_cron's jobs run on, as a role that may become each job's
    /// (a job runs as the role that scheduled it) [default: db-uri-direct, else db-uri].
    #[arg(long = "cron-db-uri", env = "ROWGATE_CRON_DB_URI", value_name = "URI")]
    pub cron_db_uri: Option<String>,
    /// Runs of each job kept in `cron.job_run_details` [default: 1000].
    #[arg(long = "cron-history", env = "ROWGATE_CRON_HISTORY", value_name = "N")]
    pub cron_history: Option<u32>,
}

/// The prefixes of [`PlatformArgs`]' keys.
const PREFIXES: [&str; 2] = ["net-", "cron-"];

impl ServeArgs {
    /// The options a TOML table gives, each key to the struct its prefix names; unknown keys
    /// are an error.
    pub fn from_table(table: toml::Table) -> Result<ServeArgs, toml::de::Error> {
        let (platform, rest): (toml::Table, toml::Table) =
            table.into_iter().partition(|(key, _)| PREFIXES.iter().any(|p| key.starts_with(p)));
        let mut args = ServeArgs::deserialize(toml::Value::Table(rest))?;
        args.platform = PlatformArgs::deserialize(toml::Value::Table(platform))?;
        Ok(args)
    }
}
