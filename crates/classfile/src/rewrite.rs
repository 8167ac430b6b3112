//! Rewriting one method: decide where the hooks go, lay the code out again
//! and move everything that refers to code offsets.
//!
//! The order matters. Hook code is built first (it only depends on the
//! method id and descriptor), then laid out with the original instructions,
//! which fixes every new offset; only then are the stack-map frames, the
//! exception table and the debug tables translated, since all of them need
//! the final positions.

use crate::bytecode::{self, is_conditional_branch, op, Instructions};
use crate::bytes::WriteBe;
use crate::class_file::{Attribute, Code, Method, ACC_STATIC, ACC_SYNCHRONIZED};
use crate::constant_pool::{ConstantPool, PoolFull};
use crate::constructor;
use crate::debug_tables::{self, LineNumber};
use crate::descriptor::{self, FieldType};
use crate::error::{CodeError, CodeErrorKind, RewriteError};
use crate::hooks::{self, ProbeRefs};
use crate::interpreter::{vtype_of, Interpreter, State};
use crate::layout::{self, Insertions, Layout};
use crate::stack_map::{self, Frame};
use crate::types::{ClassId, ClassNames, VType};
use crate::{HookConfig, SkipReason};

/// What all methods of one class share while they are rewritten.
pub(crate) struct ClassContext<'x, 'a> {
    pub pool: &'x mut ConstantPool<'a>,
    pub names: &'x mut ClassNames,
    pub probe: &'x mut ProbeRefs,
    pub this_class: ClassId,
    pub this_name: &'x [u8],
    pub major: u16,
    pub config: &'x HookConfig,
}

/// A rewritten method.
pub(crate) struct RewrittenMethod {
    /// The complete new `method_info`.
    pub method_info: Vec<u8>,
    pub args_captured: bool,
    pub line_numbers: Vec<LineNumber>,
}

pub(crate) enum MethodOutcome {
    Rewritten(RewrittenMethod),
    Skipped(SkipReason),
}

/// Why rewriting a method stopped.
pub(crate) enum Failure {
    /// The class is malformed.
    Bad(RewriteError),
    /// The constant pool cannot take the hooks' entries.
    PoolFull,
}

enum Stop {
    Code(CodeError),
    Class(RewriteError),
    PoolFull,
    TooLarge { instrumented_length: u32 },
}

impl From<CodeError> for Stop {
    fn from(e: CodeError) -> Self {
        Stop::Code(e)
    }
}

impl From<RewriteError> for Stop {
    fn from(e: RewriteError) -> Self {
        Stop::Class(e)
    }
}

impl From<PoolFull> for Stop {
    fn from(_: PoolFull) -> Self {
        Stop::PoolFull
    }
}

/// Rewrites method `m`, whose parsed `Code` is `code`, with method id `id`.
pub(crate) fn rewrite_method<'a>(
    cx: &mut ClassContext<'_, 'a>,
    m: &Method<'a>,
    code_attr: &Attribute<'a>,
    code: &Code<'a>,
    hooks: crate::Hooks,
) -> Result<MethodOutcome, Failure> {
    let (id, count) = match hooks {
        crate::Hooks::Trace(id) => (id as i32, None),
        crate::Hooks::Count { slot, .. } => (0, Some(slot as i32)),
    };
    match rewrite_code(cx, m, code, id, count) {
        Ok(parts) => {
            let method_info = assemble_method(m, code_attr, code, parts.0, cx.pool)
                .map_err(|_| Failure::PoolFull)?;
            Ok(MethodOutcome::Rewritten(RewrittenMethod {
                method_info,
                args_captured: parts.1,
                line_numbers: parts.2,
            }))
        }
        Err(Stop::Code(e)) if e.kind == CodeErrorKind::Unsupported => {
            Ok(MethodOutcome::Skipped(SkipReason::Unsupported(e.reason)))
        }
        Err(Stop::Code(e)) => Err(Failure::Bad(RewriteError::BadCode {
            method: m.display_name(),
            pc: e.pc,
            reason: e.reason,
        })),
        Err(Stop::Class(e)) => Err(Failure::Bad(e)),
        Err(Stop::PoolFull) => Err(Failure::PoolFull),
        Err(Stop::TooLarge {
            instrumented_length,
        }) => Ok(MethodOutcome::Skipped(SkipReason::TooLarge {
            code_length: code.code.len() as u32,
            instrumented_length,
        })),
    }
}

