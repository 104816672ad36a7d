//! Built-in user accounts (`accounts-enabled`) at Supabase Auth's (GoTrue's) endpoints, so that
//! supabase-js's `auth` works unchanged; the access tokens are JWTs signed with `jwt-secret`,
//! which rowgate itself then verifies (`role: authenticated`, `sub`: the user's id). On
//! PostgreSQL the accounts are Supabase's `auth.users`.
//!
//! - `POST /signup` `{email, password, data}` → a session at once, as GoTrue's autoconfirm
//!   (the address confirmed but not proved: no mail has shown it the user's); with neither
//!   address nor phone, an anonymous user (`accounts-anonymous-enabled`) (`password`);
//! - `POST /token?grant_type=password` → a session; `?grant_type=refresh_token` → a new session
//!   (the refresh token is rotated; presenting a used one again within
//!   `accounts-refresh-reuse-interval` gives the same successor again, as GoTrue's reuse
//!   interval; after it, revokes all of the user's);
//! - `GET /user`, `PUT /user` (`user`), `POST /logout?scope=global|local|others`, `GET /settings`;
//! - `/admin/users` for a token whose role is `service_role` (`admin`);
//! - mail's codes and links (`by_mail`, `verify`), second factors (`mfa`);
//! - sign-in through providers: `GET /authorize`, `/callback`, `?grant_type=id_token`
//!   (`external`, `oauth2`), and a user's `/user/identities` (`identities`);
//! - phone numbers, their codes texted through the Send SMS hook (`by_phone`, `sms`);
//! - rowgate as an OAuth 2.1 server to other applications: `/admin/oauth/clients`, `/oauth/*`,
//!   `/user/oauth/grants` (`oauth_clients`, `oauth_server`, `oauth_token`).
//!
//! Passwords are hashed with Argon2id (`hashing`) and never logged or returned. Wrong passwords
//! are limited per client and address, per client and per address (`limits`: 429 until the
//! window passes; the last never stops a client the user has used, so strangers lock out no one
//! but themselves). Errors have GoTrue's shape (`gotrue`).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{header, Method, Response, StatusCode};
use serde_json::Value;
use sha2::Digest;

use crate::response::Body;

/// Access tokens live this long.
const TOKEN_LIFETIME: Duration = Duration::from_secs(3600);
/// Refresh tokens live this long.
const REFRESH_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);
/// The longest an e-mail address can be (GoTrue's limit).
const MAX_EMAIL: usize = 255;
/// GoTrue's default minimum password length.
const MIN_PASSWORD: usize = 6;
/// The most metadata an account keeps, as JSON text: it rides in every access token.
const MAX_METADATA: usize = 8 * 1024;

mod admin;
mod by_mail;
mod by_phone;
mod external;
mod gotrue;
mod hashing;
mod hooks;
mod identities;
mod keys;
mod limits;
mod links;
mod mail;
mod mfa;
mod oauth2;
mod oauth_clients;
mod oauth_server;
pub mod oauth_server_store;
mod oauth_token;
mod other_doors;
pub mod passkey_store;
mod passkeys;
mod password;
mod sms;
pub mod store;
mod user;
mod verify;
mod webauthn;

use gotrue::{fail, internal, store_failed, validation, Answer};
pub use hashing::{Hashing, DUMMY_HASH};
pub use other_doors::Asked;
use store::unix_now;
pub use store::{AccountStore, User};

/// Who calls: the claims of the request's bearer token, if it carries one.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    /// The token's role (`authenticated`, `anon`, `service_role`, ...).
    pub role: String,
    /// The user it names (`sub`), if any.
    pub sub: Option<String>,
    /// The session it belongs to (`session_id`), if any.
    pub session_id: Option<String>,
    /// How sure the session is of its user (`aal`: `aal1`, `aal2`).
    pub aal: Option<String>,
    /// When the session signed in (the earliest of `amr`'s timestamps).
    pub authenticated_at: Option<i64>,
    /// For a token rowgate as an OAuth server issued to an application: the application and the
    /// scopes granted it (`client_id`, `scope`).
    pub client_id: Option<String>,
    pub scope: Option<String>,
}

