//! The applications registered with Supabase Auth as an OAuth 2.1 server
//! (`accounts-oauth-server-enabled`), as GoTrue manages them: `/admin/oauth/clients` for an
//! administrator (registered, listed a page at a time, read, changed, deleted, secret
//! regenerated) and RFC 7591 dynamic registration at `/oauth/clients/register`
//! (`accounts-oauth-server-dynamic-registration`). A confidential client's secret is shown once,
//! when it is made; only its SHA-256 is kept.

use std::net::IpAddr;

use http::{Method, StatusCode};
use serde::Deserialize;
use serde_json::Value;

use super::admin::Page;
use super::gotrue::{bad_json, fail, store_failed, validation, Answer};
use super::oauth_server_store::OAuthClient;
use super::Accounts;
use crate::config::providers::on_this_machine;

/// How a client proves itself at the token endpoint (RFC 7591's `token_endpoint_auth_method`).
const AUTH_METHODS: [&str; 3] = ["none", "client_secret_basic", "client_secret_post"];
/// The most redirect URIs a client registers (GoTrue's limit).
const MAX_REDIRECT_URIS: usize = 10;

/// What a registration names (RFC 7591's client metadata, as GoTrue takes them).
#[derive(Deserialize)]
struct Registration {
    #[serde(default)]
    redirect_uris: Vec<String>,
    #[serde(default)]
    client_type: String,
    #[serde(default)]
    token_endpoint_auth_method: String,
    #[serde(default)]
    grant_types: Vec<String>,
    #[serde(default)]
    client_name: String,
    #[serde(default)]
    client_uri: String,
    #[serde(default)]
    logo_uri: String,
}

/// What an update may change; absent fields stay.
#[derive(Deserialize)]
struct Changes {
    redirect_uris: Option<Vec<String>>,
    grant_types: Option<Vec<String>>,
    client_name: Option<String>,
    client_uri: Option<String>,
    logo_uri: Option<String>,
    token_endpoint_auth_method: Option<String>,
}

impl Accounts {
    /// `/admin/oauth/clients[/id[/regenerate_secret]]` for an administrator; `rest` is what
    /// follows `/admin/oauth/clients`, `path` the request's path.
    pub(super) async fn admin_oauth_clients(
        &self,
        method: &Method,
        path: &str,
        rest: &str,
        query: &str,
        body: &[u8],
    ) -> Result<Answer, Answer> {
        self.oauth_server_enabled()?;
        let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
        match (method, parts.as_slice()) {
            (&Method::POST, []) => self.register_client(body, "manual").await,
            (&Method::GET, []) => self.list_clients(path, query).await,
            (_, [id, more @ ..]) => {
                let client = self.client_named(id).await?;
                match (method, more) {
                    (&Method::GET, []) => Ok(Answer::ok(client_json(&client, None).to_string())),
                    (&Method::PUT, []) => self.update_client(client, body).await,
                    (&Method::DELETE, []) => {
                        self.store.delete_oauth_client(client.id).await.map_err(store_failed)?;
                        Ok(Answer::empty(StatusCode::NO_CONTENT))
                    }
                    (&Method::POST, ["regenerate_secret"]) => self.regenerate_secret(client).await,
                    _ => Err(fail(StatusCode::NOT_FOUND, "not_found", "Not found")),
                }
            }
            _ => Err(fail(StatusCode::METHOD_NOT_ALLOWED, "not_found", "Method not allowed")),
        }
    }

    /// `POST /oauth/clients/register`: RFC 7591's dynamic registration, open to anyone when
    /// `accounts-oauth-server-dynamic-registration` allows it; an application's registration
    /// counts as a sign-up from its client (`accounts-signup-rate-limit`).
    pub(super) async fn register_dynamically(&self, body: &[u8], from: IpAddr) -> Result<Answer, Answer> {
        self.oauth_server_enabled()?;
        if !self.oauth_server.dynamic_registration {
            return Err(fail(
                StatusCode::FORBIDDEN,
                "oauth_dynamic_client_registration_disabled",
                "Dynamic client registration is not enabled",
            ));
        }
        if !self.limits.sign_up(from) {
            return Err(super::too_many("Too many client registrations from this client"));
        }
        self.register_client(body, "dynamic").await
    }

