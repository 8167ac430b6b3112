//! The constant pool: parsed for lookups, kept as raw bytes for writing.
//!
//! The rewriter never renumbers or re-encodes an existing entry. The original
//! pool bytes are written back unchanged and the entries the hooks need (the
//! probe class, its method references, `Integer` constants for large method
//! ids, class names for new stack-map frames) are appended after them, so
//! every index in the rest of the class stays valid. Additions reuse an
//! existing equal entry when there is one.

use std::borrow::Cow;

use crate::bytes::{Reader, WriteBe};
use crate::error::RewriteError;
use rustc_hash::FxHashMap;

pub(crate) const TAG_UTF8: u8 = 1;
pub(crate) const TAG_INTEGER: u8 = 3;
pub(crate) const TAG_FLOAT: u8 = 4;
pub(crate) const TAG_LONG: u8 = 5;
pub(crate) const TAG_DOUBLE: u8 = 6;
pub(crate) const TAG_CLASS: u8 = 7;
pub(crate) const TAG_STRING: u8 = 8;
pub(crate) const TAG_FIELDREF: u8 = 9;
pub(crate) const TAG_METHODREF: u8 = 10;
pub(crate) const TAG_INTERFACE_METHODREF: u8 = 11;
pub(crate) const TAG_NAME_AND_TYPE: u8 = 12;
pub(crate) const TAG_METHOD_HANDLE: u8 = 15;
pub(crate) const TAG_METHOD_TYPE: u8 = 16;
pub(crate) const TAG_DYNAMIC: u8 = 17;
pub(crate) const TAG_INVOKE_DYNAMIC: u8 = 18;
pub(crate) const TAG_MODULE: u8 = 19;
pub(crate) const TAG_PACKAGE: u8 = 20;

/// One constant pool entry, with indices left unresolved.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Constant<'a> {
    /// Index 0, and the slot after a `Long` or `Double`.
    Unusable,
    Utf8(Cow<'a, [u8]>),
    Integer(i32),
    Float(u32),
    Long(u64),
    Double(u64),
    Class(u16),
    String(u16),
    FieldRef(u16, u16),
    MethodRef(u16, u16),
    InterfaceMethodRef(u16, u16),
    NameAndType(u16, u16),
    MethodHandle(u8, u16),
    MethodType(u16),
    Dynamic(u16, u16),
    InvokeDynamic(u16, u16),
    Module(u16),
    Package(u16),
}

/// Keys of the entries this crate may add, for reuse of existing ones.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key<'a> {
    Utf8(Cow<'a, [u8]>),
    Class(u16),
    NameAndType(u16, u16),
    MethodRef(u16, u16),
    FieldRef(u16, u16),
    Integer(i32),
}

/// The constant pool has no room for the entries the hooks need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PoolFull;

pub(crate) struct ConstantPool<'a> {
    entries: Vec<Constant<'a>>,
    /// The original pool entries, exactly as read.
    raw: &'a [u8],
    /// Serialized entries appended by this crate.
    added: Vec<u8>,
    index: Option<FxHashMap<Key<'a>, u16>>,
}

