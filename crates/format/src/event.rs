//! The event model: what a vmview trace records, independent of how it is
//! encoded on disk or shown to a user.
//!
//! Events refer to symbols (strings, methods, threads) through small `Copy`
//! handles. The agent interns each name once and the trace file stores it
//! once per chunk as a symbol record, so an event is a handful of varints.
//! A [`crate::SymbolTable`] turns handles back into names.

/// Handle of an interned string (class names, method names, descriptors,
/// thread names, loader names, parameter names). Assigned by the producer,
/// stable for the whole trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StringId(pub u32);

/// Handle of an interned method (class, name, descriptor, parameter names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MethodId(pub u32);

/// Handle of a traced thread. Small and dense: the n-th thread that emitted
/// an event, not the JVM's thread id (which the thread symbol carries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadRef(pub u32);

/// Handle of an interned stack trace (see [`crate::StackSymbol`]): a
/// SAMPLE names its stack by handle, so a stack seen again costs a varint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StackId(pub u32);

/// What a sampled thread was doing, as the DYMON reactions analysis needs
/// it: running, in an I/O call, waiting for something to happen, blocked on
/// a monitor, or sleeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ThreadState {
    /// Runnable in Java or in native code other than a known I/O method.
    Run,
    /// Runnable in native code inside a known I/O method (socket or file
    /// read/write, accept, select/poll/epoll).
    Io,
    /// `Object.wait`, `LockSupport.park` (queues, futures, conditions), `join`.
    Wait,
    /// Waiting to enter a monitor another thread holds.
    Blocked,
    /// `Thread.sleep`.
    Sleep,
}

impl ThreadState {
    /// Every state, in encoding order.
    pub const ALL: [ThreadState; 5] = [
        ThreadState::Run,
        ThreadState::Io,
        ThreadState::Wait,
        ThreadState::Blocked,
        ThreadState::Sleep,
    ];
    /// The name DESIGN.md and the exporters use: `RUN`, `IO` …
    pub fn name(self) -> &'static str {
        match self {
            ThreadState::Run => "RUN",
            ThreadState::Io => "IO",
            ThreadState::Wait => "WAIT",
            ThreadState::Blocked => "BLOCKED",
            ThreadState::Sleep => "SLEEP",
        }
    }
    /// Position in [`ThreadState::ALL`] (also the on-disk code).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// A place in a method: bytecode index plus source line when the class has a
/// LineNumberTable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Loc {
    /// Bytecode index; -1 for a native method or an unknown location.
    pub bci: i32,
    /// Source line, or `None` when the class has no line numbers.
    pub line: Option<u32>,
}

/// A monitor (the object a `synchronized` block or `wait()` uses), named as
/// `class@identityHash`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Monitor {
    /// Dotted binary name of the object's class.
    pub class: StringId,
    /// `System.identityHashCode` of the object.
    pub hash: u32,
}

/// A captured Java value: a parameter, a return value.
///
/// Primitives are kept exactly; Strings by content (bounded: `truncated`
/// holds the full length when the content was cut); boxed primitives by
/// value; arrays by element type and length; any other object by class and
/// identity hash. vmview never calls an arbitrary `toString()`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Boolean(bool),
    Byte(i8),
    Char(u16),
    Short(i16),
    Int(i32),
    Long(i64),
    Float(f32),
    Double(f64),
    /// `java.lang.String` contents. `full_len` is `Some(n)` when only the
    /// first part of an `n`-character string was kept.
    Str {
        text: String,
        full_len: Option<u32>,
    },
    /// A boxed primitive (`java.lang.Integer` …): its class and unboxed value.
    Boxed {
        class: StringId,
        value: Box<Value>,
    },
    /// An array: its type (dotted, e.g. `int[]`, `java.lang.String[]`) and length.
    Array {
        class: StringId,
        length: u32,
    },
    /// Any other object: `class@identityHash`.
    Object {
        class: StringId,
        hash: u32,
    },
    /// The value could not be read (for example an optimised-away local).
    Unavailable,
}

impl Value {
    /// The kind of value as the exporters name it: the Java primitive
    /// (`int`, `boolean` …), or `null`, `string`, `boxed`, `array`,
    /// `object`, `unavailable`. The XML `KIND` attribute and the data-flow
    /// profiles' primitive types use these names.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Boolean(_) => "boolean",
            Value::Byte(_) => "byte",
            Value::Char(_) => "char",
            Value::Short(_) => "short",
            Value::Int(_) => "int",
            Value::Long(_) => "long",
            Value::Float(_) => "float",
            Value::Double(_) => "double",
            Value::Str { .. } => "string",
            Value::Boxed { .. } => "boxed",
            Value::Array { .. } => "array",
            Value::Object { .. } => "object",
            Value::Unavailable => "unavailable",
        }
    }
}

