//! The contract with the agent: what `describe` reports, which methods and
//! classes are left alone and how that is reported, and which parts of a
//! class survive byte for byte.

use std::fs;

use crate::malformed::{fixture_classes, try_instrument};
use crate::support::*;
use vmview_classfile::{
    describe, instrument, HookConfig, Outcome, RewriteError, SkipReason, Untouched,
};

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

#[test]
fn declined_methods_keep_their_code_and_are_reported() {
    let tmp = TempDir::new("declined");
    let classes = fixture_classes(&tmp);
    let (_, calc) = classes.iter().find(|(n, _)| n == "Calc.class").unwrap();
    let result = instrument(calc, &config(), &mut |m| (m.name != "add").then_some(9)).unwrap();
    assert_eq!(result.source_file.as_deref(), Some("Calc.java"));
    let add = result
        .skipped
        .iter()
        .find(|s| s.method.name == "add")
        .unwrap();
    assert_eq!(
        (add.reason.clone(), add.method_id),
        (SkipReason::Declined, None)
    );
    assert!(result
        .methods
        .iter()
        .all(|m| m.method.name != "add" && m.method_id == 9));

    // The declined method's code is exactly what javac wrote.
    let dir = tmp.join("declined");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("Calc.class"), result.bytes().unwrap()).unwrap();
    let listing = |d: &std::path::Path| {
        let out = Jdk::default()
            .tool("javap")
            .args(["-c", "-p", "-cp"])
            .arg(d)
            .arg("Calc")
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let start = text.find("static int add(int, int);").unwrap();
        let end = start + text[start..].find("\n\n").unwrap();
        text[start..end].to_string()
    };
    assert_eq!(listing(&dir), listing(&tmp.join("classes")));

    let none = instrument(calc, &config(), &mut |_| None).unwrap();
    assert_eq!(
        none.outcome,
        Outcome::Untouched(Untouched::NothingInstrumented)
    );
    assert!(none.methods.is_empty());
}

#[test]
fn a_class_whose_constant_pool_is_full_is_left_untouched() {
    // 3 pool entries per field (name, String, its Utf8) fill the pool to
    // within a few entries of 65535; the hooks need more than that.
    let fields = 21_835;
    let mut src = String::from("public class Crowded {\n");
    for i in 0..fields {
        src.push_str(&format!("    static final String F{i} = \"v{i}\";\n"));
    }
    src.push_str("    static int id(int x) {\n        return x;\n    }\n}\n");
    let tmp = TempDir::new("crowded");
    fs::create_dir_all(tmp.join("src")).unwrap();
    fs::write(tmp.join("src/Crowded.java"), src).unwrap();
    Jdk::default().javac(&[tmp.join("src/Crowded.java")], &tmp.join("out"), &[]);
    let bytes = fs::read(tmp.join("out/Crowded.class")).unwrap();
    let pool_count = u16::from_be_bytes([bytes[8], bytes[9]]);
    assert!(pool_count > 65_520, "pool holds only {pool_count} entries");

    let result = instrument(&bytes, &config(), &mut |_| Some(1)).unwrap();
    assert_eq!(
        result.outcome,
        Outcome::Untouched(Untouched::ConstantPoolFull)
    );
    assert!(result.methods.is_empty());
    let reasons: Vec<_> = result
        .skipped
        .iter()
        .map(|s| (s.method.name.as_str(), s.reason.clone()))
        .collect();
    assert_eq!(
        reasons,
        [
            ("<init>", SkipReason::ConstantPoolFull),
            ("id", SkipReason::ConstantPoolFull)
        ]
    );
}
