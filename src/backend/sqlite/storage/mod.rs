//! SQLite's storage rows: tables `_rowgate_storage_buckets` and `_rowgate_storage_objects` in
//! the SQLite file (hidden from the API by their prefix), with Supabase's columns and a
//! generated `folder` (the first segment of an object's name). What a caller may do is what the
//! access rules file says for `storage.buckets` and `storage.objects`, as PostgreSQL's
//! row-level security would: reads see the rows the `select` rule keeps, an insert must satisfy
//! the `insert` rule, an update touches the rows the `update` rule keeps and must still satisfy
//! it, a delete removes the rows the `delete` rule keeps. What the server does on its own (a
//! public bucket, a signed URL) reads and writes past the rules.

mod put;
mod reads;
mod tables;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use rusqlite::{Connection, OptionalExtension};

use self::tables::*;
use super::db::{Room, SqliteDb};
use super::rules::{Access, Operation, Rules};
use crate::auth::Principal;
use crate::config::Config;
use crate::error::Error;
use crate::plan::Condition;
use crate::schema::SchemaCache;
use crate::storage::error::StorageError;
use crate::storage::store::like_escape;
use crate::storage::store::{
    Bucket, BucketChange, BucketDeleted, BucketQuery, ListEntry, ListQuery, NewBucket, ObjectRow, PageQuery,
    Put, PutObject, StorageStore, Who,
};

/// Storage's rows in an SQLite file, under the access rules.
pub struct SqliteStorage {
    db: Arc<SqliteDb>,
    rules: Arc<arc_swap::ArcSwap<Rules>>,
    config: Arc<Config>,
    /// The two tables as the rules see them: schema `storage`, `buckets` and `objects`.
    schema: SchemaCache,
    /// What reads as the server found, until the next write.
    server_reads: Arc<reads::ServerReads>,
}

/// A rule as SQL: `(condition)` with its parameters, or `1` (every row).
impl SqliteStorage {
    /// The store in `db`, its tables created first.
    pub fn open(
        db: Arc<SqliteDb>,
        rules: Arc<arc_swap::ArcSwap<Rules>>,
        config: Arc<Config>,
    ) -> Result<SqliteStorage, String> {
        db.setup(SCHEMA).map_err(|e| format!("creating the storage tables: {e}"))?;
        Ok(SqliteStorage {
            db,
            rules,
            config,
            schema: rules_schema(),
            server_reads: Arc::new(reads::ServerReads::new()),
        })
    }

    /// What `who` may touch of `table` (`buckets` or `objects`) by `op`.
    fn rule(&self, who: &Who, table: &str, op: Operation) -> Result<Rule, StorageError> {
        let principal =
            Principal { role: who.role.clone(), claims: who.claims.clone(), anonymous: who.anonymous };
        let key = format!("storage.{table}");
        let filters = match self.rules.load().access(&principal, &key, op) {
            Access::Denied => {
                return Err(StorageError::access_denied(format!("permission denied for table {table}")))
            }
            Access::All => return Ok(Rule::all()),
            Access::Rows(filters) => filters,
        };
        let relation = self.schema.relation("storage", table).expect("the storage tables");
        let mut any = Vec::new();
        for query in &filters {
            let mut all =
                crate::plan::row_filter(relation, &self.schema, query, &self.config).map_err(api_failed)?;
            if super::rules::bind_claims(&mut all, &who.claims) {
                any.push(Condition::Logic {
                    negated: false,
                    op: rowgate_request::LogicOp::And,
                    children: all,
                });
            }
        }
        let c = Condition::Logic { negated: false, op: rowgate_request::LogicOp::Or, children: any };
        let (sql, values) = super::sql::render_condition(&c).map_err(api_failed)?;
        Ok(Rule { sql, values })
    }

    /// A read on a reader connection.
    async fn read<T: Send + 'static>(
        &self,
        f: impl Fn(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StorageError> {
        self.db.with_reader(f).await.map_err(api_failed)
    }

    /// A write in a savepoint of the writer's transaction: all of it, or nothing.
    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StorageError> + Send + 'static,
    ) -> Result<T, StorageError> {
        self.write_ending((true, Room::Needed), f).await
    }

