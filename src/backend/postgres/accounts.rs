//! PostgreSQL's accounts store: Supabase's `auth.users` and its kin, behind SECURITY DEFINER
//! functions in schema `rowgate` (`accounts.sql`, run by `rowgate accounts install`), called on
//! a connection of its own as the authenticator (pooled ones carry requests' session roles).

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio_postgres::types::Type;
use tokio_postgres::Client;

use crate::accounts::store::{
    lifetime, token_hash, AccountStore, Attached, Challenged, Created, Enrolled, ExternalIdentity, Flow,
    Hook, Issued, Linked, NewFactor, NewUser, OneTime, Redeem, Scope, SessionClient, SessionSummary, Started,
    TakenFlow, Updated, User, UserChanges, WithHash,
};
use crate::error::Error;

/// A PostgreSQL connection as the authenticator, opened on first use and again after a drop.
pub struct PgAccounts {
    target: super::PgTarget,
    client: tokio::sync::Mutex<Option<Arc<Client>>>,
}

impl PgAccounts {
    /// A store on the database `target` names.
    pub fn new(target: super::PgTarget) -> PgAccounts {
        PgAccounts::named(target, "rowgate accounts")
    }

    /// A store whose connection is named `application_name`.
    pub fn named(mut target: super::PgTarget, application_name: &str) -> PgAccounts {
        target.config.application_name(application_name);
        PgAccounts { target, client: tokio::sync::Mutex::new(None) }
    }

    pub(super) async fn client(&self) -> Result<Arc<Client>, Error> {
        let mut held = self.client.lock().await;
        if let Some(c) = held.as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let client = Arc::new(super::connect(&self.target).await.map_err(pg_error)?);
        *held = Some(client.clone());
        Ok(client)
    }

    /// Runs `sql` as an unnamed statement, its parameters' types given (one round trip, and
    /// nothing prepared that a pooler in transaction mode could lose).
    pub(super) async fn query(
        &self,
        sql: &str,
        params: &[(&(dyn tokio_postgres::types::ToSql + Sync), Type)],
    ) -> Result<Vec<tokio_postgres::Row>, Error> {
        self.query_or_unique(sql, params).await?.map_err(|_| Error::Unavailable("a unique violation".into()))
    }

    /// [`PgAccounts::query`], a unique violation (an address another account has) told apart.
    async fn query_or_unique(
        &self,
        sql: &str,
        params: &[(&(dyn tokio_postgres::types::ToSql + Sync), Type)],
    ) -> Result<Result<Vec<tokio_postgres::Row>, UniqueViolation>, Error> {
        let client = self.client().await?;
        match client.query_typed(sql, params).await {
            Ok(rows) => Ok(Ok(rows)),
            Err(e) if e.as_db_error().is_some_and(|d| d.code().code() == "23505") => Ok(Err(UniqueViolation)),
            Err(e) => Err(pg_error(e)),
        }
    }
}

impl PgAccounts {
    /// A new session of `user_id` (held by the application `client`, if any), signed in now by
    /// `method`; `None` if the account is gone.
    pub(super) async fn start_session(
        &self,
        user_id: String,
        method: String,
        client: Option<SessionClient>,
        now: i64,
    ) -> Result<Option<(User, Started)>, Error> {
        let started = Started::new(method, now);
        let (client_id, scopes) = (client.as_ref().map(|c| &c.client_id), client.as_ref().map(|c| &c.scopes));
        let rows = self
            .query(
                "SELECT * FROM rowgate.account_sign_in($1, $2, $3, $4, $5, $6)",
                &[
                    (&user_id, Type::TEXT),
                    (&token_hash(&started.refresh), Type::TEXT),
                    (&started.session_id, Type::TEXT),
                    (&started.method, Type::TEXT),
                    (&client_id, Type::TEXT),
                    (&scopes, Type::TEXT),
                ],
            )
            .await?;
        Ok(rows.first().map(|r| (pg_user(r), Started { client: pg_session_client(r), ..started })))
    }
}

/// A write refused by a unique index.
struct UniqueViolation;

