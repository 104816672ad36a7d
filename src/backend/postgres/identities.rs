//! Sign-ins through OpenID providers on PostgreSQL: whose an identity is, decided by
//! `rowgate.account_link_identity` (accounts.sql) in one transaction.

use tokio_postgres::types::Type;

use super::accounts::{pg_user, PgAccounts, ACCOUNT_COLUMNS};
use crate::accounts::store::{Attached, ExternalIdentity, Linked, NewUser, User};
use crate::error::Error;

/// [`crate::accounts::store::AccountStore::link_identity`].
pub(super) async fn link(
    store: &PgAccounts,
    identity: ExternalIdentity,
    new: NewUser,
    create: bool,
) -> Result<Linked, Error> {
    let rows = store
        .query(
            "SELECT (account).*, linked FROM rowgate.account_link_identity($1, $2, $3, $4, $5::text::jsonb, \
             $6, $7::text::jsonb, $8::text::jsonb, $9, $10)",
            &[
                (&identity.provider, Type::TEXT),
                (&identity.subject, Type::TEXT),
                (&identity.email, Type::TEXT),
                (&identity.email_verified, Type::BOOL),
                (&identity.data, Type::TEXT),
                (&new.id, Type::TEXT),
                (&new.user_metadata, Type::TEXT),
                (&new.app_metadata, Type::TEXT),
                (&new.confirmed, Type::BOOL),
                (&create, Type::BOOL),
            ],
        )
        .await?;
    let row =
        rows.first().ok_or_else(|| Error::Unavailable("an identity was linked to no account".into()))?;
    let linked: String = row.get(ACCOUNT_COLUMNS);
    Ok(match linked.as_str() {
        "existing" => Linked::Existing(Box::new(pg_user(row))),
        "added" => Linked::Added(Box::new(pg_user(row))),
        "created" => Linked::Created(Box::new(pg_user(row))),
        _ => Linked::WouldCreate,
    })
}

/// [`crate::accounts::store::AccountStore::attach_identity`].
pub(super) async fn attach(
    store: &PgAccounts,
    user_id: String,
    identity: ExternalIdentity,
) -> Result<Attached, Error> {
    let rows = store
        .query(
            "SELECT (account).*, attached FROM rowgate.account_attach_identity($1, $2, $3, $4, $5, $6::text::jsonb)",
            &[
                (&user_id, Type::TEXT),
                (&identity.provider, Type::TEXT),
                (&identity.subject, Type::TEXT),
                (&identity.email, Type::TEXT),
                (&identity.email_verified, Type::BOOL),
                (&identity.data, Type::TEXT),
            ],
        )
        .await?;
    let row =
        rows.first().ok_or_else(|| Error::Unavailable("an identity was attached to no account".into()))?;
    Ok(match row.get::<_, String>(ACCOUNT_COLUMNS).as_str() {
        "done" => Attached::Done(Box::new(pg_user(row))),
        "theirs" => Attached::AlreadyTheirs,
        "others" => Attached::Others,
        _ => Attached::NoUser,
    })
}

/// [`crate::accounts::store::AccountStore::detach_identity`].
pub(super) async fn detach(
    store: &PgAccounts,
    user_id: String,
    identity_id: String,
) -> Result<Option<User>, Error> {
    let rows = store
        .query(
            "SELECT * FROM rowgate.account_detach_identity($1, $2)",
            &[(&user_id, Type::TEXT), (&identity_id, Type::TEXT)],
        )
        .await?;
    Ok(rows.first().map(pg_user))
}
