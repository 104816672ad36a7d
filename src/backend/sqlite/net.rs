//! Database webhooks on an SQLite file (docs/webhooks.md): each `[[webhooks]]` entry becomes
//! triggers in the file that queue Supabase's payload in `_rowgate_net_queue` inside the
//! writing transaction — whoever writes, rowgate or another process — and this server's sender
//! sends what committed, tries again as the PostgreSQL sender does, and records the answers in
//! `_rowgate_net_responses`. The triggers name the table's columns: they are made again when the
//! file's schema changes.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::Connection;
use tokio::task::JoinSet;

use super::db::{Room, SqliteDb};
use crate::config::{NetSettings, SqliteWebhook};
use crate::error::Error;
use crate::webhooks::{Outbound, Request, Sent};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS _rowgate_net_queue (
  id INTEGER PRIMARY KEY,
  webhook TEXT,
  method TEXT NOT NULL,
  url TEXT NOT NULL,
  headers TEXT NOT NULL DEFAULT '{}',
  body TEXT,
  timeout_ms INTEGER NOT NULL,
  max_retries INTEGER,
  attempts INTEGER NOT NULL DEFAULT 0,
  not_before REAL NOT NULL DEFAULT (unixepoch('subsec')),
  created REAL NOT NULL DEFAULT (unixepoch('subsec'))
);
CREATE INDEX IF NOT EXISTS _rowgate_net_queue_due ON _rowgate_net_queue (not_before);
CREATE TABLE IF NOT EXISTS _rowgate_net_responses (
  id INTEGER,
  webhook TEXT,
  status_code INTEGER,
  content_type TEXT,
  headers TEXT,
  content TEXT,
  timed_out INTEGER,
  error_msg TEXT,
  created REAL NOT NULL DEFAULT (unixepoch('subsec'))
);
CREATE INDEX IF NOT EXISTS _rowgate_net_responses_created ON _rowgate_net_responses (created);";

/// The prefix of the triggers rowgate makes (and removes when no longer declared).
const TRIGGER_PREFIX: &str = "_rowgate_webhook_";

/// How often the sender looks for due requests and schema changes.
const POLL: Duration = Duration::from_millis(250);

/// Makes the queue and the declared webhooks' triggers, and starts the sender. Nothing is done
/// for a file without webhooks that never had any.
pub fn start(db: &Arc<SqliteDb>, settings: &NetSettings, schema: &str) -> Result<(), String> {
    let had = db
        .column_names("_rowgate_net_queue")
        .map(|c| !c.is_empty())
        .map_err(|e| format!("reading the webhooks' queue failed: {e}"))?;
    if settings.webhooks.is_empty() && !had {
        return Ok(());
    }
    db.setup(SCHEMA).map_err(|e| format!("making the webhooks' queue failed: {e}"))?;
    let outbound = Outbound::new(settings)?;
    let reader = db.read_connection().map_err(|e| format!("reading the webhooks' queue failed: {e}"))?;
    let (db, settings, schema) = (db.clone(), settings.clone(), schema.to_owned());
    tokio::spawn(async move {
        let mut reader = Some(reader);
        let mut version = None;
        let mut in_flight: HashSet<i64> = HashSet::new();
        let mut sending: JoinSet<(Queued, Sent)> = JoinSet::new();
        let mut pruned = std::time::Instant::now();
        loop {
            // The file is read off the runtime's threads, on the sender's own connection.
            let free = settings.concurrency.saturating_sub(sending.len());
            let skip: Vec<i64> = in_flight.iter().copied().collect();
            let Some(conn) = reader.take() else { return };
            let Ok((conn, polled)) = tokio::task::spawn_blocking(move || {
                let polled = poll(&conn, free, &skip);
                (conn, polled)
            })
            .await
            else {
                return;
            };
            reader = Some(conn);
            match polled {
                Ok((now_version, rows)) => {
                    if Some(now_version) != version {
                        let (webhooks, schema) = (settings.webhooks.clone(), schema.clone());
                        match db
                            .with_writer_as(Room::Freed, move |c| ensure_triggers(c, &webhooks, &schema))
                            .await
                        {
                            // Made again at the next look if they changed the version themselves.
                            Ok(changed) => version = if changed { None } else { Some(now_version) },
                            Err(e) => tracing::error!(error = %e, "the webhooks' triggers could not be made"),
                        }
                    }
                    for queued in rows {
                        in_flight.insert(queued.id);
                        let outbound = outbound.clone();
                        sending.spawn(async move {
                            let sent = outbound.send(&queued.request).await;
                            (queued, sent)
                        });
                    }
                }
                Err(e) => tracing::warn!(error = %e, "the webhooks' queue could not be read"),
            }
            if pruned.elapsed() > Duration::from_secs(30) {
                let ttl = settings.ttl.as_secs_f64();
                let _ = db
                    .with_writer_as(Room::Freed, move |c| {
                        c.execute(
                            "DELETE FROM _rowgate_net_responses WHERE created < unixepoch('subsec') - ?1",
                            [ttl],
                        )
                        .map_err(super::db::sqlite_error)
                    })
                    .await;
                pruned = std::time::Instant::now();
            }
            tokio::select! {
                Some(Ok(first)) = sending.join_next(), if !sending.is_empty() => {
                    // Every answer already in is recorded in one write: one at a time, a slow
                    // disk's commits fell behind a fast receiver.
                    let mut answers = vec![first];
                    while let Some(Ok(next)) = sending.try_join_next() {
                        answers.push(next);
                    }
                    let ids: Vec<i64> = answers.iter().map(|(queued, _)| queued.id).collect();
                    let retries = settings.max_retries;
                    let recorded = db
                        .with_writer(move |c| {
                            answers.iter().try_for_each(|(queued, sent)| record(c, queued, sent, retries))
                        })
                        .await;
                    if let Err(e) = recorded {
                        tracing::warn!(?ids, error = %e, "webhooks' answers could not be recorded: they are sent again");
                    }
                    for id in ids {
                        in_flight.remove(&id);
                    }
                }
                () = tokio::time::sleep(POLL) => {}
            }
        }
    });
    Ok(())
}

