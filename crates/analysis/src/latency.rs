//! Per-handler latency from a `record --reactions` trace: DYMON's
//! "detailed analysis by instrumenting the handlers".
//!
//! The agent writes one REACTION_HANDLERS event when its warm-up ends and
//! from then on records CALL and RETURN of the handlers it chose. Each
//! RETURN carries the time since its CALL, so a handler's latencies are the
//! `elapsed_ns` of its RETURNs whose CALL came after the switch.
//!
//! Latencies go into a [`LatencyHistogram`] (log-linear buckets, 128 per
//! power of two, so a reported percentile is within 0.4% of the exact
//! nearest-rank value; count, sum, min and max are exact): memory is fixed
//! per handler, whatever the number of events.

use std::collections::HashMap;

use serde::Serialize;
use vmview_format::{Event, EventKind, MethodId, SymbolTable};

use crate::EventSink;

/// Sub-buckets per power of two, as a number of bits.
const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;
/// Values below this get a bucket each.
const EXACT: u64 = 2 * SUB;
/// Buckets for every u64: the exact ones, then 128 per power of two from
/// 2^8 to 2^63.
const BUCKETS: usize = EXACT as usize + (64 - SUB_BITS as usize - 1) * SUB as usize;

/// Latencies in nanoseconds, in log-linear buckets.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    buckets: Vec<u64>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            buckets: Vec::new(),
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

fn bucket_of(v: u64) -> usize {
    if v < EXACT {
        return v as usize;
    }
    let shift = 63 - v.leading_zeros() - SUB_BITS; // >= 1
    let sub = v >> shift; // in [SUB, 2 * SUB)
    EXACT as usize + (shift as usize - 1) * SUB as usize + (sub - SUB) as usize
}

/// The lowest value of bucket `i` and its width.
fn bucket_range(i: usize) -> (u64, u64) {
    if (i as u64) < EXACT {
        return (i as u64, 1);
    }
    let j = i - EXACT as usize;
    let shift = (j / SUB as usize) as u32 + 1;
    let sub = SUB + (j % SUB as usize) as u64;
    (sub << shift, 1 << shift)
}

impl LatencyHistogram {
    pub fn add(&mut self, ns: u64) {
        if self.buckets.is_empty() {
            self.buckets = vec![0; BUCKETS];
        }
        self.buckets[bucket_of(ns)] += 1;
        self.count += 1;
        self.sum += u128::from(ns);
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Exact mean, 0 when empty.
    pub fn mean(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            (self.sum / u128::from(self.count)) as u64
        }
    }

    /// Exact maximum, 0 when empty.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The nearest-rank `q` quantile (0 < q <= 1: the value at rank
    /// ceil(q × count)), as the middle of its bucket clamped to the exact
    /// min and max; 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let (low, width) = bucket_range(i);
                return (low + (width - 1) / 2).clamp(self.min, self.max);
            }
        }
        self.max
    }
}

/// What the agent decided at the end of the warm-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimingStatus {
    /// The trace was not recorded with `reactions`.
    NotRequested,
    /// Recorded with `reactions`, but the program ended before the warm-up
    /// did: no REACTION_HANDLERS event.
    EndedBeforeWarmup,
    /// The warm-up ended; `handlers` may be empty (none found).
    Chosen,
}

/// One timed handler.
#[derive(Debug, Clone)]
pub struct TimedHandler {
    pub method: MethodId,
    pub latency: LatencyHistogram,
}

/// The per-handler latencies of a trace.
#[derive(Debug, Clone)]
pub struct HandlerTiming {
    pub status: TimingStatus,
    /// When the handlers were chosen (the REACTION_HANDLERS event).
    pub chosen_ns: u64,
    /// Thread samples the agent's detection saw.
    pub samples: u64,
    /// In the agent's order.
    pub handlers: Vec<TimedHandler>,
    /// Found but not instrumented.
    pub skipped: Vec<MethodId>,
    /// Time of the trace's last event.
    pub last_ns: u64,
}

impl HandlerTiming {
    /// The timing of `method`, if it was timed.
    pub fn of(&self, method: MethodId) -> Option<&LatencyHistogram> {
        self.handlers
            .iter()
            .find(|h| h.method == method)
            .map(|h| &h.latency)
    }
}

/// Collects handler latencies: feed it every event, then [`finish`].
///
/// [`finish`]: HandlerLatency::finish
pub struct HandlerLatency {
    requested: bool,
    chosen: Option<(u64, u64)>,
    handlers: Vec<TimedHandler>,
    index: HashMap<MethodId, usize>,
    skipped: Vec<MethodId>,
    last_ns: u64,
}

impl HandlerLatency {
    /// `requested`: the trace was recorded with `reactions` (its header
    /// has the `reactions_after` property).
    pub fn new(requested: bool) -> Self {
        HandlerLatency {
            requested,
            chosen: None,
            handlers: Vec::new(),
            index: HashMap::new(),
            skipped: Vec::new(),
            last_ns: 0,
        }
    }

    pub fn finish(self) -> HandlerTiming {
        let (status, (chosen_ns, samples)) = match (self.chosen, self.requested) {
            (Some(c), _) => (TimingStatus::Chosen, c),
            (None, true) => (TimingStatus::EndedBeforeWarmup, (0, 0)),
            (None, false) => (TimingStatus::NotRequested, (0, 0)),
        };
        HandlerTiming {
            status,
            chosen_ns,
            samples,
            handlers: self.handlers,
            skipped: self.skipped,
            last_ns: self.last_ns,
        }
    }
}

