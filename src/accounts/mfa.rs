//! Multi-factor authentication with TOTP and WebAuthn, as GoTrue does it: `POST /factors`
//! enrolls a factor (a TOTP factor's secret, `otpauth://` URI and QR code), `POST
//! /factors/{id}/challenge` opens a challenge for five minutes (a WebAuthn factor's with the
//! options of its ceremony: registration while it is unverified, authentication after), `POST
//! /factors/{id}/verify` answers it (the app's code, or the authenticator's credential) and
//! raises the session to `aal2` (its tokens say so: `aal`, `amr`), `DELETE /factors/{id}`
//! removes one. A verified factor can be added or removed only from an `aal2` session.

use std::net::IpAddr;

use http::StatusCode;
use serde_json::{json, Value};
use totp_rs::{Algorithm, TOTP};

use super::gotrue::{self, fail, internal, store_failed, validation, Answer};
use super::store::{Challenged, Enrolled, NewFactor, User};
use super::webauthn::{credential_options, Refused};
use super::{unix_now, Accounts, Caller};

/// How long a challenge may be answered, and an unverified factor kept (GoTrue's defaults).
const CHALLENGE_EXPIRY: i64 = 300;

/// A TOTP as authenticator apps read one: SHA-1, six digits, 30 s, one step of skew.
fn totp(secret: Vec<u8>, issuer: Option<String>, account: String) -> Result<TOTP, Answer> {
    TOTP::new(Algorithm::SHA1, 6, 1, 30, secret, issuer, account).map_err(|_| internal())
}

fn not_found() -> Answer {
    fail(StatusCode::NOT_FOUND, "mfa_factor_not_found", "Factor not found")
}

impl Accounts {
    /// `/factors[/{id}[/challenge|/verify]]`.
    pub(super) async fn factors(
        &self,
        caller: &Caller,
        method: &http::Method,
        rest: &str,
        body: &[u8],
        client: IpAddr,
    ) -> Result<Answer, Answer> {
        let user = self.signed_in_user(caller).await?;
        if user.is_anonymous {
            return Err(fail(
                StatusCode::FORBIDDEN,
                "no_authorization",
                "Anonymous user not allowed to perform these actions",
            ));
        }
        let aal2 = caller.aal.as_deref() == Some("aal2");
        match (method, rest.split('/').collect::<Vec<_>>().as_slice()) {
            (&http::Method::POST, [""]) => self.enroll(&user, aal2, body).await,
            (&http::Method::POST, [id, "challenge"]) => self.challenge(&user, id).await,
            (&http::Method::POST, [id, "verify"]) => {
                self.verify_factor(caller, &user.id, id, body, client).await
            }
            (&http::Method::DELETE, [id]) => {
                match self
                    .store
                    .unenroll_factor(user.id.clone(), id.to_string(), aal2)
                    .await
                    .map_err(store_failed)?
                {
                    Some(true) => Ok(Answer::ok(json!({"id": id}).to_string())),
                    Some(false) => Err(fail(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "insufficient_aal",
                        "AAL2 required to unenroll verified factor",
                    )),
                    None => Err(not_found()),
                }
            }
            _ => Err(fail(StatusCode::NOT_FOUND, "not_found", "Not found")),
        }
    }

