//! `vmview-overhead --server`: what sampling costs a server under load.
//!
//! A Jetty server (Debian's jetty9 jars, `java/jetty/vmbench/ShopServer`)
//! answers small JSON quotes on loopback while this process drives it with
//! keep-alive HTTP/1.1 clients (closed loop: each client sends its next
//! request when the answer is in). Each configuration — the server alone,
//! under vmview's sampler, under JFR's default settings — runs in turn,
//! round-robin, so the machine's drift hits all alike. A run warms up
//! (JIT, connection set-up), then counts the requests answered and the
//! server's CPU time (user + system of all its threads, from
//! `/proc/PID/stat`) over a fixed window. Reported per configuration: the
//! median throughput (requests/s) and CPU time per request, each as a ratio
//! to the plain run's.
//!
//! Why CPU per request next to throughput: on a shared 2-core machine the
//! throughput follows whatever CPU share the server gets from its
//! neighbours; the CPU it spends per request is what the tracer adds to.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use serde_json::{json, Value as Json};

/// The server's source, embedded so the harness needs only a JDK and the jars.
const SOURCE: &str = include_str!("../java/jetty/vmbench/ShopServer.java");

/// The jars `ShopServer` compiles and runs against (`libjetty9-java`).
const JARS: &[&str] = &[
    "jetty9-server.jar",
    "jetty9-http.jar",
    "jetty9-io.jar",
    "jetty9-util.jar",
    "servlet-api.jar",
];

/// What observes the server.
#[derive(Debug, Clone, Copy)]
enum Observer {
    None,
    /// The vmview agent with these options (the harness adds `file=` and
    /// `quiet`), and environment variables for the JVM.
    Vmview {
        options: &'static str,
        env: &'static [(&'static str, &'static str)],
    },
    /// `-XX:StartFlightRecording` with its default settings.
    Jfr,
}

/// One row of the server comparison.
#[derive(Debug, Clone, Copy)]
pub struct ServerConfig {
    pub name: &'static str,
    observer: Observer,
}

/// The server configurations, as data. The first is the baseline.
pub const SERVER_CONFIGS: &[ServerConfig] = &[
    ServerConfig {
        name: "plain",
        observer: Observer::None,
    },
    ServerConfig {
        name: "vmview samples",
        observer: Observer::Vmview {
            options: "events=samples,interval=10ms",
            env: &[],
        },
    },
    ServerConfig {
        name: "vmview samples per-thread",
        observer: Observer::Vmview {
            options: "events=samples,interval=10ms",
            env: &[("VMVIEW_SAMPLER_WALK", "thread")],
        },
    },
    ServerConfig {
        name: "jfr",
        observer: Observer::Jfr,
    },
];

/// The knobs of a server run.
pub struct ServerArgs<'a> {
    pub java: &'a Path,
    pub agent: &'a Path,
    pub vmview: &'a Path,
    pub jars: &'a Path,
    pub reps: usize,
    pub clients: usize,
    pub warmup: Duration,
    pub window: Duration,
    pub only: Vec<String>,
    pub skip: Vec<String>,
    pub json: bool,
}

/// One measured window.
#[derive(Debug, Clone, Copy)]
struct Sample {
    requests: u64,
    errors: u64,
    elapsed: Duration,
    cpu: Duration,
}

impl Sample {
    fn rate(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }
    fn cpu_us_per_request(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.requests.max(1) as f64
    }
    fn cores(&self) -> f64 {
        self.cpu.as_secs_f64() / self.elapsed.as_secs_f64()
    }
}

struct Row {
    config: ServerConfig,
    samples: Vec<Sample>,
    failed: Option<String>,
    /// SAMPLE events and ticks of the first vmview run, with its length.
    thread_samples: Option<u64>,
    ticks_per_s: Option<f64>,
    trace_bytes: Option<u64>,
}

impl ServerArgs<'_> {
    /// Runs every round in `work` and prints the report.
    pub fn run_in(&self, work: &Path) -> anyhow::Result<()> {
        run(self, work)
    }
}

