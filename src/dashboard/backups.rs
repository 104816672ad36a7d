//! The dashboard's backups (`/_/api/backups`): those in `backup-dir` listed, one taken now, one
//! downloaded. Only the SQLite default has them; PostgreSQL is backed up with its own tools.

use http::{header, Method, Response, StatusCode};
use serde_json::json;

use super::{json, Dashboard};
use crate::backup::{self, Sources};
use crate::error::{code, Error};
use crate::response::Body;

/// Answers `GET backups`, `POST backups` and `GET backups/<name>`.
pub async fn serve(
    dashboard: &Dashboard,
    method: &Method,
    name: Option<&str>,
) -> Result<Response<Body>, Error> {
    let config = &dashboard.config;
    let (Some(sources), Some(dir)) = (Sources::of(config), config.backup.dir.clone()) else {
        return Err(Error::api(
            code::UNSUPPORTED,
            "backups are of an SQLite file; PostgreSQL is backed up with pg_basebackup and its WAL archive",
        ));
    };
    let failed = |e: &dyn std::fmt::Display| Error::internal(format!("backup: {e}"));
    match (method, name) {
        (&Method::GET, None) => {
            let listed = backup::list(&dir).map_err(|e| failed(&e))?;
            Ok(json(
                StatusCode::OK,
                &json!({
                    "dir": dir.display().to_string(),
                    "schedule": config.backup.schedule,
                    "keep": config.backup.keep,
                    "backups": listed,
                }),
            ))
        }
        (&Method::POST, None) => {
            let taken = backup::schedule::take_into(sources, dir, None).await.map_err(|e| failed(&e))?;
            Ok(json(StatusCode::CREATED, &json!(taken)))
        }
        (&Method::GET, Some(name)) => {
            let not_found = || Error::api(code::DASHBOARD_NOT_FOUND, format!("no backup {name}"));
            if !backup::is_backup_name(name) {
                return Err(not_found());
            }
            let file = tokio::fs::File::open(dir.join(name)).await.map_err(|_| not_found())?;
            let len = file.metadata().await.map_err(|e| failed(&e))?.len();
            let chunks = tokio_util::io::ReaderStream::with_capacity(file, 256 * 1024);
            let mut r = Response::new(Body::stream(chunks, len));
            let h = r.headers_mut();
            h.insert(header::CONTENT_TYPE, http::HeaderValue::from_static("application/gzip"));
            let disposition = format!("attachment; filename=\"{name}\"");
            h.insert(
                header::CONTENT_DISPOSITION,
                http::HeaderValue::from_str(&disposition).expect("checked name"),
            );
            Ok(r)
        }
        _ => Err(Error::api(code::DASHBOARD_NOT_FOUND, "no such dashboard endpoint")),
    }
}
