//! `vmview serve` against hostile clients, on a real server on loopback:
//! a filter nested thousands deep (which used to overflow the stack and
//! abort the server), a client that drips one byte at a time (which used
//! to keep its connection, and its thread, as long as it liked), and more
//! idle clients than the server serves at once (which used to cost one
//! thread each, without bound). Every wait here is bounded; the server's
//! limits are set low through its flags so the tests stay short.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::scratch;
use crate::view::{http, multi_chunk_trace, q, serve_with, Served};

fn small_trace(name: &str) -> PathBuf {
    let trace = scratch(name).join("small.vmv");
    multi_chunk_trace(&trace, 200);
    trace
}

/// The server process's thread count, from /proc.
fn threads(served: &Served) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", served.child.id()))
        .expect("the server is running");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("Threads: line")
}

fn alive(served: &mut Served) -> bool {
    served.child.try_wait().expect("wait").is_none()
}

/// A filter of 2,000 nested parentheses overflowed the stack of the
/// request's thread and aborted `vmview serve` (any web page could send it
/// through an `<img>`); now every API that parses an expression answers 400
/// with the limit, and the server goes on serving.
#[test]
fn serve_answers_deeply_nested_filters_with_400_and_keeps_serving() {
    let trace = small_trace("serve-nesting");
    let mut served = serve_with(&trace, &[]);
    let a = served.addr.clone();
    let deep = format!("{}type == CALL{}", "(".repeat(2000), ")".repeat(2000));
    let nots = format!("{}type == CALL", "!".repeat(5000));
    for target in [
        format!("/api/events?filter={}", q(&deep)),
        format!("/api/check?q={}", q(&deep)),
        format!("/api/check?q={}", q(&nots)),
        format!("/api/events?mark={}", q(&nots)),
        format!("/api/locate?id=3&filter={}", q(&deep)),
        format!("/api/step?search={}", q(&deep)),
        format!("/api/step?filter={}&search=true", q(&nots)),
    ] {
        let (status, _, body) = http(&a, "GET", &target, Some(&a));
        let v: Value = serde_json::from_slice(&body).expect("JSON error");
        assert_eq!(status, 400, "{}: {v}", &target[..40]);
        let err = v["error"].as_str().unwrap_or("");
        assert!(
            err.contains("nested too deep (limit 128"),
            "{}: {v}",
            &target[..40]
        );
        assert!(alive(&mut served), "the server died on {}", &target[..40]);
    }
    let (status, _, _) = http(&a, "GET", "/api/info", Some(&a));
    assert_eq!(status, 200, "still serving");
    // At the limit it is an ordinary filter.
    let ok = format!("{}type == CALL{}", "(".repeat(128), ")".repeat(128));
    let (status, _, body) = http(
        &a,
        "GET",
        &format!("/api/events?filter={}", q(&ok)),
        Some(&a),
    );
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((status, v["count"].as_u64()), (200, Some(100)), "{v}");
}

/// A search step joins the filter and the search as trees, not as the
/// text `(F) && (S)`: a filter at the nesting limit still steps (the text
/// would be one level deeper), and a filter that is an error alone (`a)
/// || (true`, which in the text would reopen the search's parenthesis)
/// stays an error.
#[test]
fn serve_step_joins_filter_and_search_parsed_apart() {
    let trace = small_trace("serve-step-join");
    let served = serve_with(&trace, &[]);
    let a = served.addr.clone();
    let target = format!(
        "/api/step?filter={}&search={}",
        q("type == CALL) || (true"),
        q("type == RETURN")
    );
    let (status, _, body) = http(&a, "GET", &target, Some(&a));
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("unmatched )"), "{v}");
    let at_limit = format!(
        "{}type == CALL || id == 4{}",
        "(".repeat(128),
        ")".repeat(128)
    );
    let target = format!(
        "/api/step?filter={}&search={}",
        q(&at_limit),
        q("type == RETURN")
    );
    let (status, _, body) = http(&a, "GET", &target, Some(&a));
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((status, v["id"].as_u64()), (200, Some(4)), "{v}");
}

