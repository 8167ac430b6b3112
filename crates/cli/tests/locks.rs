//! `vmview locks` on fx.GcLock: two threads block on a monitor while its
//! holder forces garbage collections; the GC-corrected wait is smaller by
//! the length of the pauses they waited through.

use serde_json::Value;

use crate::support::*;

#[test]
fn gc_pauses_come_out_of_the_waits() {
    let rec = record(&[], &[], "fx.GcLock", &[]);
    assert!(
        rec.output.status.success(),
        "record failed: {}",
        rec.stderr()
    );
    let out = run(&["locks", path_str(&rec.trace), "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let m = &doc["monitors"][0];
    assert!(m["monitor"]
        .as_str()
        .unwrap()
        .starts_with("java.lang.Object@"));
    assert_eq!(m["threads"], serde_json::json!(["waiter-0", "waiter-1"]));
    assert_eq!(m["wait"]["count"], 2);
    assert_eq!(m["holders"][0]["thread"], "holder");
    assert_eq!(m["holders"][0]["blocked"], 2);

    // The pauses the waiters sat through: the GCs that started after both
    // had blocked (the holder collects only then).
    let events = rec.events();
    let blocked_at = of_type(&events, "MONITOR_CONTENDED_ENTER")
        .iter()
        .map(|e| e["time_ns"].as_u64().unwrap())
        .max()
        .expect("contended enters");
    let pauses: u64 = of_type(&events, "GC_FINISH")
        .iter()
        .filter(|e| {
            e["time_ns"].as_u64().unwrap() - e["duration_ns"].as_u64().unwrap() > blocked_at
        })
        .map(|e| e["duration_ns"].as_u64().unwrap())
        .sum();
    assert!(pauses > 0, "System.gc() pauses after the waiters blocked");
    let mean = |k: &str| m[k]["mean_ns"].as_u64().unwrap() as f64;
    let taken_out = mean("wait") - mean("wait_without_gc");
    eprintln!(
        "mean wait {:.1} ms, without GC {:.1} ms, GC pauses while waiting {:.1} ms",
        mean("wait") / 1e6,
        mean("wait_without_gc") / 1e6,
        pauses as f64 / 1e6
    );
    assert!(
        taken_out >= 0.9 * pauses as f64 && taken_out <= pauses as f64 + 2e6,
        "taken out {taken_out} ns, pauses {pauses} ns"
    );

    let text = run(&["locks", path_str(&rec.trace)]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("without GC"), "{text}");
    assert!(text.contains("held by      holder"), "{text}");
}

#[test]
fn a_trace_without_contention_says_so() {
    let rec = record(&[], &[], "fx.Hello", &[]);
    assert!(
        rec.output.status.success(),
        "record failed: {}",
        rec.stderr()
    );
    let out = run(&["locks", path_str(&rec.trace)]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no contended monitor"));
}
