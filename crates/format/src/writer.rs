//! The trace writer: events in, self-contained checksummed chunks out.
//!
//! The agent's writer thread calls [`TraceWriter::write`] for every event,
//! so the hot path is a few comparisons and varint pushes into one buffer.
//! Symbols are defined once for the whole trace ([`TraceWriter::define`])
//! but written into every chunk that uses them, the first time it does: a
//! per-symbol generation number says whether the current chunk already has
//! the record, so starting a chunk resets every "already written" mark at
//! once by bumping the generation.
//!
//! A chunk goes out with one `write_all` of header and payload, so a
//! process killed at any moment leaves whole chunks plus at most one
//! partial chunk at the end, which the reader reports and drops.

use std::io::Write;

use crate::slots::Slots;
use crate::state::Threads;
use crate::varint::{put_i64, put_str, put_u64};
use crate::wire::*;
use crate::{
    ChunkInfo, Event, EventKind, FormatError, FrameType, Loc, MethodId, Metrics, Monitor, Outcome,
    StackId, StringId, Symbol, ThreadRef, TraceHeader, Value,
};

/// "No thread yet in this chunk": never a valid handle (handles are below
/// [`MAX_THREAD_REF`]).
const NO_THREAD: u32 = u32::MAX;

/// A symbol as given to `define`, pre-encoded, with what it depends on.
#[derive(Debug)]
struct Def {
    /// Generation of the chunk that last received this record.
    emitted: u32,
    /// The complete symbol record (tag included).
    record: Box<[u8]>,
    /// Strings the record refers to; they are written before it.
    deps: Box<[u32]>,
}

impl Def {
    fn new(record: Vec<u8>, deps: Vec<u32>) -> Def {
        Def {
            emitted: 0,
            record: record.into_boxed_slice(),
            deps: deps.into_boxed_slice(),
        }
    }
}

/// All symbols defined so far, and which of them the current chunk holds.
#[derive(Debug, Default)]
struct Defs {
    strings: Slots<Def>,
    methods: Slots<Def>,
    threads: Slots<Def>,
    /// Stack records; their `deps` are method handles, not strings.
    stacks: Slots<Def>,
}

fn undefined(kind: &str, id: u32) -> FormatError {
    FormatError::InvalidWrite(format!(
        "{kind} {id} is used by an event but was never defined"
    ))
}

impl Defs {
    #[inline]
    fn string(&mut self, id: StringId, gen: u32, buf: &mut Vec<u8>) -> Result<(), FormatError> {
        emit_string(&mut self.strings, id.0, gen, buf)
    }

    #[inline]
    fn method(&mut self, id: MethodId, gen: u32, buf: &mut Vec<u8>) -> Result<(), FormatError> {
        match self.methods.get(id.0) {
            Some(d) if d.emitted == gen => Ok(()),
            _ => emit_with_deps(
                &mut self.methods,
                &mut self.strings,
                "method",
                id.0,
                gen,
                buf,
            ),
        }
    }

    #[inline]
    fn thread(&mut self, id: u32, gen: u32, buf: &mut Vec<u8>) -> Result<(), FormatError> {
        match self.threads.get(id) {
            Some(d) if d.emitted == gen => Ok(()),
            _ => emit_with_deps(&mut self.threads, &mut self.strings, "thread", id, gen, buf),
        }
    }

    fn stack(&mut self, id: StackId, gen: u32, buf: &mut Vec<u8>) -> Result<(), FormatError> {
        let methods = match self.stacks.get(id.0) {
            Some(d) if d.emitted == gen => return Ok(()),
            Some(d) => d.deps.clone(),
            None => return Err(undefined("stack", id.0)),
        };
        for m in methods.iter() {
            self.method(MethodId(*m), gen, buf)?;
        }
        if let Some(d) = self.stacks.get_mut(id.0) {
            buf.extend_from_slice(&d.record);
            d.emitted = gen;
        }
        Ok(())
    }

    fn value(
        &mut self,
        v: &Value,
        gen: u32,
        buf: &mut Vec<u8>,
        nesting: u32,
    ) -> Result<(), FormatError> {
        match v {
            Value::Boxed { class, value } => {
                if nesting >= MAX_VALUE_NESTING {
                    return Err(FormatError::InvalidWrite(format!(
                        "boxed values nested more than {MAX_VALUE_NESTING} deep"
                    )));
                }
                self.string(*class, gen, buf)?;
                self.value(value, gen, buf, nesting + 1)
            }
            Value::Array { class, .. } | Value::Object { class, .. } => {
                self.string(*class, gen, buf)
            }
            _ => Ok(()),
        }
    }

    fn forget_emitted(&mut self) {
        self.strings.for_each_mut(|d| d.emitted = 0);
        self.methods.for_each_mut(|d| d.emitted = 0);
        self.threads.for_each_mut(|d| d.emitted = 0);
        self.stacks.for_each_mut(|d| d.emitted = 0);
    }
}

#[inline]
fn emit_string(
    strings: &mut Slots<Def>,
    id: u32,
    gen: u32,
    buf: &mut Vec<u8>,
) -> Result<(), FormatError> {
    match strings.get_mut(id) {
        Some(d) if d.emitted == gen => Ok(()),
        Some(d) => {
            buf.extend_from_slice(&d.record);
            d.emitted = gen;
            Ok(())
        }
        None => Err(undefined("string", id)),
    }
}

#[cold]
fn emit_with_deps(
    slots: &mut Slots<Def>,
    strings: &mut Slots<Def>,
    kind: &str,
    id: u32,
    gen: u32,
    buf: &mut Vec<u8>,
) -> Result<(), FormatError> {
    let Some(d) = slots.get_mut(id) else {
        return Err(undefined(kind, id));
    };
    for &s in d.deps.iter() {
        if emit_string(strings, s, gen, buf).is_err() {
            return Err(FormatError::InvalidWrite(format!(
                "{kind} {id} refers to string {s}, which was never defined"
            )));
        }
    }
    buf.extend_from_slice(&d.record);
    d.emitted = gen;
    Ok(())
}

