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
    CredProtect, Nickname, PublicKeyCredentialUserEntity, RegistrationVerificationOptions, UserHandle,
    Username,
};
use webauthn_rp::request::{AsciiDomain, Credentials, ExtensionInfo, PublicKeyCredentialDescriptor, RpId};
use webauthn_rp::response::auth::ser_relaxed::{
    DiscoverableAuthenticationRelaxed16, NonDiscoverableAuthenticationRelaxed16,
};
use webauthn_rp::response::register::ser_relaxed::RegistrationRelaxed;
use webauthn_rp::response::register::{DynamicState, StaticState};
use webauthn_rp::response::{AuthTransports, CredentialId};
use webauthn_rp::{
    AuthenticatedCredential, DiscoverableAuthenticationServerState, DiscoverableCredentialRequestOptions,
    NonDiscoverableAuthenticationServerState, NonDiscoverableCredentialRequestOptions,
    PublicKeyCredentialCreationOptions, RegistrationServerState,
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
    /// must not make one of `existing` again: (what to keep, WebAuthn's `publicKey` options). A
    /// `passkey` is a discoverable credential verifying its user (it signs in alone); else a
    /// second factor.
    pub fn start_registration(
        &self,
        user_id: &str,
        name: &str,
        existing: &[String],
        passkey: bool,
    ) -> Option<(String, Value)> {
        let handle = user_handle(user_id)?;
        let name = if Username::try_from(name).is_ok() { name } else { user_id };
        let user = PublicKeyCredentialUserEntity {
            name: Username::try_from(name).ok()?,
            id: &handle,
            display_name: Nickname::try_from(name).ok(),
        };
        let excluded = existing.iter().filter_map(|c| descriptor(c)).collect();
        let options = if passkey {
            let mut options = PublicKeyCredentialCreationOptions::passkey(&self.id, user, excluded);
            // Asked for, not insisted on: a browser refuses a registration that insists when the
            // authenticator has no credProtect (GoTrue asks for none).
            options.extensions.cred_protect =
                CredProtect::UserVerificationRequired(ExtensionInfo::AllowDontEnforceValue);
            options
        } else {
            PublicKeyCredentialCreationOptions::second_factor(&self.id, user, excluded)
        };
        let (server, client) = options.start_ceremony().ok()?;
        let state = server.encode().ok()?;
        Some((STANDARD.encode(state), serde_json::to_value(&client).ok()?))
    }

    /// The credential (JSON text, to keep) a registration's answer makes, if it answers the
    /// ceremony `state` began.
    pub fn finish_registration(&self, state: &str, answer: &str) -> Result<String, Refused> {
        let bytes = STANDARD.decode(state).map_err(|_| unknown())?;
        let server = RegistrationServerState::<16>::decode(bytes.as_slice()).map_err(|_| unknown())?;
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
            state: String::new(),
        };
        repack(stored, state)
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
    /// answers the ceremony `state` began: a second factor's, or a `passkey` sign-in's.
    pub fn finish_authentication(
        &self,
        state: &str,
        answer: &str,
        user_id: &str,
        credential: &str,
        passkey: bool,
    ) -> Result<String, Refused> {
        let bytes = STANDARD.decode(state).map_err(|_| unknown())?;
        let (stored, parts) = unpack(credential).ok_or_else(unknown)?;
        let handle = user_handle(user_id).ok_or_else(unknown)?;
        let mut credential = authenticated(&parts, &handle).ok_or_else(unknown)?;
        let options = self.authentication_options();
        let checked = if passkey {
            let server =
                DiscoverableAuthenticationServerState::decode(bytes.as_slice()).map_err(|_| unknown())?;
            let answer: DiscoverableAuthenticationRelaxed16 =
                serde_json::from_str(answer).map_err(|_| Refused::Malformed)?;
            server.verify(&self.id, &answer.0, &mut credential, &options)
        } else {
            let server =
                NonDiscoverableAuthenticationServerState::decode(bytes.as_slice()).map_err(|_| unknown())?;
            let answer: NonDiscoverableAuthenticationRelaxed16 =
                serde_json::from_str(answer).map_err(|_| Refused::Malformed)?;
            server.verify(&self.id, &answer.0, &mut credential, &options)
        };
        checked.map_err(|e| Refused::Invalid(e.to_string()))?;
        repack(stored, credential.dynamic_state())
    }

    /// A passkey sign-in's ceremony, any of the relying party's discoverable credentials
    /// answering: (what to keep, WebAuthn's `publicKey` options).
    pub fn start_passkey_authentication(&self) -> Option<(String, Value)> {
        let (server, client) =
            DiscoverableCredentialRequestOptions::passkey(&self.id).start_ceremony().ok()?;
        let state = server.encode().ok()?;
        Some((STANDARD.encode(state), serde_json::to_value(&client).ok()?))
    }

    fn authentication_options(&self) -> AuthenticationVerificationOptions<'_, '_, String, String> {
        AuthenticationVerificationOptions {
            allowed_origins: &self.origins,
            ..AuthenticationVerificationOptions::default()
        }
    }
}

