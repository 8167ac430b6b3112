//! A JFR recording read as a vmview trace: chunk by chunk, each chunk's
//! events mapped onto vmview's event model, ordered by time and given ids.
//!
//! Only one chunk is held at a time (its bytes, pools and mapped events),
//! so memory follows the recording's chunk size (JFR's default is 12 MB)
//! and not its length. Names are interned across chunks into one
//! [`SymbolTable`], so a method or a stack is one handle for the whole
//! recording although every chunk repeats its constant pools.
//!
//! The mapping (docs/JFR.md has the table): execution and native method
//! samples become SAMPLE, monitor enter/wait pairs of MONITOR_* events,
//! garbage collections GC_START/GC_FINISH, thread start/end, exception and
//! error throws THROW without a catch site, JDK 25 method traces
//! CALL/RETURN; every other event is kept as FOREIGN with its fields as
//! text. Events of one chunk are sorted by time (JFR writes them per
//! thread buffer, not in time order); ids then count up from 1.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;
use std::rc::Rc;

use rustc_hash::FxHashMap;
use vmview_format::{
    Diagnostic, DiagnosticKind, Event, EventKind, FrameType, Loc, MethodId, MethodSymbol, Monitor,
    Outcome, StackId, StackSymbol, StringId, Symbol, SymbolTable, ThreadRef, ThreadState,
    ThreadSymbol, TraceHeader, Value as JValue, FORMAT_VERSION,
};
use vmview_options::{ClassFilter, BUILTIN_IO, BUILTIN_WAIT};

use crate::chunk::{Chunk, ChunkHeader, KnownMetadata, Unit, Value, HEADER_BYTES, MAGIC};
use crate::waits::{self, ChunkWaits, PeriodSource, WaitSampleStats, WaitSpan};

/// How many top frames of a native sample are searched for an I/O method
/// (the agent's sampler searches as many).
const IO_SEARCH_DEPTH: usize = 4;
/// Longest text kept for one FOREIGN field.
const MAX_FIELD_TEXT: usize = 512;
/// Elements of an array shown in a FOREIGN field.
const MAX_ARRAY_SHOWN: usize = 8;

/// Why a file could not be opened as a JFR recording.
#[derive(Debug, thiserror::Error)]
pub enum JfrError {
    #[error("cannot read {path}: {error}")]
    Io { path: String, error: io::Error },
    #[error("{path} is not a JFR recording (no FLR\\0 magic at offset 0)")]
    NotJfr { path: String },
    #[error("{path}: the first chunk is unreadable: {message}")]
    FirstChunk { path: String, message: String },
}

/// How a recording is read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JfrOptions {
    /// Also make SAMPLE events from the duration events that say a thread
    /// was not running (parks, monitor waits and enters, sleeps, socket and
    /// file I/O), one per sampling period (see `waits.rs`). Off, the
    /// samples are exactly JFR's own.
    pub wait_samples: bool,
}

/// Does `head` (a file's first bytes) start a JFR recording?
pub fn is_jfr(head: &[u8]) -> bool {
    head.starts_with(MAGIC)
}

/// The vmview event type a JFR event type maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    ExecutionSample,
    NativeSample,
    MonitorEnter,
    MonitorWait,
    Gc,
    ThreadStart,
    ThreadEnd,
    Throw,
    MethodTrace,
    AllocSample,
    JvmInfo,
    ActiveSetting,
    Foreign,
}

fn kind_of(name: &str) -> Kind {
    match name {
        "jdk.ExecutionSample" => Kind::ExecutionSample,
        "jdk.NativeMethodSample" => Kind::NativeSample,
        "jdk.JavaMonitorEnter" => Kind::MonitorEnter,
        "jdk.JavaMonitorWait" => Kind::MonitorWait,
        "jdk.GarbageCollection" => Kind::Gc,
        "jdk.ThreadStart" => Kind::ThreadStart,
        "jdk.ThreadEnd" => Kind::ThreadEnd,
        "jdk.JavaExceptionThrow" | "jdk.JavaErrorThrow" => Kind::Throw,
        "jdk.MethodTrace" => Kind::MethodTrace,
        "jdk.ObjectAllocationSample" => Kind::AllocSample,
        "jdk.JVMInformation" => Kind::JvmInfo,
        "jdk.ActiveSetting" => Kind::ActiveSetting,
        _ => Kind::Foreign,
    }
}

/// Handles assigned across the whole recording.
#[derive(Default)]
struct Interner {
    strings: FxHashMap<Box<str>, StringId>,
    methods: FxHashMap<(StringId, StringId, StringId), MethodId>,
    threads: FxHashMap<(u8, i64), ThreadRef>,
    stacks: FxHashMap<StackKey, StackId>,
}

/// A stack's frames and their types (empty: none known).
type StackKey = (Box<[(MethodId, Loc)]>, Box<[FrameType]>);

impl Interner {
    fn string(&mut self, syms: &mut SymbolTable, s: &str) -> StringId {
        if let Some(&id) = self.strings.get(s) {
            return id;
        }
        let id = StringId(self.strings.len() as u32);
        self.strings.insert(s.into(), id);
        syms.insert(Symbol::String {
            id,
            text: s.to_string(),
        });
        id
    }
}

/// A method as the current chunk's pools name it.
#[derive(Clone, Copy)]
struct MethodInfo {
    id: MethodId,
    io: bool,
    wait: bool,
    init: bool,
}

/// A stack as the current chunk's pools name it.
struct StackInfo {
    id: StackId,
    methods: Box<[MethodInfo]>,
    locs: Box<[Loc]>,
}

