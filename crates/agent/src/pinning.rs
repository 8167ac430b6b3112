//! Virtual-thread pinning (JDK 21+): a VTHREAD_PINNED event when a
//! virtual thread parks while pinned to its carrier, with its stack and
//! how long the carrier stayed parked, as JFR's `jdk.VirtualThreadPinned`.
//!
//! Why this shape: JVMTI has no pinned event. A virtual thread that parks
//! (`LockSupport.park`, `Thread.sleep`, a blocking queue …) but cannot
//! unmount (a `synchronized` frame on JDK 21–23, a native frame, a class
//! initializer on the stack) falls back to
//! `java.lang.VirtualThread.parkOnCarrierThread(boolean, long)`, which
//! parks the carrier itself; JFR's event is posted from there too. So the
//! agent sets JVMTI breakpoints on that one JDK method: at its first
//! instruction (the park begins: the time and the virtual thread's own
//! stack, `GetStackTrace` of the current thread, no safepoint) and at each
//! of its `return` instructions (the park ended: the event is emitted).
//! A breakpoint makes only that method run interpreted, and it runs only
//! when a thread is pinned, so unpinned code pays nothing; no class is
//! rewritten and `MethodEntry`/`FramePop` (which put threads in
//! interpreter-only mode) are not used.
//!
//! Entry and return run on the same OS thread: a pinned virtual thread
//! does not leave its carrier, so the park's start waits in a plain
//! thread-local. A park that ends by an exception (an OutOfMemoryError)
//! emits nothing; the next entry on that carrier overwrites it.
//!
//! Switched on with `events=locks` (in the default set) on a JVM that
//! has `parkOnCarrierThread(ZJ)V` and offers breakpoints and virtual
//! threads to JVMTI; anything else (JDK 17, an unknown JDK layout) leaves
//! it off, silently: there is nothing to pin.

use std::cell::Cell;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::agent::{self, Agent};
use crate::jvmti::Jni;
use crate::sys;
use vmview_format::{EventKind, StackId};
use vmview_options::EventGroup;

/// `VirtualThread.parkOnCarrierThread`, once its breakpoints are set.
static METHOD: AtomicPtr<sys::_jmethodID> = AtomicPtr::new(std::ptr::null_mut());
/// The `return` locations with a breakpoint (the entry, 0, has one too).
static RETURNS: Mutex<Vec<i64>> = Mutex::new(Vec::new());
/// Counts the recordings that set the breakpoints: a park that began in
/// an earlier recording of the same JVM (attach, stop, attach) ends
/// without an event, since its stack belongs to that recording's symbols.
static GENERATION: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The park under way on this carrier: its recording's generation,
    /// its start and its stack.
    static PARK: Cell<Option<(u64, u64, StackId)>> = const { Cell::new(None) };
}

/// Whether the recording asks for it (the capabilities are checked apart).
fn wanted(options: &vmview_options::AgentOptions) -> bool {
    options.events.contains(EventGroup::Locks)
}

/// Adds the capabilities pinning needs when the JVM offers them all
/// (virtual threads included: no JDK without them has anything to pin).
pub fn add_capabilities(
    options: &vmview_options::AgentOptions,
    potential: Option<&sys::jvmtiCapabilities>,
    caps: &mut sys::jvmtiCapabilities,
) {
    let Some(p) = potential else { return };
    if wanted(options)
        && p.can_support_virtual_threads() != 0
        && p.can_generate_breakpoint_events() != 0
        && p.can_get_bytecodes() != 0
        && p.can_get_constant_pool() != 0
    {
        caps.set_can_generate_breakpoint_events(1);
        caps.set_can_get_bytecodes(1);
        caps.set_can_get_constant_pool(1);
        // The stack's lines.
        caps.set_can_get_line_numbers(1);
    }
}

pub fn install_callbacks(cb: &mut sys::jvmtiEventCallbacks) {
    cb.Breakpoint = Some(breakpoint);
}

