//! Instruction decoding (JVMS §6.5) into a list the rewriter can re-lay out.
//!
//! Only the instructions whose encoding depends on their position need more
//! than their bytes: branches (16- and 32-bit relative offsets) and the two
//! switches (relative offsets, plus padding to a 4-byte boundary that moves
//! with the instruction). Every other instruction is copied as it was.
//! Targets are validated here, once: after decoding, every branch target is
//! the start of an instruction.

use crate::error::CodeError;

pub(crate) mod op {
    pub const NOP: u8 = 0x00;
    pub const ACONST_NULL: u8 = 0x01;
    pub const ICONST_M1: u8 = 0x02;
    pub const ICONST_0: u8 = 0x03;
    pub const BIPUSH: u8 = 0x10;
    pub const SIPUSH: u8 = 0x11;
    pub const LDC: u8 = 0x12;
    pub const LDC_W: u8 = 0x13;
    pub const LDC2_W: u8 = 0x14;
    pub const ILOAD: u8 = 0x15;
    pub const ALOAD: u8 = 0x19;
    pub const ILOAD_0: u8 = 0x1a;
    pub const ALOAD_0: u8 = 0x2a;
    pub const ALOAD_3: u8 = 0x2d;
    pub const IALOAD: u8 = 0x2e;
    pub const SALOAD: u8 = 0x35;
    pub const ISTORE: u8 = 0x36;
    pub const ASTORE: u8 = 0x3a;
    pub const ISTORE_0: u8 = 0x3b;
    pub const ASTORE_3: u8 = 0x4e;
    pub const IASTORE: u8 = 0x4f;
    pub const SASTORE: u8 = 0x56;
    pub const POP: u8 = 0x57;
    pub const POP2: u8 = 0x58;
    pub const DUP: u8 = 0x59;
    pub const DUP_X1: u8 = 0x5a;
    pub const DUP_X2: u8 = 0x5b;
    pub const DUP2: u8 = 0x5c;
    pub const DUP2_X1: u8 = 0x5d;
    pub const DUP2_X2: u8 = 0x5e;
    pub const SWAP: u8 = 0x5f;
    pub const IADD: u8 = 0x60;
    pub const LXOR: u8 = 0x83;
    pub const IINC: u8 = 0x84;
    pub const I2L: u8 = 0x85;
    pub const I2S: u8 = 0x93;
    pub const LCMP: u8 = 0x94;
    pub const DCMPG: u8 = 0x98;
    pub const IFEQ: u8 = 0x99;
    pub const IFLE: u8 = 0x9e;
    pub const IF_ICMPEQ: u8 = 0x9f;
    pub const IF_ACMPNE: u8 = 0xa6;
    pub const GOTO: u8 = 0xa7;
    pub const JSR: u8 = 0xa8;
    pub const RET: u8 = 0xa9;
    pub const TABLESWITCH: u8 = 0xaa;
    pub const LOOKUPSWITCH: u8 = 0xab;
    pub const IRETURN: u8 = 0xac;
    pub const LRETURN: u8 = 0xad;
    pub const FRETURN: u8 = 0xae;
    pub const DRETURN: u8 = 0xaf;
    pub const ARETURN: u8 = 0xb0;
    pub const RETURN: u8 = 0xb1;
    pub const GETSTATIC: u8 = 0xb2;
    pub const PUTSTATIC: u8 = 0xb3;
    pub const GETFIELD: u8 = 0xb4;
    pub const PUTFIELD: u8 = 0xb5;
    pub const INVOKEVIRTUAL: u8 = 0xb6;
    pub const INVOKESPECIAL: u8 = 0xb7;
    pub const INVOKESTATIC: u8 = 0xb8;
    pub const INVOKEINTERFACE: u8 = 0xb9;
    pub const INVOKEDYNAMIC: u8 = 0xba;
    pub const NEW: u8 = 0xbb;
    pub const NEWARRAY: u8 = 0xbc;
    pub const ANEWARRAY: u8 = 0xbd;
    pub const ARRAYLENGTH: u8 = 0xbe;
    pub const ATHROW: u8 = 0xbf;
    pub const CHECKCAST: u8 = 0xc0;
    pub const INSTANCEOF: u8 = 0xc1;
    pub const MONITORENTER: u8 = 0xc2;
    pub const MONITOREXIT: u8 = 0xc3;
    pub const WIDE: u8 = 0xc4;
    pub const MULTIANEWARRAY: u8 = 0xc5;
    pub const IFNULL: u8 = 0xc6;
    pub const IFNONNULL: u8 = 0xc7;
    pub const GOTO_W: u8 = 0xc8;
    pub const JSR_W: u8 = 0xc9;
}