/// What the mapping needs of an event type, found once per chunk: its
/// kind and where its common fields are.
#[derive(Clone, Copy)]
struct EventClass {
    kind: Kind,
    start: Option<usize>,
    duration: Option<usize>,
    thread: Option<usize>,
    /// The [`waits::WAIT_EVENTS`] entry of the type, if it is one.
    wait: Option<usize>,
}

/// Per-chunk caches from pool keys to handles.
#[derive(Default)]
struct ChunkCache {
    kinds: FxHashMap<u32, EventClass>,
    methods: FxHashMap<i64, MethodInfo>,
    stacks: FxHashMap<i64, Rc<StackInfo>>,
    threads: FxHashMap<i64, ThreadRef>,
    /// Type id of `jdk.ExecutionSample` in this chunk's metadata.
    execution_sample: Option<i64>,
}

/// Reads a `.jfr` file as vmview events.
pub struct JfrReader<R = File> {
    file: R,
    file_len: u64,
    next_chunk_at: u64,
    seq: u32,
    header: TraceHeader,
    symbols: SymbolTable,
    interner: Interner,
    pending: VecDeque<Event>,
    diagnostics: Vec<Diagnostic>,
    next_id: u64,
    io: ClassFilter,
    wait: ClassFilter,
    jvm_thread: Option<ThreadRef>,
    unknown_method: Option<MethodId>,
    /// The last metadata event decoded and its types, for the next chunk.
    metadata: Option<KnownMetadata>,
    /// Chunks whose header was read whole, damaged ones included.
    chunks: usize,
    done: bool,
    options: JfrOptions,
    /// The last chunk's `jdk.ExecutionSample#period` setting, ns.
    period_setting: Option<u64>,
    /// The last median gap of execution samples, ns.
    period_gap: Option<u64>,
    wait_stats: WaitSampleStats,
}

impl JfrReader<File> {
    /// Opens a recording and reads its first chunk.
    pub fn open(path: &Path) -> Result<JfrReader<File>, JfrError> {
        JfrReader::open_with(path, JfrOptions::default())
    }

    /// Opens a recording to be read with `options`.
    pub fn open_with(path: &Path, options: JfrOptions) -> Result<JfrReader<File>, JfrError> {
        let shown = path.display().to_string();
        let file = File::open(path).map_err(|error| JfrError::Io {
            path: shown.clone(),
            error,
        })?;
        JfrReader::with_options(file, &shown, options)
    }
}

impl<R: Read + Seek> JfrReader<R> {
    /// Reads a recording from `file` (named `shown` in messages) and its
    /// first chunk.
    pub fn new(file: R, shown: &str) -> Result<JfrReader<R>, JfrError> {
        JfrReader::with_options(file, shown, JfrOptions::default())
    }

    /// As [`JfrReader::new`], read with `options`.
    pub fn with_options(
        mut file: R,
        shown: &str,
        options: JfrOptions,
    ) -> Result<JfrReader<R>, JfrError> {
        let shown = shown.to_string();
        let io_err = |error| JfrError::Io {
            path: shown.clone(),
            error,
        };
        let file_len = file.seek(SeekFrom::End(0)).map_err(io_err)?;
        file.seek(SeekFrom::Start(0)).map_err(io_err)?;
        let mut head = [0u8; HEADER_BYTES];
        let n = read_up_to(&mut file, &mut head).map_err(io_err)?;
        if !is_jfr(&head[..n]) {
            return Err(JfrError::NotJfr { path: shown });
        }
        let first = ChunkHeader::parse(&head[..n]).map_err(|message| JfrError::FirstChunk {
            path: shown.clone(),
            message,
        })?;
        let mut r = JfrReader {
            file,
            file_len,
            next_chunk_at: 0,
            seq: 0,
            header: TraceHeader {
                version: FORMAT_VERSION,
                pid: 0,
                start_unix_ns: first.start_unix_ns.max(0) as u64,
                properties: vec![
                    ("source".to_string(), "jfr".to_string()),
                    (
                        "jfr_version".to_string(),
                        format!("{}.{}", first.major, first.minor),
                    ),
                ],
            },
            symbols: SymbolTable::default(),
            interner: Interner::default(),
            pending: VecDeque::new(),
            diagnostics: Vec::new(),
            next_id: 1,
            io: ClassFilter::new(BUILTIN_IO.iter().copied()).expect("the built-in globs are valid"),
            wait: ClassFilter::new(BUILTIN_WAIT.iter().copied())
                .expect("the built-in globs are valid"),
            jvm_thread: None,
            unknown_method: None,
            metadata: None,
            chunks: 0,
            done: false,
            options,
            period_setting: None,
            period_gap: None,
            wait_stats: WaitSampleStats::default(),
        };
        r.read_chunk();
        Ok(r)
    }

    pub fn header(&self) -> &TraceHeader {
        &self.header
    }

    /// Symbols of every event returned so far (and of the chunk being read).
    pub fn symbols(&self) -> &SymbolTable {
        &self.symbols
    }

    /// What the reader skipped, and why.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// Chunks read so far (damaged ones included, a cut last one not).
    pub fn chunk_count(&self) -> usize {
        self.chunks
    }

    /// The options the recording is read with.
    pub fn options(&self) -> JfrOptions {
        self.options
    }

    /// The wait samples made so far (all zero unless
    /// [`JfrOptions::wait_samples`]).
    pub fn wait_samples(&self) -> &WaitSampleStats {
        &self.wait_stats
    }

