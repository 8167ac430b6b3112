//! `vmview attach` and `vmview jvms` against real running JVMs: fx.Service
//! runs until a stop file appears, and must print exactly what it prints
//! without vmview, whatever was attached, recorded and stopped meanwhile.

use crate::support::*;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

/// What fx.Service prints, attached to or not.
const SERVICE_OUTPUT: &str = "ready\ndone: true ok\n";

/// A running fx.Service (or a command wrapping it), killed if a test fails.
struct Service {
    child: Child,
    stdout: BufReader<ChildStdout>,
    stop: PathBuf,
    dir: PathBuf,
}

impl Service {
    /// Runs `JAVA… JVM_ARGS -cp FIXTURES fx.Service STOP` (`JAVA…` ends
    /// with the java executable) and waits for its "ready".
    fn start(name: &str, java: &[&str], jvm_args: &[&str]) -> Service {
        let dir = scratch(name);
        let stop = dir.join("stop");
        let (program, rest) = java.split_first().expect("a java command");
        let mut child = Command::new(program)
            .args(rest)
            .args(jvm_args)
            .arg("-cp")
            .arg(classes())
            .arg("fx.Service")
            .arg(&stop)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start fx.Service");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut first = String::new();
        stdout.read_line(&mut first).expect("read fx.Service");
        if first != "ready\n" {
            let _ = child.kill();
            let mut err = String::new();
            let _ = child.stderr.take().map(|mut e| e.read_to_string(&mut err));
            panic!("fx.Service did not start: {first:?} {err}");
        }
        Service {
            child,
            stdout,
            stop,
            dir,
        }
    }

    /// The JVM's pid: the child itself, or the java process below it.
    fn jvm_pid(&self) -> u32 {
        let mut pid = self.child.id();
        for _ in 0..3 {
            if std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.contains("fx.Service") && c.starts_with("java"))
            {
                return pid;
            }
            let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                .unwrap_or_default();
            match children
                .split_whitespace()
                .next()
                .and_then(|c| c.parse().ok())
            {
                Some(c) => pid = c,
                None => break,
            }
        }
        pid
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// Tells it to finish; returns its stdout after "ready" and its stderr,
    /// checking it exited normally.
    fn finish(mut self) -> (String, String) {
        std::fs::write(&self.stop, b"").expect("write stop file");
        let mut out = "ready\n".to_string();
        self.stdout.read_to_string(&mut out).expect("read stdout");
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            e.read_to_string(&mut err).expect("read stderr");
        }
        let status = self.child.wait().expect("wait");
        assert!(status.success(), "fx.Service exited with {status}: {err}");
        (out, err)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn vmview_ok(args: &[&str]) -> String {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "vmview {args:?} failed: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned() + &stderr
}

/// vmview fails with one error line (plus its hint) containing `needle`.
fn vmview_refuses(args: &[&str], needle: &str) {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "vmview {args:?} should fail");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error:")).collect();
    assert_eq!(errors.len(), 1, "one error line expected: {stderr}");
    assert!(
        errors[0].contains(needle),
        "expected {needle:?} in {stderr}"
    );
    assert!(stderr.contains("hint:"), "a hint expected: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// CALLs of `Class.method`.
fn calls_of<'a>(events: &'a [Value], qualified: &str) -> Vec<&'a Value> {
    let (class, method) = qualified.rsplit_once('.').expect("Class.method");
    events
        .iter()
        .filter(|e| e["type"] == "CALL" && e["class"] == class && e["method"] == method)
        .collect()
}

/// `dir` holds one saved timeline index, `log` names it, and it is
/// `trace`'s (what `serve` would read for it).
fn saved_timeline_index(log: &str, dir: &Path, trace: &Path) {
    use vmview_view::timeline::Limits;
    use vmview_view::timeline_cache::{load, TraceIdentity};
    let saved: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("no {}: {e}; {log}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert!(
        log.contains(&format!(
            "saved the timeline index to {}",
            saved[0].display()
        )),
        "{log}"
    );
    let id = TraceIdentity::of(trace).unwrap();
    let tl = load(&saved[0], &id, Limits::default()).expect("the trace's own index");
    assert!(tl.end_ns() > 0);
}

