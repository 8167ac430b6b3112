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
