//! Per-chunk, per-thread state that lets CALL and RETURN records leave out
//! what the reader can predict: the depth, the returning method, the
//! caller's method and the elapsed time.
//!
//! The writer and the reader run exactly this code on the same events, so
//! their predictions agree by construction. The state is reset at every
//! chunk start (through a generation number, so resetting costs nothing
//! per thread), which keeps each chunk decodable on its own.

use std::collections::HashMap;

/// An open CALL seen in the current chunk.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Frame {
    pub depth: u32,
    pub method: u32,
    pub time_ns: u64,
}

/// What one thread did so far in the current chunk.
#[derive(Debug, Default)]
pub(crate) struct ThreadState {
    /// Chunk generation this state belongs to; stale means "fresh".
    generation: u32,
    /// The thread's current depth: that of its last CALL, or one less than
    /// that of its last RETURN; 0 at chunk start.
    pub depth: u32,
    /// Open CALLs of this chunk, innermost last, depths strictly increasing.
    frames: Vec<Frame>,
    /// CPU time of the thread's last CALL/RETURN with one in this chunk
    /// (0 before it): the base of the next CPU delta.
    pub cpu_ns: u64,
    /// Allocated bytes likewise.
    pub alloc_bytes: u64,
    /// Method of the thread's last BYTECODE in this chunk.
    pub bytecode_method: Option<u32>,
}

impl ThreadState {
    /// Forgets everything from earlier chunks.
    #[inline(always)]
    pub(crate) fn enter_chunk(&mut self, generation: u32) {
        if self.generation != generation {
            self.generation = generation;
            self.depth = 0;
            self.frames.clear();
            self.cpu_ns = 0;
            self.alloc_bytes = 0;
            self.bytecode_method = None;
        }
    }

    /// Before a CALL at `depth`: drops frames that cannot be open any more
    /// (those at `depth` or deeper) and returns the innermost remaining
    /// frame's method, the predicted caller.
    #[inline(always)]
    pub(crate) fn begin_call(&mut self, depth: u32) -> Option<u32> {
        while let Some(f) = self.frames.last() {
            if f.depth >= depth {
                self.frames.pop();
            } else {
                return Some(f.method);
            }
        }
        None
    }

    /// After a CALL.
    #[inline(always)]
    pub(crate) fn end_call(&mut self, depth: u32, method: u32, time_ns: u64) {
        self.frames.push(Frame {
            depth,
            method,
            time_ns,
        });
        self.depth = depth;
    }

    /// Before a RETURN at `depth`: drops deeper frames and returns the open
    /// CALL at exactly this depth, if any.
    #[inline(always)]
    pub(crate) fn begin_return(&mut self, depth: u32) -> Option<Frame> {
        while let Some(&f) = self.frames.last() {
            if f.depth > depth {
                self.frames.pop();
            } else if f.depth == depth {
                return Some(f);
            } else {
                return None;
            }
        }
        None
    }

    /// After a RETURN: the frame at `depth` is closed.
    #[inline(always)]
    pub(crate) fn end_return(&mut self, depth: u32) {
        if self.frames.last().is_some_and(|f| f.depth == depth) {
            self.frames.pop();
        }
        self.depth = depth.wrapping_sub(1);
    }
}

/// The per-thread states of a writer or reader, indexed by thread handle.
///
/// Handles are dense in practice, so states live in a vector; but a forged
/// file may name thread 1 000 000 alone, so the vector grows only within a
/// constant factor of the number of threads seen, and outliers go to a map.
#[derive(Debug, Default)]
pub(crate) struct Threads {
    dense: Vec<ThreadState>,
    /// How many times `dense` grew (each time for a thread not seen before).
    growths: usize,
    sparse: HashMap<u32, ThreadState>,
}

/// Entries `dense` may hold beyond twice the number of threads seen.
const DENSE_SLACK: usize = 1024;

impl Threads {
    /// The state of `thread`, made current for `generation`.
    #[inline(always)]
    pub(crate) fn get(&mut self, thread: u32, generation: u32) -> &mut ThreadState {
        let i = thread as usize;
        let s = if i < self.dense.len() {
            &mut self.dense[i]
        } else {
            self.get_slow(thread)
        };
        s.enter_chunk(generation);
        s
    }

    #[cold]
    #[inline(never)]
    fn get_slow(&mut self, thread: u32) -> &mut ThreadState {
        let i = thread as usize;
        if i <= self.growths * 2 + DENSE_SLACK {
            self.growths += 1;
            self.dense.resize_with(i + 1, ThreadState::default);
            &mut self.dense[i]
        } else {
            self.sparse.entry(thread).or_default()
        }
    }

    /// Call when the generation counter wraps around, so that no state
    /// from 2^32 chunks ago passes for current.
    pub(crate) fn reset_all(&mut self) {
        for s in self.dense.iter_mut().chain(self.sparse.values_mut()) {
            s.generation = 0;
            s.depth = 0;
            s.frames.clear();
            s.cpu_ns = 0;
            s.alloc_bytes = 0;
            s.bytecode_method = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scattered_thread_handles_do_not_grow_the_vector_much() {
        let mut t = Threads::default();
        for id in [0u32, 5_000, 999_999, 20_000, 1 << 19] {
            t.get(id, 1).depth = id;
        }
        assert!(t.dense.len() <= DENSE_SLACK + 1);
        assert_eq!(t.get(999_999, 1).depth, 999_999);
        assert_eq!(t.get(999_999, 2).depth, 0, "a new chunk starts fresh");
    }

    #[test]
    fn prediction_follows_calls_and_returns() {
        let mut s = ThreadState::default();
        s.enter_chunk(1);
        assert_eq!(s.begin_call(1), None);
        s.end_call(1, 10, 100);
        assert_eq!(
            s.begin_call(3),
            Some(10),
            "untraced frame at depth 2 in between"
        );
        s.end_call(3, 30, 130);
        // A RETURN at depth 1 unwinds past depth 3 (an exception, say).
        assert_eq!(
            s.begin_return(1).map(|f| (f.method, f.time_ns)),
            Some((10, 100))
        );
        s.end_return(1);
        assert_eq!(s.depth, 0);
        assert_eq!(s.begin_return(0).map(|f| f.method), None);
    }
}
