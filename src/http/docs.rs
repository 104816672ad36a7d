//! The API reference page (`api-docs-enabled`, at `/rowgate/docs/`): Swagger UI (npm's
//! swagger-ui-dist, vendored gzipped in `assets/swagger-ui` by `scripts/vendor-swagger-ui` and
//! embedded in the binary) reading the API root's OpenAPI 3.1 description, from which it can
//! send requests — as the token or API key the reader gives it.

use std::sync::OnceLock;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, Response, StatusCode};

use crate::response::Body;

/// Where the page is served.
pub const PATH: &str = "/rowgate/docs";

const BUNDLE_GZ: &[u8] = include_bytes!("../../assets/swagger-ui/swagger-ui-bundle.js.gz");
const CSS_GZ: &[u8] = include_bytes!("../../assets/swagger-ui/swagger-ui.css.gz");

/// The page: the viewer, told where the description is and to ask for OpenAPI 3.1.
const PAGE: &str = r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>API reference</title>
<link rel="stylesheet" href="swagger-ui.css">
</head>
<body>
<div id="reference"></div>
<script src="swagger-ui-bundle.js"></script>
<script>
const description = new URL(SPEC_URL, location.href).href;
window.ui = SwaggerUIBundle({
  url: description,
  dom_id: '#reference',
  deepLinking: true,
  persistAuthorization: true,
  requestInterceptor: (request) => {
    if (request.url === description) {
      request.headers['Accept'] = 'application/vnd.oai.openapi+json;version=3.1';
    }
    return request;
  },
});
</script>
</body>
</html>
"#;

/// Answers a request under [`PATH`]; `api_root` is the path of the API's root (`/`, or
/// `api-prefix`).
pub fn serve(path: &str, method: &Method, headers: &HeaderMap, api_root: &str) -> Response<Body> {
    if !matches!(*method, Method::GET | Method::HEAD) {
        return super::plain(StatusCode::METHOD_NOT_ALLOWED);
    }
    let (body, content_type): (Bytes, &str) = match path.strip_prefix(PATH).unwrap_or("") {
        // Relative asset URLs need the trailing slash.
        "" => {
            let mut r = super::plain(StatusCode::MOVED_PERMANENTLY);
            r.headers_mut().insert(header::LOCATION, HeaderValue::from_static("/rowgate/docs/"));
            return r;
        }
        "/" | "/index.html" => {
            let url = serde_json::to_string(api_root).unwrap_or_else(|_| "\"/\"".into());
            (Bytes::from(PAGE.replace("SPEC_URL", &url)), "text/html; charset=utf-8")
        }
        "/swagger-ui-bundle.js" => {
            return asset(BUNDLE_GZ, &BUNDLE, "application/javascript; charset=utf-8", method, headers)
        }
        "/swagger-ui.css" => return asset(CSS_GZ, &CSS, "text/css; charset=utf-8", method, headers),
        _ => return super::plain(StatusCode::NOT_FOUND),
    };
    let mut r = Response::new(if *method == Method::HEAD { Body::default() } else { Body::from(body) });
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

static BUNDLE: OnceLock<Bytes> = OnceLock::new();
static CSS: OnceLock<Bytes> = OnceLock::new();

/// An embedded file: gzipped as stored to a client that takes gzip, else decompressed (once).
fn asset(
    gz: &'static [u8],
    plain: &OnceLock<Bytes>,
    content_type: &'static str,
    method: &Method,
    headers: &HeaderMap,
) -> Response<Body> {
    let gzip = headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|e| {
            let mut parts = e.split(';');
            let name = parts.next().unwrap_or("").trim();
            let refused = parts.any(
                |p| matches!(p.trim().strip_prefix("q="), Some(q) if q.trim().parse::<f32>() == Ok(0.0)),
            );
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        });
    let body = if gzip {
        Bytes::from_static(gz)
    } else {
        plain
            .get_or_init(|| {
                let mut out = Vec::new();
                let _ = std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz), &mut out);
                Bytes::from(out)
            })
            .clone()
    };
    let mut r = Response::new(if *method == Method::HEAD { Body::default() } else { Body::from(body) });
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=86400"));
    h.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    if gzip {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_are_gzip_unless_refused() {
        let get = |enc: Option<&str>| {
            let mut h = HeaderMap::new();
            if let Some(e) = enc {
                h.insert(header::ACCEPT_ENCODING, HeaderValue::from_str(e).unwrap());
            }
            serve("/rowgate/docs/swagger-ui.css", &Method::GET, &h, "/")
        };
        let gz = get(Some("gzip, deflate, br"));
        assert_eq!(gz.headers().get(header::CONTENT_ENCODING).unwrap(), "gzip");
        let plain = get(None);
        assert!(plain.headers().get(header::CONTENT_ENCODING).is_none());
        assert!(plain.body().bytes().unwrap().starts_with(b".swagger-ui"));
        assert!(get(Some("gzip;q=0")).headers().get(header::CONTENT_ENCODING).is_none());
        let page = serve("/rowgate/docs/", &Method::GET, &HeaderMap::new(), "/api/");
        let html = String::from_utf8(page.body().bytes().unwrap().to_vec()).unwrap();
        assert!(html.contains(r#"new URL("/api/", location.href)"#), "{html}");
        assert_eq!(serve("/rowgate/docs", &Method::GET, &HeaderMap::new(), "/").status(), 301);
        assert_eq!(serve("/rowgate/docs/nope", &Method::GET, &HeaderMap::new(), "/").status(), 404);
    }
}
