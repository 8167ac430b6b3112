//! Damaged input: the reader never panics, keeps every intact chunk and
//! says what it dropped.

use std::io::Cursor;

use vmview_format::*;

use crate::stream::Rng;
use crate::support::*;

/// Reads whatever `bytes` holds, as a CLI would; must never panic.
fn read_any(bytes: &[u8]) -> Option<(Vec<Event>, Vec<Diagnostic>)> {
    let mut r = TraceReader::new(Cursor::new(bytes)).ok()?;
    let events: Vec<Event> = r.by_ref().collect();
    let _ = r.index();
    let _ = r.seek_to_event(3);
    let _ = r.next_event();
    Some((events, r.diagnostics().to_vec()))
}

/// A small trace of 4 chunks.
fn four_chunks() -> (Vec<Event>, Vec<u8>, Vec<ChunkInfo>) {
    for chunk_bytes in (150..2000).step_by(10) {
        let (events, bytes) = multi_chunk(120, chunk_bytes);
        let chunks = chunk_infos(&bytes);
        if chunks.len() == 4 {
            return (events, bytes, chunks);
        }
    }
    panic!("no chunk size gives 4 chunks");
}

fn events_of<'a>(events: &'a [Event], c: &ChunkInfo) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| (c.first_id..=c.last_id).contains(&e.id))
        .collect()
}

#[test]
fn truncation_at_every_offset_keeps_every_complete_chunk() {
    let (events, bytes, chunks) = four_chunks();
    let header_end = chunks[0].offset as usize;
    for cut in 0..bytes.len() {
        let short = &bytes[..cut];
        let r = TraceReader::new(Cursor::new(short));
        if cut < header_end {
            assert!(
                matches!(r, Err(FormatError::Empty(_))),
                "cut {cut} inside the file header: {:?}",
                r.err()
            );
            continue;
        }
        let mut r = r.unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        let back: Vec<Event> = r.by_ref().collect();
        let complete: Vec<&ChunkInfo> = chunks
            .iter()
            .filter(|c| c.offset + c.len <= cut as u64)
            .collect();
        let expected: Vec<Event> = events
            .iter()
            .filter(|e| {
                complete
                    .iter()
                    .any(|c| (c.first_id..=c.last_id).contains(&e.id))
            })
            .cloned()
            .collect();
        assert_eq!(back, expected, "cut at {cut}");
        let diags = r.diagnostics().to_vec();
        let at_boundary =
            cut == header_end || chunks.iter().any(|c| (c.offset + c.len) as usize == cut);
        if at_boundary {
            assert_eq!(diags, vec![], "cut {cut} falls between chunks");
        } else {
            assert_eq!(diags.len(), 1, "cut {cut}: {diags:?}");
            assert_eq!(
                diags[0].kind,
                DiagnosticKind::TruncatedTail,
                "cut {cut}: {diags:?}"
            );
        }
        // The index of the cut file holds exactly the complete chunks.
        let index = r.index().expect("index");
        assert_eq!(index.chunks.len(), complete.len(), "cut {cut}");
    }
}

#[test]
fn truncated_tail_says_how_many_bytes_were_dropped() {
    let (_, bytes, chunks) = four_chunks();
    let cut = (chunks[3].offset + 25) as usize;
    let (back, diags) = read_any(&bytes[..cut]).expect("trace");
    assert_eq!(
        back.len() as u32,
        chunks[..3].iter().map(|c| c.event_count).sum::<u32>()
    );
    assert_eq!(diags[0].kind, DiagnosticKind::TruncatedTail);
    assert_eq!(diags[0].offset, chunks[3].offset);
    assert!(
        diags[0].message.contains("25 bytes"),
        "{}",
        diags[0].message
    );
}

#[test]
fn a_corrupted_payload_byte_in_chunk_2_costs_only_chunk_2() {
    let (events, bytes, chunks) = four_chunks();
    let c2 = &chunks[2];
    for delta in [1usize, 17, (c2.len - 61) as usize] {
        let mut bad = bytes.clone();
        bad[c2.offset as usize + 60 + delta - 1] ^= 0x40;
        let (back, diags) = read_any(&bad).expect("trace");
        assert_eq!(diags[0].kind, DiagnosticKind::ChecksumMismatch);
        assert_eq!(diags[0].chunk, Some(2));
        assert_eq!(diags[0].offset, c2.offset);
        assert!(diags[0].message.contains("chunk 2"), "{}", diags[0].message);
        let expected: Vec<Event> = [&chunks[0], &chunks[1], &chunks[3]]
            .iter()
            .flat_map(|c| events_of(&events, c))
            .cloned()
            .collect();
        let first_pass: Vec<Event> = back.into_iter().take(expected.len()).collect();
        assert_eq!(first_pass, expected);
    }
}

