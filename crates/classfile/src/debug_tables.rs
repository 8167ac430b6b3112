//! The `Code` sub-attributes that hold bytecode offsets besides the
//! exception table and the stack map: `LineNumberTable`,
//! `LocalVariableTable`, `LocalVariableTypeTable` and the type annotations
//! on code (`RuntimeVisibleTypeAnnotations` and its invisible twin).
//!
//! They keep their layout; only the offsets in them are moved, so a
//! debugger, a stack trace or a reflective reader sees the same lines and
//! variables as before, now covering the inserted hooks too.

use crate::bytecode::Instructions;
use crate::bytes::{Reader, WriteBe};
use crate::error::RewriteError;
use crate::layout::Layout;

/// One `LineNumberTable` row: code offset and source line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineNumber {
    /// Offset of the first instruction of the line.
    pub start_pc: u16,
    /// Line number in the source file.
    pub line: u16,
}

/// One `LocalVariableTable` (or `LocalVariableTypeTable`) row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LocalVariable {
    pub start_pc: u16,
    pub length: u16,
    pub name_index: u16,
    pub descriptor_index: u16,
    pub index: u16,
}

pub(crate) fn parse_line_numbers(
    data: &[u8],
    base: usize,
) -> Result<Vec<LineNumber>, RewriteError> {
    let mut r = Reader::new(data, base, "a LineNumberTable");
    let n = r.u16()?;
    let mut rows = Vec::with_capacity(usize::from(n));
    for _ in 0..n {
        rows.push(LineNumber {
            start_pc: r.u16()?,
            line: r.u16()?,
        });
    }
    Ok(rows)
}

pub(crate) fn parse_local_variables(
    data: &[u8],
    base: usize,
) -> Result<Vec<LocalVariable>, RewriteError> {
    let mut r = Reader::new(data, base, "a LocalVariableTable");
    let n = r.u16()?;
    let mut rows = Vec::with_capacity(usize::from(n));
    for _ in 0..n {
        rows.push(LocalVariable {
            start_pc: r.u16()?,
            length: r.u16()?,
            name_index: r.u16()?,
            descriptor_index: r.u16()?,
            index: r.u16()?,
        });
    }
    Ok(rows)
}

/// Moves a `LineNumberTable`; returns the new `info` bytes and rows.
pub(crate) fn move_line_numbers(
    data: &[u8],
    base: usize,
    insns: &Instructions,
    layout: &Layout,
) -> Result<(Vec<u8>, Vec<LineNumber>), RewriteError> {
    let mut rows = parse_line_numbers(data, base)?;
    let mut out = Vec::with_capacity(data.len());
    out.put_u16(rows.len() as u16);
    for row in &mut rows {
        row.start_pc = layout.debug_start_of(insns, u32::from(row.start_pc)) as u16;
        out.put_u16(row.start_pc);
        out.put_u16(row.line);
    }
    Ok((out, rows))
}

/// Moves the scope (start, length) of a local variable.
fn move_scope(start: u16, length: u16, insns: &Instructions, layout: &Layout) -> (u16, u16) {
    let new_start = layout.debug_start_of(insns, u32::from(start));
    let new_end = layout.debug_end_of(insns, u32::from(start) + u32::from(length));
    (new_start as u16, new_end.saturating_sub(new_start) as u16)
}

/// Moves a `LocalVariableTable` or `LocalVariableTypeTable`.
pub(crate) fn move_local_variables(
    data: &[u8],
    base: usize,
    insns: &Instructions,
    layout: &Layout,
) -> Result<Vec<u8>, RewriteError> {
    let rows = parse_local_variables(data, base)?;
    let mut out = Vec::with_capacity(data.len());
    out.put_u16(rows.len() as u16);
    for v in rows {
        let (start, length) = move_scope(v.start_pc, v.length, insns, layout);
        out.put_u16(start);
        out.put_u16(length);
        out.put_u16(v.name_index);
        out.put_u16(v.descriptor_index);
        out.put_u16(v.index);
    }
    Ok(out)
}

/// Skips one `element_value` (JVMS §4.7.16.1).
fn skip_element_value(r: &mut Reader, depth: u32) -> Result<(), RewriteError> {
    if depth > 64 {
        return Err(RewriteError::Malformed {
            context: "type annotation".into(),
            reason: "annotation values nested too deeply".into(),
        });
    }
    match r.u8()? {
        b'B' | b'C' | b'D' | b'F' | b'I' | b'J' | b'S' | b'Z' | b's' | b'c' => r.skip(2),
        b'e' => r.skip(4),
        b'@' => skip_annotation_body(r, depth + 1),
        b'[' => {
            let n = r.u16()?;
            for _ in 0..n {
                skip_element_value(r, depth + 1)?;
            }
            Ok(())
        }
        tag => Err(RewriteError::Malformed {
            context: "type annotation".into(),
            reason: format!("unknown element_value tag {tag}"),
        }),
    }
}

/// Skips `type_index`, and the element-value pairs of an annotation.
fn skip_annotation_body(r: &mut Reader, depth: u32) -> Result<(), RewriteError> {
    r.skip(2)?;
    let pairs = r.u16()?;
    for _ in 0..pairs {
        r.skip(2)?;
        skip_element_value(r, depth)?;
    }
    Ok(())
}

fn patch_u16(out: &mut [u8], at: usize, v: u16) {
    if let Some(b) = out.get_mut(at..at + 2) {
        b.copy_from_slice(&v.to_be_bytes());
    }
}

/// Moves the offsets in a `Runtime[In]VisibleTypeAnnotations` attribute of
/// a `Code` attribute (JVMS §4.7.20.1). Returns `None` when its content
/// cannot be read: the JVM ignores these attributes, so an unreadable one
/// is dropped rather than kept with offsets that no longer mean anything.
pub(crate) fn move_type_annotations(
    data: &[u8],
    insns: &Instructions,
    layout: &Layout,
) -> Option<Vec<u8>> {
    let mut out = data.to_vec();
    let mut r = Reader::new(data, 0, "type annotations");
    let n = r.u16().ok()?;
    for _ in 0..n {
        let target_type = r.u8().ok()?;
        match target_type {
            0x40 | 0x41 => {
                let len = r.u16().ok()?;
                for _ in 0..len {
                    let at = r.pos();
                    let start = r.u16().ok()?;
                    let length = r.u16().ok()?;
                    r.skip(2).ok()?;
                    let (s, l) = move_scope(start, length, insns, layout);
                    patch_u16(&mut out, at, s);
                    patch_u16(&mut out, at + 2, l);
                }
            }
            0x42 => r.skip(2).ok()?,
            0x43..=0x4B => {
                let at = r.pos();
                let offset = r.u16().ok()?;
                let moved = layout.body_of(insns, u32::from(offset))?;
                patch_u16(&mut out, at, moved as u16);
                if target_type >= 0x47 {
                    r.skip(1).ok()?;
                }
            }
            _ => return None,
        }
        let path_length = r.u8().ok()?;
        r.skip(usize::from(path_length) * 2).ok()?;
        skip_annotation_body(&mut r, 0).ok()?;
    }
    (r.remaining() == 0).then_some(out)
}