/// Length of an instruction that has a fixed length, 0 for the variable ones
/// (`tableswitch`, `lookupswitch`, `wide`), `None` for undefined opcodes.
fn fixed_length(opcode: u8) -> Option<u32> {
    Some(match opcode {
        0x00..=0x0f => 1,
        op::BIPUSH => 2,
        op::SIPUSH => 3,
        op::LDC => 2,
        op::LDC_W | op::LDC2_W => 3,
        op::ILOAD..=op::ALOAD => 2,
        op::ILOAD_0..=op::SALOAD => 1,
        op::ISTORE..=op::ASTORE => 2,
        op::ISTORE_0..=op::LXOR => 1,
        op::IINC => 3,
        op::I2L..=op::DCMPG => 1,
        op::IFEQ..=op::JSR => 3,
        op::RET => 2,
        op::TABLESWITCH | op::LOOKUPSWITCH | op::WIDE => 0,
        op::IRETURN..=op::RETURN => 1,
        op::GETSTATIC..=op::INVOKESTATIC => 3,
        op::INVOKEINTERFACE | op::INVOKEDYNAMIC => 5,
        op::NEW => 3,
        op::NEWARRAY => 2,
        op::ANEWARRAY => 3,
        op::ARRAYLENGTH | op::ATHROW => 1,
        op::CHECKCAST | op::INSTANCEOF => 3,
        op::MONITORENTER | op::MONITOREXIT => 1,
        op::MULTIANEWARRAY => 4,
        op::IFNULL | op::IFNONNULL => 3,
        op::GOTO_W | op::JSR_W => 5,
        _ => return None,
    })
}

/// Whether `opcode` is one of the 16-bit conditional branches.
pub(crate) fn is_conditional_branch(opcode: u8) -> bool {
    matches!(
        opcode,
        op::IFEQ..=op::IF_ACMPNE | op::IFNULL | op::IFNONNULL
    )
}

/// The conditional branch taken exactly when `opcode`'s is not.
pub(crate) fn inverted_condition(opcode: u8) -> u8 {
    // The conditions come in pairs: ifeq/ifne, iflt/ifge, ..., ifnull/ifnonnull.
    let base = if opcode >= op::IFNULL {
        op::IFNULL
    } else {
        op::IFEQ
    };
    if (opcode - base) & 1 == 0 {
        opcode + 1
    } else {
        opcode - 1
    }
}

/// Whether control never falls through to the next instruction.
pub(crate) fn ends_flow(opcode: u8) -> bool {
    matches!(
        opcode,
        op::GOTO | op::GOTO_W | op::RET | op::TABLESWITCH | op::LOOKUPSWITCH | op::IRETURN
            ..=op::RETURN | op::ATHROW
    )
}

/// What an instruction needs beyond its bytes to be placed elsewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum InsnKind {
    /// Position independent: copied as is.
    Plain,
    /// `if*`, `goto`, `jsr`, `ifnull`, `ifnonnull`: 16-bit offset.
    Branch { target: u32 },
    /// `goto_w`, `jsr_w`: 32-bit offset.
    WideBranch { target: u32 },
    TableSwitch {
        default: u32,
        low: i32,
        targets: Vec<u32>,
    },
    LookupSwitch {
        default: u32,
        pairs: Vec<(i32, u32)>,
    },
}

/// One decoded instruction; all offsets are absolute positions in the
/// original code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Insn {
    pub offset: u32,
    pub len: u32,
    pub opcode: u8,
    pub kind: InsnKind,
}

