//! Writes: POST (insert, upsert), PUT (single-row upsert), PATCH (update) and DELETE, planned
//! as PostgREST plans them: the body's keys (or `columns=`) name the columns written, the
//! query string's filters choose the rows changed, and `select=` shapes the representation,
//! embeds included.

use std::sync::Arc;

use rowgate_request::{
    ApiRequest, CompareOp, Method, Operation, PreferCount, PreferHandling, PreferMissing, PreferResolution,
    PreferReturn, PreferTx, SelectItem,
};

use super::payload::{self, Payload};
use super::{Condition, Expr, Media, OutputColumn, Planner};
use crate::config::{Config, TxEnd};
use crate::error::{code, Error};
use crate::schema::{Relation, SchemaCache, ValueKind};

/// A POST, PUT, PATCH or DELETE on a table or view.
#[derive(Debug)]
pub struct MutatePlan {
    /// The relation written.
    pub relation: Arc<Relation>,
    /// The schema the request runs in.
    pub schema: String,
    /// What the statement does.
    pub mutation: Mutation,
    /// Conditions on the rows changed (PATCH, DELETE).
    pub conditions: Vec<Condition>,
    /// What the response carries besides its status.
    pub returning: Returning,
    /// Conditions on the representation (`!inner` embeds), which do not limit the write.
    pub output_conditions: Vec<Condition>,
    /// `order=`: the representation's order (PostgREST 13: it orders what is returned, never
    /// which rows are written).
    pub order: Vec<super::OrderBy>,
    /// The response media type (for the representation and the singular check).
    pub media: Media,
    /// `Prefer: count=exact`.
    pub count: bool,
    /// The transaction is rolled back at the end (`db-tx-end`, `Prefer: tx=rollback`).
    pub rollback: bool,
    /// `Prefer: handling=strict, max-affected=N`.
    pub max_affected: Option<u64>,
    /// `Prefer: timezone=`, when valid.
    pub timezone: Option<String>,
    /// The honoured preferences, for `Preference-Applied`.
    pub applied: Vec<String>,
    /// `Accept: application/vnd.pgrst.plan`: answer with the statement's plan, and roll back.
    pub explain: Option<super::Explain>,
    /// PostGIS's schema, for `application/geo+json`.
    pub postgis: Option<String>,
    /// A media type handler of the database's makes the representation (PostgreSQL).
    pub handler: Option<super::Handler>,
    /// rowgate's nested insert: keys of the body that name a to-many relationship hold the
    /// children to insert with each row.
    pub nested: Vec<Nested>,
}

/// Children inserted with their parent row: `POST /projects` with
/// `{"name": "x", "tasks": [{"title": "a"}]}`.
#[derive(Debug, Clone)]
pub struct Nested {
    /// The body key (the child relation's name).
    pub key: String,
    /// The child relation.
    pub child: Arc<Relation>,
    /// (child column, its type, parent column) of the foreign key, set from the parent row.
    pub link: Vec<(String, String, String)>,
    /// The other child columns the children set, in table order.
    pub columns: Vec<BodyColumn>,
}

/// The statement of a write.
#[derive(Debug)]
pub enum Mutation {
    /// `INSERT ... SELECT ... FROM json_to_recordset($1)`, possibly with `ON CONFLICT`.
    Insert {
        /// The rows.
        payload: Payload,
        /// The columns written, in table order.
        columns: Vec<BodyColumn>,
        /// `Prefer: missing=default`: keys absent from an object take the column default.
        missing_default: bool,
        /// Upsert.
        on_conflict: Option<OnConflict>,
        /// PUT: (primary key column, value from the URL); a payload row that differs is not
        /// written, and the request fails with PGRST115.
        put_key: Vec<(String, String)>,
    },
    /// `UPDATE ... SET (cols) = (SELECT ... FROM json_to_record($1))`.
    Update {
        /// The one object applied to every row.
        payload: Payload,
        /// The columns written, in table order.
        columns: Vec<BodyColumn>,
    },
    /// `Prefer: patch=by-key`: `UPDATE ... FROM json_to_recordset($1)` joined on the primary
    /// key, each object's values for its own row.
    UpdateByKey {
        /// The objects, each with the primary key.
        payload: Payload,
        /// The primary key columns.
        key: Vec<BodyColumn>,
        /// The other columns written, in table order.
        columns: Vec<BodyColumn>,
    },
    /// `DELETE`.
    Delete,
}

