//! The timeline's index: every thread's calls as nested slices, its
//! samples and its markers, kept in memory in a compact form so that the
//! page can ask for any time range at any zoom and get only what fits on
//! its screen.
//!
//! The page never receives the whole trace. A slice is a CALL matched with
//! its RETURN (40 bytes), kept per thread and per nesting level; within
//! one level the slices of a thread do not overlap, so they are sorted by
//! start *and* by end, and the ones in a time range are found by binary
//! search. A query summarises per pixel: a slice shorter than a pixel is
//! merged with its neighbours in the same pixel into one bucket, and the
//! walk jumps over the bucket with an exponential search from where it is
//! (reading about 2 log k of the k slices it jumps, near each other). The
//! markers are kept per kind, so a pixel's markers of one kind are one
//! run, jumped the same way and counted exactly; samples likewise. So an
//! answer costs (pixels × (levels + kinds) × log n) whatever the trace's
//! size, and its JSON is written as it is found, with no tree of values.
//!
//! Memory is bounded ([`Limits`]): when the slices exceed their budget,
//! the calls shorter than a threshold (1 µs, then doubled until they fit)
//! are dropped, and shorter calls are no longer kept; the answer says from
//! which length calls are kept. What is kept covers the whole trace, and
//! what is dropped is what a zoomed-out screen could not show anyway.
//! Samples and markers have budgets of their own and count what they drop.
//!
//! The call tree of a time range ([`Timeline::tree`]) is aggregated from
//! the same slices (time clipped to the range) into the analysis crate's
//! call tree, and sent in the schema of the whole trace's (that of
//! `vmview calltree --format json`), so the page draws both with one
//! flame-graph code.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{json, Value as Json};
use vmview_analysis::calltree::{CallTree, NodeKey, ReportOptions};
use vmview_export::names::{monitor_name, MethodNames};
use vmview_format::parallel::{decode_threads, ordered_map_fold, ChunkFile};
use vmview_format::{
    Event, EventKind, FormatError, MethodId, Scanned, StringId, SymbolTable, ThreadRef, TraceReader,
};

/// The index's memory budget, in items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Call slices kept (40 bytes each).
    pub slices: usize,
    /// Markers kept (32 bytes each).
    pub markers: usize,
    /// Samples kept (16 bytes each).
    pub samples: usize,
}

impl Default for Limits {
    /// About 250 MB in all.
    fn default() -> Self {
        Limits {
            slices: 5_000_000,
            markers: 2_000_000,
            samples: 2_000_000,
        }
    }
}

/// Most nodes of a range's call tree sent to the page (heaviest first).
const MAX_TREE_NODES: usize = 20_000;
/// Deepest level a range's tree goes to: deeper calls count as their
/// ancestor's self time (the tree is built and sent recursively).
const MAX_TREE_DEPTH: usize = 512;
/// Most pixels a query may ask for.
const MAX_PX: u64 = 8192;
/// Chunks decoded ahead of the fold, per decoding thread (as the CLI's
/// parallel commands do): enough to keep every core busy, and the memory
/// of that many decoded chunks.
const CHUNKS_IN_FLIGHT_PER_THREAD: usize = 2;

/// One call: CALL at `start`, RETURN at `end`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slice {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) call_id: u64,
    /// The RETURN's id; 0 when the call had not returned when the trace
    /// ended (then `end` is the thread's last event).
    pub(crate) ret_id: u64,
    pub(crate) method: u32,
    /// Index of the enclosing slice in the level above (unused at level 0).
    pub(crate) parent: u32,
}

/// Marker kinds, as the page names them (`KIND_NAMES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum MarkerKind {
    Throw = 0,
    Catch = 1,
    Contended = 2,
    Wait = 3,
    Gc = 4,
    Period = 5,
    Window = 6,
    Dropped = 7,
    Decision = 8,
    Other = 9,
}

impl MarkerKind {
    /// The kind numbered `n` (its position in [`KIND_NAMES`]).
    pub fn from_u8(n: u8) -> Option<MarkerKind> {
        use MarkerKind::*;
        [
            Throw, Catch, Contended, Wait, Gc, Period, Window, Dropped, Decision, Other,
        ]
        .get(usize::from(n))
        .copied()
    }
}

/// The number of marker kinds.
pub(crate) const KINDS: usize = KIND_NAMES.len();

/// The names of [`MarkerKind`] in order.
pub const KIND_NAMES: [&str; 10] = [
    "THROW",
    "CATCH",
    "CONTENDED",
    "WAIT",
    "GC",
    "PERIOD",
    "TRACE_WINDOW",
    "DROPPED",
    "DECISION",
    "OTHER",
];

/// A point (or an interval ending at `time`) worth a mark on a track.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Marker {
    /// Where the mark starts (for a wait: `time - wait`).
    pub(crate) start: u64,
    pub(crate) time: u64,
    pub(crate) id: u64,
    /// A string handle: the exception's or the monitor's class; else 0.
    pub(crate) what: u32,
    pub(crate) kind: MarkerKind,
}

/// Markers of one kind in the order of their times, and every
/// [`COARSE`]th one's time in a short list of its own: a pixel's run of
/// them is found in that list (near where the previous pixel's ended, so
/// in cache) and then in one block of [`COARSE`] markers, so that a
/// zoomed-out answer reads a few cache lines a pixel, not the pixel's
/// markers or a binary search's worth of them.
#[derive(Debug, Default, Clone)]
pub(crate) struct Marks {
    v: Vec<Marker>,
    /// `coarse[k] == v[k * COARSE].time`.
    coarse: Vec<u64>,
}

/// Markers a block of [`Marks`] (a binary search in one is 4 lines read).
const COARSE: usize = 16;

impl Marks {
    pub(crate) fn push(&mut self, m: Marker) {
        if self.v.len().is_multiple_of(COARSE) {
            self.coarse.push(m.time);
        }
        self.v.push(m);
    }

    /// The first index after `i` whose marker is at `pe` or later (the
    /// marker at `i` is before `pe`).
    fn skip(&self, i: usize, pe: u64) -> usize {
        let k0 = ((i + 1) / COARSE + 1).min(self.coarse.len());
        let k = first_from(&self.coarse, k0, |&t| t < pe);
        let lo = (i + 1).max(k.saturating_sub(1) * COARSE);
        let hi = (k * COARSE).min(self.v.len());
        lo + self.v[lo..hi.max(lo)].partition_point(|m| m.time < pe)
    }
}

impl From<Vec<Marker>> for Marks {
    fn from(v: Vec<Marker>) -> Marks {
        let coarse = v.iter().step_by(COARSE).map(|m| m.time).collect();
        Marks { v, coarse }
    }
}

impl std::ops::Deref for Marks {
    type Target = [Marker];
    fn deref(&self) -> &[Marker] {
        &self.v
    }
}

#[derive(Debug, Default)]
pub(crate) struct Track {
    pub(crate) name: String,
    pub(crate) thread: u32,
    pub(crate) first_ns: u64,
    pub(crate) last_ns: u64,
    pub(crate) first_id: u64,
    pub(crate) levels: Vec<Vec<Slice>>,
    /// Open calls: (level, index in that level).
    pub(crate) open: Vec<(usize, u32)>,
    pub(crate) samples: Vec<(u64, u8)>,
    /// The markers of each kind (indexed by [`MarkerKind`]), each list in
    /// the order of their times: a pixel's marks of one kind are one run,
    /// stepped over with one search however many it holds.
    pub(crate) markers: [Marks; KINDS],
}

