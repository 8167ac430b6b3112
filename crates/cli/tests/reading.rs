//! One reading layer for every command: each trace-reading command gives
//! the same answer on an XML trace as on the binary trace it was exported
//! from, and the parallel decode (`VMVIEW_THREADS=2`) gives byte for byte
//! what the sequential reader (`VMVIEW_THREADS=1`) gives, on a trace cut
//! into many small chunks so that calls, symbols and samples cross chunk
//! boundaries.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use crate::support::*;

/// fx.Reactions with calls, samples, monitors and argument values: CALL,
/// RETURN, SAMPLE, MONITOR_WAIT/WAITED, THREAD_*, CALIBRATION events.
fn fixture() -> &'static Recording {
    static REC: OnceLock<Recording> = OnceLock::new();
    REC.get_or_init(|| {
        let rec = record(
            &[
                "--classes",
                "fx.Reactions",
                "--events",
                "all,samples,monitors",
                "--interval",
                "5ms",
            ],
            &[],
            "fx.Reactions",
            &["100"],
        );
        assert!(
            rec.output.status.success(),
            "record failed: {}",
            rec.stderr()
        );
        rec
    })
}

/// fx.GcLock: contended monitors, for `vmview locks`.
fn contention() -> &'static Recording {
    static REC: OnceLock<Recording> = OnceLock::new();
    REC.get_or_init(|| {
        let rec = record(&[], &[], "fx.GcLock", &[]);
        assert!(
            rec.output.status.success(),
            "record failed: {}",
            rec.stderr()
        );
        rec
    })
}

