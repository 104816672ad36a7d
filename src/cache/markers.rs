//! Read-your-writes across instances: a write's COMMIT carries a marker; the writer waits
//! until this instance has received it back and every other running instance has acknowledged
//! it. The instances learn of each other from their heartbeats and goodbyes.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::protocol::Message;
use super::{ResponseCache, CHANNEL, FENCE};

/// Other instances count as running while heard from within this time.
const PEER_TIMEOUT: Duration = Duration::from_secs(3);

/// How long after it starts listening an instance may not know every running instance yet
/// (each sends a heartbeat every [`super::HEARTBEAT`]): its writes wait [`FENCE`] meanwhile.
const PEER_DISCOVERY: Duration = Duration::from_millis(600);

/// Read-your-writes across instances: a write's transaction sends a marker (`x instance n`)
/// on [`CHANNEL`] as it commits, delivered after every change committed before it and with its
/// own. The writer waits until the marker has come back (this instance has received those
/// changes) and every other running instance has acknowledged it (so have they).
#[derive(Default)]
pub(super) struct Markers {
    next: u64,
    /// Writers waiting, by marker number.
    waiting: HashMap<u64, tokio::sync::oneshot::Sender<()>>,
    /// Own markers received back, in the order received (the commit order every instance sees),
    /// with the instances that have yet to acknowledge them.
    pending: VecDeque<(u64, Instant, HashSet<String>)>,
    peers: HashMap<String, Instant>,
    /// Instances that said goodbye: their messages still in flight do not make them peers again.
    gone: HashSet<String>,
    /// When this instance's listener last started listening.
    listening_since: Option<Instant>,
}

impl Markers {
    /// No writer waiting, no instance known; the first marker is number 1.
    pub(super) fn new() -> Markers {
        Markers { next: 1, ..Markers::default() }
    }

    fn complete(&mut self, n: u64) {
        if let Some(writer) = self.waiting.remove(&n) {
            let _ = writer.send(());
        }
    }

    /// Removes `instance` from the markers received up to position `upto` of `pending` and
    /// completes those it was the last to acknowledge.
    fn acknowledged(&mut self, instance: &str, upto: usize) {
        let mut i = 0;
        let mut seen = 0;
        while i < self.pending.len() && seen <= upto {
            seen += 1;
            let waiting = &mut self.pending[i].2;
            waiting.remove(instance);
            if waiting.is_empty() {
                let (n, _, _) = self.pending.remove(i).expect("index checked");
                self.complete(n);
            } else {
                i += 1;
            }
        }
    }
}

/// A write's read-your-writes marker: sent with its COMMIT ([`Marker::sql`]), then waited for.
/// While this instance's listener is not current it sends nothing, and waiting for it is
/// waiting [`FENCE`]: by then every other instance has seen the write or stopped serving.
pub struct Marker {
    cache: Arc<ResponseCache>,
    n: u64,
    done: Option<tokio::sync::oneshot::Receiver<()>>,
    unheard: bool,
}

impl Marker {
    /// The statement to run just before COMMIT, in the write's transaction: it sends the marker
    /// even if the write changed nothing, since what it matched (or not) may be another client's
    /// write that some instance has not received yet; the client must not read older than that.
    pub fn sql(&self) -> Option<String> {
        (!self.unheard).then(|| {
            let marker = Message::Marker { from: self.cache.instance.clone(), n: self.n };
            // (The instance name is rowgate's own hex digits: no quoting needed.)
            let message = format!("'{marker}'");
            if self.cache.logical.load(Ordering::Relaxed) {
                format!("SELECT pg_logical_emit_message(true, '{CHANNEL}', {message})")
            } else {
                format!("SELECT pg_notify('{CHANNEL}', {message})")
            }
        })
    }

    /// Waits until every running instance has received the changes committed with the marker
    /// (at most [`FENCE`]; an instance that takes longer stops serving from memory itself).
    pub async fn wait(mut self) {
        if let Some(done) = self.done.take() {
            let _ = tokio::time::timeout(FENCE, done).await;
        } else if self.unheard {
            tokio::time::sleep(FENCE).await;
        }
    }
}

impl Drop for Marker {
    fn drop(&mut self) {
        let mut markers = self.cache.markers.lock().unwrap_or_else(|e| e.into_inner());
        markers.waiting.remove(&self.n);
    }
}

