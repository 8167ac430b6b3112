//! Untrusted input: damaged class files give an error, never a panic, and
//! the parts of a class the rewriter does not understand survive intact.

use std::fs;

use crate::support::*;
use vmview_classfile::{describe, instrument, HookConfig, Outcome, RewriteError, Untouched};

/// The fixture classes, compiled once per test that needs them.
fn fixture_classes(tmp: &TempDir) -> Vec<(String, Vec<u8>)> {
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

fn try_instrument(bytes: &[u8]) -> Result<Outcome, RewriteError> {
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
fn probe_class_must_be_an_internal_name() {
    for bad in ["", "vmview.Probe", "vmview/", "/Probe", "a//b", "[LProbe;"] {
        let config = HookConfig {
            probe_class: bad.into(),
            ..config()
        };
        assert_eq!(
            instrument(&[], &config, &mut |_| Some(1)),
            Err(RewriteError::InvalidProbeClass { name: bad.into() })
        );
    }
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

/// Offset of `access_flags`: just after the constant pool.
fn access_flags_offset(bytes: &[u8]) -> usize {
    let count = u16::from_be_bytes([bytes[8], bytes[9]]);
    let (mut at, mut i) = (10, 1);
    while i < count {
        let size = match bytes[at] {
            1 => 3 + usize::from(u16::from_be_bytes([bytes[at + 1], bytes[at + 2]])),
            5 | 6 => {
                i += 1;
                9
            }
            3 | 4 | 9..=12 | 17 | 18 => 5,
            15 => 4,
            _ => 3,
        };
        at += size;
        i += 1;
    }
    at
}

#[test]
fn nonstandard_access_flags_survive_and_the_probe_class_is_left_alone() {
    let tmp = TempDir::new("flags");
    let classes = fixture_classes(&tmp);
    let (_, calc) = classes.iter().find(|(n, _)| n == "Calc.class").unwrap();
    let access = describe(calc).unwrap().access;
    // The 0x0002 bit some JDK classes carry, which a rewriter that rebuilds
    // flags from a typed model drops.
    let mut flagged = calc.clone();
    flagged[access_flags_offset(calc) + 1] |= 0x02;
    assert_eq!(describe(&flagged).unwrap().access, access | 0x0002);
    let Outcome::Rewritten(out) = try_instrument(&flagged).unwrap() else {
        panic!("Calc left untouched")
    };
    assert_eq!(describe(&out).unwrap().access, access | 0x0002);

    let probe_dir = tmp.join("probe");
    compile_probe(&Jdk::default(), &probe_dir);
    let probe = fs::read(probe_dir.join("vmview/Probe.class")).unwrap();
    assert_eq!(
        try_instrument(&probe).unwrap(),
        Outcome::Untouched(Untouched::ProbeClass)
    );
}

#[test]
fn describe_names_parameters_from_the_local_variable_table() {
    let tmp = TempDir::new("describe");
    let classes = fixture_classes(&tmp);
    let (_, calc) = classes.iter().find(|(n, _)| n == "Calc.class").unwrap();
    let info = describe(calc).unwrap();
    assert_eq!(info.name, "Calc");
    assert_eq!(info.source_file.as_deref(), Some("Calc.java"));
    let mixed = info.methods.iter().find(|m| m.name == "mixed").unwrap();
    assert_eq!(mixed.parameter_names, ["a", "b", "c", "d", "e", "f"]);
    assert!(!mixed.line_numbers.is_empty());
    let instance_add = info
        .methods
        .iter()
        .find(|m| m.name == "instanceAdd")
        .unwrap();
    assert_eq!(
        instance_add.parameter_names,
        ["x"],
        "`this` is not a parameter"
    );

    // Without -g there is no table: names fall back to argN.
    let bare = tmp.join("bare");
    let out = Jdk::default()
        .tool("javac")
        .arg("-g:none")
        .arg("-d")
        .arg(&bare)
        .args(java_sources(&fixtures_dir()))
        .output()
        .unwrap();
    assert!(out.status.success());
    let info = describe(&fs::read(bare.join("Calc.class")).unwrap()).unwrap();
    let mixed = info.methods.iter().find(|m| m.name == "mixed").unwrap();
    assert_eq!(
        mixed.parameter_names,
        ["arg0", "arg1", "arg2", "arg3", "arg4", "arg5"]
    );
    assert!(mixed.line_numbers.is_empty());
}