/// The file's schema version, and up to `limit` due requests but those in `skip` (being sent).
fn poll(c: &Connection, limit: usize, skip: &[i64]) -> rusqlite::Result<(i64, Vec<Queued>)> {
    let version = c.query_row("PRAGMA schema_version", [], |r| r.get(0))?;
    if limit == 0 {
        return Ok((version, Vec::new()));
    }
    Ok((version, due(c, limit, skip)?))
}

/// A request taken from the queue.
struct Queued {
    id: i64,
    webhook: Option<String>,
    attempts: u32,
    max_retries: Option<u32>,
    request: Request,
}

/// Up to `limit` due requests, but those in `skip` (being sent).
fn due(c: &Connection, limit: usize, skip: &[i64]) -> rusqlite::Result<Vec<Queued>> {
    let mut statement = c.prepare_cached(
            "SELECT id, webhook, method, url, headers, body, timeout_ms, max_retries, attempts FROM _rowgate_net_queue
             WHERE not_before <= unixepoch('subsec') ORDER BY id LIMIT ?1",
    )?;
    let rows = statement.query_map([(limit + skip.len()) as i64], |r| {
        let headers: String = r.get(4)?;
        let headers: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&headers).unwrap_or_default();
        Ok(Queued {
            id: r.get(0)?,
            webhook: r.get(1)?,
            attempts: r.get::<_, u32>(8)?,
            max_retries: r.get(7)?,
            request: Request {
                method: r.get(2)?,
                url: r.get(3)?,
                headers: headers
                    .into_iter()
                    .map(|(k, v)| (k, v.as_str().map_or_else(|| v.to_string(), str::to_owned)))
                    .collect(),
                body: r.get::<_, Option<String>>(5)?.map(String::into_bytes),
                timeout: Duration::from_millis(r.get::<_, i64>(6)?.clamp(1, 300_000) as u64),
            },
        })
    })?;
    let mut out = Vec::new();
    for row in rows {
        let row = row?;
        if !skip.contains(&row.id) && out.len() < limit {
            out.push(row);
        }
    }
    Ok(out)
}

/// Records what became of `queued`, or puts it back for a later try.
fn record(c: &Connection, queued: &Queued, sent: &Sent, default_retries: u32) -> Result<(), Error> {
    let tries = queued.attempts + 1;
    let retries = queued.max_retries.unwrap_or(default_retries);
    let fail = super::db::sqlite_error;
    if let Some(wait) = sent.retry_after(tries, retries) {
        tracing::info!(id = queued.id, url = %queued.request.url, attempt = tries, ?wait, outcome = %sent.said(), "a webhook is to be sent again");
        c.execute(
            "UPDATE _rowgate_net_queue SET attempts = ?2, not_before = unixepoch('subsec') + ?3 WHERE id = ?1",
            rusqlite::params![queued.id, tries, wait.as_secs_f64()],
        )
        .map_err(fail)?;
        return Ok(());
    }
    if !sent.succeeded() {
        tracing::warn!(id = queued.id, url = %queued.request.url, attempts = tries, outcome = %sent.said(), "a webhook failed");
    }
    if c.execute("DELETE FROM _rowgate_net_queue WHERE id = ?1", [queued.id]).map_err(fail)? == 1 {
        let r = sent.recorded();
        c.execute(
            "INSERT INTO _rowgate_net_responses (id, webhook, status_code, content_type, headers, content, timed_out, error_msg)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            rusqlite::params![queued.id, queued.webhook, r.status, r.content_type, r.headers, r.content, r.timed_out, r.error],
        )
        .map_err(fail)?;
    }
    Ok(())
}