/// How a method returned.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Returned normally from a `void` method.
    Void,
    /// Returned normally with this value (or the value was not captured:
    /// [`Value::Unavailable`]).
    Value(Value),
    /// An exception of this class unwound the frame.
    Exception { class: StringId },
}

/// One recorded event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Unique and strictly increasing within a trace (not necessarily
    /// consecutive: a filtered trace keeps its source's ids).
    pub id: u64,
    /// Nanoseconds since the trace started.
    pub time_ns: u64,
    /// The thread that emitted it.
    pub thread: ThreadRef,
    pub kind: EventKind,
}

/// The event types of DESIGN.md, with their fields.
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    /// The thread started (its name, group … are in its thread symbol).
    ThreadStart,
    /// The thread ended.
    ThreadEnd,
    /// A class was loaded (prepared).
    ClassLoad {
        class: StringId,
        /// Class name of the defining loader, or `bootstrap`.
        loader: StringId,
        /// Where it came from when known (source file or code source), else empty.
        source: StringId,
    },
    /// A traced method was entered. Parameter names come from the method symbol.
    Call {
        method: MethodId,
        /// Call-stack depth, counted from the stack base (the thread's first
        /// frame is depth 1) over all frames, traced or not.
        depth: u32,
        /// Where the caller was, when known.
        caller: Option<(MethodId, Loc)>,
        /// One value per parameter, `this` excluded, in declaration order.
        params: Vec<Value>,
        /// The thread's CPU time and allocated bytes at entry, when the
        /// recording measured them (`metrics=`).
        metrics: Metrics,
    },
    /// A traced method returned, normally or by an exception.
    Return {
        method: MethodId,
        depth: u32,
        outcome: Outcome,
        /// Wall time since the matching CALL.
        elapsed_ns: u64,
        /// The thread's CPU time and allocated bytes at exit, when the
        /// recording measured them.
        metrics: Metrics,
    },
    /// An exception was thrown.
    Throw {
        /// Dotted class name of the exception.
        exception: StringId,
        /// Its detail message (bounded), when it has one.
        message: Option<String>,
        method: MethodId,
        loc: Loc,
        /// Where it will be caught; `None` when uncaught.
        catch: Option<(MethodId, Loc)>,
    },
    /// An exception was caught.
    Catch {
        exception: StringId,
        method: MethodId,
        loc: Loc,
    },
    /// The thread blocks on a monitor another thread owns.
    MonitorContendedEnter {
        monitor: Monitor,
        owner: Option<ThreadRef>,
    },
    /// The thread got the monitor after waiting `wait_ns`.
    MonitorContendedEntered { monitor: Monitor, wait_ns: u64 },
    /// The thread calls `Object.wait(timeout_ms)` (0 = no timeout).
    MonitorWait { monitor: Monitor, timeout_ms: i64 },
    /// The thread's `wait()` ended after `wait_ns`.
    MonitorWaited {
        monitor: Monitor,
        timed_out: bool,
        wait_ns: u64,
    },
    /// A garbage collection started.
    GcStart,
    /// A garbage collection finished after `duration_ns`.
    GcFinish { duration_ns: u64 },
    /// The producer dropped `count` events (buffer budget exceeded) since
    /// the previous `Dropped` record. Totals are in the trace statistics.
    Dropped { count: u64 },
    /// A periodic stack sample of the thread.
    Sample {
        state: ThreadState,
        /// The thread's stack, top frame first.
        stack: StackId,
        /// Monitors the thread held, each with the depth (0 = top frame)
        /// of the frame that acquired it.
        monitors: Vec<(Monitor, u32)>,
    },
    /// The depth window moved: from now on the thread's CALL and RETURN
    /// events cover only frames whose depth lies in `min_depth..=max_depth`
    /// (`depth=`, moved by `adapt=`). Emitted on the thread whose rate
    /// triggered the move, but the window applies to all threads.
    TraceWindow {
        /// Shallowest traced depth (1 = the thread's first frame).
        min_depth: u32,
        /// Deepest traced depth; `None` for no bound.
        max_depth: Option<u32>,
        /// Why it moved.
        reason: WindowReason,
        /// The event rate (events per second) that triggered the move; 0
        /// when no rate was measured (the initial window).
        rate_per_s: u64,
    },
    /// A tracing period began (`period=ON/OFF`); `stack` is the thread's
    /// stack at that moment (top frame first), so the period's calls can be
    /// placed under the frames that were already open. One per thread.
    PeriodStart { period: u32, stack: StackId },
    /// A tracing period ended, for every thread.
    PeriodEnd { period: u32 },
    /// What emitting one record cost in the recording JVM, measured at
    /// start-up (median of several rounds). `record` names the event type
    /// measured (`CALL`, `RETURN`), or `*` for any record.
    Calibration { record: String, cost_ps: u64 },
    /// The thread acquired a monitor: a `monitorenter` in a traced method or
    /// the entry of a traced `synchronized` method. `depth` is that of the
    /// frame that holds it; calls made while it is held are deeper.
    MonitorEnter { monitor: Monitor, depth: u32 },
    /// The thread released a monitor it acquired at `depth`.
    MonitorExit { monitor: Monitor, depth: u32 },
    /// A bytecode instruction of a traced method is about to execute
    /// (`events=bytecode`; VMView's BYTECODE_TRACE).
    Bytecode {
        method: MethodId,
        /// Bytecode offset of the instruction in the method's code.
        bci: u32,
        /// The instruction as `javap -c` prints it: the mnemonic, then the
        /// operands resolved against the constant pool
        /// (`invokevirtual java/io/PrintStream.println:(Ljava/lang/String;)V`,
        /// `if_icmpge 27`, `iinc 1, 1`). One string per distinct text, so
        /// an instruction executed a million times is named once per chunk.
        insn: StringId,
    },
    /// An allocation sample (`events=alloc`): the thread allocated an
    /// object of `class` (`size` bytes) at `stack`, one sample about every
    /// `alloc_interval` bytes the thread allocated (JVMTI
    /// `SampledObjectAlloc`).
    AllocSample {
        /// The object's class, as `java.lang.String` or `byte[]`.
        class: StringId,
        /// The object's size in bytes.
        size: u64,
        /// The allocating thread's stack, top frame first.
        stack: StackId,
    },
    /// The agent chose the event handlers it times (`reactions`): at the
    /// end of the warm-up it ran the reactions analysis over the samples so
    /// far and instrumented the handlers found. From this event on, CALL and
    /// RETURN of `handlers` are recorded; both lists may be empty (no
    /// handler found). Emitted once, on the sampler's thread.
    ReactionHandlers {
        /// Thread samples (SAMPLE events) the detection saw.
        samples: u64,
        /// The handlers instrumented, in the analysis' order (most RUN
        /// samples first).
        handlers: Vec<MethodId>,
        /// Handlers found but not instrumented: JDK or hidden classes, or
        /// classes the JVM would not retransform.
        skipped: Vec<MethodId>,
    },
    /// An event read from another format that has no vmview counterpart
    /// (a JFR `jdk.CPULoad`, `jdk.ObjectAllocationSample` …): its type name
    /// and its fields as text, in the source's order, so `show`, `filter`
    /// and the exporters still see it.
    Foreign {
        /// The source's event type name (`jdk.CPULoad`).
        name: StringId,
        /// Field name and value as text.
        fields: Vec<(StringId, String)>,
    },
    /// The overhead budget (`budget=`) demoted a method: it cost the most
    /// tracing for the least information, so from this event on its calls
    /// are counted (see [`EventKind::MethodCounts`]) instead of traced as
    /// CALL/RETURN. Emitted on the budget's own thread, stamped before the
    /// method's class is re-instrumented, so every traced call of it
    /// precedes the event.
    Demotion {
        method: MethodId,
        /// Its calls per second in the window that decided it.
        rate_per_s: u64,
        /// The mean duration of those calls, in nanoseconds.
        mean_ns: u64,
        /// The budget's estimate of the tracer's overhead before and after
        /// this demotion, in basis points (1/100 %) of the JVM's own CPU time.
        before_bp: u64,
        after_bp: u64,
        /// Whether its calls are still counted (a counting probe) or not
        /// seen at all.
        counted: bool,
    },
    /// The overhead budget's periodic report (about once a second, and
    /// once at the end): its estimate of the tracer's overhead over the
    /// last interval, in basis points of the JVM's own CPU time, and how
    /// many times each demoted method ran since its demotion (running
    /// totals).
    MethodCounts {
        overhead_bp: u64,
        counts: Vec<(MethodId, u64)>,
    },
    /// A virtual thread parked while pinned to its carrier (JDK 21+): it
    /// could not unmount (a `synchronized` frame on JDK 21–23, a native
    /// frame, a class initializer), so its carrier thread parked with it
    /// for `duration_ns`: what JFR's `jdk.VirtualThreadPinned` reports.
    /// The event's thread is the virtual thread, its time the park's start.
    VthreadPinned {
        /// The virtual thread's stack when it parked, top frame first.
        stack: StackId,
        /// How long the carrier stayed parked.
        duration_ns: u64,
    },
}

