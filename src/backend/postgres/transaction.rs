//! A write from BEGIN to COMMIT or ROLLBACK on one pooled connection: the statement, its
//! outcome checked while the transaction is still open (so a refused answer rolls it back), and
//! the response cache's read-your-writes marker sent with the COMMIT.

use std::sync::Arc;

use super::{render, sql, Db, Hooks, PgConn, ReadResult, SessionSettings};
use crate::cache::{Marker, ResponseCache};
use crate::error::Error;
use crate::outcome::{Done, Outcome, SetBySql, Written};

/// Ends a write's transaction. With the response cache on, a COMMIT carries the
/// read-your-writes marker, returned: the caller waits for it once the connection is back in
/// the pool, so that every instance has seen the write before the client learns of it.
pub async fn end_write(
    conn: &mut PgConn,
    commit: bool,
    cache: Option<&Arc<ResponseCache>>,
    anonymous: bool,
) -> Result<Option<Marker>, Error> {
    let marker = cache.filter(|_| commit).map(|c| c.marker());
    match marker.as_ref().and_then(|m| m.sql()) {
        Some(sql) => conn.commit_after(&sql, anonymous).await?,
        None => conn.finish(commit, anonymous).await?,
    }
    Ok(marker)
}

/// Runs a write from BEGIN to COMMIT or ROLLBACK: what it did.
pub async fn write(
    db: Db,
    cache: Option<Arc<ResponseCache>>,
    plan: Arc<crate::plan::MutatePlan>,
    settings: SessionSettings,
    anonymous: bool,
    pre_request: Option<Arc<String>>,
) -> Result<Outcome, Error> {
    let statements = sql::render_write(&plan);
    let pre_request = pre_request.as_deref().map(String::as_str);
    // Read after a write whose triggers may set them, and after every write once a
    // pre-request function runs.
    let triggers_set_response =
        plan.relation.sets_response || plan.nested.iter().any(|n| n.child.sets_response);
    let hooks = Hooks { pre_request, response: pre_request.is_some() || triggers_set_response };
    let mut slot = db.get_for_write(plan.commits_blind()).await?;
    let conn = &mut slot.conn;
    if !plan.nested.is_empty() {
        let (outcome, marker) =
            nested_insert(conn, cache.as_ref(), &plan, &settings, hooks, anonymous).await?;
        drop(slot);
        if let Some(marker) = marker {
            marker.wait().await;
        }
        return Ok(outcome);
    }
    if let Some(explain) = &plan.explain {
        // The plan of the write; with ANALYZE it runs, and is always rolled back.
        let stmt = sql::explain(&statements.main, explain);
        let result =
            conn.write(&settings, &stmt, true, Hooks { pre_request, response: false }, anonymous).await?;
        conn.finish(false, anonymous).await?;
        return Ok(Outcome::of(Done::Explained(render::plan(explain, &result.rows))));
    }
    if plan.commits_blind() {
        let marker = cache.as_ref().map(|c| c.marker());
        let running = conn
            .write_committed(
                &settings,
                &statements.main,
                statements.returns_rows,
                marker.as_ref().and_then(|m| m.sql()),
                hooks,
                anonymous,
            )
            .await?;
        // The connection serves the next request while this one runs.
        let pipelined = slot.release_connection();
        let result = running.await?;
        drop(pipelined);
        if let Some(marker) = marker {
            marker.wait().await;
        }
        let written = render::write(&plan, &statements, &result)?;
        return Ok(Outcome { set_by_sql: result.gucs, ..Outcome::of(Done::Written(written)) });
    }
    let result = conn.write(&settings, &statements.main, statements.returns_rows, hooks, anonymous).await?;
    let written = render::write(&plan, &statements, &result);
    let marker = end_write(conn, written.is_ok() && !plan.rollback, cache.as_ref(), anonymous).await?;
    drop(slot);
    if let Some(marker) = marker {
        marker.wait().await;
    }
    Ok(Outcome { set_by_sql: result.gucs, ..Outcome::of(Done::Written(written?)) })
}

/// rowgate's nested insert, in one transaction: each parent object inserted on its own (so its
/// generated key is known), then its children with their foreign key set to it; then the
/// representation read back by primary key, embeds showing the children.
async fn nested_insert(
    conn: &mut PgConn,
    cache: Option<&Arc<ResponseCache>>,
    plan: &crate::plan::MutatePlan,
    settings: &SessionSettings,
    hooks: Hooks<'_>,
    anonymous: bool,
) -> Result<(Outcome, Option<Marker>), Error> {
    use serde_json::value::RawValue;
    let crate::plan::Mutation::Insert { payload, .. } = &plan.mutation else {
        unreachable!("nested inserts are inserts")
    };
    let objects: Vec<std::collections::HashMap<String, &RawValue>> = serde_json::from_str(&payload.json)
        .map_err(|_| {
            Error::Request(rowgate_request::RequestError::InvalidBody("Empty or invalid json".into()))
        })?;
    let raw_objects: Vec<&RawValue> = serde_json::from_str(&payload.json).map_err(|_| {
        Error::Request(rowgate_request::RequestError::InvalidBody("Empty or invalid json".into()))
    })?;
    // Returned per parent: the primary key, then every column a child links to.
    let mut returned: Vec<String> = plan.relation.primary_key.clone();
    for n in &plan.nested {
        for (_, _, parent_col) in &n.link {
            if !returned.contains(parent_col) {
                returned.push(parent_col.clone());
            }
        }
    }
    conn.begin(settings, hooks, anonymous).await?;
    let mut keys = Vec::with_capacity(objects.len());
    for (object, raw) in objects.iter().zip(&raw_objects) {
        let rows = conn.run(&sql::insert_parent(plan, raw.get(), &returned), anonymous).await?;
        let values: Vec<String> = match rows.first() {
            Some(row) => {
                (0..returned.len()).map(|i| row.get::<_, Option<String>>(i).unwrap_or_default()).collect()
            }
            None => continue,
        };
        for n in &plan.nested {
            let Some(children) = object.get(&n.key).filter(|c| c.get().trim_start().starts_with('[')) else {
                continue;
            };
            let link: Vec<String> = n
                .link
                .iter()
                .map(|(_, _, p)| values[returned.iter().position(|r| r == p).unwrap_or(0)].clone())
                .collect();
            conn.run(&sql::insert_children(n, children.get(), &link), anonymous).await?;
        }
        keys.push(values[..plan.relation.primary_key.len()].to_vec());
    }
    let inserted = keys.len() as u64;
    let representation = match plan.representation_of(&keys) {
        Some(read) => {
            let statements = sql::render_read(&read, None);
            let rows = conn.run(&statements.main, anonymous).await?;
            let result = ReadResult { rows, explain: None, gucs: SetBySql::default() };
            render::read(&read, &statements, result, None).map(Some)
        }
        None => Ok(None),
    };
    let written = representation.and_then(|rows| {
        let page = rows.as_ref().map_or(0, |r| r.page);
        let written = Written { affected: inserted, inserted, page, ..Written::default() };
        crate::outcome::written(plan, written, || Ok(rows.map(|r| r.body).unwrap_or_default()))
    });
    let gucs = if hooks.response { conn.response_gucs(anonymous).await? } else { SetBySql::default() };
    let marker = end_write(conn, written.is_ok() && !plan.rollback, cache, anonymous).await?;
    Ok((Outcome { set_by_sql: gucs, ..Outcome::of(Done::Written(written?)) }, marker))
}
