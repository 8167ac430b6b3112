//! `vmview dataflow` on a real recording of the `fx.Dataflow` fixture, whose
//! methods are called with known values: every count, extreme, mean,
//! percentile and frequent value must come out exactly.

use crate::support::*;
use serde_json::{json, Value};
use std::sync::OnceLock;

/// One recording of the fixture, shared by the tests (recording costs a JVM).
fn recording() -> &'static Recording {
    static REC: OnceLock<Recording> = OnceLock::new();
    REC.get_or_init(|| {
        let rec = record(&["--classes", "fx.Dataflow"], &[], "fx.Dataflow", &[]);
        assert!(rec.output.status.success(), "stderr: {}", rec.stderr());
        assert_eq!(
            rec.stdout(),
            "total=20390 grades=11/20/69 failed=20 checked=8000 halves=4.5 kinds=7\n",
            "the program's output must not change"
        );
        rec
    })
}

fn dataflow_json(extra: &[&str]) -> Value {
    dataflow_json_of(recording(), extra)
}

fn dataflow_json_of(rec: &Recording, extra: &[&str]) -> Value {
    let trace = path_str(&rec.trace).to_string();
    let mut args = vec!["dataflow", trace.as_str(), "--format", "json"];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(
        out.status.success(),
        "vmview dataflow failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("dataflow prints one JSON document")
}

fn method<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["methods"]
        .as_array()
        .expect("methods list")
        .iter()
        .find(|m| m["class"] == "fx.Dataflow" && m["method"] == name)
        .unwrap_or_else(|| panic!("no profile for fx.Dataflow.{name} in {doc}"))
}

/// `(value, count)` of the frequent values, most frequent first.
fn top(profile: &Value) -> Vec<(Value, u64)> {
    profile["top"]
        .as_array()
        .expect("top list")
        .iter()
        .map(|t| {
            assert_eq!(t["count_error"], 0, "small counts are exact: {t}");
            (t["value"].clone(), t["count"].as_u64().expect("count"))
        })
        .collect()
}

fn types(profile: &Value) -> Vec<(String, u64)> {
    profile["types"]
        .as_array()
        .expect("types list")
        .iter()
        .map(|t| {
            (
                t["type"].as_str().expect("type").to_string(),
                t["count"].as_u64().expect("count"),
            )
        })
        .collect()
}