    /// [`SqliteStorage::write`] of a delete, which runs on a full disk too.
    async fn delete<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StorageError> + Send + 'static,
    ) -> Result<T, StorageError> {
        self.write_ending((true, Room::Freed), f).await
    }

    /// [`SqliteStorage::write`], kept if `keep` and `f` succeeded, else rolled back; `room` as
    /// [`SqliteDb::with_writer_as`] takes it.
    async fn write_ending<T: Send + 'static>(
        &self,
        (keep, room): (bool, Room),
        f: impl FnOnce(&Connection) -> Result<T, StorageError> + Send + 'static,
    ) -> Result<T, StorageError> {
        let (db, reads) = (Arc::clone(&self.db), Arc::clone(&self.server_reads));
        // On a task of its own, so that the cache is emptied after the commit even when the
        // request that asked for the write is gone.
        let write = tokio::spawn(async move {
            let result = db
                .with_writer_as(room, move |c| {
                    let inner = (|| {
                        c.execute_batch("SAVEPOINT rowgate_storage").map_err(failed)?;
                        let result = f(c);
                        if result.is_err() || !keep {
                            c.execute_batch("ROLLBACK TO rowgate_storage").map_err(failed)?;
                        }
                        c.execute_batch("RELEASE rowgate_storage").map_err(failed)?;
                        result
                    })();
                    // Told as the writer hears of it, so that the disk's reserve is given back.
                    match inner {
                        Err(e) if e.is_disk_full() => Err(Error::disk_full("the SQLite file", &e.message)),
                        inner => Ok(inner),
                    }
                })
                .await;
            reads.written();
            result
        });
        let result = write.await.map_err(|_| StorageError::internal("A storage write failed"))?;
        result.map_err(api_failed)?
    }
}

