//! The server's own backups: at each time `backup-schedule` names (a cron expression, UTC) a
//! backup is taken into `backup-dir` and all but the newest `backup-keep` there are removed,
//! then uploaded to `backup-s3-url` (pruned the same way) if set; the dashboard's "back up
//! now" takes one into `backup-dir` the same way.

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
    let remote = match config.backup.s3.as_ref().map(super::s3::Remote::open).transpose() {
        Ok(remote) => remote,
        Err(e) => {
            tracing::error!(error = %e, "backup-s3-url cannot be used: backups stay in backup-dir only");
            None
        }
    };
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
            let taken = match take_into(sources.clone(), dir.clone(), Some(keep)).await {
                Ok(b) => b,
                Err(e) => {
                    tracing::error!(error = %e, dir = %dir.display(), "a scheduled backup failed");
                    continue;
                }
            };
            tracing::info!(backup = %dir.join(&taken.name).display(), bytes = taken.bytes, "backup taken");
            let Some(remote) = &remote else { continue };
            match remote.upload(&dir.join(&taken.name), &taken.name).await {
                Ok(()) => {
                    if let Err(e) = remote.prune(keep).await {
                        tracing::warn!(error = %e, "old backups in backup-s3-url could not be removed");
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, backup = taken.name, "a backup could not be uploaded to backup-s3-url")
                }
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
