//! Per-thread event buffers under one global memory budget.
//!
//! A callback builds its event first and then holds its own thread's lock
//! just long enough to push it: never across a JVMTI or JNI call, and the
//! only other party ever taking that lock is the writer thread, once per
//! drain. The budget is a single atomic byte count: over it, the event is
//! dropped and counted, so a stalled disk cannot grow the JVM's memory.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use vmview_format::{Event, EventKind, Value};

/// One thread's events not yet taken by the writer.
#[derive(Default)]
pub struct ThreadBuffer {
    events: Mutex<Vec<Event>>,
    /// The vector the writer emptied last time, capacity kept: swapped in
    /// at the next drain, so a busy thread does not grow a fresh vector
    /// (page faults, copies) on its hot path after every drain.
    spare: Mutex<Vec<Event>>,
}

/// Capacity, in events, a drained buffer keeps for reuse (~20 MiB).
const SPARE_EVENTS: usize = 1 << 18;

pub struct Buffers {
    registry: Mutex<Vec<Arc<ThreadBuffer>>>,
    bytes: AtomicU64,
    budget: u64,
    dropped: AtomicU64,
}

impl Buffers {
    pub fn new(budget: u64) -> Buffers {
        Buffers {
            registry: Mutex::new(Vec::new()),
            bytes: AtomicU64::new(0),
            budget,
            dropped: AtomicU64::new(0),
        }
    }

    /// A new buffer for the calling thread, known to the writer.
    pub fn register(&self) -> Arc<ThreadBuffer> {
        let b = Arc::new(ThreadBuffer::default());
        lock(&self.registry).push(b.clone());
        b
    }

    /// Queues `ev`, or drops and counts it when the budget is spent.
    pub fn push(&self, buf: &ThreadBuffer, ev: Event) {
        let size = estimated_size(&ev);
        let before = self.bytes.fetch_add(size, Ordering::Relaxed);
        if before + size > self.budget {
            self.bytes.fetch_sub(size, Ordering::Relaxed);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        lock(&buf.events).push(ev);
    }

    /// Moves every queued event into `out` (per thread in push order) and
    /// forgets buffers of threads that have ended.
    pub fn drain(&self, out: &mut Vec<Event>) {
        let mut registry = lock(&self.registry);
        let mut freed = 0;
        for b in registry.iter() {
            let mut events = std::mem::take(&mut *lock(&b.spare));
            std::mem::swap(&mut *lock(&b.events), &mut events);
            freed += events.iter().map(estimated_size).sum::<u64>();
            out.append(&mut events);
            events.shrink_to(SPARE_EVENTS);
            *lock(&b.spare) = events;
        }
        // A buffer only the registry still holds belongs to a finished thread.
        registry.retain(|b| Arc::strong_count(b) > 1 || !lock(&b.events).is_empty());
        drop(registry);
        self.bytes.fetch_sub(freed, Ordering::Relaxed);
    }

    /// Events dropped so far (over budget).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bytes an event holds in memory, roughly: the struct plus its heap parts.
fn estimated_size(ev: &Event) -> u64 {
    let heap = match &ev.kind {
        EventKind::Call { params, .. } => params.iter().map(value_size).sum(),
        EventKind::Return {
            outcome: vmview_format::Outcome::Value(v),
            ..
        } => value_size(v),
        EventKind::Throw { message, .. } => message.as_ref().map_or(0, String::len),
        _ => 0,
    };
    (std::mem::size_of::<Event>() + heap) as u64
}

fn value_size(v: &Value) -> usize {
    std::mem::size_of::<Value>()
        + match v {
            Value::Str { text, .. } => text.len(),
            Value::Boxed { .. } => std::mem::size_of::<Value>(),
            _ => 0,
        }
}
