//! The `StackMapTable` attribute (JVMS §4.7.4), decoded to absolute frames
//! and re-encoded after the code has moved.
//!
//! Frames are stored as deltas from the previous frame, both in offset (the
//! first frame's delta is its offset, later ones are offset − previous − 1)
//! and in content (`same`, `chop`, `append` are relative to the previous
//! frame's locals, the first frame's to the implicit frame built from the
//! method descriptor). Inserting code changes the deltas, can push a
//! `same_frame` past the 63 its compact form can express, and can add frames
//! in between, so the table is decoded completely into [`Frame`]s with
//! absolute offsets and full types, edited, and encoded again choosing the
//! most compact form that says the same thing.

use crate::bytes::{Reader, WriteBe};
use crate::constant_pool::{ConstantPool, PoolFull};
use crate::error::CodeError;
use crate::types::{ClassNames, VType};

/// One frame: the types of the locals and of the operand stack on entry to
/// the instruction at `offset`. Long and double are single entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    pub offset: u32,
    pub locals: Vec<VType>,
    pub stack: Vec<VType>,
}

fn read_vtype(
    r: &mut Reader,
    pool: &ConstantPool,
    names: &mut ClassNames,
) -> Result<VType, crate::error::RewriteError> {
    Ok(match r.u8()? {
        0 => VType::Top,
        1 => VType::Integer,
        2 => VType::Float,
        3 => VType::Double,
        4 => VType::Long,
        5 => VType::Null,
        6 => VType::UninitializedThis,
        7 => {
            let index = r.u16()?;
            VType::Object(names.class_from_pool(pool, index)?)
        }
        8 => VType::Uninitialized(u32::from(r.u16()?)),
        tag => {
            return Err(crate::error::RewriteError::Malformed {
                context: "StackMapTable".into(),
                reason: format!("unknown verification type tag {tag}"),
            })
        }
    })
}

fn read_vtypes(
    r: &mut Reader,
    n: usize,
    pool: &ConstantPool,
    names: &mut ClassNames,
) -> Result<Vec<VType>, crate::error::RewriteError> {
    let mut v = Vec::with_capacity(n.min(r.remaining()));
    for _ in 0..n {
        v.push(read_vtype(r, pool, names)?);
    }
    Ok(v)
}

/// Decodes a `StackMapTable`'s `info` bytes. `initial_locals` is the
/// implicit frame at offset 0.
pub(crate) fn decode(
    data: &[u8],
    data_offset: usize,
    initial_locals: &[VType],
    pool: &ConstantPool,
    names: &mut ClassNames,
) -> Result<Vec<Frame>, CodeError> {
    let mut r = Reader::new(data, data_offset, "a StackMapTable");
    let mut frames: Vec<Frame> = Vec::new();
    let mut pc = 0u32;
    let bad = |pc: u32, e: crate::error::RewriteError| {
        CodeError::malformed(pc, format!("StackMapTable: {e}"))
    };
    let count = r.u16().map_err(|e| bad(0, e))?;
    for _ in 0..count {
        let prev_locals: &[VType] = frames.last().map_or(initial_locals, |f| &f.locals);
        let frame_type = r.u8().map_err(|e| bad(pc, e))?;
        let mut read = || -> Result<(u16, Vec<VType>, Vec<VType>), crate::error::RewriteError> {
            Ok(match frame_type {
                0..=63 => (u16::from(frame_type), prev_locals.to_vec(), Vec::new()),
                64..=127 => {
                    let t = read_vtype(&mut r, pool, names)?;
                    (u16::from(frame_type - 64), prev_locals.to_vec(), vec![t])
                }
                247 => {
                    let delta = r.u16()?;
                    let t = read_vtype(&mut r, pool, names)?;
                    (delta, prev_locals.to_vec(), vec![t])
                }
                248..=250 => {
                    let delta = r.u16()?;
                    let k = usize::from(251 - frame_type);
                    let keep = prev_locals.len().checked_sub(k).ok_or_else(|| {
                        crate::error::RewriteError::Malformed {
                            context: "StackMapTable".into(),
                            reason: format!(
                                "chop_frame removes {k} of {} locals",
                                prev_locals.len()
                            ),
                        }
                    })?;
                    (delta, prev_locals[..keep].to_vec(), Vec::new())
                }
                251 => (r.u16()?, prev_locals.to_vec(), Vec::new()),
                252..=254 => {
                    let delta = r.u16()?;
                    let mut locals = prev_locals.to_vec();
                    locals.extend(read_vtypes(
                        &mut r,
                        usize::from(frame_type - 251),
                        pool,
                        names,
                    )?);
                    (delta, locals, Vec::new())
                }
                255 => {
                    let delta = r.u16()?;
                    let nl = r.u16()?;
                    let locals = read_vtypes(&mut r, usize::from(nl), pool, names)?;
                    let ns = r.u16()?;
                    let stack = read_vtypes(&mut r, usize::from(ns), pool, names)?;
                    (delta, locals, stack)
                }
                reserved => {
                    return Err(crate::error::RewriteError::Malformed {
                        context: "StackMapTable".into(),
                        reason: format!("reserved frame type {reserved}"),
                    })
                }
            })
        };
        let (delta, locals, stack) = read().map_err(|e| bad(pc, e))?;
        pc = match frames.last() {
            None => u32::from(delta),
            Some(prev) => prev.offset + u32::from(delta) + 1,
        };
        frames.push(Frame {
            offset: pc,
            locals,
            stack,
        });
    }
    if r.remaining() != 0 {
        return Err(CodeError::malformed(pc, "StackMapTable has trailing bytes"));
    }
    Ok(frames)
}