    /// `POST /factors` `{factor_type: "totp" | "webauthn", friendly_name, issuer}`.
    async fn enroll(&self, user: &User, aal2: bool, body: &[u8]) -> Result<Answer, Answer> {
        let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let factor_type = match text("factor_type").as_str() {
            "totp" => "totp",
            "webauthn" => "webauthn",
            "phone" => {
                return Err(fail(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "mfa_phone_enroll_not_enabled",
                    "MFA enroll is disabled for Phone",
                ))
            }
            _ => return Err(validation("factor_type needs to be totp, phone, or webauthn")),
        };
        let friendly_name = text("friendly_name");
        if friendly_name.len() > 256 {
            return Err(validation("friendly_name is too long"));
        }
        if factor_type == "webauthn" {
            let factor = NewFactor { id: crate::uuid_v4(), friendly_name, factor_type, secret: None };
            let enrolled =
                json!({"id": factor.id, "type": "webauthn", "friendly_name": factor.friendly_name});
            return self.enrolled(user, factor, aal2, enrolled).await;
        }
        let issuer = match text("issuer") {
            i if i.is_empty() => url::Url::parse(&self.mail.links.site_url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_owned))
                .unwrap_or_else(|| "rowgate".into()),
            i if i.len() > 256 || i.contains(':') => return Err(validation("Invalid issuer")),
            i => i,
        };
        let account = user.email.clone().or_else(|| user.phone.clone()).unwrap_or_else(|| user.id.clone());
        let secret = crate::random_bytes::<20>().to_vec();
        let totp = totp(secret, Some(issuer), account.replace(':', ""))?;
        let uri = totp.get_url();
        let qr = qrcode::QrCode::new(uri.as_bytes()).map_err(|_| internal())?;
        let svg = qr.render::<qrcode::render::svg::Color>().min_dimensions(200, 200).build();
        let secret = totp.get_secret_base32();
        let enrolled = json!({
            "id": crate::uuid_v4(), "type": "totp", "friendly_name": friendly_name,
            "totp": {"qr_code": format!("data:image/svg+xml;utf-8,{svg}"), "secret": secret, "uri": uri},
        });
        let factor = NewFactor {
            id: enrolled["id"].as_str().unwrap_or_default().to_owned(),
            friendly_name,
            factor_type,
            secret: Some(secret),
        };
        self.enrolled(user, factor, aal2, enrolled).await
    }

    /// `factor` enrolled, answered with `enrolled`.
    async fn enrolled(
        &self,
        user: &User,
        factor: NewFactor,
        aal2: bool,
        enrolled: Value,
    ) -> Result<Answer, Answer> {
        let name = factor.friendly_name.clone();
        match self.store.enroll_factor(user.id.clone(), factor, aal2, CHALLENGE_EXPIRY).await {
            Ok(Enrolled::Done) => Ok(Answer::ok(enrolled.to_string())),
            Ok(Enrolled::NameTaken) => Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "mfa_factor_name_conflict",
                &format!("A factor with the friendly name {name:?} for this user already exists"),
            )),
            Ok(Enrolled::TooMany) => Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "too_many_enrolled_mfa_factors",
                "Maximum number of verified factors reached, unenroll to continue",
            )),
            Ok(Enrolled::NeedsAal2) => {
                Err(fail(StatusCode::FORBIDDEN, "insufficient_aal", "AAL2 required to enroll a new factor"))
            }
            Err(_) => Err(internal()),
        }
    }

    /// `POST /factors/{id}/challenge`: a challenge of the user's factor, with a WebAuthn factor's
    /// ceremony (`credential_options`, whose `publicKey` goes to `navigator.credentials`).
    async fn challenge(&self, user: &User, factor_id: &str) -> Result<Answer, Answer> {
        let factor = self
            .store
            .challenged(user.id.clone(), factor_id.to_owned(), String::new())
            .await
            .map_err(store_failed)?
            .ok_or_else(not_found)?;
        let (ceremony, webauthn) = if factor.factor_type == "webauthn" {
            let (kind, started) = match (factor.verified, &factor.credential) {
                (true, Some(credential)) => {
                    ("request", self.relying_party.start_authentication(std::slice::from_ref(credential)))
                }
                _ => {
                    let name = user.email.as_deref().or(user.phone.as_deref()).unwrap_or(&user.id);
                    ("create", self.relying_party.start_registration(&user.id, name, &factor.others, false))
                }
            };
            let (ceremony, options) = started.ok_or_else(internal)?;
            (Some(ceremony), Some(json!({"type": kind, "credential_options": credential_options(options)})))
        } else {
            (None, None)
        };
        let challenge = crate::uuid_v4();
        match self
            .store
            .challenge_factor(user.id.clone(), factor_id.to_owned(), challenge.clone(), ceremony)
            .await
        {
            Ok(true) => {
                let mut answer = json!({"id": challenge, "type": factor.factor_type, "expires_at": unix_now() + CHALLENGE_EXPIRY});
                if let Some(webauthn) = webauthn {
                    answer["webauthn"] = webauthn;
                }
                Ok(Answer::ok(answer.to_string()))
            }
            Ok(false) => Err(not_found()),
            Err(_) => Err(internal()),
        }
    }

    /// `POST /factors/{id}/verify` `{challenge_id, code}` (TOTP) or `{challenge_id, webauthn:
    /// {type, credential_response}}`: a session at `aal2`.
    async fn verify_factor(
        &self,
        caller: &Caller,
        user_id: &str,
        factor_id: &str,
        body: &[u8],
        client: IpAddr,
    ) -> Result<Answer, Answer> {
        let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
        let challenge_id = v.get("challenge_id").and_then(Value::as_str).unwrap_or("").to_owned();
        let Some(session_id) = caller.session_id.clone() else {
            return Err(fail(
                StatusCode::UNAUTHORIZED,
                "no_authorization",
                "This endpoint requires a session",
            ));
        };
        let challenged = self
            .store
            .challenged(user_id.to_owned(), factor_id.to_owned(), challenge_id.clone())
            .await
            .map_err(store_failed)?
            .ok_or_else(not_found)?;
        let credential = match challenged.factor_type.as_str() {
            "webauthn" => Some(self.webauthn_answer(&v, user_id, &challenge_id, &challenged)?),
            _ => {
                self.totp_answer(&v, user_id, &challenge_id, &challenged, client)?;
                None
            }
        };
        let now = unix_now();
        let (user, started) = self
            .store
            .elevate(user_id.to_owned(), factor_id.to_owned(), challenge_id, session_id, credential)
            .await
            .map_err(store_failed)?
            .ok_or_else(unknown_challenge)?;
        self.session(&user, &started, now).await.map(|s| Answer::ok(s.json))
    }

    /// Checks a TOTP factor's code against the challenge.
    fn totp_answer(
        &self,
        v: &Value,
        user_id: &str,
        challenge_id: &str,
        challenged: &Challenged,
        client: IpAddr,
    ) -> Result<(), Answer> {
        let code = v.get("code").and_then(Value::as_str).unwrap_or("");
        if code.is_empty() {
            return Err(validation("Code needs to be non-empty"));
        }
        open_challenge(challenged, challenge_id)?;
        // Guesses at a six-digit code are limited as guesses at a password are.
        let Some(mut attempt) = self.limits.attempt(client, &format!("mfa:{user_id}")) else {
            return Err(super::too_many("Too many attempts: try again later"));
        };
        let secret = challenged.secret.clone().ok_or_else(internal)?;
        let secret = totp_rs::Secret::Encoded(secret).to_bytes().map_err(|_| internal())?;
        let valid = totp(secret, None, String::new())?.check(code, unix_now().max(0) as u64);
        attempt.outcome = Some(valid);
        if !valid {
            return Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "mfa_verification_failed",
                "Invalid TOTP code entered",
            ));
        }
        Ok(())
    }

    /// Checks a WebAuthn factor's credential against the challenge's ceremony: the credential
    /// (new, or with its new state) to keep.
    fn webauthn_answer(
        &self,
        v: &Value,
        user_id: &str,
        challenge_id: &str,
        challenged: &Challenged,
    ) -> Result<String, Answer> {
        let Some(params) = v.get("webauthn").filter(|w| w.is_object()) else {
            return Err(validation("WebAuthn config required"));
        };
        let kind = params.get("type").and_then(Value::as_str).unwrap_or("");
        if kind != "create" && kind != "request" {
            return Err(validation("WebAuthn type must be create or request"));
        }
        let Some(response) = params.get("credential_response").filter(|r| !r.is_null()) else {
            return Err(validation("credential_response required"));
        };
        open_challenge(challenged, challenge_id)?;
        let ceremony = challenged.ceremony.as_deref().ok_or_else(unknown_challenge)?;
        let answer = response.to_string();
        let checked = match (kind, challenged.verified, &challenged.credential) {
            ("create", false, _) => self.relying_party.finish_registration(ceremony, &answer),
            ("request", true, Some(credential)) => {
                self.relying_party.finish_authentication(ceremony, &answer, user_id, credential, false)
            }
            _ => Err(Refused::Invalid(format!("the challenge asked for no {kind} ceremony"))),
        };
        checked.map_err(|refused| match refused {
            Refused::Malformed => validation("Invalid credential_response"),
            Refused::Invalid(why) => fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "mfa_verification_failed",
                &format!("WebAuthn verification failed: {why}"),
            ),
        })
    }
}

fn unknown_challenge() -> Answer {
    fail(
        StatusCode::UNPROCESSABLE_ENTITY,
        "mfa_factor_not_found",
        "MFA factor with the provided challenge ID not found",
    )
}

/// Whether `challenge_id` is an open, unexpired challenge of the factor.
fn open_challenge(challenged: &Challenged, challenge_id: &str) -> Result<(), Answer> {
    let challenged_at = challenged.challenged_at.ok_or_else(unknown_challenge)?;
    if unix_now() - challenged_at > CHALLENGE_EXPIRY {
        return Err(fail(
            StatusCode::UNPROCESSABLE_ENTITY,
            "mfa_challenge_expired",
            &format!(
                "MFA challenge {challenge_id} has expired, verify against another challenge or create a new challenge."
            ),
        ));
    }
    Ok(())
}
