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

/// `for_each_method_match` over every chunk, picking CALLs of even
/// methods and RETURNs of odd ones: the events given whole, and the count.
fn by_method(bytes: &[u8], name: &str, build: bool) -> (Vec<Event>, u64) {
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
        "vmview-method-test-{}-{name}-{build}.vmv",
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
            .for_each_method_match(i, false, false, build, &mut syms, &mut scan)
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
