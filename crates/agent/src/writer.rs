//! The writer thread: the only place the agent does file I/O.
//!
//! It is a plain OS thread, not attached to the JVM (it never calls JNI or
//! JVMTI). It wakes every 25 ms (or `flush=`, if shorter; often enough that a
//! busy thread's buffer stays within the capacity it keeps between drains), drains the
//! thread buffers, then the pending symbols (so every drained event has its
//! symbols), sorts the batch by time, numbers the events 1, 2, 3 … and
//! hands them to the [`TraceWriter`], ending a chunk at least every
//! `flush=` so a killed JVM loses at most that much.
//!
//! Events are taken with a short hold-back: a callback stamps its event
//! when it starts and pushes it when it ends, so an event younger than
//! [`HOLD_BACK_NS`] may still be overtaken by an older one of another
//! thread; it waits for the next round. On stop, everything is written and
//! `finish()` writes the index footer.

use crate::agent::Agent;
use crate::clock;
use crate::slot::{Slot, Written};
use crate::threads::unknown_thread;
use std::fs::File;
use std::io::BufWriter;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use vmview_format::{Event, EventKind, Symbol, ThreadRef, TraceHeader, TraceWriter, WindowReason};

/// How long an event waits before it is considered safe to order.
const HOLD_BACK_NS: u64 = 20_000_000;
const TICK: Duration = Duration::from_millis(25);

pub struct WriterThread {
    shared: Arc<Shared>,
    handle: JoinHandle<()>,
}

#[derive(Default)]
struct Shared {
    stop: Mutex<bool>,
    wake: Condvar,
}

impl WriterThread {
    pub fn spawn(
        agent: &'static Agent,
        file: File,
        header: TraceHeader,
    ) -> std::io::Result<WriterThread> {
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let handle = std::thread::Builder::new()
            .name("vmview-writer".to_string())
            .spawn(move || {
                let mut w = Writer::new(agent, file, &header);
                w.run(&s);
            })?;
        Ok(WriterThread { shared, handle })
    }

    /// Asks the thread to write everything and finish the file; waits.
    pub fn stop_and_join(self) {
        *self.shared.stop.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.shared.wake.notify_all();
        let _ = self.handle.join();
    }
}

struct Writer {
    agent: &'static Agent,
    /// `None` once writing failed: buffers are still drained, so memory
    /// stays bounded, but nothing more is written.
    out: Option<TraceWriter<BufWriter<File>>>,
    /// Events taken from the buffers and not yet written, and the ids.
    seq: Sequencer,
    symbols: Vec<Symbol>,
    drops_reported: u64,
    /// Thread handle for DROPPED events, defined on first use.
    agent_thread: Option<ThreadRef>,
    /// The first write error, said on stderr when it happens; the count
    /// of [`Writer::lost`] follows in the final report.
    failure: std::cell::RefCell<Option<String>>,
    /// Events drained and discarded because writing had stopped.
    lost: u64,
    /// The `adapt=` controller's measurements.
    adapt: Adapt,
}

/// CALL/RETURN events written since the last `adapt=` decision, and the
/// deepest CALL seen so far.
struct Adapt {
    since: Instant,
    calls: u64,
    deepest: u32,
}

/// How often `adapt=` looks at the rate.
const ADAPT_EVERY: Duration = Duration::from_millis(500);

impl Writer {
    fn new(agent: &'static Agent, file: File, header: &TraceHeader) -> Writer {
        let mut w = Writer {
            agent,
            out: None,
            seq: Sequencer::new(),
            symbols: Vec::new(),
            drops_reported: 0,
            agent_thread: None,
            failure: std::cell::RefCell::new(None),
            lost: 0,
            adapt: Adapt {
                since: Instant::now(),
                calls: 0,
                deepest: 0,
            },
        };
        let version = agent.options.format;
        let out = w.attempt("open", move || {
            TraceWriter::with_version(
                BufWriter::new(file),
                header,
                vmview_format::DEFAULT_CHUNK_BYTES,
                version,
            )
        });
        w.out = out;
        w
    }

