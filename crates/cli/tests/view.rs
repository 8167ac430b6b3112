//! `vmview serve` and `vmview view`: the JSON API queried over raw HTTP/1.1
//! and checked against `vmview show --format jsonl` of the same trace; the
//! server's refusals (foreign Host, paths outside its own, other methods);
//! the report's embedded data; and the page itself driven in headless
//! Chromium (tests/browser/view.mjs) on recorded fixtures, one of them full
//! of strings written to attack a browser.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use vmview_format::{
    Event, EventKind, MethodId, MethodSymbol, Outcome, StringId, Symbol, ThreadRef, ThreadSymbol,
    TraceHeader, TraceWriter, Value as JValue,
};

use crate::support::{jsonl, path_str, record, run, scratch, vmview, Recording};

/// A running `vmview serve`, killed when dropped.
pub(crate) struct Served {
    pub(crate) child: Child,
    pub(crate) addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn serve(trace: &Path) -> Served {
    serve_with(trace, &[])
}

/// `vmview serve TRACE --port 0 FLAGS…`, once it prints its URL.
pub(crate) fn serve_with(trace: &Path, flags: &[&str]) -> Served {
    let mut child = Command::new(vmview())
        .args(["serve", path_str(trace), "--port", "0"])
        .args(flags)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start vmview serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read the URL line");
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|s| s.split('/').next())
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    assert!(
        addr.starts_with("127.0.0.1:"),
        "serve must bind loopback by default: {line}"
    );
    Served { child, addr }
}

/// One raw HTTP/1.1 request; (status, headers, body).
pub(crate) fn http(
    addr: &str,
    method: &str,
    target: &str,
    host: Option<&str>,
) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!("{method} {target} HTTP/1.1\r\n");
    if let Some(h) = host {
        req.push_str(&format!("Host: {h}\r\n"));
    }
    req.push_str("Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read response");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("end of headers");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head[9..12].parse().expect("status code");
    (status, head, raw[split + 4..].to_vec())
}

fn get_json(served: &Served, target: &str) -> Value {
    let (status, _, body) = http(&served.addr, "GET", target, Some(&served.addr));
    assert_eq!(status, 200, "{target}: {}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{target}: bad JSON: {e}"))
}

