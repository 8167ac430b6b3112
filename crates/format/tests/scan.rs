//! The fast scan (`ChunkFile::for_each_scanned`) against the full decode:
//! the same events in the same order, a CALL or RETURN reduced to its id,
//! thread, method and direction, everything else as a lazy decode gives it.
//! A filter's fast path decides from these heads, so any drift here would
//! change what `search --count` and `filter` select.

use vmview_format::parallel::ChunkFile;
use vmview_format::*;

use crate::support::*;

/// Every event kind, repeated under fresh ids, so chunks hold
/// many kinds with the per-thread state carried across them.
fn many_kinds(rounds: usize) -> Vec<Event> {
    let base = all_kinds();
    let n = base.len();
    (0..rounds)
        .flat_map(|r| {
            base.iter().enumerate().map(move |(k, e)| Event {
                // Fresh increasing ids (the base uses extreme ones once).
                id: ((r * n + k) * 2 + 1) as u64,
                ..e.clone()
            })
        })
        .collect()
}

#[test]
fn the_fast_scan_sees_what_the_full_decode_sees() {
    for chunk_bytes in [300, DEFAULT_CHUNK_BYTES] {
        let events = many_kinds(40);
        let bytes = write(&symbols(), &events, chunk_bytes);
        let path = std::env::temp_dir().join(format!(
            "vmview-scan-test-{}-{chunk_bytes}.vmv",
            std::process::id()
        ));
        std::fs::write(&path, &bytes).expect("temp file");
        let cf = ChunkFile::open(&path)
            .expect("open")
            .expect("a clean trace");
        if chunk_bytes == 300 {
            assert!(cf.chunks().len() > 10, "many chunks");
        }
        let (mut heads, mut total) = (0, 0);
        for i in 0..cf.chunks().len() {
            let mut full = Vec::new();
            let mut syms_full = SymbolTable::default();
            cf.for_each_event(i, true, &mut syms_full, |ev, _| full.push(ev))
                .expect("full decode");
            let mut scanned = Vec::new();
            let mut syms_scan = SymbolTable::default();
            cf.for_each_scanned(i, &mut syms_scan, |ev, _| scanned.push(ev))
                .expect("scan");
            assert_eq!(scanned.len(), full.len(), "chunk {i}");
            for (s, ev) in scanned.iter().zip(&full) {
                assert_eq!(s.id(), ev.id);
                match (s, &ev.kind) {
                    (
                        Scanned::Head {
                            id,
                            time_ns,
                            thread,
                            ret,
                            method,
                        },
                        EventKind::Call { method: m, .. } | EventKind::Return { method: m, .. },
                    ) => {
                        heads += 1;
                        assert_eq!(
                            (*id, *time_ns, *thread, *ret, *method),
                            (
                                ev.id,
                                ev.time_ns,
                                ev.thread,
                                matches!(ev.kind, EventKind::Return { .. }),
                                *m
                            )
                        );
                    }
                    (Scanned::Full(e), _) => {
                        assert!(!matches!(
                            e.kind,
                            EventKind::Call { .. } | EventKind::Return { .. }
                        ));
                        assert_eq!(e, ev);
                    }
                    (s, _) => panic!("{s:?} for {ev:?}"),
                }
            }
            total += full.len();
        }
        assert_eq!(total, events.len());
        assert!(heads > 0 && heads < total, "both heads and full events");
        std::fs::remove_file(&path).ok();
    }
}

/// `for_each_picked` over every chunk of `bytes`, picking the CALLs and
/// RETURNs whose id `pick` selects: the events that come back whole, and
/// the number of heads seen.
fn picked(
    bytes: &[u8],
    name: &str,
    any_order: bool,
    pick: impl Fn(u64) -> bool,
) -> (Vec<Event>, usize) {
    let path = std::env::temp_dir().join(format!(
        "vmview-pick-test-{}-{name}.vmv",
        std::process::id()
    ));
    std::fs::write(&path, bytes).expect("temp file");
    let cf = ChunkFile::open(&path)
        .expect("open")
        .expect("a clean trace");
    let (mut out, mut heads) = (Vec::new(), 0);
    for i in 0..cf.chunks().len() {
        let mut syms = SymbolTable::default();
        cf.for_each_picked(i, false, any_order, &mut syms, |ev, _| match ev {
            Scanned::Head { id, .. } => {
                heads += 1;
                pick(*id)
            }
            Scanned::Full(e) => {
                out.push(e.clone());
                false
            }
        })
        .expect("pick");
    }
    std::fs::remove_file(&path).ok();
    (out, heads)
}

