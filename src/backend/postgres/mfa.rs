//! Second factors on PostgreSQL: Supabase's `auth.mfa_factors` and `auth.mfa_challenges`, through
//! the `rowgate.account_factor_*` functions (accounts.sql); a WebAuthn factor keeps its credential
//! in `web_authn_credential`, a challenge its ceremony in `web_authn_session_data`.

use tokio_postgres::types::Type;

use super::accounts::{
    pg_aal, pg_method, pg_second_factor, pg_session_client, pg_started, pg_user, PgAccounts,
};
use crate::accounts::store::{random_token, token_hash, Challenged, Enrolled, NewFactor, Started, User};
use crate::error::Error;

/// [`crate::accounts::store::AccountStore::enroll_factor`].
pub(super) async fn enroll(
    store: &PgAccounts,
    user_id: String,
    factor: NewFactor,
    aal2: bool,
    expiry: i64,
) -> Result<Enrolled, Error> {
    let rows = store
        .query(
            "SELECT rowgate.account_factor_enroll($1, $2, $3, $4, $5, $6, $7)",
            &[
                (&user_id, Type::TEXT),
                (&factor.id, Type::TEXT),
                (&factor.friendly_name, Type::TEXT),
                (&factor.factor_type, Type::TEXT),
                (&factor.secret, Type::TEXT),
                (&aal2, Type::BOOL),
                (&expiry, Type::INT8),
            ],
        )
        .await?;
    Ok(match rows[0].get::<_, &str>(0) {
        "ok" => Enrolled::Done,
        "name_taken" => Enrolled::NameTaken,
        "too_many" => Enrolled::TooMany,
        _ => Enrolled::NeedsAal2,
    })
}

/// [`crate::accounts::store::AccountStore::challenge_factor`].
pub(super) async fn challenge(
    store: &PgAccounts,
    user_id: String,
    factor_id: String,
    challenge_id: String,
    ceremony: Option<String>,
) -> Result<bool, Error> {
    let rows = store
        .query(
            "SELECT rowgate.account_factor_challenge($1, $2, $3, $4)",
            &[
                (&user_id, Type::TEXT),
                (&factor_id, Type::TEXT),
                (&challenge_id, Type::TEXT),
                (&ceremony, Type::TEXT),
            ],
        )
        .await?;
    Ok(rows[0].get(0))
}

/// [`crate::accounts::store::AccountStore::challenged`].
pub(super) async fn challenged(
    store: &PgAccounts,
    user_id: String,
    factor_id: String,
    challenge_id: String,
) -> Result<Option<Challenged>, Error> {
    let rows = store
        .query(
            "SELECT * FROM rowgate.account_factor_challenged($1, $2, $3)",
            &[(&user_id, Type::TEXT), (&factor_id, Type::TEXT), (&challenge_id, Type::TEXT)],
        )
        .await?;
    Ok(rows.first().map(|r| Challenged {
        factor_type: r.get(0),
        secret: r.get(1),
        credential: r.get(2),
        verified: r.get(3),
        challenged_at: r.get(4),
        ceremony: r.get(5),
        others: crate::accounts::store::credentials(r.get(6)),
    }))
}

/// [`crate::accounts::store::AccountStore::elevate`].
pub(super) async fn elevate(
    store: &PgAccounts,
    user_id: String,
    factor_id: String,
    challenge_id: String,
    session_id: String,
    credential: Option<String>,
) -> Result<Option<(User, Started)>, Error> {
    let refresh = random_token();
    let rows = store
        .query(
            "SELECT * FROM rowgate.account_factor_verify($1, $2, $3, $4, $5, $6)",
            &[
                (&user_id, Type::TEXT),
                (&factor_id, Type::TEXT),
                (&challenge_id, Type::TEXT),
                (&session_id, Type::TEXT),
                (&token_hash(&refresh), Type::TEXT),
                (&credential, Type::TEXT),
            ],
        )
        .await?;
    let now = crate::accounts::store::unix_now();
    Ok(rows.first().map(|r| {
        let started = Started {
            refresh,
            session_id,
            aal: pg_aal(r),
            signed_in_at: pg_started(r, now),
            method: pg_method(r),
            second_factor: pg_second_factor(r),
            client: pg_session_client(r),
        };
        (pg_user(r), started)
    }))
}

/// [`crate::accounts::store::AccountStore::unenroll_factor`].
pub(super) async fn unenroll(
    store: &PgAccounts,
    user_id: String,
    factor_id: String,
    aal2: bool,
) -> Result<Option<bool>, Error> {
    let rows = store
        .query(
            "SELECT rowgate.account_factor_unenroll($1, $2, $3)",
            &[(&user_id, Type::TEXT), (&factor_id, Type::TEXT), (&aal2, Type::BOOL)],
        )
        .await?;
    Ok(match rows[0].get::<_, &str>(0) {
        "ok" => Some(true),
        "needs_aal2" => Some(false),
        _ => None,
    })
}
