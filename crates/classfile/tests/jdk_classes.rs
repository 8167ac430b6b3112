//! The JDK's own classes: all of `java.base` instrumented and patched in
//! with `--patch-module`, so the VM boots on it. Boot classes are not
//! verified by default, so this runs with `-XX:+BytecodeVerificationLocal`:
//! without it a broken rewrite of a JDK class would load silently. The
//! monitor hooks are in too: java.base is full of synchronized blocks and
//! methods.

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::*;
use vmview_classfile::HookConfig;

/// Extracts `java.base` from the JDK's module image into `dir`.
fn extract_java_base(jdk: &Jdk, dir: &Path) -> PathBuf {
    let status = jdk
        .tool("jimage")
        .arg("extract")
        .arg("--dir")
        .arg(dir)
        .args(["--include", "regex:/java.base/.*"])
        .arg(jdk.home().join("lib/modules"))
        .status()
        .unwrap();
    assert!(status.success());
    dir.join("java.base")
}

fn boot_on_instrumented_java_base(jdk: &Jdk) {
    let tmp = TempDir::new("java-base");
    let (patch, probe, program) = (tmp.join("patch"), tmp.join("probe"), tmp.join("program"));
    let java_base = extract_java_base(jdk, &tmp.join("jdk"));
    let config = HookConfig {
        probe_class: "java/lang/VmviewProbe".into(),
        monitors: true,
        ..config()
    };
    let done = instrument_tree(&java_base, &patch, &config);
    assert_eq!(done.unexpected_skips(), Vec::<String>::new());
    assert!(done.method_count() > 50_000, "{}", done.method_count());
    // Object.finalize() is empty and must stay so: HotSpot would otherwise
    // consider every class finalizable.
    let object = done
        .results
        .iter()
        .find(|r| r.class_name == "java/lang/Object")
        .unwrap();
    assert!(object.skipped.iter().any(|s| s.method.name == "finalize"));
    assert!(object.methods.iter().any(|m| m.method.name == "<init>"));

    let probe_src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/probe");
    jdk.javac(
        &[probe_src.join("java/lang/VmviewProbe.java")],
        &probe,
        &[
            "--patch-module",
            &format!("java.base={}", probe_src.display()),
        ],
    );
    fs::copy(
        probe.join("java/lang/VmviewProbe.class"),
        patch.join("java/lang/VmviewProbe.class"),
    )
    .unwrap();
    let mut sources = java_sources(&fixtures_dir());
    sources.push(fixtures_dir().join("boot/BootCount.java"));
    jdk.javac(&sources, &program, &[]);

    let plain = jdk.java(&[], &[&program], "BootCount", &[]);
    assert_eq!(plain.status, Some(0), "{}", plain.stderr);
    let patched = jdk.java(
        &[format!("--patch-module=java.base={}", patch.display())],
        &[&program],
        "BootCount",
        &[],
    );
    assert_eq!(patched.status, Some(0), "{}", patched.stderr);
    assert_eq!(
        patched.stdout,
        plain
            .stdout
            .replace("no probe\n", "java.base called the probe\n"),
        "stderr:\n{}",
        patched.stderr
    );
}

#[test]
fn jdk17_boots_on_a_fully_instrumented_verified_java_base() {
    boot_on_instrumented_java_base(&Jdk::default());
}

#[test]
fn jdk25_boots_on_a_fully_instrumented_verified_java_base() {
    match Jdk::jdk25() {
        Some(jdk) => boot_on_instrumented_java_base(&jdk),
        None => eprintln!("JDK 25 not installed; skipped"),
    }
}
