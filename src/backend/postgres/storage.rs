//! PostgreSQL's storage rows: Supabase's `storage.buckets` and `storage.objects`
//! (`storage.sql`, run by `rowgate storage install`). Each operation is one transaction on a
//! pooled connection, as the caller's role with its claims (so the project's row-level security
//! policies decide, as in Supabase), or, for what the server does on its own (a public bucket, a
//! signed URL), through the SECURITY DEFINER functions the install made.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row};

use super::pool::Db;
use crate::storage::error::{from_api, StorageError};
use crate::storage::store::like_escape;
use crate::storage::store::{
    Bucket, BucketChange, BucketDeleted, BucketQuery, ListEntry, ListQuery, NewBucket, ObjectRow, PageQuery,
    Put, PutObject, StorageStore, Who,
};

/// The SQL `rowgate storage install` runs.
const INSTALL_SQL: &str = include_str!("storage.sql");
/// Supabase's `auth.uid()` and its kin, which storage policies use.
const AUTH_HELPERS_SQL: &str = include_str!("auth_helpers.sql");

/// Creates (or updates) the storage schema, and lets `role` (the authenticator) call the
/// server's functions and every role it may become use the tables (under row-level security).
pub async fn install(client: &Client, role: &str) -> Result<(), String> {
    let quoted = format!("\"{}\"", role.replace('"', "\"\""));
    // regrole reads an identifier: quoted, so that the role's case is kept.
    let literal = quoted.replace('\'', "''");
    let grants = format!(
        "GRANT USAGE ON SCHEMA storage TO {quoted};
         GRANT EXECUTE ON FUNCTION storage.rowgate_bucket(text), storage.rowgate_object(text, text),
           storage.rowgate_versions_in_use(text[]),
           storage.rowgate_put(uuid, text, text, text, jsonb, jsonb, text, boolean) TO {quoted};
         DO $grants$ DECLARE r record; BEGIN
           FOR r IN SELECT m.roleid::regrole::text AS name FROM pg_auth_members m
                    WHERE m.member = '{literal}'::regrole LOOP
             EXECUTE format('GRANT USAGE ON SCHEMA storage TO %s', r.name);
             EXECUTE format('GRANT ALL ON storage.buckets, storage.objects TO %s', r.name);
           END LOOP;
         END $grants$;"
    );
    let guard = super::refuse_functions_owned_elsewhere(
        "storage",
        &[
            "rowgate_bucket",
            "rowgate_object",
            "rowgate_versions_in_use",
            "rowgate_put",
            "rowgate_touch_updated_at",
        ],
    );
    client
        .batch_execute(&format!(
            "BEGIN; SELECT pg_advisory_xact_lock(7317004); {guard} {AUTH_HELPERS_SQL} {INSTALL_SQL} {grants} COMMIT;"
        ))
        .await
        .map_err(super::apikey::message)
}

/// The storage rows of a server's database.
pub struct PgStorage {
    db: Db,
}

/// A timestamp as Supabase's server writes one: `2021-02-17T04:43:32.770Z`.
const TS: &str = r#"'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'"#;

/// The columns of a bucket, in [`bucket`]'s order.
fn bucket_columns() -> String {
    format!(
        "id, name, owner::text, coalesce(public, false), file_size_limit, allowed_mime_types, \
         to_char(created_at AT TIME ZONE 'UTC', {TS}), to_char(updated_at AT TIME ZONE 'UTC', {TS})"
    )
}

fn bucket(r: &Row) -> Bucket {
    Bucket {
        id: r.get(0),
        name: r.get(1),
        owner: r.get(2),
        public: r.get(3),
        file_size_limit: r.get(4),
        allowed_mime_types: r.get(5),
        created_at: r.get::<_, Option<String>>(6).unwrap_or_default(),
        updated_at: r.get::<_, Option<String>>(7).unwrap_or_default(),
    }
}