    /// Bytes of the file read so far.
    pub fn position(&self) -> u64 {
        self.next_chunk_at
    }

    /// The next event, in time order within each chunk.
    pub fn next_event(&mut self) -> Option<Event> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Some(ev);
            }
            if self.done {
                return None;
            }
            self.read_chunk();
        }
    }

    fn diag(&mut self, kind: DiagnosticKind, offset: u64, message: String) {
        self.diagnostics.push(Diagnostic {
            chunk: Some(self.seq),
            offset,
            kind,
            message,
        });
    }

    /// Reads the chunk at `next_chunk_at` into `pending` (or notes why not
    /// and stops).
    fn read_chunk(&mut self) {
        let at = self.next_chunk_at;
        if at >= self.file_len {
            self.done = true;
            return;
        }
        let left = self.file_len - at;
        let mut head = [0u8; HEADER_BYTES];
        let n = match self
            .file
            .seek(SeekFrom::Start(at))
            .and_then(|_| read_up_to(&mut self.file, &mut head))
        {
            Ok(n) => n,
            Err(e) => {
                self.done = true;
                self.diag(
                    DiagnosticKind::TruncatedTail,
                    at,
                    format!("chunk {} at byte {at}: read error ({e}); the rest of the recording was dropped", self.seq),
                );
                return;
            }
        };
        let header = match ChunkHeader::parse(&head[..n]) {
            Ok(h) => h,
            Err(m) => {
                self.done = true;
                let kind = if n < HEADER_BYTES {
                    DiagnosticKind::TruncatedTail
                } else {
                    DiagnosticKind::BadChunk
                };
                self.diag(
                    kind,
                    at,
                    format!(
                        "chunk {} at byte {at}: {m}; the last {left} bytes of the file were dropped",
                        self.seq
                    ),
                );
                return;
            }
        };
        if header.size < HEADER_BYTES as u64 || header.size > left {
            self.done = true;
            self.diag(
                DiagnosticKind::TruncatedTail,
                at,
                format!(
                    "chunk {} at byte {at} is cut short: its header promises {} bytes, the file has {left}; \
                     its events were dropped (the recording did not finish: JFR writes a chunk's types and \
                     constant pools at its end)",
                    self.seq, header.size
                ),
            );
            return;
        }
        let mut bytes = vec![0u8; header.size as usize];
        if let Err(e) = self
            .file
            .seek(SeekFrom::Start(at))
            .and_then(|_| self.file.read_exact(&mut bytes))
        {
            self.done = true;
            self.diag(
                DiagnosticKind::TruncatedTail,
                at,
                format!("chunk {} at byte {at}: read error ({e}); the rest of the recording was dropped", self.seq),
            );
            return;
        }
        self.next_chunk_at = at + header.size;
        self.chunks += 1;
        let size = header.size;
        match Chunk::parse(header, bytes, self.metadata.as_ref()) {
            Ok((chunk, fresh)) => {
                if fresh.is_some() {
                    self.metadata = fresh;
                }
                self.map_chunk(&chunk, at)
            }
            Err(d) => {
                let m = format!(
                    "chunk {} at byte {at} ({size} bytes) is damaged at byte {}: expected {}; its events were skipped",
                    self.seq,
                    at + d.offset as u64,
                    d.what
                );
                self.diag(DiagnosticKind::BadChunk, at + d.offset as u64, m);
            }
        }
        self.seq += 1;
    }

    fn map_chunk(&mut self, chunk: &Chunk, at: u64) {
        let mut cache = ChunkCache {
            execution_sample: chunk
                .meta
                .by_name("jdk.ExecutionSample")
                .map(|c| chunk.meta.class(c).id),
            ..ChunkCache::default()
        };
        let mut waits = ChunkWaits::default();
        let mut out: Vec<(u64, u8, u32, Event)> = Vec::new();
        let mut undecodable = 0u64;
        let mut first_bad = None;
        for raw in chunk.events() {
            let raw = match raw {
                Ok(r) => r,
                Err(d) => {
                    let m = format!(
                        "chunk {} at byte {at}: the event at byte {} is damaged ({}); the rest of the chunk was skipped",
                        self.seq,
                        at + d.offset as u64,
                        d.what
                    );
                    self.diag(DiagnosticKind::BadChunk, at + d.offset as u64, m);
                    break;
                }
            };
            match chunk.decode(&raw) {
                Ok((class, v)) => {
                    self.map_event(chunk, &mut cache, &mut waits, class, &v, &mut out)
                }
                Err(d) => {
                    undecodable += 1;
                    first_bad.get_or_insert((raw, d));
                }
            }
        }
        if let Some((raw, d)) = first_bad {
            let m = format!(
                "chunk {} at byte {at}: {undecodable} events could not be decoded and were skipped, \
                 the first of type {} at byte {} (expected {})",
                self.seq,
                raw.type_id,
                at + raw.offset as u64,
                d.what
            );
            self.diag(DiagnosticKind::BadChunk, at + raw.offset as u64, m);
        }
        if self.options.wait_samples {
            self.wait_samples_of_chunk(chunk, &mut waits, &mut out);
        }
        out.sort_by_key(|(t, phase, depth, _)| (*t, *phase, *depth));
        for (_, _, _, mut ev) in out {
            ev.id = self.next_id;
            self.next_id += 1;
            self.pending.push_back(ev);
        }
    }

    /// Adds the chunk's wait samples to `out`, at the recording's period:
    /// the `jdk.ExecutionSample#period` setting, else the median gap of
    /// its execution samples, else JFR's default.
    fn wait_samples_of_chunk(
        &mut self,
        chunk: &Chunk,
        waits: &mut ChunkWaits,
        out: &mut Vec<(u64, u8, u32, Event)>,
    ) {
        if let Some(p) = waits.setting_ns {
            self.period_setting = Some(p);
        }
        if let Some(g) = waits::median_gap(&mut waits.execution) {
            self.period_gap = Some(g);
        }
        if waits.spans.is_empty() {
            return;
        }
        let (period, from) = match (self.period_setting, self.period_gap) {
            (Some(p), _) => (p, PeriodSource::Setting),
            (None, Some(g)) => (g, PeriodSource::MedianGap),
            (None, None) => (waits::DEFAULT_PERIOD_NS, PeriodSource::Default),
        };
        let period = period.max(waits::MIN_PERIOD_NS);
        self.wait_stats.period_ns = period;
        self.wait_stats.period_from = from;
        let chunk_start = self.time(chunk, chunk.header.start_ticks);
        for (time, thread, state, stack) in
            waits::synthesize(waits, period, chunk_start, &mut self.wait_stats)
        {
            out.push((
                time,
                1,
                0,
                Event {
                    id: 0,
                    time_ns: time,
                    thread,
                    kind: EventKind::Sample {
                        state,
                        stack,
                        monitors: Vec::new(),
                    },
                },
            ));
        }
    }

    /// ns since the trace start of a tick count of this chunk.
    fn time(&self, chunk: &Chunk, ticks: i64) -> u64 {
        (chunk.header.unix_ns(ticks) as u64).saturating_sub(self.header.start_unix_ns)
    }

    fn map_event(
        &mut self,
        chunk: &Chunk,
        cache: &mut ChunkCache,
        waits: &mut ChunkWaits,
        class: u32,
        v: &Value,
        out: &mut Vec<(u64, u8, u32, Event)>,
    ) {
        let ec = *cache.kinds.entry(class).or_insert_with(|| {
            let c = chunk.meta.class(class);
            EventClass {
                kind: kind_of(&c.name),
                start: c.field("startTime"),
                duration: c.field("duration"),
                thread: c.field("eventThread"),
                wait: waits::wait_event(&c.name),
            }
        });
        let kind = ec.kind;
        let Value::Object { fields, .. } = v else {
            return;
        };
        let at = |i: Option<usize>| i.and_then(|i| fields.get(i));
        let start_ticks = at(ec.start).and_then(|t| chunk.int(t));
        let time = start_ticks.map_or(0, |t| self.time(chunk, t));
        let duration = at(ec.duration)
            .and_then(|d| chunk.int(d))
            .map_or(0, |d| chunk.header.span_ns(d));
        let event_thread = at(ec.thread).and_then(|t| self.thread(chunk, cache, t));
        if let (true, Some(event), Some(thread)) =
            (self.options.wait_samples, ec.wait, event_thread)
        {
            self.wait_stats.events[event] += 1;
            if let Some(st) = self.stack(chunk, cache, v) {
                waits.spans.push(WaitSpan {
                    start: time,
                    end: time.saturating_add(duration),
                    thread,
                    stack: st.id,
                    event,
                });
            }
        }
        let mut push = |time: u64, phase: u8, depth: u32, thread: ThreadRef, kind: EventKind| {
            out.push((
                time,
                phase,
                depth,
                Event {
                    id: 0,
                    time_ns: time,
                    thread,
                    kind,
                },
            ));
        };
        match kind {
            Kind::ExecutionSample | Kind::NativeSample => {
                let Some(thread) = chunk
                    .field(v, "sampledThread")
                    .and_then(|t| self.thread(chunk, cache, t))
                else {
                    return;
                };
                let Some(st) = self.stack(chunk, cache, v) else {
                    return;
                };
                let (stack, methods) = (st.id, &st.methods);
                // The JDK samples running threads only (state RUNNABLE);
                // async-profiler's wall-clock mode samples every thread
                // and says what each was doing.
                let jfr_state = chunk
                    .field(v, "state")
                    .and_then(|s| chunk.field(s, "name"))
                    .and_then(|n| chunk.string(n))
                    .unwrap_or("STATE_RUNNABLE");
                let state = match jfr_state {
                    "STATE_SLEEPING" => ThreadState::Sleep,
                    "STATE_BLOCKED" | "STATE_BLOCKED_ON_MONITOR_ENTER" => ThreadState::Blocked,
                    s if s.contains("WAIT") || s.contains("PARK") => ThreadState::Wait,
                    _ => ThreadState::Run,
                };
                if self.options.wait_samples {
                    waits.sampled.push((thread, time));
                    if kind == Kind::ExecutionSample {
                        waits.execution.push((thread, time));
                    }
                }
                let state = if kind == Kind::ExecutionSample && jfr_state != "STATE_IN_NATIVE" {
                    state
                } else if methods.first().is_some_and(|m| m.wait) {
                    ThreadState::Wait
                } else if methods.iter().take(IO_SEARCH_DEPTH).any(|m| m.io) {
                    ThreadState::Io
                } else {
                    ThreadState::Run
                };
                push(
                    time,
                    1,
                    0,
                    thread,
                    EventKind::Sample {
                        state,
                        stack,
                        monitors: Vec::new(),
                    },
                );
            }
            Kind::MonitorEnter | Kind::MonitorWait => {
                let thread = event_thread.unwrap_or_else(|| self.jvm_thread());
                let monitor = self.monitor(chunk, v);
                if kind == Kind::MonitorEnter {
                    let owner = chunk
                        .field(v, "previousOwner")
                        .and_then(|t| self.thread(chunk, cache, t));
                    push(
                        time,
                        1,
                        0,
                        thread,
                        EventKind::MonitorContendedEnter { monitor, owner },
                    );
                    push(
                        time + duration,
                        1,
                        0,
                        thread,
                        EventKind::MonitorContendedEntered {
                            monitor,
                            wait_ns: duration,
                        },
                    );
                } else {
                    let timeout_ms = chunk
                        .field(v, "timeout")
                        .and_then(|t| chunk.int(t))
                        .unwrap_or(0);
                    let timed_out = chunk
                        .field(v, "timedOut")
                        .and_then(|t| chunk.int(t))
                        .is_some_and(|t| t != 0);
                    push(
                        time,
                        1,
                        0,
                        thread,
                        EventKind::MonitorWait {
                            monitor,
                            timeout_ms,
                        },
                    );
                    push(
                        time + duration,
                        1,
                        0,
                        thread,
                        EventKind::MonitorWaited {
                            monitor,
                            timed_out,
                            wait_ns: duration,
                        },
                    );
                }
            }
            Kind::Gc => {
                let thread = event_thread.unwrap_or_else(|| self.jvm_thread());
                push(time, 1, 0, thread, EventKind::GcStart);
                push(
                    time + duration,
                    1,
                    0,
                    thread,
                    EventKind::GcFinish {
                        duration_ns: duration,
                    },
                );
            }
            Kind::ThreadStart | Kind::ThreadEnd => {
                let Some(thread) = chunk
                    .field(v, "thread")
                    .and_then(|t| self.thread(chunk, cache, t))
                    .or(event_thread)
                else {
                    return;
                };
                let k = if kind == Kind::ThreadStart {
                    EventKind::ThreadStart
                } else {
                    EventKind::ThreadEnd
                };
                push(time, 1, 0, thread, k);
            }
            // JDK 16+: one sample per allocation the JDK chose (throttled,
            // `jdk.ObjectAllocationSample#throttle`), whose `weight` is the
            // bytes allocated since the thread's previous sample: the bytes
            // it stands for, as an ALLOC_SAMPLE's size does.
            Kind::AllocSample => {
                let thread = event_thread.unwrap_or_else(|| self.jvm_thread());
                let class = self.class_field(chunk, v, "objectClass");
                let size = chunk
                    .field(v, "weight")
                    .and_then(|w| chunk.int(w))
                    .map_or(0, |w| w.max(0) as u64);
                let Some(st) = self.stack(chunk, cache, v) else {
                    return;
                };
                let stack = st.id;
                push(
                    time,
                    1,
                    0,
                    thread,
                    EventKind::AllocSample { class, size, stack },
                );
            }
            Kind::Throw => {
                let thread = event_thread.unwrap_or_else(|| self.jvm_thread());
                let exception = self.class_field(chunk, v, "thrownClass");
                let message = chunk
                    .field(v, "message")
                    .and_then(|m| chunk.string(m))
                    .map(str::to_string);
                // The JDK records the throw in Throwable's constructor: the
                // throwing frame is the first one outside a constructor.
                let site = self.stack(chunk, cache, v).and_then(|st| {
                    let i = st.methods.iter().position(|m| !m.init).unwrap_or(0);
                    Some((st.methods.get(i)?.id, *st.locs.get(i)?))
                });
                let (method, loc) = site.unwrap_or_else(|| {
                    (
                        self.unknown_method(),
                        Loc {
                            bci: -1,
                            line: None,
                        },
                    )
                });
                push(
                    time,
                    1,
                    0,
                    thread,
                    EventKind::Throw {
                        exception,
                        message,
                        method,
                        loc,
                        catch: None,
                    },
                );
            }
            Kind::MethodTrace => {
                let thread = event_thread.unwrap_or_else(|| self.jvm_thread());
                let Some(m) = self.method_of_field(chunk, cache, v, "method") else {
                    return;
                };
                // The stack is the caller's: the traced method is one deeper.
                let st = self.stack(chunk, cache, v);
                let depth = st.as_ref().map_or(0, |st| st.methods.len() as u32) + 1;
                let caller = st.and_then(|st| Some((st.methods.first()?.id, *st.locs.first()?)));
                push(
                    time,
                    1,
                    depth,
                    thread,
                    EventKind::Call {
                        method: m.id,
                        depth,
                        caller,
                        params: Vec::new(),
                        metrics: vmview_format::Metrics::NONE,
                    },
                );
                push(
                    time + duration,
                    0,
                    u32::MAX - depth,
                    thread,
                    EventKind::Return {
                        method: m.id,
                        depth,
                        outcome: Outcome::Value(JValue::Unavailable),
                        elapsed_ns: duration,
                        metrics: vmview_format::Metrics::NONE,
                    },
                );
            }
            Kind::JvmInfo | Kind::ActiveSetting | Kind::Foreign => {
                if kind == Kind::JvmInfo && self.header.pid == 0 {
                    self.jvm_info(chunk, v);
                }
                if kind == Kind::ActiveSetting && self.options.wait_samples {
                    if let Some(p) = execution_period(chunk, cache, v) {
                        waits.setting_ns = Some(waits.setting_ns.map_or(p, |q| q.min(p)));
                    }
                }
                let thread = event_thread.unwrap_or_else(|| self.jvm_thread());
                let name = chunk.meta.class(class).name.to_string();
                let name = self.interner.string(&mut self.symbols, &name);
                let fields = self.foreign_fields(chunk, class, v);
                push(time, 1, 0, thread, EventKind::Foreign { name, fields });
            }
        }
    }

    fn jvm_info(&mut self, chunk: &Chunk, v: &Value) {
        let text = |name: &str| {
            chunk
                .field(v, name)
                .and_then(|s| chunk.string(s))
                .unwrap_or("")
                .to_string()
        };
        if let Some(pid) = chunk.field(v, "pid").and_then(|p| chunk.int(p)) {
            self.header.pid = pid.clamp(0, i64::from(u32::MAX)) as u32;
        }
        self.header
            .properties
            .push(("jvm".to_string(), text("jvmVersion")));
        self.header
            .properties
            .push(("command".to_string(), text("javaArguments")));
        self.header
            .properties
            .push(("jvm_arguments".to_string(), text("jvmArguments")));
    }

    /// The fields of an unmapped event as text, `startTime` and
    /// `eventThread` left out (they are the event's time and thread).
    fn foreign_fields(&mut self, chunk: &Chunk, class: u32, v: &Value) -> Vec<(StringId, String)> {
        let Value::Object { fields, .. } = v else {
            return Vec::new();
        };
        let mut out = Vec::with_capacity(fields.len());
        for (f, val) in chunk.meta.class(class).fields.iter().zip(fields.iter()) {
            if &*f.name == "startTime" || &*f.name == "eventThread" {
                continue;
            }
            let mut text = String::new();
            self.render(chunk, val, f.unit, 0, &mut text);
            if text.len() > MAX_FIELD_TEXT {
                let mut cut = MAX_FIELD_TEXT;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.truncate(cut);
                text.push('…');
            }
            let key = self.interner.string(&mut self.symbols, &f.name);
            out.push((key, text));
        }
        out
    }

    /// A value as text: numbers as numbers (tick spans and time stamps in
    /// ns), threads by name, classes and methods by name, stacks by their
    /// top frame, other objects as `{field=value, …}`.
    fn render(&self, chunk: &Chunk, v: &Value, unit: Unit, depth: u32, out: &mut String) {
        use std::fmt::Write as _;
        if depth > 3 || out.len() > MAX_FIELD_TEXT {
            out.push('…');
            return;
        }
        let Some(r) = chunk.resolve(v) else {
            // Key 0 is JFR's null reference (an event without a stack).
            out.push_str(if matches!(v, Value::Ref { key: 0, .. }) {
                "null"
            } else {
                "?"
            });
            return;
        };
        match r {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => {
                let _ = write!(out, "{b}");
            }
            Value::Int(i) => {
                let _ = match unit {
                    Unit::TimespanTicks => write!(out, "{}", chunk.header.span_ns(*i)),
                    Unit::TimestampTicks => write!(out, "{}", self.time(chunk, *i)),
                    Unit::Plain => write!(out, "{i}"),
                };
            }
            Value::Float(f) => {
                let _ = write!(out, "{f}");
            }
            Value::Str(s) => out.push_str(s),
            Value::Ref { .. } => out.push('?'),
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().take(MAX_ARRAY_SHOWN).enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    self.render(chunk, item, unit, depth + 1, out);
                }
                if items.len() > MAX_ARRAY_SHOWN {
                    let _ = write!(out, ", … {} in all", items.len());
                }
                out.push(']');
            }
            Value::Object { class, fields } => {
                let cls = chunk.meta.class(*class);
                match &*cls.name {
                    "java.lang.Thread" => {
                        out.push_str(&thread_name(chunk, r));
                        return;
                    }
                    "java.lang.Class" => {
                        out.push_str(&self.class_name(chunk, r));
                        return;
                    }
                    "jdk.types.Symbol" => {
                        out.push_str(chunk.string(r).unwrap_or("?"));
                        return;
                    }
                    "jdk.types.Method" => {
                        let (c, n, _) = method_names(self, chunk, r);
                        let _ = write!(out, "{c}.{n}");
                        return;
                    }
                    "jdk.types.StackTrace" => {
                        match chunk.field(r, "frames") {
                            Some(Value::Array(frames)) => match frames.first() {
                                Some(top) => {
                                    if let Some(m) = chunk.field(top, "method") {
                                        let (c, n, _) = method_names(self, chunk, m);
                                        let _ = write!(out, "{c}.{n}");
                                    }
                                    let _ = write!(out, " ({} frames)", frames.len());
                                }
                                None => out.push_str("(no frames)"),
                            },
                            _ => out.push('?'),
                        }
                        return;
                    }
                    _ => {}
                }
                // Single-field wrappers (jdk.types.GCName, ThreadState …)
                // read as their value.
                if fields.len() == 1 {
                    self.render(chunk, &fields[0], cls.fields[0].unit, depth + 1, out);
                    return;
                }
                out.push('{');
                for (i, (f, val)) in cls.fields.iter().zip(fields.iter()).enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&f.name);
                    out.push('=');
                    self.render(chunk, val, f.unit, depth + 1, out);
                }
                out.push('}');
            }
        }
    }

    fn class_name(&self, chunk: &Chunk, c: &Value) -> String {
        let name = chunk
            .field(c, "name")
            .and_then(|n| chunk.string(n))
            .unwrap_or("?");
        java_class_name(name)
    }

    /// The interned Java name of the class in event field `field` ("?"
    /// without one).
    fn class_field(&mut self, chunk: &Chunk, v: &Value, field: &str) -> StringId {
        let class = chunk
            .field(v, field)
            .map(|c| self.class_name(chunk, c))
            .unwrap_or_else(|| "?".to_string());
        self.interner.string(&mut self.symbols, &class)
    }

    fn monitor(&mut self, chunk: &Chunk, v: &Value) -> Monitor {
        let class = self.class_field(chunk, v, "monitorClass");
        let address = chunk
            .field(v, "address")
            .and_then(|a| chunk.int(a))
            .unwrap_or(0) as u64;
        Monitor {
            class,
            hash: (address ^ (address >> 32)) as u32,
        }
    }

    fn jvm_thread(&mut self) -> ThreadRef {
        if let Some(t) = self.jvm_thread {
            return t;
        }
        let t = self.new_thread((2, 0), -1, "JVM", "system");
        self.jvm_thread = Some(t);
        t
    }

    fn unknown_method(&mut self) -> MethodId {
        if let Some(m) = self.unknown_method {
            return m;
        }
        let m = self.method_id("?", "?", "");
        self.unknown_method = Some(m);
        m
    }

    fn new_thread(&mut self, key: (u8, i64), java_id: i64, name: &str, group: &str) -> ThreadRef {
        if let Some(&t) = self.interner.threads.get(&key) {
            return t;
        }
        let id = ThreadRef(self.interner.threads.len() as u32);
        self.interner.threads.insert(key, id);
        let name = self.interner.string(&mut self.symbols, name);
        let group = self.interner.string(&mut self.symbols, group);
        self.symbols.insert(Symbol::Thread(ThreadSymbol {
            id,
            java_id,
            name,
            group,
            priority: 0,
            daemon: false,
        }));
        id
    }

    /// A `java.lang.Thread` value as a vmview thread (by Java thread id,
    /// else by OS thread id).
    fn thread(&mut self, chunk: &Chunk, cache: &mut ChunkCache, t: &Value) -> Option<ThreadRef> {
        let key = pool_key(t);
        if let Some(k) = key {
            if let Some(&r) = cache.threads.get(&k) {
                return Some(r);
            }
        }
        let obj = chunk.resolve(t)?;
        if !matches!(obj, Value::Object { .. }) {
            return None;
        }
        let java_id = chunk
            .field(obj, "javaThreadId")
            .and_then(|i| chunk.int(i))
            .unwrap_or(0);
        let os_id = chunk
            .field(obj, "osThreadId")
            .and_then(|i| chunk.int(i))
            .unwrap_or(0);
        let name = thread_name(chunk, obj);
        let group = chunk
            .field(obj, "group")
            .and_then(|g| chunk.field(g, "name"))
            .and_then(|n| chunk.string(n))
            .unwrap_or("")
            .to_string();
        let (k, jid) = if java_id > 0 {
            ((0, java_id), java_id)
        } else {
            ((1, os_id), -1)
        };
        let r = self.new_thread(k, jid, &name, &group);
        if let Some(k) = key {
            cache.threads.insert(k, r);
        }
        Some(r)
    }

    fn method_id(&mut self, class: &str, name: &str, sig: &str) -> MethodId {
        let c = self.interner.string(&mut self.symbols, class);
        let n = self.interner.string(&mut self.symbols, name);
        let s = self.interner.string(&mut self.symbols, sig);
        if let Some(&m) = self.interner.methods.get(&(c, n, s)) {
            return m;
        }
        let id = MethodId(self.interner.methods.len() as u32);
        self.interner.methods.insert((c, n, s), id);
        self.symbols.insert(Symbol::Method(MethodSymbol {
            id,
            class: c,
            name: n,
            sig: s,
            param_names: Vec::new(),
            modifiers: 0,
        }));
        id
    }

    fn method(&mut self, chunk: &Chunk, cache: &mut ChunkCache, m: &Value) -> Option<MethodInfo> {
        let key = pool_key(m);
        if let Some(k) = key {
            if let Some(&info) = cache.methods.get(&k) {
                return Some(info);
            }
        }
        let (class, name, sig) = method_names(self, chunk, m);
        let id = self.method_id(&class, &name, &sig);
        let qualified = format!("{class}.{name}");
        let info = MethodInfo {
            id,
            io: self.io.matches(&qualified),
            wait: self.wait.matches(&qualified),
            init: name == "<init>",
        };
        if let Some(k) = key {
            cache.methods.insert(k, info);
        }
        Some(info)
    }

    fn method_of_field(
        &mut self,
        chunk: &Chunk,
        cache: &mut ChunkCache,
        v: &Value,
        field: &str,
    ) -> Option<MethodInfo> {
        let m = chunk.field(v, field)?;
        self.method(chunk, cache, m)
    }

    /// The event's `stackTrace` as a vmview stack, with its frames'
    /// methods (top first).
    fn stack(&mut self, chunk: &Chunk, cache: &mut ChunkCache, v: &Value) -> Option<Rc<StackInfo>> {
        let st = match v {
            Value::Object { class, fields } => {
                let i = chunk.meta.class(*class).field("stackTrace")?;
                fields.get(i)?
            }
            _ => return None,
        };
        let key = pool_key(st);
        if let Some(k) = key {
            if let Some(st) = cache.stacks.get(&k) {
                return Some(st.clone());
            }
        }
        let Some(Value::Array(frames)) = chunk.field(st, "frames") else {
            return None;
        };
        let mut list = Vec::with_capacity(frames.len());
        let mut types = Vec::with_capacity(frames.len());
        let mut infos = Vec::with_capacity(frames.len());
        let mut locs = Vec::with_capacity(frames.len());
        for f in frames.iter() {
            let Some(m) = chunk
                .field(f, "method")
                .and_then(|m| self.method(chunk, cache, m))
            else {
                continue;
            };
            let line = chunk.field(f, "lineNumber").and_then(|l| chunk.int(l));
            let bci = chunk
                .field(f, "bytecodeIndex")
                .and_then(|b| chunk.int(b))
                .unwrap_or(-1);
            let loc = Loc {
                bci: bci.clamp(-1, i64::from(i32::MAX)) as i32,
                line: line
                    .filter(|&l| l > 0)
                    .map(|l| l.min(i64::from(u32::MAX)) as u32),
            };
            list.push((m.id, loc));
            types.push(jfr_frame_type(chunk, f));
            infos.push(m);
            locs.push(loc);
        }
        if types.iter().all(|t| *t == FrameType::Unknown) {
            types.clear();
        }
        let frames = (list.into_boxed_slice(), types.into_boxed_slice());
        let id = match self.interner.stacks.get(&frames) {
            Some(&id) => id,
            None => {
                let id = StackId(self.interner.stacks.len() as u32);
                self.symbols.insert(Symbol::Stack(StackSymbol {
                    id,
                    frames: frames.0.to_vec(),
                    types: frames.1.to_vec(),
                }));
                self.interner.stacks.insert(frames, id);
                id
            }
        };
        let st = Rc::new(StackInfo {
            id,
            methods: infos.into_boxed_slice(),
            locs: locs.into_boxed_slice(),
        });
        if let Some(k) = key {
            cache.stacks.insert(k, st.clone());
        }
        Some(st)
    }
}

