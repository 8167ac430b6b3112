//! Where a constructor's own code begins: the data-flow pass that finds the
//! `super(...)`/`this(...)` call.
//!
//! Before that call `this` is uninitialised, and a handler that catches
//! exceptions there must itself expect an uninitialised `this` (JVMS
//! §4.10.1.6: the flags of every covered instruction's frame must be a
//! subset of the handler's). So the entry hook goes right after the call and
//! the catch-all handler covers only instructions where `this` is
//! initialised on every path. The call is not simply "the first
//! `invokespecial <init>`": arguments may create other objects
//! (`super(new Foo())`), or branch (`super(c ? a : b)`), so the pass tracks
//! which stack slot holds the uninitialised `this` through the control-flow
//! graph, merging states where paths join. It works without stack-map
//! frames, so it also serves class files older than version 50.

use std::collections::VecDeque;

use crate::bytecode::{ends_flow, op, InsnKind, Instructions};
use crate::class_file::ExceptionEntry;
use crate::descriptor::FieldType;
use crate::error::CodeError;
use crate::interpreter::{Effect, Interpreter, State};
use crate::types::{ClassId, ClassNames, VType};

/// What the pass found.
pub(crate) struct ConstructorFlow {
    /// Indices of the instructions that call `<init>` on the uninitialised
    /// `this`; normally exactly one.
    pub super_calls: Vec<usize>,
    /// Per instruction: reachable, and `this` initialised on entry to it on
    /// every path.
    pub initialized: Vec<bool>,
    /// After every super call, each parameter's local still holds a value of
    /// the parameter's type, so the entry hook can read the arguments there.
    pub params_intact: bool,
}

/// Where two paths meet with different types in a slot. Precision only
/// matters for following `this`, but an array type must stay an array for a
/// later `aaload`, and `null` merged with a type is that type.
fn merge_type(a: VType, b: VType, merged: &MergeTypes, names: &ClassNames) -> VType {
    let is_ref = |t: VType| matches!(t, VType::Object(_) | VType::Null);
    let is_ref_array = |t: VType| match t {
        VType::Object(id) => matches!(names.name(id), [b'[', b'L' | b'[', ..]),
        _ => false,
    };
    if a == b {
        a
    } else if a == VType::Null && is_ref(b) {
        b
    } else if b == VType::Null && is_ref(a) {
        a
    } else if is_ref_array(a) && is_ref_array(b) {
        VType::Object(merged.object_array)
    } else if is_ref(a) && is_ref(b) {
        VType::Object(merged.object)
    } else {
        VType::Top
    }
}

/// The types merges produce.
struct MergeTypes {
    object: ClassId,
    object_array: ClassId,
}

/// Merges `incoming` into `existing`; returns whether `existing` changed.
fn merge_state(
    existing: &mut State,
    incoming: &State,
    merged: &MergeTypes,
    names: &ClassNames,
    pc: u32,
) -> Result<bool, CodeError> {
    if existing.stack.len() != incoming.stack.len()
        || existing.locals.len() != incoming.locals.len()
    {
        return Err(CodeError::malformed(
            pc,
            "operand stack height differs between paths",
        ));
    }
    let mut changed = false;
    for (e, &i) in existing
        .locals
        .iter_mut()
        .chain(existing.stack.iter_mut())
        .zip(incoming.locals.iter().chain(incoming.stack.iter()))
    {
        let m = merge_type(*e, i, merged, names);
        if m != *e {
            *e = m;
            changed = true;
        }
    }
    if incoming.this_uninit && !existing.this_uninit {
        existing.this_uninit = true;
        changed = true;
    }
    Ok(changed)
}

struct Worklist {
    entry: Vec<Option<State>>,
    queued: Vec<bool>,
    queue: VecDeque<usize>,
    merged: MergeTypes,
}

impl Worklist {
    fn merge_into(
        &mut self,
        target: usize,
        st: &State,
        names: &ClassNames,
        pc: u32,
    ) -> Result<(), CodeError> {
        let slot = self
            .entry
            .get_mut(target)
            .ok_or_else(|| CodeError::malformed(pc, "jump outside the code"))?;
        let changed = match slot {
            None => {
                *slot = Some(st.clone());
                true
            }
            Some(existing) => merge_state(existing, st, &self.merged, names, pc)?,
        };
        if changed && !self.queued[target] {
            self.queued[target] = true;
            self.queue.push_back(target);
        }
        Ok(())
    }
}

