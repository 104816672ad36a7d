//! Phoenix channel frames, as Supabase Realtime's clients send and expect them: serializer
//! 1.0.0 (JSON objects `{topic, event, payload, ref, join_ref}`) and 2.0.0 (JSON arrays
//! `[join_ref, ref, topic, event, payload]`, and binary frames for user broadcasts: kind 3 from
//! the client, kind 4 to it). Pure: bytes in, [`Inbound`] out; [`Outbound`] in, a WebSocket
//! message out.

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

/// The serializer a socket asked for with `vsn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vsn {
    /// `1.0.0` (the default when `vsn` is absent, as Phoenix's).
    V1,
    /// `2.0.0`.
    V2,
}

impl Vsn {
    /// The serializer `vsn` names (`None` for one neither Phoenix nor Realtime speaks).
    pub fn parse(vsn: Option<&str>) -> Option<Vsn> {
        match vsn {
            None | Some("1.0.0") => Some(Vsn::V1),
            Some("2.0.0") => Some(Vsn::V2),
            Some(_) => None,
        }
    }
}

/// A user broadcast's own payload.
#[derive(Debug, Clone)]
pub enum BroadcastBody {
    /// JSON (every 1.0.0 broadcast; a 2.0.0 binary frame of encoding 1).
    Json(Box<RawValue>),
    /// Bytes (a 2.0.0 binary frame of encoding 0), which only 2.0.0 sockets can receive.
    Binary(Bytes),
}

/// A message from the client.
#[derive(Debug, Clone)]
pub struct Inbound {
    /// The ref of the channel's join, if sent.
    pub join_ref: Option<String>,
    /// The message's ref, which its reply repeats.
    pub msg_ref: Option<String>,
    /// `phoenix` or `realtime:<name>`.
    pub topic: String,
    /// `phx_join`, `heartbeat`, `broadcast`, ...
    pub event: String,
    /// What it carries.
    pub payload: InPayload,
}

/// An inbound message's payload.
#[derive(Debug, Clone)]
pub enum InPayload {
    /// A JSON payload (every text frame).
    Json(Value),
    /// A 2.0.0 binary user broadcast.
    Broadcast {
        /// The user's event name.
        event: String,
        /// Its payload.
        body: BroadcastBody,
    },
}

