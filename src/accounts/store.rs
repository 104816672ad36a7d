//! What the accounts need of the database they live in: one trait, implemented by each backend
//! (`backend::postgres::accounts`: Supabase's `auth.users` and its kin behind SECURITY DEFINER
//! functions; `backend::sqlite::accounts`: tables in the SQLite file). Each operation is one
//! transaction.

use futures_util::future::BoxFuture;
use sha2::Digest;

use super::REFRESH_LIFETIME;
use crate::error::Error;

/// A user account, as GoTrue shows one.
#[derive(Debug, Clone)]
pub struct User {
    /// A UUID.
    pub id: String,
    /// The address (lowercased), if the account has one (an anonymous one has none).
    pub email: Option<String>,
    pub phone: Option<String>,
    /// The role its tokens carry (`authenticated` unless an administrator set another).
    pub role: String,
    /// Timestamps in RFC 3339, as the database writes them.
    pub created_at: String,
    pub updated_at: String,
    pub email_confirmed_at: Option<String>,
    pub last_sign_in_at: Option<String>,
    pub banned_until: Option<String>,
    /// Whether `banned_until` is still to come.
    pub is_banned: bool,
    /// `app_metadata` and `user_metadata`: JSON objects, as text.
    pub app_metadata: String,
    pub user_metadata: String,
    pub is_anonymous: bool,
    /// When the last code of each kind went out, and the address an email change waits to take.
    pub confirmation_sent_at: Option<String>,
    pub recovery_sent_at: Option<String>,
    pub email_change_sent_at: Option<String>,
    pub new_email: Option<String>,
    /// The user's MFA factors, GoTrue's JSON array (`id`, `friendly_name`, `factor_type`,
    /// `status`, `created_at`, `updated_at`).
    pub factors: String,
    /// The user's identities at OpenID providers, GoTrue's JSON array (`identity_id`, `id` —
    /// the provider's subject —, `user_id`, `identity_data`, `provider`, `email`, times); the
    /// address's own (`email`) is not among them.
    pub identities: String,
    /// When an administrator invited the user, if one did.
    pub invited_at: Option<String>,
    /// Whether the address is proved the user's (GoTrue's `email_verified`): confirmed by a
    /// mail that came back, an administrator or a provider, not merely taken (autoconfirm).
    pub email_verified: bool,
    /// When the phone number was confirmed (a code sent to it came back), and the number a
    /// phone change waits to take.
    pub phone_confirmed_at: Option<String>,
    pub new_phone: Option<String>,
}

/// A session just started: its refresh token, its id, and how sure it is of its user (`aal1`,
/// or `aal2` once a second factor was verified in it).
#[derive(Debug, Clone)]
pub struct Started {
    pub refresh: String,
    pub session_id: String,
    pub aal: String,
    /// When the session began: its sign-in (seconds since the epoch).
    pub signed_in_at: i64,
    /// How the user proved who they are at that sign-in: GoTrue's authentication method
    /// (`password`, `otp`, `oauth`, `anonymous`, `magiclink`, ...), the first of its `amr`.
    pub method: String,
    /// At `aal2`, the second factor's method (`totp`, `mfa/webauthn`).
    pub second_factor: Option<String>,
    /// The application that holds the session, when rowgate as an OAuth server issued it.
    pub client: Option<SessionClient>,
}

/// The application a session was issued to, and the scopes its user granted it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionClient {
    pub client_id: String,
    /// Space-separated.
    pub scopes: String,
}

impl Started {
    /// A session beginning now at `aal1`, signed in by `method`, with a new refresh token.
    pub fn new(method: impl Into<String>, now: i64) -> Started {
        Started {
            refresh: random_token(),
            session_id: crate::uuid_v4(),
            aal: "aal1".into(),
            signed_in_at: now,
            method: method.into(),
            second_factor: None,
            client: None,
        }
    }
}

/// A factor to enroll.
#[derive(Debug, Clone)]
pub struct NewFactor {
    pub id: String,
    pub friendly_name: String,
    /// `totp` or `webauthn`.
    pub factor_type: &'static str,
    /// A TOTP factor's secret, base32.
    pub secret: Option<String>,
}

/// How enrolling a factor ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enrolled {
    Done,
    /// Another of the user's factors has that name.
    NameTaken,
    /// The user has as many factors as one may.
    TooMany,
    /// The user has a verified factor, and the session has not used it.
    NeedsAal2,
}

