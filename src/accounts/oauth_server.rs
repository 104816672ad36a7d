//! rowgate as an OAuth 2.1 server to other applications, as Supabase Auth is one
//! (`accounts-oauth-server-enabled`): the authorization code flow with PKCE.
//!
//! 1. The application sends the browser to `GET /oauth/authorize` (its `client_id`, a registered
//!    `redirect_uri`, `scope`, `state`, `code_challenge`); rowgate keeps the request and sends the
//!    browser on to the site's consent page (`accounts-oauth-server-authorization-path`) with an
//!    `authorization_id`.
//! 2. That page, its user signed in, reads the request (`GET /oauth/authorizations/{id}`; one the
//!    user consented to before is approved at once) and answers it (`POST .../consent`
//!    `{action: approve|deny}`); either way it gets the `redirect_url` to send the browser to,
//!    with a one-time `code` (or GoTrue's `error`).
//! 3. The application exchanges the code at `POST /oauth/token` (`oauth_token`) for a session
//!    of its own: its tokens carry `client_id` and `scope`, and only it refreshes them.
//!
//! Also a user's grants (`/user/oauth/grants`: listed, revoked with the application's sessions)
//! and the server's metadata (`/.well-known/oauth-authorization-server`, and
//! `/.well-known/openid-configuration`).

use std::net::IpAddr;

use http::request::Parts;
use http::{header, StatusCode};
use serde_json::{json, Value};

use super::external::found;
use super::gotrue::{bad_json, fail, internal, store_failed, validation, Answer};
use super::oauth_server_store::{Authorization, OAuthClient};
use super::store::{token_hash, unix_now};
use super::verify::with_query;
use super::{Accounts, Caller};

/// How long a user has to answer an authorization request (GoTrue's default).
const AUTHORIZATION_TTL: i64 = 600;
/// The scope asked when a request names none (GoTrue's default).
const DEFAULT_SCOPE: &str = "email";
/// The scopes rowgate grants.
const SCOPES: [&str; 5] = ["openid", "profile", "email", "phone", "offline_access"];

/// An OAuth error as GoTrue answers it at the token endpoint: 400 `{error, error_description}`.
pub(super) fn oauth_error(error: &str, description: &str) -> Answer {
    let mut answer = Answer::ok(json!({"error": error, "error_description": description}).to_string());
    answer.status = StatusCode::BAD_REQUEST;
    answer
}

fn not_found() -> Answer {
    fail(StatusCode::NOT_FOUND, "oauth_authorization_not_found", "authorization not found")
}

/// Where an authorization's refusal goes: the application's redirect URI with the OAuth error.
fn error_redirect(redirect_uri: &str, error: &str, description: &str, state: Option<&str>) -> String {
    let mut pairs = vec![("error", error), ("error_description", description)];
    if let Some(state) = state.filter(|s| !s.is_empty()) {
        pairs.push(("state", state));
    }
    with_query(redirect_uri, &pairs)
}

/// A client as the consent page and the grants describe it.
fn client_details(c: &OAuthClient) -> Value {
    let mut details = json!({ "id": c.id });
    for (key, value) in [("name", &c.client_name), ("uri", &c.client_uri), ("logo_uri", &c.logo_uri)] {
        if let Some(v) = value {
            details[key] = Value::from(v.as_str());
        }
    }
    details
}

