//! Lock contention per monitor: who waited, how long, how much of that was
//! really a garbage collection, and who held the monitor meanwhile.
//!
//! A contended acquisition is a MONITOR_CONTENDED_ENTER (the thread blocks;
//! the agent names the owner when it can) followed on the same thread by
//! MONITOR_CONTENDED_ENTERED (it got the monitor after `wait_ns`). A wait
//! that overlaps a GC pause (GC_START … GC_FINISH) was partly the pause,
//! not the lock: the GC-corrected wait subtracts the overlap. Pauses come
//! from a first pass over the trace ([`GcPauses`]) because the events of
//! different threads are not strictly in time order in a trace.
//!
//! Memory grows with the number of monitors, threads and GC pauses, not
//! with the number of events.

use std::collections::{BTreeSet, HashMap};

use serde::ser::{SerializeStruct, Serializer};
use serde::Serialize;
use vmview_format::{Event, EventKind, Monitor, SymbolTable, ThreadRef};

use crate::EventSink;

/// Collects the GC pauses of a trace as `[start, end]` ns intervals.
#[derive(Debug, Default)]
pub struct GcPauses {
    open: Option<u64>,
    pauses: Vec<(u64, u64)>,
}

impl EventSink for GcPauses {
    fn event(&mut self, ev: &Event, _syms: &SymbolTable) {
        match ev.kind {
            EventKind::GcStart => self.open = Some(ev.time_ns),
            EventKind::GcFinish { duration_ns } => {
                let start = self
                    .open
                    .take()
                    .unwrap_or_else(|| ev.time_ns.saturating_sub(duration_ns));
                self.pauses.push((start.min(ev.time_ns), ev.time_ns));
            }
            _ => {}
        }
    }
}

impl GcPauses {
    /// The pauses, sorted and merged where they overlap.
    pub fn finish(mut self) -> Vec<(u64, u64)> {
        self.pauses.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(self.pauses.len());
        for (s, e) in self.pauses {
            match out.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => out.push((s, e)),
            }
        }
        out
    }
}

/// How long `[start, end]` overlaps the (sorted, disjoint) pauses.
pub fn overlap_ns(pauses: &[(u64, u64)], start: u64, end: u64) -> u64 {
    let first = pauses.partition_point(|p| p.1 <= start);
    pauses[first..]
        .iter()
        .take_while(|p| p.0 < end)
        .map(|p| end.min(p.1).saturating_sub(start.max(p.0)))
        .sum()
}

/// Wait statistics; serialized with the derived `mean_ns` as well.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Waits {
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

impl Waits {
    fn add(&mut self, ns: u64) {
        self.count += 1;
        self.total_ns = self.total_ns.saturating_add(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    pub fn mean_ns(&self) -> u64 {
        self.total_ns.checked_div(self.count).unwrap_or(0)
    }
}

impl Serialize for Waits {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_struct("Waits", 4)?;
        m.serialize_field("count", &self.count)?;
        m.serialize_field("total_ns", &self.total_ns)?;
        m.serialize_field("mean_ns", &self.mean_ns())?;
        m.serialize_field("max_ns", &self.max_ns)?;
        m.end()
    }
}

/// One thread that held a monitor while others blocked on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Holder {
    /// Thread name; `unknown` when the agent could not tell.
    #[serde(rename = "thread")]
    pub name: String,
    /// Contended acquisitions that waited for this holder.
    pub blocked: u64,
    /// Their total wait.
    pub wait_ns: u64,
}

/// Contention on one monitor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MonitorLocks {
    /// `class@hash`, hash in lowercase hex.
    pub monitor: String,
    /// Names of the threads that blocked on it, sorted.
    pub threads: Vec<String>,
    /// The waits as measured.
    #[serde(rename = "wait")]
    pub waits: Waits,
    /// The same waits less their overlap with GC pauses.
    #[serde(rename = "wait_without_gc")]
    pub gc_corrected: Waits,
    /// Total overlap of the waits with GC pauses.
    pub gc_overlap_ns: u64,
    /// Who held it, most wait caused first.
    pub holders: Vec<Holder>,
}

/// The `vmview locks` report; its serialized form is the body of
/// `vmview locks --format json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LockReport {
    /// Monitors with at least one contended acquisition, most waited-on first.
    pub monitors: Vec<MonitorLocks>,
    /// GC pauses in the trace and their total length.
    pub gc_pauses: u64,
    pub gc_total_ns: u64,
}

#[derive(Default)]
struct Acc {
    threads: BTreeSet<ThreadRef>,
    waits: Waits,
    corrected: Waits,
    overlap: u64,
    holders: HashMap<Option<ThreadRef>, (u64, u64)>,
}

