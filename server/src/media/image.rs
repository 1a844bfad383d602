//! Images made ready for vision-capable language models.
//!
//! An uploaded image is hostile until decoded within bounds, and too big
//! to send as it is: a phone photo is 12 megapixels and 3 to 6 MB, while
//! the providers use far less. Anthropic documents that an image whose long
//! edge exceeds 1568 px, or that has more than about 1.15 megapixels, is
//! downscaled before the model sees it (so sending more only costs upload
//! time and latency); OpenAI's high detail fits an image into 2048x2048,
//! then its short side to 768 px. [`prepare_image`] therefore sends at most
//! [`MAX_LONG_EDGE`] on the long edge and [`MAX_OUTPUT_PIXELS`] in all:
//! the most either provider uses for Anthropic, and at least what OpenAI
//! tiles for every image up to a 3:2 aspect ratio.
//!
//! The steps, each bounded:
//! 1. the type is read from the magic bytes (never the file name or the
//!    declared type): PNG, JPEG, WebP and GIF only; SVG (a script-capable
//!    document) and everything else are refused;
//! 2. the dimensions are read from the header and compared with
//!    [`ImageLimits::max_pixels`] before the frame is allocated, so that a
//!    few kilobytes claiming 50,000 x 50,000 pixels cost nothing; the
//!    decoders also get `image::Limits` (a largest side and a largest
//!    allocation);
//! 3. one frame is decoded: the first of an animation (a GIF of ten
//!    thousand frames is not walked); a JPEG is decoded by libjpeg-turbo
//!    (the system's `libturbojpeg`) at the smallest DCT scale, in eighths,
//!    still at least the size sent, which skips most of the arithmetic of
//!    a big photo and most of its memory (`jpeg-decoder`, pure Rust, with
//!    scales of 1/8, 1/4, 1/2 and 1, decodes what libjpeg-turbo refuses or
//!    warns about, and names the problem);
//! 4. it is resampled (Catmull-Rom) to the size sent, turned upright when
//!    its EXIF orientation says so, and re-encoded from the pixels alone:
//!    nothing of the file survives but the picture (no EXIF, GPS, ICC or
//!    text chunk, no bytes appended to it). JPEG for opaque images, PNG
//!    when some pixel is transparent (a JPEG would paint it black). JPEGs
//!    are encoded by libjpeg-turbo too (`jpeg-encoder` if it refuses).
//!
//! Colours are taken as sRGB: an embedded profile (a wide-gamut phone
//! photo's Display P3) is dropped, not converted, which shifts saturated
//! colours slightly.

use bytes::Bytes;
use image::ImageDecoder;
use image::metadata::Orientation;
use std::io::Cursor;

/// Longest edge sent, in pixels: Anthropic's documented maximum before it
/// downscales an image itself.
pub const MAX_LONG_EDGE: u32 = 1568;

/// Most pixels sent: Anthropic's documented maximum (about 1.15
/// megapixels, 1,600 tokens) before it downscales an image itself.
pub const MAX_OUTPUT_PIXELS: u64 = 1_150_000;

/// Quality of the JPEGs sent: no visible loss for a model at about a
/// tenth of the size of quality 95.
const JPEG_QUALITY: u8 = 85;

/// Longest side a decoder is allowed to accept, whatever the area: JPEG's
/// own maximum (its header stores 16 bits).
const MAX_SIDE: u32 = u16::MAX as u32;

/// How much [`prepare_image`] accepts.
#[derive(Clone, Debug)]
pub struct ImageLimits {
    /// Largest file, in bytes.
    pub max_input_bytes: u64,
    /// Largest frame, in pixels (width times height as its header says).
    /// Decoding allocates up to four bytes a pixel (RGBA), and a frame's
    /// decoders are given that budget: a 16-bit frame needs twice as much
    /// and is refused near this limit.
    pub max_pixels: u64,
    /// Not consulted: only the first frame of an animation is decoded, and
    /// the frames after it are never read (there is nothing to bound).
    /// Kept so that the limits of a request stay one value.
    pub max_frames_scanned: u32,
}

impl Default for ImageLimits {
    /// 20 MiB (Anthropic's and OpenAI's own per-image request limits are
    /// about that size once base64-encoded, and a phone photo is a few MB)
    /// and 50 megapixels (the largest camera sensors of phones and most
    /// DSLRs; beyond that an upload is a scan or a bomb).
    fn default() -> Self {
        ImageLimits {
            max_input_bytes: 20 << 20,
            max_pixels: 50_000_000,
            max_frames_scanned: 1,
        }
    }
}

/// An image ready to be sent to a provider.
#[derive(Clone, Debug)]
pub struct PreparedImage {
    /// `image/jpeg` or `image/png`.
    pub media_type: &'static str,
    /// The encoded image, without metadata.
    pub data: Bytes,
    pub width: u32,
    pub height: u32,
}

/// OpenAI's `detail` parameter of an image part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageDetail {
    Low,
    High,
    Auto,
}

/// Why an image cannot be prepared.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// Not a PNG, JPEG, WebP or GIF by its magic bytes; `detected` names
    /// what it looks like (`svg`, `html`, `zip`, `tiff`, …) for the logs.
    #[error("unsupported image format ({detected})")]
    Unsupported { detected: &'static str },
    /// Over a limit of [`ImageLimits`].
    #[error("image too large: {0}")]
    TooLarge(Oversize),
    /// Truncated or not decodable; the reason is for the logs.
    #[error("unreadable image: {0}")]
    Corrupt(String),
}

/// Which limit an image exceeds, with the numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Oversize {
    /// The file.
    Bytes { bytes: u64, limit: u64 },
    /// The frame, as its header declares it.
    Pixels { width: u32, height: u32, limit: u64 },
    /// What the decoder would allocate (a 16-bit frame, or a side longer
    /// than 65,535 pixels).
    Memory { limit: u64 },
}

