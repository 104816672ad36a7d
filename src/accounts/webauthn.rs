//! WebAuthn second factors (GoTrue's `factor_type: "webauthn"`): a ceremony's options, and the
//! verification of what the authenticator answered, by the `webauthn_rp` crate (pure Rust; the
//! `none` and self attestations browsers send when none is asked for). What a ceremony must
//! remember between its challenge and its answer is bytes the store keeps with the challenge,
//! so any instance may finish what another began; a credential is kept with its factor.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use serde_json::{json, Value};
use webauthn_rp::bin::{Decode, Encode};
use webauthn_rp::request::auth::{AllowedCredentials, AuthenticationVerificationOptions};
use webauthn_rp::request::register::{
    Nickname, PublicKeyCredentialUserEntity, RegistrationVerificationOptions, UserHandle, Username,
};
use webauthn_rp::request::{AsciiDomain, Credentials, PublicKeyCredentialDescriptor, RpId};
use webauthn_rp::response::auth::ser_relaxed::NonDiscoverableAuthenticationRelaxed16;
use webauthn_rp::response::register::ser_relaxed::RegistrationRelaxed;
use webauthn_rp::response::register::{DynamicState, StaticState};
use webauthn_rp::response::{AuthTransports, CredentialId};
use webauthn_rp::{
    AuthenticatedCredential, NonDiscoverableAuthenticationServerState,
    NonDiscoverableCredentialRequestOptions, PublicKeyCredentialCreationOptions, RegistrationServerState,
};

/// The relying party: the domain credentials are bound to, and the origins (`https://app.example`)
/// whose pages may use them.
pub struct RelyingParty {
    id: RpId,
    origins: Vec<String>,
}

/// Why an authenticator's answer was refused.
#[derive(Debug)]
pub enum Refused {
    /// Not a credential's JSON.
    Malformed,
    /// A credential, but not one this ceremony accepts (challenge, origin, signature, ...).
    Invalid(String),
}

/// A credential as the store keeps it (JSON text): its id, transports, public key and the state
/// that changes with each use (the signature counter).
#[derive(serde::Serialize, serde::Deserialize)]
struct Stored {
    id: String,
    transports: String,
    key: String,
    state: String,
}

impl RelyingParty {
    /// `id`: a domain (`localhost` will do); `origins`: exactly as browsers send them.
    pub fn new(id: &str, origins: Vec<String>) -> Result<RelyingParty, String> {
        let domain = AsciiDomain::try_from(id.to_ascii_lowercase())
            .map_err(|e| format!("accounts-webauthn-rp-id {id:?} is not a domain: {e}"))?;
        if origins.is_empty() {
            return Err("accounts-webauthn-rp-origins names no origin".into());
        }
        Ok(RelyingParty { id: RpId::Domain(domain), origins })
    }

    /// A registration ceremony for `user_id` (a UUID), named `name` on the authenticator, which
    /// must not make one of `existing` again: (what to keep, WebAuthn's `publicKey` options).
    pub fn start_registration(
        &self,
        user_id: &str,
        name: &str,
        existing: &[String],
    ) -> Option<(String, Value)> {
        let handle = UserHandle::<16>::decode(uuid_bytes(user_id)?).ok()?;
        let name = if Username::try_from(name).is_ok() { name } else { user_id };
        let user = PublicKeyCredentialUserEntity {
            name: Username::try_from(name).ok()?,
            id: &handle,
            display_name: Nickname::try_from(name).ok(),
        };
        let excluded = existing.iter().filter_map(|c| descriptor(c)).collect();
        let (server, client) = PublicKeyCredentialCreationOptions::second_factor(&self.id, user, excluded)
            .start_ceremony()
            .ok()?;
        let state = server.encode().ok()?;
        Some((STANDARD.encode(state), serde_json::to_value(&client).ok()?))
    }

    /// The credential (JSON text, to keep) a registration's answer makes, if it answers the
    /// ceremony `state` began.
    pub fn finish_registration(&self, state: &str, answer: &str) -> Result<String, Refused> {
        let bytes = STANDARD.decode(state).map_err(|_| Refused::Invalid("unknown ceremony".into()))?;
        let server = RegistrationServerState::<16>::decode(bytes.as_slice())
            .map_err(|_| Refused::Invalid("unknown ceremony".into()))?;
        let answer: RegistrationRelaxed = serde_json::from_str(answer).map_err(|_| Refused::Malformed)?;
        let options = RegistrationVerificationOptions::<String, String> {
            allowed_origins: &self.origins,
            ..RegistrationVerificationOptions::default()
        };
        let credential =
            server.verify(&self.id, &answer.0, &options).map_err(|e| Refused::Invalid(e.to_string()))?;
        let (id, transports, _, key, state, _) = credential.into_parts();
        let stored = Stored {
            id: URL_SAFE_NO_PAD.encode(id.as_ref()),
            transports: STANDARD.encode([transports.encode().map_err(|_| Refused::Malformed)?]),
            key: STANDARD.encode(key.encode().map_err(|_| Refused::Malformed)?),
            state: STANDARD.encode(state.encode().map_err(|_| Refused::Malformed)?),
        };
        serde_json::to_string(&stored).map_err(|_| Refused::Malformed)
    }

