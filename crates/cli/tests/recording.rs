//! Recording real fixtures and checking, event by event, what a user would
//! check in the JSON Lines.

use crate::support::*;
use serde_json::{json, Value};
use std::collections::HashMap;

fn params(ev: &Value) -> Vec<(String, String, Value)> {
    ev["params"]
        .as_array()
        .unwrap_or_else(|| panic!("no params in {ev}"))
        .iter()
        .map(|p| {
            (
                p["name"].as_str().expect("param name").to_string(),
                p["type"].as_str().expect("param type").to_string(),
                p["value"].clone(),
            )
        })
        .collect()
}

#[test]
fn call_records_parameter_names_types_and_values() {
    let rec = record(&["--classes", "fx.Params*"], &[], "fx.Params", &[]);
    assert!(rec.output.status.success(), "stderr: {}", rec.stderr());
    assert_eq!(
        rec.stdout(),
        "all=45\nbox:cupx5\n",
        "the program's output must not change"
    );
    let events = rec.events();

    let call = find(&events, "CALL", "all");
    assert_eq!(call["class"], "fx.Params");
    assert_eq!(
        call["sig"],
        "(IJDZCLjava/lang/String;Ljava/lang/String;[ILjava/lang/Object;)I"
    );
    let p = params(call);
    let names: Vec<&str> = p.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(names, ["i", "l", "d", "b", "c", "s", "none", "arr", "obj"]);
    let types: Vec<&str> = p.iter().map(|(_, t, _)| t.as_str()).collect();
    assert_eq!(
        types,
        [
            "int",
            "long",
            "double",
            "boolean",
            "char",
            "java.lang.String",
            "java.lang.String",
            "int[]",
            "java.lang.Object"
        ]
    );
    assert_eq!(p[0].2, json!(42));
    assert_eq!(p[1].2, json!(1234567890123i64));
    assert_eq!(p[2].2, json!(2.5));
    assert_eq!(p[3].2, json!(true));
    assert_eq!(p[4].2, json!("x"));
    assert_eq!(p[5].2, json!("hello \"world\""));
    assert_eq!(p[6].2, Value::Null);
    assert_eq!(p[7].2, json!("int[3]"));
    let obj = p[8].2.as_str().expect("object summarised as a string");
    assert!(obj.starts_with("fx.Params$Item@"), "object value {obj:?}");

    let ret = find(&events, "RETURN", "all");
    assert_eq!(ret["value"], json!(45));
    assert!(
        ret["elapsed_ns"].as_u64().is_some(),
        "RETURN has elapsed_ns: {ret}"
    );
    assert!(ret["id"].as_u64() > call["id"].as_u64());

    // Constructors are traced as <init>, with their parameters.
    let init = events
        .iter()
        .find(|e| e["type"] == "CALL" && e["method"] == "<init>" && e["class"] == "fx.Params")
        .expect("CALL of the fx.Params constructor");
    assert_eq!(
        params(init)[0],
        ("label".into(), "java.lang.String".into(), json!("box"))
    );
    assert_eq!(params(init)[1], ("size".into(), "int".into(), json!(7)));

    // A boxed Integer is shown by value, and a String return value by content.
    let describe = find(&events, "CALL", "describe");
    assert_eq!(params(describe)[1].2, json!(5));
    assert_eq!(
        find(&events, "RETURN", "describe")["value"],
        json!("box:cupx5")
    );
}

#[test]
fn no_call_event_names_a_class_outside_the_trace_classes() {
    let rec = record(&["--classes", "fx.Params"], &[], "fx.Params", &[]);
    assert!(rec.output.status.success(), "stderr: {}", rec.stderr());
    let events = rec.events();
    let calls = of_type(&events, "CALL");
    assert!(
        calls.len() >= 3,
        "expected the fixture's calls, got {}",
        calls.len()
    );
    for e in calls.iter().chain(of_type(&events, "RETURN").iter()) {
        assert_eq!(
            e["class"], "fx.Params",
            "traced a class outside --classes: {e}"
        );
    }
}