/// A column a write sets.
#[derive(Debug, Clone)]
pub struct BodyColumn {
    /// Its name.
    pub name: String,
    /// Its type, as PostgreSQL names it (from the catalog).
    pub type_name: String,
    /// Its default expression (from the catalog), for `missing=default`.
    pub default: Option<String>,
    /// The payload sets it (otherwise it is named by `columns=` only).
    pub in_payload: bool,
    /// The function that reads its value from the body's JSON, when the column's domain has a
    /// data representation from `json`.
    pub parse: Option<crate::schema::QualifiedName>,
    /// The function that reads its value from text (a PUT's key in the URL), when the
    /// column's domain has a data representation from `text`.
    pub parse_text: Option<crate::schema::QualifiedName>,
}

/// `ON CONFLICT (target) DO ...`.
#[derive(Debug, Clone)]
pub struct OnConflict {
    /// The conflict target: `on_conflict=` or the primary key.
    pub target: Vec<String>,
    /// `DO UPDATE SET` (merge) rather than `DO NOTHING`.
    pub merge: bool,
}

/// What a write's response carries.
#[derive(Debug)]
pub enum Returning {
    /// Status and headers only.
    Nothing,
    /// `Location` of the inserted row, from these primary key columns.
    Location(Vec<String>),
    /// The written rows, shaped by `select=`.
    Representation(Vec<OutputColumn>),
}

impl MutatePlan {
    /// Whether the statement must return rows (or counts) rather than just the affected count.
    pub fn returns_rows(&self) -> bool {
        !matches!(self.returning, Returning::Nothing) || self.tracks_inserts()
    }

    /// Whether the response needs to know which rows were inserted rather than updated
    /// (a merging upsert answers 200 when it inserted nothing).
    pub fn tracks_inserts(&self) -> bool {
        let merge = matches!(
            &self.mutation,
            Mutation::Insert { on_conflict: Some(OnConflict { merge: true, .. }), .. }
        );
        // PUT tells inserted from replaced only in its representation's status (201 or 200).
        merge && (!self.is_put() || matches!(self.returning, Returning::Representation(_)))
    }

    /// Whether this is a PUT (an upsert of the one row its URL names).
    pub fn is_put(&self) -> bool {
        matches!(&self.mutation, Mutation::Insert { put_key, .. } if !put_key.is_empty())
    }

    /// Whether the write commits whatever its statement returns: no check of the result can
    /// turn it into a rollback (PUT's single row, max-affected, a singular object, a rendered
    /// representation), so the COMMIT can travel with the statement.
    pub fn commits_blind(&self) -> bool {
        !self.is_put()
            && self.max_affected.is_none()
            && !matches!(self.media, Media::Single { .. })
            && !matches!(self.returning, Returning::Representation(_))
            && !self.rollback
            && self.explain.is_none()
            && self.nested.is_empty()
    }
}

