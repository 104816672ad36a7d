//! Which account an identity at an OpenID provider belongs to: the one that has it, the one
//! with its verified address, a new one, or (manual linking, `accounts-manual-linking`) the
//! signed-in user's; and a user's own `/user/identities`: linking one more
//! (`GET /user/identities/authorize`) and unlinking one (`DELETE /user/identities/{id}`).

use std::net::IpAddr;

use http::StatusCode;
use openidconnect::core::CoreIdTokenClaims;
use serde_json::Value;

use super::external::{found, oauth_error};
use super::gotrue::{fail, internal, store_failed, Answer};
use super::store::{Attached, ExternalIdentity, Linked, NewUser, User};
use super::{Accounts, Caller};

impl Accounts {
    /// The account `identity` signs in to: with `link`, that user's, the identity added to it.
    pub(super) async fn account_for(
        &self,
        identity: ExternalIdentity,
        link: Option<String>,
        client: IpAddr,
    ) -> Result<User, Answer> {
        let Some(user_id) = link else { return self.linked_account(identity, client).await };
        let taken = |msg: &str| fail(StatusCode::UNPROCESSABLE_ENTITY, "identity_already_exists", msg);
        match self.store.attach_identity(user_id, identity).await.map_err(store_failed)? {
            Attached::Done(user) if user.is_banned => {
                Err(fail(StatusCode::FORBIDDEN, "user_banned", "User is banned"))
            }
            Attached::Done(user) => Ok(*user),
            Attached::AlreadyTheirs => Err(taken("Identity is already linked")),
            Attached::Others => Err(taken("Identity is already linked to another user")),
            Attached::NoUser => {
                Err(fail(StatusCode::UNPROCESSABLE_ENTITY, "user_not_found", "Linking target user not found"))
            }
        }
    }

    /// `GET /user/identities/authorize?provider=&redirect_to=&skip_http_redirect=`: the signed-in
    /// user off to the provider, its identity to be added to their account: 302, or with
    /// `skip_http_redirect=true` (supabase-js's `linkIdentity`) `{"url"}`.
    pub(super) async fn link_identity(&self, caller: &Caller, query: &str) -> Result<Answer, Answer> {
        self.manual_linking()?;
        let url = self.authorize_url(query, caller.sub.clone()).await?;
        let skip =
            form_urlencoded::parse(query.as_bytes()).any(|(k, v)| k == "skip_http_redirect" && v == "true");
        match skip {
            true => Ok(Answer::ok(serde_json::json!({ "url": url }).to_string())),
            false => Ok(found(url)),
        }
    }

    /// `DELETE /user/identities/{id}`: one of the user's identities at a provider removed, as
    /// long as another is left; `{}`.
    pub(super) async fn unlink_identity(&self, caller: &Caller, id: &str) -> Result<Answer, Answer> {
        self.manual_linking()?;
        let user_id = caller.sub.clone().unwrap_or_default();
        let user = self.store.user(user_id.clone()).await.map_err(store_failed)?.ok_or_else(|| {
            fail(StatusCode::NOT_FOUND, "user_not_found", "User from sub claim in JWT does not exist")
        })?;
        let shown = super::gotrue::to_json(&super::gotrue::UserJson::of(&user));
        let identities: Value = serde_json::from_str(&shown).map_err(|_| internal())?;
        let identities = identities["identities"].as_array().cloned().unwrap_or_default();
        if identities.len() <= 1 {
            return Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "single_identity_not_deletable",
                "User must have at least 1 identity after unlinking",
            ));
        }
        let missing =
            || fail(StatusCode::UNPROCESSABLE_ENTITY, "identity_not_found", "Identity doesn't exist");
        let identity = identities.iter().find(|i| i["identity_id"] == id).ok_or_else(missing)?;
        if identity["provider"] == "email" {
            // The address is the account's own, kept with it: PUT /user changes it.
            return Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "email_identity_not_deletable",
                "The email identity is the account's address: change it with PUT /user",
            ));
        }
        self.store
            .detach_identity(user_id, id.to_owned())
            .await
            .map_err(store_failed)?
            .ok_or_else(missing)?;
        Ok(Answer::ok("{}".into()))
    }

    fn manual_linking(&self) -> Result<(), Answer> {
        match self.manual_linking {
            true => Ok(()),
            false => {
                Err(fail(StatusCode::NOT_FOUND, "manual_linking_disabled", "Manual linking is disabled"))
            }
        }
    }

    /// The account a provider's identity signs in to, made if need be (and sign-ups allow):
    /// neither banned nor, unless addresses are taken unconfirmed, with an unverified address.
    async fn linked_account(&self, identity: ExternalIdentity, client: IpAddr) -> Result<User, Answer> {
        let new = NewUser {
            id: crate::uuid_v4(),
            email: identity.email.clone(),
            user_metadata: identity.data.clone(),
            app_metadata:
                serde_json::json!({"provider": identity.provider, "providers": [identity.provider]})
                    .to_string(),
            confirmed: identity.email_verified,
            role: "authenticated".into(),
            ..Default::default()
        };
        let provider = identity.provider.clone();
        let mut linked =
            self.store.link_identity(identity.clone(), new.clone(), false).await.map_err(store_failed)?;
        if let Linked::WouldCreate = linked {
            if !self.signups.enabled {
                return Err(fail(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "signup_disabled",
                    "Signups not allowed for this instance",
                ));
            }
            if !self.limits.sign_up(client) {
                return Err(super::too_many("Too many sign-ups from this client: try again later"));
            }
            self.before_user_created(&new, client).await?;
            linked = self.store.link_identity(identity, new, true).await.map_err(store_failed)?;
        }
        let user = match linked {
            Linked::Existing(u) | Linked::Added(u) | Linked::Created(u) => *u,
            Linked::WouldCreate => return Err(internal()),
        };
        if user.is_banned {
            return Err(fail(StatusCode::FORBIDDEN, "user_banned", "User is banned"));
        }
        if user.email.is_some() && user.email_confirmed_at.is_none() && !self.mail.autoconfirm {
            return Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "provider_email_needs_verification",
                &format!(
                    "Unverified email with {provider}. Verify the email with {provider} in order to sign in"
                ),
            ));
        }
        Ok(user)
    }
}

