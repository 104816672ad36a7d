//! The OAuth server's token endpoint, `POST /oauth/token`: an application proves itself (its
//! secret, or for a public client its id alone) and exchanges a code from the consent flow
//! (`oauth_server`), checked against its PKCE challenge, or a refresh token of a session it
//! holds, for tokens; with the `openid` scope and a key pair, an OpenID Connect ID token too.
//! And `GET /oauth/userinfo`, what a token's scopes let its holder read of its user.

use http::request::Parts;
use http::{header, StatusCode};
use serde_json::{json, Value};
use subtle::ConstantTimeEq;

use super::gotrue::{fail, internal, store_failed, Answer};
use super::oauth_clients::secret_hash;
use super::oauth_server::oauth_error;
use super::oauth_server_store::OAuthClient;
use super::store::{token_hash, unix_now};
use super::verify::pkce_matches;
use super::{Accounts, Caller, User, TOKEN_LIFETIME};

/// The authentication method of a session an application got with a code (GoTrue's `amr`).
const CODE_METHOD: &str = "oauth_provider/authorization_code";

/// The parameters of a token request: a JSON body, or a form.
struct TokenRequest(Vec<(String, String)>);

impl TokenRequest {
    fn of(parts: &Parts, body: &[u8]) -> Result<TokenRequest, Answer> {
        let json = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.contains("application/json"));
        if !json {
            return Ok(TokenRequest(form_urlencoded::parse(body).into_owned().collect()));
        }
        let v: Value =
            serde_json::from_slice(body).map_err(|_| oauth_error("invalid_request", "Invalid JSON body"))?;
        let Value::Object(fields) = v else {
            return Err(oauth_error("invalid_request", "Invalid JSON body"));
        };
        Ok(TokenRequest(
            fields.into_iter().filter_map(|(k, v)| v.as_str().map(|s| (k, s.to_owned()))).collect(),
        ))
    }

    /// The parameter `name`; empty when absent.
    fn get(&self, name: &str) -> &str {
        self.0.iter().find(|(k, _)| k == name).map_or("", |(_, v)| v.as_str())
    }
}

impl Accounts {
    /// `POST /oauth/token`: a code (`authorization_code`) or a refresh token (`refresh_token`)
    /// exchanged for tokens by the application that proves itself.
    pub(super) async fn oauth_token(&self, parts: &Parts, body: &[u8]) -> Result<Answer, Answer> {
        self.oauth_server_enabled()?;
        let request = TokenRequest::of(parts, body)?;
        let param = |name: &str| request.get(name);
        let client = self.token_client(parts, param("client_id"), param("client_secret")).await?;
        let grant_type = param("grant_type");
        if grant_type.is_empty() {
            return Err(oauth_error("invalid_request", "grant_type is required"));
        }
        if !client.grant_types.iter().any(|g| g == grant_type) {
            let why = format!("Client is not allowed to use grant type: {grant_type}");
            return Err(oauth_error("unsupported_grant_type", &why));
        }
        let now = unix_now();
        let (user, started, nonce) = match grant_type {
            "authorization_code" => self.redeem_code(&client, &request).await?,
            "refresh_token" => {
                let token = param("refresh_token");
                if token.is_empty() {
                    return Err(oauth_error(
                        "invalid_request",
                        "refresh_token is required for refresh_token grant",
                    ));
                }
                let successor = self.successor(token);
                let rotated = self
                    .store
                    .rotate(token.to_owned(), successor, now, self.reuse_interval, Some(client.id.clone()))
                    .await
                    .map_err(store_failed)?;
                let (user, started) =
                    rotated.ok_or_else(|| oauth_error("invalid_grant", "Invalid Refresh Token"))?;
                (user, started, None)
            }
            other => {
                return Err(oauth_error(
                    "unsupported_grant_type",
                    &format!("Unsupported grant type: {other}"),
                ))
            }
        };
        if user.is_banned {
            return Err(oauth_error("access_denied", "User is banned"));
        }
        let session = self.session(&user, &started, now).await?;
        let mut answer = json!({
            "access_token": session.access,
            "token_type": "bearer",
            "expires_in": TOKEN_LIFETIME.as_secs(),
            "refresh_token": session.refresh,
        });
        let scopes = started.client.as_ref().map_or("", |c| c.scopes.as_str());
        // An ID token only for a code (GoTrue's rule) and only with a key pair: one signed with
        // the HMAC secret could not be checked by the application without that secret.
        if grant_type == "authorization_code"
            && scopes.split_whitespace().any(|s| s == "openid")
            && self.keys.asymmetric()
        {
            let id_token = id_token_claims(&user, &client.id, scopes, nonce.as_deref(), &self.issuer(), now);
            answer["id_token"] = Value::from(self.keys.sign_id_token(&id_token).map_err(|_| internal())?);
        }
        Ok(Answer::ok(answer.to_string()))
    }

