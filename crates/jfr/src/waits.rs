//! Wait samples made from JFR's duration events, for the analyses that
//! need to see a thread wait.
//!
//! JFR's own samplers sample only threads that run Java code
//! (`jdk.ExecutionSample`) or native code (`jdk.NativeMethodSample`); a
//! thread parked in a queue's `take()`, sleeping, waiting on a monitor or
//! blocked entering one is never sampled. DYMON's reactions analysis finds
//! a handler by its loop *waiting* for the next event, so on a JDK
//! recording it misses every queue-fed handler. JFR does record those
//! waits, as duration events with the thread and its stack: this module
//! turns each into the samples a wall-clock sampler would have taken
//! during it, one per sampling period, at the recording's own period.
//!
//! Samples are placed on a grid of the period from the trace start (a
//! wait of 7 ms at a 10 ms period gets one sample seven times in ten), so
//! the expected count equals the time waited over the period whatever the
//! waits' lengths. A thread gets at most one sample per grid slot: a slot
//! within half a period of one of JFR's own samples of the thread (a
//! native sample inside a socket read) or already filled by another wait
//! event is left out. Samples are made for the part of a wait inside its
//! chunk only (so time order holds across chunks), at a period of at
//! least 1 ms, and at most [`MAX_PER_CHUNK`] per chunk (a few times as
//! many slots looked at), so time and memory stay bounded for a recording
//! of an idle application whose threads park for hours, or a damaged one.

use rustc_hash::{FxHashMap, FxHashSet};
use vmview_format::{StackId, ThreadRef, ThreadState};

/// Most wait samples made for one chunk; the rest are counted as dropped.
pub const MAX_PER_CHUNK: u64 = 500_000;

/// Most grid slots looked at for one chunk, samples made or not (slots
/// JFR sampled itself, waits that overlap): a damaged recording's waits
/// of centuries cost no more than this.
const MAX_SLOTS_PER_CHUNK: u64 = 4 * MAX_PER_CHUNK;

/// The shortest period samples are made at (JFR's own minimum).
pub const MIN_PERIOD_NS: u64 = 1_000_000;

/// The sampling period assumed when a recording says nothing about it
/// (JFR's `default` settings sample every 20 ms).
pub const DEFAULT_PERIOD_NS: u64 = 20_000_000;

/// The JFR events that say a thread was not running, and the state their
/// samples get.
pub const WAIT_EVENTS: [(&str, ThreadState); 8] = [
    ("jdk.ThreadPark", ThreadState::Wait),
    ("jdk.JavaMonitorWait", ThreadState::Wait),
    ("jdk.ThreadSleep", ThreadState::Sleep),
    ("jdk.JavaMonitorEnter", ThreadState::Blocked),
    ("jdk.SocketRead", ThreadState::Io),
    ("jdk.SocketWrite", ThreadState::Io),
    ("jdk.FileRead", ThreadState::Io),
    ("jdk.FileWrite", ThreadState::Io),
];

/// The index in [`WAIT_EVENTS`] of a JFR event type.
pub fn wait_event(name: &str) -> Option<usize> {
    WAIT_EVENTS.iter().position(|(n, _)| *n == name)
}

/// Where the sampling period came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PeriodSource {
    /// No period was needed yet.
    #[default]
    None,
    /// The recording's `jdk.ActiveSetting` for `jdk.ExecutionSample#period`.
    Setting,
    /// The median gap between a thread's consecutive execution samples.
    MedianGap,
    /// Neither: [`DEFAULT_PERIOD_NS`].
    Default,
}

impl PeriodSource {
    pub fn describe(self) -> &'static str {
        match self {
            PeriodSource::None => "none",
            PeriodSource::Setting => "jdk.ExecutionSample#period",
            PeriodSource::MedianGap => "median gap of the execution samples",
            PeriodSource::Default => "JFR's default period (no setting, too few samples)",
        }
    }
}