    /// An authentication ceremony with one of `credentials`: (what to keep, WebAuthn's
    /// `publicKey` options).
    pub fn start_authentication(&self, credentials: &[String]) -> Option<(String, Value)> {
        let mut allowed = AllowedCredentials::with_capacity(credentials.len());
        for descriptor in credentials.iter().filter_map(|c| descriptor(c)) {
            allowed.push(descriptor.into());
        }
        let (server, client) = NonDiscoverableCredentialRequestOptions::second_factor(&self.id, allowed)
            .ok()?
            .start_ceremony()
            .ok()?;
        let state = server.encode().ok()?;
        Some((STANDARD.encode(state), serde_json::to_value(&client).ok()?))
    }

    /// The credential's new state (JSON text, to keep) once an authentication's answer, signed
    /// by `credential` (as [`Self::finish_registration`] made it) for the user `user_id`,
    /// answers the ceremony `state` began.
    pub fn finish_authentication(
        &self,
        state: &str,
        answer: &str,
        user_id: &str,
        credential: &str,
    ) -> Result<String, Refused> {
        let unknown = || Refused::Invalid("unknown ceremony".into());
        let bytes = STANDARD.decode(state).map_err(|_| unknown())?;
        let server =
            NonDiscoverableAuthenticationServerState::decode(bytes.as_slice()).map_err(|_| unknown())?;
        let answer: NonDiscoverableAuthenticationRelaxed16 =
            serde_json::from_str(answer).map_err(|_| Refused::Malformed)?;
        let mut stored: Stored = serde_json::from_str(credential).map_err(|_| unknown())?;
        let id = URL_SAFE_NO_PAD.decode(&stored.id).map_err(|_| unknown())?;
        let key = STANDARD.decode(&stored.key).map_err(|_| unknown())?;
        let dynamic: [u8; 7] =
            STANDARD.decode(&stored.state).ok().and_then(|s| s.try_into().ok()).ok_or_else(unknown)?;
        let handle =
            UserHandle::<16>::decode(uuid_bytes(user_id).ok_or_else(unknown)?).map_err(|_| unknown())?;
        let mut credential = AuthenticatedCredential::new(
            CredentialId::decode(id.as_slice()).map_err(|_| unknown())?,
            &handle,
            StaticState::decode(key.as_slice()).map_err(|_| unknown())?,
            DynamicState::decode(dynamic).map_err(|_| unknown())?,
        )
        .map_err(|_| unknown())?;
        let options = AuthenticationVerificationOptions::<String, String> {
            allowed_origins: &self.origins,
            ..AuthenticationVerificationOptions::default()
        };
        server
            .verify(&self.id, &answer.0, &mut credential, &options)
            .map_err(|e| Refused::Invalid(e.to_string()))?;
        stored.state = STANDARD.encode(credential.dynamic_state().encode().map_err(|_| Refused::Malformed)?);
        serde_json::to_string(&stored).map_err(|_| Refused::Malformed)
    }
}

/// The credential a stored one names, for a ceremony's allow or exclude list.
fn descriptor(stored: &str) -> Option<PublicKeyCredentialDescriptor<Vec<u8>>> {
    let stored: Stored = serde_json::from_str(stored).ok()?;
    let id = URL_SAFE_NO_PAD.decode(&stored.id).ok()?;
    let [transports]: [u8; 1] = STANDARD.decode(&stored.transports).ok()?.try_into().ok()?;
    Some(PublicKeyCredentialDescriptor {
        id: CredentialId::decode(id).ok()?,
        transports: AuthTransports::decode(transports).ok()?,
    })
}

/// A UUID's sixteen bytes.
fn uuid_bytes(uuid: &str) -> Option<[u8; 16]> {
    let hex: Vec<u8> = uuid.bytes().filter(|b| *b != b'-').collect();
    if hex.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        out[i] = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(out)
}

/// GoTrue's `credential_options` around WebAuthn's options.
pub fn credential_options(options: Value) -> Value {
    json!({ "publicKey": options })
}