/// A thread's resource counters at a CALL or RETURN (`metrics=cpu,alloc`).
/// Both count from the thread's start; a call's consumption is the
/// difference between its RETURN's and its CALL's values. The file stores
/// each as a delta against the thread's previous CALL/RETURN, so an absent
/// metric costs nothing and a present one a byte or two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Metrics {
    /// Thread CPU time (user + system), ns.
    pub cpu_ns: Option<u64>,
    /// Bytes the thread allocated on the Java heap.
    pub alloc_bytes: Option<u64>,
}

impl Metrics {
    /// No metrics measured.
    pub const NONE: Metrics = Metrics {
        cpu_ns: None,
        alloc_bytes: None,
    };
}

/// Why the depth window of a [`EventKind::TraceWindow`] moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WindowReason {
    /// The window as configured (`depth=`), at the start of the recording.
    Start,
    /// The event rate was above the `adapt=` band: fewer depths traced.
    Narrow,
    /// The event rate was below the band: more depths traced.
    Widen,
}

impl WindowReason {
    /// Every reason, in encoding order.
    pub const ALL: [WindowReason; 3] = [
        WindowReason::Start,
        WindowReason::Narrow,
        WindowReason::Widen,
    ];
    /// Lower-case name for exporters: `start`, `narrow`, `widen`.
    pub fn name(self) -> &'static str {
        match self {
            WindowReason::Start => "start",
            WindowReason::Narrow => "narrow",
            WindowReason::Widen => "widen",
        }
    }
    /// Position in [`WindowReason::ALL`] (also the on-disk code).
    pub fn index(self) -> usize {
        self as usize
    }
}

