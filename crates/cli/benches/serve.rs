//! How fast `vmview serve` shows a big trace's timeline: the time from
//! starting the server to the first timeline frame's answer, each zoom
//! step's server time from the whole trace down to about one call, the
//! range call tree of the whole trace, and the server's peak RSS; twice:
//! the first serve builds the timeline's index by reading the trace (and
//! then saves it), the second reads the saved index.
//!
//! A harness benchmark (not criterion, not a test): one run of the real
//! binary is what a user waits for. The trace is the reading benchmark's
//! synthetic one (`crates/filter/benches/synthetic.rs`: CALL/RETURN pairs
//! on 8 threads, calls of up to 2 ms), generated once under target/ and
//! never committed; the saved index goes to a directory of its own there,
//! removed afterwards. The peak RSS is the server's own (`VmHWM` in
//! /proc/PID/status), read before it is stopped.
//!
//! ```text
//! VMVIEW_BENCH_EVENTS=500000000 cargo bench -p vmview-cli --bench serve
//! VMVIEW_BENCH_EVENTS=2000000 cargo bench -p vmview-cli --bench serve    # quick
//! VMVIEW_BENCH_DIR=/big/disk VMVIEW_BENCH_EVENTS=... cargo bench ...     # trace there
//! VMVIEW_BENCH_GENERATE_ONLY=1 ...      # only write the trace (then run again)
//! ```

#[path = "../../filter/benches/synthetic.rs"]
mod synthetic;

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One GET; (status, body).
fn get(addr: &str, target: &str) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("headers");
    let status = String::from_utf8_lossy(&raw[9..12]).parse().unwrap_or(0);
    (status, raw[split + 4..].to_vec())
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn main() {
    let events: u64 = std::env::var("VMVIEW_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(500_000_000);
    // The trace (7.3 GB at 500 M events) and the saved index go to
    // VMVIEW_BENCH_DIR when it is set (a disk with room), else target/tmp.
    let dir = std::env::var_os("VMVIEW_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    std::fs::create_dir_all(&dir).expect("target tmp dir");
    let trace = dir.join(format!("reading-bench-{events}.vmv"));
    if !trace.exists() {
        eprintln!("generating {} ...", trace.display());
        let t = Instant::now();
        let pairs = events * 100 / 201 + 1;
        let f = BufWriter::with_capacity(1 << 20, File::create(&trace).expect("create trace"));
        synthetic::write(f, pairs).expect("write trace");
        eprintln!("  {:.1}s", t.elapsed().as_secs_f64());
    }
    if std::env::var_os("VMVIEW_BENCH_GENERATE_ONLY").is_some() {
        // The trace is written outside the quiet time the serves need.
        return;
    }
    let bytes = std::fs::metadata(&trace).map_or(0, |m| m.len());
    println!(
        "trace: {} ({bytes} bytes); load average before: {}",
        trace.display(),
        loadavg()
    );
    // A cache directory of the bench's own: the first serve builds the
    // index and saves it there, the second reads it.
    let cache = dir.join(format!("serve-bench-cache-{events}"));
    let _ = std::fs::remove_dir_all(&cache);
    let cold = open(&trace, &cache, true);
    let saved = open(&trace, &cache, false);
    let _ = std::fs::remove_dir_all(&cache);
    println!("| events | open | listening | first timeline frame | index complete | slowest of {} zoom steps (span) | whole-trace tree | peak RSS | calls kept from |", cold.steps);
    println!("|---|---|---|---|---|---|---|---|---|");
    for (what, r) in [
        ("first (index built, then saved)", &cold),
        ("again (saved index)", &saved),
    ] {
        println!(
            "| {events} | {what} | {:.2} s | {:.2} s | {:.2} s | {:.0} ms ({} ns) | {:.2} s | {} | {} ns |",
            r.listening,
            r.first_frame,
            r.complete,
            r.slowest.0 * 1e3,
            r.slowest.1,
            r.tree,
            r.hwm,
            r.dropped
        );
    }
    println!("load average after: {}", loadavg());
}

/// What one serve of the trace measured.
struct Run {
    listening: f64,
    first_frame: f64,
    complete: f64,
    steps: usize,
    slowest: (f64, u64),
    tree: f64,
    hwm: String,
    dropped: u64,
}

/// Starts `vmview serve`, times its first timeline frame, the zoom
/// steps and the whole trace's tree, and reads its peak RSS. With
/// `wait_saved`, waits (untimed) until the server has saved its index.
fn open(trace: &std::path::Path, cache: &std::path::Path, wait_saved: bool) -> Run {
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_vmview"))
        .arg("serve")
        .arg(trace)
        .args(["--port", "0", "--request-timeout", "120s"])
        .arg("--timeline-cache")
        .arg(cache)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start vmview serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("URL line");
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|s| s.split('/').next())
        .expect("URL")
        .to_string();
    let listening = start.elapsed().as_secs_f64();
    let px = 1200;
    let whole = format!("/api/timeline?from=0&px={px}");
    // The first answer may show the part of the trace read so far (the
    // page draws it and asks again); the index is complete when an
    // answer is not partial.
    let mut first_frame = None;
    let v: serde_json::Value = loop {
        let (status, body) = get(&addr, &whole);
        if status == 200 {
            let v: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
            first_frame.get_or_insert(start.elapsed().as_secs_f64());
            if v["partial"].is_null() {
                break v;
            }
        } else {
            assert_eq!(status, 503, "{}", String::from_utf8_lossy(&body));
        }
        // Once a frame is drawn, ask as often as the page does.
        let pause = if first_frame.is_some() { 500 } else { 20 };
        std::thread::sleep(Duration::from_millis(pause));
    };
    let complete = start.elapsed().as_secs_f64();
    let first_frame = first_frame.unwrap_or(complete);
    eprintln!("  index: {}", v["index"]);
    let end = v["end_ns"].as_u64().unwrap_or(1);
    let dropped = v["dropped_shorter_than_ns"].as_u64().unwrap_or(0);
    // Zoom from the whole trace to 1 µs around its middle, 4× a step.
    let mut span = end;
    let mut slowest = (0.0f64, 0u64);
    let mut steps = 0;
    while span >= 1_000 {
        let from = end / 2 - span / 2;
        let t = Instant::now();
        let (status, body) = get(
            &addr,
            &format!("/api/timeline?from={from}&to={}&px={px}", from + span),
        );
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        if secs > slowest.0 {
            slowest = (secs, span);
        }
        steps += 1;
        span /= 4;
    }
    let t = Instant::now();
    let (status, _) = get(&addr, "/api/tree");
    assert_eq!(status, 200);
    let tree = t.elapsed().as_secs_f64();
    if wait_saved {
        loop {
            let (_, body) = get(&addr, &whole);
            let v: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
            if v["index"]["saved"].is_string() {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .map_or_else(|| "?".into(), |v| v.trim().to_string());
    let _ = child.kill();
    let _ = child.wait();
    Run {
        listening,
        first_frame,
        complete,
        steps,
        slowest,
        tree,
        hwm,
        dropped,
    }
}