    /// Runs a trace-writer operation, turning an error or a panic into a
    /// counted problem.
    fn attempt<T>(
        &self,
        what: &str,
        f: impl FnOnce() -> Result<T, vmview_format::FormatError>,
    ) -> Option<T> {
        match std::panic::catch_unwind(AssertUnwindSafe(f)) {
            Ok(Ok(v)) => Some(v),
            Ok(Err(e)) => {
                let message = format!("{what}: {e}");
                let quiet = self.agent.options.quiet;
                self.agent.problems.writer_stopped(&message, quiet);
                self.failure.borrow_mut().get_or_insert(message);
                None
            }
            Err(_) => {
                self.agent.problems.panic("writer thread");
                None
            }
        }
    }

    fn run(&mut self, shared: &Shared) {
        let flush_every = self.agent.options.flush;
        let tick = TICK.min(flush_every);
        let mut last_flush = Instant::now();
        loop {
            let stopping = {
                let stop = shared.stop.lock().unwrap_or_else(|e| e.into_inner());
                if *stop {
                    true
                } else {
                    let (stop, _) = shared
                        .wake
                        .wait_timeout(stop, tick)
                        .unwrap_or_else(|e| e.into_inner());
                    *stop
                }
            };
            // A panic in a round must not end the thread: the file would
            // lose its footer and every later event. The round's events
            // may be lost; the problem is reported.
            if std::panic::catch_unwind(AssertUnwindSafe(|| self.round(stopping))).is_err() {
                self.agent.problems.panic("writer thread");
            }
            if stopping || last_flush.elapsed() >= flush_every {
                if let Some(mut out) = self.out.take() {
                    self.out = self.attempt("flush", || out.flush()).map(|()| out);
                }
                last_flush = Instant::now();
            }
            if stopping {
                break;
            }
        }
        if let Some(out) = self.out.take() {
            self.attempt("finish", move || out.finish());
        }
        if self.failure.take().is_some() {
            self.agent.problems.writer_lost(self.lost);
        }
    }

    /// One round: every event published so far joins the held ones, then
    /// the symbols they may use are taken; the batch is ordered by time
    /// and the events older than the hold-back are numbered and written
    /// ([`Sequencer`]).
    fn round(&mut self, everything: bool) {
        // Not past a PERIOD_START still being prepared: the calls of its
        // period must not be written before it. Read before the buffers
        // are: a hold lifted since has its PERIOD_STARTs in them, and a
        // hold not yet set comes with a period whose calls are all later
        // than this `now`.
        let cutoff = if everything {
            u64::MAX
        } else {
            let now = clock::now_ns();
            let hold = self.agent.hold_from.load(Ordering::Acquire);
            now.saturating_sub(HOLD_BACK_NS).min(hold)
        };
        let heap_bytes = self.seq.take_from(&self.agent.buffers);
        self.agent.buffers.retire(heap_bytes);
        self.agent.symbols.drain_pending(&mut self.symbols);
        self.seq.order();
        let dropped = self
            .agent
            .buffers
            .dropped()
            .saturating_sub(self.drops_reported);
        if dropped > 0 {
            self.agent_thread();
        }
        self.drops_reported += dropped;

        let Some(mut out) = self.out.take() else {
            self.symbols.clear();
            self.lost += self.seq.discard_ready(cutoff);
            return;
        };
        // Event times count from the agent's first start; a recording
        // started later counts from its own start.
        let origin = self.agent.time_origin_ns;
        let symbols = std::mem::take(&mut self.symbols);
        let mut stats = RoundStats::default();
        let mut seq = std::mem::take(&mut self.seq);
        let ok = self.attempt("write", || {
            for s in symbols {
                out.define(s);
            }
            seq.write_ready(cutoff, origin, &mut out, &mut stats)
        });
        self.seq = seq;
        self.adapt.calls += stats.calls;
        self.adapt.deepest = self.adapt.deepest.max(stats.deepest);
        let ok = ok.and_then(|()| {
            if dropped == 0 {
                return Some(());
            }
            let thread = self.agent_thread?;
            let report = Event {
                id: self.seq.next_id,
                time_ns: self.seq.last_time,
                thread,
                kind: EventKind::Dropped { count: dropped },
            };
            self.seq.next_id += 1;
            self.attempt("write", || out.write(&report))
        });
        self.agent
            .written
            .store(self.seq.next_id - 1, Ordering::Relaxed);
        if ok.is_some() {
            self.out = Some(out);
        } else {
            self.lost += stats.ready + u64::from(dropped > 0);
        }
        if self.agent.options.adapt.is_some() && !everything {
            self.adapt_window();
        }
    }