#[test]
fn exception_thrown_three_frames_deep_names_its_catch_site() {
    let rec = record(&["--classes", "fx.Exceptions"], &[], "fx.Exceptions", &[]);
    assert_eq!(rec.stdout(), "top=-1\nparse=0\ndone\n");
    let events = rec.events();

    let throw = events
        .iter()
        .find(|e| e["type"] == "THROW" && e["exception"] == "java.lang.IllegalArgumentException")
        .expect("THROW of IllegalArgumentException");
    assert_eq!(throw["class"], "fx.Exceptions");
    assert_eq!(throw["method"], "level3");
    assert_eq!(throw["message"], "too deep: 3");
    assert_eq!(throw["catch_class"], "fx.Exceptions");
    assert_eq!(throw["catch_method"], "top");
    assert!(throw["catch_loc"].is_object(), "catch_loc: {throw}");

    // level3, level2 and level1 each return by the exception.
    for m in ["level3", "level2", "level1"] {
        let ret = find(&events, "RETURN", m);
        assert_eq!(
            ret["exception"], "java.lang.IllegalArgumentException",
            "{ret}"
        );
    }
    let caught = events
        .iter()
        .find(|e| e["type"] == "CATCH" && e["exception"] == "java.lang.IllegalArgumentException")
        .expect("CATCH of IllegalArgumentException");
    assert_eq!(caught["method"], "top");
    assert_eq!(find(&events, "RETURN", "top")["value"], json!(-1));
}

#[test]
fn exception_thrown_inside_the_jdk_and_swallowed_by_a_trace_class_is_visible() {
    let rec = record(&["--classes", "fx.Exceptions"], &[], "fx.Exceptions", &[]);
    let events = rec.events();
    let throw = events
        .iter()
        .find(|e| e["type"] == "THROW" && e["exception"] == "java.lang.NumberFormatException")
        .expect("THROW of the NumberFormatException from Integer.parseInt");
    assert_eq!(
        throw["class"], "java.lang.Integer",
        "thrown by the JDK: {throw}"
    );
    assert_eq!(throw["method"], "parseInt");
    assert_eq!(throw["catch_class"], "fx.Exceptions");
    assert_eq!(throw["catch_method"], "parse");
    assert_eq!(throw["message"], "For input string: \"nope\"");
    let caught = events
        .iter()
        .find(|e| e["type"] == "CATCH" && e["exception"] == "java.lang.NumberFormatException")
        .expect("CATCH in parse");
    assert_eq!(caught["method"], "parse");
    // No JDK method becomes a CALL.
    assert!(of_type(&events, "CALL")
        .iter()
        .all(|e| e["class"] == "fx.Exceptions"));
}

#[test]
fn uncaught_exception_ending_a_thread_has_no_catch_site() {
    let rec = record(&["--classes", "fx.Exceptions"], &[], "fx.Exceptions", &[]);
    assert!(
        rec.stderr().contains("thread ends here"),
        "the JVM still reports the uncaught exception"
    );
    let events = rec.events();
    let throw = events
        .iter()
        .find(|e| {
            e["type"] == "THROW" && e["exception"] == "java.lang.UnsupportedOperationException"
        })
        .expect("THROW of the uncaught exception");
    assert_eq!(throw["thread"], "doomed");
    assert_eq!(throw["method"], "boom");
    assert!(
        throw["catch_class"].is_null() && throw["catch_method"].is_null(),
        "{throw}"
    );
    assert!(
        throw.get("catch_loc").is_some(),
        "catch_loc is present as null: {throw}"
    );
    let end = events
        .iter()
        .find(|e| e["type"] == "THREAD_END" && e["thread"] == "doomed")
        .expect("THREAD_END of the doomed thread");
    assert!(end["id"].as_u64() > throw["id"].as_u64());
}

