//! `vmview export` to the formats of other people's tools — Chrome trace
//! events (Perfetto), collapsed stacks and flame-graph SVG (inferno),
//! speedscope, Parquet — and `vmview merge`, each checked against what its
//! consumer requires, on traces recorded from the Java fixtures.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{jsonl, of_type, path_str, record, run, Recording};

fn recorded(main: &str, args: &[&str]) -> Recording {
    let rec = record(&["--classes", "fx.*"], &[], main, args);
    assert!(
        rec.output.status.success(),
        "record {main} failed: {}",
        rec.stderr()
    );
    rec
}

/// `vmview export TRACE --format FORMAT EXTRA -o OUT`, panicking with stderr on failure.
fn export_to(trace: &Path, format: &str, extra: &[&str], ext: &str) -> PathBuf {
    let out = trace.with_extension(ext);
    let mut args = vec!["export", path_str(trace), "--format", format];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["-o", path_str(&out)]);
    let o = run(&args);
    assert!(
        o.status.success(),
        "vmview export --format {format} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// `vmview filter TRACE EXPR -o OUT.vmv`: a trace with some events taken out.
fn filtered(trace: &Path, expr: &str, name: &str) -> PathBuf {
    let out = trace.with_file_name(name);
    let o = run(&["filter", path_str(trace), expr, "-o", path_str(&out)]);
    assert!(
        o.status.success(),
        "vmview filter failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

fn read_json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).expect("read output");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", p.display()))
}

// ---------------------------------------------------------------- chrome

/// What the Trace Event Format requires and Perfetto relies on: required
/// keys, `B`/`E` pairs that nest per thread in non-decreasing time, a name
/// for every thread with slices. Returns the slices (name, args of B) per
/// thread name, and the E args.
struct ChromeCheck {
    begins: Vec<(String, Value)>,
    ends: Vec<Value>,
    instants: Vec<Value>,
    counters: Vec<Value>,
    thread_names: HashMap<u64, String>,
}

fn check_chrome(doc: &Value) -> ChromeCheck {
    let events = doc["traceEvents"].as_array().expect("traceEvents array");
    assert_eq!(doc["displayTimeUnit"], "ns");
    let mut stacks: HashMap<u64, Vec<String>> = HashMap::new();
    let mut last_ts: HashMap<u64, f64> = HashMap::new();
    let mut check = ChromeCheck {
        begins: vec![],
        ends: vec![],
        instants: vec![],
        counters: vec![],
        thread_names: HashMap::new(),
    };
    for e in events {
        let ph = e["ph"].as_str().expect("ph");
        assert!(e["pid"].is_u64(), "pid missing: {e}");
        assert!(e["tid"].is_u64(), "tid missing: {e}");
        let ts = e["ts"]
            .as_f64()
            .unwrap_or_else(|| panic!("ts missing: {e}"));
        let tid = e["tid"].as_u64().unwrap();
        if ph != "E" {
            assert!(e["name"].is_string(), "name missing: {e}");
        }
        if matches!(ph, "B" | "E" | "i") {
            let last = last_ts.entry(tid).or_insert(0.0);
            assert!(ts >= *last, "time goes back on thread {tid}: {e}");
            *last = ts;
        }
        match ph {
            "M" => {
                if e["name"] == "thread_name" {
                    check
                        .thread_names
                        .insert(tid, e["args"]["name"].as_str().unwrap().to_string());
                }
            }
            "B" => {
                let name = e["name"].as_str().unwrap().to_string();
                stacks.entry(tid).or_default().push(name.clone());
                check.begins.push((name, e["args"].clone()));
            }
            "E" => {
                let open = stacks.entry(tid).or_default().pop();
                assert!(open.is_some(), "E without B on thread {tid}: {e}");
                check.ends.push(e["args"].clone());
            }
            "i" => check.instants.push(e.clone()),
            "C" => check.counters.push(e.clone()),
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    for (tid, s) in &stacks {
        assert!(s.is_empty(), "slices left open on thread {tid}: {s:?}");
        assert!(
            check.thread_names.contains_key(tid),
            "thread {tid} has slices but no thread_name"
        );
    }
    check
}

#[test]
fn chrome_export_nests_calls_per_thread_with_arguments_exceptions_and_thread_names() {
    let rec = recorded("fx.Exceptions", &[]);
    let events = rec.events();
    let doc = read_json(&export_to(&rec.trace, "chrome", &[], "json"));
    let c = check_chrome(&doc);

    // Every CALL is a slice, with its parameters by name.
    assert_eq!(c.begins.len(), of_type(&events, "CALL").len());
    let (_, level3) = c
        .begins
        .iter()
        .find(|(n, _)| n == "fx.Exceptions.level3")
        .expect("slice for level3");
    assert_eq!(level3["params"]["x"], 3);
    assert_eq!(level3["sig"], "(I)I");
    // Returns carry the value or the exception that unwound the frame.
    assert!(c.ends.iter().any(|a| a["return"] == -1));
    assert!(c
        .ends
        .iter()
        .any(|a| a["exception"] == "java.lang.IllegalArgumentException"));
    // THROW and CATCH are instants; the uncaught one says so.
    let throws: Vec<_> = c
        .instants
        .iter()
        .filter(|i| i["name"].as_str().unwrap().starts_with("throw "))
        .collect();
    assert_eq!(throws.len(), of_type(&events, "THROW").len());
    assert!(throws.iter().any(|t| t["args"]["catch_at"] == "uncaught"
        && t["name"] == "throw java.lang.UnsupportedOperationException"));
    let catches = c
        .instants
        .iter()
        .filter(|i| i["name"].as_str().unwrap().starts_with("catch "))
        .count();
    assert_eq!(catches, of_type(&events, "CATCH").len());
    // The thread that died has its own named track.
    assert!(c.thread_names.values().any(|n| n == "doomed"));
    assert!(c.thread_names.values().any(|n| n == "main"));
}

#[test]
fn chrome_export_of_a_trace_missing_returns_and_calls_still_nests() {
    let rec = recorded("fx.Exceptions", &[]);
    // level1's RETURN and level3's CALL taken out, as a window or a lost
    // chunk would: level1 must be closed as cut off, level3's RETURN ignored.
    let cut = filtered(
        &rec.trace,
        "!(type == RETURN && method == \"level1\") && !(type == CALL && method == \"level3\")",
        "cut.vmv",
    );
    let doc = read_json(&export_to(&cut, "chrome", &[], "json"));
    let c = check_chrome(&doc);
    assert!(c.begins.iter().all(|(n, _)| n != "fx.Exceptions.level3"));
    assert!(c.ends.iter().any(|a| a["cut_off"] == true));
    let calls = jsonl(&cut);
    assert_eq!(c.begins.len(), of_type(&calls, "CALL").len());
}

#[test]
fn chrome_export_counts_blocked_threads_on_contended_monitors() {
    let rec = recorded("fx.Contention", &[]);
    let doc = read_json(&export_to(&rec.trace, "chrome", &[], "json"));
    let c = check_chrome(&doc);
    let blocked: Vec<u64> = c
        .counters
        .iter()
        .filter(|e| e["name"] == "monitors")
        .map(|e| e["args"]["blocked"].as_u64().unwrap())
        .collect();
    // Three workers wanted one lock held for 60 ms each: at some point at
    // least one waited, and at the end nobody does.
    assert!(blocked.iter().any(|&b| b >= 1), "{blocked:?}");
    assert_eq!(blocked.last(), Some(&0));
    let entered = c
        .instants
        .iter()
        .filter(|i| i["name"].as_str().unwrap().starts_with("entered "))
        .count();
    assert_eq!(
        entered,
        of_type(&rec.events(), "MONITOR_CONTENDED_ENTERED").len()
    );
    assert!(entered >= 1);
}

// ------------------------------------------------- collapsed stacks, svg

/// Folded lines as (stack, weight).
fn folded(p: &Path) -> Vec<(String, u64)> {
    std::fs::read_to_string(p)
        .expect("read collapsed")
        .lines()
        .map(|l| {
            let (stack, w) = l.rsplit_once(' ').expect("`stack weight`");
            (stack.to_string(), w.parse().expect("integer weight"))
        })
        .collect()
}

#[test]
fn collapsed_self_times_add_up_to_the_time_between_call_and_return() {
    let rec = recorded("fx.Exceptions", &[]);
    let events = rec.events();
    let lines = folded(&export_to(&rec.trace, "collapsed", &[], "folded"));
    let main_call = crate::support::find(&events, "CALL", "main");
    let main_return = crate::support::find(&events, "RETURN", "main");
    let main_ns = main_return["time_ns"].as_u64().unwrap() - main_call["time_ns"].as_u64().unwrap();
    let under_main: u64 = lines
        .iter()
        .filter(|(s, _)| s.starts_with("fx.Exceptions.main"))
        .map(|(_, w)| w)
        .sum();
    assert_eq!(under_main, main_ns, "{lines:?}");
    // The exception unwound level3 → level2 → level1 into top: the path is there.
    assert!(lines.iter().any(|(s, _)| s
        == "fx.Exceptions.main;fx.Exceptions.top;fx.Exceptions.level1;fx.Exceptions.level2;fx.Exceptions.level3"));
    // The thread killed by an exception starts its own stack.
    assert!(lines.iter().any(|(s, _)| s == "fx.Exceptions.boom"));
}

#[test]
fn collapsed_by_calls_with_thread_frames_counts_every_call() {
    let rec = recorded("fx.Loop", &["300"]);
    let events = rec.events();
    let work_calls = events
        .iter()
        .filter(|e| e["type"] == "CALL" && e["method"] == "work")
        .count() as u64;
    assert!(work_calls > 100, "only {work_calls} calls of work");
    let lines = folded(&export_to(
        &rec.trace,
        "collapsed",
        &["--weight", "calls", "--thread-frames"],
        "folded",
    ));
    assert_eq!(
        lines,
        [
            ("main;fx.Loop.main".to_string(), 1),
            ("main;fx.Loop.main;fx.Loop.work".to_string(), work_calls)
        ]
    );
}

#[test]
fn svg_flame_graph_is_well_formed_and_shows_the_hot_frames() {
    let rec = recorded("fx.Loop", &["300"]);
    let svg = export_to(&rec.trace, "svg", &[], "svg");
    let out = std::process::Command::new("xmllint")
        .arg("--noout")
        .arg(&svg)
        .output()
        .expect("run xmllint (Debian package libxml2-utils; .ci/run installs it)");
    assert!(
        out.status.success(),
        "{} is not well-formed XML: {}",
        svg.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("<svg"), "not an SVG document");
    // inferno puts each frame's name and weight in a <title>.
    assert!(text.contains("<title>fx.Loop.work ("), "hot frame missing");
    assert!(text.contains("<title>fx.Loop.main ("), "root frame missing");
}

// ------------------------------------------------------------ speedscope

/// speedscope's published JSON schema, from the npm package `speedscope`
/// (`.ci/run` installs it under target/npm; `VMVIEW_SPEEDSCOPE_SCHEMA`
/// points elsewhere).
pub(crate) fn speedscope_schema() -> PathBuf {
    let p = std::env::var_os("VMVIEW_SPEEDSCOPE_SCHEMA")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join(
                "../../target/npm/node_modules/speedscope/dist/release/file-format-schema.json",
            )
        });
    assert!(
        p.exists(),
        "speedscope's schema is not at {}: run .ci/run, or `npm install --prefix target/npm speedscope`",
        p.display()
    );
    p
}

/// Validates `doc` against `schema` with Python's `jsonschema` (an
/// independent implementation; `.ci/run` installs it from PyPI).
pub(crate) fn assert_valid_against_schema(doc: &Path, schema: &Path) {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import json, sys, jsonschema\n\
             schema = json.load(open(sys.argv[1]))\n\
             jsonschema.validators.validator_for(schema)(schema).validate(json.load(open(sys.argv[2])))",
        ])
        .arg(schema)
        .arg(doc)
        .output()
        .expect("run python3 (with jsonschema from PyPI; .ci/run installs it)");
    assert!(
        out.status.success(),
        "{} does not validate against {}:\n{}",
        doc.display(),
        schema.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn speedscope_export_validates_against_the_published_schema_and_nests() {
    let rec = recorded("fx.Exceptions", &[]);
    let events = rec.events();
    let out = export_to(&rec.trace, "speedscope", &[], "speedscope.json");
    assert_valid_against_schema(&out, &speedscope_schema());

    let doc = read_json(&out);
    let frames: Vec<&str> = doc["shared"]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    let mut opens = 0;
    for p in doc["profiles"].as_array().unwrap() {
        assert_eq!(p["type"], "evented");
        let (start, end) = (
            p["startValue"].as_u64().unwrap(),
            p["endValue"].as_u64().unwrap(),
        );
        let mut stack = Vec::new();
        let mut last = start;
        for e in p["events"].as_array().unwrap() {
            let at = e["at"].as_u64().unwrap();
            assert!(at >= last && at <= end, "event out of order or range: {e}");
            last = at;
            let f = e["frame"].as_u64().unwrap() as usize;
            assert!(f < frames.len());
            if e["type"] == "O" {
                opens += 1;
                stack.push(f);
            } else {
                assert_eq!(
                    stack.pop(),
                    Some(f),
                    "close of a frame that is not on top: {e}"
                );
            }
        }
        assert!(stack.is_empty(), "profile {} leaves frames open", p["name"]);
    }
    assert_eq!(opens, of_type(&events, "CALL").len());
    assert!(frames.contains(&"fx.Exceptions.level3"));
    let names: Vec<&str> = doc["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"main") && names.contains(&"doomed"),
        "{names:?}"
    );
}

// --------------------------------------------------------------- parquet

/// Runs `sql` in DuckDB (Python package from PyPI, an engine independent
/// of vmview's writer; `.ci/run` installs it) and returns the rows as JSON
/// arrays.
pub fn duckdb(sql: &str) -> Vec<Value> {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import duckdb, json, sys\n\
             rows = duckdb.sql(sys.argv[1]).fetchall()\n\
             print(json.dumps([list(r) for r in rows], default=str))",
            sql,
        ])
        .output()
        .expect("run python3 (with duckdb from PyPI; .ci/run installs it)");
    assert!(
        out.status.success(),
        "DuckDB failed on {sql}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    match serde_json::from_slice(&out.stdout).expect("JSON rows") {
        Value::Array(rows) => rows,
        other => panic!("not rows: {other}"),
    }
}

