//! Field and method descriptors (JVMS §4.3), parsed over raw bytes.
//!
//! Descriptors decide how many stack slots each argument and return value
//! takes and which hook a value is passed to. They are parsed as modified
//! UTF-8 bytes: the structural characters are ASCII and can never occur
//! inside a multi-byte sequence, so a class name is taken out exactly as
//! the class file spells it.

/// A field type, the type of one parameter or of a return value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FieldType<'a> {
    Boolean,
    Byte,
    Char,
    Short,
    Int,
    Float,
    Long,
    Double,
    /// A class (its internal name, `java/lang/String`) or an array (its
    /// whole descriptor, `[Ljava/lang/String;`), both as a `CONSTANT_Class`
    /// would name them.
    Reference(&'a [u8]),
}

impl FieldType<'_> {
    /// Local-variable and operand-stack slots a value of this type takes.
    pub fn slots(self) -> u16 {
        match self {
            FieldType::Long | FieldType::Double => 2,
            _ => 1,
        }
    }
}

/// Parses one field type starting at `*pos`, advancing past it.
fn field_type_at<'a>(d: &'a [u8], pos: &mut usize) -> Option<FieldType<'a>> {
    let start = *pos;
    let t = match d.get(*pos)? {
        b'Z' => FieldType::Boolean,
        b'B' => FieldType::Byte,
        b'C' => FieldType::Char,
        b'S' => FieldType::Short,
        b'I' => FieldType::Int,
        b'F' => FieldType::Float,
        b'J' => FieldType::Long,
        b'D' => FieldType::Double,
        b'L' => {
            let len = d.get(start + 1..)?.iter().position(|&b| b == b';')?;
            if len == 0 {
                return None;
            }
            *pos = start + 1 + len + 1;
            return Some(FieldType::Reference(d.get(start + 1..start + 1 + len)?));
        }
        b'[' => {
            let mut p = start;
            while d.get(p) == Some(&b'[') {
                p += 1;
            }
            if p - start > 255 {
                return None;
            }
            field_type_at(d, &mut p)?;
            *pos = p;
            return Some(FieldType::Reference(d.get(start..p)?));
        }
        _ => return None,
    };
    *pos += 1;
    Some(t)
}

/// Parses a complete field descriptor.
pub(crate) fn parse_field(d: &[u8]) -> Option<FieldType<'_>> {
    let mut pos = 0;
    let t = field_type_at(d, &mut pos)?;
    (pos == d.len()).then_some(t)
}

/// A parsed method descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MethodType<'a> {
    pub params: Vec<FieldType<'a>>,
    /// `None` for `V`.
    pub ret: Option<FieldType<'a>>,
}

impl MethodType<'_> {
    /// Slots the parameters take (without any receiver).
    pub fn param_slots(&self) -> u32 {
        self.params.iter().map(|p| u32::from(p.slots())).sum()
    }
}

/// Parses a complete method descriptor.
pub(crate) fn parse_method(d: &[u8]) -> Option<MethodType<'_>> {
    if d.first() != Some(&b'(') {
        return None;
    }
    let mut pos = 1;
    let mut params = Vec::new();
    while d.get(pos) != Some(&b')') {
        params.push(field_type_at(d, &mut pos)?);
    }
    pos += 1;
    let ret = if d.get(pos) == Some(&b'V') {
        pos += 1;
        None
    } else {
        Some(field_type_at(d, &mut pos)?)
    };
    (pos == d.len()).then_some(MethodType { params, ret })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_primitives_classes_and_arrays() {
        let m = parse_method(b"(IJ[[Ljava/lang/String;Ljava/util/List;D)[I").unwrap();
        assert_eq!(
            m.params,
            vec![
                FieldType::Int,
                FieldType::Long,
                FieldType::Reference(b"[[Ljava/lang/String;"),
                FieldType::Reference(b"java/util/List"),
                FieldType::Double,
            ]
        );
        assert_eq!(m.ret, Some(FieldType::Reference(b"[I")));
        assert_eq!(m.param_slots(), 7);
        assert_eq!(parse_method(b"()V").unwrap().ret, None);
    }

    #[test]
    fn rejects_malformed_descriptors() {
        for bad in [
            &b""[..],
            b"(",
            b"(I",
            b"()",
            b"(L;)V",
            b"(Ljava/lang/String)V",
            b"()VV",
            b"(Q)V",
        ] {
            assert_eq!(parse_method(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_field(b"II"), None);
    }
}
