//! The capture seam: how method entries and exits reach the agent.
//!
//! Two captures implement [`CallCapture`], chosen with `mode=`:
//!
//! - [`bytecode`] (`mode=bci`, the default) rewrites trace classes as they
//!   load so that their methods call the probe class's natives
//!   ([`probe_natives`]); untraced code runs at full speed;
//! - [`method_events`] (`mode=jvmti`) uses JVMTI MethodEntry/MethodExit,
//!   which switch threads to interpreter-only mode.
//!
//! Both feed the same [`enter`] and [`exit`], which own the per-thread
//! stack of open calls and build the CALL and RETURN events. Nothing else
//! in the agent knows how calls are observed.

pub mod bytecode;
pub mod method_events;
mod probe_class;
mod probe_natives;
pub mod single_step;

use crate::jvmti::{Jni, Jvmti};
use crate::recording::Recording;
use crate::sys;
use crate::threads::{OpenCall, ThreadState};
use vmview_format::{EventKind, Loc, MethodId, Outcome, Value};
use vmview_options::CaptureMode;

/// One way of observing calls of trace-class methods.
pub trait CallCapture: Send + Sync {
    /// Recorded in the trace header as `capture`.
    fn name(&self) -> &'static str;
    /// Adds the capabilities it needs (called in `Agent_OnLoad`).
    fn add_capabilities(&self, caps: &mut sys::jvmtiCapabilities);
    /// Installs its JVMTI callbacks (called in `Agent_OnLoad`).
    fn install_callbacks(&self, cb: &mut sys::jvmtiEventCallbacks);
    /// Starts delivering calls (at VMInit, on the VMInit thread); the error
    /// is one line for the final report.
    fn start(&self, agent: &'static Recording, jni: Jni) -> Result<(), String>;
    /// Stops delivering calls (at VMDeath).
    fn stop(&self, jvmti: Jvmti);
    /// A period of `period=` begins (`on`) or ends: a capture whose
    /// observation slows the JVM down even when nothing is written turns
    /// it on and off here. The probes check [`Recording::tracing`] anyway.
    fn set_tracing(&self, _agent: &Recording, _on: bool) {}
}

/// The call path's period check, before its time stamp is taken: the
/// value of [`Recording::tracing`] when calls are traced now, `None` between
/// periods.
#[inline]
pub fn tracing_now(agent: &Recording) -> Option<u32> {
    let t = agent.tracing();
    (t != crate::recording::TRACING_OFF).then_some(t)
}

/// The same check after the time stamp: the period the call path began
/// in is still on. Together the two keep every CALL and RETURN between
/// its period's PERIOD_START and PERIOD_END, whose times are taken before
/// the period is switched on and after it is switched off.
#[inline]
pub fn still_tracing(agent: &Recording, tracing: u32) -> bool {
    agent.tracing() == tracing
}

/// The capture `mode=` asks for.
pub fn for_mode(mode: CaptureMode) -> &'static dyn CallCapture {
    match mode {
        CaptureMode::Bci => &bytecode::Bytecode,
        CaptureMode::Jvmti => &method_events::MethodEvents,
    }
}

/// How far below the top an exit looks for its open call. Deeper
/// mismatches mean the call was entered before recording began.
const EXIT_SEARCH: usize = 64;

/// Records the entry of a traced method. `params` are its argument
/// values; when empty, those the probe buffered in
/// [`ThreadState::pending_args`] (bci mode) are used and cleared, the
/// buffer keeping its capacity for the next call.
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn enter(
    agent: &Recording,
    state: &mut ThreadState,
    key: usize,
    method: MethodId,
    time_ns: u64,
    depth: u32,
    caller: Option<(MethodId, Loc)>,
    params: Vec<Value>,
) {
    state.calls.push(OpenCall {
        method: key,
        start_ns: time_ns,
        depth,
    });
    // Outside the depth window (`depth=`, `adapt=`): the call is followed (for the depths of its
    // callees and its own exit) but not written.
    if !agent.in_window(depth) {
        state.pending_args.clear();
        return;
    }
    if !params.is_empty() {
        state.pending_args = params;
    }
    if caller.is_none() && !agent.options.metrics.any() {
        // The fast path: no arguments, or one or two that fit a small
        // slot, go straight into one.
        state.emit_call(agent, time_ns, method, depth);
        return;
    }
    let metrics = crate::metrics::read(agent, state.jni());
    let params = std::mem::take(&mut state.pending_args);
    state.emit(
        agent,
        time_ns,
        EventKind::Call {
            metrics,
            method,
            depth,
            caller,
            params,
        },
    );
}

/// Records the return of a traced method. `outcome` is `None` when the
/// method was unwound by an exception: the exception is the one this
/// thread's last THROW reported.
pub fn exit(
    agent: &Recording,
    state: &mut ThreadState,
    key: usize,
    method: MethodId,
    time_ns: u64,
    outcome: Option<Outcome>,
) {
    exit_with(agent, state, key, method, time_ns, outcome, || 0)
}

/// [`exit`], with the depth of a frame that has no open call (entered
/// before its period began) from `frame_depth`: with `period=`, such a
/// RETURN closes a frame of the PERIOD_START stack, found by its depth.
pub fn exit_with(
    agent: &Recording,
    state: &mut ThreadState,
    key: usize,
    method: MethodId,
    time_ns: u64,
    outcome: Option<Outcome>,
    frame_depth: impl FnOnce() -> u32,
) {
    // Frames entered before recording started have no open call. Open
    // calls above the matching one lost their exit (a frame unwound by an
    // error thrown inside a probe call, say): they are dropped with it.
    let n = state.calls.len();
    let open = state
        .calls
        .iter()
        .rev()
        .take(EXIT_SEARCH)
        .position(|c| c.method == key)
        .and_then(|i| {
            state.calls.truncate(n - i);
            state.calls.pop()
        });
    let (elapsed_ns, depth) = match open {
        Some(c) => {
            let elapsed = time_ns.saturating_sub(c.start_ns);
            crate::budget::note(agent, method, elapsed);
            (elapsed, c.depth)
        }
        None if agent.options.period.is_some() => (0, frame_depth()),
        None => (0, 0),
    };
    // A frame entered before recording began (depth 0) is judged by the
    // window's lower bound alone, as before.
    if depth > 0 && !agent.in_window(depth) {
        return;
    }
    let outcome = outcome.unwrap_or_else(|| Outcome::Exception {
        class: state
            .unwinding
            .unwrap_or_else(|| agent.symbols.string("java.lang.Throwable")),
    });
    if !agent.options.metrics.any() {
        // The fast path: a RETURN without a string or boxed value goes
        // straight into a small slot.
        state.emit_return(agent, time_ns, method, depth, elapsed_ns, outcome);
        return;
    }
    let metrics = crate::metrics::read(agent, state.jni());
    state.emit(
        agent,
        time_ns,
        EventKind::Return {
            metrics,
            method,
            depth,
            outcome,
            elapsed_ns,
        },
    );
}
