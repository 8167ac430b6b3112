//! Per-thread event buffers under one global memory budget.
//!
//! Each producing thread owns a [`Producer`]: it appends its events to a
//! fixed-capacity [`Block`] without taking any lock or atomic
//! read-modify-write. A slot is written, then published by a release store
//! of the block's length; the writer thread reads the published slots with
//! an acquire load and moves them out, so a single producer and the single
//! writer share a block without locking (the only other party ever
//! touching a block is the writer). A full block stays queued for the
//! writer and the producer starts a new one, taken from a pool of emptied
//! blocks: a push never reallocates (no copy, no fresh pages on a busy
//! thread's hot path).
//!
//! The budget is charged a block at a time, when a block is allocated, and
//! with an event's heap parts (argument strings, parameter lists) only
//! when it has any. Over budget, the event is dropped and counted, so a
//! stalled disk cannot grow the JVM's memory. A thread's first blocks are
//! small and double up to the full size, so a thread that emits a handful
//! of events does not reserve a full block.

use crate::slot::Slot;
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use vmview_format::Event;

/// Events in a thread's first block; each next block doubles, up to
/// [`Buffers::block`].
const FIRST_BLOCK: usize = 64;
/// Events in the first block after [`Buffers::let_go`]: a virtual thread
/// pushes a few events per mount, and thousands may be between mounts at
/// once.
const LET_GO_BLOCK: usize = 8;
/// Events in a full-size block at most (160 KiB).
const MAX_BLOCK: usize = 4096;
/// How many slots ahead of the one written a push prefetches.
#[cfg(target_arch = "x86_64")]
const PREFETCH_AHEAD: usize = 12;

/// A fixed array of event slots written by one producer and read by the
/// writer.
///
/// Slots `taken..len` hold events: `0..taken` were moved out by the
/// writer, `len..` are not written yet. Only the producer writes slots and
/// `len`; only the writer reads slots and writes `taken`.
pub struct Block {
    slots: Box<[UnsafeCell<MaybeUninit<Slot>>]>,
    len: AtomicUsize,
    taken: AtomicUsize,
}

// SAFETY: the single-producer protocol above: a slot is written once,
// before the release store that publishes it, and read (moved out) once,
// after the acquire load that sees it published.
unsafe impl Sync for Block {}
unsafe impl Send for Block {}

impl Block {
    fn new(events: usize) -> Block {
        Block {
            slots: (0..events)
                .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
                .collect(),
            len: AtomicUsize::new(0),
            taken: AtomicUsize::new(0),
        }
    }

    fn capacity(&self) -> usize {
        self.slots.len()
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        let (taken, len) = (*self.taken.get_mut(), *self.len.get_mut());
        for slot in &mut self.slots[taken..len] {
            // SAFETY: written and never moved out.
            unsafe { slot.get_mut().assume_init_drop() };
        }
    }
}

/// Published events of one block not yet taken: slots `next..end`.
struct Segment {
    block: Arc<Block>,
    next: usize,
    end: usize,
}

/// One thread's events of a [`Buffers::snapshot`], oldest first. Only the
/// writer thread holds these.
pub struct ThreadEvents {
    segments: VecDeque<Segment>,
}

impl ThreadEvents {
    /// Takes the next event out of its block, still packed (tests, and
    /// the writer benchmark's round as it was before
    /// [`take_all`](ThreadEvents::take_all)).
    pub fn take(&mut self) -> Option<Slot> {
        let s = self.segments.front_mut()?;
        // SAFETY: slot `next` is published (`next < end`, `end` read with
        // acquire) and not taken yet; `taken` moves past it at once, so it
        // is read out exactly once.
        let slot = unsafe { (*s.block.slots[s.next].get()).assume_init_read() };
        s.next += 1;
        s.block.taken.store(s.next, Ordering::Relaxed);
        if s.next == s.end {
            self.segments.pop_front();
        }
        Some(slot)
    }