#[test]
fn monitor_contention_between_three_threads_has_owners_and_wait_times() {
    let rec = record(&["--classes", "fx.Contention*"], &[], "fx.Contention", &[]);
    assert_eq!(rec.stdout(), "counter=6\n");
    let events = rec.events();
    // The JDK's own monitors (an int[] of its internals, once in CI) can be
    // contended too: the fixture's LOCK is the java.lang.Object monitor
    // with the most contended enters.
    let all_enters = of_type(&events, "MONITOR_CONTENDED_ENTER");
    let mut per_monitor: std::collections::BTreeMap<&str, usize> = Default::default();
    for e in &all_enters {
        let m = e["monitor"].as_str().unwrap_or("");
        if m.starts_with("java.lang.Object@") {
            *per_monitor.entry(m).or_default() += 1;
        }
    }
    let lock = per_monitor
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(m, _)| *m)
        .unwrap_or_else(|| panic!("no java.lang.Object monitor contended: {all_enters:?}"));
    let on_lock = |ty: &str| -> Vec<&Value> {
        of_type(&events, ty)
            .into_iter()
            .filter(|e| e["monitor"] == lock)
            .collect()
    };
    let enters = on_lock("MONITOR_CONTENDED_ENTER");
    let entered = on_lock("MONITOR_CONTENDED_ENTERED");
    assert!(
        enters.len() >= 2,
        "at least two of three workers wait: {enters:?}"
    );
    assert_eq!(enters.len(), entered.len());
    for e in &enters {
        let owner = e["owner"].as_str().expect("owner thread named");
        assert!(owner.starts_with("worker-") && owner != e["thread"], "{e}");
    }
    for e in &entered {
        let wait = e["wait_ns"].as_u64().expect("wait_ns");
        assert!(
            wait > 10_000_000,
            "waited at least part of a 60 ms hold: {e}"
        );
    }
    let waiting_threads: std::collections::BTreeSet<&str> = entered
        .iter()
        .map(|e| e["thread"].as_str().unwrap())
        .collect();
    assert_eq!(waiting_threads.len(), entered.len(), "each waiter once");
}

/// HotSpot posts MONITOR_WAITED without a MONITOR_WAIT when a thread
/// waits for another thread's class initialisation. The agent measured
/// such a wait from the thread's previous MONITOR_WAIT (or from time 0),
/// found by the soak on Jetty as waits as long as the whole run.
#[test]
fn a_monitor_waited_without_a_monitor_wait_has_no_made_up_duration() {
    let rec = record(&["--events", "locks"], &[], "fx.InitWait", &[]);
    assert_eq!(
        rec.stdout(),
        "initialiser sees 42\nmain sees 42\n",
        "{}",
        rec.stderr()
    );
    let mut started: HashMap<String, u64> = HashMap::new();
    let mut unmatched = 0;
    for e in rec.events() {
        let thread = e["thread"].to_string();
        let time = e["time_ns"].as_u64().unwrap();
        match e["type"].as_str() {
            Some("MONITOR_WAIT") => {
                started.insert(thread, time);
            }
            Some("MONITOR_WAITED") => {
                let wait = e["wait_ns"].as_u64().expect("wait_ns");
                match started.remove(&thread) {
                    Some(start) => assert_eq!(wait, time - start, "{e}"),
                    None => {
                        assert_eq!(wait, 0, "no MONITOR_WAIT before it, no duration: {e}");
                        unmatched += 1;
                    }
                }
            }
            _ => {}
        }
    }
    assert!(
        unmatched >= 1,
        "main's wait for fx.InitWait$Slow is unmatched"
    );
}

#[test]
fn hello_world_traced_with_its_own_class_gives_a_handful_of_events() {
    let rec = record(&["--classes", "fx.Hello"], &[], "fx.Hello", &[]);
    assert_eq!(rec.stdout(), "Hello, World!\n");
    let events = rec.events();
    assert!(
        events.len() < 40,
        "a handful of events, got {}: {:?}",
        events.len(),
        events
            .iter()
            .map(|e| e["type"].as_str().unwrap_or(""))
            .collect::<Vec<_>>()
    );
    let calls = of_type(&events, "CALL");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["method"], "main");
}

#[test]
fn recording_keeps_the_jvm_exit_code_and_output() {
    // Exceptions exits 0 even though a thread died; a missing main class exits 1.
    let rec = record(&["--classes", "fx.*"], &[], "fx.NoSuchMain", &[]);
    let plain = std::process::Command::new("java")
        .arg("-cp")
        .arg(classes())
        .arg("fx.NoSuchMain")
        .output()
        .expect("java");
    assert_eq!(rec.output.status.code(), plain.status.code());
    assert_eq!(rec.output.stdout, plain.stdout);
}

