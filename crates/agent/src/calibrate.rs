//! Overhead calibration: what tracing one call costs the traced thread,
//! measured in the running JVM at start-up and written into the trace as
//! CALIBRATION events (`CALL`, `RETURN`), so `vmview calltree --compensate`
//! can take the tracer's own time out of each call's.
//!
//! It times the real path, not a model of it: the calls go through
//! [`capture::enter`] and [`capture::exit`] on the thread's real state and
//! their events through [`ThreadState::emit`](crate::threads::ThreadState::emit)
//! into the real buffers, under a method id no traced method has
//! ([`CALIBRATION_METHOD`]); the writer drops those events. In bci mode
//! the calls are made from Java — `vmview/Calibration`, a loop of
//! `Probe.enter`/`Probe.exit` calls like the ones instrumented code makes —
//! so the JNI transitions into the probe and back and the probe's own
//! clock reads are in the figure; the same loop calling an empty Java
//! method instead is timed too and subtracted. In jvmti mode the loop runs
//! in Rust and adds the two JVMTI calls a method event makes
//! (`GetFrameCount`, `GetFrameLocation`); the JVM's own cost of posting the
//! event is not in it. The rounds are timed in the thread's CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`), so that a loaded machine does not inflate
//! them; several rounds, the median per call is kept.

use std::ffi::CStr;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};

use vmview_format::{EventKind, MethodId, Outcome};
use vmview_options::{CaptureMode, DepthWindow};

use crate::agent::{pack_window, Agent};
use crate::capture;
use crate::clock;
use crate::jvmti::Jni;
use crate::sys;
use crate::threads::with_state;

/// The method id of the calibration's calls: their events are dropped by
/// the writer.
pub const CALIBRATION_METHOD: MethodId = MethodId(u32::MAX);
/// Rounds measured (after one warm-up round); the median is kept.
const ROUNDS: usize = 7;
/// Calls per round. 7 rounds cost ~0.5 ms in a release build of the agent
/// and ~25 ms in a debug one.
const CALLS: usize = 1_000;

/// The class file of `crates/agent/java/vmview/Calibration.java`.
const CLASS_BYTES: &[u8] = include_bytes!("calibration.class");
const CLASS_NAME: &CStr = c"vmview/Calibration";
static CLASS: AtomicBool = AtomicBool::new(false);

/// The calling thread's CPU time: what tracing costs the traced thread
/// itself. Wall time would also count the moments the calibrating thread
/// was descheduled, which on a loaded machine are most of a round.
fn cpu_ns() -> u64 {
    crate::metrics::thread_cpu_ns()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One round in Rust: `CALLS` nested CALLs, then their RETURNs. Returns
/// the ns per CALL and per RETURN.
fn rust_round(agent: &Agent, jni: Jni, frames: bool) -> Option<(f64, f64)> {
    let key = CALIBRATION_METHOD.0 as usize;
    // The JVMTI calls of a method event, on this thread.
    let frame_calls = || {
        if frames {
            let j = agent.jvmti;
            let _ = std::hint::black_box(j.frame_count(ptr::null_mut()));
            let _ = std::hint::black_box(j.frame_location(ptr::null_mut(), 0));
        }
    };
    with_state(agent, Some((jni, ptr::null_mut())), |s| {
        let base = s.calls.last().map_or(1, |c| c.depth + 1);
        let t0 = cpu_ns();
        for i in 0..CALLS {
            frame_calls();
            let time = clock::now_ns();
            let depth = base + i as u32;
            capture::enter(
                agent,
                s,
                key,
                CALIBRATION_METHOD,
                time,
                depth,
                None,
                Vec::new(),
            );
        }
        let t1 = cpu_ns();
        for _ in 0..CALLS {
            let time = clock::now_ns();
            capture::exit(agent, s, key, CALIBRATION_METHOD, time, Some(Outcome::Void));
        }
        let t2 = cpu_ns();
        let per = |ns: u64| ns as f64 / CALLS as f64;
        (per(t1.saturating_sub(t0)), per(t2.saturating_sub(t1)))
    })
}

/// The ns per CALL and per RETURN of the Rust loop: the median of
/// [`ROUNDS`].
fn rust_costs(agent: &Agent, jni: Jni, frames: bool) -> Option<(f64, f64)> {
    rust_round(agent, jni, frames)?;
    let (calls, returns): (Vec<f64>, Vec<f64>) = (0..ROUNDS)
        .filter_map(|_| rust_round(agent, jni, frames))
        .unzip();
    (!calls.is_empty()).then(|| (median(calls), median(returns)))
}

/// The ns per traced call (CALL and RETURN) of the Java loop, less that of
/// the same loop calling an empty method: the median of [`ROUNDS`].
fn java_pair_cost(agent: &Agent, jni: Jni) -> Option<f64> {
    capture::bytecode::ensure_probe(agent, jni).ok()?;
    jni.with_local_frame(16, || {
        let class = if CLASS.load(Ordering::Acquire) {
            jni.find_class(CLASS_NAME)
        } else {
            let c = jni.define_boot_class(CLASS_NAME, CLASS_BYTES)?;
            CLASS.store(true, Ordering::Release);
            c
        };
        if class.is_null() {
            return None;
        }
        let args = [
            sys::jvalue {
                i: CALLS as sys::jint,
            },
            sys::jvalue {
                i: CALIBRATION_METHOD.0 as sys::jint,
            },
        ];
        let time = |name: &CStr| -> Option<u64> {
            let t0 = cpu_ns();
            jni.call_static_void(class.get(), name, c"(II)V", &args)
                .then(|| cpu_ns().saturating_sub(t0))
        };
        time(c"traced")?;
        time(c"untraced")?;
        let mut per_call = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            let traced = time(c"traced")?;
            let untraced = time(c"untraced")?;
            per_call.push(traced.saturating_sub(untraced) as f64 / CALLS as f64);
        }
        Some(median(per_call))
    })
}

