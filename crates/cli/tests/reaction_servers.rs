//! `vmview reactions` and `record --reactions` on real framework servers:
//! Jetty 9.4 from Debian (two servlets) and the JDK's built-in
//! `com.sun.net.httpserver.HttpServer` (two handlers on a thread pool),
//! each under a loopback load generator written here, with a known number
//! of requests per endpoint.
//!
//! The load has two phases. The warm-up load runs for the first 6 s after
//! the recording starts, which ends before the agent's 8 s warm-up does;
//! once the agent says on stderr that it chose its handlers, the measured
//! load sends exactly N requests to each endpoint, timing each one from its first byte written to its last byte
//! read. What is compared: the handlers found are the application's
//! methods (`doGet`, `handle`), by the library-loop rule; the events timed
//! per handler are the measured requests plus only those warm-up requests
//! still in flight at the switch (normally none; the ones that ended after
//! it, as entering the handler after the switch is the only way to be
//! counted); and each handler's p50 and p99 are at most the client's for
//! its endpoint (the probe's window lies inside the client's), within the
//! histogram's resolution.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::support::*;

/// Debian's libjetty9-java jars a servlet server needs (as scripts/soak.sh).
const JETTY_JARS: &[&str] = &[
    "jetty9-server",
    "jetty9-http",
    "jetty9-io",
    "jetty9-util",
    "jetty9-servlet",
    "jetty9-security",
    "servlet-api",
];

/// Every request waits at most this long for its answer.
const IO_TIMEOUT: Duration = Duration::from_secs(60);

fn jetty_class_path() -> String {
    JETTY_JARS
        .iter()
        .map(|j| {
            let p = PathBuf::from(format!("/usr/share/java/{j}.jar"));
            assert!(
                p.exists(),
                "{} is missing: apt-get install libjetty9-java",
                p.display()
            );
            p.display().to_string()
        })
        .collect::<Vec<_>>()
        .join(":")
}

/// tests/fixtures/servers compiled once against the Jetty jars.
fn server_classes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| compile_java("servers/srv", Some(&jetty_class_path()), "server-classes"))
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// One keep-alive HTTP/1.1 connection.
struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    fn open(port: u16) -> Conn {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the server");
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        s.set_nodelay(true).unwrap();
        Conn {
            reader: BufReader::new(s.try_clone().unwrap()),
            writer: s,
        }
    }

    /// GET `path`; the time from the request's first byte written to the
    /// answer's last byte read.
    fn get(&mut self, path: &str) -> Duration {
        let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        let start = Instant::now();
        self.writer.write_all(req.as_bytes()).expect("send request");
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("status line");
        assert!(line.starts_with("HTTP/1.1 200"), "{path}: {line:?}");
        let mut length = None;
        loop {
            line.clear();
            self.reader.read_line(&mut line).expect("header line");
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse::<usize>().ok();
                }
            }
        }
        let mut body = vec![0u8; length.expect("a Content-Length")];
        self.reader.read_exact(&mut body).expect("body");
        start.elapsed()
    }
}

/// A server under `vmview record`, with its stderr watched for the switch.
struct Server {
    child: Child,
    trace: PathBuf,
    port: u16,
    /// Unix time when the agent's "reactions: after" line was read (0: not yet).
    switch_seen: Arc<AtomicU64>,
    stderr: Arc<Mutex<String>>,
    stdout: Option<JoinHandle<String>>,
    stderr_thread: Option<JoinHandle<()>>,
}

fn start(main: &str, flags: &[&str]) -> Server {
    agent();
    let trace = scratch(main).join("trace.vmv");
    let cp = format!("{}:{}", server_classes().display(), jetty_class_path());
    let mut child = Command::new(vmview())
        .arg("record")
        .args(flags)
        .arg("-o")
        .arg(&trace)
        .args(["--", "java", "-cp", &cp, &format!("srv.{main}")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run vmview record");
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().unwrap();
    let stdout = std::thread::spawn(move || {
        let mut rest = String::new();
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(p) = line.strip_prefix("port ") {
                let _ = tx.send(p.trim().parse::<u16>().expect("port number"));
            }
            rest.push_str(&line);
            rest.push('\n');
        }
        rest
    });
    let switch_seen = Arc::new(AtomicU64::new(0));
    let stderr = Arc::new(Mutex::new(String::new()));
    let err = child.stderr.take().unwrap();
    let (seen, text) = (switch_seen.clone(), stderr.clone());
    let stderr_thread = std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if line.contains("reactions: after") {
                seen.store(unix_ns(), Ordering::SeqCst);
            }
            let mut t = text.lock().unwrap();
            t.push_str(&line);
            t.push('\n');
        }
    });
    let port = match rx.recv_timeout(Duration::from_secs(180)) {
        Ok(p) => p,
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{main} did not print its port: {}", stderr.lock().unwrap());
        }
    };
    Server {
        child,
        trace,
        port,
        switch_seen,
        stderr,
        stdout: Some(stdout),
        stderr_thread: Some(stderr_thread),
    }
}