/// The built index of one trace.
#[derive(Debug)]
pub struct Timeline {
    pub(crate) tracks: Vec<Track>,
    /// The GC's own track (GC pauses have no thread of their own).
    pub(crate) gc: Marks,
    pub(crate) syms: SymbolTable,
    pub(crate) end_ns: u64,
    /// Levels at and below this one were dropped to stay in budget.
    /// Returned calls shorter than this were dropped to stay in budget.
    pub(crate) min_ns: u64,
    pub(crate) dropped_markers: u64,
    pub(crate) dropped_samples: u64,
    pub(crate) unmatched_returns: u64,
}

/// Builds a [`Timeline`] from events in trace order.
pub struct TimelineBuilder {
    limits: Limits,
    tracks: Vec<Track>,
    by_thread: HashMap<u32, usize>,
    gc: Marks,
    gc_open: Option<(u64, u64)>,
    slices: usize,
    markers: usize,
    samples: usize,
    min_ns: u64,
    dropped_markers: u64,
    dropped_samples: u64,
    unmatched_returns: u64,
    end_ns: u64,
    /// The symbols of the chunks read so far (the parallel build's; the
    /// sequential one names them at [`finish`](Self::finish)).
    syms: SymbolTable,
}

/// An index being built, shared with the queries that read it meanwhile.
pub type Building = std::sync::Mutex<Option<TimelineBuilder>>;

impl TimelineBuilder {
    pub fn new(limits: Limits) -> Self {
        TimelineBuilder {
            limits,
            tracks: Vec::new(),
            by_thread: HashMap::new(),
            gc: Marks::default(),
            gc_open: None,
            slices: 0,
            markers: 0,
            samples: 0,
            min_ns: 0,
            dropped_markers: 0,
            dropped_samples: 0,
            unmatched_returns: 0,
            end_ns: 0,
            syms: SymbolTable::default(),
        }
    }

    /// What is on screen for `view` in the part of the trace read so far,
    /// in the schema of [`Timeline::query`]: calls not yet returned end at
    /// the last event read (`end_ns`), and tracks are named from the
    /// symbols read so far.
    pub fn partial_query(&self, view: View, threads: &[u32]) -> String {
        let to = view.to.max(view.from + 1);
        let px = view.px.clamp(1, MAX_PX);
        let ns_px = ((to - view.from) as f64 / px as f64).max(1.0);
        let p = Parts {
            tracks: &self.tracks,
            gc: &self.gc,
            syms: &self.syms,
            end_ns: self.end_ns,
            clip: self.end_ns,
            min_ns: self.min_ns,
            dropped_markers: self.dropped_markers,
            dropped_samples: self.dropped_samples,
            unmatched_returns: self.unmatched_returns,
        };
        query_parts(&p, view.from, to, px, ns_px, threads)
    }

    fn track(&mut self, ev: &Event) -> &mut Track {
        self.track_at(ev.thread.0, ev.time_ns, ev.id)
    }

    fn track_at(&mut self, thread: u32, time_ns: u64, id: u64) -> &mut Track {
        let n = self.tracks.len();
        let i = *self.by_thread.entry(thread).or_insert(n);
        if i == n {
            self.tracks.push(Track {
                thread,
                first_ns: time_ns,
                first_id: id,
                ..Track::default()
            });
        }
        let t = &mut self.tracks[i];
        t.last_ns = t.last_ns.max(time_ns);
        t
    }

    fn marker(&mut self, ev: &Event, kind: MarkerKind, start: u64, what: u32) {
        if self.markers >= self.limits.markers {
            self.dropped_markers += 1;
            return;
        }
        self.markers += 1;
        let m = Marker {
            start,
            time: ev.time_ns,
            id: ev.id,
            what,
            kind,
        };
        self.track(ev).markers[kind as usize].push(m);
    }

    /// The slices are over budget: drops every returned call shorter
    /// than a threshold that doubles until they fit in three quarters of
    /// it. A call's children are shorter than it, so a dropped call's
    /// children are dropped too, and the calls kept still nest. Open calls
    /// stay (their length is not known yet).
    fn drop_short(&mut self) {
        let target = self.limits.slices / 4 * 3;
        while self.slices > target && self.min_ns < u64::MAX / 4 {
            self.min_ns = (self.min_ns * 2).max(1_000);
            let min = self.min_ns;
            let mut kept = 0;
            for t in &mut self.tracks {
                // Per level, each slice's new index (None: dropped).
                let mut maps: Vec<Vec<Option<u32>>> = Vec::with_capacity(t.levels.len());
                for (l, v) in t.levels.iter_mut().enumerate() {
                    let above = l.checked_sub(1).map(|k| &maps[k]);
                    let mut map = Vec::with_capacity(v.len());
                    let mut n = 0u32;
                    v.retain_mut(|s| {
                        let parent = match above {
                            None => Some(0),
                            Some(m) => m.get(s.parent as usize).copied().flatten(),
                        };
                        let keep =
                            parent.is_some() && (s.end == u64::MAX || s.end - s.start >= min);
                        map.push(keep.then_some(n));
                        if keep {
                            s.parent = parent.unwrap_or(0);
                            n += 1;
                        }
                        keep
                    });
                    v.shrink_to_fit();
                    kept += v.len();
                    maps.push(map);
                }
                for (l, i) in &mut t.open {
                    if let Some(Some(n)) = maps.get(*l).and_then(|m| m.get(*i as usize)) {
                        *i = *n;
                    }
                }
            }
            self.slices = kept;
        }
    }

    /// A CALL of `method` on `thread`.
    pub fn call(&mut self, thread: u32, time_ns: u64, id: u64, method: u32) {
        self.end_ns = self.end_ns.max(time_ns);
        let t = self.track_at(thread, time_ns, id);
        let level = t.open.len();
        if t.levels.len() <= level {
            t.levels.resize_with(level + 1, Vec::new);
        }
        let parent = if level == 0 { 0 } else { t.open[level - 1].1 };
        let idx = t.levels[level].len() as u32;
        t.levels[level].push(Slice {
            start: time_ns,
            end: u64::MAX,
            call_id: id,
            ret_id: 0,
            method,
            parent,
        });
        t.open.push((level, idx));
        self.slices += 1;
        if self.slices > self.limits.slices {
            self.drop_short();
        }
    }

    /// A RETURN of `method` on `thread`.
    pub fn ret(&mut self, thread: u32, time: u64, id: u64, method: u32) {
        self.end_ns = self.end_ns.max(time);
        let min = self.min_ns;
        let mut freed = 0;
        let t = self.track_at(thread, time, id);
        // The matching call is normally on top; a RETURN whose CALL
        // was not recorded (a window move, dropped events) closes
        // nothing.
        let found = t
            .open
            .iter()
            .rposition(|&(l, i)| t.levels[l][i as usize].method == method);
        match found {
            Some(k) => {
                while let Some((l, i)) = t.open.pop() {
                    let v = &mut t.levels[l];
                    let s = &mut v[i as usize];
                    s.end = time;
                    if t.open.len() == k {
                        s.ret_id = id;
                    }
                    // Under the threshold: not kept (it is the
                    // last of its level, its children gone before).
                    if time - s.start < min && i as usize + 1 == v.len() {
                        v.pop();
                        freed += 1;
                    }
                    if t.open.len() == k {
                        break;
                    }
                }
            }
            None => self.unmatched_returns += 1,
        }
        self.slices -= freed;
    }