#[test]
fn attach_records_calls_and_samples_then_a_second_attach_records_again() {
    agent();
    let mut service = Service::start("attach-twice", &["java"], &[]);
    let pid = service.jvm_pid().to_string();
    let first = service.dir.join("first.vmv");
    let cache = service.dir.join("cache");
    let log = vmview_ok(&[
        "attach",
        &pid,
        "--classes",
        "fx.ServiceWorker",
        "--events",
        "calls,samples",
        "--duration",
        "2s",
        "-o",
        path_str(&first),
        "--timeline-cache",
        path_str(&cache.join("first")),
    ]);
    assert!(log.contains("stopped; wrote"), "{log}");
    assert!(service.alive(), "the JVM must keep running after stop");
    saved_timeline_index(&log, &cache.join("first"), &first);
    let events = jsonl(&first);
    let steps = calls_of(&events, "fx.ServiceWorker.step");
    assert!(
        steps.len() > 10,
        "CALLs of step expected, got {}",
        steps.len()
    );
    assert_eq!(steps[0]["params"][0]["type"], "int", "{}", steps[0]);
    assert!(!of_type(&events, "RETURN").is_empty());
    let samples = of_type(&events, "SAMPLE");
    assert!(!samples.is_empty(), "SAMPLE events expected");
    assert!(
        events
            .iter()
            .all(|e| e["time_ns"].as_u64().is_some_and(|t| t < 60_000_000_000)),
        "times count from the recording's start"
    );

    // The same JVM again: a new recording, controlled by status and stop.
    let second = service.dir.join("second.vmv");
    vmview_ok(&[
        "attach",
        &pid,
        "--classes",
        "fx.ServiceWorker",
        "-o",
        path_str(&second),
    ]);
    let status = vmview_ok(&["attach", &pid, "status"]);
    assert!(
        status.contains("recording") && status.contains("second.vmv"),
        "{status}"
    );
    std::thread::sleep(Duration::from_millis(500));
    let stopped = vmview_ok(&[
        "attach",
        &pid,
        "stop",
        "--timeline-cache",
        path_str(&cache.join("second")),
    ]);
    assert!(stopped.contains("second.vmv"), "{stopped}");
    saved_timeline_index(&stopped, &cache.join("second"), &second);
    let again = jsonl(&second);
    assert!(
        !calls_of(&again, "fx.ServiceWorker.step").is_empty(),
        "second recording has calls"
    );
    vmview_refuses(&["attach", &pid, "stop"], "no recording is running");

    let (out, err) = service.finish();
    assert_eq!(out, SERVICE_OUTPUT);
    assert_eq!(err, "", "the JVM's stderr must stay clean");
}

#[test]
fn dump_and_status_control_a_recording_started_by_vmview_record() {
    let dir = scratch("attach-dump");
    let trace = dir.join("rec.vmv");
    let trace_arg = format!("{}", trace.display());
    let vmview_bin = vmview();
    let service = Service::start(
        "attach-dump",
        &[
            vmview_bin.to_str().unwrap(),
            "record",
            "--classes",
            "fx.ServiceWorker",
            "-o",
            &trace_arg,
            "--",
            "java",
        ],
        &[],
    );
    let pid = service.jvm_pid().to_string();
    let listed = vmview_ok(&["jvms"]);
    let line = listed
        .lines()
        .find(|l| l.split_whitespace().next() == Some(pid.as_str()))
        .unwrap_or_else(|| panic!("pid {pid} not in `vmview jvms`: {listed}"));
    assert!(
        line.contains("fx.Service") && line.contains("agent loaded"),
        "{line}"
    );

    std::thread::sleep(Duration::from_millis(300));
    let dumped = vmview_ok(&["attach", &pid, "dump", "--events", "calls"]);
    assert!(dumped.contains("rec.2.vmv"), "{dumped}");
    let status = vmview_ok(&["attach", &pid, "status"]);
    assert!(status.contains("rec.2.vmv"), "{status}");
    let first = jsonl(&trace);
    assert!(!calls_of(&first, "fx.ServiceWorker.step").is_empty());
    std::thread::sleep(Duration::from_millis(300));
    let (out, _) = service.finish();
    assert!(out.starts_with(SERVICE_OUTPUT), "{out}");
    // The JVM's exit finished the second file.
    let second = jsonl(&dir.join("rec.2.vmv"));
    assert!(!calls_of(&second, "fx.ServiceWorker.step").is_empty());
    assert!(
        of_type(&second, "THREAD_START").is_empty(),
        "events=calls only: {:?}",
        second[0]
    );
}