fn write_vtype(
    t: VType,
    out: &mut Vec<u8>,
    pool: &mut ConstantPool,
    names: &mut ClassNames,
) -> Result<(), PoolFull> {
    match t {
        VType::Top => out.put_u8(0),
        VType::Integer => out.put_u8(1),
        VType::Float => out.put_u8(2),
        VType::Double => out.put_u8(3),
        VType::Long => out.put_u8(4),
        VType::Null => out.put_u8(5),
        VType::UninitializedThis => out.put_u8(6),
        VType::Object(id) => {
            out.put_u8(7);
            out.put_u16(names.pool_index(id, pool)?);
        }
        VType::Uninitialized(offset) => {
            out.put_u8(8);
            out.put_u16(offset as u16);
        }
    }
    Ok(())
}

/// Encodes `frames` (strictly increasing offsets, all below 65536) as the
/// `info` of a `StackMapTable`.
pub(crate) fn encode(
    frames: &[Frame],
    initial_locals: &[VType],
    pool: &mut ConstantPool,
    names: &mut ClassNames,
) -> Result<Vec<u8>, PoolFull> {
    let mut out = Vec::with_capacity(frames.len() * 4 + 2);
    out.put_u16(frames.len() as u16);
    let mut prev: Option<&Frame> = None;
    for f in frames {
        let prev_locals: &[VType] = prev.map_or(initial_locals, |p| &p.locals);
        let delta = match prev {
            None => f.offset,
            Some(p) => f.offset.saturating_sub(p.offset + 1),
        } as u16;
        let same_locals = f.locals == prev_locals;
        let (n, m) = (f.locals.len(), prev_locals.len());
        if f.stack.is_empty() && same_locals {
            if delta <= 63 {
                out.put_u8(delta as u8);
            } else {
                out.put_u8(251);
                out.put_u16(delta);
            }
        } else if f.stack.len() == 1 && same_locals {
            if delta <= 63 {
                out.put_u8(64 + delta as u8);
            } else {
                out.put_u8(247);
                out.put_u16(delta);
            }
            write_vtype(f.stack[0], &mut out, pool, names)?;
        } else if f.stack.is_empty() && n < m && m - n <= 3 && prev_locals.starts_with(&f.locals) {
            out.put_u8(251 - (m - n) as u8);
            out.put_u16(delta);
        } else if f.stack.is_empty() && n > m && n - m <= 3 && f.locals.starts_with(prev_locals) {
            out.put_u8(251 + (n - m) as u8);
            out.put_u16(delta);
            for &t in &f.locals[m..] {
                write_vtype(t, &mut out, pool, names)?;
            }
        } else {
            out.put_u8(255);
            out.put_u16(delta);
            out.put_u16(n as u16);
            for &t in &f.locals {
                write_vtype(t, &mut out, pool, names)?;
            }
            out.put_u16(f.stack.len() as u16);
            for &t in &f.stack {
                write_vtype(t, &mut out, pool, names)?;
            }
        }
        prev = Some(f);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(frames: &[Frame], initial: &[VType]) -> Vec<u8> {
        let raw = [0xCA, 0xFE, 0xBA, 0xBE, 0, 0, 0, 52, 0, 1];
        let mut r = Reader::new(&raw[8..], 8, "pool");
        let mut pool = ConstantPool::parse(&mut r, &raw).unwrap();
        let mut names = ClassNames::default();
        let bytes = encode(frames, initial, &mut pool, &mut names).unwrap();
        let back = decode(&bytes, 0, initial, &pool, &mut names).unwrap();
        assert_eq!(back, frames);
        bytes
    }

    #[test]
    fn first_frame_at_offset_zero_has_delta_zero() {
        let f = Frame {
            offset: 0,
            locals: vec![],
            stack: vec![],
        };
        assert_eq!(round_trip(&[f], &[]), vec![0, 1, 0]);
    }

    #[test]
    fn picks_compact_forms_and_extended_forms_past_63() {
        let i = VType::Integer;
        let frames = vec![
            Frame {
                offset: 5,
                locals: vec![i],
                stack: vec![],
            },
            Frame {
                offset: 100,
                locals: vec![i],
                stack: vec![],
            },
            Frame {
                offset: 101,
                locals: vec![i],
                stack: vec![VType::Long],
            },
            Frame {
                offset: 300,
                locals: vec![i],
                stack: vec![VType::Float],
            },
            Frame {
                offset: 301,
                locals: vec![i, VType::Double, i],
                stack: vec![],
            },
            Frame {
                offset: 302,
                locals: vec![i],
                stack: vec![],
            },
            Frame {
                offset: 303,
                locals: vec![],
                stack: vec![i, i],
            },
        ];
        let bytes = round_trip(&frames, &[i]);
        assert_eq!(
            bytes,
            vec![
                0, 7, //
                5, // same
                251, 0, 94, // same_frame_extended
                64, 4, // same_locals_1_stack_item
                247, 0, 198, 2, // ..._extended
                253, 0, 0, 3, 1, // append 2
                249, 0, 0, // chop 2
                255, 0, 0, 0, 0, 0, 2, 1, 1, // full
            ]
        );
    }
}
