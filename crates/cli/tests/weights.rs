//! `--weight samples|cpu|wall|alloc|lock` on flame graphs, `calltree`,
//! speedscope and Chrome exports, on one real recording of `fx.Weights`
//! (a spinning, a sleeping, an allocating and a blocked thread), and the
//! errors a weight the trace lacks gives (docs/SAMPLING.md).
//!
//! Every total is checked against the trace's own events (`show --format
//! jsonl`), never against a count the scheduler decides; only the
//! fixture's own threads, methods and lock class are looked at.

use crate::support::*;
use serde_json::Value;

fn ok(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("utf-8")
}

/// `export --format collapsed --thread-frames --weight W` as (path, weight).
fn folded(trace: &str, weight: &str) -> Vec<(String, u64)> {
    ok(&run(&[
        "export",
        trace,
        "--format",
        "collapsed",
        "--thread-frames",
        "--weight",
        weight,
    ]))
    .lines()
    .map(|l| {
        let (p, w) = l.rsplit_once(' ').expect("a folded line");
        (p.to_string(), w.parse().expect("a weight"))
    })
    .collect()
}

/// The weight of the folded paths of `thread` that pass through `frame`.
fn through(lines: &[(String, u64)], thread: &str, frame: &str) -> u64 {
    lines
        .iter()
        .filter(|(p, _)| p.split(';').next() == Some(thread) && p.split(';').any(|f| f == frame))
        .map(|(_, w)| *w)
        .sum()
}

fn total(lines: &[(String, u64)]) -> u64 {
    lines.iter().map(|(_, w)| *w).sum()
}

