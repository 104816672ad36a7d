//! Image transforms, as Supabase Storage's imgproxy does them: resize a stored PNG, JPEG, WebP
//! or GIF to `width`×`height` (`cover` crops to fill, `contain` fits inside, `fill` stretches;
//! never enlarged), re-encode it at `quality`, in its own format or WebP.
//!
//! The work is CPU-bound: it runs on blocking threads, at most one per core at a time, and a
//! source is refused before it is decoded when its file or its declared size is past the
//! budget (a small file can declare a huge image). Results are kept in a bounded cache keyed
//! by the object's version and the parameters, so a changed object is never answered from it.

use std::io::{BufReader, Cursor, Read};
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use fast_image_resize::{FilterType, ResizeAlg, ResizeOptions, Resizer};
use image::codecs::{gif::GifEncoder, jpeg::JpegEncoder, png, webp::WebPEncoder};
use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits};
use tokio::sync::Semaphore;

use super::error::StorageError;

/// Supabase's bounds on a requested width or height.
const SIZE: (u32, u32) = (1, 2000);
/// The largest source file transformed.
const MAX_SOURCE_BYTES: u64 = 25 * 1024 * 1024;
/// The most pixels a source may declare.
const MAX_SOURCE_PIXELS: u64 = 50_000_000;
/// imgproxy's default quality.
const DEFAULT_QUALITY: u8 = 80;

/// How the image is fitted to `width`×`height`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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

/// A transformed image.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub bytes: Bytes,
    pub mime: &'static str,
}

/// Why an image could not be transformed.
#[derive(Debug, PartialEq, Eq)]
pub enum RenderError {
    /// Not an image of a supported format, or a broken one.
    Invalid(String),
    /// Past the byte or pixel budget.
    TooBig(String),
}

impl From<RenderError> for StorageError {
    fn from(e: RenderError) -> StorageError {
        match e {
            RenderError::Invalid(why) => {
                tracing::debug!(reason = %why, "storage: an image could not be transformed");
                StorageError::image_invalid()
            }
            RenderError::TooBig(why) => {
                tracing::debug!(reason = %why, "storage: an image is too large to transform");
                StorageError::image_too_big()
            }
        }
    }
}

/// Transforms images: bounded in concurrency, with a bounded cache of results.
pub struct Renderer {
    permits: Semaphore,
    cache: moka::sync::Cache<String, Rendered>,
}

impl Renderer {
    /// A renderer running at most one transform per core, caching up to `cache_bytes`.
    pub fn new(cache_bytes: u64) -> Renderer {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cache = moka::sync::Cache::builder()
            .max_capacity(cache_bytes)
            .weigher(|k: &String, v: &Rendered| (k.len() + v.bytes.len()).try_into().unwrap_or(u32::MAX))
            .build();
        Renderer { permits: Semaphore::new(cores), cache }
    }

    /// `version`'s file at `path` transformed by `t`, from the cache or made now.
    pub async fn render(
        &self,
        path: &Path,
        version: &str,
        t: Transform,
        accepts_webp: bool,
    ) -> Result<Rendered, StorageError> {
        let key = format!("{version}/{}/{}", t.to_claim(), accepts_webp && t.format == Format::Auto);
        if let Some(hit) = self.cache.get(&key) {
            return Ok(hit);
        }
        let _permit = self.permits.acquire().await.map_err(|_| StorageError::unavailable())?;
        // Another request may have made it while this one waited.
        if let Some(hit) = self.cache.get(&key) {
            return Ok(hit);
        }
        let path = path.to_owned();
        let rendered = tokio::task::spawn_blocking(move || render_file(&path, t, accepts_webp))
            .await
            .map_err(|_| StorageError::internal("The image could not be transformed"))??;
        self.cache.insert(key, rendered.clone());
        Ok(rendered)
    }
}