impl<'a> ConstantPool<'a> {
    /// Parses `constant_pool_count` and the entries; the reader is left just
    /// after the pool.
    pub fn parse(r: &mut Reader<'a>, whole: &'a [u8]) -> Result<Self, RewriteError> {
        r.set_context("the constant pool");
        let count = r.u16()?;
        if count == 0 {
            return Err(RewriteError::Malformed {
                context: "constant pool".into(),
                reason: "constant_pool_count is 0".into(),
            });
        }
        let start = r.file_offset();
        let mut entries = Vec::with_capacity(usize::from(count));
        entries.push(Constant::Unusable);
        while entries.len() < usize::from(count) {
            let index = entries.len() as u16;
            let tag = r.u8()?;
            let entry = match tag {
                TAG_UTF8 => {
                    let len = r.u16()?;
                    Constant::Utf8(Cow::Borrowed(r.bytes(usize::from(len))?))
                }
                TAG_INTEGER => Constant::Integer(r.i32()?),
                TAG_FLOAT => Constant::Float(r.u32()?),
                TAG_LONG | TAG_DOUBLE => {
                    let hi = u64::from(r.u32()?);
                    let v = (hi << 32) | u64::from(r.u32()?);
                    if entries.len() + 1 >= usize::from(count) {
                        return Err(RewriteError::BadConstant {
                            index,
                            reason: "an 8-byte constant takes the last pool slot".into(),
                        });
                    }
                    entries.push(if tag == TAG_LONG {
                        Constant::Long(v)
                    } else {
                        Constant::Double(v)
                    });
                    Constant::Unusable
                }
                TAG_CLASS => Constant::Class(r.u16()?),
                TAG_STRING => Constant::String(r.u16()?),
                TAG_FIELDREF => Constant::FieldRef(r.u16()?, r.u16()?),
                TAG_METHODREF => Constant::MethodRef(r.u16()?, r.u16()?),
                TAG_INTERFACE_METHODREF => Constant::InterfaceMethodRef(r.u16()?, r.u16()?),
                TAG_NAME_AND_TYPE => Constant::NameAndType(r.u16()?, r.u16()?),
                TAG_METHOD_HANDLE => Constant::MethodHandle(r.u8()?, r.u16()?),
                TAG_METHOD_TYPE => Constant::MethodType(r.u16()?),
                TAG_DYNAMIC => Constant::Dynamic(r.u16()?, r.u16()?),
                TAG_INVOKE_DYNAMIC => Constant::InvokeDynamic(r.u16()?, r.u16()?),
                TAG_MODULE => Constant::Module(r.u16()?),
                TAG_PACKAGE => Constant::Package(r.u16()?),
                other => {
                    return Err(RewriteError::BadConstant {
                        index,
                        reason: format!("unknown tag {other}"),
                    })
                }
            };
            entries.push(entry);
        }
        let end = r.file_offset();
        let raw = whole.get(start..end).ok_or(RewriteError::Truncated {
            offset: end,
            context: "the constant pool",
        })?;
        Ok(ConstantPool {
            entries,
            raw,
            added: Vec::new(),
            index: None,
        })
    }