impl Server {
    /// Closes stdin (the server stops) and waits for the recording to end.
    fn stop(mut self) -> (String, String) {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(180);
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("wait for vmview") {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("the server did not stop: {}", self.stderr.lock().unwrap());
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let stdout = self.stdout.take().unwrap().join().unwrap();
        self.stderr_thread.take().unwrap().join().unwrap();
        let stderr = self.stderr.lock().unwrap().clone();
        assert!(status.success(), "record failed: {stderr}");
        (stdout, stderr)
    }
}

const ENDPOINTS: [&str; 2] = ["/json", "/work"];

/// One warm-up request: endpoint, and its unix start and end times.
type Warm = (usize, u64, u64);

/// Two connections send json, json, work, … with a 5 ms pause between
/// requests until `until`, then the agent's switch is awaited (at most
/// 120 s). `until` lies before the agent's warm-up can end, so normally
/// no warm-up request is in flight at the switch.
fn warm_up(s: &Server, until: Instant) -> Vec<Warm> {
    let threads: Vec<JoinHandle<Vec<Warm>>> = (0..2)
        .map(|c| {
            let port = s.port;
            std::thread::spawn(move || {
                let mut conn = Conn::open(port);
                let mut done = Vec::new();
                let mut i = c;
                while Instant::now() < until {
                    let e = usize::from(i % 3 == 2);
                    let start = unix_ns();
                    conn.get(ENDPOINTS[e]);
                    done.push((e, start, unix_ns()));
                    i += 1;
                    std::thread::sleep(Duration::from_millis(5));
                }
                done
            })
        })
        .collect();
    let warm = threads
        .into_iter()
        .flat_map(|t| t.join().expect("warm-up thread"))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    while s.switch_seen.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "no switch within 120 s: {}",
            s.stderr.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    warm
}

/// `counts[e]` requests to each endpoint over `conns` connections, in an
/// interleaved order; the client latencies per endpoint.
fn measured(port: u16, counts: [usize; 2], conns: usize) -> [Vec<Duration>; 2] {
    let mut order: Vec<usize> = Vec::new();
    let (mut left, total) = (counts, counts[0] + counts[1]);
    for i in 0..total {
        // Spread the smaller endpoint evenly through the larger one's.
        let e = if left[1] > 0
            && (left[0] == 0 || i * counts[1] / total != (i + 1) * counts[1] / total)
        {
            1
        } else {
            0
        };
        left[e] -= 1;
        order.push(e);
    }
    let order = Arc::new(order);
    let threads: Vec<JoinHandle<[Vec<Duration>; 2]>> = (0..conns)
        .map(|c| {
            let order = order.clone();
            std::thread::spawn(move || {
                let mut conn = Conn::open(port);
                let mut lat = [Vec::new(), Vec::new()];
                for e in order.iter().skip(c).step_by(conns) {
                    lat[*e].push(conn.get(ENDPOINTS[*e]));
                }
                lat
            })
        })
        .collect();
    let mut all = [Vec::new(), Vec::new()];
    for t in threads {
        let [a, b] = t.join().expect("load thread");
        all[0].extend(a);
        all[1].extend(b);
    }
    all
}

/// Nearest rank, as vmview computes it.
fn percentile(sorted: &[u64], q: f64) -> u64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).max(1);
    sorted[rank - 1]
}

