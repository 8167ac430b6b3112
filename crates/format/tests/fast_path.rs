//! `TraceWriter::write_call`, `write_call_args` and `write_return` (the agent's writer
//! thread's fast path, given an event's fields) write exactly the bytes
//! `write` writes for the same events, in both format versions.

use vmview_format::*;

use crate::{stream, support};

/// Writes `events`, CALLs and RETURNs through the fast path where it
/// applies when `fast`; the result of each write, and the bytes.
fn encode(
    symbols: &[Symbol],
    events: &[Event],
    chunk_bytes: usize,
    version: u16,
    fast: bool,
) -> (Vec<String>, Vec<u8>) {
    let mut w = TraceWriter::with_version(Vec::new(), &support::header(), chunk_bytes, version)
        .expect("header");
    for s in symbols {
        w.define(s.clone());
    }
    let no_metrics = |m: &Metrics| m.cpu_ns.is_none() && m.alloc_bytes.is_none();
    let mut results = Vec::new();
    for e in events {
        let r = match &e.kind {
            EventKind::Call {
                method,
                depth,
                caller: None,
                params,
                metrics,
            } if fast && no_metrics(metrics) => {
                w.write_call_args(e.id, e.time_ns, e.thread, *method, *depth, params)
            }
            EventKind::Return {
                method,
                depth,
                outcome,
                elapsed_ns,
                metrics,
            } if fast && no_metrics(metrics) => w.write_return(
                e.id,
                e.time_ns,
                e.thread,
                *method,
                *depth,
                *elapsed_ns,
                outcome,
            ),
            _ => w.write(e),
        };
        results.push(match r {
            Ok(()) => "ok".to_string(),
            Err(e) => e.to_string(),
        });
    }
    (results, w.finish().expect("finish"))
}

fn same_bytes(symbols: &[Symbol], events: &[Event], chunk_bytes: usize) {
    for version in [FORMAT_VERSION, FORMAT_VERSION_2] {
        let slow = encode(symbols, events, chunk_bytes, version, false);
        let fast = encode(symbols, events, chunk_bytes, version, true);
        assert_eq!(slow.0, fast.0, "version {version}: results differ");
        assert!(
            slow.1 == fast.1,
            "version {version}, chunks of {chunk_bytes}: the bytes differ"
        );
    }
}

#[test]
fn a_realistic_stream_encodes_the_same_through_the_fast_path() {
    let rec = stream::realistic(60_000, 7);
    let calls = rec
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Call { .. } | EventKind::Return { .. }))
        .count();
    assert!(calls > 50_000, "the stream is mostly calls: {calls}");
    for chunk_bytes in [2_000, DEFAULT_CHUNK_BYTES] {
        same_bytes(&rec.symbols, &rec.events, chunk_bytes);
    }
}

#[test]
fn every_kind_and_value_encodes_the_same_through_the_fast_path() {
    // Sparse ids, times going back, every outcome and value, depths that
    // are not the predicted ones, RETURNs without their CALL.
    let events = support::all_kinds();
    for chunk_bytes in [1, 64, DEFAULT_CHUNK_BYTES] {
        same_bytes(&support::symbols(), &events, chunk_bytes);
    }
    let (events, _) = support::multi_chunk(5_000, 1_000);
    same_bytes(&support::symbols(), &events, 1_000);
}

#[test]
fn calls_with_arguments_encode_the_same_through_the_fast_path() {
    let call = |id: u64, thread: ThreadRef, depth: u32, params: Vec<Value>| Event {
        id,
        time_ns: 1_000 + 10 * id,
        thread,
        kind: EventKind::Call {
            method: support::M_ADD,
            depth,
            caller: None,
            params,
            metrics: Metrics::NONE,
        },
    };
    let events = vec![
        call(1, support::T_MAIN, 1, support::all_values()),
        // Not the predicted depth; another thread; a sparse id.
        call(2, support::T_MAIN, 5, vec![Value::Long(-1), Value::Int(2)]),
        call(3, support::T_WORKER, 1, vec![Value::Null]),
        call(7, support::T_MAIN, 6, support::all_values()),
        // An object of a class never defined: refused as `write` refuses.
        call(
            8,
            support::T_MAIN,
            7,
            vec![Value::Object {
                class: StringId(99_999),
                hash: 1,
            }],
        ),
        call(9, support::T_MAIN, 7, vec![Value::Boolean(true)]),
    ];
    for chunk_bytes in [1, 64, DEFAULT_CHUNK_BYTES] {
        same_bytes(&support::symbols(), &events, chunk_bytes);
    }
    let (results, _) = encode(&support::symbols(), &events, DEFAULT_CHUNK_BYTES, 1, true);
    assert_eq!(results.iter().filter(|r| *r == "ok").count(), 5);
}

#[test]
fn the_fast_path_refuses_what_write_refuses() {
    let call = |id: u64, thread: u32, method: u32| Event {
        id,
        time_ns: 1_000 + id,
        thread: ThreadRef(thread),
        kind: EventKind::Call {
            method: MethodId(method),
            depth: 1,
            caller: None,
            params: Vec::new(),
            metrics: Metrics::NONE,
        },
    };
    let ret = |id: u64, class: u32| Event {
        id,
        time_ns: 2_000 + id,
        thread: support::T_MAIN,
        kind: EventKind::Return {
            method: support::M_ADD,
            depth: 1,
            outcome: Outcome::Exception {
                class: StringId(class),
            },
            elapsed_ns: 5,
            metrics: Metrics::NONE,
        },
    };
    let m = support::M_ADD.0;
    let events = vec![
        call(5, 0, m),
        call(5, 0, m),              // the id does not increase
        call(6, MAX_THREAD_REF, m), // thread handle too large
        call(7, 0, 99_999),         // method never defined
        ret(8, 99_999),             // exception class never defined
        ret(9, support::S_ISE.0),
    ];
    same_bytes(&support::symbols(), &events, DEFAULT_CHUNK_BYTES);
    let (results, _) = encode(&support::symbols(), &events, DEFAULT_CHUNK_BYTES, 1, true);
    assert_eq!(
        results.iter().filter(|r| *r == "ok").count(),
        2,
        "{results:?}"
    );
}
