//! Shared helpers: compile the Java fixtures once, run `vmview record` on
//! one of them, read a trace back as JSON Lines.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The `vmview` binary under test.
pub fn vmview() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_vmview"))
}

/// The agent library `vmview record` injects: the one inside the vmview
/// under test, as `vmview agent-path` writes it to the user's cache.
pub fn agent() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let out = Command::new(vmview())
            .arg("agent-path")
            .env_remove("VMVIEW_AGENT")
            .output()
            .expect("run vmview agent-path");
        assert!(
            out.status.success(),
            "vmview agent-path failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lib = PathBuf::from(String::from_utf8(out.stdout).expect("utf-8 path").trim());
        assert!(lib.is_file(), "{} is missing", lib.display());
        lib
    })
    .clone()
}

/// A fresh directory for one test's files.
pub fn scratch(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "cli-{}-{}-{}",
        name,
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// The fixtures under `tests/fixtures`, compiled once with `javac -g`.
pub fn classes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| compile_java("fx", None, "classes"))
}

/// Compiles every `.java` file of `tests/fixtures/SUBDIR` with `javac -g`
/// (against `class_path` when given) into a scratch directory named NAME.
pub fn compile_java(subdir: &str, class_path: Option<&str>, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(subdir);
    let out = scratch(name);
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&src)
        .unwrap_or_else(|e| panic!("fixtures dir {}: {e}", src.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "java"))
        .collect();
    sources.sort();
    let mut javac = Command::new("javac");
    javac.arg("-g");
    if let Some(cp) = class_path {
        javac.arg("-cp").arg(cp);
    }
    let status = javac
        .arg("-d")
        .arg(&out)
        .args(&sources)
        .status()
        .expect("run javac (is a JDK installed?)");
    assert!(status.success(), "javac failed on the fixtures in {subdir}");
    out
}

/// Runs `vmview ARGS`, which must succeed, and returns its peak resident
/// set size in KiB.
///
/// The child is started through GNU `time` (`/usr/bin/time -f %M`), which
/// forks it from its own small process. Spawned straight from this test
/// binary, the child would start as a vfork of the harness and Linux would
/// carry the harness's high-water mark into the child's `ru_maxrss`: the
/// figure then measured whatever the other tests had allocated (168 MB for
/// a filter that needs 14).
pub fn peak_rss_kib(args: &[&str]) -> u64 {
    const TIME: &str = "/usr/bin/time";
    assert!(
        Path::new(TIME).exists(),
        "{TIME} (GNU time, Debian package `time`) measures the child alone; \
         `bash .ci/run` installs it"
    );
    let report = scratch("peak-rss").join("rss");
    let status = Command::new(TIME)
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&report)
        .arg(vmview())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run vmview under /usr/bin/time");
    assert!(status.success(), "vmview {args:?} failed: {status}");
    let text = std::fs::read_to_string(&report).expect("read time's report");
    text.trim()
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("unexpected report from {TIME}: {text:?}"))
}

/// What one `vmview record` run left behind.
pub struct Recording {
    pub trace: PathBuf,
    pub output: Output,
}

impl Recording {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    /// The trace's events as parsed JSON Lines.
    pub fn events(&self) -> Vec<Value> {
        jsonl(&self.trace)
    }
}

/// Runs `vmview record FLAGS -o TRACE -- java JVM_ARGS -cp FIXTURES MAIN ARGS`.
pub fn record(flags: &[&str], jvm_args: &[&str], main: &str, args: &[&str]) -> Recording {
    agent();
    let dir = scratch(main);
    let trace = dir.join("trace.vmv");
    let output = Command::new(vmview())
        .arg("record")
        .args(format_flags())
        .args(flags)
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg("java")
        .args(jvm_args)
        .arg("-cp")
        .arg(classes())
        .arg(main)
        .args(args)
        .output()
        .expect("run vmview record");
    Recording { trace, output }
}

/// `--format 2` when the environment says `VMVIEW_TEST_FORMAT=2`, so the
/// end-to-end tests that record through [`record`] (and the few that start
/// the agent themselves and add [`format_option`]) can be run on trace
/// format version 2: `VMVIEW_TEST_FORMAT=2 cargo test -p vmview-cli`.
pub fn format_flags() -> Vec<String> {
    match std::env::var("VMVIEW_TEST_FORMAT") {
        Ok(v) if !v.is_empty() => vec!["--format".into(), v],
        _ => Vec::new(),
    }
}

/// [`format_flags`] as an agent option to append: `,format=2` or nothing.
pub fn format_option() -> String {
    match std::env::var("VMVIEW_TEST_FORMAT") {
        Ok(v) if !v.is_empty() => format!(",format={v}"),
        _ => String::new(),
    }
}

/// Runs `vmview ARGS` and returns its output.
pub fn run(args: &[&str]) -> Output {
    Command::new(vmview())
        .args(args)
        .output()
        .expect("run vmview")
}

/// `vmview show TRACE --format jsonl`, parsed; panics with stderr if it fails.
pub fn jsonl(trace: &Path) -> Vec<Value> {
    let out = run(&["show", path_str(trace), "--format", "jsonl"]);
    assert!(
        out.status.success(),
        "vmview show failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8 output")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Events of one type.
pub fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

/// The first event of `ty` whose `method` is `method`.
pub fn find<'a>(events: &'a [Value], ty: &str, method: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["type"] == ty && e["method"] == method)
        .unwrap_or_else(|| panic!("no {ty} event for method {method}"))
}

/// The handler `method` of a `vmview reactions --format json` document.
pub fn handler<'a>(doc: &'a Value, method: &str) -> &'a Value {
    doc["handlers"]
        .as_array()
        .expect("handlers")
        .iter()
        .find(|h| h["method"] == method)
        .unwrap_or_else(|| panic!("{method} is not a handler: {doc:#}"))
}

/// What reactions must find in `fx.Reactions`, however its samples were
/// taken: the queue handler `handleOrder`, waiting, in its loop's `run` on
/// thread "orders", and the socket handler `onMessage` on thread "server".
pub fn assert_fx_reactions_handlers(doc: &Value) {
    let order = handler(doc, "handleOrder");
    assert_eq!(order["class"], "fx.Reactions$OrderLoop");
    assert_eq!(order["type"], "NODE_WAIT");
    assert_eq!(order["loop"]["method"], "run");
    assert_eq!(order["threads"][0]["thread"], "orders");
    let msg = handler(doc, "onMessage");
    assert_eq!(msg["class"], "fx.Reactions$Server");
    assert_eq!(msg["type"], "NODE_IO");
    assert_eq!(msg["threads"][0]["thread"], "server");
}