impl Caller {
    /// The caller a verified token's claims (JSON text) describe.
    pub fn of(role: &str, claims: &str) -> Caller {
        let claims: Value = serde_json::from_str(claims).unwrap_or(Value::Null);
        let text = |k: &str| claims.get(k).and_then(Value::as_str).map(str::to_owned);
        let authenticated_at = claims
            .get("amr")
            .and_then(Value::as_array)
            .and_then(|amr| amr.iter().filter_map(|a| a.get("timestamp").and_then(Value::as_i64)).min());
        Caller {
            role: role.to_owned(),
            sub: text("sub"),
            session_id: text("session_id"),
            aal: text("aal"),
            authenticated_at,
            client_id: text("client_id"),
            scope: text("scope"),
        }
    }
}

/// What the request's `Authorization` said: nothing, a token that did not verify, or a caller.
pub type Credentials = Result<Option<Caller>, crate::error::Error>;

/// How accounts are made: at all (`accounts-signup-enabled`), anonymously
/// (`accounts-anonymous-enabled`), and how many from one client (`accounts-signup-rate-limit`).
#[derive(Debug, Clone, Copy)]
pub struct Signups {
    pub enabled: bool,
    pub anonymous: bool,
    /// Sign-ups per client, if limited.
    pub rate: Option<crate::config::Rate>,
}

/// How the accounts use mail (`smtp-*`, `accounts-autoconfirm` and the links' settings).
pub struct Mail {
    /// `None` without `smtp-host`: nothing can be sent.
    mailer: Option<mail::Mailer>,
    links: links::Links,
    /// Whether addresses are taken without a confirmation by mail.
    autoconfirm: bool,
    /// `accounts-mail-interval`, in seconds.
    interval: i64,
    /// `accounts-otp-expiry`, in seconds.
    otp_expiry: i64,
    /// `accounts-secure-email-change`.
    secure_email_change: bool,
    /// `accounts-secure-password-change`.
    secure_password_change: bool,
}

impl Mail {
    /// The mail `settings` describe.
    pub fn new(settings: &crate::config::MailSettings) -> Result<Mail, String> {
        let mailer = match &settings.smtp {
            Some(smtp) => Some(mail::Mailer::new(smtp, settings.templates.as_deref(), settings.rate)?),
            None => None,
        };
        Ok(Mail {
            mailer,
            links: links::Links::new(
                settings.site_url.clone(),
                settings.external_url.clone(),
                settings.redirect_urls.clone(),
            ),
            autoconfirm: settings.autoconfirm,
            interval: settings.interval.min(i64::MAX as u64) as i64,
            otp_expiry: settings.otp_expiry.min(i64::MAX as u64) as i64,
            secure_email_change: settings.secure_email_change,
            secure_password_change: settings.secure_password_change,
        })
    }
}

/// The accounts service of a server.
pub struct Accounts {
    store: Arc<dyn AccountStore>,
    /// `accounts-refresh-reuse-interval`.
    reuse_interval: i64,
    /// The HMAC secret (successor refresh tokens are derived with it).
    secret: Vec<u8>,
    /// What access tokens are signed with, and the key set published.
    keys: keys::Keys,
    audience: String,
    /// How many wrong passwords logins may still try.
    limits: limits::LoginLimits,
    signups: Signups,
    hashing: Arc<hashing::Hashing>,
    mail: Mail,
    /// `accounts-hook-custom-access-token` and `accounts-hook-before-user-created`.
    access_token_hook: Option<String>,
    before_user_created_hook: Option<String>,
    /// `accounts-providers`, and whether users may add identities to their accounts
    /// (`accounts-manual-linking`).
    providers: external::Providers,
    manual_linking: bool,
    /// Where WebAuthn credentials are bound (`accounts-webauthn-rp-*`), and whether passkeys
    /// sign users in (`accounts-passkeys-enabled`).
    relying_party: webauthn::RelyingParty,
    passkeys_enabled: bool,
    /// `accounts-oauth-server-*`.
    oauth_server: crate::config::OAuthServerSettings,
    /// How codes reach phones, and `accounts-sms-*`'s autoconfirm, interval and expiry.
    texter: sms::Texter,
    sms: crate::config::SmsSettings,
}

