//! The natives of the buffered probe (`mode=bci,args=off`).
//!
//! The probe class `crates/agent/java/vmview/Probe.java` records calls and
//! returns in a per-thread `long[]` without a JNI transition, which costs
//! about as much as the rest of a traced call. It calls into the agent
//! only to hand over its buffer ([`flush`]: when full, and at least every
//! 10 ms while the thread keeps making traced calls), for a thread's outermost
//! traced call and its return (which take the call-stack depth and leave
//! the buffer empty whenever the thread is outside traced code), and for
//! exits by exception. Each of these first replays the buffer into the
//! same [`super::enter`] and [`super::exit`] the native probe uses, so the
//! events are the same.
//!
//! The thread's state keeps a global reference to its buffer: an event a
//! JVMTI callback records for the thread first replays what is buffered
//! (see [`replay`]), so the thread's events stay in order.

use super::probe_natives;
use crate::agent::{self, Agent};
use crate::clock;
use crate::jvmti::Jni;
use crate::sys;
use crate::threads::{with_state, ThreadState};
use std::ffi::c_void;
use std::ptr;
use vmview_format::{MethodId, Outcome, Value};

type Env = *mut sys::JNIEnv;
type Class = sys::jclass;

/// Index of the first record: `b[0]` is the next free index; `b[1]` (the
/// thread's open traced calls) and `b[2]` (the last hand-over) are the
/// Java side's business.
const FIRST: usize = 3;
/// The longs of a buffer (`BufferedProbe.SIZE`).
const SIZE: usize = 3 + 2 * 2048;
const CALL: i64 = 0;
const RETURN_VOID: i64 = 1;
const RETURN_VALUE: i64 = 2;

/// The bytes of the buffered probe class (built by `crates/agent/java/build.sh`).
pub const CLASS_BYTES: &[u8] = include_bytes!("probe-buffered.class");

/// Name, descriptor and implementation of each native of the class.
pub fn natives() -> [(&'static str, &'static str, *mut c_void); 4] {
    [
        ("flush", "([J)V", flush as *mut c_void),
        ("enterOutermost", "([JI)V", enter_outermost as *mut c_void),
        ("exitOutermost", "([JIZ)V", exit_outermost as *mut c_void),
        (
            "exitThrown",
            "([JLjava/lang/Throwable;I)V",
            exit_thrown as *mut c_void,
        ),
    ]
}

/// Runs `f` on the thread's state after replaying the buffer `b`, which
/// it remembers as the thread's.
fn with_buffer(
    entry: &'static str,
    env: Env,
    b: sys::jobject,
    f: impl FnOnce(&Agent, Jni, &mut ThreadState),
) {
    agent::guard(entry, || {
        // SAFETY: the JVM passes the calling thread's JNIEnv.
        let jni = unsafe { Jni::new(env) };
        let Some(agent) = agent::live() else {
            // Instrumented code keeps running after VMDeath: keep the
            // buffer from filling up.
            jni.set_long_array_region(b, 0, &[FIRST as i64]);
            return;
        };
        with_state(agent, Some((jni, ptr::null_mut())), |s| {
            if s.java_buffer.is_null() {
                s.java_buffer = jni.new_global_ref(b);
            }
            replay_array(agent, jni, s, b);
            f(agent, jni, s);
        });
    });
}

unsafe extern "C" fn flush(env: Env, _class: Class, b: sys::jobject) {
    with_buffer("Probe.flush", env, b, |_, _, _| {});
}