    /// The application a token request comes from, proved as it registered: HTTP Basic
    /// (`client_secret_basic`), the secret in the body (`client_secret_post`), or, for a public
    /// client, its id alone (`none`).
    async fn token_client(
        &self,
        parts: &Parts,
        body_id: &str,
        body_secret: &str,
    ) -> Result<OAuthClient, Answer> {
        let refuse = |why: &str| fail(StatusCode::BAD_REQUEST, "invalid_credentials", why);
        let basic = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' ').filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic")))
            .map(|(_, credentials)| credentials);
        let (id, secret, method) = match basic {
            Some(encoded) => {
                use base64::Engine;
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(encoded.trim())
                    .map_err(|_| refuse("Invalid client credentials: invalid basic auth encoding"))?;
                let decoded = String::from_utf8(decoded)
                    .map_err(|_| refuse("Invalid client credentials: invalid basic auth encoding"))?;
                let (id, secret) = decoded
                    .split_once(':')
                    .ok_or_else(|| refuse("Invalid client credentials: invalid basic auth format"))?;
                (id.to_owned(), secret.to_owned(), "client_secret_basic")
            }
            None if body_id.is_empty() => {
                return Err(refuse("Invalid client credentials: client_id is required"))
            }
            None if body_secret.is_empty() => (body_id.to_owned(), String::new(), "none"),
            None => (body_id.to_owned(), body_secret.to_owned(), "client_secret_post"),
        };
        if !super::admin::is_uuid(&id) {
            return Err(refuse("Invalid client_id format"));
        }
        let client = self.store.oauth_client(id).await.map_err(store_failed)?;
        let client = client.ok_or_else(|| refuse("Invalid client credentials"))?;
        if client.token_endpoint_auth_method != method {
            return Err(refuse(&format!(
                "invalid authentication method: client is registered for '{}' but '{method}' was used",
                client.token_endpoint_auth_method
            )));
        }
        let proved = match (&client.secret_hash, client.client_type.as_str()) {
            (_, "public") => secret.is_empty(),
            (Some(hash), _) => {
                !secret.is_empty() && bool::from(secret_hash(&secret).as_bytes().ct_eq(hash.as_bytes()))
            }
            (None, _) => false,
        };
        if !proved {
            return Err(refuse("invalid client credentials"));
        }
        Ok(client)
    }

    /// The session an approved authorization's code gives `client`, once its checks pass.
    async fn redeem_code(
        &self,
        client: &OAuthClient,
        request: &TokenRequest,
    ) -> Result<(super::User, super::store::Started, Option<String>), Answer> {
        let code = request.get("code");
        if code.is_empty() {
            return Err(oauth_error("invalid_request", "code is required for authorization_code grant"));
        }
        let taken = self
            .store
            .take_authorization_code(token_hash(code), client.id.clone())
            .await
            .map_err(store_failed)?;
        let a = taken.ok_or_else(|| oauth_error("invalid_grant", "Invalid authorization code"))?;
        if a.expires_at <= unix_now() {
            return Err(oauth_error("invalid_grant", "Authorization code has expired"));
        }
        let resource = request.get("resource");
        if !resource.is_empty() && Some(resource) != a.resource.as_deref() {
            let why = "Authorization code resource does not match the resource parameter";
            return Err(oauth_error("invalid_grant", why));
        }
        let redirect_uri = request.get("redirect_uri");
        if !redirect_uri.is_empty() && redirect_uri != a.redirect_uri {
            return Err(oauth_error("invalid_grant", "Invalid redirect_uri"));
        }
        let verifier = request.get("code_verifier");
        if verifier.is_empty() {
            let why = "PKCE verification failed: code_verifier is required when PKCE challenge is present";
            return Err(oauth_error("invalid_grant", why));
        }
        if !pkce_matches(&a.code_challenge_method, &a.code_challenge, verifier) {
            return Err(oauth_error(
                "invalid_grant",
                "PKCE verification failed: code challenge does not match",
            ));
        }
        let user_id = a
            .user_id
            .clone()
            .ok_or_else(|| oauth_error("invalid_grant", "Authorization code has no associated user"))?;
        let signed_in = self
            .store
            .sign_in_client(user_id, CODE_METHOD.into(), client.id.clone(), a.scope.clone(), unix_now())
            .await
            .map_err(store_failed)?;
        let (user, started) =
            signed_in.ok_or_else(|| oauth_error("invalid_grant", "User not found for authorization code"))?;
        Ok((user, started, a.nonce))
    }

    /// `GET /oauth/userinfo`: the signed-in user as OpenID Connect's UserInfo describes them,
    /// as far as the token's scopes reach (a token of no application's: `sub` alone).
    pub(super) async fn oauth_userinfo(&self, caller: &Caller) -> Result<Answer, Answer> {
        self.oauth_server_enabled()?;
        let user = self.signed_in_user(caller).await?;
        let scopes = caller.scope.as_deref().unwrap_or("");
        let mut info = json!({ "sub": user.id });
        let has = |scope: &str| scopes.split_whitespace().any(|s| s == scope);
        if has("email") {
            if let Some(email) = user.email.as_deref().filter(|e| !e.is_empty()) {
                info["email"] = Value::from(email);
            }
            if user.email_confirmed_at.is_some() {
                info["email_verified"] = Value::from(true);
            }
        }
        if has("profile") {
            add_profile(&mut info, &user);
            info["user_metadata"] = serde_json::from_str(&user.user_metadata).unwrap_or(Value::Null);
        }
        if has("phone") {
            if let Some(phone) = user.phone.as_deref().filter(|p| !p.is_empty()) {
                info["phone"] = Value::from(phone);
            }
        }
        Ok(Answer::ok(info.to_string()))
    }
}

