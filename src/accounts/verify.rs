//! `/verify`, which redeems a code sent by mail: from a link (GET, answered with a redirect
//! carrying the session in its fragment, or for a PKCE flow a code in its query string) or from
//! the code typed in (POST, answered with the session); and `POST /token?grant_type=pkce`,
//! where a PKCE flow's code is exchanged for a session with its verifier.

use std::net::IpAddr;

use http::{header, StatusCode};
use serde_json::Value;
use sha2::Digest;

use super::by_mail::{authentication_method, hash, redeems};
use super::gotrue::{self, fail, internal, store_failed, validation, Answer};
use super::links::with_fragment;
use super::store::{OneTime, Redeem, User};
use super::{unix_now, valid_email, Accounts};

impl Accounts {
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
        let target = if token.starts_with("pkce_") {
            // A PKCE flow: back with a code the client exchanges with its verifier.
            match self.redeemed(redeem, token, None).await {
                Ok(user) => {
                    match self.store.flow_code(user.id, authentication_method(&kind).to_owned()).await {
                        Ok(Some(code)) => with_query(&redirect, &[("code", &code)]),
                        Ok(None) => {
                            let e = fail(
                                StatusCode::UNPROCESSABLE_ENTITY,
                                "flow_state_not_found",
                                "No valid flow state found for user.",
                            );
                            error_redirect(&redirect, &e, true)
                        }
                        Err(_) => error_redirect(&redirect, &internal(), true),
                    }
                }
                Err(e) if e.status == StatusCode::OK => {
                    with_fragment(&redirect, &[("message", WAITING), ("sb", "")])
                }
                Err(e) => error_redirect(&redirect, &e, true),
            }
        } else {
            match self.redeem(redeem, token, None).await {
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
                Err(e) if e.status == StatusCode::OK => {
                    with_fragment(&redirect, &[("message", WAITING), ("sb", "")])
                }
                Err(e) => error_redirect(&redirect, &e, false),
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
        if matches!(kind, "sms" | "phone_change") {
            return self.verify_phone(&v, client).await;
        }
        let redeem = redeems(kind).ok_or_else(|| validation("Unsupported verification type"))?;
        match (text("token_hash"), text("token"), text("email")) {
            (Some(hash), None, None) => match self.redeem(redeem, hash.to_owned(), None).await {
                Ok(s) => Ok(Answer::ok(s.json)),
                Err(e) if e.status == StatusCode::OK => Ok(e),
                Err(e) => Err(e),
            },
            (None, Some(otp), Some(email)) => {
                let email = valid_email(email)?;
                // Guesses at a six-digit code are limited as guesses at a password are.
                let Some(mut attempt) = self.limits.attempt(client, &email) else {
                    return Err(super::too_many("Too many attempts: try again later"));
                };
                let result = self.redeem(redeem, hash(&email, otp), Some(email.clone())).await;
                attempt.outcome = Some(result.as_ref().map_or_else(|e| e.status == StatusCode::OK, |_| true));
                match result {
                    Ok(s) => Ok(Answer::ok(s.json)),
                    Err(e) if e.status == StatusCode::OK => Ok(e),
                    Err(e) => Err(e.into_token_error()),
                }
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
        let user = self.redeemed(kind, token_hash, email).await?;
        self.signed_in(user.id, "otp", expired).await
    }
}

impl Accounts {
    /// Redeems a code: its user (not banned).
    async fn redeemed(
        &self,
        kind: Redeem,
        token_hash: String,
        email: Option<String>,
    ) -> Result<User, Answer> {
        let user = self
            .store
            .redeem(kind, token_hash, email, self.mail.otp_expiry)
            .await
            .map_err(store_failed)?
            .ok_or_else(|| {
                fail(StatusCode::FORBIDDEN, "otp_expired", "Email link is invalid or has expired")
            })?;
        if user.is_banned {
            return Err(fail(StatusCode::FORBIDDEN, "user_banned", "User is banned"));
        }
        if kind == Some(OneTime::EmailChange) && user.new_email.is_some() {
            return Err(waiting());
        }
        Ok(user)
    }

    /// `POST /token?grant_type=pkce` `{auth_code, code_verifier}`: the code a PKCE link led
    /// back with, exchanged for a session by the client that holds the verifier.
    pub(super) async fn exchange_code(&self, body: &[u8]) -> Result<Answer, Answer> {
        let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let (code, verifier) = (text("auth_code"), text("code_verifier"));
        if code.is_empty() || verifier.is_empty() {
            return Err(validation("invalid request: both auth code and code verifier should be non-empty"));
        }
        let flow = self.store.take_flow(code).await.map_err(store_failed)?.ok_or_else(|| {
            fail(
                StatusCode::NOT_FOUND,
                "flow_state_not_found",
                "invalid flow state, no valid flow state found",
            )
        })?;
        if flow.issued_at.is_none_or(|at| unix_now() - at > FLOW_EXPIRY) {
            return Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "flow_state_expired",
                "invalid flow state, flow state has expired",
            ));
        }
        if !pkce_matches(&flow.method, &flow.challenge, &verifier) {
            return Err(fail(
                StatusCode::BAD_REQUEST,
                "bad_code_verifier",
                "code challenge does not match previously saved code verifier",
            ));
        }
        let now = unix_now();
        let (user, started) = self
            .store
            .sign_in(flow.user_id, flow.authentication_method, now)
            .await
            .map_err(store_failed)?
            .ok_or_else(|| fail(StatusCode::NOT_FOUND, "user_not_found", "User not found"))?;
        if user.is_banned {
            return Err(fail(StatusCode::BAD_REQUEST, "user_banned", "User is banned"));
        }
        self.session(&user, &started, now).await.map(|s| Answer::ok(s.json))
    }
}

/// Whether `verifier` answers the PKCE `challenge` made with `method` (`s256` or `plain`).
pub(super) fn pkce_matches(method: &str, challenge: &str, verifier: &str) -> bool {
    let answer = match method {
        "s256" => {
            use base64::Engine;
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()))
        }
        _ => verifier.to_owned(),
    };
    // Compared in constant time: the challenge is no secret, but the habit costs nothing.
    answer.len() == challenge.len()
        && answer.bytes().zip(challenge.bytes()).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0
}

