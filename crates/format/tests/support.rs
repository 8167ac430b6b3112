//! Helpers shared by the tests: a symbol set and events that use every
//! event kind and value variant, and write/read shortcuts.

use std::io::Cursor;

use vmview_format::*;

pub fn header() -> TraceHeader {
    TraceHeader {
        version: 1,
        pid: 4242,
        start_unix_ns: 1_700_000_000_123_456_789,
        properties: vec![
            ("jvm".into(), "OpenJDK 64-Bit Server VM 17.0.9".into()),
            (
                "command".into(),
                "java -cp app.jar shop.Main ünïcødé".into(),
            ),
        ],
    }
}

pub const S_INVENTORY: StringId = StringId(0);
pub const S_ADD: StringId = StringId(1);
pub const S_ADD_SIG: StringId = StringId(2);
pub const S_COUNT: StringId = StringId(3);
pub const S_NAME: StringId = StringId(4);
pub const S_MAIN: StringId = StringId(5);
pub const S_MAIN_SIG: StringId = StringId(6);
pub const S_INTEGER: StringId = StringId(7);
pub const S_INT_ARRAY: StringId = StringId(8);
pub const S_ITEM: StringId = StringId(9);
pub const S_ISE: StringId = StringId(10);
pub const S_APP_LOADER: StringId = StringId(11);
pub const S_SOURCE: StringId = StringId(12);
pub const S_THREAD_MAIN: StringId = StringId(13);
pub const S_WORKER: StringId = StringId(14);
pub const S_GROUP: StringId = StringId(15);
pub const S_OBJECT: StringId = StringId(16);
pub const M_ADD: MethodId = MethodId(0);
pub const M_MAIN: MethodId = MethodId(1);
pub const T_MAIN: ThreadRef = ThreadRef(0);
pub const T_WORKER: ThreadRef = ThreadRef(1);

pub fn symbols() -> Vec<Symbol> {
    let texts = [
        "shop.Inventory",
        "add",
        "(ILjava/lang/String;)V",
        "count",
        "name",
        "main",
        "([Ljava/lang/String;)V",
        "java.lang.Integer",
        "int[]",
        "shop.Item",
        "java.lang.IllegalStateException",
        "jdk.internal.loader.ClassLoaders$AppClassLoader",
        "file:/app/app.jar",
        "main",
        "worker-1 «ü»",
        "main",
        "java.lang.Object",
    ];
    let mut v: Vec<Symbol> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| Symbol::String {
            id: StringId(i as u32),
            text: t.to_string(),
        })
        .collect();
    v.push(Symbol::Method(MethodSymbol {
        id: M_ADD,
        class: S_INVENTORY,
        name: S_ADD,
        sig: S_ADD_SIG,
        param_names: vec![S_COUNT, S_NAME],
        modifiers: 0x0021,
    }));
    v.push(Symbol::Method(MethodSymbol {
        id: M_MAIN,
        class: S_INVENTORY,
        name: S_MAIN,
        sig: S_MAIN_SIG,
        param_names: vec![S_NAME],
        modifiers: 0x0009,
    }));
    v.push(Symbol::Thread(ThreadSymbol {
        id: T_MAIN,
        java_id: 1,
        name: S_THREAD_MAIN,
        group: S_GROUP,
        priority: 5,
        daemon: false,
    }));
    v.push(Symbol::Thread(ThreadSymbol {
        id: T_WORKER,
        java_id: -1,
        name: S_WORKER,
        group: S_GROUP,
        priority: -3,
        daemon: true,
    }));
    v.push(Symbol::Stack(StackSymbol {
        id: STACK_WORKER,
        types: Vec::new(),
        frames: vec![
            (
                M_ADD,
                Loc {
                    bci: 17,
                    line: Some(42),
                },
            ),
            (
                M_MAIN,
                Loc {
                    bci: -1,
                    line: None,
                },
            ),
            (
                M_ADD,
                Loc {
                    bci: 0,
                    line: Some(u32::MAX),
                },
            ),
        ],
    }));
    v
}

/// A stack that only SAMPLE events use (the writer must bring its
/// methods into each chunk along with it).
pub const STACK_WORKER: StackId = StackId(3);

