//! Deep recursion: the consumers cut call paths at the depth cap, and the
//! agent leaves the program its stack.
//!
//! What broke (issue 21, items 4 and 5): a trace of a recursion thousands
//! of frames deep made `view` quadratic in the depth, `export --format
//! collapsed` of a 12,000-deep trace wrote 1 GB, `--format svg` of 326 k
//! events 39,000 deep was killed at 24 GB, `calltree` took 5 GB; and a
//! program recursing 5,000 deep that exits on its own hit
//! StackOverflowError under `record`. Memory is measured on the child
//! (`/usr/bin/time -f %M`), never through this process's rusage.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use vmview_format::{
    Event, EventKind, Loc, MethodId, MethodSymbol, Outcome, StackId, StackSymbol, StringId, Symbol,
    ThreadRef, ThreadState, ThreadSymbol, TraceHeader, TraceWriter, Value, DEFAULT_MAX_DEPTH,
};

use crate::support::{classes, path_str, peak_rss_kib, record, run, scratch, vmview};

/// `fx.Deep.down` as the folded formats name it.
const FRAME: &str = "fx.Deep.down";

/// Writes a synthetic trace: `main` calls `down`, which recurses `depth`
/// frames deep, `repeat` times; then `samples` SAMPLE events whose stack is
/// `depth` frames of `down`.
fn deep_trace(path: &Path, depth: u32, repeat: u32, samples: u32) {
    let header = TraceHeader {
        version: 1,
        pid: 1,
        start_unix_ns: 1_700_000_000_000_000_000,
        properties: vec![("jvm".into(), "synthetic".into())],
    };
    let f = BufWriter::new(File::create(path).expect("create trace"));
    let mut w = TraceWriter::new(f, &header).expect("writer");
    let strings = [
        "main",
        "fx.Deep",
        "down",
        "(I)I",
        "main",
        "([Ljava/lang/String;)V",
    ];
    for (i, s) in strings.iter().enumerate() {
        w.define(Symbol::String {
            id: StringId(i as u32),
            text: s.to_string(),
        });
    }
    w.define(Symbol::Thread(ThreadSymbol {
        id: ThreadRef(0),
        java_id: 1,
        name: StringId(0),
        group: StringId(0),
        priority: 5,
        daemon: false,
    }));
    for (id, name, sig) in [(0, 4, 5), (1, 2, 3)] {
        w.define(Symbol::Method(MethodSymbol {
            id: MethodId(id),
            class: StringId(1),
            name: StringId(name),
            sig: StringId(sig),
            param_names: vec![],
            modifiers: 9,
        }));
    }
    let (main, down) = (MethodId(0), MethodId(1));
    let mut id = 0;
    let mut time = 0;
    let mut ev = |w: &mut TraceWriter<BufWriter<File>>, time: u64, kind: EventKind| {
        id += 1;
        w.write(&Event {
            id,
            time_ns: time,
            thread: ThreadRef(0),
            kind,
        })
        .expect("write event");
    };
    let call = |method, depth| EventKind::Call {
        metrics: Default::default(),
        method,
        depth,
        caller: None,
        params: vec![],
    };
    let ret = |method, depth, elapsed_ns| EventKind::Return {
        metrics: Default::default(),
        method,
        depth,
        outcome: Outcome::Value(Value::Int(0)),
        elapsed_ns,
    };
    ev(&mut w, time, call(main, 1));
    for _ in 0..repeat {
        let start = time;
        for d in 0..depth {
            time += 10;
            ev(&mut w, time, call(down, d + 2));
        }
        for d in (0..depth).rev() {
            time += 10;
            ev(
                &mut w,
                time,
                ret(down, d + 2, time - start - 10 * u64::from(d)),
            );
        }
    }
    if samples > 0 {
        w.define(Symbol::Stack(StackSymbol {
            id: StackId(0),
            types: Vec::new(),
            frames: (0..depth)
                .map(|_| {
                    (
                        down,
                        Loc {
                            bci: 3,
                            line: Some(6),
                        },
                    )
                })
                .chain([(
                    main,
                    Loc {
                        bci: 1,
                        line: Some(11),
                    },
                )])
                .collect(),
        }));
        for _ in 0..samples {
            time += 1_000;
            ev(
                &mut w,
                time,
                EventKind::Sample {
                    state: ThreadState::Run,
                    stack: StackId(0),
                    monitors: vec![],
                },
            );
        }
    }
    time += 10;
    ev(&mut w, time, ret(main, 1, time));
    w.finish().expect("finish trace");
}

