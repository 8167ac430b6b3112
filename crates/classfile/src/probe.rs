//! The probe calling protocol: which static methods the rewritten code
//! calls, with which arguments, in which order.
//!
//! The names and descriptors here are the contract with the agent, which
//! defines the probe class (on the boot class path, so every class can see
//! it) and implements these methods, natively or in Java. They are exposed
//! so that the agent can register its natives from the same table the
//! rewriter emits calls to.
//!
//! Per call of an instrumented method, on the calling thread:
//!
//! 1. With [`HookConfig::capture_args`](crate::HookConfig::capture_args),
//!    one `arg*` call per declared parameter, in declaration order (the
//!    receiver is not passed). These only buffer the values.
//! 2. [`ENTER`]`(id)`: the call begins; it takes the arguments buffered by
//!    step 1 (none if capture is off, or if the method's
//!    [`InstrumentedMethod::args_captured`](crate::InstrumentedMethod::args_captured)
//!    is false). With [`HookConfig::primitive_entry`](crate::HookConfig::primitive_entry),
//!    a method of one or two integral parameters makes steps 1 and 2 one
//!    call, [`ENTER_1`] or [`ENTER_2`], that passes the values itself.
//! 3. Exactly one of: an `exit*` call when a `*return` instruction is about
//!    to run, or [`EXIT_THROW`]`(throwable, id)` when an exception unwinds
//!    out of the method. Exit hooks take the value first and the id last,
//!    because that is the order the stack already holds them in.
//!
//! In constructors, steps 1 and 2 happen once the `super(...)` or
//! `this(...)` call has returned, so a delegating constructor reports its
//! entry after the one it delegated to has exited. Code before that point
//! (argument computation for the super call) is not covered: an exception
//! there produces neither `enter` nor `exitThrow`.
//!
//! Ids are whatever the caller's `next_method_id` returned, passed as a
//! Java `int` (the `u32` bit pattern).
//!
//! Where the probe class must live, measured on JDK 17:
//!
//! - It must be visible to every instrumented class's loader: the boot class
//!   path (`-Xbootclasspath/a:` or JVMTI `AddToBootstrapClassLoaderSearch`).
//! - Classes in named modules (all of the JDK, modular applications) fail
//!   with `IllegalAccessError: module java.base does not read unnamed
//!   module` when their first hook runs, because the boot loader's unnamed
//!   module is not read by default. The agent must add the reads edge
//!   (JVMTI `AddModuleReads`, or `--add-reads <module>=ALL-UNNAMED`) before
//!   such a class runs.
//! - Boot-class-path appends are not searched until the module system is
//!   up, so JDK classes used during VM startup cannot call a probe there at
//!   all (`NoClassDefFoundError` in the boot layer); leave them
//!   uninstrumented, or put the probe into `java.base` itself as the
//!   crate's JDK test does with `--patch-module`.

/// The probe class's `public static int[]` field of call counters, which
/// the counting hook ([`crate::Hooks::Count`]) increments in place:
/// `counts[slot]++`, no call, no time stamp. The agent allocates the array
/// and reads it; increments racing on another thread may be lost, so the
/// counts of methods called from several threads at once are a lower
/// bound.
pub const COUNTS_FIELD: (&str, &str) = ("counts", "[I");

/// A static method of the probe class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProbeMethod {
    /// Method name.
    pub name: &'static str,
    /// JVM method descriptor.
    pub descriptor: &'static str,
}

const fn m(name: &'static str, descriptor: &'static str) -> ProbeMethod {
    ProbeMethod { name, descriptor }
}

/// `enter(int id)`: the method with this id has been entered.
pub const ENTER: ProbeMethod = m("enter", "(I)V");
/// Buffers a `boolean` argument.
pub const ARG_BOOLEAN: ProbeMethod = m("argBoolean", "(Z)V");
/// Buffers a `byte` argument.
pub const ARG_BYTE: ProbeMethod = m("argByte", "(B)V");
/// Buffers a `char` argument.
pub const ARG_CHAR: ProbeMethod = m("argChar", "(C)V");
/// Buffers a `short` argument.
pub const ARG_SHORT: ProbeMethod = m("argShort", "(S)V");
/// Buffers an `int` argument.
pub const ARG_INT: ProbeMethod = m("argInt", "(I)V");
/// Buffers a `long` argument.
pub const ARG_LONG: ProbeMethod = m("argLong", "(J)V");
/// Buffers a `float` argument.
pub const ARG_FLOAT: ProbeMethod = m("argFloat", "(F)V");
/// Buffers a `double` argument.
pub const ARG_DOUBLE: ProbeMethod = m("argDouble", "(D)V");
/// Buffers a reference argument (object, array or null).
pub const ARG_OBJECT: ProbeMethod = m("argObject", "(Ljava/lang/Object;)V");
/// `enter1(long a, int kinds, int id)`: with
/// [`HookConfig::primitive_entry`](crate::HookConfig::primitive_entry),
/// the whole entry hook of a method whose one parameter is a `boolean`,
/// `byte`, `char`, `short`, `int` or `long`: the value widened to a `long`
/// (an `int` sign-extended, a `char` its code, a `boolean` 0 or 1), its
/// [`PRIM_KINDS`] code in the low byte of `kinds`. One native call
/// instead of an `arg*` call and [`ENTER`]; nothing is buffered.
pub const ENTER_1: ProbeMethod = m("enter1", "(JII)V");
/// `enter2(long a, long b, int kinds, int id)`: [`ENTER_1`] for two such
/// parameters, the second's code in the second byte of `kinds`.
pub const ENTER_2: ProbeMethod = m("enter2", "(JJII)V");