impl std::fmt::Display for Oversize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Oversize::Bytes { bytes, limit } => write!(f, "{bytes} bytes (limit {limit})"),
            Oversize::Pixels {
                width,
                height,
                limit,
            } => write!(f, "{width}x{height} pixels (limit {limit} pixels)"),
            Oversize::Memory { limit } => {
                write!(f, "decoding needs more than {limit} bytes")
            }
        }
    }
}

impl ImageError {
    /// The stable error code clients match on.
    pub fn code(&self) -> &'static str {
        match self {
            ImageError::Unsupported { .. } => "image_unsupported",
            ImageError::TooLarge(_) => "image_too_large",
            ImageError::Corrupt(_) => "image_unreadable",
        }
    }

    /// A sentence for the person who sent the image: what to do, not what
    /// the decoder said.
    pub fn message(&self) -> String {
        const FORMATS: &str = "png, jpeg, webp or gif";
        match self {
            ImageError::Unsupported { detected: "svg" } => {
                format!("svg images are not supported: send a {FORMATS} image")
            }
            ImageError::Unsupported { .. } => {
                format!("this file is not a supported image: send a {FORMATS} image")
            }
            ImageError::TooLarge(Oversize::Bytes { bytes, limit }) => format!(
                "the image is too large ({} MB; at most {} MB)",
                megabytes(*bytes),
                megabytes(*limit)
            ),
            ImageError::TooLarge(Oversize::Pixels {
                width,
                height,
                limit,
            }) => format!(
                "the image has too many pixels ({width}x{height}; at most {} megapixels)",
                limit / 1_000_000
            ),
            ImageError::TooLarge(Oversize::Memory { .. }) => {
                "the image is too large to decode: send a smaller image".to_string()
            }
            ImageError::Corrupt(_) => {
                "the image could not be read: the file is damaged or incomplete".to_string()
            }
        }
    }
}

/// Megabytes (10^6 bytes), one decimal.
fn megabytes(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / 1e6)
}

/// Decodes once (the first frame of an animated GIF or WebP), checks the
/// dimensions from the header against `limits` before the frame is
/// allocated (decompression bombs are refused cheaply), downscales so that
/// the long edge is at most [`MAX_LONG_EDGE`] and the area at most
/// [`MAX_OUTPUT_PIXELS`] (aspect ratio kept, never upscaled), and
/// re-encodes without any metadata: JPEG (quality 85) when opaque, PNG
/// when some pixel is transparent. See the module's documentation for why.
///
/// Synchronous and CPU-bound (tens of milliseconds for a 12 MP photo):
/// callers run it in `spawn_blocking`.
pub fn prepare_image(bytes: &[u8], limits: &ImageLimits) -> Result<PreparedImage, ImageError> {
    let size = bytes.len() as u64;
    if size > limits.max_input_bytes {
        return Err(ImageError::TooLarge(Oversize::Bytes {
            bytes: size,
            limit: limits.max_input_bytes,
        }));
    }
    let format = sniff(bytes)?;
    // A decoder bug met by a hostile file is an unreadable image, not a
    // failed request.
    let decoded = std::panic::catch_unwind(|| decode(bytes, format, limits))
        .map_err(|_| ImageError::Corrupt("the decoder panicked".into()))??;
    let (width, height) = target_size(decoded.width, decoded.height);
    let raster = resize(decoded.raster, width, height)?.oriented(decoded.orientation);
    encode(raster)
}

/// The format by magic bytes, when it is one of the four accepted.
fn sniff(bytes: &[u8]) -> Result<image::ImageFormat, ImageError> {
    use image::ImageFormat as F;
    match image::guess_format(bytes) {
        Ok(format @ (F::Png | F::Jpeg | F::Gif | F::WebP)) => Ok(format),
        Ok(other) => Err(ImageError::Unsupported {
            detected: other.extensions_str().first().copied().unwrap_or("image"),
        }),
        Err(_) => Err(ImageError::Unsupported {
            detected: describe(bytes),
        }),
    }
}

/// What a file that is no image looks like (for the logs, and to name SVG
/// in the message).
fn describe(bytes: &[u8]) -> &'static str {
    let text = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let start = text
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(text.len());
    let text = &text[start..];
    let head = &text[..text.len().min(4096)];
    let has = |needle: &[u8]| {
        head.windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
    };
    if text.first() == Some(&b'<') {
        if has(b"<svg") { "svg" } else { "html or xml" }
    } else if text.starts_with(b"PK\x03\x04") {
        "zip"
    } else if text.starts_with(b"%PDF-") {
        "pdf"
    } else {
        "unknown"
    }
}

/// A decoded frame, possibly already reduced (a JPEG's DCT scaling).
struct Decoded {
    raster: Raster,
    /// The EXIF orientation, applied last.
    orientation: Orientation,
    /// The frame's size as its header declares it (the size sent is
    /// computed from it, not from the reduced raster).
    width: u32,
    height: u32,
}

/// Decodes the frame (bounded by `limits`) and reads its orientation.
fn decode(
    bytes: &[u8],
    format: image::ImageFormat,
    limits: &ImageLimits,
) -> Result<Decoded, ImageError> {
    if format == image::ImageFormat::Jpeg
        && let Some(decoded) = decode_jpeg(bytes, limits)?
    {
        return Ok(decoded);
    }
    decode_any(bytes, format, limits)
}

/// Refuses a frame of more than `max_pixels`.
fn check_pixels(width: u32, height: u32, limits: &ImageLimits) -> Result<(), ImageError> {
    if u64::from(width) * u64::from(height) > limits.max_pixels {
        return Err(ImageError::TooLarge(Oversize::Pixels {
            width,
            height,
            limit: limits.max_pixels,
        }));
    }
    if width == 0 || height == 0 {
        return Err(ImageError::Corrupt(format!(
            "the header declares {width}x{height} pixels"
        )));
    }
    Ok(())
}

