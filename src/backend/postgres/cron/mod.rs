//! pg_cron without pg_cron (docs/cron.md): `install.sql` keeps the jobs in `cron.job`; here
//! every instance's scheduler reads them (again whenever `cron.job` changes), and at each tick
//! starts a job only if its run for that tick is not recorded yet — so a tick runs once however
//! many instances serve — on a connection of its own, as the role that scheduled it, and
//! records the outcome in `cron.job_run_details`, keeping a job's newest `cron-history` runs.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_postgres::Client;

use super::apikey::message;
use super::tls::PgTarget;
use crate::cron::Schedule;

const INSTALL_SQL: &str = include_str!("install.sql");

/// The channel `cron._changed()` notifies.
const CHANNEL: &str = "rowgate_cron";

/// How often the jobs are read again though nothing said they changed (and a server without
/// the schema looks again).
const RELOAD: Duration = Duration::from_secs(30);

/// Creates `cron` (safe to run again) and lets `role` — the one rowgate connects as — read
/// every role's jobs and record their runs.
pub async fn install(c: &Client, role: &str) -> Result<(), String> {
    let role = super::supabase_install::quoted(role);
    c.batch_execute(&format!(
        "BEGIN; SELECT pg_advisory_xact_lock(7317003); {INSTALL_SQL}
         GRANT USAGE ON SCHEMA cron TO {role};
         GRANT EXECUTE ON FUNCTION cron._jobs(), cron._start(bigint, double precision),
           cron._running(bigint, integer), cron._ended(bigint, boolean, text, integer) TO {role};
         COMMIT;"
    ))
    .await
    .map_err(message)
}

/// A job as the scheduler keeps it.
struct Job {
    schedule: Schedule,
    /// Its text, to tell whether it changed.
    text: String,
    command: String,
    username: String,
    next: Option<DateTime<Utc>>,
}

/// Starts this instance's scheduler on `target` (`cron-db-uri`, else `db-uri-direct`), keeping
/// `keep` runs of each job; it runs nothing until the schema is installed.
pub fn spawn(target: Arc<PgTarget>, keep: u32) {
    super::background::keep_running("the cron scheduler", move || {
        let target = target.clone();
        async move { schedule(&target, keep).await }
    });
}

/// Runs the jobs until the connection ends; `false` at once if `cron` is not rowgate's.
async fn schedule(target: &Arc<PgTarget>, keep: u32) -> Result<bool, tokio_postgres::Error> {
    let Some(super::background::Listening { client, heard: changed, mut ended }) =
        super::background::listen(target, "cron", CHANNEL).await?
    else {
        return Ok(false);
    };
    let client = Arc::new(client);
    tracing::info!("running pg_cron's jobs");
    let mut jobs: HashMap<i64, Job> = HashMap::new();
    let running: Arc<Mutex<HashSet<i64>>> = Arc::default();
    load(&client, &mut jobs).await?;
    let mut reloaded = tokio::time::Instant::now();
    loop {
        let now = Utc::now();
        let due = jobs.values().filter_map(|j| j.next).min();
        let wait = due.map_or(RELOAD, |at| crate::cron::until(at, now)).min(RELOAD);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = changed.notified() => {
                load(&client, &mut jobs).await?;
                continue;
            }
            end = &mut ended => return super::background::ended(end),
        }
        let now = Utc::now();
        for (&id, job) in jobs.iter_mut() {
            let Some(tick) = job.next.filter(|t| *t <= now) else { continue };
            job.next = job.schedule.next_after(now.max(tick));
            // A run still going on here is not started again (as pg_cron waits for it).
            if running.lock().unwrap_or_else(|e| e.into_inner()).contains(&id) {
                continue;
            }
            let tick = tick.timestamp() as f64;
            let Some(row) = client.query_opt("SELECT cron._start($1, $2)", &[&id, &tick]).await? else {
                continue;
            };
            let Some(run) = row.get::<_, Option<i64>>(0) else { continue };
            running.lock().unwrap_or_else(|e| e.into_inner()).insert(id);
            let (target, client, running) = (target.clone(), client.clone(), running.clone());
            let (command, username) = (job.command.clone(), job.username.clone());
            tokio::spawn(async move {
                let (succeeded, said) = run_job(&target, &client, run, &command, &username).await;
                crate::cron::ran(succeeded);
                if !succeeded {
                    tracing::warn!(job = id, run, error = %said, "a cron job failed");
                }
                if let Err(e) = client
                    .execute("SELECT cron._ended($1, $2, $3, $4)", &[&run, &succeeded, &said, &(keep as i32)])
                    .await
                {
                    tracing::warn!(job = id, run, error = %message(e), "a cron job's run could not be recorded");
                }
                running.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            });
        }
        if reloaded.elapsed() > RELOAD {
            load(&client, &mut jobs).await?;
            reloaded = tokio::time::Instant::now();
        }
    }
}

