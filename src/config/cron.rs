//! `cron-*`: where pg_cron's jobs run, and how many of their runs are kept.

use super::{either, invalid, ConfigError, PlatformArgs};

/// pg_cron's jobs (docs/cron.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronSettings {
    /// `cron-db-uri`: the connection jobs run on, if not the server's own.
    pub db_uri: Option<String>,
    /// `cron-history`: runs kept per job.
    pub history: u32,
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
        Ok(CronSettings { db_uri, history })
    }
}
