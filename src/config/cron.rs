//! `cron-*`: where pg_cron's jobs run, and how many of their runs are kept.

use super::{either, invalid, ConfigError, PlatformArgs};

/// pg_cron's jobs (docs/cron.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronSettings {
    /// `cron-db-uri`: the connection jobs run on, if not the server's own.
    pub db_uri: Option<String>,
    /// `cron-history`: runs kept per job.
    pub history: u32,
    /// SQLite: the `[[cron]]` jobs of the configuration file.
    pub jobs: Vec<SqliteJob>,
}

/// A scheduled job on an SQLite file: SQL run on the file, or an HTTP request (docs/cron.md).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqliteJob {
    /// Its name, unique.
    pub name: String,
    /// pg_cron's grammar: five fields, a shorthand, or `N seconds`.
    pub schedule: String,
    /// SQL to run on the file.
    pub sql: Option<String>,
    /// Or a URL to send a request to.
    pub url: Option<String>,
    /// The request's method [default: POST].
    pub method: Option<String>,
    /// Its headers.
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    /// Its body.
    pub body: Option<String>,
    /// How long it may take [default: 5000].
    pub timeout_ms: Option<u32>,
}

impl CronSettings {
    /// The settings from the flags and variables `a`, then the file `f`, then the defaults;
    /// `sqlite` says the database is an SQLite file, which has no `cron.job`.
    pub(super) fn from_args(
        a: &PlatformArgs,
        f: &PlatformArgs,
        sqlite: bool,
    ) -> Result<CronSettings, ConfigError> {
        let db_uri = either(&a.cron_db_uri, &f.cron_db_uri).filter(|u| !u.is_empty());
        if db_uri.is_some() && sqlite {
            return Err(invalid(
                "cron-db-uri",
                "pg_cron's jobs are PostgreSQL's; an SQLite file has none".into(),
            ));
        }
        let history = a.cron_history.or(f.cron_history).unwrap_or(1000);
        if history == 0 {
            return Err(invalid("cron-history", "keep at least one run of each job".into()));
        }
        let jobs = a.cron.clone().or_else(|| f.cron.clone()).unwrap_or_default();
        if !jobs.is_empty() && !sqlite {
            return Err(invalid(
                "cron",
                "on PostgreSQL a job is scheduled with cron.schedule (docs/cron.md)".into(),
            ));
        }
        let mut names = std::collections::HashSet::new();
        for job in &jobs {
            if !names.insert(job.name.as_str()) || job.name.is_empty() {
                return Err(invalid("cron", format!("{:?}: each job needs a name of its own", job.name)));
            }
            if job.sql.is_some() == job.url.is_some() {
                return Err(invalid("cron", format!("{:?}: a job has either sql or url", job.name)));
            }
        }
        Ok(CronSettings { db_uri, history, jobs })
    }
}