/// The pieces of a new `Code` attribute.
struct NewCode {
    max_stack: u16,
    code: Vec<u8>,
    exceptions: Vec<[u16; 4]>,
    /// Per original sub-attribute: `None` to copy it, `Some(None)` to drop
    /// it, `Some(Some(info))` to replace its content.
    replaced: Vec<Option<Option<Vec<u8>>>>,
    /// A `StackMapTable` to append when the method had none.
    new_stack_map: Option<Vec<u8>>,
}

/// The implicit first frame's locals (JVMS §4.10.1.6).
fn initial_locals(
    is_static: bool,
    is_constructor: bool,
    this_class: ClassId,
    params: &[FieldType],
    names: &mut ClassNames,
) -> Vec<VType> {
    let mut locals = Vec::with_capacity(params.len() + 1);
    if !is_static {
        locals.push(if is_constructor {
            VType::UninitializedThis
        } else {
            VType::Object(this_class)
        });
    }
    locals.extend(params.iter().map(|&p| vtype_of(p, names)));
    locals
}

fn validate_exception_table(code: &Code, insns: &Instructions) -> Result<(), CodeError> {
    let len = insns.code_length();
    for e in &code.exceptions {
        let ok = e.start < e.end
            && insns.index_at(u32::from(e.start)).is_some()
            && (u32::from(e.end) == len || insns.index_at(u32::from(e.end)).is_some())
            && insns.index_at(u32::from(e.handler)).is_some();
        if !ok {
            return Err(CodeError::malformed(
                u32::from(e.start),
                format!(
                    "exception table entry [{}, {}) -> {} is not on instruction boundaries",
                    e.start, e.end, e.handler
                ),
            ));
        }
    }
    Ok(())
}

