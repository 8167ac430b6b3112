//! Chunking, the index and random access.

use std::io::Cursor;

use vmview_format::*;

use crate::support::*;

#[test]
fn many_chunks_read_back_in_order() {
    let (events, bytes) = multi_chunk(5_000, 512);
    let chunks = chunk_infos(&bytes);
    assert!(chunks.len() > 20, "{} chunks", chunks.len());
    let (back, diags, _) = read(&bytes);
    assert_eq!(diags, vec![]);
    assert_eq!(back, events);
    // The index is consistent with the events.
    assert_eq!(
        chunks.iter().map(|c| u64::from(c.event_count)).sum::<u64>(),
        5_000
    );
    for (i, c) in chunks.iter().enumerate() {
        assert_eq!(c.seq, i as u32);
        let inside: Vec<&Event> = events
            .iter()
            .filter(|e| (c.first_id..=c.last_id).contains(&e.id))
            .collect();
        assert_eq!(inside.len(), c.event_count as usize);
        assert_eq!(inside.iter().map(|e| e.time_ns).min(), Some(c.start_ns));
        assert_eq!(inside.iter().map(|e| e.time_ns).max(), Some(c.end_ns));
    }
}

#[test]
fn chunks_end_near_the_target_size() {
    let (_, bytes) = multi_chunk(20_000, 4096);
    let chunks = chunk_infos(&bytes);
    // All but the last close at the first event past the target.
    for c in &chunks[..chunks.len() - 1] {
        let payload = c.len - 60;
        assert!((4096..4096 + 64).contains(&payload), "payload {payload}");
    }
}

#[test]
fn footer_index_matches_what_the_writer_wrote() {
    let (events, _) = multi_chunk(3_000, 700);
    let mut w = TraceWriter::with_chunk_size(Vec::new(), &header(), 700).expect("header");
    for s in symbols() {
        w.define(s);
    }
    for e in &events {
        w.write(e).expect("write");
    }
    w.flush().expect("flush");
    let written = w.chunk_infos().to_vec();
    let bytes = w.finish().expect("finish");
    let mut r = TraceReader::new(Cursor::new(&bytes)).expect("trace");
    assert_eq!(r.index().expect("index").chunks, written);
    assert_eq!(r.diagnostics(), &[], "a footer was found: nothing rebuilt");
    let idx = r.index().expect("index").clone();
    assert_eq!(idx.event_count(), 3_000);
    assert_eq!(idx.id_range(), Some((1, 5_999)));
}

#[test]
fn index_is_rebuilt_from_chunk_headers_when_the_footer_is_missing() {
    let (_, bytes) = multi_chunk(3_000, 700);
    let chunks = chunk_infos(&bytes);
    let end = chunks.last().map(|c| c.offset + c.len).expect("chunks") as usize;
    let no_footer = &bytes[..end];
    let mut r = TraceReader::new(Cursor::new(no_footer)).expect("trace");
    assert_eq!(r.diagnostics(), &[]);
    assert_eq!(r.index().expect("index").chunks, chunks);
    assert_eq!(r.diagnostics().len(), 1);
    assert_eq!(r.diagnostics()[0].kind, DiagnosticKind::IndexRebuilt);
    // Reading the whole file does not complain about the missing footer.
    let (back, diags, _) = read(no_footer);
    assert_eq!(back.len(), 3_000);
    assert_eq!(diags, vec![]);
}

#[test]
fn a_middle_chunk_decodes_alone_after_a_seek() {
    let (events, bytes) = multi_chunk(4_000, 1_000);
    let chunks = chunk_infos(&bytes);
    let mid = &chunks[chunks.len() / 2];
    let target = events[events.len() / 2].id;

    // seek_to_event: a fresh reader, no chunk before it was read.
    let mut r = TraceReader::new(Cursor::new(&bytes)).expect("trace");
    r.seek_to_event(target).expect("seek");
    let first = r.next_event().expect("an event");
    let holder = r.current_chunk().expect("a current chunk");
    assert!(holder.first_id <= target && target <= holder.last_id);
    assert_eq!(first.id, holder.first_id);
    // The symbol table resolves what this chunk uses although earlier
    // chunks were never read.
    let (EventKind::Call { method, .. } | EventKind::Return { method, .. }) = first.kind else {
        panic!("unexpected {first:?}");
    };
    let m = r
        .symbols()
        .method(method)
        .expect("method symbol re-emitted in the chunk");
    assert_eq!(r.symbols().string(m.class), "shop.Inventory");
    assert_ne!(
        r.symbols().thread_name(first.thread),
        format!("thread-{}", first.thread.0)
    );
    let rest: Vec<Event> = std::iter::once(first).chain(r.by_ref()).collect();
    let from = events
        .iter()
        .position(|e| e.id == holder.first_id)
        .expect("in events");
    assert_eq!(rest, events[from..]);
    assert_eq!(r.diagnostics(), &[]);

    // seek_to_chunk: the chunk before, for context.
    let mut r = TraceReader::new(Cursor::new(&bytes)).expect("trace");
    let index = r.index().expect("index").clone();
    let pos = index.position_of(mid.first_id).expect("position");
    r.seek_to_chunk(&index.chunks[pos - 1]).expect("seek");
    let before = r.next_event().expect("event");
    assert_eq!(before.id, index.chunks[pos - 1].first_id);
    assert_eq!(
        r.current_chunk().map(|c| c.seq),
        Some(index.chunks[pos - 1].seq)
    );
}

