//! What goes in comes out: every event kind, every value variant, sparse
//! ids, the header, and the symbols.

use std::io::Cursor;

use vmview_format::*;

use crate::support::*;

#[test]
fn every_event_kind_and_value_variant_round_trips() {
    let events = all_kinds();
    let bytes = write(&symbols(), &events, DEFAULT_CHUNK_BYTES);
    let (back, diags, syms) = read(&bytes);
    assert_eq!(diags, vec![]);
    assert_eq!(back.len(), events.len());
    for (a, b) in events.iter().zip(&back) {
        assert_eq!(a, b);
    }
    // Every kind really was covered.
    let mut names: Vec<&str> = back.iter().map(|e| e.kind.type_name()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), EVENT_TYPE_NAMES.len());
    for e in &back {
        assert_eq!(EVENT_TYPE_NAMES[e.kind.type_index()], e.kind.type_name());
    }
    // And the symbols needed to show them came along.
    assert_eq!(syms.thread_name(T_WORKER), "worker-1 «ü»");
    let add = syms.method(M_ADD).expect("method symbol");
    assert_eq!(syms.string(add.class), "shop.Inventory");
    assert_eq!(add.param_names, vec![S_COUNT, S_NAME]);
    assert_eq!(syms.string(S_ISE), "java.lang.IllegalStateException");
}

#[test]
fn every_event_round_trips_alone_in_its_own_chunk() {
    // With a 1-byte chunk target every event starts a fresh chunk, so the
    // implicit fields fall back to their explicit forms.
    let events = all_kinds();
    let bytes = write(&symbols(), &events, 1);
    let (back, diags, _) = read(&bytes);
    assert_eq!(diags, vec![]);
    assert_eq!(back, events);
    assert_eq!(chunk_infos(&bytes).len(), events.len());
}

#[test]
fn nan_keeps_its_bits() {
    let nan = f64::from_bits(0x7ff8_dead_beef_0001);
    let fnan = f32::from_bits(0x7fc0_0abc);
    let ev = Event {
        id: 0,
        time_ns: 0,
        thread: T_MAIN,
        kind: EventKind::Call {
            metrics: Default::default(),
            method: M_ADD,
            depth: 1,
            caller: None,
            params: vec![Value::Double(nan), Value::Float(fnan)],
        },
    };
    let (back, _, _) = read(&write(&symbols(), &[ev], 1024));
    let EventKind::Call { params, .. } = &back[0].kind else {
        panic!("not a call: {:?}", back[0]);
    };
    match (&params[0], &params[1]) {
        (Value::Double(d), Value::Float(f)) => {
            assert_eq!(d.to_bits(), nan.to_bits());
            assert_eq!(f.to_bits(), fnan.to_bits());
        }
        other => panic!("wrong values {other:?}"),
    }
}

#[test]
fn header_round_trips() {
    let bytes = write(&symbols(), &all_kinds(), 4096);
    let r = TraceReader::new(Cursor::new(&bytes)).expect("trace");
    assert_eq!(r.header(), &header());
}

#[test]
fn sparse_ids_are_kept() {
    let ids = [
        7u64,
        8,
        1_000,
        1_001,
        1_002,
        5_000_000_000,
        u64::MAX - 1,
        u64::MAX,
    ];
    let events: Vec<Event> = ids
        .iter()
        .map(|&id| Event {
            id,
            time_ns: id / 3,
            thread: T_MAIN,
            kind: EventKind::GcStart,
        })
        .collect();
    let bytes = write(&symbols(), &events, 32);
    let (back, diags, _) = read(&bytes);
    assert_eq!(diags, vec![]);
    assert_eq!(back, events);
    let mut r = TraceReader::new(Cursor::new(&bytes)).expect("trace");
    r.seek_to_event(5_000_000_000).expect("seek");
    let after: Vec<u64> = r.by_ref().map(|e| e.id).collect();
    assert!(after.first().is_some_and(|&i| i <= 5_000_000_000));
    assert!(after.contains(&5_000_000_000));
    assert!(matches!(
        r.seek_to_event(6),
        Err(FormatError::NoSuchEvent {
            id: 6,
            first: 7,
            last: u64::MAX
        })
    ));
}

