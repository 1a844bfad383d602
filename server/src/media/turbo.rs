//! JPEG decoding through libjpeg-turbo's TurboJPEG API (the system's
//! `libturbojpeg`, with its SIMD Huffman decoder and scaled inverse DCT).
//!
//! A 12-megapixel photo's time goes into entropy decoding, which no DCT
//! scale shortens: `jpeg-decoder` (pure Rust) spends about 40 ms there,
//! libjpeg-turbo about a third of that. The frame's header was read and
//! bounded before this runs (`check_pixels`, the progressive coefficient
//! check), and the output buffer is allocated here at the reduced size the
//! caller asks for, so libjpeg-turbo allocates only its own working
//! buffers. Any failure, a warning included (a truncated file), answers
//! `None` and the caller decodes with `jpeg-decoder`, whose error says
//! what is wrong.

use std::os::raw::{c_int, c_ulong};

/// The frame decoded at exactly `width` × `height` (a DCT scale of the
/// image: `(side × eighths).div_ceil(8)`, libjpeg's own rounding), as RGB
/// (`gray`: one byte a pixel); `None` when libjpeg-turbo refuses or warns.
pub fn decode_scaled(jpeg: &[u8], width: u32, height: u32, gray: bool) -> Option<Vec<u8>> {
    let channels: usize = if gray { 1 } else { 3 };
    let pitch = (width as usize).checked_mul(channels)?;
    let len = pitch.checked_mul(height as usize)?;
    let (c_width, c_height, c_pitch) = (
        c_int::try_from(width).ok()?,
        c_int::try_from(height).ok()?,
        c_int::try_from(pitch).ok()?,
    );
    let size = c_ulong::try_from(jpeg.len()).ok()?;
    let format = if gray {
        turbojpeg_sys::TJPF_TJPF_GRAY
    } else {
        turbojpeg_sys::TJPF_TJPF_RGB
    } as c_int;
    let mut out = vec![0u8; len];
    // SAFETY: the handle is created and destroyed here and used once in
    // between; `jpeg` is read for `size` bytes; `out` holds exactly
    // `pitch × height` bytes, which is what tjDecompress2 writes for a
    // destination of `width` × `height` at `pitch` (it picks the scaling
    // factor whose output fits in that size, and `width` × `height` is one
    // of its factors' exact output, so nothing is written past the end).
    let status = unsafe {
        let handle = turbojpeg_sys::tjInitDecompress();
        if handle.is_null() {
            return None;
        }
        let status = turbojpeg_sys::tjDecompress2(
            handle,
            jpeg.as_ptr(),
            size,
            out.as_mut_ptr(),
            c_width,
            c_pitch,
            c_height,
            format,
            turbojpeg_sys::TJFLAG_STOPONWARNING as c_int,
        );
        turbojpeg_sys::tjDestroy(handle);
        status
    };
    (status == 0).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// libjpeg-turbo decodes a photo at half size as jpeg-decoder does
    /// (the two inverse DCTs differ by a few levels at most on average),
    /// and refuses a truncated file instead of inventing its end.
    #[test]
    fn half_size_agrees_with_jpeg_decoder_and_truncation_is_refused() {
        let jpeg = crate::media::testdata::photo_jpeg(800, 600, 90);
        let turbo = decode_scaled(&jpeg, 400, 300, false).expect("decoded");
        let mut decoder = jpeg_decoder::Decoder::new(&jpeg[..]);
        decoder.read_info().unwrap();
        decoder.scale(400, 300).unwrap();
        let reference = decoder.decode().unwrap();
        assert_eq!(turbo.len(), reference.len());
        let diff: u64 = turbo
            .iter()
            .zip(&reference)
            .map(|(a, b)| u64::from(a.abs_diff(*b)))
            .sum();
        assert!(diff / (turbo.len() as u64) < 4, "mean difference {diff}");
        assert_eq!(
            decode_scaled(&jpeg[..jpeg.len() / 2], 400, 300, false),
            None
        );
        assert_eq!(decode_scaled(b"not a jpeg", 4, 4, false), None);
    }
}
