//! The parsed form of a PostgREST request: plain data, no schema knowledge.
//!
//! Names follow PostgREST's `ApiRequest` and `QueryParams` so a reader can go from its docs to here.

/// HTTP methods rowgate distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
    Patch,
    Put,
    Delete,
    Options,
}

impl Method {
    /// The method's name, as HTTP writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Patch => "PATCH",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Options => "OPTIONS",
        }
    }
}

/// What the path names: `/`, `/{relation}` or `/rpc/{function}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `/`: the OpenAPI root.
    Root,
    /// `/{name}`: a table, view or foreign table (percent-decoded, any Unicode).
    Relation(String),
    /// `/rpc/{name}`: a function.
    Rpc(String),
}

/// A request after parsing the path, query string and headers.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiRequest {
    /// The HTTP method.
    pub method: Method,
    /// What the path names.
    pub target: Target,
    /// Schema asked for with `Accept-Profile` (GET/HEAD) or `Content-Profile` (others), if any.
    pub profile: Option<String>,
    /// The query string, parsed.
    pub query: QueryParams,
    /// The `Prefer` headers, parsed.
    pub preferences: Preferences,
    /// The `Range` header (with `Range-Unit: items`), if any: rows `first..=last`.
    pub range_header: Option<RowRange>,
    /// The `Accept` header as media types in order of preference (highest q first).
    /// Empty when there is no `Accept` header, which means `*/*`.
    pub accept: Vec<MediaType>,
    /// The `Content-Type` header's media type (lower-case, without parameters), if any.
    pub content_type: Option<String>,
}

/// A path through embedded resources: empty for the top level, `["actors"]` for
/// `actors.order=...`, `["roles", "actors"]` for `roles.actors.first_name=...`.
pub type EmbedPath = Vec<String>;

/// Everything in the query string.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QueryParams {
    /// `select=`; `[SelectItem::Star]` when absent.
    pub select: Vec<SelectItem>,
    /// Horizontal filters `col=op.value`, with the embed they apply to, in URL order.
    pub filters: Vec<(EmbedPath, Filter)>,
    /// `or=(...)`, `and=(...)`, `not.or=(...)`, `not.and=(...)` trees, with their embed path.
    pub logic: Vec<(EmbedPath, LogicTree)>,
    /// `order=` terms by embed path (the top level has an empty path), in URL order.
    pub order: Vec<(EmbedPath, Vec<OrderTerm>)>,
    /// `limit=` / `offset=` by embed path.
    pub ranges: Vec<(EmbedPath, LimitOffset)>,
    /// `columns=` (for writes), if given.
    pub columns: Option<Vec<String>>,
    /// `on_conflict=` (for upserts), if given.
    pub on_conflict: Option<Vec<String>>,
    /// Parameters that are not reserved words and did not parse as filters, kept for RPC
    /// arguments (`GET /rpc/fn?a=1`). For a relation they are an error raised by the parser.
    pub rpc_params: Vec<(String, String)>,
}

/// `limit` and `offset` for one level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LimitOffset {
    /// `limit=N`, if given.
    pub limit: Option<u64>,
    /// `offset=N`, if given.
    pub offset: Option<u64>,
}

/// An inclusive row range from the `Range` header: `Range: 0-9` or open-ended `Range: 10-`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowRange {
    /// First row, zero-based.
    pub first: u64,
    /// Last row, inclusive; `None` for an open-ended range.
    pub last: Option<u64>,
}

/// One item of `select=`.
#[derive(Debug, Clone, PartialEq)]
pub enum SelectItem {
    /// `*`.
    Star,
    /// `alias:col->json->>path::cast`, optionally with an aggregate `col.sum()`.
    Field {
        /// The column and its JSON path.
        field: Field,
        /// `alias:` if given.
        alias: Option<String>,
        /// `::type` if given (an identifier-like type name, possibly with `[]`).
        cast: Option<String>,
        /// `.sum()` etc. if given.
        aggregate: Option<Aggregate>,
        /// A cast after the aggregate: `amount.avg()::int`.
        aggregate_cast: Option<String>,
    },
    /// `count()` with no column, optionally aliased and cast.
    CountAll {
        /// `alias:` if given.
        alias: Option<String>,
        /// `::type` if given.
        cast: Option<String>,
    },
    /// An embedded resource `alias:name!hint!inner(...)` or a spread `...name(...)`.
    Embed(Embed),
}