/// An RFC 3339 time as seconds since the epoch.
fn unix_seconds(at: &str) -> Option<i64> {
    let t = crate::storage::time::parse_iso(at)?;
    t.duration_since(std::time::UNIX_EPOCH).ok().map(|d| d.as_secs() as i64)
}

/// An OpenID Connect ID token's claims for `user`, issued to `client_id`: who (`sub`), for whom
/// (`aud`), and what the scopes let it say.
fn id_token_claims(
    user: &User,
    client_id: &str,
    scopes: &str,
    nonce: Option<&str>,
    issuer: &str,
    now: i64,
) -> Value {
    let has = |scope: &str| scopes.split_whitespace().any(|s| s == scope);
    let auth_time = user.last_sign_in_at.as_deref().and_then(unix_seconds).unwrap_or(now);
    let mut claims = json!({
        "iss": issuer, "sub": user.id, "aud": client_id, "iat": now, "exp": now + 3600,
        "auth_time": auth_time, "client_id": client_id,
        "email_verified": false, "phone_number_verified": false,
    });
    if let Some(nonce) = nonce {
        claims["nonce"] = Value::from(nonce);
    }
    if has("email") {
        if let Some(email) = user.email.as_deref().filter(|e| !e.is_empty()) {
            claims["email"] = Value::from(email);
        }
        claims["email_verified"] = Value::from(user.email_confirmed_at.is_some());
    }
    if has("phone") {
        if let Some(phone) = user.phone.as_deref().filter(|p| !p.is_empty()) {
            claims["phone_number"] = Value::from(phone);
        }
    }
    if has("profile") {
        add_profile(&mut claims, user);
    }
    claims
}

/// The `profile` scope's standard claims of `user`, into `claims` (UserInfo and ID token alike):
/// `name` (its metadata's, else its address), `picture` (`picture` or `avatar_url`),
/// `preferred_username` (`preferred_username` or `username`), `updated_at` (seconds).
fn add_profile(claims: &mut Value, user: &User) {
    let meta: Value = serde_json::from_str(&user.user_metadata).unwrap_or(Value::Null);
    let text = |key: &str| meta.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
    if let Some(name) = text("name").or_else(|| user.email.clone().filter(|e| !e.is_empty())) {
        claims["name"] = Value::from(name);
    }
    if let Some(picture) = text("picture").or_else(|| text("avatar_url")) {
        claims["picture"] = Value::from(picture);
    }
    if let Some(username) = text("preferred_username").or_else(|| text("username")) {
        claims["preferred_username"] = Value::from(username);
    }
    if let Some(at) = unix_seconds(&user.updated_at) {
        claims["updated_at"] = Value::from(at);
    }
}