#[test]
fn every_weight_folds_the_events_of_its_kind() {
    let rec = record(
        &[
            "--events",
            "samples+alloc+locks+calls",
            "--classes",
            "fx.Weights*",
        ],
        &[],
        "fx.Weights",
        &[],
    );
    assert!(rec.output.status.success(), "{}", rec.stderr());
    let trace = path_str(&rec.trace);
    let events = rec.events();
    let samples = of_type(&events, "SAMPLE");
    let run_samples = samples.iter().filter(|s| s["state"] == "RUN").count() as u64;

    // samples and wall: every SAMPLE once; cpu: the RUN ones (a wall
    // sampler's trace).
    let wall = folded(trace, "wall");
    assert_eq!(total(&wall), samples.len() as u64);
    assert_eq!(total(&folded(trace, "samples")), samples.len() as u64);
    let cpu = folded(trace, "cpu");
    assert_eq!(total(&cpu), run_samples);
    // The sleeper sleeps 800 ms in nap(): wall samples, and at most a
    // RUN sample or two caught on its way into Thread.sleep (the state is
    // read just before the stack). How many samples a thread gets
    // depends on the machine's load, so only floors of a few are asked.
    let nap_wall = through(&wall, "sleeper", "fx.Weights.nap");
    let nap_cpu = through(&cpu, "sleeper", "fx.Weights.nap");
    assert!(nap_cpu <= 2, "{nap_cpu} CPU samples in nap: {cpu:?}");
    assert!(nap_wall >= nap_cpu + 5, "{nap_wall} wall samples in nap");
    // The spinner's samples are all RUN: cpu counts every one of them.
    let spin_cpu = through(&cpu, "spinner", "fx.Weights.spin");
    assert!(spin_cpu >= 5, "{spin_cpu} CPU samples in spin: {cpu:?}");
    let spinner_run = samples
        .iter()
        .filter(|s| s["thread"] == "spinner" && s["state"] == "RUN")
        .count() as u64;
    assert_eq!(
        through(&cpu, "spinner", "java.lang.Thread.run"),
        spinner_run
    );

    // alloc: the bytes of the ALLOC_SAMPLEs; allocate() made the most.
    let allocs = of_type(&events, "ALLOC_SAMPLE");
    let bytes: u64 = allocs.iter().map(|a| a["size"].as_u64().unwrap()).sum();
    let alloc = folded(trace, "alloc");
    assert_eq!(total(&alloc), bytes);
    let in_allocate = through(&alloc, "main", "fx.Weights.allocate");
    assert!(
        in_allocate * 2 > bytes,
        "{in_allocate} of {bytes}: {alloc:?}"
    );

    // lock: the waiter's wait on the fixture's Lock, under its traced
    // call path and a [blocked on CLASS] frame. JDK-internal contention
    // elsewhere in the JVM is not looked at.
    let entered: Vec<&Value> = of_type(&events, "MONITOR_CONTENDED_ENTERED")
        .into_iter()
        .filter(|e| {
            e["thread"] == "waiter"
                && e["monitor"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("fx.Weights$Lock@"))
        })
        .collect();
    assert_eq!(entered.len(), 1, "one contended enter by the waiter");
    let waited = entered[0]["wait_ns"].as_u64().unwrap();
    assert!(
        waited >= 100_000_000,
        "the holder keeps it 100 ms: {waited}"
    );
    let lock = folded(trace, "lock");
    let path =
        "waiter;fx.Weights.lambda$main$2;fx.Weights.waitForLock;[blocked on fx.Weights$Lock]";
    assert!(
        lock.contains(&(path.to_string(), waited)),
        "{path} {waited} in {lock:?}"
    );

    // calltree --weight: the same totals per thread.
    let tree: Value = serde_json::from_str(&ok(&run(&[
        "calltree", trace, "--weight", "wall", "--format", "json",
    ])))
    .expect("calltree json");
    assert_eq!(tree["weight"], "wall");
    // The merged tree has no thread frame: a sample without a Java frame
    // has no place in it.
    let with_frames = samples
        .iter()
        .filter(|s| s["stack"].as_array().is_some_and(|f| !f.is_empty()))
        .count() as u64;
    assert_eq!(tree["merged"]["total"].as_u64(), Some(with_frames));
    let of_thread = |t: &str| {
        tree["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["thread"] == t)
            .map(|x| x["total"].as_u64().unwrap())
    };
    let sleeper_samples = samples.iter().filter(|s| s["thread"] == "sleeper").count() as u64;
    assert_eq!(of_thread("sleeper"), Some(sleeper_samples));
    let text = ok(&run(&["calltree", trace, "--weight", "lock"]));
    assert!(
        text.contains("[blocked on fx.Weights$Lock]") && text.contains("== thread waiter"),
        "{text}"
    );

    // speedscope: main's sampled profile weighs its allocation bytes and
    // is the one speedscope opens; the file is valid against speedscope's
    // published schema.
    let scope = rec.trace.with_extension("alloc.speedscope.json");
    ok(&run(&[
        "export",
        trace,
        "--format",
        "speedscope",
        "--weight",
        "alloc",
        "-o",
        path_str(&scope),
    ]));
    crate::formats::assert_valid_against_schema(&scope, &crate::formats::speedscope_schema());
    let doc: Value =
        serde_json::from_slice(&std::fs::read(&scope).expect("speedscope file")).expect("json");
    let profiles = doc["profiles"].as_array().unwrap();
    let main = profiles
        .iter()
        .find(|p| p["name"] == "main (alloc)")
        .expect("main's alloc profile");
    assert_eq!(main["type"], "sampled");
    assert_eq!(main["unit"], "bytes");
    let main_bytes: u64 = allocs
        .iter()
        .filter(|a| a["thread"] == "main")
        .map(|a| a["size"].as_u64().unwrap())
        .sum();
    let weights: u64 = main["weights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_u64().unwrap())
        .sum();
    assert_eq!(weights, main_bytes);
    let active = doc["activeProfileIndex"].as_u64().unwrap() as usize;
    assert_eq!(profiles[active]["type"], "sampled");

    // chrome: the sampling section, the waiter's wait on a frame chain
    // that ends in the blocked frame under waitForLock.
    let doc: Value = serde_json::from_str(&ok(&run(&[
        "export", trace, "--format", "chrome", "--weight", "lock",
    ])))
    .expect("chrome json");
    assert!(!doc["traceEvents"].as_array().unwrap().is_empty());
    let frames = &doc["stackFrames"];
    let chrome_lock: Vec<&Value> = doc["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| frames[s["sf"].as_str().unwrap()]["name"] == "[blocked on fx.Weights$Lock]")
        .collect();
    assert_eq!(chrome_lock.len(), 1, "{doc}");
    assert_eq!(chrome_lock[0]["weight"].as_u64(), Some(waited));
    let leaf = &frames[chrome_lock[0]["sf"].as_str().unwrap()];
    assert_eq!(
        frames[leaf["parent"].as_str().unwrap()]["name"],
        "fx.Weights.waitForLock"
    );
}

#[test]
fn a_weight_the_trace_lacks_names_the_option_that_records_it() {
    // CPU samples only: no wall samples, no allocation samples, no locks.
    let rec = record(
        &[
            "--events",
            "samples",
            "--sampler",
            "cpu",
            "--interval",
            "2ms",
        ],
        &[],
        "fx.HotLoop",
        &[],
    );
    assert!(rec.output.status.success(), "{}", rec.stderr());
    let trace = path_str(&rec.trace);
    let out_file = rec.trace.with_extension("svg");
    for (args, says) in [
        (
            vec!["export", trace, "--format", "svg", "--weight", "wall"],
            "--sampler signal",
        ),
        (
            vec![
                "export",
                trace,
                "--format",
                "collapsed",
                "--weight",
                "alloc",
            ],
            "--events alloc",
        ),
        (
            vec![
                "export",
                trace,
                "--format",
                "speedscope",
                "--weight",
                "lock",
            ],
            "--events locks",
        ),
        (
            vec!["export", trace, "--format", "chrome", "--weight", "alloc"],
            "--events alloc",
        ),
        (
            vec!["calltree", trace, "--weight", "lock"],
            "--events locks",
        ),
        (
            vec!["export", trace, "--format", "xml", "--weight", "cpu"],
            "--format collapsed",
        ),
        (
            vec![
                "export",
                trace,
                "--format",
                "svg",
                "--weight",
                "alloc",
                "-o",
                path_str(&out_file),
            ],
            "--events alloc",
        ),
    ] {
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    assert!(!out_file.exists(), "no half-written flame graph is left");
    // What the trace has works: its CPU samples, weighed by cpu.
    let cpu = folded(trace, "cpu");
    let main: u64 = cpu
        .iter()
        .filter(|(p, _)| p.starts_with("main;"))
        .map(|(_, w)| *w)
        .sum();
    assert!(main > 0, "{cpu:?}");
}
