//! Per-recording state the hot path reads, kept apart from `agent.rs`
//! (the JVMTI environment and the recording's life), so that the probe
//! natives, the per-thread recorder and the buffers need not import the
//! agent: options, buffers, symbols, the thread registry, the tracing
//! period and the depth window (and how they are packed into one word).

use crate::buffers::Buffers;
use crate::capture::CallCapture;
use crate::jvmti::Jvmti;
use crate::methods::MethodCache;
use crate::problems::Problems;
use crate::symbols::Symbols;
use crate::threads::ThreadRegistry;
use crate::values::Fields;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;
use vmview_options::AgentOptions;

pub(crate) const LOADED: u8 = 0;
pub(crate) const LIVE: u8 = 1;
pub(crate) const STOPPED: u8 = 2;

/// One recording: its options, file, buffers, symbols and writer. The
/// first one starts in `Agent_OnLoad` (or in `Agent_OnAttach`); after it
/// stops, `vmview attach PID` may start another in the same JVM, which
/// gets a fresh `Agent` (the old one stays allocated, stopped, so a
/// callback still holding it does nothing harmful).
pub struct Recording {
    pub jvmti: Jvmti,
    pub options: AgentOptions,
    pub capture: &'static dyn CallCapture,
    pub symbols: Symbols,
    pub buffers: Buffers,
    pub methods: MethodCache,
    pub threads: ThreadRegistry,
    pub problems: Problems,
    /// Resolved at VMInit.
    pub fields: OnceLock<Fields>,
    /// When the current GC pause began.
    pub gc_start: AtomicU64,
    /// Numbers the recordings of this JVM from 1: per-thread state and
    /// JVMTI tags of an earlier recording are recognised by it and ignored.
    pub generation: u32,
    /// Started by `Agent_OnAttach` (in the live phase): problems go to the
    /// control reply instead of the JVM's stderr.
    pub attached: bool,
    /// The trace file, expanded.
    pub path: String,
    /// The option string as given (a `dump` starts the next recording
    /// from it).
    pub raw_options: String,
    /// What an attached recording cannot record in this JVM, one line each.
    pub notes: Vec<String>,
    /// Subtracted from event times, so each recording's times start near 0.
    pub time_origin_ns: u64,
    /// Events written so far (for `vmview attach PID status`).
    pub written: AtomicU64,
    /// The stack sampler's stop flag.
    pub sampler: crate::agent_thread::AgentThread,
    /// The handler methods `reactions` chose to instrument.
    pub reactions: crate::reactions::Selection,
    /// The overhead budget (`budget=`): per-method rates, demotions.
    pub budget: crate::budget::Budget,
    /// The packages of the application's own classes (with samples):
    /// user code for the reactions analysis (`crate::app`).
    pub app_packages: Option<Vec<String>>,
    /// The depth window in force (`depth=`, moved by `adapt=`), packed
    /// by [`pack_window`].
    pub window: AtomicU64,
    /// Whether calls are traced now, read once per probe ([`Recording::tracing`]):
    /// [`TRACING_OFF`] between the periods of `period=`, else a number
    /// that changes with each period.
    pub tracing: AtomicU32,
    /// Events stamped from this time on wait in the writer: PERIOD_START
    /// events (stamped before the stacks they carry are taken) are on
    /// their way. `u64::MAX` when nothing is held.
    pub hold_from: AtomicU64,
    pub(crate) phase: AtomicU8,
}

/// The current recording; never freed once set (it lives in the leaked
/// `Agent` of `agent.rs`).
static RECORDING: AtomicPtr<Recording> = AtomicPtr::new(std::ptr::null_mut());

pub(crate) fn set(r: &'static Recording) {
    RECORDING.store(std::ptr::from_ref(r).cast_mut(), Ordering::Release);
}

/// The current (or last) recording, once one was set up.
pub fn get() -> Option<&'static Recording> {
    // SAFETY: set from a leaked, never freed `Agent`.
    unsafe { RECORDING.load(Ordering::Acquire).as_ref() }
}

