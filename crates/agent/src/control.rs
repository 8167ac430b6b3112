//! Control of a recording from outside the JVM: `vmview attach PID …`.
//!
//! Every control command is one dynamic `load` of this same library
//! through the JVM's attach mechanism, as async-profiler does it: HotSpot
//! calls `Agent_OnAttach` again on the already loaded library (one
//! `dlopen` handle, so the same statics), with options such as
//! `cmd=status,reply=/tmp/.vmview-reply-…`. The command runs on the JVM's
//! Attach Listener thread, one at a time, and answers in the reply file,
//! which the CLI reads (through `/proc/PID/root` when the JVM lives in
//! another mount namespace) and deletes.
//!
//! Commands: `start` (the default: the rest of the options are a
//! recording's), `status`, `stop`, and `dump` (finish the current file and
//! go on recording into a new one, optionally with changed options).
//! Commands return at once apart from `stop`/`dump`, which wait for the
//! writer's last drain (a fraction of a second).
//!
//! The reply is plain text: `ok` or `error: MESSAGE` on the first line,
//! then `key: value` lines (`agent` (its `VERSION+BUILD_ID`), `file`,
//! `events`, `bytes`, `dropped`, `state`, and any number of `note` and
//! `problem` lines).

use crate::agent::{self, Agent};
use crate::capture::bytecode;
use crate::jvmti::Jni;
use crate::sys;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::Ordering;
use vmview_options::{CaptureMode, EventGroup};

/// A control command's answer.
struct Reply {
    error: Option<String>,
    lines: Vec<(&'static str, String)>,
}

impl Reply {
    fn ok() -> Reply {
        Reply {
            error: None,
            lines: Vec::new(),
        }
    }

    fn error(message: impl Into<String>) -> Reply {
        Reply {
            error: Some(message.into()),
            lines: Vec::new(),
        }
    }

    fn push(&mut self, key: &'static str, value: impl ToString) {
        self.lines.push((key, value.to_string()));
    }

    /// The reply's text; every reply names the agent's build (`agent:
    /// VERSION+ID`), so the CLI can tell it talks to its own.
    fn text(&self) -> String {
        let mut out = match &self.error {
            None => "ok\n".to_string(),
            Some(e) => format!("error: {}\n", one_line(e)),
        };
        let _ = writeln!(out, "agent: {}", crate::build());
        for (k, v) in &self.lines {
            let _ = writeln!(out, "{k}: {}", one_line(v));
        }
        out
    }
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// `Agent_OnAttach`: runs the command in `raw` and writes its reply. The
/// error (a line for the JVM's stderr) is returned only when there is no
/// reply file to write it to.
///
/// # Safety
/// `vm` must be the JavaVM* passed to `Agent_OnAttach`.
pub unsafe fn on_attach(vm: *mut sys::JavaVM, raw: &str) -> Result<(), String> {
    let (cmd, reply_path, rest) = split_control(raw);
    // SAFETY: `vm` comes from the JVM; this is the Attach Listener thread.
    let reply = match unsafe { jni_env(vm) } {
        Ok(jni) => run(vm, jni, &cmd, &rest),
        Err(e) => Reply::error(e),
    };
    match reply_path {
        Some(path) => write_reply(&path, &reply.text()),
        None => match reply.error {
            Some(e) => Err(e),
            None => Ok(()),
        },
    }
}

/// Takes `cmd=` and `reply=` out of the option string; the rest are the
/// recording's options.
fn split_control(raw: &str) -> (String, Option<String>, String) {
    let mut cmd = "start".to_string();
    let mut reply = None;
    let mut rest = Vec::new();
    for item in raw.split(',') {
        match item.trim().split_once('=') {
            Some(("cmd", v)) => cmd = v.trim().to_string(),
            Some(("reply", v)) => reply = Some(v.trim().to_string()),
            _ => rest.push(item),
        }
    }
    (cmd, reply, rest.join(","))
}

/// The reply file is created, never overwritten (it lives in a shared
/// temporary directory), readable by its owner only.
fn write_reply(path: &str, text: &str) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| format!("cannot write the control reply {path}: {e}"))
}

