//! Content negotiation: the first producible media type of the `Accept` list.

use rowgate_request::MediaType;

use crate::error::{code, Error};

/// The response format of a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Media {
    /// A JSON array of objects (`application/json`, `vnd.pgrst.array+json`).
    Json {
        /// `nulls=stripped`: drop null members, recursively.
        strip_nulls: bool,
    },
    /// One JSON object (`application/vnd.pgrst.object+json`); 406 unless exactly one row.
    Single {
        /// `nulls=stripped`.
        strip_nulls: bool,
    },
    /// `text/csv`.
    Csv,
    /// `application/geo+json`: a FeatureCollection, each row a Feature by PostGIS's
    /// `ST_AsGeoJSON` (only offered when PostGIS is installed).
    GeoJson,
}

impl Media {
    /// The `Content-Type` header value.
    pub fn content_type(self) -> &'static str {
        match self {
            Media::Json { strip_nulls: false } => "application/json; charset=utf-8",
            Media::Json { strip_nulls: true } => {
                "application/vnd.pgrst.array+json;nulls=stripped; charset=utf-8"
            }
            Media::Single { strip_nulls: false } => "application/vnd.pgrst.object+json; charset=utf-8",
            Media::Single { strip_nulls: true } => {
                "application/vnd.pgrst.object+json;nulls=stripped; charset=utf-8"
            }
            Media::Csv => "text/csv; charset=utf-8",
            Media::GeoJson => "application/geo+json; charset=utf-8",
        }
    }
}

/// `application/vnd.pgrst.plan`: the response is PostgreSQL's `EXPLAIN` of the statement
/// instead of its rows (`db-plan-enabled`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explain {
    /// `+json` rather than text (the default).
    pub json: bool,
    /// `options=analyze|verbose|settings|buffers|wal`, validated, in the order given.
    pub options: Vec<&'static str>,
    /// The `Content-Type` of the answer, which names the options and the media type planned for.
    pub content_type: String,
}

/// A media type handler chosen for a read ([`crate::schema::MediaHandler`]): the body is one
/// value, the function's own or the aggregate's over the rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handler {
    /// The aggregate; `None`: the function's own value.
    pub aggregate: Option<crate::schema::QualifiedName>,
    /// The relation whose row type the aggregate takes (`None`: `anyelement`).
    pub row_type: Option<crate::schema::QualifiedName>,
    /// The body is bytes (a `bytea` domain), else text.
    pub binary: bool,
    /// The `Content-Type` header.
    pub content_type: String,
}

/// What a read's handlers are looked up for: the function called or the relation read (a
/// function returning a table's rows is that table), and whether `select=` is the default.
pub struct HandlerTarget<'a> {
    /// Handlers in the schema cache.
    pub handlers: &'a [crate::schema::MediaHandler],
    /// The function or relation.
    pub identifier: &'a crate::schema::QualifiedName,
    /// No `select=` (or `select=*`): handlers of the identifier itself apply.
    pub default_select: bool,
}

impl HandlerTarget<'_> {
    /// PostgREST's lookup for one accepted media type: the identifier's `*/*` handler, then its
    /// handler of that type (both only with the default `select`), then an `anyelement`
    /// aggregate of that type.
    fn lookup(&self, media_type: &str) -> Option<Handler> {
        let own = |wanted: &str| {
            self.handlers.iter().find(|h| {
                self.default_select
                    && h.applies_to.as_ref() == Some(self.identifier)
                    && h.media_type == wanted
            })
        };
        let any_relation =
            || self.handlers.iter().find(|h| h.applies_to.is_none() && h.media_type == media_type);
        let found = own("*/*").or_else(|| own(media_type)).or_else(any_relation)?;
        Some(Handler {
            aggregate: found.aggregate.clone(),
            row_type: found.aggregate.as_ref().and(found.applies_to.clone()),
            binary: found.binary,
            content_type: handler_content_type(&found.media_type),
        })
    }
}