/// One thread's stream in the version 2 chunk being built.
#[derive(Debug, Default)]
struct Stream {
    /// Generation of the chunk this stream's bytes belong to.
    generation: u32,
    bytes: Vec<u8>,
    count: u32,
    prev_time: u64,
}

/// Version 2 state: the chunk's thread streams (docs/FORMAT.md, "Version 2").
#[derive(Debug, Default)]
struct V2 {
    streams: Slots<Stream>,
    /// Threads with a stream in the chunk being built.
    active: Vec<u32>,
    /// Bytes in the active streams.
    stream_bytes: usize,
    /// A symbol the chunk already holds was redefined: the next event
    /// starts a new chunk (a version 2 chunk defines a handle once).
    redefined: bool,
}

/// Writes a trace: header, then chunks of symbol records and events, then
/// (on `finish`) the index footer.
///
/// Events go to the underlying writer only when a chunk is complete, on
/// `flush` or on `finish`; dropping the writer without either loses the
/// chunk being built (the file stays readable). Chunk offsets in the index
/// count from where the writer started, so give it a fresh file.
pub struct TraceWriter<W: Write> {
    out: W,
    /// Payload size at which a chunk is closed.
    chunk_target: usize,
    /// The chunk being built: room for its header, then the payload.
    buf: Vec<u8>,
    defs: Defs,
    threads: Threads,
    /// Current chunk's generation (never 0).
    generation: u32,
    /// Sequence number of the chunk being built.
    seq: u32,

    // The chunk being built.
    count: u32,
    first_id: u64,
    chunk_last_id: u64,
    min_ns: u64,
    max_ns: u64,
    prev_time: u64,
    next_id: u64,
    cur_thread: u32,
    /// Per-thread streams when writing format version 2.
    v2: Option<Box<V2>>,

    // The whole trace.
    last_id: Option<u64>,
    events: u64,
    bytes: u64,
    chunks: Vec<ChunkInfo>,
}

impl<W: Write> TraceWriter<W> {
    /// Writes the file header. Chunks end at about 1 MiB of payload.
    pub fn new(out: W, header: &TraceHeader) -> Result<Self, FormatError> {
        Self::with_chunk_size(out, header, DEFAULT_CHUNK_BYTES)
    }

    /// Like `new` with another chunk payload size target (bytes). Values
    /// above 64 MiB are clamped to 64 MiB.
    pub fn with_chunk_size(
        out: W,
        header: &TraceHeader,
        chunk_bytes: usize,
    ) -> Result<Self, FormatError> {
        Self::with_version(out, header, chunk_bytes, FORMAT_VERSION)
    }

    /// Like `with_chunk_size`, writing format `version` (1 or 2). Version 2
    /// puts each thread's events in a stream of its own per chunk and
    /// numbers them implicitly: ids must then be dense within a chunk, so
    /// an id gap starts a new chunk (write derived traces with sparse ids in
    /// version 1).
    pub fn with_version(
        mut out: W,
        header: &TraceHeader,
        chunk_bytes: usize,
        version: u16,
    ) -> Result<Self, FormatError> {
        if version != FORMAT_VERSION && version != FORMAT_VERSION_2 {
            return Err(FormatError::InvalidWrite(format!(
                "format version {version} cannot be written (1 or 2)"
            )));
        }
        let head = encode_file_header_version(header, version);
        out.write_all(&head)?;
        let chunk_target = chunk_bytes.clamp(1, MAX_CHUNK_BYTES);
        let mut buf =
            Vec::with_capacity(CHUNK_HEADER_LEN + chunk_target.min(DEFAULT_CHUNK_BYTES) + 256);
        buf.resize(CHUNK_HEADER_LEN, 0);
        Ok(TraceWriter {
            out,
            chunk_target,
            buf,
            defs: Defs::default(),
            threads: Threads::default(),
            generation: 1,
            seq: 0,
            count: 0,
            first_id: 0,
            chunk_last_id: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            prev_time: 0,
            next_id: 0,
            cur_thread: NO_THREAD,
            v2: (version == FORMAT_VERSION_2).then(Box::default),
            last_id: None,
            events: 0,
            bytes: head.len() as u64,
            chunks: Vec::new(),
        })
    }