/// GoTrue's words when one address of a secure email change has confirmed and the other has
/// not yet.
const WAITING: &str = "Confirmation link accepted. Please proceed to confirm link sent to the other email";

/// The answer to a code that leaves an email change waiting for the other address's: no
/// session yet (it is no error, but it ends the verification as one does).
fn waiting() -> Answer {
    Answer::ok(serde_json::json!({"msg": WAITING, "code": 200}).to_string())
}

/// How long a PKCE flow's code may be exchanged after its link led back (GoTrue's default).
const FLOW_EXPIRY: i64 = 300;

/// `target` with `pairs` added to its query string.
pub(super) fn with_query(target: &str, pairs: &[(&str, &str)]) -> String {
    match url::Url::parse(target) {
        Ok(mut url) => {
            url.query_pairs_mut().extend_pairs(pairs);
            url.to_string()
        }
        Err(_) => target.to_owned(),
    }
}

/// Where an error sends the browser: its OAuth name, code and message in the fragment (and, for
/// a PKCE flow, in the query string too, where its clients read them).
pub(super) fn error_redirect(target: &str, e: &Answer, pkce: bool) -> String {
    let (error, code, description) = e.error_parts();
    let pairs =
        [("error", error), ("error_code", code.as_str()), ("error_description", description.as_str())];
    let target = if pkce { with_query(target, &pairs) } else { target.to_owned() };
    with_fragment(&target, &[pairs[0], pairs[1], pairs[2], ("sb", "")])
}

impl Answer {
    /// An error's OAuth name, code and message, for a redirect's fragment.
    pub(super) fn error_parts(&self) -> (&'static str, String, String) {
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