/// Plans a write of `relation`.
pub(super) fn plan(
    request: &ApiRequest,
    schema: &SchemaCache,
    config: &Config,
    relation: Arc<Relation>,
    schema_name: &str,
    body: &[u8],
) -> Result<MutatePlan, Error> {
    let prefs = &request.preferences;
    let query = &request.query;
    let (media, explain, handler) = super::negotiate(request, schema, config, &relation.name)?;
    let planner = Planner::top(&relation, schema, schema_name, query, config);
    if request.method != Method::Post && (!query.ranges.is_empty() || !query.order.is_empty()) {
        if request.method == Method::Put && query.ranges.iter().any(|(p, _)| p.is_empty()) {
            return Err(Error::api(
                code::PUT_RANGE,
                "limit/offset querystring parameters are not allowed for PUT",
            ));
        }
        if query.ranges.iter().any(|(p, _)| p.is_empty()) {
            return Err(Error::api(
                code::UNSUPPORTED,
                "limit and offset on PATCH and DELETE are not supported (PostgREST 13 removed them too); \
                 use filters, or Prefer: max-affected",
            ));
        }
    }

    let representation = prefs.return_ == Some(PreferReturn::Representation);
    let output = if representation {
        let select = if query.select.is_empty() { vec![SelectItem::Star] } else { query.select.clone() };
        planner.columns(&select)?
    } else {
        Vec::new()
    };
    let (conditions, order) = planner.level(&output)?;
    let order = if representation { order } else { Vec::new() };
    let output_conditions = super::inner_joins(&output);

    let read_body = |columns_given: bool| -> Result<Payload, Error> {
        payload::parse(request.content_type.as_deref(), body, columns_given, payload::MAX_KEYS)
    };
    let missing_default = prefs.missing == Some(PreferMissing::Default);
    let mut resolution_applied = false;
    let mut nested = Vec::new();
    let mutation = match request.method {
        Method::Post => {
            let json_body = request.content_type.as_deref().is_none_or(|t| t.ends_with("json"));
            // Objects may differ by their nested keys; the others must match (checked below).
            let mut payload = read_body(query.columns.is_some() || json_body)?;
            if query.columns.is_none() && json_body {
                nested = super::nested::nested_children(&relation, schema, &mut payload)?;
                let ignore: Vec<String> = nested.iter().map(|n| n.key.clone()).collect();
                if payload.rows > 1 && !payload::keys_match(&payload.json, &ignore)? {
                    return Err(payload::mismatch());
                }
            }
            let columns = body_columns(&relation, &payload, query.columns.as_deref(), schema)?;
            let on_conflict = match prefs.resolution {
                Some(resolution) => {
                    let target = match &query.on_conflict {
                        Some(cols) => {
                            for c in cols {
                                column_exists(&relation, c)?;
                            }
                            cols.clone()
                        }
                        None => relation.primary_key.clone(),
                    };
                    (!target.is_empty()).then(|| {
                        resolution_applied = true;
                        OnConflict { target, merge: resolution == PreferResolution::MergeDuplicates }
                    })
                }
                None => None,
            };
            Mutation::Insert { payload, columns, missing_default, on_conflict, put_key: Vec::new() }
        }
        Method::Put => {
            let put_key = put_key(&relation, request)?;
            let payload = read_body(query.columns.is_some())?;
            if payload.rows != 1 || put_key.iter().any(|(k, _)| !payload.keys.contains(k)) {
                return Err(put_mismatch());
            }
            let columns = body_columns(&relation, &payload, query.columns.as_deref(), schema)?;
            let on_conflict = Some(OnConflict { target: relation.primary_key.clone(), merge: true });
            Mutation::Insert { payload, columns, missing_default, on_conflict, put_key }
        }
        Method::Patch if prefs.patch_by_key => {
            let payload = read_body(query.columns.is_some())?;
            let pk = &relation.primary_key;
            // The key must be among the columns written (`columns=` when given): a partial key
            // would update every row that shares it.
            let named: &[String] = query.columns.as_deref().unwrap_or(&payload.keys);
            if pk.is_empty() || pk.iter().any(|k| !named.contains(k)) {
                return Err(Error::Api {
                    code: code::PATCH_BY_KEY,
                    message: format!(
                        "Prefer: patch=by-key needs every object to carry the primary key of '{}'",
                        relation.name.name
                    ),
                    details: Some(
                        if pk.is_empty() {
                            "The relation has no primary key".to_owned()
                        } else {
                            format!("Primary key: {}", pk.join(", "))
                        }
                        .into(),
                    ),
                    hint: None,
                });
            }
            let all = body_columns(&relation, &payload, query.columns.as_deref(), schema)?;
            let (key, columns): (Vec<BodyColumn>, Vec<BodyColumn>) =
                all.into_iter().partition(|c| pk.contains(&c.name));
            Mutation::UpdateByKey { payload, key, columns }
        }
        Method::Patch => {
            let payload = payload::first_only(read_body(true)?)?;
            let mut columns = body_columns(&relation, &payload, query.columns.as_deref(), schema)?;
            if !missing_default {
                // Without missing=default, a key named by columns= but absent is set to null.
                columns.iter_mut().for_each(|c| c.in_payload = true);
            }
            if payload.rows == 0 {
                columns.clear();
            }
            Mutation::Update { payload, columns }
        }
        Method::Delete => Mutation::Delete,
        Method::Get | Method::Head | Method::Options => unreachable!("not a write"),
    };
    if !nested.is_empty() && explain.is_some() {
        return Err(Error::api(
            code::NESTED_INSERT,
            "A nested insert has no single statement to plan; ask for the plan of its parts",
        ));
    }
    if !nested.is_empty() && (resolution_applied || relation.primary_key.is_empty()) {
        return Err(Error::api(
            code::NESTED_INSERT,
            format!(
                "A nested insert needs a plain insert into a table with a primary key; '{}' {}",
                relation.name.name,
                if resolution_applied { "was asked to upsert" } else { "has no primary key" }
            ),
        ));
    }
    // A by-key PATCH is filtered by its keys, so it is no unfiltered update.
    if config.db.safe_updates
        && matches!(mutation, Mutation::Update { .. } | Mutation::Delete)
        && query.filters.iter().all(|(p, _)| !p.is_empty())
        && query.logic.iter().all(|(p, _)| !p.is_empty())
    {
        // pg-safeupdate's own error, which PostgREST deployments that use it already see.
        let statement = if request.method == Method::Delete { "DELETE" } else { "UPDATE" };
        return Err(Error::sql("21000", format!("{statement} requires a WHERE clause"), false));
    }

    let location = request.method == Method::Post
        && prefs.return_ == Some(PreferReturn::HeadersOnly)
        && !relation.primary_key.is_empty()
        && matches!(&mutation, Mutation::Insert { payload, .. } if payload.rows == 1);
    let returning = if representation {
        Returning::Representation(output)
    } else if location {
        Returning::Location(relation.primary_key.clone())
    } else {
        Returning::Nothing
    };

    let (timezone, mut invalid) = super::check_timezone(prefs, schema);
    let rollback = match (config.db.tx_end, prefs.tx) {
        (TxEnd::CommitAllowOverride | TxEnd::RollbackAllowOverride, Some(tx)) => tx == PreferTx::Rollback,
        (TxEnd::Commit | TxEnd::CommitAllowOverride, _) => false,
        (TxEnd::Rollback | TxEnd::RollbackAllowOverride, _) => true,
    };
    let tx_applied = matches!(config.db.tx_end, TxEnd::CommitAllowOverride | TxEnd::RollbackAllowOverride)
        && prefs.tx.is_some();
    let strict = prefs.handling == Some(PreferHandling::Strict);
    let max_affected = prefs.max_affected.filter(|_| strict).map(|n| n.max(0) as u64);
    if prefs.tx.is_some() && !tx_applied {
        invalid
            .push(format!("tx={}", if prefs.tx == Some(PreferTx::Commit) { "commit" } else { "rollback" }));
    }
    super::reject_invalid(prefs, &invalid)?;

    // PostgREST's order of Preference-Applied.
    let mut applied = Vec::new();
    if resolution_applied {
        applied.push(match prefs.resolution {
            Some(PreferResolution::MergeDuplicates) => "resolution=merge-duplicates".to_owned(),
            _ => "resolution=ignore-duplicates".to_owned(),
        });
    }
    if let Some(m) = prefs.missing {
        applied.push(if m == PreferMissing::Default { "missing=default" } else { "missing=null" }.to_owned());
    }
    if let Some(r) = prefs.return_ {
        applied.push(
            match r {
                PreferReturn::Minimal => "return=minimal",
                PreferReturn::HeadersOnly => "return=headers-only",
                PreferReturn::Representation => "return=representation",
            }
            .to_owned(),
        );
    }
    let count = prefs.count == Some(PreferCount::Exact);
    if count {
        applied.push("count=exact".to_owned());
    }
    super::applied_tail(&mut applied, tx_applied.then_some(rollback), prefs, &timezone, max_affected);
    if matches!(mutation, Mutation::UpdateByKey { .. }) {
        applied.push("patch=by-key".to_owned());
    }

    // A handler makes a representation only (and never a nested insert's).
    let handler = handler.filter(|_| matches!(returning, Returning::Representation(_)) && nested.is_empty());
    Ok(MutatePlan {
        relation,
        schema: schema_name.to_owned(),
        mutation,
        conditions,
        returning,
        output_conditions,
        order,
        media,
        count,
        rollback,
        max_affected,
        timezone,
        applied,
        explain,
        postgis: schema.postgis.clone(),
        handler,
        nested,
    })
}

