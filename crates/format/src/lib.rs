//! vmview's event model and trace format.
//!
//! The API here is the contract between the agent (which writes traces) and
//! every reader (CLI, analyses, exporters). Bodies marked `todo!` are being
//! written; signatures are fixed.
pub mod event;
pub mod symbols;

pub use event::*;
pub use symbols::*;

use std::io::{Read, Seek, Write};

/// Everything that can go wrong reading or writing a trace.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("not a vmview trace (bad magic at offset 0)")]
    NotATrace,
    #[error("unsupported trace format version {found} (this vmview reads version {supported})")]
    UnsupportedVersion { found: u16, supported: u16 },
    #[error("the trace holds no complete chunk: {0}")]
    Empty(String),
    #[error("event id {id} not in this trace (ids {first}..={last})")]
    NoSuchEvent { id: u64, first: u64, last: u64 },
    #[error("invalid write: {0}")]
    InvalidWrite(String),
}

/// The file header: who recorded the trace, when and how.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceHeader {
    /// Format version (set by the writer, read back by the reader).
    pub version: u16,
    /// Process id of the recorded JVM.
    pub pid: u32,
    /// Wall-clock start, ns since the Unix epoch; event times count from here.
    pub start_unix_ns: u64,
    /// Free-form facts: `jvm` (version string), `command`, `agent_options`,
    /// later `calibration_ns_per_record` and such.
    pub properties: Vec<(String, String)>,
}

/// Where one chunk lies and what it covers.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkInfo {
    pub seq: u32,
    /// Byte offset of the chunk header in the file.
    pub offset: u64,
    /// Total length of the chunk (header + payload) in bytes.
    pub len: u64,
    pub first_id: u64,
    pub last_id: u64,
    pub event_count: u32,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Event id → chunk map: read from the footer, or rebuilt from chunk headers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceIndex {
    pub chunks: Vec<ChunkInfo>,
}

impl TraceIndex {
    /// The chunk that holds event `id`, if any.
    pub fn chunk_for(&self, id: u64) -> Option<&ChunkInfo> {
        let i = self.chunks.partition_point(|c| c.last_id < id);
        self.chunks.get(i).filter(|c| c.first_id <= id)
    }
}

/// Something the reader noticed and worked around.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    /// Chunk sequence number, when the problem is inside a chunk.
    pub chunk: Option<u32>,
    /// Byte offset in the file.
    pub offset: u64,
    pub kind: DiagnosticKind,
    /// Human-readable, complete sentence.
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiagnosticKind {
    /// The file ends inside a chunk (the recording JVM died): the tail was dropped.
    TruncatedTail,
    /// A chunk's checksum does not match: the chunk was skipped.
    ChecksumMismatch,
    /// A chunk's payload could not be decoded: the chunk was skipped.
    BadChunk,
    /// No index footer (the recording did not finish cleanly): index rebuilt.
    IndexRebuilt,
}

/// Resolves handles to names. Filled from symbol records as chunks are read.
#[derive(Debug, Clone, Default)]
pub struct SymbolTable {
    strings: Vec<Option<String>>,
    methods: Vec<Option<MethodSymbol>>,
    threads: Vec<Option<ThreadSymbol>>,
}

impl SymbolTable {
    pub fn insert(&mut self, sym: Symbol) {
        fn put<T>(v: &mut Vec<Option<T>>, i: u32, x: T) {
            let i = i as usize;
            if v.len() <= i {
                v.resize_with(i + 1, || None);
            }
            v[i] = Some(x);
        }
        match sym {
            Symbol::String { id, text } => put(&mut self.strings, id.0, text),
            Symbol::Method(m) => put(&mut self.methods, m.id.0, m),
            Symbol::Thread(t) => put(&mut self.threads, t.id.0, t),
        }
    }
    /// The string, or `"?"` when the trace never defined it (damaged chunk).
    pub fn string(&self, id: StringId) -> &str {
        self.strings
            .get(id.0 as usize)
            .and_then(|s| s.as_deref())
            .unwrap_or("?")
    }
    pub fn method(&self, id: MethodId) -> Option<&MethodSymbol> {
        self.methods.get(id.0 as usize).and_then(|m| m.as_ref())
    }
    pub fn thread(&self, id: ThreadRef) -> Option<&ThreadSymbol> {
        self.threads.get(id.0 as usize).and_then(|t| t.as_ref())
    }
    /// The thread's name, or `thread-N` when unknown.
    pub fn thread_name(&self, id: ThreadRef) -> String {
        match self.thread(id) {
            Some(t) => self.string(t.name).to_string(),
            None => format!("thread-{}", id.0),
        }
    }
}

