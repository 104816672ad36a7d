//! `/api/realtime`: PocketBase's server-sent events, over the same realtime engine and change
//! feed as Supabase's `/realtime/v1`. `GET` opens a stream and names it (`PB_CONNECT`); `POST`
//! sets its subscriptions — `posts/*` (or `posts`) a collection's records, `posts/{id}` one — and,
//! the first time, whom it acts for. Each change goes to a subscriber only as a read by it
//! would return the record (the access rules, row-level security), written as PocketBase's
//! event `{"record", "action"}`. A stream that falls behind, or has had nothing to send for
//! five minutes, is ended; PocketBase's SDK connects again and subscribes anew.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use http::{header, HeaderValue, Response, StatusCode};
use serde_json::{json, Map, Value};
use tokio_tungstenite::tungstenite::Message;

use super::collection::Collection;
use super::error::PbError;
use super::fields::Picked;
use super::records::{object, random_text};
use crate::auth::Principal;
use crate::realtime::{ChangeWriter, DoorSubscription, Kind, Outbox, Realtime};
use crate::response::Body;
use crate::schema::{QualifiedName, SchemaCache, SharedSchema};

/// A stream with nothing to send for this long is ended (PocketBase's idle timeout).
const IDLE: Duration = Duration::from_secs(5 * 60);

/// PocketBase's bounds on a `POST`: subscriptions, and the length of each.
const MAX_SUBSCRIPTIONS: usize = 1000;
const MAX_TOPIC: usize = 2500;

/// The open streams of this server, by client id.
#[derive(Default)]
pub struct Clients(Mutex<HashMap<String, Arc<Client>>>);

/// One stream.
pub struct Client {
    outbox: Arc<Outbox>,
    state: Mutex<ClientState>,
}

#[derive(Default)]
struct ClientState {
    /// Whom it acts for, set by the first `POST` that signed in (role, and `sub` or a
    /// superuser's `id`): later ones must be the same caller, signed in.
    who: Option<(Arc<str>, String)>,
    /// Its subscriptions (the engine's topics).
    topics: Vec<Arc<str>>,
    /// The stream has ended: a `POST` that found it just before takes nothing more.
    ended: bool,
}

/// Ends a stream's subscriptions when hyper drops its body (the client went, or it ended).
struct Gone {
    rt: Arc<Realtime>,
    clients: Arc<Clients>,
    id: String,
}

impl Drop for Gone {
    fn drop(&mut self) {
        let client = self.clients.0.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.id);
        if let Some(client) = client {
            let mut state = client.state.lock().unwrap_or_else(|e| e.into_inner());
            state.ended = true;
            self.rt.close_door(client.outbox.id, std::mem::take(&mut state.topics).into_iter());
        }
    }
}

/// `GET /api/realtime`: a new stream, its first event `PB_CONNECT` with its client id.
pub fn connect(rt: &Arc<Realtime>, clients: &Arc<Clients>) -> Result<Response<Body>, PbError> {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let id = random_text(ALNUM, 40);
    let door = rt.open_door().ok_or_else(|| {
        PbError::with_status(StatusCode::SERVICE_UNAVAILABLE, "Too many realtime connections.", String::new())
    })?;
    let (outbox, queue) = (door.outbox, door.queue);
    let client = Arc::new(Client { outbox: outbox.clone(), state: Mutex::default() });
    clients.0.lock().unwrap_or_else(|e| e.into_inner()).insert(id.clone(), client);
    let gone = Gone { rt: rt.clone(), clients: clients.clone(), id: id.clone() };
    let hello = event(&id, "PB_CONNECT", &json!({ "clientId": id }).to_string());
    let events = stream::unfold((queue, outbox, gone), |(mut queue, outbox, gone)| async move {
        let next = tokio::select! {
            // One that fell behind is ended before anything else is sent.
            biased;
            () = outbox.wake.notified() => None,
            m = queue.recv() => m,
            () = tokio::time::sleep(IDLE) => None,
        };
        match next? {
            Message::Text(t) => Some((Ok(Bytes::from(t.as_str().to_owned())), (queue, outbox, gone))),
            _ => Some((Ok(Bytes::new()), (queue, outbox, gone))),
        }
    });
    let body = stream::once(async move { Ok(Bytes::from(hello)) }).chain(events);
    let mut r = Response::new(Body::Open(Box::pin(body)));
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(r)
}