    /// An event as the parallel reader scans it (CALL and RETURN as heads).
    pub fn scanned(&mut self, ev: &Scanned) {
        match ev {
            Scanned::Head {
                id,
                time_ns,
                thread,
                ret,
                method,
            } => {
                if *ret {
                    self.ret(thread.0, *time_ns, *id, method.0)
                } else {
                    self.call(thread.0, *time_ns, *id, method.0)
                }
            }
            Scanned::Full(ev) => self.event(ev),
        }
    }

    pub fn event(&mut self, ev: &Event) {
        self.end_ns = self.end_ns.max(ev.time_ns);
        match &ev.kind {
            EventKind::Call { method, .. } => self.call(ev.thread.0, ev.time_ns, ev.id, method.0),
            EventKind::Return { method, .. } => self.ret(ev.thread.0, ev.time_ns, ev.id, method.0),
            EventKind::ThreadEnd => {
                let time = ev.time_ns;
                let t = self.track(ev);
                close_open(t, time);
            }
            EventKind::Sample { state, .. } => {
                if self.samples >= self.limits.samples {
                    self.dropped_samples += 1;
                    return;
                }
                self.samples += 1;
                let s = (ev.time_ns, state.index() as u8);
                self.track(ev).samples.push(s);
            }
            EventKind::Throw { exception, .. } => {
                self.marker(ev, MarkerKind::Throw, ev.time_ns, exception.0)
            }
            EventKind::Catch { exception, .. } => {
                self.marker(ev, MarkerKind::Catch, ev.time_ns, exception.0)
            }
            EventKind::MonitorContendedEntered { monitor, wait_ns } => self.marker(
                ev,
                MarkerKind::Contended,
                ev.time_ns.saturating_sub(*wait_ns),
                monitor.class.0,
            ),
            EventKind::MonitorWaited {
                monitor, wait_ns, ..
            } => self.marker(
                ev,
                MarkerKind::Wait,
                ev.time_ns.saturating_sub(*wait_ns),
                monitor.class.0,
            ),
            EventKind::GcStart => self.gc_open = Some((ev.time_ns, ev.id)),
            EventKind::GcFinish { duration_ns } => {
                if self.gc.len() < self.limits.markers {
                    self.gc.push(Marker {
                        start: ev.time_ns.saturating_sub(*duration_ns),
                        time: ev.time_ns,
                        id: self.gc_open.take().map_or(ev.id, |(_, id)| id),
                        what: 0,
                        kind: MarkerKind::Gc,
                    });
                } else {
                    self.dropped_markers += 1;
                }
            }
            EventKind::PeriodStart { .. } | EventKind::PeriodEnd { .. } => {
                self.marker(ev, MarkerKind::Period, ev.time_ns, 0)
            }
            EventKind::TraceWindow { .. } => self.marker(ev, MarkerKind::Window, ev.time_ns, 0),
            EventKind::Dropped { .. } => self.marker(ev, MarkerKind::Dropped, ev.time_ns, 0),
            EventKind::ReactionHandlers { .. } => {
                self.marker(ev, MarkerKind::Decision, ev.time_ns, 0)
            }
            _ => {
                self.track(ev);
            }
        }
    }

    /// The index; `syms` (the trace's symbols, all read) names threads and
    /// methods.
    pub fn finish(mut self, syms: &SymbolTable) -> Timeline {
        for t in &mut self.tracks {
            let end = t.last_ns;
            close_open(t, end);
            t.name = syms.thread_name(vmview_format::ThreadRef(t.thread));
        }
        self.tracks.sort_by_key(|t| (t.first_ns, t.first_id));
        Timeline {
            tracks: self.tracks,
            gc: self.gc,
            syms: syms.clone(),
            end_ns: self.end_ns,
            min_ns: self.min_ns,
            dropped_markers: self.dropped_markers,
            dropped_samples: self.dropped_samples,
            unmatched_returns: self.unmatched_returns,
        }
    }
}

fn close_open(t: &mut Track, time: u64) {
    while let Some((l, i)) = t.open.pop() {
        if let Some(s) = t.levels.get_mut(l).and_then(|v| v.get_mut(i as usize)) {
            s.end = time.max(s.start);
        }
    }
}

/// A time range and the pixels it spreads over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View {
    pub from: u64,
    pub to: u64,
    pub px: u64,
}

impl Timeline {
    /// Reads a whole binary trace; `read` counts the events read so far
    /// (the page shows the progress). A trace that reads cleanly by its
    /// index is scanned chunk by chunk on every core (CALL and RETURN as
    /// heads, nothing of their values built), the chunks folded into the
    /// index in file order; a damaged one, or one whose chunk turns out
    /// damaged, is read by the sequential reader with its recovery.
    pub fn build(path: &Path, limits: Limits, read: &AtomicU64) -> Result<Timeline, FormatError> {
        Self::build_with(path, limits, read, true, &Building::default())
    }

    /// Like [`build`](Self::build); while a clean trace is read, `building`
    /// holds the index as it stands (after each chunk), so the page can be
    /// shown the part read so far ([`TimelineBuilder::partial_query`]).
    pub fn build_shared(
        path: &Path,
        limits: Limits,
        read: &AtomicU64,
        building: &Building,
    ) -> Result<Timeline, FormatError> {
        Self::build_with(path, limits, read, true, building)
    }

    fn build_with(
        path: &Path,
        limits: Limits,
        read: &AtomicU64,
        parallel: bool,
        building: &Building,
    ) -> Result<Timeline, FormatError> {
        let lock = || building.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(cf) = parallel
            .then(|| ChunkFile::open(path))
            .transpose()?
            .flatten()
        {
            let threads = decode_threads();
            // For the tests of the partial answers only: a pause after each
            // chunk, so that a build reliably outlasts a client's polls.
            let pause = std::env::var("VMVIEW_TEST_INDEX_PAUSE_MS")
                .ok()
                .and_then(|v| v.parse().ok())
                .map(std::time::Duration::from_millis);
            *lock() = Some(TimelineBuilder::new(limits));
            let mut n = 0u64;
            let whole = ordered_map_fold(
                threads,
                cf.chunks().len(),
                threads * CHUNKS_IN_FLIGHT_PER_THREAD,
                |i| {
                    let mut table = SymbolTable::default();
                    let mut evs =
                        Vec::with_capacity(cf.chunks()[i].event_count.min(1 << 20) as usize);
                    cf.for_each_scanned(i, &mut table, |ev, _| evs.push(ev))
                        .map(|()| (table, evs))
                },
                |r| match r {
                    Ok((table, evs)) => {
                        let mut guard = lock();
                        let Some(b) = guard.as_mut() else {
                            return false;
                        };
                        b.syms.absorb(table);
                        for ev in &evs {
                            b.scanned(ev);
                        }
                        n += evs.len() as u64;
                        read.store(n, Ordering::Relaxed);
                        drop(guard);
                        if let Some(p) = pause {
                            std::thread::sleep(p);
                        }
                        true
                    }
                    Err(_) => false,
                },
            );
            let b = lock().take();
            if let (true, Some(mut b)) = (whole, b) {
                let syms = std::mem::take(&mut b.syms);
                return Ok(b.finish(&syms));
            }
            read.store(0, Ordering::Relaxed);
        }
        let mut reader = TraceReader::open(path)?;
        let mut b = TimelineBuilder::new(limits);
        let mut n = 0u64;
        while let Some(ev) = reader.next_event() {
            b.event(&ev);
            n += 1;
            if n & 0xffff == 0 {
                read.store(n, Ordering::Relaxed);
            }
        }
        read.store(n, Ordering::Relaxed);
        Ok(b.finish(reader.symbols()))
    }

