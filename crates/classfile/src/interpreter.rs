//! An abstract interpreter over verification types: what each instruction
//! does to the types of the locals and the operand stack (JVMS §4.10.1.9).
//!
//! The rewriter needs type states twice. In constructors it must find the
//! `invokespecial <init>` whose receiver is the uninitialised `this` (and
//! not another object created by `new` before the super call). And when a
//! branch has to be widened into `if!cond +8; goto_w`, the instruction after
//! the `goto_w` becomes a branch target and needs a stack-map frame of its
//! own, computed by replaying the straight-line block from the frame before
//! it. No merging of class types is ever needed for that, so the
//! interpreter needs no class hierarchy: every result type comes from a
//! descriptor, the constant pool or the operand it replaces.

use crate::bytecode::{op, Insn, Instructions};
use crate::bytes::u16_at;
use crate::constant_pool::{Constant, ConstantPool};
use crate::descriptor::{self, FieldType};
use crate::error::CodeError;
use crate::stack_map::Frame;
use crate::types::{ClassId, ClassNames, VType};

/// Types of the locals and operand stack, one entry per slot: a long or
/// double is followed by a `Top` for its second half.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct State {
    pub locals: Vec<VType>,
    pub stack: Vec<VType>,
    /// Some local still holds the uninitialised `this` (flagThisUninit).
    pub this_uninit: bool,
}

fn expand(entries: &[VType], out: &mut Vec<VType>) {
    for &t in entries {
        out.push(t);
        if t.is_category2() {
            out.push(VType::Top);
        }
    }
}

fn compress(slots: &[VType]) -> Vec<VType> {
    let mut out = Vec::with_capacity(slots.len());
    let mut i = 0;
    while let Some(&t) = slots.get(i) {
        out.push(t);
        i += if t.is_category2() { 2 } else { 1 };
    }
    out
}

impl State {
    /// The state a stack-map frame describes.
    pub fn from_frame(frame: &Frame, max_locals: u16) -> Result<State, CodeError> {
        let mut locals = Vec::with_capacity(usize::from(max_locals));
        expand(&frame.locals, &mut locals);
        if locals.len() > usize::from(max_locals) {
            return Err(CodeError::malformed(
                frame.offset,
                "stack-map frame has more locals than max_locals",
            ));
        }
        locals.resize(usize::from(max_locals), VType::Top);
        let mut stack = Vec::new();
        expand(&frame.stack, &mut stack);
        let this_uninit = frame.locals.contains(&VType::UninitializedThis);
        Ok(State {
            locals,
            stack,
            this_uninit,
        })
    }

    /// The stack-map frame describing this state at `offset`.
    pub fn to_frame(&self, offset: u32) -> Frame {
        let mut locals = compress(&self.locals);
        while locals.last() == Some(&VType::Top) {
            locals.pop();
        }
        Frame {
            offset,
            locals,
            stack: compress(&self.stack),
        }
    }
}

/// What `step` observed beyond the new state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    Other,
    /// This instruction called `<init>` on the uninitialised `this`: the
    /// super-constructor (or `this(...)`) call.
    InitializedThis,
}

/// The constant pool and code the interpreter reads operands from.
pub(crate) struct Interpreter<'x, 'a> {
    pub pool: &'x ConstantPool<'a>,
    pub names: &'x mut ClassNames,
    pub code: &'x [u8],
    pub insns: &'x Instructions,
    pub this_class: ClassId,
    pub max_stack: u16,
}

/// The verification type of a value of field type `t`.
pub(crate) fn vtype_of(t: FieldType, names: &mut ClassNames) -> VType {
    match t {
        FieldType::Boolean
        | FieldType::Byte
        | FieldType::Char
        | FieldType::Short
        | FieldType::Int => VType::Integer,
        FieldType::Float => VType::Float,
        FieldType::Long => VType::Long,
        FieldType::Double => VType::Double,
        FieldType::Reference(name) => VType::Object(names.intern(name)),
    }
}

impl Interpreter<'_, '_> {
    fn pop(&self, st: &mut State, pc: u32) -> Result<VType, CodeError> {
        st.stack
            .pop()
            .ok_or_else(|| CodeError::malformed(pc, "operand stack underflow"))
    }

