//! Decoding one chunk payload into symbols and events.
//!
//! A payload is trusted only as far as its checksum goes, and a forged file
//! can carry a valid checksum, so every read is bounds-checked, every count
//! is limited by the bytes left, and any inconsistency ends the chunk with a
//! [`Malformed`] error instead of a panic. The per-chunk state mirrors the
//! writer's exactly (see `state.rs`), which is what makes the implicit
//! fields (thread, id, depth, returning method, elapsed time) decodable.

use crate::parallel::MethodScan;
use crate::state::Threads;
use crate::varint::{Cursor, Malformed};
use crate::wire::*;
use crate::{
    Event, EventKind, FrameType, Loc, MethodId, MethodSymbol, Metrics, Monitor, Outcome, Scanned,
    StackId, StackSymbol, StringId, Symbol, SymbolTable, ThreadRef, ThreadState, ThreadSymbol,
    Value, WindowReason,
};

const NO_THREAD: u32 = u32::MAX;

/// A version 2 thread stream being read.
#[derive(Debug, Clone, Copy)]
struct StreamCursor {
    thread: u32,
    pos: usize,
    end: usize,
    left: u32,
    prev_time: u64,
}

/// The chunk being read: its payload and the decoding state.
#[derive(Debug, Default)]
pub(crate) struct ChunkDecoder {
    pub header: ChunkHeader,
    /// File offset of the chunk header.
    pub offset: u64,
    pub payload: Vec<u8>,
    pos: usize,
    generation: u32,
    threads: Threads,
    cur_thread: u32,
    prev_time: u64,
    next_id: u64,
    /// Events decoded so far from this chunk.
    pub decoded: u32,
    pub first_id: Option<u64>,
    pub last_id: Option<u64>,
    error: Option<Malformed>,
    /// Lazy decode: parameter values, returned values and exception
    /// messages are stepped over without being built (params come back
    /// empty, a returned value as `Value::Unavailable`, a message as
    /// `None`), for readers that test only types, threads and symbols.
    pub skip_values: bool,
    /// End of the bytes the current record may use: the payload's end
    /// (version 1) or the current stream's (version 2).
    end: usize,
    /// Version 2: the chunk's streams, read in a merge by time.
    v2: bool,
    v2_open: bool,
    streams: Vec<StreamCursor>,
    /// Next event time and stream index of every stream with events left.
    merge: std::collections::BinaryHeap<std::cmp::Reverse<(u64, u32)>>,
    /// Events returned so far from a version 2 chunk.
    rank: u64,
    /// The stream being read (not in `merge`; its position is `pos`).
    v2_current: Option<u32>,
    /// Version 2: read the thread streams one after another, not merged
    /// by time. Each event decodes as in the merge (all implicit state is
    /// per thread), but the order, and so the ids, are not the trace's:
    /// only for a reader that counts.
    pub any_order: bool,
    /// With `any_order`: the next stream to read.
    next_stream: u32,
    /// A type-and-method scan's verdicts (see `MethodPick`), kept here so
    /// each chunk reuses the allocation.
    pub verdicts: Vec<u8>,
    /// A ranked scan (see `scan_ranked`): every event's merge key, stream
    /// after stream.
    keys: Vec<u64>,
    /// A ranked scan's events, kept here so each chunk reuses the
    /// allocation.
    collected: Vec<Event>,
    /// A ranked scan's kept events in the merge's order, likewise.
    order: Vec<Ranked>,
}

/// A kept event of a ranked scan (see `ChunkDecoder::scan_ranked`): its
/// merge key, stream, place (in its stream, then in the merge) and index
/// among the kept events.
#[derive(Debug, Clone, Copy)]
struct Ranked {
    key: u64,
    stream: u32,
    rank: u32,
    at: u32,
}