pub(crate) fn q(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn ids(v: &Value) -> Vec<u64> {
    v["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["id"].as_u64().unwrap())
        .collect()
}

fn hostile() -> Recording {
    let rec = record(&["--classes", "fx.*"], &[], "fx.Hostile", &[]);
    assert!(
        rec.output.status.success(),
        "record failed: {}",
        rec.stderr()
    );
    rec
}

#[test]
fn serve_api_answers_like_show_and_search() {
    let rec = hostile();
    let all = rec.events();
    let served = serve(&rec.trace);

    let info = get_json(&served, "/api/info");
    assert_eq!(info["events"].as_u64(), Some(all.len() as u64));

    // Pages by position are the trace's events in order, as JSON Lines has them.
    let page = get_json(&served, "/api/events?offset=0&limit=1000");
    assert_eq!(page["events"].as_array().unwrap(), &all);
    let page = get_json(&served, "/api/events?offset=5&limit=3");
    assert_eq!(page["events"].as_array().unwrap(), &all[5..8]);

    // A filter: the same events `vmview search` selects, with their count.
    let expr = "type == THROW && message ~ \"img\"";
    let want: Vec<u64> = all
        .iter()
        .filter(|e| {
            e["type"] == "THROW" && e["message"].as_str().is_some_and(|m| m.contains("img"))
        })
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    assert!(want.len() >= 2, "the fixture throws img payloads");
    let f = get_json(
        &served,
        &format!("/api/events?filter={}&limit=100", q(expr)),
    );
    assert_eq!(f["count"].as_u64(), Some(want.len() as u64));
    assert_eq!(f["complete"], true);
    assert_eq!(ids(&f), want);
    let count = run(&["search", path_str(&rec.trace), "--count", expr]);
    assert_eq!(
        String::from_utf8_lossy(&count.stdout).trim(),
        want.len().to_string()
    );

    // Search marks inside a filtered page, without hiding the others.
    let m = get_json(
        &served,
        &format!(
            "/api/events?filter={}&mark={}&limit=100",
            q("type == THROW"),
            q(expr)
        ),
    );
    let marked: Vec<u64> = ids(&m)
        .into_iter()
        .zip(m["marks"].as_array().unwrap())
        .filter(|(_, mk)| mk.as_bool() == Some(true))
        .map(|(id, _)| id)
        .collect();
    assert_eq!(marked, want);
    assert!(ids(&m).len() > want.len());

    // Stepping through the search, and locating a filtered event in the whole trace.
    let s1 = get_json(
        &served,
        &format!(
            "/api/step?filter={}&search={}&dir=next",
            q("type == THROW"),
            q(expr)
        ),
    );
    assert_eq!(s1["id"].as_u64(), Some(want[0]));
    assert_eq!(s1["rank"], 0);
    let s2 = get_json(
        &served,
        &format!(
            "/api/step?filter={}&search={}&from={}&dir=next",
            q("type == THROW"),
            q(expr),
            want[0]
        ),
    );
    assert_eq!(s2["id"].as_u64(), Some(want[1]));
    let back = get_json(
        &served,
        &format!("/api/step?search={}&from={}&dir=prev", q(expr), want[1]),
    );
    assert_eq!(back["id"].as_u64(), Some(want[0]));
    let row = all
        .iter()
        .position(|e| e["id"].as_u64() == Some(want[1]))
        .unwrap();
    assert_eq!(
        back["row"].as_u64(),
        Some(
            all.iter()
                .position(|e| e["id"].as_u64() == Some(want[0]))
                .unwrap() as u64
        )
    );
    let loc = get_json(&served, &format!("/api/locate?id={}", want[1]));
    assert_eq!(loc["row"].as_u64(), Some(row as u64));

    // A bad expression: 400 with the column of the culprit.
    let (status, _, body) = http(
        &served.addr,
        "GET",
        &format!("/api/events?filter={}", q("type == THORW")),
        Some(&served.addr),
    );
    assert_eq!(status, 400);
    let err: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(err["column"], 8);
    assert!(err["error"].as_str().unwrap().contains("THORW"));

    // The views: exceptions caught and uncaught as the trace has them.
    let views = get_json(&served, "/api/views");
    let throws: Vec<&Value> = all.iter().filter(|e| e["type"] == "THROW").collect();
    let uncaught = throws.iter().filter(|e| e["catch_class"].is_null()).count() as u64;
    let by_type = views["exceptions"]["by_type"].as_array().unwrap();
    assert_eq!(
        by_type
            .iter()
            .map(|t| t["thrown"].as_u64().unwrap())
            .sum::<u64>(),
        throws.len() as u64
    );
    assert_eq!(
        by_type
            .iter()
            .map(|t| t["uncaught"].as_u64().unwrap())
            .sum::<u64>(),
        uncaught
    );
    assert!(
        uncaught >= 1,
        "the hostile thread dies of an uncaught exception"
    );
    let sites = views["exceptions"]["sites"].as_array().unwrap();
    assert!(sites
        .iter()
        .any(|s| s["caught_at"].is_null()
            && s["thrown_at"].as_str().unwrap().contains("lambda$main$0")));
    assert!(views["threads"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"].as_str().unwrap().contains("onerror")));
    assert!(
        views["calltree"]["threads"].as_array().unwrap().len() >= 2,
        "one tree per thread"
    );
    assert!(views["reactions"].is_null());

    // The flame graph comes from inferno, with the hostile thread name escaped.
    let (status, head, svg) = http(
        &served.addr,
        "GET",
        "/api/flamegraph.svg",
        Some(&served.addr),
    );
    assert_eq!(status, 200);
    assert!(head.contains("Content-Type: image/svg+xml"));
    let svg = String::from_utf8(svg).unwrap();
    assert!(svg.contains("<svg") && svg.contains("fx.Hostile.main"));
    assert!(
        svg.contains("&lt;img src=x onerror="),
        "thread frame escaped"
    );
    assert!(
        !svg.contains("<img"),
        "no raw markup from the trace in the SVG"
    );
}

#[test]
fn serve_refuses_foreign_hosts_other_paths_and_methods() {
    let rec = hostile();
    let served = serve(&rec.trace);
    let a = served.addr.as_str();
    let port = a.rsplit(':').next().unwrap();

    let (status, head, body) = http(a, "GET", "/", Some(a));
    assert_eq!(status, 200);
    assert!(head.contains("Content-Security-Policy: default-src 'none'; script-src 'self'"));
    assert!(head.contains("X-Content-Type-Options: nosniff"));
    assert!(String::from_utf8_lossy(&body).contains("<script src=\"/app.js\">"));
    for host in [
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        format!("127.0.0.1:{port}"),
    ] {
        assert_eq!(http(a, "GET", "/api/info", Some(&host)).0, 200, "{host}");
    }

    // DNS rebinding: a page of attacker.example resolved to 127.0.0.1.
    for host in [
        "attacker.example",
        "attacker.example:80",
        "127.0.0.1.attacker.example",
        "10.0.0.1",
    ] {
        let (status, _, body) = http(a, "GET", "/api/events?limit=5", Some(host));
        assert_eq!(status, 421, "{host}");
        assert!(!String::from_utf8_lossy(&body).contains("\"events\""));
    }
    assert_eq!(http(a, "GET", "/api/info", None).0, 421, "no Host header");

    // Only its own paths: nothing of the file system.
    for target in [
        "/../../../../etc/passwd",
        "/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/app.js/../../../Cargo.toml",
        "//etc/passwd",
        "/api/../../etc/passwd",
        "/assets/app.js",
        "/trace.vmv",
    ] {
        let (status, _, body) = http(a, "GET", target, Some(a));
        assert_eq!(status, 404, "{target}");
        let body = String::from_utf8_lossy(&body);
        assert!(
            !body.contains("root:") && !body.contains("[package]"),
            "{target}: {body}"
        );
    }
    assert_eq!(http(a, "POST", "/api/info", Some(a)).0, 405);
}

/// A trace of `n` events in many small chunks (pages cross chunk boundaries).
pub(crate) fn multi_chunk_trace(path: &Path, n: u64) {
    trace_with_thread(path, n, "worker")
}

/// [`multi_chunk_trace`] with its one thread named `thread`.
pub(crate) fn trace_with_thread(path: &Path, n: u64, thread: &str) {
    let header = TraceHeader {
        version: 1,
        pid: 7,
        start_unix_ns: 1_700_000_000_000_000_000,
        properties: vec![],
    };
    let out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = TraceWriter::with_chunk_size(out, &header, 2048).unwrap();
    let s = |w: &mut TraceWriter<_>, id: u32, text: &str| {
        w.define(Symbol::String {
            id: StringId(id),
            text: text.into(),
        });
        StringId(id)
    };
    let name = s(&mut w, 0, thread);
    let group = s(&mut w, 1, "main");
    let (class, mname, sig, p) = (
        s(&mut w, 2, "demo.Work"),
        s(&mut w, 3, "step"),
        s(&mut w, 4, "(I)I"),
        s(&mut w, 5, "n"),
    );
    w.define(Symbol::Thread(ThreadSymbol {
        id: ThreadRef(0),
        java_id: 1,
        name,
        group,
        priority: 5,
        daemon: false,
    }));
    w.define(Symbol::Method(MethodSymbol {
        id: MethodId(0),
        class,
        name: mname,
        sig,
        param_names: vec![p],
        modifiers: 8,
    }));
    for i in 0..n / 2 {
        w.write(&Event {
            id: 2 * i + 1,
            time_ns: 1000 * i,
            thread: ThreadRef(0),
            kind: EventKind::Call {
                metrics: Default::default(),
                method: MethodId(0),
                depth: 1,
                caller: None,
                params: vec![JValue::Int(i as i32)],
            },
        })
        .unwrap();
        w.write(&Event {
            id: 2 * i + 2,
            time_ns: 1000 * i + 500,
            thread: ThreadRef(0),
            kind: EventKind::Return {
                metrics: Default::default(),
                method: MethodId(0),
                depth: 1,
                outcome: Outcome::Value(JValue::Int(i as i32)),
                elapsed_ns: 500,
            },
        })
        .unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn serve_pages_across_chunks_and_filters_keep_positions() {
    let dir = scratch("view-chunks");
    let trace = dir.join("chunks.vmv");
    multi_chunk_trace(&trace, 6000);
    let all = jsonl(&trace);
    assert_eq!(all.len(), 6000);
    let served = serve(&trace);
    let info = get_json(&served, "/api/info");
    assert!(
        info["chunks"].as_u64().unwrap() > 10,
        "small chunks: {info}"
    );
    for (offset, limit) in [(0, 7), (995, 30), (2999, 1000), (5990, 100)] {
        let page = get_json(
            &served,
            &format!("/api/events?offset={offset}&limit={limit}"),
        );
        let end = (offset + limit).min(all.len());
        assert_eq!(
            page["events"].as_array().unwrap(),
            &all[offset..end],
            "offset {offset}"
        );
    }
    // The 400th match of a filter, and its place in the whole trace.
    let f = get_json(
        &served,
        &format!(
            "/api/events?filter={}&offset=400&limit=3",
            q("type == RETURN && value >= 100")
        ),
    );
    assert_eq!(f["count"], 2900);
    assert_eq!(ids(&f), vec![1002, 1004, 1006]);
    let loc = get_json(&served, "/api/locate?id=1002");
    assert_eq!(loc["row"], 1001);
    let inf = get_json(
        &served,
        &format!(
            "/api/locate?id=1002&filter={}",
            q("type == RETURN && value >= 100")
        ),
    );
    assert_eq!(inf["row"], 400);
}

/// The JSON of a report's data block.
fn report_data(html: &str) -> Value {
    let open = "<script type=\"application/json\" id=\"vmview-data\">";
    let start = html.find(open).expect("data block") + open.len();
    let end = start + html[start..].find("</script>").expect("end of data block");
    serde_json::from_str(&html[start..end]).expect("data block is JSON")
}

#[test]
fn view_report_embeds_the_trace_safely_and_refuses_large_traces() {
    let rec = hostile();
    let all = rec.events();
    let dir = scratch("view-report");
    let out = dir.join("report.html");
    let o = run(&["view", path_str(&rec.trace), "-o", path_str(&out)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(&out).unwrap();
    // Every payload is inside the JSON block, encoded: no markup of the trace
    // reaches the HTML parser, and the block ends where it should.
    let data = report_data(&html);
    assert_eq!(data["events"].as_array().unwrap(), &all);
    assert_eq!(data["info"]["events"].as_u64(), Some(all.len() as u64));
    for raw in ["<img", "<script>window", "<svg onload", "<iframe", "]]><"] {
        assert!(
            !html.contains(raw),
            "payload {raw:?} reached the HTML unescaped"
        );
    }
    assert_eq!(
        html.matches("<script").count(),
        2,
        "the data block and the page's script"
    );
    assert!(html.contains("Content-Security-Policy"));
    // Nothing from the network: the page outside its data (the embedded
    // flame graph names its namespaces and authors in URLs it never loads).
    let open = html.find("<script type=\"application/json\"").unwrap();
    let close = open + html[open..].find("</script>").unwrap();
    let page = format!("{}{}", &html[..open], &html[close..]);
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "nothing from the network"
    );

    let o = run(&[
        "view",
        path_str(&rec.trace),
        "-o",
        path_str(&dir.join("no.html")),
        "--max-events",
        "10",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("at most 10") && err.contains("vmview serve"),
        "{err}"
    );
    assert!(!dir.join("no.html").exists());
}

/// Where the browser tests keep their screenshots (CI keeps target/).
fn screenshots() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/screenshots")
}

/// Runs tests/browser/view.mjs on `url`; its findings as JSON. `None` when
/// the browser tools are missing and VMVIEW_SKIP_BROWSER is set.
fn browse(
    url: &str,
    name: &str,
    filter: &str,
    search: &str,
    hostile: bool,
    parity: &[&str],
) -> Option<Value> {
    browse_spec(
        url,
        name,
        serde_json::json!({"filter": filter, "search": search, "hostile": hostile, "parity": parity}),
    )
}

/// Runs tests/browser/view.mjs with `spec` (url, npm and screenshot
/// directory added).
pub(crate) fn browse_spec(url: &str, name: &str, mut spec: Value) -> Option<Value> {
    let npm = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/npm");
    let missing: Vec<&str> = [
        (!Path::new("/usr/bin/chromium").exists())
            .then_some("/usr/bin/chromium (Debian package chromium)"),
        (!npm.join("node_modules/playwright-core").exists())
            .then_some("playwright-core in target/npm"),
        Command::new("node")
            .arg("--version")
            .output()
            .is_err()
            .then_some("node"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !missing.is_empty() {
        if std::env::var_os("VMVIEW_SKIP_BROWSER").is_some() {
            eprintln!("skipping the browser test: missing {missing:?}");
            return None;
        }
        panic!("browser test needs {missing:?}: run `bash .ci/run` (or set VMVIEW_SKIP_BROWSER=1)");
    }
    spec["npm"] = serde_json::json!(npm);
    spec["url"] = serde_json::json!(url);
    spec["shots"] = serde_json::json!(screenshots());
    spec["name"] = serde_json::json!(name);
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/browser")
        .join(spec["script"].as_str().unwrap_or("view.mjs"));
    let o = Command::new("node")
        .arg(script)
        .arg(spec.to_string())
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let v: Value = serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|e| {
        panic!(
            "view.mjs: {e}\nstdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    assert!(
        v["failure"].is_null(),
        "{name}: {}\nconsole: {}",
        v["failure"],
        v["console"]
    );
    assert_eq!(v["errors"], serde_json::json!([]), "{name}: page errors");
    Some(v)
}

/// What every run of the page must show, served or as a report.
fn check_page(v: &Value, all: &[Value], filter_count: u64, search_ids: &[u64], url_prefix: &str) {
    assert_eq!(v["total"].as_u64(), Some(all.len() as u64));
    let rows = v["rows_in_dom"].as_u64().unwrap();
    assert!(
        rows > 5 && rows < 60,
        "only visible rows are in the DOM: {rows}"
    );
    assert!(v["error_text"]
        .as_str()
        .unwrap()
        .contains("unknown event type CALX"));
    assert!(
        v["error_text"].as_str().unwrap().contains("^^^^"),
        "the error points at the culprit"
    );
    assert_eq!(v["filtered"].as_u64(), Some(filter_count));
    assert!(v["step1"]
        .as_str()
        .unwrap()
        .starts_with(&format!("match 1 of {}", search_ids.len())));
    assert_eq!(v["step1_id"].as_u64(), Some(search_ids[0]));
    assert_eq!(v["step2_id"].as_u64(), Some(search_ids[1]));
    assert_eq!(
        v["step2_selected_marked"], 1,
        "the current match is selected and marked"
    );
    assert!(v["step3"].as_str().unwrap().starts_with("match 1 "));
    // The clicked filtered event, among its unfiltered neighbours.
    let target = v["context_target"].as_u64().unwrap();
    assert_eq!(v["context_count"].as_u64(), Some(all.len() as u64));
    let ctx: Vec<u64> = v["context_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_u64().unwrap())
        .collect();
    let pos = all
        .iter()
        .position(|e| e["id"].as_u64() == Some(target))
        .unwrap();
    for near in [pos.saturating_sub(1), pos + 1] {
        if let Some(e) = all.get(near) {
            assert!(
                ctx.contains(&e["id"].as_u64().unwrap()),
                "neighbour of #{target} shown: {ctx:?}"
            );
        }
    }
    assert_eq!(
        v["arrow_down"].as_u64(),
        all.get(pos + 1).and_then(|e| e["id"].as_u64()),
        "↓ moves to the next event"
    );
    assert!(v["hash_in_context"]
        .as_str()
        .unwrap()
        .contains(&format!("event={target}")));
    assert_eq!(
        v["shared_selected"].as_u64(),
        Some(target),
        "a shared URL selects the event"
    );
    assert!(v["one_click_filter"]
        .as_str()
        .unwrap()
        .starts_with("type == "));
    for view in ["exceptions", "calltree", "locks", "threads", "stats"] {
        assert!(
            !v["views"][view].as_str().unwrap_or("").is_empty(),
            "{view}"
        );
    }
    assert!(v["views"]["reactions"]
        .as_str()
        .unwrap()
        .contains("need SAMPLE events"));
    assert!(v["flame_frames"].as_u64().unwrap() > 2, "flame graph drawn");
    assert!(
        v["timeline_slices"].as_u64().unwrap() > 0,
        "timeline drawn: {}",
        v["timeline_tracks"]
    );
    // Nothing but the page's own origin.
    for r in v["requests"].as_array().unwrap() {
        let r = r.as_str().unwrap();
        assert!(
            r.starts_with(url_prefix) || r.starts_with("blob:") || r.starts_with("data:"),
            "request to {r}"
        );
    }
}

#[test]
fn browser_page_filters_searches_opens_context_and_every_view() {
    let rec = record(&["--classes", "fx.*"], &[], "fx.Dataflow", &[]);
    assert!(
        rec.output.status.success(),
        "record failed: {}",
        rec.stderr()
    );
    let all = rec.events();
    let filter = "type == THROW || (type == CALL && method == \"check\")";
    let search = "type == THROW";
    let count = run(&["search", path_str(&rec.trace), "--count", filter]);
    let filter_count: u64 = String::from_utf8_lossy(&count.stdout)
        .trim()
        .parse()
        .unwrap();
    let search_ids: Vec<u64> = all
        .iter()
        .filter(|e| e["type"] == "THROW")
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    assert!(filter_count > 100 && search_ids.len() > 2);

    let served = serve(&rec.trace);
    let url = format!("http://{}/", served.addr);
    let Some(v) = browse(&url, "served", filter, search, false, &[]) else {
        return;
    };
    check_page(&v, &all, filter_count, &search_ids, &url);

    let report = scratch("view-browser").join("dataflow.html");
    let o = run(&["view", path_str(&rec.trace), "-o", path_str(&report)]);
    assert!(o.status.success());
    let url = format!("file://{}", report.display());
    let v = browse(&url, "report", filter, search, false, PARITY).unwrap();
    check_page(&v, &all, filter_count, &search_ids, &url);
    // The report's JavaScript port of the filter language selects what the
    // Rust filter selects.
    for expr in PARITY {
        let o = run(&["search", path_str(&rec.trace), "--count", expr]);
        let want: u64 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
        assert!(
            want > 0 || *expr == "type == THROW && catch_class == null",
            "{expr} selects something"
        );
        assert_eq!(v["parity"][expr], want, "report filter {expr}");
    }
}

#[test]
fn browser_reactions_page_shows_the_handlers_callbacks_and_trie() {
    let rec = record(
        &["--events", "samples", "--interval", "5ms"],
        &[],
        "fx.Reactions",
        &["1000"],
    );
    assert!(rec.output.status.success(), "{}", rec.stderr());
    let served = serve(&rec.trace);
    let url = format!("http://{}/", served.addr);
    let spec = serde_json::json!({"only_views": ["reactions"]});
    let Some(v) = browse_spec(&url, "reactions", spec) else {
        return;
    };
    let page = v["views"]["reactions"].as_str().unwrap();
    for needle in [
        "Event handlers",
        "NODE_WAIT",
        "fx.Reactions$OrderLoop.handleOrder",
        "fx.Reactions$OrderLoop.run",
        "Callbacks",
        "fx.Reactions$ByValue.compare",
        "Trie of user calls",
        "orders",
    ] {
        assert!(page.contains(needle), "{needle} missing from {page}");
    }
    // The report embeds the same analysis.
    let report = scratch("view-reactions").join("reactions.html");
    let o = run(&["view", path_str(&rec.trace), "-o", path_str(&report)]);
    assert!(o.status.success());
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("NODE_WAIT") && html.contains("handleOrder"));
}

/// Expressions on which the report's filter must agree with `vmview search`.
const PARITY: &[&str] = &[
    "type in [CALL, RETURN] && method ~ \"^(check|price)$\"",
    "!(type == CALL) && elapsed_ns > 1us",
    "type == THROW && catch_class == null",
    "MTD == \"price\" && PARAM == 5",
    "thread ~ \"ma.n\" && not (type in [CALL, RETURN])",
    "message ~ \"multiple of 5: 1[0-9]$\"",
    "type == CALL && depth >= 2 && param_name == \"sku\"",
    "type == RETURN && value == \"apple\" || type == CATCH",
    // The Rust lexer's numbers (`_` separators) and string escapes (an
    // unknown escape is kept): the port once refused both.
    "elapsed_ns > 1_000ns && method =~ \"^\\w+e\\w*$\"",
];

#[test]
fn browser_runs_no_script_from_a_hostile_trace() {
    let rec = hostile();
    let all = rec.events();
    let filter = "type == THROW";
    let search = "message ~ \"img\"";
    let filter_count = all.iter().filter(|e| e["type"] == "THROW").count() as u64;
    let search_ids: Vec<u64> = all
        .iter()
        .filter(|e| {
            e["type"] == "THROW" && e["message"].as_str().is_some_and(|m| m.contains("img"))
        })
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    let served = serve(&rec.trace);
    let url = format!("http://{}/", served.addr);
    let report = scratch("view-hostile").join("hostile.html");
    assert!(
        run(&["view", path_str(&rec.trace), "-o", path_str(&report)])
            .status
            .success()
    );
    let file_url = format!("file://{}", report.display());
    for (name, url) in [
        ("hostile-served", url.as_str()),
        ("hostile-report", file_url.as_str()),
    ] {
        let Some(v) = browse(url, name, filter, search, true, &[]) else {
            return;
        };
        check_page(&v, &all, filter_count, &search_ids, url);
        // The payloads were on screen, as text, and none of them ran.
        let shown = v["hostile_rows_text"].as_str().unwrap().to_string()
            + v["hostile_detail_text"].as_str().unwrap();
        assert!(
            shown.contains("onerror="),
            "{name}: hostile strings shown as text"
        );
        assert!(
            v["hostile_steps"].as_u64().unwrap() > 20,
            "{name}: stepped through the hostile events"
        );
        assert!(
            v["pwned"].is_null(),
            "{name}: an injected script ran: {}",
            v["pwned"]
        );
        assert!(!v["title"].as_str().unwrap().contains("pwned"), "{name}");
        assert_eq!(
            v["img_elements"], 0,
            "{name}: no element from the trace's markup"
        );
        assert!(v["script_elements"].as_u64().unwrap() <= 2, "{name}");
    }
}

/// The browser view and `vmview reactions --format json` serialize the same
/// analysis struct: before, the view built its own JSON (joined
/// `Class.method` names, other keys) and the two drifted apart.
#[test]
fn view_reactions_use_the_schema_of_reactions_json() {
    let rec = record(
        &["--events", "samples", "--interval", "5ms"],
        &[],
        "fx.Reactions",
        &["1000"],
    );
    assert!(rec.output.status.success(), "{}", rec.stderr());
    let out = run(&["reactions", path_str(&rec.trace), "--format", "json"]);
    assert!(out.status.success());
    let cli: Value = serde_json::from_slice(&out.stdout).unwrap();
    let served = serve(&rec.trace);
    let views = get_json(&served, "/api/views");
    let view = &views["reactions"];
    assert!(
        !cli["handlers"].as_array().unwrap().is_empty(),
        "fx.Reactions has handlers"
    );
    for key in [
        "samples",
        "ticks",
        "run_samples",
        "duration_ns",
        "handlers",
        "callbacks",
        "threads",
    ] {
        assert_eq!(
            view[key], cli[key],
            "{key} differs between the view and the CLI"
        );
    }
    // The view cuts the trie to its most sampled nodes; the root is the same.
    for key in ["class", "method", "own", "total"] {
        assert_eq!(view["trie"][key], cli["trie"][key], "trie.{key}");
    }
    assert!(view.get("timing").is_none() && cli.get("timing").is_some());
}