/// Bytes a decoder may allocate: the frame in RGBA.
fn max_alloc(limits: &ImageLimits) -> u64 {
    limits.max_pixels.saturating_mul(4)
}

/// A JPEG decoded straight at the smallest DCT scale still at least the
/// size sent (`jpeg-decoder`'s reduced inverse DCT: a 4000x3000 photo is
/// decoded at 2000x1500 for a 1238x928 result). `None` for what this
/// decoder returns in forms the encoder does not take (CMYK, 16-bit
/// grayscale): the general path converts them.
fn decode_jpeg(bytes: &[u8], limits: &ImageLimits) -> Result<Option<Decoded>, ImageError> {
    use jpeg_decoder::PixelFormat;
    let corrupt = |e: jpeg_decoder::Error| ImageError::Corrupt(format!("jpeg: {e}"));
    let mut decoder = jpeg_decoder::Decoder::new(bytes);
    decoder.read_info().map_err(corrupt)?;
    let info = decoder
        .info()
        .ok_or_else(|| ImageError::Corrupt("jpeg: no frame header".into()))?;
    let (width, height) = (u32::from(info.width), u32::from(info.height));
    check_pixels(width, height, limits)?;
    let layout = match info.pixel_format {
        PixelFormat::L8 => Layout::Luma,
        PixelFormat::RGB24 => Layout::Rgb,
        PixelFormat::L16 | PixelFormat::CMYK32 => return Ok(None),
    };
    // A progressive JPEG keeps every coefficient of the full-size frame
    // until its last scan (two bytes each, for each component, counted
    // here at full resolution): that, not the reduced output, is its
    // largest allocation.
    if info.coding_process == jpeg_decoder::CodingProcess::DctProgressive {
        let coefficients = u64::from(width) * u64::from(height) * layout.channels() as u64 * 2;
        if coefficients > max_alloc(limits) {
            return Err(ImageError::TooLarge(Oversize::Memory {
                limit: max_alloc(limits),
            }));
        }
    }
    let (target_width, target_height) = target_size(width, height);
    // The smallest scale (in eighths, among those a decoder offers) at
    // which both sides are still at least the target's, asked for as the
    // exact size it gives.
    let scaled = |side: u32, eighths: u32| (side * eighths).div_ceil(8);
    let smallest = |scales: &[u32]| {
        let eighths = scales
            .iter()
            .copied()
            .find(|&e| scaled(width, e) >= target_width && scaled(height, e) >= target_height)
            .unwrap_or(8);
        (scaled(width, eighths), scaled(height, eighths))
    };
    let orientation = decoder
        .exif_data()
        .and_then(Orientation::from_exif_chunk)
        .unwrap_or(Orientation::NoTransforms);
    // libjpeg-turbo first (a third of the time, and every eighth, so a
    // 4000x3000 photo is decoded at 3/8, 1500x1125); what it refuses or
    // warns about is decoded again by jpeg-decoder, whose error names the
    // problem.
    let (turbo_width, turbo_height) = smallest(&[1, 2, 3, 4, 5, 6, 7, 8]);
    if let Some(data) =
        super::turbo::decode_scaled(bytes, turbo_width, turbo_height, layout == Layout::Luma)
    {
        let raster = Raster {
            layout,
            width: turbo_width,
            height: turbo_height,
            data,
        };
        raster.check_len()?;
        return Ok(Some(Decoded {
            raster,
            orientation,
            width,
            height,
        }));
    }
    let (scaled_width, scaled_height) = smallest(&[1, 2, 4, 8]);
    decoder
        .scale(scaled_width as u16, scaled_height as u16)
        .map_err(corrupt)?;
    decoder.set_max_decoding_buffer_size(usize::try_from(max_alloc(limits)).unwrap_or(usize::MAX));
    let data = decoder.decode().map_err(corrupt)?;
    let info = decoder
        .info()
        .ok_or_else(|| ImageError::Corrupt("jpeg: no frame header".into()))?;
    let raster = Raster {
        layout,
        width: u32::from(info.width),
        height: u32::from(info.height),
        data,
    };
    raster.check_len()?;
    Ok(Some(Decoded {
        raster,
        orientation,
        width,
        height,
    }))
}

/// Any accepted format through `image`'s decoders, with its `Limits`; the
/// first frame of an animation only (its `read_image` stops there).
fn decode_any(
    bytes: &[u8],
    format: image::ImageFormat,
    limits: &ImageLimits,
) -> Result<Decoded, ImageError> {
    let mut decoder_limits = image::Limits::default();
    decoder_limits.max_image_width = Some(MAX_SIDE);
    decoder_limits.max_image_height = Some(MAX_SIDE);
    decoder_limits.max_alloc = Some(max_alloc(limits));
    let mut reader = image::ImageReader::with_format(Cursor::new(bytes), format);
    reader.limits(decoder_limits);
    let mut decoder = reader.into_decoder().map_err(|e| from_image(e, limits))?;
    let (width, height) = decoder.dimensions();
    check_pixels(width, height, limits)?;
    let orientation = decoder.orientation().unwrap_or(Orientation::NoTransforms);
    let image = image::DynamicImage::from_decoder(decoder).map_err(|e| from_image(e, limits))?;
    Ok(Decoded {
        raster: Raster::from_image(image),
        orientation,
        width,
        height,
    })
}

fn from_image(error: image::ImageError, limits: &ImageLimits) -> ImageError {
    match error {
        image::ImageError::Limits(_) => ImageError::TooLarge(Oversize::Memory {
            limit: max_alloc(limits),
        }),
        image::ImageError::Unsupported(e) => ImageError::Corrupt(format!("unsupported: {e}")),
        other => ImageError::Corrupt(other.to_string()),
    }
}