impl ChunkDecoder {
    /// Prepares to decode `payload` (already placed in `self.payload`).
    pub(crate) fn start(&mut self, header: ChunkHeader, offset: u64) {
        self.header = header;
        self.offset = offset;
        self.pos = 0;
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.generation = 1;
            self.threads.reset_all();
        }
        self.cur_thread = NO_THREAD;
        self.prev_time = 0;
        self.next_id = 0;
        self.decoded = 0;
        self.first_id = None;
        self.last_id = None;
        self.error = None;
        self.end = self.payload.len();
        self.v2 = header.version == FORMAT_VERSION_2;
        self.v2_open = false;
        self.streams.clear();
        self.merge.clear();
        self.rank = 0;
        self.v2_current = None;
        self.next_stream = 0;
    }

    /// Runs `step` (a record decoder) on the next event of a version 2
    /// chunk: the stream that comes next in time order is read as if it
    /// were a version 1 payload whose thread and next id are known. The
    /// stream being read stays out of the merge heap, and its position
    /// lives in the decoder's own fields, while its events come first:
    /// the heap is touched only when another stream's turn comes.
    #[inline(always)]
    fn v2_step<T>(
        &mut self,
        symbols: &mut SymbolTable,
        step: impl FnOnce(&mut Self, &mut SymbolTable) -> Result<Option<T>, Malformed>,
    ) -> Result<Option<T>, Malformed> {
        if !self.v2_open {
            self.open_v2(symbols)?;
        }
        let i = match self.v2_current {
            Some(i) => i,
            None => {
                let i = if self.any_order {
                    let i = self.next_stream;
                    if i as usize >= self.streams.len() {
                        return Ok(None);
                    }
                    self.next_stream += 1;
                    i
                } else {
                    let Some(std::cmp::Reverse((_, i))) = self.merge.pop() else {
                        return Ok(None);
                    };
                    i
                };
                let s = self.streams[i as usize];
                self.pos = s.pos;
                self.end = s.end;
                self.cur_thread = s.thread;
                self.prev_time = s.prev_time;
                self.v2_current = Some(i);
                i
            }
        };
        self.next_id = self.header.first_id.wrapping_add(self.rank);
        let out = step(self, symbols)?;
        if out.is_some() {
            self.rank += 1;
            let s = &mut self.streams[i as usize];
            s.left -= 1;
            if s.left == 0 {
                self.v2_current = None;
                if self.pos != self.end {
                    return Err(Malformed {
                        offset: self.pos,
                        what: "a thread stream that ends with its last event",
                    });
                }
            } else if self.any_order {
                // The stream goes on to its end.
            } else if let Some(&std::cmp::Reverse(other)) = self.merge.peek() {
                let t = peek_time(&self.payload[..self.end], self.pos, self.prev_time)?;
                if (t, i) > other {
                    s.pos = self.pos;
                    s.prev_time = self.prev_time;
                    self.merge.push(std::cmp::Reverse((t, i)));
                    self.v2_current = None;
                }
            } else {
                // The last stream with events: its own order is the order.
            }
        }
        Ok(out)
    }

    /// Reads a version 2 payload's directory and symbol section, and
    /// starts the merge.
    #[cold]
    fn open_v2(&mut self, symbols: &mut SymbolTable) -> Result<(), Malformed> {
        self.v2_open = true;
        let p = &self.payload;
        let n = p.len();
        let bad = |offset, what| Malformed { offset, what };
        if n < 4 {
            return Err(bad(0, "a directory length at the end of the payload"));
        }
        let dir_len = u32::from_le_bytes([p[n - 4], p[n - 3], p[n - 2], p[n - 1]]) as usize;
        let dir_at = (n - 4)
            .checked_sub(dir_len)
            .ok_or(bad(n - 4, "a directory that fits the payload"))?;
        let mut c = Cursor::new(&p[..n - 4], dir_at);
        let count = c.count(3)?;
        if count == 0 {
            return Err(c.err("at least one thread stream"));
        }
        let mut total_len = 0usize;
        let mut total_events = 0u64;
        let mut prev_thread = None;
        let mut entries = Vec::with_capacity(count.min(PREALLOC_LIMIT));
        for _ in 0..count {
            let at = c.pos();
            let t = c.u32()?;
            if t >= MAX_THREAD_REF || prev_thread.is_some_and(|pt| t <= pt) {
                return Err(bad(at, "stream threads below 2^20 in increasing order"));
            }
            prev_thread = Some(t);
            let events = c.u32()?;
            let len = c.u64()?;
            if events == 0 || len == 0 {
                return Err(bad(at, "a stream with events"));
            }
            let len = usize::try_from(len)
                .ok()
                .filter(|&l| l <= dir_at)
                .ok_or(bad(at, "a stream length that fits the payload"))?;
            total_len = total_len
                .checked_add(len)
                .filter(|&l| l <= dir_at)
                .ok_or(bad(at, "stream lengths that fit the payload"))?;
            total_events += u64::from(events);
            entries.push((t, events, len));
        }
        if !c.at_end() {
            return Err(c.err("a directory that ends where its length says"));
        }
        let h = &self.header;
        if total_events != u64::from(h.event_count)
            || h.last_id.wrapping_sub(h.first_id).wrapping_add(1) != u64::from(h.event_count)
        {
            return Err(bad(
                dir_at,
                "stream event counts that match a dense id range",
            ));
        }
        // The symbol section.
        let streams_at = dir_at - total_len;
        let mut c = Cursor::new(&p[..streams_at], 0);
        while !c.at_end() {
            let at = c.pos();
            let tag = c.u8()?;
            if !symbol_tag(tag) {
                return Err(bad(at, "only symbol records before the thread streams"));
            }
            symbols.insert(read_symbol(&mut c, tag)?);
        }
        let mut pos = streams_at;
        for (i, (thread, left, len)) in entries.into_iter().enumerate() {
            let s = StreamCursor {
                thread,
                pos,
                end: pos + len,
                left,
                prev_time: 0,
            };
            pos += len;
            let t = peek_time(&self.payload[..s.end], s.pos, 0)?;
            self.streams.push(s);
            self.merge.push(std::cmp::Reverse((t, i as u32)));
        }
        Ok(())
    }

    /// The next event, after adding the symbol records before it to
    /// `symbols`; `None` at the end of the payload or at damage, in which
    /// case `take_error` says what was wrong. (An `Option` rather than a
    /// `Result` so the event can travel to the caller without reshuffling.)
    #[inline]
    pub(crate) fn next(&mut self, symbols: &mut SymbolTable) -> Option<Event> {
        let r = if self.v2 {
            self.v2_step(symbols, |d, s| d.decode(s))
        } else {
            self.decode(symbols)
        };
        match r {
            Ok(ev) => ev,
            Err(e) => {
                self.error = Some(e);
                None
            }
        }
    }

    /// Why the last `next` returned `None`: `None` for the end of the payload.
    pub(crate) fn take_error(&mut self) -> Option<Malformed> {
        self.error.take()
    }

    #[inline(always)]
    fn decode(&mut self, symbols: &mut SymbolTable) -> Result<Option<Event>, Malformed> {
        loop {
            let mut c = Cursor::new(&self.payload[..self.end], self.pos);
            if c.at_end() {
                return Ok(None);
            }
            let tag = c.u8()?;
            let op = tag & OP_MASK;
            if op <= OP_THREAD || op == OP_STACK {
                if self.v2 {
                    return Err(c.err("no symbol record inside a thread stream"));
                }
                if !symbol_tag(tag) {
                    return Err(Malformed {
                        offset: self.pos,
                        what: "a symbol record tag without flags",
                    });
                }
                let sym = read_symbol(&mut c, tag)?; // cold: once per symbol per chunk
                symbols.insert(sym);
                self.pos = c.pos();
                continue;
            }

            if self.v2 && tag & (F_THREAD | F_ID) != 0 {
                return Err(c.err("no thread or id bits inside a thread stream"));
            }
            if tag & F_THREAD != 0 {
                let at = c.pos();
                let t = c.u32()?;
                if t >= MAX_THREAD_REF {
                    return Err(Malformed {
                        offset: at,
                        what: "a thread handle below 2^20",
                    });
                }
                self.cur_thread = t;
            } else if self.cur_thread == NO_THREAD {
                return Err(c.err("a thread for the chunk's first event"));
            }
            let thread = self.cur_thread;
            let id = if tag & F_ID != 0 {
                let at = c.pos();
                let gap = c.u64()?;
                self.next_id.checked_add(gap).ok_or(Malformed {
                    offset: at,
                    what: "an id gap that does not overflow",
                })?
            } else {
                self.next_id
            };
            let time_ns = self.prev_time.wrapping_add(c.i64()? as u64);
            let kind_flag = tag & F_KIND != 0;
            let gen = self.generation;

            let kind = match op {
                OP_CALL => {
                    let x = if kind_flag { c.u8()? } else { 0 };
                    if x & !CALL_KNOWN != 0 || (kind_flag && x == 0) {
                        return Err(c.err("known CALL flags"));
                    }
                    let method = c.u32()?;
                    let st = self.threads.get(thread, gen);
                    let expected = st.depth.wrapping_add(1);
                    let depth = if x & CALL_DEPTH != 0 {
                        read_depth(&mut c, expected)?
                    } else {
                        expected
                    };
                    let predicted_caller = st.begin_call(depth);
                    let body_end = if self.v2 && x & CALL_BODY != 0 {
                        Some(body_length(&mut c)?)
                    } else {
                        None
                    };
                    let (caller, params, metrics) =
                        read_call_body(&mut c, x, predicted_caller, self.skip_values, st)?;
                    body_ends(&c, body_end)?;
                    st.end_call(depth, method, time_ns);
                    EventKind::Call {
                        method: MethodId(method),
                        depth,
                        caller,
                        params,
                        metrics,
                    }
                }
                OP_RETURN => {
                    let x = if kind_flag { c.u8()? } else { 0 };
                    if x & !RET_KNOWN != 0 || (kind_flag && x == 0) {
                        return Err(c.err("known RETURN flags"));
                    }
                    let explicit_method = if x & RET_METHOD != 0 {
                        Some(c.u32()?)
                    } else {
                        None
                    };
                    let st = self.threads.get(thread, gen);
                    let expected = st.depth;
                    let depth = if x & RET_DEPTH != 0 {
                        read_depth(&mut c, expected)?
                    } else {
                        expected
                    };
                    let open = st.begin_return(depth);
                    let method = match (explicit_method, open) {
                        (Some(m), _) => m,
                        (None, Some(f)) => f.method,
                        (None, None) => return Err(c.err("an open CALL for the RETURN's method")),
                    };
                    let elapsed_ns = if x & RET_ELAPSED != 0 {
                        c.u64()?
                    } else {
                        match open {
                            Some(f) => time_ns.wrapping_sub(f.time_ns),
                            None => return Err(c.err("an open CALL for the RETURN's elapsed time")),
                        }
                    };
                    let body_end = if self.v2 && x & RET_BODY != 0 {
                        Some(body_length(&mut c)?)
                    } else {
                        None
                    };
                    let (outcome, metrics) = read_return_body(&mut c, x, self.skip_values, st)?;
                    body_ends(&c, body_end)?;
                    st.end_return(depth);
                    EventKind::Return {
                        method: MethodId(method),
                        depth,
                        outcome,
                        elapsed_ns,
                        metrics,
                    }
                }
                OP_MONITOR_ENTER | OP_MONITOR_EXIT => {
                    let monitor = read_monitor(&mut c)?;
                    let current = self.threads.get(thread, gen).depth;
                    let depth = if kind_flag {
                        read_depth(&mut c, current)?
                    } else {
                        current
                    };
                    if op == OP_MONITOR_ENTER {
                        EventKind::MonitorEnter { monitor, depth }
                    } else {
                        EventKind::MonitorExit { monitor, depth }
                    }
                }
                OP_BYTECODE => {
                    let st = self.threads.get(thread, gen);
                    let method = if kind_flag {
                        let m = c.u32()?;
                        st.bytecode_method = Some(m);
                        m
                    } else {
                        st.bytecode_method
                            .ok_or(c.err("an earlier BYTECODE of the thread for the method"))?
                    };
                    EventKind::Bytecode {
                        method: MethodId(method),
                        bci: c.u32()?,
                        insn: StringId(c.u32()?),
                    }
                }
                _ => read_other_event(&mut c, op, kind_flag, self.pos, self.skip_values)?,
            };

            self.pos = c.pos();
            self.prev_time = time_ns;
            self.next_id = id.wrapping_add(1);
            self.decoded = self.decoded.wrapping_add(1);
            if self.first_id.is_none() {
                self.first_id = Some(id);
            }
            self.last_id = Some(id);
            return Ok(Some(Event {
                id,
                time_ns,
                thread: ThreadRef(thread),
                kind,
            }));
        }
    }
}