/// One value of every variant, extremes included.
pub fn all_values() -> Vec<Value> {
    vec![
        Value::Null,
        Value::Boolean(false),
        Value::Boolean(true),
        Value::Byte(i8::MIN),
        Value::Byte(i8::MAX),
        Value::Char(0xffff),
        Value::Short(i16::MIN),
        Value::Int(i32::MIN),
        Value::Int(i32::MAX),
        Value::Int(0),
        Value::Long(i64::MIN),
        Value::Long(i64::MAX),
        Value::Float(-1.5),
        Value::Float(f32::INFINITY),
        Value::Double(f64::MAX),
        Value::Double(-0.0),
        Value::Str {
            text: "plain".into(),
            full_len: None,
        },
        Value::Str {
            text: String::new(),
            full_len: None,
        },
        Value::Str {
            text: "tronqué…".into(),
            full_len: Some(u32::MAX),
        },
        Value::Boxed {
            class: S_INTEGER,
            value: Box::new(Value::Int(42)),
        },
        Value::Array {
            class: S_INT_ARRAY,
            length: u32::MAX,
        },
        Value::Object {
            class: S_ITEM,
            hash: u32::MAX,
        },
        Value::Unavailable,
    ]
}

/// Events of every kind and shape, with sparse ids and times that go back.
pub fn all_kinds() -> Vec<Event> {
    let loc = |bci, line| Loc { bci, line };
    let mon = Monitor {
        class: S_OBJECT,
        hash: 0xdead_beef,
    };
    let kinds = vec![
        (T_MAIN, EventKind::ThreadStart),
        (
            T_MAIN,
            EventKind::ClassLoad {
                class: S_INVENTORY,
                loader: S_APP_LOADER,
                source: S_SOURCE,
            },
        ),
        (
            T_MAIN,
            EventKind::Call {
                metrics: Default::default(),
                method: M_MAIN,
                depth: 1,
                caller: None,
                params: vec![Value::Array {
                    class: S_INT_ARRAY,
                    length: 0,
                }],
            },
        ),
        (
            T_MAIN,
            EventKind::Call {
                metrics: Default::default(),
                method: M_ADD,
                depth: 2,
                caller: Some((M_MAIN, loc(17, Some(42)))),
                params: all_values(),
            },
        ),
        (
            T_MAIN,
            EventKind::Return {
                metrics: Default::default(),
                method: M_ADD,
                depth: 2,
                outcome: Outcome::Value(Value::Boxed {
                    class: S_INTEGER,
                    value: Box::new(Value::Int(-7)),
                }),
                elapsed_ns: 5,
            },
        ),
        (
            T_MAIN,
            EventKind::Call {
                metrics: Default::default(),
                method: M_ADD,
                depth: 5,
                caller: Some((M_ADD, loc(-1, None))),
                params: vec![],
            },
        ),
        (
            T_MAIN,
            EventKind::Throw {
                exception: S_ISE,
                message: Some("stock < 0 — «refusé»".into()),
                method: M_ADD,
                loc: loc(3, Some(0)),
                catch: Some((M_MAIN, loc(20, Some(u32::MAX)))),
            },
        ),
        (
            T_MAIN,
            EventKind::Return {
                metrics: Default::default(),
                method: M_ADD,
                depth: 5,
                outcome: Outcome::Exception { class: S_ISE },
                elapsed_ns: 0,
            },
        ),
        (
            T_MAIN,
            EventKind::Catch {
                exception: S_ISE,
                method: M_MAIN,
                loc: loc(20, None),
            },
        ),
        (
            T_MAIN,
            EventKind::Throw {
                exception: S_ISE,
                message: None,
                method: M_MAIN,
                loc: loc(i32::MAX, None),
                catch: None,
            },
        ),
        (T_WORKER, EventKind::ThreadStart),
        (
            T_WORKER,
            EventKind::MonitorContendedEnter {
                monitor: mon,
                owner: Some(T_MAIN),
            },
        ),
        (
            T_WORKER,
            EventKind::MonitorContendedEnter {
                monitor: mon,
                owner: None,
            },
        ),
        (
            T_WORKER,
            EventKind::MonitorContendedEntered {
                monitor: mon,
                wait_ns: 123_456,
            },
        ),
        (
            T_WORKER,
            EventKind::MonitorWait {
                monitor: mon,
                timeout_ms: -1,
            },
        ),
        (
            T_WORKER,
            EventKind::MonitorWaited {
                monitor: mon,
                timed_out: true,
                wait_ns: 9,
            },
        ),
        (
            T_WORKER,
            EventKind::MonitorWaited {
                monitor: mon,
                timed_out: false,
                wait_ns: u64::MAX,
            },
        ),
        (T_WORKER, EventKind::GcStart),
        (
            T_WORKER,
            EventKind::GcFinish {
                duration_ns: 1_500_000,
            },
        ),
        (T_WORKER, EventKind::Dropped { count: 77 }),
        (
            T_WORKER,
            EventKind::Sample {
                state: ThreadState::Io,
                stack: STACK_WORKER,
                monitors: vec![(mon, 0), (mon, u32::MAX)],
            },
        ),
        (
            T_MAIN,
            EventKind::Sample {
                state: ThreadState::Sleep,
                stack: STACK_WORKER,
                monitors: vec![],
            },
        ),
        (
            T_MAIN,
            EventKind::Bytecode {
                method: M_MAIN,
                bci: 0,
                insn: S_ITEM,
            },
        ),
        (
            T_MAIN,
            EventKind::Bytecode {
                method: M_MAIN,
                bci: 65_535,
                insn: S_ADD,
            },
        ),
        (
            T_WORKER,
            EventKind::Bytecode {
                method: M_ADD,
                bci: 3,
                insn: S_ITEM,
            },
        ),
        (
            T_MAIN,
            EventKind::Bytecode {
                method: M_MAIN,
                bci: 7,
                insn: S_ITEM,
            },
        ),
        (
            T_MAIN,
            EventKind::Bytecode {
                method: M_ADD,
                bci: 7,
                insn: S_ITEM,
            },
        ),
        (
            T_WORKER,
            EventKind::Return {
                metrics: Default::default(),
                method: M_MAIN,
                depth: 0,
                outcome: Outcome::Value(Value::Unavailable),
                elapsed_ns: 1,
            },
        ),
        (
            T_MAIN,
            EventKind::Return {
                metrics: Default::default(),
                method: M_MAIN,
                depth: 1,
                outcome: Outcome::Void,
                elapsed_ns: 1_000,
            },
        ),
        (
            T_MAIN,
            EventKind::Call {
                metrics: Default::default(),
                method: M_ADD,
                depth: u32::MAX,
                caller: None,
                params: vec![],
            },
        ),
        (
            T_MAIN,
            EventKind::MonitorEnter {
                monitor: mon,
                depth: u32::MAX,
            },
        ),
        (
            T_MAIN,
            EventKind::MonitorExit {
                monitor: mon,
                depth: 3,
            },
        ),
        (
            T_MAIN,
            EventKind::Call {
                metrics: Metrics {
                    cpu_ns: Some(1_000),
                    alloc_bytes: None,
                },
                method: M_ADD,
                depth: 2,
                caller: None,
                params: vec![],
            },
        ),
        (
            T_MAIN,
            EventKind::Return {
                // CPU time going backwards and a counter at its maximum
                // still round-trip (deltas wrap).
                metrics: Metrics {
                    cpu_ns: Some(900),
                    alloc_bytes: Some(u64::MAX),
                },
                method: M_ADD,
                depth: 2,
                outcome: Outcome::Void,
                elapsed_ns: 7,
            },
        ),
        (
            T_WORKER,
            EventKind::Call {
                metrics: Metrics {
                    cpu_ns: Some(5),
                    alloc_bytes: Some(48),
                },
                method: M_ADD,
                depth: 1,
                caller: None,
                params: vec![Value::Int(3)],
            },
        ),
        (
            T_WORKER,
            EventKind::TraceWindow {
                min_depth: 1,
                max_depth: None,
                reason: WindowReason::Start,
                rate_per_s: 0,
            },
        ),
        (
            T_WORKER,
            EventKind::TraceWindow {
                min_depth: 3,
                max_depth: Some(u32::MAX),
                reason: WindowReason::Narrow,
                rate_per_s: 250_000,
            },
        ),
        (
            T_MAIN,
            EventKind::PeriodStart {
                period: 0,
                stack: STACK_WORKER,
            },
        ),
        (T_MAIN, EventKind::PeriodEnd { period: u32::MAX }),
        (
            T_MAIN,
            EventKind::Calibration {
                record: "CALL".into(),
                cost_ps: 41_250,
            },
        ),
        (
            T_MAIN,
            EventKind::Calibration {
                record: "*".into(),
                cost_ps: 0,
            },
        ),
        (
            T_WORKER,
            EventKind::ReactionHandlers {
                samples: 1_234,
                handlers: vec![M_ADD, M_MAIN],
                skipped: vec![M_MAIN],
            },
        ),
        (
            T_WORKER,
            EventKind::ReactionHandlers {
                samples: 0,
                handlers: vec![],
                skipped: vec![],
            },
        ),
        (
            T_MAIN,
            EventKind::Foreign {
                name: S_ITEM,
                fields: vec![(S_COUNT, "12".into()), (S_NAME, "«ü» text".into())],
            },
        ),
        (
            T_WORKER,
            EventKind::Demotion {
                method: M_ADD,
                rate_per_s: 12_000_000,
                mean_ns: 4,
                before_bp: 4_210,
                after_bp: 310,
                counted: true,
            },
        ),
        (
            T_WORKER,
            EventKind::Foreign {
                name: S_NAME,
                fields: vec![],
            },
        ),
        (
            T_WORKER,
            EventKind::MethodCounts {
                overhead_bp: 950,
                counts: vec![(M_ADD, 1 << 33), (M_MAIN, 0)],
            },
        ),
        (
            T_WORKER,
            EventKind::AllocSample {
                class: S_INVENTORY,
                size: 100_016,
                stack: STACK_WORKER,
            },
        ),
        (
            T_MAIN,
            EventKind::AllocSample {
                class: S_COUNT,
                size: u64::MAX,
                stack: STACK_WORKER,
            },
        ),
        (
            T_WORKER,
            EventKind::MethodCounts {
                overhead_bp: 0,
                counts: vec![],
            },
        ),
        (
            T_WORKER,
            EventKind::VthreadPinned {
                stack: STACK_WORKER,
                duration_ns: 20_000_000,
            },
        ),
        (
            T_MAIN,
            EventKind::VthreadPinned {
                stack: STACK_WORKER,
                duration_ns: u64::MAX,
            },
        ),
        (T_WORKER, EventKind::ThreadEnd),
        (T_MAIN, EventKind::ThreadEnd),
    ];
    let ids = [0u64, 1, 2, 3, 10, 11, 12, 100, 101, 1 << 40];
    let times = [0u64, 5, 1_000, 999, 2_000, u64::MAX, 3, 4];
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, (thread, kind))| Event {
            id: ids.get(i).copied().unwrap_or((1 << 40) + i as u64 * 3),
            time_ns: times.get(i).copied().unwrap_or(10_000 + i as u64 * 100),
            thread,
            kind,
        })
        .collect()
}