impl Insn {
    /// All the offsets this instruction may jump to.
    pub fn targets(&self) -> Vec<u32> {
        match &self.kind {
            InsnKind::Plain => Vec::new(),
            InsnKind::Branch { target } | InsnKind::WideBranch { target } => vec![*target],
            InsnKind::TableSwitch {
                default, targets, ..
            } => std::iter::once(*default)
                .chain(targets.iter().copied())
                .collect(),
            InsnKind::LookupSwitch { default, pairs } => std::iter::once(*default)
                .chain(pairs.iter().map(|p| p.1))
                .collect(),
        }
    }

    /// The instruction's operand bytes (after the opcode) in `code`.
    pub fn operands<'c>(&self, code: &'c [u8]) -> &'c [u8] {
        code.get(self.offset as usize + 1..(self.offset + self.len) as usize)
            .unwrap_or_default()
    }
}

/// A method's instructions and a map from code offsets to them.
pub(crate) struct Instructions {
    pub insns: Vec<Insn>,
    /// For each code offset, the index of the instruction starting there,
    /// or `u32::MAX`.
    at: Vec<u32>,
}

impl Instructions {
    pub fn index_at(&self, offset: u32) -> Option<usize> {
        match self.at.get(offset as usize) {
            Some(&i) if i != u32::MAX => Some(i as usize),
            _ => None,
        }
    }

    /// The index of the instruction that contains `offset`.
    pub fn index_containing(&self, offset: u32) -> Option<usize> {
        let end = self.at.len().min(offset as usize + 1);
        self.at
            .get(..end)?
            .iter()
            .rev()
            .find(|&&i| i != u32::MAX)
            .map(|&i| i as usize)
    }

    pub fn code_length(&self) -> u32 {
        self.at.len() as u32
    }
}

fn read_i32(code: &[u8], pos: usize, at: u32) -> Result<i32, CodeError> {
    code.get(pos..pos + 4)
        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| CodeError::malformed(at, "instruction runs past the end of the code"))
}

fn target(at: u32, delta: i64, code_len: usize) -> Result<u32, CodeError> {
    let t = i64::from(at) + delta;
    if t < 0 || t >= code_len as i64 {
        return Err(CodeError::malformed(
            at,
            format!("branch target {t} outside the code"),
        ));
    }
    Ok(t as u32)
}

