//! Supabase Auth's (GoTrue's) shapes: its user, session and token claims, its errors
//! (`{"code", "error_code", "msg"}`), and the one place an answer becomes HTTP.

use http::{header, HeaderValue, Response, StatusCode};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::store::{Started, User};
use crate::response::Body;

/// An answer's status, JSON body (`None`: no body) and extra headers.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Option<String>,
    pub headers: Vec<(header::HeaderName, String)>,
}

impl Answer {
    /// 200 with `body`.
    pub fn ok(body: String) -> Answer {
        Answer { status: StatusCode::OK, body: Some(body), headers: Vec::new() }
    }

    /// A status without a body.
    pub fn empty(status: StatusCode) -> Answer {
        Answer { status, body: None, headers: Vec::new() }
    }

    /// The response: JSON when there is a body.
    pub fn into_response(self) -> Response<Body> {
        let has_body = self.body.is_some();
        let mut r = Response::new(self.body.map_or_else(Body::default, Body::from));
        *r.status_mut() = self.status;
        if has_body {
            r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        for (name, value) in self.headers {
            if let Ok(v) = HeaderValue::from_str(&value) {
                r.headers_mut().append(name, v);
            }
        }
        r
    }
}

/// A GoTrue error.
pub fn fail(status: StatusCode, error_code: &str, msg: &str) -> Answer {
    let body = serde_json::json!({"code": status.as_u16(), "error_code": error_code, "msg": msg});
    Answer { status, body: Some(body.to_string()), headers: Vec::new() }
}

pub fn internal() -> Answer {
    fail(StatusCode::INTERNAL_SERVER_ERROR, "unexpected_failure", "Unexpected failure")
}

/// The accounts' store failed: a full disk is 503 with `Retry-After` (as every surface answers
/// it), anything else GoTrue's unexpected failure.
pub fn store_failed(e: crate::error::Error) -> Answer {
    if !e.is_disk_full() {
        return internal();
    }
    let mut answer = fail(StatusCode::SERVICE_UNAVAILABLE, "insufficient_storage", &e.to_string());
    answer.headers.push((http::header::RETRY_AFTER, crate::error::disk::RETRY_AFTER.to_string()));
    answer
}

pub fn bad_json() -> Answer {
    fail(StatusCode::BAD_REQUEST, "bad_json", "Could not parse request body as JSON")
}

pub fn validation(msg: &str) -> Answer {
    fail(StatusCode::BAD_REQUEST, "validation_failed", msg)
}

/// An access token's claims, GoTrue's. Typed rather than a `json!` map: a token refresh is a
/// hot path (s004), and building maps showed in its profile.
#[derive(Serialize)]
pub struct Claims<'a> {
    pub aud: &'a str,
    pub exp: i64,
    pub iat: i64,
    pub sub: &'a str,
    pub email: &'a str,
    pub phone: &'a str,
    pub app_metadata: &'a RawValue,
    pub user_metadata: &'a RawValue,
    pub role: &'a str,
    /// Authenticator assurance level: `aal1` (one factor), `aal2` (a second one too).
    pub aal: &'a str,
    /// How the session was started, most recent first.
    pub amr: &'a [Amr<'a>],
    pub session_id: &'a str,
    pub is_anonymous: bool,
    /// For a session rowgate as an OAuth server issued to an application: the application, and
    /// the scopes its user granted it (space-separated).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<&'a str>,
}

/// One entry of `amr`.
#[derive(Serialize)]
pub struct Amr<'a> {
    pub method: &'a str,
    pub timestamp: i64,
}

/// A session as GoTrue answers it.
#[derive(Serialize)]
pub struct Session<'a> {
    pub access_token: &'a str,
    pub token_type: &'a str,
    pub expires_in: u64,
    pub expires_at: i64,
    pub refresh_token: &'a str,
    pub user: UserJson<'a>,
}

