//! `backup-*`: where the SQLite default's backups go, and when the server takes them.

use std::path::PathBuf;

use super::{either, invalid, ConfigError, S3Settings, ServeArgs};

/// Backups of the SQLite file (`backup-*`; docs/reliability.md).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BackupSettings {
    /// `backup-dir`: where backups are written and listed (default: `backups` beside the file).
    pub dir: Option<PathBuf>,
    /// `backup-schedule`: a cron expression (UTC) for the server's own backups; none by default.
    pub schedule: Option<String>,
    /// `backup-keep`: how many of the newest backups in `backup-dir` the schedule keeps.
    pub keep: usize,
    /// `backup-s3-url`: a bucket each backup is also uploaded to (with storage's
    /// `storage-s3-endpoint`, `-region` and keys, or the environment's).
    pub s3: Option<S3Settings>,
}

impl BackupSettings {
    /// The settings from the flags and variables `a`, then the file `f`, then the defaults;
    /// `sqlite_file` is the database's file, if it is one.
    pub(super) fn from_args(
        a: &ServeArgs,
        f: &ServeArgs,
        sqlite_file: Option<&std::path::Path>,
    ) -> Result<BackupSettings, ConfigError> {
        let schedule =
            a.backup_schedule.clone().or_else(|| f.backup_schedule.clone()).filter(|s| !s.is_empty());
        if let Some(s) = &schedule {
            parse_schedule(s).map_err(|e| invalid("backup-schedule", e))?;
            if sqlite_file.is_none() {
                return Err(invalid(
                    "backup-schedule",
                    "backups are taken of an SQLite file; back up PostgreSQL with its own tools (docs/reliability.md)".into(),
                ));
            }
        }
        let keep = a.backup_keep.or(f.backup_keep).unwrap_or(7);
        if keep == 0 {
            return Err(invalid("backup-keep", "keep at least one backup".into()));
        }
        let dir = a.backup_dir.clone().or_else(|| f.backup_dir.clone()).or_else(|| {
            let folder = sqlite_file?.parent().unwrap_or(std::path::Path::new(""));
            // Said in full where it is shown (the dashboard, the log).
            let folder = match folder.as_os_str().is_empty() {
                true => std::env::current_dir().unwrap_or_default(),
                false => std::path::absolute(folder).unwrap_or_else(|_| folder.to_owned()),
            };
            Some(folder.join("backups"))
        });
        let s3 = either(&a.backup_s3_url, &f.backup_s3_url).filter(|u| !u.is_empty()).map(|url| S3Settings {
            url,
            endpoint: either(&a.storage_s3_endpoint, &f.storage_s3_endpoint),
            region: either(&a.storage_s3_region, &f.storage_s3_region),
            access_key_id: either(&a.storage_s3_access_key_id, &f.storage_s3_access_key_id),
            secret_access_key: either(&a.storage_s3_secret_access_key, &f.storage_s3_secret_access_key),
        });
        if let Some(s3) = &s3 {
            if !s3.url.starts_with("s3://") || s3.url.len() <= "s3://".len() {
                return Err(invalid("backup-s3-url", format!("{:?}: expected s3://bucket[/prefix]", s3.url)));
            }
        }
        Ok(BackupSettings { dir, schedule, keep, s3 })
    }
}

/// A cron expression (five fields, or six with seconds first) as `backup-schedule` takes it.
pub fn parse_schedule(text: &str) -> Result<croner::Cron, String> {
    let parser = croner::parser::CronParser::builder().seconds(croner::parser::Seconds::Optional).build();
    parser.parse(text).map_err(|e| format!("{text:?} is not a cron expression: {e}"))
}
