//! The fixed parts of the file layout: magics, the file header, chunk
//! headers, record tags, the index footer and the trailer.
//!
//! Keeping every byte layout constant in one place lets the writer and the
//! reader share one definition of each structure, and lets `docs/FORMAT.md`
//! point at a single source. Everything is little-endian. See
//! `docs/FORMAT.md` for the prose specification.

use crate::varint::{put_str, put_u64, Cursor, Malformed};
use crate::{ChunkInfo, TraceHeader};

/// The format version this crate writes by default (it reads this and
/// [`FORMAT_VERSION_2`]).
pub const FORMAT_VERSION: u16 = 1;
/// Format version 2: chunks of per-thread streams (docs/FORMAT.md,
/// "Version 2"); written when asked for with `TraceWriter::with_version`.
pub const FORMAT_VERSION_2: u16 = 2;
/// The highest version this crate reads.
pub const NEWEST_VERSION: u16 = FORMAT_VERSION_2;

/// Whether this crate reads traces (and chunks) of `version`.
pub fn readable_version(version: u16) -> bool {
    version == FORMAT_VERSION || version == FORMAT_VERSION_2
}

/// First bytes of every trace file. Like PNG's signature: a non-ASCII first
/// byte and CR LF / SUB / LF so that text-mode transfers are detected.
pub const FILE_MAGIC: [u8; 8] = [0x89, b'V', b'M', b'V', b'\r', b'\n', 0x1a, b'\n'];
/// Start of every chunk header.
pub const CHUNK_MAGIC: [u8; 4] = *b"VMVC";
/// Start of the index footer.
pub const FOOTER_MAGIC: [u8; 4] = *b"VMVI";
/// Start of the trailer, the last 16 bytes of a cleanly finished trace.
pub const TRAILER_MAGIC: [u8; 4] = *b"VMVE";

/// Bytes before the file header body: magic, version u16, body length u32.
pub const FILE_PREFIX_LEN: usize = 14;
/// Largest file header body a reader accepts.
pub const MAX_HEADER_BODY: u32 = 16 << 20;
/// Fixed size of a chunk header.
pub const CHUNK_HEADER_LEN: usize = 60;
/// Fixed size of the trailer.
pub const TRAILER_LEN: usize = 16;
/// Footer magic + body length before the footer body.
pub const FOOTER_PREFIX_LEN: usize = 8;

/// Default target chunk payload size.
pub const DEFAULT_CHUNK_BYTES: usize = 1 << 20;
/// Largest chunk payload target a writer accepts (larger requests are clamped).
pub const MAX_CHUNK_BYTES: usize = 64 << 20;

/// Thread handles are small and dense (see [`crate::ThreadRef`]); writer and
/// reader keep per-thread state in a vector indexed by handle, so handles
/// at or above this bound are refused.
pub const MAX_THREAD_REF: u32 = 1 << 20;
/// Largest number of items a decoder reserves room for up front. Counts
/// read from a file are already bounded by the bytes that follow, but an
/// item in memory is larger than its encoding; beyond this, vectors grow
/// only as items are actually decoded.
pub const PREALLOC_LIMIT: usize = 256;
/// How deeply `Value::Boxed` may nest (a boxed value is never itself boxed
/// in Java; the bound keeps the recursive decoder's stack small).
pub const MAX_VALUE_NESTING: u32 = 8;

// Record tags: the low five bits are the opcode, the top three bits flags.
pub const OP_MASK: u8 = 0x1f;
/// The event names its thread (a varint follows the tag); without it the
/// thread is that of the previous event in the chunk.
pub const F_THREAD: u8 = 0x20;
/// The event's id is not the previous id + 1: a varint with the gap follows.
pub const F_ID: u8 = 0x40;
/// Kind-specific: CALL/RETURN "an extras byte follows", THROW "has a catch
/// site", MONITOR_CONTENDED_ENTER "has an owner", MONITOR_WAITED "timed out",
/// MONITOR_ENTER/EXIT "the depth is written", BYTECODE "the method is
/// written".
pub const F_KIND: u8 = 0x80;

