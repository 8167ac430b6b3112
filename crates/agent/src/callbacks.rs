//! The JVMTI event callbacks other than method entry and exit (those belong
//! to the capture seam, `capture`).
//!
//! Each one runs under [`agent::guard`], returns at once unless the agent
//! is live, reads what it needs from the JVM, and pushes one event into
//! its thread's buffer. No I/O, no printing, no Java code.

use crate::agent::{self, Agent};
use crate::classes;
use crate::clock;
use crate::jvmti::Jni;
use crate::methods::lookup;
use crate::sys;
use crate::threads::{self, with_state, PendingThrow};
use crate::values;
use std::sync::atomic::Ordering;
use vmview_format::{EventKind, Loc, MethodId, Monitor, StringId};
use vmview_options::{EventGroup, ExceptionScope};

type Env = *mut sys::jvmtiEnv;
type JniEnv = *mut sys::JNIEnv;

/// Puts every callback of this module into `cb`; which events fire is
/// decided by `Agent::start_recording`.
pub fn install(cb: &mut sys::jvmtiEventCallbacks) {
    cb.VMInit = Some(vm_init);
    cb.VMDeath = Some(vm_death);
    cb.ThreadStart = Some(thread_start);
    cb.ThreadEnd = Some(thread_end);
    cb.SingleStep = Some(crate::capture::single_step::single_step);
    cb.ClassPrepare = Some(class_prepare);
    cb.Exception = Some(exception);
    cb.ExceptionCatch = Some(exception_catch);
    cb.MonitorContendedEnter = Some(monitor_contended_enter);
    cb.MonitorContendedEntered = Some(monitor_contended_entered);
    cb.MonitorWait = Some(monitor_wait);
    cb.MonitorWaited = Some(monitor_waited);
    cb.GarbageCollectionStart = Some(gc_start);
    cb.GarbageCollectionFinish = Some(gc_finish);
}

/// Queues an event of the Java thread `thread`.
fn emit(agent: &Agent, jni: Jni, thread: sys::jthread, time: u64, kind: EventKind) {
    with_state(agent, Some((jni, thread)), |s| s.emit(agent, time, kind));
}

/// Builds the event body with the JNI environment, or does nothing when the
/// agent is not live.
fn on_event(entry: &'static str, jni: JniEnv, body: impl FnOnce(&'static Agent, Jni, u64)) {
    agent::guard(entry, || {
        let time = clock::now_ns();
        let Some(agent) = agent::live() else { return };
        // SAFETY: the JVM passes the event thread's JNIEnv.
        let jni = unsafe { Jni::new(jni) };
        body(agent, jni, time);
    });
}

unsafe extern "C" fn vm_init(_env: Env, jni: JniEnv, thread: sys::jthread) {
    agent::guard("VMInit", || {
        let Some(agent) = agent::get() else { return };
        // SAFETY: the JVM passes this thread's JNIEnv.
        let jni = unsafe { Jni::new(jni) };
        // The JVM itself posts THREAD_START for the main thread right after.
        agent.start_recording(jni);
        report_loaded_classes(agent, jni, thread);
    });
}

/// HotSpot's default `-XX:MaxJNILocalCapacity`: the most a frame may plan for.
const MAX_JNI_LOCAL_CAPACITY: i32 = 65_536;

/// CLASS_LOAD for every class prepared before recording began (with
/// `events=classes`), reported by `thread`.
pub fn report_loaded_classes(agent: &Agent, jni: Jni, thread: sys::jthread) {
    if agent.options.events.contains(EventGroup::Classes) {
        // One reference per loaded class arrives at once.
        jni.with_local_frame(MAX_JNI_LOCAL_CAPACITY, || {
            report_prepared_classes(agent, jni, thread)
        });
    }
}

fn report_prepared_classes(agent: &Agent, jni: Jni, thread: sys::jthread) {
    let classes = match agent.jvmti.loaded_classes(jni) {
        Ok(c) => c,
        Err(e) => return agent.problems.jvmti(e),
    };
    for class in classes {
        let prepared = agent
            .jvmti
            .class_status(class.get())
            .is_ok_and(|s| s & sys::JVMTI_CLASS_STATUS_PREPARED as i32 != 0);
        if prepared {
            class_load(agent, jni, thread, class.get(), clock::now_ns());
        }
    }
}

