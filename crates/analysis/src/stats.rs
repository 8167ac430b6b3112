//! Trace statistics: the numbers `vmview stats` prints.
//!
//! [`StatsBuilder`] is fed events one by one and keeps only per-handle
//! accumulators (per method, thread, exception class, monitor), so memory
//! grows with the number of distinct methods and threads, not with the
//! length of the trace. [`StatsBuilder::finish`] resolves names and sorts.
//!
//! Method times come from CALL/RETURN pairs: *total* time is the sum of the
//! `elapsed_ns` of a method's RETURNs; *self* time subtracts the elapsed
//! time of the traced methods it called directly (untraced callees stay in
//! the caller's self time). Calls and returns are matched per thread by
//! method and depth; when events were dropped a RETURN can lack its CALL,
//! and then its whole elapsed time counts as self time.

use rustc_hash::FxHashMap as HashMap;
use serde::ser::{SerializeStruct, Serializer};
use serde::Serialize;

use vmview_format::{
    Event, EventKind, MethodId, StringId, SymbolTable, ThreadRef, EVENT_TYPE_NAMES,
};

use crate::EventSink;

/// Statistics over a whole trace (or a filtered part of one).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceStats {
    /// Number of events seen.
    pub events: u64,
    /// Time of the first and of the last event, ns since trace start.
    pub first_time_ns: Option<u64>,
    pub last_time_ns: Option<u64>,
    /// Events per type, in the order of [`EVENT_TYPE_NAMES`], types with no
    /// events left out.
    pub events_by_type: Vec<(&'static str, u64)>,
    /// Threads, most events first.
    pub threads: Vec<ThreadStats>,
    /// Every method with a CALL or RETURN, most calls first.
    pub methods: Vec<MethodStats>,
    /// Exception classes thrown, most thrown first.
    pub exceptions: Vec<ExceptionStats>,
    /// Contended monitors, longest total wait first.
    pub monitors: Vec<MonitorStats>,
    /// Garbage collections finished and their total duration.
    pub gc_count: u64,
    pub gc_total_ns: u64,
    /// Events the agent dropped: the sum of the DROPPED records' counts.
    pub dropped: u64,
    /// The overhead budget's reports (METHOD_COUNTS events), and the
    /// estimate of the last one, basis points: the budget's estimate of
    /// the tracer's overhead over the whole recording.
    pub budget_reports: u64,
    pub budget_bp: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadStats {
    pub name: String,
    pub events: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MethodStats {
    /// Dotted class name, method name and JVM descriptor (`?` when the
    /// trace lost the method's symbol).
    pub class: String,
    #[serde(rename = "method")]
    pub name: String,
    pub sig: String,
    /// CALL events.
    pub calls: u64,
    /// RETURN events, normal or by an exception.
    pub returns: u64,
    /// RETURNs caused by an exception unwinding the frame.
    pub exceptional_returns: u64,
    /// Sum of the RETURNs' elapsed time.
    pub total_ns: u64,
    /// Total time less the time spent in traced methods called directly.
    pub self_ns: u64,
    /// Demoted by the overhead budget (a DEMOTION event): its later calls
    /// were counted, not traced, and their time is in their callers'.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub demoted: bool,
    /// Calls counted (not traced) after the demotion: the last
    /// METHOD_COUNTS total.
    #[serde(skip_serializing_if = "is_zero")]
    pub counted: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExceptionStats {
    /// Dotted class name of the exception.
    pub class: String,
    /// THROW events.
    pub thrown: u64,
    /// Of those, the ones with a catch site.
    pub caught: u64,
    /// Of those, the ones nothing caught.
    pub uncaught: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonitorStats {
    /// Dotted class name of the monitor object.
    pub class: String,
    /// Its identity hash (shown in hex, `class@hash`).
    pub hash: u32,
    /// Times a thread blocked on it because another thread held it.
    pub contentions: u64,
    /// Sum and maximum of the waits until the blocked thread got it.
    pub total_wait_ns: u64,
    pub max_wait_ns: u64,
}

/// Serialized as `{monitor: "class@hash", contentions, total_wait_ns,
/// max_wait_ns}`, the shape of `vmview stats --format json` and the
/// browser view's locks.
impl Serialize for MonitorStats {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_struct("MonitorStats", 4)?;
        m.serialize_field("monitor", &format!("{}@{:x}", self.class, self.hash))?;
        m.serialize_field("contentions", &self.contentions)?;
        m.serialize_field("total_wait_ns", &self.total_wait_ns)?;
        m.serialize_field("max_wait_ns", &self.max_wait_ns)?;
        m.end()
    }
}

impl TraceStats {
    /// Computes the statistics of a whole event stream.
    pub fn from_events<'a>(
        events: impl IntoIterator<Item = &'a Event>,
        syms: &SymbolTable,
    ) -> Self {
        let mut b = StatsBuilder::new();
        for ev in events {
            b.event(ev, syms);
        }
        b.finish()
    }

    /// Time of the last event since the trace started.
    pub fn duration_ns(&self) -> u64 {
        self.last_time_ns.unwrap_or(0)
    }

    /// The `n` methods called most often.
    pub fn top_methods_by_calls(&self, n: usize) -> Vec<&MethodStats> {
        self.top_methods(n, |m| m.calls)
    }

    /// The `n` methods with the most total (inclusive) time.
    pub fn top_methods_by_total_time(&self, n: usize) -> Vec<&MethodStats> {
        self.top_methods(n, |m| m.total_ns)
    }

    /// The `n` methods with the most self (exclusive) time.
    pub fn top_methods_by_self_time(&self, n: usize) -> Vec<&MethodStats> {
        self.top_methods(n, |m| m.self_ns)
    }

    fn top_methods(&self, n: usize, key: impl Fn(&MethodStats) -> u64) -> Vec<&MethodStats> {
        let mut v: Vec<&MethodStats> = self.methods.iter().filter(|m| key(m) > 0).collect();
        // Stable sort: ties keep the order of `methods`.
        v.sort_by_key(|m| std::cmp::Reverse(key(m)));
        v.truncate(n);
        v
    }
}

/// Accumulates [`TraceStats`] from a stream of events.
#[derive(Debug, Default)]
pub struct StatsBuilder {
    events: u64,
    first_time_ns: Option<u64>,
    last_time_ns: Option<u64>,
    by_type: [u64; EVENT_TYPE_NAMES.len()],
    threads: HashMap<ThreadRef, ThreadAcc>,
    methods: HashMap<MethodId, MethodAcc>,
    exceptions: HashMap<StringId, ExceptionAcc>,
    monitors: HashMap<(StringId, u32), MonitorAcc>,
    gc_count: u64,
    gc_total_ns: u64,
    dropped: u64,
    budget_reports: u64,
    /// The last METHOD_COUNTS' time and estimate.
    budget_last: Option<(u64, u64)>,
    /// The thread of `budget_last`'s event, and whether another thread had
    /// one at the same time (see [`StatsBuilder::depends_on_thread_order`]).
    budget_thread: Option<ThreadRef>,
    budget_tied: bool,
    /// A partial builder ([`StatsBuilder::partial`]): the threads' stacks
    /// are only what this part of the trace opened, and what needs the
    /// frames opened before it is deferred to [`StatsBuilder::merge`].
    partial: bool,
}

#[derive(Debug, Default)]
struct ThreadAcc {
    /// `None` until the thread's symbol is known.
    name: Option<String>,
    events: u64,
    /// Traced frames on the stack: the open CALLs.
    stack: Vec<Frame>,
    /// In a partial builder: what the thread's events do to the frames
    /// opened before this part, in order (see [`StackOp`]).
    deferred: Vec<StackOp>,
}

/// A step of the self-time bookkeeping that a partial builder cannot take
/// because it needs frames opened in an earlier part of the trace; the
/// merge takes it on the real stack, in order.
#[derive(Debug)]
enum StackOp {
    /// A frame of this part, under which a later op reaches.
    Push(Frame),
    /// A CALL at this depth found no frame of its part to pop: pop the
    /// earlier frames at this depth or deeper.
    PopGe(u32),
    /// A RETURN's elapsed time goes to the earlier frame on top.
    AddChild(u64),
    /// A RETURN whose CALL is not in this part.
    Return {
        method: MethodId,
        depth: u32,
        elapsed_ns: u64,
    },
}

#[derive(Debug)]
struct Frame {
    method: MethodId,
    depth: u32,
    /// Elapsed time of traced callees that returned.
    child_ns: u64,
}

#[derive(Debug, Default)]
struct MethodAcc {
    names: Option<(String, String, String)>,
    calls: u64,
    returns: u64,
    exceptional_returns: u64,
    total_ns: u64,
    self_ns: u64,
    demoted: bool,
    counted: u64,
}

#[derive(Debug, Default)]
struct ExceptionAcc {
    name: Option<String>,
    thrown: u64,
    caught: u64,
    uncaught: u64,
}

#[derive(Debug, Default)]
struct MonitorAcc {
    class: Option<String>,
    enters: u64,
    entereds: u64,
    total_wait_ns: u64,
    max_wait_ns: u64,
}

impl EventSink for StatsBuilder {
    fn event(&mut self, ev: &Event, syms: &SymbolTable) {
        self.events += 1;
        self.first_time_ns = Some(self.first_time_ns.map_or(ev.time_ns, |t| t.min(ev.time_ns)));
        self.last_time_ns = Some(self.last_time_ns.map_or(ev.time_ns, |t| t.max(ev.time_ns)));
        if let Some(n) = self.by_type.get_mut(ev.kind.type_index()) {
            *n += 1;
        }
        let thread = self.threads.entry(ev.thread).or_default();
        thread.events += 1;
        if thread.name.is_none() && syms.thread(ev.thread).is_some() {
            thread.name = Some(syms.thread_name(ev.thread));
        }

        match &ev.kind {
            EventKind::Call { method, depth, .. } => {
                // Frames at this depth or deeper never returned (lost RETURNs).
                while thread.stack.last().is_some_and(|f| f.depth >= *depth) {
                    thread.stack.pop();
                }
                if self.partial && thread.stack.is_empty() {
                    defer_pop(&mut thread.deferred, *depth);
                }
                thread.stack.push(Frame {
                    method: *method,
                    depth: *depth,
                    child_ns: 0,
                });
                method_acc(&mut self.methods, *method, syms).calls += 1;
            }
            EventKind::Return {
                method,
                depth,
                outcome,
                elapsed_ns,
                ..
            } => {
                let stack = &mut thread.stack;
                let found = stack
                    .iter()
                    .rposition(|f| f.method == *method && f.depth == *depth);
                let child_ns = match found {
                    Some(i) => {
                        let child_ns = stack[i].child_ns;
                        stack.truncate(i);
                        Some(child_ns)
                    }
                    None if self.partial => {
                        // Its CALL may be in an earlier part: the merge
                        // decides, on the frames below these.
                        thread.deferred.extend(stack.drain(..).map(StackOp::Push));
                        thread.deferred.push(StackOp::Return {
                            method: *method,
                            depth: *depth,
                            elapsed_ns: *elapsed_ns,
                        });
                        None
                    }
                    None => {
                        while stack.last().is_some_and(|f| f.depth >= *depth) {
                            stack.pop();
                        }
                        Some(0)
                    }
                };
                if child_ns.is_some() {
                    match stack.last_mut() {
                        Some(parent) => {
                            parent.child_ns = parent.child_ns.saturating_add(*elapsed_ns)
                        }
                        None if self.partial => defer_child(&mut thread.deferred, *elapsed_ns),
                        None => {}
                    }
                }
                let m = method_acc(&mut self.methods, *method, syms);
                m.returns += 1;
                if matches!(outcome, vmview_format::Outcome::Exception { .. }) {
                    m.exceptional_returns += 1;
                }
                m.total_ns = m.total_ns.saturating_add(*elapsed_ns);
                if let Some(child_ns) = child_ns {
                    m.self_ns = m
                        .self_ns
                        .saturating_add(elapsed_ns.saturating_sub(child_ns));
                }
            }
            EventKind::Throw {
                exception, catch, ..
            } => {
                let e = self.exceptions.entry(*exception).or_default();
                if e.name.is_none() {
                    e.name = known(syms, *exception);
                }
                e.thrown += 1;
                if catch.is_some() {
                    e.caught += 1;
                } else {
                    e.uncaught += 1;
                }
            }
            EventKind::MonitorContendedEnter { monitor, .. } => {
                monitor_acc(&mut self.monitors, monitor, syms).enters += 1;
            }
            EventKind::MonitorContendedEntered { monitor, wait_ns } => {
                let m = monitor_acc(&mut self.monitors, monitor, syms);
                m.entereds += 1;
                m.total_wait_ns = m.total_wait_ns.saturating_add(*wait_ns);
                m.max_wait_ns = m.max_wait_ns.max(*wait_ns);
            }
            EventKind::GcFinish { duration_ns } => {
                self.gc_count += 1;
                self.gc_total_ns = self.gc_total_ns.saturating_add(*duration_ns);
            }
            EventKind::Dropped { count } => self.dropped = self.dropped.saturating_add(*count),
            EventKind::Demotion { method, .. } => {
                method_acc(&mut self.methods, *method, syms).demoted = true;
            }
            EventKind::MethodCounts {
                counts,
                overhead_bp,
            } => {
                self.budget_reports += 1;
                if self.budget_last.is_none_or(|(t, _)| t <= ev.time_ns) {
                    let tie = self.budget_last.is_some_and(|(t, _)| t == ev.time_ns);
                    self.budget_tied =
                        tie && (self.budget_tied || self.budget_thread != Some(ev.thread));
                    self.budget_thread = Some(ev.thread);
                    self.budget_last = Some((ev.time_ns, *overhead_bp));
                }
                // Running totals: the largest is the latest.
                for (method, n) in counts {
                    let m = method_acc(&mut self.methods, *method, syms);
                    m.demoted = true;
                    m.counted = m.counted.max(*n);
                }
            }
            // Every other kind is counted by type above and nothing more:
            // a new kind changes these statistics only when it should.
            _ => {}
        }
    }
}

/// Defers "pop the earlier frames at `depth` or deeper", folded into the
/// ops before it where that changes nothing: after a `PopGe(a)` every
/// frame left is shallower than `a` (and `AddChild` moves no frame), so a
/// later `PopGe(b)` with `b >= a` pops nothing, and one with `b < a` pops
/// what `PopGe(b)` alone would. A partial builder thus keeps a couple of
/// ops per thread for a chunk of calls at its threads' base depth, not two
/// per call.
fn defer_pop(ops: &mut Vec<StackOp>, depth: u32) {
    match ops.as_mut_slice() {
        [.., StackOp::PopGe(a)] => *a = (*a).min(depth),
        [.., StackOp::PopGe(a), StackOp::AddChild(_)] if depth >= *a => {}
        _ => ops.push(StackOp::PopGe(depth)),
    }
}

/// Defers "add `ns` to the earlier frame on top", summed with an
/// `AddChild` just before it (same frame; saturating sums agree).
fn defer_child(ops: &mut Vec<StackOp>, ns: u64) {
    match ops.last_mut() {
        Some(StackOp::AddChild(x)) => *x = x.saturating_add(ns),
        _ => ops.push(StackOp::AddChild(ns)),
    }
}

/// The string, or `None` when the trace has not defined it (yet).
fn known(syms: &SymbolTable, id: StringId) -> Option<String> {
    let s = syms.string(id);
    (s != "?").then(|| s.to_string())
}

#[inline]
fn method_acc<'m>(
    methods: &'m mut HashMap<MethodId, MethodAcc>,
    id: MethodId,
    syms: &SymbolTable,
) -> &'m mut MethodAcc {
    let m = methods.entry(id).or_default();
    if m.names.is_none() {
        if let Some(sym) = syms.method(id) {
            m.names = Some((
                syms.string(sym.class).to_string(),
                syms.string(sym.name).to_string(),
                syms.string(sym.sig).to_string(),
            ));
        }
    }
    m
}

