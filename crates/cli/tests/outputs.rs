//! Outputs that must never destroy data: a recording never silently
//! replaces another (docs/RECORDING.md), a command never writes over its own
//! input, and a closed stderr or stdout never changes an exit code.

use crate::support::*;
use std::path::Path;
use std::process::{Command, Stdio};

/// `vmview record -o TRACE -- java -cp FIXTURES fx.ExitWith CODE MILLIS`.
fn record_exit_with(trace: &Path, code: u8, millis: u32) -> Command {
    agent();
    let mut c = Command::new(vmview());
    c.args(["record", "--classes", "fx.*", "-o"])
        .arg(trace)
        .args(["--", "java", "-cp"])
        .arg(classes())
        .args(["fx.ExitWith", &code.to_string(), &millis.to_string()]);
    c
}

fn bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

#[test]
fn record_moves_an_existing_trace_aside_to_old_instead_of_replacing_it() {
    // `record` used to truncate an existing trace without a word.
    let dir = scratch("old");
    let trace = dir.join("t.vmv");
    let first = record_exit_with(&trace, 0, 0).output().expect("run");
    assert!(first.status.success(), "{first:?}");
    let first_bytes = bytes(&trace);
    let second = record_exit_with(&trace, 0, 0).output().expect("run");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{stderr}");
    let old = dir.join("t.vmv.old");
    assert_eq!(bytes(&old), first_bytes, "the first trace is kept whole");
    assert_ne!(bytes(&trace), first_bytes);
    assert!(
        stderr.contains(&format!(
            "the earlier {} was moved to {}",
            trace.display(),
            old.display()
        )),
        "{stderr}"
    );
    assert!(!jsonl(&old).is_empty() && !jsonl(&trace).is_empty());
}

#[test]
fn two_jvms_recording_to_one_name_at_once_each_keep_their_own_trace() {
    // Both used to report success while the file held only the second.
    let dir = scratch("collide");
    let trace = dir.join("same.vmv");
    let a = record_exit_with(&trace, 0, 3000)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("first");
    // The first JVM takes the name before the second starts.
    let started = std::time::Instant::now();
    while !trace.exists() && started.elapsed().as_secs() < 60 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let b = record_exit_with(&trace, 0, 0).output().expect("second");
    let a = a.wait_with_output().expect("first");
    let (ea, eb) = (
        String::from_utf8_lossy(&a.stderr),
        String::from_utf8_lossy(&b.stderr),
    );
    assert!(a.status.success() && b.status.success(), "{ea}\n{eb}");
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let own: Vec<&String> = files
        .iter()
        .filter(|f| f.starts_with("same.") && f.ends_with(".vmv") && *f != "same.vmv")
        .collect();
    assert_eq!(own.len(), 1, "one per-pid file beside same.vmv: {files:?}");
    let own = dir.join(own[0]);
    assert!(
        ea.contains(&format!("to {}", trace.display())),
        "the first names its file: {ea}"
    );
    assert!(
        eb.contains("was being written by another recording")
            && eb.contains(&format!("to {}", own.display())),
        "the second says where its trace went: {eb}"
    );
    // Both are whole traces of their own JVM, without a warning.
    for t in [&trace, &own] {
        let out = run(&["stats", path_str(t)]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !err.contains("warning"),
            "{}: {err}",
            t.display()
        );
        assert!(jsonl(t)
            .iter()
            .any(|e| e["type"] == "CALL" && e["method"] == "work"));
    }
    assert!(!files.iter().any(|f| f.ends_with(".tmp")), "{files:?}");
}

#[test]
fn record_passes_on_the_jvm_exit_code_when_its_stderr_is_a_closed_pipe() {
    // `vmview record … 2>&1 >/dev/null | true` panicked on EPIPE printing its
    // last line and exited 101 instead of the JVM's 7.
    let dir = scratch("epipe");
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills the two-element array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors were just created and are owned here.
    let (read, write) = unsafe {
        use std::os::fd::FromRawFd;
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    };
    drop(read);
    let out = record_exit_with(&dir.join("t.vmv"), 7, 0)
        .stdout(Stdio::null())
        .stderr(Stdio::from(write))
        .status()
        .expect("run");
    assert_eq!(out.code(), Some(7));
}

