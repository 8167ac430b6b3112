//! The layout of a class file (JVMS §4.1), read just deeply enough to
//! rewrite method code.
//!
//! Only the constant pool, the method table and `Code` attributes are
//! parsed. Everything between the pool and the methods (access flags, with
//! any nonstandard bits, super class, interfaces, fields) and everything
//! after them (class attributes) is kept as the original byte slices and
//! written back unchanged, as are the methods and attributes we do not
//! touch.

use crate::bytes::{Reader, WriteBe};
use crate::constant_pool::ConstantPool;
use crate::error::RewriteError;

pub(crate) const ACC_STATIC: u16 = 0x0008;
pub(crate) const ACC_SYNCHRONIZED: u16 = 0x0020;
pub(crate) const ACC_NATIVE: u16 = 0x0100;
pub(crate) const ACC_ABSTRACT: u16 = 0x0400;
pub(crate) const ACC_MODULE: u16 = 0x8000;

/// An attribute whose name has been resolved but whose content has not been
/// interpreted.
#[derive(Debug, Clone)]
pub(crate) struct Attribute<'a> {
    pub name: &'a [u8],
    pub name_index: u16,
    /// The `info` bytes.
    pub data: &'a [u8],
    /// Offset of `data` in the class file, for error messages.
    pub data_offset: usize,
    /// The whole attribute including its name and length, for copying.
    pub raw: &'a [u8],
}

impl Attribute<'_> {
    pub fn is(&self, name: &str) -> bool {
        self.name == name.as_bytes()
    }
}

/// Reads an `attributes_count` followed by the attributes.
pub(crate) fn parse_attributes<'a>(
    r: &mut Reader<'a>,
    whole: &'a [u8],
    pool: &ConstantPool<'a>,
) -> Result<Vec<Attribute<'a>>, RewriteError> {
    let count = r.u16()?;
    let mut attributes = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        let start = r.file_offset();
        let name_index = r.u16()?;
        let len = r.u32()? as usize;
        let data_offset = r.file_offset();
        let data = r.bytes(len)?;
        let name = pool.original_utf8(name_index)?;
        let raw = whole
            .get(start..r.file_offset())
            .ok_or(RewriteError::Truncated {
                offset: start,
                context: "an attribute",
            })?;
        attributes.push(Attribute {
            name,
            name_index,
            data,
            data_offset,
            raw,
        });
    }
    Ok(attributes)
}

/// One `method_info`.
#[derive(Debug, Clone)]
pub(crate) struct Method<'a> {
    /// The whole `method_info`, for copying it unchanged.
    pub raw: &'a [u8],
    pub access: u16,
    pub name_index: u16,
    pub descriptor_index: u16,
    pub name: &'a [u8],
    pub descriptor: &'a [u8],
    pub attributes: Vec<Attribute<'a>>,
}

impl Method<'_> {
    pub fn attribute(&self, name: &str) -> Option<&Attribute<'_>> {
        self.attributes.iter().find(|a| a.is(name))
    }

    /// `name` followed by the descriptor, as used in messages: `run()V`.
    pub fn display_name(&self) -> String {
        let mut s = crate::mutf8::decode(self.name);
        s.push_str(&crate::mutf8::decode(self.descriptor));
        s
    }
}

/// A parsed class file, borrowing from the input bytes.
pub(crate) struct ClassFile<'a> {
    pub minor: u16,
    pub major: u16,
    pub pool: ConstantPool<'a>,
    pub access: u16,
    pub this_class: u16,
    pub this_name: Vec<u8>,
    pub super_name: Option<Vec<u8>>,
    /// From `access_flags` to the end of the fields, verbatim.
    between_pool_and_methods: &'a [u8],
    pub methods: Vec<Method<'a>>,
    /// `attributes_count` and the class attributes, verbatim.
    trailer: &'a [u8],
    pub attributes: Vec<Attribute<'a>>,
}

