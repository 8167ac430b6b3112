//! Placing the original instructions and the inserted hooks at their new
//! offsets, and writing the new code array.
//!
//! Layout is iterative because sizes depend on positions: a switch's padding
//! depends on its offset modulo 4, and a 16-bit branch whose displacement
//! no longer fits must grow (`goto` → `goto_w`, `jsr` → `jsr_w`, a
//! conditional `if<c> L` → `if<!c> +8; goto_w L`). Widening only ever
//! grows code, so repeating until nothing more needs widening terminates.
//!
//! Every original instruction gets three positions: its *label* (where
//! branches to it land: before any hook inserted in front of it, so a jump
//! to a `return` still runs the exit hook), its *body*, and its *body end*
//! (before any hook inserted after it, so the entry hook placed after a
//! constructor's super call is not inside a user's try range that ends
//! there). The entry hook of an ordinary method sits before the label of
//! the first instruction: a loop back to offset 0 does not re-enter.

use crate::bytecode::{
    inverted_condition, is_conditional_branch, op, Insn, InsnKind, Instructions,
};
use crate::bytes::WriteBe;

/// Code inserted around the original instructions.
pub(crate) struct Insertions<'h> {
    /// Before everything, not reached by branches to offset 0.
    pub at_start: &'h [u8],
    /// Per instruction, placed before it and reached by branches to it.
    pub before: Vec<&'h [u8]>,
    /// Per instruction, placed after it, reached only by falling through.
    pub after: Vec<&'h [u8]>,
    /// After all original code.
    pub handler: &'h [u8],
}

/// Where everything went.
pub(crate) struct Layout {
    label: Vec<u32>,
    body: Vec<u32>,
    body_end: Vec<u32>,
    /// Which 16-bit branches became wide.
    pub widened: Vec<bool>,
    /// End of the original code (and start of the handler).
    pub code_end: u32,
    /// Total length including the handler.
    pub total: u32,
}

/// The new code would not fit in 65535 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooLarge {
    pub length: u32,
}

fn switch_padding(pos: u32) -> u32 {
    (4 - (pos + 1) % 4) % 4
}

fn size(insn: &Insn, pos: u32, widened: bool) -> u32 {
    match &insn.kind {
        InsnKind::Plain => insn.len,
        InsnKind::Branch { .. } if !widened => 3,
        InsnKind::Branch { .. } if is_conditional_branch(insn.opcode) => 8,
        InsnKind::Branch { .. } | InsnKind::WideBranch { .. } => 5,
        InsnKind::TableSwitch { targets, .. } => {
            1 + switch_padding(pos) + 12 + 4 * targets.len() as u32
        }
        InsnKind::LookupSwitch { pairs, .. } => {
            1 + switch_padding(pos) + 8 + 8 * pairs.len() as u32
        }
    }
}

pub(crate) fn lay_out(insns: &Instructions, ins: &Insertions) -> Result<Layout, TooLarge> {
    let n = insns.insns.len();
    let mut layout = Layout {
        label: vec![0; n],
        body: vec![0; n],
        body_end: vec![0; n],
        widened: vec![false; n],
        code_end: 0,
        total: 0,
    };
    loop {
        let mut pos = ins.at_start.len() as u32;
        for (i, insn) in insns.insns.iter().enumerate() {
            layout.label[i] = pos;
            pos += ins.before.get(i).map_or(0, |b| b.len() as u32);
            layout.body[i] = pos;
            pos += size(insn, pos, layout.widened[i]);
            layout.body_end[i] = pos;
            pos += ins.after.get(i).map_or(0, |a| a.len() as u32);
        }
        layout.code_end = pos;
        layout.total = pos + ins.handler.len() as u32;
        if layout.total > 65535 {
            return Err(TooLarge {
                length: layout.total,
            });
        }
        let mut changed = false;
        for (i, insn) in insns.insns.iter().enumerate() {
            if let InsnKind::Branch { target } = insn.kind {
                if layout.widened[i] {
                    continue;
                }
                let to = insns.index_at(target).map_or(0, |t| layout.label[t]);
                let delta = i64::from(to) - i64::from(layout.body[i]);
                if i16::try_from(delta).is_err() {
                    layout.widened[i] = true;
                    changed = true;
                }
            }
        }
        if !changed {
            return Ok(layout);
        }
    }
}

impl Layout {
    /// New position of the instruction that started at `old` (the place
    /// branches land), if an instruction started there.
    pub fn label_of(&self, insns: &Instructions, old: u32) -> Option<u32> {
        insns.index_at(old).map(|i| self.label[i])
    }

