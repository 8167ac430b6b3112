//! Trace format version 2 end to end (`format=2`, docs/FORMAT.md
//! "Version 2"): the agent writes it, every command reads it through the
//! same reader as version 1, and what a thread did reads back the same in
//! both versions. Only the fixture's own threads and events are compared:
//! the JDK's threads and timings differ from run to run.

use crate::support::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// `vmview record --format VERSION --classes CLASSES -- java … MAIN`.
fn record_format(version: &str, classes_glob: &str, main: &str) -> Recording {
    agent();
    let trace = scratch(&format!("{main}-v{version}")).join("trace.vmv");
    let output = Command::new(vmview())
        .args(["record", "--format", version, "--classes", classes_glob])
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg("java")
        .arg("-cp")
        .arg(classes())
        .arg(main)
        .output()
        .expect("run vmview record");
    let rec = Recording { trace, output };
    assert!(
        rec.output.status.success(),
        "record {main} --format {version}: {}",
        rec.stderr()
    );
    rec
}

fn version_of(trace: &Path) -> u16 {
    vmview_format::TraceReader::open(trace)
        .expect("a trace")
        .header()
        .version
}

/// `value` with every object's identity hash (`Class@1b6d3586`) left out:
/// the JVM picks it afresh in each run.
fn without_hashes(value: &mut Value, hash: &regex::Regex) {
    match value {
        Value::String(t) => *t = hash.replace_all(t, "@").into_owned(),
        Value::Array(a) => a.iter_mut().for_each(|v| without_hashes(v, hash)),
        Value::Object(o) => o.values_mut().for_each(|v| without_hashes(v, hash)),
        _ => {}
    }
}

/// Per thread name, the thread's CALL/RETURN/THROW/CATCH events in order,
/// without what differs between two runs (ids, times, elapsed times,
/// identity hashes).
fn calls_by_thread(events: &[Value]) -> BTreeMap<String, Vec<Value>> {
    // An identity hash (the reason this test once failed 2 runs in 10).
    let hash = regex::Regex::new("@[0-9a-f]+\\b").expect("regex");
    let mut by: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for e in events {
        let ty = e["type"].as_str().unwrap_or("");
        if !matches!(ty, "CALL" | "RETURN" | "THROW" | "CATCH") {
            continue;
        }
        let mut e = e.clone();
        let o = e.as_object_mut().expect("an object");
        for k in ["id", "time_ns", "elapsed_ns", "cpu_ns", "alloc_bytes"] {
            o.remove(k);
        }
        without_hashes(&mut e, &hash);
        let o = e.as_object_mut().expect("an object");
        let thread = o["thread"].as_str().unwrap_or("?").to_string();
        by.entry(thread).or_default().push(e);
    }
    by
}

#[test]
fn format_2_recordings_read_back_as_format_1_ones_thread_by_thread() {
    for (classes_glob, main) in [
        ("fx.Params*", "fx.Params"),
        ("fx.Exceptions*", "fx.Exceptions"),
        ("fx.Contention*", "fx.Contention"),
    ] {
        let v1 = record_format("1", classes_glob, main);
        let v2 = record_format("2", classes_glob, main);
        assert_eq!(v1.stdout(), v2.stdout(), "{main}: the program's output");
        assert_eq!(version_of(&v1.trace), 1);
        assert_eq!(version_of(&v2.trace), 2);
        let (e1, e2) = (v1.events(), v2.events());
        let (c1, c2) = (calls_by_thread(&e1), calls_by_thread(&e2));
        assert!(!c2.is_empty(), "{main}: calls were recorded");
        assert_eq!(c1, c2, "{main}: each thread's calls and exceptions");
        // Ids are unique and increase in what `show` prints.
        let ids: Vec<u64> = e2.iter().map(|e| e["id"].as_u64().expect("id")).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{main}: ids increase");
    }
}

#[test]
fn every_reading_command_accepts_a_format_2_trace() {
    let rec = record_format("2", "fx.Contention*", "fx.Contention");
    let t = path_str(&rec.trace);
    let dir = rec.trace.parent().expect("dir").to_path_buf();
    let out = dir.join("out.vmv");
    let o = path_str(&out);

    let stats = run(&["stats", t]);
    let text = String::from_utf8_lossy(&stats.stdout);
    assert!(
        stats.status.success(),
        "{}",
        String::from_utf8_lossy(&stats.stderr)
    );
    assert!(text.contains("format version 2"), "{text}");

    // `search --count` and `filter` (the fast head scan and the full
    // decode) select the same three `work` calls.
    let count = run(&["search", t, "type == CALL && method == \"work\"", "--count"]);
    assert!(
        count.status.success(),
        "{}",
        String::from_utf8_lossy(&count.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&count.stdout).trim(), "3");
    let filtered = run(&["filter", t, "type == CALL && method == \"work\"", "-o", o]);
    assert!(
        filtered.status.success(),
        "{}",
        String::from_utf8_lossy(&filtered.stderr)
    );
    let kept = jsonl(&out);
    assert_eq!(kept.len(), 3);
    // The filtered trace keeps the source's ids (written in version 1).
    let source_ids: std::collections::BTreeSet<u64> = rec
        .events()
        .iter()
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    for e in &kept {
        assert!(source_ids.contains(&e["id"].as_u64().unwrap()), "{e}");
    }
    assert_eq!(version_of(&out), 1);

    // Merge with a version 1 trace of the same program.
    let v1 = record_format("1", "fx.Contention*", "fx.Contention");
    let merged = dir.join("merged.vmv");
    let m = run(&["merge", t, path_str(&v1.trace), "-o", path_str(&merged)]);
    assert!(m.status.success(), "{}", String::from_utf8_lossy(&m.stderr));
    assert_eq!(
        jsonl(&merged).len(),
        rec.events().len() + v1.events().len(),
        "every event of both once"
    );

    for args in [
        vec!["calltree", t],
        vec!["locks", t],
        vec!["dataflow", t],
        vec!["show", t, "--format", "text"],
    ] {
        let r = run(&args);
        assert!(
            r.status.success(),
            "vmview {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&r.stderr)
        );
    }
    let tree = String::from_utf8_lossy(&run(&["calltree", t]).stdout).into_owned();
    assert!(tree.contains("work"), "{tree}");
}