/// `POST /api/realtime` `{clientId, subscriptions}`: replaces the stream's subscriptions.
pub fn subscribe(
    rt: &Arc<Realtime>,
    clients: &Clients,
    schema: &Arc<SharedSchema>,
    exposed: &str,
    principal: &Principal,
    body: &Bytes,
) -> Result<Response<Body>, PbError> {
    let given = object(body, "Something went wrong while processing your request.")?;
    let client_id = given.get("clientId").and_then(Value::as_str).unwrap_or_default();
    let topics: Vec<String> = match given.get("subscriptions") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.iter().map(|t| t.as_str().unwrap_or_default().to_owned()).collect(),
        Some(_) => {
            return Err(invalid(
                "subscriptions",
                json!({"code": "validation_invalid_value", "message": "Invalid value."}),
            ))
        }
    };
    if client_id.is_empty() {
        return Err(invalid("clientId", PbError::field("validation_required", "Cannot be blank.")));
    }
    // PocketBase takes 1000; rowgate holds a stream to `realtime-max-channels`, as a socket.
    let most = MAX_SUBSCRIPTIONS.min(rt.max_subscriptions());
    if topics.len() > most {
        return Err(invalid("subscriptions", too_long(most)));
    }
    if let Some(i) = topics.iter().position(|t| t.len() > MAX_TOPIC) {
        return Err(invalid("subscriptions", json!({ i.to_string(): too_long(MAX_TOPIC) })));
    }
    let client = clients.0.lock().unwrap_or_else(|e| e.into_inner()).get(client_id).cloned();
    let client = client.ok_or_else(|| {
        PbError::with_status(StatusCode::NOT_FOUND, "Missing or invalid client id.", String::new())
    })?;
    let cache = schema.load().ok_or_else(|| PbError::bad_request("the schema cache is not loaded"))?;
    // Each subscription read before any is changed: a refused one changes nothing.
    let mut wanted: Vec<Wanted> = Vec::new();
    for (i, topic) in topics.iter().enumerate() {
        if topic.is_empty() || wanted.iter().any(|w| &*w.topic == topic) {
            continue;
        }
        let refused = |e: String| {
            invalid(
                "subscriptions",
                json!({ i.to_string(): {"code": "validation_invalid_value", "message": e} }),
            )
        };
        // A topic names its events: a line break in it would write lines of its own.
        if topic.contains(['\r', '\n']) {
            return Err(refused("a subscription is one line".into()));
        }
        let (path, options) =
            topic.split_once("?options=").map_or((topic.as_str(), None), |(p, o)| (p, Some(o)));
        let query = options.map(read_options).transpose().map_err(refused)?.unwrap_or_default();
        let text = |key: &str| query.get(key).and_then(Value::as_str).filter(|v| !v.trim().is_empty());
        let picked = Picked::parse(text("fields"))?;
        let (name, record) = match path.split_once('/') {
            None => (path, None),
            Some((name, "*")) => (name, None),
            Some((name, id)) => (name, Some(id.to_owned())),
        };
        // A topic of no collection is kept by PocketBase and never sent to: here, not kept.
        let Some(c) = Collection::named(&cache, exposed, name) else { continue };
        let filter = match text("filter") {
            Some(f) => binding_filter(&c, f).map_err(refused)?,
            None => String::new(),
        };
        let topic = Arc::from(topic.as_str());
        wanted.push(Wanted { topic, table: c.relation.name.clone(), record, filter, picked });
    }
    {
        let mut state = client.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.ended {
            return Err(PbError::with_status(
                StatusCode::NOT_FOUND,
                "Missing or invalid client id.",
                String::new(),
            ));
        }
        let who = caller(principal);
        match (&state.who, who) {
            (Some(first), now) if Some(first) != now.as_ref() => {
                return Err(PbError::forbidden(
                    "The current and the previous request authorization don't match.",
                ));
            }
            (Some(_), _) | (None, None) => {}
            (None, now) => state.who = now,
        }
        for topic in std::mem::take(&mut state.topics) {
            rt.unsubscribe_door(client.outbox.id, &topic);
        }
        for w in wanted {
            let writer = Arc::new(EventWriter {
                client: client_id.to_owned(),
                schema: schema.clone(),
                exposed: exposed.to_owned(),
                picked: w.picked,
                collection: Mutex::new((Weak::new(), None)),
            });
            let asked = DoorSubscription {
                topic: w.topic.clone(),
                who: principal.clone(),
                table: w.table,
                record: w.record.as_deref(),
                filter: &w.filter,
                writer,
            };
            match rt.subscribe_door(&client.outbox, asked) {
                Ok(()) => state.topics.push(w.topic),
                // Made here from a filter that parsed: a failure is rowgate's.
                Err(e) => {
                    tracing::error!(error = %e, topic = %w.topic, "a PocketBase subscription's filter was not taken")
                }
            }
        }
    }
    let mut r = Response::new(Body::default());
    *r.status_mut() = StatusCode::NO_CONTENT;
    Ok(r)
}

