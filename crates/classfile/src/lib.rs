//! Class-file rewriting for vmview's bytecode instrumentation.
//!
//! JVMTI's MethodEntry/MethodExit events force the interpreter and cost
//! 70–97× on call-heavy code; a static call injected into the method itself
//! costs well under a nanosecond once compiled. The agent therefore calls
//! [`instrument`] from its ClassFileLoadHook for each traced class and hands
//! the JVM the bytes it returns. Every instrumented method then calls the
//! probe class at entry, before each return, and from a catch-all handler
//! when an exception unwinds out of it; [`probe`] documents that protocol.
//!
//! No published crate recomputes `StackMapTable` frames correctly, and the
//! rewritten classes include the JDK's own, which the JVM does not verify by
//! default: a wrong byte there loads silently and fails later. So this
//! crate owns the whole job and keeps the verifier's rules in view:
//!
//! - hooks are straight-line code, placed where no new frame is needed
//!   (at offset 0, after a constructor's super call, before each return);
//! - the catch-all handler is appended after the code with a frame of no
//!   locals and a `Throwable` on the stack, which every covered instruction
//!   is assignable to, and is listed last so existing handlers keep
//!   priority; in constructors it covers only code where `this` is
//!   initialised;
//! - everything that holds code offsets is moved: branches (widened to
//!   `goto_w` when they outgrow 16 bits), switch padding, the exception
//!   table, stack-map frames including `uninitialized(offset)` types, line
//!   and local-variable tables and type annotations on code;
//! - anything not understood is copied byte for byte, including class
//!   access flags with nonstandard bits and the original constant pool,
//!   to which new entries are only appended.
//!
//! Methods that cannot be instrumented (abstract, native, code that would
//! outgrow 64 KiB, constructs we do not handle) are left as they were and
//! reported in [`RewriteResult::skipped`]; the rest of the class is still
//! instrumented. Input is untrusted: malformed bytes give a
//! [`RewriteError`], never a panic.
//!
//! What the rewritten code does not promise:
//!
//! - Methods the JIT replaces with an intrinsic (`@IntrinsicCandidate` in
//!   the JDK) run without their hooks once compiled.
//! - Bridge and other synthetic methods are instrumented like any other, so
//!   a call through a bridge reports two calls; `next_method_id` sees the
//!   access flags and can decline them.
//! - If a probe method itself throws (a `StackOverflowError` inside `exit*`,
//!   say), the catch-all handler, which covers the exit hooks too, reports
//!   `exitThrow` for a frame that may already have reported its exit.
//! - An empty `finalize()` is never instrumented (see
//!   [`SkipReason::EmptyFinalizer`]). The JDK's early bootstrap classes can
//!   be instrumented (the tests boot a JDK on a fully instrumented
//!   `java.base`), but then the probe must be able to run before `System`
//!   is initialised.

#![forbid(unsafe_code)]

mod bytecode;
mod bytes;
mod class_file;
mod constant_pool;
mod constructor;
mod debug_tables;
mod descriptor;
pub mod disasm;
mod error;
mod hooks;
mod interpreter;
mod layout;
mod mutf8;
pub mod probe;
mod rewrite;
mod stack_map;
mod types;

pub use debug_tables::LineNumber;
pub use error::RewriteError;

use bytes::Reader;
use class_file::{ClassFile, Code, Method, ACC_ABSTRACT, ACC_MODULE, ACC_NATIVE, ACC_STATIC};
use constant_pool::ConstantPool;
use rewrite::{ClassContext, Failure, MethodOutcome};