#[test]
fn implicit_fields_cost_nothing_on_a_plain_call_return_pair() {
    // A CALL at the expected depth and its RETURN, same thread, consecutive
    // ids: tag + time delta + method for the CALL, tag + time delta for the
    // RETURN (method, depth and elapsed time are predicted).
    let pair = |first_id: u64, t: u64| {
        [
            Event {
                id: first_id,
                time_ns: t,
                thread: T_MAIN,
                kind: EventKind::Call {
                    metrics: Default::default(),
                    method: M_ADD,
                    depth: 1,
                    caller: None,
                    params: vec![],
                },
            },
            Event {
                id: first_id + 1,
                time_ns: t + 50,
                thread: T_MAIN,
                kind: EventKind::Return {
                    metrics: Default::default(),
                    method: M_ADD,
                    depth: 1,
                    outcome: Outcome::Void,
                    elapsed_ns: 50,
                },
            },
        ]
    };
    let one: Vec<Event> = pair(0, 100).into_iter().collect();
    let two: Vec<Event> = pair(0, 100).into_iter().chain(pair(2, 250)).collect();
    let a = chunk_infos(&write(&symbols(), &one, 1 << 20));
    let b = chunk_infos(&write(&symbols(), &two, 1 << 20));
    // CALL: tag, time delta 100 (zigzag 200, two bytes), method 0.
    // RETURN: tag, time delta 50 (zigzag 100, one byte).
    assert_eq!(
        b[0].len - a[0].len,
        4 + 2,
        "bytes of the second CALL+RETURN pair"
    );
    assert_eq!(read(&write(&symbols(), &two, 1 << 20)).0, two);
}

#[test]
fn writer_rejects_ids_that_do_not_increase() {
    let mut w = TraceWriter::new(Vec::new(), &header()).expect("header");
    for s in symbols() {
        w.define(s);
    }
    let ev = |id| Event {
        id,
        time_ns: 0,
        thread: T_MAIN,
        kind: EventKind::GcStart,
    };
    w.write(&ev(5)).expect("first");
    assert!(matches!(w.write(&ev(5)), Err(FormatError::InvalidWrite(_))));
    assert!(matches!(w.write(&ev(4)), Err(FormatError::InvalidWrite(_))));
    w.write(&ev(6)).expect("still usable");
    assert_eq!(w.events_written(), 2);
    let (back, diags, _) = read(&w.finish().expect("finish"));
    assert_eq!(diags, vec![]);
    assert_eq!(back.iter().map(|e| e.id).collect::<Vec<_>>(), vec![5, 6]);
}

