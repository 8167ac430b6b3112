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
use crate::threads::unknown_thread;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::BufWriter;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use vmview_format::{Event, EventKind, Symbol, ThreadRef, TraceHeader, TraceWriter};

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
}

impl Writer {
    fn new(agent: &'static Agent, file: File, header: &TraceHeader) -> Writer {
        let mut w = Writer {
            agent,
            out: None,
            symbols: Vec::new(),
            next_id: 1,
            last_time: 0,
            drops_reported: 0,
            agent_thread: None,
            failure: std::cell::RefCell::new(None),
            lost: 0,
        };
        let out = w.attempt("open", move || {
            TraceWriter::new(BufWriter::new(file), header)
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
            self.round(stopping);
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

    /// One round: the events published so far, then the symbols they may
    /// use, then the events merged across threads by time, each moved out
    /// of its block, numbered and written in place.
    fn round(&mut self, everything: bool) {
        let mut threads = self.agent.buffers.snapshot();
        self.agent.symbols.drain_pending(&mut self.symbols);
        let cutoff = if everything {
            u64::MAX
        } else {
            clock::now_ns().saturating_sub(HOLD_BACK_NS)
        };
        let dropped = self.agent.buffers.dropped() - self.drops_reported;
        if dropped > 0 && self.agent_thread.is_none() {
            let id = self.agent.symbols.new_thread_ref();
            self.symbols.push(Symbol::Thread(unknown_thread(
                self.agent,
                id,
                "vmview agent",
            )));
            self.agent.symbols.drain_pending(&mut self.symbols);
            self.agent_thread = Some(id);
        }
        self.drops_reported += dropped;

        // Each thread's events are in push order; the heap holds every
        // thread's next event old enough to be written.
        let mut next: BinaryHeap<Reverse<(u64, usize)>> = threads
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                t.peek_time()
                    .filter(|&at| at < cutoff)
                    .map(|at| Reverse((at, i)))
            })
            .collect();
        let mut heap_bytes = 0;
        let mut taken = 0u64;
        let mut out = self.out.take();
        let symbols = std::mem::take(&mut self.symbols);
        let (mut next_id, mut last_time) = (self.next_id, self.last_time);
        let agent_thread = self.agent_thread;
        let origin = self.agent.time_origin_ns;
        let ok = self.attempt("write", || {
            let (next_id, last_time) = (&mut next_id, &mut last_time);
            if let Some(out) = out.as_mut() {
                for s in symbols {
                    out.define(s);
                }
            }
            while let Some(Reverse((_, i))) = next.pop() {
                let t = &mut threads[i];
                let Some((mut ev, bytes)) = t.take() else {
                    continue;
                };
                if let Some(at) = t.peek_time().filter(|&at| at < cutoff) {
                    next.push(Reverse((at, i)));
                }
                heap_bytes += bytes;
                taken += 1;
                if let Some(out) = out.as_mut() {
                    ev.id = *next_id;
                    *next_id += 1;
                    // Event times count from the agent's first start; a
                    // recording started later counts from its own start.
                    ev.time_ns = ev.time_ns.saturating_sub(origin);
                    *last_time = (*last_time).max(ev.time_ns);
                    out.write(&ev)?;
                }
            }
            if let (Some(out), true, Some(thread)) = (out.as_mut(), dropped > 0, agent_thread) {
                let report = Event {
                    id: *next_id,
                    time_ns: *last_time,
                    thread,
                    kind: EventKind::Dropped { count: dropped },
                };
                *next_id += 1;
                out.write(&report)?;
            }
            Ok(())
        });
        (self.next_id, self.last_time) = (next_id, last_time);
        self.agent
            .written
            .store(self.next_id - 1, std::sync::atomic::Ordering::Relaxed);
        // Events left in `threads` (too young, or after a failed write)
        // stay in their blocks for the next round.
        drop(threads);
        self.agent.buffers.retire(heap_bytes);
        match (out, ok) {
            (Some(out), Some(())) => self.out = Some(out),
            (Some(_), None) => {
                // Writing stopped; the events taken this round are lost,
                // and every later one is drained and discarded.
                self.lost += taken;
                self.discard_rest();
            }
            (None, _) => self.lost += taken,
        }
    }

    /// After a write error: the rest of what is queued now is lost too.
    fn discard_rest(&mut self) {
        let mut heap_bytes = 0;
        for mut t in self.agent.buffers.snapshot() {
            while let Some((_, bytes)) = t.take() {
                heap_bytes += bytes;
                self.lost += 1;
            }
        }
        self.agent.buffers.retire(heap_bytes);
    }
}
