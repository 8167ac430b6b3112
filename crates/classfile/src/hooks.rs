//! The byte sequences inserted into a method: entry, exit and the
//! catch-all exceptional exit, as described in [`crate::probe`].
//!
//! All of them are position independent and straight-line, so they can be
//! placed anywhere without new stack-map frames; only the catch-all handler
//! appended after the original code needs one.

use crate::bytecode::op;
use crate::bytes::WriteBe;
use crate::constant_pool::{ConstantPool, PoolFull};
use crate::descriptor::FieldType;
use crate::probe::{self, ProbeMethod};
use rustc_hash::FxHashMap;

/// Constant-pool entries for the probe, shared by all methods of a class.
pub(crate) struct ProbeRefs {
    class_name: Vec<u8>,
    class: Option<u16>,
    methods: FxHashMap<ProbeMethod, u16>,
}

impl ProbeRefs {
    pub fn new(class_name: Vec<u8>) -> Self {
        ProbeRefs {
            class_name,
            class: None,
            methods: FxHashMap::default(),
        }
    }

    fn invoke(
        &mut self,
        out: &mut Vec<u8>,
        pool: &mut ConstantPool,
        m: ProbeMethod,
    ) -> Result<(), PoolFull> {
        let index = match self.methods.get(&m) {
            Some(&i) => i,
            None => {
                let class = match self.class {
                    Some(c) => c,
                    None => *self.class.insert(pool.class_index(&self.class_name)?),
                };
                let i = pool.method_ref_index(class, m.name.as_bytes(), m.descriptor.as_bytes())?;
                self.methods.insert(m, i);
                i
            }
        };
        out.put_u8(op::INVOKESTATIC);
        out.put_u16(index);
        Ok(())
    }
}

impl ProbeRefs {
    fn counts_field(&mut self, out: &mut Vec<u8>, pool: &mut ConstantPool) -> Result<(), PoolFull> {
        let class = match self.class {
            Some(c) => c,
            None => *self.class.insert(pool.class_index(&self.class_name)?),
        };
        let (name, desc) = probe::COUNTS_FIELD;
        let index = pool.field_ref_index(class, name.as_bytes(), desc.as_bytes())?;
        out.put_u8(op::GETSTATIC);
        out.put_u16(index);
        Ok(())
    }
}

/// The counting hook: `Probe.counts[slot]++`. Straight-line, on an empty
/// or any stack; needs four operand-stack slots.
pub(crate) fn count(
    refs: &mut ProbeRefs,
    pool: &mut ConstantPool,
    slot: i32,
) -> Result<(Vec<u8>, u16), PoolFull> {
    let mut out = Vec::new();
    refs.counts_field(&mut out, pool)?;
    push_int(&mut out, pool, slot)?;
    out.put_u8(op::DUP2);
    out.put_u8(op::IALOAD);
    out.put_u8(op::ICONST_0 + 1);
    out.put_u8(op::IADD);
    out.put_u8(op::IASTORE);
    Ok((out, 4))
}

/// Pushes an `int` constant with the shortest instruction.
fn push_int(out: &mut Vec<u8>, pool: &mut ConstantPool, v: i32) -> Result<(), PoolFull> {
    match v {
        -1..=5 => out.put_u8((i32::from(op::ICONST_0) + v) as u8),
        -128..=127 => {
            out.put_u8(op::BIPUSH);
            out.put_u8(v as u8);
        }
        -32768..=32767 => {
            out.put_u8(op::SIPUSH);
            out.put_u16(v as u16);
        }
        _ => {
            let index = pool.integer_index(v)?;
            if index <= 255 {
                out.put_u8(op::LDC);
                out.put_u8(index as u8);
            } else {
                out.put_u8(op::LDC_W);
                out.put_u16(index);
            }
        }
    }
    Ok(())
}

