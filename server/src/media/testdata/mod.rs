//! Inputs for the tests of [`super::image`] and for the `images`
//! benchmark (`tests/benches/images.rs`), generated in code rather than checked in: a photo-like frame
//! (smooth shapes, gradients and sensor grain, so that its JPEG has the
//! size and entropy of a real photo, which a flat test pattern has not),
//! the JPEG of a phone (an EXIF block with GPS tags), and the hand-written
//! files a hostile client sends (a PNG header that claims 2.5 billion
//! pixels, a GIF of ten thousand frames).
//!
//! Public (hidden from the documentation) only so that the benchmark
//! binary measures the same input as the tests describe.

use image::ImageEncoder;

/// An RGB frame (`width * height * 3` bytes) that compresses like a
/// photograph: value noise at six octaves for shapes and gradients, three
/// colour fields mixed from it, and uniform grain of ±`grain` levels per
/// pixel (4 is a clean phone photo; 16 a dim indoor one).
pub fn photo_rgb(width: u32, height: u32, grain: u8, seed: u64) -> Vec<u8> {
    let mut rng = XorShift(seed | 1);
    // A 64x64 lattice of random values, interpolated smoothly.
    let lattice: Vec<f32> = (0..64 * 64)
        .map(|_| (rng.next() % 1000) as f32 / 1000.0)
        .collect();
    let noise = |x: f32, y: f32| {
        let (xi, yi) = (x.floor(), y.floor());
        let (fx, fy) = (x - xi, y - yi);
        let at = |a: i64, b: i64| lattice[(a.rem_euclid(64) * 64 + b.rem_euclid(64)) as usize];
        let (a, b) = (xi as i64, yi as i64);
        let (sx, sy) = (fx * fx * (3.0 - 2.0 * fx), fy * fy * (3.0 - 2.0 * fy));
        let top = at(a, b) + (at(a + 1, b) - at(a, b)) * sx;
        let bottom = at(a, b + 1) + (at(a + 1, b + 1) - at(a, b + 1)) * sx;
        top + (bottom - top) * sy
    };
    let span = 2 * u64::from(grain) + 1;
    let mut out = Vec::with_capacity(width as usize * height as usize * 3);
    for y in 0..height {
        for x in 0..width {
            let (fx, fy) = (x as f32 / 500.0, y as f32 / 500.0);
            let (mut v, mut amplitude, mut frequency) = (0.0, 1.0, 1.0);
            for _ in 0..6 {
                v += amplitude * noise(fx * frequency, fy * frequency);
                amplitude *= 0.55;
                frequency *= 2.7;
            }
            let tint = noise(fx * 0.7 + 13.0, fy * 0.7);
            let n = (rng.next() % span) as f32 - f32::from(grain);
            let level = |c: f32| (c + n).clamp(0.0, 255.0) as u8;
            out.extend_from_slice(&[
                level(60.0 + 90.0 * v + 40.0 * tint),
                level(50.0 + 100.0 * v * (1.0 - 0.3 * tint)),
                level(40.0 + 70.0 * v + 90.0 * (1.0 - tint)),
            ]);
        }
    }
    out
}

/// [`photo_rgb`] as a baseline JPEG of the given quality, with the EXIF
/// block of a phone ([`exif_app1`]: camera, orientation, GPS position)
/// right after the start of image, where cameras write it.
pub fn photo_jpeg(width: u32, height: u32, quality: u8) -> Vec<u8> {
    let jpeg = jpeg_of(&photo_rgb(width, height, 4, 7), width, height, quality);
    with_segments(&jpeg, &[exif_app1(1, 0)])
}

/// [`photo_rgb`] as an 8-bit RGB PNG (default compression).
pub fn photo_png(width: u32, height: u32) -> Vec<u8> {
    let mut out = Vec::new();
    image::codecs::png::PngEncoder::new(&mut out)
        .write_image(
            &photo_rgb(width, height, 4, 11),
            width,
            height,
            image::ExtendedColorType::Rgb8,
        )
        .expect("PNG encoding of a valid frame");
    out
}

/// An RGB frame encoded as JPEG (no metadata).
pub fn jpeg_of(rgb: &[u8], width: u32, height: u32, quality: u8) -> Vec<u8> {
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality)
        .write_image(rgb, width, height, image::ExtendedColorType::Rgb8)
        .expect("JPEG encoding of a valid frame");
    out
}

/// `jpeg` with `segments` (complete marker segments) inserted after its
/// start-of-image marker.
pub fn with_segments(jpeg: &[u8], segments: &[Vec<u8>]) -> Vec<u8> {
    assert_eq!(&jpeg[..2], &[0xFF, 0xD8], "not a JPEG");
    let extra: usize = segments.iter().map(Vec::len).sum();
    let mut out = Vec::with_capacity(jpeg.len() + extra);
    out.extend_from_slice(&jpeg[..2]);
    for segment in segments {
        out.extend_from_slice(segment);
    }
    out.extend_from_slice(&jpeg[2..]);
    out
}

