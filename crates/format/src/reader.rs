//! The trace reader: chunk framing, recovery from damage, the index.
//!
//! Traces come from processes that may have been killed at any moment, from
//! disks that flip bits and from people who hand us the wrong file. So the
//! reader treats the file as untrusted: it never panics, never allocates
//! more than the file could justify, and turns every problem into a
//! [`Diagnostic`] while carrying on with the next intact chunk. Only a file
//! that is not a trace at all (or of an unknown version) is refused.
//!
//! Chunk boundaries are found from the header in front of each chunk,
//! whose own checksum makes its payload length trustworthy. When a header
//! is damaged the reader scans forward for the next chunk magic followed by
//! a header with a valid checksum.

use std::io::{self, Read, Seek, SeekFrom};

use crate::chunk::ChunkDecoder;
use crate::varint::Malformed;
use crate::wire::*;
use crate::{
    ChunkInfo, Diagnostic, DiagnosticKind, Event, FormatError, SymbolTable, TraceHeader, TraceIndex,
};

/// How much of the file `resync` reads at a time while looking for a chunk.
const SCAN_BLOCK: usize = 64 * 1024;
/// Upper bound on the buffer reserved up front for one payload (it grows
/// further only as bytes actually arrive).
const PAYLOAD_RESERVE: usize = 4 << 20;

/// What is at an offset that starts with the footer magic.
enum FooterCheck {
    /// Its chunks, and the offset just past its trailer.
    Valid(Vec<ChunkInfo>, u64),
    /// The file ends inside it after `available` bytes.
    Truncated {
        available: u64,
    },
    Bad,
}

/// What became of a chunk whose header was intact.
enum Loaded {
    Active,
    Skipped,
    End,
}

/// Reads a trace, streaming, recovering from damage: a bad chunk is
/// skipped with a [`Diagnostic`]; a truncated tail is reported.
///
/// The trace is expected to start at offset 0 of the underlying reader.
pub struct TraceReader<R: Read + Seek> {
    inner: R,
    header: TraceHeader,
    symbols: SymbolTable,
    diagnostics: Vec<Diagnostic>,
    index: Option<TraceIndex>,
    /// Offset of the first chunk (just after the file header).
    chunks_start: u64,
    /// Offset of the next chunk header to read.
    next_offset: u64,
    /// Where `inner`'s cursor is, when known (sequential reads need no seek).
    inner_pos: Option<u64>,
    /// A chunk is being decoded.
    active: bool,
    /// No more chunks to read (end of file, footer, or a dead end).
    done: bool,
    chunk: ChunkDecoder,
    /// The last event id of the chunks read so far in file order (reset by
    /// a seek): a chunk must start after it.
    last_id: Option<u64>,
    /// The diagnostic that the run of out-of-order chunks being skipped
    /// extends, and that run's first chunk, chunk count and event count.
    disorder: Option<Disorder>,
}

/// Consecutive chunks skipped because their ids do not follow the ones
/// before them: reported as one diagnostic, however long the run.
struct Disorder {
    diagnostic: usize,
    first_seq: u32,
    first_offset: u64,
    chunks: u64,
    events: u64,
    after_id: u64,
}

impl TraceReader<io::BufReader<std::fs::File>> {
    pub fn open(path: &std::path::Path) -> Result<Self, FormatError> {
        let f = std::fs::File::open(path)?;
        Self::new(io::BufReader::with_capacity(256 * 1024, f))
    }
}

