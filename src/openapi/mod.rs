//! The API root: a description of one exposed schema as a caller may use it — its tables,
//! views and functions with the methods it may call — rendered as PostgREST's Swagger 2.0
//! (`swagger.rs`) or as OpenAPI 3.1 (`v31.rs`). Both are made from one [`Api`], built from the
//! schema cache and what the backend says the caller's role may use ([`Usable`]).

mod swagger;
mod types;
pub mod typescript;
mod v31;

use std::collections::{HashMap, HashSet};

use http::{header, HeaderValue, Response};

use crate::config::{Config, OpenApiMode};
use crate::plan::DescribePlan;
use crate::response::Body;
use crate::schema::{Function, QualifiedName, Relation, SchemaCache};

/// What a role may do to one relation, by its grants (or SQLite's access rules).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Grants {
    /// SELECT: GET and HEAD.
    pub read: bool,
    /// INSERT: POST.
    pub insert: bool,
    /// UPDATE: PATCH.
    pub update: bool,
    /// DELETE: DELETE.
    pub delete: bool,
}

impl Grants {
    /// Every method.
    pub const ALL: Grants = Grants { read: true, insert: true, update: true, delete: true };

    fn any(self) -> bool {
        self.read || self.insert || self.update || self.delete
    }

    fn and(self, other: Grants) -> Grants {
        Grants {
            read: self.read && other.read,
            insert: self.insert && other.insert,
            update: self.update && other.update,
            delete: self.delete && other.delete,
        }
    }
}

/// What a role may use of one schema: its relations with their grants (a relation it has no
/// grant on is absent) and the functions it may execute, by OID.
#[derive(Debug, Default)]
pub struct Usable {
    /// Relations, by name.
    pub relations: HashMap<QualifiedName, Grants>,
    /// Functions' OIDs.
    pub functions: HashSet<u32>,
}

/// Where clients reach the API: `openapi-server-proxy-uri`, else the server's own address and
/// the path the API is served under.
#[derive(Debug, Clone)]
pub struct Server {
    /// `http` or `https`.
    pub scheme: String,
    /// Host name or address (an IPv6 address in brackets).
    pub host: String,
    /// Port.
    pub port: u16,
    /// The API's path, `/` at the root.
    pub base_path: String,
    /// OpenAPI 3's server URL: `openapi-server-proxy-uri`'s, else the API's path alone, which
    /// clients resolve against where they read the description.
    pub url: String,
}

/// One relation as described: the methods the caller may use on it.
pub struct Resource<'s> {
    /// The relation.
    pub relation: &'s Relation,
    /// The methods: what the relation takes and the caller's grants allow.
    pub methods: Grants,
}

/// The description of one schema, as one caller may use it.
pub struct Api<'s> {
    /// The schema described.
    pub schema: &'s str,
    /// `COMMENT ON SCHEMA`: the first line is the title, the rest the description.
    pub comment: Option<&'s str>,
    /// Its tables and views, by name.
    pub resources: Vec<Resource<'s>>,
    /// Its functions callable at `/rpc/<name>`, by name (one per name).
    pub functions: Vec<&'s Function>,
    /// The whole schema cache (relations' foreign key targets, types).
    pub cache: &'s SchemaCache,
    /// Where the API is reached.
    pub server: Server,
    /// `openapi-security-active`: declare the bearer token.
    pub security: bool,
}

impl<'s> Api<'s> {
    /// The description of `schema` for a caller that may use `usable` (`None`: everything,
    /// `openapi-mode = ignore-privileges`).
    pub fn new(
        cache: &'s SchemaCache,
        schema: &'s str,
        usable: Option<&Usable>,
        server: Server,
        security: bool,
    ) -> Api<'s> {
        let mut resources: Vec<Resource<'s>> = cache
            .relations
            .values()
            .filter(|r| r.name.schema == schema && !r.partition)
            .filter_map(|relation| {
                let takes = takes(relation);
                let methods = match usable {
                    None => takes,
                    Some(u) => takes.and(*u.relations.get(&relation.name)?),
                };
                methods.any().then_some(Resource { relation, methods })
            })
            .collect();
        resources.sort_by(|a, b| a.relation.name.name.cmp(&b.relation.name.name));
        let mut functions: Vec<&'s Function> = cache
            .functions
            .iter()
            .filter(|(name, _)| name.schema == schema)
            .filter_map(|(_, overloads)| {
                // PostgREST describes one function per name: the overload with most arguments.
                overloads
                    .iter()
                    .filter(|f| callable(f) && usable.is_none_or(|u| u.functions.contains(&f.oid)))
                    .max_by_key(|f| f.args.len())
            })
            .collect();
        functions.sort_by(|a, b| a.name.name.cmp(&b.name.name));
        Api {
            schema,
            comment: cache.schema_comments.get(schema).map(String::as_str),
            resources,
            functions,
            cache,
            server,
            security,
        }
    }

    /// The schema comment's first line and the rest (leading blank lines dropped), as PostgREST
    /// splits every comment into a summary and a description.
    pub fn title(&self) -> (Option<&'s str>, Option<&'s str>) {
        split_comment(self.comment)
    }
}