unsafe extern "C" fn vm_death(_env: Env, _jni: JniEnv) {
    agent::guard("VMDeath", || {
        if let Some(agent) = agent::get() {
            agent.stop_recording();
        }
    });
}

// Thread start and end are always enabled, even without `threads`: an OS
// thread can host one Java thread after another (the launcher's main
// thread later runs DestroyJavaVM), and each must get its own state.

unsafe extern "C" fn thread_start(_env: Env, jni: JniEnv, thread: sys::jthread) {
    on_event("ThreadStart", jni, |agent, jni, time| {
        threads::forget_current();
        if agent.options.events.contains(EventGroup::Threads) {
            emit(agent, jni, thread, time, EventKind::ThreadStart);
        }
    });
}

unsafe extern "C" fn thread_end(_env: Env, jni: JniEnv, thread: sys::jthread) {
    on_event("ThreadEnd", jni, |agent, jni, time| {
        if agent.options.events.contains(EventGroup::Threads) {
            emit(agent, jni, thread, time, EventKind::ThreadEnd);
        }
        threads::forget_current();
    });
}

unsafe extern "C" fn class_prepare(
    _env: Env,
    jni: JniEnv,
    thread: sys::jthread,
    klass: sys::jclass,
) {
    on_event("ClassPrepare", jni, |agent, jni, time| {
        // Enabled for events=classes and for the signal sampler's
        // jmethodID warm-up.
        crate::signal_sampler::on_class_prepare(agent, klass);
        if agent
            .options
            .events
            .contains(vmview_options::EventGroup::Classes)
        {
            class_load(agent, jni, thread, klass, time);
        }
    });
}

fn class_load(agent: &Agent, jni: Jni, thread: sys::jthread, class: sys::jclass, time: u64) {
    let name = classes::name(agent, class);
    let loader = match agent.jvmti.class_loader(jni, class) {
        Ok(l) if !l.is_null() => classes::name(agent, jni.object_class(l.get()).get()),
        Ok(_) => agent.symbols.string("bootstrap"),
        Err(e) => {
            agent.problems.jvmti(e);
            agent.symbols.string("?")
        }
    };
    let source = agent.jvmti.source_file_name(class).unwrap_or_default();
    let source = agent.symbols.string(&source);
    emit(
        agent,
        jni,
        thread,
        time,
        EventKind::ClassLoad {
            class: name,
            loader,
            source,
        },
    );
}

/// A method and location as the trace names them, and whether the method
/// belongs to a trace class.
fn site(
    agent: &Agent,
    jni: Jni,
    thread: sys::jthread,
    method: sys::jmethodID,
    bci: i64,
) -> Option<(MethodId, Loc, bool)> {
    if method.is_null() {
        return None;
    }
    let info = lookup(agent, jni, thread, method)?;
    Some((
        info.symbol(agent, jni, method),
        info.loc(agent, method, bci),
        info.traced,
    ))
}

fn traced(agent: &Agent, jni: Jni, thread: sys::jthread, method: sys::jmethodID) -> bool {
    !method.is_null() && lookup(agent, jni, thread, method).is_some_and(|m| m.traced)
}

/// Whether `location` in `method` is in the probe's catch-all handler
/// (`at_start`: is the handler's first instruction, where it catches).
fn in_probe_handler(
    agent: &Agent,
    jni: Jni,
    thread: sys::jthread,
    method: sys::jmethodID,
    location: i64,
    at_start: bool,
) -> bool {
    !method.is_null()
        && lookup(agent, jni, thread, method)
            .is_some_and(|m| m.in_probe_handler(agent, method, location, at_start))
}