/// Event counts by type, as the JSON Lines export sees them.
fn counts_by_type(events: &[Value]) -> std::collections::BTreeMap<String, u64> {
    let mut m = std::collections::BTreeMap::new();
    for e in events {
        *m.entry(e["type"].as_str().unwrap().to_string())
            .or_insert(0) += 1;
    }
    m
}

#[test]
fn parquet_export_reads_back_in_duckdb_with_the_json_lines_values() {
    let rec = recorded("fx.Exceptions", &[]);
    let events = rec.events();
    let pq = export_to(&rec.trace, "parquet", &[], "parquet");
    let file = path_str(&pq);

    let rows = duckdb(&format!(
        "SELECT type, count(*) FROM '{file}' GROUP BY type ORDER BY type"
    ));
    let got: std::collections::BTreeMap<String, u64> = rows
        .iter()
        .map(|r| (r[0].as_str().unwrap().to_string(), r[1].as_u64().unwrap()))
        .collect();
    assert_eq!(got, counts_by_type(&events));

    // Every THROW row says what JSON Lines says, column by column.
    let throws = duckdb(&format!(
        "SELECT id, source_id, exception, message, class, method, line, catch_class, catch_method, catch_line, thread
         FROM '{file}' WHERE type = 'THROW' ORDER BY id"
    ));
    let expected: Vec<Value> = of_type(&events, "THROW")
        .iter()
        .map(|e| {
            serde_json::json!([
                e["id"],
                e["id"],
                e["exception"],
                e["message"],
                e["class"],
                e["method"],
                e["loc"]["line"],
                e["catch_class"],
                e["catch_method"],
                e["catch_loc"].get("line").cloned().unwrap_or(Value::Null),
                e["thread"]
            ])
        })
        .collect();
    assert_eq!(throws, expected);

    // Parameters are the JSON Lines `params` list, as a JSON string.
    let params = duckdb(&format!(
        "SELECT params FROM '{file}' WHERE type = 'CALL' AND method = 'level3'"
    ));
    let level3 = crate::support::find(&events, "CALL", "level3");
    let parsed: Value = serde_json::from_str(params[0][0].as_str().unwrap()).unwrap();
    assert_eq!(parsed, level3["params"]);
    // Source and JVM are on every row.
    let pid = duckdb(&format!("SELECT DISTINCT source, pid FROM '{file}'"));
    assert_eq!(pid.len(), 1);
    assert_eq!(pid[0][0], "trace.vmv");
    assert!(pid[0][1].as_u64().unwrap() > 0);
}

