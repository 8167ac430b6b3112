//! The overhead budget (`budget=`, docs/BUDGET.md) on fx.Budget, one
//! thread in phases: the short `leaf`, hot only in the third phase, is
//! demoted there and counted from then on; every other method keeps all
//! its CALL/RETURN events; `slow` (12 µs and more a call) never goes.

use serde_json::Value;
use std::collections::BTreeMap;

use crate::support::*;

/// CALL and RETURN events per fx.Budget method.
fn traced(events: &[Value]) -> BTreeMap<String, (u64, u64)> {
    let mut out = BTreeMap::new();
    for e in events {
        let ty = e["type"].as_str().unwrap_or_default();
        if (ty == "CALL" || ty == "RETURN") && e["class"] == "fx.Budget" {
            let m = out
                .entry(e["method"].as_str().unwrap().to_string())
                .or_insert((0, 0));
            if ty == "CALL" {
                m.0 += 1;
            } else {
                m.1 += 1;
            }
        }
    }
    out
}

/// The fixture's own counts, from its last line (`early=1000 leaf=N …`).
fn printed(stdout: &str) -> BTreeMap<String, u64> {
    let line = stdout.lines().last().unwrap_or_default();
    line.split(' ')
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| ["early", "leaf", "slow", "after", "hot"].contains(k))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
        .collect()
}