    /// The time of the oldest event (there is one: a snapshot holds no
    /// empty [`ThreadEvents`]).
    pub fn first_time_ns(&self) -> Option<u64> {
        let s = self.segments.front()?;
        // SAFETY: slot `next` is published (`next < end`) and not taken.
        Some(unsafe { (*s.block.slots[s.next].get()).assume_init_ref() }.time_ns())
    }

    /// Moves all the events into `out`, still packed, oldest first: one
    /// copy per block rather than per event. `inspect` sees each slot
    /// first, while its block's part is in the cache for the copy.
    pub fn take_all(mut self, out: &mut Vec<Slot>, mut inspect: impl FnMut(&Slot)) {
        for s in self.segments.drain(..) {
            let n = s.end - s.next;
            for slot in &s.block.slots[s.next..s.end] {
                // SAFETY: published and not taken (see below).
                inspect(unsafe { (*slot.get()).assume_init_ref() });
            }
            out.reserve(n);
            // SAFETY: slots `next..end` are published (`end` read with
            // acquire) and not taken; they are moved into `out`'s spare
            // capacity (`UnsafeCell<MaybeUninit<Slot>>` has `Slot`'s
            // layout), and `taken` moves past them before anything else
            // can read the block, so each is moved out exactly once.
            unsafe {
                let from = s.block.slots[s.next..s.end].as_ptr().cast::<Slot>();
                let to = out.as_mut_ptr().add(out.len());
                std::ptr::copy_nonoverlapping(from, to, n);
                out.set_len(out.len() + n);
            }
            s.block.taken.store(s.end, Ordering::Relaxed);
        }
    }
}

/// One producer's blocks the writer has not used up, oldest first; the
/// last is the one being filled. The lock is taken by the producer only
/// when it starts a block, and by the writer once per drain.
#[derive(Default)]
pub struct ThreadBuffer {
    blocks: Mutex<VecDeque<Arc<Block>>>,
}

/// The producing side of one thread's buffer. Exactly one thread pushes
/// through it.
pub struct Producer {
    shared: Arc<ThreadBuffer>,
    block: Option<Arc<Block>>,
    /// `block.len` as this producer last stored it.
    len: usize,
    /// Events in the next block when there is none ([`FIRST_BLOCK`], or
    /// [`LET_GO_BLOCK`] once let go).
    first: usize,
}

pub struct Buffers {
    registry: Mutex<Vec<Arc<ThreadBuffer>>>,
    /// Empty full-size blocks.
    pool: Mutex<Vec<Block>>,
    /// Bytes reserved: allocated blocks plus events' heap parts.
    bytes: AtomicU64,
    budget: u64,
    /// Events in a full-size block: small enough that a small budget still
    /// holds many blocks.
    block: usize,
    /// Blocks the pool keeps at most: all that fit the budget.
    pool_max: usize,
    dropped: AtomicU64,
}

impl Buffers {
    pub fn new(budget: u64) -> Buffers {
        let per_event = std::mem::size_of::<Slot>() as u64;
        let block = (budget / per_event / 64).clamp(FIRST_BLOCK as u64, MAX_BLOCK as u64) as usize;
        Buffers {
            registry: Mutex::new(Vec::new()),
            pool: Mutex::new(Vec::new()),
            bytes: AtomicU64::new(0),
            budget,
            block,
            // Every full-size block is kept (charged to the budget, and
            // given up by `new_block` before an event is refused): a busy
            // thread fills more blocks between two writer rounds than a
            // quarter of the budget holds, and each block freed and
            // allocated again cost the pushing thread a page fault per
            // page (measured: ~6 % of its time at 13 M events/s).
            pool_max: (budget / block_bytes(block)) as usize,
            dropped: AtomicU64::new(0),
        }
    }