/// Runs the pass over a constructor. `params` are the declared parameter
/// types, whose locals start at slot 1.
pub(crate) fn analyse(
    interp: &mut Interpreter,
    insns: &Instructions,
    exceptions: &[ExceptionEntry],
    initial: State,
    params: &[FieldType],
) -> Result<ConstructorFlow, CodeError> {
    let n = insns.insns.len();
    let throwable = VType::Object(interp.names.intern(b"java/lang/Throwable"));
    let index = |offset: u32| {
        insns
            .index_at(offset)
            .ok_or_else(|| CodeError::malformed(offset, "target is not an instruction"))
    };

    let mut leader = vec![false; n];
    if let Some(first) = leader.first_mut() {
        *first = true;
    }
    for (i, insn) in insns.insns.iter().enumerate() {
        for t in insn.targets() {
            leader[index(t)?] = true;
        }
        let breaks = !matches!(insn.kind, InsnKind::Plain) || ends_flow(insn.opcode);
        if breaks && i + 1 < n {
            leader[i + 1] = true;
        }
    }
    let mut handlers = Vec::with_capacity(exceptions.len());
    for e in exceptions {
        let h = index(u32::from(e.handler))?;
        leader[h] = true;
        handlers.push(h);
    }

    let mut work = Worklist {
        entry: vec![None; n],
        queued: vec![false; n],
        queue: VecDeque::new(),
        merged: MergeTypes {
            object: interp.names.intern(b"java/lang/Object"),
            object_array: interp.names.intern(b"[Ljava/lang/Object;"),
        },
    };
    work.merge_into(0, &initial, interp.names, 0)?;
    let mut reachable = vec![false; n];
    let mut uninit = vec![false; n];
    let mut super_calls = Vec::new();
    let mut params_intact = true;
    // The lattice is finite, so this terminates; the budget only bounds the
    // time spent on adversarial input.
    let mut budget = 64 * n + 10_000;

    while let Some(start) = work.queue.pop_front() {
        work.queued[start] = false;
        let mut st = match work.entry.get(start) {
            Some(Some(s)) => s.clone(),
            _ => continue,
        };
        let mut i = start;
        loop {
            budget = budget
                .checked_sub(1)
                .ok_or_else(|| CodeError::unsupported(0, "constructor too complex to analyse"))?;
            let insn = &insns.insns[i];
            reachable[i] = true;
            uninit[i] |= st.this_uninit;
            for (e, &h) in exceptions.iter().zip(&handlers) {
                if u32::from(e.start) <= insn.offset && insn.offset < u32::from(e.end) {
                    let at_handler = State {
                        locals: st.locals.clone(),
                        stack: vec![throwable],
                        this_uninit: st.this_uninit,
                    };
                    work.merge_into(h, &at_handler, interp.names, insn.offset)?;
                }
            }
            let before_jsr = matches!(insn.opcode, op::JSR | op::JSR_W).then(|| st.clone());
            if interp.step(&mut st, insn)? == Effect::InitializedThis {
                if !super_calls.contains(&i) {
                    super_calls.push(i);
                }
                params_intact &= params_hold_their_types(&st, params);
            }
            match &insn.kind {
                InsnKind::Branch { target } | InsnKind::WideBranch { target } => {
                    work.merge_into(index(*target)?, &st, interp.names, insn.offset)?;
                    if let Some(before) = before_jsr {
                        // Assume the subroutine returns with the state it was
                        // called with; enough to follow `this`.
                        if i + 1 < n {
                            work.merge_into(i + 1, &before, interp.names, insn.offset)?;
                        }
                        break;
                    }
                    if matches!(insn.opcode, op::GOTO | op::GOTO_W) {
                        break;
                    }
                }
                InsnKind::TableSwitch { .. } | InsnKind::LookupSwitch { .. } => {
                    for t in insn.targets() {
                        work.merge_into(index(t)?, &st, interp.names, insn.offset)?;
                    }
                    break;
                }
                InsnKind::Plain if ends_flow(insn.opcode) => break,
                InsnKind::Plain => {}
            }
            if i + 1 >= n {
                return Err(CodeError::malformed(
                    insn.offset,
                    "execution falls off the end of the code",
                ));
            }
            i += 1;
            if leader[i] {
                work.merge_into(i, &st, interp.names, insn.offset)?;
                break;
            }
        }
    }
    super_calls.sort_unstable();
    let initialized = reachable
        .iter()
        .zip(&uninit)
        .map(|(&r, &u)| r && !u)
        .collect();
    Ok(ConstructorFlow {
        super_calls,
        initialized,
        params_intact,
    })
}

fn params_hold_their_types(st: &State, params: &[FieldType]) -> bool {
    let mut slot = 1usize;
    for &p in params {
        let expected_ok = matches!(
            (p, st.locals.get(slot)),
            (FieldType::Long, Some(VType::Long))
                | (FieldType::Double, Some(VType::Double))
                | (FieldType::Float, Some(VType::Float))
                | (
                    FieldType::Reference(_),
                    Some(VType::Object(_) | VType::Null)
                )
                | (
                    FieldType::Boolean
                        | FieldType::Byte
                        | FieldType::Char
                        | FieldType::Short
                        | FieldType::Int,
                    Some(VType::Integer),
                )
        );
        if !expected_ok {
            return false;
        }
        slot += usize::from(p.slots());
    }
    true
}
