//! Who a request runs as — a bearer token (the user), an API key (the application), or neither
//! (the anonymous role) — and whether it is let in: one identification and one admission for
//! every service (the API, storage, realtime's socket and broadcast, and `/auth/v1`), each
//! service only saying the refusal in its own API's shape. And `GET /rowgate/apikey`, which
//! describes the key a request carries.

use http::{header, HeaderMap, HeaderValue, Response};

use super::AppState;
use crate::auth::Principal;
use crate::error::Error;
use crate::response::Body;

/// The API key a request carries in one of the `api-key-headers`, if any.
pub fn api_key<'h>(state: &AppState, headers: &'h HeaderMap) -> Option<&'h str> {
    state
        .config
        .api_keys
        .headers
        .iter()
        .find_map(|name| headers.get(name).and_then(|v| v.to_str().ok()))
        .map(str::trim)
        .filter(|k| !k.is_empty())
}

/// Who the request runs as, and whether it is let in: [`identify`], then the rate limits of its
/// API key and its role (`rate-limit-api-key`, `rate-limit-roles`). Every service calls this
/// (the client's own limit is checked before anything, for every path).
pub async fn admit(state: &AppState, headers: &HeaderMap) -> Result<Principal, Error> {
    let principal = identify(state, headers).await?;
    state.rate_limits.admit_caller(&principal, api_key(state, headers))?;
    Ok(principal)
}

/// The application calling `/auth/v1`, and whether it is let in: its API key, checked as for
/// any service (and required with `api-key-required`), with the key's and role's rate limits.
/// A user's bearer token is not the caller here: sign-up and login come before one, and the
/// endpoints that take one (`/user`, `/logout`) check it themselves.
pub async fn admit_application(state: &AppState, headers: &HeaderMap) -> Result<(), Error> {
    match application(state, headers).await? {
        Some(principal) => state.rate_limits.admit_caller(&principal, api_key(state, headers)),
        None => Ok(()),
    }
}

/// Who the request runs as. A bearer token identifies the user and wins; an API key identifies
/// the application: it must be valid whenever it is sent (and present with
/// `api-key-required`), and without a token its role and claims are used.
pub async fn identify(state: &AppState, headers: &HeaderMap) -> Result<Principal, Error> {
    if let Some(admin) = dashboard_admin(state, headers).await {
        return admin;
    }
    let authorization = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let key_principal = application(state, headers).await?;
    let has_token = authorization.and_then(crate::auth::bearer_token).is_some_and(|t| !t.is_empty());
    match key_principal {
        Some(p) if !has_token => Ok(p),
        _ => state.auth.authenticate(authorization),
    }
}

/// The dashboard's administrator a request's session names (its cookie and the CSRF token that
/// goes with it), if it carries such a pair: they run as the service role on every service.
pub async fn dashboard_admin(state: &AppState, headers: &HeaderMap) -> Option<Result<Principal, Error>> {
    state.dashboard.as_ref()?.admin(headers).await
}

/// The application a request's API key names, if it carries one: a JWT sent as the key
/// (Supabase's anon and service keys) is verified as a token; a missing key is refused with
/// `api-key-required`.
async fn application(state: &AppState, headers: &HeaderMap) -> Result<Option<Principal>, Error> {
    match api_key(state, headers) {
        Some(key) if key.split('.').count() == 3 && !key.starts_with("rg_") => {
            let p = state.auth.authenticate(Some(&format!("Bearer {key}")))?;
            // A user's own session token is no application's key (`api-key-jwt-roles`).
            if !state.config.api_keys.jwt_role(&p.role) {
                return Err(crate::apikey::forbidden("A token of this role is not an API key"));
            }
            Ok(Some(p))
        }
        Some(key) => Ok(Some(state.keys.verify(key, &*state.backend).await?.principal)),
        None if state.config.api_keys.required => Err(crate::apikey::missing()),
        None => Ok(None),
    }
}

