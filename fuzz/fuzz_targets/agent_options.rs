//! The agent's option parser (`file=…,classes=…`) on arbitrary text, as the
//! JVM passes it to `Agent_OnLoad`: options parse or give an error, never a
//! panic. Parsed class filters are queried, and the file pattern expanded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vmview_options::{expand_file_pattern, AgentOptions, CivilTime};

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    match AgentOptions::parse(src) {
        Ok(o) => {
            let _ = o.is_traced_class("shop.Inventory$Clerk");
            let _ = o.is_traced_class("java.lang.String");
            let _ = expand_file_pattern(src, 4242, CivilTime::from_unix(1_700_000_000, 3600));
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