    /// Registers a symbol. Must be called before writing an event that uses
    /// its handle; the writer puts the record into each chunk that needs it.
    /// Defining a handle again replaces its definition from the next use on.
    pub fn define(&mut self, sym: Symbol) {
        if let Some(v2) = &mut self.v2 {
            let gen = self.generation;
            let held = |d: Option<&Def>| d.is_some_and(|d| d.emitted == gen);
            v2.redefined |= match &sym {
                Symbol::String { id, .. } => held(self.defs.strings.get(id.0)),
                Symbol::Method(m) => held(self.defs.methods.get(m.id.0)),
                Symbol::Thread(t) => held(self.defs.threads.get(t.id.0)),
                Symbol::Stack(st) => held(self.defs.stacks.get(st.id.0)),
            };
        }
        let mut rec = Vec::with_capacity(32);
        match sym {
            Symbol::String { id, text } => {
                rec.push(OP_STRING);
                put_u64(&mut rec, u64::from(id.0));
                put_str(&mut rec, &text);
                self.defs.strings.insert(id.0, Def::new(rec, Vec::new()));
            }
            Symbol::Method(m) => {
                rec.push(OP_METHOD);
                put_u64(&mut rec, u64::from(m.id.0));
                put_u64(&mut rec, u64::from(m.class.0));
                put_u64(&mut rec, u64::from(m.name.0));
                put_u64(&mut rec, u64::from(m.sig.0));
                put_u64(&mut rec, u64::from(m.modifiers));
                put_u64(&mut rec, m.param_names.len() as u64);
                for p in &m.param_names {
                    put_u64(&mut rec, u64::from(p.0));
                }
                let mut deps = vec![m.class.0, m.name.0, m.sig.0];
                deps.extend(m.param_names.iter().map(|p| p.0));
                self.defs.methods.insert(m.id.0, Def::new(rec, deps));
            }
            Symbol::Thread(t) => {
                rec.push(OP_THREAD);
                put_u64(&mut rec, u64::from(t.id.0));
                put_i64(&mut rec, t.java_id);
                put_u64(&mut rec, u64::from(t.name.0));
                put_u64(&mut rec, u64::from(t.group.0));
                put_i64(&mut rec, i64::from(t.priority));
                rec.push(u8::from(t.daemon));
                self.defs
                    .threads
                    .insert(t.id.0, Def::new(rec, vec![t.name.0, t.group.0]));
            }
            Symbol::Stack(st) => {
                // K: a frame-type byte follows each frame's Loc. Without
                // a known type the record is the same as before types.
                let typed = st.types.iter().any(|t| *t != FrameType::Unknown);
                rec.push(if typed { OP_STACK | F_KIND } else { OP_STACK });
                put_u64(&mut rec, u64::from(st.id.0));
                put_u64(&mut rec, st.frames.len() as u64);
                let mut deps = Vec::with_capacity(st.frames.len());
                for (i, (m, loc)) in st.frames.iter().enumerate() {
                    put_u64(&mut rec, u64::from(m.0));
                    put_loc(&mut rec, loc);
                    if typed {
                        rec.push(st.frame_type(i).code());
                    }
                    if !deps.contains(&m.0) {
                        deps.push(m.0);
                    }
                }
                self.defs.stacks.insert(st.id.0, Def::new(rec, deps));
            }
        }
    }

