//! Per-recording state the hot path reads, kept apart from `agent.rs`
//! (the JVMTI environment and the recording's life), so that the probe
//! natives, the per-thread recorder and the buffers need not import the
//! agent. First step: the words the call path loads once per probe (the
//! tracing period and the depth window) and how they are packed.

/// `Agent::tracing` between two periods of `period=`.
pub const TRACING_OFF: u32 = 0;
/// `Agent::tracing` without `period=` (and while calibrating).
pub const TRACING_ALWAYS: u32 = u32::MAX;

/// `Agent::tracing` during period `n` (from 0) of `period=`.
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