fn run(a: &ServerArgs<'_>, work: &Path) -> anyhow::Result<()> {
    for n in a.only.iter().chain(&a.skip) {
        if !SERVER_CONFIGS.iter().any(|c| c.name == n) {
            bail!("no server configuration named {n:?} (see --help)");
        }
    }
    let cp = classpath(a.jars)?;
    let classes = compile(a.java, &cp, work)?;
    let run_cp = format!("{}:{cp}", classes.display());
    let mut rows: Vec<Row> = SERVER_CONFIGS
        .iter()
        .enumerate()
        .filter(|(i, c)| {
            *i == 0
                || ((a.only.is_empty() || a.only.iter().any(|n| n == c.name))
                    && !a.skip.iter().any(|n| n == c.name))
        })
        .map(|(_, c)| Row {
            config: *c,
            samples: Vec::new(),
            failed: None,
            thread_samples: None,
            ticks_per_s: None,
            trace_bytes: None,
        })
        .collect();
    let load_before = crate::load_average();
    for rep in 0..a.reps {
        for (i, row) in rows.iter_mut().enumerate() {
            if row.failed.is_some() {
                continue;
            }
            let dir = work.join(format!("s{rep}-{i}"));
            std::fs::create_dir_all(&dir)?;
            eprint!(
                "vmview-overhead: round {}/{}  {:<26}",
                rep + 1,
                a.reps,
                row.config.name
            );
            match run_once(a, &run_cp, &row.config, &dir) {
                Ok(s) => {
                    eprintln!(
                        "{:>8.0} req/s  {:>6.1} µs cpu/req  {:.2} cores{}",
                        s.rate(),
                        s.cpu_us_per_request(),
                        s.cores(),
                        if s.errors > 0 {
                            format!("  ({} errors)", s.errors)
                        } else {
                            String::new()
                        }
                    );
                    if row.samples.is_empty() {
                        if let Observer::Vmview { .. } = row.config.observer {
                            read_samples(a.vmview, &dir.join("trace.vmv"), row);
                        }
                    }
                    row.samples.push(s);
                }
                Err(e) => {
                    eprintln!("FAILED: {e:#}");
                    row.failed = Some(format!("{e:#}"));
                }
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    let load = (load_before, crate::load_average());
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report_json(a, &rows, load))?
        );
    } else {
        print!("{}", report_text(a, &rows, load));
    }
    Ok(())
}

fn classpath(jars: &Path) -> anyhow::Result<String> {
    let mut parts = Vec::new();
    for j in JARS {
        let p = jars.join(j);
        if !p.exists() {
            bail!(
                "{} is missing: install Debian's Jetty (apt-get install libjetty9-java) or give --jars DIR",
                p.display()
            );
        }
        parts.push(p.display().to_string());
    }
    Ok(parts.join(":"))
}