impl Accounts {
    /// The service on `store`, signing with the HMAC `secret`, letting a refresh token be used
    /// again for `reuse_interval` seconds, taking sign-ups as `signups` says, mailing as `mail`
    /// does.
    pub fn new(
        store: Arc<dyn AccountStore>,
        secret: &[u8],
        audience: Option<String>,
        settings: &crate::config::AccountsSettings,
    ) -> Result<Accounts, String> {
        let access_token_hook = settings.access_token_hook.clone();
        if let Some(hook) = &access_token_hook {
            store.check_hook(hook).map_err(|e| format!("accounts-hook-custom-access-token: {e}"))?;
        }
        let before_user_created_hook = settings.before_user_created_hook.clone();
        if let Some(hook) = &before_user_created_hook {
            store.check_hook(hook).map_err(|e| format!("accounts-hook-before-user-created: {e}"))?;
        }
        let signups = Signups {
            enabled: settings.signup_enabled,
            anonymous: settings.anonymous_enabled,
            rate: settings.signup_rate_limit,
        };
        Ok(Accounts {
            access_token_hook,
            before_user_created_hook,
            mail: Mail::new(&settings.mail)?,
            providers: external::Providers::new(&settings.providers, secret, &settings.mail.external_url),
            manual_linking: settings.manual_linking,
            relying_party: webauthn::RelyingParty::new(
                &settings.webauthn_rp_id,
                settings.webauthn_rp_origins.clone(),
            )?,
            passkeys_enabled: settings.passkeys_enabled,
            oauth_server: settings.oauth_server.clone(),
            texter: sms::Texter::new(&settings.sms)?,
            sms: settings.sms.clone(),
            keys: keys::Keys::new(secret, &settings.signing_keys),
            signups,
            reuse_interval: settings.refresh_reuse_interval as i64,
            store,
            secret: secret.to_vec(),
            audience: audience.unwrap_or_else(|| "authenticated".into()),
            limits: limits::LoginLimits::new(signups.rate),
            hashing: Arc::new(hashing::Hashing::new()),
        })
    }

    /// Answers a request to `/auth/v1/...` from `client`, whose bearer token said `credentials`.
    pub async fn handle(
        &self,
        request: &Parts,
        client: IpAddr,
        body: Bytes,
        credentials: Credentials,
    ) -> Response<Body> {
        let answer = self.route(request, client, &body, credentials).await;
        answer.unwrap_or_else(|e| e).into_response()
    }