fn pg_error(e: tokio_postgres::Error) -> Error {
    if e.as_db_error().is_some_and(|d| ["42883", "3F000", "42P01", "42501"].contains(&d.code().code())) {
        tracing::error!(error = %e, "the accounts are not installed for this role: run `rowgate accounts install --role <the db-uri's role>`");
    } else {
        tracing::error!(error = %e, "an accounts query failed");
    }
    Error::Unavailable(e.to_string())
}

/// How many columns `rowgate.account` has: a function's own columns come after them.
pub(super) const ACCOUNT_COLUMNS: usize = 31;

/// The columns of `rowgate.account`, in order.
pub(super) fn pg_user(r: &tokio_postgres::Row) -> User {
    User {
        id: r.get(0),
        email: r.get(1),
        phone: r.get(2),
        role: r.get(3),
        created_at: r.get(4),
        updated_at: r.get(5),
        email_confirmed_at: r.get(6),
        last_sign_in_at: r.get(7),
        banned_until: r.get(8),
        is_banned: r.get(9),
        app_metadata: r.get(10),
        user_metadata: r.get(11),
        is_anonymous: r.get(12),
        confirmation_sent_at: r.get(15),
        recovery_sent_at: r.get(16),
        email_change_sent_at: r.get(17),
        new_email: r.get(18),
        factors: r.get(19),
        identities: r.get(22),
        invited_at: r.get(23),
        email_verified: r.get::<_, Option<bool>>(25).unwrap_or(false),
        phone_confirmed_at: r.get(29),
        new_phone: r.get(30),
    }
}

/// When the session began (column 21), else `now`.
pub(super) fn pg_started(r: &tokio_postgres::Row, now: i64) -> i64 {
    r.get::<_, Option<i64>>(21).unwrap_or(now)
}

/// The session's assurance level (column 20).
pub(super) fn pg_aal(r: &tokio_postgres::Row) -> String {
    r.get::<_, Option<String>>(20).unwrap_or_else(|| "aal1".into())
}

/// How the session signed in (column 24); `password` for a session of before it was kept.
pub(super) fn pg_method(r: &tokio_postgres::Row) -> String {
    r.get::<_, Option<String>>(24).unwrap_or_else(|| "password".into())
}

/// At `aal2`, the second factor's method (column 26).
pub(super) fn pg_second_factor(r: &tokio_postgres::Row) -> Option<String> {
    r.get(26)
}

/// The application holding the session (columns 27 and 28), if rowgate as an OAuth server
/// issued it to one.
pub(super) fn pg_session_client(r: &tokio_postgres::Row) -> Option<SessionClient> {
    let client_id: Option<String> = r.get(27);
    client_id.map(|client_id| SessionClient {
        client_id,
        scopes: r.get::<_, Option<String>>(28).unwrap_or_default(),
    })
}

/// The password hash (column 13) and session (14) some functions add to the account.
fn pg_hash(r: &tokio_postgres::Row) -> Option<String> {
    r.get(13)
}

fn pg_session(r: &tokio_postgres::Row) -> Option<String> {
    r.get(14)
}

