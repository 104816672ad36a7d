//! Scheduled jobs on an SQLite file (docs/cron.md): each `[[cron]]` entry of the configuration
//! runs at its schedule's ticks — SQL on the file, run as the dashboard's console runs it (on
//! the writer, in a savepoint), or a request sent through the webhooks' client — and each run
//! is recorded in `_rowgate_cron_runs`, the newest `cron-history` of each job kept. One server
//! serves a file, so a tick runs once.

use std::sync::Arc;

use chrono::Utc;

use super::db::SqliteDb;
use crate::config::{CronSettings, NetSettings, SqliteJob};
use crate::cron::Schedule;
use crate::webhooks::{Outbound, Request};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS _rowgate_cron_runs (
  runid INTEGER PRIMARY KEY,
  job TEXT NOT NULL,
  status TEXT NOT NULL,
  return_message TEXT,
  scheduled_for REAL,
  start_time REAL,
  end_time REAL
);
CREATE INDEX IF NOT EXISTS _rowgate_cron_runs_job ON _rowgate_cron_runs (job, runid);";

/// Checks the jobs' schedules and starts running them; an unreadable schedule stops the start.
pub fn start(db: &Arc<SqliteDb>, cron: &CronSettings, net: &NetSettings) -> Result<(), String> {
    if cron.jobs.is_empty() {
        return Ok(());
    }
    let mut jobs = Vec::new();
    for job in &cron.jobs {
        let schedule = Schedule::parse(&job.schedule).map_err(|e| format!("cron job {:?}: {e}", job.name))?;
        jobs.push((job.clone(), schedule));
    }
    db.setup(SCHEMA).map_err(|e| format!("making the cron runs' table failed: {e}"))?;
    let outbound = Outbound::new(net)?;
    let keep = cron.history;
    for (job, schedule) in jobs {
        let (db, outbound) = (db.clone(), outbound.clone());
        tokio::spawn(async move {
            let mut next = schedule.next_after(Utc::now());
            while let Some(tick) = next {
                tokio::time::sleep(crate::cron::until(tick, Utc::now())).await;
                // A run still going on at a tick is not started again: the next is after it.
                run(&db, &outbound, &job, tick.timestamp() as f64, keep).await;
                next = schedule.next_after(Utc::now().max(tick));
            }
        });
    }
    Ok(())
}

async fn run(db: &Arc<SqliteDb>, outbound: &Outbound, job: &SqliteJob, tick: f64, keep: u32) {
    let name = job.name.clone();
    let started = db
        .with_writer(move |c| {
            c.execute(
                "INSERT INTO _rowgate_cron_runs (job, status, scheduled_for, start_time) VALUES (?1, 'running', ?2, unixepoch('subsec'))",
                rusqlite::params![name, tick],
            )
            .map(|_| c.last_insert_rowid())
            .map_err(super::db::sqlite_error)
        })
        .await;
    let run = match started {
        Ok(id) => id,
        Err(e) => {
            tracing::warn!(job = %job.name, error = %e, "a cron job could not start");
            return;
        }
    };
    let (succeeded, said) = match (&job.sql, &job.url) {
        (Some(sql), _) => {
            let sql = sql.clone();
            let ran = db
                .run_admin(move |c| {
                    c.execute_batch(&sql).map_err(super::db::sqlite_error)?;
                    Ok(c.changes())
                })
                .await;
            match ran {
                Ok(n) => (true, crate::cron::rows(n)),
                Err(e) => (false, e.to_string()),
            }
        }
        (None, Some(url)) => {
            let request = Request {
                method: job.method.clone().unwrap_or_else(|| "POST".into()),
                url: url.clone(),
                headers: job.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                body: job.body.clone().map(String::into_bytes),
                timeout: std::time::Duration::from_millis(u64::from(job.timeout_ms.unwrap_or(5000))),
            };
            let sent = outbound.send(&request).await;
            (sent.succeeded(), sent.said())
        }
        (None, None) => (false, "the job has neither sql nor url".into()),
    };
    crate::cron::ran(succeeded);
    if !succeeded {
        tracing::warn!(job = %job.name, error = %said, "a cron job failed");
    }
    let name = job.name.clone();
    let recorded = db
        .with_writer(move |c| {
            c.execute(
                "UPDATE _rowgate_cron_runs SET status = ?2, return_message = ?3, end_time = unixepoch('subsec') WHERE runid = ?1",
                rusqlite::params![run, if succeeded { "succeeded" } else { "failed" }, said],
            )
            .and_then(|_| {
                c.execute(
                    "DELETE FROM _rowgate_cron_runs WHERE job = ?1 AND runid <= (SELECT runid FROM _rowgate_cron_runs
                       WHERE job = ?1 ORDER BY runid DESC LIMIT 1 OFFSET ?2)",
                    rusqlite::params![name, keep],
                )
            })
            .map_err(super::db::sqlite_error)
        })
        .await;
    if let Err(e) = recorded {
        tracing::warn!(job = %job.name, error = %e, "a cron job's run could not be recorded");
    }
}