/// The calling thread's JNI environment.
///
/// # Safety
/// `vm` must be a live JavaVM* and the calling thread attached to it.
unsafe fn jni_env(vm: *mut sys::JavaVM) -> Result<Jni, String> {
    let mut env: *mut std::ffi::c_void = std::ptr::null_mut();
    // SAFETY: per the contract above.
    let rc = unsafe {
        match (**vm).GetEnv {
            Some(get_env) => get_env(vm, &mut env, sys::JNI_VERSION_1_6),
            None => sys::JNI_ERR,
        }
    };
    if rc != sys::JNI_OK || env.is_null() {
        return Err(format!(
            "no JNI environment on the attach thread (GetEnv returned {rc})"
        ));
    }
    // SAFETY: GetEnv returned this thread's JNIEnv*.
    Ok(unsafe { Jni::new(env.cast()) })
}

fn run(vm: *mut sys::JavaVM, jni: Jni, cmd: &str, rest: &str) -> Reply {
    match cmd {
        "start" => start(vm, jni, rest, true),
        "status" => status(),
        "stop" => match agent::live() {
            Some(a) => {
                let mut r = Reply::ok();
                stop(a, jni, &mut r);
                r
            }
            None => not_recording(),
        },
        "dump" => dump(vm, jni, rest),
        other => Reply::error(format!(
            "unknown control command '{other}' (known: start, status, stop, dump)"
        )),
    }
}

fn start(vm: *mut sys::JavaVM, jni: Jni, raw: &str, attached: bool) -> Reply {
    // SAFETY: `vm` is the JavaVM* of Agent_OnAttach, `jni` this thread's.
    match unsafe { agent::start_attached(vm, jni, raw, attached) } {
        Ok(a) => {
            let mut r = Reply::ok();
            r.push("state", "recording");
            r.push("file", &a.path);
            describe_plan(a, &mut r);
            if let Ok(thread) = a.jvmti.current_thread(jni) {
                crate::callbacks::report_loaded_classes(a, jni, thread.get());
            }
            r
        }
        Err(e) => Reply::error(e),
    }
}

/// What the recording records, and what it cannot in this JVM.
fn describe_plan(a: &Agent, r: &mut Reply) {
    r.push("recording", a.options.events);
    if a.options.events.contains(EventGroup::Calls) && a.options.classes.is_empty() {
        r.push("note", "no classes= given, so no method calls are recorded");
    }
    for n in &a.notes {
        r.push("note", n);
    }
}

fn not_recording() -> Reply {
    match agent::get() {
        Some(a) => Reply::error(format!(
            "no recording is running (the last one wrote {})",
            a.path
        )),
        None => Reply::error("no recording is running in this JVM"),
    }
}

fn status() -> Reply {
    let mut r = Reply::ok();
    let Some(a) = agent::get() else {
        r.push("state", "none");
        return r;
    };
    r.push("state", if a.is_live() { "recording" } else { "stopped" });
    counts(a, &mut r);
    if a.is_live() {
        describe_plan(a, &mut r);
    }
    r
}

fn counts(a: &Agent, r: &mut Reply) {
    r.push("file", &a.path);
    r.push("events", a.written.load(Ordering::Relaxed));
    r.push("bytes", std::fs::metadata(&a.path).map_or(0, |m| m.len()));
    r.push("dropped", a.buffers.dropped());
    if let Some(b) = crate::budget::status(a) {
        r.push("budget", b);
    }
}

/// Stops `a`: the writer finishes the file, and trace classes get their
/// original code back.
fn stop(a: &'static Agent, jni: Jni, r: &mut Reply) {
    a.stop_recording();
    let planned_calls =
        a.options.events.contains(EventGroup::Calls) && !a.options.classes.is_empty();
    if planned_calls && a.options.mode == CaptureMode::Bci {
        // The hook is off now: retransforming restores the original code.
        if let Err(e) = bytecode::retransform_traced(a, jni) {
            r.push(
                "problem",
                format!("trace classes keep their (inactive) probe calls: {e}"),
            );
        }
    }
    r.push("state", "stopped");
    counts(a, r);
    for p in a.problem_lines() {
        r.push("problem", p);
    }
}