// In bci mode every instrumented method has a catch-all handler that
// reports the unwinding exception to the probe and rethrows it. JVMTI
// names that handler as the catch site, and posts a new exception event
// for each rethrow. A THROW whose catch site is a probe handler is
// therefore held back in the thread's state, rethrows are skipped, and
// the THROW is written (with its original time and throw site) once the
// exception reaches a real handler or leaves the thread.

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn exception(
    _env: Env,
    jni: JniEnv,
    thread: sys::jthread,
    method: sys::jmethodID,
    location: sys::jlocation,
    exception: sys::jobject,
    catch_method: sys::jmethodID,
    catch_location: sys::jlocation,
) {
    on_event("Exception", jni, |agent, jni, time| {
        let class = exception_class(agent, jni, exception);
        with_state(agent, Some((jni, thread)), |s| s.unwinding = Some(class));
        if !agent.options.events.contains(EventGroup::Exceptions) {
            return;
        }
        let held_back = in_probe_handler(agent, jni, thread, catch_method, catch_location, true);
        if in_probe_handler(agent, jni, thread, method, location, false) {
            // A probe handler rethrowing what it caught.
            if !held_back {
                throw_held_back(agent, jni, thread, catch_method, catch_location);
            }
            return;
        }
        let thrown_in_trace_class = traced(agent, jni, thread, method);
        let Some((method, loc, _)) = site(agent, jni, thread, method, location) else {
            return;
        };
        let message = values::exception_message(agent, jni, exception);
        if held_back {
            with_state(agent, Some((jni, thread)), |s| {
                s.pending_throw = Some(PendingThrow {
                    time_ns: time,
                    exception: class,
                    message,
                    method,
                    loc,
                    traced: thrown_in_trace_class,
                })
            });
            return;
        }
        let wanted = agent.options.exceptions == ExceptionScope::All
            || thrown_in_trace_class
            || traced(agent, jni, thread, catch_method);
        if !wanted {
            return;
        }
        let catch = site(agent, jni, thread, catch_method, catch_location).map(|(m, l, _)| (m, l));
        emit(
            agent,
            jni,
            thread,
            time,
            EventKind::Throw {
                exception: class,
                message,
                method,
                loc,
                catch,
            },
        );
    });
}

/// Writes the THROW held back while probe handlers caught the exception,
/// now that it is caught at `catch_method` (or nowhere: null).
fn throw_held_back(
    agent: &Agent,
    jni: Jni,
    thread: sys::jthread,
    catch_method: sys::jmethodID,
    catch_location: i64,
) {
    let Some(Some(p)) = with_state(agent, Some((jni, thread)), |s| s.pending_throw.take()) else {
        return;
    };
    let catch = site(agent, jni, thread, catch_method, catch_location);
    let wanted = agent.options.exceptions == ExceptionScope::All
        || p.traced
        || catch.is_some_and(|(_, _, traced)| traced);
    if wanted {
        emit(
            agent,
            jni,
            thread,
            p.time_ns,
            EventKind::Throw {
                exception: p.exception,
                message: p.message,
                method: p.method,
                loc: p.loc,
                catch: catch.map(|(m, l, _)| (m, l)),
            },
        );
    }
}

fn exception_class(agent: &Agent, jni: Jni, exception: sys::jobject) -> StringId {
    classes::name(agent, jni.object_class(exception).get())
}

unsafe extern "C" fn exception_catch(
    _env: Env,
    jni: JniEnv,
    thread: sys::jthread,
    method: sys::jmethodID,
    location: sys::jlocation,
    exception: sys::jobject,
) {
    on_event("ExceptionCatch", jni, |agent, jni, time| {
        if in_probe_handler(agent, jni, thread, method, location, true) {
            // Reported to the probe and rethrown: not a catch.
            return;
        }
        with_state(agent, Some((jni, thread)), |s| s.unwinding = None);
        let Some((method, loc, traced)) = site(agent, jni, thread, method, location) else {
            return;
        };
        if traced || agent.options.exceptions == ExceptionScope::All {
            let exception = exception_class(agent, jni, exception);
            emit(
                agent,
                jni,
                thread,
                time,
                EventKind::Catch {
                    exception,
                    method,
                    loc,
                },
            );
        }
    });
}

