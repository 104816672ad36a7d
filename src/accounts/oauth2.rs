//! Sign-in through providers that speak OAuth 2.0 without OpenID Connect (GitHub, Discord, or
//! any with a userinfo endpoint): no discovery and no ID token, so who signed in is what the
//! provider's userinfo endpoint says to the access token the code was exchanged for. The
//! authorization URL, the state and the PKCE verifier are as for OpenID Connect providers
//! (`accounts/external.rs`).

use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret, PkceCodeVerifier, RedirectUrl, TokenResponse,
    TokenUrl,
};
use serde_json::Value;

use super::gotrue::{internal, Answer};
use super::identities::{exchange_failed, identity, profile_error};
use super::store::ExternalIdentity;
use crate::config::providers::{OAuth2, Profile, Provider};

/// The provider's login URL: the authorization code flow with PKCE (S256).
pub(super) fn authorize_url(
    p: &Provider,
    endpoints: &OAuth2,
    callback: &str,
    state: &str,
    challenge: &str,
    scopes: &[String],
    extra: &[(String, String)],
) -> Result<String, Answer> {
    let mut url = url::Url::parse(&endpoints.authorize_url).map_err(|_| internal())?;
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", &p.client_id)
        .append_pair("redirect_uri", callback)
        .append_pair("scope", &scopes.join(" "))
        .append_pair("state", state)
        .append_pair("code_challenge", challenge)
        .append_pair("code_challenge_method", "S256")
        .extend_pairs(extra);
    Ok(url.to_string())
}

/// Who signed in: the code exchanged (with the verifier) for an access token, and the user the
/// provider says that token is for; with the provider's access and refresh tokens.
pub(super) async fn signed_in(
    http: &reqwest::Client,
    p: &Provider,
    endpoints: &OAuth2,
    callback: &str,
    code: &str,
    verifier: String,
) -> Result<(ExternalIdentity, String, Option<String>), Answer> {
    let client = oauth2::basic::BasicClient::new(ClientId::new(p.client_id.clone()))
        .set_client_secret(ClientSecret::new(p.secret.clone()))
        .set_auth_uri(AuthUrl::new(endpoints.authorize_url.clone()).map_err(|_| internal())?)
        .set_token_uri(TokenUrl::new(endpoints.token_url.clone()).map_err(|_| internal())?)
        .set_redirect_uri(RedirectUrl::new(callback.to_owned()).map_err(|_| internal())?);
    let tokens = client
        .exchange_code(AuthorizationCode::new(code.to_owned()))
        .set_pkce_verifier(PkceCodeVerifier::new(verifier))
        .request_async(http)
        .await
        .map_err(|e| exchange_failed(&p.name, code, &e))?;
    let access = tokens.access_token().secret().clone();
    let user = get(http, &endpoints.userinfo_url, &access).await?;
    let identity = match endpoints.profile {
        Profile::Claims => from_claims(&p.name, &user),
        Profile::Discord => from_discord(&p.name, &user),
        Profile::GitHub => {
            // The primary address is in /user/emails, with whether GitHub verified it.
            let emails_url = format!("{}/emails", endpoints.userinfo_url);
            let emails = get(http, &emails_url, &access).await?;
            from_github(&p.name, &user, &emails)
        }
    }?;
    Ok((identity, access, tokens.refresh_token().map(|t| t.secret().clone())))
}

/// A GET of the provider's API with the user's token: its JSON.
async fn get(http: &reqwest::Client, url: &str, access: &str) -> Result<Value, Answer> {
    let response = http
        .get(url)
        .bearer_auth(access)
        .header("accept", "application/json")
        // GitHub's API refuses a request without one.
        .header("user-agent", "rowgate")
        .send()
        .await
        .map_err(|e| {
            tracing::warn!(url, error = %e, "a provider's userinfo endpoint could not be reached");
            profile_error()
        })?;
    if !response.status().is_success() {
        tracing::warn!(url, status = %response.status(), "a provider's userinfo endpoint refused the token");
        return Err(profile_error());
    }
    let body = response.bytes().await.map_err(|_| profile_error())?;
    serde_json::from_slice(&body).map_err(|_| profile_error())
}