fn compile(java: &Path, cp: &str, work: &Path) -> anyhow::Result<PathBuf> {
    let src = work.join("server-src/vmbench");
    let classes = work.join("server-classes");
    std::fs::create_dir_all(&src)?;
    let file = src.join("ShopServer.java");
    std::fs::write(&file, SOURCE)?;
    let javac = crate::sibling_tool(java, "javac");
    let out = Command::new(&javac)
        .args(["-g", "--release", "17", "-cp", cp, "-d"])
        .arg(&classes)
        .arg(&file)
        .output()
        .with_context(|| format!("cannot run {} (is a JDK installed?)", javac.display()))?;
    if !out.status.success() {
        bail!(
            "javac failed on the server workload:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(classes)
}

/// Kills the server if a run bails out early.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn run_once(
    a: &ServerArgs<'_>,
    cp: &str,
    config: &ServerConfig,
    dir: &Path,
) -> anyhow::Result<Sample> {
    let mut cmd = Command::new(a.java);
    match config.observer {
        Observer::None => {}
        Observer::Vmview { options, env } => {
            cmd.arg(format!(
                "-agentpath:{}={options},file={},quiet",
                a.agent.display(),
                dir.join("trace.vmv").display()
            ));
            cmd.envs(env.iter().copied());
        }
        Observer::Jfr => {
            cmd.arg(format!(
                "-XX:StartFlightRecording:filename={}",
                dir.join("recording.jfr").display()
            ));
        }
    }
    cmd.args(["-cp", cp, "vmbench.ShopServer"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join("stderr"))?);
    let mut server = Server(cmd.spawn().context("start the server JVM")?);
    let pid = server.0.id();
    let stdout = server.0.stdout.take().context("server stdout")?;
    // The port line, then the rest of stdout (drained so the JVM never
    // blocks on a full pipe).
    let (port_tx, port_rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut rest = String::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(p) = line.strip_prefix("port=") {
                let _ = port_tx.send(p.trim().parse::<u16>().ok());
            } else {
                rest.push_str(&line);
                rest.push('\n');
            }
        }
        rest
    });
    let port = match port_rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Some(p)) => p,
        _ => {
            drop(server);
            let err = std::fs::read_to_string(dir.join("stderr")).unwrap_or_default();
            bail!(
                "the server did not print its port: {}",
                err.lines().last().unwrap_or("").trim()
            );
        }
    };

    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let errors = AtomicU64::new(0);
    let sample = std::thread::scope(|s| -> anyhow::Result<Sample> {
        for c in 0..a.clients {
            let (stop, done, errors) = (&stop, &done, &errors);
            s.spawn(move || client(port, c as u64, stop, done, errors));
        }
        std::thread::sleep(a.warmup);
        let (c0, cpu0, t0) = (done.load(Ordering::Relaxed), cpu_time(pid), Instant::now());
        std::thread::sleep(a.window);
        let (c1, cpu1, t1) = (done.load(Ordering::Relaxed), cpu_time(pid), Instant::now());
        stop.store(true, Ordering::Relaxed);
        let (Some(cpu0), Some(cpu1)) = (cpu0, cpu1) else {
            bail!("cannot read /proc/{pid}/stat");
        };
        Ok(Sample {
            requests: c1 - c0,
            errors: errors.load(Ordering::Relaxed),
            elapsed: t1 - t0,
            cpu: cpu1.saturating_sub(cpu0),
        })
    })?;
    // Closing stdin stops the server; it must exit by itself.
    drop(server.0.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = server.0.try_wait()? {
            if !status.success() {
                bail!("the server exited with {status}");
            }
            break;
        }
        if Instant::now() > deadline {
            bail!("the server did not stop within 60 s of its stdin closing");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = reader.join();
    if sample.requests == 0 {
        bail!("no request was answered in the window");
    }
    Ok(sample)
}

/// A closed-loop keep-alive client: one request at a time, the next when
/// the whole answer is in; reconnects after an error.
fn client(port: u16, id: u64, stop: &AtomicBool, done: &AtomicU64, errors: &AtomicU64) {
    let mut n = id * 1_000_003;
    while !stop.load(Ordering::Relaxed) {
        let Ok(stream) = TcpStream::connect(("127.0.0.1", port)) else {
            errors.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let _ = stream.set_nodelay(true);
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let Ok(mut out) = stream.try_clone() else {
            continue;
        };
        let mut input = BufReader::new(stream);
        while !stop.load(Ordering::Relaxed) {
            n += 1;
            let req = format!("GET /quote?n={n} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
            if out.write_all(req.as_bytes()).is_err() || read_response(&mut input).is_err() {
                if !stop.load(Ordering::Relaxed) {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                break;
            }
            done.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Reads one HTTP/1.1 response with a Content-Length body.
fn read_response(input: &mut BufReader<TcpStream>) -> std::io::Result<()> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let mut line = String::new();
    let mut length = None;
    let mut first = true;
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Err(bad("connection closed"));
        }
        let l = line.trim_end();
        if first {
            if !l.starts_with("HTTP/1.1 200") {
                return Err(bad(l));
            }
            first = false;
        } else if l.is_empty() {
            break;
        } else if let Some((k, v)) = l.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse::<u64>().ok();
            }
        }
    }
    let length = length.ok_or_else(|| bad("no Content-Length"))?;
    std::io::copy(&mut input.take(length), &mut std::io::sink())?;
    Ok(())
}

/// User + system time of all the process's threads so far.
fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold
    // spaces: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(Duration::from_micros(ticks * 1_000_000 / hz))
}

/// SAMPLE events and sampling ticks per second of a trace.
fn read_samples(vmview: &Path, trace: &Path, row: &mut Row) {
    row.trace_bytes = std::fs::metadata(trace).ok().map(|m| m.len());
    let Ok(out) = Command::new(vmview)
        .arg("reactions")
        .arg(trace)
        .args(["--format", "json"])
        .output()
    else {
        return;
    };
    let Ok(doc) = serde_json::from_slice::<Json>(&out.stdout) else {
        return;
    };
    row.thread_samples = doc["samples"].as_u64();
    let secs = doc["duration_ns"].as_f64().unwrap_or(0.0) / 1e9;
    if let (Some(ticks), true) = (doc["ticks"].as_f64(), secs > 0.0) {
        row.ticks_per_s = Some(ticks / secs);
    }
}

fn median(mut xs: Vec<f64>) -> Option<f64> {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(xs[n / 2]),
        _ => Some((xs[n / 2 - 1] + xs[n / 2]) / 2.0),
    }
}

struct Medians {
    rate: Option<f64>,
    cpu_per_request: Option<f64>,
    cores: Option<f64>,
}

fn medians(r: &Row) -> Medians {
    Medians {
        rate: median(r.samples.iter().map(Sample::rate).collect()),
        cpu_per_request: median(r.samples.iter().map(Sample::cpu_us_per_request).collect()),
        cores: median(r.samples.iter().map(Sample::cores).collect()),
    }
}

fn ratio(x: Option<f64>, base: Option<f64>) -> Option<f64> {
    match (x, base) {
        (Some(x), Some(b)) if b > 0.0 => Some(x / b),
        _ => None,
    }
}

