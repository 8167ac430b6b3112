//! `vmview filter`, `vmview search` and `vmview show --around` on real
//! recordings: every selection is checked against the same selection done
//! here over the JSON Lines of the whole trace (an independent
//! implementation of each expression as a Rust closure), on binary and on
//! XML input; a binary → XML → filter → binary round trip keeps ids and
//! values; filtering a trace ten times larger does not need more memory.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use serde_json::Value;
use vmview_format::{
    Event, EventKind, Loc, MethodId, MethodSymbol, Outcome, StringId, Symbol, ThreadRef,
    ThreadSymbol, TraceHeader, TraceWriter, Value as JValue,
};

use crate::support::{jsonl, path_str, peak_rss_kib, record, run, scratch, Recording};
use crate::xml::{export, hostile_strings};

fn exceptions() -> Recording {
    let rec = record(&["--classes", "fx.*"], &[], "fx.Exceptions", &[]);
    assert!(
        rec.output.status.success(),
        "record failed: {}",
        rec.stderr()
    );
    rec
}

/// `vmview filter INPUT --format jsonl EXPR`, parsed.
fn filter_jsonl(input: &Path, expr: &str) -> Vec<Value> {
    let out = run(&["filter", path_str(input), "--format", "jsonl", expr]);
    assert!(
        out.status.success(),
        "vmview filter {expr:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

fn s<'a>(e: &'a Value, k: &str) -> &'a str {
    e[k].as_str().unwrap_or("\u{0}absent")
}

fn n(e: &Value, k: &str) -> Option<i64> {
    e[k].as_i64()
}

/// Expressions over several fields and event types, each with the same
/// selection written as a closure over the JSON Lines objects.
#[allow(clippy::type_complexity)]
fn cases() -> Vec<(&'static str, Box<dyn Fn(&Value) -> bool>)> {
    vec![
        (
            r#"(type in [CALL, RETURN]) && class ~ "^fx\\." && method ~ "^level[23]$""#,
            Box::new(|e| {
                ["CALL", "RETURN"].contains(&s(e, "type"))
                    && s(e, "class").starts_with("fx.")
                    && ["level2", "level3"].contains(&s(e, "method"))
            }),
        ),
        (
            r#"type == THROW && catch_class == null || type == CATCH && exception ~ "Number""#,
            Box::new(|e| {
                (s(e, "type") == "THROW" && e["catch_class"].is_null())
                    || (s(e, "type") == "CATCH" && s(e, "exception").contains("Number"))
            }),
        ),
        (
            "type == RETURN && elapsed_ns >= 1us && depth > 2 || type == CALL && param == 3",
            Box::new(|e| {
                (s(e, "type") == "RETURN"
                    && n(e, "elapsed_ns").unwrap() >= 1000
                    && n(e, "depth").unwrap() > 2)
                    || (s(e, "type") == "CALL"
                        && e["params"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|p| p["value"].as_i64() == Some(3)))
            }),
        ),
        (
            r#"!(THRD == main) && type != CLASS_LOAD"#,
            Box::new(|e| s(e, "thread") != "main" && s(e, "type") != "CLASS_LOAD"),
        ),
        (
            r#"MSG ~ "deep|ends" && LOC >= 0 && line > 0 && (CLASS2 == fx.Exceptions || catch_class == null)"#,
            Box::new(|e| {
                s(e, "type") == "THROW"
                    && ["deep", "ends"].iter().any(|w| s(e, "message").contains(w))
                    && e["loc"]["bci"].as_i64().unwrap() >= 0
                    && e["loc"]["line"].as_i64().unwrap_or(0) > 0
                    && (s(e, "catch_class") == "fx.Exceptions" || e["catch_class"].is_null())
            }),
        ),
        (
            r#"type == RETURN && value == -1 || method == parse && type == CALL && param ~ "^no""#,
            Box::new(|e| {
                (s(e, "type") == "RETURN" && e["value"].as_i64() == Some(-1))
                    || (s(e, "method") == "parse"
                        && s(e, "type") == "CALL"
                        && e["params"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|p| p["value"].as_str().is_some_and(|v| v.starts_with("no"))))
            }),
        ),
    ]
}

