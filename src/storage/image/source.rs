//! A source image and what is done to it: decoded within the pixel budget and oriented, kept
//! (reduced when large), resized for a transform and encoded. Pure: the renderer runs it on its
//! threads.

use std::io::Cursor;
use std::sync::Arc;

use bytes::Bytes;
use fast_image_resize::{FilterType, MulDiv, ResizeAlg, ResizeOptions, Resizer};
use image::codecs::{gif::GifEncoder, jpeg::JpegEncoder, png, webp::WebPEncoder};
use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits};

use crate::storage::error::StorageError;
use crate::storage::transform::{Format, Resize, Transform};

/// The most pixels a source may declare.
const MAX_SOURCE_PIXELS: u64 = 50_000_000;
/// imgproxy's default quality.
const DEFAULT_QUALITY: u8 = 80;
/// The box a decoded source larger than it is kept reduced to fit: a transform's width and
/// height are at most 2,000 pixels, so a rendering needs more only when it keeps an image's
/// full size or one side is left to follow the other past it.
const KEPT_SIDE: u32 = 2048;

/// A transformed image.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub bytes: Bytes,
    pub mime: &'static str,
    /// Its `ETag`: one per rendering of a version (set by [`Renderer::render`]).
    pub etag: Arc<str>,
    /// The headers it is answered with when nothing of the request changes them (no
    /// `If-None-Match`, no `download`, not through a signed URL): everything in them is fixed
    /// by the object's version and the transform, so they are made once per rendering.
    pub head: Arc<std::sync::OnceLock<http::HeaderMap>>,
}

impl Rendered {
    pub(super) fn new(bytes: Bytes, mime: &'static str) -> Rendered {
        Rendered { bytes, mime, etag: Arc::from(""), head: Arc::default() }
    }
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

/// A source image, decoded and oriented, with the format it came in. An image with alpha is
/// kept with its colours multiplied by it, as the resizer needs them: done once per source
/// rather than once per rendering.
pub struct Source {
    image: DynamicImage,
    format: ImageFormat,
    premultiplied: bool,
    /// The size the image has (oriented): `image` may be a reduction of it.
    size: (u32, u32),
}

impl Source {
    /// Its weight in a cache: its pixels' bytes.
    pub(super) fn weight(&self) -> u32 {
        self.image.as_bytes().len().try_into().unwrap_or(u32::MAX)
    }

    /// Whether a rendering for `t` can be made from it: its pixels are at least the
    /// rendering's.
    pub(super) fn serves(&self, t: Transform) -> bool {
        let (w, h) = target(self.size.0, self.size.1, t);
        w <= self.image.width() && h <= self.image.height()
    }