fn report_text(a: &ServerArgs<'_>, rows: &[Row], load: (Option<f64>, Option<f64>)) -> String {
    let mut o = String::new();
    o.push_str(&format!(
        "workload: Jetty (Debian's jetty9) serving JSON quotes on loopback to {} keep-alive clients; {} s warm-up, {} s window per run\n",
        a.clients,
        a.warmup.as_secs_f64(),
        a.window.as_secs_f64()
    ));
    o.push_str(&format!(
        "java: {} ({})\n",
        a.java.display(),
        crate::java_version(a.java)
    ));
    if let (Some(x), Some(y)) = load {
        o.push_str(&format!(
            "load average: {x:.2} before, {y:.2} after ({} CPUs)\n",
            std::thread::available_parallelism().map_or(0, |n| n.get())
        ));
    }
    o.push_str(&format!(
        "repetitions: {} (interleaved round-robin), medians shown; ratios are to the plain run\n\n",
        a.reps
    ));
    let base = rows.first().map(medians);
    let head = [
        "config",
        "runs",
        "req/s",
        "×plain",
        "cpu µs/req",
        "×plain",
        "cores",
        "samples",
        "ticks/s",
    ];
    let f = |x: Option<f64>, p: usize| x.map_or("—".to_string(), |x| format!("{x:.p$}"));
    let mut table = Vec::new();
    let mut notes = Vec::new();
    for r in rows {
        let m = medians(r);
        if let Some(why) = &r.failed {
            notes.push(format!("{}: {why}", r.config.name));
        }
        if let Observer::Vmview { options, env } = r.config.observer {
            let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v} ")).collect();
            notes.push(format!(
                "{}: {}agent options {options}",
                r.config.name,
                env.concat()
            ));
        }
        table.push(vec![
            r.config.name.to_string(),
            r.samples.len().to_string(),
            f(m.rate, 0),
            ratio(m.rate, base.as_ref().and_then(|b| b.rate))
                .map_or("—".into(), |x| format!("{x:.3}×")),
            f(m.cpu_per_request, 1),
            ratio(
                m.cpu_per_request,
                base.as_ref().and_then(|b| b.cpu_per_request),
            )
            .map_or("—".into(), |x| format!("{x:.3}×")),
            f(m.cores, 2),
            r.thread_samples.map_or("—".into(), |n| n.to_string()),
            f(r.ticks_per_s, 1),
        ]);
    }
    o.push_str(&crate::render_table(&head, &table));
    if !notes.is_empty() {
        o.push('\n');
        for n in notes {
            o.push_str(&format!("- {n}\n"));
        }
    }
    o.push_str(
        "\nreq/s = requests answered in the window; cpu µs/req = the server JVM's CPU time \
         (all threads) in the window per request; cores = its CPU time over the window; \
         samples, ticks/s = SAMPLE events and sampling ticks per second of the first vmview \
         run's whole trace.\n",
    );
    o
}

fn report_json(a: &ServerArgs<'_>, rows: &[Row], load: (Option<f64>, Option<f64>)) -> Json {
    let base = rows.first().map(medians);
    json!({
        "workload": "jetty-quotes",
        "java": {"path": a.java.display().to_string(), "version": crate::java_version(a.java)},
        "clients": a.clients,
        "warmup_s": a.warmup.as_secs_f64(),
        "window_s": a.window.as_secs_f64(),
        "reps": a.reps,
        "load_average": {"before": load.0, "after": load.1},
        "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "rows": rows.iter().map(|r| {
            let m = medians(r);
            json!({
                "config": r.config.name,
                "failed": r.failed,
                "runs": r.samples.len(),
                "requests_per_s": m.rate,
                "requests_per_s_all": r.samples.iter().map(Sample::rate).collect::<Vec<_>>(),
                "requests_per_s_ratio": ratio(m.rate, base.as_ref().and_then(|b| b.rate)),
                "cpu_us_per_request": m.cpu_per_request,
                "cpu_us_per_request_all": r.samples.iter().map(Sample::cpu_us_per_request).collect::<Vec<_>>(),
                "cpu_us_per_request_ratio": ratio(m.cpu_per_request, base.as_ref().and_then(|b| b.cpu_per_request)),
                "cores": m.cores,
                "errors": r.samples.iter().map(|s| s.errors).sum::<u64>(),
                "thread_samples": r.thread_samples,
                "ticks_per_s": r.ticks_per_s,
                "trace_bytes": r.trace_bytes,
            })
        }).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_baseline_is_first_and_names_are_unique() {
        assert!(matches!(SERVER_CONFIGS[0].observer, Observer::None));
        for (i, c) in SERVER_CONFIGS.iter().enumerate() {
            assert!(SERVER_CONFIGS[..i].iter().all(|o| o.name != c.name));
        }
    }

    #[test]
    fn own_cpu_time_reads_from_proc() {
        let t = cpu_time(std::process::id()).expect("/proc/self/stat");
        assert!(t < Duration::from_secs(24 * 3600));
    }
}