impl<R: Read + Seek> TraceReader<R> {
    /// Reads the file header. Fails only when this is not a vmview trace
    /// (`NotATrace`), has an unsupported version, cannot be read (`Io`),
    /// or ends before its file header is complete (`Empty`: the recording
    /// wrote nothing). A damaged header is a diagnostic, not an error.
    pub fn new(mut inner: R) -> Result<Self, FormatError> {
        inner.seek(SeekFrom::Start(0))?;
        let mut prefix = [0u8; FILE_PREFIX_LEN];
        let n = read_full(&mut inner, &mut prefix)?;
        let m = n.min(FILE_MAGIC.len());
        if prefix[..m] != FILE_MAGIC[..m] {
            return Err(FormatError::NotATrace);
        }
        if n == 0 {
            return Err(FormatError::Empty(
                "the file is empty (0 bytes): the recording wrote nothing".into(),
            ));
        }
        if n >= 10 {
            let found = u16::from_le_bytes([prefix[8], prefix[9]]);
            if !readable_version(found) {
                return Err(FormatError::UnsupportedVersion {
                    found,
                    supported: NEWEST_VERSION,
                });
            }
        }
        let ends_in_header = |len: u64| {
            FormatError::Empty(format!(
                "the file is only {len} bytes long and ends inside its file header: \
                 the recording stopped before writing any event"
            ))
        };
        if n < FILE_PREFIX_LEN {
            return Err(ends_in_header(n as u64));
        }

        let mut diagnostics = Vec::new();
        let body_len = u32::from_le_bytes([prefix[10], prefix[11], prefix[12], prefix[13]]);
        let mut header = TraceHeader {
            version: u16::from_le_bytes([prefix[8], prefix[9]]),
            ..TraceHeader::default()
        };
        let mut chunks_start = None;
        let mut short_header = None;
        if body_len > MAX_HEADER_BODY {
            diagnostics.push(Diagnostic {
                chunk: None,
                offset: 10,
                kind: DiagnosticKind::BadChunk,
                message: format!(
                    "the file header claims an implausible length ({body_len} bytes); \
                     its fields are unknown and the first chunk was searched for"
                ),
            });
        } else {
            let mut body = Vec::new();
            let want = u64::from(body_len) + 4;
            let got = (&mut inner).take(want).read_to_end(&mut body)?;
            if (got as u64) < want {
                // Truncated, or a damaged length field: decided below by
                // looking for a chunk.
                short_header = Some((FILE_PREFIX_LEN + got) as u64);
            } else {
                let stored = u32::from_le_bytes([
                    body[got - 4],
                    body[got - 3],
                    body[got - 2],
                    body[got - 1],
                ]);
                body.truncate(got - 4);
                let crc = crc32c::crc32c_append(crc32c::crc32c(&prefix[8..]), &body);
                let decoded = decode_header_body(&body, header.version);
                if crc == stored {
                    chunks_start = Some(FILE_PREFIX_LEN as u64 + want);
                    match decoded {
                    Ok(h) => header = h,
                    Err(e) => diagnostics.push(Diagnostic {
                        chunk: None,
                        offset: FILE_PREFIX_LEN as u64 + e.offset as u64,
                        kind: DiagnosticKind::BadChunk,
                        message: format!(
                            "the file header cannot be decoded (expected {}); its fields are unknown",
                            e.what
                        ),
                    }),
                }
                } else {
                    if let Ok(h) = decoded {
                        header = h;
                    }
                    diagnostics.push(Diagnostic {
                        chunk: None,
                        offset: 8,
                        kind: DiagnosticKind::ChecksumMismatch,
                        message:
                            "the file header's checksum does not match: its fields may be wrong, \
                              and the first chunk was searched for"
                                .into(),
                    });
                }
            }
        }

        let mut r = TraceReader {
            inner,
            header,
            symbols: SymbolTable::default(),
            diagnostics,
            index: None,
            chunks_start: FILE_PREFIX_LEN as u64,
            next_offset: FILE_PREFIX_LEN as u64,
            inner_pos: None,
            active: false,
            done: false,
            chunk: ChunkDecoder::default(),
            last_id: None,
            disorder: None,
        };
        let start = match (chunks_start, short_header) {
            (Some(s), _) => s,
            (None, None) => match r.resync(FILE_PREFIX_LEN as u64)? {
                Some(p) => p,
                None => r.file_len()?,
            },
            (None, Some(len)) => match r.resync(FILE_PREFIX_LEN as u64)? {
                Some(p) => {
                    r.diagnostics.push(Diagnostic {
                        chunk: None,
                        offset: 10,
                        kind: DiagnosticKind::BadChunk,
                        message: format!(
                            "the file header's length field is damaged (it reaches past the end \
                             of the file); its fields are unknown, and the first chunk was found \
                             at offset {p}"
                        ),
                    });
                    p
                }
                None => return Err(ends_in_header(len)),
            },
        };
        r.chunks_start = start;
        r.next_offset = start;
        Ok(r)
    }