#[test]
fn attach_refuses_a_non_jvm_a_dead_pid_and_a_jvm_without_attach() {
    let mut sleeper = Command::new("sleep").arg("30").spawn().expect("sleep");
    let pid = sleeper.id().to_string();
    vmview_refuses(
        &["attach", &pid, "--classes", "x.*"],
        "not a Java virtual machine",
    );
    assert!(
        sleeper.try_wait().unwrap().is_none(),
        "the non-JVM must be left alone"
    );
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    vmview_refuses(
        &["attach", &pid, "status"],
        &format!("no process with pid {pid}"),
    );

    let service = Service::start(
        "attach-disabled",
        &["java"],
        &["-XX:+DisableAttachMechanism"],
    );
    let pid = service.jvm_pid().to_string();
    vmview_refuses(&["attach", &pid], "DisableAttachMechanism");
    let (out, err) = service.finish();
    // No SIGQUIT reached it: a thread dump would show on stdout.
    assert_eq!(out, SERVICE_OUTPUT);
    assert_eq!(err, "");
}

#[test]
fn attach_reaches_a_jvm_with_its_own_mount_and_pid_namespace_and_private_tmp() {
    // SAFETY: a plain getter.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root for unshare --mount --pid");
        return;
    }
    let probe = Command::new("unshare")
        .args(["--mount", "--pid", "--fork", "true"])
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        eprintln!("skipped: unshare --mount --pid does not work here");
        return;
    }
    agent();
    let java = which_java();
    // The JVM gets an empty /tmp of its own. The test's own directories
    // (fixture classes, scratch files) may lie under the host's /tmp (a
    // clone there): those are bound back in, through a handle on the
    // host's /tmp taken before the tmpfs covers it.
    let mut keep = String::new();
    for dir in [classes(), Path::new(env!("CARGO_TARGET_TMPDIR"))] {
        if let Ok(rest) = dir.strip_prefix("/tmp") {
            keep.push_str(&format!(
                " && mkdir -p '{d}' && mount --bind '/run/vmview-host-tmp/{r}' '{d}'",
                d = dir.display(),
                r = rest.display()
            ));
        }
    }
    let script = format!(
        "mkdir -p /run/vmview-host-tmp && mount --bind /tmp /run/vmview-host-tmp \
         && mount -t tmpfs tmpfs /tmp{keep} && exec \"$0\" \"$@\""
    );
    let service = Service::start(
        "attach-ns",
        &[
            "unshare",
            "--mount",
            "--pid",
            "--fork",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
            &java,
        ],
        &[],
    );
    let pid = service.jvm_pid();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("NSpid:") && l.split_whitespace().count() == 3),
        "the JVM must have a pid of its own namespace: {status}"
    );
    let pid = pid.to_string();
    let trace = service.dir.join("ns.vmv");
    let log = vmview_ok(&[
        "attach",
        &pid,
        "--classes",
        "fx.ServiceWorker",
        "--duration",
        "1s",
        "-o",
        path_str(&trace),
    ]);
    assert!(log.contains("stopped; wrote"), "{log}");
    assert!(!calls_of(&jsonl(&trace), "fx.ServiceWorker.step").is_empty());
    assert!(!Path::new(&format!("/tmp/.java_pid{pid}")).exists());

    // A directory the JVM does not see (our /tmp is not its /tmp): it
    // writes into its own /tmp and vmview copies the trace out at stop.
    let ours = std::env::temp_dir().join(format!("vmview-attach-ns-{}", std::process::id()));
    std::fs::create_dir_all(&ours).unwrap();
    let outside = ours.join("outside.vmv");
    vmview_ok(&[
        "attach",
        &pid,
        "--classes",
        "fx.ServiceWorker",
        "--duration",
        "1s",
        "-o",
        path_str(&outside),
    ]);
    let copied = jsonl(&outside);
    let _ = std::fs::remove_dir_all(&ours);
    assert!(!calls_of(&copied, "fx.ServiceWorker.step").is_empty());
    let (out, err) = service.finish();
    assert_eq!(out, SERVICE_OUTPUT);
    assert_eq!(err, "");
}

