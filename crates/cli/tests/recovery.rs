//! Crash safety: a JVM killed with SIGKILL and a trace with a damaged chunk
//! still give back every complete chunk, with a clear word about the rest.

use crate::support::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Starts `fx.Loop` under the agent (no `vmview record` in between, so the
/// JVM itself can be killed) and returns the child and the trace path.
fn start_loop(name: &str, opts: &str, args: &[&str]) -> (std::process::Child, std::path::PathBuf) {
    let dir = scratch(name);
    let trace = dir.join("trace.vmv");
    let child = Command::new("java")
        .arg(format!(
            "-agentpath:{}=file={},{}{}",
            agent().display(),
            trace.display(),
            opts,
            format_option()
        ))
        .arg("-cp")
        .arg(classes())
        .arg("fx.Loop")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start java");
    (child, trace)
}

fn ids(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .map(|e| e["id"].as_u64().expect("id"))
        .collect()
}

#[test]
fn sigkilled_jvm_leaves_a_trace_whose_complete_chunks_all_read_back() {
    for round in 0..3 {
        let (mut child, trace) = start_loop("sigkill", "classes=fx.Loop,flush=100ms", &[]);
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "started\n");
        // Kill at a different moment each round, after a few flushes.
        std::thread::sleep(Duration::from_millis(700 + 230 * round));
        child.kill().expect("SIGKILL the JVM");
        child.wait().unwrap();

        let out = run(&["show", path_str(&trace), "--format", "jsonl"]);
        assert!(
            out.status.success(),
            "a killed JVM's trace is readable: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(
            events.len() > 100,
            "round {round}: several flushes' worth of events, got {}",
            events.len()
        );
        // Nothing lost in the middle: ids run 1, 2, 3 … without a gap.
        let ids = ids(&events);
        assert_eq!(
            ids,
            (1..=ids.len() as u64).collect::<Vec<_>>(),
            "round {round}"
        );
        assert!(of_type(&events, "CALL")
            .iter()
            .all(|e| e["method"] == "work" || e["method"] == "main"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("did not finish")
                || stderr.contains("truncated")
                || stderr.contains("index"),
            "round {round}: says the recording did not end cleanly: {stderr}"
        );
    }
}

#[test]
fn one_corrupted_byte_names_its_chunk_and_the_other_chunks_still_read() {
    let (child, trace) = start_loop("corrupt", "classes=fx.Loop,flush=50ms", &["600"]);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let before = jsonl(&trace);

    let index = {
        let mut r = vmview_format::TraceReader::open(&trace).expect("open trace");
        r.index().expect("index").clone()
    };
    assert!(
        index.chunks.len() >= 4,
        "need several chunks, got {}",
        index.chunks.len()
    );
    let victim = &index.chunks[1];
    let mut bytes = std::fs::read(&trace).unwrap();
    let at = (victim.offset + victim.len / 2) as usize;
    bytes[at] ^= 0x5a;
    std::fs::write(&trace, &bytes).unwrap();

    let out = run(&["show", path_str(&trace), "--format", "jsonl"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("chunk {}", victim.seq)),
        "the message names the damaged chunk {}: {stderr}",
        victim.seq
    );
    let after: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let lost: Vec<u64> = (victim.first_id..=victim.last_id).collect();
    let expected: Vec<u64> = ids(&before)
        .into_iter()
        .filter(|id| !lost.contains(id))
        .collect();
    assert_eq!(
        ids(&after),
        expected,
        "every event outside the damaged chunk reads back"
    );
}