    /// A new buffer for the calling thread, known to the writer.
    pub fn register(&self) -> Producer {
        let shared = Arc::new(ThreadBuffer::default());
        lock(&self.registry).push(shared.clone());
        Producer {
            shared,
            block: None,
            len: 0,
            first: FIRST_BLOCK,
        }
    }

    /// Lets go of the block being filled, so that once the writer has
    /// taken its events it is freed (or pooled) even though not full: a
    /// virtual thread does this when it unmounts, so a parked one holds no
    /// buffer memory. The next push starts a new, small block.
    pub fn let_go(p: &mut Producer) {
        p.block = None;
        p.len = 0;
        p.first = LET_GO_BLOCK;
    }

    /// Queues `ev`, or drops and counts it when the budget is spent.
    pub fn push(&self, p: &mut Producer, ev: Event) {
        self.push_slot(p, Slot::pack(ev));
    }

    /// Queues a packed event, its heap part charged to the budget (the
    /// event is dropped, and counted, when the budget is spent).
    #[inline]
    pub fn push_slot(&self, p: &mut Producer, slot: Slot) {
        let extra = slot.heap_bytes();
        if extra > 0 && !self.reserve(extra) {
            self.count_drop(&slot);
            return;
        }
        self.push_reserved(p, slot, extra);
    }

    /// Queues a slot that holds nothing on the heap ([`Slot::small_call`],
    /// [`Slot::small_return`]): the call path's fast path.
    #[inline]
    pub fn push_small(&self, p: &mut Producer, slot: Slot) {
        debug_assert_eq!(slot.heap_bytes(), 0);
        self.push_reserved(p, slot, 0);
    }