#[test]
fn root_attaches_as_the_jvms_user_and_a_user_cannot_attach_to_anothers_jvm() {
    // SAFETY: a plain getter.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to run the JVM as another user");
        return;
    }
    agent();
    let as_nobody = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
    ];
    // Not the agent: vmview's copy is in root's private cache, and vmview
    // puts one the JVM's user can read into /tmp.
    let readable = format!(
        "test -r {}/fx/Service.class && test -x {}",
        classes().display(),
        vmview().display(),
    );
    let can_read = Command::new(as_nobody[0])
        .args(&as_nobody[1..])
        .args(["sh", "-c", &readable])
        .status();
    if !can_read.is_ok_and(|s| s.success()) {
        eprintln!("skipped: setpriv is missing or uid 65534 cannot read the build directory");
        return;
    }
    let java = which_java();
    let mut command = as_nobody.to_vec();
    command.push(&java);
    let service = Service::start("attach-user", &command, &[]);
    let pid = service.jvm_pid().to_string();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&service.dir, std::fs::Permissions::from_mode(0o777)).unwrap();

    // Another (unprivileged) user: refused before the JVM is touched.
    let out = Command::new(as_nobody[0])
        .args(&as_nobody[1..])
        .arg(vmview())
        .args(["attach", "1", "status"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("belongs to uid 0, not to you (uid 65534)"),
        "{stderr}"
    );

    // Root takes the JVM's uid and gid; the JVM writes the trace as itself.
    let trace = service.dir.join("user.vmv");
    vmview_ok(&[
        "attach",
        &pid,
        "--classes",
        "fx.ServiceWorker",
        "--duration",
        "1s",
        "-o",
        path_str(&trace),
    ]);
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&trace).unwrap().uid(), 65534);
    assert!(!calls_of(&jsonl(&trace), "fx.ServiceWorker.step").is_empty());
    let (out, err) = service.finish();
    assert_eq!(out, SERVICE_OUTPUT);
    assert_eq!(err, "");
}

/// The `java` on PATH, as an absolute path (for `sh -c 'exec "$0"'`).
fn which_java() -> String {
    let out = Command::new("sh")
        .args(["-c", "command -v java"])
        .output()
        .expect("sh");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn two_attaches_at_the_same_moment_take_turns_and_never_print_a_thread_dump() {
    // Two `vmview attach` to one JVM at once made it print a thread dump
    // (once in seven trials): the second sent its SIGQUIT after the first
    // had started the attach listener, and such a JVM takes SIGQUIT as a
    // thread dump request. A fresh JVM each round: only the first attach
    // to a JVM starts its listener.
    agent();
    for round in 0..5 {
        let service = Service::start(&format!("attach-race-{round}"), &["java"], &[]);
        let pid = service.jvm_pid().to_string();
        let outputs: Vec<PathBuf> = ["a.vmv", "b.vmv"]
            .iter()
            .map(|n| service.dir.join(n))
            .collect();
        let children: Vec<_> = outputs
            .iter()
            .map(|o| {
                Command::new(vmview())
                    .args(["attach", &pid, "--classes", "fx.ServiceWorker", "-o"])
                    .arg(o)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("vmview attach")
            })
            .collect();
        let results: Vec<_> = children
            .into_iter()
            .map(|c| c.wait_with_output().expect("wait"))
            .collect();
        let stderr: Vec<String> = results
            .iter()
            .map(|r| String::from_utf8_lossy(&r.stderr).into_owned())
            .collect();
        // One starts the recording; the other is told one is running.
        let started: Vec<usize> = (0..2).filter(|&i| results[i].status.success()).collect();
        assert_eq!(started.len(), 1, "round {round}: {stderr:?}");
        let (won, lost) = (started[0], 1 - started[0]);
        assert!(
            stderr[won].contains("recording pid"),
            "round {round}: {}",
            stderr[won]
        );
        assert!(
            stderr[lost].contains("error:") && stderr[lost].contains("already running"),
            "round {round}: {}",
            stderr[lost]
        );
        assert!(!stderr.iter().any(|e| e.contains("panicked")));
        // --quiet prints nothing but errors and warnings.
        assert_eq!(vmview_ok(&["attach", &pid, "stop", "--quiet"]), "");
        assert!(!jsonl(&outputs[won]).is_empty());
        let (out, err) = service.finish();
        assert_eq!(
            out, SERVICE_OUTPUT,
            "round {round}: no thread dump on stdout"
        );
        assert!(!err.contains("Full thread dump"), "round {round}: {err}");
    }
}

#[test]
fn an_attach_waits_while_another_holds_the_jvms_attach_lock() {
    // The turn-taking itself, without depending on a lost race: while the
    // lock in the JVM's /tmp is held, `vmview attach` must neither signal
    // nor talk to the JVM; once released, it goes ahead.
    agent();
    let service = Service::start("attach-lock", &["java"], &[]);
    let pid = service.jvm_pid();
    let lock_path = format!("/tmp/.vmview_attach_pid{pid}.lock");
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .expect("open the attach lock");
    use std::os::fd::AsRawFd;
    // SAFETY: flock(2) on a descriptor this test owns.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    let mut waiting = Command::new(vmview())
        .args(["attach", &pid.to_string(), "status"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("vmview attach");
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        waiting.try_wait().expect("try_wait").is_none(),
        "attach went ahead while another held the lock"
    );
    let socket = format!("/tmp/.java_pid{pid}");
    assert!(
        !Path::new(&socket).exists(),
        "the JVM was signalled while the lock was held"
    );
    drop(lock);
    let out = waiting.wait_with_output().expect("wait");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("no vmview recording"), "{text}");
    let (stdout, _) = service.finish();
    assert_eq!(stdout, SERVICE_OUTPUT);
}

/// A copy of this vmview's agent that reports another build: the 16 hex
/// digits of its build marker changed (the marker is the string the agent
/// itself reports, so the copy runs and answers as that build).
fn agent_of_another_build(dir: &Path) -> (PathBuf, String) {
    let mut bytes = std::fs::read(agent()).unwrap();
    let marker = b"vmview-agent-build ";
    let mut patched = None;
    let mut from = 0;
    while let Some(at) = bytes[from..]
        .windows(marker.len())
        .position(|w| w == marker)
    {
        let start = from + at + marker.len();
        from = start;
        let Some(plus) = bytes[start..start + 40].iter().position(|&b| b == b'+') else {
            continue;
        };
        let id = start + plus + 1;
        if bytes[id..id + 16].iter().all(u8::is_ascii_hexdigit) {
            let other = if &bytes[id..id + 16] == b"0000000000000000" {
                b"1111111111111111"
            } else {
                b"0000000000000000"
            };
            bytes[id..id + 16].copy_from_slice(other);
            patched = Some(String::from_utf8_lossy(&bytes[start..id + 16]).into_owned());
            break;
        }
    }
    let build = patched.expect("a build marker in the agent");
    let lib = dir.join("libvmview_agent.so");
    std::fs::write(&lib, &bytes).unwrap();
    (lib, build)
}

/// The libvmview_agent mappings of `pid`, one path each.
fn agent_mappings(pid: &str) -> Vec<String> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let mut paths: Vec<String> = maps
        .lines()
        .filter_map(|l| l.find('/').map(|at| l[at..].to_string()))
        .filter(|p| p.contains("libvmview_agent"))
        .collect();
    paths.dedup();
    paths
}