/// An APP1 `Exif` segment as a phone writes it: a little-endian TIFF
/// structure whose first directory holds the camera's make and model, the
/// `orientation` (1 to 8) and a pointer to a GPS directory (latitude,
/// longitude), followed by `padding` bytes of maker notes (at most what
/// fits a segment: 65,533 bytes in all).
pub fn exif_app1(orientation: u16, padding: usize) -> Vec<u8> {
    let mut tiff = Vec::new();
    tiff.extend_from_slice(b"II*\0");
    tiff.extend_from_slice(&8u32.to_le_bytes());
    // IFD0 at 8: 4 entries (12 bytes each) + count + next pointer = 54
    // bytes, then its out-of-line values at 62; the GPS IFD after them.
    let make = b"Workspace\0";
    let model = b"Phone 12 Pro\0";
    let values_at = 8 + 2 + 4 * 12 + 4;
    let gps_at = values_at + make.len() + model.len();
    let entry = |tiff: &mut Vec<u8>, tag: u16, kind: u16, count: u32, value: u32| {
        tiff.extend_from_slice(&tag.to_le_bytes());
        tiff.extend_from_slice(&kind.to_le_bytes());
        tiff.extend_from_slice(&count.to_le_bytes());
        tiff.extend_from_slice(&value.to_le_bytes());
    };
    tiff.extend_from_slice(&4u16.to_le_bytes());
    entry(&mut tiff, 0x010F, 2, make.len() as u32, values_at as u32);
    entry(
        &mut tiff,
        0x0110,
        2,
        model.len() as u32,
        (values_at + make.len()) as u32,
    );
    entry(&mut tiff, 0x0112, 3, 1, u32::from(orientation));
    entry(&mut tiff, 0x8825, 4, 1, gps_at as u32);
    tiff.extend_from_slice(&0u32.to_le_bytes());
    tiff.extend_from_slice(make);
    tiff.extend_from_slice(model);
    // GPS IFD: latitude ref, latitude (3 rationals), longitude ref,
    // longitude; the rationals after the directory.
    let rationals_at = gps_at + 2 + 4 * 12 + 4;
    tiff.extend_from_slice(&4u16.to_le_bytes());
    entry(&mut tiff, 0x0001, 2, 2, u32::from_le_bytes(*b"N\0\0\0"));
    entry(&mut tiff, 0x0002, 5, 3, rationals_at as u32);
    entry(&mut tiff, 0x0003, 2, 2, u32::from_le_bytes(*b"E\0\0\0"));
    entry(&mut tiff, 0x0004, 5, 3, (rationals_at + 24) as u32);
    tiff.extend_from_slice(&0u32.to_le_bytes());
    for (numerator, denominator) in [
        (48u32, 1u32),
        (51, 1),
        (2_412, 100),
        (2, 1),
        (17, 1),
        (4_012, 100),
    ] {
        tiff.extend_from_slice(&numerator.to_le_bytes());
        tiff.extend_from_slice(&denominator.to_le_bytes());
    }
    tiff.resize(tiff.len() + padding, 0x5A);
    let length = 2 + 6 + tiff.len();
    assert!(
        length <= 0xFFFF,
        "an APP1 segment holds at most 65,533 bytes"
    );
    let mut segment = vec![0xFF, 0xE1];
    segment.extend_from_slice(&(length as u16).to_be_bytes());
    segment.extend_from_slice(b"Exif\0\0");
    segment.extend_from_slice(&tiff);
    segment
}

/// A PNG chunk: length, type, data, CRC.
pub fn png_chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut chunk = Vec::with_capacity(12 + data.len());
    chunk.extend_from_slice(&(data.len() as u32).to_be_bytes());
    chunk.extend_from_slice(kind);
    chunk.extend_from_slice(data);
    let mut crc = crc32fast::Hasher::new();
    crc.update(kind);
    crc.update(data);
    chunk.extend_from_slice(&crc.finalize().to_be_bytes());
    chunk
}

/// A PNG whose header claims `width` x `height` 8-bit RGB pixels and whose
/// one IDAT is a few kilobytes of deflated zeros: what a decompression
/// bomb looks like before it is decoded.
pub fn png_claiming(width: u32, height: u32) -> Vec<u8> {
    use std::io::Write;
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    png.extend(png_chunk(b"IHDR", &ihdr));
    let mut deflate = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    deflate
        .write_all(&vec![0u8; 4 << 20])
        .expect("writing to memory");
    png.extend(png_chunk(
        b"IDAT",
        &deflate.finish().expect("writing to memory"),
    ));
    png.extend(png_chunk(b"IEND", &[]));
    png
}

/// The state of a xorshift64 generator: reproducible noise without a
/// dependency.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