fn rewrite_code<'a>(
    cx: &mut ClassContext<'_, 'a>,
    m: &Method<'a>,
    code: &Code<'a>,
    id: i32,
    count: Option<i32>,
) -> Result<(NewCode, bool, Vec<LineNumber>), Stop> {
    let insns = bytecode::decode(code.code)?;
    validate_exception_table(code, &insns)?;
    let desc = descriptor::parse_method(m.descriptor)
        .ok_or_else(|| CodeError::malformed(0, "malformed method descriptor"))?;
    let is_static = m.access & ACC_STATIC != 0;
    let is_constructor = m.name == b"<init>" && cx.this_name != b"java/lang/Object";
    let first_param_slot: u16 = if is_static { 0 } else { 1 };
    let initial = initial_locals(
        is_static,
        is_constructor,
        cx.this_class,
        &desc.params,
        cx.names,
    );
    let initial_frame = Frame {
        offset: 0,
        locals: initial.clone(),
        stack: Vec::new(),
    };
    let initial_state = State::from_frame(&initial_frame, code.max_locals)?;

    let mut stack_maps = code.attributes.iter().filter(|a| a.is("StackMapTable"));
    let stack_map_attr = stack_maps.next();
    if stack_maps.next().is_some() {
        return Err(CodeError::malformed(0, "more than one StackMapTable").into());
    }
    let mut frames = match stack_map_attr {
        Some(a) => stack_map::decode(a.data, a.data_offset, &initial, cx.pool, cx.names)?,
        None => Vec::new(),
    };
    for f in &frames {
        if insns.index_at(f.offset).is_none() {
            return Err(
                CodeError::malformed(f.offset, "stack-map frame inside an instruction").into(),
            );
        }
    }
    let want_frames = cx.major >= 50 || stack_map_attr.is_some();

    let n = insns.insns.len();
    let (super_calls, covered, params_intact) = if is_constructor {
        let mut interp = Interpreter {
            pool: cx.pool,
            names: cx.names,
            code: code.code,
            insns: &insns,
            this_class: cx.this_class,
            max_stack: code.max_stack,
        };
        let flow = constructor::analyse(
            &mut interp,
            &insns,
            &code.exceptions,
            initial_state.clone(),
            &desc.params,
        )?;
        if flow.super_calls.is_empty() {
            return Err(CodeError::unsupported(
                0,
                "constructor never completes a super(...) or this(...) call",
            )
            .into());
        }
        (flow.super_calls, flow.initialized, flow.params_intact)
    } else {
        (Vec::new(), vec![true; n], true)
    };

    // Hook code. A counted method gets only `counts[slot]++` at offset 0
    // (in a constructor too: it touches no local), no exit hooks and no
    // catch-all handler, so no frame or exception entry of its own.
    let counting = count.is_some();
    let args_captured = cx.config.capture_args && params_intact && !counting;
    let (mut entry_code, mut entry_stack) = match count {
        Some(slot) => hooks::count(cx.probe, cx.pool, slot)?,
        None => hooks::entry(
            cx.probe,
            cx.pool,
            id,
            args_captured.then_some((&desc.params[..], first_param_slot)),
            cx.config.primitive_entry,
        )?,
    };
    let monitors = cx.config.monitors && !counting;
    // A synchronized method's monitor: named after the entry hook, released
    // before the exit hooks. A static one's is its class, which `ldc`
    // loads only from class files 49 on.
    let sync_method = monitors
        && m.access & ACC_SYNCHRONIZED != 0
        && !is_constructor
        && (!is_static || cx.major >= 49);
    let method_monitor_exit = if sync_method {
        let this_class = if is_static {
            Some(cx.pool.class_index(cx.this_name)?)
        } else {
            None
        };
        entry_code.extend(hooks::method_monitor_enter(cx.probe, cx.pool, this_class)?);
        entry_stack = entry_stack.max(1);
        hooks::method_monitor_exit(cx.probe, cx.pool)?
    } else {
        Vec::new()
    };
    // monitorenter: `dup` before it keeps the object for the hook after
    // it, so the hook reports a monitor actually acquired; monitorexit:
    // the hook before it takes a copy. Both need one more stack slot. In a
    // constructor, only where `this` is initialised (javac puts no
    // synchronized block before the super call, and an uninitialised
    // object cannot be passed).
    let (monitor_enter, monitor_exit) = if monitors {
        (
            hooks::monitor_enter(cx.probe, cx.pool)?,
            hooks::monitor_exit(cx.probe, cx.pool)?,
        )
    } else {
        (Vec::new(), Vec::new())
    };
    let dup = [op::DUP];
    let mut monitor_stack = 0u16;
    // Exit hooks by return opcode, `ireturn` to `return`.
    let mut exit_codes: [Option<Vec<u8>>; 6] = Default::default();
    let exit_slot = |opcode: u8| {
        opcode
            .checked_sub(op::IRETURN)
            .map(usize::from)
            .filter(|&k| k < 6)
    };
    let mut exit_stack = 0u16;
    for insn in &insns.insns {
        let Some(k) = exit_slot(insn.opcode).filter(|_| !counting) else {
            continue;
        };
        if exit_codes[k].is_none() {
            let (mut c, extra) = hooks::exit(
                cx.probe,
                cx.pool,
                id,
                insn.opcode,
                desc.ret,
                cx.config.capture_return,
            )?;
            exit_stack = exit_stack.max(extra);
            c.splice(0..0, method_monitor_exit.iter().copied());
            exit_codes[k] = Some(c);
        }
    }
    let handler = if counting {
        Vec::new()
    } else {
        let mut h = hooks::exceptional_exit(cx.probe, cx.pool, id)?;
        h.splice(0..0, method_monitor_exit.iter().copied());
        h
    };

    let empty: &[u8] = &[];
    let mut insertions = Insertions {
        at_start: if is_constructor && !counting {
            empty
        } else {
            &entry_code
        },
        before: vec![empty; n],
        after: vec![empty; n],
        handler: &handler,
    };
    for (i, insn) in insns.insns.iter().enumerate() {
        if let Some(Some(c)) = exit_slot(insn.opcode).map(|k| &exit_codes[k]) {
            insertions.before[i] = c;
        }
        if monitors && covered[i] {
            match insn.opcode {
                op::MONITORENTER => {
                    insertions.before[i] = &dup;
                    insertions.after[i] = &monitor_enter;
                    monitor_stack = 1;
                }
                op::MONITOREXIT => {
                    insertions.before[i] = &monitor_exit;
                    monitor_stack = 1;
                }
                _ => {}
            }
        }
    }
    if !counting {
        for &s in &super_calls {
            insertions.after[s] = &entry_code;
        }
    }
    let layout = layout::lay_out(&insns, &insertions).map_err(|t| Stop::TooLarge {
        instrumented_length: t.length,
    })?;
    let new_code = layout::emit(&insns, code.code, &insertions, &layout);

    // Stack-map frames.
    let mut replaced: Vec<Option<Option<Vec<u8>>>> = vec![None; code.attributes.len()];
    let mut new_stack_map = None;
    if want_frames {
        let mut added = Vec::new();
        for (i, insn) in insns.insns.iter().enumerate() {
            if !(layout.widened[i] && is_conditional_branch(insn.opcode)) {
                continue;
            }
            let next = insns.insns.get(i + 1).ok_or_else(|| {
                CodeError::malformed(insn.offset, "conditional branch at the end of the code")
            })?;
            if frames
                .binary_search_by_key(&next.offset, |f| f.offset)
                .is_err()
            {
                let mut interp = Interpreter {
                    pool: cx.pool,
                    names: cx.names,
                    code: code.code,
                    insns: &insns,
                    this_class: cx.this_class,
                    max_stack: code.max_stack,
                };
                added.push(fall_through_frame(
                    &mut interp,
                    &insns,
                    &frames,
                    &initial_state,
                    code.max_locals,
                    i,
                )?);
            }
        }
        frames.extend(added);
        frames.sort_by_key(|f| f.offset);
        let mut moved = Vec::with_capacity(frames.len() + 1);
        for f in &frames {
            moved.push(move_frame(f, &insns, &layout)?);
        }
        if !counting {
            let throwable = cx.names.intern(b"java/lang/Throwable");
            moved.push(Frame {
                offset: layout.code_end,
                locals: Vec::new(),
                stack: vec![VType::Object(throwable)],
            });
        }
        let encoded = stack_map::encode(&moved, &initial, cx.pool, cx.names)?;
        match stack_map_attr {
            Some(_) => {
                let index = code
                    .attributes
                    .iter()
                    .position(|a| a.is("StackMapTable"))
                    .unwrap_or_default();
                replaced[index] = Some(Some(encoded));
            }
            None => new_stack_map = Some(encoded),
        }
    }

    // Exception table: the original entries, then the catch-all.
    let mut exceptions = Vec::with_capacity(code.exceptions.len() + 1);
    for e in &code.exceptions {
        let start = layout.label_of(&insns, u32::from(e.start));
        let end = layout.range_end_of(&insns, u32::from(e.end));
        let handler_pc = layout.label_of(&insns, u32::from(e.handler));
        match (start, end, handler_pc) {
            (Some(s), Some(en), Some(h)) => {
                exceptions.push([s as u16, en as u16, h as u16, e.catch_type])
            }
            _ => {
                return Err(CodeError::malformed(u32::from(e.start), "bad exception range").into())
            }
        }
    }
    let mut i = if counting { n } else { 0 };
    while i < n {
        if !covered[i] {
            i += 1;
            continue;
        }
        let first = i;
        while i + 1 < n && covered[i + 1] {
            i += 1;
        }
        let (start, end) = (layout.label(first), layout.body_end(i));
        if start < end {
            exceptions.push([start as u16, end as u16, layout.code_end as u16, 0]);
        }
        i += 1;
    }
    if exceptions.len() > usize::from(u16::MAX) {
        return Err(CodeError::unsupported(0, "exception table would exceed 65535 entries").into());
    }

    // Debug tables and type annotations.
    let mut lines = Vec::new();
    for (k, a) in code.attributes.iter().enumerate() {
        if a.is("LineNumberTable") {
            let (bytes, rows) =
                debug_tables::move_line_numbers(a.data, a.data_offset, &insns, &layout)?;
            lines.extend(rows);
            replaced[k] = Some(Some(bytes));
        } else if a.is("LocalVariableTable") || a.is("LocalVariableTypeTable") {
            let bytes = debug_tables::move_local_variables(a.data, a.data_offset, &insns, &layout)?;
            replaced[k] = Some(Some(bytes));
        } else if a.is("RuntimeVisibleTypeAnnotations") || a.is("RuntimeInvisibleTypeAnnotations") {
            replaced[k] = Some(debug_tables::move_type_annotations(a.data, &insns, &layout));
        }
    }

    // Operand stack: the entry hook runs on an empty stack (or, after a
    // super call, on whatever the constructor had there), exit hooks on top
    // of the returned value, and the handler needs three slots.
    let orig = u32::from(code.max_stack);
    let mut max_stack = orig.max(3);
    max_stack = max_stack.max(if is_constructor && !counting {
        orig + u32::from(entry_stack)
    } else {
        u32::from(entry_stack)
    });
    if exit_codes.iter().any(Option::is_some) {
        max_stack = max_stack.max(orig + u32::from(exit_stack));
    }
    max_stack = max_stack.max(orig + u32::from(monitor_stack));
    let max_stack = u16::try_from(max_stack)
        .map_err(|_| CodeError::unsupported(0, "max_stack would exceed 65535"))?;

    Ok((
        NewCode {
            max_stack,
            code: new_code,
            exceptions,
            replaced,
            new_stack_map,
        },
        args_captured,
        lines,
    ))
}