/// The columns of an object, in [`object`]'s order, of the row alias `o`.
fn object_columns() -> String {
    format!(
        "o.id::text, o.bucket_id, o.name, o.owner::text, o.owner_id, o.version, o.metadata::text, \
         o.user_metadata::text, to_char(o.created_at AT TIME ZONE 'UTC', {TS}), \
         to_char(o.updated_at AT TIME ZONE 'UTC', {TS}), to_char(o.last_accessed_at AT TIME ZONE 'UTC', {TS})"
    )
}

fn object(r: &Row, first: usize) -> ObjectRow {
    let ts = |i: usize| r.get::<_, Option<String>>(first + i).unwrap_or_default();
    ObjectRow {
        id: r.get(first),
        bucket_id: r.get::<_, Option<String>>(first + 1).unwrap_or_default(),
        name: r.get::<_, Option<String>>(first + 2).unwrap_or_default(),
        owner: r.get(first + 3),
        owner_id: r.get(first + 4),
        version: r.get(first + 5),
        metadata: r.get(first + 6),
        user_metadata: r.get(first + 7),
        created_at: ts(8),
        updated_at: ts(9),
        last_accessed_at: ts(10),
    }
}

/// Supabase's `owner`: the `sub` in parameter `param` when it is a UUID, else null.
fn owner_uuid(param: &str) -> String {
    format!(
        "CASE WHEN {param} ~* '^[0-9a-f]{{8}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{12}}$' \
         THEN {param}::uuid END"
    )
}

/// A database error as a storage error.
fn failed(e: tokio_postgres::Error) -> StorageError {
    from_api(&super::db_error(e, false))
}

impl PgStorage {
    /// The storage rows of `db`'s database.
    pub fn new(db: Db) -> PgStorage {
        PgStorage { db }
    }

    /// Runs `work` in a transaction as `who` (its role, `request.jwt.claims` and Supabase's
    /// `request.jwt.claim.sub` / `.role`), or as the authenticator itself (`None`).
    async fn transaction<T>(
        &self,
        who: Option<&Who>,
        work: impl for<'c> FnOnce(&'c Client) -> BoxFuture<'c, Result<T, StorageError>>,
    ) -> Result<T, StorageError> {
        self.transaction_ending(who, true, work).await
    }

    /// [`PgStorage::transaction`], committed if `keep` and `work` succeeded, else rolled back.
    async fn transaction_ending<T>(
        &self,
        who: Option<&Who>,
        keep: bool,
        work: impl for<'c> FnOnce(&'c Client) -> BoxFuture<'c, Result<T, StorageError>>,
    ) -> Result<T, StorageError> {
        let mut conn = self.db.get_as_server().await.map_err(|e| from_api(&e))?;
        let client = conn.client.clone();
        conn.in_transaction = true;
        client.batch_execute("BEGIN").await.map_err(failed)?;
        // Behind a pooler, what the connection's startup options would otherwise set.
        conn.set_startup_locally().await.map_err(failed)?;
        let (role, claims, sub) = match who {
            Some(w) => (&*w.role, &*w.claims, w.sub.as_deref().unwrap_or("")),
            None => ("none", "", ""),
        };
        client
            .execute(
                "SELECT set_config('role', $1, true), set_config('request.jwt.claims', $2, true), \
                 set_config('request.jwt.claim.sub', $3, true), set_config('request.jwt.claim.role', $4, true)",
                &[&role, &claims, &sub, &who.map_or("", |w| &*w.role)],
            )
            .await
            .map_err(failed)?;
        let result = work(&client).await;
        let end = if result.is_ok() && keep { "COMMIT" } else { "ROLLBACK" };
        client.batch_execute(end).await.map_err(failed)?;
        conn.in_transaction = false;
        result
    }
}