/// The credential (its id, as [`credential_id`] gives it) and user (a UUID) a passkey's answer
/// names, to find what signs it.
pub fn passkey_answer_names(answer: &str) -> Result<(String, String), Refused> {
    let answer: DiscoverableAuthenticationRelaxed16 =
        serde_json::from_str(answer).map_err(|_| Refused::Malformed)?;
    let user = answer.0.response().user_handle().encode().map_err(|_| Refused::Malformed)?;
    Ok((URL_SAFE_NO_PAD.encode(answer.0.raw_id().as_ref()), uuid_text(&user)))
}

/// The id (base64url) of a kept credential.
pub fn credential_id(credential: &str) -> Option<String> {
    serde_json::from_str::<Stored>(credential).ok().map(|s| s.id)
}

fn unknown() -> Refused {
    Refused::Invalid("unknown ceremony".into())
}

/// A kept credential's parts, decoded: its id, encoded public key and encoded state.
struct Parts {
    id: Vec<u8>,
    key: Vec<u8>,
    state: [u8; 7],
}

/// A kept credential, and its parts.
fn unpack(credential: &str) -> Option<(Stored, Parts)> {
    let stored: Stored = serde_json::from_str(credential).ok()?;
    let parts = Parts {
        id: URL_SAFE_NO_PAD.decode(&stored.id).ok()?,
        key: STANDARD.decode(&stored.key).ok()?,
        state: STANDARD.decode(&stored.state).ok()?.try_into().ok()?,
    };
    Some((stored, parts))
}

/// A kept credential, to check an assertion with.
type Checkable<'a> = AuthenticatedCredential<
    'a,
    'a,
    16,
    webauthn_rp::response::register::CompressedPubKey<[u8; 32], [u8; 32], [u8; 48], Vec<u8>>,
>;

fn authenticated<'a>(parts: &'a Parts, handle: &'a UserHandle<16>) -> Option<Checkable<'a>> {
    AuthenticatedCredential::new(
        CredentialId::decode(parts.id.as_slice()).ok()?,
        handle,
        StaticState::decode(parts.key.as_slice()).ok()?,
        DynamicState::decode(parts.state).ok()?,
    )
    .ok()
}

/// The kept credential with its new state.
fn repack(mut stored: Stored, state: DynamicState) -> Result<String, Refused> {
    stored.state = STANDARD.encode(state.encode().map_err(|_| Refused::Malformed)?);
    serde_json::to_string(&stored).map_err(|_| Refused::Malformed)
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

/// A user's handle: its UUID's sixteen bytes.
fn user_handle(uuid: &str) -> Option<UserHandle<16>> {
    UserHandle::<16>::decode(uuid_bytes(uuid)?).ok()
}

/// A UUID's text from its sixteen bytes.
fn uuid_text(bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
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

#[cfg(test)]
mod tests {
    use super::*;

    fn party() -> RelyingParty {
        RelyingParty::new("app.test", vec!["https://app.test".into()]).expect("a relying party")
    }

    #[test]
    fn answers_that_are_no_credentials_are_refused_not_panicked_on() {
        let party = party();
        let user = "8c3f7e20-5d3f-4ea0-9b4c-3d4e5f607182";
        let (state, options) =
            party.start_registration(user, "ann@example.com", &[], true).expect("a ceremony");
        assert_eq!(options["rp"], json!({"name": "app.test", "id": "app.test"}));
        assert_eq!(options["user"]["name"], "ann@example.com");
        let b64 = |b: &[u8]| URL_SAFE_NO_PAD.encode(b);
        let client_data =
            b64(br#"{"type":"webauthn.create","challenge":"AAAA","origin":"https://app.test"}"#);
        let mut seed = 7u64;
        for len in [0usize, 1, 2, 37, 64, 300] {
            let noise: Vec<u8> = (0..len)
                .map(|_| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    (seed >> 33) as u8
                })
                .collect();
            for attestation in [b64(&noise), b64(&[&[0xa3u8][..], &noise].concat())] {
                let answer = json!({
                    "id": "AAAA", "rawId": "AAAA", "type": "public-key",
                    "response": {"clientDataJSON": client_data, "attestationObject": attestation},
                    "clientExtensionResults": {},
                });
                assert!(party.finish_registration(&state, &answer.to_string()).is_err(), "{answer}");
            }
        }
        assert!(party.finish_registration("not a state", "{}").is_err());
        assert!(passkey_answer_names("{}").is_err());
        assert!(party.finish_authentication(&state, "{}", user, "{}", true).is_err());
    }
}
