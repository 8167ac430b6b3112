//! The Rust side of `vmview/Probe`: the native methods instrumented code
//! calls (see [`vmview_classfile::probe`] for the protocol).
//!
//! They run on every traced call, so they do the least that gives a
//! complete event: `arg*` buffer the value in the thread's state, `enter`
//! takes the time and queues a CALL with those values, `exit*` queue a
//! RETURN. Per-thread state is a Rust thread-local ([`with_state`]); no
//! JVMTI call is made on this path except `GetFrameCount` once at a
//! thread's outermost traced call (for the depth) and, for object values,
//! the class tag and identity hash lookups [`values::object`] needs.
//!
//! Every function runs under [`recording::guard`] and does nothing unless the
//! agent is live: instrumented code keeps calling the probe after VMDeath.

use crate::classes;
use crate::clock;
use crate::jvmti::Jni;
use crate::recording::{self, Recording};
use crate::sys;
use crate::threads::{with_state, HeldMonitor, ThreadState};
use crate::values;
use std::ffi::c_void;
use std::ptr;
use vmview_classfile::probe::{self, ProbeMethod};
use vmview_format::{EventKind, MethodId, Monitor, Outcome, Value};

type Env = *mut sys::JNIEnv;
type Class = sys::jclass;

/// More arguments than a JVM method can have (255 slots) means the
/// protocol was broken; the surplus is not kept.
const MAX_ARGS: usize = 255;

/// The native implementation of each probe method.
pub fn implementations() -> [(ProbeMethod, *mut c_void); 27] {
    [
        (probe::ENTER, enter as *mut c_void),
        (probe::ENTER_1, enter1 as *mut c_void),
        (probe::ENTER_2, enter2 as *mut c_void),
        (probe::ARG_BOOLEAN, arg_boolean as *mut c_void),
        (probe::ARG_BYTE, arg_byte as *mut c_void),
        (probe::ARG_CHAR, arg_char as *mut c_void),
        (probe::ARG_SHORT, arg_short as *mut c_void),
        (probe::ARG_INT, arg_int as *mut c_void),
        (probe::ARG_LONG, arg_long as *mut c_void),
        (probe::ARG_FLOAT, arg_float as *mut c_void),
        (probe::ARG_DOUBLE, arg_double as *mut c_void),
        (probe::ARG_OBJECT, arg_object as *mut c_void),
        (probe::EXIT, exit as *mut c_void),
        (probe::EXIT_BOOLEAN, exit_boolean as *mut c_void),
        (probe::EXIT_BYTE, exit_byte as *mut c_void),
        (probe::EXIT_CHAR, exit_char as *mut c_void),
        (probe::EXIT_SHORT, exit_short as *mut c_void),
        (probe::EXIT_INT, exit_int as *mut c_void),
        (probe::EXIT_LONG, exit_long as *mut c_void),
        (probe::EXIT_FLOAT, exit_float as *mut c_void),
        (probe::EXIT_DOUBLE, exit_double as *mut c_void),
        (probe::EXIT_OBJECT, exit_object as *mut c_void),
        (probe::EXIT_THROW, exit_throw as *mut c_void),
        (probe::MONITOR_ENTER, monitor_enter as *mut c_void),
        (probe::MONITOR_EXIT, monitor_exit as *mut c_void),
        (
            probe::METHOD_MONITOR_ENTER,
            method_monitor_enter as *mut c_void,
        ),
        (
            probe::METHOD_MONITOR_EXIT,
            method_monitor_exit as *mut c_void,
        ),
    ]
}

/// The depth of a thread's outermost traced call: its frame count, less
/// the `probe_frames` of the probe on top (the native).
pub(super) fn outermost_depth(agent: &Recording, probe_frames: i32) -> u32 {
    match agent.jvmti.frame_count(ptr::null_mut()) {
        Ok(n) => (n - probe_frames).max(1) as u32,
        Err(e) => {
            agent.problems.jvmti(e);
            0
        }
    }
}

/// One call in [`crate::in_situ::EVERY`] of a call-path native timed for
/// the overhead budget, from here to the end of the native (the drop);
/// nothing with `budget=off`, where no one reads the times.
struct Timed(Option<u64>);

impl Timed {
    #[inline]
    fn begin(agent: &Recording) -> Timed {
        Timed(if agent.options.budget_bp.is_some() {
            crate::in_situ::begin()
        } else {
            None
        })
    }
}

impl Drop for Timed {
    #[inline]
    fn drop(&mut self) {
        crate::in_situ::end(self.0);
    }
}

unsafe extern "C" fn enter(env: Env, _class: Class, id: sys::jint) {
    entered("Probe.enter", env, id, &[]);
}

