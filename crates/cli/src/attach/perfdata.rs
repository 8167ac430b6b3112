//! A reader for HotSpot's performance-data file (`/tmp/hsperfdata_USER/PID`),
//! the memory-mapped counters `jps` and `jstat` read.
//!
//! vmview reads three of them without touching the JVM: whether it accepts
//! attach at all (`sun.rt.jvmCapabilities`, whose first character is `0`
//! under `-XX:+DisableAttachMechanism`), its main class or jar
//! (`sun.rt.javaCommand`) and its Java version. The layout is HotSpot's
//! `PerfDataPrologue` (32 bytes) followed by `PerfDataEntry` records; only
//! byte arrays (strings) and longs are kept. A malformed file yields what
//! could be read before the damage, never a panic.

use std::collections::HashMap;

const MAGIC: [u8; 4] = [0xca, 0xfe, 0xc0, 0xc0];
const PROLOGUE: usize = 32;

/// One counter's value.
#[derive(Debug, Clone, PartialEq)]
pub enum PerfValue {
    Text(String),
    Long(i64),
}

/// Counters by name; empty when the bytes are not a perf-data file.
pub fn parse(bytes: &[u8]) -> HashMap<String, PerfValue> {
    let mut out = HashMap::new();
    if bytes.len() < PROLOGUE || bytes[..4] != MAGIC {
        return out;
    }
    let big = bytes[4] == 0;
    let int = |at: usize| -> Option<i32> {
        let b: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
        Some(if big {
            i32::from_be_bytes(b)
        } else {
            i32::from_le_bytes(b)
        })
    };
    let long = |at: usize| -> Option<i64> {
        let b: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
        Some(if big {
            i64::from_be_bytes(b)
        } else {
            i64::from_le_bytes(b)
        })
    };
    let (Some(first), Some(count)) = (int(24), int(28)) else {
        return out;
    };
    let mut at = first.max(0) as usize;
    for _ in 0..count.clamp(0, 100_000) {
        let (Some(len), Some(name_at), Some(vector_len), Some(data_at)) =
            (int(at), int(at + 4), int(at + 8), int(at + 16))
        else {
            break;
        };
        if len <= 0 {
            break;
        }
        let Some(&kind) = bytes.get(at + 12) else {
            break;
        };
        let name_start = at + name_at.max(0) as usize;
        let name = bytes
            .get(name_start..)
            .and_then(|b| b.split(|c| *c == 0).next())
            .map(|n| String::from_utf8_lossy(n).into_owned());
        let data = at + data_at.max(0) as usize;
        let value = match kind {
            b'B' if vector_len > 0 => bytes
                .get(data..data + vector_len as usize)
                .map(|b| b.split(|c| *c == 0).next().unwrap_or_default())
                .map(|b| PerfValue::Text(String::from_utf8_lossy(b).into_owned())),
            b'J' if vector_len == 0 => long(data).map(PerfValue::Long),
            _ => None,
        };
        if let (Some(n), Some(v)) = (name, value) {
            out.insert(n, v);
        }
        at += len as usize;
    }
    out
}

/// A string counter.
pub fn text<'a>(counters: &'a HashMap<String, PerfValue>, name: &str) -> Option<&'a str> {
    match counters.get(name) {
        Some(PerfValue::Text(t)) => Some(t),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A little-endian perf-data file with the given string counters.
    fn file(entries: &[(&str, &str)]) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&[1, 2, 0, 1]); // little-endian, version 2.0, accessible
        b.extend_from_slice(&[0; 16]); // used, overflow, mod time
        b.extend_from_slice(&(PROLOGUE as i32).to_le_bytes());
        b.extend_from_slice(&(entries.len() as i32).to_le_bytes());
        for (name, value) in entries {
            let name_at = 20;
            let data_at = name_at + name.len() + 1;
            let vector = value.len() + 1;
            let len = data_at + vector;
            b.extend_from_slice(&(len as i32).to_le_bytes());
            b.extend_from_slice(&(name_at as i32).to_le_bytes());
            b.extend_from_slice(&(vector as i32).to_le_bytes());
            b.extend_from_slice(&[b'B', 0, 5, 1]);
            b.extend_from_slice(&(data_at as i32).to_le_bytes());
            b.extend_from_slice(name.as_bytes());
            b.push(0);
            b.extend_from_slice(value.as_bytes());
            b.push(0);
        }
        b
    }

    #[test]
    fn string_counters_are_read_by_name() {
        let c = parse(&file(&[
            ("sun.rt.javaCommand", "fx.Loop 3"),
            (
                "sun.rt.jvmCapabilities",
                "1000000000000000000000000000000000000000000000000000000000000000",
            ),
        ]));
        assert_eq!(text(&c, "sun.rt.javaCommand"), Some("fx.Loop 3"));
        assert!(text(&c, "sun.rt.jvmCapabilities").unwrap().starts_with('1'));
    }

    #[test]
    fn truncated_or_foreign_files_give_what_was_readable() {
        let whole = file(&[("a", "1"), ("b", "2")]);
        for cut in 0..whole.len() {
            let _ = parse(&whole[..cut]);
        }
        assert!(parse(b"not a perf data file at all, no").is_empty());
    }
}