    /// `adapt=`: every [`ADAPT_EVERY`], narrows the depth window when the
    /// CALL/RETURN rate is over twice the target (halving the depths
    /// below its deep end) and widens it back when the rate is under half,
    /// never past `depth=`; each move is written as a TRACE_WINDOW event.
    fn adapt_window(&mut self) {
        let Some(target) = self.agent.options.adapt else {
            return;
        };
        let elapsed = self.adapt.since.elapsed();
        if elapsed < ADAPT_EVERY {
            return;
        }
        let rate =
            (u128::from(self.adapt.calls) * 1_000_000_000 / elapsed.as_nanos().max(1)) as u64;
        self.adapt.since = Instant::now();
        self.adapt.calls = 0;
        let configured = self.agent.options.depth;
        let current = crate::agent::unpack_window(self.agent.window.load(Ordering::Relaxed));
        let deep_end = current.max.unwrap_or(self.adapt.deepest);
        let (max, reason) = if rate > target.saturating_mul(2) {
            let narrower = current.min + (deep_end.saturating_sub(current.min)) / 2;
            if narrower >= deep_end {
                return;
            }
            (Some(narrower), WindowReason::Narrow)
        } else if rate < target / 2 {
            let Some(max) = current.max else { return };
            if Some(max) == configured.max {
                return;
            }
            let wider = max + (max - current.min).max(1);
            let wider = match configured.max {
                Some(m) => Some(wider.min(m)),
                None if wider >= self.adapt.deepest => None,
                None => Some(wider),
            };
            (wider, WindowReason::Widen)
        } else {
            return;
        };
        let window = vmview_options::DepthWindow {
            min: current.min,
            max,
        };
        self.agent
            .window
            .store(crate::agent::pack_window(window), Ordering::Relaxed);
        let thread = self.agent_thread();
        let Some(mut out) = self.out.take() else {
            return;
        };
        let symbols = std::mem::take(&mut self.symbols);
        let ev = Event {
            id: self.seq.next_id,
            time_ns: clock::now_ns().saturating_sub(self.agent.time_origin_ns),
            thread,
            kind: EventKind::TraceWindow {
                min_depth: window.min,
                max_depth: window.max,
                reason,
                rate_per_s: rate,
            },
        };
        self.seq.next_id += 1;
        if self
            .attempt("write", || {
                for s in symbols {
                    out.define(s);
                }
                out.write(&ev)
            })
            .is_some()
        {
            self.out = Some(out);
        }
    }

    /// The thread handle of the agent's own events (DROPPED,
    /// TRACE_WINDOW), its symbol queued on first use.
    fn agent_thread(&mut self) -> ThreadRef {
        if let Some(t) = self.agent_thread {
            return t;
        }
        let id = self.agent.symbols.new_thread_ref();
        self.symbols.push(Symbol::Thread(unknown_thread(
            self.agent,
            id,
            "vmview agent",
        )));
        self.agent.symbols.drain_pending(&mut self.symbols);
        self.agent_thread = Some(id);
        id
    }
}