/// Who a realtime socket runs as: its headers, and the `apikey` query parameter browsers send
/// for want of headers on a WebSocket. A JWT there whose role is no API key's (a user's own
/// token, which Supabase's server accepts as the socket's credentials) counts as a bearer token.
pub async fn socket_caller(
    state: &AppState,
    headers: &HeaderMap,
    apikey: Option<&str>,
    csrf: Option<&str>,
) -> Result<Principal, Error> {
    let mut headers = headers.clone();
    // A browser's socket carries no headers of its own: the dashboard's page sends its session's
    // CSRF token in the URL (its cookie rides along as on any request to the server).
    if let Some(csrf) = csrf.and_then(|c| HeaderValue::from_str(c).ok()) {
        headers.insert(crate::dashboard::session::CSRF_HEADER, csrf);
    }
    if let (Some(key), None) = (apikey, api_key(state, &headers)) {
        let role = unverified_role(key);
        let bearer = role.is_some_and(|r| !state.config.api_keys.jwt_role(&r));
        let value = if bearer { format!("Bearer {key}") } else { key.to_owned() };
        let name = match bearer {
            true => Some(header::AUTHORIZATION),
            false => state.config.api_keys.headers.first().cloned(),
        };
        if let (Some(name), Ok(v)) = (name, HeaderValue::from_str(&value)) {
            if !headers.contains_key(&name) {
                headers.insert(name, v);
            }
        }
    }
    admit(state, &headers).await
}

/// The `role` claim of a JWT, read without verifying it (identify verifies).
fn unverified_role(token: &str) -> Option<String> {
    use base64::Engine;
    let mut parts = token.split('.');
    let (_, body, _, None) = (parts.next()?, parts.next()?, parts.next()?, parts.next()) else { return None };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(body.trim_end_matches('=')).ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    claims.get("role").and_then(|r| r.as_str()).map(str::to_owned)
}

/// Who a storage request runs as, admitted as for the API. Without credentials (no
/// `Authorization`, no API key) Supabase's complaint: its routes that run as someone require
/// them (the public and signed routes need none). A token that does not verify is refused with
/// Supabase Storage's messages.
pub async fn storage_caller(state: &AppState, headers: &HeaderMap) -> crate::storage::Caller {
    use crate::storage::error::StorageError;
    let admin = dashboard_admin(state, headers).await;
    if admin.is_none() && !headers.contains_key(header::AUTHORIZATION) && api_key(state, headers).is_none() {
        return Err(StorageError::invalid_request("headers must have required property 'authorization'"));
    }
    let principal = match admin {
        Some(admin) => admin,
        None => admit(state, headers).await,
    };
    let principal = principal.map_err(|e| match e {
        // Supabase Storage's words for a token it refuses.
        Error::JwtExpired => StorageError::access_denied("\"exp\" claim timestamp check failed"),
        Error::JwtSignature => StorageError::access_denied("signature verification failed"),
        Error::Jwt(_) | Error::JwtClaims(_) => StorageError::access_denied("Invalid Compact JWS"),
        Error::Api { code, .. } if code == crate::error::code::NO_ANON_ROLE => {
            StorageError::invalid_request("headers must have required property 'authorization'")
        }
        other => crate::storage::error::from_api(&other),
    })?;
    let sub = serde_json::from_str::<serde_json::Value>(&principal.claims)
        .ok()
        .and_then(|c| c.get("sub").and_then(|s| s.as_str()).map(str::to_owned));
    Ok(crate::storage::store::Who {
        role: principal.role,
        claims: principal.claims,
        sub,
        anonymous: principal.anonymous,
    })
}

/// `GET /rowgate/apikey`: describes the request's API key (401 without one, 403 if invalid).
pub async fn describe_api_key(state: &AppState, headers: &HeaderMap) -> Result<Response<Body>, Error> {
    let key = api_key(state, headers).ok_or_else(crate::apikey::missing)?;
    let k = state.keys.verify(key, &*state.backend).await?;
    let body = serde_json::json!({
        "name": &*k.name,
        "role": &*k.principal.role,
        "expires_at": k.expires_at.map(crate::response::utc_timestamp),
    });
    let mut r = Response::new(Body::from(body.to_string()));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json; charset=utf-8"));
    Ok(r)
}
