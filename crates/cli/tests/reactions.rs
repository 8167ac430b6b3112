//! `vmview record --events samples` and `vmview reactions` on a fixture of
//! known structure (fx.Reactions): a BlockingQueue consumer, a loopback
//! socket server, a sorting thread with a Comparator and a SAX parser
//! thread with a DefaultHandler.

use serde_json::Value;

use crate::support::*;

fn recorded() -> &'static Recording {
    static REC: std::sync::OnceLock<Recording> = std::sync::OnceLock::new();
    REC.get_or_init(|| {
        let rec = record(
            &["--events", "samples", "--interval", "5ms"],
            &[],
            "fx.Reactions",
            &["1500"],
        );
        assert!(
            rec.output.status.success(),
            "record failed: {}",
            rec.stderr()
        );
        rec
    })
}

#[test]
fn samples_carry_states_and_stacks_of_every_thread() {
    let events = recorded().events();
    let samples = of_type(&events, "SAMPLE");
    assert!(samples.len() > 100, "{} samples", samples.len());
    assert_eq!(
        samples.len(),
        events.len(),
        "events=samples records only SAMPLE"
    );
    let state_of = |thread: &str, top: &str, state: &str| {
        samples.iter().any(|s| {
            s["thread"] == thread
                && s["state"] == state
                && s["stack"]
                    .as_array()
                    .is_some_and(|f| f.iter().any(|f| f["method"] == top))
        })
    };
    assert!(
        state_of("orders", "handleOrder", "RUN"),
        "orders RUN in handleOrder"
    );
    assert!(state_of("orders", "take", "WAIT"), "orders WAIT in take()");
    assert!(
        state_of("server", "readLine", "IO"),
        "server IO under readLine()"
    );
    assert!(state_of("producer", "sleep", "SLEEP"), "producer SLEEP");
    // Frames are top first, with lines from the LineNumberTable.
    let s = samples
        .iter()
        .find(|s| s["thread"] == "orders" && s["state"] == "RUN")
        .expect("an orders RUN sample");
    let frames = s["stack"].as_array().expect("stack");
    let spin = frames.iter().position(|f| f["method"] == "spin");
    let handle = frames.iter().position(|f| f["method"] == "handleOrder");
    if let (Some(a), Some(b)) = (spin, handle) {
        assert!(a < b, "spin is above handleOrder: {frames:?}");
    }
    assert!(frames.iter().any(|f| f["line"].is_u64()), "{frames:?}");
    assert!(!samples.iter().any(|s| s["thread"] == "vmview-sampler"));
}

#[test]
fn the_jdks_service_threads_wait() {
    // The Reference Handler sits in the native waitForReferencePendingList,
    // which JVMTI calls RUNNABLE: it was counted as RUN in every sample.
    let events = recorded().events();
    let samples = of_type(&events, "SAMPLE");
    for name in ["Reference Handler", "Finalizer", "Common-Cleaner"] {
        let of: Vec<_> = samples.iter().filter(|s| s["thread"] == name).collect();
        assert!(of.len() > 10, "{name}: {} samples", of.len());
        let busy: Vec<_> = of.iter().filter(|s| s["state"] != "WAIT").collect();
        // A GC can wake the Reference Handler for a moment.
        assert!(
            busy.len() * 10 <= of.len(),
            "{name} is not WAIT in {} of {} samples: {:?}",
            busy.len(),
            of.len(),
            busy.first()
        );
    }
}

#[test]
fn wait_globs_make_a_native_read_wait() {
    // With the socket read listed as a wait, the server's readLine() is WAIT
    // instead of IO, and onMessage a NODE_WAIT handler.
    let rec = record(
        &[
            "--events",
            "samples",
            "--interval",
            "5ms",
            "--wait",
            "sun.nio.ch.SocketDispatcher.read0",
        ],
        &[],
        "fx.Reactions",
        &["1000"],
    );
    assert!(rec.output.status.success(), "{}", rec.stderr());
    let events = rec.events();
    let server: Vec<_> = of_type(&events, "SAMPLE")
        .into_iter()
        .filter(|s| s["thread"] == "server")
        .collect();
    let in_read0 = |s: &&&serde_json::Value| s["stack"][0]["method"] == "read0";
    // (A thread just returning from read0 is RUN: not in native code.)
    assert!(
        server.iter().filter(in_read0).any(|s| s["state"] == "WAIT"),
        "{server:?}"
    );
    assert!(
        server.iter().filter(in_read0).all(|s| s["state"] != "IO"),
        "{server:?}"
    );
}

