//! Where links in mail lead: the verification URL they carry (`accounts-external-url`), and
//! where `/verify` sends the browser after — a `redirect_to` only if it is on the site's host
//! (`accounts-site-url`) or matches `accounts-redirect-urls`, else the site itself: never an
//! open redirect.

use url::Url;

/// The links' settings.
pub struct Links {
    /// `accounts-site-url`.
    pub site_url: String,
    /// `accounts-external-url`.
    external_url: String,
    /// `accounts-redirect-urls`.
    allowed: Vec<String>,
}

impl Links {
    pub fn new(site_url: String, external_url: String, allowed: Vec<String>) -> Links {
        Links { site_url, external_url, allowed }
    }

    /// Where to send the browser: `requested` if it may be, else the site (GoTrue's rule: the
    /// site's host name, or a pattern of the allow list).
    pub fn redirect(&self, requested: Option<&str>) -> String {
        match requested.filter(|r| self.allows(r)) {
            Some(r) => r.to_owned(),
            None => self.site_url.clone(),
        }
    }

    /// Whether the browser may be sent to `requested` (and a page there may act for a user).
    pub fn allows(&self, requested: &str) -> bool {
        let Ok(url) = Url::parse(requested) else { return false };
        if !matches!(url.scheme(), "http" | "https") && self.allowed.is_empty() {
            return false;
        }
        let site = Url::parse(&self.site_url).ok();
        let same_host = matches!(url.scheme(), "http" | "https")
            && site.as_ref().and_then(Url::host_str).is_some_and(|h| Some(h) == url.host_str());
        same_host || self.allowed.iter().any(|pattern| glob(pattern, requested))
    }

    /// `accounts-external-url`: where clients reach rowgate.
    pub fn external_url(&self) -> &str {
        &self.external_url
    }

    /// The link a mail carries: `/auth/v1/verify` with the code's hash, its type and where to go.
    pub fn verify_url(&self, token_hash: &str, kind: &str, redirect_to: &str) -> String {
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("token", token_hash)
            .append_pair("type", kind)
            .append_pair("redirect_to", redirect_to)
            .finish();
        format!("{}/auth/v1/verify?{query}", self.external_url)
    }
}

/// `target` with `pairs` as its fragment (replacing any), as GoTrue hands a session or an error
/// to the page it redirects to.
pub fn with_fragment(target: &str, pairs: &[(&str, &str)]) -> String {
    let mut fragment = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        fragment.append_pair(k, v);
    }
    let base = target.split_once('#').map_or(target, |(b, _)| b);
    format!("{base}#{}", fragment.finish())
}

/// Whether `text` matches `pattern`, where `**` matches anything and `*` anything but the
/// separators `.` and `/` (GoTrue's globs).
fn glob(pattern: &str, text: &str) -> bool {
    fn go(p: &[u8], t: &[u8]) -> bool {
        match p {
            [] => t.is_empty(),
            [b'*', b'*', rest @ ..] => (0..=t.len()).any(|i| go(rest, &t[i..])),
            [b'*', rest @ ..] => {
                let stop = t.iter().position(|&c| c == b'.' || c == b'/').unwrap_or(t.len());
                (0..=stop).any(|i| go(rest, &t[i..]))
            }
            [c, rest @ ..] => t.first() == Some(c) && go(rest, &t[1..]),
        }
    }
    go(pattern.as_bytes(), text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::{glob, with_fragment, Links};

    #[test]
    fn redirects_go_only_to_the_site_or_the_allow_list() {
        let links = Links::new(
            "https://app.example.com".into(),
            "https://api.example.com".into(),
            vec!["https://*.example.org/**".into(), "myapp://callback".into()],
        );
        for ok in [
            "https://app.example.com/welcome?x=1",
            "http://app.example.com:8080/",
            "https://preview.example.org/a/b",
            "myapp://callback",
        ] {
            assert_eq!(links.redirect(Some(ok)), ok);
        }
        for refused in [
            "https://evil.com/",
            "https://app.example.com.evil.com/",
            "https://app.example.com@evil.com/",
            "https://a.b.example.org/x",
            "javascript:alert(1)",
            "//evil.com",
            "not a url",
        ] {
            assert_eq!(links.redirect(Some(refused)), "https://app.example.com", "{refused}");
        }
        assert_eq!(links.redirect(None), "https://app.example.com");
        assert_eq!(
            links.verify_url("ab12", "signup", "https://app.example.com/?a=b&c"),
            "https://api.example.com/auth/v1/verify?token=ab12&type=signup&redirect_to=https%3A%2F%2Fapp.example.com%2F%3Fa%3Db%26c"
        );
    }

    #[test]
    fn globs_stop_at_separators_unless_doubled() {
        assert!(glob("http://localhost:*", "http://localhost:3000"));
        assert!(!glob("http://localhost:*", "http://localhost:3000/x"));
        assert!(glob("http://localhost:*/**", "http://localhost:3000/x/y"));
        assert!(!glob("https://*.vercel.app", "https://a.b.vercel.app"));
    }

    #[test]
    fn sessions_ride_in_the_fragment() {
        assert_eq!(
            with_fragment("https://app.example.com/#old", &[("access_token", "a b"), ("type", "signup")]),
            "https://app.example.com/#access_token=a+b&type=signup"
        );
    }
}