impl EventKind {
    /// The event type as DESIGN.md and the JSON Lines `type` key name it.
    pub fn type_name(&self) -> &'static str {
        match self {
            EventKind::ThreadStart => "THREAD_START",
            EventKind::ThreadEnd => "THREAD_END",
            EventKind::ClassLoad { .. } => "CLASS_LOAD",
            EventKind::Call { .. } => "CALL",
            EventKind::Return { .. } => "RETURN",
            EventKind::Throw { .. } => "THROW",
            EventKind::Catch { .. } => "CATCH",
            EventKind::MonitorContendedEnter { .. } => "MONITOR_CONTENDED_ENTER",
            EventKind::MonitorContendedEntered { .. } => "MONITOR_CONTENDED_ENTERED",
            EventKind::MonitorWait { .. } => "MONITOR_WAIT",
            EventKind::MonitorWaited { .. } => "MONITOR_WAITED",
            EventKind::GcStart => "GC_START",
            EventKind::GcFinish { .. } => "GC_FINISH",
            EventKind::Dropped { .. } => "DROPPED",
            EventKind::Sample { .. } => "SAMPLE",
            EventKind::TraceWindow { .. } => "TRACE_WINDOW",
            EventKind::PeriodStart { .. } => "PERIOD_START",
            EventKind::PeriodEnd { .. } => "PERIOD_END",
            EventKind::Calibration { .. } => "CALIBRATION",
            EventKind::MonitorEnter { .. } => "MONITOR_ENTER",
            EventKind::MonitorExit { .. } => "MONITOR_EXIT",
            EventKind::Bytecode { .. } => "BYTECODE",
            EventKind::ReactionHandlers { .. } => "REACTION_HANDLERS",
            EventKind::Foreign { .. } => "FOREIGN",
            EventKind::AllocSample { .. } => "ALLOC_SAMPLE",
            EventKind::Demotion { .. } => "DEMOTION",
            EventKind::MethodCounts { .. } => "METHOD_COUNTS",
            EventKind::VthreadPinned { .. } => "VTHREAD_PINNED",
        }
    }
}

