//! pg_cron's jobs run by rowgate (docs/cron.md): Supabase's documented SQL — `cron.schedule`
//! with a cron expression or seconds, re-scheduling by name, `cron.unschedule`,
//! `cron.job_run_details` — each job as the role that scheduled it, once per tick with
//! several instances running.

use std::time::{Duration, Instant};

use crate::support::receiver::Receiver;
use crate::support::replica::value;
use crate::support::{block_on, start_server};
use crate::webhooks::installed_database;

fn args(db_uri: &str, cron_db_uri: &str) -> rowgate::config::ServeArgs {
    let mut args = rowgate::config::ServeArgs {
        db_uri: Some(db_uri.to_owned()),
        db_schemas: Some("public".into()),
        db_anon_role: Some("anon".into()),
        server_host: Some("127.0.0.1".into()),
        server_port: Some(0),
        ..Default::default()
    };
    args.platform.cron_db_uri = Some(cron_db_uri.to_owned());
    args.platform.net_allow = Some("127.0.0.1/32".into());
    args
}

/// The error `sql` fails with at `uri`.
fn refused(uri: &str, sql: &str) -> String {
    let (uri, sql) = (uri.to_owned(), sql.to_owned());
    block_on(async move {
        let cfg: tokio_postgres::Config = uri.parse().unwrap();
        let c = rowgate::backend::postgres::connect_without_tls(&cfg).await.unwrap();
        let e = c.simple_query(&sql).await.map(|_| ()).expect_err(&sql);
        e.as_db_error().map(|d| d.message().to_owned()).unwrap_or_default()
    })
}

