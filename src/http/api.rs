//! The API pipeline, on one screen: the caller (token or key) and its rate limits → the
//! response cache → `ApiRequest` → `Plan` → the backend → the response. Every step's error
//! converts into [`Error`], which becomes a response in one place (`response::error_response`).

use bytes::Bytes;
use http::{header, HeaderName, HeaderValue, Request, Response};
use hyper::body::Incoming;
use rowgate_request::Method;

use super::cached::{self, Cacheable, Lookup};
use super::context::RequestContext;
use super::AppState;
use crate::backend::{Caller, Current};
use crate::config::Config;
use crate::error::{code, Error};
use crate::plan::Plan;
use crate::response::{not_modified, rest, Body};

/// Answers one API request.
pub async fn api(state: &AppState, req: Request<Incoming>) -> Result<Response<Body>, Error> {
    let config = &*state.config;
    let mut timing = config.server.timing_enabled.then(ServerTiming::start);
    within_limits(config, &req)?;
    let (parts, incoming) = req.into_parts();
    let principal = super::identify::admit(state, &parts.headers).await?;
    ServerTiming::mark(&mut timing, "jwt");
    let missed = match cached::lookup(state, &parts, &principal).await {
        Lookup::Hit(answer) => return Ok(not_modified(&parts.headers, answer)),
        Lookup::Miss(missed) => Some(missed),
        Lookup::Skipped => None,
    };
    let ctx = RequestContext::new(&parts)?;
    let request = ctx.parse()?;
    ServerTiming::mark(&mut timing, "parse");
    let body = match request.method {
        Method::Post | Method::Patch | Method::Put => {
            read_body(incoming, config.server.max_body_size, config.server.read_timeout).await?
        }
        _ => Bytes::new(),
    };
    let schema = state.schema.load().ok_or_else(|| {
        Error::api(
            code::SCHEMA_CACHE_NOT_READY,
            "Could not query the database for the schema cache. Retrying.",
        )
    })?;
    let info = ctx.info();
    // Only replicas tell one position from another.
    let written_at = (!config.db.uri_read_replicas.is_empty())
        .then(|| crate::response::read_your_writes::since(info.headers))
        .flatten();
    let mut caller = Caller {
        principal: &principal,
        request: info,
        schema: &schema,
        current: Current::Lagging,
        written_at,
    };
    let plan = Plan::build(&request, &body, &schema, config)?;
    // OPTIONS plans and runs nothing: its timing has no plan or transaction, as PostgREST's.
    if !matches!(plan, Plan::Options(_)) {
        ServerTiming::mark(&mut timing, "plan");
    }
    let response = match plan {
        Plan::Read(plan) => {
            let route = parts.uri.path().trim_start_matches('/');
            let cacheable = cached::cacheable(missed, route, &plan, &schema);
            caller.current = cacheable.as_ref().map_or(Current::Lagging, Cacheable::current);
            let outcome = state.backend.read(&plan, &caller).await;
            ServerTiming::mark(&mut timing, "transaction");
            // An answer that may lag the primary would be stored as current after changes it lacks.
            let cacheable = cacheable.filter(|_| outcome.as_ref().is_ok_and(|o| !o.may_lag));
            let answer = outcome.and_then(|o| rest::read(config, &plan, parts.uri.query().unwrap_or(""), o));
            match plan.transaction.is_none() && plan.explain.is_none() {
                true => answer.map(|r| cached::remember(state, route, cacheable, r)),
                // POST /rpc and plans: never cached.
                false => answer,
            }
        }
        Plan::Mutate(plan) => {
            // Shared with the write's own task, and read again for the answer.
            let plan = std::sync::Arc::new(plan);
            let outcome = state.backend.write(plan.clone(), &caller).await;
            ServerTiming::mark(&mut timing, "transaction");
            outcome.and_then(|o| rest::write(config, &plan, o))
        }
        Plan::Describe(plan) => {
            let mounted = parts.extensions.get::<super::MountedAt>().map_or("", |m| m.0.as_str());
            let answer = describe(state, &plan, &principal, &schema, mounted).await;
            ServerTiming::mark(&mut timing, "transaction");
            answer
        }
        Plan::Options(allow) => {
            let mut r = Response::new(Body::default());
            r.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
            Ok(r)
        }
    };
    if let Err(Error::SchemaChanged) = response {
        state.backend.reload_schema();
    }
    let mut response = not_modified(&parts.headers, response?);
    let legacy = crate::plan::legacy_target_names(&request);
    if !legacy.is_empty() {
        response.headers_mut().insert(header::WARNING, legacy_warning(&legacy));
    }
    ServerTiming::mark(&mut timing, "response");
    if let Some(timing) = timing {
        response.headers_mut().insert(HeaderName::from_static("server-timing"), timing.header());
    }
    Ok(response)
}

