//! Format version 2 (docs/FORMAT.md, "Version 2"): per-thread streams in
//! each chunk, merged by time on reading, with implicit dense ids. What a
//! version 1 trace of the same events reads as, a version 2 trace must read
//! as too (per thread, in order), through the same `TraceReader` and
//! `ChunkFile`; damage stays a diagnostic, never a panic.

use std::io::Cursor;

use vmview_format::parallel::ChunkFile;
use vmview_format::*;

use crate::support::*;

fn write_v2(symbols: &[Symbol], events: &[Event], chunk_bytes: usize) -> Vec<u8> {
    let mut w = TraceWriter::with_version(Vec::new(), &header(), chunk_bytes, FORMAT_VERSION_2)
        .expect("header");
    for s in symbols {
        w.define(s.clone());
    }
    for e in events {
        w.write(e).expect("write");
    }
    w.finish().expect("finish")
}

/// `events` with dense ids and strictly increasing times, as the agent's
/// writer hands them over.
fn dense(events: &[Event]) -> Vec<Event> {
    events
        .iter()
        .enumerate()
        .map(|(i, e)| Event {
            id: 100 + i as u64,
            time_ns: 5_000 + i as u64 * 10,
            ..e.clone()
        })
        .collect()
}

fn per_thread(events: &[Event]) -> Vec<(ThreadRef, Vec<(u64, EventKind)>)> {
    let mut by: std::collections::BTreeMap<u32, Vec<(u64, EventKind)>> = Default::default();
    for e in events {
        by.entry(e.thread.0)
            .or_default()
            .push((e.time_ns, e.kind.clone()));
    }
    by.into_iter().map(|(t, v)| (ThreadRef(t), v)).collect()
}

fn temp_file(bytes: &[u8], name: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("vmview-v2-{}-{name}.vmv", std::process::id()));
    std::fs::write(&path, bytes).expect("temp file");
    path
}

#[test]
fn every_kind_reads_back_the_same_from_version_1_and_version_2() {
    for chunk_bytes in [1, 200, DEFAULT_CHUNK_BYTES] {
        let events = dense(&all_kinds());
        let (v1, d1, _) = read(&write(&symbols(), &events, chunk_bytes));
        let bytes = write_v2(&symbols(), &events, chunk_bytes);
        let (v2, d2, syms) = read(&bytes);
        assert_eq!(d1, vec![]);
        assert_eq!(d2, vec![], "chunk size {chunk_bytes}");
        // Times increase, so the merge by time gives the input order back,
        // ids included.
        assert_eq!(v2, events, "chunk size {chunk_bytes}");
        assert_eq!(v1, v2);
        assert_eq!(syms.thread_name(T_WORKER), "worker-1 «ü»");
        let r = TraceReader::new(Cursor::new(&bytes)).expect("a trace");
        assert_eq!(r.header().version, 2);
    }
}

#[test]
fn times_that_go_back_keep_each_threads_order_and_ids_increase() {
    // all_kinds has times that go back and sparse ids: version 2 keeps
    // every thread's events in their order and renumbers densely per chunk
    // (an id gap in the input starts a chunk, whose first id it keeps).
    let events = all_kinds();
    let bytes = write_v2(&symbols(), &events, DEFAULT_CHUNK_BYTES);
    let (back, diags, _) = read(&bytes);
    assert_eq!(diags, vec![]);
    assert_eq!(per_thread(&back), per_thread(&events));
    assert!(back.windows(2).all(|w| w[0].id < w[1].id), "ids increase");
    let first: Vec<u64> = chunk_infos(&bytes).iter().map(|c| c.first_id).collect();
    for f in [0u64, 10, 100, 1 << 40] {
        assert!(first.contains(&f), "a chunk starts at id {f}: {first:?}");
    }
}

