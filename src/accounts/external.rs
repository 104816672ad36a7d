//! Sign-in through OpenID Connect providers (`accounts-providers`), as GoTrue's external
//! providers do it: `GET /authorize?provider=` sends the browser to the provider, which sends it
//! back to `/callback` with a code; rowgate exchanges the code (with PKCE), verifies the ID token
//! (signature from the provider's keys, issuer, audience, expiry, nonce) and sends the browser
//! to `redirect_to` with the session in the fragment — or, for a PKCE client, with a code of its
//! own. `POST /token?grant_type=id_token` signs in with an ID token the client got itself
//! (supabase-js's `signInWithIdToken`).
//!
//! The `state` is a token rowgate signs (with a key derived from the HMAC secret, so it is no
//! access token): nothing is stored until the provider answers. The PKCE verifier and the nonce
//! sent to the provider are derived from it with the same key, so they never leave the server.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{header, StatusCode};
use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreProviderMetadata};
use openidconnect::{
    AccessTokenHash, AuthorizationCode, ClientId, ClientSecret, CsrfToken, IssuerUrl, Nonce,
    OAuth2TokenResponse, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope, TokenResponse,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Digest;

use super::gotrue::{self, fail, internal, store_failed, validation, Answer};
use super::identities::{exchange_failed, identity_of, profile_error};
use super::links::with_fragment;
use super::store::ExternalIdentity;
use super::verify::{error_redirect, with_query};
use super::{unix_now, Accounts};
use crate::config::providers::Provider;

/// How long a browser may take at the provider.
const STATE_LIFETIME: i64 = 600;

/// The providers, their discovery documents (fetched on first use, kept an hour), and the key
/// states are signed with.
pub(super) struct Providers {
    list: Vec<Provider>,
    http: reqwest::Client,
    discovered: moka::future::Cache<String, Arc<CoreProviderMetadata>>,
    key: Vec<u8>,
    /// Where providers send the browser back: `/auth/v1/callback` on `accounts-external-url`.
    callback: String,
    /// When each provider's document was last forgotten for a token its keys did not verify.
    reread_at: std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>,
}

/// What the `state` carries through the provider.
#[derive(Serialize, Deserialize)]
struct State {
    /// Random: the PKCE verifier and the nonce are derived from it.
    id: String,
    provider: String,
    /// Where the browser goes at the end (already checked against the allow list).
    referrer: String,
    /// The client's PKCE challenge, if it runs a PKCE flow, and its method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    challenge: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    method: Option<String>,
    /// The signed-in user the identity is to be added to (manual linking), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    link: Option<String>,
    exp: i64,
}

impl Providers {
    pub(super) fn new(list: &[Provider], secret: &[u8], external_url: &str) -> Providers {
        let http = reqwest::Client::builder()
            // A provider's redirect could lead the server anywhere.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        let mut h = sha2::Sha256::new();
        h.update((secret.len() as u64).to_le_bytes());
        h.update(secret);
        h.update(b"rowgate oauth state");
        Providers {
            list: list.to_vec(),
            http,
            discovered: moka::future::Cache::builder()
                .max_capacity(64)
                .time_to_live(Duration::from_secs(3600))
                .build(),
            key: h.finalize().to_vec(),
            callback: format!("{external_url}/auth/v1/callback"),
            reread_at: std::sync::Mutex::default(),
        }
    }

    /// The providers' names, for `/settings`.
    pub(super) fn names(&self) -> impl Iterator<Item = &str> {
        self.list.iter().map(|p| p.name.as_str())
    }

    fn find(&self, name: &str) -> Option<&Provider> {
        let name = name.to_ascii_lowercase();
        self.list.iter().find(|p| p.name == name)
    }

    /// The provider's discovery document (with its keys).
    async fn metadata(&self, p: &Provider) -> Result<Arc<CoreProviderMetadata>, Answer> {
        let issuer = IssuerUrl::new(p.issuer.clone()).map_err(|_| internal())?;
        let http = self.http.clone();
        self.discovered
            .try_get_with(p.name.clone(), async move {
                CoreProviderMetadata::discover_async(issuer, &http).await.map(Arc::new)
            })
            .await
            .map_err(|e| {
                tracing::error!(provider = %p.name, error = %e, "the provider's discovery document could not be read");
                validation(&format!("Unsupported provider: provider {} could not be reached", p.name))
            })
    }

    /// A client of `p`, as discovered.
    async fn client(
        &self,
        p: &Provider,
    ) -> Result<
        CoreClient<
            openidconnect::EndpointSet,
            openidconnect::EndpointNotSet,
            openidconnect::EndpointNotSet,
            openidconnect::EndpointNotSet,
            openidconnect::EndpointMaybeSet,
            openidconnect::EndpointMaybeSet,
        >,
        Answer,
    > {
        let metadata = self.metadata(p).await?;
        let redirect = RedirectUrl::new(self.callback.clone()).map_err(|_| internal())?;
        Ok(CoreClient::from_provider_metadata(
            (*metadata).clone(),
            ClientId::new(p.client_id.clone()),
            Some(ClientSecret::new(p.secret.clone())),
        )
        .set_redirect_uri(redirect))
    }

    /// Forgets `name`'s discovery document, keys included, so that the next sign-in reads it again
    /// (a token signed with a key published since) — at most once a minute, so that tokens no key
    /// verifies cannot make rowgate fetch the provider's keys on every request.
    async fn reread(&self, name: &str) {
        let now = std::time::Instant::now();
        {
            let mut last = self.reread_at.lock().unwrap_or_else(|e| e.into_inner());
            if last.get(name).is_some_and(|at| now.duration_since(*at) < Duration::from_secs(60)) {
                return;
            }
            last.insert(name.to_owned(), now);
        }
        self.discovered.invalidate(name).await;
    }

    /// A secret derived from a state's id: its PKCE verifier or its nonce.
    fn derived(&self, what: &str, id: &str) -> String {
        use base64::Engine;
        let mut h = sha2::Sha256::new();
        h.update(&self.key);
        h.update(what.as_bytes());
        h.update(id.as_bytes());
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(h.finalize())
    }

    fn sign(&self, state: &State) -> Result<String, Answer> {
        let key = jsonwebtoken::EncodingKey::from_secret(&self.key);
        jsonwebtoken::encode(&jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256), state, &key)
            .map_err(|_| internal())
    }

    fn verify(&self, token: &str) -> Option<State> {
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256);
        validation.validate_aud = false;
        validation.leeway = 0;
        let key = jsonwebtoken::DecodingKey::from_secret(&self.key);
        jsonwebtoken::decode::<State>(token, &key, &validation).ok().map(|d| d.claims)
    }
}