fn reactions(args: &[&str]) -> String {
    let trace = path_str(&recorded().trace).to_string();
    let mut all = vec!["reactions", trace.as_str()];
    all.extend_from_slice(args);
    let out = run(&all);
    assert!(
        out.status.success(),
        "vmview reactions failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn reactions_find_the_queue_and_socket_handlers_and_the_comparator_callback() {
    let doc: Value = serde_json::from_str(&reactions(&["--format", "json"])).expect("JSON");
    assert_fx_reactions_handlers(&doc);
    let handlers = doc["handlers"].as_array().expect("handlers");
    for h in handlers {
        assert!(h["run"].as_u64().unwrap() >= 5, "min-samples cut-off: {h}");
        assert!(
            h["share"].as_f64().unwrap() >= 0.01,
            "min-share cut-off: {h}"
        );
    }
    let callbacks = doc["callbacks"].as_array().expect("callbacks");
    assert!(
        callbacks
            .iter()
            .any(|c| c["class"] == "fx.Reactions$ByValue" && c["method"] == "compare"),
        "{callbacks:#?}"
    );
    // Thread runs are the stack base, not callbacks.
    assert!(
        callbacks.iter().all(|c| c["method"] != "run"),
        "{callbacks:#?}"
    );
    let orders = doc["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread"] == "orders")
        .expect("orders thread");
    assert_eq!(orders["handlers"][0]["method"], "handleOrder");

    // A share cut-off above every handler's share leaves none.
    let strict: Value =
        serde_json::from_str(&reactions(&["--format", "json", "--min-share", "0.9"])).unwrap();
    assert_eq!(strict["handlers"].as_array().unwrap().len(), 0);
}

#[test]
fn a_sax_handlers_start_element_is_a_callback_of_the_jdks_parser() {
    let doc: Value = serde_json::from_str(&reactions(&["--format", "json"])).expect("JSON");
    let callbacks = doc["callbacks"].as_array().expect("callbacks");
    let start = callbacks
        .iter()
        .find(|c| c["class"] == "fx.Reactions$Elements" && c["method"] == "startElement")
        .unwrap_or_else(|| panic!("startElement is no callback: {callbacks:#?}"));
    assert!(start["samples"].as_u64().unwrap() > 0, "{start}");
    // parseLoop calls the parser from the thread's base: no callback; and
    // the JDK's org.xml.sax classes are system code, not callbacks.
    assert!(
        callbacks.iter().all(|c| c["method"] != "parseLoop"
            && !c["class"].as_str().unwrap().starts_with("org.xml.sax.")),
        "{callbacks:#?}"
    );
}

#[test]
fn pure_compute_threads_run_no_handler() {
    // The sorter only computes and the parser sleeps between documents:
    // their loops never wait for an event, so neither they nor their
    // callees are handlers, although they hold most RUN samples.
    let doc: Value = serde_json::from_str(&reactions(&[
        "--format",
        "json",
        "--min-samples",
        "1",
        "--min-share",
        "0",
    ]))
    .expect("JSON");
    let threads = doc["threads"].as_array().expect("threads");
    for name in ["sorter", "parser"] {
        let t = threads
            .iter()
            .find(|t| t["thread"] == name)
            .unwrap_or_else(|| panic!("no {name} thread: {threads:#?}"));
        assert!(t["states"]["RUN"].as_u64().unwrap() >= 5, "{name} ran: {t}");
        assert_eq!(t["handlers"], Value::Array(vec![]), "{name}: {t}");
    }
    for h in doc["handlers"].as_array().expect("handlers") {
        for m in ["sortLoop", "parseLoop", "compare", "startElement"] {
            assert_ne!(h["method"], m, "{h}");
        }
    }
}

#[test]
fn reactions_xml_has_the_dymon_elements() {
    let xml = reactions(&["--format", "xml"]);
    for needle in [
        "<REACTIONS LAST='",
        "MONTIME='",
        "TSAMPLES='",
        "<CALLBACK STACK='",
        "USER='fx.Reactions$ByValue@compare'",
        "USER='fx.Reactions$Elements@startElement'",
        "<TRIE>",
        "<TRIENODE CLASS='fx.Reactions$OrderLoop'",
        "<REACTION TOTTIME='",
        "<CALLBACK METHOD='fx.Reactions$ByValue@compare'",
        "<EVENT METHOD='fx.Reactions$OrderLoop@handleOrder' TYPE='NODE_WAIT'",
        "<EVENT METHOD='fx.Reactions$Server@onMessage' TYPE='NODE_IO'",
        "</REACTIONS>",
    ] {
        assert!(xml.contains(needle), "{needle} missing from\n{xml}");
    }
    // Well-formed: every TRIENODE opened without `/>` is closed.
    let opened = xml.matches("<TRIENODE").count() - xml.matches("/>").count()
        + xml.matches("<CALLBACK").count()
        + xml.matches("<EVENT").count();
    assert_eq!(opened, xml.matches("</TRIENODE>").count());
    let text = reactions(&[]);
    assert!(
        text.contains("NODE_WAIT  fx.Reactions$OrderLoop.handleOrder"),
        "{text}"
    );
}