/// What to insert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookConfig {
    /// Internal name of the class holding the [`probe`] methods, e.g.
    /// `vmview/Probe`. It must be visible to every instrumented class, so
    /// the agent puts it on the boot class path.
    pub probe_class: String,
    /// Pass each argument to an `arg*` probe method before `enter`.
    pub capture_args: bool,
    /// With `capture_args`: a method with one or two parameters, each a
    /// `boolean`, `byte`, `char`, `short`, `int` or `long`, calls
    /// [`probe::ENTER_1`] or [`probe::ENTER_2`] with the values instead
    /// (one probe call on entry rather than one per argument and `enter`).
    pub primitive_entry: bool,
    /// Pass the returned value to a typed `exit*` probe method.
    pub capture_return: bool,
    /// Report monitors acquired and released: `monitorenter` and
    /// `monitorexit` instructions and `synchronized` methods call the
    /// [`probe::MONITORS`] hooks.
    pub monitors: bool,
}

/// A method as the agent needs it for its symbol records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodInfo {
    /// Position in the class's method table.
    pub index_in_class: usize,
    /// Method name, e.g. `<init>` or `lambda$main$0`.
    pub name: String,
    /// JVM descriptor, e.g. `(ILjava/lang/String;)V`.
    pub descriptor: String,
    /// Access flags as in the class file.
    pub access: u16,
    /// Parameter names, `this` excluded: from the `MethodParameters`
    /// attribute, else from the `LocalVariableTable` (classes compiled with
    /// `-g`), else `arg0`, `arg1`, ….
    pub parameter_names: Vec<String>,
    /// The method's `LineNumberTable` rows. In [`InstrumentedMethod`] they
    /// are those of the rewritten code, which is what JVMTI reports at run
    /// time.
    pub line_numbers: Vec<LineNumber>,
}

/// A class as the agent needs it for its symbol records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassInfo {
    /// Internal name, e.g. `java/util/HashMap$Node`.
    pub name: String,
    /// Internal name of the superclass; `None` for `java/lang/Object` and
    /// `module-info`.
    pub super_name: Option<String>,
    /// Access flags as in the class file, nonstandard bits included.
    pub access: u16,
    pub major_version: u16,
    pub minor_version: u16,
    /// The `SourceFile` attribute, e.g. `HashMap.java`.
    pub source_file: Option<String>,
    pub methods: Vec<MethodInfo>,
}

/// The hooks [`instrument_with`] places in one method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hooks {
    /// The full protocol of [`probe`] (entry, exits, catch-all), passing
    /// this method id.
    Trace(u32),
    /// Only `Probe.counts[slot]++` at the method's start
    /// ([`probe::COUNTS_FIELD`]): the method's calls are counted, not
    /// traced. `slot` is the array index itself. `id` is its method id, reported back in
    /// [`InstrumentedMethod::method_id`]; no probe method is called.
    Count { id: u32, slot: u32 },
}

/// A method that now calls the probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstrumentedMethod {
    pub method: MethodInfo,
    /// The id its hooks pass to the probe.
    pub method_id: u32,
    /// Whether `arg*` calls precede `enter`. False when argument capture is
    /// off, and in the rare constructor whose code overwrites a parameter's
    /// local with a value of another type before calling `super(...)`.
    pub args_captured: bool,
    /// The counter slot, for a method given [`Hooks::Count`].
    pub counter_slot: Option<u32>,
}

/// Why a method was left as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    Abstract,
    Native,
    /// Neither abstract nor native, yet without a `Code` attribute.
    NoCode,
    /// `next_method_id` returned `None` for it.
    Declined,
    /// The instrumented code would exceed the JVM's 65535-byte limit.
    TooLarge {
        code_length: u32,
        instrumented_length: u32,
    },
    /// The constant pool had no room for the hooks' entries, so the whole
    /// class was left untouched.
    ConstantPoolFull,
    /// An empty `finalize()`. HotSpot makes a class finalizable only when
    /// the `finalize()` it inherits or declares has a body; adding hooks to
    /// an empty one (`java.lang.Object`'s, above all) would send every
    /// instance through the finalizer queue.
    EmptyFinalizer,
    /// Valid bytecode this rewriter does not transform, e.g. a constructor
    /// that never calls `super(...)`.
    Unsupported(String),
}

