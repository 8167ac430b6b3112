//! Untrusted input: damaged class files give an error, never a panic.

use std::fs;

use crate::support::*;
use vmview_classfile::{describe, instrument, Outcome, RewriteError};

/// The fixture classes, compiled once per test that needs them.
pub fn fixture_classes(tmp: &TempDir) -> Vec<(String, Vec<u8>)> {
    let out = tmp.join("classes");
    Jdk::default().javac(&java_sources(&fixtures_dir()), &out, &[]);
    files_under(&out)
        .into_iter()
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                fs::read(p).unwrap(),
            )
        })
        .collect()
}

pub fn try_instrument(bytes: &[u8]) -> Result<Outcome, RewriteError> {
    let mut n = 0;
    instrument(bytes, &config(), &mut |_| {
        n += 1;
        Some(n * 40_503)
    })
    .map(|r| r.outcome)
}

#[test]
fn every_truncation_of_a_class_is_an_error() {
    let tmp = TempDir::new("truncate");
    for (name, bytes) in fixture_classes(&tmp).into_iter().filter(|(n, _)| {
        [
            "Ctors$Derived.class",
            "Switches.class",
            "Point.class",
            "Exceptions.class",
        ]
        .contains(&n.as_str())
    }) {
        for len in 0..bytes.len() {
            assert!(
                try_instrument(&bytes[..len]).is_err(),
                "{name} truncated to {len} bytes was accepted"
            );
            assert!(describe(&bytes[..len]).is_err());
        }
    }
}

#[test]
fn corrupted_bytes_never_panic() {
    let tmp = TempDir::new("corrupt");
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        // xorshift64*: a fixed sequence, so a failure reproduces.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let mut rewritten = 0;
    for (_, bytes) in fixture_classes(&tmp) {
        for _ in 0..300 {
            let mut b = bytes.clone();
            for _ in 0..1 + next() % 4 {
                let at = (next() % b.len() as u64) as usize;
                b[at] = match next() % 3 {
                    0 => next() as u8,
                    1 => b[at].wrapping_add(1),
                    _ => 0xFF,
                };
            }
            if let Ok(Outcome::Rewritten(out)) = try_instrument(&b) {
                // What we write is always structurally sound.
                describe(&out).unwrap();
                rewritten += 1;
            }
            let _ = describe(&b);
        }
    }
    // Most single-byte changes land in constants or code the rewriter
    // copies, so many damaged classes are still rewritten: the input space
    // was exercised, not just rejected at the magic.
    assert!(rewritten > 100, "{rewritten}");
}

#[test]
fn bad_magic_and_trailing_bytes_are_named() {
    let tmp = TempDir::new("magic");
    let (_, bytes) = fixture_classes(&tmp)
        .into_iter()
        .find(|(n, _)| n == "Calc.class")
        .unwrap();
    let mut bad = bytes.clone();
    bad[0] = 0xCB;
    assert_eq!(
        try_instrument(&bad),
        Err(RewriteError::BadMagic(0xCBFE_BABE))
    );
    let mut long = bytes.clone();
    long.extend_from_slice(&[0, 0]);
    assert_eq!(
        try_instrument(&long),
        Err(RewriteError::TrailingBytes { len: 2 })
    );
}