    pub fn header(&self) -> &TraceHeader {
        &self.header
    }

    /// The next event in file order, or `None` at the end. Damage is
    /// skipped and recorded in `diagnostics()`.
    #[inline]
    pub fn next_event(&mut self) -> Option<Event> {
        // Small enough to inline into the caller's loop; events only come
        // from the inlined decoder, so each is built where the caller
        // keeps it. Everything else happens out of line.
        loop {
            if self.active {
                if let Some(ev) = self.chunk.next(&mut self.symbols) {
                    return Some(ev);
                }
                let error = self.chunk.take_error();
                self.chunk_ended(error);
            }
            if !self.advance() {
                return None;
            }
        }
    }

    /// The current chunk is exhausted or damaged at `error`.
    #[inline(never)]
    fn chunk_ended(&mut self, error: Option<Malformed>) {
        self.active = false;
        let Some(e) = error else {
            self.check_chunk_totals();
            return;
        };
        let h = self.chunk.header;
        let at = self.chunk.offset + CHUNK_HEADER_LEN as u64 + e.offset as u64;
        self.diagnostics.push(Diagnostic {
            chunk: Some(h.seq),
            offset: at,
            kind: DiagnosticKind::BadChunk,
            message: format!(
                "chunk {} (offset {}) cannot be decoded at offset {at}: expected {}; \
                 its remaining events were skipped ({} of {} read)",
                h.seq, self.chunk.offset, e.what, self.chunk.decoded, h.event_count
            ),
        });
    }

    /// Loads the next readable chunk; `false` when there is none.
    #[inline(never)]
    fn advance(&mut self) -> bool {
        if self.done {
            return false;
        }
        if let Err(e) = self.load_next_chunk() {
            self.done = true;
            self.inner_pos = None;
            self.diagnostics.push(Diagnostic {
                chunk: None,
                offset: self.next_offset,
                kind: DiagnosticKind::BadChunk,
                message: format!(
                    "I/O error reading the trace near offset {}: {e}; reading stopped",
                    self.next_offset
                ),
            });
        }
        true
    }

    /// Lazy decode from the next chunk on: parameter values, returned
    /// values and exception messages are stepped over, not built (see
    /// `ChunkDecoder::skip_values`), for readers that use none of them.
    pub fn set_skip_values(&mut self, skip: bool) {
        self.chunk.skip_values = skip;
    }

    /// Symbols seen so far (all those needed by events returned so far).
    pub fn symbols(&self) -> &SymbolTable {
        &self.symbols
    }

    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// The chunk whose events `next_event` is returning, if any.
    pub fn current_chunk(&self) -> Option<ChunkInfo> {
        self.active
            .then(|| self.chunk.header.info(self.chunk.offset))
    }

    /// The index: from the footer, or rebuilt by scanning chunk headers
    /// (seeking past payloads, which are neither read nor checked). A
    /// partial last chunk is left out, so on a file still being recorded
    /// this counts the events and bytes written so far. Computed once per
    /// reader; open a new reader to see a growing file grow.
    pub fn index(&mut self) -> Result<&TraceIndex, FormatError> {
        if self.index.is_none() {
            let index = match self.index_from_footer()? {
                Some(i) => i,
                None => {
                    let i = self.index_from_headers()?;
                    self.diagnostics.push(Diagnostic {
                        chunk: None,
                        offset: self.chunks_start,
                        kind: DiagnosticKind::IndexRebuilt,
                        message: format!(
                            "the trace has no valid index footer (the recording did not finish \
                             cleanly, or is still running): the index was rebuilt from {} chunk headers",
                            i.chunks.len()
                        ),
                    });
                    i
                }
            };
            self.index = Some(index);
        }
        Ok(self.index.get_or_insert_with(TraceIndex::default))
    }