#[test]
fn writer_rejects_undefined_symbols_and_stays_consistent() {
    let mut w = TraceWriter::with_chunk_size(Vec::new(), &header(), 64).expect("header");
    for s in symbols() {
        w.define(s);
    }
    // A method whose parameter name was never defined.
    w.define(Symbol::Method(MethodSymbol {
        id: MethodId(9),
        class: S_INVENTORY,
        name: S_ADD,
        sig: S_ADD_SIG,
        param_names: vec![StringId(999)],
        modifiers: 0,
    }));
    let call = |id, thread, method, params| Event {
        id,
        time_ns: id * 10,
        thread,
        kind: EventKind::Call {
            metrics: Default::default(),
            method,
            depth: 1,
            caller: None,
            params,
        },
    };
    let bad = [
        call(1, T_MAIN, MethodId(77), vec![]),
        call(2, ThreadRef(9), M_ADD, vec![]),
        call(3, T_MAIN, MethodId(9), vec![]),
        call(
            4,
            T_MAIN,
            M_ADD,
            vec![Value::Object {
                class: StringId(500),
                hash: 1,
            }],
        ),
        call(5, ThreadRef(MAX_THREAD_REF), M_ADD, vec![]),
    ];
    for ev in &bad {
        match w.write(ev) {
            Err(FormatError::InvalidWrite(msg)) => assert!(!msg.is_empty()),
            other => panic!("{ev:?} was accepted: {other:?}"),
        }
    }
    let mut deep = Value::Int(1);
    for _ in 0..20 {
        deep = Value::Boxed {
            class: S_INTEGER,
            value: Box::new(deep),
        };
    }
    assert!(w.write(&call(6, T_MAIN, M_ADD, vec![deep])).is_err());
    // Failed writes leave no trace in the file; the next events are fine.
    let good = [
        call(10, T_MAIN, M_ADD, vec![Value::Int(3)]),
        call(11, T_WORKER, M_MAIN, vec![]),
    ];
    for ev in &good {
        w.write(ev).expect("good event");
    }
    assert_eq!(w.events_written(), 2);
    let (back, diags, _) = read(&w.finish().expect("finish"));
    assert_eq!(diags, vec![]);
    assert_eq!(back, good);
}

#[test]
fn redefining_a_symbol_takes_effect_in_the_next_chunk_that_uses_it() {
    let mut w = TraceWriter::with_chunk_size(Vec::new(), &header(), 1).expect("header");
    for s in symbols() {
        w.define(s);
    }
    let ev = |id| Event {
        id,
        time_ns: id,
        thread: T_MAIN,
        kind: EventKind::GcStart,
    };
    w.write(&ev(1)).expect("write");
    w.define(Symbol::String {
        id: S_THREAD_MAIN,
        text: "main-renamed".into(),
    });
    w.write(&ev(2)).expect("write");
    let bytes = w.finish().expect("finish");
    let mut r = TraceReader::new(Cursor::new(&bytes)).expect("trace");
    r.next_event().expect("event 1");
    assert_eq!(r.symbols().thread_name(T_MAIN), "main");
    r.next_event().expect("event 2");
    assert_eq!(r.symbols().thread_name(T_MAIN), "main-renamed");
}

#[test]
fn a_repeated_stack_costs_a_few_bytes_per_sample() {
    // SAMPLE events name their stack by handle, so the frames are written
    // once per chunk, not once per sample.
    let events: Vec<Event> = (0..1000u64)
        .map(|i| Event {
            id: i,
            time_ns: i * 10_000_000,
            thread: T_WORKER,
            kind: EventKind::Sample {
                state: ThreadState::Run,
                stack: STACK_WORKER,
                monitors: vec![],
            },
        })
        .collect();
    let bytes = write(&symbols(), &events, DEFAULT_CHUNK_BYTES);
    let (back, diags, syms) = read(&bytes);
    assert_eq!(diags, vec![]);
    assert_eq!(back, events);
    assert_eq!(syms.stack(STACK_WORKER).map(|s| s.frames.len()), Some(3));
    // Tag, a 4-byte time delta (10 ms), state, stack handle, monitor count:
    // 8 bytes, plus the file header and the one stack record spread out.
    let per_sample = bytes.len() as f64 / 1000.0;
    assert!(per_sample < 9.0, "{per_sample} bytes per sample");
}