/// Waits until `sql` at `uri` returns `expected`.
fn eventually(uri: &str, sql: &str, expected: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let got = value(uri, sql);
        if got == expected {
            return;
        }
        assert!(Instant::now() < deadline, "{sql}: {got:?}, not {expected:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn supabase_cron_sql_runs_jobs_once_per_tick_as_their_role() {
    let (superuser, authenticator) = installed_database("cron_path");
    {
        let _roles = crate::support::roles_lock();
        crate::support::sql_at(
            &superuser,
            "DO $$ BEGIN CREATE ROLE cron_user NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;",
        );
    }
    crate::support::sql_at(
        &superuser,
        "CREATE TABLE public.ticks (id serial PRIMARY KEY, at timestamptz NOT NULL DEFAULT date_trunc('second', now()), who text DEFAULT current_user);
         GRANT USAGE ON SCHEMA cron TO cron_user;
         GRANT INSERT ON public.ticks TO cron_user; GRANT USAGE ON SEQUENCE public.ticks_id_seq TO cron_user;",
    );
    // Two instances, as behind a load balancer.
    let _a = start_server(args(&authenticator, &superuser));
    let _b = start_server(args(&authenticator, &superuser));
    let id = value(
        &superuser,
        "select cron.schedule('every-second', '1 seconds', 'insert into public.ticks default values')",
    );
    eventually(&superuser, "SELECT count(*) >= 3 FROM public.ticks", "t");
    // Once per tick: no second has two rows, though two schedulers run.
    assert_eq!(value(&superuser, "SELECT count(*) = count(DISTINCT at) FROM public.ticks"), "t");
    assert_eq!(
        value(
            &superuser,
            &format!("SELECT DISTINCT status || ' ' || return_message || ' ' || username FROM cron.job_run_details WHERE jobid = {id} AND status <> 'running'")
        ),
        "succeeded 1 row postgres"
    );
    // Scheduled again by name: the same job, its new command.
    let again = value(&superuser, "select cron.schedule('every-second', '1 seconds', $$insert into public.ticks (who) values ('again')$$)");
    assert_eq!(again, id);
    eventually(&superuser, "SELECT count(*) > 0 FROM public.ticks WHERE who = 'again'", "t");
    assert_eq!(value(&superuser, "select cron.unschedule('every-second')"), "t");
    assert_eq!(
        refused(&superuser, "select cron.unschedule('every-second')"),
        "could not find valid entry for job 'every-second'"
    );
    assert_eq!(
        refused(&superuser, "select cron.unschedule(424242)"),
        "could not find valid entry for job 424242"
    );

    // A role's job runs as that role, which sees only its own jobs.
    let mine = value(
        &superuser,
        "SET ROLE cron_user; SELECT cron.schedule('mine', '1 seconds', 'insert into public.ticks (who) values (current_user)')",
    );
    assert_eq!(
        value(&superuser, "SET ROLE cron_user; SELECT string_agg(jobname, ',') FROM cron.job"),
        "mine"
    );
    eventually(&superuser, "SELECT count(*) > 0 FROM public.ticks WHERE who = 'cron_user'", "t");
    value(&superuser, &format!("SELECT cron.unschedule({mine})"));
    // Nor can it leave that role: the login role that runs jobs may become every job's role.
    let escape = value(
        &superuser,
        "SET ROLE cron_user; SELECT cron.schedule('escape', '1 seconds', $$RESET ROLE; insert into public.ticks (who) values ('escaped as ' || current_user)$$)",
    );
    eventually(
        &superuser,
        &format!("SELECT return_message FROM cron.job_run_details WHERE jobid = {escape} AND status = 'failed' LIMIT 1"),
        "cannot set parameter \"role\" within security-definer function",
    );
    value(&superuser, &format!("SELECT cron.unschedule({escape})"));
    assert_eq!(value(&superuser, "SELECT count(*) FROM public.ticks WHERE who LIKE 'escaped%'"), "0");

    // What fails is recorded with its error; what is not a schedule is refused.
    let failing = value(&superuser, "select cron.schedule('failing', '1 seconds', 'select 1/0')");
    eventually(
        &superuser,
        &format!("SELECT status || ': ' || return_message FROM cron.job_run_details WHERE jobid = {failing} AND status = 'failed' LIMIT 1"),
        "failed: division by zero",
    );
    value(&superuser, "select cron.unschedule('failing')");
    for bad in ["61 seconds", "* * * *", "0 25 * * *", "@reboot", "every day"] {
        assert_eq!(
            refused(&superuser, &format!("select cron.schedule('bad', '{bad}', 'select 1')")),
            format!("invalid schedule: {bad}")
        );
    }
    assert_eq!(
        refused(&superuser, "INSERT INTO cron.job (schedule, command) VALUES ('nonsense', 'select 1')"),
        "new row for relation \"job\" violates check constraint \"job_schedule_valid\""
    );
    // A cron expression is kept as given; another role cannot remove it.
    let nightly = value(&superuser, "select cron.schedule('nightly-vacuum', '0 3 * * *', 'VACUUM')");
    assert_eq!(
        refused(&superuser, &format!("SET ROLE cron_user; SELECT cron.unschedule({nightly})")),
        format!("could not find valid entry for job {nightly}")
    );
    assert_eq!(value(&superuser, "SELECT schedule || ' ' || command || ' ' || active FROM cron.job WHERE jobname = 'nightly-vacuum'"), "0 3 * * * VACUUM true");
}

#[test]
fn a_job_calls_a_webhook_every_few_seconds() {
    let (superuser, authenticator) = installed_database("cron_webhook");
    let receiver = Receiver::ok();
    let _server = start_server(args(&authenticator, &superuser));
    value(
        &superuser,
        &format!(
            "select cron.schedule('invoke-webhook', '2 seconds', $$ select net.http_post(url := '{}', body := '{{\"from\": \"cron\"}}'::jsonb) $$)",
            receiver.url("/from-cron")
        ),
    );
    let got = receiver.wait_for(Duration::from_secs(15), |r| r.len() >= 2);
    assert_eq!(got[0].json(), serde_json::json!({"from": "cron"}));
    value(&superuser, "select cron.unschedule('invoke-webhook')");
}

pub fn job(name: &str, schedule: &str) -> rowgate::config::SqliteJob {
    rowgate::config::SqliteJob {
        name: name.into(),
        schedule: schedule.into(),
        sql: None,
        url: None,
        method: None,
        headers: Default::default(),
        body: None,
        timeout_ms: None,
    }
}

#[test]
fn sqlite_jobs_from_the_configuration_run_sql_and_send_requests() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app.db");
    let sqlite = rusqlite::Connection::open(&file).unwrap();
    sqlite.execute_batch("CREATE TABLE ticks (id INTEGER PRIMARY KEY, at REAL)").unwrap();
    let receiver = Receiver::ok();
    let mut args = rowgate::config::ServeArgs {
        db_uri: Some(format!("sqlite:{}", file.display())),
        server_host: Some("127.0.0.1".into()),
        server_port: Some(0),
        ..Default::default()
    };
    args.platform.net_allow = Some("127.0.0.1/32".into());
    args.platform.cron = Some(vec![
        rowgate::config::SqliteJob {
            sql: Some("INSERT INTO ticks (at) VALUES (unixepoch('subsec'))".into()),
            ..job("tick", "1 seconds")
        },
        rowgate::config::SqliteJob {
            url: Some(receiver.url("/ping")),
            headers: [("Content-Type".to_owned(), "application/json".to_owned())].into(),
            body: Some(r#"{"from": "cron"}"#.into()),
            ..job("ping", "1 seconds")
        },
        rowgate::config::SqliteJob {
            sql: Some("INSERT INTO nowhere VALUES (1)".into()),
            ..job("broken", "1 seconds")
        },
    ]);
    let _base = start_server(args.clone());
    let got = receiver.wait_for(Duration::from_secs(10), |r| r.len() >= 2);
    assert_eq!((got[0].method.as_str(), got[0].json()), ("POST", serde_json::json!({"from": "cron"})));
    let deadline = Instant::now() + Duration::from_secs(10);
    let runs = |job: &str| -> Vec<(String, String)> {
        let mut s = sqlite
            .prepare("SELECT status, coalesce(return_message, '') FROM _rowgate_cron_runs WHERE job = ?1 AND status <> 'running'")
            .unwrap();
        s.query_map([job], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
    };
    while runs("tick").len() < 2 || runs("broken").is_empty() {
        assert!(Instant::now() < deadline, "the jobs did not run");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(runs("tick")[0], ("succeeded".to_owned(), "1 row".to_owned()));
    assert_eq!(runs("broken")[0], ("failed".to_owned(), "SQLite: no such table: nowhere".to_owned()));
    assert_eq!(runs("ping")[0], ("succeeded".to_owned(), "status 200".to_owned()));
    let ticks: i64 = sqlite.query_row("SELECT count(*) FROM ticks", [], |r| r.get(0)).unwrap();
    assert!(ticks >= 2, "{ticks}");
    // A schedule that is none stops the start, saying which.
    args.platform.cron =
        Some(vec![rowgate::config::SqliteJob { sql: Some("SELECT 1".into()), ..job("bad", "61 seconds") }]);
    let config = std::sync::Arc::new(rowgate::config::Config::load(&args).unwrap());
    let refused = block_on(async move { rowgate::server::start_state(config).map(|_| ()) }).unwrap_err();
    assert!(refused.contains("cron job \"bad\": invalid schedule: 61 seconds"), "{refused}");
}