unsafe extern "C" fn enter_outermost(env: Env, _class: Class, b: sys::jobject, id: sys::jint) {
    let time = clock::now_ns();
    with_buffer("Probe.enterOutermost", env, b, |agent, _, s| {
        let depth = match s.calls.last() {
            Some(c) => c.depth + 1,
            None => probe_natives::outermost_depth(agent, 2),
        };
        let id = id as u32;
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
}

unsafe extern "C" fn exit_outermost(
    env: Env,
    _class: Class,
    b: sys::jobject,
    id: sys::jint,
    value: sys::jboolean,
) {
    let time = clock::now_ns();
    with_buffer("Probe.exitOutermost", env, b, |agent, _, s| {
        let id = id as u32;
        super::exit(
            agent,
            s,
            id as usize,
            MethodId(id),
            time,
            Some(outcome(value != 0)),
        );
    });
}

unsafe extern "C" fn exit_thrown(
    env: Env,
    _class: Class,
    b: sys::jobject,
    t: sys::jobject,
    id: sys::jint,
) {
    let time = clock::now_ns();
    with_buffer("Probe.exitThrown", env, b, |agent, jni, s| {
        let id = id as u32;
        let outcome = probe_natives::thrown(agent, jni, t);
        super::exit(agent, s, id as usize, MethodId(id), time, Some(outcome));
    });
}

/// What a RETURN says without argument capture.
fn outcome(value: bool) -> Outcome {
    if value {
        Outcome::Value(Value::Unavailable)
    } else {
        Outcome::Void
    }
}

/// Records what the thread's buffer holds, if it has one, and empties it;
/// for an event a callback records on the thread. No-op while a replay is
/// already under way on this thread.
pub fn replay(agent: &Agent, jni: Jni, s: &mut ThreadState) {
    if !s.java_buffer.is_null() && !s.replaying {
        let b = s.java_buffer;
        replay_array(agent, jni, s, b);
    }
}

fn replay_array(agent: &Agent, jni: Jni, s: &mut ThreadState, b: sys::jobject) {
    let mut head = [0i64; 1];
    if !jni.long_array_region(b, 0, &mut head) {
        return;
    }
    let end = (head[0].max(FIRST as i64) as usize).min(SIZE);
    if end == FIRST {
        return;
    }
    let mut records = std::mem::take(&mut s.replay_scratch);
    records.resize(end - FIRST, 0);
    let ok = jni.long_array_region(b, FIRST, &mut records);
    jni.set_long_array_region(b, 0, &[FIRST as i64]);
    if ok {
        s.replaying = true;
        for r in records.chunks_exact(2) {
            let time = clock::from_java_nanos(r[0]);
            let (kind, id) = (r[1] >> 32, r[1] as u32);
            match kind {
                CALL => {
                    let depth = s.calls.last().map_or(1, |c| c.depth + 1);
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
                }
                RETURN_VOID | RETURN_VALUE => {
                    let outcome = outcome(kind == RETURN_VALUE);
                    super::exit(agent, s, id as usize, MethodId(id), time, Some(outcome));
                }
                _ => {}
            }
        }
        s.replaying = false;
    }
    s.replay_scratch = records;
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmview_classfile::probe::ALL;

    const ACC_PUBLIC: u16 = 0x0001;
    const ACC_STATIC: u16 = 0x0008;
    const ACC_NATIVE: u16 = 0x0100;

    #[test]
    fn the_class_has_every_probe_method_in_java_and_the_natives_the_agent_binds() {
        let info = vmview_classfile::describe(CLASS_BYTES).expect("a well-formed class file");
        assert_eq!(info.name, super::super::bytecode::BUFFERED_PROBE_CLASS);
        let find = |name: &str, desc: &str| {
            info.methods
                .iter()
                .find(|m| m.name == name && m.descriptor == desc)
                .unwrap_or_else(|| {
                    panic!("{name}{desc} missing: rebuild with crates/agent/java/build.sh")
                })
        };
        for m in ALL {
            let access = find(m.name, m.descriptor).access;
            assert_eq!(
                access & (ACC_PUBLIC | ACC_STATIC | ACC_NATIVE),
                ACC_PUBLIC | ACC_STATIC,
                "{}",
                m.name
            );
        }
        for (name, desc, _) in natives() {
            assert_ne!(find(name, desc).access & ACC_NATIVE, 0, "{name} is native");
        }
    }
}
