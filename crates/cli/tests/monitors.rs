//! events=calls+monitors on fx.Held: monitors acquired by synchronized
//! blocks and methods of trace classes become `[monitor CLASS@hash]` nodes
//! of `vmview calltree` with the calls made while they were held beneath
//! them — nested, and released by an exception too. The rewritten classes
//! run under the bytecode verifier.

use serde_json::Value;

use crate::support::*;

/// The child of `node` named `name` (a method's `fx.Held.NAME`, or a
/// placeholder's `[monitor …]`).
fn child<'a>(node: &'a Value, name: &str) -> &'a Value {
    let full = if name.starts_with('[') {
        name.to_string()
    } else {
        format!("fx.Held.{name}")
    };
    node["children"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == full))
        .unwrap_or_else(|| panic!("no child {full} in {node:#}"))
}

fn names(node: &Value) -> Vec<&str> {
    node["children"]
        .as_array()
        .map(|c| c.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default()
}

#[test]
fn calls_made_holding_a_monitor_hang_below_its_placeholder() {
    let rec = record(
        &["--classes", "fx.Held", "--events", "calls,monitors"],
        &[
            "-XX:+UnlockDiagnosticVMOptions",
            "-XX:+BytecodeVerificationLocal",
            "-XX:+BytecodeVerificationRemote",
        ],
        "fx.Held",
        &[],
    );
    assert!(rec.output.status.success(), "{}", rec.stderr());
    // "A=ea30797 B=7e774085 Held=5fcfe4b2": the monitors' identity hashes.
    let stdout = rec.stdout();
    let hash = |key: &str| -> String {
        stdout
            .split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("no {key}= in {stdout}"))
            .to_string()
    };
    let a = format!("[monitor java.lang.Object@{}]", hash("A"));
    let b = format!("[monitor fx.Held@{}]", hash("B"));
    let class = format!("[monitor java.lang.Class@{}]", hash("Held"));

    let events = rec.events();
    assert_eq!(of_type(&events, "MONITOR_ENTER").len(), 6);
    assert_eq!(of_type(&events, "MONITOR_EXIT").len(), 6);

    let out = run(&["calltree", path_str(&rec.trace), "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let main = child(&doc["merged"], "main");

    // A synchronized block: work() under the monitor, free() after it.
    let block = child(main, "block");
    assert_eq!(names(block), [a.as_str(), "fx.Held.free"], "{block:#}");
    let held = child(block, &a);
    assert_eq!(held["kind"], "monitor");
    assert_eq!(held["calls"], 1);
    assert_eq!(names(held), ["fx.Held.work"]);
    // A synchronized method: `this`; a static one: its class.
    assert_eq!(names(child(child(main, "method"), &b)), ["fx.Held.work"]);
    assert_eq!(
        names(child(child(main, "staticMethod"), &class)),
        ["fx.Held.work"]
    );
    // Nested: B's placeholder inside A's, and a call holding A alone.
    let outer = child(child(main, "nested"), &a);
    let mut inside = names(outer);
    inside.sort();
    assert_eq!(inside, [b.as_str(), "fx.Held.work"], "{outer:#}");
    assert_eq!(names(child(outer, &b)), ["fx.Held.work"]);
    // Thrown out of the block: the catch handler's call in main holds
    // nothing (the compiler's catch-any monitorexit was reported).
    let fails = child(main, "fails");
    assert_eq!(names(fails), [a.as_str()]);
    assert_eq!(names(child(fails, &a)), ["fx.Held.work"]);
    assert_eq!(child(main, "free")["calls"], 1);
    // Inclusive time of a placeholder covers the calls beneath it.
    let incl = |n: &Value| n["wall_incl_ns"].as_u64().unwrap();
    assert!(incl(held) >= incl(child(held, "work")));
    assert!(incl(block) >= incl(held));

    // The text tree shows the same placeholder.
    let out = run(&["calltree", path_str(&rec.trace)]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&a) && text.contains(&class), "{text}");
}

#[test]
fn monitors_are_reported_only_when_asked_for() {
    let rec = record(&["--classes", "fx.Held"], &[], "fx.Held", &[]);
    assert!(rec.output.status.success(), "{}", rec.stderr());
    let events = rec.events();
    assert!(of_type(&events, "MONITOR_ENTER").is_empty());
    assert!(!of_type(&events, "CALL").is_empty());

    let out = run(&[
        "record",
        "--events",
        "calls,monitors",
        "--mode",
        "jvmti",
        "--",
        "java",
        "-version",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("mode=bci"), "{err}");
}
