//! Files whose checksums all hold but that break a promise of the format:
//! event ids unique and increasing, one trace per file. The reader used to
//! return such files without a word (two traces concatenated read as the
//! first, or as one trace whose ids start again; a repeated chunk returned
//! its events twice); now it skips the offending part and says so.

use vmview_format::*;

use crate::support::*;

fn inconsistent(diags: &[Diagnostic]) -> Vec<&Diagnostic> {
    diags
        .iter()
        .filter(|d| d.kind == DiagnosticKind::Inconsistent)
        .collect()
}

fn assert_ids_increase(events: &[Event]) {
    for w in events.windows(2) {
        assert!(w[0].id < w[1].id, "ids {} then {}", w[0].id, w[1].id);
    }
}

/// The byte ranges of a trace: header, each chunk, footer and trailer.
fn pieces(bytes: &[u8]) -> (Vec<u8>, Vec<Vec<u8>>, Vec<u8>) {
    let chunks = chunk_infos(bytes);
    let start = chunks[0].offset as usize;
    let end = chunks.last().map(|c| (c.offset + c.len) as usize).unwrap();
    let body = chunks
        .iter()
        .map(|c| bytes[c.offset as usize..(c.offset + c.len) as usize].to_vec())
        .collect();
    (bytes[..start].to_vec(), body, bytes[end..].to_vec())
}

#[test]
fn two_finished_traces_concatenated_read_as_the_first_and_say_so() {
    let (first, a) = multi_chunk(300, 512);
    let (_, b) = multi_chunk(100, 512);
    let both = [a.clone(), b].concat();
    let (events, diags, _) = read(&both);
    assert_eq!(events, first);
    let d = inconsistent(&diags);
    assert_eq!(d.len(), 1, "{diags:?}");
    assert_eq!(d[0].offset, a.len() as u64);
    assert!(
        d[0].message.contains("another trace starts at offset"),
        "{}",
        d[0].message
    );
}

#[test]
fn a_killed_trace_followed_by_another_stops_at_the_second_header() {
    // Without its footer the first trace ran straight into the second's
    // chunks, whose ids start again.
    let (first, a) = multi_chunk(300, 512);
    let (_, b) = multi_chunk(100, 512);
    let (head, chunks, _) = pieces(&a);
    let killed = [head, chunks.concat()].concat();
    let both = [killed.clone(), b].concat();
    let (events, diags, _) = read(&both);
    assert_eq!(events, first);
    assert_ids_increase(&events);
    let d = inconsistent(&diags);
    assert_eq!(d.len(), 1, "{diags:?}");
    assert_eq!(d[0].offset, killed.len() as u64);
}

#[test]
fn bytes_after_the_footer_are_reported() {
    let (first, a) = multi_chunk(50, 512);
    let (events, diags, _) = read(&[a.clone(), b"leftover".to_vec()].concat());
    assert_eq!(events, first);
    let d = inconsistent(&diags);
    assert_eq!(d.len(), 1, "{diags:?}");
    assert!(
        d[0].message
            .starts_with("8 bytes follow the end of the trace"),
        "{}",
        d[0].message
    );
}

#[test]
fn chunks_out_of_order_are_skipped_so_ids_keep_increasing() {
    let (all, a) = multi_chunk(400, 512);
    let (head, mut chunks, tail) = pieces(&a);
    assert!(chunks.len() > 6);
    chunks.swap(2, 3);
    let infos = chunk_infos(&a);
    let (events, diags, _) = read(&[head, chunks.concat(), tail].concat());
    assert_ids_increase(&events);
    // Chunk 2, now after chunk 3, is the one skipped.
    let skipped: Vec<Event> = all
        .iter()
        .filter(|e| (infos[2].first_id..=infos[2].last_id).contains(&e.id))
        .cloned()
        .collect();
    assert_eq!(events.len(), all.len() - skipped.len());
    let d = inconsistent(&diags);
    assert_eq!(d.len(), 1, "{diags:?}");
    assert_eq!(d[0].chunk, Some(2));
    assert!(
        d[0].message
            .contains(&format!("do not come after id {}", infos[3].last_id)),
        "{}",
        d[0].message
    );
}

#[test]
fn repeated_chunks_are_read_once_with_one_diagnostic_per_run() {
    let (all, a) = multi_chunk(400, 512);
    let (head, chunks, tail) = pieces(&a);
    // Chunk 4 twice, then chunks 0 to 4 again after chunk 6.
    let mut body: Vec<Vec<u8>> = chunks[..5].to_vec();
    body.push(chunks[4].clone());
    body.extend_from_slice(&chunks[5..7]);
    body.extend_from_slice(&chunks[..5]);
    body.extend_from_slice(&chunks[7..]);
    let bytes = [head, body.concat(), tail].concat();
    let (events, diags, _) = read(&bytes);
    assert_eq!(events, all, "every event once, in order");
    let d = inconsistent(&diags);
    assert_eq!(d.len(), 2, "{diags:?}");
    assert!(
        d[1].message.starts_with("5 chunks from chunk 0"),
        "{}",
        d[1].message
    );
    // The rebuilt index agrees with what is read: seeking finds each id.
    let mut r = TraceReader::new(std::io::Cursor::new(&bytes)).unwrap();
    assert_eq!(r.index().unwrap().event_count(), all.len() as u64);
    let target = all[all.len() / 2].id;
    r.seek_to_event(target).unwrap();
    assert!(r.by_ref().any(|e| e.id == target));
}
