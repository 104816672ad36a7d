//! The server's own backups: at each time `backup-schedule` names (a cron expression, UTC) a
//! backup is taken into `backup-dir` and all but the newest `backup-keep` there are removed;
//! the dashboard's "back up now" takes one the same way.

use std::path::PathBuf;
use std::time::SystemTime;

use super::{BackupError, Listed, Sources};
use crate::config::Config;

/// Starts the scheduled backups of `config`'s SQLite file, if `backup-schedule` is set.
pub fn start(config: &Config) {
    let (Some(text), Some(sources), Some(dir)) =
        (&config.backup.schedule, Sources::of(config), config.backup.dir.clone())
    else {
        return;
    };
    let Ok(cron) = crate::config::parse_schedule(text) else { return };
    let keep = config.backup.keep;
    tokio::spawn(async move {
        loop {
            let now = chrono::Utc::now();
            let next = match cron.find_next_occurrence(&now, false) {
                Ok(next) => next,
                Err(e) => {
                    tracing::error!(error = %e, "backup-schedule names no next time: no more backups");
                    return;
                }
            };
            tokio::time::sleep((next - now).to_std().unwrap_or_default()).await;
            match take_into(sources.clone(), dir.clone(), Some(keep)).await {
                Ok(b) => {
                    tracing::info!(backup = %dir.join(&b.name).display(), bytes = b.bytes, "backup taken")
                }
                Err(e) => tracing::error!(error = %e, dir = %dir.display(), "a scheduled backup failed"),
            }
        }
    });
}

/// Takes a backup of `sources` into `dir` now; with `keep`, then removes all but the newest
/// `keep` there.
pub async fn take_into(sources: Sources, dir: PathBuf, keep: Option<usize>) -> Result<Listed, BackupError> {
    let taken = tokio::task::spawn_blocking(move || {
        let name = super::file_name(SystemTime::now());
        let out = dir.join(&name);
        super::take(&sources, &out)?;
        let bytes = std::fs::metadata(&out)?.len();
        if let Some(keep) = keep {
            super::prune(&dir, keep)?;
        }
        Ok(Listed { name, bytes })
    });
    taken.await.map_err(|e| BackupError::Io(std::io::Error::other(e)))?
}
