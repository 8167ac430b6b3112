//! Golden tests for the exporters: small hand-built event streams rendered
//! by each exporter and compared with the expected output under
//! `tests/data/`. Run with `VMVIEW_BLESS=1` to rewrite the expected files
//! after an intended change (and review the diff).

use std::path::PathBuf;

use vmview_export::ExportFormat;
use vmview_format::{
    Event, EventKind, Loc, MethodId, MethodSymbol, Metrics, Monitor, Outcome, StackId, StackSymbol,
    StringId, Symbol, SymbolTable, ThreadRef, ThreadState, ThreadSymbol, Value, WindowReason,
};

/// Interns strings for a hand-built trace.
struct Builder {
    syms: SymbolTable,
    strings: Vec<String>,
    next_method: u32,
}

impl Builder {
    fn new() -> Self {
        Builder {
            syms: SymbolTable::default(),
            strings: Vec::new(),
            next_method: 0,
        }
    }

    fn s(&mut self, text: &str) -> StringId {
        if let Some(i) = self.strings.iter().position(|s| s == text) {
            return StringId(i as u32);
        }
        let id = StringId(self.strings.len() as u32);
        self.strings.push(text.to_string());
        self.syms.insert(Symbol::String {
            id,
            text: text.to_string(),
        });
        id
    }

    fn method(&mut self, class: &str, name: &str, sig: &str, params: &[&str]) -> MethodId {
        let id = MethodId(self.next_method);
        self.next_method += 1;
        let m = MethodSymbol {
            id,
            class: self.s(class),
            name: self.s(name),
            sig: self.s(sig),
            param_names: params.iter().map(|p| self.s(p)).collect(),
            modifiers: 0,
        };
        self.syms.insert(Symbol::Method(m));
        id
    }

    fn thread(&mut self, id: u32, name: &str, daemon: bool) -> ThreadRef {
        let t = ThreadSymbol {
            id: ThreadRef(id),
            java_id: i64::from(id) + 1,
            name: self.s(name),
            group: self.s("main"),
            priority: 5,
            daemon,
        };
        self.syms.insert(Symbol::Thread(t));
        ThreadRef(id)
    }
}

