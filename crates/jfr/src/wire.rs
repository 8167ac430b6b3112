//! The primitive encodings of a JFR chunk: big-endian fixed-width numbers,
//! LEB128 "compressed" integers (every integer type but `byte` when the
//! chunk header's flag says so) and the six string encodings.
//!
//! Every read is bounds-checked against the slice the cursor was made
//! over, so a forged length or a cut file ends in a [`Damage`] with the
//! offset where the bytes ran out, never in a panic or an over-read.

/// Where and why decoding stopped. `offset` counts from the start of the
/// chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    pub offset: usize,
    pub what: String,
}

pub type Result<T> = std::result::Result<T, Damage>;

/// A decoded JFR string field.
#[derive(Debug, Clone, PartialEq)]
pub enum JString {
    Null,
    Text(Box<str>),
    /// Index into the chunk's `java.lang.String` constant pool.
    Pool(i64),
}

/// A read position over one chunk's bytes (or a part of them).
#[derive(Clone)]
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
    compressed: bool,
}

impl<'a> Cursor<'a> {
    /// A cursor over `buf[pos..end]`; `compressed` selects LEB128 integers.
    pub fn new(buf: &'a [u8], pos: usize, end: usize, compressed: bool) -> Cursor<'a> {
        let end = end.min(buf.len());
        Cursor {
            buf,
            pos: pos.min(end),
            end,
            compressed,
        }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.end - self.pos
    }

    /// A cursor over the next `len` bytes, which this one steps over.
    pub fn sub(&mut self, len: usize) -> Result<Cursor<'a>> {
        if len > self.remaining() {
            return Err(self.damage(format!(
                "a {len}-byte record, but only {} bytes are left",
                self.remaining()
            )));
        }
        let c = Cursor::new(self.buf, self.pos, self.pos + len, self.compressed);
        self.pos += len;
        Ok(c)
    }

    pub fn damage(&self, what: impl Into<String>) -> Damage {
        Damage {
            offset: self.pos,
            what: what.into(),
        }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        if self.remaining() < N {
            return Err(self.damage(format!("{N} more bytes, but the record ends")));
        }
        let mut b = [0u8; N];
        b.copy_from_slice(&self.buf[self.pos..self.pos + N]);
        self.pos += N;
        Ok(b)
    }

    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take::<1>()?[0])
    }

    pub fn be_i16(&mut self) -> Result<i16> {
        Ok(i16::from_be_bytes(self.take()?))
    }

    pub fn be_i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(self.take()?))
    }

    pub fn be_i64(&mut self) -> Result<i64> {
        Ok(i64::from_be_bytes(self.take()?))
    }

    pub fn f32(&mut self) -> Result<f32> {
        Ok(f32::from_be_bytes(self.take()?))
    }

    pub fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_be_bytes(self.take()?))
    }

    /// JFR's compressed integer: seven bits a byte, least significant
    /// first, continuation in the high bit; a ninth byte carries all
    /// eight of its bits.
    pub fn leb(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for i in 0..8 {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Ok(v | (u64::from(self.u8()?) << 56))
    }

    pub fn short(&mut self) -> Result<i16> {
        if self.compressed {
            Ok(self.leb()? as i16)
        } else {
            self.be_i16()
        }
    }

    pub fn int(&mut self) -> Result<i32> {
        if self.compressed {
            Ok(self.leb()? as i32)
        } else {
            self.be_i32()
        }
    }

    pub fn long(&mut self) -> Result<i64> {
        if self.compressed {
            Ok(self.leb()? as i64)
        } else {
            self.be_i64()
        }
    }

    /// A count of things that follow, each at least `min_bytes` long:
    /// refused when the rest of the record cannot hold that many.
    pub fn count(&mut self, min_bytes: usize, what: &str) -> Result<usize> {
        let at = self.pos;
        let n = self.int()?;
        let max = self.remaining() / min_bytes.max(1);
        if n < 0 || n as usize > max {
            return Err(Damage {
                offset: at,
                what: format!("a count of {n} {what}, more than the {max} the record can hold"),
            });
        }
        Ok(n as usize)
    }

    /// A string in any of the six encodings: 0 null, 1 empty, 2 constant
    /// pool index, 3 UTF-8 bytes, 4 UTF-16 chars (each a compressed int),
    /// 5 Latin-1 bytes.
    pub fn string(&mut self) -> Result<JString> {
        let at = self.pos;
        match self.u8()? {
            0 => Ok(JString::Null),
            1 => Ok(JString::Text("".into())),
            2 => Ok(JString::Pool(self.long()?)),
            3 => {
                let n = self.count(1, "string bytes")?;
                let bytes = &self.buf[self.pos..self.pos + n];
                self.pos += n;
                Ok(JString::Text(String::from_utf8_lossy(bytes).into()))
            }
            4 => {
                let n = self.count(1, "string chars")?;
                let mut units = Vec::with_capacity(n);
                for _ in 0..n {
                    // One byte per char below 0x80, the common case.
                    match self.buf.get(self.pos) {
                        Some(&b) if b < 0x80 && self.compressed && self.pos < self.end => {
                            self.pos += 1;
                            units.push(u16::from(b));
                        }
                        _ => units.push(self.short()? as u16),
                    }
                }
                Ok(JString::Text(String::from_utf16_lossy(&units).into()))
            }
            5 => {
                let n = self.count(1, "string bytes")?;
                let s: String = self.buf[self.pos..self.pos + n]
                    .iter()
                    .map(|&b| char::from(b))
                    .collect();
                self.pos += n;
                Ok(JString::Text(s.into()))
            }
            e => Err(Damage {
                offset: at,
                what: format!("string encoding {e} (JFR knows 0 to 5)"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressed_integers_take_nine_bytes_at_most() {
        let one = [0x01];
        assert_eq!(Cursor::new(&one, 0, 1, true).leb(), Ok(1));
        let two = [0xAC, 0x02];
        assert_eq!(Cursor::new(&two, 0, 2, true).leb(), Ok(300));
        let full = [0xFF; 9];
        assert_eq!(Cursor::new(&full, 0, 9, true).leb(), Ok(u64::MAX));
        let cut = [0x80, 0x80];
        assert!(Cursor::new(&cut, 0, 2, true).leb().is_err());
    }

    #[test]
    fn strings_in_every_encoding() {
        let mut b = vec![0u8, 1, 2, 7, 3, 2, b'h', b'i', 4, 2, 0x41, 0x42, 5, 1, 0xE9];
        b.push(9);
        let mut c = Cursor::new(&b, 0, b.len(), true);
        assert_eq!(c.string(), Ok(JString::Null));
        assert_eq!(c.string(), Ok(JString::Text("".into())));
        assert_eq!(c.string(), Ok(JString::Pool(7)));
        assert_eq!(c.string(), Ok(JString::Text("hi".into())));
        assert_eq!(c.string(), Ok(JString::Text("AB".into())));
        assert_eq!(c.string(), Ok(JString::Text("é".into())));
        assert!(c.string().is_err(), "encoding 9 is refused");
    }

    #[test]
    fn a_forged_length_is_refused_before_allocating() {
        let b = [3u8, 0xFF, 0xFF, 0xFF, 0x7F, b'x'];
        let err = Cursor::new(&b, 0, b.len(), true).string().unwrap_err();
        assert!(err.what.contains("more than"), "{err:?}");
    }
}
