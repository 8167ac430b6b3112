//! `vmview-overhead --server`: what sampling costs a server under load.
//!
//! A Jetty server (Debian's jetty9 jars, `java/jetty/vmbench/ShopServer`)
//! answers small JSON quotes on loopback while this process drives it with
//! keep-alive HTTP/1.1 clients (closed loop: each client sends its next
//! request when the answer is in). One server runs per configuration — the
//! server alone, under vmview's sampler, under JFR's default settings — all
//! started at once and warmed up in turn. Then, round after round, each
//! server in turn is resumed (SIGCONT) and loaded for a short window while
//! the others are stopped (SIGSTOP), so they cost nothing meanwhile: the
//! windows of all configurations interleave every few seconds, and a
//! change in the machine's load hits them alike. Per window: the requests
//! answered, each one's latency (from writing the request to reading the
//! whole answer, for requests sent and answered inside the window) and the
//! server's CPU time (user + system of all its threads, from
//! `/proc/PID/stat`). Reported per configuration: the median throughput
//! (requests/s), p50 and p99 latency and CPU time per request, and the
//! median over rounds of each round's ratio to the plain server's window.
//!
//! Why CPU per request next to throughput: on a shared 2-core machine the
//! throughput follows whatever CPU share the server gets from its
//! neighbours; the CPU it spends per request is what the tracer adds to.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Mutex};
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
        /// The agent `AGENT_B_ENV` names instead of the harness's own (the
        /// row is skipped when the variable is unset): an A/B of two
        /// builds in one interleaved run.
        agent_b: bool,
    },
    /// `-XX:StartFlightRecording` with its default settings.
    Jfr,
    /// async-profiler's agent (the library `ASYNC_PROFILER_ENV` names) with
    /// this event at 100 Hz; the row is skipped when the variable is unset.
    AsyncProfiler {
        event: &'static str,
    },
}

/// Names async-profiler's `libasyncProfiler.so` for its rows (never built
/// by the project; absent = those rows skipped with a printed reason).
pub const ASYNC_PROFILER_ENV: &str = "VMVIEW_ASYNC_PROFILER";

/// Names another build's `libvmview_agent.so` for the `… (agent B)` rows.
pub const AGENT_B_ENV: &str = "VMVIEW_AGENT_B";

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
            agent_b: false,
        },
    },
    ServerConfig {
        name: "vmview samples (agent B)",
        observer: Observer::Vmview {
            options: "events=samples,interval=10ms",
            env: &[],
            agent_b: true,
        },
    },
    ServerConfig {
        name: "vmview samples safepoint",
        observer: Observer::Vmview {
            options: "events=samples,interval=10ms,sampler=safepoint",
            env: &[],
            agent_b: false,
        },
    },
    ServerConfig {
        name: "jfr",
        observer: Observer::Jfr,
    },
    ServerConfig {
        name: "async-profiler wall",
        observer: Observer::AsyncProfiler { event: "wall" },
    },
    ServerConfig {
        name: "async-profiler itimer",
        observer: Observer::AsyncProfiler { event: "itimer" },
    },
];

/// The knobs of a server run.
pub struct ServerArgs<'a> {
    pub java: &'a Path,
    pub agent: &'a Path,
    pub vmview: &'a Path,
    pub jars: &'a Path,
    /// Rounds of windows per epoch.
    pub reps: usize,
    /// Sets of fresh server JVMs, one after the other.
    pub epochs: usize,
    pub clients: usize,
    /// Load per server before the rounds.
    pub warmup: Duration,
    /// One measured window.
    pub window: Duration,
    pub only: Vec<String>,
    pub skip: Vec<String>,
    pub json: bool,
    /// Servers on the last CPU, clients on CPU 0 (see `pin`).
    pub pin: bool,
}

/// One measured window.
#[derive(Debug, Clone, Copy)]
struct Sample {
    requests: u64,
    errors: u64,
    elapsed: Duration,
    cpu: Duration,
    /// CPU time of the agent's `vmview-sampler` thread in the window.
    sampler_cpu: Option<Duration>,
    /// Latency percentiles of the window's requests, µs.
    p50_us: f64,
    p99_us: f64,
}