/// An embedded resource in `select=` (planned in a later stage; parsed fully here).
#[derive(Debug, Clone, PartialEq)]
pub struct Embed {
    /// The relation (or computed relationship) name.
    pub name: String,
    /// `alias:` if given.
    pub alias: Option<String>,
    /// `!fk_name` or `!column` disambiguation hint, if given.
    pub hint: Option<String>,
    /// `!inner` or `!left`, if given.
    pub join: Option<JoinType>,
    /// `...name(...)`.
    pub spread: bool,
    /// The items selected inside the parentheses (may be empty: `rel()`).
    pub select: Vec<SelectItem>,
}

/// `!inner` or `!left`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinType {
    /// `!inner`.
    Inner,
    /// `!left`.
    Left,
}

/// Aggregate functions of `select=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregate {
    /// `count()`.
    Count,
    /// `sum()`.
    Sum,
    /// `avg()`.
    Avg,
    /// `max()`.
    Max,
    /// `min()`.
    Min,
}

/// A column with an optional JSON path: `data->a->>b`, `arr->0`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The column name (unquoted, percent-decoded).
    pub name: String,
    /// The `->` / `->>` steps, in order.
    pub json_path: Vec<JsonStep>,
}

/// One step of a JSON path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonStep {
    /// `->>` (text result) rather than `->` (json result).
    pub as_text: bool,
    /// The key or array index.
    pub key: JsonKey,
}

/// A JSON path key: an object key or an array index (negative counts from the end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonKey {
    /// An object key.
    Key(String),
    /// An array index such as `0` or `-1`.
    Index(i64),
}

/// A horizontal filter `field=[not.]op[(mod)].value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    /// The column filtered on.
    pub field: Field,
    /// `not.` given.
    pub negated: bool,
    /// The operator and its operand.
    pub operation: Operation,
}

/// Filter operators and their operands, values kept as the raw (decoded) strings.
#[derive(Debug, Clone, PartialEq)]
pub enum Operation {
    /// Binary comparison operators, with an optional `(any)`/`(all)` quantifier. With a
    /// quantifier, `value` is a PostgreSQL array literal such as `{a,b}`.
    Compare {
        /// The operator.
        op: CompareOp,
        /// `(any)` / `(all)`.
        quantifier: Option<Quantifier>,
        /// The operand text.
        value: String,
    },
    /// `in.(a,"b,c")`: the list items, unquoted and unescaped.
    In(Vec<String>),
    /// `is.null|not_null|true|false|unknown`.
    Is(IsValue),
    /// `isdistinct.value`.
    IsDistinct(String),
    /// `fts|plfts|phfts|wfts[(lang)].query`.
    Fts {
        /// Which `to_tsquery` flavour.
        op: FtsOp,
        /// The text search configuration, if given.
        language: Option<String>,
        /// The query text.
        value: String,
    },
}

/// Comparison-like operators that take one operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    Eq,
    Neq,
    Gt,
    Gte,
    Lt,
    Lte,
    Like,
    Ilike,
    Match,
    Imatch,
    /// `cs`: `@>`.
    Contains,
    /// `cd`: `<@`.
    Contained,
    /// `ov`: `&&`.
    Overlap,
    /// `sl`: `<<`.
    StrictlyLeft,
    /// `sr`: `>>`.
    StrictlyRight,
    /// `nxr`: `&<`.
    NotExtendRight,
    /// `nxl`: `&>`.
    NotExtendLeft,
    /// `adj`: `-|-`.
    Adjacent,
}

impl CompareOp {
    /// The operator as the URL spells it (`eq`, `ilike`, `cs`, ...).
    pub fn name(self) -> &'static str {
        match self {
            CompareOp::Eq => "eq",
            CompareOp::Neq => "neq",
            CompareOp::Gt => "gt",
            CompareOp::Gte => "gte",
            CompareOp::Lt => "lt",
            CompareOp::Lte => "lte",
            CompareOp::Like => "like",
            CompareOp::Ilike => "ilike",
            CompareOp::Match => "match",
            CompareOp::Imatch => "imatch",
            CompareOp::Contains => "cs",
            CompareOp::Contained => "cd",
            CompareOp::Overlap => "ov",
            CompareOp::StrictlyLeft => "sl",
            CompareOp::StrictlyRight => "sr",
            CompareOp::NotExtendRight => "nxr",
            CompareOp::NotExtendLeft => "nxl",
            CompareOp::Adjacent => "adj",
        }
    }
}