/// A method left as it was, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedMethod {
    pub method: MethodInfo,
    pub reason: SkipReason,
    /// The id `next_method_id` handed out for it, if it was asked. That id
    /// appears nowhere in the class.
    pub method_id: Option<u32>,
}

/// Why a whole class was left as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Untouched {
    /// `module-info.class` has no code.
    ModuleInfo,
    /// The class is the probe class itself, which must not call itself.
    ProbeClass,
    /// No method was instrumented; see [`RewriteResult::skipped`].
    NothingInstrumented,
    /// The constant pool had no room for the hooks' entries.
    ConstantPoolFull,
}

/// The new class bytes, or why there are none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Rewritten(Vec<u8>),
    Untouched(Untouched),
}

/// What [`instrument`] did to one class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewriteResult {
    /// Internal name of the class.
    pub class_name: String,
    /// The `SourceFile` attribute, e.g. `HashMap.java`.
    pub source_file: Option<String>,
    pub outcome: Outcome,
    /// Methods that now call the probe, in class order.
    pub methods: Vec<InstrumentedMethod>,
    /// Methods left alone, in class order.
    pub skipped: Vec<SkippedMethod>,
}

impl RewriteResult {
    /// The rewritten class, if it was rewritten.
    pub fn bytes(&self) -> Option<&[u8]> {
        match &self.outcome {
            Outcome::Rewritten(b) => Some(b),
            Outcome::Untouched(_) => None,
        }
    }
}

fn parameter_names(pool: &ConstantPool, m: &Method, code: Option<&Code>) -> Vec<String> {
    let Some(desc) = descriptor::parse_method(m.descriptor) else {
        return Vec::new();
    };
    let mut names: Vec<Option<String>> = vec![None; desc.params.len()];
    if let Some(a) = m.attribute("MethodParameters") {
        let mut r = Reader::new(a.data, a.data_offset, "MethodParameters");
        if r.u8().ok().map(usize::from) == Some(names.len()) {
            for slot in names.iter_mut() {
                let (Ok(name), Ok(_flags)) = (r.u16(), r.u16()) else {
                    break;
                };
                if name != 0 {
                    *slot = pool.utf8(name).ok().map(mutf8::decode);
                }
            }
        }
    }
    if let Some(code) = code {
        let first_slot = if m.access & ACC_STATIC != 0 { 0 } else { 1 };
        let mut slots = Vec::with_capacity(desc.params.len());
        let mut slot: u32 = first_slot;
        for p in &desc.params {
            slots.push(slot);
            slot += u32::from(p.slots());
        }
        for a in code
            .attributes
            .iter()
            .filter(|a| a.is("LocalVariableTable"))
        {
            let Ok(rows) = debug_tables::parse_local_variables(a.data, a.data_offset) else {
                continue;
            };
            for row in rows.iter().filter(|r| r.start_pc == 0) {
                if let Some(k) = slots.iter().position(|&s| s == u32::from(row.index)) {
                    if names[k].is_none() {
                        names[k] = pool.utf8(row.name_index).ok().map(mutf8::decode);
                    }
                }
            }
        }
    }
    names
        .into_iter()
        .enumerate()
        .map(|(k, n)| n.unwrap_or_else(|| format!("arg{k}")))
        .collect()
}

fn line_numbers(code: Option<&Code>) -> Vec<LineNumber> {
    code.into_iter()
        .flat_map(|c| c.attributes.iter().filter(|a| a.is("LineNumberTable")))
        .filter_map(|a| debug_tables::parse_line_numbers(a.data, a.data_offset).ok())
        .flatten()
        .collect()
}

/// Whether `m` is a `finalize()V` whose code is a lone `return`, the shape
/// HotSpot's `Method::is_empty_method` looks for.
fn is_empty_finalizer(m: &Method, code: Option<&Code>) -> bool {
    m.name == b"finalize"
        && m.descriptor == b"()V"
        && code.is_some_and(|c| c.code == [bytecode::op::RETURN])
}

