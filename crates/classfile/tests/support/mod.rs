//! Shared helpers: temporary directories, a JDK to compile and run with,
//! the test driver that instruments a directory of classes, and the reader
//! of the test probe's log.

pub mod javap;

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use vmview_classfile::{instrument, HookConfig, Outcome, RewriteResult, SkipReason};

/// A directory removed when dropped (kept if `VMVIEW_KEEP_TEMP` is set).
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "vmview-classfile-{name}-{}-{n}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn join(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("VMVIEW_KEEP_TEMP").is_none() {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}

/// A JDK: its `bin` directory, or the `PATH` when `None`.
#[derive(Clone, Debug)]
pub struct Jdk {
    bin: Option<PathBuf>,
}

impl Jdk {
    /// The JDK on the `PATH` (17 on the CI machine).
    pub fn default() -> Jdk {
        Jdk { bin: None }
    }

    /// JDK 25, when installed.
    pub fn jdk25() -> Option<Jdk> {
        let bin = PathBuf::from("/usr/lib/jvm/temurin-25-jdk-amd64/bin");
        bin.join("java").exists().then_some(Jdk { bin: Some(bin) })
    }

    pub fn tool(&self, name: &str) -> Command {
        match &self.bin {
            Some(b) => Command::new(b.join(name)),
            None => Command::new(name),
        }
    }

    /// Compiles `sources` into `out` with `javac -g` and `extra` options.
    pub fn javac(&self, sources: &[PathBuf], out: &Path, extra: &[&str]) {
        let output = self
            .tool("javac")
            .arg("-g")
            .arg("-nowarn")
            .arg("-encoding")
            .arg("UTF-8")
            .args(extra)
            .arg("-d")
            .arg(out)
            .args(sources)
            .output()
            .expect("javac must be installed to run these tests");
        assert!(
            output.status.success(),
            "javac failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Runs `main` with every class verified, boot classes included.
    pub fn run(&self, classpath: &[&Path], main: &str, probe_log: Option<&Path>) -> Run {
        self.run_with_args(classpath, main, probe_log, &[])
    }

    /// Like [`Jdk::run`], passing `args` to `main`.
    pub fn run_with_args(
        &self,
        classpath: &[&Path],
        main: &str,
        probe_log: Option<&Path>,
        args: &[String],
    ) -> Run {
        let mut options = Vec::new();
        if let Some(log) = probe_log {
            options.push(format!("-Dvmview.probe.log={}", log.display()));
        }
        self.java(&options, classpath, main, args)
    }

    /// Runs `main` with JVM `options`, verifying every class.
    pub fn java(
        &self,
        options: &[String],
        classpath: &[&Path],
        main: &str,
        args: &[String],
    ) -> Run {
        let cp = std::env::join_paths(classpath).unwrap();
        let output = self
            .tool("java")
            .arg("-XX:+UnlockDiagnosticVMOptions")
            .arg("-XX:+BytecodeVerificationLocal")
            .arg("-XX:+BytecodeVerificationRemote")
            .arg("-Xss4m")
            .args(options)
            .arg("-cp")
            .arg(cp)
            .arg(main)
            .args(args)
            .output()
            .expect("java must be installed");
        Run {
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            status: output.status.code(),
        }
    }

    /// The JDK's home directory (`java.home`).
    pub fn home(&self) -> PathBuf {
        let out = self
            .tool("java")
            .args(["-XshowSettings:properties", "-version"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        let line = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("java.home = "))
            .expect("java.home in -XshowSettings output");
        PathBuf::from(line)
    }
}

/// What a JVM run printed.
#[derive(Debug)]
pub struct Run {
    pub stdout: String,
    pub stderr: String,
    pub status: Option<i32>,
}

pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The `.java` files directly in `dir`.
pub fn java_sources(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "java"))
        .collect();
    v.sort();
    v
}

/// Every file under `dir`, recursively, sorted.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Compiles the test probe (`vmview/Probe`) into `out`.
pub fn compile_probe(jdk: &Jdk, out: &Path) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/probe/vmview/Probe.java");
    jdk.javac(&[src], out, &[]);
}

pub fn config() -> HookConfig {
    HookConfig {
        probe_class: "vmview/Probe".into(),
        capture_args: true,
        primitive_entry: false,
        capture_return: true,
        monitors: false,
    }
}

/// Method ids spread over every encoding the hooks use for them: `iconst`,
/// `bipush`, `sipush`, and `ldc` of a pool constant (including ids whose
/// `int` form is negative).
pub fn spread_id(counter: u32) -> u32 {
    match counter % 4 {
        0 => counter / 4,
        1 => 20_000 + counter,
        2 => 70_000 + counter,
        _ => 3_000_000_000 + counter,
    }
}

/// The result of instrumenting a directory tree.
pub struct Instrumented {
    /// Method id → `Class.name(desc)`.
    pub names: HashMap<u32, String>,
    pub results: Vec<RewriteResult>,
}

impl Instrumented {
    /// Every skipped method with a reason other than abstract/native.
    pub fn unexpected_skips(&self) -> Vec<String> {
        self.results
            .iter()
            .flat_map(|r| {
                r.skipped.iter().filter_map(move |s| match s.reason {
                    SkipReason::Abstract | SkipReason::Native | SkipReason::EmptyFinalizer => None,
                    _ => Some(format!(
                        "{}.{}{}: {:?}",
                        r.class_name, s.method.name, s.method.descriptor, s.reason
                    )),
                })
            })
            .collect()
    }

    pub fn method_count(&self) -> usize {
        self.results.iter().map(|r| r.methods.len()).sum()
    }
}