/// The size sent for a `width` x `height` frame: scaled down, aspect ratio
/// kept, until the long edge is at most [`MAX_LONG_EDGE`] and the area at
/// most [`MAX_OUTPUT_PIXELS`]; never scaled up.
fn target_size(width: u32, height: u32) -> (u32, u32) {
    let (w, h) = (f64::from(width), f64::from(height));
    let scale = (f64::from(MAX_LONG_EDGE) / w.max(h))
        .min((MAX_OUTPUT_PIXELS as f64 / (w * h)).sqrt())
        .min(1.0);
    if scale >= 1.0 {
        return (width, height);
    }
    // Rounded down: both limits hold after rounding.
    let side = |s: f64| ((s * scale + 1e-9).floor() as u32).max(1);
    (side(w), side(h))
}

/// How the bytes of a [`Raster`] hold a pixel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    Luma,
    Rgb,
    Rgba,
}

impl Layout {
    fn channels(self) -> usize {
        match self {
            Layout::Luma => 1,
            Layout::Rgb => 3,
            Layout::Rgba => 4,
        }
    }
}

/// A decoded 8-bit frame.
struct Raster {
    layout: Layout,
    width: u32,
    height: u32,
    data: Vec<u8>,
}

impl Raster {
    /// Any decoded image as 8-bit grayscale, RGB or RGBA. An alpha channel
    /// that is opaque everywhere is dropped (the image is sent as a JPEG).
    fn from_image(image: image::DynamicImage) -> Raster {
        let (width, height) = (image.width(), image.height());
        let color = image.color();
        let (layout, data) = if color.has_alpha() {
            let rgba = image.into_rgba8().into_raw();
            if rgba.chunks_exact(4).all(|p| p[3] == u8::MAX) {
                let rgb = rgba
                    .chunks_exact(4)
                    .flat_map(|p| [p[0], p[1], p[2]])
                    .collect();
                (Layout::Rgb, rgb)
            } else {
                (Layout::Rgba, rgba)
            }
        } else if color.has_color() {
            (Layout::Rgb, image.into_rgb8().into_raw())
        } else {
            (Layout::Luma, image.into_luma8().into_raw())
        };
        Raster {
            layout,
            width,
            height,
            data,
        }
    }

    fn check_len(&self) -> Result<(), ImageError> {
        let expected = self.width as usize * self.height as usize * self.layout.channels();
        if self.data.len() != expected || expected == 0 {
            return Err(ImageError::Corrupt(format!(
                "decoded {} bytes for {}x{} pixels",
                self.data.len(),
                self.width,
                self.height
            )));
        }
        Ok(())
    }

    /// Turned upright as the EXIF orientation says (done on the small
    /// frame, after resampling).
    fn oriented(self, orientation: Orientation) -> Raster {
        if orientation == Orientation::NoTransforms {
            return self;
        }
        let Raster {
            layout,
            width,
            height,
            data,
        } = self;
        let mut image = match layout {
            Layout::Luma => image::GrayImage::from_raw(width, height, data).map(Into::into),
            Layout::Rgb => image::RgbImage::from_raw(width, height, data).map(Into::into),
            Layout::Rgba => image::RgbaImage::from_raw(width, height, data).map(Into::into),
        }
        .unwrap_or_else(|| unreachable!("the raster's length was checked"));
        let image: &mut image::DynamicImage = &mut image;
        image.apply_orientation(orientation);
        let (width, height) = (image.width(), image.height());
        let data = std::mem::take(image).into_bytes();
        Raster {
            layout,
            width,
            height,
            data,
        }
    }
}

/// Resamples to `width` x `height` (Catmull-Rom; alpha premultiplied while
/// filtering, so transparent pixels do not bleed their colour).
fn resize(raster: Raster, width: u32, height: u32) -> Result<Raster, ImageError> {
    use fast_image_resize as fr;
    if (raster.width, raster.height) == (width, height) {
        return Ok(raster);
    }
    let pixel = match raster.layout {
        Layout::Luma => fr::PixelType::U8,
        Layout::Rgb => fr::PixelType::U8x3,
        Layout::Rgba => fr::PixelType::U8x4,
    };
    let failed = |e: &dyn std::fmt::Display| ImageError::Corrupt(format!("resampling: {e}"));
    let source = fr::images::Image::from_vec_u8(raster.width, raster.height, raster.data, pixel)
        .map_err(|e| failed(&e))?;
    let mut target = fr::images::Image::new(width, height, pixel);
    let options =
        fr::ResizeOptions::new().resize_alg(fr::ResizeAlg::Convolution(fr::FilterType::CatmullRom));
    fr::Resizer::new()
        .resize(&source, &mut target, &options)
        .map_err(|e| failed(&e))?;
    Ok(Raster {
        layout: raster.layout,
        width,
        height,
        data: target.into_vec(),
    })
}