impl ResponseCache {
    /// Handles another instance's message (or this one's own, come back).
    pub(super) fn instance_message(&self, message: Message) {
        match message {
            Message::Heartbeat { from, micros } if from == self.instance => {
                // A heartbeat from the future is not ours (anyone may NOTIFY this channel).
                if micros <= self.changes.micros() {
                    self.changes
                        .fence
                        .fetch_max(micros.saturating_add(FENCE.as_micros() as u64), Ordering::SeqCst);
                }
            }
            Message::Heartbeat { from, .. } => self.seen(&from),
            Message::Marker { from, n } if from == self.instance => {
                let mut markers = self.markers.lock().unwrap_or_else(|e| e.into_inner());
                let now = Instant::now();
                markers.peers.retain(|_, seen| now.duration_since(*seen) < PEER_TIMEOUT);
                // Writers stop waiting after FENCE: their markers need no acknowledgements.
                while markers.pending.front().is_some_and(|(_, at, _)| now.duration_since(*at) > FENCE) {
                    markers.pending.pop_front();
                }
                let discovered =
                    markers.listening_since.is_some_and(|t| now.duration_since(t) >= PEER_DISCOVERY);
                if !discovered {
                    // Running instances may not have been heard from yet: the writer waits
                    // out FENCE.
                } else if markers.peers.is_empty() {
                    markers.complete(n);
                } else {
                    let peers = markers.peers.keys().cloned().collect();
                    markers.pending.push_back((n, now, peers));
                }
            }
            Message::Marker { from, n } => {
                self.seen(&from);
                // Everything committed up to this marker has been handled: acknowledge.
                let _ = self.outbox.send(Message::Ack { to: from, n, by: self.instance.clone() });
            }
            Message::Goodbye { from } => {
                let mut markers = self.markers.lock().unwrap_or_else(|e| e.into_inner());
                markers.peers.remove(&from);
                if markers.gone.len() > 1000 {
                    markers.gone.clear();
                }
                // Markers waiting only for it are complete.
                let all = markers.pending.len();
                markers.acknowledged(&from, all);
                markers.gone.insert(from);
            }
            Message::Ack { to, n, by } => {
                self.seen(&by);
                if to != self.instance {
                    return;
                }
                let mut markers = self.markers.lock().unwrap_or_else(|e| e.into_inner());
                // An instance receives markers in the same order as this one, so its
                // acknowledgement covers every marker received before this one too.
                if let Some(upto) = markers.pending.iter().position(|(m, _, _)| *m == n) {
                    markers.acknowledged(&by, upto);
                }
            }
            Message::TableChanged(_) | Message::RowsChanged(_) | Message::Flush => {}
        }
    }

    fn seen(&self, instance: &str) {
        if instance == self.instance {
            return;
        }
        let mut markers = self.markers.lock().unwrap_or_else(|e| e.into_inner());
        if !markers.gone.contains(instance) {
            markers.peers.insert(instance.to_owned(), Instant::now());
        }
    }

    /// A marker for a write about to commit (an unheard one while the listener is not current).
    pub fn marker(self: &Arc<Self>) -> Marker {
        if !self.changes.live() {
            return Marker { cache: self.clone(), n: 0, done: None, unheard: true };
        }
        let (writer, done) = tokio::sync::oneshot::channel();
        let mut markers = self.markers.lock().unwrap_or_else(|e| e.into_inner());
        let n = markers.next;
        markers.next += 1;
        markers.waiting.insert(n, writer);
        Marker { cache: self.clone(), n, done: Some(done), unheard: false }
    }

    /// The listener has (re)started listening: which instances run is being learned again.
    pub fn listening(&self) {
        let mut markers = self.markers.lock().unwrap_or_else(|e| e.into_inner());
        markers.listening_since = Some(Instant::now());
    }

    /// Tells the other instances that this one is leaving (they stop waiting for its
    /// acknowledgements), and gives the message a moment to go out.
    pub async fn goodbye(&self) {
        self.changes.fence.store(0, Ordering::SeqCst);
        let _ = self.outbox.send(Message::Goodbye { from: self.instance.clone() });
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    /// Messages to send on [`CHANNEL`] (acknowledgements), for the one task that sends them.
    pub fn outbox(&self) -> Arc<tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<Message>>> {
        self.outbox_rx.clone()
    }

    /// A heartbeat message stamped with the current time.
    pub fn heartbeat(&self) -> Message {
        Message::Heartbeat { from: self.instance.clone(), micros: self.changes.micros() }
    }
}