#[test]
fn check_jni_reports_no_warnings_under_the_agent() {
    let rec = record(
        &[
            "--classes",
            "fx.*",
            "--events",
            "calls,exceptions,threads,classes,locks,gc",
        ],
        &["-Xcheck:jni"],
        "fx.Exceptions",
        &[],
    );
    let err = rec.stderr();
    assert!(!err.contains("WARNING"), "-Xcheck:jni complained: {err}");
    assert!(!err.contains("FATAL"), "-Xcheck:jni complained: {err}");
    let events = rec.events();
    assert!(
        !of_type(&events, "CLASS_LOAD").is_empty(),
        "classes event asked for"
    );
}

#[test]
fn check_jni_reports_no_warnings_with_every_sampling_event_on() {
    // fx.Weights: a spinning, a sleeping, an allocating and a blocked
    // thread, recorded with stack samples (the SIGPROF walk), allocation
    // samples and lock events at once under -Xcheck:jni.
    let rec = record(
        &[
            "--classes",
            "fx.Weights*",
            "--events",
            "calls,locks,samples,alloc",
        ],
        &["-Xcheck:jni"],
        "fx.Weights",
        &[],
    );
    assert!(rec.output.status.success(), "{}", rec.stderr());
    let err = rec.stderr();
    assert!(!err.contains("WARNING"), "-Xcheck:jni complained: {err}");
    assert!(!err.contains("FATAL"), "-Xcheck:jni complained: {err}");
    let events = rec.events();
    for ty in ["SAMPLE", "ALLOC_SAMPLE", "MONITOR_CONTENDED_ENTERED"] {
        assert!(!of_type(&events, ty).is_empty(), "no {ty} event");
    }
}

#[test]
fn text_output_labels_fields_like_vmview() {
    let rec = record(&["--classes", "fx.Exceptions"], &[], "fx.Exceptions", &[]);
    let out = run(&["show", path_str(&rec.trace)]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("THROW"), "{text}");
    assert!(
        text.contains("java.lang.IllegalArgumentException"),
        "{text}"
    );
    assert!(text.contains("too deep: 3"), "{text}");
}

#[test]
fn show_id_and_around_print_the_event_in_its_context() {
    let rec = record(&["--classes", "fx.Params*"], &[], "fx.Params", &[]);
    let events = rec.events();
    let target = find(&events, "CALL", "describe")["id"].as_u64().unwrap();
    let t = target.to_string();
    let out = run(&[
        "show",
        path_str(&rec.trace),
        "--format",
        "jsonl",
        "--id",
        &t,
    ]);
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["id"], json!(target));

    let out = run(&[
        "show",
        path_str(&rec.trace),
        "--format",
        "jsonl",
        "--around",
        &t,
        "--context",
        "2",
    ]);
    let ids: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_u64()
                .unwrap()
        })
        .collect();
    let pos = events
        .iter()
        .position(|e| e["id"] == json!(target))
        .unwrap();
    let expected: Vec<u64> = events[pos.saturating_sub(2)..(pos + 3).min(events.len())]
        .iter()
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, expected);
}