/// A comment's first line and the rest, its leading line breaks dropped (`None` when there is
/// no line break).
pub fn split_comment(comment: Option<&str>) -> (Option<&str>, Option<&str>) {
    match comment {
        None => (None, None),
        Some(c) => match c.split_once('\n') {
            Some((first, rest)) => (Some(first), Some(rest.trim_start_matches('\n'))),
            None => (Some(c), None),
        },
    }
}

/// The methods a relation takes: what the database can do on it (every write on a table, what
/// a view or foreign table allows; none on an SQLite full-text table).
fn takes(relation: &Relation) -> Grants {
    let w = relation.writable;
    Grants { read: true, insert: w.insert, update: w.update, delete: w.delete }
}

/// Whether PostgREST would call the function: not a trigger function, and either every argument
/// named or a single unnamed one taking a whole raw body.
fn callable(function: &Function) -> bool {
    let unnamed: Vec<_> = function.args.iter().filter(|a| a.name.is_empty()).collect();
    let raw_body = ["bytea", "json", "jsonb", "text", "xml"];
    function.return_type != "trigger"
        && match unnamed.as_slice() {
            [] => true,
            [one] => function.args.len() == 1 && raw_body.contains(&one.type_name.as_str()),
            _ => false,
        }
}

/// The columns a query parameter can filter on: a column named like one of PostgREST's own
/// parameters (`select`, `order`, `limit`, ...) cannot be filtered on by name, and describing it
/// would name that parameter twice.
pub fn filterable(relation: &Relation) -> impl Iterator<Item = &crate::schema::Column> {
    const RESERVED: [&str; 8] = ["select", "order", "limit", "offset", "on_conflict", "columns", "and", "or"];
    relation.columns.iter().filter(|c| !RESERVED.contains(&c.name.as_str()))
}

/// A name as a JSON Pointer token (`~` and `/` escaped), for a `$ref`.
pub fn pointer(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// A relation's or function's name as a path segment of the description: the characters that
/// would end or template the path (`/`, `?`, `#`, `{`, `}`, `%`) percent-encoded, as a client
/// must send them.
pub fn path_segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '/' | '?' | '#' | '{' | '}' | '%' => out.push_str(&format!("%{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Where the API is reached, for `config` and a request that came under `mounted_at`.
pub fn server(config: &Config, mounted_at: &str) -> Server {
    match &config.openapi.server_proxy_uri {
        Some(p) => Server {
            scheme: p.scheme.clone(),
            host: p.host.clone(),
            port: p.port,
            base_path: p.path.clone(),
            url: p.url(),
        },
        None => {
            let host = match config.server.host {
                ip if ip.is_unspecified() => "0.0.0.0".to_owned(),
                std::net::IpAddr::V6(ip) => format!("[{ip}]"),
                ip => ip.to_string(),
            };
            let base_path = if mounted_at.is_empty() { "/".to_owned() } else { mounted_at.to_owned() };
            Server {
                scheme: "http".into(),
                host,
                port: config.server.port,
                url: base_path.clone(),
                base_path,
            }
        }
    }
}

/// The description's JSON, as `plan` asks for it.
pub fn render(api: &Api<'_>, plan: &DescribePlan) -> serde_json::Value {
    if plan.media.v31 {
        v31::document(api)
    } else {
        swagger::document(api)
    }
}

/// The answer to `GET /`, or to HEAD (`None`: no document is rendered for it).
pub fn respond(plan: &DescribePlan, document: Option<&serde_json::Value>) -> Response<Body> {
    let body = match document {
        Some(d) => Body::from(serde_json::to_vec(d).unwrap_or_default()),
        None => Body::default(),
    };
    let mut response = Response::new(body);
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(plan.media.content_type));
    response
}

/// Whether `config` asks for what the caller may use (else everything is described).
pub fn follows_privileges(config: &Config) -> bool {
    config.openapi.mode == OpenApiMode::FollowPrivileges
}