    /// Appends an event. Ids must be strictly increasing, and every handle
    /// the event uses must have been defined (else `InvalidWrite`, and the
    /// event is not written). Starts a new chunk when the current one is full.
    pub fn write(&mut self, ev: &Event) -> Result<(), FormatError> {
        if let Some(last) = self.last_id {
            if ev.id <= last {
                return Err(FormatError::InvalidWrite(format!(
                    "event id {} does not follow the previous id {last} (ids must increase)",
                    ev.id
                )));
            }
        }
        let t = ev.thread.0;
        if t >= MAX_THREAD_REF {
            return Err(FormatError::InvalidWrite(format!(
                "thread handle {t} is too large (handles are dense and below {MAX_THREAD_REF})"
            )));
        }
        let v2 = self.v2.is_some();
        let streams_len = self.v2.as_ref().map_or(0, |v| v.stream_bytes);
        if self.count > 0
            && (self.buf.len() - CHUNK_HEADER_LEN + streams_len >= self.chunk_target
                || self.count == u32::MAX
                || self
                    .v2
                    .as_ref()
                    .is_some_and(|v| v.redefined || ev.id != self.next_id))
        {
            self.end_chunk()?;
        }

        // First the symbol records the event needs. They are complete
        // records, so if a later handle turns out undefined, what was
        // already appended is harmless.
        let gen = self.generation;
        if v2 || t != self.cur_thread {
            self.defs.thread(t, gen, &mut self.buf)?;
        }
        self.ensure_symbols(&ev.kind)?;

        // Then the event, which cannot fail any more.
        let mut flags = 0u8;
        let next_id = self.next_id;
        let mut prev_time = self.prev_time;
        let buf = match &mut self.v2 {
            None => {
                if t != self.cur_thread {
                    flags |= F_THREAD;
                }
                if ev.id != next_id {
                    flags |= F_ID;
                }
                &mut self.buf
            }
            Some(v2) => {
                let st = match v2.streams.get_mut(t) {
                    Some(st) => st,
                    None => {
                        v2.streams.insert(t, Stream::default());
                        v2.streams.get_mut(t).expect("just inserted")
                    }
                };
                if st.generation != gen {
                    st.generation = gen;
                    st.bytes.clear();
                    st.count = 0;
                    st.prev_time = 0;
                    v2.active.push(t);
                }
                prev_time = st.prev_time;
                &mut st.bytes
            }
        };
        let start_len = buf.len();
        // Where a version 2 CALL/RETURN body starts (its length goes there).
        let mut body_at = None;
        let head = |buf: &mut Vec<u8>, op: u8| {
            buf.push(op | flags);
            if flags & F_THREAD != 0 {
                put_u64(buf, u64::from(t));
            }
            if flags & F_ID != 0 {
                put_u64(buf, ev.id - next_id);
            }
            put_i64(buf, ev.time_ns.wrapping_sub(prev_time) as i64);
        };
        match &ev.kind {
            EventKind::Call {
                method,
                depth,
                caller,
                params,
                metrics,
            } => {
                let st = self.threads.get(t, gen);
                let expected = st.depth.wrapping_add(1);
                let predicted_caller = st.begin_call(*depth);
                let mut x = 0u8;
                if *depth != expected {
                    x |= CALL_DEPTH;
                }
                if let Some((cm, _)) = caller {
                    x |= CALL_CALLER;
                    if predicted_caller != Some(cm.0) {
                        x |= CALL_CALLER_METHOD;
                    }
                }
                if !params.is_empty() {
                    x |= CALL_PARAMS;
                }
                if metrics.cpu_ns.is_some() {
                    x |= CALL_CPU;
                }
                if metrics.alloc_bytes.is_some() {
                    x |= CALL_ALLOC;
                }
                if x == 0 {
                    head(buf, OP_CALL);
                } else {
                    head(buf, OP_CALL | F_KIND);
                    buf.push(x);
                }
                put_u64(buf, u64::from(method.0));
                if x & CALL_DEPTH != 0 {
                    put_i64(buf, i64::from(*depth) - i64::from(expected));
                }
                if x & CALL_BODY != 0 {
                    body_at = Some(buf.len());
                }
                if let Some((cm, loc)) = caller {
                    if x & CALL_CALLER_METHOD != 0 {
                        put_u64(buf, u64::from(cm.0));
                    }
                    put_loc(buf, loc);
                }
                if !params.is_empty() {
                    put_u64(buf, params.len() as u64);
                    for p in params {
                        put_value(buf, p);
                    }
                }
                put_metrics(buf, metrics, &mut st.cpu_ns, &mut st.alloc_bytes);
                st.end_call(*depth, method.0, ev.time_ns);
            }
            EventKind::Return {
                method,
                depth,
                outcome,
                elapsed_ns,
                metrics,
            } => {
                let st = self.threads.get(t, gen);
                let expected = st.depth;
                let open = st.begin_return(*depth);
                let mut x = 0u8;
                if *depth != expected {
                    x |= RET_DEPTH;
                }
                match open {
                    Some(f) => {
                        if f.method != method.0 {
                            x |= RET_METHOD;
                        }
                        if ev.time_ns.checked_sub(f.time_ns) != Some(*elapsed_ns) {
                            x |= RET_ELAPSED;
                        }
                    }
                    None => x |= RET_METHOD | RET_ELAPSED,
                }
                x |= match outcome {
                    Outcome::Void => 0,
                    Outcome::Value(_) => 1 << RET_OUTCOME_SHIFT,
                    Outcome::Exception { .. } => 2 << RET_OUTCOME_SHIFT,
                };
                if metrics.cpu_ns.is_some() {
                    x |= RET_CPU;
                }
                if metrics.alloc_bytes.is_some() {
                    x |= RET_ALLOC;
                }
                if x == 0 {
                    head(buf, OP_RETURN);
                } else {
                    head(buf, OP_RETURN | F_KIND);
                    buf.push(x);
                }
                if x & RET_METHOD != 0 {
                    put_u64(buf, u64::from(method.0));
                }
                if x & RET_DEPTH != 0 {
                    put_i64(buf, i64::from(*depth) - i64::from(expected));
                }
                if x & RET_ELAPSED != 0 {
                    put_u64(buf, *elapsed_ns);
                }
                if x & RET_BODY != 0 {
                    body_at = Some(buf.len());
                }
                match outcome {
                    Outcome::Void => {}
                    Outcome::Value(v) => put_value(buf, v),
                    Outcome::Exception { class } => put_u64(buf, u64::from(class.0)),
                }
                put_metrics(buf, metrics, &mut st.cpu_ns, &mut st.alloc_bytes);
                st.end_return(*depth);
            }
            EventKind::ThreadStart => head(buf, OP_THREAD_START),
            EventKind::ThreadEnd => head(buf, OP_THREAD_END),
            EventKind::ClassLoad {
                class,
                loader,
                source,
            } => {
                head(buf, OP_CLASS_LOAD);
                put_u64(buf, u64::from(class.0));
                put_u64(buf, u64::from(loader.0));
                put_u64(buf, u64::from(source.0));
            }
            EventKind::Throw {
                exception,
                message,
                method,
                loc,
                catch,
            } => {
                head(buf, OP_THROW | if catch.is_some() { F_KIND } else { 0 });
                put_u64(buf, u64::from(exception.0));
                match message {
                    None => buf.push(0),
                    Some(m) => {
                        put_u64(buf, m.len() as u64 + 1);
                        buf.extend_from_slice(m.as_bytes());
                    }
                }
                put_u64(buf, u64::from(method.0));
                put_loc(buf, loc);
                if let Some((cm, cl)) = catch {
                    put_u64(buf, u64::from(cm.0));
                    put_loc(buf, cl);
                }
            }
            EventKind::Catch {
                exception,
                method,
                loc,
            } => {
                head(buf, OP_CATCH);
                put_u64(buf, u64::from(exception.0));
                put_u64(buf, u64::from(method.0));
                put_loc(buf, loc);
            }
            EventKind::MonitorContendedEnter { monitor, owner } => {
                head(
                    buf,
                    OP_MONITOR_CONTENDED_ENTER | if owner.is_some() { F_KIND } else { 0 },
                );
                put_monitor(buf, monitor);
                if let Some(o) = owner {
                    put_u64(buf, u64::from(o.0));
                }
            }
            EventKind::MonitorContendedEntered { monitor, wait_ns } => {
                head(buf, OP_MONITOR_CONTENDED_ENTERED);
                put_monitor(buf, monitor);
                put_u64(buf, *wait_ns);
            }
            EventKind::MonitorWait {
                monitor,
                timeout_ms,
            } => {
                head(buf, OP_MONITOR_WAIT);
                put_monitor(buf, monitor);
                put_i64(buf, *timeout_ms);
            }
            EventKind::MonitorWaited {
                monitor,
                timed_out,
                wait_ns,
            } => {
                head(buf, OP_MONITOR_WAITED | if *timed_out { F_KIND } else { 0 });
                put_monitor(buf, monitor);
                put_u64(buf, *wait_ns);
            }
            EventKind::GcStart => head(buf, OP_GC_START),
            EventKind::GcFinish { duration_ns } => {
                head(buf, OP_GC_FINISH);
                put_u64(buf, *duration_ns);
            }
            EventKind::Dropped { count } => {
                head(buf, OP_DROPPED);
                put_u64(buf, *count);
            }
            EventKind::Sample {
                state,
                stack,
                monitors,
            } => {
                head(buf, OP_SAMPLE);
                buf.push(state.index() as u8);
                put_u64(buf, u64::from(stack.0));
                put_u64(buf, monitors.len() as u64);
                for (m, depth) in monitors {
                    put_monitor(buf, m);
                    put_u64(buf, u64::from(*depth));
                }
            }
            EventKind::TraceWindow {
                min_depth,
                max_depth,
                reason,
                rate_per_s,
            } => {
                head(buf, OP_TRACE_WINDOW);
                put_u64(buf, u64::from(*min_depth));
                put_u64(buf, max_depth.map_or(0, |m| u64::from(m) + 1));
                buf.push(reason.index() as u8);
                put_u64(buf, *rate_per_s);
            }
            EventKind::VthreadPinned { stack, duration_ns } => {
                head(buf, OP_EXTENDED);
                put_u64(buf, EXT_VTHREAD_PINNED);
                put_u64(buf, u64::from(stack.0));
                put_u64(buf, *duration_ns);
            }
            EventKind::AllocSample { class, size, stack } => {
                head(buf, OP_ALLOC_SAMPLE);
                put_u64(buf, u64::from(class.0));
                put_u64(buf, *size);
                put_u64(buf, u64::from(stack.0));
            }
            EventKind::PeriodStart { period, stack } => {
                head(buf, OP_PERIOD_START);
                put_u64(buf, u64::from(*period));
                put_u64(buf, u64::from(stack.0));
            }
            EventKind::PeriodEnd { period } => {
                head(buf, OP_PERIOD_END);
                put_u64(buf, u64::from(*period));
            }
            EventKind::Calibration { record, cost_ps } => {
                head(buf, OP_CALIBRATION);
                put_str(buf, record);
                put_u64(buf, *cost_ps);
            }
            EventKind::MonitorEnter { monitor, depth }
            | EventKind::MonitorExit { monitor, depth } => {
                let op = if matches!(ev.kind, EventKind::MonitorEnter { .. }) {
                    OP_MONITOR_ENTER
                } else {
                    OP_MONITOR_EXIT
                };
                let current = self.threads.get(t, gen).depth;
                if *depth == current {
                    head(buf, op);
                    put_monitor(buf, monitor);
                } else {
                    head(buf, op | F_KIND);
                    put_monitor(buf, monitor);
                    put_i64(buf, i64::from(*depth) - i64::from(current));
                }
            }
            EventKind::Bytecode { method, bci, insn } => {
                let st = self.threads.get(t, gen);
                if st.bytecode_method == Some(method.0) {
                    head(buf, OP_BYTECODE);
                } else {
                    head(buf, OP_BYTECODE | F_KIND);
                    put_u64(buf, u64::from(method.0));
                    st.bytecode_method = Some(method.0);
                }
                put_u64(buf, u64::from(*bci));
                put_u64(buf, u64::from(insn.0));
            }
            EventKind::ReactionHandlers {
                samples,
                handlers,
                skipped,
            } => {
                head(buf, OP_REACTION_HANDLERS);
                put_u64(buf, *samples);
                for list in [handlers, skipped] {
                    put_u64(buf, list.len() as u64);
                    for m in list {
                        put_u64(buf, u64::from(m.0));
                    }
                }
            }
            EventKind::Foreign { name, fields } => {
                head(buf, OP_FOREIGN);
                put_u64(buf, u64::from(name.0));
                put_u64(buf, fields.len() as u64);
                for (key, value) in fields {
                    put_u64(buf, u64::from(key.0));
                    put_str(buf, value);
                }
            }
            EventKind::Demotion {
                method,
                rate_per_s,
                mean_ns,
                before_bp,
                after_bp,
                counted,
            } => {
                head(buf, OP_DEMOTION);
                put_u64(buf, u64::from(method.0));
                for v in [*rate_per_s, *mean_ns, *before_bp, *after_bp] {
                    put_u64(buf, v);
                }
                put_u64(buf, u64::from(*counted));
            }
            EventKind::MethodCounts {
                overhead_bp,
                counts,
            } => {
                head(buf, OP_METHOD_COUNTS);
                put_u64(buf, *overhead_bp);
                put_u64(buf, counts.len() as u64);
                for (m, n) in counts {
                    put_u64(buf, u64::from(m.0));
                    put_u64(buf, *n);
                }
            }
        }

        if let Some(v2) = &mut self.v2 {
            // `buf` is the thread's stream: give a body its length prefix.
            if let Some(at) = body_at {
                let st = v2.streams.get_mut(t).expect("the event's stream");
                let n = (st.bytes.len() - at) as u64;
                let mut len = [0u8; 10];
                let k = crate::varint::encode_u64(n, &mut len);
                st.bytes.splice(at..at, len[..k].iter().copied());
            }
            let st = v2.streams.get_mut(t).expect("the event's stream");
            st.count += 1;
            st.prev_time = ev.time_ns;
            v2.stream_bytes += st.bytes.len() - start_len;
        }
        self.wrote(ev.id, t, ev.time_ns);
        Ok(())
    }

