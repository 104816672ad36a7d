//! pg_net's `net.http_*` and Supabase's `supabase_functions.http_request` without pg_net
//! (docs/webhooks.md): `install.sql` queues a request as a row of the caller's transaction;
//! here every instance's sender takes the committed rows that are due — each row by one
//! instance, `FOR UPDATE SKIP LOCKED` and a lease in `claimed_until` —, sends them through
//! [`Outbound`], and records the answer in `net._http_response`, or puts the row back with a
//! later `not_before` when the answer says "try again". A row leaves the queue only with its
//! answer recorded, so a sender that dies mid-request leaves it to be sent again once its
//! lease ends: at least once.

use std::time::Duration;

use tokio::task::JoinSet;
use tokio_postgres::Client;

use super::apikey::message;
use super::tls::PgTarget;
use crate::config::NetSettings;
use crate::webhooks::{Outbound, Request, Sent};

const INSTALL_SQL: &str = include_str!("install.sql");

/// The channel `net._wake()` notifies when requests are queued.
const CHANNEL: &str = "rowgate_net";

/// How often a sender looks for due requests without being woken: retries coming due, and
/// rows whose sender died.
const POLL: Duration = Duration::from_secs(1);

/// How often old responses are removed.
const SELDOM: Duration = Duration::from_secs(30);

/// Creates `net` and `supabase_functions` (safe to run again) and lets `role` — the one
/// rowgate connects as — send and record what is queued, and `service_role` queue requests.
pub async fn install(c: &Client, role: &str) -> Result<(), String> {
    let role = super::supabase_install::quoted(role);
    c.batch_execute(&format!(
        "BEGIN; SELECT pg_advisory_xact_lock(7317002); {INSTALL_SQL}
         GRANT USAGE ON SCHEMA net TO {role};
         GRANT SELECT, UPDATE, DELETE ON net.http_request_queue TO {role};
         GRANT SELECT, INSERT, DELETE ON net._http_response TO {role};
         DO $$ BEGIN
           IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'service_role') THEN
             GRANT USAGE ON SCHEMA net, supabase_functions TO service_role;
             GRANT EXECUTE ON FUNCTION net._queue(text, text, jsonb, jsonb, bytea, integer),
               net.http_get(text, jsonb, jsonb, integer), net.http_post(text, jsonb, jsonb, jsonb, integer),
               net.http_delete(text, jsonb, jsonb, integer, jsonb),
               net._http_collect_response(bigint, boolean), net.http_collect_response(bigint, boolean)
               TO service_role;
             GRANT SELECT ON net._http_response, supabase_functions.hooks TO service_role;
           END IF;
         END $$;
         COMMIT;"
    ))
    .await
    .map_err(message)
}

/// Starts this instance's sender on `target` (`db-uri-direct`, which LISTEN needs); it sends
/// nothing until the schema is installed, and starts over when its connection drops.
pub fn spawn(target: std::sync::Arc<PgTarget>, settings: NetSettings) {
    let outbound = match Outbound::new(&settings) {
        Ok(o) => o,
        Err(e) => {
            tracing::error!(error = %e, "webhooks and pg_net requests will not be sent");
            return;
        }
    };
    super::background::keep_running("the pg_net sender", move || {
        let (target, outbound, settings) = (target.clone(), outbound.clone(), settings.clone());
        async move { send_queued(&target, &outbound, &settings).await }
    });
}

/// Sends what is queued until the connection ends; `false` at once if `net` is not rowgate's.
async fn send_queued(
    target: &PgTarget,
    outbound: &Outbound,
    settings: &NetSettings,
) -> Result<bool, tokio_postgres::Error> {
    let Some(super::background::Listening { client, heard: wake, mut ended }) =
        super::background::listen(target, "net", CHANNEL).await?
    else {
        return Ok(false);
    };
    tracing::info!("sending pg_net's queued requests (webhooks)");
    let claim = client.prepare(CLAIM).await?;
    let mut sending: JoinSet<(Queued, Sent)> = JoinSet::new();
    let mut pruned = tokio::time::Instant::now();
    loop {
        let free = settings.concurrency.saturating_sub(sending.len());
        if free > 0 {
            for row in client.query(&claim, &[&(free as i64)]).await? {
                let queued = Queued::from_row(&row);
                let outbound = outbound.clone();
                sending.spawn(async move {
                    let sent = outbound.send(&queued.request).await;
                    (queued, sent)
                });
            }
        }
        if pruned.elapsed() > SELDOM {
            client
                .execute(
                    "DELETE FROM net._http_response WHERE created < now() - make_interval(secs => $1)",
                    &[&settings.ttl.as_secs_f64()],
                )
                .await?;
            pruned = tokio::time::Instant::now();
        }
        tokio::select! {
            Some(done) = sending.join_next(), if !sending.is_empty() => {
                if let Ok((queued, sent)) = done {
                    record(&client, &queued, &sent, settings.max_retries).await?;
                }
            }
            () = wake.notified() => {}
            () = tokio::time::sleep(POLL) => {}
            end = &mut ended => return super::background::ended(end),
        }
    }
}