    /// GoTrue's route table.
    async fn route(
        &self,
        request: &Parts,
        client: IpAddr,
        body: &[u8],
        credentials: Credentials,
    ) -> Result<Answer, Answer> {
        let method = &request.method;
        let path = request.uri.path().trim_end_matches('/');
        let query = request.uri.query().unwrap_or("");
        let param = |name: &str| {
            form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
        };
        // Where links in mail lead: supabase-js puts it in the query string.
        let redirect = param("redirect_to");
        let redirect = redirect.as_deref();
        match (method, path.strip_prefix("/auth/v1").unwrap_or(path)) {
            (&Method::POST, "/signup") => self.signup(body, client, redirect).await,
            (&Method::POST, "/token") => match param("grant_type").as_deref() {
                Some("password") => self.login(body, client).await,
                Some("refresh_token") => self.refresh(body).await,
                Some("pkce") => self.exchange_code(body).await,
                Some("id_token") => self.id_token_grant(body, client, credentials).await,
                Some("web3") => Err(fail(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "web3_provider_disabled",
                    "Web3 provider is disabled",
                )),
                _ => Err(fail(StatusCode::BAD_REQUEST, "unsupported_grant_type", "Unsupported grant type")),
            },
            (&Method::GET, "/settings") => Ok(self.settings()),
            (&Method::GET, "/authorize") => self.authorize(query).await,
            (_, route) if route == "/sso" || route.starts_with("/sso/") => {
                Err(fail(StatusCode::NOT_FOUND, "saml_provider_disabled", "SAML 2.0 is disabled"))
            }
            (&Method::GET, "/callback") => Ok(self.callback(query, body, false, client).await),
            (&Method::POST, "/callback") => Ok(self.callback(query, body, true, client).await),
            (&Method::GET, "/.well-known/jwks.json") => Ok(Answer::ok(self.keys.jwks.clone())),
            (&Method::POST, "/resend") => self.resend(body, redirect, client).await,
            (&Method::POST, "/recover") => self.recover(body, redirect).await,
            (&Method::POST, "/magiclink") => self.magic_link(body, client, false, redirect).await,
            (&Method::POST, "/otp") => self.magic_link(body, client, true, redirect).await,
            (&Method::GET, "/verify") => self.verify_link(query).await,
            (&Method::POST, "/verify") => self.verify_code(body, client).await,
            (&Method::POST, "/invite") => {
                admin::admin(credentials)?;
                self.invite(body, redirect).await
            }
            (&Method::POST, "/admin/generate_link") => {
                admin::admin(credentials)?;
                self.generate_link(body).await
            }
            (&Method::GET, "/user") => self.get_user(&user::signed_in(credentials)?).await,
            (&Method::PUT, "/user") => {
                self.update_user(&user::own(credentials)?, body, redirect, client).await
            }
            (&Method::GET, "/user/identities/authorize") => {
                self.link_identity(&user::own(credentials)?, query).await
            }
            (&Method::DELETE, route) if route.starts_with("/user/identities/") => {
                let id = route.trim_start_matches("/user/identities/");
                self.unlink_identity(&user::own(credentials)?, id).await
            }
            (&Method::GET, "/reauthenticate") => self.reauthenticate(&user::own(credentials)?).await,
            (&Method::POST, "/logout") => {
                let caller = user::signed_in(credentials)?;
                // An application's token ends its own session only.
                if caller.client_id.is_some() && param("scope").as_deref() != Some("local") {
                    return Err(user::application_refused());
                }
                self.logout(&caller, param("scope")).await
            }
            (_, route) if route == "/passkeys" || route.starts_with("/passkeys/") => {
                let rest = route.trim_start_matches("/passkeys");
                self.passkeys(method, rest, body, user::own(credentials), client).await
            }
            (_, route) if route == "/factors" || route.starts_with("/factors/") => {
                let rest = route.trim_start_matches("/factors").trim_start_matches('/');
                self.factors(&user::own(credentials)?, method, rest, body, client).await
            }
            (_, route) if route == "/admin/oauth/clients" || route.starts_with("/admin/oauth/clients/") => {
                let rest = route.trim_start_matches("/admin/oauth/clients");
                admin::admin(credentials)?;
                self.admin_oauth_clients(method, path, rest, query, body).await
            }
            (&Method::POST, "/oauth/clients/register") => self.register_dynamically(body, client).await,
            (&Method::GET, "/oauth/authorize") => self.oauth_authorize(query, client).await,
            (&Method::POST, "/oauth/token") => self.oauth_token(request, body).await,
            (&Method::GET, "/oauth/userinfo") => self.oauth_userinfo(&user::signed_in(credentials)?).await,
            (_, route) if route.starts_with("/oauth/authorizations/") => {
                let rest = route.trim_start_matches("/oauth/authorizations/");
                let caller = user::signed_in(credentials)?;
                match (method, rest.split_once('/')) {
                    (&Method::GET, None) => self.oauth_authorization(request, &caller, rest).await,
                    (&Method::POST, Some((id, "consent"))) => {
                        self.oauth_consent(request, &caller, id, body).await
                    }
                    _ => Err(fail(StatusCode::NOT_FOUND, "not_found", "Not found")),
                }
            }
            (&Method::GET, "/user/oauth/grants") => self.oauth_grants(&user::signed_in(credentials)?).await,
            (&Method::DELETE, "/user/oauth/grants") => {
                self.oauth_revoke_grant(&user::signed_in(credentials)?, param("client_id")).await
            }
            (&Method::GET, "/.well-known/openid-configuration") => Ok(self.oauth_metadata()),
            (&Method::GET, "/.well-known/oauth-authorization-server") => {
                self.oauth_server_enabled()?;
                Ok(self.oauth_metadata())
            }
            (_, route) if route == "/admin/users" || route.starts_with("/admin/users/") => {
                let id = route.trim_start_matches("/admin/users").trim_start_matches('/');
                admin::admin(credentials)?;
                self.admin(method, path, id, query, body).await
            }
            _ => Err(fail(StatusCode::NOT_FOUND, "not_found", "Not found")),
        }
    }

