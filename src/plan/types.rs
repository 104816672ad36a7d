//! The plan's types: what the SQL stage of each backend renders for one request.

use std::sync::Arc;

use rowgate_request::{Filter, LogicOp, OrderTerm, PreferCount};

use super::{Explain, Media, MutatePlan, RowWindow};
use crate::schema::{Relation, ValueKind};

/// What the SQL stage renders for one request.
#[derive(Debug)]
pub enum Plan {
    /// A read of a table or view.
    Read(ReadPlan),
    /// A write to a table or view.
    Mutate(MutatePlan),
    /// `OPTIONS`: the methods the resource takes, for the `Allow` header.
    Options(&'static str),
    /// `GET /` (or `HEAD`): the OpenAPI description of a schema.
    Describe(DescribePlan),
}

/// The API root's answer: which schema is described, and how.
#[derive(Debug)]
pub struct DescribePlan {
    /// The schema (`Accept-Profile`, else the first of `db-schemas`).
    pub schema: String,
    /// The OpenAPI version and `Content-Type`.
    pub media: super::media::RootMedia,
    /// HEAD: headers only.
    pub head: bool,
}

/// A GET or HEAD on a table or view.
#[derive(Debug)]
pub struct ReadPlan {
    /// The relation read.
    pub relation: Arc<Relation>,
    /// The schema the request runs in (the first of `db-schemas` or the requested profile).
    pub schema: String,
    /// Output columns, in `select=` order.
    pub columns: Vec<OutputColumn>,
    /// Conditions, all of which must hold.
    pub conditions: Vec<Condition>,
    /// `ORDER BY` terms.
    pub order: Vec<OrderBy>,
    /// The rows asked for.
    pub window: RowWindow,
    /// `Prefer: count=`, if any.
    pub count: Option<PreferCount>,
    /// The response media type.
    pub media: Media,
    /// HEAD: compute headers only.
    pub head: bool,
    /// `Prefer: timezone=`, when valid: the session time zone of the request.
    pub timezone: Option<String>,
    /// The honoured preferences, for `Preference-Applied`.
    pub applied: Vec<String>,
    /// `/rpc/fn`: the function call whose rows are read instead of the relation's.
    pub call: Option<Call>,
    /// How the rows become the body.
    pub result: ResultShape,
    /// POST /rpc: the call runs in an explicit transaction (through the write path).
    pub transaction: Option<RpcTransaction>,
    /// `Accept: application/vnd.pgrst.plan`: answer with the statement's plan instead.
    pub explain: Option<Explain>,
    /// PostGIS's schema, for `application/geo+json`.
    pub postgis: Option<String>,
    /// A media type handler of the database's makes the body (PostgreSQL).
    pub handler: Option<super::Handler>,
}

/// A function call in `FROM`.
#[derive(Debug, Clone)]
pub struct Call {
    /// The function.
    pub function: crate::schema::QualifiedName,
    /// Its arguments.
    pub args: CallArgs,
    /// The result is one value per row (read as the column `pgrst_scalar`).
    pub scalar: bool,
    /// The function is VOLATILE.
    pub volatile: bool,
    /// The function may set `response.headers` or `response.status`.
    pub sets_response: bool,
}

/// A call's arguments, as the SQL stage binds them.
#[derive(Debug, Clone)]
pub enum CallArgs {
    /// Named arguments with their text values (query string), each cast to its type.
    Text(Vec<(crate::schema::FunctionArg, ArgValue)>),
    /// Named arguments unpacked from one JSON object by `json_to_record`.
    Json {
        /// A JSON array holding the object.
        payload: String,
        /// The arguments it gives.
        args: Vec<crate::schema::FunctionArg>,
    },
    /// The whole body as the one unnamed argument: json or jsonb, or a raw body's bytea (as
    /// bytea's hex input), text or xml.
    Body {
        /// The body.
        payload: String,
        /// The parameter's type.
        type_name: String,
    },
}

/// An argument's value from the query string.
#[derive(Debug, Clone)]
pub enum ArgValue {
    /// One value.
    One(String),
    /// A variadic argument's values (`?v=1&v=2`), one array element each.
    Many(Vec<String>),
}

/// How a read's rows become its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultShape {
    /// An array of objects (or one object with a singular `Accept`).
    Rows,
    /// One object: a function returning one row of a composite type.
    Object,
    /// One JSON value: a function returning a scalar.
    Scalar,
    /// An array of JSON values: a function returning a set of scalars.
    ScalarSet,
    /// No body (204): a function returning void.
    Void,
}

/// How a POST /rpc call's transaction runs and ends.
#[derive(Debug, Clone, Copy)]
pub struct RpcTransaction {
    /// Read-only, for a function that is not VOLATILE.
    pub read_only: bool,
    /// Rolled back at the end (`db-tx-end`, `Prefer: tx=rollback`).
    pub rollback: bool,
    /// `Prefer: handling=strict, max-affected=N` (PGRST124; PGRST128 on a function that returns no set).
    pub max_affected: Option<u64>,
}