// A filter builds the CALLs and RETURNs it keeps in the scan itself: a
// picked one must decode exactly as the full decode does, values, caller
// and metrics included, also after heads that were stepped over (metrics
// are deltas on per-thread totals that a skipped head must still carry).
#[test]
fn a_picked_head_decodes_whole_as_the_full_decode_does() {
    let events = many_kinds(40);
    let v1 = write(&symbols(), &events, 300);
    let dense: Vec<Event> = events
        .iter()
        .enumerate()
        .map(|(i, e)| Event {
            id: 100 + i as u64,
            time_ns: 5_000 + i as u64 * 10,
            ..e.clone()
        })
        .collect();
    let mut w =
        TraceWriter::with_version(Vec::new(), &header(), 400, FORMAT_VERSION_2).expect("header");
    for s in symbols() {
        w.define(s);
    }
    for e in &dense {
        w.write(e).expect("write");
    }
    let v2 = w.finish().expect("finish");
    for (name, bytes, written) in [("v1", &v1, &events), ("v2", &v2, &dense)] {
        let (full, _, _) = read(bytes);
        assert_eq!(&full, written, "{name}: the full decode");
        let is_call_or_return =
            |e: &Event| matches!(e.kind, EventKind::Call { .. } | EventKind::Return { .. });
        // Every third head, so picked ones follow skipped ones of the
        // same thread.
        let (got, heads) = picked(bytes, name, false, |id| id % 3 == 0);
        let want: Vec<Event> = full
            .iter()
            .filter(|e| !is_call_or_return(e) || e.id % 3 == 0)
            .cloned()
            .collect();
        assert_eq!(heads, full.iter().filter(|e| is_call_or_return(e)).count());
        assert!(got.iter().filter(|e| is_call_or_return(e)).count() > 10);
        assert_eq!(got, want, "{name}: picked events");
        // Nothing picked: only the other kinds come back.
        let (none, _) = picked(bytes, name, false, |_| false);
        assert!(none.iter().all(|e| !is_call_or_return(e)), "{name}");
        // In any order (version 2: stream by stream), every event is
        // the same but for its id.
        let (mut any, n) = picked(bytes, name, true, |_| true);
        assert_eq!(n, heads);
        let key = |e: &Event| format!("{:?}", Event { id: 0, ..e.clone() });
        let mut all: Vec<String> = full.iter().map(key).collect();
        let mut got: Vec<String> = any.drain(..).map(|e| key(&e)).collect();
        all.sort();
        got.sort();
        assert_eq!(got, all, "{name}: any order");
    }
}

/// An event without its id (and, unless `time`, its time), to compare
/// events read in another order.
fn key(e: &Event, time: bool) -> String {
    let time_ns = if time { e.time_ns } else { 0 };
    format!(
        "{:?}",
        Event {
            id: 0,
            time_ns,
            ..e.clone()
        }
    )
}

/// `for_each_method_match` over every chunk, picking CALLs of even
/// methods and RETURNs of odd ones: the events given whole, and the count.
fn by_method(bytes: &[u8], name: &str, build: bool) -> (Vec<Event>, u64) {
    by_method_in(bytes, name, build, false)
}

/// [`by_method`], with `any_order` for `for_each_method_match`.
fn by_method_in(bytes: &[u8], name: &str, build: bool, any_order: bool) -> (Vec<Event>, u64) {
    struct Scan(Vec<Event>);
    impl parallel::MethodScan for Scan {
        fn verdict(&mut self, ret: bool, method: MethodId, _: &SymbolTable) -> bool {
            (method.0 % 2 == 1) == ret
        }
        fn event(&mut self, ev: Event, _: &SymbolTable) {
            self.0.push(ev);
        }
    }
    let path = std::env::temp_dir().join(format!(
        "vmview-method-test-{}-{name}-{build}-{any_order}.vmv",
        std::process::id()
    ));
    std::fs::write(&path, bytes).expect("temp file");
    let cf = ChunkFile::open(&path)
        .expect("open")
        .expect("a clean trace");
    let (mut scan, mut picked) = (Scan(Vec::new()), 0);
    for i in 0..cf.chunks().len() {
        let mut syms = SymbolTable::default();
        picked += cf
            .for_each_method_match(i, false, any_order, build, &mut syms, &mut scan)
            .expect("scan");
    }
    std::fs::remove_file(&path).ok();
    (scan.0, picked)
}