    /// GoTrue's refusal when the OAuth server is off.
    pub(super) fn oauth_server_enabled(&self) -> Result<(), Answer> {
        match self.oauth_server.enabled {
            true => Ok(()),
            false => Err(fail(StatusCode::NOT_FOUND, "feature_disabled", "OAuth server is disabled")),
        }
    }

    async fn register_client(&self, body: &[u8], registration_type: &str) -> Result<Answer, Answer> {
        let r: Registration = serde_json::from_slice(body).map_err(|_| bad_json())?;
        if r.redirect_uris.is_empty() {
            return Err(validation("redirect_uris is required"));
        }
        redirect_uris(&r.redirect_uris)?;
        if !r.grant_types.is_empty() {
            grant_types(&r.grant_types)?;
        }
        checked_details(&r.client_name, &r.client_uri, &r.logo_uri)?;
        if !["", "public", "confidential"].contains(&r.client_type.as_str()) {
            return Err(validation("client_type must be 'public' or 'confidential'"));
        }
        if !r.token_endpoint_auth_method.is_empty() {
            auth_method(&r.token_endpoint_auth_method)?;
        }
        let inferred = |method: &str| match method {
            "none" => "public",
            _ => "confidential",
        };
        if !r.client_type.is_empty()
            && !r.token_endpoint_auth_method.is_empty()
            && r.client_type != inferred(&r.token_endpoint_auth_method)
        {
            return Err(validation(&format!(
                "client_type '{}' is inconsistent with token_endpoint_auth_method '{}' (expected client_type '{}')",
                r.client_type,
                r.token_endpoint_auth_method,
                inferred(&r.token_endpoint_auth_method)
            )));
        }
        let client_type = match (r.client_type.as_str(), r.token_endpoint_auth_method.as_str()) {
            ("", "") => "confidential",
            ("", method) => inferred(method),
            (explicit, _) => explicit,
        };
        let token_endpoint_auth_method = match (r.token_endpoint_auth_method.as_str(), client_type) {
            ("", "public") => "none",
            ("", _) => "client_secret_basic",
            (method, _) => method,
        };
        let secret = (client_type == "confidential").then(super::store::random_token);
        let grant_types = match r.grant_types.is_empty() {
            true => vec!["authorization_code".to_owned(), "refresh_token".to_owned()],
            false => r.grant_types,
        };
        let client = OAuthClient {
            id: crate::uuid_v4(),
            registration_type: registration_type.into(),
            client_type: client_type.into(),
            token_endpoint_auth_method: token_endpoint_auth_method.into(),
            secret_hash: secret.as_deref().map(secret_hash),
            redirect_uris: r.redirect_uris,
            grant_types,
            client_name: some(r.client_name),
            client_uri: some(r.client_uri),
            logo_uri: some(r.logo_uri),
            created_at: String::new(),
            updated_at: String::new(),
        };
        let client = self.store.add_oauth_client(client).await.map_err(store_failed)?;
        let mut answer = Answer::ok(client_json(&client, secret.as_deref()).to_string());
        answer.status = StatusCode::CREATED;
        Ok(answer)
    }

    async fn list_clients(&self, path: &str, query: &str) -> Result<Answer, Answer> {
        let page = Page::of(query)?;
        let (clients, total) =
            self.store.oauth_clients(page.offset(), page.per_page()).await.map_err(store_failed)?;
        let clients: Vec<Value> = clients.iter().map(|c| client_json(c, None)).collect();
        Ok(page.answer(serde_json::json!({ "clients": clients }).to_string(), path, total))
    }

    /// The client a path names, or GoTrue's refusal.
    async fn client_named(&self, id: &str) -> Result<OAuthClient, Answer> {
        if !super::admin::is_uuid(id) {
            return Err(validation("invalid client_id format"));
        }
        self.store
            .oauth_client(id.to_owned())
            .await
            .map_err(store_failed)?
            .ok_or_else(|| fail(StatusCode::NOT_FOUND, "oauth_client_not_found", "OAuth client not found"))
    }

