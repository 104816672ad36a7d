//! The `_superusers` auth collection: PocketBase's superusers are the dashboard's
//! administrators (`rowgate superuser upsert`, `rowgate admin create`, the setup link), checked
//! as the dashboard's sign-in checks them. A superuser's token is a JWT of the service role —
//! what an administrator runs as on every door — signed with `jwt-secret`, carrying the claims
//! PocketBase's SDK reads to know a superuser (`type`, `collectionId`).

use std::net::IpAddr;

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use serde_json::{json, Map, Value};

use super::collection::date;
use super::error::PbError;
use super::records::{object, Query};
use super::Context;
use crate::auth::SERVICE_ROLE;
use crate::dashboard::store::Admin;
use crate::dashboard::{AdminSignIn, Dashboard};
use crate::response::Body;

/// The collection's name and PocketBase's id of it.
pub const SUPERUSERS: &str = "_superusers";
pub const SUPERUSERS_ID: &str = "pbc_3142635823";

/// How long a superuser's token lives: PocketBase's default for the collection.
const TOKEN_LIFETIME: u64 = 24 * 3600;

/// Answers `…/collections/_superusers/{rest}`.
pub async fn route(
    cx: &Context<'_>,
    dashboard: &Dashboard,
    method: &Method,
    rest: &[&str],
    body: &Bytes,
    query: &Query,
    client: IpAddr,
) -> Result<Response<Body>, PbError> {
    match (rest, method) {
        (["auth-methods"], &Method::GET) => super::auth::auth_methods(query),
        (["auth-with-password"], &Method::POST) => sign_in(cx, dashboard, body, query, client).await,
        (["auth-refresh"], &Method::POST) => refresh(cx, dashboard, query).await,
        _ => Err(PbError::no_route()),
    }
}

/// `POST …/auth-with-password`: `{identity, password}` → `{record, token}`.
async fn sign_in(
    cx: &Context<'_>,
    dashboard: &Dashboard,
    body: &Bytes,
    query: &Query,
    client: IpAddr,
) -> Result<Response<Body>, PbError> {
    // `dashboard-allowed-ips` bounds where administrators sign in from, on every door.
    if !dashboard.allows(client) {
        return Err(PbError::forbidden("Superusers may not sign in from this address."));
    }
    let given = object(body, super::auth::UNREADABLE)?;
    let (identity, password) = super::auth::credentials(&given)?;
    let signed_in = dashboard.check_admin(identity, password, client).await.map_err(|e| {
        tracing::warn!(error = %e, "a superuser's sign-in could not be checked");
        PbError::invalid("Failed to authenticate.", Map::new())
    })?;
    match signed_in {
        AdminSignIn::Admin(admin) => authenticated(cx, &admin, query),
        AdminSignIn::Wrong => Err(PbError::invalid("Failed to authenticate.", Map::new())),
        AdminSignIn::Wait(_) => {
            Err(PbError::with_status(StatusCode::TOO_MANY_REQUESTS, "Too Many Requests.", String::new()))
        }
    }
}

/// `POST …/auth-refresh`: a new token for a superuser who still is one.
async fn refresh(cx: &Context<'_>, dashboard: &Dashboard, query: &Query) -> Result<Response<Body>, PbError> {
    let unauthorized = PbError::unauthorized;
    let claims = cx.claims().ok_or_else(unauthorized)?;
    if claims["collectionId"] != SUPERUSERS_ID {
        return match claims.get("sub") {
            Some(_) => Err(super::auth::other_collection(super::auth::USERS)),
            None => Err(unauthorized()),
        };
    }
    let email = claims["email"].as_str().ok_or_else(unauthorized)?;
    let admin = dashboard.admin_by_email(email).await.ok().flatten().ok_or_else(unauthorized)?;
    // A token from before the password was replaced is refreshed no more.
    if claims["id"] != admin.id.as_str() || claims["key"] != password_key(&admin) {
        return Err(unauthorized());
    }
    authenticated(cx, &admin, query)
}

/// What a token holds of its superuser's password, which a new password changes: a digest of
/// the stored hash, which tells nothing of the password itself.
fn password_key(admin: &Admin) -> String {
    use sha2::Digest;
    crate::hex(
        &sha2::Sha256::digest(format!("rowgate-superuser-token:{}", admin.password_hash).as_bytes())[..8],
    )
}

/// `{record, token}` for `admin`.
fn authenticated(cx: &Context<'_>, admin: &Admin, query: &Query) -> Result<Response<Body>, PbError> {
    let Some(secret) = cx.config.jwt.hmac_secret() else {
        tracing::warn!("a superuser signed in, but without an HMAC jwt-secret no token can be made for them");
        return Err(PbError::invalid("Failed to authenticate.", Map::new()));
    };
    let now = crate::accounts::store::unix_now() as u64;
    let mut claims = json!({
        "role": SERVICE_ROLE,
        "type": "auth",
        "collectionId": SUPERUSERS_ID,
        "id": admin.id,
        "email": admin.email,
        "refreshable": true,
        "key": password_key(admin),
        "iat": now,
        "exp": now + TOKEN_LIFETIME,
    });
    if let Some(aud) = &cx.config.jwt.aud {
        claims["aud"] = json!(aud);
    }
    let key = jsonwebtoken::EncodingKey::from_secret(&secret);
    let token = jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &key)
        .map_err(|_| PbError::invalid("Failed to authenticate.", Map::new()))?;
    super::auth::signed_in(record(admin), token, query)
}

/// An administrator as a record of `_superusers`.
fn record(admin: &Admin) -> Map<String, Value> {
    let created = date(&admin.created);
    let mut r = Map::new();
    r.insert("collectionId".into(), json!(SUPERUSERS_ID));
    r.insert("collectionName".into(), json!(SUPERUSERS));
    r.insert("created".into(), json!(created));
    r.insert("email".into(), json!(admin.email));
    r.insert("emailVisibility".into(), json!(false));
    r.insert("id".into(), json!(admin.id));
    r.insert("updated".into(), json!(created));
    r.insert("verified".into(), json!(true));
    r
}