/// A little shop: every event type once, a CALL with every kind of value,
/// a caught and an uncaught exception, contention between two threads.
fn shop_trace() -> (Vec<Event>, SymbolTable) {
    let mut b = Builder::new();
    let main = b.thread(0, "main", false);
    let clerk = b.thread(1, "clerk-1", true);
    let add = b.method(
        "shop.Inventory",
        "add",
        "(Ljava/lang/String;I)V",
        &["name", "qty"],
    );
    let everything = b.method(
        "shop.Inventory$Clerk",
        "everything",
        "(ZBCSJFDLjava/lang/Object;[I[[Ljava/lang/String;Ljava/lang/Integer;Lshop/Item;Ljava/lang/String;Ljava/lang/String;C)Ljava/lang/String;",
        &[],
    );
    let total = b.method("shop.Inventory", "total", "()J", &[]);
    let check = b.method("shop.Inventory", "check", "(I)V", &["qty"]);
    let main_m = b.method("shop.Main", "main", "([Ljava/lang/String;)V", &["args"]);
    let item = b.s("shop.Item");
    let int_arr = b.s("int[]");
    let str_arr = b.s("java.lang.String[][]");
    let integer = b.s("java.lang.Integer");
    let iae = b.s("java.lang.IllegalArgumentException");
    let ise = b.s("java.lang.IllegalStateException");
    let inventory = b.s("shop.Inventory");
    let app = b.s("jdk.internal.loader.ClassLoaders$AppClassLoader");
    let src = b.s("file:/tmp/shop/");
    let empty = b.s("");
    let boot = b.s("bootstrap");
    let object = b.s("java.lang.Object");
    let sample_stack = StackId(0);
    b.syms.insert(Symbol::Stack(StackSymbol {
        id: sample_stack,
        types: Vec::new(),
        frames: vec![
            (
                check,
                Loc {
                    bci: 3,
                    line: Some(41),
                },
            ),
            (total, Loc { bci: 9, line: None }),
            (
                main_m,
                Loc {
                    bci: 20,
                    line: Some(7),
                },
            ),
        ],
    }));

    let mut t = 0;
    let mut id = 0;
    let mut ev = |thread: ThreadRef, kind: EventKind| {
        id += 1;
        t += 1_234_567;
        Event {
            id,
            time_ns: t,
            thread,
            kind,
        }
    };
    let events = vec![
        ev(main, EventKind::ThreadStart),
        ev(
            main,
            EventKind::ClassLoad {
                class: inventory,
                loader: app,
                source: src,
            },
        ),
        ev(
            main,
            EventKind::ClassLoad {
                class: object,
                loader: boot,
                source: empty,
            },
        ),
        ev(
            main,
            EventKind::Call {
                metrics: Default::default(),
                method: add,
                depth: 3,
                caller: Some((
                    main_m,
                    Loc {
                        bci: 17,
                        line: Some(12),
                    },
                )),
                params: vec![
                    Value::Str {
                        text: "apple".into(),
                        full_len: None,
                    },
                    Value::Int(7),
                ],
            },
        ),
        ev(
            main,
            EventKind::Return {
                metrics: Metrics {
                    cpu_ns: Some(1_200_000),
                    alloc_bytes: Some(4_096),
                },
                method: add,
                depth: 3,
                outcome: Outcome::Void,
                elapsed_ns: 1_500,
            },
        ),
        ev(
            clerk,
            EventKind::Call {
                metrics: Default::default(),
                method: everything,
                depth: 1,
                caller: None,
                params: vec![
                    Value::Boolean(true),
                    Value::Byte(-8),
                    Value::Char(u16::from(b'\n')),
                    Value::Short(300),
                    Value::Long(9_007_199_254_740_993),
                    Value::Float(0.1),
                    Value::Double(f64::NAN),
                    Value::Null,
                    Value::Array {
                        class: int_arr,
                        length: 3,
                    },
                    Value::Array {
                        class: str_arr,
                        length: 2,
                    },
                    Value::Boxed {
                        class: integer,
                        value: Box::new(Value::Int(5)),
                    },
                    Value::Object {
                        class: item,
                        hash: 0x1b6d3586,
                    },
                    Value::Str {
                        text: "say \"hi\"\tnow".into(),
                        full_len: Some(40),
                    },
                    Value::Unavailable,
                    Value::Char(u16::from(b'x')),
                ],
            },
        ),
        ev(
            clerk,
            EventKind::Return {
                metrics: Default::default(),
                method: everything,
                depth: 1,
                outcome: Outcome::Value(Value::Str {
                    text: "ok".into(),
                    full_len: None,
                }),
                elapsed_ns: 2_000_000_000,
            },
        ),
        ev(
            main,
            EventKind::Call {
                metrics: Default::default(),
                method: total,
                depth: 3,
                caller: None,
                params: vec![],
            },
        ),
        ev(
            main,
            EventKind::Return {
                metrics: Default::default(),
                method: total,
                depth: 3,
                outcome: Outcome::Value(Value::Long(-1)),
                elapsed_ns: 800,
            },
        ),
        ev(
            main,
            EventKind::Throw {
                exception: iae,
                message: Some("qty < 0: -1".into()),
                method: check,
                loc: Loc {
                    bci: 9,
                    line: Some(40),
                },
                catch: Some((
                    main_m,
                    Loc {
                        bci: 30,
                        line: Some(15),
                    },
                )),
            },
        ),
        ev(
            main,
            EventKind::Return {
                metrics: Default::default(),
                method: check,
                depth: 4,
                outcome: Outcome::Exception { class: iae },
                elapsed_ns: 20_000,
            },
        ),
        ev(
            main,
            EventKind::Catch {
                exception: iae,
                method: main_m,
                loc: Loc {
                    bci: 30,
                    line: Some(15),
                },
            },
        ),
        ev(
            clerk,
            EventKind::Throw {
                exception: ise,
                message: None,
                method: check,
                loc: Loc {
                    bci: -1,
                    line: None,
                },
                catch: None,
            },
        ),
        ev(
            clerk,
            EventKind::MonitorContendedEnter {
                monitor: Monitor {
                    class: inventory,
                    hash: 0xabc,
                },
                owner: Some(main),
            },
        ),
        ev(
            clerk,
            EventKind::MonitorContendedEntered {
                monitor: Monitor {
                    class: inventory,
                    hash: 0xabc,
                },
                wait_ns: 250_000,
            },
        ),
        ev(
            main,
            EventKind::MonitorWait {
                monitor: Monitor {
                    class: inventory,
                    hash: 0xabc,
                },
                timeout_ms: 500,
            },
        ),
        ev(
            main,
            EventKind::MonitorWaited {
                monitor: Monitor {
                    class: inventory,
                    hash: 0xabc,
                },
                timed_out: true,
                wait_ns: 500_100_000,
            },
        ),
        ev(main, EventKind::GcStart),
        ev(
            main,
            EventKind::GcFinish {
                duration_ns: 3_000_000,
            },
        ),
        ev(clerk, EventKind::Dropped { count: 42 }),
        ev(
            clerk,
            EventKind::Sample {
                state: ThreadState::Blocked,
                stack: sample_stack,
                monitors: vec![(
                    Monitor {
                        class: inventory,
                        hash: 0xabc,
                    },
                    1,
                )],
            },
        ),
        ev(
            main,
            EventKind::MonitorEnter {
                monitor: Monitor {
                    class: inventory,
                    hash: 0xabc,
                },
                depth: 2,
            },
        ),
        ev(
            main,
            EventKind::MonitorExit {
                monitor: Monitor {
                    class: inventory,
                    hash: 0xabc,
                },
                depth: 2,
            },
        ),
        ev(
            clerk,
            EventKind::TraceWindow {
                min_depth: 2,
                max_depth: Some(6),
                reason: WindowReason::Narrow,
                rate_per_s: 310_000,
            },
        ),
        ev(
            clerk,
            EventKind::PeriodStart {
                period: 3,
                stack: sample_stack,
            },
        ),
        ev(main, EventKind::PeriodEnd { period: 3 }),
        ev(
            main,
            EventKind::Calibration {
                record: "CALL".into(),
                cost_ps: 38_500,
            },
        ),
        ev(
            main,
            EventKind::Bytecode {
                method: check,
                bci: 5,
                insn: b.s("invokevirtual java/io/PrintStream.println:(Ljava/lang/String;)V"),
            },
        ),
        ev(
            clerk,
            EventKind::ReactionHandlers {
                samples: 480,
                handlers: vec![check],
                skipped: vec![],
            },
        ),
        ev(
            main,
            EventKind::Foreign {
                name: b.s("jdk.CPULoad"),
                fields: vec![
                    (b.s("jvmUser"), "0.25".to_string()),
                    (b.s("machineTotal"), "0.5".to_string()),
                ],
            },
        ),
        ev(
            clerk,
            EventKind::AllocSample {
                class: b.s("byte[]"),
                size: 100_016,
                stack: sample_stack,
            },
        ),
        ev(
            clerk,
            EventKind::VthreadPinned {
                stack: sample_stack,
                duration_ns: 25_000_000,
            },
        ),
        ev(
            main,
            EventKind::Demotion {
                method: check,
                rate_per_s: 2_500_000,
                mean_ns: 40,
                before_bp: 2_150,
                after_bp: 420,
                counted: true,
            },
        ),
        ev(
            main,
            EventKind::MethodCounts {
                overhead_bp: 380,
                counts: vec![(check, 1_234_567)],
            },
        ),
        ev(ThreadRef(9), EventKind::ThreadEnd),
        ev(clerk, EventKind::ThreadEnd),
    ];
    (events, b.syms)
}