    /// Queues `slot`, whose `extra` heap bytes are reserved already.
    #[inline]
    fn push_reserved(&self, p: &mut Producer, slot: Slot, extra: u64) {
        let capacity = p.block.as_ref().map_or(0, |b| b.capacity());
        if p.len == capacity {
            let Some(block) = self.new_block((capacity * 2).clamp(p.first, self.block)) else {
                self.release(extra);
                self.count_drop(&slot);
                return;
            };
            let block = Arc::new(block);
            lock(&p.shared.blocks).push_back(block.clone());
            p.block = Some(block);
            p.len = 0;
        }
        let Some(block) = &p.block else { return };
        // SAFETY: slot `p.len` is below capacity, unpublished, and only
        // this producer writes slots.
        unsafe { (*block.slots[p.len].get()).write(slot) };
        // The writer read this block's memory on its core last: ask for
        // the lines a few slots ahead now, so the stores above do not
        // each wait for them.
        #[cfg(target_arch = "x86_64")]
        if let Some(ahead) = block.slots.get(p.len + PREFETCH_AHEAD) {
            // SAFETY: a prefetch is only a hint; the address is in bounds.
            unsafe {
                core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_ET0 }>(
                    ahead.get().cast::<i8>(),
                )
            };
        }
        p.len += 1;
        block.len.store(p.len, Ordering::Release);
    }

    /// An empty block of `events` slots, charged to the budget.
    fn new_block(&self, events: usize) -> Option<Block> {
        if events == self.block {
            if let Some(b) = lock(&self.pool).pop() {
                return Some(b);
            }
        }
        // Pooled blocks stay charged: give them up before refusing.
        while !self.reserve(block_bytes(events)) {
            let pooled = lock(&self.pool).pop()?;
            self.release(block_bytes(pooled.capacity()));
        }
        Some(Block::new(events))
    }

    fn reserve(&self, bytes: u64) -> bool {
        let before = self.bytes.fetch_add(bytes, Ordering::Relaxed);
        if before + bytes > self.budget {
            self.bytes.fetch_sub(bytes, Ordering::Relaxed);
            return false;
        }
        true
    }

    fn release(&self, bytes: u64) {
        self.bytes.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// The published events not yet taken, per live buffer, in push
    /// order. Events published after this call wait for the next one.
    pub fn snapshot(&self) -> Vec<ThreadEvents> {
        let registry = lock(&self.registry);
        let mut all = Vec::with_capacity(registry.len());
        for b in registry.iter() {
            let blocks = lock(&b.blocks);
            let segments: VecDeque<Segment> = blocks
                .iter()
                .map(|block| Segment {
                    next: block.taken.load(Ordering::Relaxed),
                    end: block.len.load(Ordering::Acquire),
                    block: block.clone(),
                })
                .filter(|s| s.next < s.end)
                .collect();
            if !segments.is_empty() {
                all.push(ThreadEvents { segments });
            }
        }
        all
    }

    /// After the events of a [`snapshot`](Buffers::snapshot) were taken
    /// (some or all): gives used-up blocks back, releases `heap` bytes of
    /// taken events' heap parts, and forgets the buffers of ended threads
    /// once everything they queued is taken.
    pub fn retire(&self, heap: u64) {
        self.release(heap);
        let mut registry = lock(&self.registry);
        registry.retain(|b| {
            // Checked first: a producer that is gone pushes no more.
            let gone = Arc::strong_count(b) == 1;
            let mut blocks = lock(&b.blocks);
            while let Some(block) = blocks.front() {
                // A block stays until its producer has let go of it (at
                // its next push once full, or at `let_go`), so that it is
                // freed here, once. The fence pairs with the release of
                // the producer's reference: its last `len` is seen below.
                let let_go = Arc::strong_count(block) == 1;
                std::sync::atomic::fence(Ordering::Acquire);
                let taken = block.taken.load(Ordering::Relaxed);
                let len = block.len.load(Ordering::Acquire);
                if !(let_go && taken == len) {
                    break;
                }
                if let Some(block) = blocks.pop_front() {
                    self.recycle(block);
                }
            }
            !(gone && blocks.is_empty())
        });
    }

    /// Moves every published event into `out` (per thread in push order)
    /// and gives used-up blocks back. For tests and simple consumers; the
    /// writer merges [`snapshot`](Buffers::snapshot)s instead.
    #[cfg(test)]
    pub fn drain(&self, out: &mut Vec<Event>) {
        let mut heap = 0;
        for mut t in self.snapshot() {
            while let Some(slot) = t.take() {
                heap += slot.heap_bytes();
                out.push(slot.unpack());
            }
        }
        self.retire(heap);
    }

    /// Keeps a used-up block for reuse, or frees it.
    fn recycle(&self, block: Arc<Block>) {
        let capacity = block.capacity();
        let Ok(mut block) = Arc::try_unwrap(block) else {
            // Not reached (see `drain`); the memory is freed with the last
            // reference elsewhere.
            self.release(block_bytes(capacity));
            return;
        };
        if capacity == self.block {
            let mut pool = lock(&self.pool);
            if pool.len() < self.pool_max {
                *block.len.get_mut() = 0;
                *block.taken.get_mut() = 0;
                pool.push(block);
                return;
            }
        }
        self.release(block_bytes(capacity));
    }

    /// Events dropped so far (over budget).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Counts a dropped event, unless it is the calibration's own: those
    /// are never written, so dropping one loses nothing of the recording
    /// (with a small `buffer=` the calibration loop alone can spend it).
    /// Counted here, at the drop, and never taken back: the writer reports
    /// the count as it grows.
    #[cold]
    fn count_drop(&self, slot: &Slot) {
        if !slot.is_calibration(crate::calibrate::CALIBRATION_METHOD) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn block_bytes(events: usize) -> u64 {
    (events * std::mem::size_of::<Slot>()) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmview_format::{EventKind, MethodId, Outcome, ThreadRef, Value};

    fn call(t: u32, time: u64) -> Event {
        Event {
            id: 0,
            time_ns: time,
            thread: ThreadRef(t),
            kind: EventKind::Call {
                method: MethodId(1),
                depth: 3,
                caller: None,
                params: Vec::new(),
                metrics: Default::default(),
            },
        }
    }

    #[test]
    fn events_come_out_per_thread_in_push_order_across_blocks() {
        let b = Buffers::new(64 << 20);
        let (mut p1, mut p2) = (b.register(), b.register());
        for i in 0..10_000 {
            b.push(&mut p1, call(1, i));
            if i % 3 == 0 {
                b.push(&mut p2, call(2, i));
            }
        }
        let mut out = Vec::new();
        b.drain(&mut out);
        let times = |t: u32| -> Vec<u64> {
            out.iter()
                .filter(|e| e.thread == ThreadRef(t))
                .map(|e| e.time_ns)
                .collect()
        };
        assert_eq!(times(1), (0..10_000).collect::<Vec<_>>());
        assert_eq!(times(2), (0..10_000).step_by(3).collect::<Vec<_>>());
        assert_eq!(b.dropped(), 0);
        // More after a drain, and nothing twice.
        b.push(&mut p1, call(1, 20_000));
        out.clear();
        b.drain(&mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].time_ns, 20_000);
    }

    #[test]
    fn over_budget_events_are_dropped_and_counted_and_memory_comes_back() {
        // Room for a few small blocks only.
        let b = Buffers::new(64 * 40 * 3);
        let mut p = b.register();
        for i in 0..1_000 {
            b.push(&mut p, call(1, i));
        }
        let mut out = Vec::new();
        b.drain(&mut out);
        assert!(b.dropped() > 0);
        assert_eq!(out.len() as u64 + b.dropped(), 1_000);
        // Once drained and the producer gone, only pooled blocks are
        // charged, and they make way for new ones.
        drop(p);
        b.drain(&mut out);
        let pooled = lock(&b.pool).len() as u64 * block_bytes(b.block);
        assert_eq!(b.bytes.load(Ordering::Relaxed), pooled);
        let mut p = b.register();
        let before = b.dropped();
        b.push(&mut p, call(1, 5));
        assert_eq!(b.dropped(), before);
    }

    #[test]
    fn a_block_let_go_half_full_is_freed_once_taken_and_events_go_on() {
        // What it pins: a parked virtual thread held its partly filled
        // block (charged to the budget) until its next event.
        let b = Buffers::new(64 << 20);
        let mut p = b.register();
        for i in 0..10 {
            b.push(&mut p, call(1, i));
        }
        Buffers::let_go(&mut p);
        let mut out = Vec::new();
        b.drain(&mut out);
        assert_eq!(out.len(), 10);
        assert_eq!(
            b.bytes.load(Ordering::Relaxed),
            0,
            "the small block is freed"
        );
        assert_eq!(lock(&lock(&b.registry)[0].blocks).len(), 0);
        // The producer goes on in a new block, in order.
        b.push(&mut p, call(1, 10));
        out.clear();
        b.drain(&mut out);
        assert_eq!(out.iter().map(|e| e.time_ns).collect::<Vec<_>>(), [10]);
    }

    #[test]
    fn a_finished_threads_last_events_are_kept_then_its_buffer_forgotten() {
        let b = Buffers::new(64 << 20);
        let mut p = b.register();
        b.push(&mut p, call(1, 1));
        b.push(
            &mut p,
            Event {
                id: 0,
                time_ns: 2,
                thread: ThreadRef(1),
                kind: EventKind::Return {
                    method: MethodId(1),
                    depth: 3,
                    outcome: Outcome::Value(Value::Str {
                        text: "x".repeat(100),
                        full_len: None,
                    }),
                    elapsed_ns: 1,
                    metrics: Default::default(),
                },
            },
        );
        drop(p);
        let mut out = Vec::new();
        b.drain(&mut out);
        assert_eq!(out.len(), 2);
        assert!(lock(&b.registry).is_empty());
        let pooled = lock(&b.pool).len() as u64 * block_bytes(b.block);
        assert_eq!(
            b.bytes.load(Ordering::Relaxed),
            pooled,
            "blocks and the boxed string released"
        );
    }
}