#[test]
fn a_chunk_merges_its_thread_streams_by_time_ties_to_the_lower_thread() {
    let call = |m| EventKind::Call {
        metrics: Default::default(),
        method: m,
        depth: 1,
        caller: None,
        params: vec![],
    };
    let ret = |m| EventKind::Return {
        metrics: Default::default(),
        method: m,
        depth: 1,
        outcome: Outcome::Void,
        elapsed_ns: 30,
    };
    // Written in an order that is not the merge order: worker first, main
    // second, the same times on both threads.
    let input = [
        (T_WORKER, 10, call(M_ADD)),
        (T_MAIN, 10, call(M_MAIN)),
        (T_WORKER, 40, ret(M_ADD)),
        (T_MAIN, 40, ret(M_MAIN)),
    ];
    let events: Vec<Event> = input
        .iter()
        .enumerate()
        .map(|(i, (t, time, k))| Event {
            id: 7 + i as u64,
            time_ns: *time,
            thread: *t,
            kind: k.clone(),
        })
        .collect();
    let (back, diags, _) = read(&write_v2(&symbols(), &events, DEFAULT_CHUNK_BYTES));
    assert_eq!(diags, vec![]);
    let got: Vec<(u64, u32, u64)> = back.iter().map(|e| (e.id, e.thread.0, e.time_ns)).collect();
    assert_eq!(
        got,
        vec![(7, 0, 10), (8, 1, 10), (9, 0, 40), (10, 1, 40)],
        "time order, ties to thread 0, ids dense from the chunk's first"
    );
    // Implicit fields were predicted per stream: methods and elapsed times.
    assert_eq!(back[2].kind, ret(M_MAIN));
    assert_eq!(back[3].kind, ret(M_ADD));
}

#[test]
fn a_version_2_call_return_pair_costs_what_it_costs_in_version_1() {
    // Two interleaved threads: version 1 pays a thread handle at each
    // switch, version 2 longer per-thread time deltas and a directory;
    // neither may cost more than a few percent over the other.
    let (events, _) = multi_chunk(20_000, DEFAULT_CHUNK_BYTES);
    let events: Vec<Event> = events
        .into_iter()
        .enumerate()
        .map(|(i, mut e)| {
            e.id = i as u64;
            if let EventKind::Call { params, .. } = &mut e.kind {
                params.clear();
            }
            e
        })
        .collect();
    let v1 = write(&symbols(), &events, DEFAULT_CHUNK_BYTES);
    let v2 = write_v2(&symbols(), &events, DEFAULT_CHUNK_BYTES);
    assert!(
        v2.len() * 100 <= v1.len() * 102,
        "v2 {} bytes, v1 {}",
        v2.len(),
        v1.len()
    );
    let (back, diags, _) = read(&v2);
    assert_eq!(diags, vec![]);
    assert_eq!(back, events);
}

#[test]
fn the_fast_scan_and_every_core_read_version_2_as_the_full_decode_does() {
    // Bodies (parameters, values, metrics) are length-prefixed in version 2
    // and stepped over by the scan: it must still agree with the full decode.
    let base = dense(&all_kinds());
    let n = base.len();
    let events: Vec<Event> = (0..30)
        .flat_map(|r| {
            base.iter().enumerate().map(move |(k, e)| Event {
                id: (r * n + k) as u64,
                time_ns: 1_000 + (r * n + k) as u64 * 7,
                ..e.clone()
            })
        })
        .collect();
    let bytes = write_v2(&symbols(), &events, 400);
    let path = temp_file(&bytes, "scan");
    let cf = ChunkFile::open(&path)
        .expect("open")
        .expect("a clean trace");
    assert!(cf.chunks().len() > 5, "many chunks");
    let mut all = Vec::new();
    for i in 0..cf.chunks().len() {
        let mut full = Vec::new();
        let mut syms = SymbolTable::default();
        cf.for_each_event(i, false, &mut syms, |ev, _| full.push(ev))
            .expect("full decode");
        let mut scanned = Vec::new();
        let mut syms = SymbolTable::default();
        cf.for_each_scanned(i, &mut syms, |ev, _| scanned.push(ev))
            .expect("scan");
        assert_eq!(scanned.len(), full.len(), "chunk {i}");
        for (s, ev) in scanned.iter().zip(&full) {
            assert_eq!(s.id(), ev.id);
            match (s, &ev.kind) {
                (Scanned::Head { method, ret, .. }, EventKind::Call { method: m, .. }) => {
                    assert!(!ret);
                    assert_eq!(method, m);
                }
                (Scanned::Head { method, ret, .. }, EventKind::Return { method: m, .. }) => {
                    assert!(ret);
                    assert_eq!(method, m);
                }
                (Scanned::Full(e), _) => assert_eq!(e.id, ev.id),
                (other, kind) => panic!("{other:?} for {kind:?}"),
            }
        }
        all.extend(full);
    }
    assert_eq!(all, events);
    std::fs::remove_file(&path).ok();
}

