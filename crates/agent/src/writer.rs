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
    held: Vec<Event>,
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
            held: Vec::new(),
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

    /// One drain: events first, then the symbols they may use.
    fn round(&mut self, everything: bool) {
        // Straight into `held`, numbered and written in place: each event
        // is copied once on its way from a thread's buffer to the file.
        self.agent.buffers.drain(&mut self.held);
        self.agent.symbols.drain_pending(&mut self.symbols);
        self.held.sort_by_key(|e| e.time_ns);
        let cutoff = if everything {
            u64::MAX
        } else {
            clock::now_ns().saturating_sub(HOLD_BACK_NS)
        };
        let ready = self.held.partition_point(|e| e.time_ns < cutoff);
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

        let Some(mut out) = self.out.take() else {
            self.symbols.clear();
            self.held.drain(..ready);
            self.lost += ready as u64;
            self.drops_reported += dropped;
            return;
        };
        let mut drop_report = None;
        if let (true, Some(thread)) = (dropped > 0, self.agent_thread) {
            let time = self.held[..ready]
                .last()
                .map_or(self.last_time + self.agent.time_origin_ns, |e| e.time_ns);
            drop_report = Some(Event {
                id: 0,
                time_ns: time,
                thread,
                kind: EventKind::Dropped { count: dropped },
            });
            self.drops_reported += dropped;
        }
        // Event times count from the agent's first start; a recording
        // started later counts from its own start.
        let origin = self.agent.time_origin_ns;
        for e in self.held[..ready].iter_mut().chain(drop_report.iter_mut()) {
            e.id = self.next_id;
            self.next_id += 1;
            e.time_ns = e.time_ns.saturating_sub(origin);
            self.last_time = self.last_time.max(e.time_ns);
        }
        self.agent
            .written
            .store(self.next_id - 1, std::sync::atomic::Ordering::Relaxed);
        let symbols = std::mem::take(&mut self.symbols);
        let events = &self.held[..ready];
        let ok = self.attempt("write", || {
            for s in symbols {
                out.define(s);
            }
            for e in events.iter().chain(drop_report.iter()) {
                out.write(e)?;
            }
            Ok(())
        });
        self.held.drain(..ready);
        if ok.is_some() {
            self.out = Some(out);
        } else {
            self.lost += ready as u64 + u64::from(drop_report.is_some());
        }
    }
}