    /// The last event's time.
    pub fn end_ns(&self) -> u64 {
        self.end_ns
    }

    /// What is on screen for `view`: per track, its slices (`[start, end,
    /// level, method, call_id, return_id, merged]`, where `merged` > 1 is a
    /// bucket of that many calls shorter than a pixel, named after the
    /// first), its samples (`[time, state, merged]`) and its markers
    /// (`[start, time, kind, id, merged]`); the GC's pauses; the methods
    /// named. `threads` (thread handles) limits the tracks, all when empty.
    pub fn query(&self, view: View, threads: &[u32]) -> Json {
        serde_json::from_str(&self.query_text(view, threads)).unwrap_or(Json::Null)
    }

    /// [`query`](Self::query)'s answer as JSON text, as the server sends
    /// it (written as it is computed: no JSON tree is built).
    pub fn query_text(&self, view: View, threads: &[u32]) -> String {
        let to = view.to.max(view.from + 1);
        let px = view.px.clamp(1, MAX_PX);
        let ns_px = ((to - view.from) as f64 / px as f64).max(1.0);
        self.query_at(view.from, to, px, ns_px, threads)
    }

    /// The whole index with no merging (every call its own slice), in the
    /// schema of [`Timeline::query`]: what a self-contained report embeds.
    pub fn exact(&self) -> Json {
        let to = self.end_ns + 1;
        serde_json::from_str(&self.query_at(0, to, to, 0.5, &[])).unwrap_or(Json::Null)
    }

    fn query_at(&self, from: u64, to: u64, px: u64, ns_px: f64, threads: &[u32]) -> String {
        let p = Parts {
            tracks: &self.tracks,
            gc: &self.gc,
            syms: &self.syms,
            end_ns: self.end_ns,
            clip: u64::MAX,
            min_ns: self.min_ns,
            dropped_markers: self.dropped_markers,
            dropped_samples: self.dropped_samples,
            unmatched_returns: self.unmatched_returns,
        };
        query_parts(&p, from, to, px, ns_px, threads)
    }

    /// The call tree of the calls in `from..to` (times clipped to the
    /// range), one per thread, heaviest children first, at most
    /// [`MAX_TREE_NODES`] nodes in all; `records` are not counted. Also the range's exceptions by class and
    /// contended monitors, from the markers.
    pub fn tree(&self, from: u64, to: u64, threads: &[u32]) -> Json {
        let to = to.max(from + 1);
        let mut exceptions: HashMap<u32, (u64, u64)> = HashMap::new();
        let mut monitors: HashMap<u32, (u64, u64, u64)> = HashMap::new();
        let mut out = Vec::new();
        let budget = std::cell::Cell::new(MAX_TREE_NODES);
        let visible = |t: &CallTree, n: u32| -> Vec<u32> {
            let mut kids = t.node(n).children.clone();
            kids.sort_by_key(|&c| std::cmp::Reverse(t.node(c).stats.wall_incl_ns));
            let take = kids.len().min(budget.get());
            budget.set(budget.get() - take);
            kids.truncate(take);
            kids
        };
        let opts = ReportOptions {
            syms: &self.syms,
            monitor_name: &|m| monitor_name(&self.syms, m),
            compensated: false,
            cpu: false,
            alloc: false,
            visible: &visible,
        };
        for t in &self.tracks {
            if !threads.is_empty() && !threads.contains(&t.thread) {
                continue;
            }
            let mut ct = CallTree::new();
            // The node of each in-range slice of the level above: (first
            // index, nodes).
            let mut above: (usize, Vec<u32>) = (0, Vec::new());
            for (level, v) in t.levels.iter().enumerate().take(MAX_TREE_DEPTH) {
                let a = v.partition_point(|s| s.end <= from && s.start < from);
                let b = a + v[a..].partition_point(|s| s.start < to);
                let mut here = Vec::with_capacity(b - a);
                for s in &v[a..b] {
                    let parent = if level == 0 {
                        CallTree::ROOT
                    } else {
                        above
                            .1
                            .get((s.parent as usize).wrapping_sub(above.0))
                            .copied()
                            .unwrap_or(CallTree::ROOT)
                    };
                    let n = ct.child(parent, NodeKey::Method(MethodId(s.method)));
                    let st = ct.stats_mut(n);
                    st.wall_incl_ns += s.end.min(to).saturating_sub(s.start.max(from));
                    if s.start >= from {
                        st.calls += 1;
                    }
                    here.push(n);
                }
                above = (a, here);
            }
            if ct.is_empty() {
                continue;
            }
            // Exclusive time: inclusive less the children's.
            for i in 0..ct.len() as u32 {
                let kids: u64 = ct
                    .node(i)
                    .children
                    .iter()
                    .map(|&c| ct.node(c).stats.wall_incl_ns)
                    .sum();
                let st = ct.stats_mut(i);
                if i == CallTree::ROOT {
                    st.wall_incl_ns = kids;
                } else {
                    st.wall_excl_ns = st.wall_incl_ns.saturating_sub(kids);
                }
            }
            let report =
                serde_json::to_value(ct.report(CallTree::ROOT, &opts)).unwrap_or(Json::Null);
            out.push(json!({"thread": t.name, "tree": report}));
            for m in t.markers.iter().flat_map(|v: &Marks| {
                let a = v.partition_point(|m| m.time < from);
                v[a..].iter().take_while(|m| m.time < to)
            }) {
                match m.kind {
                    MarkerKind::Throw => exceptions.entry(m.what).or_default().0 += 1,
                    MarkerKind::Catch => exceptions.entry(m.what).or_default().1 += 1,
                    MarkerKind::Contended => {
                        let e = monitors.entry(m.what).or_default();
                        e.0 += 1;
                        e.1 += m.time - m.start;
                        e.2 = e.2.max(m.time - m.start);
                    }
                    _ => {}
                }
            }
        }
        let mut exc: Vec<_> = exceptions
            .into_iter()
            .map(|(k, (thrown, caught))| {
                (self.syms.string(StringId(k)).to_string(), thrown, caught)
            })
            .collect();
        exc.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut mon: Vec<_> = monitors
            .into_iter()
            .map(|(k, v)| (self.syms.string(StringId(k)).to_string(), v))
            .collect();
        mon.sort_by(|a, b| b.1 .1.cmp(&a.1 .1).then(a.0.cmp(&b.0)));
        json!({
            "from": from,
            "to": to,
            "calltree": {"threads": out, "unmatched_returns": self.unmatched_returns},
            "exceptions": exc.iter().map(|(c, t, k)| json!({"class": c, "thrown": t, "caught": k})).collect::<Vec<_>>(),
            "monitors": mon.iter().map(|(c, (n, tot, max))| json!({"class": c, "contentions": n, "total_wait_ns": tot, "max_wait_ns": max})).collect::<Vec<_>>(),
            "dropped_shorter_than_ns": self.min_ns,
        })
    }
}