/// Takes up to `$1` due requests no live sender holds: the lease of a sender whose connection
/// is gone (its process killed) ends at once, any other's with its request's timeout and ten
/// seconds.
const CLAIM: &str = "UPDATE net.http_request_queue q
    SET attempts = q.attempts + 1, claimed_by = pg_backend_pid(),
        claimed_until = now() + make_interval(secs => least(greatest(q.timeout_milliseconds, 1), 300000) / 1000.0 + 10)
    WHERE q.id IN (SELECT id FROM net.http_request_queue r
                   WHERE not_before <= now()
                     AND (claimed_until IS NULL OR claimed_until < now()
                          OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = r.claimed_by))
                   ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
    RETURNING q.id, q.method::text, q.url, q.headers::text, q.body, q.timeout_milliseconds, q.attempts, q.max_retries";

/// A request taken from the queue.
struct Queued {
    id: i64,
    attempts: i32,
    max_retries: Option<i32>,
    request: Request,
}

impl Queued {
    fn from_row(row: &tokio_postgres::Row) -> Queued {
        let headers: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(row.get::<_, &str>(3)).unwrap_or_default();
        let headers = headers
            .into_iter()
            .map(|(name, value)| match value {
                serde_json::Value::String(s) => (name, s),
                other => (name, other.to_string()),
            })
            .collect();
        Queued {
            id: row.get(0),
            attempts: row.get(6),
            max_retries: row.get(7),
            request: Request {
                method: row.get(1),
                url: row.get(2),
                headers,
                body: row.get(4),
                timeout: Duration::from_millis(u64::try_from(row.get::<_, i32>(5)).unwrap_or(1).max(1)),
            },
        }
    }
}

/// Records what became of `queued`: its answer (or final failure) in `net._http_response`
/// with the row gone from the queue in the same statement, or the row back in the queue for
/// a later try.
async fn record(
    c: &Client,
    queued: &Queued,
    sent: &Sent,
    default_retries: u32,
) -> Result<(), tokio_postgres::Error> {
    let retries = queued.max_retries.map_or(default_retries, |n| u32::try_from(n).unwrap_or(0));
    let tries = u32::try_from(queued.attempts).unwrap_or(1);
    if let Some(wait) = sent.retry_after(tries, retries) {
        tracing::info!(id = queued.id, url = %queued.request.url, attempt = tries, ?wait, outcome = %sent.said(), "pg_net request to be sent again");
        c.execute(
            "UPDATE net.http_request_queue SET claimed_until = NULL, claimed_by = NULL, not_before = now() + make_interval(secs => $2)
             WHERE id = $1",
            &[&queued.id, &wait.as_secs_f64()],
        )
        .await?;
        return Ok(());
    }
    match sent.succeeded() {
        true => {
            tracing::debug!(id = queued.id, url = %queued.request.url, outcome = %sent.said(), "pg_net request sent")
        }
        false => {
            tracing::warn!(id = queued.id, url = %queued.request.url, attempts = tries, outcome = %sent.said(), "pg_net request failed")
        }
    }
    // PostgreSQL's text holds no NUL.
    let r = sent.recorded();
    let content = r.content.map(|c| c.replace('\0', "\u{fffd}"));
    let error = r.error.map(|e| e.replace('\0', ""));
    c.execute(
        "WITH done AS (DELETE FROM net.http_request_queue WHERE id = $1 RETURNING id)
         INSERT INTO net._http_response (id, status_code, content_type, headers, content, timed_out, error_msg)
         SELECT id, $2, $3, $4::text::jsonb, $5, $6, $7 FROM done",
        &[&queued.id, &r.status.map(i32::from), &r.content_type, &r.headers, &content, &r.timed_out, &error],
    )
    .await?;
    Ok(())
}