/// What a head scan ([`ChunkDecoder::scan_heads`]) asks of its caller.
pub(crate) trait HeadPick {
    /// Whether `pick` and `event` need events' times; without, a version 2
    /// scan in any order steps over them (each a varint's length, not its
    /// value: a tenth of a count's time), and the times given mean nothing.
    fn wants_times(&self) -> bool {
        true
    }
    /// Whether to build a CALL (`ret == false`) or RETURN from its head.
    fn pick(
        &mut self,
        id: u64,
        time_ns: u64,
        thread: u32,
        ret: bool,
        method: u32,
        symbols: &SymbolTable,
    ) -> bool;
    /// A picked CALL or RETURN, or any other event, whole.
    fn event(&mut self, ev: Event, symbols: &SymbolTable);
}

/// [`ChunkDecoder::scan_picked`]'s closure as a [`HeadPick`].
struct ScannedPick<'a, F>(&'a mut F);

impl<F: FnMut(&Scanned, &SymbolTable) -> bool> HeadPick for ScannedPick<'_, F> {
    #[inline(always)]
    fn pick(
        &mut self,
        id: u64,
        time_ns: u64,
        thread: u32,
        ret: bool,
        method: u32,
        symbols: &SymbolTable,
    ) -> bool {
        let head = Scanned::Head {
            id,
            time_ns,
            thread: ThreadRef(thread),
            ret,
            method: MethodId(method),
        };
        (self.0)(&head, symbols)
    }

    #[inline(always)]
    fn event(&mut self, ev: Event, symbols: &SymbolTable) {
        (self.0)(&Scanned::Full(ev), symbols);
    }
}

/// A ranked scan's [`HeadPick`]: picks as `inner` does, and keeps the
/// events for it.
struct Collect<'a, P> {
    inner: &'a mut P,
    events: Vec<Event>,
}

impl<P: HeadPick> HeadPick for Collect<'_, P> {
    #[inline(always)]
    fn pick(
        &mut self,
        id: u64,
        time_ns: u64,
        thread: u32,
        ret: bool,
        method: u32,
        symbols: &SymbolTable,
    ) -> bool {
        self.inner.pick(id, time_ns, thread, ret, method, symbols)
    }

    #[inline(always)]
    fn event(&mut self, ev: Event, _: &SymbolTable) {
        self.events.push(ev);
    }
}

/// A type-and-method scan's [`HeadPick`]: each CALL's and RETURN's verdict
/// comes from `verdicts`, by method handle, filled from the scan the first
/// time a method is seen while the symbol table knows it. With `BUILD`,
/// the picked are built and given to the scan; without, only counted (and
/// no time is read: see [`HeadPick::wants_times`]).
pub(crate) struct MethodPick<'a, S, const BUILD: bool> {
    pub scan: &'a mut S,
    /// By method handle: bit 0 "CALL known", bit 1 "a CALL is picked",
    /// bits 2 and 3 the same for RETURN.
    pub verdicts: &'a mut Vec<u8>,
    /// Whether a CALL (0) or RETURN (1) of any method can be picked
    /// ([`MethodScan::can_pick`]).
    pub kinds: [bool; 2],
    /// CALLs and RETURNs picked so far.
    pub picked: u64,
}

/// Method handles past this get no cached verdict (a forged file may name
/// any handle; real ones are dense).
const VERDICT_LIMIT: u32 = 1 << 20;

impl<S: MethodScan, const BUILD: bool> MethodPick<'_, S, BUILD> {
    #[cold]
    #[inline(never)]
    fn verdict(&mut self, ret: bool, method: u32, symbols: &SymbolTable) -> bool {
        let v = self.scan.verdict(ret, MethodId(method), symbols);
        if method < VERDICT_LIMIT && symbols.method(MethodId(method)).is_some() {
            let i = method as usize;
            if i >= self.verdicts.len() {
                self.verdicts.resize(i + 1, 0);
            }
            self.verdicts[i] |= (1 | u8::from(v) << 1) << (2 * u8::from(ret));
        }
        v
    }
}

impl<S: MethodScan, const BUILD: bool> HeadPick for MethodPick<'_, S, BUILD> {
    fn wants_times(&self) -> bool {
        BUILD
    }

    #[inline(always)]
    fn pick(
        &mut self,
        _id: u64,
        _time_ns: u64,
        _thread: u32,
        ret: bool,
        method: u32,
        symbols: &SymbolTable,
    ) -> bool {
        if !self.kinds[usize::from(ret)] {
            return false;
        }
        let shift = 2 * u8::from(ret);
        let v = match self.verdicts.get(method as usize) {
            Some(&b) if b >> shift & 1 != 0 => b >> shift & 2 != 0,
            _ => self.verdict(ret, method, symbols),
        };
        self.picked += u64::from(v);
        v && BUILD
    }

    #[inline(always)]
    fn event(&mut self, ev: Event, symbols: &SymbolTable) {
        self.scan.event(ev, symbols)
    }
}

impl ChunkDecoder {
    /// Runs `f` over the rest of the chunk as
    /// [`ChunkFile::for_each_picked`](crate::parallel::ChunkFile::for_each_picked)
    /// promises: each CALL's and RETURN's head first (`f` answering whether
    /// to build it), then the picked ones and every other event whole. The
    /// loop runs here, and a head is handed over by reference: moving the
    /// event enum out through the layers of calls cost more than decoding
    /// the head. Damage ends the loop with `take_error` set.
    #[inline]
    pub(crate) fn scan_picked(
        &mut self,
        symbols: &mut SymbolTable,
        f: &mut impl FnMut(&Scanned, &SymbolTable) -> bool,
    ) {
        self.scan_heads(symbols, &mut ScannedPick(f))
    }