/// The columns a write sets: `columns=` if given, else the payload's keys; unknown names are
/// PGRST204. Returned in table order, so the same set of keys always makes the same SQL.
pub(super) fn body_columns(
    relation: &Relation,
    payload: &Payload,
    named: Option<&[String]>,
    schema: &SchemaCache,
) -> Result<Vec<BodyColumn>, Error> {
    let names: &[String] = named.unwrap_or(&payload.keys);
    for name in names {
        column_exists(relation, name)?;
    }
    Ok(relation
        .columns
        .iter()
        .filter(|c| names.contains(&c.name))
        .map(|c| BodyColumn {
            name: c.name.clone(),
            type_name: c.type_name.clone(),
            default: c.default.clone(),
            in_payload: payload.keys.contains(&c.name),
            parse: schema.json_parsers.get(&c.type_oid).cloned(),
            parse_text: schema.text_parsers.get(&c.type_oid).cloned(),
        })
        .collect())
}

fn column_exists(relation: &Relation, name: &str) -> Result<(), Error> {
    match relation.column(name) {
        Some(_) => Ok(()),
        None => Err(Error::api(
            code::COLUMN_NOT_FOUND,
            format!("Could not find the '{name}' column of '{}' in the schema cache", relation.name.name),
        )),
    }
}