/// The offsets of `method`'s `return` instructions.
fn return_offsets(agent: &Agent, jni: Jni, method: sys::jmethodID) -> Option<Vec<i64>> {
    let code = agent.jvmti.bytecodes(method).ok()?;
    let class = agent.jvmti.method_declaring_class(jni, method).ok()?;
    let (count, pool) = agent.jvmti.constant_pool(class.get()).ok()?;
    let insns = vmview_classfile::disasm::disassemble(&code, count, &pool).ok()?;
    let returns: Vec<i64> = insns
        .iter()
        .filter(|i| i.text == "return")
        .map(|i| i64::from(i.offset))
        .collect();
    (!returns.is_empty()).then_some(returns)
}

/// Sets the breakpoints (at VMInit or attach) when the JVM has the method.
pub fn start(agent: &Agent, jni: Jni) {
    if !wanted(&agent.options) {
        return;
    }
    let Ok(caps) = agent.jvmti.capabilities() else {
        return;
    };
    if caps.can_generate_breakpoint_events() == 0 || caps.can_support_virtual_threads() == 0 {
        return;
    }
    let class = jni.find_class(c"java/lang/VirtualThread");
    if class.is_null() {
        return;
    }
    let Some(method) = jni.method_id(class.get(), c"parkOnCarrierThread", c"(ZJ)V") else {
        return;
    };
    let Some(returns) = return_offsets(agent, jni, method) else {
        return;
    };
    let mut set = Vec::new();
    for at in std::iter::once(0).chain(returns.iter().copied()) {
        match agent.jvmti.set_breakpoint(method, at) {
            Ok(()) => set.push(at),
            Err(e) => {
                agent.problems.jvmti(e);
                for &done in &set {
                    let _ = agent.jvmti.clear_breakpoint(method, done);
                }
                return;
            }
        }
    }
    *RETURNS.lock().unwrap_or_else(|e| e.into_inner()) = returns;
    GENERATION.fetch_add(1, Ordering::AcqRel);
    METHOD.store(method, Ordering::Release);
    if let Err(e) = agent.jvmti.set_event(true, sys::JVMTI_EVENT_BREAKPOINT) {
        agent.problems.jvmti(e);
    }
}

/// Clears the breakpoints (at the recording's end).
pub fn stop(agent: &Agent) {
    let method = METHOD.swap(std::ptr::null_mut(), Ordering::AcqRel);
    if method.is_null() {
        return;
    }
    let _ = agent.jvmti.set_event(false, sys::JVMTI_EVENT_BREAKPOINT);
    let returns = std::mem::take(&mut *RETURNS.lock().unwrap_or_else(|e| e.into_inner()));
    for at in std::iter::once(0).chain(returns) {
        let _ = agent.jvmti.clear_breakpoint(method, at);
    }
}

unsafe extern "C" fn breakpoint(
    _env: *mut sys::jvmtiEnv,
    jni: *mut sys::JNIEnv,
    thread: sys::jthread,
    method: sys::jmethodID,
    location: sys::jlocation,
) {
    agent::guard("Breakpoint", || {
        let time = crate::clock::now_ns();
        if method != METHOD.load(Ordering::Acquire) || jni.is_null() {
            return;
        }
        let Some(agent) = agent::live() else { return };
        // SAFETY: the JVM passes the current thread's JNIEnv.
        let jni = unsafe { Jni::new(jni) };
        if location == 0 {
            let Some(stack) = crate::alloc_sampler::own_stack(agent, jni) else {
                return;
            };
            let generation = GENERATION.load(Ordering::Acquire);
            PARK.with(|p| p.set(Some((generation, time, stack))));
            return;
        }
        let Some((generation, start, stack)) = PARK.with(Cell::take) else {
            return;
        };
        if generation != GENERATION.load(Ordering::Acquire) {
            return;
        }
        let kind = EventKind::VthreadPinned {
            stack,
            duration_ns: time.saturating_sub(start),
        };
        crate::threads::with_state(agent, Some((jni, thread)), |s| s.emit(agent, start, kind));
    });
}