/// Makes each declared webhook's triggers as they should be now, and removes the others;
/// whether anything changed.
fn ensure_triggers(c: &Connection, webhooks: &[SqliteWebhook], schema: &str) -> Result<bool, Error> {
    let fail = super::db::sqlite_error;
    let mut wanted = Vec::new();
    for w in webhooks {
        let columns: Vec<String> = {
            let mut s = c.prepare("SELECT name FROM pragma_table_info(?1)").map_err(fail)?;
            let names = s.query_map([&w.table], |r| r.get(0)).map_err(fail)?;
            names.collect::<Result<_, _>>().map_err(fail)?
        };
        if columns.is_empty() {
            tracing::warn!(webhook = %w.name, table = %w.table, "a webhook's table does not exist (yet): nothing is sent");
            continue;
        }
        for event in &w.events {
            wanted.push((
                format!("{TRIGGER_PREFIX}{}_{}", w.name, event.to_ascii_lowercase()),
                trigger(w, event, &columns, schema),
            ));
        }
    }
    let existing: Vec<(String, String)> = {
        let mut s = c
            .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE '\\_rowgate\\_webhook\\_%' ESCAPE '\\'")
            .map_err(fail)?;
        let rows = s.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(fail)?;
        rows.collect::<Result<_, _>>().map_err(fail)?
    };
    let mut changed = false;
    for (name, sql) in &existing {
        if !wanted.iter().any(|(n, s)| n == name && s == sql) {
            c.execute_batch(&format!("DROP TRIGGER IF EXISTS {}", ident(name))).map_err(fail)?;
            changed = true;
        }
    }
    for (name, sql) in &wanted {
        if !existing.iter().any(|(n, s)| n == name && s == sql) {
            c.execute_batch(sql).map_err(fail)?;
            changed = true;
        }
    }
    Ok(changed)
}

/// The trigger that queues `webhook`'s request for `event` (`INSERT`, `UPDATE`, `DELETE`).
fn trigger(webhook: &SqliteWebhook, event: &str, columns: &[String], schema: &str) -> String {
    let row = |alias: &str| {
        let pairs: Vec<String> = columns
            .iter()
            .map(|c| {
                let value = format!("{alias}.{}", ident(c));
                // JSON holds no BLOB: a blob goes as its hex digits.
                format!("{}, CASE typeof({value}) WHEN 'blob' THEN hex({value}) ELSE {value} END", literal(c))
            })
            .collect();
        format!("json_object({})", pairs.join(", "))
    };
    let record = if event == "DELETE" { "NULL".to_owned() } else { row("NEW") };
    let old = if event == "INSERT" { "NULL".to_owned() } else { row("OLD") };
    let mut url = webhook.url.clone();
    if !webhook.params.is_empty() {
        let query: String =
            form_urlencoded::Serializer::new(String::new()).extend_pairs(&webhook.params).finish();
        url.push(if url.contains('?') { '&' } else { '?' });
        url.push_str(&query);
    }
    let mut headers = webhook.headers.clone();
    let body = if webhook.method == "GET" {
        "NULL".to_owned()
    } else {
        if !headers.keys().any(|k| k.eq_ignore_ascii_case("content-type")) {
            headers.insert("Content-Type".into(), "application/json".into());
        }
        format!(
            "json_object('type', {}, 'table', {}, 'schema', {}, 'record', {record}, 'old_record', {old})",
            literal(event),
            literal(&webhook.table),
            literal(schema)
        )
    };
    let headers = serde_json::to_string(&headers).unwrap_or_else(|_| "{}".into());
    let name = format!("{TRIGGER_PREFIX}{}_{}", webhook.name, event.to_ascii_lowercase());
    format!(
        "CREATE TRIGGER {} AFTER {event} ON {} BEGIN INSERT INTO _rowgate_net_queue (webhook, method, url, headers, body, timeout_ms, max_retries) VALUES ({}, {}, {}, {}, {body}, {}, {}); END",
        ident(&name),
        ident(&webhook.table),
        literal(&webhook.name),
        literal(&webhook.method),
        literal(&url),
        literal(&headers),
        webhook.timeout_ms,
        webhook.max_retries.map_or_else(|| "NULL".to_owned(), |n| n.to_string()),
    )
}

fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}