    async fn refresh(&self, body: &[u8]) -> Result<Answer, Answer> {
        let token = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v.get("refresh_token").and_then(Value::as_str).map(str::to_owned))
            .ok_or_else(|| validation("refresh_token is required"))?;
        let now = unix_now();
        let successor = self.successor(&token);
        let rotated = self
            .store
            .rotate(token, successor, now, self.reuse_interval, None)
            .await
            .map_err(store_failed)?;
        let Some((user, started)) = rotated else {
            return Err(fail(StatusCode::BAD_REQUEST, "refresh_token_not_found", "Invalid Refresh Token"));
        };
        if user.is_banned {
            return Err(fail(StatusCode::BAD_REQUEST, "user_banned", "User is banned"));
        }
        self.session(&user, &started, now).await.map(|s| Answer::ok(s.json))
    }

    /// The refresh token that replaces `token`: the same every time (a keyed hash), so a token
    /// used again within the reuse interval gets the session its first use got, not another
    /// one that would live on beside it.
    fn successor(&self, token: &str) -> String {
        use base64::Engine;
        let mut h = sha2::Sha256::new();
        h.update((self.secret.len() as u64).to_le_bytes());
        h.update(&self.secret);
        h.update(b"rowgate refresh successor");
        h.update(token.as_bytes());
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(h.finalize())
    }

    /// A session: a new access token beside the refresh token just stored.
    /// A new session of `user_id`, signed in now by `method` (GoTrue's `amr`); `gone` if the
    /// account went meanwhile.
    async fn signed_in(
        &self,
        user_id: String,
        method: &str,
        gone: impl FnOnce() -> Answer,
    ) -> Result<Session, Answer> {
        let now = unix_now();
        let signed_in = self.store.sign_in(user_id, method.into(), now).await.map_err(store_failed)?;
        let (user, started) = signed_in.ok_or_else(gone)?;
        self.session(&user, &started, now).await
    }

    async fn session(&self, user: &User, started: &store::Started, now: i64) -> Result<Session, Answer> {
        let exp = now + TOKEN_LIFETIME.as_secs() as i64;
        let amr = gotrue::amr(started, now);
        let claims = gotrue::claims(user, &self.audience, started, &amr, now, exp);
        let access = match &self.access_token_hook {
            None => self.keys.sign(&claims),
            Some(hook) => self.keys.sign(&self.hooked_claims(hook, user, &claims).await?),
        }
        .map_err(|_| internal())?;
        let json = gotrue::to_json(&gotrue::Session {
            access_token: &access,
            token_type: "bearer",
            expires_in: TOKEN_LIFETIME.as_secs(),
            expires_at: exp,
            refresh_token: &started.refresh,
            user: gotrue::UserJson::of(user),
        });
        Ok(Session { json, access, refresh: started.refresh.clone(), expires_at: exp })
    }
}

