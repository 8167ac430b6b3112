//! Virtual threads (JDK 21+): their events belong to them, not to the
//! carrier thread that happens to run them.
//!
//! Why this shape: the agent's per-thread state (open calls, buffer,
//! thread handle) lives in a Rust thread-local of the OS thread, which a
//! virtual thread only borrows between a mount and an unmount. With
//! `can_support_virtual_threads` JVMTI reports the virtual thread itself
//! as the current thread, and HotSpot's extension events
//! `com.sun.hotspot.events.VirtualThreadMount`/`VirtualThreadUnmount`
//! (with VirtualThreadStart/End for the first mount and the last
//! unmount) say when one arrives and leaves. Each callback swaps the
//! state ([`threads::mount`], [`threads::unmount`]), keeping an unmounted
//! virtual thread's state in its JVMTI thread-local storage. The probes
//! and every other callback keep reading the one thread-local: the cost is
//! paid per mount and unmount, never per call.
//!
//! THREAD_START and THREAD_END (`events=threads`) are written for the
//! first [`RECORDED_STARTS`] virtual threads of a recording; later ones
//! are counted and named in the final report. Their other events are
//! always recorded.
//!
//! On a JVM older than 21 (no virtual threads, no extension events, and a
//! JNI table without `IsVirtualThread`) none of this is switched on.

use crate::clock;
use crate::jvmti::{Jni, Jvmti};
use crate::recording::{self, Recording};
use crate::sys;
use crate::threads;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use vmview_format::EventKind;
use vmview_options::EventGroup;

/// Virtual threads per recording that get THREAD_START and THREAD_END.
pub const RECORDED_STARTS: u64 = 1024;

const MOUNT: &str = "com.sun.hotspot.events.VirtualThreadMount";
const UNMOUNT: &str = "com.sun.hotspot.events.VirtualThreadUnmount";

/// Whether the events are on (checked when naming a thread, where the
/// JNI table must be recent enough for `IsVirtualThread`).
static ENABLED: AtomicBool = AtomicBool::new(false);
/// Virtual threads started in this recording.
static STARTED: AtomicU64 = AtomicU64::new(0);

pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The JVMTI major version (21 for JDK 21).
pub(crate) fn major(version: i32) -> i32 {
    (version & sys::JVMTI_VERSION_MASK_MAJOR as i32) >> sys::JVMTI_VERSION_SHIFT_MAJOR
}

type Env = *mut sys::jvmtiEnv;
type JniEnv = *mut sys::JNIEnv;

/// Puts the VirtualThreadStart/End callbacks into `cb`.
pub fn install(cb: &mut sys::jvmtiEventCallbacks) {
    cb.VirtualThreadStart = Some(virtual_thread_start);
    cb.VirtualThreadEnd = Some(virtual_thread_end);
}

/// Switches the four events on when the environment holds
/// `can_support_virtual_threads` (taken at load or attach when offered)
/// and the recording keeps per-thread state; a failure is counted, and
/// events stay on the carriers as before.
pub fn start(agent: &Recording) {
    // Stack samples and GC events need no per-thread state: a sampling
    // recording does not pay for the mount events.
    let per_thread = agent
        .options
        .events
        .iter()
        .any(|g| !matches!(g, EventGroup::Samples | EventGroup::Gc))
        || agent.options.reactions
        // The signal sampler names the virtual thread a carrier runs.
        || crate::signal_sampler::in_use(&agent.options);
    if !per_thread {
        return;
    }
    let held = agent
        .jvmti
        .capabilities()
        .is_ok_and(|c| c.can_support_virtual_threads() != 0);
    if !held || !agent.jvmti.version_number().is_ok_and(|v| major(v) >= 21) {
        return;
    }
    let j = agent.jvmti;
    let ext = |id: &str, cb: unsafe extern "C" fn(Env, JniEnv, sys::jthread)| {
        let index = j.extension_event_index(id)?;
        let Some(index) = index else {
            return Ok(false);
        };
        // SAFETY: HotSpot calls the mount events as
        // `(jvmtiEnv*, JNIEnv*, jthread)`, the parameters it lists for
        // them; the declared type is only JVMTI's generic variadic one.
        let cb: unsafe extern "C" fn(Env, ...) = unsafe { std::mem::transmute(cb) };
        j.set_extension_event_callback(index, Some(cb))?;
        // HotSpot's own tests enable them by index too: the callback alone
        // does not make the JVM post them.
        j.set_event(true, index as sys::jvmtiEvent)?;
        Ok(true)
    };
    let on = || -> crate::jvmti::Result<bool> {
        if !ext(MOUNT, mount)? || !ext(UNMOUNT, unmount)? {
            return Ok(false);
        }
        j.set_event(true, sys::JVMTI_EVENT_VIRTUAL_THREAD_START)?;
        j.set_event(true, sys::JVMTI_EVENT_VIRTUAL_THREAD_END)?;
        Ok(true)
    };
    STARTED.store(0, Ordering::Relaxed);
    match on() {
        Ok(true) => ENABLED.store(true, Ordering::Relaxed),
        Ok(false) => agent.problems.capture(|| {
            "this JVM has no virtual-thread mount events: events of virtual threads are on their carriers".to_string()
        }),
        Err(e) => {
            agent.problems.jvmti(e);
            stop(j);
        }
    }
}