pub const OP_STRING: u8 = 0;
pub const OP_METHOD: u8 = 1;
pub const OP_THREAD: u8 = 2;
pub const OP_THREAD_START: u8 = 3;
pub const OP_THREAD_END: u8 = 4;
pub const OP_CLASS_LOAD: u8 = 5;
pub const OP_CALL: u8 = 6;
pub const OP_RETURN: u8 = 7;
pub const OP_THROW: u8 = 8;
pub const OP_CATCH: u8 = 9;
pub const OP_MONITOR_CONTENDED_ENTER: u8 = 10;
pub const OP_MONITOR_CONTENDED_ENTERED: u8 = 11;
pub const OP_MONITOR_WAIT: u8 = 12;
pub const OP_MONITOR_WAITED: u8 = 13;
pub const OP_GC_START: u8 = 14;
pub const OP_GC_FINISH: u8 = 15;
pub const OP_DROPPED: u8 = 16;
/// A SAMPLE event: state byte, stack handle, monitor count, monitors with depths.
pub const OP_SAMPLE: u8 = 17;
/// A stack symbol record (added after version 1's first release: older
/// readers reject a chunk holding one as "a known record type").
pub const OP_STACK: u8 = 18;
/// A BYTECODE event: method id (only with K; else that of the thread's
/// previous BYTECODE in the chunk), offset, instruction string id.
pub const OP_BYTECODE: u8 = 19;
/// The depth window moved: min depth, max depth (0 = none), reason, rate.
pub const OP_TRACE_WINDOW: u8 = 20;
/// A tracing period began on a thread: period number, stack handle.
pub const OP_PERIOD_START: u8 = 21;
/// A tracing period ended: period number.
pub const OP_PERIOD_END: u8 = 22;
/// The measured cost of emitting a record: event type name, picoseconds.
pub const OP_CALIBRATION: u8 = 23;
/// A monitor acquired; K: the depth differs from the thread's current one.
pub const OP_MONITOR_ENTER: u8 = 24;
/// A monitor released; K as for MONITOR_ENTER.
pub const OP_MONITOR_EXIT: u8 = 25;
/// The handlers chosen for timing: sample count, handler count and method
/// ids, skipped count and method ids.
pub const OP_REACTION_HANDLERS: u8 = 26;
/// An event from another format (JFR): type-name string id, field count,
/// then per field its name's string id and its value as a string.
pub const OP_FOREIGN: u8 = 30;
/// An ALLOC_SAMPLE event: class string handle, size, stack handle.
pub const OP_ALLOC_SAMPLE: u8 = 27;
/// A method demoted by the overhead budget: method id, rate per second,
/// mean duration (ns), overhead before and after (basis points), counted
/// (0 or 1).
pub const OP_DEMOTION: u8 = 28;
/// The budget's report: estimated overhead (basis points), pair count,
/// then (method id, count) pairs of demoted methods.
pub const OP_METHOD_COUNTS: u8 = 29;
/// An extended record: a varint sub-kind ([`EXT_VTHREAD_PINNED`] …), then
/// that kind's fields. The one opcode left is spent once: new kinds are
/// sub-kinds, so the opcode space never runs out.
pub const OP_EXTENDED: u8 = 31;
/// EXTENDED sub-kind 0, VTHREAD_PINNED: stack handle, duration (ns).
pub const EXT_VTHREAD_PINNED: u64 = 0;

// CALL extras byte.
/// Depth differs from the expected one: zigzag(depth - expected) follows.
pub const CALL_DEPTH: u8 = 0x01;
/// A caller location follows.
pub const CALL_CALLER: u8 = 0x02;
/// The caller's method is written (else it is the method of the thread's
/// innermost open CALL in this chunk).
pub const CALL_CALLER_METHOD: u8 = 0x04;
/// A parameter count and values follow.
pub const CALL_PARAMS: u8 = 0x08;
/// The thread's CPU time follows, as a zigzag delta against its previous
/// CALL/RETURN with CPU time in the chunk (0 before the first).
pub const CALL_CPU: u8 = 0x10;
/// The thread's allocated bytes follow, as a zigzag delta likewise.
pub const CALL_ALLOC: u8 = 0x20;
pub const CALL_KNOWN: u8 = 0x3f;
/// The CALL extras bits whose fields form its body (length-prefixed in
/// format version 2): caller, parameters, metrics.
pub const CALL_BODY: u8 = CALL_CALLER | CALL_PARAMS | CALL_CPU | CALL_ALLOC;