/// `enter1(long, int kinds, int id)`: the entry of a method of one integral
/// parameter, its value with it ([`probe::ENTER_1`]).
unsafe extern "C" fn enter1(
    env: Env,
    _class: Class,
    a: sys::jlong,
    kinds: sys::jint,
    id: sys::jint,
) {
    entered("Probe.enter1", env, id, &[(a, kinds & 0xff)]);
}

/// `enter2(long, long, int kinds, int id)` ([`probe::ENTER_2`]).
unsafe extern "C" fn enter2(
    env: Env,
    _class: Class,
    a: sys::jlong,
    b: sys::jlong,
    kinds: sys::jint,
    id: sys::jint,
) {
    entered(
        "Probe.enter2",
        env,
        id,
        &[(a, kinds & 0xff), (b, (kinds >> 8) & 0xff)],
    );
}

/// The value of an `enter1`/`enter2` argument of kind `kind`
/// ([`probe::PRIM_KINDS`]).
#[inline]
fn primitive(v: sys::jlong, kind: sys::jint) -> Value {
    match kind {
        1 => Value::Boolean(v != 0),
        2 => Value::Byte(v as i8),
        3 => Value::Char(v as u16),
        4 => Value::Short(v as i16),
        5 => Value::Int(v as i32),
        6 => Value::Long(v),
        _ => Value::Unavailable,
    }
}

/// The entry of method `id`, with the values `enter1`/`enter2` passed
/// (none: those `arg*` buffered, if any).
#[inline]
fn entered(entry: &'static str, env: Env, id: sys::jint, args: &[(sys::jlong, sys::jint)]) {
    recording::guard(entry, || {
        let Some(agent) = recording::live() else {
            return;
        };
        let _timed = Timed::begin(agent);
        let Some(tracing) = super::tracing_now(agent) else {
            return;
        };
        let time = clock::now_ns();
        if !super::still_tracing(agent, tracing) {
            return;
        }
        // SAFETY: the JVM passes the calling thread's JNIEnv.
        let jni = unsafe { Jni::new(env) };
        let id = id as u32;
        with_state(agent, Some((jni, ptr::null_mut())), |s| {
            s.enter_period(tracing);
            if !args.is_empty() {
                s.pending_args.clear();
                s.pending_args
                    .extend(args.iter().map(|&(v, kind)| primitive(v, kind)));
            }
            let depth = match s.calls.last() {
                Some(c) => c.depth + 1,
                None => outermost_depth(agent, 1),
            };
            // The arguments are the buffered ones (`pending_args`).
            super::enter(
                agent,
                s,
                id as usize,
                MethodId(id),
                time,
                depth,
                None,
                Vec::new(),
            );
        });
    });
}

/// Buffers one argument for the next `enter`.
fn arg(entry: &'static str, env: Env, value: impl FnOnce(&Recording, Jni) -> Value) {
    recording::guard(entry, || {
        let Some(agent) = recording::live() else {
            return;
        };
        let _timed = Timed::begin(agent);
        let Some(tracing) = super::tracing_now(agent) else {
            return;
        };
        // SAFETY: the JVM passes the calling thread's JNIEnv.
        let jni = unsafe { Jni::new(env) };
        let v = value(agent, jni);
        with_state(agent, Some((jni, ptr::null_mut())), |s| {
            s.enter_period(tracing);
            if s.pending_args.len() < MAX_ARGS {
                s.pending_args.push(v);
            }
        });
    });
}

unsafe extern "C" fn arg_boolean(env: Env, _c: Class, v: sys::jboolean) {
    arg("Probe.argBoolean", env, |_, _| Value::Boolean(v != 0));
}
unsafe extern "C" fn arg_byte(env: Env, _c: Class, v: sys::jbyte) {
    arg("Probe.argByte", env, |_, _| Value::Byte(v));
}
unsafe extern "C" fn arg_char(env: Env, _c: Class, v: sys::jchar) {
    arg("Probe.argChar", env, |_, _| Value::Char(v));
}
unsafe extern "C" fn arg_short(env: Env, _c: Class, v: sys::jshort) {
    arg("Probe.argShort", env, |_, _| Value::Short(v));
}
unsafe extern "C" fn arg_int(env: Env, _c: Class, v: sys::jint) {
    arg("Probe.argInt", env, |_, _| Value::Int(v));
}
unsafe extern "C" fn arg_long(env: Env, _c: Class, v: sys::jlong) {
    arg("Probe.argLong", env, |_, _| Value::Long(v));
}
unsafe extern "C" fn arg_float(env: Env, _c: Class, v: sys::jfloat) {
    arg("Probe.argFloat", env, |_, _| Value::Float(v));
}
unsafe extern "C" fn arg_double(env: Env, _c: Class, v: sys::jdouble) {
    arg("Probe.argDouble", env, |_, _| Value::Double(v));
}
unsafe extern "C" fn arg_object(env: Env, _c: Class, v: sys::jobject) {
    arg("Probe.argObject", env, |agent, jni| {
        values::object(agent, jni, v)
    });
}