#[test]
fn output_commands_exit_0_on_a_closed_stdout() {
    // `vmview view t.vmv | true` panicked on its "wrote" line (exit 101).
    let dir = scratch("stdout-pipe");
    let trace = dir.join("t.vmv");
    assert!(record_exit_with(&trace, 0, 0)
        .output()
        .unwrap()
        .status
        .success());
    for args in [
        vec!["view", path_str(&trace)],
        vec!["show", path_str(&trace)],
        vec!["stats", path_str(&trace)],
    ] {
        let mut child = Command::new(vmview())
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn quiet_record_prints_nothing_but_the_jvms_own_output() {
    // --quiet still printed the "wrote N events" line and the no---classes note.
    let dir = scratch("quiet");
    let trace = dir.join("t.vmv");
    agent();
    let out = Command::new(vmview())
        .args(["record", "--quiet", "-o"])
        .arg(&trace)
        .args(["--", "java", "-cp"])
        .arg(classes())
        .args(["fx.ExitWith", "3", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert!(!jsonl(&trace).is_empty());
}

/// `vmview ARGS` fails with an error naming the input, and `input` still
/// holds `want`.
fn refuses_to_destroy(args: &[&str], input: &Path, want: &[u8]) {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} should fail");
    assert!(
        err.contains("is the input file") && err.contains("would destroy the input"),
        "{args:?}: {err}"
    );
    assert_eq!(bytes(input), want, "{args:?} changed its input");
}

#[test]
fn no_command_writes_over_its_input_under_any_name() {
    // `view in.vmv -o in.vmv`, `view trace.html` (a trace so named: its
    // default output is itself) and `filter in.vmv -o hard.vmv` with a hard
    // link each truncated the input: names were compared, not files.
    let dir = scratch("identity");
    let trace = dir.join("in.vmv");
    assert!(record_exit_with(&trace, 0, 0)
        .output()
        .unwrap()
        .status
        .success());
    let want = bytes(&trace);
    let hard = dir.join("hard.vmv");
    std::fs::hard_link(&trace, &hard).unwrap();
    let soft = dir.join("soft.vmv");
    std::os::unix::fs::symlink(&trace, &soft).unwrap();
    let html = dir.join("trace.html");
    std::fs::copy(&trace, &html).unwrap();
    let (t, h, s) = (path_str(&trace), path_str(&hard), path_str(&soft));
    refuses_to_destroy(&["view", t, "-o", t], &trace, &want);
    refuses_to_destroy(&["view", t, "-o", h], &trace, &want);
    refuses_to_destroy(&["view", path_str(&html)], &html, &want);
    refuses_to_destroy(&["filter", t, "-o", h, "true"], &trace, &want);
    refuses_to_destroy(&["filter", t, "-o", s, "true"], &trace, &want);
    refuses_to_destroy(&["export", t, "--format", "jsonl", "-o", h], &trace, &want);
    refuses_to_destroy(&["merge", t, path_str(&html), "-o", h], &trace, &want);
    // Standard output appended to the input (`show in.vmv >> in.vmv`).
    for cmd in ["show", "stats", "calltree", "export"] {
        let appended = std::fs::OpenOptions::new()
            .append(true)
            .open(&hard)
            .unwrap();
        let out = Command::new(vmview())
            .args([cmd, t])
            .stdout(appended)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{cmd}: {err}");
        assert!(
            err.contains("standard output is the input file"),
            "{cmd}: {err}"
        );
        assert_eq!(bytes(&trace), want, "{cmd} appended to its input");
    }
    // Another file is fine, and so is a pipe.
    let out = run(&["filter", t, "-o", path_str(&dir.join("part.vmv")), "true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn record_to_dev_null_leaves_it_a_device_and_says_nothing_of_a_trace() {
    // A name that is not a regular file is opened as it is: never moved
    // aside, and no "the agent probably failed to load" afterwards.
    let out = record_exit_with(Path::new("/dev/null"), 4, 0)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(!err.contains("error") && !err.contains("warning"), "{err}");
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
}

#[test]
fn two_traces_concatenated_into_one_file_are_read_as_the_first_with_a_warning() {
    // `cat a.vmv b.vmv > both.vmv` used to read as `a.vmv` without a word.
    let dir = scratch("concat");
    let trace = dir.join("a.vmv");
    assert!(record_exit_with(&trace, 0, 0)
        .output()
        .unwrap()
        .status
        .success());
    let a = bytes(&trace);
    let both = dir.join("both.vmv");
    std::fs::write(&both, [a.clone(), a.clone()].concat()).unwrap();
    let out = run(&["show", path_str(&both), "--format", "jsonl"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("another trace starts at offset {}", a.len())),
        "{err}"
    );
    assert_eq!(
        out.stdout,
        run(&["show", path_str(&trace), "--format", "jsonl"]).stdout
    );
}
