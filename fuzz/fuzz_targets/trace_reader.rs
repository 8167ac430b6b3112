//! The binary trace reader on arbitrary bytes: chunk headers, varints,
//! symbol records, the index footer and the trailer.
//!
//! Chunks are checksummed, so most mutations of a real trace would only
//! exercise the checksum test. When the first byte is odd the target
//! recomputes every checksum it can find (file header, chunk header and
//! payload, footer, trailer) before reading, so mutated payloads reach the
//! record decoder. The reader must never panic: it streams every event,
//! resolves their symbols, builds the index and seeks to a few ids.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::Cursor;
use vmview_format::TraceReader;

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Rewrites the checksums of everything that looks like a header, chunk,
/// footer or trailer, so that mutations inside them are decoded.
fn fix_checksums(b: &mut [u8]) {
    // File header: magic(8) version(2) length(4) body(L) crc(4).
    if b.len() >= 14 {
        let len = u32_at(b, 10).unwrap_or(0) as usize;
        let end = 14usize.saturating_add(len);
        if end + 4 <= b.len() {
            let crc = crc32c::crc32c(&b[8..end]);
            put_u32(b, end, crc);
        }
    }
    let mut at = 0;
    while at + 4 <= b.len() {
        match &b[at..at + 4] {
            b"VMVC" if at + 60 <= b.len() => {
                let len = u32_at(b, at + 48).unwrap_or(0) as usize;
                let payload = at + 60..(at + 60).saturating_add(len).min(b.len());
                let crc = crc32c::crc32c(&b[payload]);
                put_u32(b, at + 52, crc);
                let crc = crc32c::crc32c(&b[at..at + 56]);
                put_u32(b, at + 56, crc);
            }
            b"VMVI" if at + 8 <= b.len() => {
                let len = u32_at(b, at + 4).unwrap_or(0) as usize;
                let end = (at + 8).saturating_add(len);
                if end + 4 <= b.len() {
                    let crc = crc32c::crc32c(&b[at + 8..end]);
                    put_u32(b, end, crc);
                }
            }
            b"VMVE" if at + 16 <= b.len() => {
                let crc = crc32c::crc32c(&b[at..at + 12]);
                put_u32(b, at + 12, crc);
            }
            _ => {}
        }
        at += 1;
    }
}

fuzz_target!(|data: &[u8]| {
    let mut bytes = data.to_vec();
    if data.first().is_some_and(|b| b & 1 == 1) {
        fix_checksums(&mut bytes);
    }
    let Ok(mut reader) = TraceReader::new(Cursor::new(bytes)) else {
        return;
    };
    let mut ids = Vec::new();
    let mut n = 0usize;
    while let Some(ev) = reader.next_event() {
        let syms = reader.symbols();
        if let vmview_format::EventKind::Call { method, .. } = &ev.kind {
            if let Some(sym) = syms.method(*method) {
                let _ = syms.string(sym.class);
                let _ = syms.string(sym.name);
            }
        }
        let _ = syms.thread(ev.thread);
        if n.is_multiple_of(7) {
            ids.push(ev.id);
        }
        n += 1;
        if n > 100_000 {
            break;
        }
    }
    let _ = reader.diagnostics().len();
    if let Ok(index) = reader.index() {
        let _ = index.event_count();
        let _ = index.id_range();
        if let Some((first, last)) = index.id_range() {
            ids.extend([first, last, first.saturating_add(1), last.wrapping_add(1)]);
        }
    }
    for id in ids.into_iter().take(8) {
        if reader.seek_to_event(id).is_ok() {
            let _ = reader.next_event();
        }
    }
});
