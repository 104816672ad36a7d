//! Keeping the schema cache current: a reload on SIGUSR1 and on `NOTIFY <db-channel>` with the
//! payload `reload schema` (or an empty one), each building a new cache beside the old one and
//! swapping it in; requests in flight keep the snapshot they started with.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::poll_fn;
use tokio::sync::Notify;
use tokio_postgres::AsyncMessage;

use crate::config::Config;
use crate::schema::SharedSchema;

/// Reloads the schema cache on demand; reloads asked for while one runs are merged into one.
#[derive(Clone)]
pub struct Reloader {
    config: Arc<Config>,
    /// What the schema is read from and LISTEN connects to: `db-uri-direct`, or `db-uri`.
    target: Arc<super::PgTarget>,
    /// What the change feed connects to: `db-uri-replication`, or as `target`.
    replication: Arc<super::PgTarget>,
    /// The pool, whose connections a reload retires behind a pooler in transaction mode.
    db: super::Db,
    /// The read replicas, told where the primary was when the schema was read.
    replicas: Option<Arc<super::replicas::Replicas>>,
    schema: Arc<SharedSchema>,
    wake: Arc<Notify>,
    cache: Option<Arc<crate::cache::ResponseCache>>,
    realtime: Option<Arc<crate::realtime::Realtime>>,
    /// The statement that calls the pre-request function, if there is one.
    pre_request: Arc<arc_swap::ArcSwapOption<String>>,
}

/// The pre-request function the connecting role's settings name (PostgREST's in-database
/// configuration, `ALTER ROLE .. SET pgrst.db_pre_request`, which overrides the file's): the
/// database's own setting before the role-wide one.
const PRE_REQUEST_IN_DATABASE: &str = "
SELECT substr(c, strpos(c, '=') + 1) FROM pg_catalog.pg_db_role_setting s, unnest(s.setconfig) c
WHERE s.setrole = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)
  AND s.setdatabase IN (0, (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database()))
  AND (c LIKE 'pgrst.db\\_pre\\_request=%' OR c LIKE 'pgrst.pre\\_request=%')
ORDER BY s.setdatabase DESC, c LIKE 'pgrst.db\\_pre\\_request=%' DESC LIMIT 1";

/// `SELECT "schema"."fn"()` for `db-pre-request`'s `schema.fn` (or `fn`, found on the
/// request's search path), as PostgREST calls it.
pub fn pre_request_statement(function: &str) -> String {
    let mut sql = String::from("SELECT ");
    match function.split_once('.') {
        Some((schema, name)) => {
            crate::backend::push_ident(&mut sql, schema);
            sql.push('.');
            crate::backend::push_ident(&mut sql, name);
        }
        None => crate::backend::push_ident(&mut sql, function),
    }
    sql.push_str("()");
    sql
}

/// Where the reloader connects, past any pooler: the schema's reads and LISTEN
/// (`db-uri-direct`, or `db-uri`), and the change feed (`db-uri-replication`, or as those).
pub struct Direct {
    /// `db-uri-direct`, or `db-uri`.
    pub target: Arc<super::PgTarget>,
    /// `db-uri-replication`, or as `target`.
    pub replication: Arc<super::PgTarget>,
}