    /// Runs `p` over the rest of the chunk: each CALL's and RETURN's head
    /// to [`HeadPick::pick`], then the picked ones and every other event
    /// whole to [`HeadPick::event`]. Damage ends the loop with
    /// `take_error` set.
    #[inline]
    pub(crate) fn scan_heads(&mut self, symbols: &mut SymbolTable, p: &mut impl HeadPick) {
        if self.v2 && self.any_order && self.rank == 0 {
            let r = if p.wants_times() {
                self.scan_streams::<false, true>(symbols, p)
            } else {
                self.scan_streams::<false, false>(symbols, p)
            };
            if let Err(e) = r {
                self.error = Some(e);
            }
            return;
        }
        loop {
            let r = if self.v2 {
                self.v2_step(symbols, |d, s| d.decode_head(s, p))
            } else {
                self.decode_head(symbols, p)
            };
            match r {
                Ok(Some(())) => {}
                Ok(None) => match self.next(symbols) {
                    Some(ev) => p.event(ev, symbols),
                    None => return,
                },
                Err(e) => {
                    self.error = Some(e);
                    return;
                }
            }
        }
    }

    /// Whether the chunk is in format version 2 (thread streams).
    pub(crate) fn is_v2(&self) -> bool {
        self.v2
    }

    /// [`scan_heads`](Self::scan_heads) of a version 2 chunk in the trace's
    /// order and with its ids, without the merge by time: the streams are
    /// read one after another (`scan_streams`), what `p` is to get whole is
    /// kept, and each kept event's place in the merge is then counted from
    /// the other streams' merge keys.
    ///
    /// Why that is the merge's order: the merge takes next the stream
    /// whose next event has the earliest time, the lowest stream on a tie.
    /// A stream's event earlier than one before it in the same stream
    /// (a time that goes back) comes right after it: the stream was taken
    /// at that later time, so every other stream's next is later still
    /// (or as late, from a higher stream). So the order is the same with
    /// each event's time replaced by the latest time of its stream up to
    /// it, its *key*; keys rise within a stream, and an event comes after
    /// exactly the events of lower streams with a key up to its own and
    /// those of higher streams with a smaller key (counted in one walk over
    /// each stream's keys, the kept events taken in the merge's order).
    /// Damage sets the error as `scan_heads` does, and then nothing is
    /// given to `p.event`.
    pub(crate) fn scan_ranked(&mut self, symbols: &mut SymbolTable, p: &mut impl HeadPick) {
        let mut events = std::mem::take(&mut self.collected);
        events.clear();
        let mut collect = Collect {
            inner: &mut *p,
            events,
        };
        let r = self.scan_streams::<true, true>(symbols, &mut collect);
        let mut events = collect.events;
        let starts: Vec<usize> = std::iter::once(0)
            .chain(self.streams.iter().scan(0usize, |n, s| {
                *n += s.left as usize;
                Some(*n)
            }))
            .collect();
        // A stream that ended early leaves the chunk's totals short, and
        // the chunk fails: nothing to hand on then either.
        let whole = starts.last() == Some(&self.keys.len());
        match r {
            Err(e) => self.error = Some(e),
            Ok(()) if whole => {
                let first_id = self.header.first_id;
                // The kept events in the merge's order: by key, then
                // stream, then place in the stream (a unique position).
                let mut order = std::mem::take(&mut self.order);
                order.clear();
                let mut s = 0;
                for (k, ev) in events.iter().enumerate() {
                    let g = ev.id.wrapping_sub(first_id) as usize;
                    while starts[s + 1] <= g {
                        s += 1;
                    }
                    order.push(Ranked {
                        key: self.keys[g],
                        stream: s as u32,
                        rank: (g - starts[s]) as u32,
                        at: k as u32,
                    });
                }
                order.sort_unstable_by_key(|o| (o.key, o.stream, o.rank));
                // An event comes after the events of every other stream
                // that come before it in that order: one walk per stream
                // over its keys, as the kept events' places only rise.
                for (j, w) in starts.windows(2).enumerate() {
                    let keys = &self.keys[w[0]..w[1]];
                    let mut n = 0;
                    for o in order.iter_mut() {
                        let s = o.stream as usize;
                        if s == j {
                            continue;
                        }
                        // A lower stream's events come first on a tie.
                        if j < s {
                            while n < keys.len() && keys[n] <= o.key {
                                n += 1;
                            }
                        } else {
                            while n < keys.len() && keys[n] < o.key {
                                n += 1;
                            }
                        }
                        o.rank += n as u32;
                    }
                }
                for o in &order {
                    events[o.at as usize].id = first_id.wrapping_add(u64::from(o.rank));
                }
                events.sort_unstable_by_key(|e| e.id.wrapping_sub(first_id));
                for ev in events.drain(..) {
                    p.event(ev, symbols);
                }
                self.order = order;
            }
            Ok(()) => {}
        }
        events.clear();
        self.collected = events;
    }

    /// [`scan_heads`](Self::scan_heads) of a version 2 chunk in any order:
    /// each thread stream read from start to end, its position, time and
    /// thread state in locals, CALLs and RETURNs by [`head_body`] and every
    /// other event by [`decode`](Self::decode). The events, their checks
    /// and their (not the trace's) ids are those `v2_step` gives in any
    /// order. With `RECORD`, every event's merge key (the latest time of its
    /// stream up to it; see `scan_ranked`) goes to `keys`. Without `TIMES`,
    /// a CALL's or RETURN's time is stepped over (see
    /// [`HeadPick::wants_times`]): every time from then on is wrong.
    fn scan_streams<const RECORD: bool, const TIMES: bool>(
        &mut self,
        symbols: &mut SymbolTable,
        p: &mut impl HeadPick,
    ) -> Result<(), Malformed> {
        if !self.v2_open {
            self.open_v2(symbols)?;
        }
        let first_id = self.header.first_id;
        let gen = self.generation;
        let skip_values = self.skip_values;
        let mut rank = self.rank;
        // Out of the decoder while they are written, with room for every
        // event the directory announced (each takes at least two bytes).
        let mut keys = std::mem::take(&mut self.keys);
        keys.clear();
        if RECORD {
            keys.reserve(self.header.event_count.min(self.payload.len() as u32 / 2) as usize);
        }
        // Out of the decoder while it reads them (`decode` does not use them).
        let streams = std::mem::take(&mut self.streams);
        let result = (|| -> Result<(), Malformed> {
            for &s in &streams {
                let (mut pos, mut prev_time, mut left) = (s.pos, 0u64, s.left);
                let mut key = 0u64;
                while left > 0 {
                    {
                        // CALLs and RETURNs, the bulk of a stream, here.
                        let mut c = Cursor::new(&self.payload[..s.end], pos);
                        let st = self.threads.get(s.thread, gen);
                        // In locals while the loop runs (a damaged record
                        // fails the chunk: its totals are not needed then).
                        let (mut r, start_left) = (rank, left);
                        while left > 0 {
                            let Some(tag) = c.peek() else {
                                break;
                            };
                            let op = tag & OP_MASK;
                            if op != OP_CALL && op != OP_RETURN {
                                break;
                            }
                            c.u8()?;
                            if tag & (F_THREAD | F_ID) != 0 {
                                return Err(c.err("no thread or id bits inside a thread stream"));
                            }
                            let id = first_id.wrapping_add(r);
                            let time_ns = if TIMES {
                                prev_time.wrapping_add(c.i64()? as u64)
                            } else {
                                c.skip_u64()?;
                                0
                            };
                            let h = Head {
                                tag,
                                op,
                                v2: true,
                                skip_values,
                                id,
                                time_ns,
                                thread: s.thread,
                            };
                            head_body(&mut c, st, h, symbols, p)?;
                            if RECORD {
                                key = key.max(time_ns);
                                keys.push(key);
                            }
                            prev_time = time_ns;
                            pos = c.pos();
                            left -= 1;
                            r += 1;
                        }
                        rank = r;
                        self.decoded = self.decoded.wrapping_add(start_left - left);
                    }
                    if left == 0 {
                        break;
                    }
                    // Any other event (or damage), decoded whole.
                    self.pos = pos;
                    self.end = s.end;
                    self.cur_thread = s.thread;
                    self.prev_time = prev_time;
                    self.next_id = first_id.wrapping_add(rank);
                    let Some(ev) = self.decode(symbols)? else {
                        // The stream ends early: as in order, the chunk
                        // ends here (and its totals disagree).
                        return Ok(());
                    };
                    if RECORD {
                        key = key.max(ev.time_ns);
                        keys.push(key);
                    }
                    prev_time = self.prev_time;
                    pos = self.pos;
                    left -= 1;
                    rank += 1;
                    p.event(ev, symbols);
                }
                if pos != s.end {
                    return Err(Malformed {
                        offset: pos,
                        what: "a thread stream that ends with its last event",
                    });
                }
            }
            Ok(())
        })();
        self.streams = streams;
        self.keys = keys;
        // The decoder ends as `v2_step` leaves it, every stream read.
        if rank > 0 {
            self.first_id = Some(first_id);
            self.last_id = Some(first_id.wrapping_add(rank - 1));
        }
        self.rank = rank;
        self.v2_current = None;
        self.next_stream = self.streams.len() as u32;
        result
    }