    /// Positions the reader at the start of the chunk holding `id`, so that
    /// `next_event` continues from there (use it for `--id`/`--around`).
    /// With sparse ids, `id` itself may be absent from that chunk.
    pub fn seek_to_event(&mut self, id: u64) -> Result<(), FormatError> {
        let index = self.index()?;
        let (Some(first), Some(last)) = (index.chunks.first(), index.chunks.last()) else {
            return Err(FormatError::Empty("no complete chunk to seek in".into()));
        };
        let (first, last) = (first.first_id, last.last_id);
        match index.chunk_for(id).map(|c| c.offset) {
            Some(offset) => {
                self.position_at(offset);
                Ok(())
            }
            None => Err(FormatError::NoSuchEvent { id, first, last }),
        }
    }

    /// Positions the reader at the start of `chunk` (an entry of
    /// [`index`](Self::index)), for instance the chunk before the one
    /// holding an event, to show context around it. Symbols stay resolvable
    /// since every chunk carries the symbol records its events use.
    pub fn seek_to_chunk(&mut self, chunk: &ChunkInfo) -> Result<(), FormatError> {
        self.position_at(chunk.offset.max(self.chunks_start));
        Ok(())
    }

    fn position_at(&mut self, offset: u64) {
        self.active = false;
        self.done = false;
        self.next_offset = offset;
        self.last_id = None;
        self.disorder = None;
    }

    /// The chunks of a trace that reads cleanly from front to back by its
    /// index alone: no diagnostic so far, an intact footer whose chunks lie
    /// end to end from the file header to the footer. Only then does
    /// decoding the listed chunks independently give exactly what
    /// `next_event` would (a damaged or unfinished trace needs the
    /// sequential reader's recovery). Neither moves the reader nor adds a
    /// diagnostic.
    pub fn clean_chunks(&mut self) -> Option<Vec<ChunkInfo>> {
        if !self.diagnostics.is_empty() {
            return None;
        }
        let found = (|| -> io::Result<Option<Vec<ChunkInfo>>> {
            let len = self.file_len()?;
            if len < self.chunks_start + TRAILER_LEN as u64 {
                return Ok(None);
            }
            let mut t = [0u8; TRAILER_LEN];
            if self.read_at(len - TRAILER_LEN as u64, &mut t)? < TRAILER_LEN {
                return Ok(None);
            }
            let Some(footer) = decode_trailer(&t) else {
                return Ok(None);
            };
            let Some(index) = self.index_from_footer()? else {
                return Ok(None);
            };
            let mut end = self.chunks_start;
            for c in &index.chunks {
                if c.offset != end || c.event_count == 0 {
                    return Ok(None);
                }
                end = c.offset + c.len;
            }
            Ok((end == footer).then_some(index.chunks))
        })();
        // The next `read_at` seeks to wherever the reader goes on from.
        self.inner_pos = None;
        found.ok().flatten()
    }

    /// After a chunk decoded to its end: do its contents match its header?
    fn check_chunk_totals(&mut self) {
        let c = &self.chunk;
        let h = c.header;
        let ok = c.decoded == h.event_count
            && (h.event_count == 0
                || (c.first_id == Some(h.first_id) && c.last_id == Some(h.last_id)));
        if !ok {
            self.diagnostics.push(Diagnostic {
                chunk: Some(h.seq),
                offset: c.offset,
                kind: DiagnosticKind::BadChunk,
                message: format!(
                    "chunk {} (offset {}) holds {} events with ids {:?}..={:?}, but its header says \
                     {} events with ids {}..={}",
                    h.seq, c.offset, c.decoded, c.first_id, c.last_id, h.event_count, h.first_id, h.last_id
                ),
            });
        }
    }

