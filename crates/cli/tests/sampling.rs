//! `sampler=signal` (the default), `sampler=cpu` and `sampler=safepoint`:
//! which sampler ran, whether samples land inside inlined code, and the
//! thread states of the signal sampler (docs/SAMPLING.md).

use crate::support::*;
use serde_json::Value;
use std::collections::HashMap;

/// The trace header's properties, through `vmview stats --format json`.
fn properties(rec: &Recording) -> Value {
    let out = run(&["stats", path_str(&rec.trace), "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stats: Value = serde_json::from_slice(&out.stdout).expect("stats json");
    stats["properties"].clone()
}

/// How many of `thread`'s samples have each top-frame method.
fn leaves(events: &[Value], thread: &str) -> HashMap<String, usize> {
    let mut n = HashMap::new();
    for s in of_type(events, "SAMPLE") {
        if s["thread"] == thread {
            let top = s["stack"][0]["method"].as_str().unwrap_or("-").to_string();
            *n.entry(top).or_insert(0) += 1;
        }
    }
    n
}

fn count(leaves: &HashMap<String, usize>, method: &str) -> usize {
    leaves.get(method).copied().unwrap_or(0)
}

/// A frame's `type` in the JSON Lines (absent: unknown).
fn frame_type(frame: &Value) -> &str {
    frame["type"].as_str().unwrap_or("unknown")
}

/// The types of a sample's frames, top first.
fn types(sample: &Value) -> Vec<&str> {
    sample["stack"]
        .as_array()
        .map_or(Vec::new(), |s| s.iter().map(frame_type).collect())
}

#[test]
fn signal_samples_land_in_methods_inlined_into_a_hot_loop() {
    // fx.HotLoop: light() and heavy() (90 % of the work, straight-line
    // code without a safepoint poll) inlined into main's loop. At
    // safepoints every sample lands on the loop's poll, in main; the
    // signal walk finds the two methods.
    let rec = record(
        &["--events", "samples", "--interval", "2ms"],
        &[],
        "fx.HotLoop",
        &[],
    );
    assert!(rec.output.status.success(), "{}", rec.stderr());
    assert_eq!(properties(&rec)["sampler"], "signal", "the default");
    let main = leaves(&rec.events(), "main");
    let total: usize = main.values().sum();
    let inlined = count(&main, "light") + count(&main, "heavy");
    assert!(total >= 50, "main was sampled {total} times: {main:?}");
    assert!(
        inlined * 2 >= total,
        "{inlined} of {total} main samples in light/heavy: {main:?}"
    );

    // Frame types: once the JIT compiled the loop, a sample in light() or
    // heavy() has them inlined into a compiled main (docs/SAMPLING.md).
    let events = rec.events();
    let samples = of_type(&events, "SAMPLE");
    let in_methods: Vec<&&Value> = samples
        .iter()
        .filter(|s| s["thread"] == "main")
        .filter(|s| matches!(s["stack"][0]["method"].as_str(), Some("light" | "heavy")))
        .collect();
    let typed = in_methods
        .iter()
        .filter(|s| {
            types(s).first() == Some(&"inlined")
                && s["stack"][1]["method"] == "main"
                && frame_type(&s["stack"][1]) == "compiled"
        })
        .count();
    assert!(
        typed * 2 >= in_methods.len(),
        "{typed} of {} samples in light/heavy are inlined into a compiled main",
        in_methods.len()
    );
    for s in &samples {
        // Inlined frames sit on top of the compiled frame they are in;
        // nothing below a compiled frame is typed compiled or inlined.
        let t = types(s);
        if let Some(at) = t.iter().position(|t| *t != "inlined") {
            if t[..at].contains(&"inlined") {
                assert_eq!(
                    t[at], "compiled",
                    "inlined frames end in a compiled one: {s}"
                );
            }
            assert!(
                !t[at + 1..]
                    .iter()
                    .any(|t| *t == "compiled" || *t == "inlined"),
                "only the top frames are typed: {s}"
            );
        }
    }

    // The flame graph's annotation, only when asked for.
    let folded = |extra: &[&str]| {
        let mut args = vec![
            "export",
            path_str(&rec.trace),
            "--format",
            "collapsed",
            "--weight",
            "samples",
        ];
        args.extend_from_slice(extra);
        let out = run(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    };
    let annotated = folded(&["--frame-types"]);
    assert!(
        annotated
            .lines()
            .any(|l| l.contains("fx.HotLoop.main_[j];fx.HotLoop.heavy_[i] ")
                || l.contains("fx.HotLoop.main_[j];fx.HotLoop.light_[i] ")),
        "no inlined heavy/light over a compiled main:\n{annotated}"
    );
    assert!(!folded(&[]).contains("_["), "no annotation by default");

    // The XML export carries the types (TYPE) and reads back with them.
    let xml = rec.trace.with_extension("xml");
    let out = run(&["export", path_str(&rec.trace), "-o", path_str(&xml)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&xml).expect("xml");
    assert!(text.contains(" TYPE=\"inlined\""), "TYPE in the XML");
    crate::xml::assert_valid_xml(&xml);
    let again = jsonl(&xml);
    let stacks = |evs: &[Value]| -> Vec<Vec<String>> {
        of_type(evs, "SAMPLE")
            .iter()
            .map(|s| types(s).iter().map(|t| t.to_string()).collect())
            .collect()
    };
    assert_eq!(stacks(&events), stacks(&again), "types survive the XML");
}

#[test]
fn interpreted_and_native_frames_are_typed() {
    // -Xint: no compiled code, the top Java frame runs in the
    // interpreter. The Reference Handler waits in a native method.
    let rec = record(
        &["--events", "samples", "--interval", "2ms"],
        &["-Xint"],
        "fx.HotLoop",
        &["20"],
    );
    assert!(rec.output.status.success(), "{}", rec.stderr());
    let events = rec.events();
    let samples = of_type(&events, "SAMPLE");
    let main: Vec<&&Value> = samples.iter().filter(|s| s["thread"] == "main").collect();
    let interpreted = main
        .iter()
        .filter(|s| types(s).first() == Some(&"interpreted"))
        .count();
    assert!(main.len() >= 20, "main was sampled {} times", main.len());
    assert!(
        interpreted * 2 >= main.len(),
        "{interpreted} of {} main samples have an interpreted top frame",
        main.len()
    );
    for s in &samples {
        assert!(
            !types(s).iter().any(|t| *t == "compiled" || *t == "inlined"),
            "no compiled code under -Xint: {s}"
        );
    }
    let waits: Vec<&&Value> = samples
        .iter()
        .filter(|s| s["stack"][0]["method"] == "waitForReferencePendingList")
        .collect();
    assert!(!waits.is_empty(), "the Reference Handler was sampled");
    for s in waits {
        assert_eq!(frame_type(&s["stack"][0]), "native", "{s}");
    }
}

#[test]
fn signal_samples_split_two_inlined_methods_by_their_work() {
    // fx.Split: three() does 12 xorshift steps, one() 4, both inlined:
    // three() holds 75 % of the two methods' work.
    let rec = record(
        &["--events", "samples", "--interval", "2ms"],
        &[],
        "fx.Split",
        &[],
    );
    assert!(rec.output.status.success(), "{}", rec.stderr());
    let main = leaves(&rec.events(), "main");
    let (three, one) = (count(&main, "three"), count(&main, "one"));
    assert!(three + one >= 50, "{main:?}");
    let share = three as f64 / (three + one) as f64;
    assert!(
        (0.60..=0.90).contains(&share),
        "three() got {:.0} % of the two methods' samples, expected 75 ± 15: {main:?}",
        share * 100.0
    );
}

#[test]
fn cpu_sampler_samples_running_threads_by_their_cpu_time() {
    // sampler=cpu: a CPU-time timer per thread. fx.Split does a fixed
    // amount of work, so a loaded machine does not thin the samples; the
    // waiting threads get none.
    let rec = record(
        &[
            "--events",
            "samples",
            "--sampler",
            "cpu",
            "--interval",
            "5ms",
        ],
        &[],
        "fx.Split",
        &[],
    );
    assert!(rec.output.status.success(), "{}", rec.stderr());
    assert_eq!(properties(&rec)["sampler"], "cpu");
    let events = rec.events();
    let samples = of_type(&events, "SAMPLE");
    assert!(samples.iter().all(|s| s["state"] == "RUN"), "on CPU = RUN");
    assert!(
        !samples.iter().any(|s| s["thread"] == "Finalizer"),
        "a waiting thread uses no CPU"
    );
    let main = leaves(&events, "main");
    let (three, one) = (count(&main, "three"), count(&main, "one"));
    assert!(three + one >= 50, "{main:?}");
    let share = three as f64 / (three + one) as f64;
    assert!((0.60..=0.90).contains(&share), "{main:?}");
}

#[test]
fn safepoint_sampler_is_kept_and_named_in_the_trace() {
    let rec = record(
        &["--events", "samples", "--sampler", "safepoint"],
        &[],
        "fx.HotLoop",
        &["100"],
    );
    assert!(rec.output.status.success(), "{}", rec.stderr());
    assert_eq!(properties(&rec)["sampler"], "safepoint");
    let events = rec.events();
    assert!(!leaves(&events, "main").is_empty());
    // GetAllStackTraces does not say how a frame ran: only native
    // methods are typed.
    for s in of_type(&events, "SAMPLE") {
        assert!(
            types(s).iter().all(|t| *t == "unknown" || *t == "native"),
            "{s}"
        );
    }
}

#[test]
fn signal_samples_keep_every_thread_state() {
    // fx.States holds one thread in each state until the JVM exits; the
    // state comes from JVMTI (asked by the sampler thread), the stack
    // from the thread's own signal handler. The last samples of each
    // thread are taken well after it reached its state.
    let rec = record(
        &["--events", "samples", "--interval", "5ms"],
        &[],
        "fx.States",
        &[],
    );
    assert!(rec.output.status.success(), "{}", rec.stderr());
    let events = rec.events();
    let samples = of_type(&events, "SAMPLE");
    // (thread, state, a method near the top of its stack)
    for (thread, state, near_top) in [
        ("st-run", "RUN", "spinForever"),
        ("st-sleep", "SLEEP", "sleepForever"),
        ("st-wait", "WAIT", "waitForever"),
        ("st-hold", "SLEEP", "holdForever"),
        ("st-block", "BLOCKED", "blockForever"),
        ("st-read", "IO", "readForever"),
    ] {
        let of: Vec<&&Value> = samples.iter().filter(|s| s["thread"] == thread).collect();
        assert!(of.len() >= 40, "{thread}: {} samples", of.len());
        for s in &of[of.len() - 20..] {
            assert_eq!(s["state"], state, "{thread}: {s}");
            let stack = s["stack"].as_array().expect("stack");
            assert!(
                stack.iter().any(|f| f["method"] == near_top),
                "{thread}: {s}"
            );
        }
    }
    // A thread that does not run is not woken by every sample: its
    // samples repeat its last walk (signal_sampler's IDLE_CPU_NS). Woken
    // by each, st-sleep and st-wait would be switched out about once per
    // sample of theirs taken in the fixture's watch (1500 ms at 5 ms).
    let stdout = String::from_utf8_lossy(&rec.output.stdout);
    for thread in ["st-sleep", "st-wait"] {
        let switches: i64 = stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("switches {thread} ")))
            .unwrap_or_else(|| panic!("no switch count for {thread}: {stdout}"))
            .trim()
            .parse()
            .expect("a number");
        assert!(switches >= 0, "{thread}: /proc unreadable ({switches})");
        let sampled = samples.iter().filter(|s| s["thread"] == thread).count();
        assert!(
            switches * 4 < sampled as i64,
            "{thread} was switched out {switches} times in the watch, against {sampled} samples in all"
        );
    }
    // In a tick where st-block is sampled BLOCKED, the holder's sample
    // names the monitor it holds, entered in holdForever.
    let blocked_ticks: Vec<&Value> = samples
        .iter()
        .filter(|s| s["thread"] == "st-block" && s["state"] == "BLOCKED")
        .map(|s| &s["time_ns"])
        .collect();
    let holders: Vec<&&Value> = samples
        .iter()
        .filter(|s| s["thread"] == "st-hold" && blocked_ticks.contains(&&s["time_ns"]))
        .collect();
    assert!(
        !holders.is_empty(),
        "st-hold sampled in a tick with st-block"
    );
    for h in holders {
        let stack = h["stack"].as_array().expect("stack");
        let at = stack
            .iter()
            .position(|f| f["method"] == "holdForever")
            .expect("holdForever on the stack");
        assert_eq!(h["monitors"][0]["depth"], at, "{h}");
    }
}

#[test]
fn wall_samples_of_one_tick_share_its_time() {
    // The samples of one wall tick are one moment: the busy main thread's
    // sample (its own walk, answered from the signal handler) has the time
    // of the tick that signalled it, as the idle threads' samples of that
    // tick (their last walk repeated) do.
    for interval in ["5ms", "40ms"] {
        let rec = record(
            &["--events", "samples", "--interval", interval],
            &[],
            "fx.HotLoop",
            &[],
        );
        assert!(rec.output.status.success(), "{}", rec.stderr());
        let events = rec.events();
        let samples = of_type(&events, "SAMPLE");
        let time = |s: &Value| s["time_ns"].as_u64().expect("time_ns");
        let others: std::collections::HashSet<u64> = samples
            .iter()
            .filter(|s| s["thread"] != "main")
            .map(|s| time(s))
            .collect();
        let main: Vec<u64> = samples
            .iter()
            .filter(|s| s["thread"] == "main")
            .map(|s| time(s))
            .collect();
        let shared = main.iter().filter(|t| others.contains(t)).count();
        assert!(main.len() >= 10, "{interval}: {} main samples", main.len());
        assert!(
            shared * 10 >= main.len() * 9,
            "{interval}: {shared} of {} main samples share a tick's time with another thread's",
            main.len()
        );
        // One sample per thread per tick, in time order in the trace.
        let mut by_thread: HashMap<String, u64> = HashMap::new();
        for s in &samples {
            let thread = s["thread"].as_str().unwrap_or("-").to_string();
            let t = time(s);
            if let Some(prev) = by_thread.insert(thread.clone(), t) {
                assert!(prev < t, "{interval}: {thread} sampled at {prev} then {t}");
            }
        }
    }
}

#[test]
fn a_bad_sampler_is_refused_before_java_starts() {
    let rec = record(
        &["--events", "samples", "--sampler", "fast"],
        &[],
        "fx.Hello",
        &[],
    );
    assert!(!rec.output.status.success());
    let err = rec.stderr();
    assert!(
        err.contains("sampler") && err.contains("safepoint"),
        "names the option and the choices: {err}"
    );
}

#[test]
fn alloc_samples_attribute_big_allocations_to_the_method_that_made_them() {
    // fx.Allocs: makeBuffers() allocates ~200 MB of 100,000-byte arrays,
    // makePoints() ~40 MB of small Points; about one sample per 512 KiB.
    let rec = record(&["--events", "alloc"], &[], "fx.Allocs", &[]);
    assert!(rec.output.status.success(), "{}", rec.stderr());
    let events = rec.events();
    let allocs = of_type(&events, "ALLOC_SAMPLE");
    let top = |s: &Value| s["stack"][0]["method"].as_str().unwrap_or("-").to_string();
    let buffers: Vec<&&Value> = allocs
        .iter()
        .filter(|s| s["class"] == "byte[]" && s["size"].as_u64().unwrap() >= 100_000)
        .collect();
    assert!(buffers.len() >= 100, "{} big-array samples", buffers.len());
    for s in &buffers {
        assert_eq!(top(s), "makeBuffers", "{s}");
        assert_eq!(s["thread"], "main");
    }
    let points: Vec<&&Value> = allocs
        .iter()
        .filter(|s| s["class"] == "fx.Allocs$Point")
        .collect();
    assert!(points.len() >= 10, "{} Point samples", points.len());
    assert!(points.iter().all(|s| top(s) == "makePoints"));

    // --weight alloc folds them by bytes: makeBuffers' tower is the widest.
    let out = run(&[
        "export",
        path_str(&rec.trace),
        "--format",
        "collapsed",
        "--weight",
        "alloc",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let folded = String::from_utf8(out.stdout).expect("utf-8");
    let bytes_of = |leaf: &str| -> u64 {
        folded
            .lines()
            .filter(|l| l.rsplit_once(' ').is_some_and(|(p, _)| p.ends_with(leaf)))
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum()
    };
    let big = bytes_of("fx.Allocs.makeBuffers");
    assert!(big >= 100 * 100_000, "{folded}");
    assert!(big > bytes_of("fx.Allocs.makePoints"), "{folded}");

    // The XML export is valid against the DTD and reads back.
    let xml = rec.trace.with_extension("xml");
    let out = run(&[
        "export",
        path_str(&rec.trace),
        "--format",
        "xml",
        "-o",
        path_str(&xml),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    crate::xml::assert_valid_xml(&xml);
    let back = jsonl(&xml);
    assert_eq!(of_type(&back, "ALLOC_SAMPLE").len(), allocs.len());
}
