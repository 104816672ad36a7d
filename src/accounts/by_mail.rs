//! What is done by mail, as GoTrue does it: a code (six digits, and the hash of address and
//! code that links carry) stored for the user and mailed — confirmation of a sign-up, `/resend`,
//! `/recover`, `/magiclink` and `/otp`, an email change, an administrator's `/invite` — with a
//! PKCE flow kept beside it when the client sent a challenge. `verify.rs` redeems them.

use std::net::IpAddr;

use http::StatusCode;
use serde_json::Value;
use sha2::Digest;

use super::gotrue::{self, fail, internal, store_failed, validation, Answer};
use super::mail::{MailError, Template, Vars};
use super::store::{Issued, NewUser, OneTime, Redeem, User};
use super::{metadata, unix_now, valid_email, Accounts};

/// A code sent by mail: what the user types, and what is stored and put in links.
pub(super) struct Code {
    pub otp: String,
    pub hash: String,
}

impl Code {
    /// A new code for the address `email`: six random digits; the hash is GoTrue's (SHA-224 of
    /// address and code, in hex), so a code typed in with its address finds the same row.
    pub fn new(email: &str) -> Code {
        let n = u64::from_le_bytes(crate::random_bytes::<8>()) % 1_000_000;
        let otp = format!("{n:06}");
        Code { hash: hash(email, &otp), otp }
    }
}

pub(super) fn hash(email: &str, otp: &str) -> String {
    crate::hex(&sha2::Sha224::digest(format!("{}{otp}", email.to_lowercase()).as_bytes()))
}

/// A mail with a code: what the code is for, the template, the `type` its link verifies as,
/// the address, where the link leads, how long before another of its kind may go (0: no
/// wait), and the PKCE challenge its link answers, if any.
pub(super) struct Mailing<'a> {
    pub kind: OneTime,
    pub template: Template,
    pub verify_type: &'a str,
    pub to: &'a str,
    pub redirect: &'a str,
    pub interval: i64,
    pub pkce: Option<&'a Pkce>,
}

impl<'a> Mailing<'a> {
    /// A sign-up's confirmation to `to`.
    pub fn confirmation(
        to: &'a str,
        redirect: &'a str,
        interval: i64,
        pkce: Option<&'a Pkce>,
    ) -> Mailing<'a> {
        Mailing {
            kind: OneTime::Confirmation,
            template: Template::Confirmation,
            verify_type: "signup",
            to,
            redirect,
            interval,
            pkce,
        }
    }
}

/// A PKCE challenge a client sent (`code_challenge`, `code_challenge_method`).
#[derive(Debug, Clone)]
pub(super) struct Pkce {
    pub challenge: String,
    /// `s256` or `plain`.
    pub method: String,
}

/// The PKCE challenge of a request's body, if it has one (GoTrue's checks).
pub(super) fn pkce_of(v: &Value) -> Result<Option<Pkce>, Answer> {
    let text = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    match (text("code_challenge"), text("code_challenge_method")) {
        (None, None) => Ok(None),
        (Some(challenge), Some(method)) => {
            if !(43..=128).contains(&challenge.len()) {
                return Err(validation("code challenge has to be between 43 and 128 characters"));
            }
            if !challenge.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'-'))
            {
                return Err(validation(
                    "code challenge can only contain alphanumeric characters, hyphens, periods, underscores and tildes",
                ));
            }
            let method = method.to_ascii_lowercase();
            if method != "s256" && method != "plain" {
                return Err(validation("code challenge method not supported"));
            }
            Ok(Some(Pkce { challenge: challenge.to_owned(), method }))
        }
        _ => Err(validation("PKCE flow requires code_challenge_method and code_challenge")),
    }
}

/// GoTrue's name of what a link of `verify_type` authenticates by.
pub(super) fn authentication_method(verify_type: &str) -> &'static str {
    match verify_type {
        "signup" => "email/signup",
        "invite" => "invite",
        "magiclink" => "magiclink",
        "recovery" => "recovery",
        "email_change" => "email_change",
        _ => "otp",
    }
}

/// A verification's `type`, as the code it redeems.
pub(super) fn redeems(kind: &str) -> Option<Redeem> {
    match kind {
        "signup" | "invite" => Some(Some(OneTime::Confirmation)),
        "recovery" | "magiclink" => Some(Some(OneTime::Recovery)),
        "email_change" => Some(Some(OneTime::EmailChange)),
        "email" => Some(None),
        _ => None,
    }
}

