//! The schema cache: what rowgate knows about the exposed schemas (relations, columns, keys,
//! view dependencies, functions, type names), loaded from the database's catalog by its
//! backend at start-up and replaced whole on reload.
//!
//! Requests read it through an `Arc` snapshot ([`SharedSchema`]), so a reload never blocks or
//! fails a request in flight: the request keeps the snapshot it started with.

mod dependencies;
pub mod fuzzy;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwapOption;

pub use dependencies::{Dependencies, Reads};

/// A schema-qualified name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QualifiedName {
    /// Schema.
    pub schema: String,
    /// Object name.
    pub name: String,
}

/// What kind of relation a name refers to (`pg_class.relkind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelationKind {
    /// An ordinary table.
    Table,
    /// A partitioned table.
    PartitionedTable,
    /// A view.
    View,
    /// A materialized view.
    MaterializedView,
    /// A foreign table.
    ForeignTable,
}

/// How values of a type are turned into JSON. Types whose binary form rowgate renders itself
/// are listed; everything else is rendered by PostgreSQL's own `to_json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// int2.
    Int2,
    /// int4.
    Int4,
    /// int8.
    Int8,
    /// numeric.
    Numeric,
    /// bool.
    Bool,
    /// text-like: text, varchar, bpchar, name, enums, citext.
    Text,
    /// uuid.
    Uuid,
    /// date.
    Date,
    /// timestamp without time zone.
    Timestamp,
    /// json.
    Json,
    /// jsonb.
    Jsonb,
    /// tsvector (filters wrap other columns in `to_tsvector`).
    TsVector,
    /// Anything else: rendered by `to_json` in SQL.
    Other,
}

/// A column of a relation.
#[derive(Debug, Clone)]
pub struct Column {
    /// Name.
    pub name: String,
    /// Type as `format_type` shows it, e.g. `character varying(20)`.
    pub type_name: String,
    /// Type OID (a domain's own OID for domain columns).
    pub type_oid: u32,
    /// How values render, from the base type.
    pub kind: ValueKind,
    /// Whether NULL is allowed.
    pub nullable: bool,
    /// The default expression, if any.
    pub default: Option<String>,
    /// `COMMENT ON COLUMN`.
    pub comment: Option<String>,
    /// The type as PostgREST's OpenAPI names it: a built-in type (or a domain over one) by its
    /// base name without modifiers (`character varying`, `integer[]`), any other as
    /// `format_type` shows it (`test.mood`).
    pub data_type: String,
    /// The most characters a value may have (`varchar(n)`, `char(n)`).
    pub max_length: Option<u32>,
    /// An enum's labels, in order (empty for any other type).
    pub enum_values: Vec<String>,
}

/// A foreign key constraint.
#[derive(Debug, Clone)]
pub struct ForeignKey {
    /// Constraint name.
    pub name: String,
    /// Referencing columns of this relation.
    pub columns: Vec<String>,
    /// The referenced relation.
    pub target: QualifiedName,
    /// Referenced columns, pairwise with `columns`.
    pub target_columns: Vec<String>,
}

/// A table, view, materialized view or foreign table.
#[derive(Debug, Clone)]
pub struct Relation {
    /// Its OID.
    pub oid: u32,
    /// Its qualified name.
    pub name: QualifiedName,
    /// Its kind.
    pub kind: RelationKind,
    /// Columns in table order.
    pub columns: Vec<Column>,
    /// Column index by name.
    column_index: HashMap<String, usize>,
    /// Primary key columns, in key order (empty if none).
    pub primary_key: Vec<String>,
    /// Unique constraints (column lists), besides the primary key.
    pub unique_keys: Vec<Vec<String>>,
    /// Foreign keys of this relation.
    pub foreign_keys: Vec<ForeignKey>,
    /// For views: the tables and views the view reads.
    pub base_relations: Vec<QualifiedName>,
    /// `COMMENT ON TABLE`.
    pub comment: Option<String>,
    /// Which writes PostgreSQL can do on it (views: auto-updatable or with INSTEAD OF triggers).
    pub writable: Writable,
    /// The OID of its row type (`pg_class.reltype`), which computed fields take.
    pub row_type: u32,
    /// A trigger on it (or on a table under the view) may set `response.headers` or
    /// `response.status` (PostgreSQL; see `introspect::RESPONSE_SETTERS`).
    pub sets_response: bool,
    /// A partition of a partitioned table, which PostgREST's descriptions leave out.
    pub partition: bool,
}

/// The writes a relation takes (`pg_relation_is_updatable`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Writable {
    /// INSERT.
    pub insert: bool,
    /// UPDATE.
    pub update: bool,
    /// DELETE.
    pub delete: bool,
}

