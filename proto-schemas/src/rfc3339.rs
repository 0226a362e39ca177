//! Timestamps as JSON strings, written exactly as chrono's own `Serialize` writes them (RFC 3339,
//! `Z`, a fraction of 0, 3, 6 or 9 digits as the value needs), without its formatting machinery:
//! chrono writes through `fmt` one character at a time and serde_json escapes every piece, which
//! made the timestamps of a page of instances about a seventh of the controller's work for it.
//! Reading them back is chrono's `Deserialize`, unchanged.

use chrono::{DateTime, Datelike, Timelike, Utc};
use serde::Serializer;

/// `#[serde(serialize_with = "crate::rfc3339::serialize")]` for a `DateTime<Utc>`.
pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    let mut buf = [0u8; 30];
    match write(t, &mut buf) {
        Some(len) => {
            s.serialize_str(std::str::from_utf8(&buf[..len]).map_err(serde::ser::Error::custom)?)
        }
        // Years outside 0000 to 9999 and leap seconds: chrono's own way.
        None => serde::Serialize::serialize(t, s),
    }
}

/// The same for an `Option<DateTime<Utc>>` (`null` for `None`).
pub fn option<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => serialize(t, s),
        None => s.serialize_none(),
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.fff|.ffffff|.fffffffff]Z` into `buf`; its length, or `None` where
/// chrono writes something else (a year of more or fewer than four digits, a leap second).
fn write(t: &DateTime<Utc>, buf: &mut [u8; 30]) -> Option<usize> {
    let year = t.year();
    let nanos = t.nanosecond();
    if !(0..=9999).contains(&year) || nanos >= 1_000_000_000 {
        return None;
    }
    fn digits(buf: &mut [u8], mut value: u32) {
        for b in buf.iter_mut().rev() {
            *b = b'0' + (value % 10) as u8;
            value /= 10;
        }
    }
    digits(&mut buf[0..4], year as u32);
    buf[4] = b'-';
    digits(&mut buf[5..7], t.month());
    buf[7] = b'-';
    digits(&mut buf[8..10], t.day());
    buf[10] = b'T';
    digits(&mut buf[11..13], t.hour());
    buf[13] = b':';
    digits(&mut buf[14..16], t.minute());
    buf[16] = b':';
    digits(&mut buf[17..19], t.second());
    let mut len = 19;
    let (fraction, width) = match nanos {
        0 => (0, 0),
        n if n % 1_000_000 == 0 => (n / 1_000_000, 3),
        n if n % 1_000 == 0 => (n / 1_000, 6),
        n => (n, 9),
    };
    if width > 0 {
        buf[len] = b'.';
        digits(&mut buf[len + 1..len + 1 + width], fraction);
        len += 1 + width;
    }
    buf[len] = b'Z';
    Some(len + 1)
}

#[cfg(test)]
mod tests {
    use chrono::{NaiveDate, TimeZone};

    use super::*;

    #[derive(serde::Serialize)]
    struct Ours {
        #[serde(serialize_with = "serialize")]
        at: DateTime<Utc>,
        #[serde(serialize_with = "option")]
        maybe: Option<DateTime<Utc>>,
    }

    #[derive(serde::Serialize)]
    struct Chronos {
        at: DateTime<Utc>,
        maybe: Option<DateTime<Utc>>,
    }

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32, nanos: u32) -> DateTime<Utc> {
        Utc.from_utc_datetime(
            &NaiveDate::from_ymd_opt(y, mo, d)
                .unwrap()
                .and_hms_nano_opt(h, mi, s, nanos)
                .unwrap(),
        )
    }

    #[test]
    fn timestamps_read_exactly_as_chrono_writes_them() {
        let cases = [
            at(2026, 11, 23, 7, 16, 28, 626_242_000),
            at(2026, 1, 2, 3, 4, 5, 0),
            at(2026, 12, 31, 23, 59, 59, 120_000_000),
            at(1999, 6, 30, 0, 0, 9, 1),
            at(1, 1, 1, 0, 0, 0, 999_999_999),
            at(9999, 12, 31, 23, 59, 59, 500_000),
            at(10000, 1, 1, 0, 0, 0, 0),
            at(2016, 12, 31, 23, 59, 59, 1_500_000_000),
            at(-1, 1, 1, 0, 0, 0, 0),
        ];
        for t in cases {
            for maybe in [None, Some(t)] {
                let ours = serde_json::to_string(&Ours { at: t, maybe }).unwrap();
                let chronos = serde_json::to_string(&Chronos { at: t, maybe }).unwrap();
                assert_eq!(ours, chronos, "{t:?}");
            }
        }
        assert_eq!(
            serde_json::to_string(&Ours {
                at: at(2026, 11, 23, 7, 16, 28, 626_242_000),
                maybe: None
            })
            .unwrap(),
            r#"{"at":"2026-11-23T07:16:28.626242Z","maybe":null}"#
        );
    }
}
