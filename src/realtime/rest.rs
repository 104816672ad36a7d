//! Realtime's HTTP endpoints: the WebSocket upgrade at `/realtime/v1/websocket`, and
//! broadcasting over plain HTTP (`POST /realtime/v1/api/broadcast`, which realtime-js uses
//! for a channel not yet joined, and `.../api/broadcast/:topic/events/:event`, its
//! `httpSend`).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

use super::frame::{BroadcastBody, Vsn};
use super::Realtime;
use crate::auth::Principal;
use crate::response::Body;

/// A client's read buffer: small, since most of a connection's life is idle and its
/// messages are short (a larger message grows it). The WebSocket library zeroes it before every
/// read attempt, which a connection makes each time it wakes to send.
const READ_BUFFER: usize = 1024;

fn answer(status: StatusCode, body: Value) -> Response<Body> {
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json; charset=utf-8"));
    r
}

/// `GET /realtime/v1/websocket?apikey=..&vsn=..`: upgrades to a WebSocket served by
/// `socket::serve` as `principal` (who the socket's credentials make it).
pub fn upgrade(rt: &Arc<Realtime>, mut req: Request<Incoming>, principal: Principal) -> Response<Body> {
    let headers = req.headers();
    let has = |name: header::HeaderName, token: &str| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    };
    let key = headers.get(header::SEC_WEBSOCKET_KEY).cloned();
    let version_ok = headers.get(header::SEC_WEBSOCKET_VERSION).is_some_and(|v| v == "13");
    let (Some(key), true, true, true) =
        (key, has(header::CONNECTION, "upgrade"), has(header::UPGRADE, "websocket"), version_ok)
    else {
        let mut r = answer(
            StatusCode::BAD_REQUEST,
            json!({"error": "This endpoint takes WebSocket connections (Upgrade: websocket, Sec-WebSocket-Version: 13)"}),
        );
        r.headers_mut().insert(header::SEC_WEBSOCKET_VERSION, HeaderValue::from_static("13"));
        return r;
    };
    let vsn = query_value(req.uri().query(), "vsn");
    let Some(vsn) = Vsn::parse(vsn.as_deref()) else {
        return answer(
            StatusCode::BAD_REQUEST,
            json!({"error": "Unsupported serializer version: use vsn 1.0.0 or 2.0.0"}),
        );
    };
    if rt.metrics.connections.load(Ordering::Relaxed) >= rt.max_connections as i64 {
        return answer(StatusCode::SERVICE_UNAVAILABLE, json!({"error": "Too many connected users"}));
    }
    let accept = derive_accept_key(key.as_bytes());
    let on_upgrade = hyper::upgrade::on(&mut req);
    let rt = rt.clone();
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(0)
        .max_write_buffer_size(16 * 1024 * 1024)
        .max_message_size(Some(rt.settings.max_message_size))
        .max_frame_size(Some(rt.settings.max_message_size));
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                let io = hyper_util::rt::TokioIo::new(upgraded);
                let ws =
                    tokio_tungstenite::WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
                rt.metrics.connections.fetch_add(1, Ordering::Relaxed);
                super::socket::serve(rt.clone(), ws, vsn, super::who(principal)).await;
                rt.metrics.connections.fetch_sub(1, Ordering::Relaxed);
            }
            Err(e) => tracing::debug!(error = %e, "realtime: the upgrade failed"),
        }
    });
    let mut r = Response::new(Body::default());
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(v) = HeaderValue::from_str(&accept) {
        h.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    r
}

/// A query parameter's value (percent-decoded).
pub fn query_value(query: Option<&str>, name: &str) -> Option<String> {
    form_urlencoded::parse(query?.as_bytes()).find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
}

/// `POST /realtime/v1/api/broadcast` (`{"messages": [{topic, event, payload, private}]}`) and
/// `POST /realtime/v1/api/broadcast/:topic/events/:event` (the body is the payload): 202, and
/// every member of the topic gets the message. `rest` is the path below `/api/broadcast`.
pub fn broadcast_api(
    rt: &Realtime,
    rest: &str,
    query: Option<&str>,
    content_type: Option<&str>,
    body: Bytes,
) -> Response<Body> {
    let unprocessable = |errors: Value| answer(StatusCode::UNPROCESSABLE_ENTITY, json!({ "errors": errors }));
    if query_value(query, "private").as_deref() == Some("true") {
        return unprocessable(json!({"private": ["rowgate serves public channels only"]}));
    }
    let mut sends: Vec<(String, String, BroadcastBody)> = Vec::new();
    if rest.is_empty() || rest == "/" {
        let Ok(v) = serde_json::from_slice::<Value>(&body) else {
            return unprocessable(json!({"messages": ["is not a JSON object"]}));
        };
        let Some(messages) = v.get("messages").and_then(Value::as_array) else {
            return unprocessable(json!({"messages": ["can't be blank"]}));
        };
        for m in messages {
            let (Some(topic), Some(event), Some(payload)) = (
                m.get("topic").and_then(Value::as_str),
                m.get("event").and_then(Value::as_str),
                m.get("payload").filter(|p| p.is_object()),
            ) else {
                return unprocessable(
                    json!({"messages": [{"topic": "required", "event": "required", "payload": "must be an object"}]}),
                );
            };
            if m.get("private").and_then(Value::as_bool) == Some(true) {
                return unprocessable(
                    json!({"messages": [{"private": "rowgate serves public channels only"}]}),
                );
            }
            let Ok(raw) = serde_json::value::to_raw_value(payload) else { continue };
            sends.push((topic.to_owned(), event.to_owned(), BroadcastBody::Json(raw)));
        }
    } else {
        let parts: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
        let [topic, "events", event] = parts.as_slice() else {
            return answer(StatusCode::NOT_FOUND, json!({"error": "Not found"}));
        };
        let decode = |s: &str| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned();
        let body = match content_type.is_some_and(|c| c.starts_with("application/octet-stream")) {
            true => BroadcastBody::Binary(body),
            false => match std::str::from_utf8(&body)
                .ok()
                .and_then(|t| serde_json::value::RawValue::from_string(t.to_owned()).ok())
            {
                Some(raw) => BroadcastBody::Json(raw),
                None => return unprocessable(json!({"payload": ["is not JSON"]})),
            },
        };
        sends.push((decode(topic), decode(event), body));
    }
    for (topic, event, body) in sends {
        rt.hub.broadcast(&format!("realtime:{topic}"), None, &event, &body);
    }
    let mut r = Response::new(Body::default());
    *r.status_mut() = StatusCode::ACCEPTED;
    r
}
