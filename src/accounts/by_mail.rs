//! What is done by mail, as GoTrue does it: a code (six digits, and the hash of address and
//! code that links carry) stored for the user and mailed — confirmation of a sign-up, `/resend`,
//! `/recover`, `/magiclink` and `/otp`, an email change, an administrator's `/invite` — and
//! `/verify`, which redeems one: from a link (GET, answered with a redirect carrying the session
//! in its fragment) or from the code typed in (POST, answered with the session).

use std::net::IpAddr;

use http::{header, StatusCode};
use serde_json::Value;
use sha2::Digest;

use super::gotrue::{self, fail, internal, validation, Answer};
use super::links::with_fragment;
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

fn hash(email: &str, otp: &str) -> String {
    crate::hex(&sha2::Sha224::digest(format!("{}{otp}", email.to_lowercase()).as_bytes()))
}

/// A verification's `type`, as the code it redeems.
fn redeems(kind: &str) -> Option<Redeem> {
    match kind {
        "signup" | "invite" => Some(Some(OneTime::Confirmation)),
        "recovery" | "magiclink" => Some(Some(OneTime::Recovery)),
        "email_change" => Some(Some(OneTime::EmailChange)),
        "email" => Some(None),
        _ => None,
    }
}

impl Accounts {
    /// Stores a code of `kind` for `user` and mails it to `to` with `template`, its link
    /// verifying as `verify_type` and leading to `redirect`; unless one went out less than
    /// `accounts-mail-interval` ago (`interval`: 0 ignores it).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn send_code(
        &self,
        user: &User,
        kind: OneTime,
        template: Template,
        verify_type: &str,
        to: &str,
        redirect: &str,
        interval: i64,
    ) -> Result<Code, Answer> {
        let code = self.issue_code(user, kind, to, interval).await?;
        let what = match template {
            Template::Confirmation => "confirmation",
            Template::Invite => "invite",
            Template::Recovery => "recovery",
            Template::MagicLink => "magic link",
            Template::EmailChange => "email change",
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
            new_email: if kind == OneTime::EmailChange { to } else { "" },
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
    ) -> Result<Code, Answer> {
        let code = Code::new(to);
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
    ) -> Result<Answer, Answer> {
        self.can_mail()?;
        let redirect = self.mail.links.redirect(redirect);
        let email = new.email.clone().unwrap_or_default();
        let interval = self.mail.interval;
        if let Some((existing, _)) = self.store.by_email(email.clone()).await.map_err(|_| internal())? {
            if existing.email_confirmed_at.is_none() {
                self.send_code(
                    &existing,
                    OneTime::Confirmation,
                    Template::Confirmation,
                    "signup",
                    &email,
                    &redirect,
                    interval,
                )
                .await?;
            }
            return Ok(Answer::ok(gotrue::to_json(&gotrue::UserJson::stranger(&email))));
        }
        let Some((user, _)) = self.store.create(new, false, unix_now()).await.map_err(|_| internal())? else {
            return Ok(Answer::ok(gotrue::to_json(&gotrue::UserJson::stranger(&email))));
        };
        self.send_code(
            &user,
            OneTime::Confirmation,
            Template::Confirmation,
            "signup",
            &email,
            &redirect,
            interval,
        )
        .await?;
        let user = self.store.user(user.id.clone()).await.map_err(|_| internal())?.unwrap_or(user);
        Ok(Answer::ok(gotrue::to_json(&gotrue::UserJson::of(&user))))
    }

    /// `POST /resend` `{type: signup|email_change, email}`.
    pub(super) async fn resend(&self, body: &[u8], redirect: Option<&str>) -> Result<Answer, Answer> {
        self.can_mail()?;
        let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
        let email = valid_email(v.get("email").and_then(Value::as_str).unwrap_or(""))?;
        let redirect = self.mail.links.redirect(redirect.or(redirect_of(&v)));
        let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
        let found = self.store.by_email(email.clone()).await.map_err(|_| internal())?.map(|(u, _)| u);
        match (kind, found) {
            ("signup", Some(user)) if user.email_confirmed_at.is_none() => {
                self.send_code(
                    &user,
                    OneTime::Confirmation,
                    Template::Confirmation,
                    "signup",
                    &email,
                    &redirect,
                    self.mail.interval,
                )
                .await?;
            }
            ("email_change", Some(user)) => {
                if let Some(new_email) = user.new_email.clone() {
                    self.send_code(
                        &user,
                        OneTime::EmailChange,
                        Template::EmailChange,
                        "email_change",
                        &new_email,
                        &redirect,
                        self.mail.interval,
                    )
                    .await?;
                }
            }
            ("signup" | "email_change", _) => {}
            _ => return Err(validation("Missing one of these types: signup, email_change")),
        }
        Ok(Answer::ok("{}".into()))
    }

    /// `POST /recover` `{email}`: a recovery link for the account, if there is one (answered
    /// the same either way).
    pub(super) async fn recover(&self, body: &[u8], redirect: Option<&str>) -> Result<Answer, Answer> {
        self.can_mail()?;
        let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
        let email = valid_email(v.get("email").and_then(Value::as_str).unwrap_or(""))?;
        let redirect = self.mail.links.redirect(redirect.or(redirect_of(&v)));
        if let Some((user, _)) = self.store.by_email(email.clone()).await.map_err(|_| internal())? {
            self.send_code(
                &user,
                OneTime::Recovery,
                Template::Recovery,
                "recovery",
                &email,
                &redirect,
                self.mail.interval,
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
        self.can_mail()?;
        let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
        if v.get("phone").and_then(Value::as_str).is_some_and(|p| !p.is_empty()) {
            return Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "phone_provider_disabled",
                "Phone logins are disabled",
            ));
        }
        let email = valid_email(v.get("email").and_then(Value::as_str).unwrap_or(""))?;
        let redirect = self.mail.links.redirect(redirect.or(redirect_of(&v)));
        if let Some((user, _)) = self.store.by_email(email.clone()).await.map_err(|_| internal())? {
            if user.is_banned {
                return Err(fail(StatusCode::FORBIDDEN, "user_banned", "User is banned"));
            }
            let (kind, template, verify) = match user.email_confirmed_at {
                Some(_) => (OneTime::Recovery, Template::MagicLink, "magiclink"),
                None => (OneTime::Confirmation, Template::Confirmation, "signup"),
            };
            self.send_code(&user, kind, template, verify, &email, &redirect, self.mail.interval).await?;
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
        // Raced by another sign-up of the address: it got the confirmation.
        if let Some((user, _)) = self.store.create(new, false, unix_now()).await.map_err(|_| internal())? {
            self.send_code(
                &user,
                OneTime::Confirmation,
                Template::Confirmation,
                "signup",
                &email,
                &redirect,
                0,
            )
            .await?;
        }
        Ok(Answer::ok("{}".into()))
    }

    /// `GET /verify?token=&type=&redirect_to=`, a link from a mail: redirected to `redirect_to`
    /// (if allowed) with the session, or the error, in the fragment.
    pub(super) async fn verify_link(&self, query: &str) -> Result<Answer, Answer> {
        let param = |name: &str| {
            form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
        };
        let kind = param("type")
            .filter(|t| !t.is_empty())
            .ok_or_else(|| validation("Verify requires a verification type"))?;
        let token = param("token")
            .filter(|t| !t.is_empty())
            .ok_or_else(|| validation("Verify requires a token or a token hash"))?;
        let redeem = redeems(&kind).ok_or_else(|| validation("Unsupported verification type"))?;
        let redirect = self.mail.links.redirect(param("redirect_to").as_deref());
        let target = match self.redeem(redeem, token, None).await {
            Ok(s) => with_fragment(
                &redirect,
                &[
                    ("access_token", &s.access),
                    ("expires_at", &s.expires_at.to_string()),
                    ("expires_in", &super::TOKEN_LIFETIME.as_secs().to_string()),
                    ("refresh_token", &s.refresh),
                    ("token_type", "bearer"),
                    ("type", &kind),
                ],
            ),
            Err(e) => {
                let (error, code, description) = e.error_parts();
                with_fragment(
                    &redirect,
                    &[
                        ("error", error),
                        ("error_code", &code),
                        ("error_description", &description),
                        ("sb", ""),
                    ],
                )
            }
        };
        let mut answer = Answer::empty(StatusCode::SEE_OTHER);
        answer.headers.push((header::LOCATION, target));
        Ok(answer)
    }

    /// `POST /verify` `{type, token_hash}` or `{type, email, token}`: the session.
    pub(super) async fn verify_code(&self, body: &[u8], client: IpAddr) -> Result<Answer, Answer> {
        let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
        let text = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
        let kind = text("type").ok_or_else(|| validation("Verify requires a verification type"))?;
        let redeem = redeems(kind).ok_or_else(|| validation("Unsupported verification type"))?;
        match (text("token_hash"), text("token"), text("email")) {
            (Some(hash), None, None) => {
                Ok(Answer::ok(self.redeem(redeem, hash.to_owned(), None).await?.json))
            }
            (None, Some(otp), Some(email)) => {
                let email = valid_email(email)?;
                // Guesses at a six-digit code are limited as guesses at a password are.
                let Some(mut attempt) = self.limits.attempt(client, &email) else {
                    return Err(super::too_many("Too many attempts: try again later"));
                };
                let result = self.redeem(redeem, hash(&email, otp), Some(email.clone())).await;
                attempt.outcome = Some(result.is_ok());
                result.map(|s| Answer::ok(s.json)).map_err(|e| e.into_token_error())
            }
            (None, None, _) => Err(validation("Verify requires a token or a token hash")),
            (Some(_), _, _) => Err(validation("Only the token_hash and type should be provided")),
            (None, Some(_), None) => Err(validation("Verify requires an email address with a token")),
        }
    }

    /// Redeems a code and starts a session.
    async fn redeem(
        &self,
        kind: Redeem,
        token_hash: String,
        email: Option<String>,
    ) -> Result<super::Session, Answer> {
        let expired = || fail(StatusCode::FORBIDDEN, "otp_expired", "Email link is invalid or has expired");
        let user = self
            .store
            .redeem(kind, token_hash, email, self.mail.otp_expiry)
            .await
            .map_err(|_| internal())?
            .ok_or_else(expired)?;
        if user.is_banned {
            return Err(fail(StatusCode::FORBIDDEN, "user_banned", "User is banned"));
        }
        let now = unix_now();
        let (user, started) =
            self.store.sign_in(user.id.clone(), now).await.map_err(|_| internal())?.ok_or_else(expired)?;
        self.session(&user, &started, now)
    }
}

/// `redirect_to` of a request's body (GoTrue's clients put it there, or in `options`).
fn redirect_of(v: &Value) -> Option<&str> {
    v.get("redirect_to")
        .or_else(|| v.get("options").and_then(|o| o.get("redirect_to")))
        .and_then(Value::as_str)
}

impl Answer {
    /// An error's OAuth name, code and message, for a redirect's fragment.
    fn error_parts(&self) -> (&'static str, String, String) {
        let body: Value = self.body.as_deref().and_then(|b| serde_json::from_str(b).ok()).unwrap_or_default();
        let text = |k: &str| body.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let error = match self.status.as_u16() {
            400 => "invalid_request",
            401 => "unauthorized_client",
            403 => "access_denied",
            503 => "temporarily_unavailable",
            _ => "server_error",
        };
        (error, text("error_code"), text("msg"))
    }

    /// A code typed in that redeems nothing: GoTrue's words for it.
    fn into_token_error(self) -> Answer {
        match self.status {
            StatusCode::FORBIDDEN if self.body.as_deref().is_some_and(|b| b.contains("otp_expired")) => {
                fail(StatusCode::FORBIDDEN, "otp_expired", "Token has expired or is invalid")
            }
            _ => self,
        }
    }
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
