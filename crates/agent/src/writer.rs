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
use crate::slot::Slot;
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
    /// Events taken from the buffers, sorted by time, not yet written.
    held: Vec<Slot>,
    symbols: Vec<Symbol>,
    next_id: u64,
    last_time: u64,
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
            held: Vec::new(),
            symbols: Vec::new(),
            next_id: 1,
            last_time: 0,
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
    /// the symbols they may use are taken; the batch is sorted by time and
    /// the events older than the hold-back are numbered and written.
    ///
    /// Events are sorted, not merged per thread, because a thread's events
    /// are not always in time order: a THROW whose catch site was not yet
    /// known is pushed after the calls that followed it. (A thread's events
    /// are mostly in order, so the stable sort finds runs and merges them.)
    ///
    /// Held events stay packed in their 40-byte [`Slot`]s while they are
    /// sorted; each is unpacked only to be written, in one pass that also
    /// numbers it and counts it for `adapt=`. The writer's work is memory
    /// traffic: a busy thread produces millions of events a second, and
    /// the held ones span more than the caches.
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
        let mut heap_bytes = 0;
        for mut t in self.agent.buffers.snapshot() {
            while let Some(slot) = t.take() {
                heap_bytes += slot.heap_bytes();
                // The calibration's calls were made to be timed, not kept.
                if !slot.is_call_of(crate::calibrate::CALIBRATION_METHOD) {
                    self.held.push(slot);
                }
            }
        }
        self.agent.buffers.retire(heap_bytes);
        self.agent.symbols.drain_pending(&mut self.symbols);
        // Stable: one thread's events with equal times keep their order.
        self.held.sort_by_key(Slot::time_ns);
        let ready = self.held.partition_point(|e| e.time_ns() < cutoff);
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
            self.held.drain(..ready);
            self.lost += ready as u64;
            return;
        };
        // Event times count from the agent's first start; a recording
        // started later counts from its own start.
        let origin = self.agent.time_origin_ns;
        let first_id = self.next_id;
        let symbols = std::mem::take(&mut self.symbols);
        let mut held = std::mem::take(&mut self.held);
        let (mut calls, mut deepest, mut last_time) = (0u64, 0u32, self.last_time);
        let ok = self.attempt("write", || {
            for s in symbols {
                out.define(s);
            }
            for (id, slot) in (first_id..).zip(held.drain(..ready)) {
                let mut e = slot.unpack();
                match &e.kind {
                    EventKind::Call { depth, .. } => {
                        calls += 1;
                        deepest = deepest.max(*depth);
                    }
                    EventKind::Return { .. } => calls += 1,
                    _ => {}
                }
                e.id = id;
                e.time_ns = e.time_ns.saturating_sub(origin);
                last_time = last_time.max(e.time_ns);
                out.write(&e)?;
            }
            Ok(())
        });
        // The drain removed all ready events, written or not (a failed
        // write drops the rest of them).
        self.held = held;
        self.last_time = last_time;
        self.adapt.calls += calls;
        self.adapt.deepest = self.adapt.deepest.max(deepest);
        self.next_id = first_id + ready as u64;
        let ok = ok.and_then(|()| {
            if dropped == 0 {
                return Some(());
            }
            let thread = self.agent_thread?;
            let report = Event {
                id: self.next_id,
                time_ns: self.last_time,
                thread,
                kind: EventKind::Dropped { count: dropped },
            };
            self.next_id += 1;
            self.attempt("write", || out.write(&report))
        });
        self.agent
            .written
            .store(self.next_id - 1, Ordering::Relaxed);
        if ok.is_some() {
            self.out = Some(out);
        } else {
            self.lost += ready as u64 + u64::from(dropped > 0);
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
            id: self.next_id,
            time_ns: clock::now_ns().saturating_sub(self.agent.time_origin_ns),
            thread,
            kind: EventKind::TraceWindow {
                min_depth: window.min,
                max_depth: window.max,
                reason,
                rate_per_s: rate,
            },
        };
        self.next_id += 1;
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