/// A handler's `Content-Type`, as PostgREST writes it: `*/*` answers `application/octet-stream`;
/// the types PostgREST knows as text carry a charset.
fn handler_content_type(media_type: &str) -> String {
    match media_type {
        "*/*" => "application/octet-stream".to_owned(),
        "application/json"
        | "application/geo+json"
        | "application/openapi+json"
        | "text/csv"
        | "text/plain"
        | "text/xml" => {
            format!("{media_type}; charset=utf-8")
        }
        other => other.to_owned(),
    }
}

/// [`negotiate`], with the database's media type handlers: a handler that fits an accepted
/// media type answers it, before rowgate's own (PostgREST's vendor types and plans excepted,
/// which no handler overrides).
pub fn negotiate_with_handlers(
    accept: &[MediaType],
    plan_enabled: bool,
    postgis: bool,
    target: &HandlerTarget<'_>,
) -> Result<(Media, Option<Explain>, Option<Handler>), Error> {
    if !target.handlers.is_empty() {
        // No Accept header is `*/*`.
        let any = [MediaType::Any];
        let wanted = if accept.is_empty() { &any[..] } else { accept };
        for media in wanted {
            let name = match media {
                // PostgREST's own, which no handler overrides: rowgate's negotiation from here
                // (a plan it may not give is passed over, as there).
                MediaType::ArrayJson { .. } | MediaType::SingleObject { .. } => break,
                MediaType::Plan { .. } if plan_enabled => break,
                MediaType::Plan { .. } => continue,
                MediaType::Json => "application/json".to_owned(),
                MediaType::Csv => "text/csv".to_owned(),
                MediaType::GeoJson => "application/geo+json".to_owned(),
                MediaType::OpenApi => "application/openapi+json".to_owned(),
                MediaType::OpenApi31 => "application/vnd.oai.openapi+json".to_owned(),
                MediaType::Any => "*/*".to_owned(),
                MediaType::Other(other) => other.to_ascii_lowercase(),
            };
            if let Some(handler) = target.lookup(&name) {
                return Ok((Media::Json { strip_nulls: false }, None, Some(handler)));
            }
            if producible(media, plan_enabled, postgis) {
                break;
            }
        }
    }
    let (media, explain) = negotiate(accept, plan_enabled, postgis)?;
    Ok((media, explain, None))
}

/// Whether rowgate itself answers `media`.
fn producible(media: &MediaType, plan_enabled: bool, postgis: bool) -> bool {
    match media {
        MediaType::Json | MediaType::Any | MediaType::ArrayJson { .. } | MediaType::SingleObject { .. } => {
            true
        }
        MediaType::Csv => true,
        MediaType::GeoJson => postgis,
        MediaType::Plan { raw } => plan_enabled && explain(raw).is_some(),
        MediaType::OpenApi | MediaType::OpenApi31 | MediaType::Other(_) => false,
    }
}

/// Picks the response media type, in the client's order of preference; with `plan_enabled`,
/// a plan media type yields the media type it plans for and the [`Explain`] asked for.
fn negotiate(
    accept: &[MediaType],
    plan_enabled: bool,
    postgis: bool,
) -> Result<(Media, Option<Explain>), Error> {
    if accept.is_empty() {
        return Ok((Media::Json { strip_nulls: false }, None));
    }
    for media in accept {
        let chosen = match media {
            MediaType::Json | MediaType::Any => Media::Json { strip_nulls: false },
            MediaType::ArrayJson { strip_nulls } => Media::Json { strip_nulls: *strip_nulls },
            MediaType::SingleObject { strip_nulls } => Media::Single { strip_nulls: *strip_nulls },
            MediaType::Csv => Media::Csv,
            MediaType::GeoJson if postgis => Media::GeoJson,
            MediaType::Plan { raw } if plan_enabled => match explain(raw) {
                Some((planned, explain)) => return Ok((planned, Some(explain))),
                None => continue,
            },
            _ => continue,
        };
        return Ok((chosen, None));
    }
    let names: Vec<String> = accept.iter().map(name).collect();
    Err(Error::api(
        code::UNACCEPTABLE_MEDIA,
        format!("None of these media types are available: {}", names.join(", ")),
    ))
}