fn json_of(args: &[&str]) -> Value {
    let out = run(args);
    assert!(
        out.status.success(),
        "vmview {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// The whole check on one server: `handlers` are the qualified handler
/// methods of /json and /work; `dispatch`, a `--handler` method every
/// request goes through.
fn check_server(
    main: &str,
    handlers: [&str; 2],
    framework: &str,
    counts: [usize; 2],
    dispatch: Option<&str>,
) {
    let mut flags = vec![
        "--reactions",
        "--reactions-after",
        "8s",
        "--interval",
        "5ms",
    ];
    if let Some(d) = dispatch {
        flags.extend(["--handler", d]);
    }
    // The agent starts after this: its 8 s warm-up ends after `until`.
    let until = Instant::now() + Duration::from_secs(6);
    let server = start(main, &flags);
    let warm = warm_up(&server, until);
    assert!(!warm.is_empty(), "the server took 6 s to start");
    let seen_ns = server.switch_seen.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(200));
    let lat = measured(server.port, counts, 4);
    let trace = server.trace.clone();
    let (stdout, stderr) = server.stop();
    for h in handlers {
        assert!(stderr.contains(h), "the agent times {h}: {stderr}");
    }

    // The server's own counts: warm-up plus measured requests.
    let warm_of = |e: usize| warm.iter().filter(|w| w.0 == e).count();
    assert!(
        stdout.contains(&format!(
            "served json {} work {}",
            warm_of(0) + counts[0],
            warm_of(1) + counts[1]
        )),
        "{stdout}"
    );

    let stats = json_of(&["stats", path_str(&trace), "--format", "json"]);
    let start_unix = stats["start_unix_ns"].as_u64().expect("start_unix_ns");
    let app = stats["properties"]["app_packages"]
        .as_str()
        .expect("app_packages in the header");
    assert_eq!(app, "srv", "only the classes directory is the application");

    let r = json_of(&["reactions", path_str(&trace), "--format", "json"]);
    let found: Vec<String> = r["handlers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            format!(
                "{}.{}",
                h["class"].as_str().unwrap(),
                h["method"].as_str().unwrap()
            )
        })
        .collect();
    // An unknown framework: without profiles the same handlers are found,
    // by the application/library split alone.
    let bare = json_of(&[
        "reactions",
        path_str(&trace),
        "--format",
        "json",
        "--no-frameworks",
    ]);
    let bare_found: Vec<String> = bare["handlers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["rule"] == "library-loop" && h["framework"].is_null())
        .map(|h| {
            format!(
                "{}.{}",
                h["class"].as_str().unwrap(),
                h["method"].as_str().unwrap()
            )
        })
        .collect();
    for h in handlers {
        assert!(
            bare_found.iter().any(|f| f == h),
            "{h} without profiles: {bare_found:?}"
        );
    }
    // The header's wall-clock start is read after the agent's clock
    // started (and calibrated, ~2 ms): the switch's wall-clock time is
    // known to within that, so 50 ms of slack.
    let switch_unix =
        (start_unix + r["timing"]["chosen_ns"].as_u64().unwrap()).saturating_sub(50_000_000);
    let (mut lower_all, mut upper_all) = (0, 0);
    for (e, want) in handlers.iter().enumerate() {
        let h = r["handlers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| {
                format!(
                    "{}.{}",
                    h["class"].as_str().unwrap(),
                    h["method"].as_str().unwrap()
                ) == *want
            })
            .unwrap_or_else(|| panic!("{want} is no handler: {found:?}"));
        assert_eq!(h["rule"], "library-loop", "{h}");
        assert_eq!(h["framework"], framework, "{h}");
        // Counted: the measured requests, all sent after the switch was
        // seen; of the warm-up's, at least those started after the switch
        // was seen and at most those that ended after the switch.
        let lower = warm.iter().filter(|w| w.0 == e && w.1 > seen_ns).count();
        let upper = warm
            .iter()
            .filter(|w| w.0 == e && w.2 > switch_unix)
            .count();
        let t = r["timing"]["handlers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| {
                format!(
                    "{}.{}",
                    t["class"].as_str().unwrap(),
                    t["method"].as_str().unwrap()
                ) == *want
            })
            .unwrap_or_else(|| panic!("{want} was not timed: {}", r["timing"]));
        let events = t["events"].as_u64().unwrap() as usize;
        lower_all += lower;
        upper_all += upper;
        assert!(
            counts[e] + lower <= events && events <= counts[e] + upper,
            "{want}: {events} events for {} requests sent after the switch (+{lower}..={upper} of the warm-up's in flight)",
            counts[e]
        );
        let mut client: Vec<u64> = lat[e].iter().map(|d| d.as_nanos() as u64).collect();
        client.sort_unstable();
        let (c50, c90, c99, cmax) = (
            percentile(&client, 0.50),
            percentile(&client, 0.90),
            percentile(&client, 0.99),
            *client.last().unwrap(),
        );
        let cmean = client.iter().sum::<u64>() / client.len() as u64;
        let (p50, p99) = (t["p50_ns"].as_u64().unwrap(), t["p99_ns"].as_u64().unwrap());
        // The server's times are the measured requests' (each inside its
        // client time) plus `extra` warm-up ones: its rank-r value is at
        // most the client's rank-r value with r = ceil(q (n + extra)),
        // which is the client's own percentile when nothing was extra.
        // vmview reports a bucket's middle: within 1/256 of the value.
        let extra = events - counts[e];
        let bound = |q: f64| {
            let r = ((q * (client.len() + extra) as f64).ceil() as usize).clamp(1, client.len());
            let v = client[r - 1];
            v + v / 256
        };
        // The numbers docs/REACTIONS.md shows side by side.
        eprintln!(
            "{main} {}: {} warm-up requests, sent {} after the switch, counted {events} (in flight {lower}..={upper}); \
             server mean/p50/p90/p99/max {}/{}/{}/{}/{} us; client {}/{}/{}/{}/{} us",
            ENDPOINTS[e],
            warm_of(e),
            counts[e],
            t["mean_ns"].as_u64().unwrap() / 1000,
            p50 / 1000,
            t["p90_ns"].as_u64().unwrap() / 1000,
            p99 / 1000,
            t["max_ns"].as_u64().unwrap() / 1000,
            cmean / 1000,
            c50 / 1000,
            c90 / 1000,
            c99 / 1000,
            cmax / 1000
        );
        assert!(
            p50 <= bound(0.50),
            "{want}: server p50 {p50} > client p50 {c50} (+{extra} events)"
        );
        assert!(
            p99 <= bound(0.99),
            "{want}: server p99 {p99} > client p99 {c99} (+{extra} events)"
        );
    }
    // Only the application's methods (and --handler's) were chosen: no
    // framework machinery.
    let chosen = r["timing"]["handlers"].as_array().unwrap();
    let name = |t: &Value| {
        format!(
            "{}.{}",
            t["class"].as_str().unwrap(),
            t["method"].as_str().unwrap()
        )
    };
    let others: Vec<&Value> = chosen
        .iter()
        .filter(|t| !handlers.contains(&name(t).as_str()))
        .collect();
    match dispatch {
        None => assert!(others.is_empty(), "{chosen:?}"),
        Some(d) => {
            // Both overloads of service(...) match; every request goes
            // through each once.
            assert!(!others.is_empty(), "{d} was not timed: {chosen:?}");
            let sent = counts[0] + counts[1];
            for t in others {
                assert_eq!(name(t), d, "{chosen:?}");
                let events = t["events"].as_u64().unwrap() as usize;
                assert!(
                    sent + lower_all <= events && events <= sent + upper_all,
                    "{d}: {events} events for {sent} requests (+{lower_all}..={upper_all})"
                );
            }
        }
    }
}