/// The parameters of a request to `/authorize` that are the server's to set.
const RESERVED: [&str; 13] = [
    "provider",
    "skip_http_redirect",
    "scopes",
    "redirect_to",
    "code_challenge",
    "code_challenge_method",
    "client_id",
    "redirect_uri",
    "response_type",
    "state",
    "scope",
    "nonce",
    "response_mode",
];

impl Accounts {
    /// `GET /authorize?provider=&redirect_to=&scopes=&code_challenge=&code_challenge_method=`:
    /// to the provider's login, other parameters passed on to it (`prompt`, `login_hint`, …).
    pub(super) async fn authorize(&self, query: &str) -> Result<Answer, Answer> {
        self.authorize_url(query, None).await.map(found)
    }

    /// The provider's login URL for `/authorize`'s `query`; with `link`, the identity is to be
    /// added to that user's account.
    pub(super) async fn authorize_url(&self, query: &str, link: Option<String>) -> Result<String, Answer> {
        let params: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes()).into_owned().collect();
        let param = |name: &str| params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        let name = param("provider").unwrap_or("");
        let provider = self.providers.find(name).ok_or_else(|| {
            validation(&format!(
                "Unsupported provider: Provider {} could not be found",
                name.to_ascii_lowercase()
            ))
        })?;
        let (challenge, method) = match (param("code_challenge"), param("code_challenge_method")) {
            (None | Some(""), None | Some("")) => (None, None),
            (Some(c), Some(m)) if !c.is_empty() => {
                let m = m.to_ascii_lowercase();
                if m != "s256" && m != "plain" {
                    return Err(validation("code challenge method not supported"));
                }
                if !(43..=128).contains(&c.len()) {
                    return Err(validation("code challenge has to be between 43 and 128 characters"));
                }
                (Some(c.to_owned()), Some(m))
            }
            _ => return Err(validation("PKCE flow requires code_challenge_method and code_challenge")),
        };
        let state = State {
            id: crate::uuid_v4(),
            provider: provider.name.clone(),
            referrer: self.mail.links.redirect(param("redirect_to")),
            challenge,
            method,
            link,
            exp: unix_now() + STATE_LIFETIME,
        };
        let token = self.providers.sign(&state)?;
        let verifier = PkceCodeVerifier::new(self.providers.derived("verifier", &state.id));
        let nonce = Nonce::new(self.providers.derived("nonce", &state.id));
        let mut scopes = provider.scopes.clone();
        for scope in param("scopes").unwrap_or("").split_whitespace() {
            if !scopes.iter().any(|s| s == scope) {
                scopes.push(scope.to_owned());
            }
        }
        let extra: Vec<(String, String)> = params
            .iter()
            .filter(|(k, _)| !RESERVED.contains(&k.to_ascii_lowercase().as_str()))
            .cloned()
            .chain(provider.form_post.then(|| ("response_mode".to_owned(), "form_post".to_owned())))
            .collect();
        if let Some(endpoints) = &provider.oauth2 {
            let challenge = PkceCodeChallenge::from_code_verifier_sha256(&verifier);
            let (callback, challenge) = (&self.providers.callback, challenge.as_str());
            return super::oauth2::authorize_url(
                provider, endpoints, callback, &token, challenge, &scopes, &extra,
            );
        }
        let client = self.providers.client(provider).await?;
        let mut request = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                move || CsrfToken::new(token.clone()),
                move || nonce,
            )
            .set_pkce_challenge(PkceCodeChallenge::from_code_verifier_sha256(&verifier));
        for scope in scopes.into_iter().filter(|s| s != "openid") {
            request = request.add_scope(Scope::new(scope));
        }
        for (k, v) in extra {
            request = request.add_extra_param(k, v);
        }
        let (url, _, _) = request.url();
        Ok(url.to_string())
    }

    /// `/callback` (GET, or POST for a provider's `form_post`): the provider's answer; the
    /// browser goes on to `redirect_to` with the session, a PKCE code, or the error.
    pub(super) async fn callback(&self, query: &str, form: &[u8], posted: bool, client: IpAddr) -> Answer {
        let source = if posted { form } else { query.as_bytes() };
        let params: Vec<(String, String)> = form_urlencoded::parse(source).into_owned().collect();
        let param =
            |name: &str| params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).unwrap_or("");
        let site = self.mail.links.site_url.clone();
        if param("state").is_empty() {
            let e = fail(StatusCode::BAD_REQUEST, "bad_oauth_callback", "OAuth state parameter missing");
            return to_site(&site, &e);
        }
        let Some(state) = self.providers.verify(param("state")) else {
            let e = fail(StatusCode::BAD_REQUEST, "bad_oauth_state", "OAuth state parameter is invalid");
            return to_site(&site, &e);
        };
        let pkce = state.challenge.is_some();
        match self
            .signed_in_by_provider(&state, param("code"), param("error"), param("error_description"), client)
            .await
        {
            Ok(target) => found(target),
            Err(e) => found(error_redirect(&state.referrer, &e, pkce)),
        }
    }

    /// The end of a callback: where the browser goes with the session or code.
    async fn signed_in_by_provider(
        &self,
        state: &State,
        code: &str,
        error: &str,
        description: &str,
        client: IpAddr,
    ) -> Result<String, Answer> {
        if !error.is_empty() {
            return Err(oauth_redirect_error(error, description));
        }
        if code.is_empty() {
            return Err(fail(
                StatusCode::BAD_REQUEST,
                "bad_oauth_callback",
                "OAuth callback with missing authorization code missing",
            ));
        }
        let provider = self.providers.find(&state.provider).ok_or_else(|| {
            fail(StatusCode::BAD_REQUEST, "oauth_provider_not_supported", "Unsupported provider")
        })?;
        let verifier = self.providers.derived("verifier", &state.id);
        let (identity, provider_access, provider_refresh) = match &provider.oauth2 {
            Some(endpoints) => {
                let callback = &self.providers.callback;
                super::oauth2::signed_in(&self.providers.http, provider, endpoints, callback, code, verifier)
                    .await?
            }
            None => self.signed_in_by_oidc(provider, &state.id, code, verifier).await?,
        };
        let user = self.account_for(identity, state.link.clone(), client).await?;
        match (&state.challenge, &state.method) {
            (Some(challenge), Some(method)) => {
                let flow = super::store::Flow {
                    id: crate::uuid_v4(),
                    user_id: user.id.clone(),
                    auth_code: crate::uuid_v4(),
                    challenge: challenge.clone(),
                    method: method.clone(),
                    authentication_method: "oauth".into(),
                };
                self.store.start_flow(flow).await.map_err(store_failed)?;
                let code = self.store.flow_code(user.id, "oauth".into()).await.map_err(store_failed)?;
                let code = code.ok_or_else(internal)?;
                Ok(with_query(&state.referrer, &[("code", &code)]))
            }
            _ => {
                let s = self.provider_session(user.id).await?;
                let mut pairs = vec![
                    ("access_token", s.access.clone()),
                    ("expires_at", s.expires_at.to_string()),
                    ("expires_in", super::TOKEN_LIFETIME.as_secs().to_string()),
                    ("provider_token", provider_access),
                    ("refresh_token", s.refresh.clone()),
                    ("token_type", "bearer".to_owned()),
                ];
                if let Some(r) = provider_refresh {
                    pairs.push(("provider_refresh_token", r));
                }
                let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
                Ok(with_fragment(&state.referrer, &pairs))
            }
        }
    }

    /// Who an OpenID provider signed in: the code exchanged (with the verifier) and the ID token
    /// verified (with the nonce of the state `state_id`); the provider's access and refresh tokens.
    async fn signed_in_by_oidc(
        &self,
        provider: &Provider,
        state_id: &str,
        code: &str,
        verifier: String,
    ) -> Result<(ExternalIdentity, String, Option<String>), Answer> {
        let oidc = self.providers.client(provider).await?;
        let tokens = oidc
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .map_err(|_| internal())?
            .set_pkce_verifier(PkceCodeVerifier::new(verifier))
            .request_async(&self.providers.http)
            .await
            .map_err(|e| exchange_failed(&provider.name, code, &e))?;
        let id_token = tokens.id_token().ok_or_else(profile_error)?;
        let verifier = oidc.id_token_verifier();
        let nonce = Nonce::new(self.providers.derived("nonce", state_id));
        let claims = match id_token.claims(&verifier, &nonce) {
            Ok(claims) => claims,
            Err(e) => {
                tracing::warn!(provider = %provider.name, error = %e, "a provider's ID token was refused");
                self.providers.reread(&provider.name).await;
                return Err(profile_error());
            }
        };
        let identity = identity_of(&provider.name, claims)?;
        Ok((
            identity,
            tokens.access_token().secret().clone(),
            tokens.refresh_token().map(|t| t.secret().clone()),
        ))
    }

    /// `POST /token?grant_type=id_token` `{provider, id_token, access_token?, nonce?}`: a
    /// session for whom an ID token of a configured provider names.
    pub(super) async fn id_token_grant(
        &self,
        body: &[u8],
        client: IpAddr,
        credentials: super::Credentials,
    ) -> Result<Answer, Answer> {
        let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("");
        if text("id_token").is_empty() {
            return Err(oauth_error("invalid request", "id_token required"));
        }
        // With `link_identity`, the identity joins the signed-in user's account.
        let link = match v.get("link_identity").and_then(Value::as_bool).unwrap_or(false) {
            true => match credentials {
                Ok(Some(caller)) if caller.sub.is_some() => caller.sub,
                _ => {
                    return Err(oauth_error(
                        "invalid request",
                        "Linking requires a valid user access token in Authorization",
                    ))
                }
            },
            false => None,
        };
        let provider = match (text("provider"), text("client_id"), text("issuer")) {
            ("", "", _) | ("", _, "") => {
                return Err(oauth_error("invalid request", "provider or client_id and issuer required"))
            }
            ("", client_id, issuer) => self
                .providers
                .list
                .iter()
                .find(|p| p.client_id == client_id && p.issuer == issuer.trim_end_matches('/'))
                .ok_or_else(|| {
                    fail(
                        StatusCode::BAD_REQUEST,
                        "provider_disabled",
                        &format!("Provider (issuer {issuer:?}) is not enabled"),
                    )
                })?,
            (name, _, _) => self.providers.find(name).ok_or_else(|| {
                let name = name.to_ascii_lowercase();
                fail(StatusCode::BAD_REQUEST, "provider_disabled", &format!("Provider {name} is not enabled"))
            })?,
        };
        if provider.oauth2.is_some() {
            return Err(validation(&format!("Provider {} issues no ID tokens", provider.name)));
        }
        let oidc = self.providers.client(provider).await?;
        let id_token: openidconnect::core::CoreIdToken =
            serde_json::from_value(Value::String(text("id_token").to_owned()))
                .map_err(|_| oauth_error("invalid request", "Bad ID token"))?;
        // The audience is checked below: the client, or another of the provider's (a mobile
        // app's), whatever else `aud` lists, as GoTrue accepts them.
        let verifier =
            oidc.id_token_verifier().require_audience_match(false).set_other_audience_verifier_fn(|_| true);
        let given = text("nonce").to_owned();
        let nonce_check = move |nonce: Option<&Nonce>| match (nonce, given.is_empty()) {
            (None, true) => Ok(()),
            (Some(n), false) if *n.secret() == crate::hex(&sha2::Sha256::digest(given.as_bytes())) => Ok(()),
            (Some(_), false) => Err("Nonces mismatch".to_owned()),
            _ => Err("Passed nonce and nonce in id_token should either both exist or not.".to_owned()),
        };
        let claims = match id_token.claims(&verifier, nonce_check) {
            Ok(claims) => claims,
            Err(openidconnect::ClaimsVerificationError::InvalidNonce(why)) if why == "Nonces mismatch" => {
                return Err(oauth_error("invalid nonce", "Nonces mismatch"))
            }
            Err(openidconnect::ClaimsVerificationError::InvalidNonce(why)) => {
                return Err(oauth_error("invalid request", &why))
            }
            Err(e) => {
                tracing::info!(provider = %provider.name, error = %e, "an ID token was refused");
                if matches!(e, openidconnect::ClaimsVerificationError::SignatureVerification(_)) {
                    self.providers.reread(&provider.name).await;
                }
                return Err(oauth_error("invalid request", "Bad ID token"));
            }
        };
        let ours = |a: &openidconnect::Audience| {
            std::iter::once(&provider.client_id).chain(&provider.audiences).any(|o| o == a.as_str())
        };
        if !claims.audiences().iter().any(ours) {
            let listed: Vec<&str> = claims.audiences().iter().map(|a| a.as_str()).collect();
            return Err(oauth_error(
                "invalid request",
                &format!("Unacceptable audience in id_token: {listed:?}"),
            ));
        }
        if let (Some(expected), access) = (claims.access_token_hash(), text("access_token")) {
            if !access.is_empty() {
                let signing = id_token
                    .signing_alg()
                    .ok()
                    .zip(id_token.signing_key(&verifier).ok())
                    .ok_or_else(|| oauth_error("invalid request", "Bad ID token"))?;
                let actual = AccessTokenHash::from_token(
                    &openidconnect::AccessToken::new(access.to_owned()),
                    signing.0,
                    signing.1,
                )
                .map_err(|_| oauth_error("invalid request", "Bad ID token"))?;
                if actual != *expected {
                    return Err(oauth_error("invalid request", "Bad ID token"));
                }
            }
        }
        let identity = identity_of(&provider.name, claims)?;
        let user = self.account_for(identity, link, client).await?;
        self.provider_session(user.id).await.map(|s| Answer::ok(s.json))
    }

    /// A new session of `user_id`, who just signed in through a provider (`amr`: `oauth`).
    async fn provider_session(&self, user_id: String) -> Result<super::Session, Answer> {
        self.signed_in(user_id, "oauth", internal).await
    }
}