/// A string or a number, as text (ids are numbers at GitHub).
fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A userinfo answer in OpenID Connect's claims.
fn from_claims(provider: &str, u: &Value) -> Result<ExternalIdentity, Answer> {
    let s = |k: &str| u.get(k).and_then(Value::as_str);
    let verified =
        matches!(u.get("email_verified"), Some(Value::Bool(true))) || s("email_verified") == Some("true");
    identity(
        provider,
        text(&u["sub"]).unwrap_or_default(),
        s("email").map(str::to_owned),
        verified,
        false,
        &[
            ("name", s("name")),
            ("full_name", s("name")),
            ("preferred_username", s("preferred_username")),
            ("picture", s("picture")),
            ("avatar_url", s("picture")),
        ],
    )
}

/// GitHub's user and its addresses: the primary one, verified or not as GitHub says.
fn from_github(provider: &str, u: &Value, emails: &Value) -> Result<ExternalIdentity, Answer> {
    let s = |k: &str| u.get(k).and_then(Value::as_str);
    let listed = emails.as_array().cloned().unwrap_or_default();
    let primary = listed.iter().find(|e| e["primary"] == true).or_else(|| listed.first());
    let email = primary.and_then(|e| e["email"].as_str()).or_else(|| s("email")).map(str::to_owned);
    let verified = primary.is_some_and(|e| e["verified"] == true);
    identity(
        provider,
        text(&u["id"]).unwrap_or_default(),
        email,
        verified,
        false,
        &[
            ("name", s("name")),
            ("full_name", s("name")),
            ("user_name", s("login")),
            ("preferred_username", s("login")),
            ("avatar_url", s("avatar_url")),
            ("picture", s("avatar_url")),
        ],
    )
}

/// Discord's user; its avatar is a hash to make a CDN address of.
fn from_discord(provider: &str, u: &Value) -> Result<ExternalIdentity, Answer> {
    let s = |k: &str| u.get(k).and_then(Value::as_str);
    let id = text(&u["id"]).unwrap_or_default();
    let avatar = s("avatar").map(|hash| format!("https://cdn.discordapp.com/avatars/{id}/{hash}.png"));
    let name = s("global_name").or(s("username"));
    identity(
        provider,
        id.clone(),
        s("email").map(str::to_owned),
        u["verified"] == true,
        false,
        &[
            ("name", name),
            ("full_name", name),
            ("user_name", s("username")),
            ("preferred_username", s("username")),
            ("avatar_url", avatar.as_deref()),
            ("picture", avatar.as_deref()),
        ],
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn github_s_primary_address_and_numeric_id_name_the_user() {
        // Shapes as GitHub's REST documentation shows them.
        let user = json!({"login": "octocat", "id": 1, "name": "The Octocat", "email": null,
                          "avatar_url": "https://github.com/images/error/octocat_happy.gif"});
        let emails = json!([{"email": "old@github.com", "verified": true, "primary": false},
                            {"email": "Octocat@GitHub.com", "verified": true, "primary": true}]);
        let identity = super::from_github("github", &user, &emails).unwrap();
        assert_eq!(
            (identity.subject.as_str(), identity.email.as_deref(), identity.email_verified),
            ("1", Some("octocat@github.com"), true)
        );
        let data: serde_json::Value = serde_json::from_str(&identity.data).unwrap();
        assert_eq!((&data["user_name"], &data["full_name"]), (&json!("octocat"), &json!("The Octocat")));
        let unverified = json!([{"email": "o@github.com", "verified": false, "primary": true}]);
        assert!(!super::from_github("github", &user, &unverified).unwrap().email_verified);
    }

    #[test]
    fn discord_s_avatar_hash_becomes_its_cdn_address() {
        let user = json!({"id": "80351110224678912", "username": "nelly", "global_name": "Nelly",
                          "avatar": "8342729096ea3675442027381ff50dfe", "verified": true, "email": "nelly@discord.com"});
        let identity = super::from_discord("discord", &user).unwrap();
        let data: serde_json::Value = serde_json::from_str(&identity.data).unwrap();
        assert_eq!(
            data["avatar_url"],
            "https://cdn.discordapp.com/avatars/80351110224678912/8342729096ea3675442027381ff50dfe.png"
        );
        assert!(identity.email_verified);
        assert!(super::from_discord("discord", &json!({"id": "1", "verified": true})).is_err(), "no address");
    }
}
