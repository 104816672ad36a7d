//! Passkeys, as GoTrue serves them (`accounts-passkeys-enabled`): a signed-in user registers
//! one (`POST /passkeys/registration/options`, then `/verify` with what the authenticator made),
//! anyone signs in with one (`POST /passkeys/authentication/options`, then `/verify`: a session
//! whose `amr` says `passkey`), and users list, rename and delete theirs (`/passkeys`,
//! `/passkeys/{id}`; the admin API's `/admin/users/{id}/passkeys`). A ceremony is used once and
//! lives five minutes.

use std::net::IpAddr;

use http::{Method, StatusCode};
use serde_json::{json, Value};

use super::admin::is_uuid;
use super::gotrue::{self, fail, internal, store_failed, validation, Answer};
use super::passkey_store::{Ceremony, NewPasskey, Passkey, PasskeyAdded};
use super::webauthn::{self, Refused};
use super::{unix_now, Accounts, Caller, User};

/// How long a ceremony may be finished (GoTrue's default).
const CEREMONY_EXPIRY: i64 = 300;
/// Passkeys one user may have (GoTrue's default).
const MAX_PASSKEYS: i64 = 10;

fn not_found() -> Answer {
    fail(StatusCode::NOT_FOUND, "validation_failed", "Passkey not found")
}

fn verification_failed(msg: &str) -> Answer {
    fail(StatusCode::BAD_REQUEST, "webauthn_verification_failed", msg)
}

/// GoTrue's listing of a passkey.
fn listed(p: &Passkey) -> Value {
    let mut item = json!({"id": p.id, "created_at": p.created_at});
    if !p.friendly_name.is_empty() {
        item["friendly_name"] = json!(p.friendly_name);
    }
    if let Some(at) = &p.last_used_at {
        item["last_used_at"] = json!(at);
    }
    item
}

/// A verify request's `challenge_id` and `credential` (JSON text).
fn ceremony_answer(body: &[u8]) -> Result<(String, String), Answer> {
    let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
    let challenge = v.get("challenge_id").and_then(Value::as_str).unwrap_or("");
    if challenge.is_empty() {
        return Err(validation("challenge_id is required"));
    }
    let credential =
        v.get("credential").filter(|c| !c.is_null()).ok_or_else(|| validation("credential is required"))?;
    if !is_uuid(challenge) {
        return Err(validation("challenge_id must be a valid UUID"));
    }
    Ok((challenge.to_owned(), credential.to_string()))
}

impl Accounts {
    /// `/passkeys/...`: `rest` after `/passkeys`.
    pub(super) async fn passkeys(
        &self,
        method: &Method,
        rest: &str,
        body: &[u8],
        caller: Result<Caller, Answer>,
        client: IpAddr,
    ) -> Result<Answer, Answer> {
        if !self.passkeys_enabled {
            return Err(fail(StatusCode::NOT_FOUND, "passkey_disabled", "Passkeys are disabled"));
        }
        match (method, rest) {
            (&Method::POST, "/authentication/options") => self.passkey_sign_in_options(client).await,
            (&Method::POST, "/authentication/verify") => self.passkey_sign_in(body).await,
            (&Method::POST, "/registration/options") => self.passkey_registration_options(&caller?).await,
            (&Method::POST, "/registration/verify") => self.passkey_registration(&caller?, body).await,
            (&Method::GET, "") => {
                let user = self.signed_in_user(&caller?).await?;
                self.list_passkeys(&user.id).await
            }
            (&Method::PATCH, id) if id.len() > 1 => {
                let caller = caller?;
                let user = self.managing_passkeys(&caller).await?;
                self.rename_passkey(&user, &id[1..], body).await
            }
            (&Method::DELETE, id) if id.len() > 1 => {
                let caller = caller?;
                let user = self.managing_passkeys(&caller).await?;
                self.delete_passkey(&user.id, &id[1..]).await
            }
            _ => Err(fail(StatusCode::NOT_FOUND, "not_found", "Not found")),
        }
    }