/// Loads local `slot` of type `t` onto the stack.
fn load(out: &mut Vec<u8>, t: FieldType, slot: u16) {
    let kind = match t {
        FieldType::Long => 1,
        FieldType::Float => 2,
        FieldType::Double => 3,
        FieldType::Reference(_) => 4,
        _ => 0,
    };
    if slot < 4 {
        out.put_u8(op::ILOAD_0 + kind * 4 + slot as u8);
    } else if slot <= 255 {
        out.put_u8(op::ILOAD + kind);
        out.put_u8(slot as u8);
    } else {
        out.put_u8(op::WIDE);
        out.put_u8(op::ILOAD + kind);
        out.put_u16(slot);
    }
}

fn arg_hook(t: FieldType) -> ProbeMethod {
    match t {
        FieldType::Boolean => probe::ARG_BOOLEAN,
        FieldType::Byte => probe::ARG_BYTE,
        FieldType::Char => probe::ARG_CHAR,
        FieldType::Short => probe::ARG_SHORT,
        FieldType::Int => probe::ARG_INT,
        FieldType::Long => probe::ARG_LONG,
        FieldType::Float => probe::ARG_FLOAT,
        FieldType::Double => probe::ARG_DOUBLE,
        FieldType::Reference(_) => probe::ARG_OBJECT,
    }
}

/// A parameter's code in [`probe::ENTER_1`]'s `kinds`, if it has one.
fn prim_kind(t: FieldType) -> Option<u8> {
    let c = match t {
        FieldType::Boolean => 'Z',
        FieldType::Byte => 'B',
        FieldType::Char => 'C',
        FieldType::Short => 'S',
        FieldType::Int => 'I',
        FieldType::Long => 'J',
        _ => return None,
    };
    probe::PRIM_KINDS
        .iter()
        .find(|(d, _)| *d == c)
        .map(|&(_, k)| k)
}

/// The entry hook. `first_param_slot` is 0 for static methods, 1 otherwise;
/// `primitive`: one or two integral parameters go to
/// [`probe::ENTER_1`] or [`probe::ENTER_2`].
/// Returns the code and the operand-stack slots it needs.
pub(crate) fn entry(
    refs: &mut ProbeRefs,
    pool: &mut ConstantPool,
    id: i32,
    args: Option<(&[FieldType], u16)>,
    primitive: bool,
) -> Result<(Vec<u8>, u16), PoolFull> {
    let mut out = Vec::new();
    let mut stack = 1;
    if let Some((params, first_slot)) = args {
        let kinds: Option<Vec<u8>> = params.iter().map(|&p| prim_kind(p)).collect();
        if let Some(kinds) = kinds.filter(|k| primitive && (1..=2).contains(&k.len())) {
            let mut slot = first_slot;
            for &p in params {
                load(&mut out, p, slot);
                if p != FieldType::Long {
                    out.put_u8(op::I2L);
                }
                slot += p.slots();
            }
            let codes = kinds
                .iter()
                .enumerate()
                .fold(0i32, |acc, (i, &k)| acc | i32::from(k) << (8 * i));
            push_int(&mut out, pool, codes)?;
            push_int(&mut out, pool, id)?;
            let hook = if kinds.len() == 1 {
                probe::ENTER_1
            } else {
                probe::ENTER_2
            };
            refs.invoke(&mut out, pool, hook)?;
            // The widened values, then the two ints.
            return Ok((out, 2 * kinds.len() as u16 + 2));
        }

        let mut slot = first_slot;
        for &p in params {
            load(&mut out, p, slot);
            refs.invoke(&mut out, pool, arg_hook(p))?;
            stack = stack.max(p.slots());
            slot += p.slots();
        }
    }
    push_int(&mut out, pool, id)?;
    refs.invoke(&mut out, pool, probe::ENTER)?;
    Ok((out, stack))
}

