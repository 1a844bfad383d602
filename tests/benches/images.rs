//! `cargo bench -p workspace-tests --bench images` (what `cargo xtask
//! bench NAME` runs, in the bench profile): preparing an uploaded image for
//! a vision model (`workspace_server::media::prepare_image`). Not a test.
//!
//! Inputs, generated here (`media::testdata`): a 12-megapixel photo-like
//! frame (4000x3000: smooth shapes, gradients and sensor grain, so that it
//! compresses like a photograph), as a quality-90 JPEG with a phone's EXIF
//! block (camera, GPS), and as an 8-bit RGB PNG; besides, the same JPEG
//! with four times the grain (a dim indoor photo: more entropy to decode).
//!
//! Prints for each, after `WARMUP` (3) preparations, over `ROUNDS` (30):
//! the median and p95 time of one preparation, the peak Rust heap it adds
//! (a counting global allocator, threads included), the peak resident
//! memory it adds in a fresh process (which counts what the C libraries,
//! libjpeg-turbo and zlib, allocate themselves: the bench runs itself
//! again with `IMAGES_BENCH_ONE` naming the input's file, prepares it
//! once, and prints the growth of its `VmHWM`), and the output's type,
//! size and dimensions. The goal for the 12 MP JPEG is under 30 ms and
//! under 100 MB.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use workspace_server::media::{ImageLimits, prepare_image, testdata};

const WARMUP: usize = 3;
const ROUNDS: usize = 30;

/// The system allocator, counting the bytes live and their high-water mark.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

// SAFETY: every call is passed to `System` unchanged; the counters only
// observe the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn main() {
    if let Some(path) = std::env::var_os("IMAGES_BENCH_ONE") {
        return prepare_once(&std::path::PathBuf::from(path));
    }
    println!("generating the inputs (4000x3000)…");
    let jpeg = testdata::photo_jpeg(4000, 3000, 90);
    let noisy = testdata::with_segments(
        &testdata::jpeg_of(&testdata::photo_rgb(4000, 3000, 16, 5), 4000, 3000, 90),
        &[testdata::exif_app1(1, 0)],
    );
    let png = testdata::photo_png(4000, 3000);
    // The PNG of a photo is larger than the 20 MiB default: the limit is
    // raised for it (the pixel limit stays).
    let limits = ImageLimits::default();
    let png_limits = ImageLimits {
        max_input_bytes: 64 << 20,
        ..ImageLimits::default()
    };
    println!(
        "{:<34} {:>9} {:>9} {:>9} {:>9} {:>11} {:>22}",
        "input", "p50 ms", "p95 ms", "heap MB", "RSS MB", "output KB", "output"
    );
    measure("12 MP JPEG q90, EXIF (photo)", &jpeg, &limits);
    measure("12 MP JPEG q90, EXIF (noisy)", &noisy, &limits);
    measure("12 MP PNG, RGB8 (photo)", &png, &png_limits);
}

fn measure(name: &str, input: &[u8], limits: &ImageLimits) {
    for _ in 0..WARMUP {
        prepare_image(input, limits).expect("prepared");
    }
    let mut times: Vec<Duration> = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            let prepared = prepare_image(input, limits).expect("prepared");
            let took = started.elapsed();
            drop(prepared);
            took
        })
        .collect();
    times.sort();
    let percentile =
        |p: f64| times[((times.len() as f64 * p).ceil() as usize - 1).min(times.len() - 1)];
    // The heap added by one preparation, the input (already allocated)
    // not counted.
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let prepared = prepare_image(input, limits).expect("prepared");
    let peak = PEAK.load(Ordering::Relaxed) - before;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{:<34} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>11.1} {:>22}",
        format!("{name} ({:.1} MB)", input.len() as f64 / 1e6),
        ms(percentile(0.5)),
        ms(percentile(0.95)),
        peak as f64 / 1e6,
        resident_peak(input, limits) as f64 / 1e6,
        prepared.data.len() as f64 / 1e3,
        format!(
            "{} {}x{}",
            prepared.media_type, prepared.width, prepared.height
        ),
    );
}

/// The growth of the peak resident set of a fresh process of this bench
/// preparing `input` once (see [`prepare_once`]).
fn resident_peak(input: &[u8], limits: &ImageLimits) -> u64 {
    let path = std::env::temp_dir().join(format!("images-bench-{}.bin", std::process::id()));
    std::fs::write(&path, input).expect("input written");
    let output = std::process::Command::new(std::env::current_exe().expect("this bench"))
        .env("IMAGES_BENCH_ONE", &path)
        .env("IMAGES_BENCH_MAX_BYTES", limits.max_input_bytes.to_string())
        .output()
        .expect("the bench ran again");
    let _ = std::fs::remove_file(&path);
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .expect("a byte count")
}

/// In the child: reads the input, then prints how much one preparation
/// raised the process's peak resident set (`VmHWM`).
fn prepare_once(path: &std::path::Path) {
    let input = std::fs::read(path).expect("input read");
    let limits = ImageLimits {
        max_input_bytes: std::env::var("IMAGES_BENCH_MAX_BYTES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(ImageLimits::default().max_input_bytes),
        ..ImageLimits::default()
    };
    // The peak so far is the process's start (its binary's pages):
    // Linux resets it to the current resident set on `5` written to
    // `clear_refs`.
    std::fs::write("/proc/self/clear_refs", "5").expect("peak reset");
    let before = peak_rss();
    let prepared = prepare_image(&input, &limits).expect("prepared");
    let after = peak_rss();
    drop(prepared);
    println!("{}", after.saturating_sub(before));
}

/// The process's peak resident set since its last reset, in bytes
/// (`VmHWM` of `/proc/self/status`).
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("status read");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM")
        * 1024
}