/// The method's single `Code` attribute, parsed.
fn code_of<'a>(
    cf: &ClassFile<'a>,
    whole: &'a [u8],
    m: &Method<'a>,
) -> Result<Option<(class_file::Attribute<'a>, Code<'a>)>, RewriteError> {
    let mut codes = m.attributes.iter().filter(|a| a.is("Code"));
    let Some(attr) = codes.next() else {
        return Ok(None);
    };
    if codes.next().is_some() {
        return Err(RewriteError::Malformed {
            context: format!("method {}", m.display_name()),
            reason: "more than one Code attribute".into(),
        });
    }
    let code = Code::parse(attr, whole, &cf.pool)?;
    Ok(Some((attr.clone(), code)))
}

fn method_info(cf: &ClassFile, index: usize, m: &Method, code: Option<&Code>) -> MethodInfo {
    MethodInfo {
        index_in_class: index,
        name: mutf8::decode(m.name),
        descriptor: mutf8::decode(m.descriptor),
        access: m.access,
        parameter_names: parameter_names(&cf.pool, m, code),
        line_numbers: line_numbers(code),
    }
}

fn source_file(cf: &ClassFile) -> Option<String> {
    cf.attribute("SourceFile")
        .and_then(|a| bytes::u16_at(a.data, 0))
        .and_then(|i| cf.pool.utf8(i).ok())
        .map(mutf8::decode)
}

/// Reads the names, parameters and line tables of a class without changing
/// it.
pub fn describe(class_bytes: &[u8]) -> Result<ClassInfo, RewriteError> {
    let cf = ClassFile::parse(class_bytes)?;
    let mut methods = Vec::with_capacity(cf.methods.len());
    for (i, m) in cf.methods.iter().enumerate() {
        let code = code_of(&cf, class_bytes, m)?;
        methods.push(method_info(&cf, i, m, code.as_ref().map(|c| &c.1)));
    }
    let source_file = source_file(&cf);
    Ok(ClassInfo {
        name: mutf8::decode(&cf.this_name),
        super_name: cf.super_name.as_deref().map(mutf8::decode),
        access: cf.access,
        major_version: cf.major,
        minor_version: cf.minor,
        source_file,
        methods,
    })
}

/// Inserts the probe hooks into every method of `class_bytes` that has
/// code.
///
/// `next_method_id` is asked once per candidate method, in class order,
/// and returns the id its hooks will pass to the probe, or `None` to leave
/// that method alone.
pub fn instrument(
    class_bytes: &[u8],
    config: &HookConfig,
    next_method_id: &mut dyn FnMut(&MethodInfo) -> Option<u32>,
) -> Result<RewriteResult, RewriteError> {
    instrument_with(class_bytes, config, &mut |m| {
        next_method_id(m).map(Hooks::Trace)
    })
}