#[test]
fn every_chunk_carries_the_symbols_its_events_use() {
    let (_, bytes) = multi_chunk(2_000, 300);
    let chunks = chunk_infos(&bytes);
    for c in &chunks {
        // A file made of the file header and this one chunk reads fully.
        let head_end = chunks[0].offset as usize;
        let mut alone = bytes[..head_end].to_vec();
        alone.extend_from_slice(&bytes[c.offset as usize..(c.offset + c.len) as usize]);
        let (back, diags, syms) = read(&alone);
        assert_eq!(diags, vec![]);
        assert_eq!(back.len(), c.event_count as usize);
        for e in &back {
            assert!(syms.thread(e.thread).is_some());
            if let EventKind::Call { method, .. } = e.kind {
                let m = syms.method(method).expect("method");
                assert_ne!(syms.string(m.name), "?");
                for p in &m.param_names {
                    assert_ne!(syms.string(*p), "?");
                }
            }
        }
    }
}

#[test]
fn seek_to_an_unknown_event_says_which_ids_exist() {
    let (_, bytes) = multi_chunk(100, 200);
    let mut r = TraceReader::new(Cursor::new(&bytes)).expect("trace");
    match r.seek_to_event(10_000) {
        Err(FormatError::NoSuchEvent { id, first, last }) => {
            assert_eq!((id, first, last), (10_000, 1, 199));
        }
        other => panic!("{other:?}"),
    }
    // A trace with no events at all.
    let empty = write(&symbols(), &[], 1024);
    let mut r = TraceReader::new(Cursor::new(&empty)).expect("trace");
    assert!(matches!(r.seek_to_event(1), Err(FormatError::Empty(_))));
    assert_eq!(r.next_event(), None);
    assert_eq!(r.diagnostics(), &[]);
}

#[test]
fn a_growing_file_is_counted_from_its_complete_chunks() {
    // A recording in progress: flushed chunks, then part of the next chunk
    // (a write in flight), no footer.
    let (events, _) = multi_chunk(1_000, 400);
    let mut w = TraceWriter::with_chunk_size(Vec::new(), &header(), 400).expect("header");
    for s in symbols() {
        w.define(s);
    }
    for e in &events[..600] {
        w.write(e).expect("write");
    }
    w.flush().expect("flush");
    let flushed_bytes = w.bytes_written();
    let flushed_chunks = w.chunk_infos().len();
    for e in &events[600..] {
        w.write(e).expect("write");
    }
    let full = w.finish().expect("finish");
    let partial = &full[..flushed_bytes as usize + 100];

    let mut r = TraceReader::new(Cursor::new(partial)).expect("trace");
    let index = r.index().expect("index");
    assert_eq!(index.chunks.len(), flushed_chunks);
    assert_eq!(index.event_count(), 600);
    assert_eq!(index.end_offset(), flushed_bytes);
    // Reading it gives the 600 events and says the tail was cut.
    let n = r.by_ref().count();
    assert_eq!(n, 600);
    assert!(r
        .diagnostics()
        .iter()
        .any(|d| d.kind == DiagnosticKind::TruncatedTail));
}

#[test]
fn flush_with_nothing_new_writes_no_empty_chunk() {
    let mut w = TraceWriter::new(Vec::new(), &header()).expect("header");
    for s in symbols() {
        w.define(s);
    }
    w.flush().expect("flush");
    w.write(&Event {
        id: 1,
        time_ns: 1,
        thread: T_MAIN,
        kind: EventKind::GcStart,
    })
    .expect("write");
    w.flush().expect("flush");
    w.flush().expect("flush");
    assert_eq!(w.chunk_infos().len(), 1);
    let bytes = w.finish().expect("finish");
    assert_eq!(read(&bytes).0.len(), 1);
}

#[test]
fn a_trace_file_on_disk_reads_with_seeks() {
    let (events, bytes) = multi_chunk(3_000, 2_000);
    let path = std::env::temp_dir().join(format!("vmview-format-test-{}.vmv", std::process::id()));
    std::fs::write(&path, &bytes).expect("temp file");
    let mut r = TraceReader::open(&path).expect("open");
    let index = r.index().expect("index").clone();
    let last = index.chunks.last().expect("chunks").clone();
    r.seek_to_chunk(&last).expect("seek");
    let tail: Vec<Event> = r.by_ref().collect();
    assert_eq!(tail.len(), last.event_count as usize);
    r.seek_to_event(events[10].id).expect("seek");
    assert_eq!(r.next_event().as_ref(), Some(&events[0]));
    assert_eq!(r.diagnostics(), &[]);
    std::fs::remove_file(&path).ok();
}