    /// A CALL or RETURN: its head to `pick`, and whole to `pick` again when
    /// it answered `true` (its parameters, caller, returned value and
    /// metrics are otherwise stepped over with the same checks, and the
    /// same per-thread state kept, as a full decode: the same bytes are
    /// damaged either way). `Ok(None)` (nothing consumed past the symbol
    /// records) at the end of the payload or before another event.
    #[inline(always)]
    fn decode_head(
        &mut self,
        symbols: &mut SymbolTable,
        p: &mut impl HeadPick,
    ) -> Result<Option<()>, Malformed> {
        loop {
            let mut c = Cursor::new(&self.payload[..self.end], self.pos);
            if c.at_end() {
                return Ok(None);
            }
            let tag = c.u8()?;
            let op = tag & OP_MASK;
            if op <= OP_THREAD || op == OP_STACK {
                if self.v2 {
                    return Err(c.err("no symbol record inside a thread stream"));
                }
                if !symbol_tag(tag) {
                    return Err(Malformed {
                        offset: self.pos,
                        what: "a symbol record tag without flags",
                    });
                }
                let sym = read_symbol(&mut c, tag)?;
                symbols.insert(sym);
                self.pos = c.pos();
                continue;
            }
            if op != OP_CALL && op != OP_RETURN {
                return Ok(None);
            }
            let mut thread = self.cur_thread;
            if self.v2 && tag & (F_THREAD | F_ID) != 0 {
                return Err(c.err("no thread or id bits inside a thread stream"));
            }
            if tag & F_THREAD != 0 {
                let at = c.pos();
                let t = c.u32()?;
                if t >= MAX_THREAD_REF {
                    return Err(Malformed {
                        offset: at,
                        what: "a thread handle below 2^20",
                    });
                }
                thread = t;
            } else if thread == NO_THREAD {
                return Err(c.err("a thread for the chunk's first event"));
            }
            let id = if tag & F_ID != 0 {
                let at = c.pos();
                let gap = c.u64()?;
                self.next_id.checked_add(gap).ok_or(Malformed {
                    offset: at,
                    what: "an id gap that does not overflow",
                })?
            } else {
                self.next_id
            };
            let time_ns = self.prev_time.wrapping_add(c.i64()? as u64);
            head_body(
                &mut c,
                self.threads.get(thread, self.generation),
                Head {
                    tag,
                    op,
                    v2: self.v2,
                    skip_values: self.skip_values,
                    id,
                    time_ns,
                    thread,
                },
                symbols,
                p,
            )?;
            self.cur_thread = thread;
            self.pos = c.pos();
            self.prev_time = time_ns;
            self.next_id = id.wrapping_add(1);
            self.decoded = self.decoded.wrapping_add(1);
            if self.first_id.is_none() {
                self.first_id = Some(id);
            }
            self.last_id = Some(id);
            return Ok(Some(()));
        }
    }
}

/// What a CALL's or RETURN's tag, thread, id and time said, for
/// [`head_body`].
#[derive(Clone, Copy)]
struct Head {
    tag: u8,
    op: u8,
    v2: bool,
    skip_values: bool,
    id: u64,
    time_ns: u64,
    thread: u32,
}

/// The rest of a CALL or RETURN after its tag, thread, id and time, as
/// [`ChunkDecoder::decode_head`] reads it: its head to `p.pick`, and the
/// event whole to `p.event` when `p` answered `true`; its parameters,
/// caller, returned value and metrics are otherwise stepped over with the
/// same checks, and the same per-thread state `st` kept, as a full
/// decode. Shared with the per-stream scan of a version 2 chunk.
#[inline(always)]
fn head_body(
    c: &mut Cursor,
    st: &mut crate::state::ThreadState,
    h: Head,
    symbols: &SymbolTable,
    p: &mut impl HeadPick,
) -> Result<(), Malformed> {
    let Head {
        tag,
        op,
        id,
        time_ns,
        thread,
        ..
    } = h;
    let kind_flag = tag & F_KIND != 0;
    let x = if kind_flag { c.u8()? } else { 0 };
    if op == OP_CALL {
        if x & !CALL_KNOWN != 0 || (kind_flag && x == 0) {
            return Err(c.err("known CALL flags"));
        }
        let method = c.u32()?;
        let expected = st.depth.wrapping_add(1);
        let depth = if x & CALL_DEPTH != 0 {
            read_depth(c, expected)?
        } else {
            expected
        };
        let predicted_caller = st.begin_call(depth);
        let body_end = if h.v2 && x & CALL_BODY != 0 {
            Some(body_length(c)?)
        } else {
            None
        };
        if p.pick(id, time_ns, thread, false, method, symbols) {
            let (caller, params, metrics) =
                read_call_body(c, x, predicted_caller, h.skip_values, st)?;
            body_ends(c, body_end)?;
            // Handed on here, not returned: moving the event out through
            // the loop cost more than decoding a head.
            p.event(
                Event {
                    id,
                    time_ns,
                    thread: ThreadRef(thread),
                    kind: EventKind::Call {
                        method: MethodId(method),
                        depth,
                        caller,
                        params,
                        metrics,
                    },
                },
                symbols,
            );
        } else if let (Some(end), 0) = (body_end, x & (CALL_CPU | CALL_ALLOC)) {
            // The body is stepped over whole; only what the head
            // implies is checked. (Metrics are deltas on the
            // thread's running totals: a body with them is read.)
            if x & CALL_CALLER == 0 && x & CALL_CALLER_METHOD != 0 {
                return Err(c.err("a caller method only with a caller"));
            }
            if x & (CALL_CALLER | CALL_CALLER_METHOD) == CALL_CALLER && predicted_caller.is_none() {
                return Err(c.err("an open CALL to name the caller"));
            }
            c.bytes(end - c.pos())?;
        } else {
            if x & CALL_CALLER != 0 {
                if x & CALL_CALLER_METHOD != 0 {
                    c.u32()?;
                } else if predicted_caller.is_none() {
                    return Err(c.err("an open CALL to name the caller"));
                }
                read_loc(c)?;
            } else if x & CALL_CALLER_METHOD != 0 {
                return Err(c.err("a caller method only with a caller"));
            }
            if x & CALL_PARAMS != 0 {
                let n = c.count(1)?;
                for _ in 0..n {
                    skip_value(c, 0)?;
                }
            }
            read_metrics(
                c,
                x & CALL_CPU != 0,
                x & CALL_ALLOC != 0,
                &mut st.cpu_ns,
                &mut st.alloc_bytes,
            )?;
            body_ends(c, body_end)?;
        }
        st.end_call(depth, method, time_ns);
    } else {
        if x & !RET_KNOWN != 0 || (kind_flag && x == 0) {
            return Err(c.err("known RETURN flags"));
        }
        let explicit_method = if x & RET_METHOD != 0 {
            Some(c.u32()?)
        } else {
            None
        };
        let expected = st.depth;
        let depth = if x & RET_DEPTH != 0 {
            read_depth(c, expected)?
        } else {
            expected
        };
        let open = st.begin_return(depth);
        let method = match (explicit_method, open) {
            (Some(m), _) => m,
            (None, Some(f)) => f.method,
            (None, None) => return Err(c.err("an open CALL for the RETURN's method")),
        };
        let elapsed_ns = if x & RET_ELAPSED != 0 {
            c.u64()?
        } else {
            match open {
                Some(f) => time_ns.wrapping_sub(f.time_ns),
                None => return Err(c.err("an open CALL for the RETURN's elapsed time")),
            }
        };
        let body_end = if h.v2 && x & RET_BODY != 0 {
            Some(body_length(c)?)
        } else {
            None
        };
        if p.pick(id, time_ns, thread, true, method, symbols) {
            let (outcome, metrics) = read_return_body(c, x, h.skip_values, st)?;
            body_ends(c, body_end)?;
            p.event(
                Event {
                    id,
                    time_ns,
                    thread: ThreadRef(thread),
                    kind: EventKind::Return {
                        method: MethodId(method),
                        depth,
                        outcome,
                        elapsed_ns,
                        metrics,
                    },
                },
                symbols,
            );
        } else {
            if (x & RET_OUTCOME_MASK) >> RET_OUTCOME_SHIFT == 3 {
                return Err(c.err("a known RETURN outcome"));
            }
            if let (Some(end), 0) = (body_end, x & (RET_CPU | RET_ALLOC)) {
                c.bytes(end - c.pos())?;
            } else {
                match (x & RET_OUTCOME_MASK) >> RET_OUTCOME_SHIFT {
                    0 => {}
                    1 => skip_value(c, 0)?,
                    _ => {
                        c.u32()?;
                    }
                }
                read_metrics(
                    c,
                    x & RET_CPU != 0,
                    x & RET_ALLOC != 0,
                    &mut st.cpu_ns,
                    &mut st.alloc_bytes,
                )?;
                body_ends(c, body_end)?;
            }
        }
        st.end_return(depth);
    }
    Ok(())
}