impl Relation {
    /// Creates a relation; the column index is derived from `columns`.
    pub fn new(name: QualifiedName, kind: RelationKind, columns: Vec<Column>) -> Self {
        let column_index = columns.iter().enumerate().map(|(i, c)| (c.name.clone(), i)).collect();
        Relation {
            oid: 0,
            name,
            kind,
            columns,
            column_index,
            primary_key: Vec::new(),
            unique_keys: Vec::new(),
            foreign_keys: Vec::new(),
            base_relations: Vec::new(),
            sets_response: false,
            partition: false,
            comment: None,
            writable: Writable::default(),
            row_type: 0,
        }
    }

    /// The column with this name, if any.
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.column_index.get(name).map(|&i| &self.columns[i])
    }
}

/// Function volatility (`pg_proc.provolatile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Volatility {
    /// IMMUTABLE.
    Immutable,
    /// STABLE.
    Stable,
    /// VOLATILE.
    Volatile,
}

/// One argument of a function.
#[derive(Debug, Clone)]
pub struct FunctionArg {
    /// Name (empty for unnamed arguments).
    pub name: String,
    /// Type as `format_type` shows it.
    pub type_name: String,
    /// Type OID.
    pub type_oid: u32,
    /// Whether it has a default.
    pub has_default: bool,
    /// Whether it is VARIADIC.
    pub variadic: bool,
}

/// What a function's result is made of.
#[derive(Debug, Clone)]
pub enum FunctionResult {
    /// Rows of a table's or view's type (`RETURNS [SETOF] tbl`).
    Composite(QualifiedName),
    /// Rows of these columns (`RETURNS TABLE (...)`, OUT parameters).
    Columns(Vec<Column>),
    /// A value of some other type (including arrays, composites of no exposed relation and
    /// `record`), of this kind.
    Scalar(ValueKind),
    /// Nothing (`RETURNS void`).
    Void,
}

/// A function callable at `/rpc/{name}`.
#[derive(Debug, Clone)]
pub struct Function {
    /// Its qualified name.
    pub name: QualifiedName,
    /// Input arguments, in order.
    pub args: Vec<FunctionArg>,
    /// Return type as `format_type` shows it.
    pub return_type: String,
    /// Return type OID.
    pub return_type_oid: u32,
    /// `RETURNS SETOF` / `TABLE`.
    pub returns_set: bool,
    /// What the result is made of.
    pub returns: FunctionResult,
    /// The planner's row estimate (`ROWS`); a set-returning function with `ROWS 1` is a to-one
    /// computed relationship.
    pub rows: f64,
    /// Volatility.
    pub volatility: Volatility,
    /// `COMMENT ON FUNCTION`.
    pub comment: Option<String>,
    /// It may set `response.headers` or `response.status` (its source names them, or names a
    /// function that does).
    pub sets_response: bool,
    /// Its OID (`pg_proc.oid`; 0 on SQLite), by which privileges are asked.
    pub oid: u32,
}

/// PostgREST's media type handler: a function returning a domain named like a media type
/// (`CREATE DOMAIN "text/html" AS text`), or an aggregate over a relation's rows returning one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaHandler {
    /// The domain's name, lower-case: `application/vnd.twkb`, or `*/*` for any.
    pub media_type: String,
    /// The function, or the relation the aggregate takes; `None`: an aggregate of
    /// `anyelement`, for every relation.
    pub applies_to: Option<QualifiedName>,
    /// The aggregate; `None`: the function's own value is the body.
    pub aggregate: Option<QualifiedName>,
    /// The domain is a `bytea`: the body is its bytes (else its text).
    pub binary: bool,
}

/// A type of an exposed schema that clients see by name: an enum, or a composite type (`CREATE
/// TYPE ... AS (...)`), which typed clients and the OpenAPI description name.
#[derive(Debug, Clone)]
pub struct NamedType {
    /// Its qualified name.
    pub name: QualifiedName,
    /// `format_type` of it, as columns' and arguments' type names write it.
    pub type_name: String,
    /// An enum's labels, in order (empty for a composite type).
    pub labels: Vec<String>,
    /// A composite type's attributes (name, type as `format_type` writes it).
    pub attributes: Vec<(String, String)>,
}

/// Everything rowgate knows about the database's exposed schemas.
#[derive(Debug, Default)]
pub struct SchemaCache {
    /// Relations by qualified name.
    pub relations: HashMap<QualifiedName, Arc<Relation>>,
    /// Functions by qualified name (overloads share a name).
    pub functions: HashMap<QualifiedName, Vec<Function>>,
    /// Type names a `::cast` may use: every type in `pg_catalog` and the exposed schemas,
    /// plus SQL's spellings (`integer`, `double precision`, ...).
    pub type_names: HashSet<String>,
    /// Whether the database has time zones (PostgreSQL, which checks `Prefer: timezone=`
    /// itself); without them (SQLite) the preference is invalid.
    pub time_zones: bool,
    /// The schema PostGIS is installed in, if it is (for `application/geo+json`).
    pub postgis: Option<String>,
    /// Media type handlers in the exposed schemas (PostgreSQL).
    pub media_handlers: Vec<MediaHandler>,
    /// What each relation reads, for the response cache.
    pub dependencies: Dependencies,
    /// `COMMENT ON SCHEMA`, by exposed schema: the OpenAPI description's title and description.
    pub schema_comments: HashMap<String, String>,
    /// The enums and composite types of the exposed schemas, by name.
    pub named_types: Vec<NamedType>,
    /// PostgREST's data representations: the function of an implicit cast from a domain to
    /// `json` (how its values are written in answers), by the domain's type OID.
    pub json_representations: HashMap<u32, QualifiedName>,
    /// The function of an implicit cast from `text` to a domain (how a filter's value is read),
    /// by the domain's type OID.
    pub text_parsers: HashMap<u32, QualifiedName>,
    /// The function of an implicit cast from `json` to a domain (how a body's value is read),
    /// by the domain's type OID.
    pub json_parsers: HashMap<u32, QualifiedName>,
}