/// The test driver: instruments every class under `src` into `dst` (other
/// files are copied), numbering methods with `spread_id`.
pub fn instrument_tree(src: &Path, dst: &Path, config: &HookConfig) -> Instrumented {
    let mut names = HashMap::new();
    let mut results = Vec::new();
    let mut counter = 0u32;
    for file in files_under(src) {
        let rel = file.strip_prefix(src).unwrap();
        let out = dst.join(rel);
        fs::create_dir_all(out.parent().unwrap()).unwrap();
        let bytes = fs::read(&file).unwrap();
        if file.file_name().is_some_and(|n| n == "module-info.class") {
            // A module descriptor cannot be patched in; it has no code anyway.
            continue;
        }
        if file.extension().is_none_or(|e| e != "class") {
            fs::write(&out, &bytes).unwrap();
            continue;
        }
        let mut ids = Vec::new();
        let result = instrument(&bytes, config, &mut |m| {
            let id = spread_id(counter);
            counter += 1;
            ids.push((id, format!("{}{}", m.name, m.descriptor)));
            Some(id)
        })
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for (id, method) in ids {
            names.insert(id, format!("{}.{}", result.class_name, method));
        }
        match &result.outcome {
            Outcome::Rewritten(b) => fs::write(&out, b).unwrap(),
            Outcome::Untouched(_) => fs::write(&out, &bytes).unwrap(),
        }
        results.push(result);
    }
    Instrumented { names, results }
}

/// One line of the test probe's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub thread: String,
    /// `ENTER`, `EXIT` or `THROW`.
    pub kind: String,
    /// `Class.name(desc)`.
    pub method: String,
    /// Arguments of ENTER (`[1, "a"]`), value of EXIT, exception of THROW.
    pub detail: String,
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.kind, self.method, self.detail)
    }
}

/// Reads the probe log, naming methods by id.
pub fn read_log(path: &Path, names: &HashMap<u32, String>) -> Vec<Event> {
    let text = fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("probe log {} missing: {e}", path.display()));
    text.lines()
        .map(|line| {
            let mut parts = line.splitn(4, '\t');
            let thread = parts.next().unwrap().to_string();
            let kind = parts.next().unwrap().to_string();
            let id = parts.next().unwrap().parse::<i32>().unwrap() as u32;
            let detail = parts.next().unwrap_or("").to_string();
            // Monitor hooks carry no method id.
            let method = if kind.contains("MONITOR") {
                String::new()
            } else {
                names
                    .get(&id)
                    .unwrap_or_else(|| panic!("unknown method id {id} in `{line}`"))
                    .clone()
            };
            Event {
                thread,
                kind,
                method,
                detail,
            }
        })
        .collect()
}

/// Checks that, per thread, every EXIT or THROW closes the innermost open
/// ENTER of the same method, and every monitor release the innermost held
/// monitor of its kind (a block's by the object's class, a synchronized
/// method's as such), with no monitor of a call still held when it ends.
/// Returns the calls still open at the end.
pub fn check_nesting(events: &[Event]) -> Vec<String> {
    let mut stacks: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut held: HashMap<&str, Vec<(usize, String)>> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        let stack = stacks.entry(&e.thread).or_default();
        let held = held.entry(&e.thread).or_default();
        let depth = stack.len();
        match e.kind.as_str() {
            "MONITOR_ENTER" => held.push((depth, e.detail.clone())),
            "METHOD_MONITOR_ENTER" => held.push((depth, format!("method {}", e.detail))),
            "MONITOR_EXIT" | "METHOD_MONITOR_EXIT" => {
                let top = held.pop();
                let want = match e.kind.as_str() {
                    "MONITOR_EXIT" => e.detail.clone(),
                    _ => top
                        .as_ref()
                        .filter(|(_, m)| m.starts_with("method "))
                        .map_or("a synchronized method's".into(), |(_, m)| m.clone()),
                };
                assert_eq!(
                    top,
                    Some((depth, want)),
                    "event {i} `{e}` on thread {} does not release the innermost monitor of this call",
                    e.thread
                );
            }
            "ENTER" => stack.push(&e.method),
            _ => {
                assert!(
                    held.last().is_none_or(|(d, _)| *d < depth),
                    "event {i} `{e}` on thread {}: the call ends holding {held:?}",
                    e.thread
                );
                let open = stack.pop();
                assert_eq!(
                    open,
                    Some(e.method.as_str()),
                    "event {i} `{e}` on thread {} does not close the innermost call",
                    e.thread
                );
            }
        }
    }
    stacks
        .into_iter()
        .flat_map(|(t, s)| s.into_iter().map(move |m| format!("{t}: {m}")))
        .collect()
}

/// Asserts that `expected` occur in `events` in this order (not
/// necessarily adjacent), each given as `KIND method detail`.
pub fn assert_in_order(events: &[Event], expected: &[&str]) {
    let shown: Vec<String> = events.iter().map(|e| e.to_string()).collect();
    let mut from = 0;
    for want in expected {
        match shown[from..]
            .iter()
            .position(|s| s.trim_end() == want.trim_end())
        {
            Some(p) => from += p + 1,
            None => {
                let context: Vec<&String> = shown
                    .iter()
                    .filter(|s| {
                        let m = want.split(' ').nth(1).unwrap_or("");
                        s.contains(m)
                    })
                    .take(20)
                    .collect();
                panic!(
                    "`{want}` not found after event {from}; events of that method:\n{context:#?}"
                );
            }
        }
    }
}

/// Counts events of `kind` for `method`.
pub fn count(events: &[Event], kind: &str, method: &str) -> usize {
    events
        .iter()
        .filter(|e| e.kind == kind && e.method == method)
        .count()
}