// The type-and-method scan looks each method's verdict up once per chunk:
// what it builds must be exactly what the full decode gives for the same
// selection, and its count the same whether it builds or not.
#[test]
fn a_method_scan_picks_and_decodes_as_the_full_decode_does() {
    let events = many_kinds(40);
    let v1 = write(&symbols(), &events, 300);
    let mut w =
        TraceWriter::with_version(Vec::new(), &header(), 400, FORMAT_VERSION_2).expect("header");
    for s in symbols() {
        w.define(s);
    }
    let dense: Vec<Event> = events
        .iter()
        .enumerate()
        .map(|(i, e)| Event {
            id: 100 + i as u64,
            time_ns: 5_000 + i as u64 * 10,
            ..e.clone()
        })
        .collect();
    for e in &dense {
        w.write(e).expect("write");
    }
    let v2 = w.finish().expect("finish");
    for (name, bytes) in [("v1", &v1), ("v2", &v2)] {
        let (full, _, _) = read(bytes);
        let wanted = |e: &Event| match &e.kind {
            EventKind::Call { method, .. } => method.0 % 2 == 0,
            EventKind::Return { method, .. } => method.0 % 2 == 1,
            _ => true,
        };
        let is_call_or_return =
            |e: &Event| matches!(e.kind, EventKind::Call { .. } | EventKind::Return { .. });
        let want: Vec<Event> = full.iter().filter(|e| wanted(e)).cloned().collect();
        let (got, picked) = by_method(bytes, name, true);
        assert_eq!(got, want, "{name}: picked events");
        let n = want.iter().filter(|e| is_call_or_return(e)).count() as u64;
        assert!(n > 10, "{name}: some picked");
        assert_eq!(picked, n, "{name}: picked count");
        let (others, counted) = by_method(bytes, name, false);
        assert_eq!(counted, n, "{name}: counted without building");
        assert!(others.iter().all(|e| !is_call_or_return(e)), "{name}");
    }
}

/// A version 2 trace of `threads` threads whose events come in a random
/// interleaving, with ties in time across threads and times that go back
/// within a thread (a THROW held until its catch site does that), in
/// many chunks.
fn interleaved_v2(threads: u32, events: usize, chunk_bytes: usize) -> Vec<u8> {
    let mut syms = Vec::new();
    let mut next = 0;
    let mut string = |syms: &mut Vec<Symbol>, text: String| {
        let id = StringId(next);
        next += 1;
        syms.push(Symbol::String { id, text });
        id
    };
    let group = string(&mut syms, "main".into());
    let class = string(&mut syms, "shop.Service".into());
    let sig = string(&mut syms, "(I)I".into());
    let exc = string(&mut syms, "java.lang.IllegalStateException".into());
    for t in 0..threads {
        let name = string(&mut syms, format!("worker-{t}"));
        syms.push(Symbol::Thread(ThreadSymbol {
            id: ThreadRef(t),
            java_id: i64::from(t) + 1,
            name,
            group,
            priority: 5,
            daemon: false,
        }));
    }
    for m in 0..6u32 {
        let name = string(&mut syms, format!("handle{m}"));
        syms.push(Symbol::Method(MethodSymbol {
            id: MethodId(m),
            class,
            name,
            sig,
            param_names: Vec::new(),
            modifiers: 1,
        }));
    }
    let mut w = TraceWriter::with_version(Vec::new(), &header(), chunk_bytes, FORMAT_VERSION_2)
        .expect("header");
    for s in syms {
        w.define(s);
    }
    // Per thread: the open call, if any.
    let mut open: Vec<Option<(MethodId, u64)>> = vec![None; threads as usize];
    let (mut rng, mut time) = (0x9e37_79b9_7f4a_7c15u64, 1_000u64);
    for id in 1..=events as u64 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let t = (rng % u64::from(threads)) as usize;
        // Ties: a third of the events share the previous event's time.
        time += (rng >> 8) % 3 * 7;
        let kind = match (open[t], (rng >> 16) % 10) {
            // A time that goes back, within the thread.
            (_, 0) => EventKind::Throw {
                exception: exc,
                message: Some("late".into()),
                method: MethodId(0),
                loc: Loc { bci: 3, line: None },
                catch: None,
            },
            (None, _) => {
                let m = MethodId(((rng >> 24) % 6) as u32);
                open[t] = Some((m, time));
                EventKind::Call {
                    method: m,
                    depth: 1,
                    caller: None,
                    params: vec![Value::Int((rng >> 32) as i32)],
                    metrics: Default::default(),
                }
            }
            (Some((m, at)), _) => {
                open[t] = None;
                EventKind::Return {
                    method: m,
                    depth: 1,
                    outcome: Outcome::Value(Value::Int(7)),
                    elapsed_ns: time - at,
                    metrics: Default::default(),
                }
            }
        };
        let time_ns = if matches!(kind, EventKind::Throw { .. }) {
            time.saturating_sub(40)
        } else {
            time
        };
        w.write(&Event {
            id,
            time_ns,
            thread: ThreadRef(t as u32),
            kind,
        })
        .expect("write");
    }
    w.finish().expect("finish")
}

