//! Multi-factor authentication with TOTP, as GoTrue does it: `POST /factors` enrolls a factor
//! (its secret, `otpauth://` URI and QR code), `POST /factors/{id}/challenge` opens a challenge
//! for five minutes, `POST /factors/{id}/verify` answers it with the app's code and raises the
//! session to `aal2` (its tokens say so: `aal`, `amr`), `DELETE /factors/{id}` removes one. A
//! verified factor can be added or removed only from an `aal2` session.

use std::net::IpAddr;

use http::StatusCode;
use serde_json::{json, Value};
use totp_rs::{Algorithm, TOTP};

use super::gotrue::{self, fail, internal, validation, Answer};
use super::store::{Enrolled, NewFactor};
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
            (&http::Method::POST, [id, "challenge"]) => {
                let challenge = crate::uuid_v4();
                match self.store.challenge_factor(user.id.clone(), id.to_string(), challenge.clone()).await {
                    Ok(true) => Ok(Answer::ok(
                        json!({"id": challenge, "type": "totp", "expires_at": unix_now() + CHALLENGE_EXPIRY})
                            .to_string(),
                    )),
                    Ok(false) => Err(not_found()),
                    Err(_) => Err(internal()),
                }
            }
            (&http::Method::POST, [id, "verify"]) => {
                self.verify_factor(caller, &user.id, id, body, client).await
            }
            (&http::Method::DELETE, [id]) => {
                match self
                    .store
                    .unenroll_factor(user.id.clone(), id.to_string(), aal2)
                    .await
                    .map_err(|_| internal())?
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

    /// `POST /factors` `{factor_type: "totp", friendly_name, issuer}`.
    async fn enroll(&self, user: &super::User, aal2: bool, body: &[u8]) -> Result<Answer, Answer> {
        let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        match text("factor_type").as_str() {
            "totp" => {}
            "phone" => {
                return Err(fail(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "mfa_phone_enroll_not_enabled",
                    "MFA enroll is disabled for Phone",
                ))
            }
            "webauthn" => {
                return Err(fail(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "mfa_web_authn_enroll_not_enabled",
                    "MFA enroll is disabled for WebAuthn",
                ))
            }
            _ => return Err(validation("factor_type needs to be totp, phone, or webauthn")),
        }
        let friendly_name = text("friendly_name");
        if friendly_name.len() > 256 {
            return Err(validation("friendly_name is too long"));
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
        let factor = NewFactor {
            id: crate::uuid_v4(),
            friendly_name: friendly_name.clone(),
            secret: totp.get_secret_base32(),
        };
        match self.store.enroll_factor(user.id.clone(), factor.clone(), aal2, CHALLENGE_EXPIRY).await {
            Ok(Enrolled::Done) => Ok(Answer::ok(
                json!({
                    "id": factor.id, "type": "totp", "friendly_name": friendly_name,
                    "totp": {"qr_code": format!("data:image/svg+xml;utf-8,{svg}"), "secret": factor.secret, "uri": uri},
                })
                .to_string(),
            )),
            Ok(Enrolled::NameTaken) => Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "mfa_factor_name_conflict",
                &format!("A factor with the friendly name {friendly_name:?} for this user already exists"),
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

    /// `POST /factors/{id}/verify` `{challenge_id, code}`: a session at `aal2`.
    async fn verify_factor(
        &self,
        caller: &Caller,
        user_id: &str,
        factor_id: &str,
        body: &[u8],
        client: IpAddr,
    ) -> Result<Answer, Answer> {
        let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let (challenge_id, code) = (text("challenge_id"), text("code"));
        if code.is_empty() {
            return Err(validation("Code needs to be non-empty"));
        }
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
            .map_err(|_| internal())?
            .ok_or_else(not_found)?;
        let unknown = || {
            fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "mfa_factor_not_found",
                "MFA factor with the provided challenge ID not found",
            )
        };
        let challenged_at = challenged.challenged_at.ok_or_else(unknown)?;
        if unix_now() - challenged_at > CHALLENGE_EXPIRY {
            return Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "mfa_challenge_expired",
                &format!(
                    "MFA challenge {challenge_id} has expired, verify against another challenge or create a new challenge."
                ),
            ));
        }
        // Guesses at a six-digit code are limited as guesses at a password are.
        let Some(mut attempt) = self.limits.attempt(client, &format!("mfa:{user_id}")) else {
            return Err(super::too_many("Too many attempts: try again later"));
        };
        let secret = totp_rs::Secret::Encoded(challenged.secret).to_bytes().map_err(|_| internal())?;
        let valid = totp(secret, None, String::new())?.check(&code, unix_now().max(0) as u64);
        attempt.outcome = Some(valid);
        drop(attempt);
        if !valid {
            return Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "mfa_verification_failed",
                "Invalid TOTP code entered",
            ));
        }
        let now = unix_now();
        let (user, started) = self
            .store
            .elevate(user_id.to_owned(), factor_id.to_owned(), challenge_id, session_id)
            .await
            .map_err(|_| internal())?
            .ok_or_else(unknown)?;
        self.session(&user, &started, now).await.map(|s| Answer::ok(s.json))
    }
}