    /// The caller's account, if it may manage its passkeys: with a verified second factor, only
    /// from an `aal2` session.
    async fn managing_passkeys(&self, caller: &Caller) -> Result<User, Answer> {
        let user = self.signed_in_user(caller).await?;
        let factors: Vec<Value> = serde_json::from_str(&user.factors).unwrap_or_default();
        let mfa = factors.iter().any(|f| f["status"] == "verified");
        if mfa && caller.aal.as_deref() != Some("aal2") {
            return Err(fail(
                StatusCode::FORBIDDEN,
                "insufficient_aal",
                "AAL2 session is required to manage passkeys when MFA is enabled",
            ));
        }
        Ok(user)
    }

    /// `POST /passkeys/registration/options`: a registration ceremony for the caller.
    async fn passkey_registration_options(&self, caller: &Caller) -> Result<Answer, Answer> {
        let user = self.managing_passkeys(caller).await?;
        let existing = self.store.passkeys(user.id.clone()).await.map_err(store_failed)?;
        if existing.len() as i64 >= MAX_PASSKEYS {
            return Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "too_many_passkeys",
                "Maximum number of passkeys reached",
            ));
        }
        let credentials: Vec<String> = existing.into_iter().map(|p| p.credential).collect();
        let name = user.email.as_deref().or(user.phone.as_deref()).unwrap_or(&user.id);
        let (state, options) =
            self.relying_party.start_registration(&user.id, name, &credentials, true).ok_or_else(internal)?;
        self.begun(Ceremony::Registration, Some(user.id), state, options).await
    }

    /// `POST /passkeys/authentication/options`: a sign-in ceremony, for anyone.
    async fn passkey_sign_in_options(&self, client: IpAddr) -> Result<Answer, Answer> {
        // Each one is kept until it expires: a client may not begin them without end.
        if !self.limits.ceremony(client) {
            return Err(super::too_many("Too many passkey sign-ins from this client: try again later"));
        }
        let (state, options) = self.relying_party.start_passkey_authentication().ok_or_else(internal)?;
        self.begun(Ceremony::Authentication, None, state, options).await
    }

    /// A ceremony kept, and its options for the client.
    async fn begun(
        &self,
        kind: Ceremony,
        user: Option<String>,
        state: String,
        options: Value,
    ) -> Result<Answer, Answer> {
        let id = crate::uuid_v4();
        let expires_at = unix_now() + CEREMONY_EXPIRY;
        self.store.begin_ceremony(id.clone(), kind, user, state, expires_at).await.map_err(store_failed)?;
        Ok(Answer::ok(json!({"challenge_id": id, "options": options, "expires_at": expires_at}).to_string()))
    }

    /// The ceremony `id` taken: what it kept, if it is there and unexpired.
    async fn taken(&self, id: String, kind: Ceremony, user: Option<String>) -> Result<String, Answer> {
        let (state, expires_at) =
            self.store.take_ceremony(id, kind, user).await.map_err(store_failed)?.ok_or_else(|| {
                fail(
                    StatusCode::BAD_REQUEST,
                    "webauthn_challenge_not_found",
                    "Challenge not found or already used",
                )
            })?;
        if expires_at < unix_now() {
            return Err(fail(StatusCode::BAD_REQUEST, "webauthn_challenge_expired", "Challenge has expired"));
        }
        Ok(state)
    }

    /// `POST /passkeys/registration/verify` `{challenge_id, credential}`: the passkey made.
    async fn passkey_registration(&self, caller: &Caller, body: &[u8]) -> Result<Answer, Answer> {
        let user = self.managing_passkeys(caller).await?;
        let (challenge, answer) = ceremony_answer(body)?;
        let state = self.taken(challenge, Ceremony::Registration, Some(user.id.clone())).await?;
        let credential =
            self.relying_party.finish_registration(&state, &answer).map_err(|refused| match refused {
                Refused::Malformed => verification_failed("Invalid credential response"),
                Refused::Invalid(_) => verification_failed("Credential verification failed"),
            })?;
        let passkey = NewPasskey {
            id: crate::uuid_v4(),
            credential_id: webauthn::credential_id(&credential).ok_or_else(internal)?,
            credential,
            friendly_name: String::new(),
        };
        match self.store.add_passkey(user.id, passkey, MAX_PASSKEYS).await.map_err(store_failed)? {
            // Never used yet, it is listed as GoTrue answers a new one.
            PasskeyAdded::Done(p) => Ok(Answer::ok(listed(&p).to_string())),
            PasskeyAdded::TooMany => Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "too_many_passkeys",
                "Maximum number of passkeys reached",
            )),
            PasskeyAdded::Exists => Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "webauthn_credential_exists",
                "This credential is already registered",
            )),
        }
    }

    /// `POST /passkeys/authentication/verify` `{challenge_id, credential}`: a session.
    async fn passkey_sign_in(&self, body: &[u8]) -> Result<Answer, Answer> {
        let (challenge, answer) = ceremony_answer(body)?;
        let state = self.taken(challenge, Ceremony::Authentication, None).await?;
        let failed = || verification_failed("Credential verification failed");
        let (credential_id, user_id) = webauthn::passkey_answer_names(&answer)
            .map_err(|_| verification_failed("Invalid credential response"))?;
        let passkey = self
            .store
            .passkey_by_credential(credential_id)
            .await
            .map_err(store_failed)?
            .filter(|p| p.user_id == user_id)
            .ok_or_else(failed)?;
        let credential = self
            .relying_party
            .finish_authentication(&state, &answer, &user_id, &passkey.credential, true)
            .map_err(|_| failed())?;
        let user = self.store.user(user_id.clone()).await.map_err(store_failed)?.ok_or_else(failed)?;
        if user.email.is_some() && user.email_confirmed_at.is_none() && !self.mail.autoconfirm {
            return Err(fail(StatusCode::FORBIDDEN, "email_not_confirmed", "Email not confirmed"));
        }
        if user.is_banned {
            return Err(fail(StatusCode::FORBIDDEN, "user_banned", "User is banned"));
        }
        self.store.passkey_used(passkey.id, credential).await.map_err(store_failed)?;
        self.signed_in(user_id, "passkey", failed).await.map(|s| Answer::ok(s.json))
    }

    /// The user's passkeys, as GoTrue lists them (also the admin API's).
    pub(super) async fn list_passkeys(&self, user_id: &str) -> Result<Answer, Answer> {
        let passkeys = self.store.passkeys(user_id.to_owned()).await.map_err(store_failed)?;
        Ok(Answer::ok(Value::Array(passkeys.iter().map(listed).collect()).to_string()))
    }

    /// `PATCH /passkeys/{id}` `{friendly_name}`.
    async fn rename_passkey(&self, user: &User, id: &str, body: &[u8]) -> Result<Answer, Answer> {
        if !is_uuid(id) {
            return Err(not_found());
        }
        let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
        let name = v.get("friendly_name").and_then(Value::as_str).unwrap_or("").trim();
        if name.is_empty() {
            return Err(validation("friendly_name is required"));
        }
        if name.chars().count() > 120 {
            return Err(validation("friendly_name must be 120 characters or less"));
        }
        let renamed = self
            .store
            .rename_passkey(user.id.clone(), id.to_owned(), name.to_owned())
            .await
            .map_err(store_failed)?
            .ok_or_else(not_found)?;
        Ok(Answer::ok(listed(&renamed).to_string()))
    }

    /// `DELETE /passkeys/{id}` (also the admin API's): 204.
    pub(super) async fn delete_passkey(&self, user_id: &str, id: &str) -> Result<Answer, Answer> {
        if !is_uuid(id) {
            return Err(not_found());
        }
        match self.store.delete_passkey(user_id.to_owned(), id.to_owned()).await.map_err(store_failed)? {
            true => Ok(Answer::empty(StatusCode::NO_CONTENT)),
            false => Err(not_found()),
        }
    }
}