    fn pop_n(&self, st: &mut State, n: usize, pc: u32) -> Result<(), CodeError> {
        if st.stack.len() < n {
            return Err(CodeError::malformed(pc, "operand stack underflow"));
        }
        st.stack.truncate(st.stack.len() - n);
        Ok(())
    }

    fn push(&self, st: &mut State, t: VType, pc: u32) -> Result<(), CodeError> {
        st.stack.push(t);
        if t.is_category2() {
            st.stack.push(VType::Top);
        }
        if st.stack.len() > usize::from(self.max_stack) {
            return Err(CodeError::malformed(pc, "operand stack exceeds max_stack"));
        }
        Ok(())
    }

    fn push_all(&self, st: &mut State, ts: &[VType], pc: u32) -> Result<(), CodeError> {
        for &t in ts {
            // Raw slots, already including second halves.
            st.stack.push(t);
        }
        if st.stack.len() > usize::from(self.max_stack) {
            return Err(CodeError::malformed(pc, "operand stack exceeds max_stack"));
        }
        Ok(())
    }

    fn load(&self, st: &State, index: usize, pc: u32) -> Result<VType, CodeError> {
        st.locals
            .get(index)
            .copied()
            .ok_or_else(|| CodeError::malformed(pc, format!("local {index} beyond max_locals")))
    }

    fn store(&self, st: &mut State, index: usize, t: VType, pc: u32) -> Result<(), CodeError> {
        let width = if t.is_category2() { 2 } else { 1 };
        if index + width > st.locals.len() {
            return Err(CodeError::malformed(
                pc,
                format!("local {index} beyond max_locals"),
            ));
        }
        st.locals[index] = t;
        if width == 2 {
            st.locals[index + 1] = VType::Top;
        }
        if index > 0 && st.locals[index - 1].is_category2() {
            st.locals[index - 1] = VType::Top;
        }
        Ok(())
    }

    fn u16_operand(&self, insn: &Insn, at: usize) -> Result<u16, CodeError> {
        u16_at(insn.operands(self.code), at)
            .ok_or_else(|| CodeError::malformed(insn.offset, "missing operand"))
    }

    fn u8_operand(&self, insn: &Insn, at: usize) -> Result<u8, CodeError> {
        insn.operands(self.code)
            .get(at)
            .copied()
            .ok_or_else(|| CodeError::malformed(insn.offset, "missing operand"))
    }

    fn class_operand(&mut self, insn: &Insn) -> Result<ClassId, CodeError> {
        let index = self.u16_operand(insn, 0)?;
        Ok(self.names.class_from_pool(self.pool, index)?)
    }

