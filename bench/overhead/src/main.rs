//! `vmview-overhead`: what tracing costs, measured end to end.
//!
//! The same Java program runs untraced, under each vmview mode and under
//! JFR (and, when a JDK 25 is installed, under JFR's method timing and
//! method tracing of the same classes), interleaved round-robin so that the
//! machine's drift hits every configuration alike. Each row reports the
//! median wall time, CPU time (user + system of the whole JVM) and, for the
//! bundled workload, the time of the work itself, each as a ratio to the
//! untraced run on the same JDK; plus the events the tracer recorded and
//! the cost per traced call. Machines here are noisy: compare ratios within
//! one run, never absolute times across runs (STYLE.md).
//!
//! Usage (docs/PERFORMANCE.md, "A whole program"):
//!
//! ```text
//! cargo run --release -p vmview-overhead -- [--reps 5] [--json]
//!     [--jar APP.jar [--main CLASS] --classes GLOBS [-- ARGS…]]
//! cargo run --release -p vmview-overhead -- --server [--reps 5]
//! ```
//!
//! `--server` measures the stack sampler on a Jetty server under load
//! instead (`server.rs`).

mod configs;
mod measure;
mod server;
mod workload;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::Parser;
use serde_json::{json, Value as Json};

use crate::configs::{Config, Jdk, Tracer, CONFIGS};
use crate::measure::{median, Run};
use crate::workload::{Workload, DEFAULT_DAYS};

const AFTER_HELP: &str = "\
Configurations (--only/--skip take these names, comma-separated):
  plain                 the program alone (baseline of the default JDK)
  vmview bci            vmview agent, mode=bci,args=off
  vmview bci+args       vmview agent, mode=bci,args=on
  vmview jvmti          vmview agent, mode=jvmti (1/50 of the bundled workload, at most 3 runs)
  jfr                   -XX:StartFlightRecording (default settings)
  plain 25              the program alone on JDK 25 (baseline of the JDK 25 rows)
  jfr 25                JFR default settings on JDK 25
  jfr 25 method-timing  JFR method-timing of every traced class
  jfr 25 method-trace   JFR method-trace of every traced class

Server configurations (with --server):
  plain                      Jetty alone (baseline)
  vmview samples             vmview agent, events=samples,interval=10ms (sampler=signal)
  vmview samples (agent B)   the same with another build's agent, for an A/B in one
                             interleaved run (only with VMVIEW_AGENT_B=path/to/libvmview_agent.so)
  vmview samples safepoint   the same with sampler=safepoint (GetAllStackTraces)
  jfr                        -XX:StartFlightRecording (default settings)
  async-profiler wall        async-profiler, event=wall,interval=10ms (only with
                             VMVIEW_ASYNC_PROFILER=path/to/libasyncProfiler.so)
  async-profiler itimer      the same with event=itimer

Examples:
  cargo run --release -p vmview-overhead
  nice -n -15 cargo run --release -p vmview-overhead -- --server --epochs 3 --reps 10
  cargo run --release -p vmview-overhead -- --reps 3 --only 'plain,vmview bci'
  cargo run --release -p vmview-overhead -- --jar app.jar --main com.acme.Main --classes 'com.acme.*' -- input.txt";

