//! The cache's side of the notification connection: after `LISTEN rowgate_cache` succeeds the
//! cache is flushed (changes may have been missed) and this task sends, on the same
//! connection, the instance's heartbeats and its acknowledgements of other instances' write
//! markers (by NOTIFY, or as logical decoding messages when changes come from the WAL).
//! When the connection drops, the cache stops serving at once.

use std::sync::Arc;

use tokio_postgres::Client;

use crate::cache::{Message, ResponseCache, CHANNEL, HEARTBEAT};

/// Sends this instance's messages on `client` until it fails.
pub async fn talk(client: Arc<Client>, cache: Arc<ResponseCache>) -> Result<(), tokio_postgres::Error> {
    // By logical decoding, heartbeats must come back through the change stream to prove it
    // current; outside any transaction, they are decoded at once.
    let send = if cache.logical.load(std::sync::atomic::Ordering::Relaxed) {
        format!("SELECT pg_logical_emit_message(false, '{CHANNEL}', m) FROM unnest($1::text[]) m")
    } else {
        format!("SELECT pg_notify('{CHANNEL}', m) FROM unnest($1::text[]) m")
    };
    let notify = client.prepare(&send).await?;
    let mut outbox = cache.outbox().lock_owned().await;
    let mut tick = tokio::time::interval(HEARTBEAT);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let first = tokio::select! {
            _ = tick.tick() => cache.heartbeat(),
            Some(m) = outbox.recv() => m,
        };
        let mut batch = vec![first];
        while let Ok(m) = outbox.try_recv() {
            batch.push(m);
        }
        coalesce(&mut batch);
        let batch: Vec<String> = batch.iter().map(Message::to_string).collect();
        client.execute(&notify, &[&batch]).await?;
    }
}

/// Keeps only the last acknowledgement to each instance: one covers every marker before it,
/// and each message sent is a commit that takes PostgreSQL's notification queue lock.
fn coalesce(batch: &mut Vec<Message>) {
    let mut later = std::collections::HashSet::new();
    let mut keep = vec![true; batch.len()];
    for (i, m) in batch.iter().enumerate().rev() {
        if let Message::Ack { to, .. } = m {
            keep[i] = later.insert(to.clone());
        }
    }
    let mut i = 0;
    batch.retain(|_| {
        i += 1;
        keep[i - 1]
    });
}

/// Starts the talker for a freshly listening connection; the caller aborts it when the
/// connection ends and then calls [`ResponseCache::listener_lost`].
pub fn start(client: Arc<Client>, cache: Arc<ResponseCache>) -> tokio::task::JoinHandle<()> {
    cache.flush();
    if !cache.logical.load(std::sync::atomic::Ordering::Relaxed) {
        // (By logical decoding, the feed does this once its slot exists.)
        cache.listening();
    }
    tokio::spawn(async move {
        if let Err(e) = talk(client, cache.clone()).await {
            tracing::warn!(error = %e, "cache notifications could not be sent");
            cache.listener_lost();
        }
    })
}

#[cfg(test)]
mod tests {
    use super::{coalesce, Message};

    #[test]
    fn only_the_last_acknowledgement_to_each_instance_is_sent() {
        let read =
            |texts: &[&str]| -> Vec<Message> { texts.iter().map(|t| Message::parse(t).unwrap()).collect() };
        let mut batch = read(&["a w1 1 me", "h me 5", "a w2 7 me", "a w1 3 me", "b me"]);
        coalesce(&mut batch);
        assert_eq!(batch, read(&["h me 5", "a w2 7 me", "a w1 3 me", "b me"]));
    }
}
