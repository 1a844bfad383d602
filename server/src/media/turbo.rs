//! JPEG decoding and encoding through libjpeg-turbo's TurboJPEG API (the
//! system's `libturbojpeg`, with its SIMD Huffman coder, its scaled inverse
//! DCTs in every eighth from 1/8 to 8/8, and its SIMD forward DCT).
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
/// image: `(side × eighths).div_ceil(8)` for `eighths` in 1..=8, libjpeg's
/// own rounding), as RGB
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

/// The frame (RGB, or one byte a pixel when `gray`) as a baseline JPEG
/// of `quality` with 4:2:0 chroma, written into a buffer of the format's
/// worst-case size allocated here (so libjpeg-turbo never allocates the
/// output itself); `None` when it refuses.
pub fn encode(data: &[u8], width: u32, height: u32, gray: bool, quality: u8) -> Option<Vec<u8>> {
    let channels: usize = if gray { 1 } else { 3 };
    let pitch = (width as usize).checked_mul(channels)?;
    if data.len() != pitch.checked_mul(height as usize)? {
        return None;
    }
    let (c_width, c_height, c_pitch) = (
        c_int::try_from(width).ok()?,
        c_int::try_from(height).ok()?,
        c_int::try_from(pitch).ok()?,
    );
    let (format, subsampling) = if gray {
        (
            turbojpeg_sys::TJPF_TJPF_GRAY,
            turbojpeg_sys::TJSAMP_TJSAMP_GRAY,
        )
    } else {
        (
            turbojpeg_sys::TJPF_TJPF_RGB,
            turbojpeg_sys::TJSAMP_TJSAMP_420,
        )
    };
    // SAFETY: a pure function of its arguments.
    let bound = unsafe { turbojpeg_sys::tjBufSize(c_width, c_height, subsampling as c_int) };
    // tjBufSize answers (unsigned long)-1 for sizes it cannot bound.
    if bound == c_ulong::MAX {
        return None;
    }
    let mut out = vec![0u8; usize::try_from(bound).ok()?];
    let mut out_ptr = out.as_mut_ptr();
    let mut size: c_ulong = bound;
    // SAFETY: the handle is created and destroyed here; `data` holds
    // `pitch × height` bytes (checked above); `out` holds `bound` bytes,
    // the worst case tjBufSize gives for this size and subsampling, and
    // TJFLAG_NOREALLOC forbids libjpeg-turbo to replace it, so it writes
    // only into `out` and `size` says how much.
    let status = unsafe {
        let handle = turbojpeg_sys::tjInitCompress();
        if handle.is_null() {
            return None;
        }
        let status = turbojpeg_sys::tjCompress2(
            handle,
            data.as_ptr(),
            c_width,
            c_pitch,
            c_height,
            format as c_int,
            &mut out_ptr,
            &mut size,
            subsampling as c_int,
            c_int::from(quality),
            turbojpeg_sys::TJFLAG_NOREALLOC as c_int,
        );
        turbojpeg_sys::tjDestroy(handle);
        status
    };
    if status != 0 || out_ptr != out.as_mut_ptr() || size > bound {
        return None;
    }
    out.truncate(usize::try_from(size).ok()?);
    Some(out)
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
        // Three eighths, a scale jpeg-decoder has not: 300 × 225.
        let small = decode_scaled(&jpeg, 300, 225, false).expect("decoded at 3/8");
        assert_eq!(small.len(), 300 * 225 * 3);
    }

    /// What is encoded decodes back to the same size and nearly the same
    /// pixels, colour and grayscale; a buffer of the wrong length is refused.
    #[test]
    fn encoded_frames_decode_back() {
        let jpeg = crate::media::testdata::photo_jpeg(640, 480, 95);
        let rgb = decode_scaled(&jpeg, 640, 480, false).expect("decoded");
        let again = encode(&rgb, 640, 480, false, 85).expect("encoded");
        assert_eq!(&again[..2], &[0xFF, 0xD8]);
        let back = decode_scaled(&again, 640, 480, false).expect("decoded again");
        let diff: u64 = rgb
            .iter()
            .zip(&back)
            .map(|(a, b)| u64::from(a.abs_diff(*b)))
            .sum();
        assert!(diff / (rgb.len() as u64) < 6, "mean difference {diff}");
        let gray = vec![128u8; 64 * 48];
        let jpeg = encode(&gray, 64, 48, true, 85).expect("gray encoded");
        assert_eq!(
            decode_scaled(&jpeg, 64, 48, true)
                .expect("gray decoded")
                .len(),
            64 * 48
        );
        assert_eq!(encode(&gray, 64, 49, true, 85), None);
    }
}
