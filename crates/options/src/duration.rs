//! Durations written for people and for option strings, in one place so
//! that every command and the agent print a time the same way.
//!
//! Three forms, because they answer different readers:
//! [`duration_text`] is the option syntax [`crate::parse_duration`] reads
//! back (`5s`, `250us`); [`duration_exact`] keeps every nanosecond (event
//! times, waits: `1.234567ms`); [`duration_short`] keeps three significant
//! digits for tables (`45.6µs`).

use std::time::Duration;

/// A duration as the options write it, in the largest unit that keeps it
/// whole: `5s`, `1500ms`, `250us`, `10ns`. [`crate::parse_duration`] reads
/// it back unchanged.
pub fn duration_text(d: Duration) -> String {
    match d.as_nanos() {
        n if n % 1_000_000_000 == 0 => format!("{}s", n / 1_000_000_000),
        n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}us", n / 1_000),
        n => format!("{n}ns"),
    }
}

/// A duration or a trace time exact to the nanosecond: `1.234567ms` below
/// a second, `3.000000001s` from one second on.
pub fn duration_exact(ns: u64) -> String {
    if ns < 1_000_000_000 {
        format!("{}.{:06}ms", ns / 1_000_000, ns % 1_000_000)
    } else {
        format!("{}.{:09}s", ns / 1_000_000_000, ns % 1_000_000_000)
    }
}

/// A duration with three significant digits, for columns: `812ns`,
/// `45.6µs`, `1.50s`.
pub fn duration_short(ns: u64) -> String {
    let f = ns as f64;
    let (v, unit) = if ns < 1_000 {
        return format!("{ns}ns");
    } else if ns < 1_000_000 {
        (f / 1e3, "µs")
    } else if ns < 1_000_000_000 {
        (f / 1e6, "ms")
    } else {
        (f / 1e9, "s")
    };
    if v >= 100.0 {
        format!("{v:.0}{unit}")
    } else if v >= 10.0 {
        format!("{v:.1}{unit}")
    } else {
        format!("{v:.2}{unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_text_reads_back_as_the_same_duration() {
        for d in [
            Duration::ZERO,
            Duration::from_secs(5),
            Duration::from_millis(1500),
            Duration::from_micros(250),
            Duration::from_nanos(10),
            Duration::from_nanos(1_000_000_001),
        ] {
            let text = duration_text(d);
            assert_eq!(crate::parse_duration(&text), Ok(d), "{text}");
        }
        assert_eq!(duration_text(Duration::from_millis(1500)), "1500ms");
        assert_eq!(duration_text(Duration::from_secs(5)), "5s");
    }

    #[test]
    fn exact_form_switches_to_seconds_at_one_second() {
        assert_eq!(duration_exact(0), "0.000000ms");
        assert_eq!(duration_exact(1_234_567), "1.234567ms");
        assert_eq!(duration_exact(999_999_999), "999.999999ms");
        assert_eq!(duration_exact(3_000_000_001), "3.000000001s");
    }

    #[test]
    fn short_form_keeps_three_digits() {
        assert_eq!(duration_short(812), "812ns");
        assert_eq!(duration_short(45_600), "45.6µs");
        assert_eq!(duration_short(1_500_000_000), "1.50s");
        assert_eq!(duration_short(155_000_000), "155ms");
    }
}