/// The period a `jdk.ActiveSetting` event sets for `jdk.ExecutionSample`,
/// if it is one that does (the JVM samples at the smallest period of its
/// recordings).
fn execution_period(chunk: &Chunk, cache: &ChunkCache, v: &Value) -> Option<u64> {
    let id = chunk.field(v, "id").and_then(|i| chunk.int(i))?;
    if Some(id) != cache.execution_sample {
        return None;
    }
    if chunk.field(v, "name").and_then(|n| chunk.string(n)) != Some("period") {
        return None;
    }
    waits::parse_span(chunk.field(v, "value").and_then(|n| chunk.string(n))?)
}

fn pool_key(v: &Value) -> Option<i64> {
    match v {
        Value::Ref { key, .. } => Some(*key),
        _ => None,
    }
}

fn thread_name(chunk: &Chunk, t: &Value) -> String {
    let java = chunk.field(t, "javaName").and_then(|n| chunk.string(n));
    let os = chunk.field(t, "osName").and_then(|n| chunk.string(n));
    java.filter(|s| !s.is_empty())
        .or(os)
        .unwrap_or("?")
        .to_string()
}

/// A JFR `jdk.types.StackFrame`'s `type` (a `jdk.types.FrameType`, whose
/// `description` is `Interpreted`, `JIT compiled`, `Inlined` or `Native`:
/// JFR's own walker knows every frame's).
fn jfr_frame_type(chunk: &Chunk, frame: &Value) -> FrameType {
    let description = chunk
        .field(frame, "type")
        .and_then(|t| chunk.field(t, "description"))
        .and_then(|d| chunk.string(d));
    match description {
        Some("Interpreted") => FrameType::Interpreted,
        Some("JIT compiled") => FrameType::Compiled,
        Some("Inlined") => FrameType::Inlined,
        Some("Native") => FrameType::Native,
        _ => FrameType::Unknown,
    }
}