// RETURN extras byte.
/// Depth differs from the thread's current depth: zigzag delta follows.
pub const RET_DEPTH: u8 = 0x01;
/// The method is written (else: the open CALL at this depth).
pub const RET_METHOD: u8 = 0x02;
/// `elapsed_ns` is written (else: time minus the open CALL's time).
pub const RET_ELAPSED: u8 = 0x04;
/// Two bits of outcome: 0 void, 1 value, 2 exception.
pub const RET_OUTCOME_SHIFT: u8 = 3;
pub const RET_OUTCOME_MASK: u8 = 0x18;
/// CPU time delta follows (as [`CALL_CPU`]).
pub const RET_CPU: u8 = 0x20;
/// Allocated bytes delta follows (as [`CALL_ALLOC`]).
pub const RET_ALLOC: u8 = 0x40;
pub const RET_KNOWN: u8 = 0x7f;
/// The RETURN extras bits whose fields form its body (length-prefixed in
/// format version 2): outcome value or exception, metrics.
pub const RET_BODY: u8 = RET_OUTCOME_MASK | RET_CPU | RET_ALLOC;

// Value tags.
pub const V_NULL: u8 = 0;
pub const V_FALSE: u8 = 1;
pub const V_TRUE: u8 = 2;
pub const V_BYTE: u8 = 3;
pub const V_CHAR: u8 = 4;
pub const V_SHORT: u8 = 5;
pub const V_INT: u8 = 6;
pub const V_LONG: u8 = 7;
pub const V_FLOAT: u8 = 8;
pub const V_DOUBLE: u8 = 9;
pub const V_STR: u8 = 10;
pub const V_STR_CUT: u8 = 11;
pub const V_BOXED: u8 = 12;
pub const V_ARRAY: u8 = 13;
pub const V_OBJECT: u8 = 14;
pub const V_UNAVAILABLE: u8 = 15;

/// Encodes the whole file header: magic, version, body length, body, CRC.
pub fn encode_file_header_version(h: &TraceHeader, version: u16) -> Vec<u8> {
    let mut body = Vec::new();
    put_u64(&mut body, u64::from(h.pid));
    put_u64(&mut body, h.start_unix_ns);
    put_u64(&mut body, h.properties.len() as u64);
    for (k, v) in &h.properties {
        put_str(&mut body, k);
        put_str(&mut body, v);
    }
    let mut out = Vec::with_capacity(FILE_PREFIX_LEN + body.len() + 4);
    out.extend_from_slice(&FILE_MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    let crc = crc32c::crc32c(&out[8..]);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes a file header body (the bytes between the length and the CRC).
pub fn decode_header_body(body: &[u8], version: u16) -> Result<TraceHeader, Malformed> {
    let mut c = Cursor::new(body, 0);
    let pid = c.u32()?;
    let start_unix_ns = c.u64()?;
    let n = c.count(2)?;
    let mut properties = Vec::with_capacity(n.min(PREALLOC_LIMIT));
    for _ in 0..n {
        let k = c.string()?;
        let v = c.string()?;
        properties.push((k, v));
    }
    if !c.at_end() {
        return Err(c.err("the end of the header body"));
    }
    Ok(TraceHeader {
        version,
        pid,
        start_unix_ns,
        properties,
    })
}

/// The fixed 60-byte header in front of every chunk payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChunkHeader {
    pub version: u16,
    pub flags: u16,
    pub seq: u32,
    pub event_count: u32,
    pub first_id: u64,
    pub last_id: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub payload_len: u32,
    pub payload_crc: u32,
}

/// Why 60 bytes are not a usable chunk header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderProblem {
    BadMagic,
    BadChecksum,
}