/// What one [`Sequencer::write_ready`] wrote, for `adapt=` and the count
/// of lost events.
#[derive(Default)]
pub struct RoundStats {
    /// Events ready (older than the cutoff): written, or lost on an error.
    pub ready: u64,
    /// CALL and RETURN events among them.
    pub calls: u64,
    /// The deepest CALL among them.
    pub deepest: u32,
}

/// The writer's work on events, apart from the agent and its thread:
/// slots in, trace bytes out (`benches/writer.rs` measures it on one
/// core).
///
/// A round takes every thread's published slots ([`take_from`]), orders
/// them by time with the held ones ([`order`]) and numbers and writes
/// those older than the cutoff ([`write_ready`]). A thread's slots are
/// almost always in time order already (a THROW whose catch site was not
/// yet known is pushed after the calls that followed it), so ordering is
/// a stable merge of per-thread runs, each sorted first only if it is not
/// in order: the same order as a stable sort of all the slots, held ones
/// first, without a sort's scratch memory. The vectors keep their
/// capacity from round to round, so a busy round touches no fresh pages.
///
/// [`take_from`]: Sequencer::take_from
/// [`order`]: Sequencer::order
/// [`write_ready`]: Sequencer::write_ready
pub struct Sequencer {
    /// Slots not written yet, in time order: `held[held_start..]`; the
    /// ones before `held_start` were moved out (written or dropped).
    held: Vec<Slot>,
    held_start: usize,
    /// Slots taken this round, one thread's run after another's.
    incoming: Vec<Slot>,
    /// Where each run ends in `incoming`.
    run_ends: Vec<usize>,
    /// The merge's output (then swapped with `held`), kept for its pages.
    merged: Vec<Slot>,
    /// The id of the next event written.
    pub next_id: u64,
    /// The latest time written (origin subtracted).
    pub last_time: u64,
}

impl Default for Sequencer {
    fn default() -> Self {
        Sequencer::new()
    }
}

impl Drop for Sequencer {
    fn drop(&mut self) {
        let (start, len) = (self.held_start, self.held.len());
        // SAFETY: slots before `held_start` were moved out; the rest are
        // live and dropped here, once (`len` is 0 first, so a panicking
        // drop leaks instead of dropping twice).
        unsafe {
            self.held.set_len(0);
            let live = self.held.as_mut_ptr().add(start);
            std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(live, len - start));
        }
    }
}

impl Sequencer {
    pub fn new() -> Sequencer {
        Sequencer {
            held: Vec::new(),
            held_start: 0,
            incoming: Vec::new(),
            run_ends: Vec::new(),
            merged: Vec::new(),
            next_id: 1,
            last_time: 0,
        }
    }

    /// Takes every published slot out of `buffers`, per thread, leaving
    /// out the calibration's calls (made to be timed, not kept). Returns
    /// the heap bytes the taken slots held, for [`Buffers::retire`].
    ///
    /// [`Buffers::retire`]: crate::buffers::Buffers::retire
    pub fn take_from(&mut self, buffers: &crate::buffers::Buffers) -> u64 {
        let mut heap = 0;
        let mut snapshot = buffers.snapshot();
        if let [t] = &snapshot[..] {
            let after_held = self.run_ends.is_empty()
                && self.incoming.is_empty()
                && t.first_time_ns().is_some_and(|first| {
                    self.held[self.held_start..]
                        .last()
                        .is_none_or(|last| last.time_ns() <= first)
                });
            if after_held {
                if let Some(t) = snapshot.pop() {
                    return self.take_after_held(t);
                }
            }
        }
        for t in snapshot {
            let start = self.incoming.len();
            let mut calibration = false;
            t.take_all(&mut self.incoming, |s| {
                heap += s.heap_bytes();
                calibration |= s.is_call_of(crate::calibrate::CALIBRATION_METHOD);
            });
            self.end_run(start, calibration);
        }
        heap
    }