/// What was synthesized over the whole recording.
#[derive(Debug, Clone, Default)]
pub struct WaitSampleStats {
    /// The period of the last chunk that needed one, in ns.
    pub period_ns: u64,
    pub period_from: PeriodSource,
    /// Samples made, per [`WAIT_EVENTS`] entry.
    pub samples: [u64; WAIT_EVENTS.len()],
    /// Wait events seen, per [`WAIT_EVENTS`] entry (those without a stack,
    /// which give no samples, included).
    pub events: [u64; WAIT_EVENTS.len()],
    /// Grid slots left out because JFR sampled the thread there itself.
    pub covered: u64,
    /// Samples not made because a chunk reached [`MAX_PER_CHUNK`].
    pub dropped: u64,
}

impl WaitSampleStats {
    pub fn total(&self) -> u64 {
        self.samples.iter().sum()
    }
}

/// One wait of one thread, in ns since the trace start.
pub struct WaitSpan {
    pub start: u64,
    pub end: u64,
    pub thread: ThreadRef,
    pub stack: StackId,
    /// Index in [`WAIT_EVENTS`].
    pub event: usize,
}

/// The waits and samples of one chunk, gathered while its events are
/// mapped.
#[derive(Default)]
pub struct ChunkWaits {
    pub spans: Vec<WaitSpan>,
    /// JFR's own samples: thread and time.
    pub sampled: Vec<(ThreadRef, u64)>,
    /// Execution sample times per thread, for the median gap.
    pub execution: Vec<(ThreadRef, u64)>,
    /// The smallest `jdk.ExecutionSample#period` set in this chunk.
    pub setting_ns: Option<u64>,
}

/// A JFR setting's time span (`10 ms`, `20ms`, `1 s`, `500 us`) in ns;
/// `None` for anything else (`off`, `everyChunk`).
pub fn parse_span(value: &str) -> Option<u64> {
    let v = value.trim();
    let digits = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let n: u64 = v[..digits].parse().ok()?;
    let unit = match v[digits..].trim() {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        _ => return None,
    };
    n.checked_mul(unit).filter(|&ns| ns > 0)
}

/// The median gap between consecutive execution samples of a thread, if
/// there are any.
pub fn median_gap(execution: &mut [(ThreadRef, u64)]) -> Option<u64> {
    execution.sort_unstable_by_key(|&(t, time)| (t.0, time));
    let mut gaps: Vec<u64> = execution
        .windows(2)
        .filter(|w| w[0].0 == w[1].0 && w[1].1 > w[0].1)
        .map(|w| w[1].1 - w[0].1)
        .collect();
    if gaps.is_empty() {
        return None;
    }
    let mid = gaps.len() / 2;
    Some(*gaps.select_nth_unstable(mid).1)
}

