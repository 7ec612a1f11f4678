//! Durations as people write them (30s, 500ms, 2m, 1h); as the wire
//! carries them, and the Unix time, from `ringmq_protocol::time`.

pub use ringmq_protocol::time::{millis_u32, unix_ms};
use std::time::Duration;

/// Parses 30s, 500ms, 2m, 1h or plain seconds; anything else (negative,
/// not a number, past what a `Duration` holds) is an error, never a panic.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let bad = |why| DurationError { text: s.to_string(), why };
    let (num, unit) = s.find(|c: char| c.is_ascii_alphabetic()).map_or((s, "s"), |i| s.split_at(i));
    let n: f64 = num.trim().parse().map_err(|_| bad(Why::NotANumber))?;
    let secs = match unit {
        "ms" => n / 1e3,
        "us" => n / 1e6,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(bad(Why::Unit(unit.to_string()))),
    };
    if secs < 0.0 || secs.is_nan() {
        return Err(bad(Why::Negative));
    }
    Duration::try_from_secs_f64(secs).map_err(|_| bad(Why::TooLong))
}

/// Text that is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?}: {why}")]
pub struct DurationError {
    text: String,
    why: Why,
}

/// What is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum Why {
    #[error("not a duration like 30s or 500ms")]
    NotANumber,
    #[error("unknown unit {0:?} (use us, ms, s, m, h)")]
    Unit(String),
    #[error("a duration cannot be negative")]
    Negative,
    #[error("longer than any duration this broker can wait")]
    TooLong,
}

/// `d` as `parse_duration` reads it, in the largest unit that holds it
/// whole (2h, 90s, 500ms, 20us).
pub fn format_duration(d: Duration) -> String {
    let us = d.as_micros();
    let units = [(3_600_000_000, "h"), (60_000_000, "m"), (1_000_000, "s"), (1_000, "ms")];
    match units.iter().find(|(size, _)| us > 0 && us.is_multiple_of(*size)) {
        Some((size, unit)) => format!("{}{unit}", us / size),
        None => format!("{us}us"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_parse_and_mistakes_are_explained() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("5 parsecs").unwrap_err().to_string().contains("unknown unit"));
        assert!(parse_duration("-1s").unwrap_err().to_string().contains("negative"));
        assert!(parse_duration("99999999999999999999999h").unwrap_err().to_string().contains("longer"));
        assert!(parse_duration("NaN").is_err());
        assert_eq!(format_duration(Duration::from_secs(7200)), "2h");
        assert_eq!(format_duration(Duration::from_secs(90)), "90s");
        assert_eq!(format_duration(Duration::from_micros(20)), "20us");
    }

    proptest::proptest! {
        #[test]
        fn a_formatted_duration_parses_back(us in 0u64..604_800_000_000) {
            // Up to a week: parse_duration goes through f64 seconds, exact to the microsecond there.
            let d = Duration::from_micros(us);
            proptest::prop_assert_eq!(parse_duration(&format_duration(d)), Ok(d));
        }

        #[test]
        fn no_text_makes_parse_duration_panic(s in "\\PC{0,12}", n in proptest::num::f64::ANY, unit in "(us|ms|s|m|h|)") {
            let _ = parse_duration(&s);
            let _ = parse_duration(&format!("{n}{unit}"));
        }
    }
}