#[test]
fn attach_refuses_a_jvm_that_runs_another_builds_agent_with_one_line() {
    let dir = scratch("attach-other-build");
    let (lib, other) = agent_of_another_build(&dir);
    let trace = dir.join("other.vmv");
    let service = Service::start(
        "attach-other-build",
        &["java"],
        &[&format!(
            "-agentpath:{}=file={},classes=fx.ServiceWorker",
            lib.display(),
            trace.display()
        )],
    );
    let pid = service.jvm_pid().to_string();
    for action in ["status", "stop", "start"] {
        let out = run(&["attach", &pid, action]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "attach {action} must fail: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(
            stderr.contains(&format!("already runs vmview agent {other}"))
                && stderr.contains(&lib.display().to_string()),
            "{stderr}"
        );
    }
    // Nothing was loaded beside it, and its recording goes on.
    assert_eq!(agent_mappings(&pid), [lib.display().to_string()]);
    let (out, _) = service.finish();
    assert_eq!(out, SERVICE_OUTPUT);
    assert!(!calls_of(&jsonl(&trace), "fx.ServiceWorker.step").is_empty());
}

#[test]
fn attach_controls_an_agent_of_its_own_build_loaded_from_another_path() {
    // A JVM started with a copy of the same library (VMVIEW_AGENT, a
    // hand-written -agentpath): attach must talk to that agent, not load a
    // second one from the cache.
    let dir = scratch("attach-same-build");
    let lib = dir.join("libvmview_agent.so");
    std::fs::copy(agent(), &lib).unwrap();
    let trace = dir.join("same.vmv");
    let service = Service::start(
        "attach-same-build",
        &["java"],
        &[&format!(
            "-agentpath:{}=file={},classes=fx.ServiceWorker",
            lib.display(),
            trace.display()
        )],
    );
    let pid = service.jvm_pid().to_string();
    let status = vmview_ok(&["attach", &pid, "status"]);
    let version = vmview_ok(&["--version"]);
    let build = version
        .split("agent build ")
        .nth(1)
        .unwrap()
        .trim_end_matches([')', '\n']);
    assert!(status.contains("recording"), "{status}");
    assert!(
        status.contains(&format!("agent    0.1.0+{build}")),
        "{status}"
    );
    vmview_ok(&["attach", &pid, "stop"]);
    assert_eq!(agent_mappings(&pid), [lib.display().to_string()]);
    let (out, _) = service.finish();
    assert_eq!(out, SERVICE_OUTPUT);
    assert!(!calls_of(&jsonl(&trace), "fx.ServiceWorker.step").is_empty());
}