/// The samples of a chunk's waits at `period` ns, none before
/// `chunk_start`: `(time, thread, state, stack)` each, counted in `stats`.
pub fn synthesize(
    w: &mut ChunkWaits,
    period: u64,
    chunk_start: u64,
    stats: &mut WaitSampleStats,
) -> Vec<(u64, ThreadRef, ThreadState, StackId)> {
    let period = period.max(MIN_PERIOD_NS);
    let mut sampled: FxHashMap<ThreadRef, Vec<u64>> = FxHashMap::default();
    for &(t, time) in &w.sampled {
        sampled.entry(t).or_default().push(time);
    }
    for times in sampled.values_mut() {
        times.sort_unstable();
    }
    let half = period / 2;
    let covered = |thread: ThreadRef, t: u64| -> bool {
        let Some(times) = sampled.get(&thread) else {
            return false;
        };
        let i = times.partition_point(|&x| x < t);
        let after = times.get(i).is_some_and(|&x| x - t < half);
        let before = i > 0 && t - times[i - 1] < half;
        after || before
    };
    let mut filled: FxHashSet<(ThreadRef, u64)> = FxHashSet::default();
    let mut out = Vec::new();
    let mut slots = 0u64;
    for s in &w.spans {
        let from = s.start.max(chunk_start);
        if from >= s.end {
            continue;
        }
        let mut t = from.div_ceil(period).saturating_mul(period);
        while t < s.end {
            if out.len() as u64 >= MAX_PER_CHUNK || slots >= MAX_SLOTS_PER_CHUNK {
                stats.dropped = stats.dropped.saturating_add((s.end - t).div_ceil(period));
                break;
            }
            slots += 1;
            let slot = t / period;
            if covered(s.thread, t) {
                stats.covered += 1;
            } else if filled.insert((s.thread, slot)) {
                out.push((t, s.thread, WAIT_EVENTS[s.event].1, s.stack));
                stats.samples[s.event] += 1;
            }
            t = match t.checked_add(period) {
                Some(n) => n,
                None => break,
            };
        }
    }
    w.spans.clear();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setting_spans_parse_as_jfr_writes_them() {
        assert_eq!(parse_span("10 ms"), Some(10_000_000));
        assert_eq!(parse_span("20ms"), Some(20_000_000));
        assert_eq!(parse_span("1 s"), Some(1_000_000_000));
        assert_eq!(parse_span("0 ms"), None);
        assert_eq!(parse_span("off"), None);
        assert_eq!(parse_span("everyChunk"), None);
    }

    fn span(start: u64, end: u64, thread: u32) -> WaitSpan {
        WaitSpan {
            start,
            end,
            thread: ThreadRef(thread),
            stack: StackId(0),
            event: 0,
        }
    }

    #[test]
    fn a_wait_gets_one_sample_per_grid_slot_it_covers() {
        let mut stats = WaitSampleStats::default();
        let mut w = ChunkWaits::default();
        // 25..95 ms at 10 ms: slots 30, 40, …, 90.
        w.spans.push(span(25_000_000, 95_000_000, 1));
        // Short waits: 7 ms from 101 ms holds no slot, from 108 ms one.
        w.spans.push(span(101_000_000, 108_000_000, 1));
        w.spans.push(span(108_000_000, 115_000_000, 1));
        let out = synthesize(&mut w, 10_000_000, 0, &mut stats);
        let times: Vec<u64> = out.iter().map(|s| s.0 / 1_000_000).collect();
        assert_eq!(times, [30, 40, 50, 60, 70, 80, 90, 110]);
        assert_eq!(stats.samples[0], 8);
    }

    #[test]
    fn slots_jfr_sampled_itself_or_before_the_chunk_are_left_out() {
        let mut stats = WaitSampleStats::default();
        let mut w = ChunkWaits::default();
        w.spans.push(span(0, 50_000_000, 1));
        // The same span twice (overlapping waits) fills each slot once.
        w.spans.push(span(0, 50_000_000, 1));
        // JFR's own sample at 21 ms covers the 20 ms slot.
        w.sampled.push((ThreadRef(1), 21_000_000));
        // Another thread's sample covers nothing of thread 1.
        w.sampled.push((ThreadRef(2), 30_000_000));
        let out = synthesize(&mut w, 10_000_000, 5_000_000, &mut stats);
        let times: Vec<u64> = out.iter().map(|s| s.0 / 1_000_000).collect();
        assert_eq!(times, [10, 30, 40]);
        assert_eq!(stats.covered, 2);
    }

    /// A damaged recording's waits of centuries, repeated: bounded work
    /// and memory, the rest counted as dropped (the fuzz target found no
    /// such file yet; this pins that it could not hang the reader).
    #[test]
    fn endless_waits_cost_a_bounded_number_of_slots() {
        let mut stats = WaitSampleStats::default();
        let mut w = ChunkWaits::default();
        for _ in 0..1000 {
            w.spans.push(span(0, u64::MAX / 2, 1));
        }
        let out = synthesize(&mut w, 1, 0, &mut stats);
        assert_eq!(out.len() as u64, MAX_PER_CHUNK);
        assert!(stats.dropped > 0);
    }

    #[test]
    fn the_median_gap_is_taken_per_thread() {
        let ms = |t: u32, x: u64| (ThreadRef(t), x * 1_000_000);
        let mut ex = vec![
            ms(1, 0),
            ms(2, 5),
            ms(1, 10),
            ms(2, 15),
            ms(1, 20),
            ms(1, 90),
        ];
        assert_eq!(median_gap(&mut ex), Some(10_000_000));
        assert_eq!(median_gap(&mut [ms(1, 3)]), None);
    }
}