impl Sample {
    fn rate(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }
    fn cpu_us_per_request(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.requests.max(1) as f64
    }
    fn p50(&self) -> f64 {
        self.p50_us
    }
    fn p99(&self) -> f64 {
        self.p99_us
    }
    fn cores(&self) -> f64 {
        self.cpu.as_secs_f64() / self.elapsed.as_secs_f64()
    }
    /// The sampler thread's share of one core, in percent.
    fn sampler_percent(&self) -> Option<f64> {
        self.sampler_cpu
            .map(|c| c.as_secs_f64() * 100.0 / self.elapsed.as_secs_f64())
    }
}

struct Row {
    config: ServerConfig,
    samples: Vec<Sample>,
    failed: Option<String>,
    /// SAMPLE events and sampling ticks per second of running time.
    thread_samples: Option<u64>,
    ticks_per_s: Option<f64>,
    /// How long the servers ran (not stopped), for `ticks_per_s`.
    running: Duration,
    ticks: u64,
    trace_bytes: Option<u64>,
}

impl ServerArgs<'_> {
    /// Runs every round in `work` and prints the report.
    pub fn run_in(&self, work: &Path) -> anyhow::Result<()> {
        run(self, work)
    }
}

/// Load of one window not counted: requests in flight when the previous
/// window ended, the resumed JVM's first moments.
const SETTLE: Duration = Duration::from_millis(500);

/// One server JVM and its clients' counters.
struct Running {
    server: Server,
    pid: u32,
    port: u16,
    reader: Option<std::thread::JoinHandle<String>>,
    /// Clients send requests while this is set.
    active: AtomicBool,
    done: AtomicU64,
    errors: AtomicU64,
    /// The number of the window being measured, 0 between measurements: a
    /// request's latency counts when it was sent and answered in the same
    /// measured window.
    measuring: AtomicU64,
    /// Latencies of the measured window's requests, ns.
    latencies: Mutex<Vec<u64>>,
    /// Time not stopped, in windows, ns.
    running_ns: AtomicU64,
}

