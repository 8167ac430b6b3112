//! vmview's event model and trace format.
//!
//! The API here is the contract between the agent (which writes traces) and
//! every reader (CLI, analyses, exporters). The file layout is specified in
//! `docs/FORMAT.md`; in short, a trace is a file header followed by
//! self-contained, checksummed chunks of symbol records and varint-encoded
//! events, and, when the recording finished cleanly, an index footer.
//!
//! Code map: `writer.rs` encodes, `chunk.rs` decodes one chunk payload,
//! `reader.rs` frames chunks, recovers from damage and builds the index,
//! `state.rs` holds the per-chunk prediction state both sides share,
//! `wire.rs` the fixed byte layouts, `varint.rs` the integer coding.

#![forbid(unsafe_code)]

pub mod event;
pub mod handles;
pub mod parallel;
pub mod symbols;

mod chunk;
mod reader;
mod slots;
mod state;
mod varint;
mod wire;
mod writer;

pub use event::*;
pub use reader::TraceReader;
pub use symbols::*;
pub use wire::{
    DEFAULT_CHUNK_BYTES, FORMAT_VERSION, FORMAT_VERSION_2, MAX_THREAD_REF, NEWEST_VERSION,
};
pub use writer::TraceWriter;

use slots::Slots;

/// The deepest call path the call trees and flame graphs keep, in frames
/// from the stack base. A frame deeper than this is folded, with all it
/// called, into one `[truncated N frames]` node under the last kept frame
/// (async-profiler's `jstackdepth` does the same for its samples), so a
/// recursion thousands of frames deep costs the consumers a bounded number
/// of nodes and a bounded length per folded line instead of depth × depth.
/// Commands that build trees take `--max-depth` to change it.
pub const DEFAULT_MAX_DEPTH: u32 = 1024;

/// The name of a node that stands for the frames cut below the depth cap:
/// `[truncated N frames]`, N the most frames cut at that point.
pub fn truncated_label(frames: u32) -> String {
    if frames == 1 {
        "[truncated 1 frame]".to_string()
    } else {
        format!("[truncated {frames} frames]")
    }
}
/// Everything that can go wrong reading or writing a trace.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("not a vmview trace (bad magic at offset 0)")]
    NotATrace,
    #[error(
        "unsupported trace format version {found} (this vmview reads versions 1 to {supported})"
    )]
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
    /// and such (the measured cost of a record is a CALIBRATION event).
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
    /// Position in `chunks` of the chunk that holds event `id`, if any
    /// (`position_of(id) - 1` is the chunk before it, for context).
    pub fn position_of(&self, id: u64) -> Option<usize> {
        let i = self.chunks.partition_point(|c| c.last_id < id);
        self.chunks.get(i).filter(|c| c.first_id <= id).map(|_| i)
    }
    /// Events in all indexed chunks.
    pub fn event_count(&self) -> u64 {
        self.chunks.iter().map(|c| u64::from(c.event_count)).sum()
    }
    /// File offset just past the last indexed chunk: on a growing file,
    /// the bytes recorded so far in complete chunks (file header included).
    pub fn end_offset(&self) -> u64 {
        self.chunks.last().map_or(0, |c| c.offset + c.len)
    }
    /// Smallest and largest event id in the indexed chunks.
    pub fn id_range(&self) -> Option<(u64, u64)> {
        Some((self.chunks.first()?.first_id, self.chunks.last()?.last_id))
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
    /// The file breaks a promise of the format although its checksums hold:
    /// chunks whose event ids do not come after those before them (out of
    /// order, repeated, or from another trace), or a second trace after the
    /// first. The offending part was skipped, so what was read keeps the
    /// promises (ids unique and increasing, one trace).
    Inconsistent,
}

/// Resolves handles to names. Filled from symbol records as chunks are read.
#[derive(Debug, Clone, Default)]
pub struct SymbolTable {
    strings: Slots<String>,
    methods: Slots<MethodSymbol>,
    threads: Slots<ThreadSymbol>,
    stacks: Slots<StackSymbol>,
}

impl SymbolTable {
    pub fn insert(&mut self, sym: Symbol) {
        match sym {
            Symbol::String { id, text } => self.strings.insert(id.0, text),
            Symbol::Method(m) => self.methods.insert(m.id.0, m),
            Symbol::Thread(t) => self.threads.insert(t.id.0, t),
            Symbol::Stack(s) => self.stacks.insert(s.id.0, s),
        }
    }
    /// Adds every symbol of `other` (a chunk's table, decoded on its own),
    /// replacing what this table has under the same handle.
    pub fn absorb(&mut self, other: SymbolTable) {
        other
            .strings
            .drain(|id, text| self.strings.insert(id, text));
        other.methods.drain(|id, m| self.methods.insert(id, m));
        other.threads.drain(|id, t| self.threads.insert(id, t));
        other.stacks.drain(|id, s| self.stacks.insert(id, s));
    }

    /// The string, or `"?"` when the trace never defined it (damaged chunk).
    pub fn string(&self, id: StringId) -> &str {
        self.strings.get(id.0).map_or("?", |s| s.as_str())
    }
    pub fn method(&self, id: MethodId) -> Option<&MethodSymbol> {
        self.methods.get(id.0)
    }
    pub fn stack(&self, id: StackId) -> Option<&StackSymbol> {
        self.stacks.get(id.0)
    }
    pub fn thread(&self, id: ThreadRef) -> Option<&ThreadSymbol> {
        self.threads.get(id.0)
    }
    /// The thread's name, or `thread-N` when unknown.
    pub fn thread_name(&self, id: ThreadRef) -> String {
        match self.thread(id) {
            Some(t) => self.string(t.name).to_string(),
            None => format!("thread-{}", id.0),
        }
    }
}