    async fn update_client(&self, mut client: OAuthClient, body: &[u8]) -> Result<Answer, Answer> {
        let c: Changes = serde_json::from_slice(body).map_err(|_| bad_json())?;
        if c.redirect_uris.is_none()
            && c.grant_types.is_none()
            && c.client_name.is_none()
            && c.client_uri.is_none()
            && c.logo_uri.is_none()
            && c.token_endpoint_auth_method.is_none()
        {
            return Err(validation("No fields provided for update"));
        }
        if let Some(uris) = c.redirect_uris {
            if uris.is_empty() {
                return Err(validation("redirect_uris cannot be empty"));
            }
            redirect_uris(&uris)?;
            client.redirect_uris = uris;
        }
        if let Some(grants) = c.grant_types {
            grant_types(&grants)?;
            client.grant_types = grants;
        }
        let empty = String::new();
        checked_details(
            c.client_name.as_ref().unwrap_or(&empty),
            c.client_uri.as_ref().unwrap_or(&empty),
            c.logo_uri.as_ref().unwrap_or(&empty),
        )?;
        if let Some(name) = c.client_name {
            client.client_name = some(name);
        }
        if let Some(uri) = c.client_uri {
            client.client_uri = some(uri);
        }
        if let Some(uri) = c.logo_uri {
            client.logo_uri = some(uri);
        }
        if let Some(method) = c.token_endpoint_auth_method {
            auth_method(&method)?;
            let fits = match client.client_type.as_str() {
                "public" => method == "none",
                _ => method != "none",
            };
            if !fits {
                return Err(validation(&format!(
                    "token_endpoint_auth_method '{method}' is not valid for client_type '{}'",
                    client.client_type
                )));
            }
            client.token_endpoint_auth_method = method;
        }
        let saved = self.store.save_oauth_client(client).await.map_err(store_failed)?;
        let saved = saved
            .ok_or_else(|| fail(StatusCode::NOT_FOUND, "oauth_client_not_found", "OAuth client not found"))?;
        Ok(Answer::ok(client_json(&saved, None).to_string()))
    }

    async fn regenerate_secret(&self, client: OAuthClient) -> Result<Answer, Answer> {
        if client.client_type != "confidential" {
            return Err(validation("Cannot regenerate secret for public client"));
        }
        let secret = super::store::random_token();
        let saved = self
            .store
            .set_oauth_client_secret(client.id, secret_hash(&secret))
            .await
            .map_err(store_failed)?;
        let saved = saved
            .ok_or_else(|| fail(StatusCode::NOT_FOUND, "oauth_client_not_found", "OAuth client not found"))?;
        Ok(Answer::ok(client_json(&saved, Some(&secret)).to_string()))
    }
}

/// A client as GoTrue answers it; its secret only when just made.
fn client_json(c: &OAuthClient, secret: Option<&str>) -> Value {
    let mut json = serde_json::json!({
        "client_id": c.id,
        "client_type": c.client_type,
        "redirect_uris": c.redirect_uris,
        "token_endpoint_auth_method": c.token_endpoint_auth_method,
        "grant_types": c.grant_types,
        "response_types": ["code"],
        "registration_type": c.registration_type,
        "created_at": c.created_at,
        "updated_at": c.updated_at,
    });
    for (key, value) in [
        ("client_name", &c.client_name),
        ("client_uri", &c.client_uri),
        ("logo_uri", &c.logo_uri),
        ("client_secret", &secret.map(str::to_owned)),
    ] {
        if let Some(v) = value {
            json[key] = Value::from(v.as_str());
        }
    }
    json
}

/// How a client's secret is kept: its SHA-256, base64url (GoTrue's, so clients it registered
/// keep their secrets).
pub(super) fn secret_hash(secret: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(secret.as_bytes()))
}

