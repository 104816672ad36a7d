//! How the API writes values and rows, byte for byte as PostgreSQL and PostgREST do: dates and
//! timestamps as `to_json` writes them, CSV as PostgREST does. The backends render bodies with
//! them; nothing here knows of HTTP.

pub mod csv;
pub mod datetime;
