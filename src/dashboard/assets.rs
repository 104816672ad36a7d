//! The dashboard's page, embedded in the binary: `dashboard/public` as written and
//! `dashboard/dist` as TypeScript compiles `dashboard/src` (`scripts/check-dashboard` checks
//! that the two agree). Nothing is fetched from elsewhere at run time; the policy says so.

use http::{header, HeaderValue, Method, Response, StatusCode};

use crate::response::Body;

/// Each file, by its path below `/_/`.
const FILES: [(&str, &str, &[u8]); 14] = [
    ("index.html", "text/html; charset=utf-8", include_bytes!("../../dashboard/public/index.html")),
    ("app.css", "text/css; charset=utf-8", include_bytes!("../../dashboard/public/app.css")),
    ("activity.js", JS, include_bytes!("../../dashboard/dist/activity.js")),
    ("api.js", JS, include_bytes!("../../dashboard/dist/api.js")),
    ("dom.js", JS, include_bytes!("../../dashboard/dist/dom.js")),
    ("keys.js", JS, include_bytes!("../../dashboard/dist/keys.js")),
    ("main.js", JS, include_bytes!("../../dashboard/dist/main.js")),
    ("realtime.js", JS, include_bytes!("../../dashboard/dist/realtime.js")),
    ("rules.js", JS, include_bytes!("../../dashboard/dist/rules.js")),
    ("settings.js", JS, include_bytes!("../../dashboard/dist/settings.js")),
    ("sql.js", JS, include_bytes!("../../dashboard/dist/sql.js")),
    ("storage.js", JS, include_bytes!("../../dashboard/dist/storage.js")),
    ("tables.js", JS, include_bytes!("../../dashboard/dist/tables.js")),
    ("users.js", JS, include_bytes!("../../dashboard/dist/users.js")),
];

const JS: &str = "text/javascript; charset=utf-8";

/// The page's own files, the server's endpoints, image previews made in the page: nothing else.
const POLICY: &str = "default-src 'self'; img-src 'self' blob: data:; connect-src 'self'; \
                      style-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; \
                      frame-ancestors 'none'; form-action 'self'";

/// Answers a GET or HEAD of one of the files (`/` is the page).
pub fn serve(path: &str, method: &Method) -> Response<Body> {
    if !matches!(*method, Method::GET | Method::HEAD) {
        return status(StatusCode::METHOD_NOT_ALLOWED);
    }
    let name = match path.trim_start_matches('/') {
        "" => "index.html",
        name => name,
    };
    let Some((_, content_type, bytes)) = FILES.iter().find(|(n, _, _)| *n == name) else {
        return status(StatusCode::NOT_FOUND);
    };
    let body = if *method == Method::HEAD { Body::default() } else { Body::from(*bytes) };
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    r
}

fn status(code: StatusCode) -> Response<Body> {
    let mut r = Response::new(Body::default());
    *r.status_mut() = code;
    r
}

#[cfg(test)]
mod tests {
    /// Every compiled module is embedded: a new page file must be added to [`super::FILES`].
    #[test]
    fn every_compiled_module_is_embedded() {
        let dist = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("dashboard/dist");
        for entry in std::fs::read_dir(dist).expect("dashboard/dist") {
            let name = entry.expect("entry").file_name().into_string().expect("a UTF-8 name");
            assert!(super::FILES.iter().any(|(n, _, _)| *n == name), "{name} is not embedded");
        }
    }
}