#[test]
fn filter_on_binary_and_xml_selects_what_the_same_test_over_jsonl_selects() {
    let rec = exceptions();
    let all = rec.events();
    let xml = rec.trace.with_extension("xml");
    export(&rec.trace, "xml", &xml);
    for (expr, check) in cases() {
        let expected: Vec<Value> = all.iter().filter(|e| check(e)).cloned().collect();
        assert!(!expected.is_empty(), "{expr} selects nothing: a weak test");
        assert!(expected.len() < all.len(), "{expr} selects everything");
        assert_eq!(
            filter_jsonl(&rec.trace, expr),
            expected,
            "binary input, {expr}"
        );
        assert_eq!(filter_jsonl(&xml, expr), expected, "XML input, {expr}");
    }
}

#[test]
fn round_trip_binary_xml_filter_binary_keeps_ids_values_and_source() {
    let rec = hostile_strings();
    let all = rec.events();
    let dir = scratch("round-trip");
    let xml = dir.join("all.xml");
    export(&rec.trace, "xml", &xml);
    let sub = dir.join("calls.vmv");
    let expr = r#"type in [CALL, RETURN, THROW] && (param ~ "[<\]&]" || MSG ~ "." || value ~ "")"#;
    let out = run(&["filter", path_str(&xml), "-o", path_str(&sub), expr]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = jsonl(&sub);
    let expected: Vec<Value> = all
        .iter()
        .filter(|e| match s(e, "type") {
            "CALL" => e["params"].as_array().unwrap().iter().any(|p| {
                p["value"]
                    .as_str()
                    .is_some_and(|v| v.contains(['<', ']', '&']))
            }),
            "THROW" => !e["message"].as_str().unwrap_or("").is_empty(),
            "RETURN" => e.as_object().unwrap().contains_key("value"),
            _ => false,
        })
        .cloned()
        .collect();
    assert!(expected.len() > 10);
    assert_eq!(got, expected);

    // Filtered to XML: still valid against the DTD, with the same events.
    let sub_xml = dir.join("calls.xml");
    let out = run(&["filter", path_str(&xml), "-o", path_str(&sub_xml), expr]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    crate::xml::assert_valid_xml(&sub_xml);
    assert_eq!(filter_jsonl(&sub_xml, "true"), expected);

    // The derived trace names its source and the filter.
    let stats = run(&["stats", path_str(&sub), "--format", "json"]);
    let stats: Value = serde_json::from_slice(&stats.stdout).expect("stats json");
    let props = &stats["properties"];
    assert_eq!(props["filter"], expr);
    let source = std::fs::canonicalize(&xml).unwrap();
    assert_eq!(props["source"], source.to_str().unwrap());
}

#[test]
fn around_opens_a_filtered_event_in_its_original_context() {
    let rec = exceptions();
    let all = rec.events();
    let dir = scratch("around");
    let sub = dir.join("throws.vmv");
    let out = run(&[
        "filter",
        path_str(&rec.trace),
        "-o",
        path_str(&sub),
        "type == THROW && MSG ~ \"deep\"",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hits = jsonl(&sub);
    assert_eq!(hits.len(), 1);
    let id = hits[0]["id"].as_u64().unwrap();
    let at = all.iter().position(|e| e["id"] == id).unwrap();
    assert!(at >= 2 && at + 2 < all.len());

    let around = run(&[
        "show",
        path_str(&rec.trace),
        "--around",
        &id.to_string(),
        "--context",
        "2",
        "--format",
        "jsonl",
    ]);
    assert!(around.status.success());
    let shown: Vec<Value> = String::from_utf8(around.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(shown, all[at - 2..=at + 2].to_vec());
    assert_eq!(shown[2], hits[0]);
}

#[test]
fn search_counts_stops_early_and_says_nothing_found() {
    let rec = exceptions();
    let all = rec.events();
    let t = path_str(&rec.trace);
    let count = |expr: &str| {
        let o = run(&["search", t, "--count", expr]);
        String::from_utf8(o.stdout)
            .unwrap()
            .trim()
            .parse::<usize>()
            .unwrap()
    };
    assert_eq!(count("true"), all.len());
    assert_eq!(
        count("type == CALL"),
        all.iter().filter(|e| e["type"] == "CALL").count()
    );
    let mid = all[all.len() / 2]["id"].as_u64().unwrap();
    assert_eq!(count(&format!("id == {mid}")), 1);
    assert_eq!(
        count(&format!("id > {mid}")),
        all.iter()
            .filter(|e| e["id"].as_u64().unwrap() > mid)
            .count()
    );

    let o = run(&[
        "search",
        t,
        "--first",
        "2",
        "--format",
        "jsonl",
        "type == RETURN",
    ]);
    let first: Vec<Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let expected: Vec<Value> = all
        .iter()
        .filter(|e| e["type"] == "RETURN")
        .take(2)
        .cloned()
        .collect();
    assert_eq!(first, expected);

    let none = run(&["search", t, "method == noSuchMethod"]);
    assert_eq!(none.status.code(), Some(1));
    assert!(none.stdout.is_empty());
}

#[test]
fn bad_expressions_and_malformed_xml_are_reported_with_their_place() {
    let rec = exceptions();
    let o = run(&["filter", path_str(&rec.trace), "type == THORW && depth > 1"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("type == THORW && depth > 1\n          ^^^^^ unknown event type THORW"),
        "{err}"
    );

    // Writing over the input would truncate it before it is read.
    let events = rec.events();
    let o = run(&[
        "filter",
        path_str(&rec.trace),
        "-o",
        path_str(&rec.trace),
        "true",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("is the input file"));
    assert_eq!(rec.events(), events, "the input was changed");

    let dir = scratch("bad-xml");
    let bad = dir.join("bad.xml");
    std::fs::write(
        &bad,
        "<?xml version=\"1.0\"?>\n<TRACE VERSION=\"1\">\n<CALL ID=\"1\"><THRD>main</THRD>\n  <CLASS>Lx;</CLAS></CALL>\n</TRACE>\n",
    )
    .unwrap();
    let o = run(&["filter", path_str(&bad), "true"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.xml:4:"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    let truncated = dir.join("cut.xml");
    let xml = rec.trace.with_extension("xml");
    export(&rec.trace, "xml", &xml);
    let full = std::fs::read(&xml).unwrap();
    std::fs::write(&truncated, &full[..full.len() * 2 / 3]).unwrap();
    let o = run(&["filter", path_str(&truncated), "--format", "jsonl", "true"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cut.xml:"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// `vmview filter` aborted with a stack overflow (exit 134) on an
/// expression nested about 7,000 deep, and `search` with it; now both stop
/// at the nesting limit with a one-line error around the culprit.
#[test]
fn filter_and_search_refuse_expressions_nested_too_deep() {
    let dir = scratch("filter-nesting");
    let trace = dir.join("t.vmv");
    synthetic_trace(&trace, 50);
    for expr in [
        format!("{}type == CALL{}", "(".repeat(20_000), ")".repeat(20_000)),
        format!("{}type == CALL", "!".repeat(100_000)),
    ] {
        for cmd in ["filter", "search"] {
            let o = run(&[cmd, path_str(&trace), "--format", "jsonl", &expr]);
            // An error exit, not 134 (abort) or 101 (panic).
            assert!(
                matches!(o.status.code(), Some(1 | 2)),
                "{cmd}: {:?}",
                o.status
            );
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains("nested too deep (limit 128"), "{cmd}: {err}");
            assert!(
                err.len() < 2000,
                "{cmd}: the whole expression echoed: {} bytes",
                err.len()
            );
            assert!(o.stdout.is_empty());
        }
    }
    let ok = format!("{}type == CALL{}", "(".repeat(128), ")".repeat(128));
    let o = run(&["search", path_str(&trace), "--count", &ok]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .trim()
            .parse::<u64>()
            .unwrap()
            > 0
    );
}

/// Writes a synthetic trace of about `pairs` CALL/RETURN pairs on 8
/// threads over 64 methods, with a THROW every 100 pairs.
pub fn synthetic_trace(path: &Path, pairs: u64) {
    let header = TraceHeader {
        version: 1,
        pid: 1,
        start_unix_ns: 1_700_000_000_000_000_000,
        properties: vec![("jvm".into(), "synthetic".into())],
    };
    let f = BufWriter::new(File::create(path).expect("create trace"));
    let mut w = TraceWriter::new(f, &header).expect("writer");
    let mut next_string = 0u32;
    let mut string = |w: &mut TraceWriter<BufWriter<File>>, text: String| {
        let id = StringId(next_string);
        next_string += 1;
        w.define(Symbol::String { id, text });
        id
    };
    let group = string(&mut w, "main".into());
    for t in 0..8u32 {
        let name = string(&mut w, format!("pool-1-thread-{t}"));
        w.define(Symbol::Thread(ThreadSymbol {
            id: ThreadRef(t),
            java_id: i64::from(t) + 1,
            name,
            group,
            priority: 5,
            daemon: false,
        }));
    }
    let sig = string(&mut w, "(ILjava/lang/String;)I".into());
    let (qty, label) = (string(&mut w, "qty".into()), string(&mut w, "label".into()));
    let exc = string(&mut w, "java.lang.IllegalStateException".into());
    for m in 0..64u32 {
        let class = string(&mut w, format!("com.acme.shop.Service{}", m % 16));
        let name = string(&mut w, format!("handle{m}"));
        w.define(Symbol::Method(MethodSymbol {
            id: MethodId(m),
            class,
            name,
            sig,
            param_names: vec![qty, label],
            modifiers: 1,
        }));
    }
    let mut id = 0;
    let mut time = 0;
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for i in 0..pairs {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let thread = ThreadRef((rng % 8) as u32);
        let method = MethodId(((rng >> 8) % 64) as u32);
        let elapsed = (rng >> 20) % 2_000_000;
        id += 1;
        time += 100;
        w.write(&Event {
            id,
            time_ns: time,
            thread,
            kind: EventKind::Call {
                metrics: Default::default(),
                method,
                depth: 3,
                caller: None,
                params: vec![
                    JValue::Int((rng % 1000) as i32),
                    JValue::Str {
                        text: format!("order-{}", rng % 10_000),
                        full_len: None,
                    },
                ],
            },
        })
        .expect("write call");
        if i % 100 == 99 {
            id += 1;
            w.write(&Event {
                id,
                time_ns: time + 1,
                thread,
                kind: EventKind::Throw {
                    exception: exc,
                    message: Some(format!("timeout after {} ms", rng % 100)),
                    method,
                    loc: Loc {
                        bci: 12,
                        line: Some(40),
                    },
                    catch: None,
                },
            })
            .expect("write throw");
        }
        id += 1;
        time += elapsed;
        w.write(&Event {
            id,
            time_ns: time,
            thread,
            kind: EventKind::Return {
                metrics: Default::default(),
                method,
                depth: 3,
                outcome: Outcome::Value(JValue::Int((rng % 7) as i32)),
                elapsed_ns: elapsed,
            },
        })
        .expect("write return");
    }
    w.finish().expect("finish trace");
}

/// The least peak RSS of three runs of `vmview ARGS`, in KiB: one run's
/// peak on a loaded machine has been seen several MB above the others,
/// which said nothing about the trace.
fn least_peak_rss_kib(args: &[&str]) -> i64 {
    (0..3)
        .map(|_| peak_rss_kib(args) as i64)
        .min()
        .expect("three runs")
}

#[test]
fn filter_memory_does_not_grow_with_the_trace() {
    let dir = scratch("constant-memory");
    let small = dir.join("small.vmv");
    let large = dir.join("large.vmv");
    // Both traces are longer than the parallel scan's window of chunks in
    // flight (two per decoding thread, ~70k events a chunk): with 200k
    // events (3 chunks) the small run never filled the window, so the
    // window's own few MB showed up as growth (2.2-2.7 MB of the 4 MB
    // allowed, once ~5 MB under load), which says nothing about the trace.
    synthetic_trace(&small, 400_000);
    synthetic_trace(&large, 2_000_000);
    let expr = r#"type in [CALL, THROW] && class ~ "Service1[0-5]$" && thread ~ "-[0-3]$" || message ~ "timeout after 9""#;
    let measure = |input: &PathBuf, format: &str| {
        let out = dir.join(format!("out.{format}"));
        least_peak_rss_kib(&[
            "filter",
            path_str(input),
            "--format",
            format,
            "-o",
            path_str(&out),
            expr,
        ])
    };
    let (s, l) = (measure(&small, "vmv"), measure(&large, "vmv"));
    eprintln!("binary input: peak RSS {s} KiB for 800k events, {l} KiB for 4M events");
    assert!(
        l - s < 4 * 1024,
        "binary input: peak RSS {s} KiB for 800k events, {l} KiB for 4M events"
    );

    // XML input: the reader streams too (smaller traces: XML is ~10× larger).
    let (small_xml, large_xml) = (dir.join("small.xml"), dir.join("large.xml"));
    let (tiny, mid) = (dir.join("tiny.vmv"), dir.join("mid.vmv"));
    synthetic_trace(&tiny, 5_000);
    synthetic_trace(&mid, 50_000);
    export(&tiny, "xml", &small_xml);
    export(&mid, "xml", &large_xml);
    let (s, l) = (measure(&small_xml, "vmv"), measure(&large_xml, "vmv"));
    eprintln!("XML input: peak RSS {s} KiB for 10k events, {l} KiB for 100k events");
    assert!(
        l - s < 4 * 1024,
        "XML input: peak RSS {s} KiB for 10k events, {l} KiB for 100k events"
    );
}

#[test]
fn hand_written_xml_in_the_dtd_shape_is_read() {
    // No DTD, no THREAD declarations or TIDs, children in another order,
    // a dotted class name, entity and character references, a comment,
    // fields left out: what a person or another tool might write.
    let dir = scratch("hand-xml");
    let xml = dir.join("hand.xml");
    std::fs::write(
        &xml,
        r#"<?xml version="1.0"?>
<TRACE VERSION="1">
  <!-- two calls and an uncaught exception -->
  <CALL ID="10" TIME="5">
    <MTD>&lt;init&gt;</MTD><CLASS>Lshop/Cart;</CLASS><THRD>main</THRD>
    <PARAM NAME="owner" KIND="string">Zo&#xEB; &amp; co</PARAM>
  </CALL>
  <CALL ID="11"><THRD>worker-1</THRD><CLASS>shop.Cart</CLASS><MTD>add</MTD>
    <PARAM NAME="qty" KIND="int"> 3 </PARAM></CALL>
  <THROW ID="20" TIME="9"><THRD>worker-1</THRD><EXC>Ljava/lang/IllegalStateException;</EXC>
    <MSG><![CDATA[cart <closed>]]></MSG><CLASS>shop.Cart</CLASS><MTD>add</MTD><LOC LINE="12">4</LOC></THROW>
</TRACE>
"#,
    )
    .unwrap();
    let all = filter_jsonl(&xml, "true");
    assert_eq!(all.len(), 3);
    assert_eq!(all[0]["method"], "<init>");
    assert_eq!(all[0]["class"], "shop.Cart");
    assert_eq!(all[0]["params"][0]["value"], "Zoë & co");
    assert_eq!(all[1]["thread"], "worker-1");
    assert_eq!(all[1]["params"][0]["value"], 3);
    assert_eq!(all[2]["message"], "cart <closed>");
    assert_eq!(all[2]["loc"]["line"], 12);
    assert!(all[2]["catch_class"].is_null());

    let hits = filter_jsonl(
        &xml,
        "THRD == worker-1 && (param > 2 || MSG ~ \"<closed>\") && CLASS == shop.Cart",
    );
    let ids: Vec<u64> = hits.iter().map(|e| e["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, [11, 20]);

    // Ids out of order (allowed in XML): an id bound must not stop early.
    let unordered = dir.join("unordered.xml");
    std::fs::write(
        &unordered,
        r#"<TRACE VERSION="1"><GC_START ID="9"><THRD>a</THRD></GC_START><GC_START ID="2"><THRD>b</THRD></GC_START></TRACE>"#,
    )
    .unwrap();
    let o = run(&["search", path_str(&unordered), "--count", "id < 5"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "1");

    // And to a binary trace, whose threads and methods are declared from it.
    let out = dir.join("hand.vmv");
    let o = run(&["filter", path_str(&xml), "-o", path_str(&out), "true"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(jsonl(&out), all);
}