fn size(p: &Path) -> u64 {
    std::fs::metadata(p).expect("output exists").len()
}

/// The collapsed lines of `path`.
fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .expect("read output")
        .lines()
        .map(str::to_string)
        .collect()
}

/// The largest a folded file may be when paths are cut at the cap: one
/// line per kept depth, each at most cap + 2 frames.
fn folded_bound(frame_len: usize) -> u64 {
    let cap = DEFAULT_MAX_DEPTH as u64 + 2;
    cap * cap * (frame_len as u64 + 1) + 64 * cap
}

#[test]
fn a_recursion_40000_deep_exports_in_bounded_memory_with_a_truncated_frame() {
    // Before: `export --format svg` of 326 k events 39,000 deep was killed
    // at 24 GB, and the collapsed file of a 12,000-deep one was 1 GB.
    let dir = scratch("deep-40000");
    let (small, large) = (dir.join("small.vmv"), dir.join("large.vmv"));
    // As many events in both: only the depth differs.
    deep_trace(&small, 2_000, 80, 100);
    deep_trace(&large, 40_000, 4, 100);
    let peak = |input: &Path, args: &[&str], out: &Path| {
        let mut all = vec![path_str(input)];
        all.extend_from_slice(args);
        all.extend(["-o", path_str(out)]);
        let mut cmd = vec!["export"];
        cmd.extend(all);
        peak_rss_kib(&cmd)
    };
    for format in ["collapsed", "svg"] {
        let out_s = dir.join(format!("small.{format}"));
        let out_l = dir.join(format!("large.{format}"));
        let s = peak(&small, &["--format", format], &out_s);
        let l = peak(&large, &["--format", format], &out_l);
        eprintln!("export --format {format}: peak RSS {s} KiB at 2,000 deep, {l} KiB at 40,000 deep; {} / {} bytes", size(&out_s), size(&out_l));
        // Twenty times deeper: the same capped tree, so about the same
        // memory (the reader and the open-call stack grow a little).
        assert!(
            l < s + 48 * 1024,
            "--format {format}: {l} KiB at 40,000 deep vs {s} KiB at 2,000 deep"
        );
        assert!(
            size(&out_l) < 3 * folded_bound(FRAME.len()),
            "--format {format} wrote {} bytes",
            size(&out_l)
        );
    }
    // The timelines write every CALL and RETURN (so they grow with the
    // events, as many in both traces), but a sample's stack is cut too.
    for format in ["chrome", "speedscope"] {
        let out_s = dir.join(format!("small.{format}"));
        let out_l = dir.join(format!("large.{format}"));
        let s = peak(&small, &["--format", format], &out_s);
        let l = peak(&large, &["--format", format], &out_l);
        let (bs, bl) = (size(&out_s), size(&out_l));
        eprintln!("export --format {format}: peak RSS {s} KiB at 2,000 deep, {l} KiB at 40,000 deep; {bs} / {bl} bytes");
        assert!(l < s + 48 * 1024, "--format {format}: {l} KiB vs {s} KiB");
        assert!(bl < 2 * bs, "--format {format}: {bl} bytes vs {bs} bytes");
        let text = std::fs::read_to_string(&out_l).expect("output");
        assert!(
            text.contains(&format!(
                "[truncated {} frames]",
                40_001 - DEFAULT_MAX_DEPTH
            )),
            "--format {format}: no truncated frame in the samples' stacks"
        );
    }
    let folded = lines(&dir.join("large.collapsed"));
    assert!(
        folded.len() <= DEFAULT_MAX_DEPTH as usize + 2,
        "{} lines",
        folded.len()
    );
    // main, then 1,023 frames of down, then one node for the 38,977 below.
    let cut = 40_000 + 1 - DEFAULT_MAX_DEPTH;
    let truncated = folded
        .iter()
        .find(|l| l.contains("[truncated"))
        .expect("a truncated frame");
    let (path, weight) = truncated.rsplit_once(' ').expect("weight");
    let frames: Vec<&str> = path.split(';').collect();
    assert_eq!(frames.len(), DEFAULT_MAX_DEPTH as usize + 1, "{path:.200}");
    assert_eq!(frames[0], "fx.Deep.main");
    assert!(frames[1..frames.len() - 1].iter().all(|f| *f == FRAME));
    assert_eq!(
        *frames.last().expect("frames"),
        format!("[truncated {cut} frames]")
    );
    // Its weight is the self time of all it stands for: 4 repeats × 38,977
    // frames × (10 ns in + 10 ns out), well above any kept frame's.
    let w: u64 = weight.parse().expect("a number");
    assert_eq!(w, 4 * u64::from(cut) * 20 - 4 * 10, "{truncated:.80}");
    let svg = std::fs::read_to_string(dir.join("large.svg")).expect("svg");
    assert!(
        svg.contains(&format!("[truncated {cut} frames]")),
        "no truncated frame in the SVG"
    );

    // Samples are cut the same way: 40,001 frames, 1,024 kept.
    let samples = dir.join("samples.collapsed");
    let s = peak(
        &large,
        &["--format", "collapsed", "--weight", "samples"],
        &samples,
    );
    let folded = lines(&samples);
    assert_eq!(folded.len(), 1, "{:.200?}", folded);
    assert!(
        folded[0].ends_with(&format!(
            ";[truncated {} frames] 100",
            40_001 - DEFAULT_MAX_DEPTH
        )),
        "{:.100}",
        &folded[0][folded[0].len().saturating_sub(100)..]
    );
    eprintln!("export --weight samples: peak RSS {s} KiB");

    // --max-depth moves the cap.
    let out = run(&[
        "export",
        path_str(&large),
        "--format",
        "collapsed",
        "--max-depth",
        "10",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 11, "{text:.400}");
    assert!(text.contains(";[truncated 39991 frames] "), "{text:.2000}");
}

#[test]
fn calltree_and_view_of_a_recursion_40000_deep_stay_bounded() {
    // Before: `calltree` took 5 GB and `view` ran for minutes (quadratic in
    // the depth) on such traces.
    let dir = scratch("deep-tree");
    let (small, large) = (dir.join("small.vmv"), dir.join("large.vmv"));
    // As many events in both (the page embeds them all): only the depth
    // differs.
    deep_trace(&small, 2_000, 60, 0);
    deep_trace(&large, 40_000, 3, 0);
    let cut = 40_000 + 1 - DEFAULT_MAX_DEPTH;
    for (name, args) in [
        ("text", vec!["calltree"]),
        ("json", vec!["calltree", "--format", "json"]),
        ("collapsed", vec!["calltree", "--format", "collapsed"]),
        ("html", vec!["view"]),
    ] {
        let run_on = |input: &Path| -> (u64, PathBuf) {
            let out = dir.join(format!(
                "{}-{name}",
                input.file_stem().unwrap().to_string_lossy()
            ));
            let mut a: Vec<&str> = args.clone();
            a.push(path_str(input));
            if name == "html" {
                a.extend(["-o", path_str(&out)]);
                (peak_rss_kib(&a), out)
            } else {
                // calltree writes to standard output.
                let report = dir.join("time.txt");
                let status = Command::new("/usr/bin/time")
                    .args(["-f", "%M", "-o"])
                    .arg(&report)
                    .arg(vmview())
                    .args(&a)
                    .stdout(File::create(&out).expect("create output"))
                    .stderr(Stdio::null())
                    .status()
                    .expect("run /usr/bin/time");
                assert!(status.success(), "vmview {a:?}: {status}");
                let text = std::fs::read_to_string(&report).expect("report");
                (
                    text.trim().lines().last().unwrap().trim().parse().unwrap(),
                    out,
                )
            }
        };
        let (s, _) = run_on(&small);
        let (l, out) = run_on(&large);
        eprintln!(
            "{args:?}: peak RSS {s} KiB at 2,000 deep, {l} KiB at 40,000 deep; output {} bytes",
            size(&out)
        );
        assert!(
            l < s + 48 * 1024,
            "{args:?}: {l} KiB at 40,000 deep vs {s} KiB at 2,000 deep"
        );
        assert!(
            size(&out) < 3 * folded_bound(FRAME.len()),
            "{args:?} wrote {} bytes",
            size(&out)
        );
        let text = std::fs::read_to_string(&out).expect("output");
        assert!(
            text.contains(&format!("[truncated {cut} frames]")),
            "{args:?}: no truncated node"
        );
    }
    // The JSON names the node's kind and how many frames it stands for.
    let out = run(&[
        "calltree",
        path_str(&large),
        "--format",
        "json",
        "--max-depth",
        "3",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let mut node = &doc["merged"];
    for _ in 0..3 {
        node = &node["children"][0];
    }
    let t = &node["children"][0];
    assert_eq!(t["kind"], "truncated", "{t}");
    assert_eq!(t["frames"], 40_001 - 3, "{t}");
    assert_eq!(t["name"], "[truncated 39998 frames]");
    assert_eq!(t["calls"], 3 * (40_001 - 3), "{t}");
    assert!(
        t["children"].as_array().is_some_and(|c| c.is_empty()),
        "{t}"
    );
}

/// Runs `java -XssSTACK -cp FIXTURES fx.Recurse ARGS` (no agent).
fn plain_java(stack: &str, args: &[&str]) -> std::process::Output {
    Command::new("java")
        .arg(format!("-Xss{stack}"))
        .arg("-cp")
        .arg(classes())
        .arg("fx.Recurse")
        .args(args)
        .output()
        .expect("run java")
}

/// The deepest `fx.Recurse max` gets, from its output.
fn deepest(out: &std::process::Output) -> u64 {
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("deepest "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "no depth in {text:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

/// The stack every fixture below runs with: set explicitly, so the depth a
/// plain JVM reaches does not depend on the machine's default.
const STACK: &str = "2m";
/// How deep the program recurses: plain java reaches several times this
/// with the same stack (checked below).
const DEPTH: &str = "5000";

#[test]
fn a_program_recursing_5000_deep_keeps_its_own_exit_code_under_record() {
    // Before: `fx.Recurse 5000 … 42` hit StackOverflowError under `record`
    // in 4 of 5 runs: the probes' native frames ate the program's stack.
    let plain = plain_java(STACK, &[DEPTH, "3", "42"]);
    assert_eq!(plain.status.code(), Some(42), "plain java: {plain:?}");
    let max = deepest(&plain_java(STACK, &["max"]));
    let depth: u64 = DEPTH.parse().unwrap();
    assert!(
        max >= 2 * depth,
        "plain java reaches only {max} frames with -Xss{STACK}"
    );
    for _ in 0..3 {
        let rec = record(
            &["--classes", "fx.Recurse"],
            &[&format!("-Xss{STACK}")],
            "fx.Recurse",
            &[DEPTH, "3", "42"],
        );
        assert_eq!(
            rec.output.status.code(),
            Some(42),
            "under record: {}\n{}",
            rec.stdout(),
            rec.stderr()
        );
        assert!(rec.stdout().contains("depth sum 15000"), "{}", rec.stdout());
        // The agent saw all of it and the consumers cut it.
        let out = run(&["calltree", path_str(&rec.trace), "--max-depth", "100"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains(&format!("[truncated {} frames]", depth + 2 - 100)),
            "{text:.3000}"
        );
    }
}