impl StorageStore for SqliteStorage {
    fn list_buckets(&self, who: Who, query: BucketQuery) -> BoxFuture<'_, Result<Vec<Bucket>, StorageError>> {
        Box::pin(async move {
            let rule = self.rule(&who, "buckets", Operation::Select)?;
            let mut q = Query::new(format!("SELECT {BUCKET_COLUMNS} FROM {BUCKETS} WHERE 1"));
            q.rule(&rule);
            if let Some(search) = &query.search {
                q.bind(" AND name LIKE '%' || ", like_escape(search)).text(" || '%' ESCAPE '\\'");
            }
            let order = if query.descending { "DESC" } else { "ASC" };
            q.text(&format!(" ORDER BY {} {order}", query.sort_column.unwrap_or("name")));
            q.text(&format!(" LIMIT {} OFFSET {}", query.limit.unwrap_or(-1), query.offset.unwrap_or(0)));
            self.read(move |c| c.prepare_cached(&q.sql)?.query_map(q.params(), bucket)?.collect()).await
        })
    }

    fn bucket(
        &self,
        who: Option<Who>,
        id: String,
    ) -> BoxFuture<'_, Result<Option<Arc<Bucket>>, StorageError>> {
        Box::pin(async move {
            let ticket = self.server_reads.ticket();
            let rule = match &who {
                Some(w) => self.rule(w, "buckets", Operation::Select)?,
                None => match self.server_reads.bucket(&id) {
                    Some(kept) => return Ok(kept),
                    None => Rule::all(),
                },
            };
            let mut q = Query::new(format!("SELECT {BUCKET_COLUMNS} FROM {BUCKETS} WHERE 1"));
            q.bind(" AND id = ", id.clone()).rule(&rule);
            let found = self
                .read(move |c| c.prepare_cached(&q.sql)?.query_row(q.params(), bucket).optional())
                .await?
                .map(Arc::new);
            if who.is_none() {
                self.server_reads.keep_bucket(ticket, id, found.clone());
            }
            Ok(found)
        })
    }

    fn create_bucket(&self, who: Who, b: NewBucket) -> BoxFuture<'_, Result<(), StorageError>> {
        Box::pin(async move {
            let rule = self.rule(&who, "buckets", Operation::Insert)?;
            let types = b.allowed_mime_types.map(|t| serde_json::to_string(&t).unwrap_or_default());
            self.write(move |c| {
                let inserted = c.execute(
                    &format!(
                        "INSERT INTO {BUCKETS} (id, name, owner, owner_id, public, file_size_limit, allowed_mime_types) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
                    ),
                    rusqlite::params![b.id, b.name, owner_uuid(who.sub.as_deref()), who.sub, b.public, b.file_size_limit, types],
                );
                match inserted {
                    Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation) => {
                        return Err(StorageError::bucket_exists())
                    }
                    other => other.map_err(failed)?,
                };
                match holds(c, BUCKETS, c.last_insert_rowid(), &rule)? {
                    true => Ok(()),
                    false => Err(refused()),
                }
            })
            .await
        })
    }

    fn update_bucket(
        &self,
        who: Who,
        id: String,
        change: BucketChange,
    ) -> BoxFuture<'_, Result<bool, StorageError>> {
        Box::pin(async move {
            let rule = self.rule(&who, "buckets", Operation::Update)?;
            self.write(move |c| {
                let mut q = Query::new(format!("SELECT rowid FROM {BUCKETS} WHERE 1"));
                q.bind(" AND id = ", id).rule(&rule);
                let Some(rowid) =
                    c.query_row(&q.sql, q.params(), |r| r.get::<_, i64>(0)).optional().map_err(failed)?
                else {
                    return Ok(false);
                };
                if let Some(public) = change.public {
                    c.execute(
                        &format!("UPDATE {BUCKETS} SET public = ?2 WHERE rowid = ?1"),
                        rusqlite::params![rowid, public],
                    )
                    .map_err(failed)?;
                }
                if let Some(limit) = change.file_size_limit {
                    c.execute(
                        &format!("UPDATE {BUCKETS} SET file_size_limit = ?2 WHERE rowid = ?1"),
                        rusqlite::params![rowid, limit],
                    )
                    .map_err(failed)?;
                }
                if let Some(types) = change.allowed_mime_types {
                    let types = types.map(|t| serde_json::to_string(&t).unwrap_or_default());
                    c.execute(
                        &format!("UPDATE {BUCKETS} SET allowed_mime_types = ?2 WHERE rowid = ?1"),
                        rusqlite::params![rowid, types],
                    )
                    .map_err(failed)?;
                }
                c.execute(&format!("UPDATE {BUCKETS} SET updated_at = {NOW} WHERE rowid = ?1"), [rowid])
                    .map_err(failed)?;
                match holds(c, BUCKETS, rowid, &rule)? {
                    true => Ok(true),
                    false => Err(refused()),
                }
            })
            .await
        })
    }

    fn delete_bucket(&self, who: Who, id: String) -> BoxFuture<'_, Result<BucketDeleted, StorageError>> {
        Box::pin(async move {
            let rule = self.rule(&who, "buckets", Operation::Delete)?;
            self.delete(move |c| {
                let used: bool = c
                    .query_row(
                        &format!("SELECT EXISTS (SELECT 1 FROM {OBJECTS} WHERE bucket_id = ?1)"),
                        [&id],
                        |r| r.get(0),
                    )
                    .map_err(failed)?;
                if used {
                    // Objects refer to their bucket, whether or not the caller may see them.
                    let mut q = Query::new(format!("SELECT EXISTS (SELECT 1 FROM {BUCKETS} WHERE 1"));
                    q.bind(" AND id = ", id).rule(&rule).text(")");
                    let deletable: bool = c.query_row(&q.sql, q.params(), |r| r.get(0)).map_err(failed)?;
                    return Ok(if deletable { BucketDeleted::NotEmpty } else { BucketDeleted::NotFound });
                }
                let mut q = Query::new(format!("DELETE FROM {BUCKETS} WHERE 1"));
                q.bind(" AND id = ", id).rule(&rule);
                match c.execute(&q.sql, q.params()).map_err(failed)? {
                    0 => Ok(BucketDeleted::NotFound),
                    _ => Ok(BucketDeleted::Deleted),
                }
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
            let ticket = self.server_reads.ticket();
            let rule = match &who {
                Some(w) => self.rule(w, "objects", Operation::Select)?,
                None => match self.server_reads.object(&bucket, &name) {
                    Some(kept) => return Ok(kept),
                    None => Rule::all(),
                },
            };
            let mut q = Query::new(format!("SELECT {OBJECT_COLUMNS} FROM {OBJECTS} o WHERE 1"));
            q.bind(" AND o.bucket_id = ", bucket.clone()).bind(" AND o.name = ", name.clone()).rule(&rule);
            let found = self
                .read(move |c| c.prepare_cached(&q.sql)?.query_row(q.params(), |r| object(r, 0)).optional())
                .await?
                .map(Arc::new);
            if who.is_none() {
                self.server_reads.keep_object(ticket, bucket, name, found.clone());
            }
            Ok(found)
        })
    }

    fn put_object(&self, who: Option<Who>, put: PutObject) -> BoxFuture<'_, Result<Put, StorageError>> {
        Box::pin(async move {
            let (insert_rule, update_rule) = match &who {
                Some(w) => (
                    Some(self.rule(w, "objects", Operation::Insert)),
                    Some(self.rule(w, "objects", Operation::Update)),
                ),
                None => (None, None),
            };
            self.write_ending((!put.trial, Room::Needed), move |c| {
                put::put_row(c, put, insert_rule, update_rule)
            })
            .await
        })
    }

    fn delete_objects(
        &self,
        who: Who,
        bucket: String,
        names: Vec<String>,
    ) -> BoxFuture<'_, Result<Vec<ObjectRow>, StorageError>> {
        Box::pin(async move {
            let rule = self.rule(&who, "objects", Operation::Delete)?;
            let names = serde_json::to_string(&names).unwrap_or_default();
            self.delete(move |c| {
                let mut q = Query::new(format!("DELETE FROM {OBJECTS} AS o WHERE 1"));
                q.bind(" AND o.bucket_id = ", bucket)
                    .bind(" AND o.name IN (SELECT value FROM json_each(", names)
                    .text("))")
                    .rule(&rule)
                    .text(&format!(" RETURNING {}", OBJECT_COLUMNS.replace("o.", "")));
                let mut s = c.prepare(&q.sql).map_err(failed)?;
                let rows = s.query_map(q.params(), |r| object(r, 0)).map_err(failed)?;
                rows.collect::<rusqlite::Result<Vec<_>>>().map_err(failed)
            })
            .await
        })
    }

    fn empty_bucket(&self, who: Who, bucket: String) -> BoxFuture<'_, Result<Vec<String>, StorageError>> {
        Box::pin(async move {
            let rule = self.rule(&who, "objects", Operation::Delete)?;
            self.delete(move |c| {
                let mut q = Query::new(format!("DELETE FROM {OBJECTS} WHERE 1"));
                q.bind(" AND bucket_id = ", bucket).rule(&rule).text(" RETURNING version");
                let mut s = c.prepare(&q.sql).map_err(failed)?;
                let rows = s.query_map(q.params(), |r| r.get::<_, Option<String>>(0)).map_err(failed)?;
                Ok(rows.filter_map(|r| r.ok().flatten()).collect())
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
            let rule = self.rule(&who, "objects", Operation::Update)?;
            self.write(move |c| {
                let mut q = Query::new(format!("SELECT rowid FROM {OBJECTS} WHERE 1"));
                q.bind(" AND bucket_id = ", from.0).bind(" AND name = ", from.1).rule(&rule);
                let Some(rowid) = c.query_row(&q.sql, q.params(), |r| r.get::<_, i64>(0)).optional().map_err(failed)? else {
                    return Ok(false);
                };
                c.execute(
                    &format!(
                        "UPDATE {OBJECTS} SET bucket_id = ?2, name = ?3, owner = ?4, owner_id = ?5, updated_at = {NOW} \
                         WHERE rowid = ?1"
                    ),
                    rusqlite::params![rowid, to.0, to.1, owner_uuid(who.sub.as_deref()), who.sub],
                )
                .map_err(failed)?;
                match holds(c, OBJECTS, rowid, &rule)? {
                    true => Ok(true),
                    false => Err(refused()),
                }
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
            let rule = self.rule(&who, "objects", Operation::Select)?;
            let pattern = format!("{}%", like_escape(&format!("{}{}", query.prefix, query.search)));
            let mut q = Query::new("WITH m AS (SELECT o.rowid AS rid, o.*, substr(o.name, length(");
            q.bind("", query.prefix.clone())
                .text(&format!(") + 1) AS rest FROM {OBJECTS} o WHERE 1"))
                .bind(" AND o.bucket_id = ", bucket)
                .bind(" AND o.name LIKE ", pattern)
                .text(" ESCAPE '\\'")
                .rule(&rule);
            let order = match (query.column, query.descending) {
                ("name", d) => format!("lower(e.entry) {}", if d { "DESC" } else { "ASC" }),
                (column, d) => format!(
                    "(e.rid IS NULL) DESC, CASE WHEN e.rid IS NULL THEN e.entry END, o.{column} {}",
                    if d { "DESC" } else { "ASC" }
                ),
            };
            q.text(&format!(
                "), e AS (SELECT DISTINCT substr(rest, 1, instr(rest, '/') - 1) AS entry, NULL AS rid FROM m \
                 WHERE instr(rest, '/') > 0 UNION ALL SELECT rest, rid FROM m WHERE instr(rest, '/') = 0) \
                 SELECT e.entry, {OBJECT_COLUMNS} FROM e LEFT JOIN {OBJECTS} o ON o.rowid = e.rid \
                 ORDER BY {order} LIMIT {} OFFSET {}",
                query.limit, query.offset
            ));
            self.read(move |c| {
                let mut s = c.prepare(&q.sql)?;
                let rows = s.query_map(q.params(), |r| {
                    let id: Option<String> = r.get(1)?;
                    Ok(ListEntry {
                        name: r.get(0)?,
                        object: if id.is_some() { Some(object(r, 1)?) } else { None },
                    })
                })?;
                rows.collect()
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
            let rule = self.rule(&who, "objects", Operation::Select)?;
            // BINARY comparisons: names in the byte order of their UTF-8, as Supabase's `COLLATE "C"`.
            let (op, order) = if query.descending { ("<", "DESC") } else { (">", "ASC") };
            let mut q = Query::new(format!("SELECT {OBJECT_COLUMNS} FROM {OBJECTS} o WHERE 1"));
            q.bind(" AND o.bucket_id = ", bucket);
            q.bind(" AND substr(o.name, 1, length(", query.prefix.clone()).bind(")) = ", query.prefix);
            match (query.column, query.after, query.after_value) {
                (Some(column), Some(after), Some(value)) => {
                    q.bind(&format!(" AND (o.{column} {op} "), value.clone())
                        .bind(&format!(" OR (o.{column} = "), value)
                        .bind(&format!(" AND o.name {op} "), after)
                        .text("))");
                }
                (_, Some(after), _) => {
                    q.bind(&format!(" AND o.name {op} "), after);
                }
                _ => {}
            }
            if let Some(from) = query.from {
                q.bind(" AND o.name >= ", from);
            }
            q.rule(&rule);
            let by = query.column.map(|c| format!("o.{c} {order}, ")).unwrap_or_default();
            q.text(&format!(" ORDER BY {by}o.name {order} LIMIT {}", query.limit.max(0)));
            self.read(move |c| c.prepare_cached(&q.sql)?.query_map(q.params(), |r| object(r, 0))?.collect())
                .await
        })
    }

    fn versions_in_use(&self, versions: Vec<String>) -> BoxFuture<'_, Result<Vec<String>, StorageError>> {
        Box::pin(async move {
            let list = serde_json::to_string(&versions).unwrap_or_default();
            self.read(move |c| {
                let mut s = c.prepare(&format!(
                    "SELECT version FROM {OBJECTS} WHERE version IN (SELECT value FROM json_each(?1))"
                ))?;
                let rows = s.query_map([&list], |r| r.get(0))?;
                rows.collect()
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
            let rule = self.rule(&who, "objects", Operation::Select)?;
            let names = serde_json::to_string(&names).unwrap_or_default();
            let mut q = Query::new(format!("SELECT name FROM {OBJECTS} WHERE 1"));
            q.bind(" AND bucket_id = ", bucket)
                .bind(" AND name IN (SELECT value FROM json_each(", names)
                .text("))")
                .rule(&rule);
            self.read(move |c| {
                let mut s = c.prepare(&q.sql)?;
                let rows = s.query_map(q.params(), |r| r.get(0))?;
                rows.collect()
            })
            .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_s_parameters_follow_those_bound_before_it() {
        let values: Vec<String> = (1..=12).map(|i| format!("r{i}")).collect();
        let sql = (1..=12).map(|i| format!("c{i} = ?{i}")).collect::<Vec<_>>().join(" AND ");
        let rule = Rule { sql, values };
        let mut q = Query::new("SELECT 1 WHERE 1");
        q.bind(" AND a = ", "x").bind(" AND b = ", "y").rule(&rule);
        assert!(
            q.sql.starts_with("SELECT 1 WHERE 1 AND a = ?1 AND b = ?2 AND (c1 = ?3 AND c2 = ?4"),
            "{}",
            q.sql
        );
        assert!(q.sql.ends_with("c10 = ?12 AND c11 = ?13 AND c12 = ?14)"), "{}", q.sql);
        assert_eq!(q.values.len(), 14);
        assert_eq!((q.values[2].as_str(), q.values[13].as_str()), ("r1", "r12"));
    }

    #[test]
    fn owners_are_uuids_only() {
        assert_eq!(
            owner_uuid(Some("6f1d6c6e-1111-4c49-9c47-5e5d3b2a1a11")).as_deref(),
            Some("6f1d6c6e-1111-4c49-9c47-5e5d3b2a1a11")
        );
        assert_eq!(owner_uuid(Some("alice")), None);
        assert_eq!(owner_uuid(None), None);
    }
}
