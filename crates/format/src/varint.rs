//! LEB128 varints, zigzag mapping and a bounds-checked byte cursor.
//!
//! Most numbers in a trace are small (handles, time deltas, depth changes),
//! so every integer in a chunk payload is a varint: 7 bits per byte, low
//! bits first, the high bit set on every byte but the last. Signed numbers
//! go through zigzag first so that small negative values stay small.
//!
//! Decoding works on untrusted bytes: [`Cursor`] never indexes out of
//! bounds, rejects overlong encodings that overflow 64 bits, and reports
//! every problem as a [`Malformed`] value instead of panicking.

/// Appends `v` as an unsigned LEB128 varint (1 to 10 bytes).
#[inline]
pub(crate) fn put_u64(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Appends `v` zigzag-mapped, as a varint.
#[inline]
/// Encodes `v` as a varint into `out`, returning the length (for writing
/// a varint in front of bytes already in a buffer).
pub(crate) fn encode_u64(mut v: u64, out: &mut [u8; 10]) -> usize {
    let mut i = 0;
    while v >= 0x80 {
        out[i] = (v as u8) | 0x80;
        v >>= 7;
        i += 1;
    }
    out[i] = v as u8;
    i + 1
}

pub(crate) fn put_i64(buf: &mut Vec<u8>, v: i64) {
    put_u64(buf, zigzag(v));
}

/// Maps signed to unsigned so that small magnitudes give small numbers:
/// 0 → 0, -1 → 1, 1 → 2, -2 → 3 …
#[inline]
pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline]
pub(crate) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Number of bytes `put_u64(v)` writes.
#[cfg(test)]
pub(crate) fn len_u64(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// The payload bits of a varint's bytes, loaded little-endian into `x`
/// (bytes past its last one zeroed): the low 7 bits of each byte, packed.
#[inline(always)]
fn compact_7bit(x: u64) -> u64 {
    let x = x & 0x7f7f_7f7f_7f7f_7f7f;
    let x = (x & 0x007f_007f_007f_007f) | ((x & 0x7f00_7f00_7f00_7f00) >> 1);
    let x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x3fff_0000_3fff_0000) >> 2);
    (x & 0x0000_0000_0fff_ffff) | ((x & 0x0fff_ffff_0000_0000) >> 4)
}

/// A decoding error inside a chunk payload or a header body: what was
/// expected where. The offset is relative to the start of the buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Malformed {
    pub offset: usize,
    pub what: &'static str,
}