/// The exit hook placed before a return instruction `opcode` of a method
/// returning `ret`. Returns the code and the extra operand-stack slots it
/// needs on top of the returned value.
pub(crate) fn exit(
    refs: &mut ProbeRefs,
    pool: &mut ConstantPool,
    id: i32,
    opcode: u8,
    ret: Option<FieldType>,
    capture: bool,
) -> Result<(Vec<u8>, u16), PoolFull> {
    let mut out = Vec::new();
    let hook = match (capture, opcode) {
        (false, _) | (_, op::RETURN) => None,
        (true, op::IRETURN) => Some(match ret {
            Some(FieldType::Boolean) => probe::EXIT_BOOLEAN,
            Some(FieldType::Byte) => probe::EXIT_BYTE,
            Some(FieldType::Char) => probe::EXIT_CHAR,
            Some(FieldType::Short) => probe::EXIT_SHORT,
            _ => probe::EXIT_INT,
        }),
        (true, op::LRETURN) => Some(probe::EXIT_LONG),
        (true, op::FRETURN) => Some(probe::EXIT_FLOAT),
        (true, op::DRETURN) => Some(probe::EXIT_DOUBLE),
        (true, _) => Some(probe::EXIT_OBJECT),
    };
    let extra = match hook {
        None => {
            push_int(&mut out, pool, id)?;
            refs.invoke(&mut out, pool, probe::EXIT)?;
            1
        }
        Some(h) => {
            let wide = matches!(opcode, op::LRETURN | op::DRETURN);
            out.put_u8(if wide { op::DUP2 } else { op::DUP });
            push_int(&mut out, pool, id)?;
            refs.invoke(&mut out, pool, h)?;
            if wide {
                3
            } else {
                2
            }
        }
    };
    Ok((out, extra))
}

/// The catch-all handler: report the throwable and rethrow it. Runs with
/// the throwable as the only stack entry and needs three slots.
pub(crate) fn exceptional_exit(
    refs: &mut ProbeRefs,
    pool: &mut ConstantPool,
    id: i32,
) -> Result<Vec<u8>, PoolFull> {
    let mut out = vec![op::DUP];
    push_int(&mut out, pool, id)?;
    refs.invoke(&mut out, pool, probe::EXIT_THROW)?;
    out.put_u8(op::ATHROW);
    Ok(out)
}

/// After a `monitorenter` whose operand a `dup` in front of it kept: report
/// the monitor now held.
pub(crate) fn monitor_enter(
    refs: &mut ProbeRefs,
    pool: &mut ConstantPool,
) -> Result<Vec<u8>, PoolFull> {
    let mut out = Vec::new();
    refs.invoke(&mut out, pool, probe::MONITOR_ENTER)?;
    Ok(out)
}

/// Before a `monitorexit`: report the monitor about to be released (one
/// extra stack slot).
pub(crate) fn monitor_exit(
    refs: &mut ProbeRefs,
    pool: &mut ConstantPool,
) -> Result<Vec<u8>, PoolFull> {
    let mut out = vec![op::DUP];
    refs.invoke(&mut out, pool, probe::MONITOR_EXIT)?;
    Ok(out)
}

/// A `synchronized` method's monitor, after its entry hook: `this`, or the
/// class (`ldc`, class files 49 and later) for a static method. Needs one
/// stack slot.
pub(crate) fn method_monitor_enter(
    refs: &mut ProbeRefs,
    pool: &mut ConstantPool,
    this_class: Option<u16>,
) -> Result<Vec<u8>, PoolFull> {
    let mut out = Vec::new();
    match this_class {
        None => out.put_u8(op::ALOAD_0),
        Some(index) if index <= 255 => {
            out.put_u8(op::LDC);
            out.put_u8(index as u8);
        }
        Some(index) => {
            out.put_u8(op::LDC_W);
            out.put_u16(index);
        }
    }
    refs.invoke(&mut out, pool, probe::METHOD_MONITOR_ENTER)?;
    Ok(out)
}

/// A `synchronized` method's monitor is about to be released: placed
/// before its exit hooks and in its catch-all handler.
pub(crate) fn method_monitor_exit(
    refs: &mut ProbeRefs,
    pool: &mut ConstantPool,
) -> Result<Vec<u8>, PoolFull> {
    let mut out = Vec::new();
    refs.invoke(&mut out, pool, probe::METHOD_MONITOR_EXIT)?;
    Ok(out)
}
