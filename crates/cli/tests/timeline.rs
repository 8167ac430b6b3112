//! The browser view's timeline and flame graph, on a trace written here
//! with known times (so every slice's place is predicted, whatever the
//! machine's load): the server's per-pixel summaries over HTTP, and the
//! page in headless Chromium (tests/browser/timeline.mjs), served and as a
//! report. The trace's thread name, class and String argument are hostile
//! markup: they must be drawn as text and never run.

use std::path::Path;

use serde_json::{json, Value};
use vmview_format::{
    Event, EventKind, Loc, MethodId, MethodSymbol, Monitor, Outcome, StringId, Symbol, ThreadRef,
    ThreadSymbol, TraceHeader, TraceWriter, Value as JValue,
};

use crate::support::{path_str, run, scratch};
use crate::view::{browse_spec, http, serve, serve_with};

const MS: u64 = 1_000_000;
/// Thread `beta`'s name: markup that would run if it reached innerHTML.
const HOSTILE_THREAD: &str = "beta<img src=x onerror=\"window.__pwned='thread'\">";
const HOSTILE_ARG: &str = "</script><script>window.__pwned='arg'</script><b>x";

/// Thread `alpha`: `demo.Outer.run()` from 1 ms to 9 ms, holding eight
/// `demo.inner.Work.step(int n)` calls of 0.5 ms at 1.1, 2.1 … 8.1 ms
/// (returning 2n), and a THROW at 5.2 ms. Thread `beta…`: `run()` from 2 to
/// 3 ms holding `other.Io.read(String)` from 2.1 to 2.9 ms, and a
/// contended monitor entered at 2.95 ms after 40 µs. Thread CPU time runs
/// at half the wall clock.
fn timeline_trace(path: &Path) {
    let header = TraceHeader {
        version: 1,
        pid: 7,
        start_unix_ns: 1_700_000_000_000_000_000,
        properties: vec![],
    };
    let out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = TraceWriter::with_chunk_size(out, &header, 4096).unwrap();
    let strings = [
        "alpha",
        HOSTILE_THREAD,
        "main",
        "demo.Outer",
        "run",
        "()V",
        "demo.inner.Work",
        "step",
        "(I)I",
        "n",
        "other.Io<svg onload=alert(1)>",
        "read",
        "(Ljava/lang/String;)V",
        "s",
        "demo.Boom",
        "java.lang.Object",
    ];
    for (i, t) in strings.iter().enumerate() {
        w.define(Symbol::String {
            id: StringId(i as u32),
            text: t.to_string(),
        });
    }
    for (id, name) in [(0, 0), (1, 1)] {
        w.define(Symbol::Thread(ThreadSymbol {
            id: ThreadRef(id),
            java_id: i64::from(id) + 1,
            name: StringId(name),
            group: StringId(2),
            priority: 5,
            daemon: false,
        }));
    }
    for (id, class, name, sig, params) in [
        (0, 3, 4, 5, vec![]),
        (1, 6, 7, 8, vec![StringId(9)]),
        (2, 10, 11, 12, vec![StringId(13)]),
    ] {
        w.define(Symbol::Method(MethodSymbol {
            id: MethodId(id),
            class: StringId(class),
            name: StringId(name),
            sig: StringId(sig),
            param_names: params,
            modifiers: 1,
        }));
    }
    let mut evs: Vec<(u64, u32, EventKind)> = Vec::new();
    let call = |m: u32, depth: u32, params: Vec<JValue>| EventKind::Call {
        method: MethodId(m),
        depth,
        caller: None,
        params,
        metrics: Default::default(),
    };
    let ret = |m: u32, depth: u32, outcome: Outcome, elapsed_ns: u64| EventKind::Return {
        method: MethodId(m),
        depth,
        outcome,
        elapsed_ns,
        metrics: Default::default(),
    };
    evs.push((MS, 0, call(0, 1, vec![])));
    for k in 0..8u64 {
        let t = MS + k * MS + MS / 10;
        evs.push((t, 0, call(1, 2, vec![JValue::Int(k as i32)])));
        evs.push((
            t + MS / 2,
            0,
            ret(1, 2, Outcome::Value(JValue::Int(2 * k as i32)), MS / 2),
        ));
    }
    evs.push((
        5 * MS + MS / 5,
        0,
        EventKind::Throw {
            exception: StringId(14),
            message: Some("boom".into()),
            method: MethodId(0),
            loc: Loc { bci: 3, line: None },
            catch: None,
        },
    ));
    evs.push((9 * MS, 0, ret(0, 1, Outcome::Void, 8 * MS)));
    evs.push((2 * MS, 1, call(0, 1, vec![])));
    evs.push((
        2 * MS + MS / 10,
        1,
        call(
            2,
            2,
            vec![JValue::Str {
                text: HOSTILE_ARG.into(),
                full_len: None,
            }],
        ),
    ));
    evs.push((
        2 * MS + 9 * MS / 10,
        1,
        ret(2, 2, Outcome::Void, 8 * MS / 10),
    ));
    evs.push((
        2 * MS + 95 * MS / 100,
        1,
        EventKind::MonitorContendedEntered {
            monitor: Monitor {
                class: StringId(15),
                hash: 1,
            },
            wait_ns: 40_000,
        },
    ));
    evs.push((3 * MS, 1, ret(0, 1, Outcome::Void, MS)));
    evs.sort_by_key(|e| e.0);
    // The threads' CPU clocks run at half the wall clock.
    for (t, _, kind) in &mut evs {
        if let EventKind::Call { metrics, .. } | EventKind::Return { metrics, .. } = kind {
            metrics.cpu_ns = Some(*t / 2);
        }
    }
    for (i, (time_ns, thread, kind)) in evs.into_iter().enumerate() {
        w.write(&Event {
            id: i as u64 + 1,
            time_ns,
            thread: ThreadRef(thread),
            kind,
        })
        .unwrap();
    }
    w.finish().unwrap();
}

