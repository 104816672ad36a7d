//! The notification hub every instance keeps: one LISTEN connection (to `db-uri-direct`, or
//! `db-uri`) for the schema reloads of `db-channel`, the API-key store's changes, the response
//! cache's markers and heartbeats, realtime's publication changes, and the probe that tells
//! whether notifications reach it at all (not through a pooler in transaction mode); it starts
//! the change feeds (logical decoding for the cache and realtime) and starts over, reloading
//! what it may have missed, when its connection drops.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::poll_fn;
use tokio_postgres::AsyncMessage;

use super::reload::Reloader;
use crate::config::Config;

/// Called when the API-key table changed (or its notifications may have been missed).
pub type KeysChanged = Arc<dyn Fn() + Send + Sync>;

/// Listens on `db-channel` (when `db-channel-enabled`) for schema reload notifications and on
/// the API-key store's channel, reconnecting with backoff when the connection drops; after a
/// reconnect the schema cache is reloaded and the key cache flushed, since changes may have
/// been missed.
pub fn spawn_listener(config: Arc<Config>, reloader: Reloader, keys_changed: KeysChanged) {
    tokio::spawn(async move {
        let mut attempt = 0u32;
        let mut connected_before = false;
        loop {
            let result = listen(&config, &reloader, &keys_changed, &mut connected_before).await;
            if let Some(cache) = &reloader.cache {
                cache.listener_lost();
            }
            match result {
                Ok(()) => attempt = 0,
                Err(e) => {
                    let reason = e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_owned());
                    tracing::warn!(error = %reason, "schema notification listener lost its connection");
                }
            }
            attempt = attempt.saturating_add(1);
            let wait = Duration::from_millis(250 * 2u64.pow(attempt.min(7))).min(Duration::from_secs(32));
            tokio::time::sleep(wait).await;
        }
    });
}

async fn listen(
    config: &Config,
    reloader: &Reloader,
    keys_changed: &KeysChanged,
    connected_before: &mut bool,
) -> Result<(), tokio_postgres::Error> {
    let pg = &reloader.target;
    let (client, mut connection) = pg.config.connect(pg.connector()).await?;
    let client = Arc::new(client);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let cache = reloader.cache.clone();
    let driver = tokio::spawn(async move {
        loop {
            match poll_fn(|cx| connection.poll_message(cx)).await {
                // The cache's notifications are handled here, in order, without another task
                // hop: a writer waiting for its marker is woken sooner.
                Some(Ok(AsyncMessage::Notification(n))) if n.channel() == crate::cache::CHANNEL => {
                    if let Some(cache) = &cache {
                        cache.notified(n.payload());
                    }
                    if n.payload() == "*" {
                        let _ = tx.send((n.channel().to_owned(), String::new()));
                    }
                }
                Some(Ok(AsyncMessage::Notification(n))) => {
                    let _ = tx.send((n.channel().to_owned(), n.payload().to_owned()));
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            }
        }
    });
    let mut listen = format!("LISTEN {};", super::apikey::CHANNEL);
    if config.db.channel_enabled {
        listen.push_str(" LISTEN ");
        crate::backend::push_ident(&mut listen, &config.db.channel);
    }
    if reloader.cache.is_some() {
        listen.push_str("; LISTEN ");
        listen.push_str(crate::cache::CHANNEL);
    }
    if reloader.realtime.is_some() {
        listen.push_str("; LISTEN ");
        listen.push_str(super::changes::install::REALTIME_CHANNEL);
    }
    listen.push_str("; LISTEN ");
    listen.push_str(PROBE_CHANNEL);
    client.batch_execute(&listen).await?;
    let missed = match probe(pg, &mut rx).await? {
        // The listening connection closed meanwhile: start over.
        None => return Ok(()),
        Some(Probe::Direct { missed }) => missed,
        Some(Probe::Pooled) => {
            let needs = match (&reloader.cache, &reloader.realtime) {
                (Some(_), _) => Some("the response cache (cache-enabled)"),
                (None, Some(_)) => Some("realtime"),
                (None, None) => None,
            };
            let advice =
                "the connection goes through a pooler in transaction mode: notifications sent to it \
                          never arrive; give a direct connection in db-uri-direct";
            match needs {
                // At start-up: refuse to serve what could not be kept correct.
                Some(what) if !*connected_before => {
                    tracing::error!("{what} needs LISTEN and a change feed, and {advice}");
                    eprintln!("rowgate: {what} needs LISTEN and a change feed, and {advice}");
                    std::process::exit(1);
                }
                Some(what) => tracing::error!("{what} is off until a direct connection returns: {advice}"),
                None => {
                    if !WARNED.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            "NOTIFY {} reloads will not be heard, and API-key changes only as cached keys \
                             expire (a minute): {advice} (SIGUSR1 still reloads)",
                            config.db.channel
                        );
                    }
                    // Nothing needs it: probe again only now and then.
                    drop(client);
                    let _ = driver.await;
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    return Ok(());
                }
            }
            // Nothing heard here can be trusted: try again later.
            return Ok(());
        }
    };
    if missed {
        reloader.request();
    }
    keys_changed();
    let logical = match &reloader.cache {
        Some(cache) => {
            let logical: bool =
                client.query_one(crate::backend::postgres::changes::feed::MODE_SQL, &[]).await?.get(0);
            cache.logical.store(logical, Ordering::Relaxed);
            if !logical {
                // Notifications carry no WAL positions: one kept from an earlier logical feed
                // would not cover what they report (the talker's flush follows).
                cache.changes.forget_applied();
            }
            logical
        }
        None => false,
    };
    let talker = reloader
        .cache
        .clone()
        .map(|cache| crate::backend::postgres::changes::listener::start(client.clone(), cache));
    let mut talker = AbortOnDrop(talker);
    let realtime = reloader.realtime.as_ref().map(|r| r.feed());
    // One feed for the cache and realtime; if it stops, the listener starts over.
    let feed = reloader.cache.clone().filter(|_| logical).map(|cache| {
        let (pg, realtime) = (reloader.replication.clone(), realtime.clone());
        tokio::spawn(async move {
            let _lost = realtime.clone().map(LostOnDrop);
            if let Err(e) = crate::backend::postgres::changes::feed::run(&pg, Some(cache), realtime).await {
                tracing::warn!(error = %e, "the change feed stopped");
            }
        })
    });
    let mut feed = AbortOnDrop(feed);
    // Realtime's feed alone (the cache is off or uses triggers): it retries by itself.
    let _realtime_feed = AbortOnDrop(realtime.filter(|_| feed.0.is_none()).map(|realtime| {
        let pg = reloader.replication.clone();
        tokio::spawn(async move {
            let mut attempt = 0u32;
            loop {
                let started = std::time::Instant::now();
                let lost = LostOnDrop(realtime.clone());
                if let Err(e) =
                    crate::backend::postgres::changes::feed::run(&pg, None, Some(realtime.clone())).await
                {
                    tracing::warn!(error = %e, "realtime's change feed stopped");
                }
                drop(lost);
                attempt =
                    if started.elapsed() > Duration::from_secs(60) { 0 } else { attempt.saturating_add(1) };
                tokio::time::sleep(
                    Duration::from_millis(250 * 2u64.pow(attempt.min(7))).min(Duration::from_secs(30)),
                )
                .await;
            }
        })
    }));
    if *connected_before && config.db.channel_enabled {
        reloader.request();
    }
    *connected_before = true;
    tracing::info!(channel = %config.db.channel, "listening for notifications");
    loop {
        let talker_ended = async {
            match talker.0.as_mut() {
                Some(handle) => {
                    let _ = handle.await;
                }
                None => std::future::pending().await,
            }
        };
        let feed_ended = async {
            match feed.0.as_mut() {
                Some(handle) => {
                    let _ = handle.await;
                }
                None => std::future::pending().await,
            }
        };
        let (channel, payload) = tokio::select! {
            message = rx.recv() => match message {
                Some(message) => message,
                None => break,
            },
            // Its heartbeats failed while the connection stayed up: without them the cache is
            // bypassed, so start over on a new connection.
            () = talker_ended => {
                talker.0 = None;
                break;
            }
            // The change feed's connection failed: start over (the caller flushes).
            () = feed_ended => {
                feed.0 = None;
                break;
            }
        };
        if channel == crate::cache::CHANNEL {
            // A flush (`*`, already applied by the driver): DDL, grants, policies, cache
            // install/uninstall; what is cacheable may have changed too.
            // `rowgate cache install` may have switched between triggers and logical decoding:
            // then this listener may miss changes from now on, so stop serving before the
            // reload can allow it again, and start over.
            let now: bool =
                client.query_one(crate::backend::postgres::changes::feed::MODE_SQL, &[]).await?.get(0);
            if now != logical {
                if let Some(cache) = &reloader.cache {
                    cache.listener_lost();
                }
                reloader.request();
                break;
            }
            reloader.request();
        } else if channel == super::apikey::CHANNEL {
            keys_changed();
        } else if channel == super::changes::install::REALTIME_CHANNEL {
            // The publication changed: which tables publish.
            reloader.request();
        } else if payload.is_empty() || payload == "reload schema" {
            reloader.request();
        }
    }
    drop(talker);
    drop(feed);
    drop(client);
    match driver.await {
        Ok(result) => result,
        Err(_) => Ok(()),
    }
}