/// The frame as a JPEG (opaque) or a PNG (transparent), nothing else in
/// the file.
fn encode(raster: Raster) -> Result<PreparedImage, ImageError> {
    let failed = |e: &dyn std::fmt::Display| ImageError::Corrupt(format!("encoding: {e}"));
    let Raster {
        layout,
        width,
        height,
        data,
    } = raster;
    let mut out = Vec::new();
    let media_type = match layout {
        Layout::Rgba => {
            use image::ImageEncoder;
            use image::codecs::png::{CompressionType, FilterType, PngEncoder};
            PngEncoder::new_with_quality(&mut out, CompressionType::Fast, FilterType::Adaptive)
                .write_image(&data, width, height, image::ExtendedColorType::Rgba8)
                .map_err(|e| failed(&e))?;
            "image/png"
        }
        Layout::Rgb | Layout::Luma => {
            let color = if layout == Layout::Rgb {
                jpeg_encoder::ColorType::Rgb
            } else {
                jpeg_encoder::ColorType::Luma
            };
            if let Some(jpeg) =
                super::turbo::encode(&data, width, height, layout == Layout::Luma, JPEG_QUALITY)
            {
                return Ok(PreparedImage {
                    media_type: "image/jpeg",
                    data: Bytes::from(jpeg),
                    width,
                    height,
                });
            }
            // The long edge is at most 1568 here: it fits the format's 16 bits.
            let side = |s: u32| u16::try_from(s).map_err(|e| failed(&e));
            let mut encoder = jpeg_encoder::Encoder::new(&mut out, JPEG_QUALITY);
            encoder.set_chroma_subsampling_method(jpeg_encoder::ChromaSubsamplingMethod::Average);
            encoder
                .encode(&data, side(width)?, side(height)?, color)
                .map_err(|e| failed(&e))?;
            "image/jpeg"
        }
    };
    Ok(PreparedImage {
        media_type,
        data: Bytes::from(out),
        width,
        height,
    })
}

/// OpenAI's published formula for GPT-4o-class models: `Low` costs 85
/// tokens whatever the size; `High` (and `Auto`, counted as high: the
/// worst case) scales the image to fit 2048x2048, then its shortest side
/// down to 768 px, and costs 170 per 512 px tile plus 85.
pub fn openai_image_tokens(width: u32, height: u32, detail: ImageDetail) -> u32 {
    const BASE: u32 = 85;
    const PER_TILE: u32 = 170;
    if detail == ImageDetail::Low || width == 0 || height == 0 {
        return BASE;
    }
    let (mut w, mut h) = (f64::from(width), f64::from(height));
    let fit = |w: &mut f64, h: &mut f64, ratio: f64| {
        *w = (*w * ratio + 1e-9).floor().max(1.0);
        *h = (*h * ratio + 1e-9).floor().max(1.0);
    };
    if w.max(h) > 2048.0 {
        let ratio = 2048.0 / w.max(h);
        fit(&mut w, &mut h, ratio);
    }
    if w.min(h) > 768.0 {
        let ratio = 768.0 / w.min(h);
        fit(&mut w, &mut h, ratio);
    }
    let tiles = (w / 512.0).ceil() as u32 * (h / 512.0).ceil() as u32;
    BASE + PER_TILE * tiles
}