    /// Finds the next chunk with an intact header and payload and starts
    /// decoding it; or sets `done`.
    fn load_next_chunk(&mut self) -> io::Result<()> {
        loop {
            let off = self.next_offset;
            let mut hb = [0u8; CHUNK_HEADER_LEN];
            let n = self.read_at(off, &mut hb)?;
            if n == 0 {
                self.done = true;
                return Ok(());
            }
            let what = if n >= 4 && hb[..4] == FOOTER_MAGIC {
                match self.footer_at(off)? {
                    FooterCheck::Valid(_, end) => {
                        self.done = true;
                        self.check_nothing_after(end)?;
                        return Ok(());
                    }
                    FooterCheck::Truncated { available } => {
                        self.diagnostics.push(Diagnostic {
                            chunk: None,
                            offset: off,
                            kind: DiagnosticKind::TruncatedTail,
                            message: format!(
                                "the file ends inside the index footer at offset {off}: \
                                 {available} bytes dropped (no events lost)"
                            ),
                        });
                        self.done = true;
                        return Ok(());
                    }
                    FooterCheck::Bad => "an index footer with a bad checksum",
                }
            } else if n < CHUNK_HEADER_LEN {
                let k = n.min(4);
                if hb[..k] == CHUNK_MAGIC[..k] {
                    self.diagnostics.push(Diagnostic {
                        chunk: None,
                        offset: off,
                        kind: DiagnosticKind::TruncatedTail,
                        message: format!(
                            "the file ends inside a chunk header at offset {off}: \
                             the last {n} bytes were dropped"
                        ),
                    });
                    self.done = true;
                    return Ok(());
                }
                "neither a chunk nor the index footer"
            } else if hb[..FILE_MAGIC.len()] == FILE_MAGIC {
                self.another_trace_at(off);
                return Ok(());
            } else {
                match ChunkHeader::decode(&hb) {
                    Ok(h) => match self.load_payload(h, off)? {
                        Loaded::Active => return Ok(()),
                        Loaded::Skipped => continue,
                        Loaded::End => {
                            self.done = true;
                            return Ok(());
                        }
                    },
                    Err(HeaderProblem::BadChecksum) => "a chunk header with a bad checksum",
                    Err(HeaderProblem::BadMagic) => "neither a chunk nor the index footer",
                }
            };

            // Damage where a chunk should start: look for the next one.
            let kind = if hb[..4] == CHUNK_MAGIC || hb[..4] == FOOTER_MAGIC {
                DiagnosticKind::ChecksumMismatch
            } else {
                DiagnosticKind::BadChunk
            };
            match self.resync(off + 1)? {
                Some(p) => {
                    self.diagnostics.push(Diagnostic {
                        chunk: None,
                        offset: off,
                        kind,
                        message: format!(
                            "offset {off} holds {what}: skipped {} bytes to the next intact chunk at offset {p}",
                            p - off
                        ),
                    });
                    self.next_offset = p;
                }
                None => {
                    let end = self.file_len()?;
                    self.diagnostics.push(Diagnostic {
                        chunk: None,
                        offset: off,
                        kind,
                        message: format!(
                            "offset {off} holds {what}, and no intact chunk follows: \
                             the last {} bytes were dropped",
                            end.saturating_sub(off)
                        ),
                    });
                    self.done = true;
                    return Ok(());
                }
            }
        }
    }