    /// What is kept of it, and the source itself when that is not it: a source larger than
    /// [`KEPT_SIDE`] on a side is kept reduced to fit it (standing for the same size).
    pub(super) fn keep(self) -> Result<(Arc<Source>, Option<Source>), RenderError> {
        let (w, h) = (self.image.width(), self.image.height());
        if w <= KEPT_SIDE && h <= KEPT_SIDE {
            return Ok((Arc::new(self), None));
        }
        let scale = f64::from(KEPT_SIDE) / f64::from(w.max(h));
        let side = |v: u32| ((f64::from(v) * scale).round() as u32).max(1);
        let mut image = DynamicImage::new(side(w), side(h), self.image.color());
        let options = ResizeOptions::new()
            .resize_alg(ResizeAlg::Convolution(FilterType::Lanczos3))
            .use_alpha(!self.premultiplied);
        Resizer::new()
            .resize(&self.image, &mut image, &options)
            .map_err(|e| RenderError::Invalid(e.to_string()))?;
        let kept = Source { image, format: self.format, premultiplied: self.premultiplied, size: self.size };
        Ok((Arc::new(kept), Some(self)))
    }
}

/// A source after its header was read: nothing to do to it, or decoded.
pub(super) enum Loaded {
    Untouched(Rendered),
    Decoded(Source),
}

/// The format a rendering of a `from` source is written in.
fn output_format(from: ImageFormat, t: Transform, accepts_webp: bool) -> ImageFormat {
    match t.format {
        Format::Origin => from,
        Format::Webp => ImageFormat::WebP,
        Format::Auto if accepts_webp && matches!(from, ImageFormat::Png | ImageFormat::Gif) => {
            ImageFormat::WebP
        }
        Format::Auto => from,
    }
}

/// Reads `source`'s header, refuses it past the pixel budget, and decodes it — unless `t`
/// leaves it as it is (same size, same format, no quality asked, upright), when its bytes are
/// the answer.
pub(super) fn load(source: &[u8], t: Option<(Transform, bool)>) -> Result<Loaded, RenderError> {
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
    if let Some((t, webp)) = t {
        let same = target(w, h, t) == (w, h) && output_format(from, t, webp) == from && t.quality.is_none();
        if same && orientation == image::metadata::Orientation::NoTransforms {
            return Ok(Loaded::Untouched(Rendered::new(Bytes::copy_from_slice(source), from.to_mime_type())));
        }
    }
    let mut image = DynamicImage::from_decoder(decoder).map_err(invalid)?;
    image.apply_orientation(orientation);
    // The resizer takes 8- and 16-bit pixels; anything else goes through RGBA.
    if !matches!(
        image,
        DynamicImage::ImageLuma8(_)
            | DynamicImage::ImageLumaA8(_)
            | DynamicImage::ImageRgb8(_)
            | DynamicImage::ImageRgba8(_)
            | DynamicImage::ImageLuma16(_)
            | DynamicImage::ImageLumaA16(_)
            | DynamicImage::ImageRgb16(_)
            | DynamicImage::ImageRgba16(_)
    ) {
        image = DynamicImage::ImageRgba8(image.to_rgba8());
    }
    let premultiplied = image.color().has_alpha();
    if premultiplied {
        MulDiv::new().multiply_alpha_inplace(&mut image).map_err(|e| RenderError::Invalid(e.to_string()))?;
    }
    let size = (image.width(), image.height());
    Ok(Loaded::Decoded(Source { image, format: from, premultiplied, size }))
}

/// Decodes `source` (within the budget) for [`render_source`].
pub fn decode(source: &[u8]) -> Result<Source, RenderError> {
    match load(source, None)? {
        Loaded::Decoded(s) => Ok(s),
        Loaded::Untouched(_) => unreachable!("load decodes when no transform is given"),
    }
}

/// Transforms the encoded image `source`.
pub fn render(source: &[u8], t: Transform, accepts_webp: bool) -> Result<Rendered, RenderError> {
    match load(source, Some((t, accepts_webp)))? {
        Loaded::Untouched(r) => Ok(r),
        Loaded::Decoded(s) => render_source(&s, t, accepts_webp),
    }
}

/// Transforms a decoded source: resize, then encode.
pub fn render_source(src: &Source, t: Transform, accepts_webp: bool) -> Result<Rendered, RenderError> {
    let to = output_format(src.format, t, accepts_webp);
    let quality = t.quality.unwrap_or(DEFAULT_QUALITY);
    let failed = |e: fast_image_resize::ImageError| RenderError::Invalid(e.to_string());
    let mut image = match resized(src, t)? {
        Some(image) => image,
        None if src.premultiplied => src.image.clone(),
        None => return encode(&src.image, to, quality),
    };
    if src.premultiplied {
        MulDiv::new().divide_alpha_inplace(&mut image).map_err(failed)?;
    }
    encode(&image, to, quality)
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

/// The source resized for `t` (its colours still multiplied by alpha if the source's are), or
/// None when `t` keeps its size.
fn resized(src: &Source, t: Transform) -> Result<Option<DynamicImage>, RenderError> {
    let image = &src.image;
    let (w, h) = target(src.size.0, src.size.1, t);
    if (w, h) == (image.width(), image.height()) {
        return Ok(None);
    }
    let mut out = DynamicImage::new(w, h, image.color());
    let mut options = ResizeOptions::new()
        .resize_alg(ResizeAlg::Convolution(FilterType::Lanczos3))
        .use_alpha(!src.premultiplied);
    if t.resize == Resize::Cover {
        options = options.fit_into_destination(Some((0.5, 0.5)));
    }
    thread_local! {
        // Its buffers, reused from one rendering to the next on a thread.
        static RESIZER: std::cell::RefCell<Resizer> = std::cell::RefCell::new(Resizer::new());
    }
    RESIZER
        .with_borrow_mut(|r| r.resize(image, &mut out, &options))
        .map_err(|e| RenderError::Invalid(e.to_string()))?;
    Ok(Some(out))
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
    // Kept in the results' cache, weighed by its length: the room the encoder did not use
    // goes back now, or each small rendering would hold all of it.
    Ok(Rendered::new(Bytes::from(out.into_boxed_slice()), mime))
}

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
    fn colours_under_alpha_survive_a_resize_and_a_reencode() {
        let mut source = Vec::new();
        let pixel = image::Rgba([200, 100, 50, 128]);
        let image = DynamicImage::ImageRgba8(image::RgbaImage::from_pixel(64, 64, pixel));
        image.write_to(&mut Cursor::new(&mut source), ImageFormat::Png).unwrap();
        let close = |got: image::Rgba<u8>| got.0.iter().zip(pixel.0).all(|(a, b)| a.abs_diff(b) <= 2);
        let half = render(&source, t(Some(32), None, Resize::Cover), false).unwrap();
        let back = image::load_from_memory(&half.bytes).unwrap().to_rgba8();
        assert!(close(*back.get_pixel(16, 16)), "{:?}", back.get_pixel(16, 16));
        let webp =
            render(&source, Transform { format: Format::Webp, ..Transform::default() }, false).unwrap();
        let back = image::load_from_memory(&webp.bytes).unwrap().to_rgba8();
        assert_eq!((back.width(), close(*back.get_pixel(5, 5))), (64, true), "{:?}", back.get_pixel(5, 5));
    }

    #[test]
    fn a_large_source_is_kept_reduced_and_renders_every_size_it_holds_the_pixels_for() {
        let mut bytes = Vec::new();
        let image = DynamicImage::ImageRgb8(image::RgbImage::from_pixel(3000, 1000, image::Rgb([9, 9, 9])));
        image.write_to(&mut Cursor::new(&mut bytes), ImageFormat::Png).unwrap();
        let (kept, full) = decode(&bytes).unwrap().keep().unwrap();
        assert_eq!((kept.image.width(), kept.image.height(), kept.size), (2048, 683, (3000, 1000)));
        let full = full.expect("the full source, for what the kept one cannot serve");
        let thumb = t(Some(200), Some(200), Resize::Cover);
        assert!(kept.serves(thumb));
        let out = image::load_from_memory(&render_source(&kept, thumb, false).unwrap().bytes).unwrap();
        assert_eq!((out.width(), out.height()), (200, 200));
        let wide = t(Some(2000), None, Resize::Cover);
        assert!(kept.serves(wide));
        // Its whole size, or a side left to follow another past the kept pixels: the full one.
        for whole in [Transform::default(), t(None, Some(1000), Resize::Cover)] {
            assert!(!kept.serves(whole));
            let out = image::load_from_memory(&render_source(&full, whole, false).unwrap().bytes).unwrap();
            assert_eq!((out.width(), out.height()), (3000, 1000));
        }
        // A small source is kept as it is.
        let mut small = Vec::new();
        DynamicImage::ImageRgb8(image::RgbImage::new(64, 32))
            .write_to(&mut Cursor::new(&mut small), ImageFormat::Png)
            .unwrap();
        let (kept, full) = decode(&small).unwrap().keep().unwrap();
        assert_eq!((kept.image.width(), full.is_none()), (64, true));
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