impl Accounts {
    /// Stores a code for `user` and mails it, as `mailing` says; unless one of its kind went out
    /// less than `mailing.interval` seconds ago (0 ignores it).
    pub(super) async fn send_code(&self, user: &User, mailing: Mailing<'_>) -> Result<Code, Answer> {
        let Mailing { kind, template, verify_type, to, redirect, interval, pkce } = mailing;
        let code = self.issue_code(user, kind, to, interval, pkce.is_some()).await?;
        if let Some(pkce) = pkce {
            let flow = super::store::Flow {
                id: crate::uuid_v4(),
                user_id: user.id.clone(),
                auth_code: crate::uuid_v4(),
                challenge: pkce.challenge.clone(),
                method: pkce.method.clone(),
                authentication_method: authentication_method(verify_type).to_owned(),
            };
            self.store.start_flow(flow).await.map_err(store_failed)?;
        }
        let what = match template {
            Template::Confirmation => "confirmation",
            Template::Invite => "invite",
            Template::Recovery => "recovery",
            Template::MagicLink => "magic link",
            Template::EmailChange => "email change",
            Template::Reauthentication => "reauthentication",
        };
        let Some(mailer) = &self.mail.mailer else {
            tracing::error!("a {what} mail cannot be sent: no SMTP server is set (smtp-host)");
            return Err(fail(
                StatusCode::INTERNAL_SERVER_ERROR,
                "unexpected_failure",
                &format!("Error sending {what} email"),
            ));
        };
        let url = self.mail.links.verify_url(&code.hash, verify_type, redirect);
        let vars = Vars {
            confirmation_url: &url,
            token: &code.otp,
            token_hash: &code.hash,
            site_url: &self.mail.links.site_url,
            redirect_to: redirect,
            email: user.email.as_deref().unwrap_or(""),
            new_email: match kind {
                OneTime::EmailChange => to,
                OneTime::EmailChangeCurrent => user.new_email.as_deref().unwrap_or(""),
                _ => "",
            },
            data: &user.user_metadata,
        };
        match mailer.send(template, to, &vars).await {
            Ok(()) => Ok(code),
            Err(MailError::OverLimit) => Err(fail(
                StatusCode::TOO_MANY_REQUESTS,
                "over_email_send_rate_limit",
                "Email rate limit exceeded",
            )),
            Err(MailError::Failed(e)) => {
                tracing::error!(error = %e, "a {what} mail could not be sent");
                Err(fail(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "unexpected_failure",
                    &format!("Error sending {what} email"),
                ))
            }
        }
    }

    /// The mails of `user`'s change to `new_email`: a link and code to the new address and, in a
    /// secure change, to the current one too. Issuing the new address's code clears the current
    /// one's, so the two always go out together (a resend sent alone would let the new address
    /// make the change by itself).
    pub(super) async fn send_email_change(
        &self,
        user: &User,
        new_email: &str,
        redirect: &str,
        interval: i64,
        pkce: Option<&Pkce>,
    ) -> Result<(), Answer> {
        let to_new = Mailing {
            kind: OneTime::EmailChange,
            template: Template::EmailChange,
            verify_type: "email_change",
            to: new_email,
            redirect,
            interval,
            pkce,
        };
        self.send_code(user, to_new).await?;
        if let (true, Some(current)) = (self.mail.secure_email_change, user.email.as_deref()) {
            // Its mail names the address the change is to.
            let pending = User { new_email: Some(new_email.to_owned()), ..user.clone() };
            let to_current = Mailing {
                kind: OneTime::EmailChangeCurrent,
                template: Template::EmailChange,
                verify_type: "email_change",
                to: current,
                redirect,
                interval: 0,
                pkce: None,
            };
            self.send_code(&pending, to_current).await?;
        }
        Ok(())
    }