/// A read position in an untrusted byte slice.
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8], pos: usize) -> Self {
        Cursor { buf, pos }
    }

    #[inline(always)]
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    #[inline(always)]
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    #[inline(always)]
    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    #[inline]
    pub(crate) fn err(&self, what: &'static str) -> Malformed {
        Malformed {
            offset: self.pos,
            what,
        }
    }

    /// The next byte, not consumed.
    #[inline(always)]
    pub(crate) fn peek(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    #[inline(always)]
    pub(crate) fn u8(&mut self) -> Result<u8, Malformed> {
        match self.buf.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => Err(self.err("a byte (payload ends early)")),
        }
    }

    /// An unsigned varint of at most 64 bits.
    #[inline(always)]
    pub(crate) fn u64(&mut self) -> Result<u64, Malformed> {
        let pos = self.pos;
        if let Some(&b) = self.buf.get(pos) {
            // Handles, flags and small deltas: one byte.
            if b < 0x80 {
                self.pos = pos + 1;
                return Ok(u64::from(b));
            }
            // Two to eight bytes (time deltas of microseconds to hours)
            // at once, without a branch per byte, where eight bytes are
            // left to load.
            if let Some(w) = self.buf.get(pos..pos + 8) {
                // One load (from bytes taken one by one, the compiler
                // assembled the word from several).
                let w = u64::from_le_bytes(w.try_into().unwrap_or([0x80; 8]));
                let stops = !w & 0x8080_8080_8080_8080;
                if stops != 0 {
                    // The last byte's high bit is the lowest clear one.
                    let bits = stops.trailing_zeros() + 1;
                    self.pos = pos + (bits / 8) as usize;
                    return Ok(compact_7bit(w & (u64::MAX >> (64 - bits))));
                }
            }
        }
        self.u64_slow()
    }

    /// Steps over an unsigned varint of at most 64 bits, with the checks
    /// of [`u64`](Self::u64), without working out its value.
    #[inline(always)]
    pub(crate) fn skip_u64(&mut self) -> Result<(), Malformed> {
        let pos = self.pos;
        // One to eight bytes, from one load and without a branch on the
        // length (time deltas take one to four), where eight are left.
        if let Some(w) = self.buf.get(pos..pos + 8) {
            let w = u64::from_le_bytes(w.try_into().unwrap_or([0x80; 8]));
            let stops = !w & 0x8080_8080_8080_8080;
            if stops != 0 {
                self.pos = pos + (stops.trailing_zeros() / 8 + 1) as usize;
                return Ok(());
            }
        }
        self.u64_slow().map(|_| ())
    }

    #[cold]
    #[inline(never)]
    fn u64_slow(&mut self) -> Result<u64, Malformed> {
        let start = self.pos;
        let mut v = 0u64;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                self.pos = start;
                return Err(self.err("a varint (payload ends inside it)"));
            };
            self.pos += 1;
            if i == 9 && b > 1 {
                self.pos = start;
                return Err(self.err("a varint of at most 64 bits"));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(v);
            }
        }
        self.pos = start;
        Err(self.err("a varint of at most 10 bytes"))
    }

    /// An unsigned varint that must fit in 32 bits.
    #[inline(always)]
    pub(crate) fn u32(&mut self) -> Result<u32, Malformed> {
        let at = self.pos;
        let v = self.u64()?;
        u32::try_from(v).map_err(|_| Malformed {
            offset: at,
            what: "a 32-bit number",
        })
    }

    /// A zigzag varint.
    #[inline(always)]
    pub(crate) fn i64(&mut self) -> Result<i64, Malformed> {
        self.u64().map(unzigzag)
    }

    /// A zigzag varint that must fit in 32 bits.
    #[inline(always)]
    pub(crate) fn i32(&mut self) -> Result<i32, Malformed> {
        let at = self.pos;
        let v = self.i64()?;
        i32::try_from(v).map_err(|_| Malformed {
            offset: at,
            what: "a signed 32-bit number",
        })
    }

    /// A count or length that cannot exceed the bytes left, since each
    /// counted item takes at least `min_item_bytes` bytes. This is what keeps
    /// a forged count from causing a huge allocation.
    #[inline(always)]
    pub(crate) fn count(&mut self, min_item_bytes: usize) -> Result<usize, Malformed> {
        let at = self.pos;
        let n = self.u64()?;
        let limit = (self.remaining() / min_item_bytes.max(1)) as u64;
        if n > limit {
            return Err(Malformed {
                offset: at,
                what: "a count no larger than the bytes that follow",
            });
        }
        Ok(n as usize)
    }

    #[inline(always)]
    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if n > self.remaining() {
            return Err(self.err("as many bytes as the length says"));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(crate) fn fixed_u32(&mut self) -> Result<u32, Malformed> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn fixed_u64(&mut self) -> Result<u64, Malformed> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// A length-prefixed UTF-8 string.
    pub(crate) fn string(&mut self) -> Result<String, Malformed> {
        let n = self.count(1)?;
        let at = self.pos;
        let b = self.bytes(n)?;
        match std::str::from_utf8(b) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(Malformed {
                offset: at,
                what: "UTF-8 text",
            }),
        }
    }
}

