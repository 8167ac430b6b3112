//! How fast `vmview` reads a big trace: events per second for `stats`,
//! `search --count` and `filter` with a type-and-method expression, on one
//! core and on two, with each run's peak RSS.
//!
//! A harness benchmark (not criterion): one run of a real `vmview` binary
//! per figure is what a user waits for, and the runs are long. The trace is
//! generated here (the synthetic CALL/RETURN stream of the filter crate's
//! benchmarks: an int and a String argument per CALL, a THROW per 100
//! pairs), never committed. The core count is set with `taskset`, so the
//! one-core run takes vmview's sequential path and the two-core run its
//! parallel decode, both in the same invocation (compare their ratio, not
//! figures from different days: the machine is shared). Load averages are
//! printed before and after.
//!
//! Both format versions are measured (each trace is generated once and
//! kept under the target dir, or under `VMVIEW_BENCH_DIR` when set; delete
//! `reading-bench-*.vmv` there when done: 1.5 GB each at 100 M events).
//!
//! ```text
//! cargo bench -p vmview-cli --bench reading                 # 100 M events
//! VMVIEW_BENCH_EVENTS=2000000 cargo bench -p vmview-cli --bench reading   # quick
//! ```

#[path = "../../filter/benches/synthetic.rs"]
mod synthetic;

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// One run of vmview: wall seconds, CPU seconds (user + system) and peak
/// RSS (KiB), through wait4.
// The child is reaped by `wait4`, which clippy cannot see.
#[allow(clippy::zombie_processes)]
fn run(cores: &str, args: &[&str]) -> (f64, f64, i64) {
    let start = Instant::now();
    let child = Command::new("taskset")
        .args(["-c", cores])
        .arg(env!("CARGO_BIN_EXE_vmview"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run taskset (util-linux) and vmview");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: `rusage` is plain data that wait4 fills; `pid` is our child,
    // not reaped by anything else.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(r, pid, "wait4 failed");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) <= 1,
        "vmview {args:?} failed"
    );
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (
        secs,
        tv(usage.ru_utime) + tv(usage.ru_stime),
        usage.ru_maxrss,
    )
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// The number of events in `trace` (from its index).
fn count(trace: &Path) -> u64 {
    let out = Command::new(env!("CARGO_BIN_EXE_vmview"))
        .args(["search", "--count"])
        .arg(trace)
        .arg("true")
        .output()
        .expect("run vmview");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

/// The benchmark trace of about `events` events in format `version`,
/// generated under `dir` unless already there.
fn trace(dir: &Path, events: u64, version: u16) -> PathBuf {
    let trace = dir.join(format!("reading-bench-{events}-v{version}.vmv"));
    if count(&trace) < events {
        eprintln!("generating {} ...", trace.display());
        let t = Instant::now();
        // Two events per pair, and a THROW per 100 pairs.
        let pairs = events * 100 / 201 + 1;
        let f = BufWriter::with_capacity(1 << 20, File::create(&trace).expect("create trace"));
        synthetic::write_version(f, pairs, true, version).expect("write trace");
        eprintln!("  {:.1}s", t.elapsed().as_secs_f64());
    }
    trace
}

fn main() {
    let events: u64 = std::env::var("VMVIEW_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(100_000_000);
    // `VMVIEW_BENCH_VERSIONS=2` measures only the version 2 trace.
    let versions: Vec<u16> = std::env::var("VMVIEW_BENCH_VERSIONS")
        .unwrap_or_else(|_| "1,2".into())
        .split(',')
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    // `VMVIEW_BENCH_DIR` keeps the traces elsewhere (a disk with room).
    let dir = std::env::var_os("VMVIEW_BENCH_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")), PathBuf::from);
    std::fs::create_dir_all(&dir).expect("target tmp dir");
    let out = dir.join("reading-bench-out.vmv");
    let o = out.to_str().expect("UTF-8 path");
    let expr = r#"type == CALL && method ~ "^handle1$""#;
    println!("expression: {expr}");
    println!("load average before: {}", loadavg());
    // Wall-clock rates say what a user waits for; on a loaded machine the
    // CPU-second rates (events per second of CPU the process got) say
    // what the code costs.
    println!(
        "| trace | command | 1 core: M events/s (wall) | per CPU-s | RSS MiB | 2 cores: M events/s (wall) | per CPU-s | RSS MiB | 2 cores / 1 core (wall) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for version in versions {
        let trace = trace(&dir, events, version);
        let n = count(&trace);
        let bytes = std::fs::metadata(&trace).map_or(0, |m| m.len());
        let t = trace.to_str().expect("UTF-8 path");
        let cases: [(&str, Vec<&str>); 3] = [
            ("stats", vec!["stats", t]),
            ("search --count", vec!["search", "--count", t, expr]),
            ("filter -o", vec!["filter", t, "-o", o, expr]),
        ];
        let label = format!(
            "v{version}: {:.0} M events, {:.2} GB",
            n as f64 / 1e6,
            bytes as f64 / 1e9
        );
        for (name, args) in &cases {
            let (w1, c1, r1) = run("0", args);
            let (w2, c2, r2) = run("0,1", args);
            let rate = |s: f64| n as f64 / s / 1e6;
            println!(
                "| {label} | `{name}` | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2}x |",
                rate(w1),
                rate(c1),
                r1 as f64 / 1024.0,
                rate(w2),
                rate(c2),
                r2 as f64 / 1024.0,
                w1 / w2
            );
        }
    }
    println!("load average after: {}", loadavg());
    let _ = std::fs::remove_file(&out);
}