/// `(any)` / `(all)` modifiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantifier {
    Any,
    All,
}

/// Operands of `is.`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsValue {
    Null,
    NotNull,
    True,
    False,
    Unknown,
}

/// Full-text search operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FtsOp {
    /// `fts`: `to_tsquery`.
    Fts,
    /// `plfts`: `plainto_tsquery`.
    Plain,
    /// `phfts`: `phraseto_tsquery`.
    Phrase,
    /// `wfts`: `websearch_to_tsquery`.
    Websearch,
}

/// A logic tree from `or=(...)` / `and=(...)`, or one filter inside it.
#[derive(Debug, Clone, PartialEq)]
pub enum LogicTree {
    /// `[not.]and(...)` / `[not.]or(...)`.
    Expr {
        /// `not.` given.
        negated: bool,
        /// `and` or `or`.
        op: LogicOp,
        /// The operands (at least one).
        children: Vec<LogicTree>,
    },
    /// A single filter `col.op.value`.
    Filter(Filter),
}

/// `and` / `or`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogicOp {
    And,
    Or,
}

/// One term of `order=`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderTerm {
    /// The column (with JSON path) ordered by; for `rel(col)` the relation is in `relation`.
    pub field: Field,
    /// `order=directors(last_name)`: ordering by a to-one embedded column.
    pub relation: Option<String>,
    /// `asc` / `desc`, if given.
    pub direction: Option<Direction>,
    /// `nullsfirst` / `nullslast`, if given.
    pub nulls: Option<NullsOrder>,
}

/// Sort direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Asc,
    Desc,
}

/// Placement of nulls in ordering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NullsOrder {
    First,
    Last,
}

/// The `Prefer` header values rowgate understands (RFC 7240; several headers or comma-joined).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Preferences {
    /// `return=minimal|headers-only|representation`.
    pub return_: Option<PreferReturn>,
    /// `count=exact|planned|estimated`.
    pub count: Option<PreferCount>,
    /// `resolution=merge-duplicates|ignore-duplicates`.
    pub resolution: Option<PreferResolution>,
    /// `missing=default|null`.
    pub missing: Option<PreferMissing>,
    /// `handling=strict|lenient`.
    pub handling: Option<PreferHandling>,
    /// `tx=commit|rollback`.
    pub tx: Option<PreferTx>,
    /// `timezone=...` (the raw value).
    pub timezone: Option<String>,
    /// `max-affected=N`.
    pub max_affected: Option<i64>,
    /// `patch=by-key` (rowgate's): a PATCH whose array body updates each row by its primary key.
    pub patch_by_key: bool,
    /// Preferences that were not understood, as given (for `handling=strict` → PGRST122).
    pub invalid: Vec<String>,
}

/// `Prefer: return=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreferReturn {
    Minimal,
    HeadersOnly,
    Representation,
}

/// `Prefer: count=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreferCount {
    Exact,
    Planned,
    Estimated,
}

/// `Prefer: resolution=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreferResolution {
    MergeDuplicates,
    IgnoreDuplicates,
}

/// `Prefer: missing=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreferMissing {
    Default,
    Null,
}

/// `Prefer: handling=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreferHandling {
    Strict,
    Lenient,
}

/// `Prefer: tx=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreferTx {
    Commit,
    Rollback,
}

/// One entry of the `Accept` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MediaType {
    /// `application/json` (also what `*/*` and `application/*` mean).
    Json,
    /// `application/vnd.pgrst.array+json` with `nulls=stripped` if `strip_nulls`.
    ArrayJson {
        /// `nulls=stripped` given.
        strip_nulls: bool,
    },
    /// `application/vnd.pgrst.object+json`, with `nulls=stripped` if `strip_nulls`.
    SingleObject {
        /// `nulls=stripped` given.
        strip_nulls: bool,
    },
    /// `text/csv`.
    Csv,
    /// `application/openapi+json`.
    OpenApi,
    /// `application/vnd.oai.openapi+json`, version 3.1 or none.
    OpenApi31,
    /// `application/geo+json`.
    GeoJson,
    /// `application/vnd.pgrst.plan[+json|+text]` with its parameters (raw).
    Plan {
        /// The subtype suffix and parameters as given.
        raw: String,
    },
    /// `*/*`.
    Any,
    /// Anything else, as given (type/subtype without parameters).
    Other(String),
}