/// Why a frame could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed message: {0}")]
pub struct Malformed(pub &'static str);

/// Reads a text frame.
pub fn decode_text(vsn: Vsn, text: &str) -> Result<Inbound, Malformed> {
    let value: Value = serde_json::from_str(text).map_err(|_| Malformed("not JSON"))?;
    let ref_of = |v: Option<&Value>| -> Result<Option<String>, Malformed> {
        match v {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(_) => Err(Malformed("a ref must be a string")),
        }
    };
    let (join_ref, msg_ref, topic, event, payload) = match (vsn, value) {
        (Vsn::V1, Value::Object(mut m)) => (
            ref_of(m.get("join_ref"))?,
            ref_of(m.get("ref"))?,
            m.remove("topic"),
            m.remove("event"),
            m.remove("payload"),
        ),
        (Vsn::V2, Value::Array(a)) if a.len() == 5 => {
            let mut it = a.into_iter();
            let (j, r) = (it.next(), it.next());
            (ref_of(j.as_ref())?, ref_of(r.as_ref())?, it.next(), it.next(), it.next())
        }
        (Vsn::V1, _) => return Err(Malformed("expected an object {topic, event, payload, ref}")),
        (Vsn::V2, _) => return Err(Malformed("expected an array [join_ref, ref, topic, event, payload]")),
    };
    let (Some(Value::String(topic)), Some(Value::String(event))) = (topic, event) else {
        return Err(Malformed("topic and event must be strings"));
    };
    let payload = match payload {
        Some(p @ Value::Object(_)) => p,
        Some(Value::Null) | None => Value::Object(Default::default()),
        Some(_) => return Err(Malformed("payload must be an object")),
    };
    Ok(Inbound { join_ref, msg_ref, topic, event, payload: InPayload::Json(payload) })
}

/// Reads a binary frame: 2.0.0's user broadcast push (kind 3), the only one a client sends.
pub fn decode_binary(data: &[u8]) -> Result<Inbound, Malformed> {
    let short = Malformed("short binary frame");
    let (&kind, rest) = data.split_first().ok_or(short.clone())?;
    if kind != 3 {
        return Err(Malformed("unknown binary frame kind"));
    }
    if rest.len() < 6 {
        return Err(short);
    }
    let lens = [rest[0], rest[1], rest[2], rest[3], rest[4]].map(usize::from);
    let encoding = rest[5];
    let mut at = 6;
    let mut field = |len: usize| -> Result<&[u8], Malformed> {
        let f = rest.get(at..at + len).ok_or(Malformed("short binary frame"))?;
        at += len;
        Ok(f)
    };
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| Malformed("a header field is not UTF-8"));
    let join_ref = text(field(lens[0])?)?;
    let msg_ref = text(field(lens[1])?)?;
    let topic = text(field(lens[2])?)?;
    let event = text(field(lens[3])?)?;
    let _metadata = field(lens[4])?;
    let payload = &rest[at..];
    let body = match encoding {
        0 => BroadcastBody::Binary(Bytes::copy_from_slice(payload)),
        1 => {
            let text = std::str::from_utf8(payload).map_err(|_| Malformed("payload is not UTF-8"))?;
            BroadcastBody::Json(
                RawValue::from_string(text.to_owned()).map_err(|_| Malformed("payload is not JSON"))?,
            )
        }
        _ => return Err(Malformed("unknown payload encoding")),
    };
    let opt = |s: String| (!s.is_empty()).then_some(s);
    Ok(Inbound {
        join_ref: opt(join_ref),
        msg_ref: opt(msg_ref),
        topic,
        event: "broadcast".into(),
        payload: InPayload::Broadcast { event, body },
    })
}

/// A message to a client, encoded with its socket's serializer.
pub enum Outbound<'a> {
    /// The answer to a message (`phx_reply`): `{"status": .., "response": ..}`.
    Reply {
        /// The channel's topic.
        topic: &'a str,
        /// The channel's join ref (2.0.0 carries it).
        join_ref: Option<&'a str>,
        /// The answered message's ref.
        msg_ref: Option<&'a str>,
        /// `ok` or `error`.
        ok: bool,
        /// The response, JSON.
        response: &'a str,
    },
    /// A message the channel pushes (`system`, `presence_state`, ...), its payload JSON.
    Push {
        /// The channel's topic.
        topic: &'a str,
        /// The channel's join ref.
        join_ref: Option<&'a str>,
        /// The event.
        event: &'a str,
        /// The payload, JSON.
        payload: &'a str,
    },
    /// The channel closed (`phx_close`) or failed (`phx_error`): ref is the join ref.
    Lifecycle {
        /// The channel's topic.
        topic: &'a str,
        /// Its join ref.
        join_ref: Option<&'a str>,
        /// `phx_close` or `phx_error`.
        event: &'a str,
    },
    /// A message to every member of a topic, encoded once for all of them (no refs).
    Fanout {
        /// The topic.
        topic: &'a str,
        /// `broadcast`, `postgres_changes`, `presence_diff`.
        event: &'a str,
        /// The payload, JSON.
        payload: &'a str,
    },
    /// A user broadcast: JSON for 1.0.0 sockets, 2.0.0's binary kind 4 for a binary body.
    Broadcast {
        /// The topic.
        topic: &'a str,
        /// The user's event.
        event: &'a str,
        /// Its payload.
        body: &'a BroadcastBody,
    },
}

