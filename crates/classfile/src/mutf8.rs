//! The JVM's "modified UTF-8" (JVMS §4.4.7), used by every `CONSTANT_Utf8`.
//!
//! Names and descriptors stay in their raw encoded form inside the rewriter,
//! so what it writes back is byte-for-byte what the class contained; only
//! the names reported to the caller are decoded. Modified UTF-8 differs from
//! UTF-8 in encoding NUL as two bytes and supplementary characters as two
//! three-byte surrogates.

/// Decodes modified UTF-8; malformed sequences become U+FFFD.
pub(crate) fn decode(bytes: &[u8]) -> String {
    if bytes.iter().all(|&b| b != 0 && b < 0x80) {
        return bytes.iter().map(|&b| b as char).collect();
    }
    let mut units: Vec<u16> = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let cont = |k: usize| bytes.get(i + k).copied().filter(|c| c & 0xC0 == 0x80);
        if b != 0 && b < 0x80 {
            units.push(u16::from(b));
            i += 1;
        } else if b & 0xE0 == 0xC0 {
            match cont(1) {
                Some(c) => {
                    units.push((u16::from(b & 0x1F) << 6) | u16::from(c & 0x3F));
                    i += 2;
                }
                None => {
                    units.push(0xFFFD);
                    i += 1;
                }
            }
        } else if b & 0xF0 == 0xE0 {
            match (cont(1), cont(2)) {
                (Some(c1), Some(c2)) => {
                    units.push(
                        (u16::from(b & 0x0F) << 12)
                            | (u16::from(c1 & 0x3F) << 6)
                            | u16::from(c2 & 0x3F),
                    );
                    i += 3;
                }
                _ => {
                    units.push(0xFFFD);
                    i += 1;
                }
            }
        } else {
            units.push(0xFFFD);
            i += 1;
        }
    }
    String::from_utf16_lossy(&units)
}

/// Encodes a string as modified UTF-8.
pub(crate) fn encode(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    for unit in s.encode_utf16() {
        match unit {
            0x0001..=0x007F => out.push(unit as u8),
            0x0000 | 0x0080..=0x07FF => {
                out.push(0xC0 | (unit >> 6) as u8);
                out.push(0x80 | (unit & 0x3F) as u8);
            }
            _ => {
                out.push(0xE0 | (unit >> 12) as u8);
                out.push(0x80 | ((unit >> 6) & 0x3F) as u8);
                out.push(0x80 | (unit & 0x3F) as u8);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_nul_bmp_and_supplementary_characters() {
        for s in [
            "plain/Name",
            "a\u{0}b",
            "caf\u{e9}",
            "\u{4e2d}",
            "x\u{1F600}y",
        ] {
            assert_eq!(decode(&encode(s)), s);
        }
        assert_eq!(encode("\u{0}"), vec![0xC0, 0x80]);
        assert_eq!(encode("\u{1F600}").len(), 6);
    }

    #[test]
    fn malformed_input_decodes_with_replacement_characters() {
        assert_eq!(decode(&[b'a', 0xC0]), "a\u{FFFD}");
        assert_eq!(decode(&[0xF0, 0x9F]), "\u{FFFD}\u{FFFD}");
    }
}