/// Nearest-rank percentile, as documented: the value at rank ⌈p·n/100⌉.
fn percentile(sorted: &[i64], p: usize) -> i64 {
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

#[test]
fn dataflow_profiles_arguments_by_name_and_declared_type() {
    let doc = dataflow_json(&[]);
    let price = method(&doc, "price");
    assert_eq!(price["sig"], "(ILjava/lang/String;)J");
    assert_eq!(
        (price["calls"].as_u64(), price["returns"].as_u64()),
        (Some(100), Some(100))
    );
    assert_eq!(price["exceptional_returns"], 0);

    let qty = &price["params"][0];
    assert_eq!(
        (qty["name"].as_str(), qty["type"].as_str()),
        (Some("qty"), Some("int"))
    );
    assert_eq!(
        (qty["count"].as_u64(), qty["nulls"].as_u64()),
        (Some(100), Some(0))
    );
    assert_eq!(types(qty), [("int".to_string(), 100)]);
    assert_eq!(
        qty["numbers"],
        json!({"count": 100, "nan": 0, "min": 1, "max": 100, "mean": 50.5,
               "p50": 50, "p90": 90, "p99": 99, "percentiles_exact": true})
    );
    assert_eq!(qty["lengths"], Value::Null);
    // Every qty once: the ten listed are the first ten seen, the rest "other".
    assert_eq!(
        top(qty),
        (1..=10).map(|q| (json!(q), 1)).collect::<Vec<_>>()
    );
    assert_eq!(
        (qty["other"].as_u64(), qty["distinct"].as_u64()),
        (Some(90), Some(100))
    );
    assert_eq!(qty["distinct_exact"], true);

    let sku = &price["params"][1];
    assert_eq!(
        (sku["name"].as_str(), sku["type"].as_str()),
        (Some("sku"), Some("java.lang.String"))
    );
    assert_eq!(
        (sku["count"].as_u64(), sku["nulls"].as_u64()),
        (Some(100), Some(10))
    );
    assert_eq!(types(sku), [("java.lang.String".to_string(), 90)]);
    assert_eq!(
        top(sku),
        [
            (json!("apple"), 50),
            (json!("pear"), 30),
            (json!("plum"), 10)
        ]
    );
    assert_eq!(
        (sku["other"].as_u64(), sku["distinct"].as_u64()),
        (Some(0), Some(3))
    );
    let mean = f64::from(50 * 5 + 30 * 4 + 10 * 4) / 90.0;
    assert_eq!(
        sku["lengths"],
        json!({"count": 90, "min": 4, "max": 5, "mean": mean})
    );
    assert_eq!(sku["numbers"], Value::Null);
}

#[test]
fn dataflow_return_values_match_what_the_method_computed() {
    let doc = dataflow_json(&[]);
    let ret = &method(&doc, "price")["return"];
    assert_eq!(ret["type"], "long");
    let mut values: Vec<i64> = (1..=100i64)
        .map(|q| match q % 10 {
            0 => -1,
            1..=5 => q * 5,
            _ => q * 4,
        })
        .collect();
    values.sort_unstable();
    let n = &ret["numbers"];
    assert_eq!(n["count"], 100);
    assert_eq!(n["min"], -1);
    assert_eq!(n["max"], json!(values[99]));
    assert_eq!(n["mean"], json!(values.iter().sum::<i64>() as f64 / 100.0));
    for p in [50, 90, 99] {
        assert_eq!(
            n[format!("p{p}")],
            json!(percentile(&values, p)),
            "p{p} of {values:?}"
        );
    }
    // -1 (for each null sku) is the only repeated value among the first seen.
    assert_eq!(top(ret)[0], (json!(-1), 10));

    let grade = &method(&doc, "grade")["return"];
    assert_eq!(grade["type"], "java.lang.String");
    assert_eq!(
        top(grade),
        [(json!("C"), 69), (json!("B"), 20), (json!("A"), 11)]
    );
    assert_eq!(
        grade["lengths"],
        json!({"count": 100, "min": 1, "max": 1, "mean": 1.0})
    );

    let half = method(&doc, "half");
    assert_eq!(
        half["params"][0]["numbers"],
        json!({"count": 8, "nan": 0, "min": 0.25, "max": 2.0, "mean": 1.125,
               "p50": 1.0, "p90": 2.0, "p99": 2.0, "percentiles_exact": true})
    );
    assert_eq!(half["return"]["numbers"]["max"], 1.0);
}

#[test]
fn dataflow_counts_exceptions_that_ended_calls() {
    let doc = dataflow_json(&[]);
    let check = method(&doc, "check");
    assert_eq!(
        (check["calls"].as_u64(), check["returns"].as_u64()),
        (Some(100), Some(100))
    );
    assert_eq!(check["exceptional_returns"], 20);
    assert_eq!(
        check["exceptions"],
        json!([{"class": "java.lang.IllegalArgumentException", "count": 20}])
    );
    let ret = &check["return"];
    assert_eq!(ret["count"], 80, "only normal returns carry a value");
    assert_eq!(
        (
            ret["numbers"]["min"].as_i64(),
            ret["numbers"]["max"].as_i64()
        ),
        (Some(2), Some(198))
    );
}

#[test]
fn dataflow_names_runtime_types_of_object_arguments() {
    let doc = dataflow_json(&[]);
    let o = &method(&doc, "kind")["params"][0];
    assert_eq!(o["type"], "java.lang.Object");
    assert_eq!(
        (o["count"].as_u64(), o["nulls"].as_u64()),
        (Some(7), Some(1))
    );
    assert_eq!(
        types(o),
        [
            ("java.lang.Integer".to_string(), 3),
            ("java.lang.String".to_string(), 2),
            ("int[]".to_string(), 1)
        ]
    );
    // The boxed 7 and the String "7" are different values.
    assert_eq!(
        top(o),
        [
            (json!(7), 2),
            (json!("seven"), 1),
            (json!("int[2]"), 1),
            (json!("7"), 1),
            (json!(8), 1)
        ]
    );
    assert_eq!(
        o["numbers"]["count"], 3,
        "boxed numbers feed the number statistics"
    );
    assert_eq!(
        o["lengths"],
        json!({"count": 3, "min": 1, "max": 5, "mean": 8.0 / 3.0})
    );
}

#[test]
fn dataflow_method_glob_selects_methods() {
    let doc = dataflow_json(&["--method", "fx.Dataflow.price+*.gra*"]);
    let names: Vec<&str> = doc["methods"]
        .as_array()
        .expect("methods")
        .iter()
        .map(|m| m["method"].as_str().expect("method name"))
        .collect();
    assert_eq!(names, ["grade", "price"]);
}

#[test]
fn dataflow_text_shows_each_argument_and_its_top_values() {
    let trace = path_str(&recording().trace).to_string();
    let out = run(&["dataflow", &trace, "--method", "fx.Dataflow.price"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    for line in [
        "fx.Dataflow.price(ILjava/lang/String;)J",
        "  100 calls, 100 returns (0 by exception)",
        "  param qty: int",
        "    numbers  min 1  max 100  mean 50.5  p50 50  p90 90  p99 99",
        "  param sku: java.lang.String",
        "    values   100, 10 null, 3 distinct",
        "      \"apple\"  50",
        "  return: long",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no line {line:?} in:\n{text}"
        );
    }
}

#[test]
fn dataflow_is_the_same_whichever_mode_recorded_it() {
    // The default recording uses bytecode instrumentation; JVMTI method
    // events must see the same values flow through the same methods.
    let jvmti = record(
        &["--classes", "fx.Dataflow", "--mode", "jvmti"],
        &[],
        "fx.Dataflow",
        &[],
    );
    assert!(jvmti.output.status.success(), "stderr: {}", jvmti.stderr());
    let strip = |mut doc: Value| {
        doc.as_object_mut().expect("document").remove("file");
        doc
    };
    let bci = strip(dataflow_json(&[]));
    let jvmti = strip(dataflow_json_of(&jvmti, &[]));
    assert_eq!(bci, jvmti);
}

#[test]
fn dataflow_says_when_values_were_not_captured() {
    let rec = record(
        &["--classes", "fx.Dataflow", "--args", "off"],
        &[],
        "fx.Dataflow",
        &[],
    );
    assert!(rec.output.status.success(), "stderr: {}", rec.stderr());
    let doc = dataflow_json_of(&rec, &["--method", "fx.Dataflow.price"]);
    let price = method(&doc, "price");
    assert_eq!(price["calls"], 100, "calls are still counted");
    assert_eq!(price["params"], json!([]));
    assert_eq!(
        (
            price["return"]["count"].as_u64(),
            price["return"]["unavailable"].as_u64()
        ),
        (Some(100), Some(100))
    );

    let trace = path_str(&rec.trace).to_string();
    let out = run(&["dataflow", &trace, "--method", "fx.Dataflow.price"]);
    let text = String::from_utf8(out.stdout).expect("utf-8");
    for line in [
        "  params: 2 not captured (recorded with args=off?)",
        "  return: long, not captured",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no line {line:?} in:\n{text}"
        );
    }
}