impl Accounts {
    /// `GET /oauth/authorize`: an application's request, kept, and the browser sent on to the
    /// consent page. A request whose client or redirect URI is wrong is refused here (400):
    /// it cannot be sent back anywhere trusted; any other fault goes back to the redirect URI.
    pub(super) async fn oauth_authorize(&self, query: &str, from: IpAddr) -> Result<Answer, Answer> {
        self.oauth_server_enabled()?;
        // Each request is kept until it expires: a stranger's flood of them is refused.
        if !self.limits.ceremony(from) {
            return Err(super::too_many("Too many authorization requests from this client"));
        }
        let param = |name: &str| {
            form_urlencoded::parse(query.as_bytes())
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.into_owned())
                .filter(|v| !v.is_empty())
        };
        let client_id = param("client_id").ok_or_else(|| validation("client_id is required"))?;
        let redirect_uri = param("redirect_uri").ok_or_else(|| validation("redirect_uri is required"))?;
        if !super::admin::is_uuid(&client_id) {
            return Err(fail(StatusCode::BAD_REQUEST, "oauth_client_not_found", "invalid client_id format"));
        }
        let client = self.store.oauth_client(client_id).await.map_err(store_failed)?;
        let client = client
            .ok_or_else(|| fail(StatusCode::BAD_REQUEST, "oauth_client_not_found", "invalid client_id"))?;
        if !client.redirect_uris.contains(&redirect_uri) {
            return Err(validation("invalid redirect_uri"));
        }
        let state = param("state");
        let refuse =
            |why: &str| Ok(found(error_redirect(&redirect_uri, "invalid_request", why, state.as_deref())));
        let scope = param("scope").unwrap_or_else(|| DEFAULT_SCOPE.into());
        let (challenge, method) = (param("code_challenge"), param("code_challenge_method"));
        let resource = param("resource");
        let nonce = param("nonce");
        if param("response_type").is_some_and(|t| t != "code") {
            return refuse("only response_type=code is supported");
        }
        // Each scope once, in the order asked.
        let mut scopes: Vec<&str> = Vec::new();
        for s in scope.split_whitespace() {
            if !scopes.contains(&s) {
                scopes.push(s);
            }
        }
        if let Some(unknown) = scopes.iter().find(|s| !SCOPES.contains(s)) {
            return refuse(&format!("unsupported scope: {unknown}"));
        }
        if scopes.is_empty() {
            return refuse("scope parameter cannot be empty");
        }
        if let Some(why) = resource.as_deref().and_then(resource_fault) {
            return refuse(why);
        }
        let (Some(challenge), Some(method)) = (challenge, method) else {
            return refuse("PKCE flow requires both code_challenge and code_challenge_method");
        };
        let method = method.to_ascii_lowercase();
        if method != "s256" && method != "plain" {
            return refuse("code_challenge_method must be 'S256' or 'plain'");
        }
        if !(43..=128).contains(&challenge.len()) {
            return refuse("code_challenge must be between 43 and 128 characters");
        }
        // RFC 7636's alphabet (what a verifier or its S256 hash is made of).
        if !challenge.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b)) {
            return refuse("code_challenge has characters PKCE does not use");
        }
        // The columns' limits (GoTrue's table): longer is a client's fault, not a server error.
        for (name, value, max) in
            [("scope", Some(&scope), 4096), ("state", state.as_ref(), 4096), ("nonce", nonce.as_ref(), 255)]
        {
            if value.is_some_and(|v| v.chars().count() > max) {
                return refuse(&format!("{name} is too long"));
            }
            if value.is_some_and(|v| v.contains('\0')) {
                return refuse(&format!("{name} must not contain NUL characters"));
            }
        }
        let Some(path) = &self.oauth_server.authorization_path else {
            let why = "oauth authorization path not configured";
            return Ok(found(error_redirect(&redirect_uri, "server_error", why, state.as_deref())));
        };
        let id = super::store::random_token();
        let authorization = Authorization {
            id: id.clone(),
            client_id: client.id,
            user_id: None,
            redirect_uri,
            scope: scopes.join(" "),
            state,
            resource,
            code_challenge: challenge,
            code_challenge_method: method,
            nonce,
            status: "pending".into(),
            expires_at: unix_now() + AUTHORIZATION_TTL,
        };
        self.store.begin_authorization(authorization).await.map_err(store_failed)?;
        let page =
            format!("{}/{}", self.mail.links.site_url.trim_end_matches('/'), path.trim_start_matches('/'));
        Ok(found(with_query(&page, &[("authorization_id", &id)])))
    }

    /// `GET /oauth/authorizations/{id}` from the consent page: the request, now the signed-in
    /// user's; or, if the user consented to all it asks before, `{redirect_url}` at once.
    pub(super) async fn oauth_authorization(
        &self,
        parts: &Parts,
        caller: &Caller,
        id: &str,
    ) -> Result<Answer, Answer> {
        self.oauth_server_enabled()?;
        let user = self.consenting_user(parts, caller).await?;
        let claimed =
            self.store.claim_authorization(id.to_owned(), user.id.clone()).await.map_err(store_failed)?;
        let Some(authorization) = claimed else { return Err(self.unclaimable(id).await) };
        let consented = self
            .store
            .consent(user.id.clone(), authorization.client_id.clone())
            .await
            .map_err(store_failed)?
            .unwrap_or_default();
        if authorization.scope.split_whitespace().all(|s| consented.iter().any(|c| c == s)) {
            return self.decide(id, &user.id, true).await;
        }
        let client = self.store.oauth_client(authorization.client_id.clone()).await.map_err(store_failed)?;
        let client = client.ok_or_else(not_found)?;
        let mut user_json = json!({ "id": user.id });
        if let Some(email) = &user.email {
            user_json["email"] = Value::from(email.as_str());
        }
        Ok(Answer::ok(
            json!({
                "authorization_id": authorization.id,
                "redirect_uri": authorization.redirect_uri,
                "client": client_details(&client),
                "user": user_json,
                "scope": authorization.scope,
            })
            .to_string(),
        ))
    }

    /// `POST /oauth/authorizations/{id}/consent` `{action: approve|deny}`: the user's answer, and
    /// where to send the browser.
    pub(super) async fn oauth_consent(
        &self,
        parts: &Parts,
        caller: &Caller,
        id: &str,
        body: &[u8],
    ) -> Result<Answer, Answer> {
        self.oauth_server_enabled()?;
        let user = self.consenting_user(parts, caller).await?;
        let v: Value = serde_json::from_slice(body).map_err(|_| bad_json())?;
        let approve = match v.get("action").and_then(Value::as_str) {
            Some("approve") => true,
            Some("deny") => false,
            _ => return Err(validation("action must be 'approve' or 'deny'")),
        };
        self.decide(id, &user.id, approve).await
    }

    /// Approves or denies the user's pending authorization `id`: `{redirect_url}`.
    async fn decide(&self, id: &str, user_id: &str, approve: bool) -> Result<Answer, Answer> {
        let code = approve.then(super::store::random_token);
        let decided = self
            .store
            .decide_authorization(id.to_owned(), user_id.to_owned(), code.as_deref().map(token_hash))
            .await
            .map_err(store_failed)?;
        let Some(a) = decided else { return Err(self.unclaimable(id).await) };
        let redirect_url = match &code {
            Some(code) => {
                let mut pairs = vec![("code", code.as_str())];
                if let Some(state) = a.state.as_deref().filter(|s| !s.is_empty()) {
                    pairs.push(("state", state));
                }
                with_query(&a.redirect_uri, &pairs)
            }
            None => error_redirect(
                &a.redirect_uri,
                "access_denied",
                "User denied the request",
                a.state.as_deref(),
            ),
        };
        Ok(Answer::ok(json!({ "redirect_url": redirect_url }).to_string()))
    }

    /// Why the authorization `id` could not be taken up by its user: gone, expired or another
    /// user's (404), or decided already (400).
    async fn unclaimable(&self, id: &str) -> Answer {
        match self.store.authorization(id.to_owned()).await {
            Ok(Some(a)) if a.status != "pending" && a.expires_at > unix_now() => {
                validation("authorization request cannot be processed")
            }
            Ok(_) => not_found(),
            Err(_) => internal(),
        }
    }

    /// The user answering on the consent page: signed in by a session of their own (an
    /// application's token decides nothing for its user), from a page the site allows.
    async fn consenting_user(&self, parts: &Parts, caller: &Caller) -> Result<super::User, Answer> {
        if let Some(origin) = parts.headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
            if !self.mail.links.allows(origin) {
                return Err(validation("unauthorized request origin"));
            }
        }
        if caller.client_id.is_some() {
            return Err(super::user::application_refused());
        }
        self.signed_in_user(caller).await
    }

    /// `GET /user/oauth/grants`: the applications the user consented to, newest first.
    pub(super) async fn oauth_grants(&self, caller: &Caller) -> Result<Answer, Answer> {
        self.oauth_server_enabled()?;
        let user = self.own_user(caller).await?;
        let grants = self.store.grants(user.id).await.map_err(store_failed)?;
        let grants: Vec<Value> = grants
            .iter()
            .map(|g| json!({"client": client_details(&g.client), "scopes": g.scopes, "granted_at": g.granted_at}))
            .collect();
        Ok(Answer::ok(Value::from(grants).to_string()))
    }

    /// `DELETE /user/oauth/grants?client_id=`: the user's consent to an application withdrawn,
    /// and the sessions it holds for them ended (its refresh tokens stop working).
    pub(super) async fn oauth_revoke_grant(
        &self,
        caller: &Caller,
        client_id: Option<String>,
    ) -> Result<Answer, Answer> {
        self.oauth_server_enabled()?;
        let user = self.own_user(caller).await?;
        let client_id = client_id.ok_or_else(|| validation("client_id query parameter is required"))?;
        if !super::admin::is_uuid(&client_id) {
            return Err(validation("invalid client_id format"));
        }
        if !self.store.revoke_grant(user.id, client_id).await.map_err(store_failed)? {
            return Err(fail(
                StatusCode::NOT_FOUND,
                "oauth_consent_not_found",
                "No active grant found for this client",
            ));
        }
        Ok(Answer::empty(StatusCode::NO_CONTENT))
    }

    /// A user acting on their own account: an application's token manages no grants.
    async fn own_user(&self, caller: &Caller) -> Result<super::User, Answer> {
        if caller.client_id.is_some() {
            return Err(super::user::application_refused());
        }
        self.signed_in_user(caller).await
    }

    /// Where clients find this server: `accounts-external-url` + `/auth/v1`.
    pub(super) fn issuer(&self) -> String {
        format!("{}/auth/v1", self.mail.links.external_url().trim_end_matches('/'))
    }

    /// The server's metadata (RFC 8414; OpenID Connect Discovery is a superset, so both paths
    /// answer it).
    pub(super) fn oauth_metadata(&self) -> Answer {
        let issuer = self.issuer();
        let mut metadata = json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{issuer}/oauth/authorize"),
            "token_endpoint": format!("{issuer}/oauth/token"),
            "jwks_uri": format!("{issuer}/.well-known/jwks.json"),
            "userinfo_endpoint": format!("{issuer}/oauth/userinfo"),
            "scopes_supported": SCOPES,
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": [self.keys.algorithm()],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
            "code_challenge_methods_supported": ["S256", "plain"],
            "claims_supported": ["sub", "aud", "iss", "exp", "iat", "auth_time", "nonce", "email", "email_verified",
                "phone_number", "phone_number_verified", "name", "picture", "preferred_username", "updated_at"],
        });
        if self.oauth_server.enabled && self.oauth_server.dynamic_registration {
            metadata["registration_endpoint"] = Value::from(format!("{issuer}/oauth/clients/register"));
        }
        let mut answer = Answer::ok(metadata.to_string());
        answer.headers.push((header::CACHE_CONTROL, "public, max-age=600".into()));
        answer
    }
}

/// Why a `resource` (RFC 8707) is refused, if it is: an absolute URI without fragment or query.
fn resource_fault(resource: &str) -> Option<&'static str> {
    match url::Url::parse(resource) {
        Err(_) => Some("resource must be an absolute URI"),
        Ok(u) if u.fragment().is_some() => Some("resource must not include a fragment component"),
        Ok(u) if u.query().is_some() => Some("resource must not include a query component"),
        Ok(_) => None,
    }
}