/// A factor (its type, a TOTP factor's secret or a WebAuthn factor's credential, whether it is
/// verified) with the challenge asked: when it was made, and what its WebAuthn ceremony keeps.
#[derive(Debug, Clone)]
pub struct Challenged {
    pub factor_type: String,
    pub secret: Option<String>,
    pub credential: Option<String>,
    pub verified: bool,
    /// When the challenge was made (seconds since the epoch); `None` if it is no challenge of
    /// this factor or was answered already.
    pub challenged_at: Option<i64>,
    pub ceremony: Option<String>,
    /// The user's other WebAuthn credentials, which a registration must not make again.
    pub others: Vec<String>,
}

/// Credentials from a JSON array of them, as the stores answer it (`None`: none).
pub fn credentials(array: Option<String>) -> Vec<String> {
    let list: Vec<serde_json::Value> = array.and_then(|a| serde_json::from_str(&a).ok()).unwrap_or_default();
    list.iter().map(serde_json::Value::to_string).collect()
}

/// An account to create.
#[derive(Debug, Clone, Default)]
pub struct NewUser {
    pub id: String,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub password_hash: Option<String>,
    /// JSON objects, as text.
    pub user_metadata: String,
    pub app_metadata: String,
    pub is_anonymous: bool,
    /// Whether its address counts as confirmed from the start.
    pub confirmed: bool,
    /// Whether it counts as confirmed without proof (autoconfirm): a provider's verified address
    /// joining the account still takes its password away, as for an unconfirmed one.
    pub unproved: bool,
    /// Whether its phone number counts as confirmed from the start.
    pub phone_confirmed: bool,
    pub role: String,
    /// Banned until this time (seconds since the epoch).
    pub banned_until: Option<i64>,
    /// Whether an administrator's invitation makes it (`invited_at`).
    pub invited: bool,
}

/// Who an OpenID provider says signed in.
#[derive(Debug, Clone)]
pub struct ExternalIdentity {
    /// The provider's name, as configured (`accounts-providers`).
    pub provider: String,
    /// Its subject (`sub`): the identity's `provider_id`.
    pub subject: String,
    /// The address it gives (lowercased), and whether it says the address is verified.
    pub email: Option<String>,
    pub email_verified: bool,
    /// GoTrue's `identity_data`: the claims (a JSON object, as text); also merged into the
    /// account's `user_metadata`.
    pub data: String,
}

/// Whose an identity is once a sign-in with it is linked: an account that had it, one with its
/// verified address, or (`create` allowing) a new one.
#[derive(Debug, Clone)]
pub enum Linked {
    Existing(Box<User>),
    /// The identity was added to the account with its verified address; an account whose own
    /// address was never confirmed loses its password (whoever set it did not prove the address)
    /// and has the address confirmed.
    Added(Box<User>),
    Created(Box<User>),
    /// A new account would be needed, and `create` was false.
    WouldCreate,
}

/// How adding an identity to a signed-in user's account ended.
#[derive(Debug, Clone)]
pub enum Attached {
    /// Added; an account without an address took the identity's verified one (and stopped being
    /// anonymous).
    Done(Box<User>),
    /// The identity was the user's already.
    AlreadyTheirs,
    /// The identity is another account's.
    Others,
    NoUser,
}

/// Changes to an account: `None` changes nothing.
#[derive(Debug, Clone, Default)]
pub struct UserChanges {
    pub email: Option<String>,
    pub phone: Option<String>,
    pub password_hash: Option<String>,
    /// Keys to set in `user_metadata` / `app_metadata` (a JSON object, as text); a key whose
    /// value is null is removed (GoTrue's merge).
    pub user_metadata: Option<String>,
    pub app_metadata: Option<String>,
    /// Marks the address confirmed: proved (an administrator vouches), unless `unproved`. A new
    /// address not marked confirmed is unproved too, whatever confirmed the old one.
    pub confirm_email: bool,
    pub unproved: bool,
    /// `Some(None)` lifts a ban; `Some(Some(t))` bans until `t` (seconds since the epoch).
    pub banned_until: Option<Option<i64>>,
    pub is_anonymous: Option<bool>,
    pub role: Option<String>,
}

/// Which of Supabase Auth's hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// Decides a token's claims.
    CustomAccessToken,
    /// May refuse an account before it is made.
    BeforeUserCreated,
}

/// How an update ended.
#[derive(Debug, Clone)]
pub enum Updated {
    Done(Box<User>),
    NotFound,
    /// Another account has the address or phone.
    Taken,
}