/// The frame at the instruction after the widened conditional branch `i`,
/// which becomes a branch target: replay the block from the last frame at
/// or before the branch.
fn fall_through_frame(
    interp: &mut Interpreter,
    insns: &Instructions,
    frames: &[Frame],
    initial: &State,
    max_locals: u16,
    i: usize,
) -> Result<Frame, CodeError> {
    let branch = insns
        .insns
        .get(i)
        .ok_or_else(|| CodeError::malformed(0, "no such instruction"))?;
    let (mut st, start) = match frames.iter().rev().find(|f| f.offset <= branch.offset) {
        Some(f) => (
            State::from_frame(f, max_locals)?,
            insns
                .index_at(f.offset)
                .ok_or_else(|| CodeError::malformed(f.offset, "frame inside an instruction"))?,
        ),
        None => (initial.clone(), 0),
    };
    for insn in insns.insns.get(start..=i).unwrap_or_default() {
        if matches!(insn.opcode, op::JSR | op::JSR_W | op::RET) {
            return Err(CodeError::unsupported(
                insn.offset,
                "jsr/ret next to a branch that must be widened",
            ));
        }
        interp.step(&mut st, insn)?;
    }
    let next = insns
        .insns
        .get(i + 1)
        .ok_or_else(|| CodeError::malformed(branch.offset, "branch at the end of the code"))?;
    Ok(st.to_frame(next.offset))
}