#[test]
fn metrics_cost_nothing_when_absent_and_are_deltas_when_present() {
    let call = |id: u64, t: u64, metrics: Metrics| Event {
        id,
        time_ns: t,
        thread: T_MAIN,
        kind: EventKind::Call {
            metrics,
            method: M_ADD,
            depth: 1,
            caller: None,
            params: vec![],
        },
    };
    let ret = |id: u64, t: u64, metrics: Metrics| Event {
        id,
        time_ns: t,
        thread: T_MAIN,
        kind: EventKind::Return {
            metrics,
            method: M_ADD,
            depth: 1,
            outcome: Outcome::Void,
            elapsed_ns: 10,
        },
    };
    let m = |cpu: u64, alloc: u64| Metrics {
        cpu_ns: Some(cpu),
        alloc_bytes: Some(alloc),
    };
    let size = |events: &[Event]| write(&symbols(), events, DEFAULT_CHUNK_BYTES).len();
    // A thread 1 s into its life that has allocated 100 MB: the first pair
    // in the chunk pays for the absolute values, the next ones only for
    // small deltas (CPU +40 ns, +24 bytes per call).
    let plain: Vec<Event> = (0..200)
        .flat_map(|i| {
            [
                call(2 * i, 100 * i, Metrics::NONE),
                ret(2 * i + 1, 100 * i + 10, Metrics::NONE),
            ]
        })
        .collect();
    let with: Vec<Event> = (0..200)
        .flat_map(|i| {
            [
                call(
                    2 * i,
                    100 * i,
                    m(1_000_000_000 + 80 * i, 100_000_000 + 48 * i),
                ),
                ret(
                    2 * i + 1,
                    100 * i + 10,
                    m(1_000_000_000 + 80 * i + 40, 100_000_000 + 48 * i + 24),
                ),
            ]
        })
        .collect();
    let extra = size(&with) - size(&plain);
    // Per event: the extras byte and two one-byte deltas, plus the first
    // event's absolute values once.
    assert!(extra <= 400 * 3 + 16, "{extra} extra bytes for 400 events");
    let (back, diags, _) = read(&write(&symbols(), &with, DEFAULT_CHUNK_BYTES));
    assert_eq!(diags, vec![]);
    assert_eq!(back, with);
}

#[test]
fn monitor_enter_at_the_current_depth_leaves_the_depth_out() {
    let mon = Monitor {
        class: S_OBJECT,
        hash: 7,
    };
    let ev = |id: u64, kind: EventKind| Event {
        id,
        time_ns: id,
        thread: T_MAIN,
        kind,
    };
    let call = ev(
        0,
        EventKind::Call {
            metrics: Metrics::NONE,
            method: M_ADD,
            depth: 4,
            caller: None,
            params: vec![],
        },
    );
    let implicit = vec![
        call.clone(),
        ev(
            1,
            EventKind::MonitorEnter {
                monitor: mon,
                depth: 4,
            },
        ),
    ];
    let explicit = vec![
        call,
        ev(
            1,
            EventKind::MonitorEnter {
                monitor: mon,
                depth: 2,
            },
        ),
    ];
    let a = write(&symbols(), &implicit, DEFAULT_CHUNK_BYTES);
    let b = write(&symbols(), &explicit, DEFAULT_CHUNK_BYTES);
    assert_eq!(b.len(), a.len() + 1, "one svarint for the depth difference");
    assert_eq!(read(&a).0, implicit);
    assert_eq!(read(&b).0, explicit);
}

#[test]
fn a_bytecode_trace_costs_a_few_bytes_per_instruction() {
    // BYTECODE names its instruction text by string handle and leaves out
    // the method when it is that of the thread's previous BYTECODE.
    let events: Vec<Event> = (0..1000u64)
        .map(|i| Event {
            id: i,
            time_ns: i * 100,
            thread: T_WORKER,
            kind: EventKind::Bytecode {
                method: M_ADD,
                bci: (i % 20) as u32,
                insn: S_ITEM,
            },
        })
        .collect();
    let bytes = write(&symbols(), &events, DEFAULT_CHUNK_BYTES);
    let (back, diags, _) = read(&bytes);
    assert_eq!(diags, vec![]);
    assert_eq!(back, events);
    // Tag, a 2-byte time delta, offset, string handle: 5 bytes.
    let per_insn = bytes.len() as f64 / 1000.0;
    assert!(per_insn < 5.5, "{per_insn} bytes per instruction");
}