/// [`instrument`], where the callback also chooses the kind of hooks per
/// method: traced, or only counted ([`Hooks::Count`], what the agent's
/// overhead budget gives the methods it demotes).
pub fn instrument_with(
    class_bytes: &[u8],
    config: &HookConfig,
    next_hooks: &mut dyn FnMut(&MethodInfo) -> Option<Hooks>,
) -> Result<RewriteResult, RewriteError> {
    let probe = &config.probe_class;
    if probe.is_empty()
        || probe
            .split('/')
            .any(|part| part.is_empty() || part.contains(['.', ';', '[']))
    {
        return Err(RewriteError::InvalidProbeClass {
            name: probe.clone(),
        });
    }
    let mut cf = ClassFile::parse(class_bytes)?;
    let class_name = mutf8::decode(&cf.this_name);
    let source = source_file(&cf);
    let untouched = |reason| RewriteResult {
        class_name: class_name.clone(),
        source_file: source.clone(),
        outcome: Outcome::Untouched(reason),
        methods: Vec::new(),
        skipped: Vec::new(),
    };
    if cf.access & ACC_MODULE != 0 {
        return Ok(untouched(Untouched::ModuleInfo));
    }
    let probe_name = mutf8::encode(&config.probe_class);
    if cf.this_name == probe_name {
        return Ok(untouched(Untouched::ProbeClass));
    }

    let mut names = types::ClassNames::default();
    let this_class = names.class_from_pool(&cf.pool, cf.this_class)?;
    let mut probe = hooks::ProbeRefs::new(probe_name);
    let methods = std::mem::take(&mut cf.methods);
    let mut replacements: Vec<Option<Vec<u8>>> = vec![None; methods.len()];
    let mut instrumented = Vec::new();
    let mut skipped = Vec::new();
    let mut pool_full = false;

    for (i, m) in methods.iter().enumerate() {
        let code = code_of(&cf, class_bytes, m)?;
        let info = method_info(&cf, i, m, code.as_ref().map(|c| &c.1));
        let reason = if m.access & ACC_ABSTRACT != 0 {
            Some(SkipReason::Abstract)
        } else if m.access & ACC_NATIVE != 0 {
            Some(SkipReason::Native)
        } else if code.is_none() {
            Some(SkipReason::NoCode)
        } else if is_empty_finalizer(m, code.as_ref().map(|c| &c.1)) {
            Some(SkipReason::EmptyFinalizer)
        } else if pool_full {
            Some(SkipReason::ConstantPoolFull)
        } else {
            None
        };
        let (Some((code_attr, code)), None) = (code, reason.clone()) else {
            skipped.push(SkippedMethod {
                method: info,
                reason: reason.unwrap_or(SkipReason::NoCode),
                method_id: None,
            });
            continue;
        };
        let Some(hooks) = next_hooks(&info) else {
            skipped.push(SkippedMethod {
                method: info,
                reason: SkipReason::Declined,
                method_id: None,
            });
            continue;
        };
        let mut cx = ClassContext {
            pool: &mut cf.pool,
            names: &mut names,
            probe: &mut probe,
            this_class,
            this_name: &cf.this_name,
            major: cf.major,
            config,
        };
        let (id, counter_slot) = match hooks {
            Hooks::Trace(id) => (id, None),
            Hooks::Count { id, slot } => (id, Some(slot)),
        };
        match rewrite::rewrite_method(&mut cx, m, &code_attr, &code, hooks) {
            Ok(MethodOutcome::Rewritten(r)) => {
                replacements[i] = Some(r.method_info);
                instrumented.push(InstrumentedMethod {
                    method: MethodInfo {
                        line_numbers: r.line_numbers,
                        ..info
                    },
                    method_id: id,
                    args_captured: r.args_captured,
                    counter_slot,
                });
            }
            Ok(MethodOutcome::Skipped(reason)) => skipped.push(SkippedMethod {
                method: info,
                reason,
                method_id: Some(id),
            }),
            Err(Failure::Bad(e)) => return Err(e),
            Err(Failure::PoolFull) => {
                pool_full = true;
                skipped.push(SkippedMethod {
                    method: info,
                    reason: SkipReason::ConstantPoolFull,
                    method_id: Some(id),
                });
            }
        }
    }

    if pool_full {
        // Hooks already placed refer to entries we cannot write; undo all.
        for m in instrumented.drain(..) {
            skipped.push(SkippedMethod {
                method: m.method,
                reason: SkipReason::ConstantPoolFull,
                method_id: Some(m.method_id),
            });
        }
        skipped.sort_by_key(|s| s.method.index_in_class);
        return Ok(RewriteResult {
            skipped,
            ..untouched(Untouched::ConstantPoolFull)
        });
    }
    let outcome = if instrumented.is_empty() {
        Outcome::Untouched(Untouched::NothingInstrumented)
    } else {
        cf.methods = methods;
        Outcome::Rewritten(cf.write(&replacements))
    };
    Ok(RewriteResult {
        class_name,
        source_file: source,
        outcome,
        methods: instrumented,
        skipped,
    })
}