/// Writes `events` after defining `symbols`, with the given chunk size.
pub fn write(symbols: &[Symbol], events: &[Event], chunk_bytes: usize) -> Vec<u8> {
    let mut w = TraceWriter::with_chunk_size(Vec::new(), &header(), chunk_bytes).expect("header");
    for s in symbols {
        w.define(s.clone());
    }
    for e in events {
        w.write(e).expect("write");
    }
    w.finish().expect("finish")
}

/// Reads every event; returns them with the diagnostics.
pub fn read(bytes: &[u8]) -> (Vec<Event>, Vec<Diagnostic>, SymbolTable) {
    let mut r = TraceReader::new(Cursor::new(bytes)).expect("a trace");
    let events: Vec<Event> = r.by_ref().collect();
    (events, r.diagnostics().to_vec(), r.symbols().clone())
}

/// A trace of `n` simple events over ~`chunks` chunks of about `chunk_bytes`.
pub fn multi_chunk(n: usize, chunk_bytes: usize) -> (Vec<Event>, Vec<u8>) {
    let events: Vec<Event> = (0..n as u64)
        .map(|i| Event {
            id: i * 2 + 1,
            time_ns: 1_000 + i * 37,
            thread: if i % 7 < 4 { T_MAIN } else { T_WORKER },
            kind: if i % 2 == 0 {
                EventKind::Call {
                    metrics: Default::default(),
                    method: if i % 4 == 0 { M_ADD } else { M_MAIN },
                    depth: 1,
                    caller: None,
                    params: vec![Value::Int(i as i32)],
                }
            } else {
                EventKind::Return {
                    metrics: Default::default(),
                    method: if i % 4 == 1 { M_ADD } else { M_MAIN },
                    depth: 1,
                    outcome: Outcome::Void,
                    elapsed_ns: 37,
                }
            },
        })
        .collect();
    let bytes = write(&symbols(), &events, chunk_bytes);
    (events, bytes)
}

/// Byte offsets of the chunks of a finished trace, read from its index.
pub fn chunk_infos(bytes: &[u8]) -> Vec<ChunkInfo> {
    let mut r = TraceReader::new(Cursor::new(bytes)).expect("a trace");
    r.index().expect("index").chunks.clone()
}
