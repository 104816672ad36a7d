//! Sign-up and sign-in with an address and a password (`POST /signup`, `POST
//! /token?grant_type=password`), and anonymous sign-ups.

use std::net::IpAddr;

use http::StatusCode;
use serde_json::Value;

use super::gotrue::{self, fail, internal, store_failed, validation, Answer};
use super::{
    by_mail, hashing, metadata, store, strong_enough, too_many, unix_now, valid_email, Accounts, MAX_EMAIL,
};

impl Accounts {
    pub(super) async fn signup(
        &self,
        body: &[u8],
        client: IpAddr,
        redirect: Option<&str>,
    ) -> Result<Answer, Answer> {
        if !self.signups.enabled {
            return Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "signup_disabled",
                "Signups not allowed for this instance",
            ));
        }
        let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
        let text = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
        let user_metadata = metadata(v.get("data"))?.unwrap_or_else(|| "{}".into());
        if text("email").is_none() && text("phone").is_none() {
            return self.sign_up_anonymously(user_metadata, client).await;
        }
        let Some(email) = text("email") else {
            return self.sign_up_by_phone(&v, text("phone").unwrap_or(""), user_metadata, client).await;
        };
        let email = valid_email(email)?;
        let password = text("password").ok_or_else(|| validation("Signup requires a valid password"))?;
        strong_enough(password)?;
        // Counted before the password is hashed: the hashing is what a flood would cost.
        if !self.limits.sign_up(client) {
            return Err(too_many("Too many sign-ups from this client: try again later"));
        }
        let hash = self.hashing.hash(password.to_owned()).await.ok_or_else(internal)?;
        let new = store::NewUser {
            id: crate::uuid_v4(),
            email: Some(email),
            password_hash: Some(hash),
            user_metadata,
            app_metadata: r#"{"provider":"email","providers":["email"]}"#.into(),
            // Taken at once (autoconfirm), the address counts as confirmed, as GoTrue's, but not
            // as proved: nothing has shown it is the user's.
            confirmed: self.mail.autoconfirm,
            unproved: self.mail.autoconfirm,
            role: "authenticated".into(),
            ..Default::default()
        };
        self.before_user_created(&new, client).await?;
        if !self.mail.autoconfirm {
            return self.sign_up_by_mail(new, redirect, by_mail::pkce_of(&v)?).await;
        }
        let now = unix_now();
        // The account and its first session commit together.
        let Some((user, Some(started))) = self.store.create(new, true, now).await.map_err(store_failed)?
        else {
            return Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "user_already_exists",
                "User already registered",
            ));
        };
        self.limits.signed_up(client, user.email.as_deref().unwrap_or(""));
        self.session(&user, &started, now).await.map(|s| Answer::ok(s.json))
    }

    async fn sign_up_anonymously(&self, user_metadata: String, client: IpAddr) -> Result<Answer, Answer> {
        if !self.signups.anonymous {
            return Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "anonymous_provider_disabled",
                "Anonymous sign-ins are disabled",
            ));
        }
        if !self.limits.sign_up(client) {
            return Err(too_many("Too many sign-ups from this client: try again later"));
        }
        let new = store::NewUser {
            id: crate::uuid_v4(),
            user_metadata,
            app_metadata: "{}".into(),
            is_anonymous: true,
            role: "authenticated".into(),
            ..Default::default()
        };
        self.before_user_created(&new, client).await?;
        let now = unix_now();
        let Some((user, Some(started))) = self.store.create(new, true, now).await.map_err(store_failed)?
        else {
            return Err(internal());
        };
        self.session(&user, &started, now).await.map(|s| Answer::ok(s.json))
    }

    pub(super) async fn login(&self, body: &[u8], client: IpAddr) -> Result<Answer, Answer> {
        let (login, password) = credentials(body)?;
        let invalid = || fail(StatusCode::BAD_REQUEST, "invalid_credentials", "Invalid login credentials");
        let (email, phone) = match login {
            Login::Email(email) if email.len() > MAX_EMAIL => return Err(invalid()),
            Login::Email(email) => (Some(email), None),
            Login::Phone(phone) => (None, Some(super::admin::valid_phone(&phone).map_err(|_| invalid())?)),
        };
        let who = email.as_deref().or(phone.as_deref()).unwrap_or("").to_lowercase();
        // Counted while its password is checked: parallel guesses cannot all pass the limit
        // before their failures are recorded.
        let Some(mut attempt) = self.limits.attempt(client, &who) else {
            return Err(too_many("Too many failed logins: try again later"));
        };
        let found = match (email, phone) {
            (Some(email), _) => self.store.by_email(email).await,
            (_, phone) => self.store.by_phone(phone.unwrap_or_default()).await,
        }
        .map_err(store_failed)?;
        let hash =
            found.as_ref().and_then(|(_, h)| h.clone()).unwrap_or_else(|| hashing::DUMMY_HASH.to_owned());
        let ok = self.hashing.verify(password, hash).await.unwrap_or(false);
        let Some((user, _)) = found.filter(|(_, h)| ok && h.is_some()) else {
            attempt.outcome = Some(false);
            return Err(invalid());
        };
        attempt.outcome = Some(true);
        drop(attempt);
        if user.is_banned {
            return Err(fail(StatusCode::BAD_REQUEST, "user_banned", "User is banned"));
        }
        if who.contains('@') && !self.mail.autoconfirm && user.email_confirmed_at.is_none() {
            return Err(fail(StatusCode::BAD_REQUEST, "email_not_confirmed", "Email not confirmed"));
        }
        if !who.contains('@') && !self.sms.autoconfirm && user.phone_confirmed_at.is_none() {
            return Err(fail(StatusCode::BAD_REQUEST, "phone_not_confirmed", "Phone not confirmed"));
        }
        self.signed_in(user.id, "password", invalid).await.map(|s| Answer::ok(s.json))
    }
}

/// Who a password login names: an address, or a phone number.
enum Login {
    Email(String),
    Phone(String),
}

fn credentials(body: &[u8]) -> Result<(Login, String), Answer> {
    let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
    let field = |name: &str| v.get(name).and_then(Value::as_str).map(str::to_owned).filter(|s| !s.is_empty());
    match (field("email"), field("phone"), field("password")) {
        (Some(e), _, Some(p)) => Ok((Login::Email(e.trim().to_owned()), p)),
        (None, Some(phone), Some(p)) => Ok((Login::Phone(phone), p)),
        _ => Err(validation("An email address and a password are required")),
    }
}