/// A user as GoTrue shows one (its `omitempty` fields left out when empty).
#[derive(Serialize)]
pub struct UserJson<'a> {
    id: &'a str,
    aud: &'a str,
    role: &'a str,
    email: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    email_confirmed_at: Option<&'a str>,
    phone: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    phone_confirmed_at: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    confirmation_sent_at: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    confirmed_at: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    recovery_sent_at: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    new_email: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    email_change_sent_at: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    new_phone: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_sign_in_at: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    invited_at: Option<&'a str>,
    app_metadata: &'a RawValue,
    user_metadata: &'a RawValue,
    identities: Identities<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    factors: Option<&'a RawValue>,
    created_at: &'a str,
    updated_at: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    banned_until: Option<&'a str>,
    is_anonymous: bool,
}

/// The account's identities: its address's and its phone number's own (`email`, `phone`, made
/// from the account itself), then those at OpenID providers (as the store gives them, JSON).
struct Identities<'a> {
    email: Option<Identity<'a>>,
    phone: Option<Identity<'a>>,
    external: &'a str,
}

impl Serialize for Identities<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let external: Vec<&RawValue> = serde_json::from_str(self.external).unwrap_or_default();
        let own = usize::from(self.email.is_some()) + usize::from(self.phone.is_some());
        let mut seq = s.serialize_seq(Some(external.len() + own))?;
        for identity in [&self.email, &self.phone].into_iter().flatten() {
            seq.serialize_element(identity)?;
        }
        for identity in external {
            seq.serialize_element(identity)?;
        }
        seq.end()
    }
}

/// The identity an address or a phone number gives (`email`, `phone`), kept with the account
/// itself.
#[derive(Serialize)]
struct Identity<'a> {
    identity_id: &'a str,
    id: &'a str,
    user_id: &'a str,
    identity_data: IdentityData<'a>,
    provider: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_sign_in_at: Option<&'a str>,
    created_at: &'a str,
    updated_at: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    email: &'a str,
}

#[derive(Serialize)]
struct IdentityData<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    email: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    phone: Option<&'a str>,
    email_verified: bool,
    phone_verified: bool,
    sub: &'a str,
}

/// `{}`, for metadata that is not a JSON object (it always is, as stored).
fn object(text: &str) -> &RawValue {
    serde_json::from_str::<&RawValue>(text)
        .ok()
        .filter(|v| v.get().starts_with('{'))
        .unwrap_or_else(|| serde_json::from_str("{}").expect("{} is JSON"))
}