/// PUT's filters must be exactly `pk=eq.value` for every primary key column (PGRST105).
fn put_key(relation: &Relation, request: &ApiRequest) -> Result<Vec<(String, String)>, Error> {
    let invalid = || {
        Error::api(
            code::INVALID_PUT,
            "Filters must include all and only primary key columns with 'eq' operators",
        )
    };
    let q = &request.query;
    if relation.primary_key.is_empty() || !q.logic.is_empty() {
        return Err(invalid());
    }
    let mut key = Vec::new();
    for (path, f) in &q.filters {
        match &f.operation {
            Operation::Compare { op: CompareOp::Eq, quantifier: None, value }
                if path.is_empty()
                    && !f.negated
                    && f.field.json_path.is_empty()
                    && relation.primary_key.contains(&f.field.name)
                    && !key.iter().any(|(k, _)| *k == f.field.name) =>
            {
                key.push((f.field.name.clone(), value.clone()))
            }
            _ => return Err(invalid()),
        }
    }
    if key.len() != relation.primary_key.len() {
        return Err(invalid());
    }
    Ok(key)
}

/// PGRST115: a PUT whose body does not carry the primary key of its URL.
pub fn put_mismatch() -> Error {
    Error::api(code::PUT_MISMATCH, "Payload values do not match URL in primary key column(s)")
}

/// The primary key columns of the `Location` header, selected as text.
pub fn location_columns(pk: &[String]) -> Vec<OutputColumn> {
    pk.iter()
        .map(|c| OutputColumn {
            key: c.clone(),
            expr: Expr::Cast(Box::new(Expr::Column(c.clone())), "text".into()),
            kind: ValueKind::Text,
        })
        .collect()
}
