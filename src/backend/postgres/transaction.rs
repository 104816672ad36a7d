//! A write from BEGIN to COMMIT or ROLLBACK on one pooled connection: the statement, the
//! response built while the transaction is still open (so a failed check rolls it back), and
//! the response cache's read-your-writes marker sent with the COMMIT.

use std::sync::Arc;

use http::{header, HeaderValue, Response, StatusCode};

use super::{render, sql, with_gucs, Db, Hooks, PgConn, ReadResult, ResponseGucs, SessionSettings};
use crate::cache::{Marker, ResponseCache};
use crate::error::Error;
use crate::response::Body;

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

/// Runs a write from BEGIN to COMMIT or ROLLBACK and builds its response.
pub async fn write(
    db: Db,
    cache: Option<Arc<ResponseCache>>,
    plan: crate::plan::MutatePlan,
    settings: SessionSettings,
    anonymous: bool,
    profile: Option<String>,
    pre_request: Option<Arc<String>>,
) -> Result<Response<Body>, Error> {
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
        let (response, marker) =
            nested_insert(conn, cache.as_ref(), &plan, &settings, hooks, anonymous, profile.as_deref())
                .await?;
        drop(slot);
        if let Some(marker) = marker {
            marker.wait().await;
        }
        return Ok(response);
    }
    if let Some(explain) = &plan.explain {
        // The plan of the write; with ANALYZE it runs, and is always rolled back.
        let stmt = sql::explain(&statements.main, explain);
        let result =
            conn.write(&settings, &stmt, true, Hooks { pre_request, response: false }, anonymous).await?;
        conn.finish(false, anonymous).await?;
        return Ok(render::plan(explain, &result.rows));
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
        return render::write(&plan, &statements, &result, profile.as_deref())
            .and_then(|r| with_gucs(r, &result.gucs));
    }
    let result = conn.write(&settings, &statements.main, statements.returns_rows, hooks, anonymous).await?;
    let response = render::write(&plan, &statements, &result, profile.as_deref());
    let marker = end_write(conn, response.is_ok() && !plan.rollback, cache.as_ref(), anonymous).await?;
    drop(slot);
    if let Some(marker) = marker {
        marker.wait().await;
    }
    response.and_then(|r| with_gucs(r, &result.gucs))
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
    profile: Option<&str>,
) -> Result<(Response<Body>, Option<Marker>), Error> {
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
    let response = match plan.representation_of(&keys) {
        Some(read) => {
            let statements = sql::render_read(&read, None);
            let rows = conn.run(&statements.main, anonymous).await?;
            let result = ReadResult { rows, explain: None, gucs: ResponseGucs::default() };
            render::read(&read, &statements, result, None, profile)
        }
        None => Ok(Response::new(Body::default())),
    };
    let response = response.and_then(|mut r| {
        if plan.max_affected.is_some_and(|m| inserted > m) {
            return Err(Error::max_affected(inserted));
        }
        *r.status_mut() = StatusCode::CREATED;
        let total = if plan.count { inserted.to_string() } else { "*".into() };
        if let Ok(v) = HeaderValue::from_str(&format!("*/{total}")) {
            r.headers_mut().insert(header::CONTENT_RANGE, v);
        }
        if !plan.applied.is_empty() {
            if let Ok(v) = HeaderValue::from_str(&plan.applied.join(", ")) {
                r.headers_mut().insert("preference-applied", v);
            }
        }
        Ok(r)
    });
    let gucs = if hooks.response { conn.response_gucs(anonymous).await? } else { ResponseGucs::default() };
    let marker = end_write(conn, response.is_ok() && !plan.rollback, cache, anonymous).await?;
    Ok((with_gucs(response?, &gucs)?, marker))
}