/// What a query reads: a finished index's, or a partial one's while it
/// is being built (open calls then end at `clip`, the last event read).
struct Parts<'a> {
    tracks: &'a [Track],
    gc: &'a Marks,
    syms: &'a SymbolTable,
    end_ns: u64,
    clip: u64,
    min_ns: u64,
    dropped_markers: u64,
    dropped_samples: u64,
    unmatched_returns: u64,
}

/// The answer's text, written as it is computed: no JSON tree, so a
/// zoomed-out answer's tens of thousands of rows are not each a vector
/// of values allocated, printed and freed.
struct Text(String);

impl Text {
    fn raw(&mut self, s: &str) {
        self.0.push_str(s);
    }
    fn num(&mut self, v: u64) {
        self.0.push_str(itoa::Buffer::new().format(v));
    }
    fn string(&mut self, s: &str) {
        self.0
            .push_str(&serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into()));
    }
    /// `"key":` (keys are the code's own, never escaped).
    fn key(&mut self, k: &str) {
        self.0.push('"');
        self.0.push_str(k);
        self.0.push_str("\":");
    }
    /// `"key":v,`
    fn field(&mut self, k: &str, v: u64) {
        self.key(k);
        self.num(v);
        self.0.push(',');
    }
    /// `[a,b,...]` of rows of numbers.
    fn rows<const N: usize>(&mut self, rows: &[[u64; N]]) {
        self.0.push('[');
        for (i, r) in rows.iter().enumerate() {
            if i > 0 {
                self.0.push(',');
            }
            self.0.push('[');
            for (k, &v) in r.iter().enumerate() {
                if k > 0 {
                    self.0.push(',');
                }
                self.num(v);
            }
            self.0.push(']');
        }
        self.0.push(']');
    }
}

/// Adds `fields` to the object `answer` (a query's text).
pub fn add_fields(answer: &mut String, fields: &[(&str, &Json)]) {
    if !answer.ends_with('}') {
        return;
    }
    answer.pop();
    for (k, v) in fields {
        if answer.len() > 1 {
            answer.push(',');
        }
        answer.push_str(&serde_json::to_string(k).unwrap_or_default());
        answer.push(':');
        answer.push_str(&v.to_string());
    }
    answer.push('}');
}

/// The first index after `i` where `before` fails, given that it holds at
/// `i` and, along `v`, holds and then fails: an exponential search from
/// `i`, so that a step over k items reads about 2 log k of them, near
/// each other, wherever `i` is.
fn skip<T>(v: &[T], i: usize, before: impl Fn(&T) -> bool) -> usize {
    first_from(v, i + 1, before)
}

/// The first index from `start` on where `before` fails (it holds, then
/// fails, along `v`), by an exponential search from `start`.
fn first_from<T>(v: &[T], start: usize, before: impl Fn(&T) -> bool) -> usize {
    if start >= v.len() {
        return v.len();
    }
    // Everything below `lo` is before.
    let mut lo = start;
    let mut hi = lo;
    let mut step = 1;
    while hi < v.len() && before(&v[hi]) {
        lo = hi + 1;
        hi = lo + step;
        step *= 2;
    }
    let hi = hi.min(v.len());
    lo + v[lo..hi].partition_point(before)
}

fn query_parts(p: &Parts, from: u64, to: u64, px: u64, ns_px: f64, threads: &[u32]) -> String {
    // Calls still open (a partial index) end where the reading is.
    let end = |s: &Slice| s.end.min(p.clip);
    // The end of the pixel holding `t`.
    let pixel_end = |t: u64| -> u64 {
        let k = ((t.saturating_sub(from)) as f64 / ns_px).floor() + 1.0;
        (from + (k * ns_px).ceil() as u64).max(t + 1)
    };
    // Methods are numbered in the order the answer first uses them, not
    // by the trace's handles, so that the same trace read from another
    // format (XML numbers its symbols anew) gives the same answer.
    let mut local: HashMap<u32, u64> = HashMap::new();
    let mut methods: Vec<u32> = Vec::new();
    let mut number = |m: u32| -> u64 {
        *local.entry(m).or_insert_with(|| {
            methods.push(m);
            methods.len() as u64 - 1
        })
    };
    let mut out = Text(String::with_capacity(1 << 16));
    out.raw("{");
    out.field("from", from);
    out.field("to", to);
    out.field("px", px);
    out.field("end_ns", p.end_ns);
    out.key("tracks");
    out.raw("[");
    let mut slices: Vec<[u64; 7]> = Vec::new();
    let mut samples: Vec<[u64; 3]> = Vec::new();
    let mut marks: Vec<[u64; 5]> = Vec::new();
    let mut first = true;
    for t in p.tracks {
        if !threads.is_empty() && !threads.contains(&t.thread) {
            continue;
        }
        slices.clear();
        for (level, v) in t.levels.iter().enumerate() {
            let mut i = v.partition_point(|s| s.end <= from && s.start < from);
            while i < v.len() && v[i].start < to {
                let s = v[i];
                if (end(&s) - s.start) as f64 >= ns_px {
                    slices.push([
                        s.start,
                        end(&s),
                        level as u64,
                        number(s.method),
                        s.call_id,
                        s.ret_id,
                        1,
                    ]);
                    i += 1;
                    continue;
                }
                let pe = pixel_end(s.start);
                let mut j = skip(v, i, |x| x.start < pe);
                // Only the last slice of the pixel can be long.
                if j - i > 1 && (end(&v[j - 1]) - v[j - 1].start) as f64 >= ns_px {
                    j -= 1;
                }
                let last = v[j - 1];
                slices.push([
                    s.start,
                    end(&last),
                    level as u64,
                    number(s.method),
                    s.call_id,
                    if j - i == 1 { s.ret_id } else { 0 },
                    (j - i) as u64,
                ]);
                i = j;
            }
        }
        samples.clear();
        let mut i = t.samples.partition_point(|s| s.0 < from);
        while i < t.samples.len() && t.samples[i].0 < to {
            let pe = pixel_end(t.samples[i].0);
            let j = skip(&t.samples, i, |s| s.0 < pe);
            // The pixel's most frequent state.
            let mut by = [0usize; 8];
            if j - i <= 64 {
                for s in &t.samples[i..j] {
                    by[usize::from(s.1 & 7)] += 1;
                }
            } else {
                by[usize::from(t.samples[i].1 & 7)] = 1;
            }
            let state = (0..8)
                .max_by_key(|&k| (by[k], std::cmp::Reverse(k)))
                .unwrap_or(0);
            samples.push([t.samples[i].0, state as u64, (j - i) as u64]);
            i = j;
        }
        marks.clear();
        for v in &t.markers {
            markers_in(v, from, to, &pixel_end, &mut marks);
        }
        marks.sort_unstable_by_key(|m| (m[1], m[2]));
        if !first {
            out.raw(",");
        }
        first = false;
        out.raw("{");
        out.field("thread", u64::from(t.thread));
        out.key("name");
        if t.name.is_empty() {
            out.string(&p.syms.thread_name(ThreadRef(t.thread)));
        } else {
            out.string(&t.name);
        }
        out.raw(",");
        out.field("first_ns", t.first_ns);
        out.field("last_ns", t.last_ns);
        out.field("levels", t.levels.len() as u64);
        out.key("slices");
        out.rows(&slices);
        out.raw(",");
        out.key("samples");
        out.rows(&samples);
        out.raw(",");
        out.key("markers");
        out.rows(&marks);
        out.raw("}");
    }
    out.raw("],");
    marks.clear();
    markers_in(p.gc, from, to, &pixel_end, &mut marks);
    out.key("gc");
    out.rows(&marks);
    out.raw(",");
    out.key("methods");
    out.raw("{");
    for (i, &m) in methods.iter().enumerate() {
        if i > 0 {
            out.raw(",");
        }
        out.raw("\"");
        out.num(i as u64);
        out.raw("\":");
        let n = MethodNames::resolve(p.syms, vmview_format::MethodId(m));
        out.raw("[");
        out.string(n.class);
        out.raw(",");
        out.string(n.name);
        out.raw(",");
        out.string(n.sig);
        out.raw("]");
    }
    out.raw("},");
    out.key("kinds");
    out.raw("[");
    for (i, k) in KIND_NAMES.iter().enumerate() {
        if i > 0 {
            out.raw(",");
        }
        out.string(k);
    }
    out.raw("],");
    out.field("dropped_shorter_than_ns", p.min_ns);
    out.field("dropped_markers", p.dropped_markers);
    out.field("dropped_samples", p.dropped_samples);
    out.key("unmatched_returns");
    out.num(p.unmatched_returns);
    out.raw("}");
    out.0
}