/// Measure vmview's overhead against an untraced run and JFR.
#[derive(Parser, Debug)]
#[command(name = "vmview-overhead", after_help = AFTER_HELP)]
struct Args {
    /// Repetitions of each configuration (median reported).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Days the bundled workload simulates (its size).
    #[arg(long, default_value_t = DEFAULT_DAYS)]
    days: u32,
    /// Measure this jar instead of the bundled workload.
    #[arg(long, value_name = "APP.jar")]
    jar: Option<PathBuf>,
    /// Main class in --jar (default: run it with -jar).
    #[arg(long, value_name = "CLASS", requires = "jar")]
    main: Option<String>,
    /// Trace classes of --jar (vmview globs, '+'-separated: 'com.acme.*').
    #[arg(long, value_name = "GLOBS", requires = "jar")]
    classes: Option<String>,
    /// Arguments for --jar's program.
    #[arg(last = true, requires = "jar")]
    program_args: Vec<String>,
    /// The default JVM.
    #[arg(long, default_value = "java")]
    java: PathBuf,
    /// A JDK 25 `java` for the JFR method-tracing rows (default: the first
    /// /usr/lib/jvm/*25*/bin/java; rows are skipped without one).
    #[arg(long, value_name = "JAVA")]
    jdk25: Option<PathBuf>,
    /// Only these configurations (comma-separated names).
    #[arg(long, value_name = "NAMES")]
    only: Option<String>,
    /// Leave out these configurations (comma-separated names).
    #[arg(long, value_name = "NAMES")]
    skip: Option<String>,
    /// Print one JSON document instead of the table.
    #[arg(long)]
    json: bool,
    /// Do not build the agent and vmview first (when run by `cargo run`,
    /// the harness builds them with the same profile).
    #[arg(long)]
    no_build: bool,
    /// Keep the work directory (traces, recordings, outputs).
    #[arg(long)]
    keep: bool,
    /// The agent's `buffer=` for every vmview row: large, so that no event
    /// is dropped and each row pays for every event it traces (the agent's
    /// own default, 64m, can drop events on a busy machine).
    #[arg(long, value_name = "SIZE", default_value = "1g")]
    agent_buffer: String,
    /// Kill a run that takes longer than this many seconds (a hung tracer);
    /// its configuration is then reported as failed.
    #[arg(long, value_name = "SECS", default_value_t = 180)]
    timeout: u64,
    /// Measure stack sampling on a Jetty server driven by HTTP clients on
    /// loopback (throughput and CPU per request), instead of a program's
    /// run time.
    #[arg(long, conflicts_with_all = ["jar", "days"])]
    server: bool,
    /// With --server: sets of fresh server JVMs, each warmed up and
    /// measured for --reps rounds.
    #[arg(long, value_name = "N", default_value_t = 3, requires = "server")]
    epochs: usize,
    /// With --server: concurrent keep-alive clients.
    #[arg(long, value_name = "N", default_value_t = 4, requires = "server")]
    clients: usize,
    /// With --server: seconds of load on each server before the rounds.
    #[arg(long, value_name = "SECS", default_value_t = 15.0, requires = "server")]
    warmup: f64,
    /// With --server: seconds of one measured window (--reps rounds of one
    /// window per server).
    #[arg(long, value_name = "SECS", default_value_t = 2.0, requires = "server")]
    window: f64,
    /// With --server: where Debian's jetty9 and servlet-api jars are.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "/usr/share/java",
        requires = "server"
    )]
    jars: PathBuf,
    /// With --server: run the servers on the last CPU and the load
    /// generator on CPU 0 (each server JVM then sees one CPU).
    #[arg(long, requires = "server")]
    pin: bool,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("vmview-overhead: error: {e}");
        for cause in e.chain().skip(1) {
            eprintln!("  caused by: {cause}");
        }
        std::process::exit(1);
    }
}

/// A configuration ready to run.
struct Row {
    config: Config,
    java: PathBuf,
    /// The vmview agent options chosen (without file/classes/quiet).
    agent_options: Option<String>,
    /// Why the row does not run.
    skipped: Option<String>,
    runs: Vec<Run>,
    /// Output differing from the baseline's (the tracer changed the program).
    wrong_output: Option<String>,
    /// From the first run's trace or recording.
    events: Option<u64>,
    calls: Option<u64>,
    dropped: Option<u64>,
    trace_bytes: Option<u64>,
    /// The overhead budget: methods demoted, and its mean estimate of the
    /// overhead (basis points) when it reported one.
    demoted: Option<u64>,
    estimated_bp: Option<u64>,
}