    /// One busy thread, the common case: when its events all come after
    /// the held ones, they are moved straight behind them, in the order
    /// [`order`](Sequencer::order) would give, without the copy into
    /// `incoming` and the merge's second copy (each a pass over every
    /// event's 40 bytes, most of a round's memory traffic). The caller
    /// checked that nothing else is incoming and that `t`'s first event
    /// is not older than the last held one. Returns the heap bytes taken,
    /// as [`take_from`](Sequencer::take_from) does.
    fn take_after_held(&mut self, t: crate::buffers::ThreadEvents) -> u64 {
        // Forget the slots written already: the live ones move to the
        // front, so `held` stays as large as a round needs.
        let live = self.held.len() - self.held_start;
        // SAFETY: `held_start..len` are live, `0..held_start` were moved
        // out; the live ones are moved (overlapping copy) to `0..live`.
        unsafe {
            let p = self.held.as_mut_ptr();
            std::ptr::copy(p.add(self.held_start), p, live);
            self.held.set_len(live);
        }
        self.held_start = 0;
        let start = self.held.len();
        let (mut heap, mut calibration) = (0, false);
        t.take_all(&mut self.held, |s| {
            heap += s.heap_bytes();
            calibration |= s.is_call_of(crate::calibrate::CALIBRATION_METHOD);
        });
        let sorted = self.held[start..]
            .windows(2)
            .all(|w| w[0].time_ns() <= w[1].time_ns());
        if calibration || !sorted {
            // Rare (the calibration's loop, or a thread whose events were
            // pushed out of time order): the general way.
            let run = self.held.split_off(start);
            let begin = self.incoming.len();
            self.incoming.extend(run);
            self.end_run(begin, calibration);
        }
        heap
    }

    /// Ends the run that starts at `incoming[start]`: leaves out the
    /// calibration's calls when it has any, and marks where it ends.
    fn end_run(&mut self, start: usize, calibration: bool) {
        if calibration {
            let mut i = 0;
            self.incoming.retain(|s| {
                i += 1;
                i <= start || !s.is_call_of(crate::calibrate::CALIBRATION_METHOD)
            });
        }
        if self.incoming.len() > start {
            self.run_ends.push(self.incoming.len());
        }
    }

    /// Adds one thread's slots, in push order (for the benchmark and
    /// tests; the writer uses [`take_from`](Sequencer::take_from)).
    pub fn add_run(&mut self, run: impl IntoIterator<Item = Slot>) {
        let start = self.incoming.len();
        self.incoming.extend(run);
        self.end_run(start, false);
    }

    /// Merges the slots taken since the last call into the held ones, in
    /// time order (stable: held first, then the runs in the order taken).
    pub fn order(&mut self) {
        let mut start = 0;
        for &end in &self.run_ends {
            let run = &mut self.incoming[start..end];
            if !run.windows(2).all(|w| w[0].time_ns() <= w[1].time_ns()) {
                run.sort_by_key(Slot::time_ns);
            }
            start = end;
        }
        if self.run_ends.is_empty() {
            return;
        }
        let held = self.held.len() - self.held_start;
        if held == 0 && self.run_ends.len() == 1 {
            // One thread's run and nothing held: it is the order.
            // SAFETY: every slot of `held` was moved out.
            unsafe { self.held.set_len(0) };
            self.held_start = 0;
            self.run_ends.clear();
            std::mem::swap(&mut self.held, &mut self.incoming);
            return;
        }
        let mut runs: Vec<(*const Slot, *const Slot)> = Vec::with_capacity(self.run_ends.len() + 1);
        // SAFETY: pointers into live slots of `held` and `incoming`, in
        // bounds; nothing else touches the vectors until the merge is done.
        unsafe {
            if held > 0 {
                let p = self.held.as_ptr().add(self.held_start);
                runs.push((p, p.add(held)));
            }
            let base = self.incoming.as_ptr();
            let mut start = 0;
            for &end in &self.run_ends {
                runs.push((base.add(start), base.add(end)));
                start = end;
            }
        }
        self.merged.clear();
        self.merged.reserve(held + self.incoming.len());
        // SAFETY: every run's slots are live and moved into `merged`
        // exactly once; the sources forget them right after (`set_len`),
        // with nothing that can panic in between.
        unsafe {
            merge_runs(&mut runs, &mut self.merged);
            self.held.set_len(0);
            self.incoming.set_len(0);
        }
        self.held_start = 0;
        self.run_ends.clear();
        std::mem::swap(&mut self.held, &mut self.merged);
    }