/// The recording while it records.
#[inline]
pub fn live() -> Option<&'static Recording> {
    get().filter(|r| r.is_live())
}

/// Runs an FFI entry point's body, so that a panic is counted instead of
/// unwinding into the JVM (which would abort it).
#[inline]
pub fn guard(entry: &'static str, f: impl FnOnce()) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
        if let Some(r) = get() {
            r.problems.panic(entry);
        }
    }
}

impl Recording {
    /// Whether a call at `depth` is written under the window in force.
    #[inline]
    pub fn in_window(&self, depth: u32) -> bool {
        let v = self.window.load(Ordering::Relaxed);
        depth >= (v >> 32) as u32 && depth <= v as u32
    }

    /// Whether calls are traced now (`period=`): [`TRACING_OFF`], or a
    /// value a thread compares with the one its open calls were traced
    /// under ([`crate::threads::ThreadState::enter_period`]). One relaxed
    /// load: the call path reads it before anything else.
    #[inline]
    pub fn tracing(&self) -> u32 {
        self.tracing.load(Ordering::Relaxed)
    }

    pub fn is_live(&self) -> bool {
        self.phase.load(Ordering::Acquire) == LIVE
    }
}

/// [`Recording::tracing`] between two periods of `period=`.
pub const TRACING_OFF: u32 = 0;
/// [`Recording::tracing`] without `period=` (and while calibrating).
pub const TRACING_ALWAYS: u32 = u32::MAX;

/// [`Recording::tracing`] during period `n` (from 0) of `period=`.
pub fn tracing_in_period(n: u32) -> u32 {
    (n % (u32::MAX - 1)) + 1
}

/// A depth window in one word: `min` in the high half, `max` in the low
/// one (`u32::MAX` for no bound), so a probe reads it with one load.
pub fn pack_window(w: vmview_options::DepthWindow) -> u64 {
    u64::from(w.min) << 32 | u64::from(w.max.unwrap_or(u32::MAX))
}

pub fn unpack_window(v: u64) -> vmview_options::DepthWindow {
    let max = v as u32;
    vmview_options::DepthWindow {
        min: (v >> 32) as u32,
        max: (max != u32::MAX).then_some(max),
    }
}

#[cfg(test)]
mod tests {
    /// The hot path reaches per-recording state through this module,
    /// never through `agent.rs` (ARCHITECTURE.md).
    #[test]
    fn hot_path_does_not_import_agent() {
        let files = [
            ("threads.rs", include_str!("threads.rs")),
            ("vthreads.rs", include_str!("vthreads.rs")),
            ("buffers.rs", include_str!("buffers.rs")),
            ("slot.rs", include_str!("slot.rs")),
            ("recording.rs", include_str!("recording.rs")),
            ("capture/mod.rs", include_str!("capture/mod.rs")),
            (
                "capture/probe_natives.rs",
                include_str!("capture/probe_natives.rs"),
            ),
            (
                "capture/method_events.rs",
                include_str!("capture/method_events.rs"),
            ),
            ("capture/bytecode.rs", include_str!("capture/bytecode.rs")),
            (
                "capture/single_step.rs",
                include_str!("capture/single_step.rs"),
            ),
            (
                "capture/probe_class.rs",
                include_str!("capture/probe_class.rs"),
            ),
        ];
        let needle = ["crate", "::agent"].concat();
        let mut found = Vec::new();
        for (name, text) in files {
            for (n, line) in text.lines().enumerate() {
                let mut rest = line;
                while let Some(i) = rest.find(&needle) {
                    rest = &rest[i + needle.len()..];
                    if !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
                        found.push(format!("{name}:{}: {line}", n + 1));
                    }
                }
            }
        }
        assert!(
            found.is_empty(),
            "hot path imports agent.rs:\n{}",
            found.join("\n")
        );
    }
}
