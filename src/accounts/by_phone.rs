//! What is done with a phone number, as GoTrue does it, when codes can reach phones (the Send SMS
//! hook or test numbers, `sms`): a sign-up with a number and a password, confirmed by a code
//! texted to it (`POST /signup {phone, password}`, `/verify {type: sms}`); a sign-in by code
//! (`POST /otp {phone}`); a sign-in with the password (`password.rs`); `/resend`; and a number
//! changed by the user (`PUT /user {phone}`, `/verify {type: phone_change}`).

use std::net::IpAddr;

use http::StatusCode;
use serde_json::Value;

use super::admin::valid_phone;
use super::gotrue::{self, fail, internal, store_failed, validation, Answer};
use super::store::{Issued, NewUser, OneTime, User, UserChanges};
use super::{metadata, strong_enough, too_many, unix_now, Accounts};

/// The app metadata of an account made with a phone number.
const BY_PHONE: &str = r#"{"provider":"phone","providers":["phone"]}"#;

impl Accounts {
    /// GoTrue's refusal when no code can reach a phone.
    fn phone_enabled(&self, what: &str) -> Result<(), Answer> {
        match self.texter.enabled() {
            true => Ok(()),
            false => Err(fail(StatusCode::UNPROCESSABLE_ENTITY, "phone_provider_disabled", what)),
        }
    }