    pub fn get(&self, index: u16) -> Result<&Constant<'a>, RewriteError> {
        match self.entries.get(usize::from(index)) {
            Some(Constant::Unusable) | None => Err(RewriteError::BadConstant {
                index,
                reason: "no such entry".into(),
            }),
            Some(c) => Ok(c),
        }
    }

    fn wrong(index: u16, expected: &str) -> RewriteError {
        RewriteError::BadConstant {
            index,
            reason: format!("expected {expected}"),
        }
    }

    /// The raw modified-UTF-8 bytes of a `Utf8` entry.
    pub fn utf8(&self, index: u16) -> Result<&[u8], RewriteError> {
        match self.get(index)? {
            Constant::Utf8(b) => Ok(b),
            _ => Err(Self::wrong(index, "a Utf8 entry")),
        }
    }

    /// Like [`ConstantPool::utf8`], for entries read from the class file,
    /// borrowing from the class file rather than from the pool.
    pub fn original_utf8(&self, index: u16) -> Result<&'a [u8], RewriteError> {
        match self.get(index)? {
            Constant::Utf8(Cow::Borrowed(b)) => Ok(b),
            _ => Err(Self::wrong(index, "a Utf8 entry")),
        }
    }

    /// The raw name of a `Class` entry (an internal name or array descriptor).
    pub fn class_name(&self, index: u16) -> Result<&[u8], RewriteError> {
        match self.get(index)? {
            Constant::Class(name) => self.utf8(*name),
            _ => Err(Self::wrong(index, "a Class entry")),
        }
    }

    /// Name and descriptor of a `NameAndType` entry.
    pub fn name_and_type(&self, index: u16) -> Result<(&[u8], &[u8]), RewriteError> {
        match self.get(index)? {
            Constant::NameAndType(n, d) => Ok((self.utf8(*n)?, self.utf8(*d)?)),
            _ => Err(Self::wrong(index, "a NameAndType entry")),
        }
    }

    /// Name and descriptor of a field or method reference.
    pub fn member_ref(&self, index: u16) -> Result<(&[u8], &[u8]), RewriteError> {
        match self.get(index)? {
            Constant::FieldRef(_, nat)
            | Constant::MethodRef(_, nat)
            | Constant::InterfaceMethodRef(_, nat) => self.name_and_type(*nat),
            _ => Err(Self::wrong(index, "a field or method reference")),
        }
    }

    /// Name and descriptor of an `InvokeDynamic` or `Dynamic` entry.
    pub fn dynamic(&self, index: u16) -> Result<(&[u8], &[u8]), RewriteError> {
        match self.get(index)? {
            Constant::Dynamic(_, nat) | Constant::InvokeDynamic(_, nat) => self.name_and_type(*nat),
            _ => Err(Self::wrong(index, "a dynamic constant or call site")),
        }
    }

    /// Number of entries including index 0: the `constant_pool_count`.
    pub fn count(&self) -> usize {
        self.entries.len()
    }

    /// The pool as it is to be written: count, original entries, additions.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.put_u16(self.entries.len() as u16);
        out.extend_from_slice(self.raw);
        out.extend_from_slice(&self.added);
    }

    fn build_index(&mut self) -> &mut FxHashMap<Key<'a>, u16> {
        self.index.get_or_insert_with(|| {
            let mut map = FxHashMap::default();
            map.reserve(self.entries.len());
            for (i, c) in self.entries.iter().enumerate() {
                let key = match c {
                    Constant::Utf8(b) => Key::Utf8(b.clone()),
                    Constant::Class(n) => Key::Class(*n),
                    Constant::NameAndType(n, d) => Key::NameAndType(*n, *d),
                    Constant::MethodRef(c, nat) => Key::MethodRef(*c, *nat),
                    Constant::FieldRef(c, nat) => Key::FieldRef(*c, *nat),
                    Constant::Integer(v) => Key::Integer(*v),
                    _ => continue,
                };
                map.entry(key).or_insert(i as u16);
            }
            map
        })
    }

    fn find_or_add(&mut self, key: Key<'a>) -> Result<u16, PoolFull> {
        if let Some(&i) = self.build_index().get(&key) {
            return Ok(i);
        }
        if self.entries.len() >= usize::from(u16::MAX) {
            return Err(PoolFull);
        }
        let index = self.entries.len() as u16;
        let entry = match &key {
            Key::Utf8(b) => Constant::Utf8(b.clone()),
            Key::Class(n) => Constant::Class(*n),
            Key::NameAndType(n, d) => Constant::NameAndType(*n, *d),
            Key::MethodRef(c, nat) => Constant::MethodRef(*c, *nat),
            Key::FieldRef(c, nat) => Constant::FieldRef(*c, *nat),
            Key::Integer(v) => Constant::Integer(*v),
        };
        let out = &mut self.added;
        match &key {
            Key::Utf8(b) => {
                out.put_u8(TAG_UTF8);
                out.put_u16(b.len() as u16);
                out.extend_from_slice(b);
            }
            Key::Class(n) => {
                out.put_u8(TAG_CLASS);
                out.put_u16(*n);
            }
            Key::NameAndType(n, d) => {
                out.put_u8(TAG_NAME_AND_TYPE);
                out.put_u16(*n);
                out.put_u16(*d);
            }
            Key::MethodRef(c, nat) => {
                out.put_u8(TAG_METHODREF);
                out.put_u16(*c);
                out.put_u16(*nat);
            }
            Key::FieldRef(c, nat) => {
                out.put_u8(TAG_FIELDREF);
                out.put_u16(*c);
                out.put_u16(*nat);
            }
            Key::Integer(v) => {
                out.put_u8(TAG_INTEGER);
                out.put_u32(*v as u32);
            }
        }
        self.entries.push(entry);
        self.build_index().insert(key, index);
        Ok(index)
    }

    /// Index of a `Utf8` entry holding `bytes` (modified UTF-8, at most
    /// 65535 bytes).
    pub fn utf8_index(&mut self, bytes: &[u8]) -> Result<u16, PoolFull> {
        if bytes.len() > usize::from(u16::MAX) {
            return Err(PoolFull);
        }
        self.find_or_add(Key::Utf8(Cow::Owned(bytes.to_vec())))
    }

    /// Index of a `Class` entry named `name` (raw modified UTF-8).
    pub fn class_index(&mut self, name: &[u8]) -> Result<u16, PoolFull> {
        let n = self.utf8_index(name)?;
        self.find_or_add(Key::Class(n))
    }

    /// Index of a `Methodref` to `class.name descriptor`.
    pub fn method_ref_index(
        &mut self,
        class: u16,
        name: &[u8],
        descriptor: &[u8],
    ) -> Result<u16, PoolFull> {
        let n = self.utf8_index(name)?;
        let d = self.utf8_index(descriptor)?;
        let nat = self.find_or_add(Key::NameAndType(n, d))?;
        self.find_or_add(Key::MethodRef(class, nat))
    }

    /// Index of a `Fieldref` to `class.name descriptor`.
    pub fn field_ref_index(
        &mut self,
        class: u16,
        name: &[u8],
        descriptor: &[u8],
    ) -> Result<u16, PoolFull> {
        let n = self.utf8_index(name)?;
        let d = self.utf8_index(descriptor)?;
        let nat = self.find_or_add(Key::NameAndType(n, d))?;
        self.find_or_add(Key::FieldRef(class, nat))
    }

    /// Index of an `Integer` constant.
    pub fn integer_index(&mut self, value: i32) -> Result<u16, PoolFull> {
        self.find_or_add(Key::Integer(value))
    }
}