/// Dotted class, name and descriptor of a `jdk.types.Method`.
fn method_names<R: Read + Seek>(
    r: &JfrReader<R>,
    chunk: &Chunk,
    m: &Value,
) -> (String, String, String) {
    let class = chunk
        .field(m, "type")
        .map(|c| r.class_name(chunk, c))
        .unwrap_or_else(|| "?".to_string());
    let s = |name: &str| {
        chunk
            .field(m, name)
            .and_then(|v| chunk.string(v))
            .unwrap_or("?")
            .to_string()
    };
    (class, s("name"), s("descriptor"))
}

/// Reads until `buf` is full or the file ends.
fn read_up_to(f: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// A JFR class name as the agent names classes: `fx/Allocs$Point` →
/// `fx.Allocs$Point`, and arrays, which JFR names by descriptor, as Java
/// writes them: `[B` → `byte[]`, `[[Ljava/lang/String;` →
/// `java.lang.String[][]`.
fn java_class_name(name: &str) -> String {
    let dims = name.bytes().take_while(|b| *b == b'[').count();
    if dims == 0 {
        return name.replace('/', ".");
    }
    let elem = &name[dims..];
    let base = match elem.as_bytes().first() {
        Some(b'L') => elem[1..].trim_end_matches(';').replace('/', "."),
        Some(b'Z') => "boolean".into(),
        Some(b'B') => "byte".into(),
        Some(b'C') => "char".into(),
        Some(b'S') => "short".into(),
        Some(b'I') => "int".into(),
        Some(b'J') => "long".into(),
        Some(b'F') => "float".into(),
        Some(b'D') => "double".into(),
        _ => return name.replace('/', "."),
    };
    base + &"[]".repeat(dims)
}

#[cfg(test)]
mod name_tests {
    #[test]
    fn array_classes_are_named_as_java_writes_them() {
        assert_eq!(super::java_class_name("[B"), "byte[]");
        assert_eq!(
            super::java_class_name("[[Ljava/lang/String;"),
            "java.lang.String[][]"
        );
        assert_eq!(super::java_class_name("fx/Allocs$Point"), "fx.Allocs$Point");
    }
}
