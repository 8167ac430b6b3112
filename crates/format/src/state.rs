//! Per-chunk, per-thread state that lets CALL and RETURN records leave out
//! what the reader can predict: the depth, the returning method, the
//! caller's method and the elapsed time.
//!
//! The writer and the reader run exactly this code on the same events, so
//! their predictions agree by construction. The state is reset at every
//! chunk start (through a generation number, so resetting costs nothing
//! per thread), which keeps each chunk decodable on its own.

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
}

impl ThreadState {
    /// Forgets everything from earlier chunks.
    #[inline]
    pub(crate) fn enter_chunk(&mut self, generation: u32) {
        if self.generation != generation {
            self.generation = generation;
            self.depth = 0;
            self.frames.clear();
        }
    }

    /// Before a CALL at `depth`: drops frames that cannot be open any more
    /// (those at `depth` or deeper) and returns the innermost remaining
    /// frame's method, the predicted caller.
    #[inline]
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
    #[inline]
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
    #[inline]
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
    #[inline]
    pub(crate) fn end_return(&mut self, depth: u32) {
        if self.frames.last().is_some_and(|f| f.depth == depth) {
            self.frames.pop();
        }
        self.depth = depth.wrapping_sub(1);
    }
}

/// The per-thread states of a writer or reader, indexed by thread handle.
#[derive(Debug, Default)]
pub(crate) struct Threads {
    states: Vec<ThreadState>,
}

impl Threads {
    /// The state of `thread` (below [`crate::wire::MAX_THREAD_REF`]), made
    /// current for `generation`.
    #[inline]
    pub(crate) fn get(&mut self, thread: u32, generation: u32) -> &mut ThreadState {
        let i = thread as usize;
        if i >= self.states.len() {
            self.states.resize_with(i + 1, ThreadState::default);
        }
        let s = &mut self.states[i];
        s.enter_chunk(generation);
        s
    }

    /// Call when the generation counter wraps around, so that no state
    /// from 2^32 chunks ago passes for current.
    pub(crate) fn reset_all(&mut self) {
        for s in &mut self.states {
            s.generation = 0;
            s.depth = 0;
            s.frames.clear();
        }
    }
}