#[test]
fn a_corrupted_chunk_header_is_skipped_by_scanning_for_the_next_chunk() {
    let (events, bytes, chunks) = four_chunks();
    let c1 = &chunks[1];
    // The payload length field, the magic, and the header checksum.
    for at in [48usize, 0, 57] {
        let mut bad = bytes.clone();
        bad[c1.offset as usize + at] ^= 0x01;
        let (back, diags) = read_any(&bad).expect("trace");
        let expected: Vec<Event> = [&chunks[0], &chunks[2], &chunks[3]]
            .iter()
            .flat_map(|c| events_of(&events, c))
            .cloned()
            .collect();
        let first_pass: Vec<Event> = back.into_iter().take(expected.len()).collect();
        assert_eq!(first_pass, expected, "byte {at} of the header");
        assert_eq!(diags[0].offset, c1.offset);
        assert!(
            matches!(
                diags[0].kind,
                DiagnosticKind::ChecksumMismatch | DiagnosticKind::BadChunk
            ),
            "{diags:?}"
        );
        assert!(
            diags[0].message.contains(&format!("{}", chunks[2].offset)),
            "{}",
            diags[0].message
        );
    }
}

#[test]
fn every_single_byte_corruption_is_survived() {
    let (events, bytes, chunks) = four_chunks();
    let header_end = chunks[0].offset as usize;
    for at in 0..bytes.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut bad = bytes.clone();
            bad[at] ^= flip;
            let Some((back, diags)) = read_any(&bad) else {
                assert!(
                    at < 10,
                    "only the magic and version make a file unreadable (byte {at})"
                );
                continue;
            };
            if at < header_end {
                continue; // a damaged file header: chunks are searched for
            }
            // At most the damaged chunk is lost.
            let lost = events.len().saturating_sub(back.len().min(events.len()));
            let biggest = chunks
                .iter()
                .map(|c| c.event_count as usize)
                .max()
                .unwrap_or(0);
            assert!(lost <= biggest, "byte {at}: lost {lost} events; {diags:?}");
            let footer_start = chunks[3].offset + chunks[3].len;
            if (at as u64) < footer_start {
                assert!(!diags.is_empty(), "byte {at} flipped without a diagnostic");
            }
        }
    }
}

#[test]
fn a_damaged_file_header_still_yields_the_chunks() {
    let (events, bytes, _) = four_chunks();
    let mut bad = bytes.clone();
    bad[20] ^= 0x10; // inside the header body
    let (back, diags) = read_any(&bad).expect("trace");
    assert_eq!(back[..events.len()], events[..]);
    assert_eq!(diags[0].kind, DiagnosticKind::ChecksumMismatch);
    assert_eq!(diags[0].chunk, None);
    // An absurd header length.
    let mut bad = bytes.clone();
    bad[13] = 0x7f;
    let (back, diags) = read_any(&bad).expect("trace");
    assert_eq!(back[..events.len()], events[..]);
    assert!(!diags.is_empty());
}

#[test]
fn forged_payloads_with_valid_checksums_never_panic() {
    // Checksums catch accidents, not forgeries: mutate payload bytes, then
    // fix every checksum so the decoder itself sees the garbage.
    let events = all_kinds();
    let bytes = write(&symbols(), &events, 180);
    let chunks = chunk_infos(&bytes);
    let mut rng = Rng(7);
    for round in 0..3_000 {
        let mut bad = bytes.clone();
        let c = &chunks[round % chunks.len()];
        let start = c.offset as usize + 60;
        let len = (c.len - 60) as usize;
        for _ in 0..1 + rng.below(4) {
            let at = start + rng.below(len as u64) as usize;
            bad[at] = match rng.below(4) {
                0 => 0xff,
                1 => 0x80,
                2 => rng.below(32) as u8,
                _ => rng.next_u64() as u8,
            };
        }
        fix_checksums(&mut bad, &chunks);
        let (_, diags) = read_any(&bad).expect("still a trace");
        let _ = diags;
    }
}

/// Recomputes the payload and header checksums of every chunk.
fn fix_checksums(bytes: &mut [u8], chunks: &[ChunkInfo]) {
    for c in chunks {
        let o = c.offset as usize;
        let end = (c.offset + c.len) as usize;
        let crc = crc32c::crc32c(&bytes[o + 60..end]);
        bytes[o + 52..o + 56].copy_from_slice(&crc.to_le_bytes());
        let hcrc = crc32c::crc32c(&bytes[o..o + 56]);
        bytes[o + 56..o + 60].copy_from_slice(&hcrc.to_le_bytes());
    }
}

