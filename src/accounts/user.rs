//! A signed-in user's own endpoints: `GET /user`, `PUT /user`, `POST /logout`, and
//! `GET /settings`, which anyone may read.

use http::StatusCode;
use serde_json::{json, Value};

use super::gotrue::{self, fail, internal, store_failed, Answer};
use super::store::{OneTime, Scope, Updated, UserChanges};
use super::{metadata, strong_enough, valid_email, Accounts, Caller, Credentials};

/// The caller a request's verified bearer token names, or GoTrue's refusal: 401 without a
/// token, 403 for one that does not verify.
pub(super) fn bearer(credentials: Credentials) -> Result<Caller, Answer> {
    match credentials {
        Ok(Some(caller)) => Ok(caller),
        Ok(None) => Err(fail(
            StatusCode::UNAUTHORIZED,
            "no_authorization",
            "This endpoint requires a valid Bearer token",
        )),
        Err(e) => Err(fail(
            StatusCode::FORBIDDEN,
            "bad_jwt",
            &format!("invalid JWT: unable to parse or verify signature, {e}"),
        )),
    }
}

/// The user a request's bearer token names, or GoTrue's refusal: [`bearer`]'s, and 403 for a
/// token that names no user.
pub(super) fn signed_in(credentials: Credentials) -> Result<Caller, Answer> {
    let caller = bearer(credentials)?;
    match caller.sub {
        Some(_) => Ok(caller),
        None => Err(fail(StatusCode::FORBIDDEN, "bad_jwt", "invalid claim: missing sub claim")),
    }
}

/// The signed-in user acting on their own account. A token rowgate as an OAuth server issued to
/// an application is refused: whatever its scopes, it could otherwise change its user's
/// password or address, factors or identities, and take the account.
pub(super) fn own(credentials: Credentials) -> Result<Caller, Answer> {
    let caller = signed_in(credentials)?;
    match caller.client_id {
        None => Ok(caller),
        Some(_) => Err(application_refused()),
    }
}

/// The refusal of an application's token where only its user's own session may act (RFC 6750's
/// `insufficient_scope`).
pub(super) fn application_refused() -> Answer {
    fail(StatusCode::FORBIDDEN, "insufficient_scope", "An application's token cannot do this for its user")
}

impl Accounts {
    /// `GET /settings`: what this server offers, as GoTrue lists it.
    pub(super) fn settings(&self) -> Answer {
        let mut external = serde_json::Map::new();
        for provider in [
            "apple",
            "azure",
            "bitbucket",
            "discord",
            "facebook",
            "snapchat",
            "figma",
            "fly",
            "github",
            "gitlab",
            "google",
            "keycloak",
            "kakao",
            "linkedin",
            "linkedin_oidc",
            "notion",
            "spotify",
            "slack",
            "slack_oidc",
            "workos",
            "twitch",
            "twitter",
            "phone",
            "zoom",
        ] {
            external.insert(provider.into(), Value::Bool(false));
        }
        for provider in self.providers.names() {
            external.insert(provider.into(), Value::Bool(true));
        }
        external.insert("anonymous_users".into(), Value::Bool(self.signups.anonymous));
        external.insert("email".into(), Value::Bool(true));
        external.insert("phone".into(), Value::Bool(self.texter.enabled()));
        Answer::ok(
            json!({
                "external": external,
                "disable_signup": !self.signups.enabled,
                "mailer_autoconfirm": self.mail.autoconfirm,
                "phone_autoconfirm": self.sms.autoconfirm,
                "sms_provider": if self.texter.enabled() { "hook" } else { "" },
                "saml_enabled": false,
                "saml_private_key_next_configured": false,
                "passkeys_enabled": self.passkeys_enabled,
            })
            .to_string(),
        )
    }

    pub(super) async fn get_user(&self, caller: &Caller) -> Result<Answer, Answer> {
        let user = self.signed_in_user(caller).await?;
        Ok(Answer::ok(gotrue::to_json(&gotrue::UserJson::of(&user))))
    }

    /// The account a caller's token names (403 `user_not_found` if it is gone; banned: 403).
    pub(super) async fn signed_in_user(&self, caller: &Caller) -> Result<super::User, Answer> {
        let id = caller.sub.clone().unwrap_or_default();
        let user = self.store.user(id).await.map_err(store_failed)?.ok_or_else(|| {
            fail(StatusCode::FORBIDDEN, "user_not_found", "User from sub claim in JWT does not exist")
        })?;
        if user.is_banned {
            return Err(fail(StatusCode::FORBIDDEN, "user_banned", "User is banned"));
        }
        Ok(user)
    }