#[test]
fn reactions_on_a_trace_without_samples_says_how_to_record_them() {
    let rec = record(&["--classes", "fx.Hello"], &[], "fx.Hello", &[]);
    let out = run(&["reactions", path_str(&rec.trace)]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no SAMPLE events") && err.contains("--events samples"),
        "{err}"
    );
}

#[test]
fn collapsed_weight_samples_folds_the_sampled_stacks_base_first() {
    let trace = path_str(&recorded().trace).to_string();
    let out = run(&[
        "export",
        &trace,
        "--format",
        "collapsed",
        "--weight",
        "samples",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let total: u64 = text
        .lines()
        .map(|l| {
            l.rsplit_once(' ')
                .expect("frames weight")
                .1
                .parse::<u64>()
                .expect("weight")
        })
        .sum();
    let samples = of_type(&recorded().events(), "SAMPLE").len() as u64;
    assert_eq!(total, samples, "one count per sample");
    assert!(
        text.lines().any(|l| l.starts_with(
            "java.lang.Thread.run;fx.Reactions$OrderLoop.run;fx.Reactions$OrderLoop.handleOrder;"
        )),
        "{text}"
    );
}

#[test]
fn speedscope_has_a_sampled_profile_per_thread() {
    let trace = path_str(&recorded().trace).to_string();
    let out = run(&["export", &trace, "--format", "speedscope"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("speedscope JSON");
    let frames = doc["shared"]["frames"].as_array().expect("frames");
    let orders = doc["profiles"]
        .as_array()
        .expect("profiles")
        .iter()
        .find(|p| p["name"] == "orders (samples)")
        .expect("a sampled profile for the orders thread");
    assert_eq!(orders["type"], "sampled");
    let samples = orders["samples"].as_array().expect("samples");
    assert_eq!(samples.len(), orders["weights"].as_array().unwrap().len());
    let name = |i: &Value| {
        frames[i.as_u64().unwrap() as usize]["name"]
            .as_str()
            .unwrap()
    };
    assert!(samples.iter().any(|s| {
        let s = s.as_array().unwrap();
        name(&s[0]) == "java.lang.Thread.run" && s.iter().any(|f| name(f).ends_with("handleOrder"))
    }));
}

#[test]
fn samples_of_contended_ticks_name_the_monitors_held_and_their_depth() {
    // fx.Contention: three workers take turns holding LOCK while sleeping.
    let rec = record(
        &["--events", "samples", "--interval", "5ms"],
        &[],
        "fx.Contention",
        &[],
    );
    assert!(rec.output.status.success(), "{}", rec.stderr());
    let events = rec.events();
    let samples = of_type(&events, "SAMPLE");
    let blocked = samples
        .iter()
        .find(|s| s["state"] == "BLOCKED" && s["stack"][0]["method"] == "work")
        .expect("a worker BLOCKED entering work()");
    // In the same tick, the holder sleeps inside work() with the lock
    // entered one frame below the top (Thread.sleep).
    let holder = samples
        .iter()
        .find(|s| {
            s["time_ns"] == blocked["time_ns"]
                && s["thread"] != blocked["thread"]
                && !s["monitors"].as_array().unwrap().is_empty()
        })
        .expect("the lock holder's sample in the same tick");
    assert_eq!(holder["state"], "SLEEP");
    let m = &holder["monitors"][0];
    assert!(
        m["monitor"]
            .as_str()
            .unwrap()
            .starts_with("java.lang.Object@"),
        "{m}"
    );
    assert_eq!(m["depth"], 1);
    assert_eq!(holder["stack"][1]["method"], "work");
}

#[test]
fn chrome_export_shows_samples_as_instants_with_their_stacks() {
    let trace = path_str(&recorded().trace).to_string();
    let out = run(&["export", &trace, "--format", "chrome"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("chrome JSON");
    let events = doc["traceEvents"].as_array().expect("traceEvents");
    let orders_tid = events
        .iter()
        .find(|e| e["ph"] == "M" && e["args"]["name"] == "orders")
        .expect("orders thread named")["tid"]
        .clone();
    let samples: Vec<&Value> = events.iter().filter(|e| e["cat"] == "sample").collect();
    assert_eq!(
        samples.len(),
        of_type(&recorded().events(), "SAMPLE").len(),
        "one instant per SAMPLE"
    );
    let run = samples
        .iter()
        .find(|e| {
            e["tid"] == orders_tid
                && e["name"] == "RUN"
                && e["args"]["stack"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|f| f.as_str().unwrap().contains("OrderLoop.handleOrder:"))
        })
        .expect("an orders RUN sample in handleOrder");
    assert_eq!(run["ph"], "i");
    assert_eq!(run["s"], "t");
}

#[test]
fn parquet_export_has_the_samples_state_and_stack() {
    let rec = recorded();
    let dir = scratch("reactions-parquet");
    let pq = dir.join("t.parquet");
    let out = run(&[
        "export",
        path_str(&rec.trace),
        "--format",
        "parquet",
        "-o",
        path_str(&pq),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = crate::formats::duckdb(&format!(
        "SELECT state, count(*) FROM '{}' WHERE type = 'SAMPLE' AND thread = 'orders'
         AND json_extract_string(stack, '$[0].method') IS NOT NULL GROUP BY state ORDER BY state",
        path_str(&pq)
    ));
    let states: Vec<&str> = rows.iter().map(|r| r[0].as_str().unwrap()).collect();
    assert!(
        states.contains(&"RUN") && states.contains(&"WAIT"),
        "{rows:?}"
    );
    let n: u64 = rows.iter().map(|r| r[1].as_u64().unwrap()).sum();
    let events = rec.events();
    let samples = of_type(&events, "SAMPLE");
    assert_eq!(
        n as usize,
        samples.iter().filter(|s| s["thread"] == "orders").count()
    );
    let handle = crate::formats::duckdb(&format!(
        "SELECT count(*) FROM '{}' WHERE type = 'SAMPLE'
         AND stack LIKE '%\"method\":\"handleOrder\"%' AND monitors = '[]'",
        path_str(&pq)
    ));
    assert!(handle[0][0].as_u64().unwrap() > 0, "{handle:?}");
}

#[test]
fn merge_renumbers_the_sampled_stacks_of_each_source() {
    // The merge renumbered methods but passed SAMPLE's stack handles
    // through: the second source's samples pointed at the first's stacks.
    let hello = record(
        &["--events", "samples", "--interval", "1ms"],
        &[],
        "fx.Hello",
        &[],
    );
    assert!(hello.output.status.success(), "{}", hello.stderr());
    let first = of_type(&hello.events(), "SAMPLE").len();
    assert!(first > 0, "fx.Hello was sampled");
    let all = scratch("reactions-merge").join("all.vmv");
    let o = run(&[
        "merge",
        path_str(&hello.trace),
        path_str(&recorded().trace),
        "-o",
        path_str(&all),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stacks = |events: &[Value], thread: &str| -> Vec<String> {
        of_type(events, "SAMPLE")
            .iter()
            .filter(|s| s["thread"] == thread)
            .map(|s| s["stack"].to_string())
            .collect()
    };
    let merged = jsonl(&all);
    let orders = stacks(&merged, "orders");
    assert!(!orders.is_empty());
    assert_eq!(orders, stacks(&recorded().events(), "orders"));
    assert_eq!(
        of_type(&merged, "SAMPLE").len(),
        first + of_type(&recorded().events(), "SAMPLE").len()
    );
    let r = run(&["reactions", path_str(&all), "--format", "json"]);
    let doc: Value = serde_json::from_slice(&r.stdout).expect("JSON");
    assert!(doc["handlers"]
        .as_array()
        .unwrap()
        .iter()
        .any(|h| h["method"] == "handleOrder"));
}

#[test]
fn xml_round_trip_keeps_samples_and_their_stacks() {
    // The XML reader refused SAMPLE ("written but not read back yet").
    let rec = recorded();
    let dir = scratch("reactions-xml");
    let xml = dir.join("t.xml");
    let back = dir.join("back.vmv");
    let o = run(&[
        "export",
        path_str(&rec.trace),
        "--format",
        "xml",
        "-o",
        path_str(&xml),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(&[
        "filter",
        path_str(&xml),
        "type == SAMPLE",
        "-o",
        path_str(&back),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let strip = |events: Vec<Value>| -> Vec<Value> {
        events
            .into_iter()
            .map(|mut e| {
                e.as_object_mut().unwrap().remove("id");
                e
            })
            .collect()
    };
    assert_eq!(strip(jsonl(&back)), strip(rec.events()));
}