/// GoTrue's OAuth error: `{"error", "error_description"}`, 400.
pub(super) fn oauth_error(error: &str, description: &str) -> Answer {
    let body = serde_json::json!({"error": error, "error_description": description});
    Answer { status: StatusCode::BAD_REQUEST, body: Some(body.to_string()), headers: Vec::new() }
}

/// A provider's refusal (`?error=access_denied&error_description=...`), passed on to the page.
fn oauth_redirect_error(error: &str, description: &str) -> Answer {
    let status = match error {
        "access_denied" => StatusCode::FORBIDDEN,
        "temporarily_unavailable" => StatusCode::SERVICE_UNAVAILABLE,
        "server_error" => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::BAD_REQUEST,
    };
    fail(status, error, description)
}

/// Where an error before the state is known sends the browser: the site, the error in its
/// query string.
fn to_site(site: &str, e: &Answer) -> Answer {
    let (error, code, description) = e.error_parts();
    see_other(with_query(
        site,
        &[("error", error), ("error_code", &code), ("error_description", &description)],
    ))
}

pub(super) fn found(target: String) -> Answer {
    let mut answer = Answer::empty(StatusCode::FOUND);
    answer.headers.push((header::LOCATION, target));
    answer
}

fn see_other(target: String) -> Answer {
    let mut answer = Answer::empty(StatusCode::SEE_OTHER);
    answer.headers.push((header::LOCATION, target));
    answer
}