/// Writes a trace: header, then chunks of symbol records and events, then
/// (on `finish`) the index footer.
pub struct TraceWriter<W: Write> {
    _out: W,
}

impl<W: Write> TraceWriter<W> {
    /// Writes the file header. Chunks end at about 1 MiB of payload.
    pub fn new(out: W, header: &TraceHeader) -> Result<Self, FormatError> {
        let _ = (out, header);
        todo!()
    }
    /// Like `new` with another chunk payload size target (bytes).
    pub fn with_chunk_size(out: W, header: &TraceHeader, chunk_bytes: usize) -> Result<Self, FormatError> {
        let _ = (out, header, chunk_bytes);
        todo!()
    }
    /// Registers a symbol. Must be called before writing an event that uses
    /// its handle; the writer puts the record into each chunk that needs it.
    pub fn define(&mut self, sym: Symbol) {
        let _ = sym;
        todo!()
    }
    /// Appends an event. Ids must be strictly increasing. Starts a new
    /// chunk when the current one is full.
    pub fn write(&mut self, ev: &Event) -> Result<(), FormatError> {
        let _ = ev;
        todo!()
    }
    /// Ends the current chunk (if it holds anything), writes it and flushes
    /// the underlying writer. Call at least once a second while recording.
    pub fn flush(&mut self) -> Result<(), FormatError> {
        todo!()
    }
    pub fn events_written(&self) -> u64 {
        todo!()
    }
    pub fn bytes_written(&self) -> u64 {
        todo!()
    }
    /// Flushes, writes the index footer and returns the underlying writer.
    pub fn finish(self) -> Result<W, FormatError> {
        todo!()
    }
}

/// Reads a trace, streaming, recovering from damage: a bad chunk is
/// skipped with a [`Diagnostic`]; a truncated tail is reported.
pub struct TraceReader<R: Read + Seek> {
    _inner: R,
}

impl TraceReader<std::io::BufReader<std::fs::File>> {
    pub fn open(path: &std::path::Path) -> Result<Self, FormatError> {
        let f = std::fs::File::open(path)?;
        Self::new(std::io::BufReader::new(f))
    }
}

impl<R: Read + Seek> TraceReader<R> {
    /// Reads the file header. Fails only when this is not a vmview trace or
    /// has an unsupported version.
    pub fn new(inner: R) -> Result<Self, FormatError> {
        let _ = inner;
        todo!()
    }
    pub fn header(&self) -> &TraceHeader {
        todo!()
    }
    /// The next event in file order, or `None` at the end. Damage is
    /// skipped and recorded in `diagnostics()`.
    pub fn next_event(&mut self) -> Option<Event> {
        todo!()
    }
    /// Symbols seen so far (all those needed by events returned so far).
    pub fn symbols(&self) -> &SymbolTable {
        todo!()
    }
    pub fn diagnostics(&self) -> &[Diagnostic] {
        todo!()
    }
    /// The index: from the footer, or rebuilt by scanning chunk headers.
    pub fn index(&mut self) -> Result<&TraceIndex, FormatError> {
        todo!()
    }
    /// Positions the reader at the start of the chunk holding `id`, so that
    /// `next_event` continues from there (use it for `--id`/`--around`).
    pub fn seek_to_event(&mut self, id: u64) -> Result<(), FormatError> {
        let _ = id;
        todo!()
    }
}

impl<R: Read + Seek> Iterator for TraceReader<R> {
    type Item = Event;
    fn next(&mut self) -> Option<Event> {
        self.next_event()
    }
}