#[test]
fn stats_counts_events_exceptions_and_methods() {
    let rec = record(&["--classes", "fx.Exceptions"], &[], "fx.Exceptions", &[]);
    let out = run(&["stats", path_str(&rec.trace), "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stats: Value = serde_json::from_slice(&out.stdout).expect("stats JSON");
    let text = stats.to_string();
    assert!(
        text.contains("java.lang.IllegalArgumentException"),
        "{text}"
    );
    assert!(
        text.contains("java.lang.UnsupportedOperationException"),
        "{text}"
    );
    assert!(text.contains("level3"), "{text}");
    let out = run(&["stats", path_str(&rec.trace)]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("uncaught"), "{text}");
}

#[test]
fn a_depth_window_keeps_exactly_the_calls_inside_it_and_says_so() {
    let all = record(&["--classes", "fx.Deep"], &[], "fx.Deep", &[]);
    assert_eq!(all.stdout(), "depth sum 36\n", "{}", all.stderr());
    let depths = |events: &[Value], t: &str| -> Vec<u64> {
        events
            .iter()
            .filter(|e| e["type"] == t && e["method"] == "down")
            .map(|e| e["depth"].as_u64().expect("depth"))
            .collect()
    };
    let every = depths(&all.events(), "CALL");
    assert_eq!(every.len(), 39, "13 calls of down per round");
    let (lo, hi) = (
        every.iter().min().copied().unwrap() + 3,
        every.iter().min().copied().unwrap() + 6,
    );
    let window = format!("{lo}..{hi}");
    for mode in ["bci", "jvmti"] {
        let rec = record(
            &["--classes", "fx.Deep", "--mode", mode, "--depth", &window],
            &[],
            "fx.Deep",
            &[],
        );
        assert_eq!(rec.stdout(), "depth sum 36\n", "{}", rec.stderr());
        let events = rec.events();
        let (calls, returns) = (depths(&events, "CALL"), depths(&events, "RETURN"));
        // Four depths of each of the three rounds, nothing outside.
        assert_eq!(calls.len(), 12, "{mode}: {calls:?}");
        assert!(
            calls.iter().all(|d| (lo..=hi).contains(d)),
            "{mode}: {calls:?}"
        );
        let (mut c, mut r) = (calls.clone(), returns.clone());
        c.sort_unstable();
        r.sort_unstable();
        assert_eq!(c, r, "{mode}: every CALL in the window has its RETURN");
        assert_eq!(returns.len(), 12, "{mode}: {returns:?}");
        let w = events
            .iter()
            .find(|e| e["type"] == "TRACE_WINDOW")
            .unwrap_or_else(|| panic!("{mode}: no TRACE_WINDOW"));
        assert_eq!(
            (w["min_depth"].as_u64(), w["max_depth"].as_u64()),
            (Some(lo), Some(hi)),
            "{w}"
        );
    }
    let bad = crate::support::run(&["record", "--depth", "5..2", "--", "java", "-version"]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("empty") && err.lines().count() <= 2, "{err}");
}

#[test]
fn adapt_narrows_the_window_in_a_burst_and_widens_it_after_and_says_so() {
    let rec = record(
        &[
            "--classes",
            "fx.Phases",
            "--adapt",
            "20k/s",
            "--buffer",
            "512m",
        ],
        &[],
        "fx.Phases",
        &[],
    );
    assert_eq!(rec.stdout(), "phases done\n", "{}", rec.stderr());
    let events = rec.events();
    let windows: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "TRACE_WINDOW")
        .collect();
    assert_eq!(windows[0]["reason"], "start", "{windows:?}");
    let narrow = windows
        .iter()
        .find(|w| w["reason"] == "narrow")
        .unwrap_or_else(|| panic!("the burst narrowed nothing: {windows:?}"));
    assert!(narrow["rate_per_s"].as_u64() > Some(40_000), "{narrow}");
    let (t_narrow, max) = (
        narrow["time_ns"].as_u64().unwrap(),
        narrow["max_depth"].as_u64().expect("a bounded window"),
    );
    let widen = windows
        .iter()
        .find(|w| w["reason"] == "widen" && w["time_ns"].as_u64() > Some(t_narrow))
        .unwrap_or_else(|| panic!("the quiet phase widened nothing: {windows:?}"));
    assert!(widen["rate_per_s"].as_u64() < Some(10_000), "{widen}");
    let t_widen = widen["time_ns"].as_u64().unwrap();
    // Between the two moves, calls made (stamped) after the narrowing keep
    // to the narrower window.
    let deepest_between = events
        .iter()
        .filter(|e| e["type"] == "CALL")
        .filter(|e| {
            let t = e["time_ns"].as_u64().unwrap_or(0);
            t > t_narrow + 5_000_000 && t < t_widen
        })
        .map(|e| e["depth"].as_u64().unwrap_or(0))
        .max();
    assert!(
        deepest_between.is_some_and(|d| d <= max),
        "{deepest_between:?} > {max}"
    );
    let deepest_before = events
        .iter()
        .filter(|e| e["type"] == "CALL" && e["time_ns"].as_u64() < Some(t_narrow))
        .map(|e| e["depth"].as_u64().unwrap_or(0))
        .max();
    assert!(deepest_before > Some(max), "{deepest_before:?} vs {max}");
}