#[test]
fn the_hot_short_method_is_demoted_at_its_phase_and_counted_the_rest_exactly() {
    let rec = record(
        &["--classes", "fx.Budget", "--budget", "5%", "--args", "off"],
        &[],
        "fx.Budget",
        &["2500"],
    );
    assert!(rec.output.status.success(), "{}", rec.stderr());
    let want = printed(&rec.stdout());
    assert_eq!(want.len(), 5, "fixture output: {}", rec.stdout());
    let events = rec.events();
    let counts = traced(&events);

    // Exactly one demotion, of leaf, counted.
    let demotions = of_type(&events, "DEMOTION");
    assert_eq!(demotions.len(), 1, "{demotions:?}\n{}", rec.stderr());
    let d = demotions[0];
    assert_eq!(d["class"], "fx.Budget");
    assert_eq!(d["method"], "leaf");
    assert_eq!(d["counted"], true);
    assert!(d["mean_ns"].as_u64().unwrap() < 10_000, "{d}");
    assert!(d["rate_per_s"].as_u64().unwrap() >= 1_000, "{d}");
    assert!(
        d["before_bp"].as_u64().unwrap() > 500 && d["after_bp"].as_u64().unwrap() <= 500,
        "{d}"
    );

    // Every other method: all its calls traced, exactly.
    for m in ["early", "slow", "after", "hot"] {
        assert_eq!(counts.get(m), Some(&(want[m], want[m])), "{m}: {counts:?}");
    }
    let main = counts.get("main").copied().unwrap_or_default();
    assert_eq!(main, (1, 1), "{counts:?}");

    // The demotion came in the hot phase: after hot's CALL, after every
    // quiet-phase call of leaf (1000, all traced before it).
    let pos = |pred: &dyn Fn(&Value) -> bool| events.iter().position(pred).unwrap();
    let demoted_at = pos(&|e| e["type"] == "DEMOTION");
    let hot_call = pos(&|e| e["type"] == "CALL" && e["method"] == "hot");
    assert!(
        hot_call < demoted_at,
        "the demotion came before the hot phase"
    );
    let leaf_before = events[..demoted_at]
        .iter()
        .filter(|e| e["type"] == "CALL" && e["method"] == "leaf")
        .count() as u64;
    assert!(
        leaf_before > 1000,
        "{leaf_before} leaf calls before the demotion"
    );
    let leaf_quiet = events[..hot_call]
        .iter()
        .filter(|e| e["type"] == "CALL" && e["method"] == "leaf")
        .count();
    assert_eq!(leaf_quiet, 1000);

    // Traced leaf calls plus the last METHOD_COUNTS total: within 1 % of
    // the calls the fixture made (single thread: exact in practice).
    let reports = of_type(&events, "METHOD_COUNTS");
    let last = reports.last().expect("a METHOD_COUNTS event");
    let counted = last["counts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c[0] == "fx.Budget.leaf(I)I")
        .and_then(|c| c[1].as_u64())
        .unwrap_or_else(|| panic!("leaf not in {last}"));
    let total = counts["leaf"].0 + counted;
    let made = want["leaf"];
    assert!(
        total.abs_diff(made) * 100 <= made,
        "leaf: {} traced + {counted} counted, fixture made {made}",
        counts["leaf"].0
    );
    assert!(counted > 0);

    // The end-of-run report names it and says how to keep it.
    let err = rec.stderr();
    assert!(err.contains("fx.Budget.leaf(I)I"), "{err}");
    assert!(err.contains("--budget off"), "{err}");

    // stats lists it as counted, not traced, with both counts.
    let stats = run(&["stats", path_str(&rec.trace)]);
    let text = String::from_utf8_lossy(&stats.stdout);
    let section = text
        .split("\n\n")
        .find(|s| s.starts_with("demoted by the overhead budget"))
        .unwrap_or_else(|| panic!("no demoted section in\n{text}"));
    let row = format!(
        "fx.Budget.leaf(I)I   {}   {counted}   {total}",
        counts["leaf"].0
    );
    assert!(
        section
            .split_whitespace()
            .collect::<Vec<_>>()
            .join("   ")
            .contains(&row),
        "{section}\nwanted {row}"
    );
    let json = run(&["stats", path_str(&rec.trace), "--format", "json"]);
    let doc: Value = serde_json::from_slice(&json.stdout).expect("stats JSON");
    assert_eq!(doc["budget"]["demoted"], 1, "{}", doc["budget"]);
    // The two kinds export as XML that its DTD accepts.
    let small = rec.trace.with_file_name("budget-events.vmv");
    let f = run(&[
        "filter",
        path_str(&rec.trace),
        "-o",
        path_str(&small),
        "type in [DEMOTION, METHOD_COUNTS]",
    ]);
    assert!(f.status.success(), "{}", String::from_utf8_lossy(&f.stderr));
    let xml = small.with_extension("xml");
    crate::xml::export(&small, "xml", &xml);
    let text = std::fs::read_to_string(&xml).unwrap();
    assert!(
        text.contains("<DEMOTION") && text.contains("<COUNTS CLASS="),
        "{text}"
    );
    crate::xml::assert_valid_xml(&xml);

    // calltree and dataflow say their trees and values miss those calls.
    for cmd in ["calltree", "dataflow"] {
        let out = run(&[cmd, path_str(&rec.trace)]);
        assert!(out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("demoted by the overhead budget") && err.contains("fx.Budget.leaf(I)I"),
            "{cmd}: {err}"
        );
    }
}

#[test]
fn budget_off_traces_every_call_and_writes_no_budget_events() {
    let rec = record(
        &["--classes", "fx.Budget", "--budget", "off", "--args", "off"],
        &[],
        "fx.Budget",
        &["50"],
    );
    assert!(rec.output.status.success(), "{}", rec.stderr());
    let want = printed(&rec.stdout());
    let events = rec.events();
    assert!(of_type(&events, "DEMOTION").is_empty());
    assert!(of_type(&events, "METHOD_COUNTS").is_empty());
    let counts = traced(&events);
    for m in ["early", "leaf", "slow", "after", "hot"] {
        assert_eq!(counts.get(m), Some(&(want[m], want[m])), "{m}: {counts:?}");
    }
    assert!(!rec.stderr().contains("budget:"), "{}", rec.stderr());
}

#[test]
fn jvmti_mode_cannot_demote_and_says_so() {
    let rec = record(
        &[
            "--classes",
            "fx.Budget",
            "--budget",
            "1%",
            "--mode",
            "jvmti",
            "--args",
            "off",
        ],
        &[],
        "fx.Budget",
        &["2500"],
    );
    assert!(rec.output.status.success(), "{}", rec.stderr());
    let want = printed(&rec.stdout());
    let events = rec.events();
    assert!(of_type(&events, "DEMOTION").is_empty());
    // The estimate is still reported.
    let reports = of_type(&events, "METHOD_COUNTS");
    assert!(
        reports
            .iter()
            .any(|r| r["overhead_bp"].as_u64().unwrap() > 100),
        "{reports:?}"
    );
    assert_eq!(traced(&events)["leaf"].0, want["leaf"]);
    let err = rec.stderr();
    assert!(err.contains("mode=jvmti cannot demote"), "{err}");
}