impl SchemaCache {
    /// The relation `schema.name`, if it exists.
    pub fn relation(&self, schema: &str, name: &str) -> Option<&Arc<Relation>> {
        self.relations.get(&QualifiedName { schema: schema.to_owned(), name: name.to_owned() })
    }

    /// The function `name` of `relation`'s schema that takes one of its rows (the only
    /// argument without a default): a computed field or a computed relationship.
    pub fn computed(&self, relation: &Relation, name: &str) -> Option<&Function> {
        let q = QualifiedName { schema: relation.name.schema.clone(), name: name.to_owned() };
        self.functions.get(&q)?.iter().find(|f| {
            matches!(f.args.first(), Some(a) if a.type_oid == relation.row_type && relation.row_type != 0)
                && f.args.iter().skip(1).all(|a| a.has_default)
        })
    }

    /// PostgREST's "Perhaps you meant" suggestion: the closest relation name in `schema`.
    pub fn suggest_relation(&self, schema: &str, name: &str) -> Option<String> {
        similar(name, self.relations.keys().filter(|q| q.schema == schema).map(|q| q.name.as_str()))
    }
}

/// The closest candidate by edit distance, if it is close enough to be a plausible typo.
pub fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<String> {
    let limit = name.chars().count().max(3) / 2 + 1;
    candidates
        .map(|c| (levenshtein(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1)))
        .map(|(_, c)| c.to_owned())
}

/// The candidate most like `name`, if it is like enough to suggest: PostgREST's fuzzy match
/// for tables and functions ([`fuzzy::closest`]) with a score of 0.75 or more, so `itemz`
/// suggests `items` and `nope` no `docs`.
pub fn similar<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<String> {
    fuzzy::closest(name, candidates, 0.75).map(str::to_owned)
}

/// The edit distance between two strings, in characters.
pub fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The schema cache as requests see it: absent until the first load, then replaced whole.
#[derive(Default)]
pub struct SharedSchema {
    current: ArcSwapOption<SchemaCache>,
    loaded: AtomicU64,
    failed: AtomicU64,
    /// The last load's duration, in microseconds.
    last_load_micros: AtomicU64,
}

impl SharedSchema {
    /// The current snapshot, or `None` before the first successful load.
    pub fn load(&self) -> Option<Arc<SchemaCache>> {
        self.current.load_full()
    }

    /// Replaces the snapshot atomically.
    pub fn store(&self, cache: SchemaCache) {
        self.current.store(Some(Arc::new(cache)));
    }

    /// Replaces the snapshot with one that took `took` to load from the catalog.
    pub fn store_loaded(&self, cache: SchemaCache, took: std::time::Duration) {
        self.store(cache);
        self.loaded.fetch_add(1, Ordering::Relaxed);
        self.last_load_micros.store(took.as_micros() as u64, Ordering::Relaxed);
    }

    /// Counts a load that failed.
    pub fn load_failed(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    /// PostgREST's schema cache metrics, in Prometheus text.
    pub fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write;
        let _ = write!(
            out,
            "# HELP pgrst_schema_cache_loads_total The total number of times the schema cache was loaded\n\
             # TYPE pgrst_schema_cache_loads_total counter\n\
             pgrst_schema_cache_loads_total{{status=\"SUCCESS\"}} {}\n\
             pgrst_schema_cache_loads_total{{status=\"FAIL\"}} {}\n\
             # HELP pgrst_schema_cache_query_time_seconds The query time in seconds of the last schema cache load\n\
             # TYPE pgrst_schema_cache_query_time_seconds gauge\n\
             pgrst_schema_cache_query_time_seconds {}\n",
            self.loaded.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
            self.last_load_micros.load(Ordering::Relaxed) as f64 / 1e6
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        let names = ["items", "documents", "types"];
        assert_eq!(closest("itemz", names.into_iter()), Some("items".into()));
        assert_eq!(closest("document", names.into_iter()), Some("documents".into()));
        assert_eq!(closest("zzzzzzzz", names.into_iter()), None);
        assert_eq!(similar("itemz", names.into_iter()), Some("items".into()));
        assert_eq!(similar("nope", ["docs"].into_iter()), None);
    }
}
