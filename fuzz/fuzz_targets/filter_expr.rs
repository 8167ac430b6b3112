//! The filter-expression parser on arbitrary text: an expression parses or
//! gives an error whose rendering (with its column) never panics. A parsed
//! filter is also asked for its bounds and type mask, and evaluated on an
//! event, so the recursive passes (compile, eval, drop) run on every tree
//! the parser accepts: up to `MAX_NESTING` levels deep (seeds.sh writes
//! seeds at and past the limit, filter_expr.dict has runs of `(` and `!`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use vmview_filter::{EventFilter, MAX_NESTING};
use vmview_format::{Event, EventKind, MethodId, SymbolTable, ThreadRef, Value};

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    match EventFilter::parse(src) {
        Ok(mut f) => {
            let _ = f.id_bounds();
            let _ = f.time_bounds();
            let _ = f.type_mask();
            assert_eq!(f.source(), src);
            let ev = Event {
                id: 1,
                time_ns: 1000,
                thread: ThreadRef(0),
                kind: EventKind::Call {
                    metrics: Default::default(),
                    method: MethodId(0),
                    depth: 1,
                    caller: None,
                    params: vec![Value::Int(7)],
                },
            };
            let _ = f.matches(&ev, &SymbolTable::default());
        }
        Err(e) => {
            let _ = e.render(src);
            let _ = e.to_string();
            // The limit is reached only by that many `(` or `!` tokens.
            if e.message.starts_with("nested too deep") {
                let opens = src.matches(['(', '!']).count() + src.matches("not").count();
                assert!(opens > MAX_NESTING, "{e}: {src:?}");
            }
        }
    }
});