/// The identity an ID token's claims describe, with GoTrue's `identity_data`.
pub(super) fn identity_of(provider: &str, claims: &CoreIdTokenClaims) -> Result<ExternalIdentity, Answer> {
    let subject = claims.subject().as_str().to_owned();
    if subject.is_empty() {
        return Err(oauth_error("invalid request", "Missing sub claim in id_token"));
    }
    let name = claims.name().and_then(|n| n.get(None)).map(|n| n.as_str());
    let picture = claims.picture().and_then(|p| p.get(None)).map(|p| p.as_str());
    identity(
        provider,
        subject,
        claims.email().map(|e| e.as_str().to_owned()),
        claims.email_verified().unwrap_or(false),
        claims.phone_number_verified().unwrap_or(false),
        &[
            ("iss", Some(claims.issuer().as_str())),
            ("name", name),
            ("full_name", name),
            ("given_name", claims.given_name().and_then(|n| n.get(None)).map(|n| n.as_str())),
            ("family_name", claims.family_name().and_then(|n| n.get(None)).map(|n| n.as_str())),
            ("nickname", claims.nickname().and_then(|n| n.get(None)).map(|n| n.as_str())),
            ("preferred_username", claims.preferred_username().map(|n| n.as_str())),
            ("picture", picture),
            ("avatar_url", picture),
            ("phone", claims.phone_number().map(|p| p.as_str())),
        ],
    )
}

/// The identity of `subject` at `provider`, with its address (lowercased; GoTrue needs one), and
/// GoTrue's `identity_data`: the subject, the address, the `fields` that have a value, and
/// whether the address and the phone are verified.
pub(super) fn identity(
    provider: &str,
    subject: String,
    email: Option<String>,
    email_verified: bool,
    phone_verified: bool,
    fields: &[(&str, Option<&str>)],
) -> Result<ExternalIdentity, Answer> {
    if subject.is_empty() {
        return Err(profile_error());
    }
    let Some(email) = email.map(|e| e.to_ascii_lowercase()).filter(|e| !e.is_empty()) else {
        return Err(fail(
            StatusCode::INTERNAL_SERVER_ERROR,
            "unexpected_failure",
            "Error getting user email from external provider",
        ));
    };
    let mut data = serde_json::Map::new();
    let ours =
        [("sub", Some(subject.as_str())), ("provider_id", Some(subject.as_str())), ("email", Some(&email))];
    for (k, v) in ours.into_iter().chain(fields.iter().copied()) {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            data.insert(k.into(), v.into());
        }
    }
    data.insert("email_verified".into(), email_verified.into());
    data.insert("phone_verified".into(), phone_verified.into());
    Ok(ExternalIdentity {
        provider: provider.to_owned(),
        subject,
        email: Some(email),
        email_verified,
        data: Value::Object(data).to_string(),
    })
}

/// GoTrue's words when the provider's account could not be read.
pub(super) fn profile_error() -> Answer {
    fail(
        StatusCode::INTERNAL_SERVER_ERROR,
        "unexpected_failure",
        "Error getting user profile from external provider",
    )
}

/// GoTrue's words when the provider would not exchange its code (the code's start shown).
pub(super) fn exchange_failed(provider: &str, code: &str, error: &dyn std::fmt::Display) -> Answer {
    tracing::warn!(provider, %error, "exchanging a provider's code failed");
    let shown = code.get(..4).unwrap_or("");
    fail(
        StatusCode::INTERNAL_SERVER_ERROR,
        "unexpected_failure",
        &format!("Unable to exchange external code: {shown}"),
    )
}