/// Who a signed-in caller is, whatever token of theirs they send (a refreshed one too): their
/// role and `sub` (a superuser's `id`); `None` for a visitor.
fn caller(principal: &Principal) -> Option<(Arc<str>, String)> {
    if principal.anonymous {
        return None;
    }
    let claims = super::claims_of(principal).unwrap_or_default();
    let id = claims.get("sub").or_else(|| claims.get("id")).and_then(Value::as_str).unwrap_or_default();
    Some((principal.role.clone(), id.to_owned()))
}

/// A subscription, read.
struct Wanted {
    topic: Arc<str>,
    table: QualifiedName,
    record: Option<String>,
    /// Its `filter` as the engine's binding filter.
    filter: String,
    picked: Picked,
}

/// A subscription's `options` (URL-encoded JSON): its `query` (`fields`, `filter`). An expand
/// is refused rather than ignored: the subscriber would be sent what it did not ask for.
fn read_options(text: &str) -> Result<Map<String, Value>, String> {
    let decoded =
        percent_encoding::percent_decode_str(text).decode_utf8().map_err(|_| "not UTF-8".to_owned())?;
    let options: Value = serde_json::from_str(&decoded).map_err(|_| "the options are not JSON".to_owned())?;
    let query = match options.get("query") {
        Some(Value::Object(q)) => q.clone(),
        _ => Map::new(),
    };
    if query.get("expand").is_some_and(|v| !v.as_str().unwrap_or_default().trim().is_empty()) {
        return Err("rowgate does not expand realtime events yet".into());
    }
    Ok(query)
}

