//! One way to open any trace: the sources every reading command shares.
//!
//! A trace reaches vmview as a binary `.vmv` file (the agent's, a filtered
//! or merged one: all the same format), as an XML document (`vmview
//! export --format xml`, or anything in the shape of `docs/vmview.dtd`) or
//! as a Java Flight Recorder recording (`FLR\0` magic, see docs/JFR.md).
//! [`TraceSource::open`] tells them apart by their first bytes and gives
//! one interface over both: the header, the symbols, the events in order,
//! and what the reader had to work around. A command written against it
//! reads every kind of trace, and a new kind (format v2, a JFR file) is a
//! new arm of [`SourceKind::sniff`] and a new variant here, not an edit of
//! every command.
//!
//! A clean binary trace also offers chunk-level access
//! ([`TraceSource::chunk_file`]), through which the aggregating commands
//! decode on every core; an XML document is read in order only.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use vmview_format::parallel::ChunkFile;
use vmview_format::{
    Diagnostic, Event, FormatError, MethodId, SymbolTable, TraceHeader, TraceReader,
};

use vmview_jfr::{JfrError, JfrOptions, JfrReader};

use crate::xml_reader::{XmlError, XmlTraceReader};

/// The kinds of trace file vmview reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// vmview's binary format (`\x89VMV` magic).
    Binary,
    /// An XML trace.
    Xml,
    /// A Java Flight Recorder recording (`FLR\0` magic).
    Jfr,
}

impl SourceKind {
    /// Decides by the first bytes: the binary magic, or an XML document
    /// (`<` or a UTF-8 byte-order mark after optional white space).
    /// Anything else, an empty or unreadable file included, is left to the
    /// binary reader, whose errors say what is wrong with it.
    pub fn sniff(path: &Path) -> SourceKind {
        let mut head = [0u8; 64];
        let n = File::open(path)
            .and_then(|mut f| f.read(&mut head))
            .unwrap_or(0);
        let head = &head[..n];
        if head.starts_with(b"\x89VMV") {
            return SourceKind::Binary;
        }
        if vmview_jfr::is_jfr(head) {
            return SourceKind::Jfr;
        }
        let looks_xml = head
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|&b| b == b'<' || b == 0xEF);
        if looks_xml {
            SourceKind::Xml
        } else {
            SourceKind::Binary
        }
    }
}

