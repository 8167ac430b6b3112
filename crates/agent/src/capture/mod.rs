//! The capture seam: how method entries and exits reach the agent.
//!
//! Today calls are captured with JVMTI MethodEntry/MethodExit events
//! ([`method_events`]), which switch threads to interpreter-only mode.
//! Bytecode instrumentation (a probe call injected into trace classes) will
//! replace it; it will implement [`CallCapture`] and feed the same
//! [`enter`] and [`exit`], which own the per-thread stack of open calls and
//! build the CALL and RETURN events. Nothing else in the agent knows how
//! calls are observed.

pub mod method_events;

use crate::agent::Agent;
use crate::jvmti::{self, Jvmti};
use crate::sys;
use crate::threads::{OpenCall, ThreadState};
use vmview_format::{EventKind, Loc, MethodId, Outcome, Value};

/// One way of observing calls of trace-class methods.
pub trait CallCapture: Send + Sync {
    /// Recorded in the trace header as `capture`.
    fn name(&self) -> &'static str;
    /// Adds the capabilities it needs (called in `Agent_OnLoad`).
    fn add_capabilities(&self, caps: &mut sys::jvmtiCapabilities);
    /// Installs its JVMTI callbacks (called in `Agent_OnLoad`).
    fn install_callbacks(&self, cb: &mut sys::jvmtiEventCallbacks);
    /// Starts delivering calls (at VMInit).
    fn start(&self, jvmti: Jvmti) -> jvmti::Result<()>;
    /// Stops delivering calls (at VMDeath).
    fn stop(&self, jvmti: Jvmti);
}

/// The capture this build uses.
pub fn current() -> &'static dyn CallCapture {
    &method_events::MethodEvents
}

/// Records the entry of a traced method.
#[allow(clippy::too_many_arguments)]
pub fn enter(
    agent: &Agent,
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
    state.emit(
        agent,
        time_ns,
        EventKind::Call {
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
    agent: &Agent,
    state: &mut ThreadState,
    key: usize,
    method: MethodId,
    time_ns: u64,
    outcome: Option<Outcome>,
) {
    // Frames entered before recording started have no open call.
    let open = match state.calls.last() {
        Some(c) if c.method == key => state.calls.pop(),
        _ => None,
    };
    let (elapsed_ns, depth) =
        open.map_or((0, 0), |c| (time_ns.saturating_sub(c.start_ns), c.depth));
    let outcome = outcome.unwrap_or_else(|| Outcome::Exception {
        class: state
            .unwinding
            .unwrap_or_else(|| agent.symbols.string("java.lang.Throwable")),
    });
    state.emit(
        agent,
        time_ns,
        EventKind::Return {
            method,
            depth,
            outcome,
            elapsed_ns,
        },
    );
}