fn some(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

/// Redirect URIs as OAuth 2.1 allows them: absolute, no fragment, no scheme that runs code or
/// reads local data, and plain `http` only back to the user's own machine.
fn redirect_uris(uris: &[String]) -> Result<(), Answer> {
    if uris.len() > MAX_REDIRECT_URIS {
        return Err(validation("redirect_uris cannot exceed 10 items"));
    }
    for uri in uris {
        redirect_uri(uri).map_err(|why| validation(&format!("invalid redirect_uri '{uri}': {why}")))?;
    }
    Ok(())
}

fn redirect_uri(uri: &str) -> Result<(), &'static str> {
    if uri.is_empty() {
        return Err("redirect URI cannot be empty");
    }
    if uri.chars().count() > 2048 {
        return Err("redirect URI cannot exceed 2048 characters");
    }
    if uri.contains('\0') {
        return Err("redirect URI must not contain NUL characters");
    }
    let url = url::Url::parse(uri).map_err(|_| "invalid URL format")?;
    if url.host_str().is_none_or(str::is_empty) {
        return Err("must have scheme and host");
    }
    if ["javascript", "data", "file", "vbscript", "about", "blob"].contains(&url.scheme()) {
        return Err("scheme is not allowed for security reasons");
    }
    if url.scheme() == "http" && !on_this_machine(&url) {
        return Err("HTTP scheme only allowed for localhost");
    }
    if url.fragment().is_some() {
        return Err("fragment not allowed in redirect URI");
    }
    // GoTrue keeps a client's URIs comma-joined: one with a comma would come back as two.
    if uri.contains(',') {
        return Err("a comma is not allowed in a redirect URI");
    }
    Ok(())
}

fn grant_types(grants: &[String]) -> Result<(), Answer> {
    if grants.is_empty() {
        return Err(validation("grant_types cannot be empty"));
    }
    if grants.iter().any(|g| g != "authorization_code" && g != "refresh_token") {
        return Err(validation("grant_types must only contain 'authorization_code' and/or 'refresh_token'"));
    }
    Ok(())
}

fn auth_method(method: &str) -> Result<(), Answer> {
    match AUTH_METHODS.contains(&method) {
        true => Ok(()),
        false => Err(validation(&format!("token_endpoint_auth_method must be one of: {AUTH_METHODS:?}"))),
    }
}

/// Checks a client's name (at most 1,024 characters) and its page and logo (`https` URLs of at most
/// 2,048).
fn checked_details(name: &str, uri: &str, logo: &str) -> Result<(), Answer> {
    if [name, uri, logo].iter().any(|v| v.contains('\0')) {
        return Err(validation("client metadata must not contain NUL characters"));
    }
    if name.chars().count() > 1024 {
        return Err(validation("client_name cannot exceed 1024 characters"));
    }
    for (field, value) in [("client_uri", uri), ("logo_uri", logo)] {
        if value.is_empty() {
            continue;
        }
        if value.chars().count() > 2048 {
            return Err(validation(&format!("{field} cannot exceed 2048 characters")));
        }
        // Shown as links on the consent page: a `javascript:` one would run there.
        let web = url::Url::parse(value)
            .is_ok_and(|u| u.scheme() == "https" || (u.scheme() == "http" && on_this_machine(&u)));
        if !web {
            return Err(validation(&format!("{field} must be a valid URL")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{redirect_uri, secret_hash};

    #[test]
    fn redirect_uris_are_absolute_without_fragments_and_http_only_to_this_machine() {
        for good in [
            "https://app.example.com/cb",
            "http://localhost:3000/cb",
            "http://127.0.0.1/cb",
            "myapp://host/cb",
        ] {
            assert_eq!(redirect_uri(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "/cb",
            "http://app.example.com/cb",
            "https://app.example.com/cb#x",
            "https://app.example.com/cb?a=1,2",
            "javascript://x/%0aalert(1)",
            "data://x/y",
        ] {
            assert!(redirect_uri(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_secret_is_kept_as_gotrue_keeps_it() {
        // base64url(SHA-256("secret")), unpadded.
        assert_eq!(secret_hash("secret"), "K7gNU3sdo-OL0wNhqoVWhr3g6s1xYv72ol_pe_Unols");
    }
}