    /// New position of the bytes of the instruction at `old` itself.
    pub fn body_of(&self, insns: &Instructions, old: u32) -> Option<u32> {
        insns.index_at(old).map(|i| self.body[i])
    }

    pub fn label(&self, i: usize) -> u32 {
        self.label.get(i).copied().unwrap_or(self.code_end)
    }

    pub fn body_end(&self, i: usize) -> u32 {
        self.body_end.get(i).copied().unwrap_or(self.code_end)
    }

    /// New position for an exclusive range end at `old`: the end of the
    /// preceding instruction's body, so neither a hook after that
    /// instruction nor one before the next is inside the range.
    pub fn range_end_of(&self, insns: &Instructions, old: u32) -> Option<u32> {
        if old == insns.code_length() {
            return Some(self.code_end);
        }
        let i = insns.index_at(old)?;
        Some(if i == 0 {
            self.label(0)
        } else {
            self.body_end(i - 1)
        })
    }

    /// New position for a debug-table start (line or variable scope):
    /// offset 0 stays 0 so the entry hook belongs to the first line and to
    /// the parameters' scopes; offsets inside an instruction map to it.
    pub fn debug_start_of(&self, insns: &Instructions, old: u32) -> u32 {
        if old == 0 {
            return 0;
        }
        insns
            .index_containing(old)
            .map_or(self.code_end, |i| self.label(i))
    }

    /// New position for a debug-table scope end.
    pub fn debug_end_of(&self, insns: &Instructions, old: u32) -> u32 {
        if old >= insns.code_length() {
            return self.code_end;
        }
        insns
            .index_containing(old)
            .map_or(self.code_end, |i| self.label(i))
    }
}

fn put_i16(out: &mut Vec<u8>, v: i64) {
    out.put_u16(v as i16 as u16);
}

fn put_i32(out: &mut Vec<u8>, v: i64) {
    out.put_u32(v as i32 as u32);
}

/// Writes the new code array.
pub(crate) fn emit(
    insns: &Instructions,
    code: &[u8],
    ins: &Insertions,
    layout: &Layout,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(layout.total as usize);
    out.extend_from_slice(ins.at_start);
    let label = |t: u32| i64::from(layout.label_of(insns, t).unwrap_or(0));
    for (i, insn) in insns.insns.iter().enumerate() {
        if let Some(b) = ins.before.get(i) {
            out.extend_from_slice(b);
        }
        let at = out.len() as i64;
        match &insn.kind {
            InsnKind::Plain => out.extend_from_slice(
                code.get(insn.offset as usize..(insn.offset + insn.len) as usize)
                    .unwrap_or_default(),
            ),
            InsnKind::Branch { target } if !layout.widened[i] => {
                out.put_u8(insn.opcode);
                put_i16(&mut out, label(*target) - at);
            }
            InsnKind::Branch { target } => {
                if is_conditional_branch(insn.opcode) {
                    out.put_u8(inverted_condition(insn.opcode));
                    put_i16(&mut out, 8);
                    out.put_u8(op::GOTO_W);
                    put_i32(&mut out, label(*target) - (at + 3));
                } else {
                    out.put_u8(if insn.opcode == op::JSR {
                        op::JSR_W
                    } else {
                        op::GOTO_W
                    });
                    put_i32(&mut out, label(*target) - at);
                }
            }
            InsnKind::WideBranch { target } => {
                out.put_u8(insn.opcode);
                put_i32(&mut out, label(*target) - at);
            }
            InsnKind::TableSwitch {
                default,
                low,
                targets,
            } => {
                out.put_u8(insn.opcode);
                out.resize(out.len() + switch_padding(at as u32) as usize, 0);
                put_i32(&mut out, label(*default) - at);
                out.put_u32(*low as u32);
                out.put_u32((i64::from(*low) + targets.len() as i64 - 1) as i32 as u32);
                for t in targets {
                    put_i32(&mut out, label(*t) - at);
                }
            }
            InsnKind::LookupSwitch { default, pairs } => {
                out.put_u8(insn.opcode);
                out.resize(out.len() + switch_padding(at as u32) as usize, 0);
                put_i32(&mut out, label(*default) - at);
                out.put_u32(pairs.len() as u32);
                for (key, t) in pairs {
                    out.put_u32(*key as u32);
                    put_i32(&mut out, label(*t) - at);
                }
            }
        }
        if let Some(a) = ins.after.get(i) {
            out.extend_from_slice(a);
        }
    }
    out.extend_from_slice(ins.handler);
    out
}