impl AccountStore for PgAccounts {
    fn create(&self, user: NewUser, session: bool, now: i64) -> BoxFuture<'_, Result<Created, Error>> {
        Box::pin(async move {
            let started =
                session.then(|| Started::new(if user.is_anonymous { "anonymous" } else { "password" }, now));
            let token = started.as_ref().map(|s| token_hash(&s.refresh));
            let session_id = started.as_ref().map(|s| s.session_id.clone());
            let rows = self
                .query(
                    "SELECT * FROM rowgate.account_create($1, $2, $3, $4, $5::text::jsonb, $6::text::jsonb, \
                     $7, $8, $9, $10, $11, $12, $13, $14, $15)",
                    &[
                        (&user.id, Type::TEXT),
                        (&user.email, Type::TEXT),
                        (&user.phone, Type::TEXT),
                        (&user.password_hash, Type::TEXT),
                        (&user.user_metadata, Type::TEXT),
                        (&user.app_metadata, Type::TEXT),
                        (&user.is_anonymous, Type::BOOL),
                        (&user.confirmed, Type::BOOL),
                        (&user.role, Type::TEXT),
                        (&user.banned_until, Type::INT8),
                        (&token, Type::TEXT),
                        (&session_id, Type::TEXT),
                        (&user.invited, Type::BOOL),
                        (&user.unproved, Type::BOOL),
                        (&user.phone_confirmed, Type::BOOL),
                    ],
                )
                .await?;
            Ok(rows.first().map(|r| (pg_user(r), started)))
        })
    }

    fn by_email(&self, email: String) -> BoxFuture<'_, Result<WithHash, Error>> {
        Box::pin(async move {
            let rows =
                self.query("SELECT * FROM rowgate.account_by_email($1)", &[(&email, Type::TEXT)]).await?;
            Ok(rows.first().map(|r| (pg_user(r), pg_hash(r))))
        })
    }

    fn by_phone(&self, phone: String) -> BoxFuture<'_, Result<WithHash, Error>> {
        Box::pin(async move {
            let rows =
                self.query("SELECT * FROM rowgate.account_by_phone($1)", &[(&phone, Type::TEXT)]).await?;
            Ok(rows.first().map(|r| (pg_user(r), pg_hash(r))))
        })
    }

    fn user(&self, id: String) -> BoxFuture<'_, Result<Option<User>, Error>> {
        Box::pin(async move {
            Ok(self
                .query("SELECT * FROM rowgate.account_by_id($1)", &[(&id, Type::TEXT)])
                .await?
                .first()
                .map(pg_user))
        })
    }

    fn sign_in(
        &self,
        user_id: String,
        method: String,
        now: i64,
    ) -> BoxFuture<'_, Result<Option<(User, Started)>, Error>> {
        Box::pin(self.start_session(user_id, method, None, now))
    }

    fn rotate(
        &self,
        token: String,
        successor: String,
        now: i64,
        reuse: i64,
        client: Option<String>,
    ) -> BoxFuture<'_, Result<Option<(User, Started)>, Error>> {
        Box::pin(async move {
            let rows = self
                .query(
                    "SELECT * FROM rowgate.account_rotate($1, $2, $3, $4, $5, $6)",
                    &[
                        (&token_hash(&token), Type::TEXT),
                        (&token_hash(&successor), Type::TEXT),
                        (&now, Type::INT8),
                        (&lifetime(), Type::INT8),
                        (&reuse, Type::INT8),
                        (&client, Type::TEXT),
                    ],
                )
                .await?;
            Ok(rows.first().map(|r| {
                let session_id = pg_session(r).unwrap_or_default();
                (
                    pg_user(r),
                    Started {
                        refresh: successor,
                        session_id,
                        aal: pg_aal(r),
                        signed_in_at: pg_started(r, now),
                        method: pg_method(r),
                        second_factor: pg_second_factor(r),
                        client: pg_session_client(r),
                    },
                )
            }))
        })
    }

    fn update(&self, id: String, changes: UserChanges) -> BoxFuture<'_, Result<Updated, Error>> {
        Box::pin(async move {
            let ban = changes.banned_until.is_some();
            let until = changes.banned_until.flatten();
            let rows = self
                .query_or_unique(
                    "SELECT * FROM rowgate.account_update($1, $2, $3, $4, $5::text::jsonb, $6::text::jsonb, \
                     $7, $8, $9, $10, $11, $12)",
                    &[
                        (&id, Type::TEXT),
                        (&changes.email, Type::TEXT),
                        (&changes.phone, Type::TEXT),
                        (&changes.password_hash, Type::TEXT),
                        (&changes.user_metadata, Type::TEXT),
                        (&changes.app_metadata, Type::TEXT),
                        (&changes.confirm_email, Type::BOOL),
                        (&ban, Type::BOOL),
                        (&until, Type::INT8),
                        (&changes.is_anonymous, Type::BOOL),
                        (&changes.role, Type::TEXT),
                        (&changes.unproved, Type::BOOL),
                    ],
                )
                .await;
            Ok(match rows? {
                Ok(rows) => rows.first().map_or(Updated::NotFound, |r| Updated::Done(Box::new(pg_user(r)))),
                Err(UniqueViolation) => Updated::Taken,
            })
        })
    }

    fn list(&self, offset: u64, limit: u64) -> BoxFuture<'_, Result<(Vec<User>, u64), Error>> {
        Box::pin(async move {
            let (offset, limit) = (offset.min(i64::MAX as u64) as i64, limit.min(i64::MAX as u64) as i64);
            let rows = self
                .query(
                    "SELECT * FROM rowgate.account_list($1, $2)",
                    &[(&offset, Type::INT8), (&limit, Type::INT8)],
                )
                .await?;
            let total: i64 = self.query("SELECT rowgate.account_count()", &[]).await?[0].get(0);
            Ok((rows.iter().map(pg_user).collect(), total.max(0) as u64))
        })
    }

    fn delete(&self, id: String, soft: bool) -> BoxFuture<'_, Result<bool, Error>> {
        Box::pin(async move {
            let rows = self
                .query("SELECT rowgate.account_delete($1, $2)", &[(&id, Type::TEXT), (&soft, Type::BOOL)])
                .await?;
            Ok(rows[0].get(0))
        })
    }

    fn issue(
        &self,
        user_id: String,
        kind: OneTime,
        token_hash: String,
        new_email: Option<String>,
        interval: i64,
    ) -> BoxFuture<'_, Result<Issued, Error>> {
        Box::pin(async move {
            let rows = self
                .query(
                    "SELECT rowgate.account_issue($1, $2, $3, $4, $5)",
                    &[
                        (&user_id, Type::TEXT),
                        (&kind.name(), Type::TEXT),
                        (&token_hash, Type::TEXT),
                        (&new_email, Type::TEXT),
                        (&interval, Type::INT8),
                    ],
                )
                .await?;
            Ok(match rows[0].get::<_, i64>(0) {
                0 => Issued::Stored,
                -1 => Issued::NotFound,
                wait => Issued::TooSoon(wait),
            })
        })
    }

    fn redeem(
        &self,
        kind: Redeem,
        token_hash: String,
        email: Option<String>,
        expiry: i64,
    ) -> BoxFuture<'_, Result<Option<User>, Error>> {
        Box::pin(async move {
            let kind = kind.map(OneTime::name);
            let rows = self
                .query_or_unique(
                    "SELECT * FROM rowgate.account_redeem($1, $2, $3, $4)",
                    &[
                        (&kind, Type::TEXT),
                        (&token_hash, Type::TEXT),
                        (&email, Type::TEXT),
                        (&expiry, Type::INT8),
                    ],
                )
                .await?;
            // An address another account took meanwhile: the change cannot be made.
            Ok(rows.ok().and_then(|rows| rows.first().map(pg_user)))
        })
    }

    fn enroll_factor(
        &self,
        user_id: String,
        factor: NewFactor,
        aal2: bool,
        expiry: i64,
    ) -> BoxFuture<'_, Result<Enrolled, Error>> {
        Box::pin(super::mfa::enroll(self, user_id, factor, aal2, expiry))
    }

    fn challenge_factor(
        &self,
        user_id: String,
        factor_id: String,
        challenge_id: String,
        ceremony: Option<String>,
    ) -> BoxFuture<'_, Result<bool, Error>> {
        Box::pin(super::mfa::challenge(self, user_id, factor_id, challenge_id, ceremony))
    }

    fn challenged(
        &self,
        user_id: String,
        factor_id: String,
        challenge_id: String,
    ) -> BoxFuture<'_, Result<Option<Challenged>, Error>> {
        Box::pin(super::mfa::challenged(self, user_id, factor_id, challenge_id))
    }

    fn elevate(
        &self,
        user_id: String,
        factor_id: String,
        challenge_id: String,
        session_id: String,
        credential: Option<String>,
    ) -> BoxFuture<'_, Result<Option<(User, Started)>, Error>> {
        Box::pin(super::mfa::elevate(self, user_id, factor_id, challenge_id, session_id, credential))
    }

    fn unenroll_factor(
        &self,
        user_id: String,
        factor_id: String,
        aal2: bool,
    ) -> BoxFuture<'_, Result<Option<bool>, Error>> {
        Box::pin(super::mfa::unenroll(self, user_id, factor_id, aal2))
    }

    fn start_flow(&self, flow: Flow) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            self.query(
                "SELECT rowgate.account_flow_start($1, $2, $3, $4, $5, $6)",
                &[
                    (&flow.id, Type::TEXT),
                    (&flow.user_id, Type::TEXT),
                    (&flow.auth_code, Type::TEXT),
                    (&flow.challenge, Type::TEXT),
                    (&flow.method, Type::TEXT),
                    (&flow.authentication_method, Type::TEXT),
                ],
            )
            .await
            .map(drop)
        })
    }

    fn flow_code(
        &self,
        user_id: String,
        authentication_method: String,
    ) -> BoxFuture<'_, Result<Option<String>, Error>> {
        Box::pin(async move {
            let rows = self
                .query(
                    "SELECT rowgate.account_flow_code($1, $2)",
                    &[(&user_id, Type::TEXT), (&authentication_method, Type::TEXT)],
                )
                .await?;
            Ok(rows.first().and_then(|r| r.get(0)))
        })
    }

    fn take_flow(&self, auth_code: String) -> BoxFuture<'_, Result<Option<TakenFlow>, Error>> {
        Box::pin(async move {
            let rows = self
                .query("SELECT * FROM rowgate.account_flow_take($1)", &[(&auth_code, Type::TEXT)])
                .await?;
            Ok(rows.first().map(|r| TakenFlow {
                user_id: r.get(0),
                challenge: r.get(1),
                method: r.get(2),
                issued_at: r.get(3),
                authentication_method: r.get(4),
            }))
        })
    }

    fn check_hook(&self, hook: &str) -> Result<(), String> {
        super::hooks::function(hook).map(drop)
    }

    fn run_hook(&self, _kind: Hook, hook: String, event: String) -> BoxFuture<'_, Result<String, Error>> {
        Box::pin(super::hooks::run(self, hook, event))
    }

    fn link_identity(
        &self,
        identity: ExternalIdentity,
        new: NewUser,
        create: bool,
    ) -> BoxFuture<'_, Result<Linked, Error>> {
        Box::pin(super::identities::link(self, identity, new, create))
    }

    fn attach_identity(
        &self,
        user_id: String,
        identity: ExternalIdentity,
    ) -> BoxFuture<'_, Result<Attached, Error>> {
        Box::pin(super::identities::attach(self, user_id, identity))
    }

    fn detach_identity(
        &self,
        user_id: String,
        identity_id: String,
    ) -> BoxFuture<'_, Result<Option<User>, Error>> {
        Box::pin(super::identities::detach(self, user_id, identity_id))
    }

    fn sessions(&self, user_id: String) -> BoxFuture<'_, Result<Vec<SessionSummary>, Error>> {
        Box::pin(async move {
            let rows = self
                .query(
                    "SELECT id, to_char(signed_in_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), method, aal, client_id
                     FROM rowgate.account_sessions($1)",
                    &[(&user_id, Type::TEXT)],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|r| SessionSummary {
                    id: r.get(0),
                    signed_in_at: r.get(1),
                    method: r.get(2),
                    aal: r.get(3),
                    client_id: r.get(4),
                })
                .collect())
        })
    }

    fn logout(
        &self,
        user_id: String,
        session: Option<String>,
        scope: Scope,
    ) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            let scope = match scope {
                Scope::Global => "global",
                Scope::Local => "local",
                Scope::Others => "others",
            };
            self.query(
                "SELECT rowgate.account_logout($1, $2, $3)",
                &[(&user_id, Type::TEXT), (&session, Type::TEXT), (&scope, Type::TEXT)],
            )
            .await
            .map(drop)
        })
    }
}
