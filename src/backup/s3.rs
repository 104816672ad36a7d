//! Backups uploaded to an S3-compatible bucket (`backup-s3-url`): each one the server takes is
//! streamed up under the prefix by its name, and all but the newest `backup-keep` there are
//! removed, as in `backup-dir`.

use std::sync::Arc;

use futures_util::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use tokio::io::AsyncWriteExt;

use crate::config::S3Settings;

/// The bucket and prefix backups go to.
pub struct Remote {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
}

impl Remote {
    /// The bucket `settings` names.
    pub fn open(settings: &S3Settings) -> Result<Remote, String> {
        let (store, prefix) = crate::storage::files::s3::bucket(settings, "backup-s3-url")?;
        Ok(Remote { store: Arc::new(store), prefix })
    }

    /// Uploads the backup at `file` as `name` (in parts, never all in memory).
    pub async fn upload(&self, file: &std::path::Path, name: &str) -> std::io::Result<()> {
        let mut from = tokio::fs::File::open(file).await?;
        let mut to =
            object_store::buffered::BufWriter::new(self.store.clone(), self.prefix.clone().join(name));
        tokio::io::copy(&mut from, &mut to).await?;
        to.shutdown().await
    }

    /// Removes all but the newest `keep` backups under the prefix; says how many went.
    pub async fn prune(&self, keep: usize) -> Result<usize, object_store::Error> {
        let listed: Vec<_> = self.store.list(Some(&self.prefix)).try_collect().await?;
        let mut names: Vec<Path> = listed
            .into_iter()
            .map(|o| o.location)
            .filter(|l| l.filename().is_some_and(super::is_backup_name))
            .collect();
        names.sort_by(|a, b| b.as_ref().cmp(a.as_ref()));
        let old = names.split_off(keep.min(names.len()));
        for location in &old {
            self.store.delete(location).await?;
        }
        Ok(old.len())
    }
}