/// Moves a frame and the `uninitialized(offset)` types in it.
fn move_frame(f: &Frame, insns: &Instructions, layout: &Layout) -> Result<Frame, CodeError> {
    let offset = layout
        .label_of(insns, f.offset)
        .ok_or_else(|| CodeError::malformed(f.offset, "stack-map frame inside an instruction"))?;
    let move_type = |t: &VType| -> Result<VType, CodeError> {
        match *t {
            VType::Uninitialized(at) => {
                let is_new = insns
                    .index_at(at)
                    .and_then(|i| insns.insns.get(i))
                    .is_some_and(|i| i.opcode == op::NEW);
                match layout.body_of(insns, at) {
                    Some(new_at) if is_new => Ok(VType::Uninitialized(new_at)),
                    _ => Err(CodeError::malformed(
                        f.offset,
                        format!("uninitialized({at}) does not point at a `new`"),
                    )),
                }
            }
            other => Ok(other),
        }
    };
    Ok(Frame {
        offset,
        locals: f.locals.iter().map(move_type).collect::<Result<_, _>>()?,
        stack: f.stack.iter().map(move_type).collect::<Result<_, _>>()?,
    })
}

/// Serializes the new `Code` attribute and the `method_info` around it.
fn assemble_method(
    m: &Method,
    code_attr: &Attribute,
    code: &Code,
    new: NewCode,
    pool: &mut ConstantPool,
) -> Result<Vec<u8>, PoolFull> {
    let mut body = Vec::with_capacity(new.code.len() + 64 + code_attr.data.len());
    body.put_u16(new.max_stack);
    body.put_u16(code.max_locals);
    body.put_u32(new.code.len() as u32);
    body.extend_from_slice(&new.code);
    body.put_u16(new.exceptions.len() as u16);
    for e in &new.exceptions {
        for v in e {
            body.put_u16(*v);
        }
    }
    let mut attrs = Vec::new();
    let mut count = 0u16;
    for (k, a) in code.attributes.iter().enumerate() {
        match new.replaced.get(k).and_then(Option::as_ref) {
            None => attrs.extend_from_slice(a.raw),
            Some(None) => continue,
            Some(Some(data)) => {
                attrs.put_u16(a.name_index);
                attrs.put_u32(data.len() as u32);
                attrs.extend_from_slice(data);
            }
        }
        count += 1;
    }
    if let Some(data) = &new.new_stack_map {
        attrs.put_u16(pool.utf8_index(b"StackMapTable")?);
        attrs.put_u32(data.len() as u32);
        attrs.extend_from_slice(data);
        count += 1;
    }
    body.put_u16(count);
    body.extend_from_slice(&attrs);

    let mut out = Vec::with_capacity(body.len() + m.raw.len());
    out.put_u16(m.access);
    out.put_u16(m.name_index);
    out.put_u16(m.descriptor_index);
    out.put_u16(m.attributes.len() as u16);
    for a in &m.attributes {
        if a.is("Code") {
            out.put_u16(code_attr.name_index);
            out.put_u32(body.len() as u32);
            out.extend_from_slice(&body);
        } else {
            out.extend_from_slice(a.raw);
        }
    }
    Ok(out)
}