#[test]
fn forged_chunk_headers_with_valid_checksums_never_panic_or_overallocate() {
    let (_, bytes, chunks) = four_chunks();
    let c = &chunks[1];
    let o = c.offset as usize;
    let fields: [(usize, &[u8]); 6] = [
        (48, &u32::MAX.to_le_bytes()), // payload length far past the end
        (48, &0u32.to_le_bytes()),     // empty payload
        (12, &u32::MAX.to_le_bytes()), // event count
        (4, &2u16.to_le_bytes()),      // another version
        (16, &u64::MAX.to_le_bytes()), // first id
        (24, &0u64.to_le_bytes()),     // last id
    ];
    for (at, val) in fields {
        let mut bad = bytes.clone();
        bad[o + at..o + at + val.len()].copy_from_slice(val);
        let hcrc = crc32c::crc32c(&bad[o..o + 56]);
        bad[o + 56..o + 60].copy_from_slice(&hcrc.to_le_bytes());
        let (back, diags) = read_any(&bad).expect("trace");
        assert!(
            back.len() >= chunks[0].event_count as usize,
            "field at {at}"
        );
        assert!(!diags.is_empty(), "field at {at}: no diagnostic");
    }
}

#[test]
fn random_bytes_are_not_a_trace_and_never_panic() {
    let mut rng = Rng(42);
    for len in [0usize, 1, 7, 8, 13, 14, 60, 100, 1000, 100_000] {
        let junk: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        assert!(TraceReader::new(Cursor::new(&junk)).is_err());
        // Behind a valid file header, random bytes give diagnostics only.
        let header_len = TraceWriter::new(Vec::new(), &header())
            .expect("header")
            .bytes_written();
        let mut with_header = write(&symbols(), &[], 1024);
        with_header.truncate(header_len as usize);
        with_header.extend_from_slice(&junk);
        let (back, diags) = read_any(&with_header).expect("a trace header");
        assert!(back.is_empty());
        if len > 0 {
            assert!(!diags.is_empty(), "{len} random bytes gave no diagnostic");
        }
    }
}

#[test]
fn random_bytes_with_chunk_magics_sprinkled_in_never_panic() {
    let mut rng = Rng(3);
    let (_, bytes, _) = four_chunks();
    for _ in 0..200 {
        let mut junk = bytes.clone();
        for _ in 0..50 {
            let at = rng.below(junk.len() as u64 - 4) as usize;
            let magic: &[u8] = if rng.below(2) == 0 { b"VMVC" } else { b"VMVI" };
            junk[at..at + 4].copy_from_slice(magic);
        }
        let _ = read_any(&junk);
    }
}

#[test]
fn wrong_version_is_refused_with_both_versions_named() {
    let mut bytes = write(&symbols(), &all_kinds(), 1024);
    bytes[8] = 3;
    match TraceReader::new(Cursor::new(&bytes)) {
        Err(
            e @ FormatError::UnsupportedVersion {
                found: 3,
                supported: 2,
            },
        ) => {
            assert!(e.to_string().contains("version 3"), "{e}");
        }
        other => panic!("{:?}", other.err()),
    }
}

#[test]
fn zero_length_file_is_an_empty_trace_error() {
    match TraceReader::new(Cursor::new(Vec::<u8>::new())) {
        Err(FormatError::Empty(msg)) => assert!(msg.contains("empty")),
        other => panic!("{:?}", other.err()),
    }
}

#[test]
fn a_text_file_is_not_a_trace() {
    let text = b"<?xml version=\"1.0\"?>\n<trace/>\n";
    assert!(matches!(
        TraceReader::new(Cursor::new(&text[..])),
        Err(FormatError::NotATrace)
    ));
}

#[test]
fn a_damaged_footer_only_costs_the_index() {
    let (events, bytes, chunks) = four_chunks();
    let footer = (chunks[3].offset + chunks[3].len) as usize;
    let mut bad = bytes.clone();
    bad[footer + 9] ^= 0xff;
    let mut r = TraceReader::new(Cursor::new(&bad)).expect("trace");
    let index = r.index().expect("index").clone();
    assert_eq!(index.chunks, chunks);
    assert!(r
        .diagnostics()
        .iter()
        .any(|d| d.kind == DiagnosticKind::IndexRebuilt));
    let back: Vec<Event> = r.by_ref().collect();
    assert_eq!(back, events);
}
