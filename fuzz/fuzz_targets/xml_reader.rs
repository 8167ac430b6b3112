//! The XML trace reader (VMView's flat shape) on arbitrary bytes: it must
//! return events or an error with an offset, never panic or loop forever.
//! When the first byte is odd a type mask taken from the next four bytes
//! is set first, so the skip-without-decoding path is exercised too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::Cursor;
use vmview_export::xml_reader::XmlTraceReader;

fuzz_target!(|data: &[u8]| {
    let (mask, doc) = match data {
        [flag, a, b, c, d, rest @ ..] if flag & 1 == 1 => {
            (Some(u32::from_le_bytes([*a, *b, *c, *d])), rest)
        }
        _ => (None, data),
    };
    let Ok(mut reader) = XmlTraceReader::new(Cursor::new(doc)) else {
        return;
    };
    if let Some(mask) = mask {
        reader.set_type_mask(mask);
    }
    let mut n = 0usize;
    while let Ok(Some(ev)) = reader.next_event() {
        let _ = reader.symbols().thread(ev.thread);
        let _ = reader.take_redefined();
        n += 1;
        if n > 100_000 {
            break;
        }
    }
    assert!(reader.position() <= doc.len() as u64);
});