    fn field_type<'d>(&self, d: &'d [u8], pc: u32) -> Result<FieldType<'d>, CodeError> {
        descriptor::parse_field(d).ok_or_else(|| CodeError::malformed(pc, "bad field descriptor"))
    }

    fn constant_type(&mut self, index: u16, pc: u32) -> Result<VType, CodeError> {
        Ok(match self.pool.get(index)? {
            Constant::Integer(_) => VType::Integer,
            Constant::Float(_) => VType::Float,
            Constant::Long(_) => VType::Long,
            Constant::Double(_) => VType::Double,
            Constant::String(_) => VType::Object(self.names.intern(b"java/lang/String")),
            Constant::Class(_) => VType::Object(self.names.intern(b"java/lang/Class")),
            Constant::MethodType(_) => {
                VType::Object(self.names.intern(b"java/lang/invoke/MethodType"))
            }
            Constant::MethodHandle(..) => {
                VType::Object(self.names.intern(b"java/lang/invoke/MethodHandle"))
            }
            Constant::Dynamic(..) => {
                let (_, d) = self.pool.dynamic(index)?;
                let t = self.field_type(d, pc)?;
                vtype_of(t, self.names)
            }
            _ => return Err(CodeError::malformed(pc, "ldc of a non-loadable constant")),
        })
    }

    fn array_component(&mut self, array: VType, pc: u32) -> Result<VType, CodeError> {
        let not_array =
            || CodeError::malformed(pc, "aaload on something that is not an array of references");
        match array {
            VType::Null => Ok(VType::Null),
            VType::Object(id) => {
                let name = self.names.name(id);
                let component = match name.strip_prefix(b"[") {
                    Some(c) => c.to_vec(),
                    None => return Err(not_array()),
                };
                match component.first() {
                    Some(b'[') => Ok(VType::Object(self.names.intern(&component))),
                    Some(b'L') if component.len() > 2 && component.ends_with(b";") => Ok(
                        VType::Object(self.names.intern(&component[1..component.len() - 1])),
                    ),
                    _ => Err(not_array()),
                }
            }
            _ => Err(not_array()),
        }
    }

    fn replace(st: &mut State, from: VType, to: VType) {
        for t in st.locals.iter_mut().chain(st.stack.iter_mut()) {
            if *t == from {
                *t = to;
            }
        }
    }

    fn invoke(&mut self, st: &mut State, insn: &Insn) -> Result<Effect, CodeError> {
        let pc = insn.offset;
        let index = self.u16_operand(insn, 0)?;
        let (name, desc) = if insn.opcode == op::INVOKEDYNAMIC {
            self.pool.dynamic(index)?
        } else {
            self.pool.member_ref(index)?
        };
        let m = descriptor::parse_method(desc)
            .ok_or_else(|| CodeError::malformed(pc, "bad method descriptor"))?;
        self.pop_n(st, m.param_slots() as usize, pc)?;
        let mut effect = Effect::Other;
        if insn.opcode != op::INVOKESTATIC && insn.opcode != op::INVOKEDYNAMIC {
            let receiver = self.pop(st, pc)?;
            if insn.opcode == op::INVOKESPECIAL && name == b"<init>" {
                match receiver {
                    VType::UninitializedThis => {
                        Self::replace(st, receiver, VType::Object(self.this_class));
                        st.this_uninit = false;
                        effect = Effect::InitializedThis;
                    }
                    VType::Uninitialized(new_at) => {
                        let new_insn = self
                            .insns
                            .index_at(new_at)
                            .and_then(|i| self.insns.insns.get(i))
                            .filter(|i| i.opcode == op::NEW)
                            .ok_or_else(|| {
                                CodeError::malformed(pc, "uninitialized type does not name a `new`")
                            })?
                            .clone();
                        let class = self.class_operand(&new_insn)?;
                        Self::replace(st, receiver, VType::Object(class));
                    }
                    _ => {
                        return Err(CodeError::malformed(
                            pc,
                            "<init> called on an initialized object",
                        ))
                    }
                }
            }
        }
        if let Some(ret) = m.ret {
            let t = vtype_of(ret, self.names);
            self.push(st, t, pc)?;
        }
        Ok(effect)
    }

    /// Applies `insn` to `st`. Control flow is the caller's business; `jsr`
    /// pushes a `Top` standing for the return address.
    pub fn step(&mut self, st: &mut State, insn: &Insn) -> Result<Effect, CodeError> {
        use VType::*;
        let pc = insn.offset;
        let o = insn.opcode;
        match o {
            op::NOP | op::IINC | op::GOTO | op::GOTO_W | op::RET | op::RETURN => {}
            op::ACONST_NULL => self.push(st, Null, pc)?,
            op::ICONST_M1..=0x08 | op::BIPUSH | op::SIPUSH => self.push(st, Integer, pc)?,
            0x09 | 0x0a => self.push(st, Long, pc)?,
            0x0b..=0x0d => self.push(st, Float, pc)?,
            0x0e | 0x0f => self.push(st, Double, pc)?,
            op::LDC => {
                let t = self.constant_type(u16::from(self.u8_operand(insn, 0)?), pc)?;
                self.push(st, t, pc)?;
            }
            op::LDC_W | op::LDC2_W => {
                let t = self.constant_type(self.u16_operand(insn, 0)?, pc)?;
                self.push(st, t, pc)?;
            }
            op::ILOAD..=op::ALOAD => {
                let index = usize::from(self.u8_operand(insn, 0)?);
                self.load_kind(st, o - op::ILOAD, index, pc)?;
            }
            0x1a..=op::ALOAD_3 => {
                let k = o - op::ILOAD_0;
                self.load_kind(st, k / 4, usize::from(k % 4), pc)?;
            }
            op::IALOAD..=op::SALOAD => {
                self.pop(st, pc)?;
                let array = self.pop(st, pc)?;
                let t = match o - op::IALOAD {
                    1 => Long,
                    2 => Float,
                    3 => Double,
                    4 => self.array_component(array, pc)?,
                    _ => Integer,
                };
                self.push(st, t, pc)?;
            }
            op::ISTORE..=op::ASTORE => {
                let index = usize::from(self.u8_operand(insn, 0)?);
                self.store_kind(st, o - op::ISTORE, index, pc)?;
            }
            0x3b..=op::ASTORE_3 => {
                let k = o - op::ISTORE_0;
                self.store_kind(st, k / 4, usize::from(k % 4), pc)?;
            }
            op::IASTORE..=op::SASTORE => {
                let n = if matches!(o - op::IASTORE, 1 | 3) {
                    4
                } else {
                    3
                };
                self.pop_n(st, n, pc)?;
            }
            op::POP => self.pop_n(st, 1, pc)?,
            op::POP2 => self.pop_n(st, 2, pc)?,
            op::DUP..=op::SWAP => {
                let n = match o {
                    op::DUP => 1,
                    op::DUP_X1 | op::DUP2 | op::SWAP => 2,
                    op::DUP_X2 | op::DUP2_X1 => 3,
                    _ => 4,
                };
                if st.stack.len() < n {
                    return Err(CodeError::malformed(pc, "operand stack underflow"));
                }
                let top: Vec<VType> = st.stack.split_off(st.stack.len() - n);
                // top[n-1] is the top of the stack.
                let order: &[usize] = match o {
                    op::DUP => &[0, 0],
                    op::DUP_X1 => &[1, 0, 1],
                    op::DUP_X2 => &[2, 0, 1, 2],
                    op::DUP2 => &[0, 1, 0, 1],
                    op::DUP2_X1 => &[1, 2, 0, 1, 2],
                    op::DUP2_X2 => &[2, 3, 0, 1, 2, 3],
                    _ => &[1, 0],
                };
                let out: Vec<VType> = order.iter().map(|&i| top[i]).collect();
                self.push_all(st, &out, pc)?;
            }
            op::IADD..=0x77 => {
                let t = [Integer, Long, Float, Double][usize::from((o - op::IADD) % 4)];
                let width = if t.is_category2() { 2 } else { 1 };
                let operands = if o >= 0x74 { 1 } else { 2 };
                self.pop_n(st, width * operands, pc)?;
                self.push(st, t, pc)?;
            }
            0x78..=0x7d => {
                let long = (o - 0x78) % 2 == 1;
                self.pop_n(st, if long { 3 } else { 2 }, pc)?;
                self.push(st, if long { Long } else { Integer }, pc)?;
            }
            0x7e..=op::LXOR => {
                let long = (o - 0x7e) % 2 == 1;
                self.pop_n(st, if long { 4 } else { 2 }, pc)?;
                self.push(st, if long { Long } else { Integer }, pc)?;
            }
            op::I2L..=op::I2S => {
                const FROM_TO: [(VType, VType); 15] = [
                    (Integer, Long),
                    (Integer, Float),
                    (Integer, Double),
                    (Long, Integer),
                    (Long, Float),
                    (Long, Double),
                    (Float, Integer),
                    (Float, Long),
                    (Float, Double),
                    (Double, Integer),
                    (Double, Long),
                    (Double, Float),
                    (Integer, Integer),
                    (Integer, Integer),
                    (Integer, Integer),
                ];
                let (from, to) = FROM_TO[usize::from(o - op::I2L)];
                self.pop_n(st, if from.is_category2() { 2 } else { 1 }, pc)?;
                self.push(st, to, pc)?;
            }
            op::LCMP..=op::DCMPG => {
                let n = if matches!(o, op::LCMP | 0x97 | op::DCMPG) {
                    4
                } else {
                    2
                };
                self.pop_n(st, n, pc)?;
                self.push(st, Integer, pc)?;
            }
            op::IFEQ..=op::IFLE | op::IFNULL | op::IFNONNULL => self.pop_n(st, 1, pc)?,
            op::IF_ICMPEQ..=op::IF_ACMPNE => self.pop_n(st, 2, pc)?,
            op::JSR | op::JSR_W => self.push(st, Top, pc)?,
            op::TABLESWITCH | op::LOOKUPSWITCH => self.pop_n(st, 1, pc)?,
            op::IRETURN | op::FRETURN | op::ARETURN | op::ATHROW => self.pop_n(st, 1, pc)?,
            op::LRETURN | op::DRETURN => self.pop_n(st, 2, pc)?,
            op::GETSTATIC..=op::PUTFIELD => {
                let (_, d) = self.pool.member_ref(self.u16_operand(insn, 0)?)?;
                let ft = self.field_type(d, pc)?;
                let slots = usize::from(ft.slots());
                match o {
                    op::GETSTATIC => {}
                    op::PUTSTATIC => self.pop_n(st, slots, pc)?,
                    op::GETFIELD => self.pop_n(st, 1, pc)?,
                    _ => self.pop_n(st, slots + 1, pc)?,
                }
                if matches!(o, op::GETSTATIC | op::GETFIELD) {
                    let t = vtype_of(ft, self.names);
                    self.push(st, t, pc)?;
                }
            }
            op::INVOKEVIRTUAL..=op::INVOKEDYNAMIC => return self.invoke(st, insn),
            op::NEW => self.push(st, Uninitialized(pc), pc)?,
            op::NEWARRAY => {
                self.pop_n(st, 1, pc)?;
                let name: &[u8] = match self.u8_operand(insn, 0)? {
                    4 => b"[Z",
                    5 => b"[C",
                    6 => b"[F",
                    7 => b"[D",
                    8 => b"[B",
                    9 => b"[S",
                    10 => b"[I",
                    11 => b"[J",
                    other => {
                        return Err(CodeError::malformed(pc, format!("newarray type {other}")))
                    }
                };
                let t = Object(self.names.intern(name));
                self.push(st, t, pc)?;
            }
            op::ANEWARRAY => {
                self.pop_n(st, 1, pc)?;
                let component = self.class_operand(insn)?;
                let c = self.names.name(component);
                let mut name = Vec::with_capacity(c.len() + 3);
                name.push(b'[');
                if c.first() == Some(&b'[') {
                    name.extend_from_slice(c);
                } else {
                    name.push(b'L');
                    name.extend_from_slice(c);
                    name.push(b';');
                }
                let t = Object(self.names.intern(&name));
                self.push(st, t, pc)?;
            }
            op::ARRAYLENGTH | op::INSTANCEOF => {
                self.pop_n(st, 1, pc)?;
                self.push(st, Integer, pc)?;
            }
            op::CHECKCAST => {
                self.pop_n(st, 1, pc)?;
                let t = Object(self.class_operand(insn)?);
                self.push(st, t, pc)?;
            }
            op::MONITORENTER | op::MONITOREXIT => self.pop_n(st, 1, pc)?,
            op::WIDE => {
                let inner = self.u8_operand(insn, 0)?;
                let index = usize::from(self.u16_operand(insn, 1)?);
                match inner {
                    op::ILOAD..=op::ALOAD => self.load_kind(st, inner - op::ILOAD, index, pc)?,
                    op::ISTORE..=op::ASTORE => {
                        self.store_kind(st, inner - op::ISTORE, index, pc)?
                    }
                    _ => {}
                }
            }
            op::MULTIANEWARRAY => {
                let dims = usize::from(self.u8_operand(insn, 2)?);
                self.pop_n(st, dims, pc)?;
                let t = Object(self.class_operand(insn)?);
                self.push(st, t, pc)?;
            }
            other => {
                return Err(CodeError::malformed(
                    pc,
                    format!("undefined opcode {other:#04x}"),
                ))
            }
        }
        Ok(Effect::Other)
    }

    /// `kind`: 0 int, 1 long, 2 float, 3 double, 4 reference.
    fn load_kind(&self, st: &mut State, kind: u8, index: usize, pc: u32) -> Result<(), CodeError> {
        let t = match kind {
            0 => VType::Integer,
            1 => VType::Long,
            2 => VType::Float,
            3 => VType::Double,
            _ => self.load(st, index, pc)?,
        };
        if kind < 4 {
            self.load(st, index, pc)?;
        }
        self.push(st, t, pc)
    }

    fn store_kind(&self, st: &mut State, kind: u8, index: usize, pc: u32) -> Result<(), CodeError> {
        let t = match kind {
            0 => VType::Integer,
            1 => VType::Long,
            2 => VType::Float,
            3 => VType::Double,
            _ => VType::Top,
        };
        let value = if t.is_category2() {
            self.pop_n(st, 2, pc)?;
            t
        } else {
            let v = self.pop(st, pc)?;
            if kind == 4 {
                v
            } else {
                t
            }
        };
        self.store(st, index, value, pc)
    }
}