/// Runs one statement, its rows.
async fn rows(client: &Client, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, StorageError> {
    client.query(sql, params).await.map_err(failed)
}

/// Whether an error is the unique violation of `bucketid_objname` or of a bucket's id or name.
fn is_unique_violation(e: &StorageError) -> bool {
    e.code == "ResourceAlreadyExists"
}

impl StorageStore for PgStorage {
    fn list_buckets(&self, who: Who, query: BucketQuery) -> BoxFuture<'_, Result<Vec<Bucket>, StorageError>> {
        Box::pin(async move {
            let mut sql = format!("SELECT {} FROM storage.buckets", bucket_columns());
            let search = query.search.map(|s| format!("%{}%", like_escape(&s)));
            if search.is_some() {
                sql.push_str(" WHERE name ILIKE $1");
            } else {
                sql.push_str(" WHERE $1::text IS NULL");
            }
            sql.push_str(&format!(
                " ORDER BY {} {} LIMIT $2 OFFSET $3",
                query.sort_column.unwrap_or("name"),
                if query.descending { "DESC" } else { "ASC" }
            ));
            let (limit, offset) = (query.limit, query.offset.unwrap_or(0));
            self.transaction(Some(&who), |c| {
                Box::pin(async move {
                    let found = rows(c, &sql, &[&search, &limit, &offset]).await?;
                    Ok(found.iter().map(bucket).collect())
                })
            })
            .await
        })
    }

    fn bucket(
        &self,
        who: Option<Who>,
        id: String,
    ) -> BoxFuture<'_, Result<Option<Arc<Bucket>>, StorageError>> {
        Box::pin(async move {
            let sql = match who {
                Some(_) => format!("SELECT {} FROM storage.buckets WHERE id = $1", bucket_columns()),
                None => format!("SELECT {} FROM storage.rowgate_bucket($1)", bucket_columns()),
            };
            self.transaction(who.as_ref(), |c| {
                Box::pin(async move { Ok(rows(c, &sql, &[&id]).await?.first().map(|r| Arc::new(bucket(r)))) })
            })
            .await
        })
    }

    fn create_bucket(&self, who: Who, b: NewBucket) -> BoxFuture<'_, Result<(), StorageError>> {
        Box::pin(async move {
            let owner_id = who.sub.clone();
            let result = self
                .transaction(Some(&who), |c| {
                    Box::pin(async move {
                        let sql = format!(
                            "INSERT INTO storage.buckets (id, name, owner, owner_id, public, file_size_limit, \
                             allowed_mime_types) VALUES ($1, $2, {}, $3, $4, $5, $6)",
                            owner_uuid("$3")
                        );
                        let params: [&(dyn ToSql + Sync); 6] =
                            [&b.id, &b.name, &owner_id, &b.public, &b.file_size_limit, &b.allowed_mime_types];
                        rows(c, &sql, &params).await.map(drop)
                    })
                })
                .await;
            match result {
                Err(e) if is_unique_violation(&e) => Err(StorageError::bucket_exists()),
                other => other,
            }
        })
    }

    fn update_bucket(
        &self,
        who: Who,
        id: String,
        change: BucketChange,
    ) -> BoxFuture<'_, Result<bool, StorageError>> {
        Box::pin(async move {
            self.transaction(Some(&who), |c| {
                Box::pin(async move {
                    let sql = "UPDATE storage.buckets SET public = coalesce($2, public), \
                               file_size_limit = CASE WHEN $3 THEN $4 ELSE file_size_limit END, \
                               allowed_mime_types = CASE WHEN $5 THEN $6 ELSE allowed_mime_types END, \
                               updated_at = now() WHERE id = $1";
                    let (set_limit, limit) =
                        (change.file_size_limit.is_some(), change.file_size_limit.flatten());
                    let (set_types, types) =
                        (change.allowed_mime_types.is_some(), change.allowed_mime_types.flatten());
                    let params: [&(dyn ToSql + Sync); 6] =
                        [&id, &change.public, &set_limit, &limit, &set_types, &types];
                    Ok(c.execute(sql, &params).await.map_err(failed)? > 0)
                })
            })
            .await
        })
    }

    fn delete_bucket(&self, who: Who, id: String) -> BoxFuture<'_, Result<BucketDeleted, StorageError>> {
        Box::pin(async move {
            self.transaction(Some(&who), |c| {
                Box::pin(async move {
                    // Objects refer to their bucket: the foreign key refuses the deletion of one
                    // that holds any, whether or not the caller may see them.
                    match c.execute("DELETE FROM storage.buckets WHERE id = $1", &[&id]).await {
                        Ok(0) => Ok(BucketDeleted::NotFound),
                        Ok(_) => Ok(BucketDeleted::Deleted),
                        Err(e)
                            if e.code() == Some(&tokio_postgres::error::SqlState::FOREIGN_KEY_VIOLATION) =>
                        {
                            Err(StorageError::bucket_not_empty())
                        }
                        Err(e) => Err(failed(e)),
                    }
                })
            })
            .await
        })
    }

    fn object(
        &self,
        who: Option<Who>,
        bucket: String,
        name: String,
    ) -> BoxFuture<'_, Result<Option<Arc<ObjectRow>>, StorageError>> {
        Box::pin(async move {
            let sql = match who {
                Some(_) => {
                    format!(
                        "SELECT {} FROM storage.objects o WHERE o.bucket_id = $1 AND o.name = $2",
                        object_columns()
                    )
                }
                None => format!("SELECT {} FROM storage.rowgate_object($1, $2) o", object_columns()),
            };
            self.transaction(who.as_ref(), |c| {
                Box::pin(async move {
                    Ok(rows(c, &sql, &[&bucket, &name]).await?.first().map(|r| Arc::new(object(r, 0))))
                })
            })
            .await
        })
    }

    fn put_object(&self, who: Option<Who>, put: PutObject) -> BoxFuture<'_, Result<Put, StorageError>> {
        Box::pin(async move {
            let (upsert, server) = (put.upsert, who.is_none());
            let result = self
                .transaction_ending(who.as_ref(), !put.trial, |c| {
                    Box::pin(async move {
                        // The row's columns; the server's own write adds whether to upsert.
                        let params: [&(dyn ToSql + Sync); 8] = [
                            &put.id,
                            &put.bucket_id,
                            &put.name,
                            &put.owner_id,
                            &put.metadata,
                            &put.user_metadata,
                            &put.version,
                            &put.upsert,
                        ];
                        if server {
                            let sql = "SELECT id, replaced FROM storage.rowgate_put($1::text::uuid, $2, $3, $4, \
                                       $5::text::jsonb, $6::text::jsonb, $7, $8)";
                            let r = rows(c, sql, &params).await?;
                            let r = r.first().ok_or_else(|| StorageError::internal("rowgate_put returned nothing"))?;
                            return Ok(Put { id: r.get(0), replaced: r.get(1) });
                        }
                        // One writer of a name at a time: the replaced version read below is the
                        // one this write replaces.
                        rows(
                            c,
                            "SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2, 7317003))",
                            &[&put.bucket_id, &put.name],
                        )
                        .await?;
                        let owner = owner_uuid("$4");
                        let insert = format!(
                            "INSERT INTO storage.objects AS o (id, bucket_id, name, owner, owner_id, metadata, \
                             user_metadata, version) VALUES ($1::text::uuid, $2, $3, {owner}, $4, $5::text::jsonb, \
                             $6::text::jsonb, $7)"
                        );
                        let params = &params[..7];
                        if !put.upsert {
                            // INSERT alone, as Supabase's: a policy granting only INSERT suffices.
                            rows(c, &insert, params).await?;
                            return Ok(Put { id: put.id.clone(), replaced: None });
                        }
                        let old = rows(
                            c,
                            "SELECT version FROM storage.objects WHERE bucket_id = $1 AND name = $2",
                            &[&put.bucket_id, &put.name],
                        )
                        .await?;
                        let replaced = old.first().and_then(|r| r.get::<_, Option<String>>(0));
                        let upsert = format!(
                            "{insert} ON CONFLICT (bucket_id, name) DO UPDATE SET metadata = EXCLUDED.metadata, \
                             user_metadata = EXCLUDED.user_metadata, version = EXCLUDED.version, \
                             owner = EXCLUDED.owner, owner_id = EXCLUDED.owner_id RETURNING o.id::text"
                        );
                        let r = rows(c, &upsert, params).await?;
                        let id = r.first().map_or(put.id.clone(), |r| r.get(0));
                        Ok(Put { id, replaced })
                    })
                })
                .await;
            match result {
                Err(e) if is_unique_violation(&e) && !upsert => Err(StorageError::key_exists()),
                other => other,
            }
        })
    }

    fn delete_objects(
        &self,
        who: Who,
        bucket: String,
        names: Vec<String>,
    ) -> BoxFuture<'_, Result<Vec<ObjectRow>, StorageError>> {
        Box::pin(async move {
            let sql = format!(
                "DELETE FROM storage.objects o WHERE o.bucket_id = $1 AND o.name = ANY ($2) RETURNING {}",
                object_columns()
            );
            self.transaction(Some(&who), |c| {
                Box::pin(async move {
                    Ok(rows(c, &sql, &[&bucket, &names]).await?.iter().map(|r| object(r, 0)).collect())
                })
            })
            .await
        })
    }

    fn empty_bucket(&self, who: Who, bucket: String) -> BoxFuture<'_, Result<Vec<String>, StorageError>> {
        Box::pin(async move {
            self.transaction(Some(&who), |c| {
                Box::pin(async move {
                    let deleted = rows(
                        c,
                        "DELETE FROM storage.objects WHERE bucket_id = $1 RETURNING version",
                        &[&bucket],
                    )
                    .await?;
                    Ok(deleted.iter().filter_map(|r| r.get::<_, Option<String>>(0)).collect())
                })
            })
            .await
        })
    }

    fn move_object(
        &self,
        who: Who,
        from: (String, String),
        to: (String, String),
    ) -> BoxFuture<'_, Result<bool, StorageError>> {
        Box::pin(async move {
            let sub = who.sub.clone();
            self.transaction(Some(&who), |c| {
                Box::pin(async move {
                    let sql = format!(
                        "UPDATE storage.objects SET bucket_id = $3, name = $4, owner = {}, owner_id = $5 \
                         WHERE bucket_id = $1 AND name = $2",
                        owner_uuid("$5")
                    );
                    let params: [&(dyn ToSql + Sync); 5] = [&from.0, &from.1, &to.0, &to.1, &sub];
                    Ok(c.execute(&sql, &params).await.map_err(failed)? > 0)
                })
            })
            .await
        })
    }

    fn list(
        &self,
        who: Who,
        bucket: String,
        query: ListQuery,
    ) -> BoxFuture<'_, Result<Vec<ListEntry>, StorageError>> {
        Box::pin(async move {
            // The entries directly under the prefix: a folder for each first segment of a longer
            // name (no id, no metadata), an object for each name without one.
            let rest = "substr(o.name, char_length($2) + 1)";
            let order = match (query.column, query.descending) {
                ("name", false) => "lower(e.entry) COLLATE \"C\" ASC".to_owned(),
                ("name", true) => "lower(e.entry) COLLATE \"C\" DESC".to_owned(),
                (column, descending) => format!(
                    "(e.id IS NULL) DESC, CASE WHEN e.id IS NULL THEN e.entry END, e.{column} {}",
                    if descending { "DESC" } else { "ASC" }
                ),
            };
            let sql = format!(
                "WITH matched AS (SELECT o.*, {rest} AS rest FROM storage.objects o WHERE o.bucket_id = $1 \
                   AND lower(o.name) LIKE lower($3) ESCAPE '\\'), \
                 entries AS ( \
                   SELECT DISTINCT split_part(m.rest, '/', 1) AS entry, NULL::uuid AS id, NULL::timestamptz AS updated_at, \
                     NULL::timestamptz AS created_at, NULL::timestamptz AS last_accessed_at, NULL::uuid AS oid \
                     FROM matched m WHERE strpos(m.rest, '/') > 0 \
                   UNION ALL \
                   SELECT m.rest, m.id, m.updated_at, m.created_at, m.last_accessed_at, m.id FROM matched m \
                     WHERE strpos(m.rest, '/') = 0) \
                 SELECT e.entry, {} FROM entries e LEFT JOIN storage.objects o ON o.id = e.oid \
                 ORDER BY {order} LIMIT $4 OFFSET $5",
                object_columns()
            );
            let pattern = format!("{}%", like_escape(&format!("{}{}", query.prefix, query.search)));
            self.transaction(Some(&who), |c| {
                Box::pin(async move {
                    let found =
                        rows(c, &sql, &[&bucket, &query.prefix, &pattern, &query.limit, &query.offset])
                            .await?;
                    Ok(found
                        .iter()
                        .map(|r| ListEntry {
                            name: r.get(0),
                            object: r.get::<_, Option<String>>(1).map(|_| object(r, 1)),
                        })
                        .collect())
                })
            })
            .await
        })
    }

    fn page(
        &self,
        who: Who,
        bucket: String,
        query: PageQuery,
    ) -> BoxFuture<'_, Result<Vec<ObjectRow>, StorageError>> {
        Box::pin(async move {
            let (op, order) = if query.descending { ("<", "DESC") } else { (">", "ASC") };
            // Names in byte order (`COLLATE "C"`); timestamps to the millisecond, as cursors carry them.
            let stamp = |c: &str| format!("date_trunc('milliseconds', o.{c})");
            let keyset = match (query.column, &query.after_value) {
                (Some(c), Some(_)) => format!(
                    "AND ({s} {op} $3::text::timestamptz OR ({s} = $3::text::timestamptz AND o.name COLLATE \"C\" {op} $4::text))",
                    s = stamp(c)
                ),
                _ => format!("AND ($4::text IS NULL OR o.name COLLATE \"C\" {op} $4)"),
            };
            let by = query.column.map(|c| format!("{} {order}, ", stamp(c))).unwrap_or_default();
            let sql = format!(
                "SELECT {} FROM storage.objects o WHERE o.bucket_id = $1 AND starts_with(o.name, $2) \
                 AND ($3::text IS NULL OR true) {keyset} AND ($5::text IS NULL OR o.name COLLATE \"C\" >= $5) \
                 ORDER BY {by}o.name COLLATE \"C\" {order} LIMIT $6",
                object_columns()
            );
            let (prefix, after, value, from, limit) =
                (query.prefix, query.after, query.after_value, query.from, query.limit.max(0));
            self.transaction(Some(&who), |c| {
                Box::pin(async move {
                    let found = rows(c, &sql, &[&bucket, &prefix, &value, &after, &from, &limit]).await?;
                    Ok(found.iter().map(|r| object(r, 0)).collect())
                })
            })
            .await
        })
    }

    fn versions_in_use(&self, versions: Vec<String>) -> BoxFuture<'_, Result<Vec<String>, StorageError>> {
        Box::pin(async move {
            self.transaction(None, |c| {
                Box::pin(async move {
                    let found = rows(c, "SELECT storage.rowgate_versions_in_use($1)", &[&versions]).await?;
                    Ok(found.iter().map(|r| r.get(0)).collect())
                })
            })
            .await
        })
    }

    fn visible(
        &self,
        who: Who,
        bucket: String,
        names: Vec<String>,
    ) -> BoxFuture<'_, Result<Vec<String>, StorageError>> {
        Box::pin(async move {
            self.transaction(Some(&who), |c| {
                Box::pin(async move {
                    let found = rows(
                        c,
                        "SELECT name FROM storage.objects WHERE bucket_id = $1 AND name = ANY ($2)",
                        &[&bucket, &names],
                    )
                    .await?;
                    Ok(found.iter().map(|r| r.get(0)).collect())
                })
            })
            .await
        })
    }
}
