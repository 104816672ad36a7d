//! `rowgate backup` and `rowgate restore`: the same options, variables and file as `rowgate
//! serve` say which file, `storage-dir` and rules they are of.

use std::path::PathBuf;
use std::process::ExitCode;

use super::{file_name, restore, take, Manifest, Sources};
use crate::config::{Config, ServeArgs};

/// `rowgate backup`'s options.
#[derive(Debug, clap::Args)]
pub struct BackupArgs {
    /// Where to write the backup [default: a new file in backup-dir].
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// `rowgate restore`'s options.
#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// The backup (a .tar.gz `rowgate backup` wrote).
    pub archive: PathBuf,
    /// Replace the database file that is there (the server must be stopped).
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// What a backup holds, in one line.
fn summary(m: &Manifest) -> String {
    format!(
        "{} bytes of database taken at {}, {} stored files ({} bytes){}",
        m.database_bytes,
        m.taken_at,
        m.files,
        m.file_bytes,
        if m.rules { ", the access rules" } else { "" }
    )
}

fn sources(serve: &ServeArgs) -> Result<(Config, Sources), ExitCode> {
    let config = Config::load(serve).map_err(|e| {
        eprintln!("rowgate: {e}");
        ExitCode::from(2)
    })?;
    match Sources::of(&config) {
        Some(sources) => Ok((config, sources)),
        None => {
            eprintln!(
                "rowgate: backups are of an SQLite file; PostgreSQL is backed up with pg_basebackup and its WAL archive (docs/reliability.md)"
            );
            Err(ExitCode::from(2))
        }
    }
}

/// `rowgate backup`: takes one while the server goes on; prints where it went.
pub fn backup(args: &BackupArgs) -> ExitCode {
    let (config, sources) = match sources(&args.serve) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let out = args.out.clone().unwrap_or_else(|| {
        config.backup.dir.clone().unwrap_or_default().join(file_name(std::time::SystemTime::now()))
    });
    match take(&sources, &out) {
        Ok(m) => {
            println!("{}: {}", out.display(), summary(&m));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rowgate: the backup failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `rowgate restore`: puts a backup back, the server stopped.
pub fn restore_command(args: &RestoreArgs) -> ExitCode {
    let (_, targets) = match sources(&args.serve) {
        Ok(s) => s,
        Err(code) => return code,
    };
    match restore(&args.archive, &targets, args.force) {
        Ok(m) => {
            println!("restored {}: {}", targets.database.display(), summary(&m));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rowgate: the restore failed: {e}");
            ExitCode::FAILURE
        }
    }
}
