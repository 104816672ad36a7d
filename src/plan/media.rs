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

/// Picks the response media type, in the client's order of preference; with `plan_enabled`,
/// a plan media type yields the media type it plans for and the [`Explain`] asked for.
pub fn negotiate(
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
        MediaType::GeoJson => "application/geo+json".into(),
        MediaType::Plan { raw } => format!("application/vnd.pgrst.plan{raw}"),
        MediaType::Any => "*/*".into(),
        MediaType::Other(raw) => raw.clone(),
    }
}