    /// After an event is appended: the chunk's and the trace's counts.
    #[inline]
    fn wrote(&mut self, id: u64, t: u32, time_ns: u64) {
        self.cur_thread = t;
        self.prev_time = time_ns;
        self.next_id = id.wrapping_add(1);
        if self.count == 0 {
            self.first_id = id;
        }
        self.chunk_last_id = id;
        self.min_ns = self.min_ns.min(time_ns);
        self.max_ns = self.max_ns.max(time_ns);
        self.count += 1;
        self.last_id = Some(id);
        self.events += 1;
    }

    /// [`write`](TraceWriter::write) of a CALL without caller, arguments
    /// or metrics, given its fields, so that no [`Event`] is built: the
    /// same bytes as `write` (`tests/fast_path.rs` compares). The agent's
    /// writer thread writes most events through this and
    /// [`write_return`](TraceWriter::write_return).
    #[inline]
    pub fn write_call(
        &mut self,
        id: u64,
        time_ns: u64,
        thread: ThreadRef,
        method: MethodId,
        depth: u32,
    ) -> Result<(), FormatError> {
        self.write_call_args(id, time_ns, thread, method, depth, &[])
    }

    /// [`write`](TraceWriter::write) of a CALL with argument values
    /// `params` and no caller or metrics, given its fields (see
    /// [`write_call`](TraceWriter::write_call)): the agent's writer
    /// writes a CALL with arguments through this, with the values on its
    /// stack rather than in an [`Event`]'s `Vec`.
    #[inline]
    pub fn write_call_args(
        &mut self,
        id: u64,
        time_ns: u64,
        thread: ThreadRef,
        method: MethodId,
        depth: u32,
        params: &[Value],
    ) -> Result<(), FormatError> {
        if self.v2.is_some() {
            return self.write(&Event {
                id,
                time_ns,
                thread,
                kind: EventKind::Call {
                    method,
                    depth,
                    caller: None,
                    params: params.to_vec(),
                    metrics: Metrics::NONE,
                },
            });
        }
        let t = self.begin_v1(id, thread)?;
        let gen = self.generation;
        self.defs.method(method, gen, &mut self.buf)?;
        for p in params {
            self.defs.value(p, gen, &mut self.buf, 0)?;
        }
        let flags = self.flags_v1(id, t);
        let st = self.threads.get(t, gen);
        let expected = st.depth.wrapping_add(1);
        st.begin_call(depth);
        let mut x = 0;
        if !params.is_empty() {
            x |= CALL_PARAMS;
        }
        if depth != expected {
            x |= CALL_DEPTH;
        }
        let buf = &mut self.buf;
        if x == 0 {
            // The commonest record: no kind byte.
            put_head(
                buf,
                OP_CALL | flags,
                t,
                id,
                self.next_id,
                time_ns,
                self.prev_time,
            );
            put_u64(buf, u64::from(method.0));
        } else {
            let tag = OP_CALL | F_KIND | flags;
            put_head(buf, tag, t, id, self.next_id, time_ns, self.prev_time);
            buf.push(x);
            put_u64(buf, u64::from(method.0));
            if x & CALL_DEPTH != 0 {
                put_i64(buf, i64::from(depth) - i64::from(expected));
            }
            if x & CALL_PARAMS != 0 {
                put_u64(buf, params.len() as u64);
                for p in params {
                    put_value(buf, p);
                }
            }
        }
        st.end_call(depth, method.0, time_ns);
        self.wrote(id, t, time_ns);
        Ok(())
    }

