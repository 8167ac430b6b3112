//! The class-file rewriter on mutated class files. A class either gives an
//! error or instruments; a rewritten class must itself parse (`describe`)
//! and instrument again, with the same methods seen. Whether the JVM's
//! verifier accepts rewritten classes is checked by the classfile crate's
//! own tests, with real JVMs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vmview_classfile::{describe, instrument, HookConfig, Outcome};

fn config() -> HookConfig {
    HookConfig {
        probe_class: "vmview/Probe".into(),
        capture_args: true,
        primitive_entry: true,
        capture_return: true,
        // The monitor hooks' insertions are mutated too.
        monitors: true,
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = describe(data);
    let mut n = 0u32;
    let Ok(first) = instrument(data, &config(), &mut |_| {
        n += 1;
        Some(n.wrapping_mul(40_503))
    }) else {
        return;
    };
    let Outcome::Rewritten(out) = &first.outcome else {
        return;
    };
    let info = describe(out).expect("a rewritten class parses again");
    assert_eq!(info.name, first.class_name);
    let mut m = 0u32;
    instrument(out, &config(), &mut |_| {
        m += 1;
        Some(m)
    })
    .expect("a rewritten class instruments again");
});