/// Finishes the current file and starts the next recording with the same
/// options, changed by those given (`file=` names the next file; without
/// it, `NAME.2.vmv`, `NAME.3.vmv` …).
fn dump(vm: *mut sys::JavaVM, jni: Jni, rest: &str) -> Reply {
    let Some(old) = agent::live() else {
        return not_recording();
    };
    let mut next = old.raw_options.clone();
    if !rest.trim().is_empty() {
        next = format!("{next},{rest}");
    }
    let changed = match vmview_options::AgentOptions::parse(&next) {
        Ok(o) => o,
        Err(e) => return Reply::error(e.to_string()),
    };
    if changed.file == old.options.file || changed.file == old.path {
        next = format!("{next},file={}", next_file_name(&old.path));
    }
    let mut r = Reply::ok();
    stop(old, jni, &mut r);
    r.lines.retain(|(k, _)| *k != "state");
    let started = start(vm, jni, &next, old.attached);
    match started.error {
        Some(e) => {
            r.error = Some(format!(
                "the old file was finished, but the next recording did not start: {e}"
            ));
        }
        None => {
            for (k, v) in started.lines {
                // The new recording's file and plan, after the old one's counts.
                let k = if k == "file" { "next_file" } else { k };
                r.lines.push((k, v));
            }
        }
    }
    r
}

/// `trace.vmv` → `trace.2.vmv` (or the first of `.3`, `.4` … that is free).
fn next_file_name(path: &str) -> String {
    let p = std::path::Path::new(path);
    let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or("trace");
    let ext = p.extension().and_then(|s| s.to_str()).unwrap_or("vmv");
    let base = stem
        .rsplit_once('.')
        .filter(|(_, n)| n.parse::<u32>().is_ok())
        .map_or(stem, |(b, _)| b);
    (2..)
        .map(|n| p.with_file_name(format!("{base}.{n}.{ext}")))
        .find(|c| !c.exists())
        .map_or_else(|| format!("{path}.next"), |c| c.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_options_are_split_from_recording_options() {
        let (cmd, reply, rest) = split_control("cmd=stop,reply=/tmp/r,classes=fx.*,events=calls");
        assert_eq!(cmd, "stop");
        assert_eq!(reply.as_deref(), Some("/tmp/r"));
        assert_eq!(rest, "classes=fx.*,events=calls");
        let (cmd, reply, rest) = split_control("file=/x.vmv");
        assert_eq!(
            (cmd.as_str(), reply, rest.as_str()),
            ("start", None, "file=/x.vmv")
        );
    }

    #[test]
    fn reply_is_one_status_line_then_key_value_lines() {
        let mut r = Reply::error("bad\nthing");
        r.push("file", "/t.vmv");
        assert_eq!(
            r.text(),
            format!(
                "error: bad thing\nagent: {}\nfile: /t.vmv\n",
                crate::build()
            )
        );
    }

    #[test]
    fn the_build_is_the_version_and_a_sixteen_digit_id() {
        let (version, id) = crate::build().split_once('+').unwrap();
        assert_eq!(version, env!("CARGO_PKG_VERSION"));
        assert_eq!(id, crate::build_id());
        assert_eq!(id.len(), 16);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    }

    #[test]
    fn dump_numbers_the_next_file() {
        let dir = std::env::temp_dir().join(format!("vmview-next-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let first = dir.join("t.vmv");
        let second = next_file_name(first.to_str().unwrap());
        assert!(second.ends_with("t.2.vmv"), "{second}");
        std::fs::write(&second, b"").unwrap();
        assert!(next_file_name(&second).ends_with("t.3.vmv"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