    /// Stores a code of `kind` for `user` and texts it to `phone` at `client`'s request;
    /// unless one went out less than `accounts-sms-interval` ago, or the client or the server
    /// has had as many texts sent as it may (checked first: a refused text replaces no code).
    async fn text_code(&self, user: &User, kind: OneTime, phone: &str, client: IpAddr) -> Result<(), Answer> {
        let over =
            || fail(StatusCode::TOO_MANY_REQUESTS, "over_sms_send_rate_limit", "SMS rate limit exceeded");
        if !self.texter.reserve(phone) || !self.limits.text(client) {
            return Err(over());
        }
        let code = self.texter.code_for(phone);
        let new_phone = (kind == OneTime::PhoneChange).then(|| phone.to_owned());
        let interval = self.sms.interval.min(i64::MAX as u64) as i64;
        match self.store.issue(user.id.clone(), kind, code.hash.clone(), new_phone, interval).await {
            Ok(Issued::Stored) => {}
            Ok(Issued::TooSoon(wait)) => {
                return Err(fail(
                    StatusCode::TOO_MANY_REQUESTS,
                    "over_sms_send_rate_limit",
                    &format!("For security purposes, you can only request this after {wait} seconds."),
                ))
            }
            Ok(Issued::NotFound) | Err(_) => return Err(internal()),
        }
        let sms_type = match kind {
            OneTime::PhoneChange => "phone_change",
            _ => "confirmation",
        };
        // Why is the operator's to read (the hook's address, its answer), not the client's.
        self.texter.send(user, phone, &code.otp, sms_type).await.map_err(|why| {
            tracing::warn!(%why, "an SMS code could not be sent");
            fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "sms_send_failed",
                &format!("Error sending {sms_type} OTP to provider"),
            )
        })
    }

    /// `POST /signup {phone, password, data}`: an account with a number, confirmed by a code
    /// texted to it (or at once with `accounts-sms-autoconfirm`, then with a session). A number
    /// already confirmed answers as GoTrue does: 422 with autoconfirm, else a user that is not
    /// the account's; an unconfirmed one is sent its code again.
    pub(super) async fn sign_up_by_phone(
        &self,
        v: &Value,
        phone: &str,
        user_metadata: String,
        client: IpAddr,
    ) -> Result<Answer, Answer> {
        self.phone_enabled("Phone signups are disabled")?;
        let phone = valid_phone(phone)?;
        let asked: Value = serde_json::from_str(&user_metadata).unwrap_or_default();
        let password = v
            .get("password")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
            .ok_or_else(|| validation("Signup requires a valid password"))?;
        strong_enough(password)?;
        if !self.limits.sign_up(client) {
            return Err(too_many("Too many sign-ups from this client: try again later"));
        }
        if let Some((user, _)) = self.store.by_phone(phone.clone()).await.map_err(store_failed)? {
            return self.signed_up_again(&user, &phone, asked.clone(), client).await;
        }
        let hash = self.hashing.hash(password.to_owned()).await.ok_or_else(internal)?;
        let autoconfirm = self.sms.autoconfirm;
        let new = NewUser {
            id: crate::uuid_v4(),
            phone: Some(phone.clone()),
            password_hash: Some(hash),
            user_metadata,
            app_metadata: BY_PHONE.into(),
            phone_confirmed: autoconfirm,
            role: "authenticated".into(),
            ..Default::default()
        };
        self.before_user_created(&new, client).await?;
        let now = unix_now();
        let Some((user, started)) = self.store.create(new, autoconfirm, now).await.map_err(store_failed)?
        else {
            // Raced by another sign-up of the number.
            let taken = self.store.by_phone(phone.clone()).await.map_err(store_failed)?;
            let (user, _) = taken.ok_or_else(internal)?;
            return self.signed_up_again(&user, &phone, asked.clone(), client).await;
        };
        match started {
            Some(started) => self.session(&user, &started, now).await.map(|s| Answer::ok(s.json)),
            None => {
                self.text_code(&user, OneTime::PhoneConfirmation, &phone, client).await?;
                let user = self.store.user(user.id).await.map_err(store_failed)?.ok_or_else(internal)?;
                Ok(Answer::ok(gotrue::to_json(&gotrue::UserJson::of(&user))))
            }
        }
    }

    /// A sign-up with a number an account has: GoTrue's answers, which tell no one whether the
    /// number has signed up unless numbers are taken without a code.
    async fn signed_up_again(
        &self,
        user: &User,
        phone: &str,
        user_metadata: Value,
        client: IpAddr,
    ) -> Result<Answer, Answer> {
        if user.phone_confirmed_at.is_none() {
            self.text_code(user, OneTime::PhoneConfirmation, phone, client).await?;
            return Ok(Answer::ok(gotrue::to_json(&gotrue::UserJson::of(user))));
        }
        if self.sms.autoconfirm || self.mail.autoconfirm {
            return Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "user_already_exists",
                "User already registered",
            ));
        }
        // What a new number's sign-up answers, of an account that is not there.
        let mut stranger = gotrue::UserJson::stranger("");
        stranger["phone"] = Value::from(phone);
        stranger["app_metadata"] = serde_json::json!({"provider": "phone", "providers": ["phone"]});
        stranger["user_metadata"] = user_metadata;
        Ok(Answer::ok(stranger.to_string()))
    }

    /// `POST /otp {phone, create_user, data}`: a code texted to sign in with; an unknown (or
    /// unconfirmed) number signs up first (unless `create_user` is false, or sign-ups are off).
    pub(super) async fn sms_otp(&self, v: &Value, phone: &str, client: IpAddr) -> Result<Answer, Answer> {
        self.phone_enabled("Unsupported phone provider")?;
        let phone = valid_phone(phone)?;
        let found = self.store.by_phone(phone.clone()).await.map_err(store_failed)?.map(|(u, _)| u);
        let user = match found {
            Some(user) => user,
            None => {
                let create = v.get("create_user").and_then(Value::as_bool).unwrap_or(true);
                if !self.signups.enabled || !create {
                    return Err(fail(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "otp_disabled",
                        "Signups not allowed for otp",
                    ));
                }
                if !self.limits.sign_up(client) {
                    return Err(too_many("Too many sign-ups from this client: try again later"));
                }
                let new = NewUser {
                    id: crate::uuid_v4(),
                    phone: Some(phone.clone()),
                    user_metadata: metadata(v.get("data"))?.unwrap_or_else(|| "{}".into()),
                    app_metadata: BY_PHONE.into(),
                    role: "authenticated".into(),
                    ..Default::default()
                };
                self.before_user_created(&new, client).await?;
                match self.store.create(new, false, unix_now()).await.map_err(store_failed)? {
                    Some((user, _)) => user,
                    // Raced by another sign-up of the number: it is that account's code.
                    None => {
                        self.store
                            .by_phone(phone.clone())
                            .await
                            .map_err(store_failed)?
                            .ok_or_else(internal)?
                            .0
                    }
                }
            }
        };
        if user.is_banned {
            return Err(fail(StatusCode::FORBIDDEN, "user_banned", "User is banned"));
        }
        self.text_code(&user, OneTime::PhoneConfirmation, &phone, client).await?;
        Ok(Answer::ok(r#"{"message_id":""}"#.into()))
    }

    /// `POST /verify {phone, token, type: sms | phone_change}`: the code texted, redeemed for a
    /// session (the number confirmed, or a change's new number taken).
    pub(super) async fn verify_phone(&self, v: &Value, client: IpAddr) -> Result<Answer, Answer> {
        let text = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
        let kind = match text("type") {
            Some("phone_change") => OneTime::PhoneChange,
            _ => OneTime::PhoneConfirmation,
        };
        let phone = valid_phone(text("phone").unwrap_or(""))?;
        let otp = text("token").ok_or_else(|| validation("Verify requires a token or a token hash"))?;
        let expired = || fail(StatusCode::FORBIDDEN, "otp_expired", "Token has expired or is invalid");
        // Guesses at a six-digit code are limited as guesses at a password are.
        let Some(mut attempt) = self.limits.attempt(client, &phone) else {
            return Err(too_many("Too many attempts: try again later"));
        };
        let expiry = self.sms.otp_expiry.min(i64::MAX as u64) as i64;
        let hash = super::by_mail::hash(&phone, otp);
        let redeemed =
            self.store.redeem(Some(kind), hash, Some(phone), expiry).await.map_err(store_failed)?;
        attempt.outcome = Some(redeemed.is_some());
        drop(attempt);
        let user = redeemed.ok_or_else(expired)?;
        if user.is_banned {
            return Err(fail(StatusCode::FORBIDDEN, "user_banned", "User is banned"));
        }
        self.signed_in(user.id, "otp", expired).await.map(|s| Answer::ok(s.json))
    }

    /// `POST /resend {phone, type: sms | phone_change}`: the code again, to a number waiting for
    /// one; nothing (and no word of it) for any other.
    pub(super) async fn resend_sms(&self, v: &Value, phone: &str, client: IpAddr) -> Result<Answer, Answer> {
        self.phone_enabled("Unsupported phone provider")?;
        let phone = valid_phone(phone)?;
        match v.get("type").and_then(Value::as_str).unwrap_or("") {
            "sms" => {
                let found = self.store.by_phone(phone.clone()).await.map_err(store_failed)?;
                if let Some((user, _)) = found.filter(|(u, _)| u.phone_confirmed_at.is_none()) {
                    self.text_code(&user, OneTime::PhoneConfirmation, &phone, client).await?;
                }
            }
            // A change is the signed-in user's (`PUT /user`); its new number gets its code again
            // through that, as GoTrue finds no user by a number not yet theirs.
            "phone_change" => {}
            _ => {
                return Err(validation("Missing one of these types: signup, email_change, sms, phone_change"))
            }
        }
        Ok(Answer::ok(r#"{"message_id":""}"#.into()))
    }

    /// `PUT /user {phone}`: the signed-in user's new number, taken once the code texted to it
    /// comes back (`/verify {type: phone_change}`), or at once with `accounts-sms-autoconfirm`.
    pub(super) async fn change_phone(
        &self,
        user: &User,
        phone: &str,
        client: IpAddr,
    ) -> Result<Option<UserChanges>, Answer> {
        self.phone_enabled("Phone logins are disabled")?;
        let phone = valid_phone(phone)?;
        if user.phone.as_deref() == Some(phone.as_str()) && user.phone_confirmed_at.is_some() {
            return Ok(None);
        }
        if self
            .store
            .by_phone(phone.clone())
            .await
            .map_err(store_failed)?
            .is_some_and(|(u, _)| u.id != user.id)
        {
            return Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "phone_exists",
                "A user with this phone number has already been registered",
            ));
        }
        if self.sms.autoconfirm {
            return Ok(Some(UserChanges { phone: Some(phone), ..Default::default() }));
        }
        self.text_code(user, OneTime::PhoneChange, &phone, client).await?;
        Ok(None)
    }
}