fn run(a: &ServerArgs<'_>, work: &Path) -> anyhow::Result<()> {
    for n in a.only.iter().chain(&a.skip) {
        if !SERVER_CONFIGS.iter().any(|c| c.name == n) {
            bail!("no server configuration named {n:?} (see --help)");
        }
    }
    let async_profiler = std::env::var_os(ASYNC_PROFILER_ENV).map(PathBuf::from);
    let agent_b = std::env::var_os(AGENT_B_ENV).map(PathBuf::from);
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
        .filter(|(_, c)| match c.observer {
            Observer::AsyncProfiler { .. } if async_profiler.is_none() => {
                eprintln!(
                    "vmview-overhead: skipping {:?}: set {ASYNC_PROFILER_ENV} to async-profiler's libasyncProfiler.so",
                    c.name
                );
                false
            }
            Observer::Vmview { agent_b: true, .. } if agent_b.is_none() => {
                if a.only.iter().any(|n| n == c.name) {
                    eprintln!(
                        "vmview-overhead: skipping {:?}: set {AGENT_B_ENV} to another build's libvmview_agent.so",
                        c.name
                    );
                }
                false
            }
            _ => true,
        })
        .map(|(_, c)| Row {
            config: *c,
            samples: Vec::new(),
            failed: None,
            thread_samples: None,
            ticks_per_s: None,
            running: Duration::ZERO,
            ticks: 0,
            trace_bytes: None,
        })
        .collect();
    // The clients (this process's threads, spawned from here) on the first
    // core, the servers on the last: a server's window does not share its
    // core with the load generator.
    if pin(a).is_some() {
        set_affinity(0, 0);
    }
    let load_before = crate::load_average();
    // Fresh JVMs per epoch: one JVM's JIT can come out faster or slower
    // than another's for its whole life, by more than the tracer costs.
    for epoch in 0..a.epochs {
        let mut servers = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let dir = work.join(format!("server-{epoch}-{i}"));
            std::fs::create_dir_all(&dir)?;
            let s = start(
                a,
                &run_cp,
                &row.config,
                async_profiler.as_deref(),
                agent_b.as_deref(),
                &dir,
            )
            .with_context(|| format!("starting the {} server", row.config.name))?;
            signal(s.pid, libc::SIGSTOP);
            servers.push(s);
        }
        let stop = AtomicBool::new(false);
        let result = std::thread::scope(|scope| -> anyhow::Result<()> {
            for s in &servers {
                for c in 0..a.clients {
                    let (stop, s) = (&stop, s);
                    scope.spawn(move || client(s, c as u64, stop));
                }
            }
            for (s, row) in servers.iter().zip(&rows) {
                eprintln!(
                    "vmview-overhead: warming up {} for {:.0} s",
                    row.config.name,
                    a.warmup.as_secs_f64()
                );
                window(s, a.warmup)?;
            }

            for rep in 0..a.reps {
                // Rotate the order, so no configuration always follows another.
                let n = servers.len();
                for k in 0..n {
                    let i = (k + rep) % n;
                    let (s, row) = (&servers[i], &mut rows[i]);
                    let w = window(s, a.window)?;
                    eprintln!(
                        "vmview-overhead: epoch {}/{} round {}/{}  {:<26}{:>8.0} req/s  p50 {:>6.0} µs  p99 {:>6.0} µs  {:>6.1} µs cpu/req  {:.2} cores{}",
                        epoch + 1,
                        a.epochs,
                        rep + 1,
                        a.reps,
                        row.config.name,
                        w.rate(),
                        w.p50(),
                        w.p99(),
                        w.cpu_us_per_request(),
                        w.cores(),
                        if w.errors > 0 {
                            format!("  ({} errors)", w.errors)
                        } else {
                            String::new()
                        }
                    );
                    row.samples.push(w);
                }
            }
            for (s, row) in servers.iter().zip(rows.iter_mut()) {
                row.running += Duration::from_nanos(s.running_ns.load(Ordering::Relaxed));
            }
            stop.store(true, Ordering::Relaxed);
            for s in &servers {
                signal(s.pid, libc::SIGCONT);
            }
            Ok(())
        });
        stop.store(true, Ordering::Relaxed);
        for (i, (s, row)) in servers.into_iter().zip(rows.iter_mut()).enumerate() {
            signal(s.pid, libc::SIGCONT);
            if let Err(e) = finish(s) {
                row.failed = Some(format!("{e:#}"));
            }
            if let Observer::Vmview { .. } = row.config.observer {
                read_samples(
                    a.vmview,
                    &work.join(format!("server-{epoch}-{i}/trace.vmv")),
                    row,
                );
            }
        }
        result?;
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

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: `pid` is a child we started and have not reaped.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// Resumes the server, loads it for `SETTLE` plus `length`, measures the
/// second part, and stops it again.
fn window(s: &Running, length: Duration) -> anyhow::Result<Sample> {
    static WINDOWS: AtomicU64 = AtomicU64::new(0);
    let resumed = Instant::now();
    signal(s.pid, libc::SIGCONT);
    s.active.store(true, Ordering::Relaxed);
    std::thread::sleep(SETTLE);
    lock(&s.latencies).clear();
    s.measuring.store(
        WINDOWS.fetch_add(1, Ordering::Relaxed) + 1,
        Ordering::SeqCst,
    );
    let (c0, e0, cpu0, sampler0, t0) = (
        s.done.load(Ordering::Relaxed),
        s.errors.load(Ordering::Relaxed),
        cpu_time(s.pid),
        sampler_cpu_time(s.pid),
        Instant::now(),
    );
    std::thread::sleep(length);
    let (c1, e1, cpu1, sampler1, t1) = (
        s.done.load(Ordering::Relaxed),
        s.errors.load(Ordering::Relaxed),
        cpu_time(s.pid),
        sampler_cpu_time(s.pid),
        Instant::now(),
    );
    s.measuring.store(0, Ordering::SeqCst);
    let mut lat = std::mem::take(&mut *lock(&s.latencies));
    s.active.store(false, Ordering::Relaxed);
    // Let the requests in flight finish before the JVM stops.
    std::thread::sleep(Duration::from_millis(50));
    signal(s.pid, libc::SIGSTOP);
    s.running_ns
        .fetch_add(resumed.elapsed().as_nanos() as u64, Ordering::Relaxed);
    let (Some(cpu0), Some(cpu1)) = (cpu0, cpu1) else {
        bail!("cannot read /proc/{}/stat: did the server exit?", s.pid);
    };
    if c1 == c0 || lat.is_empty() {
        bail!("no request was answered in a window (port {})", s.port);
    }
    lat.sort_unstable();
    Ok(Sample {
        p50_us: percentile(&lat, 50.0) as f64 / 1e3,
        p99_us: percentile(&lat, 99.0) as f64 / 1e3,
        requests: c1 - c0,
        errors: e1 - e0,
        elapsed: t1 - t0,
        cpu: cpu1.saturating_sub(cpu0),
        sampler_cpu: sampler0.zip(sampler1).map(|(a, b)| b.saturating_sub(a)),
    })
}

/// With `--pin`, the core the servers run on when the machine has at
/// least two (the clients take core 0).
fn pin(a: &ServerArgs<'_>) -> Option<usize> {
    if !a.pin {
        return None;
    }
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    (n >= 2).then(|| n - 1)
}

/// Binds process or thread `pid` (0: the calling thread) to one core.
fn set_affinity(pid: libc::pid_t, cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the call only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn start(
    a: &ServerArgs<'_>,
    cp: &str,
    config: &ServerConfig,
    async_profiler: Option<&Path>,
    agent_b_path: Option<&Path>,
    dir: &Path,
) -> anyhow::Result<Running> {
    let mut cmd = Command::new(a.java);
    match config.observer {
        Observer::AsyncProfiler { event } => {
            let lib = async_profiler.context("no async-profiler library")?;
            cmd.arg(format!(
                "-agentpath:{}=start,event={event},interval=10ms,collapsed,file={}",
                lib.display(),
                dir.join("profile.txt").display()
            ));
        }
        Observer::None => {}
        Observer::Vmview {
            options,
            env,
            agent_b,
        } => {
            let agent = if agent_b {
                agent_b_path.context("no agent B")?
            } else {
                a.agent
            };
            cmd.arg(format!(
                "-agentpath:{}={options},file={},quiet",
                agent.display(),
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
    if let Some(cpu) = pin(a) {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: between fork and exec, only a system call; the JVM's
        // threads inherit the mask.
        unsafe {
            cmd.pre_exec(move || {
                set_affinity(0, cpu);
                Ok(())
            });
        }
    }
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
    let port = match port_rx.recv_timeout(Duration::from_secs(120)) {
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
    Ok(Running {
        server,
        pid,
        port,
        reader: Some(reader),
        active: AtomicBool::new(false),
        done: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        measuring: AtomicU64::new(0),
        latencies: Mutex::new(Vec::new()),
        running_ns: AtomicU64::new(0),
    })
}

/// Closes the server's stdin (it stops by itself) and waits for it.
fn finish(mut s: Running) -> anyhow::Result<()> {
    drop(s.server.0.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = s.server.0.try_wait()? {
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
    if let Some(r) = s.reader.take() {
        let _ = r.join();
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

/// A closed-loop keep-alive client of `s`: one request at a time, the
/// next when the whole answer is in, while `s.active`; reconnects after an
/// error.
fn client(s: &Running, id: u64, stop: &AtomicBool) {
    let mut n = id * 1_000_003;
    let idle = || {
        while !s.active.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    while !stop.load(Ordering::Relaxed) {
        idle();
        let Ok(stream) = TcpStream::connect(("127.0.0.1", s.port)) else {
            s.errors.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let _ = stream.set_nodelay(true);
        // A request can wait out a whole round of other windows.
        let _ = stream.set_read_timeout(Some(Duration::from_secs(120)));
        let Ok(mut out) = stream.try_clone() else {
            continue;
        };
        let mut input = BufReader::new(stream);
        while !stop.load(Ordering::Relaxed) {
            idle();
            if stop.load(Ordering::Relaxed) {
                break;
            }
            n += 1;
            let req = format!("GET /quote?n={n} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
            let (sent, in_window) = (Instant::now(), s.measuring.load(Ordering::SeqCst));
            if out.write_all(req.as_bytes()).is_err() || read_response(&mut input).is_err() {
                if !stop.load(Ordering::Relaxed) {
                    s.errors.fetch_add(1, Ordering::Relaxed);
                }
                break;
            }
            let took = sent.elapsed();
            s.done.fetch_add(1, Ordering::Relaxed);
            if in_window != 0 {
                let mut lat = lock(&s.latencies);
                // Checked under the lock, so the window's `take` sees
                // every request that was answered in it, and no later one.
                if s.measuring.load(Ordering::SeqCst) == in_window {
                    lat.push(took.as_nanos() as u64);
                }
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The nearest-rank `p`th percentile of sorted `xs` (not empty).
fn percentile(xs: &[u64], p: f64) -> u64 {
    let rank = ((p / 100.0) * xs.len() as f64).ceil() as usize;
    xs[rank.clamp(1, xs.len()) - 1]
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
    stat_cpu(&format!("/proc/{pid}/stat"))
}

/// User + system time of the JVM's `vmview-sampler` thread so far; `None`
/// without one.
fn sampler_cpu_time(pid: u32) -> Option<Duration> {
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let dir = task.ok()?.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim_end() == "vmview-sampler" {
            return stat_cpu(&dir.join("stat").to_string_lossy());
        }
    }
    None
}

/// utime + stime of a `/proc/…/stat` file.
fn stat_cpu(path: &str) -> Option<Duration> {
    let stat = std::fs::read_to_string(path).ok()?;
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
    row.thread_samples =
        Some(row.thread_samples.unwrap_or(0) + doc["samples"].as_u64().unwrap_or(0));
    row.ticks += doc["ticks"].as_u64().unwrap_or(0);
    // Ticks happen only while the server runs (warm-up and windows; the
    // JVM's start-up adds a few).
    let secs = row.running.as_secs_f64();
    if secs > 0.0 {
        row.ticks_per_s = Some(row.ticks as f64 / secs);
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

/// The quartiles (nearest rank) of `xs`.
fn quartiles(mut xs: Vec<f64>) -> Option<(f64, f64)> {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    (n > 0).then(|| (xs[(n - 1) / 4], xs[(3 * (n - 1)).div_ceil(4)]))
}

/// A 95 % percentile-bootstrap interval of the median of `xs` (2,000
/// resamples, a fixed seed so a report is reproducible from its rounds).
fn bootstrap_median(xs: &[f64]) -> Option<(f64, f64)> {
    if xs.len() < 2 {
        return None;
    }
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut meds: Vec<f64> = (0..2000)
        .filter_map(|_| {
            median(
                (0..xs.len())
                    .map(|_| xs[next() as usize % xs.len()])
                    .collect(),
            )
        })
        .collect();
    meds.sort_by(f64::total_cmp);
    Some((meds[49], meds[1949]))
}

/// The round-by-round ratios of `r`'s windows to the baseline's.
fn ratios(r: &Row, base: &Row, f: fn(&Sample) -> f64) -> Vec<f64> {
    r.samples
        .iter()
        .zip(&base.samples)
        .map(|(x, b)| f(x) / f(b))
        .filter(|x| x.is_finite())
        .collect()
}

/// Whether a ratio's interval shows the target (`limit`, a bound on the
/// cost side: `upper` for latency, lower for throughput) held or missed.
fn verdict(ci: Option<(f64, f64)>, limit: f64, upper: bool) -> &'static str {
    match ci {
        None => "—",
        Some((lo, hi)) if (upper && hi <= limit) || (!upper && lo >= limit) => "met",
        Some((lo, hi)) if (upper && lo > limit) || (!upper && hi < limit) => "missed",
        Some(_) => "not decided",
    }
}

struct Medians {
    rate: Option<f64>,
    cpu_per_request: Option<f64>,
    cores: Option<f64>,
    p50: Option<f64>,
    p99: Option<f64>,
    /// Median over rounds of the round's ratio to the baseline's window.
    rate_ratio: Option<f64>,
    cpu_ratio: Option<f64>,
    p50_ratio: Option<f64>,
    p99_ratio: Option<f64>,
}

fn medians(r: &Row, base: &Row) -> Medians {
    let paired = |f: fn(&Sample) -> f64| median(ratios(r, base, f));
    Medians {
        rate: median(r.samples.iter().map(Sample::rate).collect()),
        cpu_per_request: median(r.samples.iter().map(Sample::cpu_us_per_request).collect()),
        cores: median(r.samples.iter().map(Sample::cores).collect()),
        p50: median(r.samples.iter().map(Sample::p50).collect()),
        p99: median(r.samples.iter().map(Sample::p99).collect()),
        rate_ratio: paired(Sample::rate),
        cpu_ratio: paired(Sample::cpu_us_per_request),
        p50_ratio: paired(Sample::p50),
        p99_ratio: paired(Sample::p99),
    }
}

fn report_text(a: &ServerArgs<'_>, rows: &[Row], load: (Option<f64>, Option<f64>)) -> String {
    let mut o = String::new();
    o.push_str(&format!(
        "workload: Jetty (Debian's jetty9) serving JSON quotes on loopback to {} keep-alive clients per server; {} epochs of fresh servers, {} s warm-up each, then rounds of one {} s window per server (the others stopped)\n",
        a.clients,
        a.epochs,
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
    if let Some(cpu) = pin(a) {
        o.push_str(&format!(
            "pinned: servers on CPU {cpu}, the load generator on CPU 0\n"
        ));
    }
    o.push_str(&format!(
        "rounds: {} per epoch; medians shown; ×plain = median over rounds of the window's ratio to the plain server's window in the same round\n\n",
        a.reps
    ));
    let head = [
        "config",
        "windows",
        "req/s",
        "×plain",
        "p50 µs",
        "×plain",
        "p99 µs",
        "×plain",
        "cpu µs/req",
        "×plain",
        "cores",
        "sampler %cpu",
        "samples",
        "ticks/s",
    ];
    let f = |x: Option<f64>, p: usize| x.map_or("—".to_string(), |x| format!("{x:.p$}"));
    let times = |x: Option<f64>| x.map_or("—".to_string(), |x| format!("{x:.3}×"));
    let mut table = Vec::new();
    let mut notes = Vec::new();
    for r in rows {
        let m = medians(r, &rows[0]);
        if let Some(why) = &r.failed {
            notes.push(format!("{}: {why}", r.config.name));
        }
        if let Observer::Vmview {
            options,
            env,
            agent_b,
        } = r.config.observer
        {
            let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v} ")).collect();
            let which = match (agent_b, std::env::var(AGENT_B_ENV)) {
                (true, Ok(path)) => format!(" (agent {path})"),
                _ => String::new(),
            };
            notes.push(format!(
                "{}: {}agent options {options}{which}",
                r.config.name,
                env.concat()
            ));
        }
        table.push(vec![
            r.config.name.to_string(),
            r.samples.len().to_string(),
            f(m.rate, 0),
            times(m.rate_ratio),
            f(m.p50, 0),
            times(m.p50_ratio),
            f(m.p99, 0),
            times(m.p99_ratio),
            f(m.cpu_per_request, 1),
            times(m.cpu_ratio),
            f(m.cores, 2),
            f(
                median(
                    r.samples
                        .iter()
                        .filter_map(Sample::sampler_percent)
                        .collect(),
                ),
                2,
            ),
            r.thread_samples.map_or("—".into(), |n| n.to_string()),
            f(r.ticks_per_s, 1),
        ]);
    }
    o.push_str(&crate::render_table(&head, &table));
    // The spread of the rounds' ratios and a 95 % bootstrap interval of
    // their median, against the targets (throughput within 2 %, p99
    // latency within 3 % of plain).
    let range =
        |x: Option<(f64, f64)>| x.map_or("—".to_string(), |(a, b)| format!("{a:.3}–{b:.3}"));
    let mut spread = Vec::new();
    for r in &rows[1..] {
        let thr = ratios(r, &rows[0], Sample::rate);
        let p99 = ratios(r, &rows[0], Sample::p99);
        let (thr_ci, p99_ci) = (bootstrap_median(&thr), bootstrap_median(&p99));
        spread.push(vec![
            r.config.name.to_string(),
            range(quartiles(thr.clone())),
            range(thr_ci),
            verdict(thr_ci, 0.98, false).to_string(),
            range(quartiles(p99.clone())),
            range(p99_ci),
            verdict(p99_ci, 1.03, true).to_string(),
        ]);
    }
    if !spread.is_empty() {
        o.push('\n');
        o.push_str(&crate::render_table(
            &[
                "config",
                "req/s ×plain IQR",
                "95% CI of median",
                "≥ 0.98",
                "p99 ×plain IQR",
                "95% CI of median",
                "≤ 1.03",
            ],
            &spread,
        ));
    }
    if !notes.is_empty() {
        o.push('\n');
        for n in notes {
            o.push_str(&format!("- {n}\n"));
        }
    }
    o.push_str(
        "\nreq/s = requests answered in the window; p50, p99 µs = percentiles of the \
         latency (request written to answer read) of the requests sent and answered in \
         the window; cpu µs/req = the server JVM's CPU time \
         (all threads) in the window per request; cores = its CPU time over the window; \
         sampler %cpu = the vmview-sampler thread's CPU time over the window \
         (percent of one core); samples, ticks/s = SAMPLE events of the vmview server's \
         trace and its sampling ticks per second of running time (not stopped).\n",
    );
    o
}

fn report_json(a: &ServerArgs<'_>, rows: &[Row], load: (Option<f64>, Option<f64>)) -> Json {
    json!({
        "workload": "jetty-quotes",
        "java": {"path": a.java.display().to_string(), "version": crate::java_version(a.java)},
        "clients": a.clients,
        "warmup_s": a.warmup.as_secs_f64(),
        "window_s": a.window.as_secs_f64(),
        "settle_s": SETTLE.as_secs_f64(),
        "rounds": a.reps,
        "epochs": a.epochs,
        "load_average": {"before": load.0, "after": load.1},
        "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "rows": rows.iter().map(|r| {
            let m = medians(r, &rows[0]);
            json!({
                "config": r.config.name,
                "failed": r.failed,
                "windows": r.samples.len(),
                "requests_per_s": m.rate,
                "requests_per_s_all": r.samples.iter().map(Sample::rate).collect::<Vec<_>>(),
                "requests_per_s_ratio": m.rate_ratio,
                "cpu_us_per_request": m.cpu_per_request,
                "cpu_us_per_request_all": r.samples.iter().map(Sample::cpu_us_per_request).collect::<Vec<_>>(),
                "cpu_us_per_request_ratio": m.cpu_ratio,
                "p50_us": m.p50,
                "p50_us_all": r.samples.iter().map(Sample::p50).collect::<Vec<_>>(),
                "p50_ratio": m.p50_ratio,
                "p99_us": m.p99,
                "p99_us_all": r.samples.iter().map(Sample::p99).collect::<Vec<_>>(),
                "p99_ratio": m.p99_ratio,
                "cores": m.cores,
                "sampler_cpu_percent": median(r.samples.iter().filter_map(Sample::sampler_percent).collect()),
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
    fn intervals_decide_a_target_only_when_they_clear_it() {
        assert_eq!(verdict(Some((0.985, 1.01)), 0.98, false), "met");
        assert_eq!(verdict(Some((0.95, 1.01)), 0.98, false), "not decided");
        assert_eq!(verdict(Some((0.90, 0.97)), 0.98, false), "missed");
        assert_eq!(verdict(Some((0.99, 1.02)), 1.03, true), "met");
        assert_eq!(verdict(Some((1.04, 1.10)), 1.03, true), "missed");
        assert_eq!(verdict(None, 1.03, true), "—");
        let xs: Vec<f64> = (1..=9).map(f64::from).collect();
        assert_eq!(quartiles(xs.clone()), Some((3.0, 7.0)));
        let (lo, hi) = bootstrap_median(&xs).unwrap();
        assert!(
            lo <= 5.0 && 5.0 <= hi && lo >= 1.0 && hi <= 9.0,
            "{lo} {hi}"
        );
        assert_eq!(bootstrap_median(&[1.0]), None);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let xs: Vec<u64> = (1..=200).collect();
        assert_eq!(percentile(&xs, 50.0), 100);
        assert_eq!(percentile(&xs, 99.0), 198);
        assert_eq!(percentile(&[7], 99.0), 7);
    }

    #[test]
    fn own_cpu_time_reads_from_proc() {
        let t = cpu_time(std::process::id()).expect("/proc/self/stat");
        assert!(t < Duration::from_secs(24 * 3600));
    }
}