    /// Reads and checks the payload of the chunk whose header `h` is at `off`.
    fn load_payload(&mut self, h: ChunkHeader, off: u64) -> io::Result<Loaded> {
        let len = u64::from(h.payload_len);
        let payload_at = off + CHUNK_HEADER_LEN as u64;
        let mut payload = std::mem::take(&mut self.chunk.payload);
        payload.clear();
        payload.reserve((h.payload_len as usize).min(PAYLOAD_RESERVE));
        let got = self.read_vec_at(payload_at, len, &mut payload);
        self.chunk.payload = payload;
        let got = got?;
        if got < len {
            self.diagnostics.push(Diagnostic {
                chunk: Some(h.seq),
                offset: off,
                kind: DiagnosticKind::TruncatedTail,
                message: format!(
                    "the file ends inside chunk {} (offset {off}): its {} bytes present of {} were \
                     dropped, losing {} events (ids {}..={})",
                    h.seq,
                    CHUNK_HEADER_LEN as u64 + got,
                    CHUNK_HEADER_LEN as u64 + len,
                    h.event_count,
                    h.first_id,
                    h.last_id
                ),
            });
            return Ok(Loaded::End);
        }
        self.next_offset = payload_at + len;
        if !readable_version(h.version) {
            self.diagnostics.push(Diagnostic {
                chunk: Some(h.seq),
                offset: off,
                kind: DiagnosticKind::BadChunk,
                message: format!(
                    "chunk {} (offset {off}) is in format version {}, which this vmview cannot \
                     decode: its {} events were skipped",
                    h.seq, h.version, h.event_count
                ),
            });
            return Ok(Loaded::Skipped);
        }
        if crc32c::crc32c(&self.chunk.payload) != h.payload_crc {
            self.diagnostics.push(Diagnostic {
                chunk: Some(h.seq),
                offset: off,
                kind: DiagnosticKind::ChecksumMismatch,
                message: format!(
                    "chunk {} (offset {off}) fails its checksum: its {} events (ids {}..={}) were skipped",
                    h.seq, h.event_count, h.first_id, h.last_id
                ),
            });
            return Ok(Loaded::Skipped);
        }
        if h.event_count > 0 {
            if let Some(prev) = self.last_id.filter(|&p| h.first_id <= p) {
                self.out_of_order(h, off, prev);
                return Ok(Loaded::Skipped);
            }
            self.last_id = Some(h.last_id);
        }
        self.disorder = None;
        self.chunk.start(h, off);
        self.active = true;
        Ok(Loaded::Active)
    }

    /// Skips a chunk whose ids do not come after `prev`, the last id read:
    /// chunks out of order, a chunk repeated, or chunks of another trace.
    /// A run of them is one diagnostic.
    fn out_of_order(&mut self, h: ChunkHeader, off: u64, prev: u64) {
        let d = match self.disorder.take() {
            Some(mut d) => {
                d.chunks += 1;
                d.events += u64::from(h.event_count);
                d
            }
            None => {
                self.diagnostics.push(Diagnostic {
                    chunk: Some(h.seq),
                    offset: off,
                    kind: DiagnosticKind::Inconsistent,
                    message: String::new(),
                });
                Disorder {
                    diagnostic: self.diagnostics.len() - 1,
                    first_seq: h.seq,
                    first_offset: off,
                    chunks: 1,
                    events: u64::from(h.event_count),
                    after_id: prev,
                }
            }
        };
        let which = if d.chunks == 1 {
            format!(
                "chunk {} (offset {}) holds event ids {}..={}, which do not come after id {}",
                h.seq, off, h.first_id, h.last_id, d.after_id
            )
        } else {
            format!(
                "{} chunks from chunk {} (offset {}) to chunk {} (offset {off}) hold event ids \
                 that do not come after id {}",
                d.chunks, d.first_seq, d.first_offset, h.seq, d.after_id
            )
        };
        self.diagnostics[d.diagnostic].message = format!(
            "{which}, the last one read before: chunks out of order, repeated, or from another \
             trace; their {} events were skipped so that ids stay unique and increasing",
            d.events
        );
        self.disorder = Some(d);
    }

    /// A file header where a chunk should start: another trace was
    /// appended to this one (`cat a.vmv b.vmv`). Only the first is read.
    fn another_trace_at(&mut self, off: u64) {
        self.diagnostics.push(Diagnostic {
            chunk: None,
            offset: off,
            kind: DiagnosticKind::Inconsistent,
            message: format!(
                "another trace starts at offset {off} (two traces in one file, concatenated?): \
                 only the first was read; a file holds one trace, so cut it there \
                 (tail -c +{} FILE > second.vmv)",
                off + 1
            ),
        });
        self.done = true;
    }

    /// After the index footer's trailer at `end` the file should end.
    fn check_nothing_after(&mut self, end: u64) -> io::Result<()> {
        let len = self.file_len()?;
        if len <= end {
            return Ok(());
        }
        let mut magic = [0u8; FILE_MAGIC.len()];
        let n = self.read_at(end, &mut magic)?;
        if n == magic.len() && magic == FILE_MAGIC {
            self.another_trace_at(end);
        } else {
            self.diagnostics.push(Diagnostic {
                chunk: None,
                offset: end,
                kind: DiagnosticKind::Inconsistent,
                message: format!(
                    "{} bytes follow the end of the trace (its index footer) at offset {end}: \
                     they were not read",
                    len - end
                ),
            });
        }
        Ok(())
    }

