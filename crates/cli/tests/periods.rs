//! `period=ON/OFF` on fx.Periods, in both capture modes: calls are traced
//! only inside periods, each period's tree is rooted at the stack the
//! thread had when it began, and the per-period trees add up exactly to
//! the merged one.

use serde_json::Value;
use std::collections::BTreeMap;

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

/// Every node of a tree by its path of names: (calls, incl, excl), summed
/// into `into`.
fn add_paths(node: &Value, path: &str, into: &mut BTreeMap<String, (u64, u64, u64)>) {
    for c in node["children"].as_array().expect("children") {
        let p = format!("{path}/{}", c["name"].as_str().expect("name"));
        let e = into.entry(p.clone()).or_default();
        e.0 += c["calls"].as_u64().unwrap();
        e.1 += c["wall_incl_ns"].as_u64().unwrap();
        e.2 += c["wall_excl_ns"].as_u64().unwrap();
        add_paths(c, &p, into);
    }
}

fn check(mode: &str) {
    let rec = record(
        &[
            "--classes",
            "fx.Periods",
            "--mode",
            mode,
            "--period",
            "20ms/30ms",
            "--events",
            "calls+samples",
        ],
        &[],
        "fx.Periods",
        &["500"],
    );
    assert_eq!(rec.stdout(), "periods done\n", "{mode}: {}", rec.stderr());
    let events = rec.events();

    // Every CALL and RETURN lies between a PERIOD_START and its PERIOD_END;
    // samples go on between periods.
    let (mut open, mut started, mut ended) = (None, Vec::new(), 0);
    let (mut calls, mut samples_off) = (0, 0);
    for e in &events {
        match e["type"].as_str().unwrap() {
            "PERIOD_START" => {
                let p = e["period"].as_u64().unwrap();
                if open != Some(p) {
                    assert_eq!(open, None, "{mode}: period {p} began inside another: {e}");
                    open = Some(p);
                    started.push(p);
                }
            }
            "PERIOD_END" => {
                assert_eq!(open, e["period"].as_u64(), "{mode}: {e}");
                open = None;
                ended += 1;
            }
            "CALL" | "RETURN" => {
                assert!(open.is_some(), "{mode}: outside every period: {e}");
                calls += 1;
            }
            "SAMPLE" if open.is_none() => samples_off += 1,
            _ => {}
        }
    }
    assert!(started.len() >= 3, "{mode}: periods {started:?}");
    assert_eq!(started, (0..started.len() as u64).collect::<Vec<_>>());
    assert_eq!(ended, started.len(), "{mode}: the last period ends too");
    assert!(calls > 0, "{mode}");
    assert!(samples_off > 0, "{mode}: no SAMPLE between periods");

    // The per-period trees of main add up to its merged tree, exactly.
    let merged = calltree_json(&rec.trace, &[]);
    let per = calltree_json(&rec.trace, &["--per-period"]);
    assert_eq!(merged["unmatched_returns"], 0, "{mode}");
    let main_tree = |doc: &Value| -> Vec<Value> {
        doc["threads"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["thread"] == "main")
            .map(|t| t["tree"].clone())
            .collect()
    };
    let whole = main_tree(&merged);
    assert_eq!(whole.len(), 1, "{mode}: {merged:#}");
    let mut expected = BTreeMap::new();
    add_paths(&whole[0], "", &mut expected);
    let periods = main_tree(&per);
    // A period may see main not yet started, or already ended.
    assert!(
        periods.len() >= 3 && periods.len() <= started.len(),
        "{mode}: {} trees for {} periods",
        periods.len(),
        started.len()
    );
    let mut summed = BTreeMap::new();
    for t in &periods {
        add_paths(t, "", &mut summed);
    }
    assert_eq!(summed, expected, "{mode}");

    // Rooted at the real stack: every call in a period's tree of main is
    // under main, and leaf() always hangs under main → run → step. Periods that
    // began while main() and run() were running (all but the first few)
    // show them as context: no CALL of their own, their callees below.
    let run_path = "/fx.Periods.main/fx.Periods.run";
    let step = format!("{run_path}/fx.Periods.step");
    let leaf = format!("{step}/fx.Periods.leaf");
    // (Or, before main() began, at the launcher's frames: context only.)
    for t in &periods {
        let mut m = BTreeMap::new();
        add_paths(t, "", &mut m);
        for (p, s) in &m {
            assert!(
                p.starts_with("/fx.Periods.main") || s.0 == 0,
                "{mode}: a call outside main: {p}"
            );
        }
    }
    for p in expected.keys() {
        assert!(!p.ends_with("leaf") || *p == leaf, "{mode}: {p}");
    }
    let inherited = periods
        .iter()
        .filter(|t| {
            let mut m = BTreeMap::new();
            add_paths(t, "", &mut m);
            m.get("/fx.Periods.main").is_some_and(|s| s.0 == 0)
                && m.get(run_path).is_some_and(|s| s.0 == 0 && s.1 > 0)
                && m.get(&leaf).is_some_and(|l| l.0 > 0)
        })
        .count();
    assert!(
        inherited >= 2,
        "{mode}: {inherited} periods rooted at main → run"
    );
    // The merged counts are the trace's.
    let leaf_calls = events
        .iter()
        .filter(|e| e["type"] == "CALL" && e["method"] == "leaf")
        .count() as u64;
    assert_eq!(expected[&leaf].0, leaf_calls, "{mode}");
}

#[test]
fn bci_calls_are_traced_only_in_periods_whose_trees_add_up() {
    check("bci");
}

#[test]
fn jvmti_calls_are_traced_only_in_periods_whose_trees_add_up() {
    check("jvmti");
}

#[test]
fn a_bad_period_is_refused_with_the_way_to_write_it() {
    for (period, says) in [
        ("0ms/900ms", "would trace nothing"),
        ("100ms", "write ON/OFF"),
    ] {
        let out = run(&["record", "--period", period, "--", "java", "-version"]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--period") && err.contains(says),
            "{period}: {err}"
        );
    }
}