/// A code sent by mail, by what it is for (and the column it is kept in, as GoTrue keeps it:
/// `confirmation_token`, `recovery_token` — magic links too —, `email_change_token_new`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OneTime {
    Confirmation,
    Recovery,
    EmailChange,
    /// An email change's code to the current address (a secure change needs both).
    EmailChangeCurrent,
    /// A code proving the user still has the address, for a password change.
    Reauthentication,
    /// A code sent by SMS that confirms the phone number and signs its user in (GoTrue's `sms`).
    PhoneConfirmation,
    /// A code sent by SMS to the number a phone change takes.
    PhoneChange,
}

impl OneTime {
    /// Its name in the SQL of the stores.
    pub fn name(self) -> &'static str {
        match self {
            OneTime::Confirmation => "confirmation",
            OneTime::Recovery => "recovery",
            OneTime::EmailChange => "email_change",
            OneTime::EmailChangeCurrent => "email_change_current",
            OneTime::Reauthentication => "reauthentication",
            OneTime::PhoneConfirmation => "phone_confirmation",
            OneTime::PhoneChange => "phone_change",
        }
    }
}

/// Which codes a verification may redeem: one kind, or (`None`) a confirmation or recovery
/// code alike (GoTrue's `type=email`).
pub type Redeem = Option<OneTime>;

/// A PKCE flow (RFC 7636): the challenge a client sent with a request for a mail, kept until
/// the code its link leads back with is exchanged with the verifier.
#[derive(Debug, Clone)]
pub struct Flow {
    pub id: String,
    pub user_id: String,
    /// What the link's redirect carries (`?code=`), to be exchanged.
    pub auth_code: String,
    pub challenge: String,
    /// `s256` or `plain`.
    pub method: String,
    /// What the link is for, GoTrue's name (`email/signup`, `magiclink`, `recovery`, ...).
    pub authentication_method: String,
}

/// A flow taken to be exchanged: whose, its challenge, and when its code was handed out.
#[derive(Debug, Clone)]
pub struct TakenFlow {
    pub user_id: String,
    pub challenge: String,
    pub method: String,
    /// Seconds since the epoch; `None` if no link led back yet.
    pub issued_at: Option<i64>,
    /// What its link authenticated by (GoTrue's name): the session's sign-in method.
    pub authentication_method: String,
}

/// How issuing a code ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Issued {
    Stored,
    /// One of its kind went out less than the interval ago: this many seconds to wait.
    TooSoon(i64),
    NotFound,
}

/// Which sessions a sign-out ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Global,
    Local,
    Others,
}

/// A new account, and its first session if one was asked for; `None` if it was taken.
pub type Created = Option<(User, Option<Started>)>;

/// An account and its password hash (none for an account without a password).
pub type WithHash = Option<(User, Option<String>)>;

