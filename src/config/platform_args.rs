//! The options of what rowgate runs besides the database's API — outbound requests for
//! webhooks (`net-*`), scheduled jobs (`cron-*`), Edge Functions (`functions-*`) and
//! PocketBase's API (`pocketbase`) — in a struct of their own beside [`ServeArgs`]'s: a TOML
//! key comes here by its prefix.

use clap::Args;
use serde::Deserialize;

use super::ServeArgs;

/// `net-*`, `cron-*`, `functions-*` and `pocketbase`: flags, `ROWGATE_*` variables and TOML keys, all optional.
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
    /// The Edge Functions served at /functions/v1/<name>: a directory of `<name>/index.ts`
    /// (Supabase's `supabase/functions`), run by Deno [default: none, no functions].
    #[arg(long = "functions-dir", env = "ROWGATE_FUNCTIONS_DIR", value_name = "DIR")]
    pub functions_dir: Option<std::path::PathBuf>,
    /// The Deno executable that runs them [default: deno, on the PATH].
    #[arg(long = "functions-deno", env = "ROWGATE_FUNCTIONS_DENO", value_name = "PATH")]
    pub functions_deno: Option<std::path::PathBuf>,
    /// Seconds one invocation may take before its function's process is stopped
    /// [default: 150].
    #[arg(long = "functions-timeout", env = "ROWGATE_FUNCTIONS_TIMEOUT", value_name = "SECONDS")]
    pub functions_timeout: Option<u64>,
    /// Seconds of CPU one invocation may use (its share of its function's process while it
    /// runs) before the process is stopped [default: 5].
    #[arg(long = "functions-cpu", env = "ROWGATE_FUNCTIONS_CPU", value_name = "SECONDS")]
    pub functions_cpu: Option<f64>,
    /// Memory one function's process may use for its JavaScript heap, in MiB [default: 256].
    #[arg(long = "functions-memory", env = "ROWGATE_FUNCTIONS_MEMORY", value_name = "MIB")]
    pub functions_memory: Option<u32>,
    /// Seconds a function's process is kept after its last invocation [default: 300].
    #[arg(long = "functions-idle", env = "ROWGATE_FUNCTIONS_IDLE", value_name = "SECONDS")]
    pub functions_idle: Option<u64>,
    /// Whether a function needs a valid JWT or API key by default (`verify_jwt`; a function's
    /// own `[functions.<name>]` in the config.toml beside functions-dir may say otherwise)
    /// [default: true].
    #[arg(long = "functions-verify-jwt", env = "ROWGATE_FUNCTIONS_VERIFY_JWT", value_name = "BOOL")]
    pub functions_verify_jwt: Option<bool>,
    /// PocketBase's API at /api/ over the same tables [default: true on an SQLite file, unless
    /// the REST API's api-prefix is /api; false on PostgreSQL].
    #[arg(long = "pocketbase", env = "ROWGATE_POCKETBASE", value_name = "BOOL")]
    pub pocketbase: Option<bool>,
    /// SQLite: database webhooks, the `[[webhooks]]` tables of the configuration file.
    #[arg(skip)]
    pub webhooks: Option<Vec<super::SqliteWebhook>>,
    /// SQLite: scheduled jobs, the `[[cron]]` tables of the configuration file.
    #[arg(skip)]
    pub cron: Option<Vec<super::SqliteJob>>,
}

/// The prefixes of [`PlatformArgs`]' keys.
const PREFIXES: [&str; 5] = ["net-", "cron", "functions-", "webhooks", "pocketbase"];

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