    /// Slots held (taken and not yet written).
    pub fn held(&self) -> usize {
        self.held.len() - self.held_start
    }

    /// The held slots older than `cutoff`, moved out one by one (each
    /// counts as gone before it is used, so a panic cannot free it twice).
    fn ready(&mut self, cutoff: u64) -> impl Iterator<Item = Slot> + '_ {
        let end = self.held_start
            + self.held[self.held_start..].partition_point(|e| e.time_ns() < cutoff);
        std::iter::from_fn(move || {
            if self.held_start == end {
                return None;
            }
            let i = self.held_start;
            self.held_start += 1;
            // SAFETY: slot `i` is live and, `held_start` being past it,
            // never read or dropped again through `held`.
            Some(unsafe { std::ptr::read(self.held.as_ptr().add(i)) })
        })
    }

    /// Drops the held slots older than `cutoff` unwritten (writing has
    /// failed); returns how many.
    pub fn discard_ready(&mut self, cutoff: u64) -> u64 {
        self.ready(cutoff).count() as u64
    }

    /// Numbers the held slots older than `cutoff` and writes them, times
    /// made relative to `origin`. On an error the rest of the ready slots
    /// are dropped (numbered all the same).
    pub fn write_ready<W: std::io::Write>(
        &mut self,
        cutoff: u64,
        origin: u64,
        out: &mut TraceWriter<W>,
        stats: &mut RoundStats,
    ) -> Result<(), vmview_format::FormatError> {
        let first_id = self.next_id;
        let mut last_time = self.last_time;
        let (mut calls, mut deepest, mut ready) = (0u64, 0u32, 0u64);
        let mut result = Ok(());
        let mut slots = self.ready(cutoff);
        for slot in slots.by_ref() {
            let id = first_id + ready;
            ready += 1;
            last_time = last_time.max(slot.time_ns().saturating_sub(origin));
            match slot.write_to(id, origin, out) {
                Ok(Written::Call { depth }) => {
                    calls += 1;
                    deepest = deepest.max(depth);
                }
                Ok(Written::Return) => calls += 1,
                Ok(Written::Other) => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        // After an error: the rest are dropped.
        ready += slots.count() as u64;
        self.next_id = first_id + ready;
        self.last_time = last_time;
        stats.ready += ready;
        stats.calls += calls;
        stats.deepest = stats.deepest.max(deepest);
        result
    }
}

/// Moves the slots of `runs` (each in time order) into `out`'s spare
/// capacity in time order; equal times keep the runs' order.
///
/// # Safety
/// Each run is a range of live slots, `out` has room for all of them,
/// and the caller forgets the sources' slots afterwards.
unsafe fn merge_runs(runs: &mut [(*const Slot, *const Slot)], out: &mut Vec<Slot>) {
    unsafe {
        let mut to = out.as_mut_ptr().add(out.len());
        let total: usize = runs.iter().map(|&(a, b)| b.offset_from(a) as usize).sum();
        match runs {
            [] => {}
            [(a, b)] => {
                std::ptr::copy_nonoverlapping(*a, to, b.offset_from(*a) as usize);
            }
            [(a, a_end), (b, b_end)] if (*a_end.sub(1)).time_ns() <= (**b).time_ns() => {
                // The common case: what is held all comes first.
                let n = a_end.offset_from(*a) as usize;
                std::ptr::copy_nonoverlapping(*a, to, n);
                std::ptr::copy_nonoverlapping(*b, to.add(n), b_end.offset_from(*b) as usize);
            }
            [(a, a_end), (b, b_end)] => {
                let (mut a, mut b) = (*a, *b);
                while a < *a_end && b < *b_end {
                    let take_a = (*a).time_ns() <= (*b).time_ns();
                    let from = if take_a { a } else { b };
                    std::ptr::copy_nonoverlapping(from, to, 1);
                    to = to.add(1);
                    if take_a {
                        a = a.add(1);
                    } else {
                        b = b.add(1);
                    }
                }
                let a_left = a_end.offset_from(a) as usize;
                std::ptr::copy_nonoverlapping(a, to, a_left);
                to = to.add(a_left);
                std::ptr::copy_nonoverlapping(b, to, b_end.offset_from(b) as usize);
            }
            _ if runs.len() <= 8 => {
                // A few runs (threads): the earliest head by a scan, the
                // first run winning a tie.
                // An exhausted run's head is past every time.
                const DONE: u128 = u128::MAX;
                let mut heads: Vec<u128> = runs
                    .iter()
                    .map(|&(a, _)| u128::from((*a).time_ns()))
                    .collect();
                let mut left = runs.len();
                while left > 0 {
                    let mut i = 0;
                    for (j, &h) in heads.iter().enumerate().skip(1) {
                        if h < heads[i] {
                            i = j;
                        }
                    }
                    let (a, end) = &mut runs[i];
                    std::ptr::copy_nonoverlapping(*a, to, 1);
                    to = to.add(1);
                    *a = a.add(1);
                    if *a == *end {
                        heads[i] = DONE;
                        left -= 1;
                    } else {
                        heads[i] = u128::from((**a).time_ns());
                    }
                }
            }
            _ => {
                // A heap of (time, run): the lowest run wins a tie.
                use std::cmp::Reverse;
                let mut heap: std::collections::BinaryHeap<Reverse<(u64, usize)>> = runs
                    .iter()
                    .enumerate()
                    .filter(|(_, (a, b))| a < b)
                    .map(|(i, (a, _))| Reverse(((**a).time_ns(), i)))
                    .collect();
                while let Some(Reverse((_, i))) = heap.pop() {
                    let (a, end) = &mut runs[i];
                    // Take the run's slots while it stays the earliest.
                    let next = heap.peek().map(|Reverse(k)| *k);
                    loop {
                        std::ptr::copy_nonoverlapping(*a, to, 1);
                        to = to.add(1);
                        *a = a.add(1);
                        if *a == *end {
                            break;
                        }
                        let key = ((**a).time_ns(), i);
                        if next.is_some_and(|n| key > n) {
                            heap.push(Reverse(key));
                            break;
                        }
                    }
                }
            }
        }
        out.set_len(out.len() + total);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmview_format::{MethodId, ThreadRef};

    /// A seeded xorshift: `rand(n)` is in `0..n`.
    fn xorshift(mut state: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        }
    }

    /// A slot told apart by its thread handle, `serial`; some boxed.
    fn slot(time_ns: u64, serial: u32) -> Slot {
        if serial.is_multiple_of(5) {
            return Slot::pack(Event {
                id: 0,
                time_ns,
                thread: ThreadRef(serial),
                kind: EventKind::ThreadStart,
            });
        }
        Slot::small_call(time_ns, ThreadRef(serial), MethodId(1), 2).expect("small")
    }

    #[test]
    fn slots_come_out_as_a_stable_sort_of_held_then_taken_would_order_them() {
        let mut rand = xorshift(0x2545_f491_4f6c_dd1du64);
        let mut seq = Sequencer::new();
        // What a stable sort of everything held so far gives.
        let mut model: Vec<(u64, u32)> = Vec::new();
        let mut serial = 0u32;
        let mut clock = 1_000u64;
        for _round in 0..60 {
            let mut taken = Vec::new();
            for _run in 0..rand(12) {
                // A thread's run: in time order with ties, or (one in
                // four) with a late event pushed after later ones.
                let mut t = clock.saturating_sub(rand(400));
                let mut run = Vec::new();
                for _ in 0..rand(300) {
                    t += rand(3);
                    serial += 1;
                    run.push((t, serial));
                }
                if rand(4) == 0 && run.len() > 2 {
                    let i = rand(run.len() as u64 - 1) as usize;
                    run[i].0 += 2 + rand(20);
                }
                taken.extend(run.iter().copied());
                seq.add_run(run.iter().map(|&(t, s)| slot(t, s)));
            }
            clock += 300;
            model.extend(taken);
            model.sort_by_key(|&(t, _)| t);
            let cutoff = clock.saturating_sub(rand(500));
            let ready = model.partition_point(|&(t, _)| t < cutoff);
            let expected: Vec<(u64, u32)> = model.drain(..ready).collect();
            seq.order();
            let got: Vec<(u64, u32)> = seq
                .ready(cutoff)
                .map(|s| {
                    let e = s.unpack();
                    (e.time_ns, e.thread.0)
                })
                .collect();
            assert_eq!(got, expected);
            assert_eq!(seq.held(), model.len());
        }
        assert!(serial > 10_000, "{serial} slots");
        // Dropping the sequencer drops what it still holds (boxed slots
        // among them) once.
    }

    #[test]
    fn taking_from_buffers_orders_as_a_stable_sort_whether_one_thread_or_many() {
        // What it pins: one busy thread's events go straight behind the
        // held ones (`take_after_held`) only when that is their order; a
        // run that starts earlier, or is out of order, or is one of many,
        // is merged as before.
        let mut rand = xorshift(0x9e37_79b9_7f4a_7c15u64);
        let buffers = crate::buffers::Buffers::new(64 << 20);
        let mut producers: Vec<_> = (0..4).map(|_| buffers.register()).collect();
        let mut seq = Sequencer::new();
        let mut model: Vec<(u64, u32)> = Vec::new();
        let (mut serial, mut clock) = (0u32, 1_000u64);
        for _ in 0..200 {
            // Most rounds one thread, as in a busy single-threaded loop.
            let threads = if rand(3) == 0 { 1 + rand(4) } else { 1 };
            let first = rand(4) as usize;
            for p in producers.iter_mut().skip(first).take(threads as usize) {
                let back = if rand(2) == 0 { 400 } else { 5 };
                let mut t = clock.saturating_sub(rand(back));
                let mut run = Vec::new();
                for _ in 0..rand(3_000) {
                    t += rand(3);
                    serial += 1;
                    run.push((t, serial));
                }
                if rand(6) == 0 && run.len() > 2 {
                    let i = rand(run.len() as u64 - 1) as usize;
                    run[i].0 += 2 + rand(20);
                }
                let mut sorted_run = run.clone();
                sorted_run.sort_by_key(|&(t, _)| t);
                model.extend(sorted_run);
                for &(t, s) in &run {
                    buffers.push(p, slot(t, s).unpack());
                }
            }
            clock += 3_000;
            model.sort_by_key(|&(t, _)| t);
            let heap = seq.take_from(&buffers);
            buffers.retire(heap);
            seq.order();
            let cutoff = clock.saturating_sub(rand(2_000));
            let ready = model.partition_point(|&(t, _)| t < cutoff);
            let expected: Vec<(u64, u32)> = model.drain(..ready).collect();
            let got: Vec<(u64, u32)> = seq
                .ready(cutoff)
                .map(|s| {
                    let e = s.unpack();
                    (e.time_ns, e.thread.0)
                })
                .collect();
            assert_eq!(got, expected);
            assert_eq!(seq.held(), model.len());
        }
        assert!(serial > 100_000, "{serial} slots");
        assert_eq!(buffers.dropped(), 0);
    }
}
