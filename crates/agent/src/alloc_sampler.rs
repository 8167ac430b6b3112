//! Allocation samples (`events=alloc`): JVMTI `SampledObjectAlloc`, the
//! heap sampler JFR's `ObjectAllocationSample` and async-profiler's alloc
//! mode build on, with `SetHeapSamplingInterval` (`alloc-interval=`,
//! default 512 KiB, as theirs).
//!
//! Why this shape: HotSpot picks about one allocation per interval of
//! bytes a thread allocates (a random, geometrically spread threshold in
//! the TLAB refill path), so big allocations are far likelier to be picked
//! and a sample stands for about `interval` bytes; the cost is one
//! callback per sample, not per allocation. The callback runs on the
//! allocating thread, in the VM after the object exists, so it may walk
//! its own stack (`GetStackTrace` of the current thread needs no
//! safepoint) and emits an ALLOC_SAMPLE with the object's class, size and
//! that stack, interned in the same stack table as SAMPLE's.

use crate::agent::{self, Agent};
use crate::jvmti::Jni;
use crate::sys;
use vmview_format::{EventKind, Loc, MethodId, StackId};
use vmview_options::EventGroup;

/// Whether the recording asks for allocation samples.
pub fn wanted(agent: &Agent) -> bool {
    agent.options.events.contains(EventGroup::Alloc)
}

/// Adds the capability `events=alloc` needs.
pub fn add_capabilities(options: &vmview_options::AgentOptions, caps: &mut sys::jvmtiCapabilities) {
    if options.events.contains(EventGroup::Alloc) {
        caps.set_can_generate_sampled_object_alloc_events(1);
    }
}

/// Installs the callback (which events fire is decided at start).
pub fn install_callbacks(cb: &mut sys::jvmtiEventCallbacks) {
    cb.SampledObjectAlloc = Some(sampled_object_alloc);
}

/// Sets the interval and switches the event on (at VMInit or attach).
pub fn start(agent: &Agent) {
    if !wanted(agent) {
        return;
    }
    let bytes = i32::try_from(agent.options.alloc_interval).unwrap_or(i32::MAX);
    if let Err(e) = agent.jvmti.set_heap_sampling_interval(bytes) {
        agent.problems.jvmti(e);
        return;
    }
    if let Err(e) = agent
        .jvmti
        .set_event(true, sys::JVMTI_EVENT_SAMPLED_OBJECT_ALLOC)
    {
        agent.problems.jvmti(e);
    }
}

unsafe extern "C" fn sampled_object_alloc(
    _env: *mut sys::jvmtiEnv,
    jni: *mut sys::JNIEnv,
    thread: sys::jthread,
    _object: sys::jobject,
    class: sys::jclass,
    size: sys::jlong,
) {
    agent::guard("SampledObjectAlloc", || {
        let time = crate::clock::now_ns();
        let Some(agent) = agent::live() else { return };
        if !wanted(agent) || jni.is_null() {
            return;
        }
        // SAFETY: the JVM passes the allocating thread's JNIEnv.
        let jni = unsafe { Jni::new(jni) };
        let Some(stack) = own_stack(agent, jni) else {
            return;
        };
        let kind = EventKind::AllocSample {
            class: crate::classes::name(agent, class),
            size: u64::try_from(size).unwrap_or(0),
            stack,
        };
        crate::threads::with_state(agent, Some((jni, thread)), |s| s.emit(agent, time, kind));
    });
}

/// The calling thread's own stack (JVMTI `GetStackTrace`, at most the
/// sampler's depth), its methods resolved and the stack interned; `None`
/// when JVMTI refuses, which is reported. Allocation samples and pinned
/// parks both take it this way.
pub(crate) fn own_stack(agent: &Agent, jni: Jni) -> Option<StackId> {
    let frames = match agent.jvmti.own_stack(crate::sampler::MAX_DEPTH as usize) {
        Ok(f) => f,
        Err(e) => {
            agent.problems.jvmti(e);
            return None;
        }
    };
    let mut stack: Vec<(MethodId, Loc)> = Vec::with_capacity(frames.len());
    for f in &frames {
        let info = agent.methods.get(agent, jni, f.method);
        let id = info.symbol(agent, jni, f.method);
        stack.push((id, info.loc(agent, f.method, f.location)));
    }
    Some(agent.symbols.stack(&stack))
}