/// Switches the events off (the recording stops). States already moved
/// stay where they are; the next recording's generation discards them.
pub fn stop(jvmti: Jvmti) {
    if !ENABLED.swap(false, Ordering::Relaxed) {
        return;
    }
    for id in [MOUNT, UNMOUNT] {
        if let Ok(Some(index)) = jvmti.extension_event_index(id) {
            let _ = jvmti.set_event(false, index as sys::jvmtiEvent);
            let _ = jvmti.set_extension_event_callback(index, None);
        }
    }
    let _ = jvmti.set_event(false, sys::JVMTI_EVENT_VIRTUAL_THREAD_START);
    let _ = jvmti.set_event(false, sys::JVMTI_EVENT_VIRTUAL_THREAD_END);
}

/// Virtual threads that started without a THREAD_START, for the report.
pub fn unrecorded() -> u64 {
    STARTED
        .load(Ordering::Relaxed)
        .saturating_sub(RECORDED_STARTS)
}

// The mount events are posted with the virtual thread current, so they
// name it as null: JVMTI's thread-local storage then takes its fast path
// (no thread-list handshake), the bulk of their cost otherwise.
unsafe extern "C" fn mount(_env: Env, jni: JniEnv, _vthread: sys::jthread) {
    recording::guard("VirtualThreadMount", || {
        if let Some(agent) = recording::get() {
            threads::mount(agent, std::ptr::null_mut());
            if !jni.is_null() {
                // SAFETY: the JVM passes the event thread's JNIEnv.
                let jni = unsafe { Jni::new(jni) };
                crate::signal_sampler::on_mount(agent, jni, std::ptr::null_mut());
            }
        }
    });
}

unsafe extern "C" fn unmount(_env: Env, jni: JniEnv, _vthread: sys::jthread) {
    recording::guard("VirtualThreadUnmount", || {
        if let Some(agent) = recording::get() {
            if !jni.is_null() {
                // SAFETY: the JVM passes the event thread's JNIEnv.
                crate::signal_sampler::on_unmount(unsafe { Jni::new(jni) });
            }
            threads::unmount(agent, std::ptr::null_mut(), false);
        }
    });
}

unsafe extern "C" fn virtual_thread_start(_env: Env, jni: JniEnv, vthread: sys::jthread) {
    recording::guard("VirtualThreadStart", || {
        let time = clock::now_ns();
        let Some(agent) = recording::get() else {
            return;
        };
        threads::mount(agent, vthread);
        if !jni.is_null() {
            // SAFETY: the JVM passes the event thread's JNIEnv.
            crate::signal_sampler::on_mount(agent, unsafe { Jni::new(jni) }, vthread);
        }
        if !agent.is_live() || !agent.options.events.contains(EventGroup::Threads) {
            return;
        }
        if STARTED.fetch_add(1, Ordering::Relaxed) >= RECORDED_STARTS {
            return;
        }
        // SAFETY: the JVM passes the event thread's JNIEnv.
        let jni = unsafe { Jni::new(jni) };
        threads::with_state(agent, Some((jni, vthread)), |s| {
            s.virtual_recorded = true;
            s.emit(agent, time, EventKind::ThreadStart);
        });
    });
}

unsafe extern "C" fn virtual_thread_end(_env: Env, jni: JniEnv, vthread: sys::jthread) {
    recording::guard("VirtualThreadEnd", || {
        let time = clock::now_ns();
        let Some(agent) = recording::get() else {
            return;
        };
        // HotSpot posts an unmount before the end.
        if !threads::virtual_mounted() {
            threads::mount(agent, vthread);
        }
        if agent.is_live() {
            // SAFETY: the JVM passes the event thread's JNIEnv.
            let jni = unsafe { Jni::new(jni) };
            threads::with_state(agent, Some((jni, vthread)), |s| {
                if s.virtual_recorded {
                    s.emit(agent, time, EventKind::ThreadEnd);
                }
            });
        }
        if !jni.is_null() {
            // SAFETY: the JVM passes the event thread's JNIEnv.
            crate::signal_sampler::on_unmount(unsafe { Jni::new(jni) });
        }
        threads::unmount(agent, vthread, true);
    });
}