/// The accounts' storage.
pub trait AccountStore:
    super::passkey_store::PasskeyStore + super::oauth_server_store::OAuthServerStore + Send + Sync
{
    /// A new account, and with `session` its first session; `None` if the address or phone is
    /// taken.
    fn create(&self, user: NewUser, session: bool, now: i64) -> BoxFuture<'_, Result<Created, Error>>;

    /// The account of an address (any case) and its password hash.
    fn by_email(&self, email: String) -> BoxFuture<'_, Result<WithHash, Error>>;

    /// The account of a phone number (E.164 digits, no `+`) and its password hash.
    fn by_phone(&self, phone: String) -> BoxFuture<'_, Result<WithHash, Error>>;

    /// An account by id.
    fn user(&self, id: String) -> BoxFuture<'_, Result<Option<User>, Error>>;

    /// A new session of `user_id`, signed in by `method` (GoTrue's authentication method), whose
    /// sign-in is recorded; `None` if there is no such user. (A session [`AccountStore::create`]
    /// starts is signed in by `password`, or `anonymous` for an anonymous user.)
    fn sign_in(
        &self,
        user_id: String,
        method: String,
        now: i64,
    ) -> BoxFuture<'_, Result<Option<(User, Started)>, Error>>;

    /// Rotation in one transaction: `token` is used up and a successor stored, whose secret is
    /// `successor` (derived from `token`, so the same every time). One used within the last
    /// `reuse` seconds (a retry whose answer was lost, another tab) gets the same successor
    /// again; one used before that revokes all of its user's (it may have been stolen).
    /// A token is refreshed only by the holder of its session: the application `client` (rowgate
    /// as an OAuth server issued it to), or, if `None`, a session of no application.
    /// `None`: refused. Else the user, the successor and its session's id.
    fn rotate(
        &self,
        token: String,
        successor: String,
        now: i64,
        reuse: i64,
        client: Option<String>,
    ) -> BoxFuture<'_, Result<Option<(User, Started)>, Error>>;

    /// Applies `changes` to the account `id`.
    fn update(&self, id: String, changes: UserChanges) -> BoxFuture<'_, Result<Updated, Error>>;

    /// The accounts, newest first, from `offset`, at most `limit`; and how many there are.
    fn list(&self, offset: u64, limit: u64) -> BoxFuture<'_, Result<(Vec<User>, u64), Error>>;

    /// Deletes the account `id`, with its sessions; whether there was one. `soft` (GoTrue's
    /// `should_soft_delete`): the row stays for what references it, its address, phone and
    /// identities replaced by hashes of them, its password, codes and metadata wiped, its
    /// factors, passkeys and sessions deleted; the account is gone from the API.
    fn delete(&self, id: String, soft: bool) -> BoxFuture<'_, Result<bool, Error>>;

    /// Stores the hash of a code of `kind` for `user_id` (with an email or phone change, the
    /// address or number it changes to, in `new_email`), unless one went out less than
    /// `interval` seconds ago.
    fn issue(
        &self,
        user_id: String,
        kind: OneTime,
        token_hash: String,
        new_email: Option<String>,
        interval: i64,
    ) -> BoxFuture<'_, Result<Issued, Error>>;

    /// Redeems the code whose hash is `token_hash` (for the address `email`, if given; for a
    /// phone code, the number) if it went out less than `expiry` seconds ago: it is used up and
    /// does what it was sent for (confirms the address or number; a change takes the new one).
    /// The user, or `None`.
    fn redeem(
        &self,
        kind: Redeem,
        token_hash: String,
        email: Option<String>,
        expiry: i64,
    ) -> BoxFuture<'_, Result<Option<User>, Error>>;

    /// Enrolls an unverified factor for `user_id` (`aal2`: whether the session has used a
    /// second factor), first dropping unverified factors older than `expiry` seconds.
    fn enroll_factor(
        &self,
        user_id: String,
        factor: NewFactor,
        aal2: bool,
        expiry: i64,
    ) -> BoxFuture<'_, Result<Enrolled, Error>>;

    /// A challenge `challenge_id` of the user's factor `factor_id`, with what its WebAuthn
    /// `ceremony` keeps; whether there is such a factor.
    fn challenge_factor(
        &self,
        user_id: String,
        factor_id: String,
        challenge_id: String,
        ceremony: Option<String>,
    ) -> BoxFuture<'_, Result<bool, Error>>;

    /// The user's factor `factor_id` and its challenge `challenge_id` (none if the challenge is
    /// not the factor's, or was answered).
    fn challenged(
        &self,
        user_id: String,
        factor_id: String,
        challenge_id: String,
    ) -> BoxFuture<'_, Result<Option<Challenged>, Error>>;

    /// A challenge answered: the challenge is used up, the factor verified (a WebAuthn factor
    /// keeping `credential`, its new state), and the session `session_id` goes on at `aal2` with
    /// a new refresh token. `None` if the challenge was answered meanwhile.
    fn elevate(
        &self,
        user_id: String,
        factor_id: String,
        challenge_id: String,
        session_id: String,
        credential: Option<String>,
    ) -> BoxFuture<'_, Result<Option<(User, Started)>, Error>>;

    /// Removes the user's factor `factor_id` (a verified one only from an `aal2` session); the
    /// sessions that used it go back to `aal1`. `None` if there is no such factor; `Some(false)`
    /// if it needs `aal2`.
    fn unenroll_factor(
        &self,
        user_id: String,
        factor_id: String,
        aal2: bool,
    ) -> BoxFuture<'_, Result<Option<bool>, Error>>;

    /// Keeps a PKCE flow.
    fn start_flow(&self, flow: Flow) -> BoxFuture<'_, Result<(), Error>>;

    /// The code of `user_id`'s latest flow for `authentication_method`, marked handed out now.
    fn flow_code(
        &self,
        user_id: String,
        authentication_method: String,
    ) -> BoxFuture<'_, Result<Option<String>, Error>>;

    /// The flow of `auth_code`, removed (a code is exchanged once).
    fn take_flow(&self, auth_code: String) -> BoxFuture<'_, Result<Option<TakenFlow>, Error>>;

    /// Whether `hook` is a hook this store can run (PostgreSQL: a function's qualified name;
    /// SQLite: a SELECT); why not.
    fn check_hook(&self, hook: &str) -> Result<(), String>;

    /// Runs the hook `hook` of `kind` on `event` (GoTrue's event, as JSON) and answers as
    /// GoTrue's hooks do (JSON): `{"claims": {...}}` for a custom access token hook, `{}` or
    /// `{"error": {"http_code", "message"}}`.
    fn run_hook(&self, kind: Hook, hook: String, event: String) -> BoxFuture<'_, Result<String, Error>>;

    /// The account `identity` belongs to, as GoTrue links them: the one that has it (its data
    /// refreshed), else the one with its address if the provider verified it, else with `create`
    /// a new account `new` (without an address if `new`'s is taken), the identity added. An
    /// account gaining an identity gets the provider in `app_metadata.providers` and the
    /// identity's data merged into `user_metadata`.
    fn link_identity(
        &self,
        identity: ExternalIdentity,
        new: NewUser,
        create: bool,
    ) -> BoxFuture<'_, Result<Linked, Error>>;

    /// Adds `identity` to the account `user_id` (GoTrue's manual linking).
    fn attach_identity(
        &self,
        user_id: String,
        identity: ExternalIdentity,
    ) -> BoxFuture<'_, Result<Attached, Error>>;

    /// Removes the identity `identity_id` (one at a provider, not the address's own) from the
    /// account `user_id`, and its provider from `app_metadata.providers` unless another of the
    /// account's identities is at it; the account, or `None` if it had no such identity.
    fn detach_identity(
        &self,
        user_id: String,
        identity_id: String,
    ) -> BoxFuture<'_, Result<Option<User>, Error>>;

    /// The sessions of `user_id`, newest first (what an administrator sees of them).
    fn sessions(&self, user_id: String) -> BoxFuture<'_, Result<Vec<SessionSummary>, Error>>;

    /// Ends sessions of `user_id`: all of them, `session` only, or all others.
    fn logout(
        &self,
        user_id: String,
        session: Option<String>,
        scope: Scope,
    ) -> BoxFuture<'_, Result<(), Error>>;
}