    /// [`write`](TraceWriter::write) of a RETURN without metrics, given
    /// its fields (see [`write_call`](TraceWriter::write_call)).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn write_return(
        &mut self,
        id: u64,
        time_ns: u64,
        thread: ThreadRef,
        method: MethodId,
        depth: u32,
        elapsed_ns: u64,
        outcome: &Outcome,
    ) -> Result<(), FormatError> {
        if self.v2.is_some() {
            return self.write(&Event {
                id,
                time_ns,
                thread,
                kind: EventKind::Return {
                    method,
                    depth,
                    outcome: outcome.clone(),
                    elapsed_ns,
                    metrics: Metrics::NONE,
                },
            });
        }
        let t = self.begin_v1(id, thread)?;
        let gen = self.generation;
        self.defs.method(method, gen, &mut self.buf)?;
        match outcome {
            Outcome::Void => {}
            Outcome::Value(v) => self.defs.value(v, gen, &mut self.buf, 0)?,
            Outcome::Exception { class } => self.defs.string(*class, gen, &mut self.buf)?,
        }
        let flags = self.flags_v1(id, t);
        let st = self.threads.get(t, gen);
        let expected = st.depth;
        let mut x = 0u8;
        if depth != expected {
            x |= RET_DEPTH;
        }
        match st.begin_return(depth) {
            Some(f) => {
                if f.method != method.0 {
                    x |= RET_METHOD;
                }
                if time_ns.checked_sub(f.time_ns) != Some(elapsed_ns) {
                    x |= RET_ELAPSED;
                }
            }
            None => x |= RET_METHOD | RET_ELAPSED,
        }
        x |= match outcome {
            Outcome::Void => 0,
            Outcome::Value(_) => 1 << RET_OUTCOME_SHIFT,
            Outcome::Exception { .. } => 2 << RET_OUTCOME_SHIFT,
        };
        let buf = &mut self.buf;
        let (next_id, prev_time) = (self.next_id, self.prev_time);
        if x == 0 {
            put_head(buf, OP_RETURN | flags, t, id, next_id, time_ns, prev_time);
        } else {
            put_head(
                buf,
                OP_RETURN | F_KIND | flags,
                t,
                id,
                next_id,
                time_ns,
                prev_time,
            );
            buf.push(x);
        }
        if x & RET_METHOD != 0 {
            put_u64(buf, u64::from(method.0));
        }
        if x & RET_DEPTH != 0 {
            put_i64(buf, i64::from(depth) - i64::from(expected));
        }
        if x & RET_ELAPSED != 0 {
            put_u64(buf, elapsed_ns);
        }
        match outcome {
            Outcome::Void => {}
            Outcome::Value(v) => put_value(buf, v),
            Outcome::Exception { class } => put_u64(buf, u64::from(class.0)),
        }
        st.end_return(depth);
        self.wrote(id, t, time_ns);
        Ok(())
    }

    /// What [`write`](TraceWriter::write) does before a version 1 event:
    /// checks the id and thread, ends a full chunk and puts the thread's
    /// record into the chunk when it changes. Returns the thread handle.
    #[inline]
    fn begin_v1(&mut self, id: u64, thread: ThreadRef) -> Result<u32, FormatError> {
        if self.last_id.is_some_and(|last| id <= last) || thread.0 >= MAX_THREAD_REF {
            // The checks and their messages are `write`'s.
            return Err(self.invalid(id, thread));
        }
        let t = thread.0;
        if self.count > 0
            && (self.buf.len() - CHUNK_HEADER_LEN >= self.chunk_target || self.count == u32::MAX)
        {
            self.end_chunk()?;
        }
        if t != self.cur_thread {
            self.defs.thread(t, self.generation, &mut self.buf)?;
        }
        Ok(t)
    }

    #[cold]
    fn invalid(&self, id: u64, thread: ThreadRef) -> FormatError {
        match self.last_id {
            Some(last) if id <= last => FormatError::InvalidWrite(format!(
                "event id {id} does not follow the previous id {last} (ids must increase)"
            )),
            _ => FormatError::InvalidWrite(format!(
                "thread handle {} is too large (handles are dense and below {MAX_THREAD_REF})",
                thread.0
            )),
        }
    }

    /// The version 1 tag flags of event `id` of thread `t`.
    #[inline]
    fn flags_v1(&self, id: u64, t: u32) -> u8 {
        let mut flags = 0;
        if t != self.cur_thread {
            flags |= F_THREAD;
        }
        if id != self.next_id {
            flags |= F_ID;
        }
        flags
    }

    /// Appends the symbol records `kind` needs that this chunk lacks.
    #[inline]
    fn ensure_symbols(&mut self, kind: &EventKind) -> Result<(), FormatError> {
        let gen = self.generation;
        let d = &mut self.defs;
        let buf = &mut self.buf;
        match kind {
            EventKind::Call {
                method,
                caller,
                params,
                ..
            } => {
                d.method(*method, gen, buf)?;
                if let Some((cm, _)) = caller {
                    d.method(*cm, gen, buf)?;
                }
                for p in params {
                    d.value(p, gen, buf, 0)?;
                }
            }
            EventKind::Return {
                method, outcome, ..
            } => {
                d.method(*method, gen, buf)?;
                match outcome {
                    Outcome::Void => {}
                    Outcome::Value(v) => d.value(v, gen, buf, 0)?,
                    Outcome::Exception { class } => d.string(*class, gen, buf)?,
                }
            }
            EventKind::ThreadStart | EventKind::ThreadEnd | EventKind::GcStart => {}
            EventKind::GcFinish { .. } | EventKind::Dropped { .. } => {}
            EventKind::ClassLoad {
                class,
                loader,
                source,
            } => {
                d.string(*class, gen, buf)?;
                d.string(*loader, gen, buf)?;
                d.string(*source, gen, buf)?;
            }
            EventKind::Throw {
                exception,
                method,
                catch,
                ..
            } => {
                d.string(*exception, gen, buf)?;
                d.method(*method, gen, buf)?;
                if let Some((cm, _)) = catch {
                    d.method(*cm, gen, buf)?;
                }
            }
            EventKind::Catch {
                exception, method, ..
            } => {
                d.string(*exception, gen, buf)?;
                d.method(*method, gen, buf)?;
            }
            EventKind::MonitorContendedEnter { monitor, owner } => {
                d.string(monitor.class, gen, buf)?;
                if let Some(ThreadRef(o)) = owner {
                    d.thread(*o, gen, buf)?;
                }
            }
            EventKind::MonitorContendedEntered { monitor, .. }
            | EventKind::MonitorWait { monitor, .. }
            | EventKind::MonitorWaited { monitor, .. } => d.string(monitor.class, gen, buf)?,
            EventKind::Sample {
                stack, monitors, ..
            } => {
                d.stack(*stack, gen, buf)?;
                for (m, _) in monitors {
                    d.string(m.class, gen, buf)?;
                }
            }
            EventKind::PeriodStart { stack, .. } | EventKind::VthreadPinned { stack, .. } => {
                d.stack(*stack, gen, buf)?
            }
            EventKind::AllocSample { class, stack, .. } => {
                d.string(*class, gen, buf)?;
                d.stack(*stack, gen, buf)?;
            }
            EventKind::MonitorEnter { monitor, .. } | EventKind::MonitorExit { monitor, .. } => {
                d.string(monitor.class, gen, buf)?
            }
            EventKind::TraceWindow { .. }
            | EventKind::PeriodEnd { .. }
            | EventKind::Calibration { .. } => {}
            EventKind::Bytecode { method, insn, .. } => {
                d.method(*method, gen, buf)?;
                d.string(*insn, gen, buf)?;
            }
            EventKind::ReactionHandlers {
                handlers, skipped, ..
            } => {
                for m in handlers.iter().chain(skipped) {
                    d.method(*m, gen, buf)?;
                }
            }
            EventKind::Foreign { name, fields } => {
                d.string(*name, gen, buf)?;
                for (key, _) in fields {
                    d.string(*key, gen, buf)?;
                }
            }
            EventKind::Demotion { method, .. } => d.method(*method, gen, buf)?,
            EventKind::MethodCounts { counts, .. } => {
                for (m, _) in counts {
                    d.method(*m, gen, buf)?;
                }
            }
        }
        Ok(())
    }

    /// Ends the current chunk (if it holds anything), writes it and flushes
    /// the underlying writer. Call at least once a second while recording.
    pub fn flush(&mut self) -> Result<(), FormatError> {
        self.end_chunk()?;
        self.out.flush()?;
        Ok(())
    }

    /// Events accepted by `write` so far, including those still buffered in
    /// the current chunk.
    pub fn events_written(&self) -> u64 {
        self.events
    }

    /// Bytes handed to the underlying writer so far (file header and whole
    /// chunks; the chunk being built is not counted until it is written).
    pub fn bytes_written(&self) -> u64 {
        self.bytes
    }

    /// Sizes of the chunks written so far, as the index footer will list them.
    pub fn chunk_infos(&self) -> &[ChunkInfo] {
        &self.chunks
    }

    /// Flushes, writes the index footer and returns the underlying writer.
    pub fn finish(mut self) -> Result<W, FormatError> {
        self.end_chunk()?;
        let footer = encode_footer(&self.chunks, self.bytes);
        self.out.write_all(&footer)?;
        self.bytes += footer.len() as u64;
        self.out.flush()?;
        Ok(self.out)
    }

    /// Writes the chunk being built, if it holds events, and starts the next.
    fn end_chunk(&mut self) -> Result<(), FormatError> {
        if self.count == 0 {
            // Only symbol records of writes that failed: nothing to keep.
            self.start_chunk();
            return Ok(());
        }
        if let Some(v2) = &mut self.v2 {
            // Streams in thread order, then the directory and its length.
            v2.active.sort_unstable();
            let mut dir = Vec::with_capacity(8 + v2.active.len() * 8);
            put_u64(&mut dir, v2.active.len() as u64);
            for &t in &v2.active {
                let st = v2.streams.get_mut(t).expect("an active stream");
                self.buf.extend_from_slice(&st.bytes);
                put_u64(&mut dir, u64::from(t));
                put_u64(&mut dir, u64::from(st.count));
                put_u64(&mut dir, st.bytes.len() as u64);
                st.bytes.clear();
                if st.bytes.capacity() > 1 << 20 {
                    st.bytes.shrink_to(64 << 10);
                }
            }
            self.buf.extend_from_slice(&dir);
            self.buf
                .extend_from_slice(&(dir.len() as u32).to_le_bytes());
        }
        let payload = &self.buf[CHUNK_HEADER_LEN..];
        let Ok(payload_len) = u32::try_from(payload.len()) else {
            self.start_chunk();
            return Err(FormatError::InvalidWrite(
                "a chunk payload grew beyond 4 GiB; its events were dropped".into(),
            ));
        };
        let header = ChunkHeader {
            version: if self.v2.is_some() {
                FORMAT_VERSION_2
            } else {
                FORMAT_VERSION
            },
            flags: 0,
            seq: self.seq,
            event_count: self.count,
            first_id: self.first_id,
            last_id: self.chunk_last_id,
            start_ns: self.min_ns,
            end_ns: self.max_ns,
            payload_len,
            payload_crc: crc32c::crc32c(payload),
        };
        self.buf[..CHUNK_HEADER_LEN].copy_from_slice(&header.encode());
        let result = self.out.write_all(&self.buf);
        if result.is_ok() {
            self.chunks.push(header.info(self.bytes));
            self.bytes += self.buf.len() as u64;
        }
        self.seq = self.seq.wrapping_add(1);
        self.start_chunk();
        Ok(result?)
    }

    fn start_chunk(&mut self) {
        self.buf.truncate(CHUNK_HEADER_LEN);
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.generation = 1;
            self.defs.forget_emitted();
            self.threads.reset_all();
        }
        self.count = 0;
        self.min_ns = u64::MAX;
        self.max_ns = 0;
        self.prev_time = 0;
        self.next_id = 0;
        self.cur_thread = NO_THREAD;
        if let Some(v2) = &mut self.v2 {
            v2.active.clear();
            v2.stream_bytes = 0;
            v2.redefined = false;
        }
    }
}