/// A subscription's PocketBase `filter` as the realtime engine's binding filter
/// (`column=op."value"`, each of which must hold): comparisons of the collection's own fields
/// with a value, joined by `&&`. Anything else is refused rather than sent unfiltered.
fn binding_filter(c: &Collection, text: &str) -> Result<String, String> {
    use super::filter::{Filter, Operand, SignOp};
    let unsupported = || {
        format!("rowgate filters realtime events by comparisons of a field with a value joined by &&, not yet by {text:?}")
    };
    let Some(parsed) = super::filter::parse(text).map_err(|e| e.0)? else { return Ok(String::new()) };
    let quoted = |v: &str| format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""));
    let mut conditions = Vec::new();
    let mut pending = vec![&parsed];
    while let Some(f) = pending.pop() {
        let (name, sign, right) = match f {
            Filter::All(all) => {
                pending.extend(all);
                continue;
            }
            Filter::Compare { left: Operand::Identifier(name), sign, right } if !sign.any => {
                (name, sign, right)
            }
            _ => return Err(unsupported()),
        };
        if c.field(name).is_none() {
            return Err(format!("unknown field {name:?}"));
        }
        let condition = match (sign.op, right) {
            (SignOp::Eq, Operand::Identifier(v)) if v == "null" => format!("{name}=is.null"),
            (SignOp::Neq, Operand::Identifier(v)) if v == "null" => format!("{name}=not.is.null"),
            (SignOp::Eq, Operand::Identifier(v)) if v == "true" || v == "false" => format!("{name}=is.{v}"),
            (SignOp::Neq, Operand::Identifier(v)) if v == "true" || v == "false" => {
                format!("{name}=not.is.{v}")
            }
            (op, Operand::Text(v) | Operand::Number(v)) => {
                let op = match op {
                    SignOp::Eq => "eq",
                    SignOp::Neq => "neq",
                    SignOp::Lt => "lt",
                    SignOp::Lte => "lte",
                    SignOp::Gt => "gt",
                    SignOp::Gte => "gte",
                    SignOp::Like | SignOp::NotLike => return Err(unsupported()),
                };
                format!("{name}={op}.{}", quoted(v))
            }
            _ => return Err(unsupported()),
        };
        conditions.push(condition);
    }
    Ok(conditions.join(","))
}

/// Writes a subscription's changes as PocketBase's events.
struct EventWriter {
    client: String,
    schema: Arc<SharedSchema>,
    exposed: String,
    picked: Picked,
    /// The collection as the schema cache's snapshot it was read from shows it: read again only
    /// after a reload, not for every event. (Held weakly, a snapshot's allocation outlives it:
    /// no later snapshot can take its address.)
    collection: Mutex<(Weak<SchemaCache>, Option<Arc<Collection>>)>,
}

impl EventWriter {
    /// The collection of `table` in the schema cache now.
    fn collection(&self, table: &str) -> Option<Arc<Collection>> {
        let cache = self.schema.load()?;
        let mut held = self.collection.lock().unwrap_or_else(|e| e.into_inner());
        let snapshot = Arc::downgrade(&cache);
        if !held.0.ptr_eq(&snapshot) {
            *held = (snapshot, Collection::find(&cache, &self.exposed, table).map(Arc::new));
        }
        held.1.clone()
    }
}

impl ChangeWriter for EventWriter {
    fn write(
        &self,
        topic: &str,
        kind: Kind,
        table: &QualifiedName,
        row: &Map<String, Value>,
    ) -> Option<Message> {
        let c = self.collection(&table.name)?;
        let action = match kind {
            Kind::Insert => "create",
            Kind::Update => "update",
            Kind::Delete => "delete",
        };
        let record = Value::Object(self.picked.apply(c.record(row.clone())));
        let data = json!({ "record": record, "action": action }).to_string();
        Some(Message::text(event(&self.client, topic, &data)))
    }
}

/// One server-sent event.
fn event(id: &str, name: &str, data: &str) -> String {
    format!("id:{id}\nevent:{name}\ndata:{data}\n\n")
}

/// A `POST`'s 400, with what was wrong with `field`.
fn invalid(field: &str, problem: Value) -> PbError {
    let mut data = Map::new();
    data.insert(field.into(), problem);
    PbError::invalid("Something went wrong while processing your request.", data)
}

fn too_long(max: usize) -> Value {
    json!({
        "code": "validation_length_too_long",
        "message": format!("The length must be no more than {max}."),
        "params": {"max": max, "min": 0}
    })
}