/// A client sending one byte every 300 ms kept its connection: the server
/// had a 10 s timeout per read, which every byte renewed. Now the whole
/// request has one deadline (2 s here), after which the server closes the
/// connection, however the bytes are paced.
#[test]
fn serve_closes_a_slow_client_at_its_deadline_not_per_read() {
    let trace = small_trace("serve-slow");
    let served = serve_with(&trace, &["--request-timeout", "2s"]);
    let mut s = TcpStream::connect(&served.addr).expect("connect");
    let start = Instant::now();
    let request = format!("GET /api/info HTTP/1.1\r\nHost: {}\r\nX-Pad: ", served.addr);
    let mut closed_after = None;
    for byte in request.bytes().chain(std::iter::repeat(b'a')) {
        if start.elapsed() > Duration::from_secs(20) {
            break;
        }
        if s.write_all(&[byte]).is_err() || closed(&s) {
            closed_after = Some(start.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let after = closed_after.expect("the server kept the dripping client for 20 s");
    assert!(
        after >= Duration::from_millis(1500),
        "closed too early: {after:?}"
    );
    assert!(
        after < Duration::from_secs(12),
        "closed long after the 2 s deadline: {after:?}"
    );
    // Others are served meanwhile and after.
    let (status, _, _) = http(&served.addr, "GET", "/api/info", Some(&served.addr));
    assert_eq!(status, 200);
}

/// Has the server closed `s` (end of stream or reset)? Data is a failure:
/// the request was never finished.
fn closed(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 256];
    let r = s.peek(&mut b);
    s.set_nonblocking(false).unwrap();
    match r {
        Ok(0) => true,
        Ok(n) => panic!(
            "answered an unfinished request: {}",
            String::from_utf8_lossy(&b[..n])
        ),
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    }
}

/// 195 idle clients held 196 threads of `vmview serve`. Now at most
/// `--max-connections` are served at once (4 here); more get a 503 at
/// once from the accepting thread and are closed, and the thread count
/// stays put; when the idle ones go, the server serves again.
#[test]
fn serve_bounds_connections_and_threads_with_quick_503s() {
    let trace = small_trace("serve-connections");
    let mut served = serve_with(
        &trace,
        &["--max-connections", "4", "--request-timeout", "60s"],
    );
    let a = served.addr.clone();
    assert_eq!(http(&a, "GET", "/api/info", Some(&a)).0, 200);
    let before = threads(&served);
    // Four idle clients fill the server. One of them may come while the
    // warm-up request's slot is still held (and get a 503), so probe with
    // more idle clients, keeping the ones served, until one is refused.
    let mut held: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(&a).unwrap()).collect();
    let mut full = false;
    for _ in 0..8 {
        let mut s = TcpStream::connect(&a).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut head = Vec::new();
        let _ = s.read_to_end(&mut head);
        if head.starts_with(b"HTTP/1.1 503") {
            full = true;
            break;
        }
        held.push(s);
    }
    assert!(full, "no 503 with {} clients held", held.len());
    // Now every further client is refused at once, however many.
    let mut refused = 0;
    for _ in 0..40 {
        let mut s = TcpStream::connect(&a).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut head = Vec::new();
        let t = Instant::now();
        let _ = s.read_to_end(&mut head);
        let head = String::from_utf8_lossy(&head).into_owned();
        assert!(
            head.starts_with("HTTP/1.1 503") && head.contains("too many connections"),
            "client {refused}: {head:?} after {:?}",
            t.elapsed()
        );
        refused += 1;
    }
    assert_eq!(refused, 40);
    let during = threads(&served);
    assert!(
        during <= before + 4,
        "threads grew from {before} to {during} with {} + 40 clients",
        held.len() + 1
    );
    assert!(alive(&mut served));
    drop(held);
    // The slots come back as the idle connections end.
    let t = Instant::now();
    loop {
        let (status, _, _) = http(&a, "GET", "/api/info", Some(&a));
        if status == 200 {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "still {status}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One raw request; the status of the answer.
fn raw_status(addr: &str, request: &[u8]) -> u16 {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(request).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let head = String::from_utf8_lossy(&raw);
    head.get(9..12)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"))
}

/// Lines were read 8 KiB at a time and cut there: the tail of a long
/// header line was read as a header of its own (here a second `Host`
/// that passed the loopback check for a request addressed elsewhere), and
/// a long URL was served shortened (another filter than the page sent).
/// Now a line over its bound is refused as a whole.
#[test]
fn serve_refuses_overlong_lines_instead_of_cutting_them() {
    let trace = small_trace("serve-long-lines");
    let served = serve_with(&trace, &[]);
    let a = served.addr.as_str();
    let pad = "X-Pad: ".to_string() + &"a".repeat(8192 - "X-Pad: ".len());
    let smuggled =
        format!("GET /api/info HTTP/1.1\r\nHost: evil.example\r\n{pad}Host: {a}\r\n\r\n");
    assert_eq!(raw_status(a, smuggled.as_bytes()), 431);
    let two_hosts = format!("GET /api/info HTTP/1.1\r\nHost: evil.example\r\nHost: {a}\r\n\r\n");
    assert_eq!(raw_status(a, two_hosts.as_bytes()), 400);
    let long = format!(
        "GET /api/check?q={} HTTP/1.1\r\nHost: {a}\r\n\r\n",
        "x".repeat(70_000)
    );
    assert_eq!(raw_status(a, long.as_bytes()), 414);
    // A filter whose URL is longer than 8 KiB is read whole: its last test
    // counts.
    let expr = "id == 999999 || ".repeat(600) + "id == 2";
    let (status, _, body) = http(
        a,
        "GET",
        &format!("/api/events?filter={}", q(&expr)),
        Some(a),
    );
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((status, v["count"].as_u64()), (200, Some(1)), "{v}");
}
