//! vmview's JVMTI agent: loaded into a JVM with
//! `-agentpath:libvmview_agent.so=OPTIONS` (or into a running one by
//! `vmview attach`), it records threads, class loads,
//! calls of trace-class methods with their arguments and results,
//! exceptions, monitor contention and GC pauses into a `.vmv` trace.
//!
//! This is the only crate with FFI `unsafe`. Its invariants:
//!
//! - every `extern "C"` entry runs under `catch_unwind` ([`agent::guard`]);
//!   a quiet panic hook keeps the JVM's stderr clean, and problems are
//!   counted and reported once when the agent stops;
//! - callbacks never block on I/O and never run Java code: they push events
//!   into per-thread buffers ([`buffers`]) that the writer thread
//!   ([`writer`]) drains; memory is bounded by `buffer=`;
//! - JNI local references the agent creates are deleted ([`jvmti::LocalRef`]);
//! - how calls are captured is one seam ([`capture`]): bytecode
//!   instrumentation (`mode=bci`, the default: trace classes are rewritten
//!   as they load to call the natives of a probe class the agent defines)
//!   or JVMTI method events (`mode=jvmti`); both build the same events.
//!
//! Code map: [`sys`] (generated bindings), [`jvmti`] (wrappers), [`agent`]
//! (global state and lifecycle), [`control`] (`Agent_OnAttach`: start,
//! status, stop and dump from `vmview attach`), [`callbacks`], [`capture`], [`methods`]
//! (jmethodID cache), [`classes`], [`values`], [`threads`], [`symbols`],
//! [`buffers`], [`writer`], [`sampler`] (SAMPLE events), [`problems`],
//! [`vthreads`] (per-thread state that follows virtual threads),
//! [`clock`].

mod agent;
mod agent_thread;
mod alloc_sampler;
mod app;
mod budget;
mod buffers;
mod calibrate;
mod callbacks;
mod capture;
mod classes;
mod clock;
mod code_table;
mod control;
mod in_situ;
mod jvmti;
mod methods;
mod metrics;
mod own_cpu;
mod pinning;
mod problems;
mod reactions;
mod recording;
mod sampler;
mod signal_sampler;
mod slot;
mod symbols;
#[rustfmt::skip]
mod sys;
mod threads;
mod trace_file;
mod values;
mod vthreads;
mod writer;

/// What `benches/writer.rs` measures (the writer thread's work on one
/// core): not an API.
#[doc(hidden)]
pub mod bench {
    pub use crate::buffers::{Buffers, Producer, ThreadEvents};
    pub use crate::slot::Slot;
    pub use crate::writer::{RoundStats, Sequencer};
}

use std::ffi::{c_char, c_void, CStr};

/// The marker and build this agent was compiled as: `vmview-agent-build
/// VERSION+ID`, where ID hashes the agent's sources (build.rs). The CLI
/// finds this string in the library's bytes (`vmview --version`, and
/// `vmview attach` to recognise an agent of another build in a JVM), so it
/// is one literal, used at run time so the linker keeps it.
const BUILD_MARKER: &str = concat!(
    "vmview-agent-build ",
    env!("CARGO_PKG_VERSION"),
    "+",
    env!("VMVIEW_BUILD_ID")
);

/// This agent's build id (the hash part of [`BUILD_MARKER`]).
pub(crate) fn build_id() -> &'static str {
    BUILD_MARKER.rsplit('+').next().unwrap_or("")
}

/// `VERSION+ID`, as control replies carry it.
pub(crate) fn build() -> &'static str {
    BUILD_MARKER
        .strip_prefix("vmview-agent-build ")
        .unwrap_or(BUILD_MARKER)
}

/// Called by the JVM when it loads the agent at startup. A non-zero return
/// makes the JVM refuse to start; the reason is printed on one line.
///
/// # Safety
/// Called by the JVM with its `JavaVM*` and the option string (or null).
#[no_mangle]
pub unsafe extern "C" fn Agent_OnLoad(
    vm: *mut sys::JavaVM,
    options: *mut c_char,
    _reserved: *mut c_void,
) -> sys::jint {
    problems::install_quiet_panic_hook();
    let options = if options.is_null() {
        String::new()
    } else {
        // SAFETY: the JVM passes a NUL-terminated string.
        unsafe { CStr::from_ptr(options) }
            .to_string_lossy()
            .into_owned()
    };
    // SAFETY: `vm` comes from the JVM.
    let result = std::panic::catch_unwind(|| unsafe { agent::load(vm, &options) });
    let error = match result {
        Ok(Ok(())) => return sys::JNI_OK,
        Ok(Err(message)) => message,
        Err(_) => "internal error while starting".to_string(),
    };
    problems::say(&error);
    sys::JNI_ERR
}

/// Called by the JVM when `vmview attach` loads the agent into it while it
/// runs, once per control command ([`control`]): start a recording, tell
/// its status, stop it, or dump it to a new file. The answer goes to the
/// reply file the command names; a non-zero return (only without one)
/// makes the attach fail with the line printed.
///
/// # Safety
/// Called by the JVM with its `JavaVM*` and the option string (or null).
#[no_mangle]
pub unsafe extern "C" fn Agent_OnAttach(
    vm: *mut sys::JavaVM,
    options: *mut c_char,
    _reserved: *mut c_void,
) -> sys::jint {
    problems::install_quiet_panic_hook();
    let options = if options.is_null() {
        String::new()
    } else {
        // SAFETY: the JVM passes a NUL-terminated string.
        unsafe { CStr::from_ptr(options) }
            .to_string_lossy()
            .into_owned()
    };
    // SAFETY: `vm` comes from the JVM.
    let result = std::panic::catch_unwind(|| unsafe { control::on_attach(vm, &options) });
    let error = match result {
        Ok(Ok(())) => return sys::JNI_OK,
        Ok(Err(message)) => message,
        Err(_) => "internal error while attaching".to_string(),
    };
    problems::say(&error);
    sys::JNI_ERR
}

/// Called when the JVM unloads the agent. Normally VMDeath has finished the
/// trace already; if the VM never got that far, this does it.
///
/// # Safety
/// Called by the JVM.
#[no_mangle]
pub unsafe extern "C" fn Agent_OnUnload(_vm: *mut sys::JavaVM) {
    agent::guard("Agent_OnUnload", || {
        if let Some(a) = agent::get() {
            a.stop_recording();
        }
    });
}