// ----------------------------------------------------------------- merge

/// A trace recorded from `main`, copied to `name` (as `file=app-%p.vmv`
/// would name each JVM's trace).
fn recorded_as(main: &str, args: &[&str], name: &str) -> (PathBuf, Vec<Value>) {
    let rec = recorded(main, args);
    let to = rec.trace.with_file_name(name);
    std::fs::copy(&rec.trace, &to).expect("copy trace");
    let events = rec.events();
    (to, events)
}

#[test]
fn merged_traces_keep_each_events_source_and_id_and_answer_fleet_queries_in_duckdb() {
    let (a, a_events) = recorded_as("fx.Exceptions", &[], "app-a.vmv");
    let (b, b_events) = recorded_as("fx.Loop", &["200"], "app-b.vmv");
    let all = a.with_file_name("fleet.vmv");
    let o = run(&["merge", path_str(&a), path_str(&b), "-o", path_str(&all)]);
    assert!(
        o.status.success(),
        "vmview merge failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    // One trace, every event once, in time order, its source in its id.
    let merged = jsonl(&all);
    assert_eq!(merged.len(), a_events.len() + b_events.len());
    let mut last = 0;
    let mut per_source = [0usize; 2];
    for e in &merged {
        let t = e["time_ns"].as_u64().unwrap();
        assert!(t >= last, "merged trace goes back in time at {e}");
        last = t;
        per_source[(e["id"].as_u64().unwrap() % 256) as usize] += 1;
    }
    assert_eq!(per_source, [a_events.len(), b_events.len()]);

    // Parquet of the merge: the same rows as each source's own export.
    let pq_all = export_to(&all, "parquet", &[], "parquet");
    let pq_a = export_to(&a, "parquet", &[], "parquet");
    let pq_b = export_to(&b, "parquet", &[], "parquet");
    let (all_f, a_f, b_f) = (path_str(&pq_all), path_str(&pq_a), path_str(&pq_b));
    let same = duckdb(&format!(
        "SELECT count(*) FROM '{all_f}' m JOIN read_parquet(['{a_f}', '{b_f}']) o
           ON m.source = o.source AND m.source_id = o.id AND m.pid = o.pid AND m.time = o.time
          AND m.type = o.type AND m.thread = o.thread
          AND m.method IS NOT DISTINCT FROM o.method AND m.params IS NOT DISTINCT FROM o.params"
    ));
    assert_eq!(same[0][0].as_u64().unwrap() as usize, merged.len());

    // A fleet question: events by JVM and type.
    let rows = duckdb(&format!(
        "SELECT source, type, count(*) FROM '{all_f}' GROUP BY ALL ORDER BY source, type"
    ));
    let mut expected = Vec::new();
    for (name, events) in [("app-a.vmv", &a_events), ("app-b.vmv", &b_events)] {
        for (ty, n) in counts_by_type(events) {
            expected.push(serde_json::json!([name, ty, n]));
        }
    }
    assert_eq!(rows, expected);
    // Calls of fx.Loop.work, and exceptions never caught, per JVM.
    let work = duckdb(&format!(
        "SELECT count(*) FROM '{all_f}' WHERE type = 'CALL' AND class = 'fx.Loop' AND method = 'work'"
    ));
    let expected_work = b_events
        .iter()
        .filter(|e| e["type"] == "CALL" && e["method"] == "work")
        .count();
    assert_eq!(work[0][0].as_u64().unwrap() as usize, expected_work);
    let uncaught = duckdb(&format!(
        "SELECT source, count(*) FROM '{all_f}' WHERE type = 'THROW' AND catch_class IS NULL GROUP BY source"
    ));
    let expected_uncaught = of_type(&a_events, "THROW")
        .iter()
        .filter(|e| e["catch_class"].is_null())
        .count();
    assert_eq!(
        uncaught,
        [serde_json::json!(["app-a.vmv", expected_uncaught])]
    );

    // A filtered merged trace keeps its ids, so each row still knows its
    // source; the ids within the source can no longer be counted out.
    let throws = filtered(&all, "type == THROW", "fleet-throws.vmv");
    let pq_throws = export_to(&throws, "parquet", &[], "parquet");
    let rows = duckdb(&format!(
        "SELECT source, count(*), count(source_id) FROM '{}' GROUP BY source",
        path_str(&pq_throws)
    ));
    assert_eq!(
        rows,
        [serde_json::json!([
            "app-a.vmv",
            of_type(&a_events, "THROW").len(),
            0
        ])]
    );
}

#[test]
fn chrome_export_of_a_merged_trace_has_one_process_per_jvm() {
    let (a, _) = recorded_as("fx.Exceptions", &[], "jvm-a.vmv");
    let (b, _) = recorded_as("fx.Contention", &[], "jvm-b.vmv");
    let all = a.with_file_name("both.vmv");
    let o = run(&["merge", path_str(&a), path_str(&b), "-o", path_str(&all)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc = read_json(&export_to(&all, "chrome", &[], "json"));
    check_chrome(&doc);
    let processes: Vec<&Value> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "process_name")
        .collect();
    assert_eq!(processes.len(), 2);
    assert_ne!(processes[0]["pid"], processes[1]["pid"]);
    assert!(processes[0]["args"]["name"]
        .as_str()
        .unwrap()
        .starts_with("jvm-a.vmv"));
}