/// An event's tag and what follows it in every event: the thread when
/// the tag says so, the id gap likewise, the time delta.
#[inline]
fn put_head(buf: &mut Vec<u8>, tag: u8, t: u32, id: u64, next_id: u64, time: u64, prev: u64) {
    buf.push(tag);
    if tag & F_THREAD != 0 {
        put_u64(buf, u64::from(t));
    }
    if tag & F_ID != 0 {
        put_u64(buf, id - next_id);
    }
    put_i64(buf, time.wrapping_sub(prev) as i64);
}

#[inline]
fn put_loc(buf: &mut Vec<u8>, loc: &Loc) {
    put_i64(buf, i64::from(loc.bci));
    put_u64(buf, loc.line.map_or(0, |l| u64::from(l) + 1));
}

/// The metrics of a CALL or RETURN whose extras byte announced them, as
/// deltas against the thread's previous values in this chunk.
#[inline]
fn put_metrics(buf: &mut Vec<u8>, m: &Metrics, cpu_base: &mut u64, alloc_base: &mut u64) {
    if let Some(cpu) = m.cpu_ns {
        put_i64(buf, cpu.wrapping_sub(*cpu_base) as i64);
        *cpu_base = cpu;
    }
    if let Some(alloc) = m.alloc_bytes {
        put_i64(buf, alloc.wrapping_sub(*alloc_base) as i64);
        *alloc_base = alloc;
    }
}

