//! The JFR reader on arbitrary bytes: every input either fails to open
//! with an error or yields events and diagnostics, never a panic, a hang
//! or an allocation past what the input's length allows (wait samples
//! on or off).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::Cursor;
use vmview_jfr::{JfrOptions, JfrReader};

fuzz_target!(|data: &[u8]| {
    // Both mappings: JFR's own samples, and with wait samples made.
    for wait_samples in [false, true] {
        let options = JfrOptions { wait_samples };
        let Ok(mut reader) = JfrReader::with_options(Cursor::new(data), "fuzz", options) else {
            return;
        };
        let mut n = 0usize;
        while let Some(ev) = reader.next_event() {
            let _ = reader.symbols().thread(ev.thread);
            n += 1;
        }
        assert!(reader.position() <= data.len() as u64);
        let _ = (n, reader.diagnostics().len(), reader.header());
        let _ = reader.wait_samples().total();
    }
});
