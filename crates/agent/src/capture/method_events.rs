//! Call capture with JVMTI MethodEntry/MethodExit events.
//!
//! Simple and complete (every method, parameters read from the frame's
//! local slots), but slow, which is why it sits behind the capture seam:
//!
//! - enabling these events puts every thread in interpreter-only mode
//!   (measured here: fib-heavy code 5 ms → 1.1 s); each event first asks
//!   the jmethodID cache whether the method is traced, so an untraced
//!   method costs the JVM's ~95 ns callback plus ~30 ns of lookup;
//! - a traced call without parameters costs ~1–1.5 µs (GetFrameCount for
//!   the depth, GetFrameLocation for the caller, two events);
//! - every parameter is one `GetLocal*`, which HotSpot runs as a VM
//!   operation (a safepoint on JDK 17, a handshake on later JDKs):
//!   10–200 µs each on a loaded 2-core machine. Bytecode instrumentation,
//!   which passes arguments to a probe, removes that cost.

use super::CallCapture;
use crate::clock;
use crate::jvmti::{Jni, Jvmti, LocalRef};
use crate::methods::lookup;
use crate::recording::{self, Recording};
use crate::sys;
use crate::threads::with_state;
use crate::values;
use std::ptr;
use vmview_format::{Outcome, Value};

pub struct MethodEvents;

impl CallCapture for MethodEvents {
    fn name(&self) -> &'static str {
        "jvmti-method-events"
    }

    fn add_capabilities(&self, caps: &mut sys::jvmtiCapabilities) {
        caps.set_can_generate_method_entry_events(1);
        caps.set_can_generate_method_exit_events(1);
        caps.set_can_access_local_variables(1);
        caps.set_can_get_line_numbers(1);
    }

    fn install_callbacks(&self, cb: &mut sys::jvmtiEventCallbacks) {
        cb.MethodEntry = Some(method_entry);
        cb.MethodExit = Some(method_exit);
    }

    fn start(&self, agent: &'static Recording, _jni: Jni) -> Result<(), String> {
        let j = agent.jvmti;
        j.set_event(true, sys::JVMTI_EVENT_METHOD_ENTRY)
            .and_then(|()| j.set_event(true, sys::JVMTI_EVENT_METHOD_EXIT))
            .map_err(|e| e.to_string())
    }

    fn stop(&self, jvmti: Jvmti) {
        let _ = jvmti.set_event(false, sys::JVMTI_EVENT_METHOD_ENTRY);
        let _ = jvmti.set_event(false, sys::JVMTI_EVENT_METHOD_EXIT);
    }

    /// Between periods the events are off, so the threads leave
    /// interpreter-only mode.
    fn set_tracing(&self, agent: &Recording, on: bool) {
        for e in [sys::JVMTI_EVENT_METHOD_ENTRY, sys::JVMTI_EVENT_METHOD_EXIT] {
            if let Err(err) = agent.jvmti.set_event(on, e) {
                agent.problems.jvmti(err);
            }
        }
    }
}

unsafe extern "C" fn method_entry(
    _jvmti: *mut sys::jvmtiEnv,
    jni: *mut sys::JNIEnv,
    thread: sys::jthread,
    method: sys::jmethodID,
) {
    recording::guard("MethodEntry", || {
        let Some(agent) = recording::live() else {
            return;
        };
        // SAFETY: the JVM passes this thread's JNIEnv.
        let jni = unsafe { Jni::new(jni) };
        on_entry(agent, jni, thread, method);
    });
}

fn on_entry(agent: &Recording, jni: Jni, thread: sys::jthread, method: sys::jmethodID) {
    // Between periods the events are off, but some may still arrive.
    let Some(tracing) = super::tracing_now(agent) else {
        return;
    };
    let Some(info) = lookup(agent, jni, thread, method) else {
        return;
    };
    if !info.traced {
        return;
    }
    let j = agent.jvmti;
    let me = ptr::null_mut(); // the current thread: cheaper than resolving `thread`
    let id = info.symbol(agent, jni, method);
    let depth = match j.frame_count(me) {
        Ok(n) => n.max(0) as u32,
        Err(e) => {
            agent.problems.jvmti(e);
            0
        }
    };
    let caller = if depth > 1 {
        match j.frame_location(me, 1) {
            Ok((cm, bci)) => lookup(agent, jni, thread, cm)
                .map(|ci| (ci.symbol(agent, jni, cm), ci.loc(agent, cm, bci))),
            Err(e) => {
                agent.problems.jvmti(e);
                None
            }
        }
    } else {
        None
    };
    let params: Vec<Value> = if !agent.options.args {
        Vec::new()
    } else if info.native {
        vec![Value::Unavailable; info.params.len()]
    } else {
        info.params
            .iter()
            .map(|p| values::local(agent, jni, me, p.ty, p.slot))
            .collect()
    };
    // Timed after the parameters were read, so `elapsed_ns` leaves them out.
    let time = clock::now_ns();
    if !super::still_tracing(agent, tracing) {
        return;
    }
    with_state(agent, Some((jni, thread)), |s| {
        s.enter_period(tracing);
        super::enter(agent, s, method as usize, id, time, depth, caller, params)
    });
}

unsafe extern "C" fn method_exit(
    _jvmti: *mut sys::jvmtiEnv,
    jni: *mut sys::JNIEnv,
    thread: sys::jthread,
    method: sys::jmethodID,
    was_popped_by_exception: sys::jboolean,
    return_value: sys::jvalue,
) {
    recording::guard("MethodExit", || {
        let Some(agent) = recording::live() else {
            return;
        };
        // SAFETY: the JVM passes this thread's JNIEnv.
        let jni = unsafe { Jni::new(jni) };
        let Some(info) = lookup(agent, jni, thread, method) else {
            return;
        };
        // JDK 17 creates the reference to a returned object in the
        // *caller's* local frame, before the event's own frame: unless it
        // is deleted, every exit of a method returning an object leaks one
        // reference until the next native method returns (`-Xcheck:jni`
        // reports "JNI local refs: N, exceeds capacity"). The reference was
        // made for this event, so the agent deletes it; later JDKs do not
        // leak, and deleting it there is harmless.
        let returned = (was_popped_by_exception == 0 && info.ret == b'L')
            // SAFETY: the descriptor says the JVM set the reference member.
            .then(|| LocalRef::new(jni, unsafe { return_value.l }));
        if !info.traced {
            return;
        }
        let Some(tracing) = super::tracing_now(agent) else {
            return;
        };
        let time = clock::now_ns();
        if !super::still_tracing(agent, tracing) {
            return;
        }
        let id = info.symbol(agent, jni, method);
        let outcome = match (&returned, info.ret) {
            _ if was_popped_by_exception != 0 => None,
            (_, b'V') => Some(Outcome::Void),
            _ if !agent.options.args => Some(Outcome::Value(Value::Unavailable)),
            (Some(r), _) => Some(Outcome::Value(values::object(agent, jni, r.get()))),
            (None, ty) => Some(Outcome::Value(values::from_jvalue(
                agent,
                jni,
                ty,
                return_value,
            ))),
        };
        with_state(agent, Some((jni, thread)), |s| {
            s.enter_period(tracing);
            super::exit_with(agent, s, method as usize, id, time, outcome, || {
                // The exiting frame is still on the stack.
                match agent.jvmti.frame_count(ptr::null_mut()) {
                    Ok(n) => n.max(0) as u32,
                    Err(e) => {
                        agent.problems.jvmti(e);
                        0
                    }
                }
            })
        });
    });
}
