//! Passkeys on PostgreSQL: Supabase's `auth.webauthn_credentials` and `auth.webauthn_challenges`,
//! through the `rowgate.passkey_*` functions (passkeys.sql).

use futures_util::future::BoxFuture;
use tokio_postgres::types::Type;

use super::accounts::PgAccounts;
use crate::accounts::passkey_store::{Ceremony, NewPasskey, Passkey, PasskeyAdded, PasskeyStore};
use crate::error::Error;

/// A passkey from `offset` on: the columns of `rowgate.passkey`.
fn pg_passkey(r: &tokio_postgres::Row, offset: usize) -> Passkey {
    Passkey {
        id: r.get(offset),
        user_id: r.get(offset + 1),
        friendly_name: r.get(offset + 2),
        created_at: r.get(offset + 3),
        last_used_at: r.get(offset + 4),
        credential: r.get(offset + 5),
    }
}

impl PasskeyStore for PgAccounts {
    fn begin_ceremony(
        &self,
        id: String,
        kind: Ceremony,
        user_id: Option<String>,
        state: String,
        expires_at: i64,
    ) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            self.query(
                "SELECT rowgate.passkey_begin($1, $2, $3, $4, $5)",
                &[
                    (&id, Type::TEXT),
                    (&kind.name(), Type::TEXT),
                    (&user_id, Type::TEXT),
                    (&state, Type::TEXT),
                    (&expires_at, Type::INT8),
                ],
            )
            .await
            .map(|_| ())
        })
    }

    fn take_ceremony(
        &self,
        id: String,
        kind: Ceremony,
        user_id: Option<String>,
    ) -> BoxFuture<'_, Result<Option<(String, i64)>, Error>> {
        Box::pin(async move {
            let rows = self
                .query(
                    "SELECT * FROM rowgate.passkey_take($1, $2, $3)",
                    &[(&id, Type::TEXT), (&kind.name(), Type::TEXT), (&user_id, Type::TEXT)],
                )
                .await?;
            Ok(rows.first().map(|r| (r.get(0), r.get(1))))
        })
    }

    fn passkeys(&self, user_id: String) -> BoxFuture<'_, Result<Vec<Passkey>, Error>> {
        Box::pin(async move {
            let rows =
                self.query("SELECT * FROM rowgate.passkey_list($1)", &[(&user_id, Type::TEXT)]).await?;
            Ok(rows.iter().map(|r| pg_passkey(r, 0)).collect())
        })
    }

    fn add_passkey(
        &self,
        user_id: String,
        passkey: NewPasskey,
        max: i64,
    ) -> BoxFuture<'_, Result<PasskeyAdded, Error>> {
        Box::pin(async move {
            let rows = self
                .query(
                    "SELECT outcome, (passkey).* FROM rowgate.passkey_add($1, $2, $3, $4, $5, $6)",
                    &[
                        (&user_id, Type::TEXT),
                        (&passkey.id, Type::TEXT),
                        (&passkey.credential_id, Type::TEXT),
                        (&passkey.credential, Type::TEXT),
                        (&passkey.friendly_name, Type::TEXT),
                        (&max, Type::INT8),
                    ],
                )
                .await?;
            let row =
                rows.first().ok_or_else(|| Error::Unavailable("a passkey was added to nothing".into()))?;
            Ok(match row.get::<_, &str>(0) {
                "ok" => PasskeyAdded::Done(pg_passkey(row, 1)),
                "too_many" => PasskeyAdded::TooMany,
                _ => PasskeyAdded::Exists,
            })
        })
    }

    fn passkey_by_credential(&self, credential_id: String) -> BoxFuture<'_, Result<Option<Passkey>, Error>> {
        Box::pin(async move {
            let rows = self
                .query("SELECT * FROM rowgate.passkey_by_credential($1)", &[(&credential_id, Type::TEXT)])
                .await?;
            Ok(rows.first().map(|r| pg_passkey(r, 0)))
        })
    }

    fn passkey_used(&self, id: String, credential: String) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            self.query("SELECT rowgate.passkey_used($1, $2)", &[(&id, Type::TEXT), (&credential, Type::TEXT)])
                .await
                .map(|_| ())
        })
    }

    fn rename_passkey(
        &self,
        user_id: String,
        id: String,
        friendly_name: String,
    ) -> BoxFuture<'_, Result<Option<Passkey>, Error>> {
        Box::pin(async move {
            let rows = self
                .query(
                    "SELECT * FROM rowgate.passkey_rename($1, $2, $3)",
                    &[(&user_id, Type::TEXT), (&id, Type::TEXT), (&friendly_name, Type::TEXT)],
                )
                .await?;
            Ok(rows.first().map(|r| pg_passkey(r, 0)))
        })
    }

    fn delete_passkey(&self, user_id: String, id: String) -> BoxFuture<'_, Result<bool, Error>> {
        Box::pin(async move {
            let rows = self
                .query("SELECT rowgate.passkey_delete($1, $2)", &[(&user_id, Type::TEXT), (&id, Type::TEXT)])
                .await?;
            Ok(rows[0].get(0))
        })
    }
}