/// The markers of `v` (all of one kind, in the order of their times) in
/// `from..to`, one per pixel (`[start, time, kind, id, merged]`: the
/// pixel's first, and how many the pixel holds), added to `out`. Each
/// pixel costs one search, however many markers it holds.
fn markers_in(
    v: &Marks,
    from: u64,
    to: u64,
    pixel_end: &dyn Fn(u64) -> u64,
    out: &mut Vec<[u64; 5]>,
) {
    let mut i = v.partition_point(|m| m.time < from);
    while i < v.len() && v[i].start < to {
        let m = v[i];
        let pe = pixel_end(m.time);
        let j = v.skip(i, pe);
        out.push([m.start, m.time, m.kind as u64, m.id, (j - i) as u64]);
        i = j;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmview_format::{
        Loc, MethodId, MethodSymbol, Metrics, Outcome, StringId, Symbol, ThreadRef,
    };

    fn syms() -> SymbolTable {
        let mut s = SymbolTable::default();
        for (i, t) in [
            "shop.A",
            "run",
            "()V",
            "main",
            "java.lang.Object",
            "x.Err",
            "step",
        ]
        .iter()
        .enumerate()
        {
            s.insert(Symbol::String {
                id: StringId(i as u32),
                text: t.to_string(),
            });
        }
        for (id, name) in [(1, 1), (2, 6), (3, 3), (4, 5)] {
            s.insert(Symbol::Method(MethodSymbol {
                id: MethodId(id),
                class: StringId(0),
                name: StringId(name),
                sig: StringId(2),
                param_names: vec![],
                modifiers: 0,
            }));
        }
        s
    }

    fn call(id: u64, t: u64, m: u32) -> Event {
        Event {
            id,
            time_ns: t,
            thread: ThreadRef(1),
            kind: EventKind::Call {
                method: MethodId(m),
                depth: 1,
                caller: None,
                params: vec![],
                metrics: Metrics::NONE,
            },
        }
    }
    fn ret(id: u64, t: u64, m: u32) -> Event {
        Event {
            id,
            time_ns: t,
            thread: ThreadRef(1),
            kind: EventKind::Return {
                method: MethodId(m),
                depth: 1,
                outcome: Outcome::Void,
                elapsed_ns: 0,
                metrics: Metrics::NONE,
            },
        }
    }

    /// run() from 0 to 1000 ns holds 100 step() calls of 5 ns each, every
    /// 10 ns; one THROW at 500.
    fn fixture(limits: Limits) -> Timeline {
        let mut b = TimelineBuilder::new(limits);
        let mut id = 1;
        b.event(&call(id, 0, 1));
        for k in 0..100u64 {
            id += 1;
            b.event(&call(id, k * 10 + 1, 2));
            id += 1;
            b.event(&ret(id, k * 10 + 6, 2));
            if k == 50 {
                id += 1;
                b.event(&Event {
                    id,
                    time_ns: 505,
                    thread: ThreadRef(1),
                    kind: EventKind::Throw {
                        exception: StringId(5),
                        message: None,
                        method: MethodId(2),
                        loc: Loc::default(),
                        catch: None,
                    },
                });
            }
        }
        id += 1;
        b.event(&ret(id, 1000, 1));
        b.finish(&syms())
    }

    fn slices(v: &Json) -> Vec<Vec<u64>> {
        v["tracks"][0]["slices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                s.as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_u64().unwrap())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_zoomed_in_view_has_every_call_as_its_own_slice() {
        let tl = fixture(Limits::default());
        // 200 ns over 2000 px: 0.1 ns a pixel, every call is wide.
        let v = tl.query(
            View {
                from: 100,
                to: 300,
                px: 2000,
            },
            &[],
        );
        let s = slices(&v);
        assert_eq!(s[0][..3], [0, 1000, 0], "run() spans the view");
        let steps: Vec<_> = s.iter().filter(|x| x[2] == 1).collect();
        // Calls starting at 91 (ends 96: out), 101 .. 291 in.
        assert_eq!(steps.len(), 20);
        assert!(steps
            .iter()
            .all(|x| x[6] == 1 && x[1] - x[0] == 5 && x[5] > x[4]));
        assert_eq!(steps[0][0], 101);
        // Methods are numbered by first use in the answer: run() is 0.
        let step = steps[0][3].to_string();
        assert_eq!(step, "1");
        assert_eq!(v["methods"][step.as_str()][1], "step");
        assert_eq!(v["methods"]["0"][1], "run");
    }

    #[test]
    fn a_zoomed_out_view_merges_calls_shorter_than_a_pixel() {
        let tl = fixture(Limits::default());
        // 1000 ns over 10 px: 100 ns a pixel, 10 calls in each.
        let v = tl.query(
            View {
                from: 0,
                to: 1000,
                px: 10,
            },
            &[],
        );
        let s = slices(&v);
        let steps: Vec<_> = s.iter().filter(|x| x[2] == 1).collect();
        assert_eq!(steps.len(), 10, "one bucket a pixel: {steps:?}");
        assert!(steps.iter().all(|x| x[6] == 10), "{steps:?}");
        assert_eq!(steps.iter().map(|x| x[6]).sum::<u64>(), 100);
        assert_eq!(s.iter().filter(|x| x[2] == 0).count(), 1);
        let m = v["tracks"][0]["markers"].as_array().unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0][2], MarkerKind::Throw as u8);
    }

    /// A pixel holding thousands of markers of two kinds: one mark of each
    /// kind, each with its exact count, however dense the pixel.
    #[test]
    fn a_dense_pixel_counts_each_kind_of_marker_exactly() {
        let mut b = TimelineBuilder::new(Limits::default());
        let mut id = 1;
        b.event(&call(id, 0, 1));
        for k in 0..3000u64 {
            id += 1;
            let kind = if k % 3 == 0 {
                EventKind::Catch {
                    exception: StringId(5),
                    method: MethodId(1),
                    loc: Loc::default(),
                }
            } else {
                EventKind::Throw {
                    exception: StringId(5),
                    message: None,
                    method: MethodId(1),
                    loc: Loc::default(),
                    catch: None,
                }
            };
            b.event(&Event {
                id,
                time_ns: 10 + k / 10,
                thread: ThreadRef(1),
                kind,
            });
        }
        id += 1;
        b.event(&ret(id, 1000, 1));
        let tl = b.finish(&syms());
        // 0..1000 over 2 px: 10..310 is all in the first pixel.
        let v = tl.query(
            View {
                from: 0,
                to: 1000,
                px: 2,
            },
            &[],
        );
        let m = v["tracks"][0]["markers"].as_array().unwrap();
        let got: Vec<(u64, u64, u64)> = m
            .iter()
            .map(|x| {
                (
                    x[1].as_u64().unwrap(),
                    x[2].as_u64().unwrap(),
                    x[4].as_u64().unwrap(),
                )
            })
            .collect();
        let (throw, catch) = (MarkerKind::Throw as u64, MarkerKind::Catch as u64);
        assert_eq!(got, [(10, throw, 2000), (10, catch, 1000)]);
        // Zoomed in to 1 ns a pixel: a mark per time and kind.
        let v = tl.query(
            View {
                from: 100,
                to: 110,
                px: 10,
            },
            &[],
        );
        let m = v["tracks"][0]["markers"].as_array().unwrap();
        let got: Vec<[u64; 3]> = m
            .iter()
            .map(|x| [1, 2, 4].map(|k| x[k].as_u64().unwrap()))
            .collect();
        let mut want = Vec::new();
        for t in 100..110u64 {
            let ks = (t - 10) * 10..(t - 10) * 10 + 10;
            let catches = ks.filter(|k| k % 3 == 0).count() as u64;
            want.push([t, throw, 10 - catches]);
            want.push([t, catch, catches]);
        }
        assert_eq!(got, want);
    }

    /// The answer is written as text: names that JSON must escape come
    /// back as they were, and fields added to it are parsed as the others.
    #[test]
    fn the_answer_text_escapes_names_and_takes_added_fields() {
        let hostile = "t\"1</script>\u{2028}\n\\ \u{1}é";
        let mut table = syms();
        table.insert(Symbol::String {
            id: StringId(7),
            text: hostile.into(),
        });
        table.insert(Symbol::Thread(vmview_format::ThreadSymbol {
            id: ThreadRef(1),
            java_id: 1,
            name: StringId(7),
            group: StringId(7),
            priority: 5,
            daemon: false,
        }));
        let mut b = TimelineBuilder::new(Limits::default());
        b.event(&call(1, 0, 1));
        b.event(&ret(2, 10, 1));
        let tl = b.finish(&table);
        let view = View {
            from: 0,
            to: 11,
            px: 100,
        };
        let mut text = tl.query_text(view, &[]);
        let v: Json = serde_json::from_str(&text).expect("JSON");
        assert_eq!(v["tracks"][0]["name"], hostile);
        assert_eq!(v, tl.query(view, &[]));
        add_fields(
            &mut text,
            &[("index", &json!({"from": "saved"})), ("n", &json!(3))],
        );
        let w: Json = serde_json::from_str(&text).expect("JSON");
        assert_eq!(w["index"]["from"], "saved");
        assert_eq!(w["n"], 3);
        assert_eq!(w["tracks"], v["tracks"]);
    }

    /// The exponential search finds what a binary search over the rest
    /// finds, from anywhere.
    #[test]
    fn skip_finds_the_end_of_a_run_from_anywhere() {
        let v: Vec<u64> = (0..300).map(|k| k / 7 * 7).collect();
        let mut marks = Marks::default();
        for (k, &time) in v.iter().enumerate() {
            marks.push(Marker {
                start: time,
                time,
                id: k as u64,
                what: 0,
                kind: MarkerKind::Throw,
            });
        }
        assert_eq!(Marks::from(marks.v.clone()).coarse, marks.coarse);
        for i in 0..v.len() {
            for pe in v[i] + 1..v[i] + 100 {
                let want = i + v[i..].partition_point(|&x| x < pe);
                assert_eq!(skip(&v, i, |&x| x < pe), want, "from {i} to {pe}");
                assert_eq!(marks.skip(i, pe), want, "marks from {i} to {pe}");
            }
        }
    }

    #[test]
    fn the_slices_over_budget_lose_the_shortest_calls() {
        let tl = fixture(Limits {
            slices: 50,
            ..Limits::default()
        });
        let v = tl.query(
            View {
                from: 0,
                to: 1000,
                px: 1000,
            },
            &[],
        );
        assert_eq!(v["dropped_shorter_than_ns"], 1000);
        let s = slices(&v);
        assert_eq!(s.len(), 1, "only run() kept: {s:?}");
        assert_eq!(s[0][..2], [0, 1000]);
    }

    /// Over budget, short calls go and long ones stay, still nested: run()
    /// holds 20 × main() of 20 µs, each holding step() of 2 µs holding
    /// x.Err() of 100 ns, and 3 × 200 ns step() calls after each main().
    #[test]
    fn dropping_short_calls_keeps_the_long_ones_nested() {
        let mut b = TimelineBuilder::new(Limits {
            slices: 60,
            ..Limits::default()
        });
        let mut id = 0;
        let mut ev = |e: fn(u64, u64, u32) -> Event, t: u64, m: u32, b: &mut TimelineBuilder| {
            id += 1;
            b.event(&e(id, t, m));
        };
        ev(call, 0, 1, &mut b);
        for k in 0..20u64 {
            let t = k * 40_000;
            ev(call, t + 1_000, 3, &mut b);
            ev(call, t + 2_000, 2, &mut b);
            ev(call, t + 2_500, 4, &mut b);
            ev(ret, t + 2_600, 4, &mut b);
            ev(ret, t + 4_000, 2, &mut b);
            ev(ret, t + 21_000, 3, &mut b);
            for j in 0..3 {
                ev(call, t + 22_000 + j * 1_000, 2, &mut b);
                ev(ret, t + 22_200 + j * 1_000, 2, &mut b);
            }
        }
        ev(ret, 800_000, 1, &mut b);
        let tl = b.finish(&syms());
        let v = tl.query(
            View {
                from: 0,
                to: 800_001,
                px: 8000,
            },
            &[],
        );
        assert_eq!(v["dropped_shorter_than_ns"], 1000);
        let s = slices(&v);
        let at = |l: u64| s.iter().filter(|x| x[2] == l).count();
        assert_eq!((at(0), at(1), at(2), at(3)), (1, 20, 20, 0), "{s:?}");
        let t = tl.tree(0, 800_001, &[]);
        let run = &t["calltree"]["threads"][0]["tree"]["children"][0];
        assert_eq!(run["name"], "shop.A.run");
        let main = &run["children"][0];
        assert_eq!(
            (main["calls"].as_u64(), main["wall_incl_ns"].as_u64()),
            (Some(20), Some(400_000))
        );
        let step = &main["children"][0];
        assert_eq!(
            (step["calls"].as_u64(), step["wall_incl_ns"].as_u64()),
            (Some(20), Some(40_000))
        );
        assert_eq!(
            run["children"].as_array().unwrap().len(),
            1,
            "the short step() calls are gone"
        );
    }

    /// The parallel build (chunks scanned on a pool, CALL/RETURN as
    /// heads) must give the sequential reader's index: a trace of small
    /// chunks, three threads, markers and samples, and a budget small
    /// enough that short calls are dropped while it is read.
    #[test]
    fn the_parallel_build_gives_the_sequential_index() {
        use vmview_format::{StackId, ThreadState, TraceHeader, TraceWriter};
        let dir = std::env::temp_dir().join(format!("vmview-tl-par-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("par.vmv");
        let header = TraceHeader {
            version: 1,
            pid: 1,
            start_unix_ns: 0,
            properties: vec![],
        };
        let out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let mut w = TraceWriter::with_chunk_size(out, &header, 2048).unwrap();
        let table = syms();
        for i in 0..7 {
            w.define(Symbol::String {
                id: StringId(i),
                text: table.string(StringId(i)).to_string(),
            });
        }
        for m in 1..=4 {
            w.define(Symbol::Method(table.method(MethodId(m)).unwrap().clone()));
        }
        for th in 0..3 {
            w.define(Symbol::Thread(vmview_format::ThreadSymbol {
                id: ThreadRef(th),
                java_id: i64::from(th),
                name: StringId(3),
                group: StringId(3),
                priority: 5,
                daemon: false,
            }));
        }
        w.define(Symbol::Stack(vmview_format::StackSymbol {
            id: StackId(0),
            types: Vec::new(),
            frames: vec![(MethodId(1), Loc::default())],
        }));
        let mut id = 0;
        let mut ev = |w: &mut TraceWriter<_>, t: u64, th: u32, kind: EventKind| {
            id += 1;
            w.write(&Event {
                id,
                time_ns: t,
                thread: ThreadRef(th),
                kind,
            })
            .unwrap();
        };
        let call = |m| call(0, 0, m).kind;
        let ret = |m| ret(0, 0, m).kind;
        for th in 0..3u32 {
            ev(&mut w, u64::from(th), th, call(1));
        }
        let mut t = 10;
        for k in 0..3000u64 {
            let th = (k % 3) as u32;
            ev(&mut w, t, th, call(2));
            ev(&mut w, t + 1 + k % 7 * 400, th, call(4));
            ev(&mut w, t + 2 + k % 7 * 400, th, ret(4));
            t += 3 + k % 7 * 500;
            ev(&mut w, t, th, ret(2));
            if k % 50 == 0 {
                let kind = EventKind::Sample {
                    state: ThreadState::Run,
                    stack: StackId(0),
                    monitors: vec![],
                };
                ev(&mut w, t, th, kind);
                let kind = EventKind::Throw {
                    exception: StringId(5),
                    message: None,
                    method: MethodId(2),
                    loc: Loc::default(),
                    catch: None,
                };
                ev(&mut w, t, th, kind);
            }
            t += 1;
        }
        for th in 0..3u32 {
            ev(&mut w, t, th, ret(1));
        }
        w.finish().unwrap();
        let chunks = ChunkFile::open(&path)
            .unwrap()
            .expect("clean")
            .chunks()
            .len();
        assert!(chunks > 10, "{chunks} chunks");
        let limits = Limits {
            slices: 2000,
            markers: 40,
            samples: 30,
        };
        let read = AtomicU64::new(0);
        let par = Timeline::build_with(&path, limits, &read, true, &Building::default()).unwrap();
        assert_eq!(read.load(Ordering::Relaxed), id);
        let seq = Timeline::build_with(&path, limits, &read, false, &Building::default()).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(par.min_ns >= 1000, "calls were dropped: {}", par.min_ns);
        assert!(par.dropped_markers > 0 && par.dropped_samples > 0);
        let whole = View {
            from: 0,
            to: t + 1,
            px: 8000,
        };
        assert_eq!(par.query(whole, &[]), seq.query(whole, &[]));
        assert_eq!(par.tree(0, t + 1, &[]), seq.tree(0, t + 1, &[]));
        assert_eq!(par.exact(), seq.exact());
    }

    /// While the index is built, the part read so far is shown: calls not
    /// yet returned end at the last event read, threads are named.
    #[test]
    fn a_partial_index_shows_open_calls_up_to_the_last_event_read() {
        let mut b = TimelineBuilder::new(Limits::default());
        b.syms = syms();
        b.syms.insert(Symbol::Thread(vmview_format::ThreadSymbol {
            id: ThreadRef(1),
            java_id: 1,
            name: StringId(3),
            group: StringId(3),
            priority: 5,
            daemon: false,
        }));
        let mut id = 1;
        b.event(&call(id, 0, 1));
        for k in 0..30u64 {
            id += 1;
            b.event(&call(id, k * 10 + 1, 2));
            id += 1;
            b.event(&ret(id, k * 10 + 6, 2));
        }
        id += 1;
        b.event(&call(id, 301, 2));
        let v = b.partial_query(
            View {
                from: 0,
                to: 1000,
                px: 2000,
            },
            &[],
        );
        let v: Json = serde_json::from_str(&v).unwrap();
        assert_eq!(v["end_ns"], 301);
        assert_eq!(v["tracks"][0]["name"], "main");
        let s = slices(&v);
        assert_eq!(s[0][..3], [0, 301, 0], "run() open, up to 301");
        let steps: Vec<_> = s.iter().filter(|x| x[2] == 1).collect();
        assert_eq!(steps.len(), 31);
        assert_eq!(steps[30][..2], [301, 301], "the open step() is empty");
        assert_eq!(steps[29][..2], [291, 296]);
    }

    #[test]
    fn a_range_tree_clips_time_to_the_range() {
        let tl = fixture(Limits::default());
        let t = tl.tree(0, 1000, &[]);
        let run = &t["calltree"]["threads"][0]["tree"]["children"][0];
        assert_eq!(run["name"], "shop.A.run");
        assert_eq!(run["method"]["sig"], "()V");
        assert_eq!(run["wall_incl_ns"], 1000);
        assert_eq!(run["children"][0]["calls"], 100);
        assert_eq!(run["children"][0]["wall_incl_ns"], 500);
        assert_eq!(run["wall_excl_ns"], 500);
        assert_eq!(t["exceptions"][0]["class"], "x.Err");
        // 103..203: step() calls at 111..191 whole (9 × 5), 101's last 3 ns
        // and 201's first 2 ns.
        let t = tl.tree(103, 203, &[]);
        let run = &t["calltree"]["threads"][0]["tree"]["children"][0];
        assert_eq!(run["wall_incl_ns"], 100);
        assert_eq!(run["calls"], 0, "run() started before the range");
        assert_eq!(run["children"][0]["wall_incl_ns"], 9 * 5 + 3 + 2);
        assert_eq!(run["children"][0]["calls"], 10);
        assert_eq!(t["exceptions"].as_array().unwrap().len(), 0);
    }
}