fn run(args: &Args) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("where is this binary?")?;
    let bin_dir = exe
        .parent()
        .context("binary without a directory")?
        .to_path_buf();
    if !args.no_build {
        build_tools(&bin_dir)?;
    }
    let agent = bin_dir.join("libvmview_agent.so");
    let vmview = bin_dir.join("vmview");
    for p in [&agent, &vmview] {
        if !p.exists() {
            bail!(
                "{} is missing: build the workspace first (cargo build --release --workspace)",
                p.display()
            );
        }
    }
    if bin_dir.file_name().is_some_and(|n| n == "debug") {
        eprintln!("vmview-overhead: warning: a debug build of the agent measures the debug build; use --release");
    }

    let work = std::env::temp_dir().join(format!("vmview-overhead-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let result = if args.server {
        let names = |s: &Option<String>| -> Vec<String> {
            s.as_deref()
                .map(|s| s.split(',').map(|n| n.trim().to_string()).collect())
                .unwrap_or_default()
        };
        let secs = |s: f64, what: &str| {
            if s.is_finite() && s > 0.0 {
                Ok(Duration::from_secs_f64(s))
            } else {
                Err(anyhow::anyhow!(
                    "--{what} {s}: give a positive number of seconds"
                ))
            }
        };
        server::ServerArgs {
            java: &args.java,
            agent: &agent,
            vmview: &vmview,
            jars: &args.jars,
            reps: args.reps,
            epochs: args.epochs.max(1),
            clients: args.clients.max(1),
            warmup: secs(args.warmup, "warmup")?,
            window: secs(args.window, "window")?,
            only: names(&args.only),
            skip: names(&args.skip),
            json: args.json,
            pin: args.pin,
        }
        .run_in(&work)
    } else {
        measure_all(args, &agent, &vmview, &work)
    };
    if args.keep {
        eprintln!("vmview-overhead: files kept in {}", work.display());
    } else {
        let _ = std::fs::remove_dir_all(&work);
    }
    result
}

/// When started by `cargo run`, builds the agent and the CLI in the same
/// profile, so the measured agent is the current source.
fn build_tools(bin_dir: &Path) -> anyhow::Result<()> {
    let Ok(cargo) = std::env::var("CARGO") else {
        return Ok(());
    };
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", "vmview-agent", "-p", "vmview-cli"]);
    match bin_dir.file_name().and_then(|n| n.to_str()) {
        Some("release") => {
            cmd.arg("--release");
        }
        Some("debug") => {}
        Some(other) => {
            cmd.args(["--profile", other]);
        }
        None => {}
    }
    let status = cmd.status().context("run cargo build")?;
    if !status.success() {
        bail!("cargo build of the agent and vmview failed");
    }
    Ok(())
}

fn sibling_tool(java: &Path, tool: &str) -> PathBuf {
    match java.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(tool),
        _ => PathBuf::from(tool),
    }
}

fn find_jdk25() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/jvm")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains("25"))
        })
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|d| d.join("bin/java"))
        .find(|j| j.exists())
}

fn java_version(java: &Path) -> String {
    Command::new(java)
        .arg("-version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .nth(1)
                .map(|l| l.trim().to_string())
        })
        .unwrap_or_else(|| "?".to_string())
}