/// `GET /`: the schema described as the caller may use it (by its grants, or SQLite's rules),
/// unless `openapi-mode = ignore-privileges`.
async fn describe(
    state: &AppState,
    plan: &crate::plan::DescribePlan,
    principal: &crate::auth::Principal,
    schema: &crate::schema::SchemaCache,
    mounted: &str,
) -> Result<Response<Body>, Error> {
    use crate::openapi;
    let config = &*state.config;
    let usable = match openapi::follows_privileges(config) {
        true => Some(state.backend.usable(principal, &plan.schema, schema).await?),
        false => None,
    };
    let api = openapi::Api::new(
        schema,
        &plan.schema,
        usable.as_ref(),
        openapi::server(config, mounted),
        config.openapi.security_active,
    );
    let document = (!plan.head).then(|| openapi::render(&api, plan));
    let mut response = openapi::respond(plan, document.as_ref());
    if let Some(p) =
        crate::response::profile(config, &plan.schema).and_then(|p| HeaderValue::from_str(&p).ok())
    {
        response.headers_mut().insert("content-profile", p);
    }
    Ok(response)
}

/// PostgREST 16's deprecation warning for filters, orders and limits that name aliased embeds
/// by their relation's name.
fn legacy_warning(names: &[(String, String)]) -> HeaderValue {
    let updates: Vec<String> = names.iter().map(|(name, alias)| format!("`{name}` to `{alias}`")).collect();
    let text = format!(
        "299 rowgate \"Embedded resource was referenced by relation name even though it has an alias. \
         This is deprecated and will stop working in a future release. Update {} in query string filters, \
         orders or limits.\"",
        updates.join(", ")
    );
    HeaderValue::from_str(&text)
        .unwrap_or_else(|_| HeaderValue::from_static("299 rowgate \"deprecated target name\""))
}

/// `server-timing-enabled`: how long each stage of a request took, in PostgREST's
/// `Server-Timing` names.
struct ServerTiming {
    last: std::time::Instant,
    stages: Vec<(&'static str, std::time::Duration)>,
}

impl ServerTiming {
    fn start() -> ServerTiming {
        ServerTiming { last: std::time::Instant::now(), stages: Vec::with_capacity(5) }
    }

    fn mark(timing: &mut Option<ServerTiming>, stage: &'static str) {
        if let Some(t) = timing {
            let now = std::time::Instant::now();
            t.stages.push((stage, now - t.last));
            t.last = now;
        }
    }

    fn header(&self) -> HeaderValue {
        let stages: Vec<String> = self
            .stages
            .iter()
            .map(|(name, took)| format!("{name};dur={:.1}", took.as_secs_f64() * 1000.0))
            .collect();
        HeaderValue::from_str(&stages.join(", ")).unwrap_or_else(|_| HeaderValue::from_static(""))
    }
}

/// 414 for a request target longer than `server-max-url-length`, 413 for a body declared
/// larger than `server-max-body-size` (before any of it is read).
fn within_limits(config: &Config, req: &Request<Incoming>) -> Result<(), Error> {
    let target_len = req.uri().path_and_query().map_or(0, |pq| pq.as_str().len());
    if target_len > config.server.max_url_length {
        return Err(Error::api(
            code::URL_TOO_LONG,
            format!("The URL is longer than server-max-url-length ({} bytes)", config.server.max_url_length),
        ));
    }
    let declared_body = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .unwrap_or(0);
    if declared_body > config.server.max_body_size as u64 {
        return Err(body_too_large(config.server.max_body_size));
    }
    Ok(())
}

/// Reads a request body of at most `limit` bytes (413 beyond it) within `timeout` (408).
pub async fn read_body(
    incoming: Incoming,
    limit: usize,
    timeout: std::time::Duration,
) -> Result<Bytes, Error> {
    use http_body_util::{BodyExt, LengthLimitError, Limited};
    let read =
        tokio::time::timeout(timeout, Limited::new(incoming, limit).collect()).await.map_err(|_| {
            Error::api(
                code::READ_TIMEOUT,
                format!(
                    "The request body did not arrive within server-read-timeout ({} s)",
                    timeout.as_secs()
                ),
            )
        })?;
    match read {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => Err(body_too_large(limit)),
        Err(e) => Err(Error::api(code::BODY_UNREADABLE, format!("The request body could not be read: {e}"))),
    }
}

fn body_too_large(limit: usize) -> Error {
    Error::api(
        code::BODY_TOO_LARGE,
        format!("The request body is larger than server-max-body-size ({limit} bytes)"),
    )
}