#[test]
fn seeking_to_an_event_works_in_version_2() {
    let (events, _) = multi_chunk(5_000, 2_000);
    let events: Vec<Event> = events
        .into_iter()
        .enumerate()
        .map(|(i, mut e)| {
            e.id = i as u64;
            e
        })
        .collect();
    let bytes = write_v2(&symbols(), &events, 2_000);
    let mut r = TraceReader::new(Cursor::new(&bytes)).expect("a trace");
    assert!(r.index().expect("index").chunks.len() > 10);
    for want in [0u64, 1, 777, 2_500, 4_999] {
        // The reader starts at the chunk holding the id.
        r.seek_to_event(want).expect("seek");
        let ev = r.by_ref().find(|e| e.id >= want).expect("the event");
        assert_eq!(ev, events[want as usize]);
    }
}

#[test]
fn a_version_2_trace_cut_anywhere_keeps_its_whole_chunks() {
    // What a SIGKILL leaves: every complete chunk reads, the rest is one
    // truncated-tail diagnostic, nothing panics.
    let (events, _) = multi_chunk(3_000, 1_500);
    let events: Vec<Event> = events
        .into_iter()
        .enumerate()
        .map(|(i, mut e)| {
            e.id = i as u64;
            e
        })
        .collect();
    let bytes = write_v2(&symbols(), &events, 1_500);
    let infos = chunk_infos(&bytes);
    for cut in (0..bytes.len()).step_by(997) {
        let Ok(mut r) = TraceReader::new(Cursor::new(&bytes[..cut])) else {
            continue;
        };
        let back: Vec<Event> = r.by_ref().collect();
        let whole = infos
            .iter()
            .filter(|c| c.offset + c.len <= cut as u64)
            .map(|c| c.event_count as usize)
            .sum::<usize>();
        assert_eq!(back.len(), whole, "cut at {cut}");
        assert_eq!(back[..], events[..whole]);
    }
}

#[test]
fn damaged_version_2_payloads_are_bad_chunks_never_panics() {
    // Flip bytes inside payloads and fix the checksums, so the decoder's own
    // checks (directory, streams, bodies) are what stands between the bytes
    // and a panic; the chunks around a damaged one still read.
    let events = dense(&all_kinds());
    let events: Vec<Event> = (0..8)
        .flat_map(|r| {
            events.iter().map(move |e| Event {
                id: e.id + r * 1_000,
                time_ns: e.time_ns + r * 100_000,
                ..e.clone()
            })
        })
        .collect();
    let bytes = write_v2(&symbols(), &events, 600);
    let infos = chunk_infos(&bytes);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rng = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut bad_chunks = 0;
    for _ in 0..400 {
        let mut b = bytes.clone();
        let c = &infos[(rng() % infos.len() as u64) as usize];
        let payload = c.offset as usize + 60..(c.offset + c.len) as usize;
        let at = payload.start + (rng() % payload.len() as u64) as usize;
        b[at] ^= 1 << (rng() % 8);
        let crc = crc32c::crc32c(&b[payload.clone()]);
        let h = c.offset as usize;
        b[h + 52..h + 56].copy_from_slice(&crc.to_le_bytes());
        let hcrc = crc32c::crc32c(&b[h..h + 56]);
        b[h + 56..h + 60].copy_from_slice(&hcrc.to_le_bytes());
        let (back, diags, _) = read(&b);
        if diags.iter().any(|d| d.kind == DiagnosticKind::BadChunk) {
            bad_chunks += 1;
        }
        // Other chunks are untouched: their events all come back.
        let other: usize = infos
            .iter()
            .filter(|o| o.offset != c.offset)
            .map(|o| o.event_count as usize)
            .sum();
        let outside: Vec<&Event> = back
            .iter()
            .filter(|e| e.id < c.first_id || e.id > c.last_id)
            .collect();
        assert!(outside.len() >= other, "{} of {other}", outside.len());
    }
    assert!(bad_chunks > 50, "damage is detected: {bad_chunks} of 400");
}