/// Measures and writes the CALIBRATION events on the calling thread.
/// Called once, at VMInit (or attach), when calls are traced, before the
/// capture starts and before `period=` switches tracing off.
pub fn record(agent: &Agent, jni: Jni) {
    // Every call of the loop is written, whatever `depth=` says.
    let window = agent
        .window
        .swap(pack_window(DepthWindow::ALL), Ordering::Relaxed);
    let jvmti_mode = agent.options.mode == CaptureMode::Jvmti;
    let rust = rust_costs(agent, jni, jvmti_mode);
    let java = (!jvmti_mode).then(|| java_pair_cost(agent, jni)).flatten();
    agent.window.store(window, Ordering::Relaxed);
    let Some((call_ns, return_ns)) = rust else {
        return;
    };
    // What the Java loop adds to the Rust one is the JNI transitions into
    // the two natives and back: the budget adds it to the natives' time
    // it measures in the program's threads (`in_situ`), which cannot see
    // its own transitions.
    if let Some(pair) = java {
        let transition = (pair - (call_ns + return_ns)).max(0.0) / 2.0;
        agent
            .budget
            .set_transition_cost((transition * 1000.0).round() as u64);
    }
    // The Java loop times a CALL and its RETURN together: split as the
    // Rust loop's figures are.
    let (call_ns, return_ns) = match java {
        Some(pair) if pair > call_ns + return_ns => {
            let share = call_ns / (call_ns + return_ns);
            (pair * share, pair * (1.0 - share))
        }
        _ => (call_ns, return_ns),
    };
    let ps = |ns: f64| (ns * 1000.0).round() as u64;
    agent.budget.set_call_cost(ps(call_ns + return_ns));
    let time = clock::now_ns();
    with_state(agent, Some((jni, ptr::null_mut())), |s| {
        for (record, cost_ps) in [("CALL", ps(call_ns)), ("RETURN", ps(return_ns))] {
            s.emit(
                agent,
                time,
                EventKind::Calibration {
                    record: record.to_string(),
                    cost_ps,
                },
            );
        }
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_calibration_class_calls_the_probe_as_instrumented_code_does() {
        let info = vmview_classfile::describe(super::CLASS_BYTES).expect("a class file");
        assert_eq!(info.name, "vmview/Calibration");
        let methods: Vec<(&str, &str)> = info
            .methods
            .iter()
            .map(|m| (m.name.as_str(), m.descriptor.as_str()))
            .collect();
        assert!(methods.contains(&("traced", "(II)V")), "{methods:?}");
        assert!(methods.contains(&("untraced", "(II)V")), "{methods:?}");
        let probe = vmview_classfile::probe::ENTER;
        assert_eq!((probe.name, probe.descriptor), ("enter", "(I)V"));
        let probe = vmview_classfile::probe::EXIT;
        assert_eq!((probe.name, probe.descriptor), ("exit", "(I)V"));
    }
}