/// Anthropic's published estimate: `ceil(width * height / 750)` tokens,
/// for the size the model sees (at most 1568 on the long edge and about
/// 1.15 megapixels: pass a [`PreparedImage`]'s size).
pub fn anthropic_image_tokens(width: u32, height: u32) -> u32 {
    let tokens = (u64::from(width) * u64::from(height)).div_ceil(750);
    u32::try_from(tokens).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::testdata;
    use std::time::{Duration, Instant};

    fn prepare(bytes: &[u8]) -> Result<PreparedImage, ImageError> {
        prepare_image(bytes, &ImageLimits::default())
    }

    /// A smooth RGB gradient (cheap to make in a debug build).
    fn gradient(width: u32, height: u32) -> Vec<u8> {
        let mut out = Vec::with_capacity(width as usize * height as usize * 3);
        for y in 0..height {
            for x in 0..width {
                out.extend_from_slice(&[(x % 256) as u8, (y % 256) as u8, ((x + y) % 256) as u8]);
            }
        }
        out
    }

    fn png_of(data: &[u8], width: u32, height: u32, color: image::ExtendedColorType) -> Vec<u8> {
        use image::ImageEncoder;
        let mut out = Vec::new();
        image::codecs::png::PngEncoder::new(&mut out)
            .write_image(data, width, height, color)
            .expect("PNG encoding");
        out
    }

    fn decoded(prepared: &PreparedImage) -> image::DynamicImage {
        image::load_from_memory(&prepared.data).expect("the output decodes")
    }

    /// A GIF of `frames` frames of `side` x `side` pixels: the first all
    /// red, the others all blue (palette indices 0 and 1).
    fn gif_frames(side: u16, frames: usize) -> Vec<u8> {
        let mut gif = b"GIF89a".to_vec();
        gif.extend_from_slice(&side.to_le_bytes());
        gif.extend_from_slice(&side.to_le_bytes());
        // A global palette of two colours, background 0.
        gif.extend_from_slice(&[0b1000_0000, 0, 0, 255, 0, 0, 0, 0, 255]);
        let frame = |index: u8| {
            let pixels = vec![index; usize::from(side) * usize::from(side)];
            let lzw = weezl::encode::Encoder::new(weezl::BitOrder::Lsb, 2)
                .encode(&pixels)
                .expect("LZW");
            // Graphic control (10 ms), descriptor, minimum code size.
            let mut out = vec![0x21, 0xF9, 4, 0, 1, 0, 0, 0, 0x2C, 0, 0, 0, 0];
            out.extend_from_slice(&side.to_le_bytes());
            out.extend_from_slice(&side.to_le_bytes());
            out.extend_from_slice(&[0, 2]);
            for block in lzw.chunks(255) {
                out.push(block.len() as u8);
                out.extend_from_slice(block);
            }
            out.push(0);
            out
        };
        gif.extend(frame(0));
        let other = frame(1);
        for _ in 1..frames {
            gif.extend_from_slice(&other);
        }
        gif.push(0x3B);
        gif
    }

    #[test]
    fn a_decompression_bomb_is_refused_from_its_header() {
        let bomb = testdata::png_claiming(50_000, 50_000);
        assert!(bomb.len() < 16 << 10, "{} bytes", bomb.len());
        let started = Instant::now();
        let error = prepare(&bomb).expect_err("refused");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(error.code(), "image_too_large");
        assert!(
            matches!(
                error,
                ImageError::TooLarge(Oversize::Pixels {
                    width: 50_000,
                    height: 50_000,
                    limit: 50_000_000
                })
            ),
            "{error:?}"
        );
        assert_eq!(
            error.message(),
            "the image has too many pixels (50000x50000; at most 50 megapixels)"
        );
        // The same for a JPEG's header (its own decoder reads it).
        let mut jpeg = testdata::jpeg_of(&gradient(16, 16), 16, 16, 90);
        let sof = jpeg
            .windows(2)
            .position(|w| w == [0xFF, 0xC0])
            .expect("a baseline frame header");
        jpeg[sof + 5..sof + 9].copy_from_slice(&[0xFF, 0xF0, 0xFF, 0xF0]);
        let error = prepare(&jpeg).expect_err("refused");
        assert!(
            matches!(
                error,
                ImageError::TooLarge(Oversize::Pixels {
                    width: 65_520,
                    height: 65_520,
                    ..
                })
            ),
            "{error:?}"
        );
    }

    #[test]
    fn files_over_the_byte_limit_are_refused_before_anything() {
        let limits = ImageLimits {
            max_input_bytes: 1000,
            ..ImageLimits::default()
        };
        let error = prepare_image(&[0u8; 1001], &limits).expect_err("refused");
        assert_eq!(error.code(), "image_too_large");
        assert_eq!(
            error.to_string(),
            "image too large: 1001 bytes (limit 1000)"
        );
        assert_eq!(
            error.message(),
            "the image is too large (0.0 MB; at most 0.0 MB)"
        );
    }

    #[test]
    fn a_truncated_jpeg_is_unreadable() {
        let jpeg = testdata::photo_jpeg(320, 240, 90);
        for cut in [jpeg.len() / 2, jpeg.len() - 200, 600, 3] {
            let error = prepare(&jpeg[..cut]).expect_err("refused");
            assert_eq!(error.code(), "image_unreadable", "cut at {cut}: {error:?}");
            assert_eq!(
                error.message(),
                "the image could not be read: the file is damaged or incomplete"
            );
        }
        // The whole file is fine.
        prepare(&jpeg).expect("prepared");
    }

    #[test]
    fn svg_and_polyglots_are_unsupported_whatever_they_are_named() {
        let svg = br#"<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><rect/></svg>"#;
        let xml_svg = b"\xEF\xBB\xBF  <?xml version=\"1.0\"?>\n<!DOCTYPE svg>\n<svg></svg>";
        for file in [&svg[..], &xml_svg[..]] {
            let error = prepare(file).expect_err("refused");
            assert_eq!(error.code(), "image_unsupported");
            assert!(matches!(error, ImageError::Unsupported { detected: "svg" }));
            assert_eq!(
                error.message(),
                "svg images are not supported: send a png, jpeg, webp or gif image"
            );
        }
        let html = b"<html><script>fetch('/api/keys')</script><img src=x></html>";
        let zip = b"PK\x03\x04\x14\x00\x00\x00\x08\x00payload.png";
        let pdf = b"%PDF-1.7\n1 0 obj << >> endobj";
        let bmp = b"BM\x36\x00\x00\x00\x00\x00\x00\x00\x36\x00\x00\x00";
        for (file, detected) in [
            (&html[..], "html or xml"),
            (&zip[..], "zip"),
            (&pdf[..], "pdf"),
            (&bmp[..], "bmp"),
            (&b""[..], "unknown"),
        ] {
            let error = prepare(file).expect_err("refused");
            assert_eq!(error.code(), "image_unsupported", "{detected}");
            assert_eq!(
                error.to_string(),
                format!("unsupported image format ({detected})")
            );
            assert_eq!(
                error.message(),
                "this file is not a supported image: send a png, jpeg, webp or gif image"
            );
        }
        // An image's magic bytes before a script are not an image.
        let error = prepare(b"GIF89a/*\x00\x00*/=1;alert(document.domain)//").expect_err("refused");
        assert_eq!(error.code(), "image_unreadable");
        // A real PNG carrying a ZIP after it: the pixels go through, the
        // archive does not.
        let mut polyglot = png_of(&gradient(64, 48), 64, 48, image::ExtendedColorType::Rgb8);
        polyglot.extend_from_slice(b"PK\x03\x04\x14\x00\x00\x00\x08\x00evil.html<script>");
        let prepared = prepare(&polyglot).expect("prepared");
        let output = &prepared.data[..];
        assert!(!output.windows(4).any(|w| w == b"PK\x03\x04"));
        assert!(!output.windows(7).any(|w| w == b"<script"));
    }

    #[test]
    fn only_the_first_frame_of_ten_thousand_is_decoded() {
        let gif = gif_frames(256, 10_000);
        assert!(gif.len() > 1 << 20, "{} bytes", gif.len());
        let started = Instant::now();
        let prepared = prepare(&gif).expect("prepared");
        let took = started.elapsed();
        assert!(took < Duration::from_secs(2), "{took:?}");
        assert_eq!(
            (prepared.media_type, prepared.width, prepared.height),
            ("image/jpeg", 256, 256)
        );
        // Red: the first frame, not the last.
        let pixel = decoded(&prepared).to_rgb8().get_pixel(128, 128).0;
        assert!(pixel[0] > 200 && pixel[2] < 60, "{pixel:?}");
    }

    #[test]
    fn exif_and_gps_are_dropped_even_from_ten_megabytes_of_them() {
        let jpeg = testdata::jpeg_of(&testdata::photo_rgb(640, 480, 4, 3), 640, 480, 90);
        // The camera's block with GPS tags, then 160 more APP1 segments
        // (a segment holds at most 64 KiB).
        let mut segments = vec![testdata::exif_app1(1, 0)];
        segments.extend((0..160).map(|_| testdata::exif_app1(1, 65_000)));
        let input = testdata::with_segments(&jpeg, &segments);
        assert!(input.len() > 10_000_000, "{} bytes", input.len());
        let prepared = prepare(&input).expect("prepared");
        assert_eq!(
            (prepared.media_type, prepared.width, prepared.height),
            ("image/jpeg", 640, 480)
        );
        let output = &prepared.data[..];
        assert!(output.len() < 100_000, "{} bytes", output.len());
        // No APP1 marker (0xFF is always escaped in entropy-coded data) and
        // no trace of the block.
        assert!(!output.windows(2).any(|w| w == [0xFF, 0xE1]));
        for trace in [&b"Exif"[..], b"Workspace", b"Phone 12"] {
            assert!(!output.windows(trace.len()).any(|w| w == trace));
        }
        // The input did carry them.
        assert!(input.windows(9).any(|w| w == b"Workspace"));
    }

    #[test]
    fn big_images_are_downscaled_within_both_limits_keeping_their_shape() {
        // (input, expected output): the long edge binds, then the area.
        for ((width, height), expected) in [
            ((2400, 800), (1568, 522)),
            ((1500, 1500), (1072, 1072)),
            ((800, 2400), (522, 1568)),
        ] {
            let jpeg = testdata::jpeg_of(&gradient(width, height), width, height, 90);
            let prepared = prepare(&jpeg).expect("prepared");
            assert_eq!(
                (prepared.width, prepared.height),
                expected,
                "{width}x{height}"
            );
            assert!(prepared.width.max(prepared.height) <= MAX_LONG_EDGE);
            assert!(u64::from(prepared.width) * u64::from(prepared.height) <= MAX_OUTPUT_PIXELS);
            let (input_ratio, output_ratio) = (
                f64::from(width) / f64::from(height),
                f64::from(prepared.width) / f64::from(prepared.height),
            );
            assert!((input_ratio - output_ratio).abs() / input_ratio < 0.01);
            let image = decoded(&prepared);
            assert_eq!((image.width(), image.height()), expected);
        }
        // PNGs go through the general decoder and the same sizes.
        let png = png_of(
            &gradient(2000, 1000),
            2000,
            1000,
            image::ExtendedColorType::Rgb8,
        );
        let prepared = prepare(&png).expect("prepared");
        assert_eq!((prepared.width, prepared.height), (1516, 758));
        assert_eq!(target_size(4000, 3000), (1238, 928));
        assert_eq!(target_size(1568, 700), (1568, 700));
        assert_eq!(target_size(1, 100_000), (1, 1568));
    }

    #[test]
    fn small_images_are_not_upscaled() {
        let jpeg = testdata::jpeg_of(&gradient(300, 200), 300, 200, 90);
        let prepared = prepare(&jpeg).expect("prepared");
        assert_eq!((prepared.width, prepared.height), (300, 200));
        let png = png_of(&[128; 1], 1, 1, image::ExtendedColorType::L8);
        let prepared = prepare(&png).expect("prepared");
        assert_eq!(
            (prepared.media_type, prepared.width, prepared.height),
            ("image/jpeg", 1, 1)
        );
    }

    #[test]
    fn transparency_keeps_png_and_opaque_alpha_becomes_jpeg() {
        let (width, height) = (200, 100);
        let mut rgba: Vec<u8> = gradient(width, height)
            .chunks_exact(3)
            .flat_map(|p| [p[0], p[1], p[2], 255])
            .collect();
        let opaque = png_of(&rgba, width, height, image::ExtendedColorType::Rgba8);
        let prepared = prepare(&opaque).expect("prepared");
        assert_eq!(prepared.media_type, "image/jpeg");
        assert_eq!(&prepared.data[..3], &[0xFF, 0xD8, 0xFF]);
        // The left half fully transparent.
        for (i, pixel) in rgba.chunks_exact_mut(4).enumerate() {
            if (i as u32 % width) < width / 2 {
                pixel[3] = 0;
            }
        }
        let transparent = png_of(&rgba, width, height, image::ExtendedColorType::Rgba8);
        let prepared = prepare(&transparent).expect("prepared");
        assert_eq!(prepared.media_type, "image/png");
        assert_eq!(&prepared.data[..8], b"\x89PNG\r\n\x1a\n");
        let image = decoded(&prepared).to_rgba8();
        assert_eq!(image.get_pixel(10, 50).0[3], 0);
        assert_eq!(image.get_pixel(190, 50).0[3], 255);
        // Big and transparent: downscaled, still PNG, still transparent.
        let (width, height) = (3000, 500);
        let rgba: Vec<u8> = (0..width * height)
            .flat_map(|i| {
                [
                    (i % 251) as u8,
                    40,
                    90,
                    if i % width < 100 { 0 } else { 255 },
                ]
            })
            .collect();
        let big = png_of(&rgba, width, height, image::ExtendedColorType::Rgba8);
        let prepared = prepare(&big).expect("prepared");
        assert_eq!(
            (prepared.media_type, prepared.width, prepared.height),
            ("image/png", 1568, 261)
        );
        let image = decoded(&prepared).to_rgba8();
        assert_eq!(image.get_pixel(10, 100).0[3], 0);
        assert_eq!(image.get_pixel(1000, 100).0[3], 255);
    }

    #[test]
    fn the_exif_orientation_is_applied_to_the_pixels() {
        // 200x100, left half black and right half white, "rotate 90° to
        // display": upright it is 100x200, black on top.
        let (width, height) = (200, 100);
        let rgb: Vec<u8> = (0..width * height)
            .flat_map(|i| {
                if i % width < width / 2 {
                    [0; 3]
                } else {
                    [255; 3]
                }
            })
            .collect();
        let jpeg = testdata::with_segments(
            &testdata::jpeg_of(&rgb, width, height, 90),
            &[testdata::exif_app1(6, 0)],
        );
        let prepared = prepare(&jpeg).expect("prepared");
        assert_eq!((prepared.width, prepared.height), (100, 200));
        let image = decoded(&prepared).to_luma8();
        assert!(image.get_pixel(50, 20).0[0] < 40);
        assert!(image.get_pixel(50, 180).0[0] > 215);
    }

    #[test]
    fn webp_and_grayscale_are_accepted() {
        use image::ImageEncoder;
        let mut webp = Vec::new();
        image::codecs::webp::WebPEncoder::new_lossless(&mut webp)
            .write_image(&gradient(120, 80), 120, 80, image::ExtendedColorType::Rgb8)
            .expect("WebP encoding");
        let prepared = prepare(&webp).expect("prepared");
        assert_eq!(
            (prepared.media_type, prepared.width, prepared.height),
            ("image/jpeg", 120, 80)
        );
        let gray = vec![77u8; 2000 * 1000];
        let mut jpeg = Vec::new();
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 90)
            .write_image(&gray, 2000, 1000, image::ExtendedColorType::L8)
            .expect("JPEG encoding");
        let prepared = prepare(&jpeg).expect("prepared");
        assert_eq!((prepared.width, prepared.height), (1516, 758));
        assert_eq!(decoded(&prepared).color(), image::ColorType::L8);
    }

    #[test]
    fn progressive_jpegs_are_bounded_by_their_coefficients() {
        let (width, height) = (400, 300);
        let mut jpeg = Vec::new();
        let mut encoder = jpeg_encoder::Encoder::new(&mut jpeg, 90);
        encoder.set_progressive(true);
        encoder
            .encode(
                &gradient(width, height),
                width as u16,
                height as u16,
                jpeg_encoder::ColorType::Rgb,
            )
            .expect("JPEG encoding");
        let prepared = prepare(&jpeg).expect("prepared");
        assert_eq!((prepared.width, prepared.height), (400, 300));
        // Within the pixel limit, but its coefficients (6 bytes a pixel)
        // are past the decoder's budget (4 bytes a pixel).
        let limits = ImageLimits {
            max_pixels: u64::from(width * height),
            ..ImageLimits::default()
        };
        let error = prepare_image(&jpeg, &limits).expect_err("refused");
        assert!(
            matches!(error, ImageError::TooLarge(Oversize::Memory { .. })),
            "{error:?}"
        );
        assert_eq!(
            error.message(),
            "the image is too large to decode: send a smaller image"
        );
        // A baseline JPEG of the same size is within the same limits.
        let baseline = testdata::jpeg_of(&gradient(width, height), width, height, 90);
        prepare_image(&baseline, &limits).expect("prepared");
    }

    #[test]
    fn cmyk_jpegs_go_through_the_general_decoder() {
        let (width, height) = (64, 32);
        // Cyan on the left half, nothing (white) on the right.
        let cmyk: Vec<u8> = (0..width * height)
            .flat_map(|i| {
                if i % width < width / 2 {
                    [255, 0, 0, 0]
                } else {
                    [0; 4]
                }
            })
            .collect();
        let mut jpeg = Vec::new();
        jpeg_encoder::Encoder::new(&mut jpeg, 95)
            .encode(
                &cmyk,
                width as u16,
                height as u16,
                jpeg_encoder::ColorType::Cmyk,
            )
            .expect("JPEG encoding");
        let mut probe = jpeg_decoder::Decoder::new(&jpeg[..]);
        probe.read_info().expect("a JPEG header");
        let format = probe.info().map(|i| i.pixel_format);
        assert_eq!(format, Some(jpeg_decoder::PixelFormat::CMYK32));
        let prepared = prepare(&jpeg).expect("prepared");
        assert_eq!(
            (prepared.media_type, prepared.width, prepared.height),
            ("image/jpeg", 64, 32)
        );
        let image = decoded(&prepared).to_rgb8();
        let (left, right) = (image.get_pixel(8, 16).0, image.get_pixel(56, 16).0);
        assert!(left[0] < 100 && left[2] > 150, "{left:?}");
        assert!(right.iter().all(|&c| c > 200), "{right:?}");
    }

    #[test]
    fn token_estimates_match_the_providers_documented_examples() {
        // OpenAI: 1024x1024 high is 4 tiles of 768x768; 2048x4096 is
        // 768x1536, 6 tiles; low is 85 whatever the size.
        assert_eq!(openai_image_tokens(1024, 1024, ImageDetail::High), 765);
        assert_eq!(openai_image_tokens(2048, 4096, ImageDetail::High), 1105);
        assert_eq!(openai_image_tokens(4096, 8192, ImageDetail::Low), 85);
        assert_eq!(openai_image_tokens(1024, 1024, ImageDetail::Auto), 765);
        // Small images are not scaled up: one tile.
        assert_eq!(openai_image_tokens(512, 512, ImageDetail::High), 255);
        // Anthropic: 1092x1092 is about 1590; 1568x735 (1.15 MP) about 1537.
        assert_eq!(anthropic_image_tokens(1092, 1092), 1590);
        assert_eq!(anthropic_image_tokens(200, 200), 54);
        assert_eq!(anthropic_image_tokens(1238, 928), 1532);
    }

    #[test]
    fn a_realistic_photo_becomes_a_small_jpeg() {
        let jpeg = testdata::photo_jpeg(1600, 1200, 90);
        let prepared = prepare(&jpeg).expect("prepared");
        assert_eq!((prepared.width, prepared.height), (1238, 928));
        assert!(
            prepared.data.len() < jpeg.len() / 2,
            "{} of {}",
            prepared.data.len(),
            jpeg.len()
        );
    }
}