impl EventKind {
    /// Position of the event's type in [`EVENT_TYPE_NAMES`] (for type masks).
    #[inline]
    pub fn type_index(&self) -> usize {
        match self {
            EventKind::ThreadStart => 0,
            EventKind::ThreadEnd => 1,
            EventKind::ClassLoad { .. } => 2,
            EventKind::Call { .. } => 3,
            EventKind::Return { .. } => 4,
            EventKind::Throw { .. } => 5,
            EventKind::Catch { .. } => 6,
            EventKind::MonitorContendedEnter { .. } => 7,
            EventKind::MonitorContendedEntered { .. } => 8,
            EventKind::MonitorWait { .. } => 9,
            EventKind::MonitorWaited { .. } => 10,
            EventKind::GcStart => 11,
            EventKind::GcFinish { .. } => 12,
            EventKind::Dropped { .. } => 13,
            EventKind::Sample { .. } => 14,
            EventKind::TraceWindow { .. } => 15,
            EventKind::PeriodStart { .. } => 16,
            EventKind::PeriodEnd { .. } => 17,
            EventKind::Calibration { .. } => 18,
            EventKind::MonitorEnter { .. } => 19,
            EventKind::MonitorExit { .. } => 20,
            EventKind::Bytecode { .. } => 21,
            EventKind::ReactionHandlers { .. } => 22,
            EventKind::Foreign { .. } => 23,
            EventKind::AllocSample { .. } => 24,
            EventKind::Demotion { .. } => 25,
            EventKind::MethodCounts { .. } => 26,
            EventKind::VthreadPinned { .. } => 27,
        }
    }
}

/// Every event type name, in tag order (fewer than 32: type masks are u32).
pub const EVENT_TYPE_NAMES: &[&str] = &[
    "THREAD_START",
    "THREAD_END",
    "CLASS_LOAD",
    "CALL",
    "RETURN",
    "THROW",
    "CATCH",
    "MONITOR_CONTENDED_ENTER",
    "MONITOR_CONTENDED_ENTERED",
    "MONITOR_WAIT",
    "MONITOR_WAITED",
    "GC_START",
    "GC_FINISH",
    "DROPPED",
    "SAMPLE",
    "TRACE_WINDOW",
    "PERIOD_START",
    "PERIOD_END",
    "CALIBRATION",
    "MONITOR_ENTER",
    "MONITOR_EXIT",
    "BYTECODE",
    "REACTION_HANDLERS",
    "FOREIGN",
    "ALLOC_SAMPLE",
    "DEMOTION",
    "METHOD_COUNTS",
    "VTHREAD_PINNED",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_type_names_are_the_xml_kinds() {
        assert_eq!(Value::Int(1).type_name(), "int");
        assert_eq!(Value::Boolean(true).type_name(), "boolean");
        assert_eq!(Value::Char(65).type_name(), "char");
        assert_eq!(Value::Null.type_name(), "null");
        assert_eq!(
            Value::Str {
                text: "a".into(),
                full_len: None
            }
            .type_name(),
            "string"
        );
        let boxed = Value::Boxed {
            class: StringId(0),
            value: Box::new(Value::Long(7)),
        };
        assert_eq!(boxed.type_name(), "boxed");
        assert_eq!(Value::Unavailable.type_name(), "unavailable");
    }
}

/// An event as a scan for a type, thread or method test sees it
/// ([`ChunkFile::for_each_scanned`](crate::parallel::ChunkFile::for_each_scanned)):
/// a CALL or RETURN as only its id, thread and method, the rest of its
/// bytes stepped over unbuilt; any other event whole. CALL and RETURN are
/// nearly every event of a big trace, and building them was most of a
/// filter's cost.
#[derive(Debug, Clone, PartialEq)]
pub enum Scanned {
    /// A CALL (`ret == false`) or a RETURN.
    Head {
        id: u64,
        /// The event's time (the timeline's index needs nothing else).
        time_ns: u64,
        thread: ThreadRef,
        ret: bool,
        method: MethodId,
    },
    /// Any other event, fully decoded (values skipped as in lazy decode).
    Full(Event),
}

impl Scanned {
    /// The event's id.
    #[inline]
    pub fn id(&self) -> u64 {
        match self {
            Scanned::Head { id, .. } => *id,
            Scanned::Full(ev) => ev.id,
        }
    }
}