/// Decodes `code` (at most 65535 bytes) and checks that every branch target
/// is an instruction boundary.
pub(crate) fn decode(code: &[u8]) -> Result<Instructions, CodeError> {
    let len = code.len();
    let mut insns = Vec::with_capacity(len / 2);
    let mut at = vec![u32::MAX; len];
    let mut pos = 0usize;
    while pos < len {
        let offset = pos as u32;
        let opcode = code[pos];
        let bad_len = || CodeError::malformed(offset, "instruction runs past the end of the code");
        let (ilen, kind) = match fixed_length(opcode) {
            None => {
                return Err(CodeError::malformed(
                    offset,
                    format!("undefined opcode {opcode:#04x}"),
                ))
            }
            Some(0) if opcode == op::WIDE => {
                let next = *code.get(pos + 1).ok_or_else(bad_len)?;
                let l = match next {
                    op::IINC => 6,
                    op::ILOAD..=op::ALOAD | op::ISTORE..=op::ASTORE | op::RET => 4,
                    other => {
                        return Err(CodeError::malformed(
                            offset,
                            format!("wide cannot modify opcode {other:#04x}"),
                        ))
                    }
                };
                (l, InsnKind::Plain)
            }
            Some(0) => {
                // Operands start at the next multiple of four.
                let base = (pos + 4) & !3;
                let default = target(offset, read_i32(code, base, offset)?.into(), len)?;
                if opcode == op::TABLESWITCH {
                    let low = read_i32(code, base + 4, offset)?;
                    let high = read_i32(code, base + 8, offset)?;
                    if high < low {
                        return Err(CodeError::malformed(offset, "tableswitch high < low"));
                    }
                    let n = (i64::from(high) - i64::from(low) + 1) as usize;
                    if n > len {
                        return Err(bad_len());
                    }
                    let mut targets = Vec::with_capacity(n);
                    for k in 0..n {
                        let d = read_i32(code, base + 12 + 4 * k, offset)?;
                        targets.push(target(offset, d.into(), len)?);
                    }
                    (
                        (base + 12 + 4 * n - pos) as u32,
                        InsnKind::TableSwitch {
                            default,
                            low,
                            targets,
                        },
                    )
                } else {
                    let npairs = read_i32(code, base + 4, offset)?;
                    if npairs < 0 || npairs as usize > len {
                        return Err(CodeError::malformed(offset, "bad lookupswitch npairs"));
                    }
                    let n = npairs as usize;
                    let mut pairs = Vec::with_capacity(n);
                    for k in 0..n {
                        let key = read_i32(code, base + 8 + 8 * k, offset)?;
                        let d = read_i32(code, base + 12 + 8 * k, offset)?;
                        pairs.push((key, target(offset, d.into(), len)?));
                    }
                    (
                        (base + 8 + 8 * n - pos) as u32,
                        InsnKind::LookupSwitch { default, pairs },
                    )
                }
            }
            Some(l) => {
                let kind = match opcode {
                    op::IFEQ..=op::JSR | op::IFNULL | op::IFNONNULL => {
                        let b = code.get(pos + 1..pos + 3).ok_or_else(bad_len)?;
                        let d = i16::from_be_bytes([b[0], b[1]]);
                        InsnKind::Branch {
                            target: target(offset, d.into(), len)?,
                        }
                    }
                    op::GOTO_W | op::JSR_W => InsnKind::WideBranch {
                        target: target(offset, read_i32(code, pos + 1, offset)?.into(), len)?,
                    },
                    _ => InsnKind::Plain,
                };
                (l, kind)
            }
        };
        let end = pos + ilen as usize;
        if end > len {
            return Err(bad_len());
        }
        at[pos] = insns.len() as u32;
        insns.push(Insn {
            offset,
            len: ilen,
            opcode,
            kind,
        });
        pos = end;
    }
    let decoded = Instructions { insns, at };
    for insn in &decoded.insns {
        for t in insn.targets() {
            if decoded.index_at(t).is_none() {
                return Err(CodeError::malformed(
                    insn.offset,
                    format!("branch target {t} is inside an instruction"),
                ));
            }
        }
    }
    Ok(decoded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_switch_padding_relative_to_code_start() {
        // 0: iconst_0, 1: tableswitch (pad 2) default +15 low 0 high 0 -> +15
        // 20: return ... placed so that targets land on it.
        let mut code = vec![op::ICONST_0, op::TABLESWITCH, 0, 0];
        for v in [19i32, 0, 0, 19] {
            code.extend_from_slice(&v.to_be_bytes());
        }
        code.push(op::RETURN);
        let d = decode(&code).unwrap();
        assert_eq!(d.insns.len(), 3);
        assert_eq!(d.insns[1].len, 19);
        assert_eq!(
            d.insns[1].kind,
            InsnKind::TableSwitch {
                default: 20,
                low: 0,
                targets: vec![20]
            }
        );
    }

    #[test]
    fn rejects_targets_inside_instructions_and_truncation() {
        assert!(decode(&[op::GOTO, 0, 1]).is_err());
        assert!(decode(&[op::SIPUSH, 0]).is_err());
        assert!(decode(&[op::WIDE]).is_err());
        assert!(decode(&[0xcb]).is_err());
        assert!(decode(&[op::LOOKUPSWITCH, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff]).is_err());
    }

    #[test]
    fn inverts_every_condition_pair() {
        assert_eq!(inverted_condition(op::IFEQ), op::IFEQ + 1);
        assert_eq!(inverted_condition(op::IFLE), op::IFLE - 1);
        assert_eq!(inverted_condition(op::IF_ACMPNE), op::IF_ACMPNE - 1);
        assert_eq!(inverted_condition(op::IFNULL), op::IFNONNULL);
        assert_eq!(inverted_condition(op::IFNONNULL), op::IFNULL);
    }
}
