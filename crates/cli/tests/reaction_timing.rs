//! `vmview record --reactions`: handlers found from the warm-up's samples,
//! then instrumented and timed; `vmview reactions` reports their latency.
//!
//! fx.Latency is a BlockingQueue consumer whose handler spins for known,
//! varied times and which times every handling itself with
//! System.nanoTime. What is compared: the agent instruments `handle` at
//! the end of the warm-up, so the trace's calls must be exactly the
//! fixture's items from the first timed one on (matched by the item number,
//! the handler's first argument: consecutive, none missing, up to the last
//! item); item by item the trace's latency is at most the fixture's and,
//! for 95% of the items, within 0.25 ms + 2% of it; and each percentile of
//! `vmview reactions` lies between the fixture's own at ranks p - 2% and p,
//! within 0.25 ms + 2% of the fixture's value (docs/REACTIONS.md: "What the test
//! checks").

use serde_json::Value;

use crate::support::*;

/// The fixture's `item SEQ NANOS` lines, in handling order.
fn fixture_items(stdout: &str) -> Vec<(u64, u64)> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("item "))
        .map(|l| {
            let (seq, ns) = l.split_once(' ').expect("item SEQ NANOS");
            (seq.parse().unwrap(), ns.parse().unwrap())
        })
        .collect()
}

/// Nearest rank, as the fixture and vmview compute it.
fn percentile(sorted: &[u64], q: f64) -> u64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).max(1);
    sorted[rank - 1]
}

