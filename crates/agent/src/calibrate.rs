//! Overhead calibration: what emitting one CALL or RETURN costs the traced
//! thread, measured in the running JVM at start-up and written into the
//! trace as CALIBRATION events, so `vmview calltree --compensate` can take
//! the tracer's own time out of each call's.
//!
//! The measurement repeats, on the thread that starts the recording, the
//! work a probe does for a record — read the clock, borrow the thread's
//! state, track the open call, build the event, check the memory budget,
//! queue it under the thread's buffer lock — into scratch structures of
//! the same shapes, so nothing reaches the trace and no agent state is
//! touched. Several rounds; the median per record is kept, which a
//! descheduled round cannot skew. The JNI transition into the probe is not
//! included (it cannot be made without Java code), so the figure is a lower
//! bound of the real cost: compensation under-corrects rather than over.

use std::cell::RefCell;
use std::hint::black_box;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use vmview_format::{Event, EventKind, MethodId, Metrics, Outcome, ThreadRef};

use crate::agent::Agent;
use crate::clock;
use crate::jvmti::Jni;
use crate::threads::with_state;

/// Rounds measured; the median is kept.
const ROUNDS: usize = 7;
/// Records of each type per round.
const RECORDS: usize = 10_000;

/// The scratch copy of what a probe touches.
struct Scratch {
    calls: RefCell<Vec<(usize, u64, u32)>>,
    queued: Mutex<Vec<Event>>,
    bytes: AtomicU64,
}

thread_local! {
    static SCRATCH: Scratch = Scratch {
        calls: RefCell::new(Vec::with_capacity(RECORDS)),
        queued: Mutex::new(Vec::with_capacity(2 * RECORDS)),
        bytes: AtomicU64::new(0),
    };
}

fn queue(s: &Scratch, ev: Event) {
    let before = s.bytes.fetch_add(16, Ordering::Relaxed);
    if before > u64::MAX / 2 {
        s.bytes.fetch_sub(16, Ordering::Relaxed);
        return;
    }
    if let Ok(mut q) = s.queued.lock() {
        q.push(ev);
    }
}

/// One round: `RECORDS` CALLs, then their RETURNs, innermost first.
/// Returns the ns per CALL and per RETURN.
fn round(s: &Scratch) -> (f64, f64) {
    let t0 = clock::now_ns();
    for i in 0..RECORDS {
        let time = clock::now_ns();
        let depth = (i % 64) as u32 + 1;
        s.calls.borrow_mut().push((i, time, depth));
        queue(
            s,
            Event {
                id: 0,
                time_ns: time,
                thread: ThreadRef(0),
                kind: EventKind::Call {
                    method: MethodId(black_box(i as u32)),
                    depth,
                    caller: None,
                    params: Vec::new(),
                    metrics: Metrics::NONE,
                },
            },
        );
    }
    let t1 = clock::now_ns();
    for _ in 0..RECORDS {
        let time = clock::now_ns();
        let open = s.calls.borrow_mut().pop();
        let (key, start, depth) = open.unwrap_or((0, time, 0));
        queue(
            s,
            Event {
                id: 0,
                time_ns: time,
                thread: ThreadRef(0),
                kind: EventKind::Return {
                    method: MethodId(black_box(key as u32)),
                    depth,
                    outcome: Outcome::Void,
                    elapsed_ns: time.saturating_sub(start),
                    metrics: Metrics::NONE,
                },
            },
        );
    }
    let t2 = clock::now_ns();
    // Hand the events "to the writer", outside the timed part.
    if let Ok(mut q) = s.queued.lock() {
        black_box(q.len());
        q.clear();
    }
    s.bytes.store(0, Ordering::Relaxed);
    let per = |ns: u64| ns as f64 / RECORDS as f64;
    (per(t1 - t0), per(t2 - t1))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Measures the cost per CALL and per RETURN record, in picoseconds.
pub fn measure() -> (u64, u64) {
    SCRATCH.with(|s| {
        round(s); // warm-up: caches, page faults of the scratch vectors
        let (calls, returns): (Vec<f64>, Vec<f64>) = (0..ROUNDS).map(|_| round(s)).unzip();
        let ps = |ns: f64| (ns * 1000.0).round() as u64;
        (ps(median(calls)), ps(median(returns)))
    })
}

/// Measures and writes the CALIBRATION events (`CALL`, `RETURN`) on the
/// calling thread. Called once, at VMInit, when calls are traced.
pub fn record(agent: &Agent, jni: Jni) {
    let (call_ps, return_ps) = measure();
    let time = clock::now_ns();
    with_state(agent, Some((jni, ptr::null_mut())), |s| {
        for (record, cost_ps) in [("CALL", call_ps), ("RETURN", return_ps)] {
            s.emit(
                agent,
                time,
                EventKind::Calibration {
                    record: record.to_string(),
                    cost_ps,
                },
            );
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_costs_something_but_not_a_millisecond() {
        clock::start(false);
        let (call, ret) = measure();
        assert!(call > 0 && ret > 0, "{call} ps, {ret} ps");
        assert!(
            call < 1_000_000_000 && ret < 1_000_000_000,
            "{call} ps, {ret} ps"
        );
    }
}