/// Why a trace could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The binary reader refused the file.
    #[error(transparent)]
    Binary(#[from] FormatError),
    /// The XML document is malformed at `error.offset` of `path`.
    #[error("{}: {}", path.display(), error.message)]
    Xml { path: PathBuf, error: XmlError },
    /// The JFR reader refused the file.
    #[error(transparent)]
    Jfr(#[from] JfrError),
    #[error("cannot open {}: {error}", path.display())]
    Io { path: PathBuf, error: io::Error },
}

/// A trace being read, whatever its kind.
pub enum TraceSource {
    Binary(Box<TraceReader<BufReader<File>>>),
    Xml {
        reader: Box<XmlTraceReader<BufReader<File>>>,
        path: PathBuf,
    },
    Jfr(Box<JfrReader<File>>),
}

impl TraceSource {
    /// Opens `path`, choosing the reader by [`SourceKind::sniff`].
    pub fn open(path: &Path) -> Result<TraceSource, SourceError> {
        TraceSource::open_with(path, JfrOptions::default())
    }

    /// As [`TraceSource::open`], a JFR recording read with `jfr` (which
    /// the other kinds ignore).
    pub fn open_with(path: &Path, jfr: JfrOptions) -> Result<TraceSource, SourceError> {
        match SourceKind::sniff(path) {
            SourceKind::Binary => Ok(TraceSource::Binary(Box::new(TraceReader::open(path)?))),
            SourceKind::Jfr => Ok(TraceSource::Jfr(Box::new(JfrReader::open_with(path, jfr)?))),
            SourceKind::Xml => {
                let f = File::open(path).map_err(|error| SourceError::Io {
                    path: path.to_path_buf(),
                    error,
                })?;
                match XmlTraceReader::new(BufReader::with_capacity(256 * 1024, f)) {
                    Ok(r) => Ok(TraceSource::Xml {
                        reader: Box::new(r),
                        path: path.to_path_buf(),
                    }),
                    Err(error) => Err(SourceError::Xml {
                        path: path.to_path_buf(),
                        error,
                    }),
                }
            }
        }
    }

    /// The JFR reader, when the trace is a recording.
    pub fn jfr(&self) -> Option<&JfrReader<File>> {
        match self {
            TraceSource::Jfr(r) => Some(r),
            _ => None,
        }
    }

    pub fn kind(&self) -> SourceKind {
        match self {
            TraceSource::Binary(_) => SourceKind::Binary,
            TraceSource::Xml { .. } => SourceKind::Xml,
            TraceSource::Jfr(_) => SourceKind::Jfr,
        }
    }

    pub fn header(&self) -> &TraceHeader {
        match self {
            TraceSource::Binary(r) => r.header(),
            TraceSource::Xml { reader, .. } => reader.header(),
            TraceSource::Jfr(r) => r.header(),
        }
    }

    /// Symbols of every event returned so far.
    pub fn symbols(&self) -> &SymbolTable {
        match self {
            TraceSource::Binary(r) => r.symbols(),
            TraceSource::Xml { reader, .. } => reader.symbols(),
            TraceSource::Jfr(r) => r.symbols(),
        }
    }

    /// The next event; an error only for a malformed XML document (a
    /// damaged binary trace is skipped over and reported in
    /// [`diagnostics`](Self::diagnostics)).
    #[inline]
    pub fn next_event(&mut self) -> Result<Option<Event>, SourceError> {
        match self {
            TraceSource::Binary(r) => Ok(r.next_event()),
            TraceSource::Xml { reader, path } => {
                reader.next_event().map_err(|error| SourceError::Xml {
                    path: path.clone(),
                    error,
                })
            }
            TraceSource::Jfr(r) => Ok(r.next_event()),
        }
    }

    /// What the binary or JFR reader worked around (an XML reader stops
    /// at the first error instead).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            TraceSource::Binary(r) => r.diagnostics(),
            TraceSource::Xml { .. } => &[],
            TraceSource::Jfr(r) => r.diagnostics(),
        }
    }

    /// The binary reader, for what only a binary trace has (the index,
    /// seeking by id).
    pub fn binary(&mut self) -> Option<&mut TraceReader<BufReader<File>>> {
        match self {
            TraceSource::Binary(r) => Some(r),
            TraceSource::Xml { .. } | TraceSource::Jfr(_) => None,
        }
    }

    /// Bytes of input consumed, for progress.
    pub fn position(&self) -> u64 {
        match self {
            TraceSource::Binary(r) => r.current_chunk().map_or(0, |c| c.offset + c.len),
            TraceSource::Xml { reader, .. } => reader.position(),
            TraceSource::Jfr(r) => r.position(),
        }
    }

    /// With a binary input, starts reading at the chunk that holds
    /// `first_id` (the index answers without reading what comes before).
    /// Returns false when no event can have an id in `first_id..`.
    pub fn skip_to(&mut self, first_id: u64) -> Result<bool, SourceError> {
        let TraceSource::Binary(r) = self else {
            return Ok(true);
        };
        if first_id == 0 {
            return Ok(true);
        }
        let index = r.index()?;
        let i = index.chunks.partition_point(|c| c.last_id < first_id);
        match index.chunks.get(i).cloned() {
            Some(c) => {
                r.seek_to_chunk(&c)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Are ids strictly increasing (a binary trace guarantees it, the JFR
    /// reader numbers its events so; an XML document is only expected to)?
    pub fn ids_increase(&self) -> bool {
        matches!(self, TraceSource::Binary(_) | TraceSource::Jfr(_))
    }

    /// Only events of these types are wanted (bit = index in
    /// `EVENT_TYPE_NAMES`): an XML input skips the others undecoded.
    pub fn set_type_mask(&mut self, mask: u32) {
        if let TraceSource::Xml { reader, .. } = self {
            reader.set_type_mask(mask);
        }
    }

    /// Takes the methods an XML input redefined since the last call (see
    /// [`XmlTraceReader::take_redefined`]); a binary trace never does.
    pub fn take_redefined(&mut self) -> Vec<MethodId> {
        match self {
            TraceSource::Xml { reader, .. } => reader.take_redefined(),
            TraceSource::Binary(_) | TraceSource::Jfr(_) => Vec::new(),
        }
    }

    /// Chunk-level access for decoding on several threads, when this is a
    /// binary trace that reads cleanly by its index and nothing has been
    /// read from it yet; `None` otherwise (read it in order).
    pub fn chunk_file(&mut self, path: &Path) -> Option<ChunkFile> {
        match self {
            TraceSource::Binary(r) if r.current_chunk().is_none() => {
                r.clean_chunks()?;
                ChunkFile::open(path).ok().flatten()
            }
            _ => None,
        }
    }
}