fn reactions_json(trace: &std::path::Path) -> Value {
    let out = run(&["reactions", path_str(trace), "--format", "json"]);
    assert!(
        out.status.success(),
        "vmview reactions failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn reactions_out(trace: &std::path::Path, format: &str) -> String {
    let out = run(&["reactions", path_str(trace), "--format", format]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn reactions_time_the_queue_handler_as_the_fixture_measures_it() {
    let rec = record(
        &[
            "--reactions",
            "--reactions-after",
            "1s",
            "--interval",
            "5ms",
        ],
        &[],
        "fx.Latency",
        &["2500"],
    );
    assert!(rec.output.status.success(), "{}", rec.stderr());
    let stderr = rec.stderr();
    assert!(
        stderr.contains("reactions: after 1s of samples")
            && stderr.contains("timing fx.Latency$Consumer.handle"),
        "{stderr}"
    );
    assert!(!stderr.contains("no method calls"), "{stderr}");
    let events = rec.events();
    let chosen = of_type(&events, "REACTION_HANDLERS");
    assert_eq!(chosen.len(), 1, "one switch");
    let chosen = chosen[0];
    assert_eq!(
        chosen["handlers"],
        serde_json::json!(["fx.Latency$Consumer.handle(IJ)V"])
    );
    assert_eq!(chosen["skipped"], serde_json::json!([]));
    assert!(chosen["samples"].as_u64().unwrap() > 50, "{chosen}");
    let switch_ns = chosen["time_ns"].as_u64().unwrap();
    assert!(switch_ns >= 1_000_000_000, "after the warm-up: {switch_ns}");

    // Only the handler is instrumented, and only after the switch.
    let calls = of_type(&events, "CALL");
    assert!(calls.iter().all(|c| c["method"] == "handle"), "only handle");
    assert!(calls
        .iter()
        .all(|c| c["time_ns"].as_u64().unwrap() > switch_ns));
    assert_eq!(calls.len(), of_type(&events, "RETURN").len());
    // Sampling went on after the switch.
    assert!(of_type(&events, "SAMPLE")
        .iter()
        .any(|s| s["time_ns"].as_u64().unwrap() > switch_ns + 500_000_000));

    // The calls are the fixture's items from the first timed one to the
    // last, each once.
    let items = fixture_items(&rec.stdout());
    let seqs: Vec<u64> = calls
        .iter()
        .map(|c| c["params"][0]["value"].as_u64().expect("seq argument"))
        .collect();
    let first = seqs[0];
    assert!(first > 0, "items of the warm-up are not timed");
    assert_eq!(
        seqs,
        (first..first + seqs.len() as u64).collect::<Vec<_>>(),
        "consecutive items"
    );
    let after: Vec<u64> = items
        .iter()
        .filter(|(s, _)| *s >= first)
        .map(|(_, ns)| *ns)
        .collect();
    assert_eq!(
        after.len(),
        seqs.len(),
        "every item handled after instrumentation started was timed"
    );

    // Item by item: the probe's window lies inside the fixture's, so the
    // trace's latency is at most the fixture's, and close to it unless a
    // preemption fell between the two clock reads.
    let returns = of_type(&events, "RETURN");
    let traced: Vec<u64> = returns
        .iter()
        .map(|r| r["elapsed_ns"].as_u64().expect("elapsed_ns"))
        .collect();
    let tolerance = |v: u64| 250_000 + v / 50;
    let mut close = 0;
    for (i, (t, f)) in traced.iter().zip(&after).enumerate() {
        assert!(
            *t <= f + 50_000,
            "item {}: trace {t} ns > fixture {f} ns",
            first + i as u64
        );
        close += usize::from(f - t.min(f) <= tolerance(*f));
    }
    assert!(
        close * 100 >= after.len() * 95,
        "{close} of {} items within tolerance",
        after.len()
    );

    // vmview's latency against the fixture's own, over the same items:
    // each percentile between the fixture's at ranks p - 2% and p, within
    // 0.25 ms + 2% (docs/REACTIONS.md, "How it is tested").
    let doc = reactions_json(&rec.trace);
    let timing = &doc["timing"];
    assert_eq!(timing["status"], "timed");
    assert_eq!(timing["warmup"], "1s");
    let h = &timing["handlers"][0];
    assert_eq!(
        (&h["class"], &h["method"]),
        (&Value::from("fx.Latency$Consumer"), &Value::from("handle"))
    );
    assert_eq!(h["events"].as_u64().unwrap(), after.len() as u64);
    let mut sorted = after.clone();
    sorted.sort_unstable();
    for (key, q) in [
        ("p50_ns", 0.50),
        ("p90_ns", 0.90),
        ("p99_ns", 0.99),
        ("max_ns", 1.0),
    ] {
        let got = h[key].as_u64().unwrap();
        let (low, high) = (percentile(&sorted, q - 0.02), percentile(&sorted, q));
        assert!(
            got + tolerance(low) >= low && got <= high + tolerance(high),
            "{key}: vmview {got} ns, fixture {low}..{high} ns at ranks {}..{q}",
            q - 0.02
        );
    }
    let mean = traced.iter().sum::<u64>() / traced.len() as u64;
    assert!(
        h["mean_ns"].as_u64().unwrap().abs_diff(mean) <= 1,
        "the mean of the calls' own latencies"
    );
    assert_eq!(h["max_ns"].as_u64().unwrap(), *traced.iter().max().unwrap());
    // The handler found over the whole trace carries the same latency.
    let handler = doc["handlers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["method"] == "handle")
        .expect("handle is still found over the whole trace");
    assert_eq!(handler["type"], "NODE_WAIT");
    assert_eq!(handler["latency"]["events"], h["events"]);

    let text = reactions_out(&rec.trace, "text");
    assert!(
        text.contains("handler latency\n  instrumented at ")
            && text.contains("after the 1s warm-up"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with(&format!("{} ", after.len()))
                && l.ends_with("fx.Latency$Consumer.handle")),
        "{text}"
    );
    let xml = reactions_out(&rec.trace, "xml");
    let count = format!("COUNT='{}'", after.len());
    assert!(
        xml.lines()
            .any(|l| l.contains("<EVENT METHOD='fx.Latency$Consumer@handle'")
                && l.contains(&count)
                && l.contains(" P99='")),
        "{xml}"
    );
    assert!(xml.contains("<TIMING STATUS='timed' WARMUP='1s'"), "{xml}");
    assert!(
        xml.contains("<HANDLER METHOD='fx.Latency$Consumer@handle'"),
        "{xml}"
    );
    assert_eq!(
        xml.matches("<TIMING").count(),
        xml.matches("</TIMING>").count()
    );
    assert!(xml.trim_end().ends_with("</REACTIONS>"));
}

#[test]
fn reactions_of_a_program_that_ends_in_the_warmup_say_so_and_the_trace_is_valid() {
    let rec = record(
        &[
            "--reactions",
            "--reactions-after",
            "5s",
            "--interval",
            "5ms",
        ],
        &[],
        "fx.Latency",
        &["300"],
    );
    assert!(rec.output.status.success(), "{}", rec.stderr());
    let stderr = rec.stderr();
    assert!(
        stderr.contains("before the 5s warm-up ended: no handler was chosen or timed"),
        "{stderr}"
    );
    let events = rec.events();
    assert!(of_type(&events, "REACTION_HANDLERS").is_empty());
    assert!(of_type(&events, "CALL").is_empty());
    assert!(!of_type(&events, "SAMPLE").is_empty());
    let doc = reactions_json(&rec.trace);
    assert_eq!(doc["timing"]["status"], "ended_before_warmup");
    assert_eq!(doc["timing"]["handlers"], serde_json::json!([]));
    let text = reactions_out(&rec.trace, "text");
    assert!(
        text.contains("handler latency\n  none: the program ended at ")
            && text.contains("before the 5s warm-up ended"),
        "{text}"
    );
    let xml = reactions_out(&rec.trace, "xml");
    assert!(
        xml.contains("<TIMING STATUS='ended_before_warmup' WARMUP='5s' SAMPLES='0' />"),
        "{xml}"
    );
}

#[test]
fn reactions_without_a_handler_say_so_in_the_trace_and_the_output() {
    // fx.Loop computes on the main thread only: no loop waits for events.
    let rec = record(
        &[
            "--reactions",
            "--reactions-after",
            "300ms",
            "--interval",
            "5ms",
        ],
        &[],
        "fx.Loop",
        &["900"],
    );
    assert!(rec.output.status.success(), "{}", rec.stderr());
    let stderr = rec.stderr();
    assert!(
        stderr.contains("reactions: no event handler found in 300ms of samples"),
        "{stderr}"
    );
    let events = rec.events();
    let chosen = of_type(&events, "REACTION_HANDLERS");
    assert_eq!(chosen.len(), 1);
    assert_eq!(chosen[0]["handlers"], serde_json::json!([]));
    assert!(chosen[0]["samples"].as_u64().unwrap() > 0);
    assert!(of_type(&events, "CALL").is_empty(), "nothing instrumented");
    let doc = reactions_json(&rec.trace);
    assert_eq!(doc["timing"]["status"], "no_handler");
    let text = reactions_out(&rec.trace, "text");
    assert!(
        text.contains("none: no event handler was found in the 300ms warm-up"),
        "{text}"
    );
}

#[test]
fn reactions_with_mode_jvmti_is_refused_before_java_starts() {
    let rec = record(&["--reactions", "--mode", "jvmti"], &[], "fx.Hello", &[]);
    assert!(!rec.output.status.success());
    let err = rec.stderr();
    assert!(
        err.contains("reactions") && err.contains("mode=bci"),
        "{err}"
    );
    assert!(!rec.trace.exists());
}

#[test]
fn a_frameworks_file_makes_classes_library_code_for_the_agents_warm_up() {
    // The profile says fx.Latency's consumer is a framework's: its handle
    // is library code, so the warm-up times the application method that
    // "framework" calls per item, spin (the library-loop rule), and not
    // handle; a file that does not parse is said on stderr and left out.
    let dir = scratch("frameworks");
    let good = dir.join("good.txt");
    std::fs::write(&good, "queue library fx.Latency$Consumer\n").unwrap();
    let bad = dir.join("bad.txt");
    std::fs::write(&bad, "queue lib fx.Latency$Consumer\n").unwrap();
    let flags = |f: &std::path::Path| {
        vec![
            "--reactions".to_string(),
            "--reactions-after".to_string(),
            "500ms".to_string(),
            "--interval".to_string(),
            "5ms".to_string(),
            "--frameworks".to_string(),
            f.display().to_string(),
        ]
    };
    let args = flags(&good);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let rec = record(&args, &[], "fx.Latency", &["600"]);
    assert!(rec.output.status.success(), "{}", rec.stderr());
    let stderr = rec.stderr();
    assert!(
        stderr.contains("timing fx.Latency.spin") && !stderr.contains("Consumer.handle"),
        "{stderr}"
    );
    let args = flags(&bad);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let rec = record(&args, &[], "fx.Latency", &["600"]);
    assert!(rec.output.status.success(), "{}", rec.stderr());
    let stderr = rec.stderr();
    assert!(
        stderr.contains("left out") && stderr.contains("unknown kind 'lib'"),
        "{stderr}"
    );
    assert!(
        stderr.contains("timing fx.Latency$Consumer.handle"),
        "{stderr}"
    );
}
