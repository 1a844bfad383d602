//! Timestamps in responses: RFC 3339 in UTC with `Z`, exactly as chrono's
//! own `Serialize` writes them (`SecondsFormat::AutoSi`), but as one
//! string. chrono's impl goes through `Serializer::collect_str`, and
//! serde_json escapes each character it is given separately: a page of 20
//! conversations spent a tenth of its request's CPU on its 40 timestamps.
//! Written into a buffer on the stack: a `String` per timestamp was a
//! third of that page's allocations.
//! Used with `#[serde(serialize_with = ...)]`; the schema (`date-time`)
//! still comes from the field's type.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serializer;

/// Serializes a timestamp.
pub fn serialize<S: Serializer>(at: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    let mut buf = [0; RFC3339_MAX];
    match rfc3339(at, &mut buf) {
        Some(text) => serializer.serialize_str(text),
        None => serializer.serialize_str(&at.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
    }
}

/// Serializes an optional timestamp (`null` when absent).
pub fn serialize_opt<S: Serializer>(
    at: &Option<DateTime<Utc>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match at {
        Some(at) => serializer.serialize_some(&Rfc3339(at)),
        None => serializer.serialize_none(),
    }
}

/// A timestamp serialized by [`serialize`] (for `serialize_some`).
struct Rfc3339<'a>(&'a DateTime<Utc>);

impl serde::Serialize for Rfc3339<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize(self.0, serializer)
    }
}

/// `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`, the longest text [`rfc3339`] writes.
const RFC3339_MAX: usize = 30;

/// `at` as chrono's `to_rfc3339_opts(SecondsFormat::AutoSi, true)` writes
/// it, into `buf` (no allocation: a page of conversations has two per
/// row); `None` for what that common shape cannot say (a year outside
/// 0-9999, a leap second), which the caller leaves to chrono.
fn rfc3339<'a>(at: &DateTime<Utc>, buf: &'a mut [u8; RFC3339_MAX]) -> Option<&'a str> {
    use chrono::{Datelike as _, Timelike as _};
    let year = u32::try_from(at.year()).ok().filter(|y| *y <= 9999)?;
    let nanos = at.nanosecond();
    if nanos >= 1_000_000_000 {
        return None;
    }
    let mut len = 0;
    let mut put = |value: u32, digits: u32, after: Option<u8>| {
        for i in (0..digits).rev() {
            buf[len] = b'0' + (value / 10u32.pow(i) % 10) as u8;
            len += 1;
        }
        if let Some(byte) = after {
            buf[len] = byte;
            len += 1;
        }
    };
    put(year, 4, Some(b'-'));
    put(at.month(), 2, Some(b'-'));
    put(at.day(), 2, Some(b'T'));
    put(at.hour(), 2, Some(b':'));
    put(at.minute(), 2, Some(b':'));
    // AutoSi: as many fractional digits (0, 3, 6 or 9) as say it whole.
    match nanos {
        0 => put(at.second(), 2, Some(b'Z')),
        n if n % 1_000_000 == 0 => {
            put(at.second(), 2, Some(b'.'));
            put(n / 1_000_000, 3, Some(b'Z'));
        }
        n if n % 1_000 == 0 => {
            put(at.second(), 2, Some(b'.'));
            put(n / 1_000, 6, Some(b'Z'));
        }
        n => {
            put(at.second(), 2, Some(b'.'));
            put(n, 9, Some(b'Z'));
        }
    }
    std::str::from_utf8(&buf[..len]).ok()
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, TimeZone, Utc};

    #[derive(serde::Serialize)]
    struct Fast {
        #[serde(serialize_with = "super::serialize")]
        at: DateTime<Utc>,
        #[serde(serialize_with = "super::serialize_opt")]
        maybe: Option<DateTime<Utc>>,
    }

    #[derive(serde::Serialize)]
    struct Chrono {
        at: DateTime<Utc>,
        maybe: Option<DateTime<Utc>>,
    }

    #[test]
    fn the_same_text_as_chrono() {
        let whole = Utc.with_ymd_and_hms(2026, 11, 23, 18, 2, 32).unwrap();
        let cases = [
            whole,
            whole + chrono::Duration::microseconds(54_830),
            whole + chrono::Duration::milliseconds(5),
            whole + chrono::Duration::nanoseconds(7),
            DateTime::<Utc>::UNIX_EPOCH,
            Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).unwrap(),
            whole + chrono::Duration::nanoseconds(123_456_789),
            whole + chrono::Duration::microseconds(999_999),
            Utc.with_ymd_and_hms(1, 1, 1, 0, 0, 0).unwrap() + chrono::Duration::milliseconds(90),
            // Beyond the common shape: chrono writes these.
            Utc.with_ymd_and_hms(10_000, 1, 1, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(-44, 3, 15, 12, 0, 0).unwrap(),
            chrono::NaiveDate::from_ymd_opt(2016, 12, 31)
                .and_then(|d| d.and_hms_nano_opt(23, 59, 59, 1_500_000_000))
                .unwrap()
                .and_utc(),
        ];
        // And spread over years 0-9999, each fractional shape (a fixed
        // linear congruential sequence: the same cases every run).
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            state >> 11
        };
        let first = Utc.with_ymd_and_hms(0, 1, 1, 0, 0, 0).unwrap().timestamp();
        let last = Utc
            .with_ymd_and_hms(9999, 12, 31, 23, 59, 59)
            .unwrap()
            .timestamp();
        let spread = (0..4000).map(|i| {
            let secs = first + (next() % (last - first) as u64) as i64;
            let nanos = (next() % 1_000_000_000) as u32;
            let nanos = [
                0,
                nanos / 1_000_000 * 1_000_000,
                nanos / 1_000 * 1_000,
                nanos,
            ][i % 4];
            DateTime::from_timestamp(secs, nanos).unwrap()
        });
        for at in cases.into_iter().chain(spread) {
            for maybe in [None, Some(at)] {
                let fast = serde_json::to_string(&Fast { at, maybe }).unwrap();
                let chrono = serde_json::to_string(&Chrono { at, maybe }).unwrap();
                assert_eq!(fast, chrono);
            }
        }
    }
}