/// Appends a length-prefixed string.
#[inline]
pub(crate) fn put_str(buf: &mut Vec<u8>, s: &str) {
    put_u64(buf, s.len() as u64);
    buf.extend_from_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: u64) -> Vec<u8> {
        let mut b = Vec::new();
        put_u64(&mut b, v);
        b
    }

    #[test]
    fn known_encodings() {
        assert_eq!(enc(0), [0x00]);
        assert_eq!(enc(1), [0x01]);
        assert_eq!(enc(127), [0x7f]);
        assert_eq!(enc(128), [0x80, 0x01]);
        assert_eq!(enc(300), [0xac, 0x02]);
        assert_eq!(enc(16383), [0xff, 0x7f]);
        assert_eq!(enc(16384), [0x80, 0x80, 0x01]);
        assert_eq!(enc(u64::MAX).len(), 10);
        assert_eq!(*enc(u64::MAX).last().unwrap(), 0x01);
    }

    #[test]
    fn round_trip_and_length() {
        let mut vals = vec![
            0,
            1,
            127,
            128,
            255,
            256,
            16383,
            16384,
            u32::MAX as u64,
            u64::MAX,
        ];
        for s in 0..64 {
            vals.push(1u64 << s);
            vals.push((1u64 << s) - 1);
            vals.push((1u64 << s) + 1);
        }
        for v in vals {
            let b = enc(v);
            assert_eq!(b.len(), len_u64(v), "length of {v}");
            let mut c = Cursor::new(&b, 0);
            assert_eq!(c.u64(), Ok(v));
            assert!(c.at_end());
        }
    }

    #[test]
    fn the_wide_path_reads_what_the_byte_path_reads() {
        // With eight bytes or more left a varint is read by the wide path,
        // with fewer by the byte loop: both give the same value and length.
        let mut vals = vec![
            0,
            1,
            127,
            128,
            16383,
            16384,
            u64::MAX,
            1 << 55,
            (1 << 56) - 1,
        ];
        for s in 0..64 {
            vals.push(1u64 << s);
            vals.push((1u64 << s) - 1);
        }
        for v in vals {
            let b = enc(v);
            for pad in [0x00u8, 0x80, 0xff] {
                let mut padded = b.clone();
                padded.extend_from_slice(&[pad; 9]);
                let mut c = Cursor::new(&padded, 0);
                assert_eq!(c.u64(), Ok(v), "{v} before {pad:#x}");
                assert_eq!(c.pos(), b.len(), "length of {v}");
            }
        }
        // Overlong (a zero high byte) but within 64 bits: accepted alike.
        let b = [0x81u8, 0x80, 0x00, 0, 0, 0, 0, 0, 0];
        let mut c = Cursor::new(&b, 0);
        assert_eq!(c.u64(), Ok(1));
        assert_eq!(c.pos(), 3);
        assert_eq!(Cursor::new(&b[..3], 0).u64(), Ok(1));
    }

    #[test]
    fn skip_u64_steps_over_what_u64_reads_and_fails_where_it_fails() {
        let mut cases: Vec<Vec<u8>> = Vec::new();
        for s in 0..64 {
            for v in [1u64 << s, (1u64 << s) - 1] {
                let b = enc(v);
                for pad in [0x00u8, 0x80, 0xff] {
                    for n in [0, 3, 9] {
                        let mut padded = b.clone();
                        padded.extend(std::iter::repeat_n(pad, n));
                        cases.push(padded);
                    }
                }
                // Cut short: an error from both.
                cases.push(b[..b.len() - 1].to_vec());
            }
        }
        cases.push(vec![0xff; 11]);
        let mut tenth = vec![0xffu8; 9];
        tenth.push(0x02);
        cases.push(tenth);
        cases.push(vec![0x81, 0x80, 0x00, 0, 0, 0, 0, 0, 0]);
        for b in cases {
            let (mut read, mut skipped) = (Cursor::new(&b, 0), Cursor::new(&b, 0));
            let r = read.u64();
            assert_eq!(skipped.skip_u64(), r.clone().map(|_| ()), "{b:x?}");
            assert_eq!(skipped.pos(), read.pos(), "{b:x?}");
        }
    }

    #[test]
    fn zigzag_maps_small_magnitudes_to_small_numbers() {
        assert_eq!(zigzag(0), 0);
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
        assert_eq!(zigzag(-2), 3);
        assert_eq!(zigzag(i64::MAX), u64::MAX - 1);
        assert_eq!(zigzag(i64::MIN), u64::MAX);
        for v in [
            0,
            1,
            -1,
            63,
            -64,
            64,
            i64::MAX,
            i64::MIN,
            123_456_789,
            -987_654_321,
        ] {
            assert_eq!(unzigzag(zigzag(v)), v);
            let mut b = Vec::new();
            put_i64(&mut b, v);
            assert_eq!(Cursor::new(&b, 0).i64(), Ok(v));
        }
    }

    #[test]
    fn truncated_varint_is_an_error_not_a_panic() {
        let b = enc(1 << 40);
        for cut in 0..b.len() {
            let mut c = Cursor::new(&b[..cut], 0);
            assert!(c.u64().is_err());
            assert_eq!(c.pos(), 0, "a failed read does not move the cursor");
        }
    }

    #[test]
    fn overlong_varint_is_rejected() {
        // Eleven continuation bytes, and a tenth byte carrying bits past 64.
        let b = [0xffu8; 11];
        assert!(Cursor::new(&b, 0).u64().is_err());
        let mut b = vec![0xffu8; 9];
        b.push(0x02);
        assert!(Cursor::new(&b, 0).u64().is_err());
    }

    #[test]
    fn u32_and_i32_reject_wider_values() {
        let b = enc(u32::MAX as u64 + 1);
        assert!(Cursor::new(&b, 0).u32().is_err());
        let mut b = Vec::new();
        put_i64(&mut b, i32::MIN as i64 - 1);
        assert!(Cursor::new(&b, 0).i32().is_err());
        let mut b = Vec::new();
        put_i64(&mut b, i32::MIN as i64);
        assert_eq!(Cursor::new(&b, 0).i32(), Ok(i32::MIN));
    }

    #[test]
    fn counts_are_bounded_by_the_remaining_bytes() {
        let mut b = enc(1_000_000_000);
        b.extend_from_slice(&[0; 16]);
        assert!(Cursor::new(&b, 0).count(1).is_err());
        let mut b = enc(4);
        b.extend_from_slice(&[0; 8]);
        assert_eq!(Cursor::new(&b, 0).count(2), Ok(4));
        assert!(Cursor::new(&b, 0).count(3).is_err());
    }
}
