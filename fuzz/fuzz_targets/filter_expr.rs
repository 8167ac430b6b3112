//! The filter-expression parser on arbitrary text: an expression parses or
//! gives an error whose rendering (with its column) never panics. A parsed
//! filter is also asked for its bounds and type mask.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vmview_filter::EventFilter;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    match EventFilter::parse(src) {
        Ok(f) => {
            let _ = f.id_bounds();
            let _ = f.time_bounds();
            let _ = f.type_mask();
            assert_eq!(f.source(), src);
        }
        Err(e) => {
            let _ = e.render(src);
            let _ = e.to_string();
        }
    }
});
