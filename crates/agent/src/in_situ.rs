//! What the probe natives cost the calling threads where they run, for
//! the overhead budget: one call in [`EVERY`] of a call-path native
//! (`Probe.enter`, `Probe.arg*`, `Probe.exit*`) is timed from its first
//! instruction to its last with the agent's clock (the TSC, a few
//! nanoseconds), and the sums are read by the budget's thread.
//!
//! Why: the calibration times the probe in a tight loop, with everything
//! in cache and one thread; in a real program a traced call costs the
//! calling thread several times that (on H2 with `org.h2.*`, about 550 ns
//! a call against 200 calibrated: four threads on two cores, cache misses,
//! argument capture). Timing a sample of the real calls measures that
//! part; the JNI transition into the native and back (outside what the
//! native itself can time) is added by the budget from the calibration.
//!
//! A timed call that was descheduled would count the time slice another
//! thread got: one of 20 µs or more counts as [`CAP_NS`]. The counters are
//! process-wide and only grow; the budget takes differences.

use crate::clock;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// One native call in this many (per thread) is timed.
pub const EVERY: u64 = 16;
/// The most one timed call counts (ns): longer ones were descheduled.
const CAP_NS: u64 = 20_000;

/// Sum of the timed calls' durations, ns.
static SUM_NS: AtomicU64 = AtomicU64::new(0);
/// Timed calls.
static TIMED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Native calls of this thread, modulo [`EVERY`].
    static CALLS: Cell<u64> = const { Cell::new(0) };
}

/// At the start of a native: the time, when this call is the one of
/// [`EVERY`] to be timed.
#[inline]
pub fn begin() -> Option<u64> {
    let due = CALLS
        .try_with(|c| {
            let n = c.get() + 1;
            let due = n >= EVERY;
            c.set(if due { 0 } else { n });
            due
        })
        .unwrap_or(false);
    due.then(clock::now_ns)
}

/// At the end of a native, with what [`begin`] returned.
#[inline]
pub fn end(started: Option<u64>) {
    if let Some(t0) = started {
        let d = clock::now_ns().saturating_sub(t0).min(CAP_NS);
        SUM_NS.fetch_add(d, Ordering::Relaxed);
        TIMED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Running totals, extrapolated from the timed calls: (estimated ns
/// spent inside the natives, estimated native calls).
pub fn totals() -> (u64, u64) {
    (
        SUM_NS.load(Ordering::Relaxed) * EVERY,
        TIMED.load(Ordering::Relaxed) * EVERY,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_call_in_every_is_timed_and_a_descheduled_one_is_capped() {
        // On a thread of its own, so no other test's calls are counted
        // in its thread-local counter (the totals are process-wide: only
        // this test times natives in this crate's tests).
        std::thread::spawn(|| {
            clock::start();
            let (ns0, n0) = totals();
            for _ in 0..EVERY * 10 {
                let t = begin();
                end(t);
            }
            let (ns1, n1) = totals();
            assert_eq!(n1 - n0, EVERY * 10);
            assert!(ns1 - ns0 <= 10 * EVERY * CAP_NS);
            // A call "descheduled" for 50 ms counts CAP_NS.
            let mut started = None;
            while started.is_none() {
                started = begin();
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            end(started);
            let (ns2, _) = totals();
            assert_eq!(ns2 - ns1, CAP_NS * EVERY);
        })
        .join()
        .unwrap();
    }
}
