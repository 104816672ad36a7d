//! What the webhooks' sender and the cron scheduler share: a connection of a background task's
//! own that hears one notification channel, made only once the task's schema is installed, and
//! the loop that keeps such a task running — again at once when its connection ends, with
//! backoff when it fails, and now and then when its schema is not there (an install made
//! while the server runs is found).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, Client};

use super::apikey::message;
use super::tls::PgTarget;

/// How often a task whose schema is missing looks again.
const ABSENT: Duration = Duration::from_secs(30);

/// A task's connection.
pub struct Listening {
    pub client: Client,
    /// Notified on each notification of the channel.
    pub heard: Arc<Notify>,
    /// The connection's end (an error, or none when it closed).
    pub ended: JoinHandle<Result<(), tokio_postgres::Error>>,
}

/// Connects to `target` and listens on `channel`; `None` if schema `schema` is not one a
/// rowgate install made (its comment starts with `rowgate:`).
pub async fn listen(
    target: &PgTarget,
    schema: &str,
    channel: &str,
) -> Result<Option<Listening>, tokio_postgres::Error> {
    let (client, mut connection) = target.config.connect(target.connector()).await?;
    let heard = Arc::new(Notify::new());
    let notify = heard.clone();
    let ended = tokio::spawn(async move {
        loop {
            match futures_util::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(_))) => notify.notify_one(),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            }
        }
    });
    let installed: bool = client
        .query_one(
            "SELECT coalesce(obj_description(to_regnamespace($1), 'pg_namespace') LIKE 'rowgate:%', false)",
            &[&schema],
        )
        .await?
        .get(0);
    if !installed {
        return Ok(None);
    }
    client.batch_execute(&format!("LISTEN {channel}")).await?;
    Ok(Some(Listening { client, heard, ended }))
}

/// What a task's connection ended with, for its loop.
pub fn ended(
    end: Result<Result<(), tokio_postgres::Error>, tokio::task::JoinError>,
) -> Result<bool, tokio_postgres::Error> {
    match end {
        Ok(Err(e)) => Err(e),
        _ => Ok(true),
    }
}

/// Runs `task` for ever: it returns `Ok(false)` when its schema is missing, `Ok(true)` when
/// its connection closed, an error when it failed; `what` names it in the log.
pub fn keep_running<F, Fut>(what: &'static str, mut task: F)
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = Result<bool, tokio_postgres::Error>> + Send,
{
    tokio::spawn(async move {
        let mut failures = 0u32;
        loop {
            let started = tokio::time::Instant::now();
            let wait = match task().await {
                Ok(false) => ABSENT,
                Ok(true) => Duration::from_secs(1),
                Err(e) => {
                    failures = if started.elapsed() > ABSENT { 1 } else { failures.saturating_add(1) };
                    tracing::warn!(error = %message(e), "{what} lost its connection");
                    Duration::from_millis(250 << failures.min(7)).min(ABSENT)
                }
            };
            tokio::time::sleep(wait).await;
        }
    });
}