impl EventSink for HandlerLatency {
    fn event(&mut self, ev: &Event, _syms: &SymbolTable) {
        self.last_ns = self.last_ns.max(ev.time_ns);
        match &ev.kind {
            EventKind::ReactionHandlers {
                samples,
                handlers,
                skipped,
            } if self.chosen.is_none() => {
                self.chosen = Some((ev.time_ns, *samples));
                for m in handlers {
                    self.index.entry(*m).or_insert_with(|| {
                        self.handlers.push(TimedHandler {
                            method: *m,
                            latency: LatencyHistogram::default(),
                        });
                        self.handlers.len() - 1
                    });
                }
                self.skipped = skipped.clone();
            }
            EventKind::Return {
                method, elapsed_ns, ..
            } => {
                let Some((chosen_ns, _)) = self.chosen else {
                    return;
                };
                // Calls entered before the switch (a handler also traced
                // with --classes) are not the instrumented ones.
                if ev.time_ns.saturating_sub(*elapsed_ns) < chosen_ns {
                    return;
                }
                if let Some(&i) = self.index.get(method) {
                    self.handlers[i].latency.add(*elapsed_ns);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmview_format::{Metrics, Outcome, ThreadRef};

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut last = 0;
        for v in (0..5000u64).chain([1 << 20, (1 << 20) + 1, u64::MAX / 3, u64::MAX]) {
            let b = bucket_of(v);
            assert!(b < BUCKETS, "{v}");
            assert!(b >= last, "{v}");
            last = b;
            let (low, width) = bucket_range(b);
            assert!(low <= v && v - low < width, "{v} in [{low}, +{width})");
        }
    }

    /// Nearest rank over a sorted list, as the fixture computes it.
    fn exact(sorted: &[u64], q: f64) -> u64 {
        let rank = ((q * sorted.len() as f64).ceil() as usize).max(1);
        sorted[rank - 1]
    }

    #[test]
    fn quantiles_are_within_half_a_bucket_of_nearest_rank() {
        let mut h = LatencyHistogram::default();
        let mut values: Vec<u64> = (0..10_000u64)
            .map(|i| 300_000 + (i * 7919 % 10_000) * 1_171)
            .collect();
        for v in &values {
            h.add(*v);
        }
        values.sort_unstable();
        for q in [0.5, 0.9, 0.99, 1.0] {
            let (got, want) = (h.quantile(q) as f64, exact(&values, q) as f64);
            assert!((got - want).abs() <= want / 256.0, "q {q}: {got} vs {want}");
        }
        assert_eq!(h.count(), 10_000);
        assert_eq!(h.max(), *values.last().unwrap());
        let mean = values.iter().sum::<u64>() / values.len() as u64;
        assert_eq!(h.mean(), mean);
        assert_eq!(LatencyHistogram::default().quantile(0.5), 0);
        let mut one = LatencyHistogram::default();
        one.add(1_234_567);
        assert_eq!(one.quantile(0.99), 1_234_567, "clamped to the exact value");
    }

    fn ev(time_ns: u64, kind: EventKind) -> Event {
        Event {
            id: time_ns,
            time_ns,
            thread: ThreadRef(1),
            kind,
        }
    }

    fn ret(time_ns: u64, method: MethodId, elapsed_ns: u64) -> Event {
        ev(
            time_ns,
            EventKind::Return {
                method,
                depth: 3,
                outcome: Outcome::Void,
                elapsed_ns,
                metrics: Metrics::NONE,
            },
        )
    }

    #[test]
    fn only_returns_of_chosen_handlers_after_the_switch_count() {
        let (h, other) = (MethodId(4), MethodId(5));
        let syms = SymbolTable::default();
        let mut l = HandlerLatency::new(true);
        for e in [
            ret(50, h, 10),
            ev(
                100,
                EventKind::ReactionHandlers {
                    samples: 77,
                    handlers: vec![h],
                    skipped: vec![other],
                },
            ),
            ret(105, h, 10), // entered before the switch
            ret(200, h, 40),
            ret(300, h, 60),
            ret(310, other, 5),
        ] {
            l.event(&e, &syms);
        }
        let t = l.finish();
        assert_eq!(t.status, TimingStatus::Chosen);
        assert_eq!((t.chosen_ns, t.samples, t.last_ns), (100, 77, 310));
        assert_eq!(t.skipped, vec![other]);
        let lat = t.of(h).expect("timed");
        assert_eq!((lat.count(), lat.mean(), lat.max()), (2, 50, 60));
        assert!(t.of(other).is_none());
    }

    #[test]
    fn a_reactions_trace_without_the_switch_ended_in_the_warmup() {
        let syms = SymbolTable::default();
        let mut l = HandlerLatency::new(true);
        l.event(&ret(10, MethodId(1), 5), &syms);
        assert_eq!(l.finish().status, TimingStatus::EndedBeforeWarmup);
        assert_eq!(
            HandlerLatency::new(false).finish().status,
            TimingStatus::NotRequested
        );
    }
}

/// A histogram's summary as the reports serialize it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LatencySummary {
    pub events: u64,
    pub mean_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

impl From<&LatencyHistogram> for LatencySummary {
    fn from(h: &LatencyHistogram) -> Self {
        LatencySummary {
            events: h.count(),
            mean_ns: h.mean(),
            p50_ns: h.quantile(0.50),
            p90_ns: h.quantile(0.90),
            p99_ns: h.quantile(0.99),
            max_ns: h.max(),
        }
    }
}