/// Reads the file at `path` (within the budget) and transforms it.
pub fn render_file(path: &Path, t: Transform, accepts_webp: bool) -> Result<Rendered, RenderError> {
    let file = std::fs::File::open(path).map_err(|e| RenderError::Invalid(e.to_string()))?;
    let len = file.metadata().map_err(|e| RenderError::Invalid(e.to_string()))?.len();
    if len > MAX_SOURCE_BYTES {
        return Err(RenderError::TooBig(format!("{len} bytes")));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    BufReader::new(file)
        .take(MAX_SOURCE_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| RenderError::Invalid(e.to_string()))?;
    render(&bytes, t, accepts_webp)
}

/// Transforms the encoded image `source`.
pub fn render(source: &[u8], t: Transform, accepts_webp: bool) -> Result<Rendered, RenderError> {
    let invalid = |e: image::ImageError| RenderError::Invalid(e.to_string());
    let mut reader = ImageReader::new(Cursor::new(source))
        .with_guessed_format()
        .map_err(|e| RenderError::Invalid(e.to_string()))?;
    let from = match reader.format() {
        Some(f @ (ImageFormat::Png | ImageFormat::Jpeg | ImageFormat::WebP | ImageFormat::Gif)) => f,
        other => return Err(RenderError::Invalid(format!("unsupported format {other:?}"))),
    };
    let mut limits = Limits::default();
    limits.max_alloc = Some(MAX_SOURCE_PIXELS * 8);
    reader.limits(limits);
    let mut decoder = reader.into_decoder().map_err(invalid)?;
    let (w, h) = decoder.dimensions();
    if u64::from(w) * u64::from(h) > MAX_SOURCE_PIXELS {
        return Err(RenderError::TooBig(format!("{w}×{h}")));
    }
    let orientation = decoder.orientation().unwrap_or(image::metadata::Orientation::NoTransforms);
    let to = match t.format {
        Format::Origin => from,
        Format::Webp => ImageFormat::WebP,
        Format::Auto if accepts_webp && matches!(from, ImageFormat::Png | ImageFormat::Gif) => {
            ImageFormat::WebP
        }
        Format::Auto => from,
    };
    let untouched = target(w, h, t) == (w, h) && to == from && t.quality.is_none();
    if untouched && orientation == image::metadata::Orientation::NoTransforms {
        return Ok(Rendered { bytes: Bytes::copy_from_slice(source), mime: from.to_mime_type() });
    }
    let mut image = DynamicImage::from_decoder(decoder).map_err(invalid)?;
    image.apply_orientation(orientation);
    let image = resized(image, t)?;
    encode(&image, to, t.quality.unwrap_or(DEFAULT_QUALITY))
}

/// The size an image of `w`×`h` is resized to, never larger than it.
pub fn target(w: u32, h: u32, t: Transform) -> (u32, u32) {
    let (w, h) = (f64::from(w), f64::from(h));
    let scale_w = t.width.map(|tw| f64::from(tw) / w);
    let scale_h = t.height.map(|th| f64::from(th) / h);
    let px = |v: f64| (v.round() as u32).max(1);
    match (scale_w, scale_h, t.resize) {
        (None, None, _) => (px(w), px(h)),
        (Some(s), None, _) | (None, Some(s), _) => {
            let s = s.min(1.0);
            (px(w * s), px(h * s))
        }
        (Some(sw), Some(sh), Resize::Contain) => {
            let s = sw.min(sh).min(1.0);
            (px(w * s), px(h * s))
        }
        (Some(sw), Some(sh), Resize::Cover) => {
            let s = sw.max(sh).min(1.0);
            (px((w * s).min(w * sw)), px((h * s).min(h * sh)))
        }
        (Some(sw), Some(sh), Resize::Fill) => (px(w * sw.min(1.0)), px(h * sh.min(1.0))),
    }
}

fn resized(image: DynamicImage, t: Transform) -> Result<DynamicImage, RenderError> {
    let (w, h) = target(image.width(), image.height(), t);
    if (w, h) == (image.width(), image.height()) {
        return Ok(image);
    }
    // The resizer takes 8- and 16-bit and float pixels; anything else goes through RGBA.
    let image = match image {
        DynamicImage::ImageLuma8(_)
        | DynamicImage::ImageLumaA8(_)
        | DynamicImage::ImageRgb8(_)
        | DynamicImage::ImageRgba8(_)
        | DynamicImage::ImageLuma16(_)
        | DynamicImage::ImageLumaA16(_)
        | DynamicImage::ImageRgb16(_)
        | DynamicImage::ImageRgba16(_) => image,
        other => DynamicImage::ImageRgba8(other.to_rgba8()),
    };
    let mut out = DynamicImage::new(w, h, image.color());
    let mut options = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Lanczos3));
    if t.resize == Resize::Cover {
        options = options.fit_into_destination(Some((0.5, 0.5)));
    }
    Resizer::new().resize(&image, &mut out, &options).map_err(|e| RenderError::Invalid(e.to_string()))?;
    Ok(out)
}

fn encode(image: &DynamicImage, to: ImageFormat, quality: u8) -> Result<Rendered, RenderError> {
    let failed = |e: image::ImageError| RenderError::Invalid(e.to_string());
    let mut out = Vec::with_capacity(64 * 1024);
    let mime = match to {
        ImageFormat::Jpeg => {
            // JPEG has no alpha or 16-bit samples.
            let rgb = match image {
                DynamicImage::ImageLuma8(_) | DynamicImage::ImageRgb8(_) => None,
                DynamicImage::ImageLuma16(_)
                | DynamicImage::ImageLumaA8(_)
                | DynamicImage::ImageLumaA16(_) => Some(DynamicImage::ImageLuma8(image.to_luma8())),
                _ => Some(DynamicImage::ImageRgb8(image.to_rgb8())),
            };
            rgb.as_ref()
                .unwrap_or(image)
                .write_with_encoder(JpegEncoder::new_with_quality(&mut out, quality))
                .map_err(failed)?;
            "image/jpeg"
        }
        ImageFormat::WebP => {
            let eight = match image {
                DynamicImage::ImageRgb8(_) | DynamicImage::ImageRgba8(_) => None,
                i if i.color().has_alpha() => Some(DynamicImage::ImageRgba8(i.to_rgba8())),
                i => Some(DynamicImage::ImageRgb8(i.to_rgb8())),
            };
            eight
                .as_ref()
                .unwrap_or(image)
                .write_with_encoder(WebPEncoder::new_lossless(&mut out))
                .map_err(failed)?;
            "image/webp"
        }
        ImageFormat::Gif => {
            let rgba = image.to_rgba8();
            let mut encoder = GifEncoder::new(&mut out);
            encoder.encode_frame(image::Frame::new(rgba)).map_err(failed)?;
            drop(encoder);
            "image/gif"
        }
        _ => {
            let encoder = png::PngEncoder::new_with_quality(
                &mut out,
                png::CompressionType::Fast,
                png::FilterType::Adaptive,
            );
            image.write_with_encoder(encoder).map_err(failed)?;
            "image/png"
        }
    };
    Ok(Rendered { bytes: Bytes::from(out), mime })
}