/// Queues the RETURN of the method `id`; `outcome` is only asked for when
/// the agent is live.
fn on_exit(
    entry: &'static str,
    env: Env,
    id: sys::jint,
    outcome: impl FnOnce(&Recording, Jni) -> Outcome,
) {
    recording::guard(entry, || {
        let Some(agent) = recording::live() else {
            return;
        };
        let _timed = Timed::begin(agent);
        let Some(tracing) = super::tracing_now(agent) else {
            return;
        };
        let time = clock::now_ns();
        if !super::still_tracing(agent, tracing) {
            return;
        }
        // SAFETY: the JVM passes the calling thread's JNIEnv.
        let jni = unsafe { Jni::new(env) };
        let outcome = outcome(agent, jni);
        let id = id as u32;
        with_state(agent, Some((jni, ptr::null_mut())), |s| {
            s.enter_period(tracing);
            super::exit_with(
                agent,
                s,
                id as usize,
                MethodId(id),
                time,
                Some(outcome),
                || outermost_depth(agent, 1),
            )
        });
    });
}

/// A returned value, unless `args=off` (then the RETURN says only that the
/// method returned).
fn returned(agent: &Recording, value: impl FnOnce() -> Value) -> Outcome {
    Outcome::Value(if agent.options.args {
        value()
    } else {
        Value::Unavailable
    })
}

unsafe extern "C" fn exit(env: Env, _c: Class, id: sys::jint) {
    on_exit("Probe.exit", env, id, |_, _| Outcome::Void);
}
unsafe extern "C" fn exit_boolean(env: Env, _c: Class, v: sys::jboolean, id: sys::jint) {
    on_exit("Probe.exitBoolean", env, id, |a, _| {
        returned(a, || Value::Boolean(v != 0))
    });
}
unsafe extern "C" fn exit_byte(env: Env, _c: Class, v: sys::jbyte, id: sys::jint) {
    on_exit("Probe.exitByte", env, id, |a, _| {
        returned(a, || Value::Byte(v))
    });
}
unsafe extern "C" fn exit_char(env: Env, _c: Class, v: sys::jchar, id: sys::jint) {
    on_exit("Probe.exitChar", env, id, |a, _| {
        returned(a, || Value::Char(v))
    });
}
unsafe extern "C" fn exit_short(env: Env, _c: Class, v: sys::jshort, id: sys::jint) {
    on_exit("Probe.exitShort", env, id, |a, _| {
        returned(a, || Value::Short(v))
    });
}
unsafe extern "C" fn exit_int(env: Env, _c: Class, v: sys::jint, id: sys::jint) {
    on_exit("Probe.exitInt", env, id, |a, _| {
        returned(a, || Value::Int(v))
    });
}
unsafe extern "C" fn exit_long(env: Env, _c: Class, v: sys::jlong, id: sys::jint) {
    on_exit("Probe.exitLong", env, id, |a, _| {
        returned(a, || Value::Long(v))
    });
}
unsafe extern "C" fn exit_float(env: Env, _c: Class, v: sys::jfloat, id: sys::jint) {
    on_exit("Probe.exitFloat", env, id, |a, _| {
        returned(a, || Value::Float(v))
    });
}
unsafe extern "C" fn exit_double(env: Env, _c: Class, v: sys::jdouble, id: sys::jint) {
    on_exit("Probe.exitDouble", env, id, |a, _| {
        returned(a, || Value::Double(v))
    });
}
unsafe extern "C" fn exit_object(env: Env, _c: Class, v: sys::jobject, id: sys::jint) {
    on_exit("Probe.exitObject", env, id, |a, jni| {
        returned(a, || values::object(a, jni, v))
    });
}
unsafe extern "C" fn exit_throw(env: Env, _c: Class, t: sys::jobject, id: sys::jint) {
    on_exit("Probe.exitThrow", env, id, |a, jni| thrown(a, jni, t));
}

/// The outcome of a frame unwound by `t`.
pub(super) fn thrown(agent: &Recording, jni: Jni, t: sys::jobject) -> Outcome {
    let class = if t.is_null() {
        agent.symbols.string("java.lang.Throwable")
    } else {
        classes::name(agent, jni.object_class(t).get())
    };
    Outcome::Exception { class }
}

/// Monitors a thread is recorded holding at most: a bound on memory should
/// releases go unseen (the oldest is forgotten).
const MAX_HELD: usize = 1024;