fn render(format: ExportFormat, events: &[Event], syms: &SymbolTable) -> String {
    let mut out = Vec::new();
    {
        let mut w = format.writer(&mut out);
        for ev in events {
            w.write_event(ev, syms).unwrap();
        }
        w.finish().unwrap();
    }
    String::from_utf8(out).unwrap()
}

/// Compares with `tests/data/<name>`, or rewrites it under `VMVIEW_BLESS=1`.
fn assert_golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    if std::env::var_os("VMVIEW_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with VMVIEW_BLESS=1 to create it)",
            path.display()
        )
    });
    if expected != actual {
        for (i, (e, a)) in expected.lines().zip(actual.lines()).enumerate() {
            assert_eq!(e, a, "{name}: first difference at line {}", i + 1);
        }
        assert_eq!(expected, actual, "{name}: differs in length");
    }
}

#[test]
fn text_shop_every_event_type() {
    let (events, syms) = shop_trace();
    assert_golden("shop.txt", &render(ExportFormat::Text, &events, &syms));
}

#[test]
fn jsonl_shop_every_event_type() {
    let (events, syms) = shop_trace();
    assert_golden("shop.jsonl", &render(ExportFormat::Jsonl, &events, &syms));
}

/// The keys other tools rely on, per type, independently of the golden file.
#[test]
fn jsonl_keys_per_event_type() {
    let (events, syms) = shop_trace();
    let out = render(ExportFormat::Jsonl, &events, &syms);
    let common = ["id", "time_ns", "type", "thread"];
    let expect = |ty: &str| -> Vec<&str> {
        match ty {
            "THREAD_START" => vec!["daemon", "priority", "group"],
            "CLASS_LOAD" => vec!["class", "loader", "source"],
            "CALL" => vec!["class", "method", "sig", "depth", "params"],
            "THROW" => vec![
                "exception",
                "message",
                "class",
                "method",
                "sig",
                "loc",
                "catch_class",
                "catch_method",
                "catch_loc",
            ],
            "CATCH" => vec!["exception", "class", "method", "sig", "loc"],
            "MONITOR_CONTENDED_ENTER" => vec!["monitor", "owner"],
            "MONITOR_CONTENDED_ENTERED" => vec!["monitor", "wait_ns"],
            "MONITOR_WAIT" => vec!["monitor", "timeout_ms"],
            "MONITOR_WAITED" => vec!["monitor", "timed_out", "wait_ns"],
            "GC_START" => vec![],
            "GC_FINISH" => vec!["duration_ns"],
            "DROPPED" => vec!["count"],
            "SAMPLE" => vec!["state", "stack", "monitors"],
            "TRACE_WINDOW" => vec!["min_depth", "max_depth", "reason", "rate_per_s"],
            "PERIOD_START" => vec!["period", "stack"],
            "PERIOD_END" => vec!["period"],
            "CALIBRATION" => vec!["record", "cost_ps"],
            "MONITOR_ENTER" | "MONITOR_EXIT" => vec!["monitor", "depth"],
            "BYTECODE" => vec!["class", "method", "sig", "loc", "insn"],
            "REACTION_HANDLERS" => vec!["samples", "handlers", "skipped"],
            "FOREIGN" => vec!["name", "fields"],
            "ALLOC_SAMPLE" => vec!["class", "size", "stack"],
            "DEMOTION" => vec![
                "class",
                "method",
                "sig",
                "rate_per_s",
                "mean_ns",
                "before_bp",
                "after_bp",
                "counted",
            ],
            "METHOD_COUNTS" => vec!["overhead_bp", "counts"],
            "VTHREAD_PINNED" => vec!["duration_ns", "stack"],
            other => panic!("unexpected type {other}"),
        }
    };
    let mut seen = std::collections::BTreeSet::new();
    for line in out.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let obj = v.as_object().unwrap();
        let ty = obj["type"].as_str().unwrap();
        seen.insert(ty.to_string());
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        if ty == "RETURN" || ty == "THREAD_END" {
            continue; // optional keys; checked by the golden file
        }
        let mut want: Vec<&str> = common.iter().copied().chain(expect(ty)).collect();
        want.sort_unstable();
        assert_eq!(keys, want, "keys of {line}");
    }
    assert_eq!(seen.len(), vmview_format::EVENT_TYPE_NAMES.len());
}

