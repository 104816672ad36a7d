//! Content negotiation: the first producible media type of the `Accept` list.

use http::StatusCode;
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
        }
    }
}

/// Picks the response media type for a read, in the client's order of preference.
pub fn negotiate(accept: &[MediaType]) -> Result<Media, Error> {
    if accept.is_empty() {
        return Ok(Media::Json { strip_nulls: false });
    }
    for media in accept {
        let chosen = match media {
            MediaType::Json | MediaType::Any => Media::Json { strip_nulls: false },
            MediaType::ArrayJson { strip_nulls } => Media::Json { strip_nulls: *strip_nulls },
            MediaType::SingleObject { strip_nulls } => Media::Single { strip_nulls: *strip_nulls },
            MediaType::Csv => Media::Csv,
            _ => continue,
        };
        return Ok(chosen);
    }
    let names: Vec<String> = accept.iter().map(name).collect();
    Err(Error::api(
        StatusCode::NOT_ACCEPTABLE,
        code::UNACCEPTABLE_MEDIA,
        format!("None of these media types are available: {}", names.join(", ")),
    ))
}

fn name(media: &MediaType) -> String {
    match media {
        MediaType::Json => "application/json".into(),
        MediaType::ArrayJson { .. } => "application/vnd.pgrst.array+json".into(),
        MediaType::SingleObject { .. } => "application/vnd.pgrst.object+json".into(),
        MediaType::Csv => "text/csv".into(),
        MediaType::OpenApi => "application/openapi+json".into(),
        MediaType::GeoJson => "application/geo+json".into(),
        MediaType::Plan { raw } => raw.clone(),
        MediaType::Any => "*/*".into(),
        MediaType::Other(raw) => raw.clone(),
    }
}
