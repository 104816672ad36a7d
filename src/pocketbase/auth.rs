//! The `users` auth collection, backed by the same accounts as `/auth/v1`: PocketBase's
//! `auth-methods`, `auth-with-password`, `auth-refresh`, sign-up by creating a record, and a
//! user's own record. A token is the accounts' access token, which every door takes; PocketBase's
//! SDK sends it back without `Bearer`.

use std::net::IpAddr;

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use serde_json::{json, Map, Value};

use super::collection::date;
use super::error::{respond, PbError};
use super::fields::Picked;
use super::records::{object, Query};
use super::Context;
use crate::accounts::{Accounts, Asked};
use crate::response::Body;

/// The auth collection's name, as PocketBase's default one.
pub const USERS: &str = "users";

/// PocketBase's id of its default `users` collection.
const USERS_ID: &str = "_pb_users_auth_";

/// PocketBase's bounds on a password's length.
const MIN_PASSWORD: usize = 8;
const MAX_PASSWORD: usize = 71;

/// Answers `…/collections/users/{rest}`.
pub async fn route(
    cx: &Context<'_>,
    accounts: &Accounts,
    method: &Method,
    rest: &[&str],
    body: &Bytes,
    query: &Query,
    client: IpAddr,
) -> Result<Response<Body>, PbError> {
    match (rest, method) {
        (["auth-methods"], &Method::GET) => auth_methods(query),
        (["auth-with-password"], &Method::POST) => sign_in(accounts, body, query, client).await,
        (["auth-refresh"], &Method::POST) => refresh(cx, accounts, query).await,
        (["records"], &Method::POST) => sign_up(accounts, body, query, client).await,
        (["records"], &Method::GET) => {
            // PocketBase's default list rule: `id = @request.auth.id`.
            let own = match caller_id(cx) {
                Some(id) => accounts.account(&id).await,
                None => None,
            };
            let picked = Picked::parse(query.get("fields"))?;
            let items: Vec<Value> =
                own.iter().map(|u| Value::Object(picked.apply(record(u, true)))).collect();
            let total = items.len();
            Ok(respond(
                StatusCode::OK,
                &json!({"items": items, "page": 1, "perPage": 30, "totalItems": total, "totalPages": total.min(1)}),
            ))
        }
        (["records", id], &Method::GET) => {
            if caller_id(cx).as_deref() != Some(*id) {
                return Err(PbError::not_found());
            }
            let user = accounts.account(id).await.ok_or_else(PbError::not_found)?;
            let picked = Picked::parse(query.get("fields"))?;
            Ok(respond(StatusCode::OK, &Value::Object(picked.apply(record(&user, true)))))
        }
        _ => Err(PbError::no_route()),
    }
}

/// `GET …/auth-methods`: passwords by address; no OAuth2, OTP or MFA through this door yet
/// (with the older SDKs' fields PocketBase still sends).
fn methods() -> Value {
    json!({
        "mfa": {"enabled": false, "duration": 0},
        "otp": {"enabled": false, "duration": 0},
        "password": {"enabled": true, "identityFields": ["email"]},
        "oauth2": {"enabled": false, "providers": []},
        "authProviders": [],
        "usernamePassword": false,
        "emailPassword": true
    })
}

/// `GET …/auth-methods`, with `fields` (which PocketBase's SDK sends).
pub(super) fn auth_methods(query: &Query) -> Result<Response<Body>, PbError> {
    let Value::Object(methods) = methods() else { unreachable!("an object") };
    Ok(respond(StatusCode::OK, &Value::Object(Picked::parse(query.get("fields"))?.apply(methods))))
}

/// A body that is not JSON, as PocketBase answers it.
pub(super) const UNREADABLE: &str = "An error occurred while loading the submitted data.";

/// The `identity` and `password` of an `auth-with-password` body, both required.
pub(super) fn credentials(given: &Map<String, Value>) -> Result<(&str, &str), PbError> {
    let text = |k: &str| given.get(k).and_then(Value::as_str).unwrap_or_default();
    let mut errors = Map::new();
    for key in ["identity", "password"] {
        if text(key).is_empty() {
            errors.insert(key.into(), PbError::field("validation_required", "Cannot be blank."));
        }
    }
    if !errors.is_empty() {
        return Err(PbError::invalid("An error occurred while validating the submitted data.", errors));
    }
    Ok((text("identity"), text("password")))
}

/// `POST …/auth-with-password`: `{identity, password}` → `{record, token}`.
async fn sign_in(
    accounts: &Accounts,
    body: &Bytes,
    query: &Query,
    client: IpAddr,
) -> Result<Response<Body>, PbError> {
    let given = object(body, UNREADABLE)?;
    let (email, password) = credentials(&given)?;
    let (status, answer) = accounts.ask(Asked::SignIn { email, password }, client).await;
    match status {
        StatusCode::OK => {
            let token = answer["access_token"].as_str().unwrap_or_default().to_owned();
            signed_in(record(&answer["user"], true), token, query)
        }
        StatusCode::TOO_MANY_REQUESTS => {
            Err(PbError::with_status(status, "Too Many Requests.", String::new()))
        }
        _ => Err(PbError::invalid("Failed to authenticate.", Map::new())),
    }
}