impl<'a> ClassFile<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<Self, RewriteError> {
        let mut r = Reader::new(bytes, 0, "the class file header");
        let magic = r.u32()?;
        if magic != 0xCAFE_BABE {
            return Err(RewriteError::BadMagic(magic));
        }
        let minor = r.u16()?;
        let major = r.u16()?;
        let pool = ConstantPool::parse(&mut r, bytes)?;

        let middle_start = r.pos();
        r.set_context("the class header");
        let access = r.u16()?;
        let this_class = r.u16()?;
        let super_class = r.u16()?;
        let this_name = pool.class_name(this_class)?.to_vec();
        let super_name = match super_class {
            0 => None,
            i => Some(pool.class_name(i)?.to_vec()),
        };
        r.set_context("the interfaces");
        let interfaces = r.u16()?;
        r.skip(usize::from(interfaces) * 2)?;
        r.set_context("the fields");
        let fields = r.u16()?;
        for _ in 0..fields {
            r.skip(6)?;
            parse_attributes(&mut r, bytes, &pool)?;
        }
        let between_pool_and_methods = bytes.get(middle_start..r.pos()).unwrap_or_default();

        r.set_context("the methods");
        let count = r.u16()?;
        let mut methods = Vec::with_capacity(usize::from(count));
        for _ in 0..count {
            let start = r.pos();
            let access = r.u16()?;
            let name_index = r.u16()?;
            let descriptor_index = r.u16()?;
            let name = pool.original_utf8(name_index)?;
            let descriptor = pool.original_utf8(descriptor_index)?;
            let attributes = parse_attributes(&mut r, bytes, &pool)?;
            methods.push(Method {
                raw: bytes.get(start..r.pos()).unwrap_or_default(),
                access,
                name_index,
                descriptor_index,
                name,
                descriptor,
                attributes,
            });
        }

        r.set_context("the class attributes");
        let trailer_start = r.pos();
        let attributes = parse_attributes(&mut r, bytes, &pool)?;
        let trailer = bytes.get(trailer_start..r.pos()).unwrap_or_default();
        if r.remaining() != 0 {
            return Err(RewriteError::TrailingBytes { len: r.remaining() });
        }
        Ok(ClassFile {
            minor,
            major,
            pool,
            access,
            this_class,
            this_name,
            super_name,
            between_pool_and_methods,
            methods,
            trailer,
            attributes,
        })
    }

    pub fn attribute(&self, name: &str) -> Option<&Attribute<'a>> {
        self.attributes.iter().find(|a| a.is(name))
    }

    /// Writes the class with `replacements[i]`, when present, in place of
    /// the `method_info` of method `i`.
    pub fn write(&self, replacements: &[Option<Vec<u8>>]) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            self.pool.count() * 8 + self.between_pool_and_methods.len() + self.trailer.len(),
        );
        out.put_u32(0xCAFE_BABE);
        out.put_u16(self.minor);
        out.put_u16(self.major);
        self.pool.write(&mut out);
        out.extend_from_slice(self.between_pool_and_methods);
        out.put_u16(self.methods.len() as u16);
        for (i, m) in self.methods.iter().enumerate() {
            match replacements.get(i) {
                Some(Some(bytes)) => out.extend_from_slice(bytes),
                _ => out.extend_from_slice(m.raw),
            }
        }
        out.extend_from_slice(self.trailer);
        out
    }
}

/// One row of a `Code` attribute's exception table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExceptionEntry {
    pub start: u16,
    pub end: u16,
    pub handler: u16,
    pub catch_type: u16,
}

/// A parsed `Code` attribute (JVMS §4.7.3).
pub(crate) struct Code<'a> {
    pub max_stack: u16,
    pub max_locals: u16,
    pub code: &'a [u8],
    pub exceptions: Vec<ExceptionEntry>,
    pub attributes: Vec<Attribute<'a>>,
}

impl<'a> Code<'a> {
    pub fn parse(
        attr: &Attribute<'a>,
        whole: &'a [u8],
        pool: &ConstantPool<'a>,
    ) -> Result<Self, RewriteError> {
        let mut r = Reader::new(attr.data, attr.data_offset, "a Code attribute");
        let max_stack = r.u16()?;
        let max_locals = r.u16()?;
        let len = r.u32()?;
        if len == 0 || len > 65535 {
            return Err(RewriteError::Malformed {
                context: "Code attribute".into(),
                reason: format!("code_length {len} is outside 1..=65535"),
            });
        }
        let code = r.bytes(len as usize)?;
        let n = r.u16()?;
        let mut exceptions = Vec::with_capacity(usize::from(n));
        for _ in 0..n {
            exceptions.push(ExceptionEntry {
                start: r.u16()?,
                end: r.u16()?,
                handler: r.u16()?,
                catch_type: r.u16()?,
            });
        }
        let attributes = parse_attributes(&mut r, whole, pool)?;
        if r.remaining() != 0 {
            return Err(RewriteError::Malformed {
                context: "Code attribute".into(),
                reason: "attribute_length does not match its content".into(),
            });
        }
        Ok(Code {
            max_stack,
            max_locals,
            code,
            exceptions,
            attributes,
        })
    }
}