#[test]
fn a_version_1_fixture_still_reads() {
    // The worked example of docs/FORMAT.md: version 1 bytes fixed in the
    // document, read by the reader that also reads version 2.
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/FORMAT.md"))
        .expect("docs/FORMAT.md");
    let bytes = crate::example::bytes_in_doc(&doc);
    let mut r = TraceReader::new(Cursor::new(&bytes[..])).expect("a version 1 trace");
    assert_eq!(r.header().version, 1);
    assert_eq!(r.header().pid, 4242);
    let back: Vec<Event> = r.by_ref().collect();
    assert_eq!(r.diagnostics(), &[]);
    assert_eq!(back.len(), 2);
    assert_eq!((back[0].id, back[0].time_ns), (1, 1_000));
    match &back[1].kind {
        EventKind::Return { elapsed_ns, .. } => assert_eq!(*elapsed_ns, 250),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_thread_bit_inside_the_last_stream_is_a_bad_chunk() {
    // The stream read last is decoded without the merge's look-ahead,
    // which is where the thread and id bits were first checked: a record
    // there that names a thread must still be refused, not switch threads.
    let ev = |id, time_ns, kind| Event {
        id,
        time_ns,
        thread: T_MAIN,
        kind,
    };
    let events = vec![
        ev(
            0,
            1_000,
            EventKind::Call {
                metrics: Default::default(),
                method: M_ADD,
                depth: 1,
                caller: None,
                params: vec![],
            },
        ),
        ev(
            1,
            1_010,
            EventKind::Return {
                metrics: Default::default(),
                method: M_ADD,
                depth: 1,
                outcome: Outcome::Void,
                elapsed_ns: 10,
            },
        ),
    ];
    let mut b = write_v2(&symbols(), &events, DEFAULT_CHUNK_BYTES);
    let c = &chunk_infos(&b)[0];
    let (h, end) = (c.offset as usize, (c.offset + c.len) as usize);
    let n = end - h - 60;
    let payload = &b[h + 60..end];
    let dir_len = u32::from_le_bytes(payload[n - 4..].try_into().unwrap()) as usize;
    let dir_at = n - 4 - dir_len;
    // Directory: 1 stream, thread 0, 2 events, then the stream's length.
    assert_eq!(&payload[dir_at..dir_at + 3], &[1, 0, 2]);
    // The RETURN is the stream's last two bytes: tag 0x07, delta +10.
    let ret_at = h + 60 + dir_at - 2;
    assert_eq!(&b[ret_at..ret_at + 2], &[0x07, 20]);
    b[ret_at] |= 0x20;
    let crc = crc32c::crc32c(&b[h + 60..end]);
    b[h + 52..h + 56].copy_from_slice(&crc.to_le_bytes());
    let hcrc = crc32c::crc32c(&b[h..h + 56]);
    b[h + 56..h + 60].copy_from_slice(&hcrc.to_le_bytes());
    let (back, diags, _) = read(&b);
    assert_eq!(back, events[..1], "the events before the damage stay read");
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert_eq!(diags[0].kind, DiagnosticKind::BadChunk);
    assert!(diags[0].message.contains("thread"), "{}", diags[0].message);
}

#[test]
fn frame_types_of_a_stack_read_back_from_both_versions() {
    // The STACK record with K carries one type byte per frame; without a
    // known type the record (and so the trace) is what it was before.
    let events = dense(&all_kinds());
    let plain = symbols();
    let typed: Vec<Symbol> = plain
        .iter()
        .map(|s| match s {
            Symbol::Stack(st) if st.id == STACK_WORKER => {
                let mut st = st.clone();
                st.types = (0..st.frames.len())
                    .map(|i| [FrameType::Inlined, FrameType::Compiled, FrameType::Native][i % 3])
                    .collect();
                Symbol::Stack(st)
            }
            other => other.clone(),
        })
        .collect();
    let frames = match typed.iter().find_map(|s| match s {
        Symbol::Stack(st) if st.id == STACK_WORKER => Some(st.clone()),
        _ => None,
    }) {
        Some(st) => st,
        None => panic!("the fixture has the worker's stack"),
    };
    assert!(frames.frames.len() >= 2, "a stack of several frames");
    for v2 in [false, true] {
        let write = |syms: &[Symbol]| {
            if v2 {
                write_v2(syms, &events, DEFAULT_CHUNK_BYTES)
            } else {
                write(syms, &events, DEFAULT_CHUNK_BYTES)
            }
        };
        let (with, without) = (write(&typed), write(&plain));
        let (back, diags, syms) = read(&with);
        assert_eq!(diags, vec![], "version 2: {v2}");
        let (back_plain, _, syms_plain) = read(&without);
        assert_eq!(back, back_plain, "the events are the same");
        assert_eq!(syms.stack(STACK_WORKER), Some(&frames), "version 2: {v2}");
        assert!(syms_plain
            .stack(STACK_WORKER)
            .is_some_and(|s| s.types.is_empty()));
        // One chunk: the typed trace is the untyped one plus a byte per frame.
        assert_eq!(
            with.len(),
            without.len() + frames.frames.len(),
            "version 2: {v2}"
        );
    }
}