/// A session just issued: as GoTrue answers it, and its parts (for a redirect's fragment).
struct Session {
    json: String,
    access: String,
    refresh: String,
    expires_at: i64,
}

/// An address as GoTrue takes one: present, at most 255 bytes, of the form `local@domain`;
/// lowercased.
fn valid_email(email: &str) -> Result<String, Answer> {
    let email = email.trim();
    if email.is_empty() {
        return Err(validation("An email address is required"));
    }
    if email.len() > MAX_EMAIL {
        return Err(validation("An email address is too long"));
    }
    // GoTrue's format (checkmail's, HTML's `type=email`): a local part of letters, digits and
    // `.!#$%&'*+/=?^_`{|}~-`, and a domain of dot-separated labels of letters, digits and inner
    // hyphens, at most 63 long.
    let local_char = |c: char| c.is_ascii_alphanumeric() || ".!#$%&'*+/=?^_`{|}~-".contains(c);
    let label = |l: &str| {
        (1..=63).contains(&l.len())
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let well_formed = email.split_once('@').is_some_and(|(local, domain)| {
        !local.is_empty() && local.chars().all(local_char) && domain.split('.').all(label)
    });
    if !well_formed {
        return Err(validation("Unable to validate email address: invalid format"));
    }
    Ok(email.to_lowercase())
}

/// GoTrue's refusal of a password under its minimum length.
fn strong_enough(password: &str) -> Result<(), Answer> {
    if password.chars().count() < MIN_PASSWORD {
        return Err(fail(
            StatusCode::UNPROCESSABLE_ENTITY,
            "weak_password",
            &format!("Password should be at least {MIN_PASSWORD} characters."),
        ));
    }
    Ok(())
}

/// Metadata given with a request (`data`, `user_metadata`, `app_metadata`): a JSON object (as
/// text), `None` when absent or null.
fn metadata(v: Option<&Value>) -> Result<Option<String>, Answer> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(o @ Value::Object(_)) => {
            let text = o.to_string();
            if text.len() > MAX_METADATA {
                return Err(validation("Metadata is too large"));
            }
            Ok(Some(text))
        }
        Some(_) => Err(gotrue::bad_json()),
    }
}

fn too_many(msg: &str) -> Answer {
    fail(StatusCode::TOO_MANY_REQUESTS, "over_request_rate_limit", msg)
}

/// GoTrue's shape of a request refused before it reaches the accounts: beyond a rate limit
/// (429 `over_request_rate_limit`, with `Retry-After`), or without the API key required (401)
/// or with one that is not valid (403).
pub fn refused(e: &crate::error::Error) -> Response<Body> {
    let parts = e.to_response();
    let error_code = match parts.status.as_u16() {
        429 => "over_request_rate_limit",
        401 => "no_authorization",
        _ => "invalid_credentials",
    };
    let mut answer = fail(parts.status, error_code, &e.to_string());
    if let Some(secs) = parts.retry_after {
        answer.headers.push((header::RETRY_AFTER, secs.to_string()));
    }
    answer.into_response()
}

#[cfg(test)]
mod tests {
    use super::valid_email;

    #[test]
    fn addresses_are_checked_and_lowercased_as_gotrue_does() {
        assert_eq!(valid_email(" Ann@Example.COM ").ok(), Some("ann@example.com".into()));
        for bad in ["", "ann", "@example.com", "ann@", "ann@@example.com", "a nn@example.com", "ann@.com"] {
            assert!(valid_email(bad).is_err(), "{bad}");
        }
        assert!(valid_email(&format!("{}@example.com", "a".repeat(250))).is_err());
    }
}