impl ChunkHeader {
    pub fn encode(&self) -> [u8; CHUNK_HEADER_LEN] {
        let mut b = [0u8; CHUNK_HEADER_LEN];
        b[0..4].copy_from_slice(&CHUNK_MAGIC);
        b[4..6].copy_from_slice(&self.version.to_le_bytes());
        b[6..8].copy_from_slice(&self.flags.to_le_bytes());
        b[8..12].copy_from_slice(&self.seq.to_le_bytes());
        b[12..16].copy_from_slice(&self.event_count.to_le_bytes());
        b[16..24].copy_from_slice(&self.first_id.to_le_bytes());
        b[24..32].copy_from_slice(&self.last_id.to_le_bytes());
        b[32..40].copy_from_slice(&self.start_ns.to_le_bytes());
        b[40..48].copy_from_slice(&self.end_ns.to_le_bytes());
        b[48..52].copy_from_slice(&self.payload_len.to_le_bytes());
        b[52..56].copy_from_slice(&self.payload_crc.to_le_bytes());
        let crc = crc32c::crc32c(&b[0..56]);
        b[56..60].copy_from_slice(&crc.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; CHUNK_HEADER_LEN]) -> Result<ChunkHeader, HeaderProblem> {
        if b[0..4] != CHUNK_MAGIC {
            return Err(HeaderProblem::BadMagic);
        }
        if crc32c::crc32c(&b[0..56]) != le32(b, 56) {
            return Err(HeaderProblem::BadChecksum);
        }
        Ok(ChunkHeader {
            version: u16::from_le_bytes([b[4], b[5]]),
            flags: u16::from_le_bytes([b[6], b[7]]),
            seq: le32(b, 8),
            event_count: le32(b, 12),
            first_id: le64(b, 16),
            last_id: le64(b, 24),
            start_ns: le64(b, 32),
            end_ns: le64(b, 40),
            payload_len: le32(b, 48),
            payload_crc: le32(b, 52),
        })
    }

    /// The chunk's entry in the index, given where its header starts.
    pub fn info(&self, offset: u64) -> ChunkInfo {
        ChunkInfo {
            seq: self.seq,
            offset,
            len: CHUNK_HEADER_LEN as u64 + u64::from(self.payload_len),
            first_id: self.first_id,
            last_id: self.last_id,
            event_count: self.event_count,
            start_ns: self.start_ns,
            end_ns: self.end_ns,
        }
    }
}

fn le32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn le64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Encodes the index footer followed by the trailer that points at it.
pub fn encode_footer(chunks: &[ChunkInfo], footer_offset: u64) -> Vec<u8> {
    let mut body = Vec::with_capacity(16 + chunks.len() * 32);
    put_u64(&mut body, chunks.len() as u64);
    for c in chunks {
        put_u64(&mut body, c.offset);
        put_u64(&mut body, c.len);
        put_u64(&mut body, u64::from(c.seq));
        put_u64(&mut body, c.first_id);
        put_u64(&mut body, c.last_id);
        put_u64(&mut body, u64::from(c.event_count));
        put_u64(&mut body, c.start_ns);
        put_u64(&mut body, c.end_ns);
    }
    let mut out = Vec::with_capacity(FOOTER_PREFIX_LEN + body.len() + 4 + TRAILER_LEN);
    out.extend_from_slice(&FOOTER_MAGIC);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    out.extend_from_slice(&encode_trailer(footer_offset));
    out
}

pub fn encode_trailer(footer_offset: u64) -> [u8; TRAILER_LEN] {
    let mut t = [0u8; TRAILER_LEN];
    t[0..4].copy_from_slice(&TRAILER_MAGIC);
    t[4..12].copy_from_slice(&footer_offset.to_le_bytes());
    let crc = crc32c::crc32c(&t[0..12]);
    t[12..16].copy_from_slice(&crc.to_le_bytes());
    t
}

/// The footer offset a trailer points at, if the trailer is intact.
pub fn decode_trailer(t: &[u8; TRAILER_LEN]) -> Option<u64> {
    if t[0..4] != TRAILER_MAGIC || crc32c::crc32c(&t[0..12]) != le32(t, 12) {
        return None;
    }
    Some(le64(t, 4))
}

/// Decodes a footer body (after its CRC was checked).
pub fn decode_footer_body(body: &[u8]) -> Result<Vec<ChunkInfo>, Malformed> {
    let mut c = Cursor::new(body, 0);
    // Each entry holds eight varints of at least one byte.
    let n = c.count(8)?;
    let mut chunks = Vec::with_capacity(n.min(PREALLOC_LIMIT));
    for _ in 0..n {
        chunks.push(ChunkInfo {
            offset: c.u64()?,
            len: c.u64()?,
            seq: c.u32()?,
            first_id: c.u64()?,
            last_id: c.u64()?,
            event_count: c.u32()?,
            start_ns: c.u64()?,
            end_ns: c.u64()?,
        });
    }
    if !c.at_end() {
        return Err(c.err("the end of the footer body"));
    }
    Ok(chunks)
}