    /// `PUT /user` `{email, password, data}`: the user changes their own account. A new address
    /// is taken once a mail to it comes back; an anonymous user's at once with autoconfirm,
    /// which makes the user a permanent one.
    pub(super) async fn update_user(
        &self,
        caller: &Caller,
        body: &[u8],
        redirect: Option<&str>,
        client: std::net::IpAddr,
    ) -> Result<Answer, Answer> {
        let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
        let text = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
        let pkce = super::by_mail::pkce_of(&v)?;
        let user = self.signed_in_user(caller).await?;
        if v.get("app_metadata").is_some_and(|m| !m.is_null()) {
            return Err(fail(
                StatusCode::FORBIDDEN,
                "not_admin",
                "Updating app_metadata requires admin privileges",
            ));
        }
        let phone = match text("phone") {
            Some(phone) => self.change_phone(&user, phone, client).await?.and_then(|c| c.phone),
            None => None,
        };
        let mut changes =
            UserChanges { user_metadata: metadata(v.get("data"))?, phone, ..Default::default() };
        let email = text("email").map(valid_email).transpose()?.filter(|e| Some(e) != user.email.as_ref());
        if let Some(password) = text("password") {
            if user.is_anonymous && email.is_none() && text("phone").is_none() {
                return Err(fail(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "validation_failed",
                    "Updating password of an anonymous user without an email or phone is not allowed",
                ));
            }
            strong_enough(password)?;
            // GoTrue's rule: a session that signed in within a day needs no more proof.
            let recent = caller.authenticated_at.is_some_and(|at| super::unix_now() - at < 24 * 3600);
            if self.mail.secure_password_change && !recent {
                self.reauthenticated(&user, text("nonce"), client).await?;
            }
            if let Some(current) = &user.email {
                let old = self.store.by_email(current.clone()).await.map_err(store_failed)?;
                if let Some(hash) = old.and_then(|(_, h)| h) {
                    if self.hashing.verify(password.to_owned(), hash).await == Some(true) {
                        return Err(fail(
                            StatusCode::UNPROCESSABLE_ENTITY,
                            "same_password",
                            "New password should be different from the old password.",
                        ));
                    }
                }
            }
            changes.password_hash = Some(self.hashing.hash(password.to_owned()).await.ok_or_else(internal)?);
        }
        match email {
            // The new address is taken once a link or code mailed to it comes back: even with
            // autoconfirm (GoTrue's rule), but for an anonymous user, for whom it is a sign-up.
            Some(email) if !(self.mail.autoconfirm && user.is_anonymous) => {
                if self.store.by_email(email.clone()).await.map_err(store_failed)?.is_some() {
                    return Err(email_exists());
                }
                self.can_mail()?;
                let redirect = self.mail.links.redirect(redirect);
                self.send_email_change(&user, &email, &redirect, self.mail.interval, pkce.as_ref()).await?;
            }
            Some(email) => {
                changes.is_anonymous = Some(false);
                changes.app_metadata = Some(r#"{"provider":"email","providers":["email"]}"#.into());
                changes.email = Some(email);
                (changes.confirm_email, changes.unproved) = (true, true);
            }
            None => {}
        }
        match self.store.update(user.id.clone(), changes).await.map_err(store_failed)? {
            Updated::Done(user) => Ok(Answer::ok(gotrue::to_json(&gotrue::UserJson::of(&user)))),
            Updated::NotFound => Err(fail(
                StatusCode::FORBIDDEN,
                "user_not_found",
                "User from sub claim in JWT does not exist",
            )),
            Updated::Taken => Err(email_exists()),
        }
    }

    /// `POST /logout?scope=global|local|others`: ends the caller's sessions (all of them by
    /// default, as GoTrue).
    pub(super) async fn logout(&self, caller: &Caller, scope: Option<String>) -> Result<Answer, Answer> {
        let scope = match scope.as_deref() {
            None | Some("") | Some("global") => Scope::Global,
            Some("local") => Scope::Local,
            Some("others") => Scope::Others,
            Some(other) => {
                return Err(gotrue::validation(&format!("Unsupported logout scope {other:?}")));
            }
        };
        let id = caller.sub.clone().unwrap_or_default();
        self.store.logout(id, caller.session_id.clone(), scope).await.map_err(store_failed)?;
        Ok(Answer::empty(StatusCode::NO_CONTENT))
    }
}

impl Accounts {
    /// Whether `nonce` is the code `GET /reauthenticate` mailed `user` (used up if so).
    async fn reauthenticated(
        &self,
        user: &super::User,
        nonce: Option<&str>,
        client: std::net::IpAddr,
    ) -> Result<(), Answer> {
        let Some(nonce) = nonce else {
            return Err(fail(
                StatusCode::BAD_REQUEST,
                "reauthentication_needed",
                "Password update requires reauthentication",
            ));
        };
        // Guesses at a six-digit code are limited as guesses at a password are.
        let Some(mut attempt) = self.limits.attempt(client, &format!("reauthentication:{}", user.id)) else {
            return Err(super::too_many("Too many attempts: try again later"));
        };
        let email = user.email.clone().unwrap_or_default();
        let hash = super::by_mail::hash(&email, nonce);
        let redeemed =
            self.store.redeem(Some(OneTime::Reauthentication), hash, Some(email), self.mail.otp_expiry).await;
        attempt.outcome = Some(matches!(redeemed, Ok(Some(_))));
        match redeemed {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(fail(
                StatusCode::BAD_REQUEST,
                "reauthentication_not_valid",
                "Requires a valid reauthentication nonce",
            )),
            Err(_) => Err(internal()),
        }
    }
}

/// GoTrue's refusal of an address another account has.
pub(super) fn email_exists() -> Answer {
    fail(
        StatusCode::UNPROCESSABLE_ENTITY,
        "email_exists",
        "A user with this email address has already been registered",
    )
}