    /// Refuses what needs a mail when none can be sent (no `smtp-host`), before anything is
    /// looked up: the same answer whoever the address belongs to.
    pub(super) fn can_mail(&self) -> Result<(), Answer> {
        match self.mail.mailer {
            Some(_) => Ok(()),
            None => Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "email_provider_disabled",
                "Mail cannot be sent: this server has no SMTP server (smtp-host)",
            )),
        }
    }

    /// Stores a new code of `kind` for `user`, going to `to` (see [`Accounts::send_code`]).
    pub(super) async fn issue_code(
        &self,
        user: &User,
        kind: OneTime,
        to: &str,
        interval: i64,
        pkce: bool,
    ) -> Result<Code, Answer> {
        let mut code = Code::new(to);
        if pkce {
            // A link of a PKCE flow leads back with a code to exchange, not a session.
            code.hash = format!("pkce_{}", code.hash);
        }
        let new_email = (kind == OneTime::EmailChange).then(|| to.to_owned());
        match self.store.issue(user.id.clone(), kind, code.hash.clone(), new_email, interval).await {
            Ok(Issued::Stored) => Ok(code),
            Ok(Issued::TooSoon(wait)) => Err(fail(
                StatusCode::TOO_MANY_REQUESTS,
                "over_email_send_rate_limit",
                &format!("For security purposes, you can only request this after {wait} seconds."),
            )),
            Ok(Issued::NotFound) | Err(_) => Err(internal()),
        }
    }

    /// A sign-up when addresses need confirming: the account is made without a session and a
    /// confirmation goes out. An address already taken is answered the same way, with a user
    /// that is not the account's (GoTrue's: no one learns who has signed up), and an
    /// unconfirmed one gets its confirmation again.
    pub(super) async fn sign_up_by_mail(
        &self,
        new: NewUser,
        redirect: Option<&str>,
        pkce: Option<Pkce>,
    ) -> Result<Answer, Answer> {
        self.can_mail()?;
        let redirect = self.mail.links.redirect(redirect);
        let email = new.email.clone().unwrap_or_default();
        let interval = self.mail.interval;
        if let Some((existing, _)) = self.store.by_email(email.clone()).await.map_err(store_failed)? {
            if existing.email_confirmed_at.is_none() {
                self.send_code(&existing, Mailing::confirmation(&email, &redirect, interval, pkce.as_ref()))
                    .await?;
            }
            return Ok(Answer::ok(gotrue::to_json(&gotrue::UserJson::stranger(&email))));
        }
        let Some((user, _)) = self.store.create(new, false, unix_now()).await.map_err(store_failed)? else {
            return Ok(Answer::ok(gotrue::to_json(&gotrue::UserJson::stranger(&email))));
        };
        self.send_code(&user, Mailing::confirmation(&email, &redirect, interval, pkce.as_ref())).await?;
        let user = self.store.user(user.id.clone()).await.map_err(store_failed)?.unwrap_or(user);
        Ok(Answer::ok(gotrue::to_json(&gotrue::UserJson::of(&user))))
    }

    /// `POST /resend` `{type: signup|email_change, email}`.
    pub(super) async fn resend(
        &self,
        body: &[u8],
        redirect: Option<&str>,
        client: IpAddr,
    ) -> Result<Answer, Answer> {
        let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
        if let Some(phone) = v.get("phone").and_then(Value::as_str).filter(|p| !p.is_empty()) {
            return self.resend_sms(&v, phone, client).await;
        }
        self.can_mail()?;
        let pkce = pkce_of(&v)?;
        let email = valid_email(v.get("email").and_then(Value::as_str).unwrap_or(""))?;
        let redirect = self.mail.links.redirect(redirect.or(redirect_of(&v)));
        let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
        let found = self.store.by_email(email.clone()).await.map_err(store_failed)?.map(|(u, _)| u);
        match (kind, found) {
            ("signup", Some(user)) if user.email_confirmed_at.is_none() => {
                self.send_code(
                    &user,
                    Mailing::confirmation(&email, &redirect, self.mail.interval, pkce.as_ref()),
                )
                .await?;
            }
            ("email_change", Some(user)) => {
                if let Some(new_email) = user.new_email.clone() {
                    self.send_email_change(&user, &new_email, &redirect, self.mail.interval, pkce.as_ref())
                        .await?;
                }
            }
            ("signup" | "email_change", _) => {}
            _ => return Err(validation("Missing one of these types: signup, email_change")),
        }
        Ok(Answer::ok("{}".into()))
    }

    /// `GET /reauthenticate`: a code mailed to the signed-in user's address, which a password
    /// change then gives as its `nonce` (with `accounts-secure-password-change`).
    pub(super) async fn reauthenticate(&self, caller: &super::Caller) -> Result<Answer, Answer> {
        self.can_mail()?;
        let user = self.signed_in_user(caller).await?;
        let Some(email) = user.email.clone() else {
            return Err(validation("Reauthentication requires the user to have an email or a phone number"));
        };
        let mailing = Mailing {
            kind: OneTime::Reauthentication,
            template: Template::Reauthentication,
            verify_type: "reauthentication",
            to: &email,
            redirect: &self.mail.links.site_url,
            interval: self.mail.interval,
            pkce: None,
        };
        self.send_code(&user, mailing).await?;
        Ok(Answer::ok("{}".into()))
    }

    /// `POST /recover` `{email}`: a recovery link for the account, if there is one (answered
    /// the same either way).
    pub(super) async fn recover(&self, body: &[u8], redirect: Option<&str>) -> Result<Answer, Answer> {
        self.can_mail()?;
        let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
        let pkce = pkce_of(&v)?;
        let email = valid_email(v.get("email").and_then(Value::as_str).unwrap_or(""))?;
        let redirect = self.mail.links.redirect(redirect.or(redirect_of(&v)));
        if let Some((user, _)) = self.store.by_email(email.clone()).await.map_err(store_failed)? {
            self.send_code(
                &user,
                Mailing {
                    kind: OneTime::Recovery,
                    template: Template::Recovery,
                    verify_type: "recovery",
                    to: &email,
                    redirect: &redirect,
                    interval: self.mail.interval,
                    pkce: pkce.as_ref(),
                },
            )
            .await?;
        }
        Ok(Answer::ok("{}".into()))
    }

    /// `POST /magiclink` `{email, data}` and `POST /otp` `{email, create_user, data}`: a link
    /// and code that sign the user in; an unknown address signs up (unless `create_user` is
    /// false, or sign-ups are off) and is sent a confirmation instead.
    pub(super) async fn magic_link(
        &self,
        body: &[u8],
        client: IpAddr,
        otp: bool,
        redirect: Option<&str>,
    ) -> Result<Answer, Answer> {
        let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
        if let Some(phone) = v.get("phone").and_then(Value::as_str).filter(|p| !p.is_empty()) {
            return self.sms_otp(&v, phone, client).await;
        }
        self.can_mail()?;
        let pkce = pkce_of(&v)?;
        let email = valid_email(v.get("email").and_then(Value::as_str).unwrap_or(""))?;
        let redirect = self.mail.links.redirect(redirect.or(redirect_of(&v)));
        if let Some((user, _)) = self.store.by_email(email.clone()).await.map_err(store_failed)? {
            if user.is_banned {
                return Err(fail(StatusCode::FORBIDDEN, "user_banned", "User is banned"));
            }
            let (kind, template, verify) = match user.email_confirmed_at {
                Some(_) => (OneTime::Recovery, Template::MagicLink, "magiclink"),
                None => (OneTime::Confirmation, Template::Confirmation, "signup"),
            };
            self.send_code(
                &user,
                Mailing {
                    kind,
                    template,
                    verify_type: verify,
                    to: &email,
                    redirect: &redirect,
                    interval: self.mail.interval,
                    pkce: pkce.as_ref(),
                },
            )
            .await?;
            return Ok(Answer::ok("{}".into()));
        }
        let create = v.get("create_user").and_then(Value::as_bool).unwrap_or(true);
        if !self.signups.enabled || (otp && !create) {
            return Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "otp_disabled",
                "Signups not allowed for otp",
            ));
        }
        if !self.limits.sign_up(client) {
            return Err(super::too_many("Too many sign-ups from this client: try again later"));
        }
        let new = NewUser {
            id: crate::uuid_v4(),
            email: Some(email.clone()),
            user_metadata: metadata(v.get("data"))?.unwrap_or_else(|| "{}".into()),
            app_metadata: r#"{"provider":"email","providers":["email"]}"#.into(),
            role: "authenticated".into(),
            ..Default::default()
        };
        self.before_user_created(&new, client).await?;
        // Raced by another sign-up of the address: it got the confirmation.
        if let Some((user, _)) = self.store.create(new, false, unix_now()).await.map_err(store_failed)? {
            self.send_code(&user, Mailing::confirmation(&email, &redirect, 0, pkce.as_ref())).await?;
        }
        Ok(Answer::ok("{}".into()))
    }
}

/// `redirect_to` of a request's body (GoTrue's clients put it there, or in `options`).
fn redirect_of(v: &Value) -> Option<&str> {
    v.get("redirect_to")
        .or_else(|| v.get("options").and_then(|o| o.get("redirect_to")))
        .and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::{hash, Code};

    #[test]
    fn a_code_is_six_digits_and_its_hash_gotrues() {
        let code = Code::new("Ann@Example.com");
        assert_eq!(code.otp.len(), 6);
        assert!(code.otp.bytes().all(|b| b.is_ascii_digit()));
        assert_eq!(code.hash, hash("ann@example.com", &code.otp));
        // SHA-224 of "ann@example.com123456".
        assert_eq!(hash("ann@example.com", "123456").len(), 56);
    }
}