/// The depth of the frame calling the probe: its traced call's, or counted
/// when it has none (recording began inside it).
fn holder_depth(agent: &Recording, s: &ThreadState) -> u32 {
    match s.calls.last() {
        Some(c) => c.depth,
        None => outermost_depth(agent, 1),
    }
}

/// Records that the calling frame holds `obj`'s monitor; `method`: as a
/// `synchronized` method.
fn acquired(entry: &'static str, env: Env, obj: sys::jobject, method: bool) {
    recording::guard(entry, || {
        let Some(agent) = recording::live() else {
            return;
        };
        let Some(tracing) = super::tracing_now(agent) else {
            return;
        };
        let time = clock::now_ns();
        if obj.is_null() || !super::still_tracing(agent, tracing) {
            return;
        }
        // SAFETY: the JVM passes the calling thread's JNIEnv.
        let jni = unsafe { Jni::new(env) };
        let monitor = crate::callbacks::monitor(agent, jni, obj);
        with_state(agent, Some((jni, ptr::null_mut())), |s| {
            s.enter_period(tracing);
            let depth = holder_depth(agent, s);
            if s.held.len() >= MAX_HELD {
                s.held.remove(0);
            }
            s.held.push(HeldMonitor {
                monitor,
                depth,
                method,
            });
            if agent.in_window(depth) {
                s.emit(agent, time, EventKind::MonitorEnter { monitor, depth });
            }
        });
    });
}

/// Records the release of `obj`'s monitor, or with `None` of the calling
/// `synchronized` method's.
fn released(entry: &'static str, env: Env, obj: Option<sys::jobject>) {
    recording::guard(entry, || {
        let Some(agent) = recording::live() else {
            return;
        };
        let Some(tracing) = super::tracing_now(agent) else {
            return;
        };
        let time = clock::now_ns();
        if !super::still_tracing(agent, tracing) {
            return;
        }
        // SAFETY: the JVM passes the calling thread's JNIEnv.
        let jni = unsafe { Jni::new(env) };
        let named: Option<Monitor> = match obj {
            Some(o) if o.is_null() => return,
            Some(o) => Some(crate::callbacks::monitor(agent, jni, o)),
            None => None,
        };
        with_state(agent, Some((jni, ptr::null_mut())), |s| {
            s.enter_period(tracing);
            let i = match named {
                Some(m) => s.held.iter().rposition(|h| !h.method && h.monitor == m),
                None => s.held.iter().rposition(|h| h.method),
            };
            let (monitor, depth) = match (i, named) {
                (Some(i), _) => {
                    let h = s.held.remove(i);
                    (h.monitor, h.depth)
                }
                // Acquired before recording began.
                (None, Some(m)) => (m, holder_depth(agent, s)),
                (None, None) => return,
            };
            if agent.in_window(depth) {
                s.emit(agent, time, EventKind::MonitorExit { monitor, depth });
            }
        });
    });
}

unsafe extern "C" fn monitor_enter(env: Env, _c: Class, obj: sys::jobject) {
    acquired("Probe.monitorEnter", env, obj, false);
}
unsafe extern "C" fn method_monitor_enter(env: Env, _c: Class, obj: sys::jobject) {
    acquired("Probe.methodMonitorEnter", env, obj, true);
}
unsafe extern "C" fn monitor_exit(env: Env, _c: Class, obj: sys::jobject) {
    released("Probe.monitorExit", env, Some(obj));
}
unsafe extern "C" fn method_monitor_exit(env: Env, _c: Class) {
    released("Probe.methodMonitorExit", env, None);
}

#[cfg(test)]
mod tests {
    #[test]
    fn primitive_entry_kinds_are_the_rewriters() {
        use vmview_format::Value;
        for (c, k) in vmview_classfile::probe::PRIM_KINDS {
            let v = super::primitive(1, i32::from(k));
            let expected = match c {
                'Z' => Value::Boolean(true),
                'B' => Value::Byte(1),
                'C' => Value::Char(1),
                'S' => Value::Short(1),
                'I' => Value::Int(1),
                _ => Value::Long(1),
            };
            assert_eq!(v, expected, "{c}");
        }
        assert_eq!(super::primitive(-1, 5), Value::Int(-1));
        assert_eq!(super::primitive(0xffff, 3), Value::Char(0xffff));
    }

    #[test]
    fn every_hook_the_rewriter_may_call_has_a_native() {
        let bound: Vec<_> = super::implementations().iter().map(|(m, _)| *m).collect();
        let hooks: Vec<_> = vmview_classfile::probe::ALL
            .into_iter()
            .chain(vmview_classfile::probe::MONITORS)
            .collect();
        assert_eq!(bound, hooks);
    }
}