impl Outbound<'_> {
    /// The WebSocket message for a socket of `vsn`; `None` where the socket cannot take it (a
    /// binary broadcast on a 1.0.0 socket).
    pub fn encode(&self, vsn: Vsn) -> Option<Message> {
        let (join_ref, msg_ref, topic, event, payload): (Option<&str>, Option<&str>, &str, &str, String) =
            match self {
                Outbound::Reply { topic, join_ref, msg_ref, ok, response } => {
                    let status = if *ok { "ok" } else { "error" };
                    let payload = format!(r#"{{"response":{response},"status":"{status}"}}"#);
                    (*join_ref, *msg_ref, topic, "phx_reply", payload)
                }
                Outbound::Push { topic, join_ref, event, payload } => {
                    (*join_ref, None, topic, event, (*payload).to_owned())
                }
                Outbound::Lifecycle { topic, join_ref, event } => {
                    (*join_ref, *join_ref, topic, event, "{}".into())
                }
                Outbound::Fanout { topic, event, payload } => {
                    (None, None, topic, event, (*payload).to_owned())
                }
                Outbound::Broadcast { topic, event, body } => {
                    let payload = match (body, vsn) {
                        (BroadcastBody::Json(json), _) => broadcast_payload(event, json.get()),
                        (BroadcastBody::Binary(bytes), Vsn::V2) => {
                            return Some(Message::Binary(user_broadcast(topic, event, bytes)))
                        }
                        (BroadcastBody::Binary(_), Vsn::V1) => return None,
                    };
                    (None, None, topic, "broadcast", payload)
                }
            };
        let mut out = String::with_capacity(payload.len() + topic.len() + event.len() + 48);
        match vsn {
            Vsn::V1 => {
                // Keys in the order Phoenix's V1 serializer writes them; never a join_ref.
                out.push_str(r#"{"event":"#);
                push_string(&mut out, event);
                out.push_str(r#","payload":"#);
                out.push_str(&payload);
                out.push_str(r#","ref":"#);
                push_opt(&mut out, msg_ref);
                out.push_str(r#","topic":"#);
                push_string(&mut out, topic);
                out.push('}');
            }
            Vsn::V2 => {
                out.push('[');
                push_opt(&mut out, join_ref);
                out.push(',');
                push_opt(&mut out, msg_ref);
                out.push(',');
                push_string(&mut out, topic);
                out.push(',');
                push_string(&mut out, event);
                out.push(',');
                out.push_str(&payload);
                out.push(']');
            }
        }
        Some(Message::text(out))
    }
}

/// A broadcast's payload as receivers get it: `{"event":..,"payload":..,"type":"broadcast"}`.
pub fn broadcast_payload(event: &str, json: &str) -> String {
    let mut p = String::with_capacity(json.len() + event.len() + 48);
    p.push_str(r#"{"event":"#);
    push_string(&mut p, event);
    p.push_str(r#","payload":"#);
    p.push_str(json);
    p.push_str(r#","type":"broadcast"}"#);
    p
}

/// 2.0.0's binary user broadcast to a client (kind 4) with a raw payload. Header fields longer
/// than a byte can count are cut, as the format cannot carry them.
fn user_broadcast(topic: &str, event: &str, payload: &[u8]) -> Bytes {
    let topic = &topic.as_bytes()[..topic.len().min(255)];
    let event = &event.as_bytes()[..event.len().min(255)];
    let mut b = Vec::with_capacity(5 + topic.len() + event.len() + payload.len());
    b.extend_from_slice(&[4, topic.len() as u8, event.len() as u8, 0, 0]);
    b.extend_from_slice(topic);
    b.extend_from_slice(event);
    b.extend_from_slice(payload);
    Bytes::from(b)
}

fn push_opt(out: &mut String, s: Option<&str>) {
    match s {
        Some(s) => push_string(out, s),
        None => out.push_str("null"),
    }
}

/// Appends `s` as a JSON string.
pub fn push_string(out: &mut String, s: &str) {
    // serde_json's escaping; a string always serializes.
    out.push_str(&serde_json::to_string(s).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(m: Message) -> String {
        m.into_text().unwrap().to_string()
    }

    #[test]
    fn version_1_reads_objects_and_writes_them_without_a_join_ref() {
        let m = decode_text(
            Vsn::V1,
            r#"{"topic":"realtime:room1","event":"phx_join","payload":{"config":{}},"ref":"1","join_ref":"1"}"#,
        )
        .unwrap();
        assert_eq!(m.topic, "realtime:room1");
        assert_eq!(m.event, "phx_join");
        assert_eq!(m.join_ref.as_deref(), Some("1"));
        let reply = Outbound::Reply {
            topic: "realtime:room1",
            join_ref: Some("1"),
            msg_ref: Some("1"),
            ok: true,
            response: r#"{"postgres_changes":[]}"#,
        };
        assert_eq!(
            text(reply.encode(Vsn::V1).unwrap()),
            r#"{"event":"phx_reply","payload":{"response":{"postgres_changes":[]},"status":"ok"},"ref":"1","topic":"realtime:room1"}"#
        );
    }

    #[test]
    fn version_2_reads_and_writes_arrays() {
        let m = decode_text(Vsn::V2, r#"[null,"7","phoenix","heartbeat",{}]"#).unwrap();
        assert_eq!((m.join_ref, m.msg_ref.as_deref(), m.event.as_str()), (None, Some("7"), "heartbeat"));
        let close = Outbound::Lifecycle { topic: "realtime:a", join_ref: Some("3"), event: "phx_close" };
        assert_eq!(text(close.encode(Vsn::V2).unwrap()), r#"["3","3","realtime:a","phx_close",{}]"#);
        assert_eq!(
            text(close.encode(Vsn::V1).unwrap()),
            r#"{"event":"phx_close","payload":{},"ref":"3","topic":"realtime:a"}"#
        );
    }

    #[test]
    fn malformed_frames_are_errors_not_panics() {
        for bad in ["", "[", "{}", r#"{"topic":1,"event":"x","payload":{},"ref":null}"#, "[1,2,3]"] {
            assert!(decode_text(Vsn::V1, bad).is_err(), "{bad}");
            assert!(decode_text(Vsn::V2, bad).is_err(), "{bad}");
        }
        assert!(decode_text(Vsn::V1, r#"{"topic":"t","event":"e","payload":[],"ref":"1"}"#).is_err());
        for bad in [&[][..], &[3, 1], &[9, 0, 0, 0, 0, 0, 1], &[3, 5, 0, 0, 0, 0, 1, b'x']] {
            assert!(decode_binary(bad).is_err());
        }
    }

    #[test]
    fn a_binary_broadcast_push_becomes_a_broadcast() {
        let mut frame = vec![3, 1, 1, 14, 6, 0, 1];
        frame.extend_from_slice(b"14realtime:room1cursor{\"x\":1}");
        let m = decode_binary(&frame).unwrap();
        assert_eq!(m.topic, "realtime:room1");
        assert_eq!((m.join_ref.as_deref(), m.msg_ref.as_deref()), (Some("1"), Some("4")));
        let InPayload::Broadcast { event, body } = &m.payload else { panic!() };
        assert_eq!(event, "cursor");
        let out = Outbound::Broadcast { topic: &m.topic, event, body };
        assert_eq!(
            text(out.encode(Vsn::V1).unwrap()),
            r#"{"event":"broadcast","payload":{"event":"cursor","payload":{"x":1},"type":"broadcast"},"ref":null,"topic":"realtime:room1"}"#
        );
        let raw = BroadcastBody::Binary(Bytes::from_static(b"\x01\x02"));
        let out = Outbound::Broadcast { topic: "realtime:r", event: "e", body: &raw };
        assert!(out.encode(Vsn::V1).is_none());
        let Some(Message::Binary(b)) = out.encode(Vsn::V2) else { panic!() };
        assert_eq!(&b[..], b"\x04\x0a\x01\x00\x00realtime:re\x01\x02");
    }
}