fn monitor_acc<'m>(
    monitors: &'m mut HashMap<(StringId, u32), MonitorAcc>,
    monitor: &vmview_format::Monitor,
    syms: &SymbolTable,
) -> &'m mut MonitorAcc {
    let m = monitors.entry((monitor.class, monitor.hash)).or_default();
    if m.class.is_none() {
        m.class = known(syms, monitor.class);
    }
    m
}

impl StatsBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// A builder for one part of a trace (a chunk), to be folded into the
    /// builder of everything before it with [`merge`](Self::merge). Parts
    /// can be built concurrently: what depends on the calls still open
    /// when the part starts is deferred to the merge, so merging the parts
    /// in trace order gives exactly what one builder fed every event gives.
    pub fn partial() -> Self {
        StatsBuilder {
            partial: true,
            ..Self::default()
        }
    }

    /// Whether these statistics could differ had the same events come in
    /// another order across threads (each thread's own events in the same
    /// order): only when the latest budget estimate is a tie between
    /// threads. A builder fed a chunk's events thread by thread
    /// (`ChunkFile::for_each_event_by_thread`) is exact unless this says
    /// otherwise.
    pub fn depends_on_thread_order(&self) -> bool {
        self.budget_tied
    }

    /// Adds `part` (a [`partial`](Self::partial) builder of the events
    /// that follow this builder's) to this one.
    pub fn merge(&mut self, part: StatsBuilder) {
        self.events += part.events;
        self.first_time_ns = match (self.first_time_ns, part.first_time_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_time_ns = match (self.last_time_ns, part.last_time_ns) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        for (n, m) in self.by_type.iter_mut().zip(part.by_type) {
            *n += m;
        }
        for (id, m) in part.methods {
            let acc = self.methods.entry(id).or_default();
            if acc.names.is_none() {
                acc.names = m.names;
            }
            acc.calls += m.calls;
            acc.returns += m.returns;
            acc.exceptional_returns += m.exceptional_returns;
            acc.total_ns = acc.total_ns.saturating_add(m.total_ns);
            acc.self_ns = acc.self_ns.saturating_add(m.self_ns);
            acc.demoted |= m.demoted;
            acc.counted = acc.counted.max(m.counted);
        }
        for (id, t) in part.threads {
            let acc = self.threads.entry(id).or_default();
            if acc.name.is_none() {
                acc.name = t.name;
            }
            acc.events += t.events;
            let stack = &mut acc.stack;
            for op in t.deferred {
                match op {
                    StackOp::Push(f) => stack.push(f),
                    StackOp::PopGe(depth) => {
                        while stack.last().is_some_and(|f| f.depth >= depth) {
                            stack.pop();
                        }
                    }
                    StackOp::AddChild(ns) => {
                        if let Some(parent) = stack.last_mut() {
                            parent.child_ns = parent.child_ns.saturating_add(ns);
                        }
                    }
                    StackOp::Return {
                        method,
                        depth,
                        elapsed_ns,
                    } => {
                        let child_ns = match stack
                            .iter()
                            .rposition(|f| f.method == method && f.depth == depth)
                        {
                            Some(i) => {
                                let c = stack[i].child_ns;
                                stack.truncate(i);
                                c
                            }
                            None => {
                                while stack.last().is_some_and(|f| f.depth >= depth) {
                                    stack.pop();
                                }
                                0
                            }
                        };
                        if let Some(parent) = stack.last_mut() {
                            parent.child_ns = parent.child_ns.saturating_add(elapsed_ns);
                        }
                        let m = self.methods.entry(method).or_default();
                        m.self_ns = m
                            .self_ns
                            .saturating_add(elapsed_ns.saturating_sub(child_ns));
                    }
                }
            }
            // The part's own open frames go on top.
            stack.extend(t.stack);
        }
        for (id, e) in part.exceptions {
            let acc = self.exceptions.entry(id).or_default();
            if acc.name.is_none() {
                acc.name = e.name;
            }
            acc.thrown += e.thrown;
            acc.caught += e.caught;
            acc.uncaught += e.uncaught;
        }
        for (key, m) in part.monitors {
            let acc = self.monitors.entry(key).or_default();
            if acc.class.is_none() {
                acc.class = m.class;
            }
            acc.enters += m.enters;
            acc.entereds += m.entereds;
            acc.total_wait_ns = acc.total_wait_ns.saturating_add(m.total_wait_ns);
            acc.max_wait_ns = acc.max_wait_ns.max(m.max_wait_ns);
        }
        self.gc_count += part.gc_count;
        self.gc_total_ns = self.gc_total_ns.saturating_add(part.gc_total_ns);
        self.dropped = self.dropped.saturating_add(part.dropped);
        self.budget_reports += part.budget_reports;
        if let Some((t, bp)) = part.budget_last {
            if self.budget_last.is_none_or(|(mine, _)| mine <= t) {
                self.budget_last = Some((t, bp));
            }
        }
    }

    /// Resolves names and sorts. Ties sort by name so output is stable.
    pub fn finish(self) -> TraceStats {
        let events_by_type = EVENT_TYPE_NAMES
            .iter()
            .zip(self.by_type)
            .filter(|(_, n)| *n > 0)
            .map(|(name, n)| (*name, n))
            .collect();

        let mut threads: Vec<ThreadStats> = self
            .threads
            .into_iter()
            .map(|(id, t)| ThreadStats {
                name: t.name.unwrap_or_else(|| format!("thread-{}", id.0)),
                events: t.events,
            })
            .collect();
        threads.sort_by(|a, b| b.events.cmp(&a.events).then_with(|| a.name.cmp(&b.name)));

        let mut methods: Vec<MethodStats> = self
            .methods
            .into_iter()
            .map(|(id, m)| {
                let (class, name, sig) = m.names.unwrap_or_else(|| {
                    ("?".to_string(), format!("method#{}", id.0), "?".to_string())
                });
                MethodStats {
                    class,
                    name,
                    sig,
                    calls: m.calls,
                    returns: m.returns,
                    exceptional_returns: m.exceptional_returns,
                    total_ns: m.total_ns,
                    self_ns: m.self_ns,
                    demoted: m.demoted,
                    counted: m.counted,
                }
            })
            .collect();
        methods.sort_by(|a, b| (&a.class, &a.name, &a.sig).cmp(&(&b.class, &b.name, &b.sig)));
        methods.sort_by_key(|m| std::cmp::Reverse(m.calls + m.counted));

        let mut exceptions: Vec<ExceptionStats> = self
            .exceptions
            .into_iter()
            .map(|(id, e)| ExceptionStats {
                class: e.name.unwrap_or_else(|| format!("?#{}", id.0)),
                thrown: e.thrown,
                caught: e.caught,
                uncaught: e.uncaught,
            })
            .collect();
        exceptions.sort_by(|a, b| b.thrown.cmp(&a.thrown).then_with(|| a.class.cmp(&b.class)));

        let mut monitors: Vec<MonitorStats> = self
            .monitors
            .into_iter()
            .map(|((class, hash), m)| MonitorStats {
                class: m.class.unwrap_or_else(|| format!("?#{}", class.0)),
                hash,
                contentions: m.enters.max(m.entereds),
                total_wait_ns: m.total_wait_ns,
                max_wait_ns: m.max_wait_ns,
            })
            .collect();
        monitors.sort_by(|a, b| {
            (b.total_wait_ns, b.contentions)
                .cmp(&(a.total_wait_ns, a.contentions))
                .then_with(|| (&a.class, a.hash).cmp(&(&b.class, b.hash)))
        });

        TraceStats {
            events: self.events,
            first_time_ns: self.first_time_ns,
            last_time_ns: self.last_time_ns,
            events_by_type,
            threads,
            methods,
            exceptions,
            monitors,
            gc_count: self.gc_count,
            gc_total_ns: self.gc_total_ns,
            dropped: self.dropped,
            budget_reports: self.budget_reports,
            budget_bp: self.budget_last.map(|(_, bp)| bp),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmview_format::{Loc, MethodSymbol, Monitor, Outcome, Symbol, ThreadSymbol};

    /// A symbol table with methods `main`, `a`, `b`, `c` (ids 0..4) of class
    /// `T`, threads `main` (0) and `worker` (1), and string ids for names.
    fn syms() -> SymbolTable {
        let mut s = SymbolTable::default();
        let strings = [
            "T",
            "main",
            "a",
            "b",
            "c",
            "()V",
            "worker",
            "grp",
            "java.io.IOException",
            "Lock",
        ];
        for (i, t) in strings.iter().enumerate() {
            s.insert(Symbol::String {
                id: StringId(i as u32),
                text: t.to_string(),
            });
        }
        for (i, name) in [1u32, 2, 3, 4].iter().enumerate() {
            s.insert(Symbol::Method(MethodSymbol {
                id: MethodId(i as u32),
                class: StringId(0),
                name: StringId(*name),
                sig: StringId(5),
                param_names: vec![],
                modifiers: 0,
            }));
        }
        for (i, name) in [1u32, 6].iter().enumerate() {
            s.insert(Symbol::Thread(ThreadSymbol {
                id: ThreadRef(i as u32),
                java_id: i as i64,
                name: StringId(*name),
                group: StringId(7),
                priority: 5,
                daemon: false,
            }));
        }
        s
    }

    const MAIN: MethodId = MethodId(0);
    const A: MethodId = MethodId(1);
    const B: MethodId = MethodId(2);
    const C: MethodId = MethodId(3);

    /// Builds events with increasing ids and times.
    #[derive(Default)]
    struct Stream(Vec<Event>);

    impl Stream {
        fn push(&mut self, thread: u32, kind: EventKind) -> &mut Self {
            let id = self.0.len() as u64 + 1;
            self.0.push(Event {
                id,
                time_ns: id * 10,
                thread: ThreadRef(thread),
                kind,
            });
            self
        }
        fn call(&mut self, thread: u32, method: MethodId, depth: u32) -> &mut Self {
            self.push(
                thread,
                EventKind::Call {
                    metrics: Default::default(),
                    method,
                    depth,
                    caller: None,
                    params: vec![],
                },
            )
        }
        fn ret(&mut self, thread: u32, method: MethodId, depth: u32, elapsed_ns: u64) -> &mut Self {
            self.push(
                thread,
                EventKind::Return {
                    metrics: Default::default(),
                    method,
                    depth,
                    outcome: Outcome::Void,
                    elapsed_ns,
                },
            )
        }
        fn stats(&self) -> TraceStats {
            TraceStats::from_events(&self.0, &syms())
        }
    }

    fn method<'s>(stats: &'s TraceStats, name: &str) -> &'s MethodStats {
        stats.methods.iter().find(|m| m.name == name).unwrap()
    }

    #[test]
    fn self_time_subtracts_direct_traced_callees_only() {
        let mut s = Stream::default();
        // main(200) → a(100) → b(30), c(20); untraced frames between a and c.
        s.call(0, MAIN, 1)
            .call(0, A, 2)
            .call(0, B, 3)
            .ret(0, B, 3, 30)
            .call(0, C, 5)
            .ret(0, C, 5, 20)
            .ret(0, A, 2, 100)
            .ret(0, MAIN, 1, 200);
        let st = s.stats();
        assert_eq!(
            (method(&st, "main").total_ns, method(&st, "main").self_ns),
            (200, 100)
        );
        assert_eq!(
            (method(&st, "a").total_ns, method(&st, "a").self_ns),
            (100, 50)
        );
        assert_eq!(
            (method(&st, "b").total_ns, method(&st, "b").self_ns),
            (30, 30)
        );
        assert_eq!(method(&st, "c").calls, 1);
        let by_self: Vec<&str> = st
            .top_methods_by_self_time(2)
            .iter()
            .map(|m| m.name.as_str())
            .collect();
        assert_eq!(by_self, ["main", "a"]);
        let by_total: Vec<&str> = st
            .top_methods_by_total_time(10)
            .iter()
            .map(|m| m.name.as_str())
            .collect();
        assert_eq!(by_total, ["main", "a", "b", "c"]);
    }

    /// Merging partial builders, one per part, must give what one builder
    /// gives, wherever the parts are cut: calls open across cuts, RETURNs
    /// without CALLs (lost events), CALLs that never return, two threads.
    #[test]
    fn partial_builders_merged_in_order_equal_one_builder() {
        let mut s = Stream::default();
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut depth = [0u32; 2];
        let methods = [MAIN, A, B, C];
        for _ in 0..3000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let t = (rng % 2) as usize;
            let m = methods[((rng >> 8) % 4) as usize];
            match (rng >> 16) % 10 {
                // Deeper.
                0..=4 => {
                    depth[t] += 1 + ((rng >> 24) % 2) as u32;
                    s.call(t as u32, m, depth[t]);
                }
                // A RETURN of whatever is at this depth (its CALL may be
                // another method, or lost).
                5..=8 if depth[t] > 0 => {
                    s.ret(t as u32, m, depth[t], (rng >> 32) % 1000);
                    depth[t] -= 1;
                }
                // A CALL back at a shallower depth (RETURNs lost).
                _ => {
                    depth[t] = depth[t].saturating_sub(2).max(1);
                    s.call(t as u32, m, depth[t]);
                }
            }
        }
        let whole = s.stats();
        for part_len in [1, 2, 3, 7, 50, 499, 3000] {
            let mut total = StatsBuilder::new();
            for part in s.0.chunks(part_len) {
                let mut b = StatsBuilder::partial();
                for ev in part {
                    b.event(ev, &syms());
                }
                total.merge(b);
            }
            assert_eq!(total.finish(), whole, "parts of {part_len} events");
        }
    }

    #[test]
    fn recursion_counts_every_activation() {
        let mut s = Stream::default();
        s.call(0, A, 1)
            .call(0, A, 2)
            .call(0, A, 3)
            .ret(0, A, 3, 10)
            .ret(0, A, 2, 25)
            .ret(0, A, 1, 45);
        let st = s.stats();
        let a = method(&st, "a");
        assert_eq!((a.calls, a.returns, a.total_ns), (3, 3, 80));
        // Self: 10 + (25-10) + (45-25).
        assert_eq!(a.self_ns, 45);
    }

    #[test]
    fn threads_keep_separate_stacks() {
        let mut s = Stream::default();
        s.call(0, A, 1)
            .call(1, B, 1)
            .call(0, C, 2)
            .ret(1, B, 1, 50)
            .ret(0, C, 2, 5)
            .ret(0, A, 1, 60);
        let st = s.stats();
        assert_eq!(method(&st, "a").self_ns, 55, "b ran on another thread");
        assert_eq!(method(&st, "b").self_ns, 50);
        assert_eq!(
            st.threads,
            [
                ThreadStats {
                    name: "main".into(),
                    events: 4
                },
                ThreadStats {
                    name: "worker".into(),
                    events: 2
                }
            ]
        );
    }

    #[test]
    fn lost_return_does_not_make_later_calls_its_children() {
        let mut s = Stream::default();
        // b's RETURN was dropped; c at the same depth is main's child, not b's.
        s.call(0, MAIN, 1)
            .call(0, B, 2)
            .call(0, C, 2)
            .ret(0, C, 2, 7)
            .ret(0, MAIN, 1, 100);
        let st = s.stats();
        assert_eq!(method(&st, "main").self_ns, 93);
        assert_eq!(method(&st, "b").returns, 0);
    }

    #[test]
    fn return_without_call_counts_as_self_time() {
        let mut s = Stream::default();
        s.ret(0, A, 3, 40);
        let st = s.stats();
        assert_eq!((method(&st, "a").calls, method(&st, "a").self_ns), (0, 40));
        assert!(st.top_methods_by_calls(5).is_empty());
    }

    #[test]
    fn exceptions_split_caught_and_uncaught() {
        let mut s = Stream::default();
        let throw = |catch| EventKind::Throw {
            exception: StringId(8),
            message: None,
            method: A,
            loc: Loc::default(),
            catch,
        };
        s.push(0, throw(Some((MAIN, Loc::default()))))
            .push(0, throw(None))
            .push(1, throw(Some((B, Loc::default()))));
        let st = s.stats();
        assert_eq!(
            st.exceptions,
            [ExceptionStats {
                class: "java.io.IOException".into(),
                thrown: 3,
                caught: 2,
                uncaught: 1
            }]
        );
    }

    #[test]
    fn monitors_rank_by_total_wait_and_keep_the_max() {
        let mut s = Stream::default();
        let m1 = Monitor {
            class: StringId(9),
            hash: 1,
        };
        let m2 = Monitor {
            class: StringId(9),
            hash: 2,
        };
        for (m, wait) in [(m1, 5), (m2, 100), (m1, 20), (m1, 1)] {
            s.push(
                1,
                EventKind::MonitorContendedEnter {
                    monitor: m,
                    owner: Some(ThreadRef(0)),
                },
            )
            .push(
                1,
                EventKind::MonitorContendedEntered {
                    monitor: m,
                    wait_ns: wait,
                },
            );
        }
        let st = s.stats();
        let got: Vec<(u32, u64, u64, u64)> = st
            .monitors
            .iter()
            .map(|m| (m.hash, m.contentions, m.total_wait_ns, m.max_wait_ns))
            .collect();
        assert_eq!(got, [(2, 1, 100, 100), (1, 3, 26, 20)]);
        assert_eq!(st.monitors[0].class, "Lock");
    }

    #[test]
    fn totals_types_duration_gc_and_dropped() {
        let mut s = Stream::default();
        s.push(0, EventKind::ThreadStart)
            .push(0, EventKind::GcStart)
            .push(0, EventKind::GcFinish { duration_ns: 300 })
            .push(1, EventKind::Dropped { count: 40 })
            .push(1, EventKind::Dropped { count: 2 })
            .push(7, EventKind::ThreadEnd);
        let st = s.stats();
        assert_eq!(st.events, 6);
        assert_eq!(st.duration_ns(), 60);
        assert_eq!(st.first_time_ns, Some(10));
        assert_eq!(st.dropped, 42);
        assert_eq!((st.gc_count, st.gc_total_ns), (1, 300));
        assert_eq!(
            st.events_by_type,
            [
                ("THREAD_START", 1),
                ("THREAD_END", 1),
                ("GC_START", 1),
                ("GC_FINISH", 1),
                ("DROPPED", 2)
            ]
        );
        assert!(
            st.threads.iter().any(|t| t.name == "thread-7"),
            "unknown thread gets a placeholder name"
        );
    }

    #[test]
    fn empty_stream_gives_empty_stats() {
        let st = Stream::default().stats();
        assert_eq!(st, TraceStats::default());
        assert_eq!(st.duration_ns(), 0);
    }
}