/// One of an account's sessions, as an administrator lists them.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SessionSummary {
    /// The session's id (the access tokens' `session_id`).
    pub id: String,
    /// When it signed in (RFC 3339).
    pub signed_in_at: Option<String>,
    /// How (`password`, `otp`, `oauth`, ...).
    pub method: Option<String>,
    /// `aal1` or `aal2`.
    pub aal: Option<String>,
    /// The OAuth application holding it, if rowgate issued it as an OAuth server.
    pub client_id: Option<String>,
}

/// What GoTrue keeps of a soft-deleted account's personal data `value`: a hash of it with the
/// account's id (base64url, unpadded).
pub fn obfuscated(id: &str, value: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(format!("{id}{value}")))
}

/// A new refresh token's secret: 32 random bytes, base64url.
pub fn random_token() -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(crate::random_bytes::<32>())
}

/// How a token is stored: its SHA-256, in hex.
pub fn token_hash(token: &str) -> String {
    crate::hex(&sha2::Sha256::digest(token.as_bytes()))
}

/// Seconds since the epoch.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// How long a refresh token lives, in seconds.
pub fn lifetime() -> i64 {
    REFRESH_LIFETIME.as_secs() as i64
}

/// When a refresh token issued at `now` expires.
pub fn expires(now: i64) -> i64 {
    now + lifetime()
}

/// `patch`'s keys set in the JSON object `current`, those whose value is null removed
/// (GoTrue's merge of metadata). Both are JSON objects as text; a `current` that is not one
/// counts as `{}`.
pub fn merged(current: &str, patch: &str) -> String {
    let mut object = match serde_json::from_str::<serde_json::Value>(current) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    if let Ok(serde_json::Value::Object(changes)) = serde_json::from_str(patch) {
        for (k, v) in changes {
            if v.is_null() {
                object.remove(&k);
            } else {
                object.insert(k, v);
            }
        }
    }
    serde_json::Value::Object(object).to_string()
}

#[cfg(test)]
mod tests {
    use super::merged;

    #[test]
    fn metadata_is_merged_key_by_key_and_null_removes() {
        assert_eq!(
            merged(r#"{"a":1,"b":{"c":2}}"#, r#"{"b":{"d":3},"e":null,"a":null}"#),
            r#"{"b":{"d":3}}"#
        );
        assert_eq!(merged("not json", r#"{"x":[1,null]}"#), r#"{"x":[1,null]}"#);
    }
}