fn get(addr: &str, target: &str) -> Value {
    let (status, _, body) = http(addr, "GET", target, Some(addr));
    assert_eq!(status, 200, "{target}: {}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap()
}

/// The API at two zoom levels and one range's tree, as the fixture
/// predicts.
#[test]
fn serve_timeline_summarises_per_pixel_and_trees_a_range() {
    let trace = scratch("timeline-api").join("tl.vmv");
    timeline_trace(&trace);
    let served = serve(&trace);
    let a = served.addr.as_str();
    // The index is built in the background: a 503 means "not yet".
    let mut v = Value::Null;
    for _ in 0..600 {
        let (status, _, body) = http(
            a,
            "GET",
            "/api/timeline?from=0&to=10000000&px=1000",
            Some(a),
        );
        if status == 200 {
            v = serde_json::from_slice(&body).unwrap();
            // While the index is built, answers show the part read so far.
            if v["partial"].is_null() {
                break;
            }
        } else {
            assert_eq!(status, 503);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let tracks = v["tracks"].as_array().expect("tracks");
    let names: Vec<&str> = tracks.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["alpha", HOSTILE_THREAD]);
    // 10 µs a pixel: every call is its own slice.
    let alpha = tracks[0]["slices"].as_array().unwrap();
    assert_eq!(alpha.len(), 9, "{alpha:?}");
    assert_eq!(alpha[0], json!([MS, 9 * MS, 0, 0, 1, alpha[0][5], 1]));
    assert_eq!(alpha[4][0], 4 * MS + MS / 10);
    assert_eq!(alpha[4][1], 4 * MS + 6 * MS / 10);
    assert_eq!(tracks[0]["markers"].as_array().unwrap().len(), 1);
    assert_eq!(tracks[1]["markers"][0][0], 2 * MS + 91 * MS / 100);
    // 10 pixels over 10 ms: one pixel a ms, each step() alone in its pixel
    // (under a pixel: a bucket of one), run() wide.
    let v = get(a, "/api/timeline?from=0&to=10000000&px=10");
    let alpha = v["tracks"][0]["slices"].as_array().unwrap();
    assert_eq!(alpha.len(), 9);
    // 2 pixels: steps 0-3 in the first, 4-7 in the second.
    let v = get(a, "/api/timeline?from=1000000&to=9000000&px=2");
    let steps: Vec<&Value> = v["tracks"][0]["slices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s[2] == 1)
        .collect();
    assert_eq!(steps.len(), 2, "{steps:?}");
    assert_eq!(steps[0][6], 4);
    assert_eq!(steps[1][6], 4);
    // The tree of 2.0–4.0 ms: steps 1 and 2 whole; beta's read() whole.
    let t = get(a, "/api/tree?from=2000000&to=4000000");
    let alpha = &t["calltree"]["threads"][0];
    assert_eq!(alpha["thread"], "alpha");
    let step = &alpha["tree"]["children"][0]["children"][0];
    assert_eq!(step["name"], "demo.inner.Work.step");
    assert_eq!(step["calls"], 2);
    assert_eq!(step["wall_incl_ns"], MS);
    assert_eq!(t["monitors"][0]["contentions"], 1);
    // Events by id, for the hover.
    let e = get(a, "/api/byid?ids=3,2");
    assert_eq!(e["events"][0]["type"], "CALL", "step(0) at 1.1 ms");
    assert_eq!(e["events"][1]["type"], "RETURN");
    assert_eq!(e["events"][1]["value"], 0);
}

/// The page: tracks and slices drawn as predicted, zoom and pan, hover,
/// a click that opens the event, a range that restricts the flame graph,
/// the flame graph's search, zoom and sandwich; screenshots in
/// target/screenshots; nothing hostile runs.
#[test]
fn browser_timeline_draws_zooms_opens_and_restricts_the_flame_graph() {
    let dir = scratch("timeline-browser");
    let trace = dir.join("tl.vmv");
    timeline_trace(&trace);
    let served = serve(&trace);
    let report = dir.join("tl.html");
    assert!(run(&["view", path_str(&trace), "-o", path_str(&report)])
        .status
        .success());
    let served_url = format!("http://{}/#view=timeline", served.addr);
    let report_url = format!("file://{}#view=timeline", report.display());
    for (name, url) in [
        ("timeline-served", served_url),
        ("timeline-report", report_url),
    ] {
        let Some(v) = browse_spec(
            &url,
            name,
            json!({"script": "timeline.mjs", "hostile_thread": HOSTILE_THREAD}),
        ) else {
            return;
        };
        assert_eq!(
            v["tracks"],
            json!(["alpha", HOSTILE_THREAD]),
            "{name}: a track per thread, in order"
        );
        assert_eq!(
            v["alpha_levels"],
            json!([0, 1, 1, 1, 1, 1, 1, 1, 1]),
            "{name}"
        );
        assert_eq!(
            v["beta_methods"],
            json!(["demo.Outer.run", "other.Io<svg onload=alert(1)>.read"]),
            "{name}"
        );
        let (f0, t0) = (
            v["whole"][0].as_f64().unwrap(),
            v["whole"][1].as_f64().unwrap(),
        );
        let (f1, t1) = (
            v["zoomed"][0].as_f64().unwrap(),
            v["zoomed"][1].as_f64().unwrap(),
        );
        assert!(t1 - f1 < (t0 - f0) * 0.7, "{name}: W zooms in: {v}");
        let (f2, t2) = (
            v["panned"][0].as_f64().unwrap(),
            v["panned"][1].as_f64().unwrap(),
        );
        assert!(
            f2 > f1 && ((t2 - f2) - (t1 - f1)).abs() < 2.0,
            "{name}: D pans right: {v}"
        );
        assert!(
            v["wheeled_span"].as_f64().unwrap() < t2 - f2,
            "{name}: the wheel zooms in"
        );
        let tip = v["tip"].as_str().unwrap();
        assert!(
            tip.contains("demo.inner.Work.step(I)I")
                && tip.contains("n: int = 3")
                && tip.contains("returned 6"),
            "{name}: {tip}"
        );
        assert_eq!(
            v["clicked_id"], v["opened_id"],
            "{name}: the clicked call opens"
        );
        assert_eq!(v["opened_type"], "CALL");
        // The whole trace: eight step() calls, 4 ms of the 9 ms traced.
        assert_eq!(v["flame_whole_step_calls"], 8, "{name}");
        assert!(
            v["flame_match"].as_str().unwrap().contains("44.4%"),
            "{name}: {}",
            v["flame_match"]
        );
        // The range around steps 1 and 2 only.
        assert_eq!(v["flame_range_step_calls"], 2, "{name}: {v}");
        assert_eq!(v["flame_range_step_ns"], 2 * MS / 2, "{name}");
        assert_eq!(v["flame_zoom"], "demo.Outer.run", "{name}");
        // CPU: half of alpha's 8 ms and of beta's 1 ms.
        assert_eq!(v["flame_cpu_total"], 9 * MS / 2, "{name}");
        assert_eq!(
            v["sandwich_callers"],
            json!(["demo.inner.Work.step", "demo.Outer.run", "alpha"]),
            "{name}"
        );
        assert!(
            v["pwned"].is_null(),
            "{name}: a trace string ran: {}",
            v["pwned"]
        );
        assert_eq!(
            v["injected"], 0,
            "{name}: no element from the trace's markup"
        );
    }
}

/// The browser view's call trees and `vmview calltree --format json`
/// serialize the same analysis struct (issue #19: the view built its own
/// JSON, with other keys, and the two could drift apart); the tree of a
/// range that covers the whole trace has the same calls and times.
#[test]
fn view_calltree_uses_the_schema_of_calltree_json() {
    let trace = scratch("timeline-schema").join("tl.vmv");
    timeline_trace(&trace);
    let out = run(&["calltree", path_str(&trace), "--format", "json"]);
    assert!(out.status.success());
    let cli: Value = serde_json::from_slice(&out.stdout).unwrap();
    let served = serve(&trace);
    let a = served.addr.as_str();
    let mut views = Value::Null;
    for _ in 0..600 {
        let (status, _, body) = http(a, "GET", "/api/views", Some(a));
        if status == 200 {
            views = serde_json::from_slice(&body).unwrap();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(views["calltree"]["threads"], cli["threads"], "{views}");
    let t = loop {
        let (status, _, body) = http(a, "GET", "/api/tree?from=0&to=10000000", Some(a));
        if status == 200 {
            break serde_json::from_slice::<Value>(&body).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    // Calls and wall times agree; a range's tree counts no `records` and
    // keeps no CPU time (the timeline's slices do not hold metrics).
    fn strip(v: &mut Value) {
        if let Some(o) = v.as_object_mut() {
            for k in ["records", "cpu_incl_ns", "cpu_excl_ns"] {
                o.remove(k);
            }
            for c in o.values_mut() {
                strip(c);
            }
        } else if let Some(a) = v.as_array_mut() {
            a.iter_mut().for_each(strip);
        }
    }
    let (mut range, mut whole) = (t["calltree"]["threads"].clone(), cli["threads"].clone());
    strip(&mut range);
    strip(&mut whole);
    assert_eq!(range, whole);
}

/// The first answer of `/api/timeline` over the fixture's 10 ms, once the
/// index is built (503 until then).
fn first_timeline(addr: &str) -> Value {
    for _ in 0..1200 {
        let (status, _, body) = http(
            addr,
            "GET",
            "/api/timeline?from=0&to=10000000&px=1000",
            Some(addr),
        );
        if status == 200 {
            let v: Value = serde_json::from_slice(&body).unwrap();
            // While the index is built, answers show the part read so far.
            if v["partial"].is_null() {
                return v;
            }
        } else {
            assert_eq!(status, 503, "{}", String::from_utf8_lossy(&body));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("the timeline's index was not built in 2 minutes");
}

/// Polls the answer until the server says it saved the index (written
/// under a temporary name and renamed: then the file is whole).
fn wait_saved(addr: &str) -> std::path::PathBuf {
    for _ in 0..1200 {
        let v = first_timeline(addr);
        if let Some(f) = v["index"]["saved"].as_str() {
            return f.into();
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("the timeline's index was not saved in 2 minutes");
}

fn without_index(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("index");
    v
}

/// `serve --timeline-cache DIR` saves the index it built; the next serve
/// of the same trace reads it instead of the trace (same answer); a saved
/// index that is damaged, or older than the trace, is rebuilt from the
/// trace and saved again; `off` neither reads nor saves one.
#[test]
fn serve_saves_the_timeline_index_and_rebuilds_a_stale_or_damaged_one() {
    let dir = scratch("timeline-cache");
    let trace = dir.join("tl.vmv");
    timeline_trace(&trace);
    let cache = dir.join("cache");
    let flags = ["--timeline-cache", path_str(&cache)];

    let served = serve_with(&trace, &flags);
    let built = first_timeline(&served.addr);
    assert_eq!(built["index"]["from"], "trace");
    assert!(built["index"]["rebuilt"].is_null());
    let file = wait_saved(&served.addr);
    drop(served);
    assert!(file.starts_with(&cache), "{}", file.display());
    let built = without_index(built);
    assert_eq!(built["tracks"][0]["slices"].as_array().unwrap().len(), 9);

    let served = serve_with(&trace, &flags);
    let read = first_timeline(&served.addr);
    assert_eq!(read["index"]["from"], "saved", "{}", read["index"]);
    assert_eq!(read["index"]["file"], path_str(&file));
    assert_eq!(without_index(read), built);
    let a = served.addr.as_str();
    let t = get(a, "/api/tree?from=2000000&to=4000000");
    let step = &t["calltree"]["threads"][0]["tree"]["children"][0]["children"][0];
    assert_eq!(step["name"], "demo.inner.Work.step");
    assert_eq!(step["wall_incl_ns"], MS);
    drop(served);

    // One byte of a slice flipped: the checksum no longer holds.
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    std::fs::write(&file, &bytes).unwrap();
    let served = serve_with(&trace, &flags);
    let rebuilt = first_timeline(&served.addr);
    assert_eq!(rebuilt["index"]["from"], "trace");
    let why = rebuilt["index"]["rebuilt"].as_str().unwrap_or_default();
    assert!(why.starts_with("is damaged"), "{why}");
    assert_eq!(without_index(rebuilt), built);
    assert_eq!(wait_saved(&served.addr), file);
    drop(served);

    // The trace's time moved: the index may not be its index any more.
    let when = std::fs::metadata(&trace).unwrap().modified().unwrap();
    std::fs::File::options()
        .write(true)
        .open(&trace)
        .unwrap()
        .set_modified(when - std::time::Duration::from_secs(10))
        .unwrap();
    let served = serve_with(&trace, &flags);
    let rebuilt = first_timeline(&served.addr);
    let why = rebuilt["index"]["rebuilt"].as_str().unwrap_or_default();
    assert_eq!(why, "is out of date (the trace changed since it was saved)");
    assert_eq!(without_index(rebuilt), built);
    wait_saved(&served.addr);
    drop(served);

    // `off`: the valid saved index is not read.
    let served = serve_with(&trace, &["--timeline-cache", "off"]);
    let fresh = first_timeline(&served.addr);
    assert_eq!(fresh["index"], json!({"from": "trace"}));
}

/// While the index is built, `/api/timeline` shows the part of the trace
/// read so far: a prefix of the complete answer, open calls cut at the
/// last event read, with its progress. The build pauses 1 s after each
/// chunk (`VMVIEW_TEST_INDEX_PAUSE_MS`, for this test only), so it
/// outlasts the polls every 50 ms however loaded the machine.
#[test]
fn serve_shows_the_part_read_while_the_timeline_index_builds() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let dir = scratch("timeline-partial");
    let trace = dir.join("many.vmv");
    // 1,000 calls of 500 ns, one every µs, in chunks of 2 KiB.
    crate::view::multi_chunk_trace(&trace, 2000);
    let mut child = Command::new(crate::support::vmview())
        .args([
            "serve",
            path_str(&trace),
            "--port",
            "0",
            "--timeline-cache",
            "off",
        ])
        .env("VMVIEW_TEST_INDEX_PAUSE_MS", "1000")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start vmview serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|s| s.split('/').next())
        .unwrap()
        .to_string();
    let served = crate::view::Served { child, addr };
    let a = served.addr.as_str();
    // 125 ns a pixel: every call is its own slice.
    let target = "/api/timeline?from=0&to=1000000&px=8000";
    let mut partial = None;
    let complete = loop {
        let (status, _, body) = http(a, "GET", target, Some(a));
        if status == 200 {
            let v: Value = serde_json::from_slice(&body).unwrap();
            if v["partial"].is_null() {
                break v;
            }
            partial.get_or_insert(v);
        } else {
            assert_eq!(status, 503, "{}", String::from_utf8_lossy(&body));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let partial = partial.expect("a partial answer while the index was built");
    let progress = partial["partial"]["progress"].as_f64().unwrap();
    assert!(progress > 0.0 && progress < 1.0, "{progress}");
    assert_eq!(partial["tracks"][0]["name"], "worker");
    let read_to = partial["end_ns"].as_u64().unwrap();
    assert!(read_to < complete["end_ns"].as_u64().unwrap());
    let slices = |v: &Value| v["tracks"][0]["slices"].as_array().unwrap().clone();
    let (part, whole) = (slices(&partial), slices(&complete));
    assert_eq!(whole.len(), 1000);
    assert!(
        !part.is_empty() && part.len() < whole.len(),
        "{}",
        part.len()
    );
    // What was read is the complete answer's beginning; a call still open
    // when the chunk ended (its RETURN in the next) ends at the last event.
    for (k, s) in part.iter().enumerate() {
        if s[1].as_u64() == Some(read_to) && k + 1 == part.len() {
            assert_eq!(s[0], whole[k][0]);
        } else {
            assert_eq!(s, &whole[k], "slice {k}");
        }
    }
}

/// `record --timeline-cache DIR` saves the recorded trace's timeline
/// index after the JVM exits, where `serve` looks: the first serve of the
/// fresh trace reads it (never a partial answer) and answers as a serve
/// that builds its own index from the trace.
#[test]
fn a_recorded_trace_has_its_timeline_index_for_its_first_serve() {
    let cache = scratch("timeline-record").join("cache");
    let rec = crate::support::record(
        &[
            "--classes",
            "fx.CallTree*",
            "--timeline-cache",
            path_str(&cache),
        ],
        &[],
        "fx.CallTree",
        &[],
    );
    assert!(rec.output.status.success(), "stderr: {}", rec.stderr());
    let stderr = rec.stderr();
    let line = stderr
        .lines()
        .find(|l| l.starts_with("vmview: saved the timeline index to "))
        .unwrap_or_else(|| panic!("record said nothing of the index: {stderr}"));
    let saved: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert!(line.contains(path_str(&saved[0])), "{line}");

    let served = serve_with(&rec.trace, &["--timeline-cache", path_str(&cache)]);
    let target = "/api/timeline?px=1000";
    let read = (0..1200)
        .find_map(|_| {
            let (status, _, body) = http(&served.addr, "GET", target, Some(&served.addr));
            if status == 200 {
                let v: Value = serde_json::from_slice(&body).unwrap();
                assert!(v["partial"].is_null(), "a partial answer: {}", v["index"]);
                return Some(v);
            }
            // Reading the saved file may outlast the server's first wait.
            assert_eq!(status, 503, "{}", String::from_utf8_lossy(&body));
            std::thread::sleep(std::time::Duration::from_millis(100));
            None
        })
        .expect("the saved index was not read in 2 minutes");
    assert_eq!(read["index"]["from"], "saved", "{}", read["index"]);
    assert_eq!(read["index"]["file"], path_str(&saved[0]));
    drop(served);

    // The same question to a serve that reads the trace itself.
    let served = serve_with(&rec.trace, &["--timeline-cache", "off"]);
    let built = (0..1200)
        .find_map(|_| {
            let (status, _, body) = http(&served.addr, "GET", target, Some(&served.addr));
            let v: Value = serde_json::from_slice(&body).unwrap();
            if status == 200 && v["partial"].is_null() {
                return Some(v);
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
            None
        })
        .expect("the timeline's index was not built in 2 minutes");
    assert_eq!(built["index"]["from"], "trace");
    let built = without_index(built);
    assert!(!built["tracks"].as_array().unwrap().is_empty(), "{built}");
    assert_eq!(without_index(read), built);
}
