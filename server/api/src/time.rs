//! Timestamps in responses: RFC 3339 in UTC with `Z`, exactly as chrono's
//! own `Serialize` writes them (`SecondsFormat::AutoSi`), but as one
//! string. chrono's impl goes through `Serializer::collect_str`, and
//! serde_json escapes each character it is given separately: a page of 20
//! conversations spent a tenth of its request's CPU on its 40 timestamps.
//! Used with `#[serde(serialize_with = ...)]`; the schema (`date-time`)
//! still comes from the field's type.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serializer;

/// Serializes a timestamp.
pub fn serialize<S: Serializer>(at: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&at.to_rfc3339_opts(SecondsFormat::AutoSi, true))
}

/// Serializes an optional timestamp (`null` when absent).
pub fn serialize_opt<S: Serializer>(
    at: &Option<DateTime<Utc>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match at {
        Some(at) => serializer.serialize_some(&at.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
        None => serializer.serialize_none(),
    }
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
        ];
        for at in cases {
            for maybe in [None, Some(at)] {
                let fast = serde_json::to_string(&Fast { at, maybe }).unwrap();
                let chrono = serde_json::to_string(&Chrono { at, maybe }).unwrap();
                assert_eq!(fast, chrono);
            }
        }
    }
}