pub(crate) fn monitor(
    agent: &crate::recording::Recording,
    jni: Jni,
    object: sys::jobject,
) -> Monitor {
    Monitor {
        class: classes::name(agent, jni.object_class(object).get()),
        hash: agent.jvmti.object_hash_code(object).unwrap_or_else(|e| {
            agent.problems.jvmti(e);
            0
        }),
    }
}

unsafe extern "C" fn monitor_contended_enter(
    _env: Env,
    jni: JniEnv,
    thread: sys::jthread,
    object: sys::jobject,
) {
    on_event("MonitorContendedEnter", jni, |agent, jni, time| {
        let monitor = monitor(agent, jni, object);
        let owner = match agent.jvmti.monitor_owner(jni, object) {
            Ok(o) if !o.is_null() => Some(agent.threads.thread_ref(agent, jni, o.get())),
            Ok(_) => None,
            Err(e) => {
                agent.problems.jvmti(e);
                None
            }
        };
        with_state(agent, Some((jni, thread)), |s| {
            s.contended_since = time;
            s.emit(
                agent,
                time,
                EventKind::MonitorContendedEnter { monitor, owner },
            );
        });
    });
}

unsafe extern "C" fn monitor_contended_entered(
    _env: Env,
    jni: JniEnv,
    thread: sys::jthread,
    object: sys::jobject,
) {
    on_event("MonitorContendedEntered", jni, |agent, jni, time| {
        let monitor = monitor(agent, jni, object);
        with_state(agent, Some((jni, thread)), |s| {
            let wait_ns = time.saturating_sub(s.contended_since);
            s.emit(
                agent,
                time,
                EventKind::MonitorContendedEntered { monitor, wait_ns },
            );
        });
    });
}

unsafe extern "C" fn monitor_wait(
    _env: Env,
    jni: JniEnv,
    thread: sys::jthread,
    object: sys::jobject,
    timeout: sys::jlong,
) {
    on_event("MonitorWait", jni, |agent, jni, time| {
        let monitor = monitor(agent, jni, object);
        with_state(agent, Some((jni, thread)), |s| {
            s.wait_since = time;
            s.emit(
                agent,
                time,
                EventKind::MonitorWait {
                    monitor,
                    timeout_ms: timeout,
                },
            );
        });
    });
}

unsafe extern "C" fn monitor_waited(
    _env: Env,
    jni: JniEnv,
    thread: sys::jthread,
    object: sys::jobject,
    timed_out: sys::jboolean,
) {
    on_event("MonitorWaited", jni, |agent, jni, time| {
        let monitor = monitor(agent, jni, object);
        with_state(agent, Some((jni, thread)), |s| {
            // HotSpot posts MONITOR_WAITED alone when a thread waits for
            // another thread's class initialisation (on its init lock):
            // with no start, the duration is unknown, written as 0.
            let since = std::mem::take(&mut s.wait_since);
            let wait_ns = if since == 0 {
                0
            } else {
                time.saturating_sub(since)
            };
            let timed_out = timed_out != 0;
            s.emit(
                agent,
                time,
                EventKind::MonitorWaited {
                    monitor,
                    timed_out,
                    wait_ns,
                },
            );
        });
    });
}

// GC callbacks run inside the pause: no JNI and almost no JVMTI allowed.
// They only take the time and push to the reporting VM thread's buffer.

unsafe extern "C" fn gc_start(_env: Env) {
    agent::guard("GarbageCollectionStart", || {
        let time = clock::now_ns();
        let Some(agent) = agent::live() else { return };
        agent.gc_start.store(time, Ordering::Relaxed);
        with_state(agent, None, |s| s.emit(agent, time, EventKind::GcStart));
    });
}

unsafe extern "C" fn gc_finish(_env: Env) {
    agent::guard("GarbageCollectionFinish", || {
        let time = clock::now_ns();
        let Some(agent) = agent::live() else { return };
        let duration_ns = time.saturating_sub(agent.gc_start.load(Ordering::Relaxed));
        with_state(agent, None, |s| {
            s.emit(agent, time, EventKind::GcFinish { duration_ns })
        });
    });
}