// Building the picked events of a version 2 chunk reads its thread streams
// one after another and works out each kept event's place in the merge by
// time (and so its id) afterwards: the events, their order and their ids
// must be exactly the merged read's, ties and times that go back included.
#[test]
fn a_method_scan_of_thread_streams_keeps_the_merge_order_and_ids() {
    let cases = [
        (1, 500),
        (3, 700),
        (7, 4_000),
        (7, DEFAULT_CHUNK_BYTES),
        // More streams than kept events in many chunks, and many ties.
        (40, 3_000),
    ];
    for (threads, chunk_bytes) in cases {
        let bytes = interleaved_v2(threads, 6_000, chunk_bytes);
        let name = format!("interleaved-{threads}-{chunk_bytes}");
        let (full, diags, _) = read(&bytes);
        assert!(diags.is_empty(), "{name}: {diags:?}");
        assert_eq!(full.len(), 6_000, "{name}");
        // The read order is not the written one: the merge reorders.
        assert!(
            threads == 1 || full.windows(2).any(|w| w[1].time_ns < w[0].time_ns),
            "{name}: times that go back"
        );
        let wanted = |e: &Event| match &e.kind {
            EventKind::Call { method, .. } => method.0 % 2 == 0,
            EventKind::Return { method, .. } => method.0 % 2 == 1,
            _ => true,
        };
        let want: Vec<Event> = full.iter().filter(|e| wanted(e)).cloned().collect();
        let (got, picked) = by_method(&bytes, &name, true);
        assert_eq!(got.len(), want.len(), "{name}: as many events");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "{name}");
        }
        let (_, counted) = by_method(&bytes, &name, false);
        assert_eq!(picked, counted, "{name}: the same count");
        let (others, counted) = by_method_in(&bytes, &name, false, true);
        assert_eq!(picked, counted, "{name}: the same count in any order");
        let want_others = |time: bool| {
            let mut v: Vec<String> = want
                .iter()
                .filter(|e| !matches!(e.kind, EventKind::Call { .. } | EventKind::Return { .. }))
                .map(|e| key(e, time))
                .collect();
            v.sort();
            v
        };
        // A count in any order steps over the times (the contract of
        // `for_each_method_match` without `build`): all else is the same.
        let mut got: Vec<String> = others.iter().map(|e| key(e, false)).collect();
        got.sort();
        assert_eq!(
            got,
            want_others(false),
            "{name}: the other events in any order"
        );
        // Built in any order, the times are read.
        let (built, n) = by_method_in(&bytes, &name, true, true);
        assert_eq!(n, picked, "{name}: built in any order, the same count");
        let mut got: Vec<String> = built
            .iter()
            .filter(|e| !matches!(e.kind, EventKind::Call { .. } | EventKind::Return { .. }))
            .map(|e| key(e, true))
            .collect();
        got.sort();
        assert_eq!(got, want_others(true), "{name}: with their times");
    }
}
