//! `vmview calltree` on fx.CallTree: exact counts for a call tree of known
//! shape, the output formats and options, and what compensation does to a
//! cheap method's times compared with the same code run untraced.

use serde_json::Value;

use crate::support::*;

fn calltree_json(trace: &std::path::Path, extra: &[&str]) -> Value {
    let mut args = vec!["calltree", path_str(trace), "--format", "json"];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(
        out.status.success(),
        "calltree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON document")
}

/// The child of `node` for method `name` (fx.CallTree's methods).
fn child<'a>(node: &'a Value, name: &str) -> &'a Value {
    node["children"]
        .as_array()
        .expect("children")
        .iter()
        .find(|c| c["name"] == format!("fx.CallTree.{name}"))
        .unwrap_or_else(|| panic!("no child {name} in {node:#}"))
}

fn recorded() -> &'static Recording {
    static REC: std::sync::OnceLock<Recording> = std::sync::OnceLock::new();
    REC.get_or_init(|| {
        let rec = record(&["--classes", "fx.CallTree"], &[], "fx.CallTree", &[]);
        assert!(
            rec.output.status.success(),
            "record failed: {}",
            rec.stderr()
        );
        rec
    })
}

#[test]
fn counts_are_exact_for_a_deterministic_program() {
    let doc = calltree_json(&recorded().trace, &[]);
    let main = child(&doc["merged"], "main");
    assert_eq!(main["calls"], 1);
    let outer = child(main, "outer");
    assert_eq!(outer["calls"], 3);
    assert_eq!(child(outer, "inner")["calls"], 12);
    assert_eq!(child(outer, "locked")["calls"], 6);
    assert_eq!(child(main, "counted")["calls"], 5);
    // Inclusive covers exclusive plus the children, and the root is the sum.
    let incl = |n: &Value| n["wall_incl_ns"].as_u64().unwrap();
    let excl = |n: &Value| n["wall_excl_ns"].as_u64().unwrap();
    let kids: u64 = outer["children"].as_array().unwrap().iter().map(incl).sum();
    assert_eq!(incl(outer), excl(outer) + kids);
    assert!(incl(main) >= incl(outer));
    // The agent wrote its calibration.
    let costs = doc["calibration"].as_array().expect("calibration");
    assert!(costs
        .iter()
        .any(|c| c["record"] == "CALL" && c["cost_ps"].as_u64() > Some(0)));
    assert_eq!(doc["threads"][0]["thread"], "main");
}

#[test]
fn text_collapsed_and_thread_selection() {
    let trace = &recorded().trace;
    let out = run(&["calltree", path_str(trace)]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("== thread main"), "{text}");
    let inner = text
        .lines()
        .find(|l| l.ends_with("fx.CallTree.inner"))
        .expect("an inner line");
    assert!(inner.trim_start().starts_with("12 "), "{inner}");
    assert!(
        inner.contains("      fx.CallTree.inner"),
        "indented three levels: {inner}"
    );

    let out = run(&["calltree", path_str(trace), "--format", "collapsed"]);
    let folded = String::from_utf8_lossy(&out.stdout);
    assert!(
        folded
            .lines()
            .any(|l| l.starts_with("main;fx.CallTree.main;fx.CallTree.outer;fx.CallTree.inner ")),
        "{folded}"
    );

    let out = run(&["calltree", path_str(trace), "--thread", "nobody*"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("(no traced calls)"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("of the selected threads"));

    // Only main's subtree is big enough for 50%.
    let out = run(&["calltree", path_str(trace), "--min-share", "50%"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("fx.CallTree.main"), "{text}");
    assert!(!text.contains("fx.CallTree.inner"), "{text}");

    let out = run(&["calltree", path_str(trace), "--min-share", "2"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a share"));

    // No periods recorded: --per-period says so and shows the whole trace.
    let out = run(&["calltree", path_str(trace), "--per-period"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no tracing periods"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("fx.CallTree.inner"));
}

#[test]
fn compensation_brings_a_cheap_method_closer_to_its_untraced_time() {
    const N: &str = "20000";
    let field = |stdout: &str, name: &str| -> f64 {
        stdout
            .split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {stdout:?}"))
    };
    // Untraced: the program times one cheap(N) itself.
    let plain = std::process::Command::new("java")
        .arg("-cp")
        .arg(classes())
        .args(["fx.CallTree", N])
        .output()
        .expect("run java");
    let stdout = String::from_utf8_lossy(&plain.stdout);
    let (plain_ns, plain_cpu) = (field(&stdout, "cheap_ns="), field(&stdout, "cheap_cpu_ns="));

    // Traced, with the thread's CPU time on each CALL/RETURN: the tracer's
    // own work is CPU time of the traced thread, which the calibration
    // measures; the wall time also holds what the writer thread and the
    // rest of the machine took from it, which no calibration can know.
    let rec = record(
        &[
            "--classes",
            "fx.CallTree",
            "--args",
            "off",
            "--metrics",
            "cpu",
        ],
        &[],
        "fx.CallTree",
        &[N],
    );
    assert!(
        rec.output.status.success(),
        "record failed: {}",
        rec.stderr()
    );
    let doc = calltree_json(&rec.trace, &["--compensate"]);
    assert_eq!(doc["compensated"], true);
    let cheap = child(child(&doc["merged"], "main"), "cheap");
    let calls = cheap["calls"].as_u64().unwrap() as f64;
    let per = |key: &str| cheap[key].as_u64().unwrap() as f64 / calls;
    let (measured, compensated) = (per("wall_incl_ns"), per("comp_incl_ns"));
    let cpu = per("cpu_incl_ns");
    // The calibrated cost the compensation took away, out of the CPU time.
    let cpu_compensated = cpu - (measured - compensated);
    eprintln!(
        "cheap({N}): wall untraced {:.3} ms, traced {:.3} ms, compensated {:.3} ms; \
         CPU untraced {:.3} ms, traced {:.3} ms, compensated {:.3} ms",
        plain_ns / 1e6,
        measured / 1e6,
        compensated / 1e6,
        plain_cpu / 1e6,
        cpu / 1e6,
        cpu_compensated / 1e6,
    );
    // Loose, not timing-fragile: tracing 20,000 calls costs far more than
    // the untraced loop; compensation takes most of the traced thread's
    // extra CPU time away (generously: at least half of it).
    assert!(
        measured > 2.0 * plain_ns && cpu > 2.0 * plain_cpu,
        "traced {measured} ns ({cpu} CPU) vs untraced {plain_ns} ({plain_cpu} CPU)"
    );
    assert!(compensated < measured && compensated > 0.0);
    assert!(
        (cpu_compensated - plain_cpu).abs() < 0.5 * (cpu - plain_cpu),
        "compensated CPU {cpu_compensated} is not much closer to the untraced {plain_cpu} than the traced {cpu}"
    );
}

#[test]
fn compensate_without_calibration_is_refused_with_a_hint() {
    // A trace written without the agent's CALIBRATION events: filter it out.
    let dir = scratch("calltree-nocal");
    let out_trace = dir.join("nocal.vmv");
    let out = run(&[
        "filter",
        path_str(&recorded().trace),
        "-o",
        path_str(&out_trace),
        "type != CALIBRATION",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["calltree", path_str(&out_trace), "--compensate"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no CALIBRATION event"), "{err}");
    assert!(err.contains("leave out --compensate"), "{err}");
}