/// Reads the active jobs, keeping the next tick of those whose schedule did not change.
async fn load(client: &Client, jobs: &mut HashMap<i64, Job>) -> Result<(), tokio_postgres::Error> {
    let now = Utc::now();
    let mut read = HashMap::new();
    for row in client.query("SELECT jobid, schedule, command, username FROM cron._jobs()", &[]).await? {
        let (id, text): (i64, String) = (row.get(0), row.get(1));
        let schedule = match Schedule::parse(&text) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(job = id, error = %e, "a cron job's schedule cannot be read: it does not run");
                continue;
            }
        };
        let next = match jobs.remove(&id) {
            Some(old) if old.text == text => old.next,
            _ => schedule.next_after(now),
        };
        read.insert(id, Job { schedule, text, command: row.get(2), username: row.get(3), next });
    }
    *jobs = read;
    Ok(())
}

/// Runs `command` as `username` on a connection of its own; whether it succeeded, and what
/// pg_cron would record as its `return_message`.
async fn run_job(
    target: &PgTarget,
    recorder: &Client,
    run: i64,
    command: &str,
    username: &str,
) -> (bool, String) {
    let c = match super::connect(target).await {
        Ok(c) => c,
        Err(e) => return (false, format!("could not connect to run the job: {}", message(e))),
    };
    let (pid, login): (i32, String) =
        match c.query_one("SELECT pg_backend_pid(), session_user::text", &[]).await {
            Ok(row) => (row.get(0), row.get(1)),
            Err(e) => return (false, message(e)),
        };
    if let Err(e) = recorder.execute("SELECT cron._running($1, $2)", &[&run, &pid]).await {
        tracing::warn!(run, error = %message(e), "a cron job's start could not be recorded");
    }
    if username == login {
        return summary(c.simple_query(command).await);
    }
    // Another role's job: a `SET ROLE` before it could be undone by the job itself (`RESET ROLE`,
    // back to the login role, which may become every job's role). Its statements become the
    // body of a SECURITY DEFINER function of that role, where PostgreSQL refuses any change of
    // role, made and called in this session's temporary schema.
    let mut tag = [0u8; 12];
    if getrandom::fill(&mut tag).is_err() {
        return (false, "no randomness for the job's wrapper".into());
    }
    let tag: String = tag.iter().map(|b| format!("{b:02x}")).collect();
    if command.contains(&tag) {
        return (false, "the job's command holds its wrapper's quote".into());
    }
    let mut wrap = String::from("SET ROLE ");
    crate::backend::push_ident(&mut wrap, username);
    wrap.push_str(&format!(
        "; CREATE FUNCTION pg_temp.rowgate_job_{tag}() RETURNS void LANGUAGE sql SECURITY DEFINER \
         SET search_path FROM CURRENT AS $rg{tag}${command}\n$rg{tag}$"
    ));
    if let Err(e) = c.batch_execute(&wrap).await {
        return (false, format!("{} (the job runs as the role that scheduled it, {username})", message(e)));
    }
    match c.simple_query(&format!("SELECT pg_temp.rowgate_job_{tag}()")).await {
        Ok(_) => (true, "done".to_owned()),
        Err(e) => (false, message(e)),
    }
}

/// What pg_cron records of a command the job's own role ran: the rows its last statement
/// returned or changed.
fn summary(ran: Result<Vec<tokio_postgres::SimpleQueryMessage>, tokio_postgres::Error>) -> (bool, String) {
    match ran {
        Ok(messages) => {
            let rows = messages.iter().rev().find_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::CommandComplete(n) => Some(*n),
                _ => None,
            });
            let said = rows.map(crate::cron::rows).unwrap_or_default();
            (true, said)
        }
        Err(e) => (false, message(e)),
    }
}
