//! What an image transform asks for, as Supabase Storage takes it: `width`, `height`
//! (clamped to 1–2,000), `resize` (`cover`, `contain`, `fill`), `quality` (20–100), `format`
//! (`origin`, `webp`; `avif` answered in WebP) — from a `/render/image` query, a sign request's
//! `transform`, or a signed URL's `transformations` claim. [`super::image`] does the work.

use super::error::StorageError;

/// Supabase's bounds on a requested width or height.
const SIZE: (u32, u32) = (1, 2000);

/// How the image is fitted to `width`×`height`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Resize {
    /// Fill the box, cropping what overflows, centred (imgproxy's `fill`).
    #[default]
    Cover,
    /// Fit inside the box (imgproxy's `fit`).
    Contain,
    /// Stretch to the box (imgproxy's `force`).
    Fill,
}

/// The format asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Format {
    /// WebP when the client accepts it and the source is lossless (PNG, GIF), else the
    /// source's own: Supabase's automatic optimisation, without making a photo larger.
    #[default]
    Auto,
    /// The source's own format.
    Origin,
    /// WebP (lossless). `avif` asks for this too: no AVIF encoder here is fast enough to
    /// answer per request.
    Webp,
}

/// What a request asks to be done to an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Transform {
    pub width: Option<u32>,
    pub height: Option<u32>,
    pub resize: Resize,
    pub quality: Option<u8>,
    pub format: Format,
}

impl Transform {
    /// The parameters of a `/render/image` query (Supabase's names and checks); sizes are
    /// clamped to 1–2,000, 0 means "not given".
    pub fn from_query(pairs: &[(String, String)]) -> Result<Transform, StorageError> {
        let mut t = Transform::default();
        for (k, v) in pairs {
            match k.as_str() {
                "width" => t.width = size(k, v)?,
                "height" => t.height = size(k, v)?,
                "resize" => {
                    t.resize = resize(v).ok_or_else(|| {
                        StorageError::invalid_request(
                            "querystring/resize must be equal to one of the allowed values",
                        )
                    })?
                }
                "quality" => {
                    t.quality =
                        Some(v.parse::<u8>().ok().filter(|q| (20..=100).contains(q)).ok_or_else(|| {
                            StorageError::invalid_request(
                                "querystring/quality must be an integer between 20 and 100",
                            )
                        })?)
                }
                "format" => {
                    t.format = format(v).ok_or_else(|| {
                        StorageError::invalid_request(
                            "querystring/format must be equal to one of the allowed values",
                        )
                    })?
                }
                _ => {}
            }
        }
        Ok(t)
    }

    /// The transform a signed URL's `transformations` claim carries (`height:200,width:300,
    /// resize:cover,...`, as Supabase writes it); what cannot be read is left out.
    pub fn from_claim(claim: &str) -> Transform {
        let mut t = Transform::default();
        for part in claim.split(',') {
            let Some((k, v)) = part.split_once(':') else { continue };
            match k {
                "width" => t.width = size(k, v).ok().flatten(),
                "height" => t.height = size(k, v).ok().flatten(),
                "resize" => t.resize = resize(v).unwrap_or_default(),
                "quality" => t.quality = v.parse().ok().filter(|q| (20..=100).contains(q)),
                "format" => t.format = format(v).unwrap_or_default(),
                _ => {}
            }
        }
        t
    }

    /// The claim for a signed URL: what [`Transform::from_claim`] reads back.
    pub fn to_claim(self) -> String {
        self.segments("resize", |r| match r {
            Resize::Cover => "cover",
            Resize::Contain => "contain",
            Resize::Fill => "fill",
        })
    }

    /// `X-Transformations`, in imgproxy's words, as Supabase sends it.
    pub fn header(self) -> String {
        self.segments("resizing_type", |r| match r {
            Resize::Cover => "fill",
            Resize::Contain => "fit",
            Resize::Fill => "force",
        })
    }

    fn segments(self, resize_key: &str, resize_name: impl Fn(Resize) -> &'static str) -> String {
        let mut s = Vec::new();
        if let Some(h) = self.height {
            s.push(format!("height:{h}"));
        }
        if let Some(w) = self.width {
            s.push(format!("width:{w}"));
        }
        if self.width.is_some() || self.height.is_some() {
            s.push(format!("{resize_key}:{}", resize_name(self.resize)));
        }
        if let Some(q) = self.quality {
            s.push(format!("quality:{q}"));
        }
        if self.format == Format::Webp {
            s.push("format:webp".into());
        } else if self.format == Format::Origin {
            s.push("format:origin".into());
        }
        s.join(",")
    }

    /// Whether it asks for anything at all.
    pub fn is_empty(self) -> bool {
        self == Transform::default()
    }
}

/// `transform` in a sign request's body, as storage-js sends it.
#[derive(Debug, Default, serde::Deserialize)]
pub struct TransformBody {
    width: Option<serde_json::Value>,
    height: Option<serde_json::Value>,
    resize: Option<String>,
    quality: Option<serde_json::Value>,
    format: Option<String>,
}

impl TransformBody {
    /// The transform it describes, checked as a query's would be.
    pub fn transform(&self) -> Result<Transform, StorageError> {
        let text = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let mut pairs = Vec::new();
        for (k, v) in [("width", &self.width), ("height", &self.height), ("quality", &self.quality)] {
            if let Some(v) = v.as_ref().filter(|v| !v.is_null()) {
                pairs.push((k.to_owned(), text(v)));
            }
        }
        for (k, v) in [("resize", &self.resize), ("format", &self.format)] {
            if let Some(v) = v {
                pairs.push((k.to_owned(), v.clone()));
            }
        }
        Transform::from_query(&pairs)
    }
}

fn size(name: &str, v: &str) -> Result<Option<u32>, StorageError> {
    let n: u64 = v.parse().map_err(|_| {
        StorageError::invalid_request(format!("querystring/{name} must be a non-negative integer"))
    })?;
    Ok((n > 0).then(|| (n.min(u64::from(SIZE.1)) as u32).max(SIZE.0)))
}

fn resize(v: &str) -> Option<Resize> {
    match v {
        "cover" => Some(Resize::Cover),
        "contain" => Some(Resize::Contain),
        "fill" => Some(Resize::Fill),
        _ => None,
    }
}

fn format(v: &str) -> Option<Format> {
    match v {
        "origin" => Some(Format::Origin),
        "webp" | "avif" => Some(Format::Webp),
        _ => None,
    }
}

/// Whether an `Accept` header takes WebP.
pub fn accepts_webp(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| a.split(',').any(|m| m.trim().to_ascii_lowercase().starts_with("image/webp")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_supabases() {
        let q = |pairs: &[(&str, &str)]| {
            Transform::from_query(
                &pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>(),
            )
        };
        let got = q(&[("width", "5000"), ("height", "0"), ("resize", "contain"), ("quality", "50")]).unwrap();
        assert_eq!(
            got,
            Transform {
                width: Some(2000),
                height: None,
                resize: Resize::Contain,
                quality: Some(50),
                format: Format::Auto
            }
        );
        assert_eq!(got.header(), "width:2000,resizing_type:fit,quality:50");
        assert_eq!(Transform::from_claim(&got.to_claim()), got);
        assert!(q(&[("width", "-1")]).is_err());
        assert!(q(&[("quality", "10")]).is_err());
        assert!(q(&[("resize", "crop")]).is_err());
        assert_eq!(q(&[("format", "avif")]).unwrap().format, Format::Webp);
    }
}
