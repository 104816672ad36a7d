//! The cache's side of the notification connection: after `LISTEN rowgate_cache` succeeds the
//! cache is flushed (changes may have been missed) and this task sends, on the same
//! connection, the instance's heartbeats, its sync requests and its acknowledgements of other
//! instances' syncs. When the connection drops, the cache stops serving at once.

use std::sync::Arc;

use tokio_postgres::Client;

use super::{ResponseCache, CHANNEL, HEARTBEAT};

/// Sends this instance's messages on `client` until it fails.
pub async fn talk(client: Arc<Client>, cache: Arc<ResponseCache>) -> Result<(), tokio_postgres::Error> {
    let notify = client.prepare(&format!("SELECT pg_notify('{CHANNEL}', $1)")).await?;
    let mut outbox = cache.outbox_rx.clone().lock_owned().await;
    let mut tick = tokio::time::interval(HEARTBEAT);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let message = tokio::select! {
            _ = tick.tick() => cache.heartbeat(),
            m = cache.next_sync() => m,
            Some(m) = outbox.recv() => m,
        };
        client.execute(&notify, &[&message]).await?;
    }
}

/// Starts the talker for a freshly listening connection; the caller aborts it when the
/// connection ends and then calls [`ResponseCache::listener_lost`].
pub fn start(client: Arc<Client>, cache: Arc<ResponseCache>) -> tokio::task::JoinHandle<()> {
    cache.flush();
    tokio::spawn(async move {
        if let Err(e) = talk(client, cache.clone()).await {
            tracing::warn!(error = %e, "cache notifications could not be sent");
            cache.listener_lost();
        }
    })
}