/// `POST …/auth-refresh`: a new token for the caller's live session.
async fn refresh(cx: &Context<'_>, accounts: &Accounts, query: &Query) -> Result<Response<Body>, PbError> {
    let claims = cx.claims().ok_or_else(PbError::unauthorized)?;
    if claims["collectionId"] == super::superusers::SUPERUSERS_ID {
        return Err(other_collection(super::superusers::SUPERUSERS));
    }
    let (token, user) = accounts.reissue(&claims).await.ok_or_else(PbError::unauthorized)?;
    signed_in(record(&user, true), token, query)
}

/// A refresh with the token of another auth collection's record (named), as PocketBase
/// refuses it.
pub(super) fn other_collection(name: &str) -> PbError {
    PbError::with_status(
        StatusCode::FORBIDDEN,
        format!("The request requires auth record from {name} collection."),
        String::new(),
    )
}

/// A sign-up: `POST …/users/records` with `email`, `password`, `passwordConfirm` and `name`.
async fn sign_up(
    accounts: &Accounts,
    body: &Bytes,
    query: &Query,
    client: IpAddr,
) -> Result<Response<Body>, PbError> {
    const REFUSED: &str = "Failed to create record.";
    let given = object(body, REFUSED)?;
    let text = |k: &str| given.get(k).and_then(Value::as_str).unwrap_or_default();
    let mut errors = Map::new();
    let password = text("password");
    if password.is_empty() {
        errors.insert("password".into(), PbError::field("validation_required", "Cannot be blank."));
    } else if password.chars().count() < MIN_PASSWORD {
        errors.insert(
            "password".into(),
            PbError::field("validation_min_text_constraint", "Must be at least 8 character(s)."),
        );
    } else if password.chars().count() > MAX_PASSWORD {
        errors.insert(
            "password".into(),
            PbError::field("validation_max_text_constraint", "Must be no more than 71 character(s)."),
        );
    }
    if text("passwordConfirm") != password {
        errors.insert(
            "passwordConfirm".into(),
            PbError::field("validation_values_mismatch", "Values don't match."),
        );
    }
    if text("email").is_empty() {
        errors.insert("email".into(), PbError::field("validation_required", "Cannot be blank."));
    }
    if !errors.is_empty() {
        return Err(PbError::invalid(REFUSED, errors));
    }
    let data = json!({ "name": text("name") });
    let (status, answer) = accounts.ask(Asked::SignUp { email: text("email"), password, data }, client).await;
    let user = match status {
        // GoTrue answers a session when the address is confirmed at once, else the user.
        StatusCode::OK => answer.get("user").cloned().unwrap_or(answer),
        StatusCode::TOO_MANY_REQUESTS => {
            return Err(PbError::with_status(status, "Too Many Requests.", String::new()));
        }
        _ => {
            let (field, code, message) = match answer["error_code"].as_str() {
                Some("user_already_exists" | "email_exists") => {
                    ("email", "validation_not_unique", "Value must be unique.")
                }
                Some("email_address_invalid" | "validation_failed") => {
                    ("email", "validation_is_email", "Must be a valid email address.")
                }
                _ => ("", "", ""),
            };
            let mut errors = Map::new();
            if !field.is_empty() {
                errors.insert(field.into(), PbError::field(code, message));
            }
            return Err(PbError::invalid(REFUSED, errors));
        }
    };
    let picked = Picked::parse(query.get("fields"))?;
    Ok(respond(StatusCode::OK, &Value::Object(picked.apply(record(&user, false)))))
}

/// `{record, token}`.
/// A sign-in's answer: `{record, token}` of any auth collection, picked by `fields`.
pub(super) fn signed_in(
    record: Map<String, Value>,
    token: String,
    query: &Query,
) -> Result<Response<Body>, PbError> {
    let picked = Picked::parse(query.get("fields"))?;
    let mut answer = Map::new();
    answer.insert("record".into(), Value::Object(record));
    answer.insert("token".into(), Value::String(token));
    Ok(respond(StatusCode::OK, &Value::Object(picked.apply(answer))))
}

/// An account (GoTrue's JSON) as a record of `users`; its address shown to its owner only
/// (`emailVisibility` is false).
fn record(user: &Value, own: bool) -> Map<String, Value> {
    let text = |k: &str| user.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    let name = user.pointer("/user_metadata/name").and_then(Value::as_str).unwrap_or_default();
    let mut r = Map::new();
    r.insert("avatar".into(), json!(""));
    r.insert("collectionId".into(), json!(USERS_ID));
    r.insert("collectionName".into(), json!(USERS));
    r.insert("created".into(), json!(date(&text("created_at"))));
    if own {
        r.insert("email".into(), json!(text("email")));
    }
    r.insert("emailVisibility".into(), json!(false));
    r.insert("id".into(), json!(text("id")));
    r.insert("name".into(), json!(name));
    r.insert("updated".into(), json!(date(&text("updated_at"))));
    r.insert("verified".into(), json!(user.get("email_confirmed_at").is_some_and(|v| !v.is_null())));
    r
}

/// The caller's account id, if a user is signed in.
fn caller_id(cx: &Context<'_>) -> Option<String> {
    cx.claims()?.get("sub")?.as_str().map(str::to_owned)
}