/// Builds a [`LockReport`] (see the module docs).
pub struct LocksBuilder {
    pauses: Vec<(u64, u64)>,
    monitors: HashMap<Monitor, Acc>,
    /// Per blocked thread: the monitor and the owner its ENTER named.
    pending: HashMap<ThreadRef, (Monitor, Option<ThreadRef>)>,
    names: HashMap<ThreadRef, String>,
}

impl LocksBuilder {
    /// `pauses` from [`GcPauses::finish`] over the same trace.
    pub fn new(pauses: Vec<(u64, u64)>) -> LocksBuilder {
        LocksBuilder {
            pauses,
            monitors: HashMap::new(),
            pending: HashMap::new(),
            names: HashMap::new(),
        }
    }

    fn name(&mut self, t: ThreadRef, syms: &SymbolTable) {
        self.names.entry(t).or_insert_with(|| syms.thread_name(t));
    }

    pub fn finish(self, syms: &SymbolTable) -> LockReport {
        let name = |t: &ThreadRef| {
            self.names
                .get(t)
                .cloned()
                .unwrap_or_else(|| syms.thread_name(*t))
        };
        let mut monitors: Vec<MonitorLocks> = self
            .monitors
            .iter()
            .filter(|(_, a)| a.waits.count > 0)
            .map(|(m, a)| {
                let mut threads: Vec<String> = a.threads.iter().map(name).collect();
                threads.sort();
                threads.dedup();
                let mut holders: Vec<Holder> = a
                    .holders
                    .iter()
                    .map(|(t, (n, w))| Holder {
                        name: t.as_ref().map_or_else(|| "unknown".to_string(), name),
                        blocked: *n,
                        wait_ns: *w,
                    })
                    .collect();
                holders.sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(a.name.cmp(&b.name)));
                MonitorLocks {
                    monitor: format!("{}@{:x}", syms.string(m.class), m.hash),
                    threads,
                    waits: a.waits,
                    gc_corrected: a.corrected,
                    gc_overlap_ns: a.overlap,
                    holders,
                }
            })
            .collect();
        monitors.sort_by(|a, b| {
            b.waits
                .total_ns
                .cmp(&a.waits.total_ns)
                .then(a.monitor.cmp(&b.monitor))
        });
        LockReport {
            monitors,
            gc_pauses: self.pauses.len() as u64,
            gc_total_ns: self.pauses.iter().map(|p| p.1 - p.0).sum(),
        }
    }
}

impl EventSink for LocksBuilder {
    fn event(&mut self, ev: &Event, syms: &SymbolTable) {
        match &ev.kind {
            EventKind::MonitorContendedEnter { monitor, owner } => {
                self.name(ev.thread, syms);
                if let Some(o) = owner {
                    self.name(*o, syms);
                }
                self.pending.insert(ev.thread, (*monitor, *owner));
            }
            EventKind::MonitorContendedEntered { monitor, wait_ns } => {
                self.name(ev.thread, syms);
                let owner = match self.pending.remove(&ev.thread) {
                    Some((m, o)) if m == *monitor => o,
                    _ => None,
                };
                let start = ev.time_ns.saturating_sub(*wait_ns);
                let overlap = overlap_ns(&self.pauses, start, ev.time_ns).min(*wait_ns);
                let a = self.monitors.entry(*monitor).or_default();
                a.threads.insert(ev.thread);
                a.waits.add(*wait_ns);
                a.corrected.add(wait_ns - overlap);
                a.overlap += overlap;
                let h = a.holders.entry(owner).or_default();
                h.0 += 1;
                h.1 = h.1.saturating_add(*wait_ns);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_counts_only_the_shared_part() {
        let p = [(10, 20), (30, 40), (50, 60)];
        assert_eq!(overlap_ns(&p, 0, 5), 0);
        assert_eq!(overlap_ns(&p, 15, 35), 5 + 5);
        assert_eq!(overlap_ns(&p, 0, 100), 30);
        assert_eq!(overlap_ns(&p, 20, 30), 0);
        assert_eq!(overlap_ns(&p, 55, 58), 3);
    }

    #[test]
    fn pauses_merge_and_fall_back_to_the_duration() {
        let mut g = GcPauses::default();
        let syms = SymbolTable::default();
        let ev = |t, kind| Event {
            id: 0,
            time_ns: t,
            thread: ThreadRef(0),
            kind,
        };
        g.event(&ev(100, EventKind::GcStart), &syms);
        g.event(&ev(150, EventKind::GcFinish { duration_ns: 50 }), &syms);
        // No GC_START (filtered out): the duration says where it began.
        g.event(&ev(400, EventKind::GcFinish { duration_ns: 100 }), &syms);
        g.event(&ev(140, EventKind::GcStart), &syms);
        g.event(&ev(160, EventKind::GcFinish { duration_ns: 20 }), &syms);
        assert_eq!(g.finish(), vec![(100, 160), (300, 400)]);
    }
}