/// A CALL's caller, parameters and metrics.
type CallBody = (Option<(MethodId, Loc)>, Vec<Value>, Metrics);

/// A CALL's caller, parameters and metrics, after its head (`x` is its
/// flags byte; with `skip_values` the parameters are stepped over). Shared
/// by the full decode and a picked head, so the two read the same bytes.
#[inline(always)]
fn read_call_body(
    c: &mut Cursor,
    x: u8,
    predicted_caller: Option<u32>,
    skip_values: bool,
    st: &mut crate::state::ThreadState,
) -> Result<CallBody, Malformed> {
    let caller = if x & CALL_CALLER != 0 {
        let cm = if x & CALL_CALLER_METHOD != 0 {
            c.u32()?
        } else {
            predicted_caller.ok_or(c.err("an open CALL to name the caller"))?
        };
        Some((MethodId(cm), read_loc(c)?))
    } else if x & CALL_CALLER_METHOD != 0 {
        return Err(c.err("a caller method only with a caller"));
    } else {
        None
    };
    let params = if x & CALL_PARAMS != 0 && skip_values {
        let n = c.count(1)?;
        for _ in 0..n {
            skip_value(c, 0)?;
        }
        Vec::new()
    } else if x & CALL_PARAMS != 0 {
        let n = c.count(1)?;
        let mut v = Vec::with_capacity(n.min(PREALLOC_LIMIT));
        for _ in 0..n {
            v.push(read_value(c, 0)?);
        }
        v
    } else {
        Vec::new()
    };
    let metrics = read_metrics(
        c,
        x & CALL_CPU != 0,
        x & CALL_ALLOC != 0,
        &mut st.cpu_ns,
        &mut st.alloc_bytes,
    )?;
    Ok((caller, params, metrics))
}

/// A RETURN's outcome and metrics, after its head: the twin of
/// [`read_call_body`].
#[inline(always)]
fn read_return_body(
    c: &mut Cursor,
    x: u8,
    skip_values: bool,
    st: &mut crate::state::ThreadState,
) -> Result<(Outcome, Metrics), Malformed> {
    let outcome = match (x & RET_OUTCOME_MASK) >> RET_OUTCOME_SHIFT {
        0 => Outcome::Void,
        1 if skip_values => {
            skip_value(c, 0)?;
            Outcome::Value(Value::Unavailable)
        }
        1 => Outcome::Value(read_value(c, 0)?),
        2 => Outcome::Exception {
            class: StringId(c.u32()?),
        },
        _ => return Err(c.err("a known RETURN outcome")),
    };
    let metrics = read_metrics(
        c,
        x & RET_CPU != 0,
        x & RET_ALLOC != 0,
        &mut st.cpu_ns,
        &mut st.alloc_bytes,
    )?;
    Ok((outcome, metrics))
}

/// The next event's time in a version 2 stream, from its tag and time
/// delta; the tag must be an event's without the thread and id bits.
#[inline]
fn peek_time(stream: &[u8], pos: usize, prev_time: u64) -> Result<u64, Malformed> {
    let mut c = Cursor::new(stream, pos);
    let tag = c.u8()?;
    let op = tag & OP_MASK;
    if tag & (F_THREAD | F_ID) != 0 || op <= OP_THREAD || op == OP_STACK {
        return Err(Malformed {
            offset: pos,
            what: "an event without thread or id bits in a thread stream",
        });
    }
    Ok(prev_time.wrapping_add(c.i64()? as u64))
}

/// Reads a version 2 body length (at least 1) and returns where the body
/// ends, checked against the bytes left.
#[inline(always)]
fn body_length(c: &mut Cursor) -> Result<usize, Malformed> {
    let n = c.u64()?;
    if n == 0 || n > c.remaining() as u64 {
        return Err(c.err("a body length within the stream"));
    }
    Ok(c.pos() + n as usize)
}

/// Checks that a version 2 body was consumed exactly.
#[inline(always)]
fn body_ends(c: &Cursor, end: Option<usize>) -> Result<(), Malformed> {
    match end {
        Some(e) if c.pos() != e => Err(c.err("a body that ends where its length says")),
        _ => Ok(()),
    }
}

