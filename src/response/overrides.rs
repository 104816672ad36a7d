//! `response.headers` and `response.status` set by SQL — a function, a trigger, the
//! pre-request function — over the response rowgate built, as PostgREST applies them: SQL's
//! headers replace rowgate's of the same name, and may repeat (`Set-Cookie`).

use http::{header, HeaderName, HeaderValue, Response, StatusCode};

use super::Body;
use crate::error::{code, Error};

/// `response` with SQL's `headers` (a JSON array of one-key objects) and `status` applied;
/// PGRST111 or PGRST112 (500) when they are not what PostgREST reads.
pub fn from_sql(
    mut response: Response<Body>,
    headers: Option<&str>,
    status: Option<&str>,
) -> Result<Response<Body>, Error> {
    if let Some(text) = status {
        let status = parse_status(text)
            .ok_or_else(|| Error::api(code::GUC_STATUS, "response.status guc must be a valid status code"))?;
        if status != response.status() {
            // The ETag validated the answer rowgate built: a 304 must never stand in for
            // another status.
            response.headers_mut().remove(header::ETAG);
        }
        *response.status_mut() = status;
    }
    if let Some(text) = headers {
        let pairs = parse_headers(text).ok_or_else(|| {
            Error::api(
                code::GUC_HEADERS,
                "response.headers guc must be a JSON array composed of objects with a single key and a string value",
            )
        })?;
        // The body's framing stays the server's to write.
        let framing = |name: &HeaderName| {
            name == header::CONTENT_LENGTH || name == header::TRANSFER_ENCODING || name == header::CONNECTION
        };
        let pairs: Vec<_> = pairs.into_iter().filter(|(name, _)| !framing(name)).collect();
        let map = response.headers_mut();
        for (name, _) in &pairs {
            map.remove(name);
        }
        for (name, value) in pairs {
            map.append(name, value);
        }
    }
    Ok(response)
}

/// The status in `text`: its leading digits, as PostgREST reads them (a number that is no HTTP
/// status, which PostgREST would send as it is, is refused here).
fn parse_status(text: &str) -> Option<StatusCode> {
    let digits: &str = &text[..text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len())];
    StatusCode::from_u16(digits.parse().ok()?).ok()
}

/// `[{"Name": "value"}, ...]` as header pairs, in order.
fn parse_headers(text: &str) -> Option<Vec<(HeaderName, HeaderValue)>> {
    let items: Vec<serde_json::Map<String, serde_json::Value>> = serde_json::from_str(text).ok()?;
    items
        .into_iter()
        .map(|item| {
            let mut entries = item.into_iter();
            match (entries.next(), entries.next()) {
                (Some((name, serde_json::Value::String(value))), None) => Some((
                    HeaderName::try_from(name.as_str()).ok()?,
                    HeaderValue::try_from(value.as_str()).ok()?,
                )),
                _ => None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response() -> Response<Body> {
        let mut r = Response::new(Body::default());
        r.headers_mut().insert(header::LOCATION, HeaderValue::from_static("/stuff?id=eq.2"));
        r
    }

    #[test]
    fn sql_headers_replace_and_repeat() {
        let r = from_sql(
            response(),
            Some(r#"[{"Location": "/stuff?id=eq.2&overriden=true"}, {"Set-Cookie": "a=1"}, {"Set-Cookie": "b=2"}]"#),
            Some("201"),
        )
        .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED);
        assert_eq!(r.headers()[header::LOCATION], "/stuff?id=eq.2&overriden=true");
        let cookies: Vec<_> = r.headers().get_all(header::SET_COOKIE).iter().collect();
        assert_eq!(cookies, ["a=1", "b=2"]);
    }

    #[test]
    fn unreadable_settings_are_a_500() {
        for (headers, status, code) in [
            (Some(r#"{"X-Test": "1"}"#), None, "PGRST111"),
            (Some(r#"[{"X-A": "1", "X-B": "2"}]"#), None, "PGRST111"),
            (Some(r#"[{"X-A": 1}]"#), None, "PGRST111"),
            (None, Some("bad"), "PGRST112"),
            (None, Some("42"), "PGRST112"),
        ] {
            let e = from_sql(response(), headers, status).err().unwrap();
            assert_eq!((e.code(), e.to_response().status.as_u16()), (code, 500));
        }
    }
}