/// The codes of [`ENTER_1`] and [`ENTER_2`]'s `kinds`, by the
/// parameter's descriptor character: `Z` 1, `B` 2, `C` 3, `S` 4, `I` 5,
/// `J` 6.
pub const PRIM_KINDS: [(char, u8); 6] =
    [('Z', 1), ('B', 2), ('C', 3), ('S', 4), ('I', 5), ('J', 6)];

/// `exit(int id)`: normal return without a captured value (void methods,
/// or `capture_return` off).
pub const EXIT: ProbeMethod = m("exit", "(I)V");
/// Normal return of a `boolean`.
pub const EXIT_BOOLEAN: ProbeMethod = m("exitBoolean", "(ZI)V");
/// Normal return of a `byte`.
pub const EXIT_BYTE: ProbeMethod = m("exitByte", "(BI)V");
/// Normal return of a `char`.
pub const EXIT_CHAR: ProbeMethod = m("exitChar", "(CI)V");
/// Normal return of a `short`.
pub const EXIT_SHORT: ProbeMethod = m("exitShort", "(SI)V");
/// Normal return of an `int`.
pub const EXIT_INT: ProbeMethod = m("exitInt", "(II)V");
/// Normal return of a `long`.
pub const EXIT_LONG: ProbeMethod = m("exitLong", "(JI)V");
/// Normal return of a `float`.
pub const EXIT_FLOAT: ProbeMethod = m("exitFloat", "(FI)V");
/// Normal return of a `double`.
pub const EXIT_DOUBLE: ProbeMethod = m("exitDouble", "(DI)V");
/// Normal return of a reference.
pub const EXIT_OBJECT: ProbeMethod = m("exitObject", "(Ljava/lang/Object;I)V");
/// `exitThrow(Throwable t, int id)`: `t` unwinds out of the method; the
/// rewritten code rethrows it when the probe returns.
pub const EXIT_THROW: ProbeMethod = m("exitThrow", "(Ljava/lang/Throwable;I)V");

/// `monitorEnter(Object o)`: the method holds `o`'s monitor, acquired by
/// the `monitorenter` just executed (with
/// [`HookConfig::monitors`](crate::HookConfig::monitors)).
pub const MONITOR_ENTER: ProbeMethod = m("monitorEnter", "(Ljava/lang/Object;)V");
/// `monitorExit(Object o)`: a `monitorexit` of `o` is about to run,
/// including those of the compiler's catch-any handlers that release a
/// `synchronized` block's monitor when an exception leaves it.
pub const MONITOR_EXIT: ProbeMethod = m("monitorExit", "(Ljava/lang/Object;)V");
/// `methodMonitorEnter(Object o)`: a `synchronized` method holds `o`'s
/// monitor (`this`, or its `Class` for a static method); called right
/// after [`ENTER`].
pub const METHOD_MONITOR_ENTER: ProbeMethod = m("methodMonitorEnter", "(Ljava/lang/Object;)V");
/// `methodMonitorExit()`: the `synchronized` method whose frame calls it
/// is about to release its monitor; called right before its `exit*` or
/// [`EXIT_THROW`]. The monitor is the one the same frame's
/// [`METHOD_MONITOR_ENTER`] named (the catch-all handler cannot name
/// `this`: its frame declares no locals).
pub const METHOD_MONITOR_EXIT: ProbeMethod = m("methodMonitorExit", "()V");

/// The monitor hooks, called only from classes rewritten with
/// [`HookConfig::monitors`](crate::HookConfig::monitors). Not in [`ALL`]:
/// a probe class that implements only the call hooks serves classes
/// rewritten without monitors.
pub const MONITORS: [ProbeMethod; 4] = [
    MONITOR_ENTER,
    MONITOR_EXIT,
    METHOD_MONITOR_ENTER,
    METHOD_MONITOR_EXIT,
];

/// Every call hook the rewriter may call.
pub const ALL: [ProbeMethod; 23] = [
    ENTER,
    ENTER_1,
    ENTER_2,
    ARG_BOOLEAN,
    ARG_BYTE,
    ARG_CHAR,
    ARG_SHORT,
    ARG_INT,
    ARG_LONG,
    ARG_FLOAT,
    ARG_DOUBLE,
    ARG_OBJECT,
    EXIT,
    EXIT_BOOLEAN,
    EXIT_BYTE,
    EXIT_CHAR,
    EXIT_SHORT,
    EXIT_INT,
    EXIT_LONG,
    EXIT_FLOAT,
    EXIT_DOUBLE,
    EXIT_OBJECT,
    EXIT_THROW,
];