#[inline]
fn put_monitor(buf: &mut Vec<u8>, m: &Monitor) {
    put_u64(buf, u64::from(m.class.0));
    buf.extend_from_slice(&m.hash.to_le_bytes());
}

fn put_value(buf: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => buf.push(V_NULL),
        Value::Boolean(false) => buf.push(V_FALSE),
        Value::Boolean(true) => buf.push(V_TRUE),
        Value::Byte(b) => {
            buf.push(V_BYTE);
            put_i64(buf, i64::from(*b));
        }
        Value::Char(c) => {
            buf.push(V_CHAR);
            put_u64(buf, u64::from(*c));
        }
        Value::Short(s) => {
            buf.push(V_SHORT);
            put_i64(buf, i64::from(*s));
        }
        Value::Int(i) => {
            buf.push(V_INT);
            put_i64(buf, i64::from(*i));
        }
        Value::Long(l) => {
            buf.push(V_LONG);
            put_i64(buf, *l);
        }
        Value::Float(f) => {
            buf.push(V_FLOAT);
            buf.extend_from_slice(&f.to_bits().to_le_bytes());
        }
        Value::Double(d) => {
            buf.push(V_DOUBLE);
            buf.extend_from_slice(&d.to_bits().to_le_bytes());
        }
        Value::Str {
            text,
            full_len: None,
        } => {
            buf.push(V_STR);
            put_str(buf, text);
        }
        Value::Str {
            text,
            full_len: Some(n),
        } => {
            buf.push(V_STR_CUT);
            put_u64(buf, u64::from(*n));
            put_str(buf, text);
        }
        Value::Boxed { class, value } => {
            buf.push(V_BOXED);
            put_u64(buf, u64::from(class.0));
            put_value(buf, value);
        }
        Value::Array { class, length } => {
            buf.push(V_ARRAY);
            put_u64(buf, u64::from(class.0));
            put_u64(buf, u64::from(*length));
        }
        Value::Object { class, hash } => {
            buf.push(V_OBJECT);
            put_u64(buf, u64::from(class.0));
            buf.extend_from_slice(&hash.to_le_bytes());
        }
        Value::Unavailable => buf.push(V_UNAVAILABLE),
    }
}