/// `trace` exported as XML beside it.
fn as_xml(trace: &Path) -> PathBuf {
    // Tests run in parallel: one exports, the others wait for it.
    static EXPORTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = EXPORTING.lock().unwrap_or_else(|e| e.into_inner());
    let xml = trace.with_extension("xml");
    if !xml.exists() {
        let o = run(&[
            "export",
            path_str(trace),
            "--format",
            "xml",
            "-o",
            path_str(&xml),
        ]);
        assert!(
            o.status.success(),
            "export: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    xml
}

fn vmview_with(threads: &str, args: &[&str]) -> Output {
    Command::new(vmview())
        .env("VMVIEW_THREADS", threads)
        .args(args)
        .output()
        .expect("run vmview")
}

/// Runs `vmview CMD TRACE REST` on the binary trace and on its XML export;
/// asserts both succeed with the same output, of at least `min_len` bytes,
/// and returns it.
fn same_on_xml(trace: &Path, cmd: &str, rest: &[&str], min_len: usize) -> String {
    let xml = as_xml(trace);
    let on = |t: &Path| {
        let mut args = vec![cmd, path_str(t)];
        args.extend_from_slice(rest);
        let o = run(&args);
        assert!(
            o.status.success(),
            "vmview {cmd} {} failed: {}",
            t.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        // Where a command names its input, the names differ.
        String::from_utf8(o.stdout)
            .expect("UTF-8 output")
            .replace(path_str(&xml), path_str(trace))
    };
    let (bin, x) = (on(trace), on(&xml));
    assert_eq!(
        bin, x,
        "vmview {cmd} {rest:?}: the XML trace reads differently"
    );
    assert!(bin.len() >= min_len, "vmview {cmd}: only {bin:?}");
    bin
}

#[test]
fn stats_reads_an_xml_trace() {
    let t = &fixture().trace;
    let doc = |p: &Path| {
        let o = run(&["stats", path_str(p), "--format", "json"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
        // What the file is (its name, size, chunks, format version: an XML
        // export says 1 of a version 2 trace) differs; what it holds may not.
        for k in ["file", "bytes", "chunks", "format_version"] {
            v.as_object_mut().unwrap().remove(k);
        }
        v
    };
    let bin = doc(t);
    assert_eq!(bin, doc(&as_xml(t)));
    assert!(bin["events"].as_u64().unwrap() > 100, "{bin}");
}

#[test]
fn calltree_reads_an_xml_trace() {
    let out = same_on_xml(&fixture().trace, "calltree", &[], 100);
    assert!(out.contains("fx.Reactions"), "{out}");
}

#[test]
fn dataflow_reads_an_xml_trace() {
    let out = same_on_xml(&fixture().trace, "dataflow", &["--format", "json"], 100);
    assert!(out.contains("fx.Reactions"), "{out}");
}

#[test]
fn reactions_reads_an_xml_trace() {
    same_on_xml(&fixture().trace, "reactions", &["--format", "json"], 100);
}

#[test]
fn locks_reads_an_xml_trace() {
    let out = same_on_xml(&contention().trace, "locks", &["--format", "json"], 50);
    assert!(out.contains("waiter-0"), "{out}");
}

#[test]
fn show_reads_an_xml_trace_also_around_an_id() {
    let t = &fixture().trace;
    same_on_xml(t, "show", &["--limit", "40", "--format", "jsonl"], 1000);
    let out = same_on_xml(t, "show", &["--around", "300", "--context", "3"], 100);
    assert!(out.contains("300"), "{out}");
}

#[test]
fn search_and_filter_read_an_xml_trace() {
    let t = &fixture().trace;
    let n = same_on_xml(t, "search", &["--count", "type == SAMPLE"], 1);
    assert!(n.trim().parse::<u64>().unwrap() > 10, "{n}");
    same_on_xml(t, "search", &["type == CALL && method ~ \"^spin\""], 100);
    same_on_xml(
        t,
        "filter",
        &["--format", "jsonl", "type in [CALL, RETURN]"],
        1000,
    );
}

#[test]
fn export_reads_an_xml_trace() {
    let t = &fixture().trace;
    same_on_xml(t, "export", &["--format", "jsonl"], 10_000);
    same_on_xml(t, "export", &["--format", "collapsed"], 10);
}

#[test]
fn merge_reads_xml_traces() {
    let t = &fixture().trace;
    let dir = t.parent().unwrap();
    let (from_bin, from_xml) = (dir.join("m-bin.vmv"), dir.join("m-xml.vmv"));
    let merged = |a: &Path, out: &Path| {
        let o = run(&[
            "merge",
            path_str(a),
            path_str(&contention().trace),
            "-o",
            path_str(out),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let o = run(&["show", path_str(out), "--format", "jsonl"]);
        assert!(o.status.success());
        o.stdout
    };
    let bin = merged(t, &from_bin);
    let xml = merged(&as_xml(t), &from_xml);
    assert!(bin.len() > 10_000);
    assert_eq!(
        bin, xml,
        "merging the XML export differs from merging the binary trace"
    );
}

#[test]
fn view_reads_an_xml_trace() {
    let t = &fixture().trace;
    let dir = t.parent().unwrap();
    // The analyses the report embeds (its header's chunks and nonce differ,
    // and the flame graph's title names the file).
    let views = |p: &Path, out: &Path| {
        let o = run(&["view", path_str(p), "-o", path_str(out)]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let page = std::fs::read_to_string(out).unwrap();
        let start = page.find("\"views\":").expect("the report's views");
        let end = start + page[start..].find("</script>").unwrap();
        page[start..end].replace("trace.xml", "trace.vmv")
    };
    let bin = views(t, &dir.join("bin.html"));
    let xml = views(&as_xml(t), &dir.join("xml.html"));
    assert!(bin.contains("fx.Reactions.spin"), "{bin}");
    assert!(bin == xml, "the report of the XML trace differs");
}

#[test]
fn serve_reads_an_xml_trace() {
    let t = &fixture().trace;
    let events = run(&["search", "--count", path_str(t), "true"]);
    let events = String::from_utf8(events.stdout).unwrap().trim().to_string();
    let mut child = Command::new(vmview())
        .args(["serve", path_str(&as_xml(t)), "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run vmview serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        line.contains(&format!("({events} events)")),
        "serve said {line:?}, the binary trace has {events} events"
    );
}

/// The fixture rewritten in chunks of about 512 bytes (a hundred or so).
fn many_chunks() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let src = &fixture().trace;
        let out = src.with_file_name("small-chunks.vmv");
        let mut r = vmview_format::TraceReader::open(src).expect("open fixture");
        let header = r.header().clone();
        let f = BufWriter::new(File::create(&out).unwrap());
        let mut w = vmview_filter::SubsetWriter::with_chunk_size(f, &header, 512).unwrap();
        while let Some(ev) = r.next_event() {
            w.write(&ev, r.symbols()).unwrap();
        }
        w.finish().unwrap().flush().unwrap();
        let chunks = vmview_format::TraceReader::open(&out)
            .unwrap()
            .index()
            .unwrap()
            .chunks
            .len();
        assert!(chunks >= 40, "only {chunks} chunks");
        out
    })
}

/// Runs `vmview ARGS` with one and with two decoding threads and asserts
/// the same exit status and the same bytes on stdout (and in `out_file`,
/// when the command writes one).
fn same_in_parallel(args: &[&str], out_file: Option<&Path>) {
    let one = vmview_with("1", args);
    let one_file = out_file.map(|f| std::fs::read(f).unwrap());
    let two = vmview_with("2", args);
    let two_file = out_file.map(|f| std::fs::read(f).unwrap());
    assert!(
        one.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&one.stderr)
    );
    assert_eq!(one.status.code(), two.status.code(), "{args:?}");
    assert!(
        !one.stdout.is_empty() || out_file.is_some(),
        "{args:?}: no output"
    );
    assert!(
        one.stdout == two.stdout,
        "{args:?}: two threads print something else:\n{}\n---\n{}",
        String::from_utf8_lossy(&one.stdout),
        String::from_utf8_lossy(&two.stdout)
    );
    assert_eq!(one_file, two_file, "{args:?}: the output files differ");
    assert_eq!(one.stderr, two.stderr, "{args:?}: the warnings differ");
}

#[test]
fn parallel_decode_gives_the_sequential_output_byte_for_byte() {
    let t = many_chunks();
    let p = path_str(t);
    for args in [
        vec!["stats", p],
        vec!["stats", p, "--format", "json"],
        vec!["calltree", p],
        vec!["calltree", p, "--format", "json"],
        vec!["dataflow", p, "--format", "json"],
        vec!["reactions", p, "--format", "json"],
        vec!["locks", p, "--format", "json"],
        vec!["search", "--count", p, "type == CALL && method ~ \"^spin\""],
        vec!["search", "--count", p, "type == SAMPLE || param > 3"],
        vec!["search", p, "--format", "jsonl", "type == RETURN"],
        vec!["search", p, "--first", "7", "type == SAMPLE"],
        vec!["filter", p, "--format", "jsonl", "thread == \"orders\""],
        // Decided from heads, the matches built in the scan itself (with
        // their values, returned values and elapsed times).
        vec![
            "filter",
            p,
            "--format",
            "jsonl",
            "type == RETURN && method ~ \"^(spin|sortLoop)$\"",
        ],
        vec![
            "filter",
            p,
            "--format",
            "jsonl",
            "type in [CALL, RETURN] && class ~ \"Reactions\" && !(thread == \"main\")",
        ],
        vec![
            "search",
            "--count",
            p,
            "method ~ \"Loop$\" || type == SAMPLE",
        ],
        vec!["export", p, "--format", "jsonl"],
        vec!["export", p, "--format", "chrome"],
        vec!["export", p, "--format", "collapsed"],
    ] {
        same_in_parallel(&args, None);
    }
    let out = t.with_file_name("filtered.vmv");
    same_in_parallel(
        &[
            "filter",
            p,
            "-o",
            path_str(&out),
            "type in [CALL, RETURN, SAMPLE]",
        ],
        Some(&out),
    );
    same_in_parallel(
        &[
            "filter",
            p,
            "-o",
            path_str(&out),
            "type == CALL && method ~ \"^spin$\"",
        ],
        Some(&out),
    );
}

// A chunk whose payload fails its checksum under an intact index: the
// parallel scans of search, filter and export once stopped there with an
// error, where the sequential reader skips the chunk with a warning.
#[test]
fn parallel_decode_skips_a_damaged_chunk_as_the_sequential_reader_does() {
    let src = many_chunks();
    let t = src.with_file_name("flipped.vmv");
    let mut bytes = std::fs::read(src).unwrap();
    let index = vmview_format::TraceReader::open(src)
        .unwrap()
        .index()
        .unwrap()
        .clone();
    // A byte inside the payload of a chunk in the middle.
    let c = &index.chunks[index.chunks.len() / 2];
    bytes[(c.offset + 60 + 10) as usize] ^= 0xff;
    std::fs::write(&t, bytes).unwrap();
    let p = path_str(&t);
    for args in [
        vec!["stats", p],
        vec!["calltree", p],
        vec!["search", "--count", p, "type == SAMPLE"],
        vec!["search", p, "--format", "jsonl", "type == RETURN"],
        vec!["filter", p, "--format", "jsonl", "type in [CALL, SAMPLE]"],
        // The fast path (heads, matches built in the scan) meets the
        // damaged chunk as the full decode does.
        vec![
            "search",
            "--count",
            p,
            "type == CALL && method ~ \"^spin$\"",
        ],
        vec![
            "filter",
            p,
            "--format",
            "jsonl",
            "type == RETURN && method ~ \"^spin$\"",
        ],
        vec!["export", p, "--format", "jsonl"],
    ] {
        let one = vmview_with("1", &args);
        assert!(
            String::from_utf8_lossy(&one.stderr).contains("fails its checksum"),
            "{args:?}: {}",
            String::from_utf8_lossy(&one.stderr)
        );
        same_in_parallel(&args, None);
    }
}

/// A format version 2 trace made here (no JVM): CALL/RETURN pairs with a
/// value on 6 threads in a random interleaving, times that tie across
/// threads and go back within one (THROWs stamped earlier), and
/// METHOD_COUNTS of two threads at the same time, in chunks of about
/// 3 KB: what the thread-by-thread reads of `stats` and of the
/// type-and-method scan must give as the merged read does.
fn interleaved_v2() -> &'static PathBuf {
    use vmview_format::*;
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let out = scratch("interleaved-v2").join("trace.vmv");
        let header = TraceHeader {
            version: FORMAT_VERSION_2,
            pid: 7,
            start_unix_ns: 1_700_000_000_000_000_000,
            properties: vec![("jvm".into(), "synthetic".into())],
        };
        let f = BufWriter::new(File::create(&out).unwrap());
        let mut w = TraceWriter::with_version(f, &header, 3_000, FORMAT_VERSION_2).unwrap();
        let mut next = 0;
        let mut string = |w: &mut TraceWriter<BufWriter<File>>, text: String| {
            let id = StringId(next);
            next += 1;
            w.define(Symbol::String { id, text });
            id
        };
        let group = string(&mut w, "main".into());
        let sig = string(&mut w, "(I)I".into());
        let exc = string(&mut w, "java.lang.IllegalStateException".into());
        for t in 0..6u32 {
            let name = string(&mut w, format!("worker-{t}"));
            w.define(Symbol::Thread(ThreadSymbol {
                id: ThreadRef(t),
                java_id: i64::from(t) + 1,
                name,
                group,
                priority: 5,
                daemon: false,
            }));
        }
        for m in 0..8u32 {
            let class = string(&mut w, format!("shop.Service{}", m % 3));
            let name = string(&mut w, format!("handle{m}"));
            w.define(Symbol::Method(MethodSymbol {
                id: MethodId(m),
                class,
                name,
                sig,
                param_names: Vec::new(),
                modifiers: 1,
            }));
        }
        // Per thread: the open calls (method, time), innermost last.
        let mut open: Vec<Vec<(MethodId, u64)>> = vec![Vec::new(); 6];
        let (mut rng, mut time) = (0x2545_f491_4f6c_dd1du64, 10_000u64);
        for id in 1..=40_000u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let t = (rng % 6) as usize;
            time += (rng >> 8) % 3 * 5;
            let roll = (rng >> 16) % 100;
            let stack = &mut open[t];
            let (time_ns, kind) = if roll < 3 {
                (
                    time.saturating_sub(30),
                    EventKind::Throw {
                        exception: exc,
                        message: Some("late".into()),
                        method: MethodId(1),
                        loc: vmview_format::Loc { bci: 3, line: None },
                        catch: None,
                    },
                )
            } else if roll == 3 && id % 2 == 0 {
                // Two threads' budget reports at one time.
                (
                    time - time % 1_000,
                    EventKind::MethodCounts {
                        overhead_bp: id,
                        counts: vec![(MethodId(2), id)],
                    },
                )
            } else if stack.len() < 4 && (stack.is_empty() || roll % 2 == 0) {
                let m = MethodId(((rng >> 24) % 8) as u32);
                stack.push((m, time));
                (
                    time,
                    EventKind::Call {
                        method: m,
                        depth: stack.len() as u32,
                        caller: None,
                        params: vec![Value::Int((rng >> 32) as i32)],
                        metrics: Default::default(),
                    },
                )
            } else {
                let depth = stack.len() as u32;
                let (m, at) = stack.pop().unwrap();
                (
                    time,
                    EventKind::Return {
                        method: m,
                        depth,
                        outcome: Outcome::Value(Value::Int(7)),
                        elapsed_ns: time - at,
                        metrics: Default::default(),
                    },
                )
            };
            w.write(&Event {
                id,
                time_ns,
                thread: ThreadRef(t as u32),
                kind,
            })
            .unwrap();
        }
        w.finish().unwrap().flush().unwrap();
        let chunks = vmview_format::TraceReader::open(&out)
            .unwrap()
            .index()
            .unwrap()
            .chunks
            .len();
        assert!(chunks >= 40, "only {chunks} chunks");
        out
    })
}

// A version 2 chunk is read thread stream by thread stream where the
// order across threads does not matter (`stats`, a count) or can be
// worked out afterwards (the matches of a type-and-method filter, given
// the ids of the merge by time): byte for byte what the merged read gives.
#[test]
fn thread_by_thread_reads_of_a_format_2_trace_give_the_merged_output() {
    let t = interleaved_v2();
    let p = path_str(t);
    let expr = "type == CALL && method ~ \"^handle[13]$\"";
    for args in [
        vec!["stats", p],
        vec!["stats", p, "--format", "json"],
        vec!["search", "--count", p, expr],
        vec![
            "search",
            "--count",
            p,
            "type == RETURN && class == \"shop.Service2\"",
        ],
        vec!["filter", p, "--format", "jsonl", expr],
        vec![
            "filter",
            p,
            "--format",
            "jsonl",
            "type in [CALL, RETURN] && method ~ \"4$\"",
        ],
    ] {
        same_in_parallel(&args, None);
    }
    let out = t.with_file_name("filtered.vmv");
    same_in_parallel(&["filter", p, "-o", path_str(&out), expr], Some(&out));
    // The merge's ids are kept: the filtered events are those ids.
    let shown = vmview_with("2", &["filter", p, "--format", "jsonl", expr]);
    assert!(String::from_utf8_lossy(&shown.stdout).lines().count() > 1_000);
}