impl Reloader {
    /// Starts the reload task; it loads the cache at once and retries until it succeeds. Each
    /// load flushes the response `cache`, if any.
    pub fn start(
        config: Arc<Config>,
        direct: Direct,
        db: super::Db,
        replicas: Option<Arc<super::replicas::Replicas>>,
        schema: Arc<SharedSchema>,
        cache: Option<Arc<crate::cache::ResponseCache>>,
        realtime: Option<Arc<crate::realtime::Realtime>>,
    ) -> Reloader {
        let pre_request = config.db_pre_request.as_deref().map(|f| Arc::new(pre_request_statement(f)));
        let reloader = Reloader {
            config,
            target: direct.target,
            replication: direct.replication,
            db,
            replicas,
            schema,
            wake: Arc::new(Notify::new()),
            cache,
            realtime,
            pre_request: Arc::new(arc_swap::ArcSwapOption::new(pre_request)),
        };
        let task = reloader.clone();
        tokio::spawn(async move {
            let mut attempt = 0u32;
            loop {
                match task.load_once().await {
                    Ok(()) => {
                        attempt = 0;
                        task.wake.notified().await;
                        // A burst of notifications (a migration) becomes one reload.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(e) => {
                        task.schema.load_failed();
                        attempt = attempt.saturating_add(1);
                        // A catalog query can fail on an object dropped while it ran (DDL
                        // during a migration): retry soon, then back off.
                        let wait = Duration::from_millis(50 * 2u64.pow(attempt.min(10)));
                        let reason =
                            e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_owned());
                        tracing::error!(error = %reason, retry_in = ?wait, "loading the schema cache failed");
                        tokio::time::sleep(wait.min(Duration::from_secs(32))).await;
                    }
                }
            }
        });
        reloader
    }

    /// The statement that calls the pre-request function, if one is set (in the database or
    /// by `db-pre-request`), as of the last load.
    pub fn pre_request(&self) -> Option<Arc<String>> {
        self.pre_request.load_full()
    }

    /// Asks for a reload.
    pub fn request(&self) {
        if let Some(c) = &self.cache {
            c.reload_requested();
        }
        self.wake.notify_one();
    }

    async fn load_once(&self) -> Result<(), tokio_postgres::Error> {
        let started = std::time::Instant::now();
        let ticket = self.cache.as_ref().map(|c| c.reload_ticket());
        let mut client = crate::backend::postgres::connect(&self.target).await?;
        // PostgREST also reads its options from the role's settings (`db-config`); of those,
        // the pre-request function decides who gets in, so it is read here too. In a
        // transaction, as every statement here, so that a pooler in transaction mode keeps
        // a statement's parse and its execution on one server session.
        // Where the primary is before the catalog is read: replicas serve requests planned with
        // this cache once they have replayed that far (None when db-uri is a standby).
        let position = match &self.replicas {
            Some(_) => client
                .simple_query("SELECT pg_catalog.pg_current_wal_lsn()::text")
                .await
                .ok()
                .and_then(|m| super::first_value(&m))
                .and_then(|t| crate::lsn::parse(&t)),
            None => None,
        };
        let tx = client.build_transaction().read_only(true).start().await?;
        let in_database: Option<String> =
            tx.query_opt(PRE_REQUEST_IN_DATABASE, &[]).await?.map(|row| row.get(0));
        tx.commit().await?;
        let function = in_database.filter(|f| !f.is_empty()).or_else(|| self.config.db_pre_request.clone());
        self.pre_request.store(function.as_deref().map(|f| Arc::new(pre_request_statement(f))));
        let keyed = self.config.cache_key_claims.as_deref();
        let cache = super::introspect::load(&mut client, &self.config.db_schemas, keyed).await?;
        let relations = cache.relations.len();
        let functions = cache.functions.values().map(Vec::len).sum::<usize>();
        if let Some(rt) = &self.realtime {
            let tx = client.build_transaction().read_only(true).start().await?;
            let published = super::changes::install::published(&tx).await?;
            tx.commit().await?;
            rt.set_published(published);
        }
        if let (Some(replicas), Some(lsn)) = (&self.replicas, position) {
            replicas.schema_read_at(lsn);
        }
        self.schema.store_loaded(cache, started.elapsed());
        // Behind a pooler, pooled connections know the types of when they were made.
        self.db.retire();
        if let Some(replicas) = &self.replicas {
            replicas.retire();
        }
        // After the store: an answer planned with the old snapshot started before this flush.
        if let Some(c) = &self.cache {
            c.flush();
            c.reload_done(ticket.unwrap_or_default());
            let nothing_cacheable = relations > 0
                && self.schema.load().is_some_and(|s| {
                    s.dependencies.relations.values().all(|r| matches!(r, crate::schema::Reads::Unbounded))
                });
            c.feed_installed(!nothing_cacheable);
            if nothing_cacheable {
                // An error, so that the default log level shows it: every answer says
                // `X-Cache: bypass` until this is fixed.
                tracing::error!(
                    "cache-enabled, but no exposed table or view can be cached: is the change feed \
                     installed? Run `rowgate cache install --db-uri <a superuser's or the tables' owner's URI>`"
                );
            }
        }
        tracing::info!(relations, functions, elapsed = ?started.elapsed(), "schema cache loaded");
        Ok(())
    }
}

/// Reloads on SIGUSR1.
pub fn spawn_sigusr1(reloader: Reloader) {
    tokio::spawn(async move {
        let Ok(mut signal) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())
        else {
            tracing::error!("cannot listen for SIGUSR1; schema reloads by signal are off");
            return;
        };
        while signal.recv().await.is_some() {
            tracing::info!("SIGUSR1: reloading the schema cache");
            reloader.request();
        }
    });
}

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
    if config.db_channel_enabled {
        listen.push_str(" LISTEN ");
        crate::backend::push_ident(&mut listen, &config.db_channel);
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
                            config.db_channel
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
    if *connected_before && config.db_channel_enabled {
        reloader.request();
    }
    *connected_before = true;
    tracing::info!(channel = %config.db_channel, "listening for notifications");
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