/// Whether an `Accept` header takes WebP.
pub fn accepts_webp(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| a.split(',').any(|m| m.trim().to_ascii_lowercase().starts_with("image/webp")))
}

/// A renderer shared by the routes.
pub type SharedRenderer = Arc<Renderer>;

#[cfg(test)]
mod tests {
    use super::*;

    fn t(width: Option<u32>, height: Option<u32>, resize: Resize) -> Transform {
        Transform { width, height, resize, ..Transform::default() }
    }

    #[test]
    fn sizes_follow_imgproxy_and_never_enlarge() {
        assert_eq!(target(1000, 500, t(Some(200), None, Resize::Cover)), (200, 100));
        assert_eq!(target(1000, 500, t(None, Some(100), Resize::Contain)), (200, 100));
        assert_eq!(target(1000, 500, t(Some(200), Some(200), Resize::Cover)), (200, 200));
        assert_eq!(target(1000, 500, t(Some(200), Some(200), Resize::Contain)), (200, 100));
        assert_eq!(target(1000, 500, t(Some(200), Some(200), Resize::Fill)), (200, 200));
        assert_eq!(target(1000, 500, t(Some(2000), None, Resize::Cover)), (1000, 500));
        assert_eq!(target(100, 100, t(Some(200), Some(50), Resize::Cover)), (100, 50));
    }

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

    #[test]
    fn a_declared_size_past_the_budget_is_refused_before_decoding() {
        // A PNG declaring 100,000 × 100,000 pixels, with no pixels.
        let mut chunk = b"IHDR".to_vec();
        chunk.extend_from_slice(&100_000u32.to_be_bytes());
        chunk.extend_from_slice(&100_000u32.to_be_bytes());
        chunk.extend_from_slice(&[8, 6, 0, 0, 0]);
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\r".to_vec();
        png.extend_from_slice(&chunk);
        png.extend_from_slice(&crc32(&chunk).to_be_bytes());
        png.extend_from_slice(b"\0\0\0\0IDAT");
        png.extend_from_slice(&crc32(b"IDAT").to_be_bytes());
        assert_eq!(
            render(&png, Transform::default(), false).unwrap_err(),
            RenderError::TooBig("100000×100000".into())
        );
        assert!(matches!(render(b"not an image", Transform::default(), false), Err(RenderError::Invalid(_))));
        let mut truncated = Vec::new();
        let image = DynamicImage::ImageRgb8(image::RgbImage::from_pixel(64, 64, image::Rgb([1, 2, 3])));
        image.write_to(&mut Cursor::new(&mut truncated), ImageFormat::Png).unwrap();
        truncated.truncate(truncated.len() / 2);
        let half = Transform { width: Some(32), ..Transform::default() };
        assert!(matches!(render(&truncated, half, false), Err(RenderError::Invalid(_))));
    }

    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for b in bytes {
            crc ^= u32::from(*b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
            }
        }
        !crc
    }

    #[test]
    fn a_png_is_resized_and_reencoded() {
        let mut source = Vec::new();
        let image =
            DynamicImage::ImageRgba8(image::RgbaImage::from_pixel(400, 200, image::Rgba([10, 20, 30, 255])));
        image.write_to(&mut Cursor::new(&mut source), ImageFormat::Png).unwrap();
        let out = render(&source, t(Some(100), Some(100), Resize::Cover), false).unwrap();
        assert_eq!(out.mime, "image/png");
        let back = image::load_from_memory(&out.bytes).unwrap();
        assert_eq!((back.width(), back.height()), (100, 100));
        let webp = render(&source, t(Some(40), None, Resize::Cover), true).unwrap();
        assert_eq!(webp.mime, "image/webp");
        let jpeg =
            render(&source, Transform { format: Format::Origin, ..t(Some(40), None, Resize::Cover) }, true)
                .unwrap();
        assert_eq!(jpeg.mime, "image/png");
    }
}