/// Value encoding, spelled out: what a `jq` user gets for each kind of value.
#[test]
fn jsonl_values_encoding() {
    let (events, syms) = shop_trace();
    let out = render(ExportFormat::Jsonl, &events, &syms);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let call = lines
        .iter()
        .find(|l| l["type"] == "CALL" && l["method"] == "everything")
        .unwrap();
    let values: Vec<Option<&serde_json::Value>> = call["params"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.get("value"))
        .collect();
    use serde_json::json;
    let expected = [
        Some(json!(true)),
        Some(json!(-8)),
        Some(json!("\n")),
        Some(json!(300)),
        Some(json!(9_007_199_254_740_993_i64)),
        Some(json!(0.1)),
        Some(json!("NaN")),
        Some(json!(null)),
        Some(json!("int[3]")),
        Some(json!("java.lang.String[2][]")),
        Some(json!(5)),
        Some(json!("shop.Item@1b6d3586")),
        Some(json!("say \"hi\"\tnow…(+28 chars)")),
        None,
        Some(json!("x")),
    ];
    assert_eq!(values.len(), expected.len());
    for (i, (v, e)) in values.iter().zip(&expected).enumerate() {
        assert_eq!(v.cloned(), *e, "param {i}");
    }
    let types: Vec<&str> = call["params"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["type"].as_str().unwrap())
        .collect();
    assert_eq!(types[8], "int[]");
    assert_eq!(types[9], "java.lang.String[][]");
    assert_eq!(types[10], "java.lang.Integer");
    // Longs stay exact in the text of the line.
    assert!(out.contains("9007199254740993"));
    let uncaught = lines
        .iter()
        .find(|l| l["exception"] == "java.lang.IllegalStateException")
        .unwrap();
    assert!(uncaught["catch_loc"].is_null() && uncaught.get("catch_loc").is_some());
    assert_eq!(uncaught["loc"], json!({"bci": -1, "line": null}));
}