fn measure_all(args: &Args, agent: &Path, vmview: &Path, work: &Path) -> anyhow::Result<()> {
    let workload = match &args.jar {
        None => Workload::bundled(&sibling_tool(&args.java, "javac"), work, args.days)?,
        Some(jar) => {
            let classes = args
                .classes
                .as_deref()
                .context("--jar needs --classes: the classes vmview and JFR trace")?;
            Workload::jar(
                &sibling_tool(&args.java, "jar"),
                jar,
                args.main.clone(),
                classes,
                args.program_args.clone(),
            )?
        }
    };
    let jdk25 = args.jdk25.clone().or_else(find_jdk25);
    let names = |s: &Option<String>| -> Vec<String> {
        s.as_deref()
            .map(|s| s.split(',').map(|n| n.trim().to_string()).collect())
            .unwrap_or_default()
    };
    let (only, skip) = (names(&args.only), names(&args.skip));
    for n in only.iter().chain(&skip) {
        if !CONFIGS.iter().any(|c| c.name == n) {
            bail!("no configuration named {n:?} (see --help)");
        }
    }

    let mut rows: Vec<Row> = Vec::new();
    for c in CONFIGS {
        let wanted = (only.is_empty() || only.iter().any(|n| n == c.name))
            && !skip.iter().any(|n| n == c.name);
        // Baselines run whenever a row of their JDK runs.
        let needed_baseline = c.is_baseline()
            && CONFIGS.iter().any(|o| {
                o.jdk == c.jdk
                    && (only.is_empty() || only.iter().any(|n| n == o.name))
                    && !skip.iter().any(|n| n == o.name)
            });
        if !wanted && !needed_baseline {
            continue;
        }
        let java = match c.jdk {
            Jdk::Default => Some(args.java.clone()),
            Jdk::Jdk25 => jdk25.clone(),
        };
        let mut row = Row {
            config: *c,
            java: java.clone().unwrap_or_default(),
            agent_options: None,
            skipped: None,
            runs: Vec::new(),
            wrong_output: None,
            events: None,
            calls: None,
            dropped: None,
            demoted: None,
            estimated_bp: None,
            trace_bytes: None,
        };
        if java.is_none() {
            row.skipped = Some("no JDK 25 found (--jdk25)".to_string());
        } else if let Tracer::Vmview { options } = c.tracer {
            match choose_agent_options(&row.java, agent, options, work) {
                Ok(o) => row.agent_options = Some(o),
                Err(why) => row.skipped = Some(why),
            }
        }
        rows.push(row);
    }

    // One untimed run warms the file cache and the JIT's CDS archive.
    if let Some(first) = rows.iter().find(|r| r.skipped.is_none()) {
        let dir = work.join("warmup");
        std::fs::create_dir_all(&dir)?;
        let mut cmd = Command::new(&first.java);
        cmd.args(workload.program_args(1));
        measure::run(cmd, &dir, Duration::from_secs(args.timeout))?;
    }

    let active = rows.iter().filter(|r| r.skipped.is_none()).count();
    let load_start = load_average();
    let mut expected_output: Vec<(u32, String)> = Vec::new();
    for rep in 0..args.reps {
        for (i, row) in rows.iter_mut().enumerate() {
            if row.skipped.is_some() || row.config.max_reps.is_some_and(|m| rep >= m) {
                continue;
            }
            let dir = work.join(format!("r{rep}-{i}"));
            std::fs::create_dir_all(&dir)?;
            let trace = dir.join("trace.vmv");
            let jfr = dir.join("recording.jfr");
            let scale = effective_scale(&workload, &row.config);
            let mut cmd = Command::new(&row.java);
            match row.config.tracer {
                Tracer::None => {}
                Tracer::Vmview { .. } => {
                    let mut opts = format!(
                        "file={},classes={},buffer={},quiet",
                        trace.display(),
                        workload.classes,
                        args.agent_buffer
                    );
                    if let Some(o) = row.agent_options.as_deref().filter(|o| !o.is_empty()) {
                        opts = format!("{o},{opts}");
                    }
                    cmd.arg(format!("-agentpath:{}={opts}", agent.display()));
                }
                Tracer::Jfr { options } => {
                    let mut o = options.replace("{methods}", &workload.jfr_filter);
                    if !o.is_empty() {
                        o.push(',');
                    }
                    o.push_str(&format!("filename={}", jfr.display()));
                    cmd.arg(format!("-XX:StartFlightRecording:{o}"));
                }
            }
            cmd.args(workload.program_args(scale));
            eprint!(
                "vmview-overhead: round {}/{}  {:<22}",
                rep + 1,
                args.reps,
                row.config.name
            );
            let r = measure::run(cmd, &dir, Duration::from_secs(args.timeout))?;
            eprintln!(
                "wall {:>8}  cpu {:>8}{}",
                secs(r.wall),
                secs(r.cpu),
                if r.timed_out {
                    "  TIMED OUT"
                } else if r.success {
                    ""
                } else {
                    "  FAILED"
                }
            );
            if !r.success {
                row.skipped = Some(if r.timed_out {
                    format!("killed after {} s (--timeout)", args.timeout)
                } else {
                    format!(
                        "the JVM failed: {}",
                        r.stderr.lines().last().unwrap_or("").trim()
                    )
                });
                continue;
            }
            let printed = program_output(&r.stdout);
            match expected_output.iter().find(|(s, _)| *s == scale) {
                Some((_, out)) if *out != printed => {
                    row.wrong_output = Some(printed.trim().to_string());
                }
                Some(_) => {}
                None => expected_output.push((scale, printed)),
            }
            if row.runs.is_empty() {
                match row.config.tracer {
                    Tracer::Vmview { .. } => read_trace_stats(vmview, &trace, row)?,
                    Tracer::Jfr { .. } => {
                        read_jfr_summary(&sibling_tool(&row.java, "jfr"), &jfr, row)
                    }
                    Tracer::None => {}
                }
            }
            row.runs.push(r);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    if active == 0 {
        bail!("no configuration could run");
    }

    let mut report = Report::new(&rows, &workload);
    report.load = (load_start, load_average());
    if args.json {
        let doc = report.json(args, &workload, jdk25.as_deref());
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", report.text(args, &workload, jdk25.as_deref()));
    }
    Ok(())
}

/// What the program printed, without the JVM's own log lines (JFR
/// announces its recording on stdout: `[0.888s][info][jfr,startup] …`).
fn program_output(stdout: &str) -> String {
    stdout
        .lines()
        .filter(|l| !is_jvm_log_line(l))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn is_jvm_log_line(l: &str) -> bool {
    l.strip_prefix('[')
        .and_then(|r| r.split_once("s]["))
        .is_some_and(|(t, _)| !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

fn effective_scale(w: &Workload, c: &Config) -> u32 {
    if w.days.is_some() {
        c.scale
    } else {
        1
    }
}

/// How long `java -version` may take under the agent.
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

/// The first candidate option string the agent accepts (it refuses to
/// start on an option it does not know).
fn choose_agent_options(
    java: &Path,
    agent: &Path,
    candidates: &[&str],
    work: &Path,
) -> Result<String, String> {
    let mut last_error = String::new();
    for c in candidates {
        let probe = work.join("probe.vmv");
        let mut opts = format!("file={},quiet", probe.display());
        if !c.is_empty() {
            opts = format!("{c},{opts}");
        }
        let mut cmd = Command::new(java);
        cmd.arg(format!("-agentpath:{}={opts}", agent.display()))
            .arg("-version");
        let out = measure::run(cmd, work, PROBE_TIMEOUT).map_err(|e| format!("{e:#}"))?;
        let _ = std::fs::remove_file(&probe);
        if out.success {
            return Ok(c.to_string());
        }
        last_error = if out.timed_out {
            format!(
                "java -version under the agent hung for {} s",
                PROBE_TIMEOUT.as_secs()
            )
        } else {
            out.stderr
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("the agent refused the options")
                .trim()
                .to_string()
        };
    }
    Err(format!("this agent does not support it ({last_error})"))
}

fn read_trace_stats(vmview: &Path, trace: &Path, row: &mut Row) -> anyhow::Result<()> {
    row.trace_bytes = std::fs::metadata(trace).ok().map(|m| m.len());
    let out = Command::new(vmview)
        .arg("stats")
        .arg(trace)
        .args(["--format", "json"])
        .output()
        .context("run vmview stats")?;
    if !out.status.success() {
        eprintln!(
            "vmview-overhead: warning: vmview stats on {}: {}",
            trace.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return Ok(());
    }
    let doc: Json = serde_json::from_slice(&out.stdout).context("vmview stats JSON")?;
    row.events = doc["events"].as_u64();
    row.calls = Some(doc["events_by_type"]["CALL"].as_u64().unwrap_or(0));
    row.dropped = doc["dropped"].as_u64();
    row.demoted = doc["budget"]["demoted"].as_u64();
    row.estimated_bp = doc["budget"]["estimated_overhead_bp"].as_u64();
    Ok(())
}

/// Events in a JFR recording, from `jfr summary` (its table: name, count,
/// size). Method-trace events are also the traced calls.
fn read_jfr_summary(jfr_tool: &Path, recording: &Path, row: &mut Row) {
    row.trace_bytes = std::fs::metadata(recording).ok().map(|m| m.len());
    let Ok(out) = Command::new(jfr_tool)
        .arg("summary")
        .arg(recording)
        .output()
    else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut total = 0;
    for l in text.lines() {
        let cols: Vec<&str> = l.split_whitespace().collect();
        if let [name, count, _size] = cols[..] {
            if let Ok(n) = count.parse::<u64>() {
                total += n;
                if name == "jdk.MethodTrace" && n > 0 {
                    row.calls = Some(n);
                }
            }
        }
    }
    row.events = Some(total);
}

/// The 1-minute load average (Linux), to judge how noisy a run was.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn secs(d: Duration) -> String {
    format!("{:.3}s", d.as_secs_f64())
}

/// Medians and ratios of every row.
struct Report<'a> {
    rows: Vec<RowResult<'a>>,
    /// The machine's 1-minute load average before and after the rounds.
    load: (Option<f64>, Option<f64>),
}

struct RowResult<'a> {
    row: &'a Row,
    fraction: f64,
    wall: Option<Duration>,
    cpu: Option<Duration>,
    work: Option<Duration>,
    wall_ratio: Option<f64>,
    cpu_ratio: Option<f64>,
    work_ratio: Option<f64>,
    /// Calls this row's tracer recorded (CALL events, `jdk.MethodTrace`
    /// events); fewer than executed when the tracer dropped events.
    recorded_calls: Option<u64>,
    /// Traced-method calls the program made in this row's share of the
    /// work: the most any tracer recorded (the program is deterministic).
    executed_calls: Option<u64>,
    /// Extra work time (wall time without work timing) over plain per call.
    ns_per_call: Option<f64>,
    /// Extra CPU time of the whole JVM over plain per call (whole runs).
    cpu_ns_per_call: Option<f64>,
}

impl<'a> Report<'a> {
    fn new(rows: &'a [Row], w: &Workload) -> Report<'a> {
        let med = |r: &Row, f: fn(&Run) -> Option<Duration>| {
            let xs: Vec<Duration> = r.runs.iter().filter_map(f).collect();
            median(&xs)
        };
        // Calls per full workload: the most any tracer recorded (one that
        // dropped events recorded fewer), from the rows that ran the whole
        // workload if there are any (a scaled-down run also counts the
        // set-up calls, which do not scale).
        let counted = |r: &&Row| r.calls.is_some() && !r.runs.is_empty();
        let per_full = |r: &Row| {
            let f = w.fraction(effective_scale(w, &r.config));
            r.calls.map_or(0.0, |c| c as f64 / f)
        };
        let whole_rows = rows
            .iter()
            .filter(counted)
            .filter(|r| w.fraction(effective_scale(w, &r.config)) == 1.0);
        let calls_full = whole_rows
            .map(per_full)
            .reduce(f64::max)
            .or_else(|| rows.iter().filter(counted).map(per_full).reduce(f64::max));
        let mut out = Vec::new();
        for r in rows {
            let fraction = w.fraction(effective_scale(w, &r.config));
            let wall = med(r, |x| Some(x.wall));
            let cpu = med(r, |x| Some(x.cpu));
            let work = med(r, Run::work);
            out.push(RowResult {
                row: r,
                fraction,
                wall,
                cpu,
                work,
                wall_ratio: None,
                cpu_ratio: None,
                work_ratio: None,
                recorded_calls: r.calls,
                executed_calls: calls_full
                    .filter(|_| r.config.traces_calls())
                    .map(|c| (c * fraction).round() as u64),
                ns_per_call: None,
                cpu_ns_per_call: None,
            });
        }
        for i in 0..out.len() {
            let Some(base) = out
                .iter()
                .find(|b| b.row.config.is_baseline() && b.row.config.jdk == out[i].row.config.jdk)
            else {
                continue;
            };
            let (bw, bc, bk) = (base.wall, base.cpu, base.work);
            let o = &mut out[i];
            let whole = o.fraction == 1.0;
            let ratio = |x: Option<Duration>, b: Option<Duration>, f: f64| match (x, b) {
                (Some(x), Some(b)) if !b.is_zero() => Some(x.as_secs_f64() / f / b.as_secs_f64()),
                _ => None,
            };
            if whole {
                o.wall_ratio = ratio(o.wall, bw, 1.0);
                o.cpu_ratio = ratio(o.cpu, bc, 1.0);
            }
            o.work_ratio = ratio(o.work, bk, o.fraction);
            // Extra time per call: from the work time when the program
            // reports it (no JVM start-up in it), else from the wall time.
            let (t, b) = match (o.work, bk) {
                (Some(t), Some(b)) => (Some(t), Some(b)),
                _ if whole => (o.wall, bw),
                _ => (None, None),
            };
            if let Some(calls) = o.executed_calls.filter(|&c| c > 0) {
                let per_call = |t: Duration, b: Duration| {
                    (t.as_secs_f64() - b.as_secs_f64() * o.fraction) * 1e9 / calls as f64
                };
                if let (Some(t), Some(b)) = (t, b) {
                    o.ns_per_call = Some(per_call(t, b));
                }
                if let (Some(t), Some(b), true) = (o.cpu, bc, whole) {
                    o.cpu_ns_per_call = Some(per_call(t, b));
                }
            }
        }
        Report {
            rows: out,
            load: (None, None),
        }
    }

    fn text(&self, args: &Args, w: &Workload, jdk25: Option<&Path>) -> String {
        let mut o = String::new();
        o.push_str(&format!("workload: {}\n", w.describe()));
        o.push_str(&format!("traced classes: {}\n", w.classes));
        o.push_str(&format!(
            "java: {} ({})\n",
            args.java.display(),
            java_version(&args.java)
        ));
        if let Some(j) = jdk25 {
            o.push_str(&format!("jdk 25: {} ({})\n", j.display(), java_version(j)));
        }
        if let (Some(a), Some(b)) = self.load {
            o.push_str(&format!(
                "load average: {a:.2} before, {b:.2} after ({} CPUs)\n",
                std::thread::available_parallelism().map_or(0, |n| n.get())
            ));
        }
        if let Some(c) = self
            .rows
            .iter()
            .filter(|r| r.fraction == 1.0)
            .find_map(|r| r.executed_calls)
        {
            o.push_str(&format!(
                "traced calls per run: {} (the most any tracer recorded)\n",
                thousands(c)
            ));
        }
        o.push_str(&format!(
            "repetitions: {} (interleaved round-robin), medians shown; ratios are to the plain run on the same JDK\n\n",
            args.reps
        ));
        let head = [
            "config",
            "runs",
            "wall",
            "×plain",
            "cpu",
            "×plain",
            "work",
            "×plain",
            "events",
            "calls recorded",
            "ns/call work",
            "ns/call cpu",
        ];
        let ratio = |r: Option<f64>| r.map_or("—".to_string(), |x| format!("{x:.2}×"));
        let time = |d: Option<Duration>| d.map_or("—".to_string(), secs);
        let count = |n: Option<u64>| n.map_or("—".to_string(), thousands);
        let mut table: Vec<Vec<String>> = Vec::new();
        let mut notes: Vec<String> = Vec::new();
        for r in &self.rows {
            let c = &r.row.config;
            if let Some(why) = &r.row.skipped {
                if r.row.runs.is_empty() {
                    notes.push(format!("{}: skipped: {why}", c.name));
                    continue;
                }
                notes.push(format!("{}: {why}", c.name));
            }
            let mut name = c.name.to_string();
            if r.fraction < 1.0 {
                name.push_str(&format!(" ({:.0}%)", r.fraction * 100.0));
                notes.push(format!(
                    "{}: runs {:.0}% of the workload; wall and cpu are as measured, work ×plain and ns/call per unit of work",
                    c.name,
                    r.fraction * 100.0
                ));
            }
            if let Some(out) = &r.row.wrong_output {
                notes.push(format!(
                    "{}: OUTPUT DIFFERS from the plain run: {out}",
                    c.name
                ));
            }
            if let Some(d) = r.row.dropped.filter(|d| *d > 0) {
                notes.push(format!(
                    "{}: the agent dropped {} events",
                    c.name,
                    thousands(d)
                ));
            }
            if let Some(d) = r.row.demoted.filter(|d| *d > 0) {
                notes.push(format!(
                    "{}: the overhead budget demoted {} methods; its estimated overhead {} (measured: cpu {}, wall {})",
                    c.name,
                    thousands(d),
                    r.row
                        .estimated_bp
                        .map_or("—".to_string(), |bp| format!("{:.1}%", bp as f64 / 100.0)),
                    ratio(r.cpu_ratio),
                    ratio(r.wall_ratio)
                ));
            } else if let Some(bp) = r.row.estimated_bp {
                notes.push(format!(
                    "{}: the overhead budget estimated {:.1}% and demoted nothing",
                    c.name,
                    bp as f64 / 100.0
                ));
            }
            if let Some(opts) = r.row.agent_options.as_deref() {
                notes.push(format!(
                    "{}: agent options {}",
                    c.name,
                    if opts.is_empty() {
                        "(none: JVMTI method events)"
                    } else {
                        opts
                    }
                ));
            }
            table.push(vec![
                name,
                r.row.runs.len().to_string(),
                time(r.wall),
                ratio(r.wall_ratio),
                time(r.cpu),
                ratio(r.cpu_ratio),
                time(r.work),
                ratio(r.work_ratio),
                count(r.row.events),
                count(r.recorded_calls),
                r.ns_per_call.map_or("—".to_string(), |x| format!("{x:.0}")),
                r.cpu_ns_per_call
                    .map_or("—".to_string(), |x| format!("{x:.0}")),
            ]);
        }
        o.push_str(&render_table(&head, &table));
        if !notes.is_empty() {
            o.push('\n');
            for n in notes {
                o.push_str(&format!("- {n}\n"));
            }
        }
        o.push_str(
            "\nwork = the workload's own timing of its work (no JVM start-up); \
             events, calls recorded = vmview events and CALL events, or JFR events and \
             jdk.MethodTrace events, of the first run; \
             ns/call work = extra work time (wall) over plain per traced call; \
             ns/call cpu = extra CPU time of the whole JVM (all threads: the agent's \
             writer, JIT, GC) over plain per traced call. JFR runs Java code of its own \
             before main, warming the JIT: its work time can be below plain's.\n",
        );
        o
    }

    fn json(&self, args: &Args, w: &Workload, jdk25: Option<&Path>) -> Json {
        let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1e3);
        let rows: Vec<Json> = self
            .rows
            .iter()
            .map(|r| {
                let c = &r.row.config;
                json!({
                    "config": c.name,
                    "jdk": match c.jdk { Jdk::Default => "default", Jdk::Jdk25 => "25" },
                    "agent_options": r.row.agent_options,
                    "skipped": r.row.skipped,
                    "runs": r.row.runs.len(),
                    "fraction_of_workload": r.fraction,
                    "wall_ms": ms(r.wall),
                    "cpu_ms": ms(r.cpu),
                    "work_ms": ms(r.work),
                    "wall_ms_all": r.row.runs.iter().map(|x| x.wall.as_secs_f64() * 1e3).collect::<Vec<_>>(),
                    "cpu_ms_all": r.row.runs.iter().map(|x| x.cpu.as_secs_f64() * 1e3).collect::<Vec<_>>(),
                    "work_ms_all": r.row.runs.iter().filter_map(Run::work).map(|x| x.as_secs_f64() * 1e3).collect::<Vec<_>>(),
                    "wall_ratio": r.wall_ratio,
                    "cpu_ratio": r.cpu_ratio,
                    "work_ratio": r.work_ratio,
                    "events": r.row.events,
                    "calls_recorded": r.recorded_calls,
                    "calls_executed": r.executed_calls,
                    "dropped": r.row.dropped,
                    "methods_demoted": r.row.demoted,
                    "estimated_overhead_bp": r.row.estimated_bp,
                    "trace_bytes": r.row.trace_bytes,
                    "ns_per_call_work": r.ns_per_call,
                    "ns_per_call_cpu": r.cpu_ns_per_call,
                    "output_differs": r.row.wrong_output.is_some(),
                })
            })
            .collect();
        json!({
            "workload": w.describe(),
            "classes": w.classes,
            "java": {"path": args.java.display().to_string(), "version": java_version(&args.java)},
            "jdk25": jdk25.map(|j| json!({"path": j.display().to_string(), "version": java_version(j)})),
            "reps": args.reps,
            "load_average": {"before": self.load.0, "after": self.load.1},
            "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
            "rows": rows,
        })
    }
}

/// `1234567` → `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string().into_bytes();
    let groups: Vec<&str> = digits
        .rchunks(3)
        .rev()
        .map(|g| std::str::from_utf8(g).unwrap_or("?"))
        .collect();
    groups.join(",")
}

/// First column left-aligned, the others right-aligned.
fn render_table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut l = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            let pad = " ".repeat(w - c.chars().count());
            if i == 0 {
                l.push_str(&format!("{c}{pad}"));
            } else {
                l.push_str(&format!("  {pad}{c}"));
            }
        }
        l.trim_end().to_string() + "\n"
    };
    let mut o = line(head.to_vec());
    for r in rows {
        o.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
    }

    #[test]
    fn jvm_log_lines_are_not_program_output() {
        let out = "[0.888s][info][jfr,startup] Started recording 1.\n[1.2s][info][jfr,startup] \nchecksum=1f\n[not a log] line\n";
        assert_eq!(program_output(out), "checksum=1f\n[not a log] line\n");
    }

    #[test]
    fn command_line_is_consistent() {
        use clap::CommandFactory;
        Args::command().debug_assert();
    }
}