/// Reads `[+json|+text][; for="media/type"][; options=a|b]`; `None` if it names something
/// rowgate cannot plan for.
fn explain(raw: &str) -> Option<(Media, Explain)> {
    let mut parts = raw.split(';').map(str::trim);
    let json = match parts.next().unwrap_or("") {
        "+json" => true,
        "" | "+text" => false,
        _ => return None,
    };
    let (mut planned, mut planned_name, mut options) =
        (Media::Json { strip_nulls: false }, "application/json", Vec::new());
    // postgrest-js ends the list with a `;`.
    for param in parts.filter(|p| !p.is_empty()) {
        let (key, value) = param.split_once('=')?;
        let value = value.trim().trim_matches('"');
        match key.trim() {
            "for" => {
                (planned, planned_name) = match value {
                    "application/json" => (Media::Json { strip_nulls: false }, "application/json"),
                    "text/csv" => (Media::Csv, "text/csv"),
                    "application/vnd.pgrst.object+json" | "application/vnd.pgrst.object" => {
                        (Media::Single { strip_nulls: false }, "application/vnd.pgrst.object+json")
                    }
                    "application/vnd.pgrst.array+json" | "application/vnd.pgrst.array" => {
                        (Media::Json { strip_nulls: false }, "application/json")
                    }
                    _ => return None,
                }
            }
            // As PostgREST: the known options, in its order; anything else is ignored.
            "options" => {
                let given: Vec<&str> = value.split('|').map(str::trim).collect();
                options = ["analyze", "verbose", "settings", "buffers", "wal"]
                    .into_iter()
                    .filter(|o| given.contains(o))
                    .collect();
            }
            _ => {}
        }
    }
    let mut content_type =
        format!("application/vnd.pgrst.plan+{}; for=\"{planned_name}\"", if json { "json" } else { "text" });
    if !options.is_empty() {
        content_type.push_str("; options=");
        content_type.push_str(&options.join("|"));
    }
    content_type.push_str("; charset=utf-8");
    Some((planned, Explain { json, options, content_type }))
}

fn name(media: &MediaType) -> String {
    match media {
        MediaType::Json => "application/json".into(),
        MediaType::ArrayJson { .. } => "application/vnd.pgrst.array+json".into(),
        MediaType::SingleObject { .. } => "application/vnd.pgrst.object+json".into(),
        MediaType::Csv => "text/csv".into(),
        MediaType::OpenApi => "application/openapi+json".into(),
        MediaType::OpenApi31 => "application/vnd.oai.openapi+json;version=3.1".into(),
        MediaType::GeoJson => "application/geo+json".into(),
        MediaType::Plan { raw } => format!("application/vnd.pgrst.plan{raw}"),
        MediaType::Any => "*/*".into(),
        MediaType::Other(raw) => raw.clone(),
    }
}

/// What the API root answers with: its OpenAPI version and `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RootMedia {
    /// OpenAPI 3.1 (else Swagger 2.0, PostgREST's).
    pub v31: bool,
    /// The `Content-Type`.
    pub content_type: &'static str,
}

/// The root's media type, as PostgREST's (`application/openapi+json` for any of
/// `application/openapi+json`, `application/json` or `*/*`, in the version `openapi-version`
/// names), or OpenAPI 3.1 by its own media type; 406 for anything else.
pub fn negotiate_root(accept: &[MediaType], default_v31: bool) -> Result<RootMedia, Error> {
    let openapi = |v31: bool| RootMedia {
        v31,
        content_type: if v31 {
            "application/vnd.oai.openapi+json;version=3.1"
        } else {
            "application/openapi+json; charset=utf-8"
        },
    };
    if accept.is_empty() {
        return Ok(openapi(default_v31));
    }
    for media in accept {
        return Ok(match media {
            // PostgREST answers `application/json` with its OpenAPI media type too.
            MediaType::OpenApi | MediaType::Any | MediaType::Json => openapi(default_v31),
            MediaType::OpenApi31 => openapi(true),
            _ => continue,
        });
    }
    let names: Vec<String> = accept.iter().map(name).collect();
    Err(Error::api(
        code::UNACCEPTABLE_MEDIA,
        format!("None of these media types are available: {}", names.join(", ")),
    ))
}