/// Events other than CALL and RETURN: rarer, so kept out of the hot loop.
#[inline(never)]
fn read_other_event(
    c: &mut Cursor,
    op: u8,
    kind_flag: bool,
    record_at: usize,
    skip_values: bool,
) -> Result<EventKind, Malformed> {
    let no_flag = |c: &Cursor| {
        if kind_flag {
            Err(c.err("no kind flag on this record type"))
        } else {
            Ok(())
        }
    };
    Ok(match op {
        OP_THREAD_START => {
            no_flag(c)?;
            EventKind::ThreadStart
        }
        OP_THREAD_END => {
            no_flag(c)?;
            EventKind::ThreadEnd
        }
        OP_CLASS_LOAD => {
            no_flag(c)?;
            EventKind::ClassLoad {
                class: StringId(c.u32()?),
                loader: StringId(c.u32()?),
                source: StringId(c.u32()?),
            }
        }
        OP_THROW => {
            let exception = StringId(c.u32()?);
            let message = match c.u64()? {
                0 => None,
                n => {
                    let at = c.pos();
                    let n = usize::try_from(n - 1).map_err(|_| c.err("a message length"))?;
                    let b = c.bytes(n)?;
                    let s = std::str::from_utf8(b).map_err(|_| Malformed {
                        offset: at,
                        what: "a UTF-8 exception message",
                    })?;
                    (!skip_values).then(|| s.to_owned())
                }
            };
            let method = MethodId(c.u32()?);
            let loc = read_loc(c)?;
            let catch = if kind_flag {
                Some((MethodId(c.u32()?), read_loc(c)?))
            } else {
                None
            };
            EventKind::Throw {
                exception,
                message,
                method,
                loc,
                catch,
            }
        }
        OP_CATCH => {
            no_flag(c)?;
            EventKind::Catch {
                exception: StringId(c.u32()?),
                method: MethodId(c.u32()?),
                loc: read_loc(c)?,
            }
        }
        OP_MONITOR_CONTENDED_ENTER => {
            let monitor = read_monitor(c)?;
            let owner = if kind_flag {
                Some(ThreadRef(c.u32()?))
            } else {
                None
            };
            EventKind::MonitorContendedEnter { monitor, owner }
        }
        OP_MONITOR_CONTENDED_ENTERED => {
            no_flag(c)?;
            EventKind::MonitorContendedEntered {
                monitor: read_monitor(c)?,
                wait_ns: c.u64()?,
            }
        }
        OP_MONITOR_WAIT => {
            no_flag(c)?;
            EventKind::MonitorWait {
                monitor: read_monitor(c)?,
                timeout_ms: c.i64()?,
            }
        }
        OP_MONITOR_WAITED => EventKind::MonitorWaited {
            monitor: read_monitor(c)?,
            timed_out: kind_flag,
            wait_ns: c.u64()?,
        },
        OP_GC_START => {
            no_flag(c)?;
            EventKind::GcStart
        }
        OP_GC_FINISH => {
            no_flag(c)?;
            EventKind::GcFinish {
                duration_ns: c.u64()?,
            }
        }
        OP_DROPPED => {
            no_flag(c)?;
            EventKind::Dropped { count: c.u64()? }
        }
        OP_SAMPLE => {
            no_flag(c)?;
            let state = match c.u8()? {
                0 => ThreadState::Run,
                1 => ThreadState::Io,
                2 => ThreadState::Wait,
                3 => ThreadState::Blocked,
                4 => ThreadState::Sleep,
                _ => return Err(c.err("a thread state code below 5")),
            };
            let stack = StackId(c.u32()?);
            // Each monitor takes at least a class varint, 4 hash bytes and a depth.
            let n = c.count(6)?;
            let mut monitors = Vec::with_capacity(n.min(PREALLOC_LIMIT));
            for _ in 0..n {
                let m = read_monitor(c)?;
                monitors.push((m, c.u32()?));
            }
            EventKind::Sample {
                state,
                stack,
                monitors,
            }
        }
        OP_TRACE_WINDOW => {
            no_flag(c)?;
            let min_depth = c.u32()?;
            let max_depth = match c.u64()? {
                0 => None,
                n => Some(u32::try_from(n - 1).map_err(|_| c.err("a depth below 2^32"))?),
            };
            let reason = match c.u8()? {
                0 => WindowReason::Start,
                1 => WindowReason::Narrow,
                2 => WindowReason::Widen,
                _ => return Err(c.err("a window reason code below 3")),
            };
            EventKind::TraceWindow {
                min_depth,
                max_depth,
                reason,
                rate_per_s: c.u64()?,
            }
        }
        OP_EXTENDED => {
            no_flag(c)?;
            match c.u64()? {
                EXT_VTHREAD_PINNED => EventKind::VthreadPinned {
                    stack: StackId(c.u32()?),
                    duration_ns: c.u64()?,
                },
                _ => return Err(c.err("an EXTENDED sub-kind this reader knows (0)")),
            }
        }
        OP_ALLOC_SAMPLE => {
            no_flag(c)?;
            EventKind::AllocSample {
                class: StringId(c.u32()?),
                size: c.u64()?,
                stack: StackId(c.u32()?),
            }
        }
        OP_PERIOD_START => {
            no_flag(c)?;
            EventKind::PeriodStart {
                period: c.u32()?,
                stack: StackId(c.u32()?),
            }
        }
        OP_PERIOD_END => {
            no_flag(c)?;
            EventKind::PeriodEnd { period: c.u32()? }
        }
        OP_CALIBRATION => {
            no_flag(c)?;
            EventKind::Calibration {
                record: c.string()?,
                cost_ps: c.u64()?,
            }
        }
        OP_REACTION_HANDLERS => {
            no_flag(c)?;
            let samples = c.u64()?;
            let mut lists = [Vec::new(), Vec::new()];
            for list in &mut lists {
                let n = c.count(1)?;
                list.reserve(n.min(PREALLOC_LIMIT));
                for _ in 0..n {
                    list.push(MethodId(c.u32()?));
                }
            }
            let [handlers, skipped] = lists;
            EventKind::ReactionHandlers {
                samples,
                handlers,
                skipped,
            }
        }
        OP_FOREIGN => {
            no_flag(c)?;
            let name = StringId(c.u32()?);
            let n = c.count(2)?;
            let mut fields = Vec::with_capacity(n.min(PREALLOC_LIMIT));
            for _ in 0..n {
                fields.push((StringId(c.u32()?), c.string()?));
            }
            EventKind::Foreign { name, fields }
        }
        OP_DEMOTION => {
            no_flag(c)?;
            EventKind::Demotion {
                method: MethodId(c.u32()?),
                rate_per_s: c.u64()?,
                mean_ns: c.u64()?,
                before_bp: c.u64()?,
                after_bp: c.u64()?,
                counted: c.u64()? != 0,
            }
        }
        OP_METHOD_COUNTS => {
            no_flag(c)?;
            let overhead_bp = c.u64()?;
            let n = c.count(2)?;
            let mut counts = Vec::with_capacity(n.min(PREALLOC_LIMIT));
            for _ in 0..n {
                counts.push((MethodId(c.u32()?), c.u64()?));
            }
            EventKind::MethodCounts {
                overhead_bp,
                counts,
            }
        }
        _ => {
            return Err(Malformed {
                offset: record_at,
                what: "a known record type",
            })
        }
    })
}

/// The metrics an extras byte announced, undoing the delta encoding.
#[inline(always)]
fn read_metrics(
    c: &mut Cursor,
    cpu: bool,
    alloc: bool,
    cpu_base: &mut u64,
    alloc_base: &mut u64,
) -> Result<Metrics, Malformed> {
    let mut m = Metrics::NONE;
    if cpu {
        *cpu_base = cpu_base.wrapping_add(c.i64()? as u64);
        m.cpu_ns = Some(*cpu_base);
    }
    if alloc {
        *alloc_base = alloc_base.wrapping_add(c.i64()? as u64);
        m.alloc_bytes = Some(*alloc_base);
    }
    Ok(m)
}