/// A value expression over the relation's columns. Column names in it come from the schema
/// cache; JSON keys and filter values are bound as parameters by the SQL stage.
#[derive(Debug, Clone)]
pub enum Expr {
    /// A column.
    Column(String),
    /// `col->a->>b`.
    JsonPath {
        /// The column.
        column: String,
        /// The steps.
        steps: Vec<rowgate_request::JsonStep>,
        /// Composite and array columns are read through `to_jsonb`, as PostgREST does.
        to_jsonb: bool,
    },
    /// `expr::type`, `type` checked against the schema cache's type names.
    Cast(Box<Expr>, String),
    /// An embedded resource: a correlated subquery that yields JSON.
    Embed(Box<EmbedPlan>),
    /// A computed field: `fn(row)` of the level's row (`pgrst_<depth>`).
    Computed {
        /// The function.
        function: crate::schema::QualifiedName,
        /// The level whose row it takes.
        depth: usize,
    },
    /// `count(*)` (no argument) or `fn(arg)`: an aggregate over the level's rows, which are then
    /// grouped by the level's other output columns.
    Aggregate(rowgate_request::Aggregate, Option<Box<Expr>>),
    /// `fn(expr)`: a domain's value as its data representation says (an implicit cast from the
    /// domain to `json`, PostgREST's "domain representations").
    Represented {
        /// The cast's function.
        function: crate::schema::QualifiedName,
        /// The value.
        expr: Box<Expr>,
    },
    /// A value of an embedded resource's row, by a correlated subquery: a to-one spread
    /// column (`...rel(col)`), a to-one embedded column ordered by (`order=rel(col)`), or
    /// with `many` the array of that value over a to-many embed's rows (a to-many spread).
    Related {
        /// The embedded resource (its join, conditions, order and window).
        embed: Box<EmbedPlan>,
        /// The value, over the embedded relation's columns.
        expr: Box<Expr>,
        /// Aggregate the values of every related row into a JSON array.
        many: bool,
    },
}

impl Expr {
    /// Whether the value is an aggregate (`count()`, `sum(x)`, ..., possibly cast): the level
    /// is then grouped by its other output columns.
    pub fn is_aggregate(&self) -> bool {
        match self {
            Expr::Aggregate(..) => true,
            Expr::Cast(inner, _) => matches!(**inner, Expr::Aggregate(..)),
            _ => false,
        }
    }
}

/// A resource embedded through a foreign key, rendered as a JSON object (to-one) or array
/// (to-many) by a correlated subquery.
#[derive(Debug, Clone)]
pub struct EmbedPlan {
    /// The embedded relation.
    pub relation: Arc<Relation>,
    /// Its output columns (which may embed further).
    pub columns: Vec<OutputColumn>,
    /// (parent column, embedded column) pairs the foreign key joins on.
    pub join: Vec<(String, String)>,
    /// One-to-many (an array) rather than many-to-one (an object).
    pub to_many: bool,
    /// Nesting level: the subquery aliases its relation `pgrst_<depth>`, its parent is
    /// `pgrst_<depth - 1>`.
    pub depth: usize,
    /// `embed.col=op.value` filters and `embed.or=(...)` trees.
    pub conditions: Vec<Condition>,
    /// `embed.order=`.
    pub order: Vec<OrderBy>,
    /// `embed.limit=` / `embed.offset=`.
    pub window: RowWindow,
    /// `!inner`: parent rows without a related row are left out.
    pub inner: bool,
    /// Many-to-many: the join table; `join` then pairs parent columns with its columns.
    pub through: Option<Junction>,
    /// A computed relationship: the function of the parent's row whose result rows are the
    /// embedded ones (`join` is then empty).
    pub computed: Option<crate::schema::QualifiedName>,
}

/// The join table of a many-to-many embed.
#[derive(Debug, Clone)]
pub struct Junction {
    /// The join table.
    pub relation: Arc<Relation>,
    /// (join-table column, embedded column) pairs.
    pub to_child: Vec<(String, String)>,
}

/// One output column: its JSON key, expression, and how its values render.
#[derive(Debug, Clone)]
pub struct OutputColumn {
    /// The key in the JSON object (or CSV header).
    pub key: String,
    /// The expression selected.
    pub expr: Expr,
    /// How values render.
    pub kind: ValueKind,
}

impl OutputColumn {
    /// Whether the column appears in the response: an empty embed (`rel()`) only filters.
    pub fn is_output(&self) -> bool {
        !matches!(&self.expr, Expr::Embed(e) if e.columns.is_empty())
    }
}

/// A boolean condition of `WHERE`.
#[derive(Debug, Clone)]
pub enum Condition {
    /// One filter on an expression of known kind.
    Filter {
        /// The filtered expression.
        expr: Expr,
        /// Its value kind (decides `to_tsvector` wrapping for full-text search).
        kind: ValueKind,
        /// The filter as parsed.
        filter: Filter,
        /// The function that reads the filter's values, when the column's domain has a data
        /// representation from `text` (PostgREST's "domain representations").
        parse: Option<crate::schema::QualifiedName>,
    },
    /// `[NOT] EXISTS` a row of an embedded resource: `!inner`, `embed=not.is.null`.
    Exists {
        /// The embedded resource, with its join and its own conditions.
        embed: Box<EmbedPlan>,
        /// `NOT EXISTS` (`embed=is.null`).
        negated: bool,
    },
    /// `[NOT] (a AND/OR b ...)`.
    Logic {
        /// `not.` given.
        negated: bool,
        /// `and` or `or`.
        op: LogicOp,
        /// Operands.
        children: Vec<Condition>,
    },
}

/// One `ORDER BY` term.
#[derive(Debug, Clone)]
pub struct OrderBy {
    /// The expression.
    pub expr: Expr,
    /// The term as parsed (direction and nulls).
    pub term: OrderTerm,
}