impl<'a> UserJson<'a> {
    pub fn of(u: &'a User) -> UserJson<'a> {
        let email = u.email.as_deref().unwrap_or("");
        // An account made by a provider has its address from there, not an `email` identity.
        let by_address = serde_json::from_str::<Value>(&u.app_metadata).ok().is_none_or(|app| {
            app.get("providers")
                .and_then(Value::as_array)
                .is_none_or(|list| list.iter().any(|p| p == "email"))
        });
        let email_identity = match (email, by_address) {
            ("", _) | (_, false) => None,
            _ => Some(Identity {
                identity_id: &u.id,
                id: &u.id,
                user_id: &u.id,
                identity_data: IdentityData {
                    email: Some(email),
                    phone: None,
                    email_verified: u.email_verified,
                    phone_verified: false,
                    sub: &u.id,
                },
                provider: "email",
                last_sign_in_at: u.last_sign_in_at.as_deref(),
                created_at: &u.created_at,
                updated_at: &u.updated_at,
                email,
            }),
        };
        // A phone number the user signed up or in with is an identity of its own (GoTrue's
        // `phone` provider); one an administrator merely set is not.
        let by_phone = serde_json::from_str::<Value>(&u.app_metadata).ok().is_some_and(|app| {
            app.get("providers")
                .and_then(Value::as_array)
                .is_some_and(|list| list.iter().any(|p| p == "phone"))
        });
        let phone_identity = match u.phone.as_deref() {
            Some(phone) if by_phone && !phone.is_empty() => Some(Identity {
                identity_id: &u.id,
                id: &u.id,
                user_id: &u.id,
                identity_data: IdentityData {
                    email: None,
                    phone: Some(phone),
                    email_verified: false,
                    phone_verified: u.phone_confirmed_at.is_some(),
                    sub: &u.id,
                },
                provider: "phone",
                last_sign_in_at: u.last_sign_in_at.as_deref(),
                created_at: &u.created_at,
                updated_at: &u.updated_at,
                email: "",
            }),
            _ => None,
        };
        let identities = Identities { email: email_identity, phone: phone_identity, external: &u.identities };
        UserJson {
            id: &u.id,
            aud: "authenticated",
            role: &u.role,
            email,
            email_confirmed_at: u.email_confirmed_at.as_deref(),
            phone: u.phone.as_deref().unwrap_or(""),
            phone_confirmed_at: u.phone_confirmed_at.as_deref(),
            confirmation_sent_at: u.confirmation_sent_at.as_deref(),
            // The earlier of the two (GoTrue's generated column); RFC 3339 text sorts as time.
            confirmed_at: [u.email_confirmed_at.as_deref(), u.phone_confirmed_at.as_deref()]
                .into_iter()
                .flatten()
                .min(),
            recovery_sent_at: u.recovery_sent_at.as_deref(),
            new_email: u.new_email.as_deref(),
            email_change_sent_at: u.email_change_sent_at.as_deref(),
            new_phone: u.new_phone.as_deref(),
            last_sign_in_at: u.last_sign_in_at.as_deref(),
            invited_at: u.invited_at.as_deref(),
            app_metadata: object(&u.app_metadata),
            user_metadata: object(&u.user_metadata),
            identities,
            factors: serde_json::from_str::<&RawValue>(&u.factors).ok().filter(|f| f.get().starts_with("[{")),
            created_at: &u.created_at,
            updated_at: &u.updated_at,
            banned_until: u.banned_until.as_deref(),
            is_anonymous: u.is_anonymous,
        }
    }
}

impl UserJson<'static> {
    /// A user that is no one's, shown where the account of `email` would be (GoTrue's answer
    /// to a sign-up with an address already taken, so no one learns who has signed up).
    pub fn stranger(email: &str) -> Value {
        let now = crate::storage::time::iso(std::time::SystemTime::now());
        serde_json::json!({
            "id": crate::uuid_v4(), "aud": "authenticated", "role": "authenticated", "email": email,
            "phone": "", "confirmation_sent_at": now,
            "app_metadata": {"provider": "email", "providers": ["email"]}, "user_metadata": {},
            "identities": [], "created_at": now, "updated_at": now, "is_anonymous": false,
        })
    }
}

/// The claims of `u`'s access token in the session `started`, how it was started being `amr`.
pub fn claims<'a>(
    u: &'a User,
    aud: &'a str,
    started: &'a Started,
    amr: &'a [Amr<'a>],
    iat: i64,
    exp: i64,
) -> Claims<'a> {
    Claims {
        aud,
        exp,
        iat,
        sub: &u.id,
        email: u.email.as_deref().unwrap_or(""),
        phone: u.phone.as_deref().unwrap_or(""),
        app_metadata: object(&u.app_metadata),
        user_metadata: object(&u.user_metadata),
        role: &u.role,
        aal: &started.aal,
        amr,
        session_id: &started.session_id,
        is_anonymous: u.is_anonymous,
        client_id: started.client.as_ref().map(|c| c.client_id.as_str()),
        scope: started.client.as_ref().map(|c| c.scopes.as_str()),
    }
}

/// How a session was started (GoTrue's `amr`): its sign-in's method, and the second factor
/// first if the session is at `aal2`.
pub fn amr(started: &Started, now: i64) -> Vec<Amr<'_>> {
    let first = Amr { method: &started.method, timestamp: started.signed_in_at };
    match started.aal.as_str() {
        "aal2" => {
            vec![Amr { method: started.second_factor.as_deref().unwrap_or("totp"), timestamp: now }, first]
        }
        _ => vec![first],
    }
}

/// The JSON text of one of the structs above (plain fields and string keys: cannot fail).
pub fn to_json(v: &impl Serialize) -> String {
    serde_json::to_string(v).expect("plain structs serialize")
}