/// Whether the warning that notifications do not arrive was logged.
static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The channel of [`probe`].
const PROBE_CHANNEL: &str = "rowgate_direct_probe";

/// What [`probe`] found.
enum Probe {
    /// Notifications arrive; `missed` says another one arrived meanwhile and was dropped.
    Direct { missed: bool },
    /// They do not: the connection goes through a pooler in transaction mode.
    Pooled,
}

/// Whether notifications reach the listening connection, whose notifications `rx` receives:
/// another connection sends one to [`PROBE_CHANNEL`]. Through a pooler in transaction mode the
/// LISTEN was made by a server session the pooler has since lent to others, so it never arrives.
/// `None` when the listening connection closed meanwhile.
async fn probe(
    pg: &super::PgTarget,
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<(String, String)>,
) -> Result<Option<Probe>, tokio_postgres::Error> {
    // Other instances probe the same channel: this one's notification is the one with its nonce.
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let nonce = format!("{}-{}", std::process::id(), since_epoch.as_nanos());
    let sender = crate::backend::postgres::connect(pg).await?;
    sender.batch_execute(&format!("NOTIFY {PROBE_CHANNEL}, '{nonce}'")).await?;
    drop(sender);
    let mut missed = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some((channel, payload))) if channel == PROBE_CHANNEL => {
                if payload == nonce {
                    return Ok(Some(Probe::Direct { missed }));
                }
            }
            Ok(Some(_)) => missed = true,
            Ok(None) => return Ok(None),
            Err(_) => return Ok(Some(Probe::Pooled)),
        }
    }
}

/// Tells realtime its feed stopped when dropped (the feed's task ended or was aborted).
struct LostOnDrop(crate::realtime::Feed);

impl Drop for LostOnDrop {
    fn drop(&mut self) {
        self.0.lost("the replication connection closed".into());
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(Option<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(t) = &self.0 {
            t.abort();
        }
    }
}
