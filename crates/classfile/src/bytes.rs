//! Bounds-checked big-endian reading of class-file data.
//!
//! Every length and offset in a class file comes from the file itself, so
//! nothing in this crate indexes input bytes directly: a short read is a
//! [`RewriteError::Truncated`] naming the absolute byte offset, never a panic.

use crate::error::RewriteError;

/// A cursor over a slice of a class file.
#[derive(Clone)]
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    /// Offset of `data[0]` in the whole class file, for error messages.
    base: usize,
    context: &'static str,
}

impl<'a> Reader<'a> {
    /// Reads `data`, which starts at byte `base` of the class file.
    pub fn new(data: &'a [u8], base: usize, context: &'static str) -> Self {
        Reader {
            data,
            pos: 0,
            base,
            context,
        }
    }

    /// Changes what error messages say is being read.
    pub fn set_context(&mut self, context: &'static str) {
        self.context = context;
    }

    /// Position relative to the start of `data`.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Absolute position in the class file.
    pub fn file_offset(&self) -> usize {
        self.base + self.pos
    }

    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    fn truncated(&self) -> RewriteError {
        RewriteError::Truncated {
            offset: self.base + self.data.len(),
            context: self.context,
        }
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], RewriteError> {
        let end = self.pos.checked_add(n).ok_or_else(|| self.truncated())?;
        let slice = self
            .data
            .get(self.pos..end)
            .ok_or_else(|| self.truncated())?;
        self.pos = end;
        Ok(slice)
    }

    pub fn skip(&mut self, n: usize) -> Result<(), RewriteError> {
        self.bytes(n).map(|_| ())
    }

    pub fn u8(&mut self) -> Result<u8, RewriteError> {
        let b = self.bytes(1)?;
        Ok(b[0])
    }

    pub fn u16(&mut self) -> Result<u16, RewriteError> {
        let b = self.bytes(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub fn u32(&mut self) -> Result<u32, RewriteError> {
        let b = self.bytes(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn i32(&mut self) -> Result<i32, RewriteError> {
        self.u32().map(|v| v as i32)
    }
}

/// Appends big-endian values to a byte buffer.
pub(crate) trait WriteBe {
    fn put_u8(&mut self, v: u8);
    fn put_u16(&mut self, v: u16);
    fn put_u32(&mut self, v: u32);
}

impl WriteBe for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }
    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes());
    }
}

/// Reads a big-endian `u16` at `pos` of `data`, if it is there.
pub(crate) fn u16_at(data: &[u8], pos: usize) -> Option<u16> {
    let b = data.get(pos..pos.checked_add(2)?)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}