/// A depth written as a zigzag difference from the expected depth.
#[inline]
fn read_depth(c: &mut Cursor, expected: u32) -> Result<u32, Malformed> {
    let at = c.pos();
    let delta = c.i64()?;
    i64::from(expected)
        .checked_add(delta)
        .and_then(|d| u32::try_from(d).ok())
        .ok_or(Malformed {
            offset: at,
            what: "a depth between 0 and 2^32",
        })
}

fn read_loc(c: &mut Cursor) -> Result<Loc, Malformed> {
    let bci = c.i32()?;
    let at = c.pos();
    let line = match c.u64()? {
        0 => None,
        n => Some(u32::try_from(n - 1).map_err(|_| Malformed {
            offset: at,
            what: "a 32-bit line number",
        })?),
    };
    Ok(Loc { bci, line })
}

fn read_monitor(c: &mut Cursor) -> Result<Monitor, Malformed> {
    Ok(Monitor {
        class: StringId(c.u32()?),
        hash: c.fixed_u32()?,
    })
}

fn read_value(c: &mut Cursor, nesting: u32) -> Result<Value, Malformed> {
    let at = c.pos();
    let v = match c.u8()? {
        V_NULL => Value::Null,
        V_FALSE => Value::Boolean(false),
        V_TRUE => Value::Boolean(true),
        V_BYTE => Value::Byte(i8::try_from(c.i64()?).map_err(|_| c.err("a byte value"))?),
        V_CHAR => Value::Char(u16::try_from(c.u64()?).map_err(|_| c.err("a char value"))?),
        V_SHORT => Value::Short(i16::try_from(c.i64()?).map_err(|_| c.err("a short value"))?),
        V_INT => Value::Int(c.i32()?),
        V_LONG => Value::Long(c.i64()?),
        V_FLOAT => Value::Float(f32::from_bits(c.fixed_u32()?)),
        V_DOUBLE => Value::Double(f64::from_bits(c.fixed_u64()?)),
        V_STR => Value::Str {
            text: c.string()?,
            full_len: None,
        },
        V_STR_CUT => {
            let full_len = c.u32()?;
            Value::Str {
                text: c.string()?,
                full_len: Some(full_len),
            }
        }
        V_BOXED => {
            if nesting >= MAX_VALUE_NESTING {
                return Err(Malformed {
                    offset: at,
                    what: "boxed values nested at most 8 deep",
                });
            }
            let class = StringId(c.u32()?);
            let value = Box::new(read_value(c, nesting + 1)?);
            Value::Boxed { class, value }
        }
        V_ARRAY => Value::Array {
            class: StringId(c.u32()?),
            length: c.u32()?,
        },
        V_OBJECT => Value::Object {
            class: StringId(c.u32()?),
            hash: c.fixed_u32()?,
        },
        V_UNAVAILABLE => Value::Unavailable,
        _ => {
            return Err(Malformed {
                offset: at,
                what: "a known value tag",
            })
        }
    };
    Ok(v)
}

/// Steps over a string as `Cursor::string` reads it, checking its UTF-8.
#[inline]
fn skip_string(c: &mut Cursor) -> Result<(), Malformed> {
    let n = c.count(1)?;
    let at = c.pos();
    let b = c.bytes(n)?;
    // Most strings are ASCII, which a word at a time checks faster.
    if !b.is_ascii() && std::str::from_utf8(b).is_err() {
        return Err(Malformed {
            offset: at,
            what: "UTF-8 text",
        });
    }
    Ok(())
}

/// Steps over one value as [`read_value`] would read it, building nothing.
#[inline]
fn skip_value(c: &mut Cursor, nesting: u32) -> Result<(), Malformed> {
    let at = c.pos();
    match c.u8()? {
        V_NULL | V_FALSE | V_TRUE | V_UNAVAILABLE => {}
        // The same range checks as `read_value`, so a chunk is damaged in
        // exactly the same places whichever way it is read.
        V_BYTE => {
            i8::try_from(c.i64()?).map_err(|_| c.err("a byte value"))?;
        }
        V_CHAR => {
            u16::try_from(c.u64()?).map_err(|_| c.err("a char value"))?;
        }
        V_SHORT => {
            i16::try_from(c.i64()?).map_err(|_| c.err("a short value"))?;
        }
        V_INT => {
            c.i32()?;
        }
        V_LONG => {
            c.i64()?;
        }
        V_FLOAT => {
            c.fixed_u32()?;
        }
        V_DOUBLE => {
            c.fixed_u64()?;
        }
        V_STR => skip_string(c)?,
        V_STR_CUT => {
            c.u32()?;
            skip_string(c)?;
        }
        V_BOXED => {
            if nesting >= MAX_VALUE_NESTING {
                return Err(Malformed {
                    offset: at,
                    what: "boxed values nested at most 8 deep",
                });
            }
            c.u32()?;
            skip_value(c, nesting + 1)?;
        }
        V_ARRAY => {
            c.u32()?;
            c.u32()?;
        }
        V_OBJECT => {
            c.u32()?;
            c.fixed_u32()?;
        }
        _ => {
            return Err(Malformed {
                offset: at,
                what: "a known value tag",
            })
        }
    }
    Ok(())
}

/// Whether `tag` is a symbol record's: no flag bits, except K on a STACK
/// (frame types follow).
#[inline]
fn symbol_tag(tag: u8) -> bool {
    let op = tag & OP_MASK;
    (op <= OP_THREAD || op == OP_STACK) && (tag == op || tag == OP_STACK | F_KIND)
}

#[cold]
#[inline(never)]
fn read_symbol(c: &mut Cursor, tag: u8) -> Result<Symbol, Malformed> {
    let op = tag & OP_MASK;
    Ok(match op {
        OP_STRING => Symbol::String {
            id: StringId(c.u32()?),
            text: c.string()?,
        },
        OP_METHOD => {
            let id = MethodId(c.u32()?);
            let class = StringId(c.u32()?);
            let name = StringId(c.u32()?);
            let sig = StringId(c.u32()?);
            let modifiers = u16::try_from(c.u64()?).map_err(|_| c.err("16-bit modifiers"))?;
            let n = c.count(1)?;
            let mut param_names = Vec::with_capacity(n.min(PREALLOC_LIMIT));
            for _ in 0..n {
                param_names.push(StringId(c.u32()?));
            }
            Symbol::Method(MethodSymbol {
                id,
                class,
                name,
                sig,
                param_names,
                modifiers,
            })
        }
        OP_STACK => {
            let id = StackId(c.u32()?);
            // Each frame takes at least three varints.
            let typed = tag & F_KIND != 0;
            let n = c.count(if typed { 4 } else { 3 })?;
            let mut frames = Vec::with_capacity(n.min(PREALLOC_LIMIT));
            let mut types = Vec::new();
            for _ in 0..n {
                let m = MethodId(c.u32()?);
                frames.push((m, read_loc(c)?));
                if typed {
                    let t = FrameType::from_code(c.u8()?)
                        .ok_or_else(|| c.err("a frame type between 0 and 4"))?;
                    types.push(t);
                }
            }
            Symbol::Stack(StackSymbol { id, frames, types })
        }
        _ => {
            let id = c.u32()?;
            let java_id = c.i64()?;
            let name = StringId(c.u32()?);
            let group = StringId(c.u32()?);
            let priority = c.i32()?;
            let daemon = match c.u8()? {
                0 => false,
                1 => true,
                _ => return Err(c.err("a daemon flag of 0 or 1")),
            };
            Symbol::Thread(ThreadSymbol {
                id: ThreadRef(id),
                java_id,
                name,
                group,
                priority,
                daemon,
            })
        }
    })
}