    /// Checks the footer (and the trailer after it) at `off`.
    fn footer_at(&mut self, off: u64) -> io::Result<FooterCheck> {
        let mut p = [0u8; FOOTER_PREFIX_LEN];
        let n = self.read_at(off, &mut p)?;
        if n < FOOTER_PREFIX_LEN {
            let k = n.min(4);
            if p[..k] == FOOTER_MAGIC[..k] {
                return Ok(FooterCheck::Truncated {
                    available: n as u64,
                });
            }
            return Ok(FooterCheck::Bad);
        }
        if p[..4] != FOOTER_MAGIC {
            return Ok(FooterCheck::Bad);
        }
        let body_len = u64::from(u32::from_le_bytes([p[4], p[5], p[6], p[7]]));
        let mut body = Vec::new();
        let got = self.read_vec_at(off + FOOTER_PREFIX_LEN as u64, body_len + 4, &mut body)?;
        if got < body_len + 4 {
            return Ok(FooterCheck::Truncated {
                available: FOOTER_PREFIX_LEN as u64 + got,
            });
        }
        let split = body.len() - 4;
        let stored = u32::from_le_bytes([
            body[split],
            body[split + 1],
            body[split + 2],
            body[split + 3],
        ]);
        body.truncate(split);
        if crc32c::crc32c(&body) != stored {
            return Ok(FooterCheck::Bad);
        }
        let Ok(chunks) = decode_footer_body(&body) else {
            return Ok(FooterCheck::Bad);
        };
        let trailer_at = off + FOOTER_PREFIX_LEN as u64 + body_len + 4;
        let mut t = [0u8; TRAILER_LEN];
        let n = self.read_at(trailer_at, &mut t)?;
        if n < TRAILER_LEN {
            return Ok(FooterCheck::Truncated {
                available: trailer_at - off + n as u64,
            });
        }
        if decode_trailer(&t) != Some(off) {
            return Ok(FooterCheck::Bad);
        }
        Ok(FooterCheck::Valid(chunks, trailer_at + TRAILER_LEN as u64))
    }

    /// The index from the footer the trailer points at, when both are
    /// intact and consistent.
    fn index_from_footer(&mut self) -> io::Result<Option<TraceIndex>> {
        let len = self.file_len()?;
        if len < self.chunks_start + TRAILER_LEN as u64 {
            return Ok(None);
        }
        let mut t = [0u8; TRAILER_LEN];
        if self.read_at(len - TRAILER_LEN as u64, &mut t)? < TRAILER_LEN {
            return Ok(None);
        }
        let Some(footer) = decode_trailer(&t) else {
            return Ok(None);
        };
        if footer < self.chunks_start || footer >= len - TRAILER_LEN as u64 {
            return Ok(None);
        }
        let FooterCheck::Valid(chunks, _) = self.footer_at(footer)? else {
            return Ok(None);
        };
        let mut end = self.chunks_start;
        let mut prev_last: Option<u64> = None;
        for c in &chunks {
            let consistent = c.offset >= end
                && c.len >= CHUNK_HEADER_LEN as u64
                && c.offset.checked_add(c.len).is_some_and(|e| e <= footer)
                && c.first_id <= c.last_id
                && match prev_last {
                    Some(p) => p < c.first_id,
                    None => true,
                };
            if !consistent {
                return Ok(None);
            }
            end = c.offset + c.len;
            prev_last = Some(c.last_id);
        }
        Ok(Some(TraceIndex { chunks }))
    }

