//! An object's row written under the access rules: inserted (the `insert` rule must hold for
//! the new row) or, with upsert, written over the row of that name (the `update` rule must hold
//! before and after).

use rusqlite::{Connection, OptionalExtension};

use super::tables::*;
use crate::storage::error::StorageError;
use crate::storage::store::{Put, PutObject};

/// Writes `put`'s row as a caller with these rules (`None`: as the server, past the rules).
pub(super) fn put_row(
    c: &Connection,
    put: PutObject,
    insert_rule: Option<Result<Rule, StorageError>>,
    update_rule: Option<Result<Rule, StorageError>>,
) -> Result<Put, StorageError> {
    let existing: Option<(i64, Option<String>, String)> = c
        .query_row(
            &format!("SELECT rowid, version, id FROM {OBJECTS} WHERE bucket_id = ?1 AND name = ?2"),
            [&put.bucket_id, &put.name],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()
        .map_err(failed)?;
    let owner = owner_uuid(put.owner_id.as_deref());
    match existing {
        Some(_) if !put.upsert => Err(StorageError::key_exists()),
        Some((rowid, replaced, id)) => {
            if let Some(rule) = update_rule {
                let rule = rule?;
                if !holds(c, OBJECTS, rowid, &rule)? {
                    return Err(refused());
                }
                replace(c, rowid, &put, owner)?;
                if !holds(c, OBJECTS, rowid, &rule)? {
                    return Err(refused());
                }
            } else {
                replace(c, rowid, &put, owner)?;
            }
            Ok(Put { id, replaced })
        }
        None => {
            c.execute(
                &format!(
                    "INSERT INTO {OBJECTS} (id, bucket_id, name, owner, owner_id, metadata, user_metadata, version) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
                ),
                rusqlite::params![put.id, put.bucket_id, put.name, owner, put.owner_id, put.metadata, put.user_metadata, put.version],
            )
            .map_err(failed)?;
            if let Some(rule) = insert_rule {
                if !holds(c, OBJECTS, c.last_insert_rowid(), &rule?)? {
                    return Err(refused());
                }
            }
            Ok(Put { id: put.id, replaced: None })
        }
    }
}

/// Writes `put` over the row `rowid`.
fn replace(c: &Connection, rowid: i64, put: &PutObject, owner: Option<String>) -> Result<(), StorageError> {
    c.execute(
        &format!(
            "UPDATE {OBJECTS} SET metadata = ?2, user_metadata = ?3, version = ?4, owner = ?5, owner_id = ?6, \
             updated_at = {NOW} WHERE rowid = ?1"
        ),
        rusqlite::params![rowid, put.metadata, put.user_metadata, put.version, owner, put.owner_id],
    )
    .map(drop)
    .map_err(failed)
}