#[test]
fn jetty_servlets_doget_are_the_handlers_and_count_each_request() {
    check_server(
        "JettyServlets",
        [
            "srv.JettyServlets$Json.doGet",
            "srv.JettyServlets$Work.doGet",
        ],
        "servlet",
        [600, 200],
        Some("javax.servlet.http.HttpServlet.service"),
    );
}

#[test]
fn jdk_httpserver_handlers_are_found_and_count_each_request() {
    check_server(
        "JdkServer",
        ["srv.JdkServer$Json.handle", "srv.JdkServer$Work.handle"],
        "jdk-httpserver",
        [400, 150],
        None,
    );
}

#[test]
fn a_class_path_of_jars_makes_the_main_class_jar_the_application() {
    // Only jars on the class path (no classes directory): the jar holding
    // the main class is the application, the Jetty jars are libraries.
    let dir = scratch("app-jar");
    let jar = dir.join("app.jar");
    let status = Command::new("jar")
        .arg("cf")
        .arg(&jar)
        .arg("-C")
        .arg(server_classes())
        .arg(".")
        .status()
        .expect("run jar");
    assert!(status.success());
    let trace = dir.join("trace.vmv");
    let cp = format!("{}:{}", jetty_class_path(), jar.display());
    // stdin is empty: the server starts and stops at once.
    let out = Command::new(vmview())
        .args(["record", "--events", "samples", "--interval", "5ms", "-o"])
        .arg(&trace)
        .args(["--", "java", "-cp", &cp, "srv.JdkServer"])
        .stdin(Stdio::null())
        .output()
        .expect("run vmview record");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stats = json_of(&["stats", path_str(&trace), "--format", "json"]);
    assert_eq!(stats["properties"]["app_packages"], "srv", "{stats}");
}