    /// The index from the chunk headers, skipping over payloads.
    fn index_from_headers(&mut self) -> io::Result<TraceIndex> {
        let len = self.file_len()?;
        let mut chunks = Vec::new();
        let mut pos = self.chunks_start;
        let mut last_id: Option<u64> = None;
        loop {
            let mut hb = [0u8; CHUNK_HEADER_LEN];
            let n = self.read_at(pos, &mut hb)?;
            if n >= FILE_MAGIC.len() && hb[..FILE_MAGIC.len()] == FILE_MAGIC {
                break; // another trace: not this one's
            }
            if n >= 4
                && hb[..4] == FOOTER_MAGIC
                && matches!(self.footer_at(pos)?, FooterCheck::Valid(..))
            {
                break;
            }
            if n < CHUNK_HEADER_LEN && !(n >= 4 && hb[..4] == FOOTER_MAGIC) {
                break;
            }
            if n == CHUNK_HEADER_LEN {
                if let Ok(h) = ChunkHeader::decode(&hb) {
                    let end = pos + CHUNK_HEADER_LEN as u64 + u64::from(h.payload_len);
                    if end > len {
                        break; // the partial last chunk of a live or killed recording
                    }
                    // As the reader does: a chunk whose ids do not follow is skipped.
                    if h.event_count == 0 || last_id.is_none_or(|l| l < h.first_id) {
                        if h.event_count > 0 {
                            last_id = Some(h.last_id);
                        }
                        chunks.push(h.info(pos));
                    }
                    pos = end;
                    continue;
                }
            }
            match self.resync(pos + 1)? {
                Some(p) => pos = p,
                None => break,
            }
        }
        Ok(TraceIndex { chunks })
    }

    /// The first offset at or after `from` where an intact chunk header or
    /// an intact footer starts.
    fn resync(&mut self, from: u64) -> io::Result<Option<u64>> {
        let mut buf = vec![0u8; SCAN_BLOCK];
        let mut start = from;
        loop {
            let n = self.read_at(start, &mut buf)?;
            if n < 4 {
                return Ok(None);
            }
            for i in 0..=n - 4 {
                let w = &buf[i..i + 4];
                if w == CHUNK_MAGIC || w == FOOTER_MAGIC {
                    let at = start + i as u64;
                    if self.is_boundary(at)? {
                        return Ok(Some(at));
                    }
                }
            }
            if n < SCAN_BLOCK {
                return Ok(None);
            }
            start += (n - 3) as u64;
        }
    }

    fn is_boundary(&mut self, at: u64) -> io::Result<bool> {
        let mut hb = [0u8; CHUNK_HEADER_LEN];
        let n = self.read_at(at, &mut hb)?;
        if n >= 4 && hb[..4] == FOOTER_MAGIC {
            return Ok(matches!(self.footer_at(at)?, FooterCheck::Valid(..)));
        }
        Ok(n == CHUNK_HEADER_LEN && ChunkHeader::decode(&hb).is_ok())
    }

    fn file_len(&mut self) -> io::Result<u64> {
        self.inner_pos = None;
        let len = self.inner.seek(SeekFrom::End(0))?;
        self.inner_pos = Some(len);
        Ok(len)
    }

    /// Reads up to `buf.len()` bytes at `off`; fewer only at the end of the file.
    fn read_at(&mut self, off: u64, buf: &mut [u8]) -> io::Result<usize> {
        if self.inner_pos != Some(off) {
            self.inner_pos = None;
            self.inner.seek(SeekFrom::Start(off))?;
        }
        self.inner_pos = None;
        let n = read_full(&mut self.inner, buf)?;
        self.inner_pos = Some(off + n as u64);
        Ok(n)
    }

    /// Appends up to `len` bytes at `off` to `out`; the buffer grows only
    /// as bytes arrive, so a forged length cannot cause a huge allocation.
    fn read_vec_at(&mut self, off: u64, len: u64, out: &mut Vec<u8>) -> io::Result<u64> {
        if self.inner_pos != Some(off) {
            self.inner_pos = None;
            self.inner.seek(SeekFrom::Start(off))?;
        }
        self.inner_pos = None;
        let n = (&mut self.inner).take(len).read_to_end(out)? as u64;
        self.inner_pos = Some(off + n);
        Ok(n)
    }
}

impl<R: Read + Seek> Iterator for TraceReader<R> {
    type Item = Event;
    fn next(&mut self) -> Option<Event> {
        self.next_event()
    }
}

/// Reads until `buf` is full or the input ends.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
