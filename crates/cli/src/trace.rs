//! Opening trace files with messages a user can act on, reading them on
//! every core where the trace allows, and reporting what the reader had to
//! work around.
//!
//! Every command that reads a trace opens it with [`Input::open`], which
//! takes any kind the library's `TraceSource` reads (binary or XML), and
//! aggregating commands go through [`Input::fold`], which decodes a clean
//! binary trace chunk by chunk on a thread pool and folds the events in
//! file order on this thread, or reads in order otherwise. Both paths hand
//! the fold the same events in the same order, so output is identical.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use vmview_export::{SourceError, TraceSource};
use vmview_format::parallel::{decode_threads, ordered_map_fold, ChunkFile};
use vmview_format::{Diagnostic, DiagnosticKind, Event, FormatError, SymbolTable, TraceReader};
use vmview_jfr::{JfrOptions, WaitSampleStats, WAIT_EVENTS};

use crate::error::hinted;

pub type Reader = TraceReader<BufReader<File>>;

/// Chunks decoded ahead of the fold, per decoding thread: enough to keep
/// every thread busy while the fold catches up, few enough that memory
/// stays a few chunks' worth of events.
pub const CHUNKS_IN_FLIGHT_PER_THREAD: usize = 2;

/// A trace of any kind, opened for a command.
pub struct Input {
    src: TraceSource,
    path: PathBuf,
    /// The symbols a parallel read gathered (the source itself read nothing).
    gathered: Option<SymbolTable>,
    jfr: JfrOptions,
}

impl Input {
    /// Opens a binary or XML trace, with errors a user can act on.
    pub fn open(path: &Path) -> anyhow::Result<Input> {
        Input::open_with(path, JfrOptions::default())
    }

    /// As [`Input::open`], a JFR recording read with `jfr`.
    pub fn open_with(path: &Path, jfr: JfrOptions) -> anyhow::Result<Input> {
        let src = match TraceSource::open_with(path, jfr) {
            Ok(s) => s,
            Err(SourceError::Binary(_)) => {
                // The binary reader's errors, in words.
                return Err(open(path).err().unwrap_or_else(|| not_a_trace(path)));
            }
            Err(e) => return Err(source_error(e)),
        };
        Ok(Input {
            src,
            path: path.to_path_buf(),
            gathered: None,
            jfr,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn source(&mut self) -> &mut TraceSource {
        &mut self.src
    }

    /// Bytes of input consumed, for progress.
    pub fn position(&self) -> u64 {
        self.src.position()
    }

    pub fn is_binary(&self) -> bool {
        matches!(self.src, TraceSource::Binary(_))
    }

    pub fn header(&self) -> &vmview_format::TraceHeader {
        self.src.header()
    }

    /// Symbols of every event read so far.
    pub fn symbols(&self) -> &SymbolTable {
        self.gathered.as_ref().unwrap_or_else(|| self.src.symbols())
    }

    /// The next event in order; an error only for a malformed XML document.
    #[inline]
    pub fn next_event(&mut self) -> anyhow::Result<Option<Event>> {
        self.src.next_event().map_err(source_error)
    }

    pub fn diagnostics(&self) -> &[Diagnostic] {
        self.src.diagnostics()
    }

    /// The chunks of a binary trace (by its index) or of a JFR recording
    /// (read so far); `None` for XML.
    pub fn chunk_count(&mut self) -> Option<usize> {
        if let TraceSource::Jfr(r) = &self.src {
            return Some(r.chunk_count());
        }
        self.src.binary()?.index().ok().map(|i| i.chunks.len())
    }

    /// Reports what the binary reader had to work around.
    pub fn warn(&self, events: u64) {
        warn_diagnostics(self.src.diagnostics(), events);
    }

    /// Chunk-level access and the number of threads to decode on, when the
    /// trace can be decoded in parallel (a clean binary trace, more than
    /// one decoding thread); `None` means: read it in order.
    pub fn parallel(&mut self) -> Option<(ChunkFile, usize)> {
        let threads = decode_threads();
        if threads <= 1 {
            return None;
        }
        Some((self.src.chunk_file(&self.path)?, threads))
    }

    /// Feeds every event, in trace order, to `f` with a state made by
    /// `init`; returns the state and the number of events. A clean binary
    /// trace is decoded on [`decode_threads`] threads (a chunk at a time,
    /// [`CHUNKS_IN_FLIGHT_PER_THREAD`] per thread in flight); should a
    /// chunk turn out damaged, the state is made anew and the trace read
    /// in order, so the result is always the sequential reader's.
    pub fn fold<S>(
        &mut self,
        mut init: impl FnMut() -> S,
        mut f: impl FnMut(&mut S, &Event, &SymbolTable),
    ) -> anyhow::Result<(S, u64)> {
        {
            if let Some((cf, threads)) = self.parallel() {
                let mut state = init();
                let mut syms = SymbolTable::default();
                let mut n = 0u64;
                let whole = ordered_map_fold(
                    threads,
                    cf.chunks().len(),
                    threads * CHUNKS_IN_FLIGHT_PER_THREAD,
                    |i| cf.decode(i),
                    |chunk| match chunk {
                        Ok(c) => {
                            syms.absorb(c.symbols);
                            for ev in &c.events {
                                f(&mut state, ev, &syms);
                            }
                            n += c.events.len() as u64;
                            true
                        }
                        Err(_) => false,
                    },
                );
                if whole {
                    self.gathered = Some(syms);
                    return Ok((state, n));
                }
                // A chunk the index vouched for is damaged: start over in
                // order, so the reader reports it as it always does.
                self.src = TraceSource::open_with(&self.path, self.jfr).map_err(source_error)?;
            }
        }
        let mut state = init();
        let mut n = 0u64;
        while let Some(ev) = self.next_event()? {
            f(&mut state, &ev, self.src.symbols());
            n += 1;
        }
        Ok((state, n))
    }
}

/// A source error in words; an XML one as `FILE:LINE:COLUMN: message`.
pub fn source_error(e: SourceError) -> anyhow::Error {
    match e {
        SourceError::Xml { path, error } => xml_error(&path, &error),
        SourceError::Binary(e) => anyhow::Error::new(e),
        SourceError::Jfr(e) => anyhow::Error::new(e),
        SourceError::Io { path, error } => {
            anyhow::Error::new(error).context(format!("cannot open {}", path.display()))
        }
    }
}

/// An XML error as `FILE:LINE:COLUMN: message`.
pub fn xml_error(path: &Path, e: &vmview_export::XmlError) -> anyhow::Error {
    let place = File::open(path)
        .and_then(|f| vmview_export::xml_reader::line_column(f, e.offset))
        .map(|(l, c)| format!("{}:{l}:{c}", path.display()))
        .unwrap_or_else(|_| format!("{} (byte {})", path.display(), e.offset));
    hinted(
        format!("{place}: {}", e.message),
        "vmview reads XML traces in the shape of docs/vmview.dtd (what `vmview export --format xml` writes)",
    )
}

/// Opens a trace, turning the reader's errors into one sentence and a hint.
pub fn open(path: &Path) -> anyhow::Result<Reader> {
    let shown = path.display();
    match TraceReader::open(path) {
        Ok(r) => Ok(r),
        Err(FormatError::Io(e)) if e.kind() == io::ErrorKind::NotFound => Err(hinted(
            format!("no such file: {shown}"),
            "record a trace first: vmview record --classes 'com.acme.*' -- java ...",
        )),
        Err(FormatError::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof => Err(not_a_trace(path)),
        Err(FormatError::NotATrace) => Err(not_a_trace(path)),
        Err(FormatError::UnsupportedVersion { found, supported }) => Err(hinted(
            format!("{shown} uses trace format version {found}, this vmview reads versions 1 to {supported}"),
            "read it with the vmview release that matches the agent that recorded it",
        )),
        Err(FormatError::Empty(_)) if std::fs::metadata(path).is_ok_and(|m| m.len() == 0) => Err(hinted(
            format!("{shown} is not a vmview trace: the file is empty"),
            "a recording leaves an empty file only when the JVM died as it started; record again",
        )),
        Err(FormatError::Empty(why)) => Err(hinted(
            format!("{shown} holds no events: {why}"),
            "the recording JVM probably ended before the agent's first flush (flush=1s by default)",
        )),
        Err(e) => Err(e).with_context(|| format!("cannot read {shown}")),
    }
}

fn not_a_trace(path: &Path) -> anyhow::Error {
    hinted(
        format!("{} is not a vmview trace", path.display()),
        "vmview reads the .vmv files that `vmview record` (the vmview agent) writes",
    )
}

/// One line for a diagnostic, naming the chunk when there is one (the
/// reader's message may already do so).
pub fn diagnostic_line(d: &Diagnostic) -> String {
    match d.chunk {
        Some(seq) if !d.message.contains(&format!("chunk {seq}")) => {
            format!("chunk {seq} (offset {}): {}", d.offset, d.message)
        }
        _ => d.message.clone(),
    }
}

/// Prints the reader's diagnostics as warnings on stderr, then one line
/// saying what they mean for the user.
pub fn warn_diagnostics(diags: &[Diagnostic], events_read: u64) {
    for d in diags {
        say!("vmview: warning: {}", diagnostic_line(d));
    }
    let unfinished = diags.iter().any(|d| {
        matches!(
            d.kind,
            DiagnosticKind::TruncatedTail | DiagnosticKind::IndexRebuilt
        )
    });
    let damaged = diags
        .iter()
        .filter(|d| {
            matches!(
                d.kind,
                DiagnosticKind::ChecksumMismatch | DiagnosticKind::BadChunk
            )
        })
        .count();
    if unfinished {
        say!(
            "vmview: warning: the recording did not finish cleanly (the JVM was killed or crashed); \
             {events_read} events read, events after the last complete chunk are lost"
        );
    }
    if damaged > 0 {
        say!("vmview: warning: {damaged} damaged chunk(s) skipped; {events_read} events read");
    }
}

/// A binary trace for commands that need random access (the browser view
/// reads chunks by position): the trace itself when it is binary, else a
/// binary copy of it in the temporary directory, removed on drop.
pub struct BinaryTrace {
    pub path: PathBuf,
    temporary: bool,
}

impl BinaryTrace {
    pub fn of(path: &Path) -> anyhow::Result<BinaryTrace> {
        let mut input = Input::open(path)?;
        if input.is_binary() {
            return Ok(BinaryTrace {
                path: path.to_path_buf(),
                temporary: false,
            });
        }
        let stem = path
            .file_stem()
            .map_or_else(|| "trace".into(), |s| s.to_string_lossy().into_owned());
        let copy = std::env::temp_dir().join(format!("vmview-{}-{stem}.vmv", std::process::id()));
        let out = BinaryTrace {
            path: copy.clone(),
            temporary: true,
        };
        let file =
            File::create(&copy).with_context(|| format!("cannot create {}", copy.display()))?;
        let header = input.header().clone();
        let mut w = vmview_filter::SubsetWriter::new(io::BufWriter::new(file), &header)?;
        while let Some(ev) = input.next_event()? {
            for m in input.source().take_redefined() {
                w.forget_method(m);
            }
            w.write(&ev, input.symbols()).with_context(|| {
                format!(
                    "cannot convert {} to a binary trace at event {}",
                    path.display(),
                    ev.id
                )
            })?;
        }
        io::Write::flush(&mut w.finish()?)?;
        Ok(out)
    }
}

impl Drop for BinaryTrace {
    fn drop(&mut self) {
        if self.temporary {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// What the JFR reader made wait samples from, in one sentence, with the
/// settings to record when it found nothing to make them from.
pub fn wait_samples_note(w: &WaitSampleStats) -> String {
    let from: Vec<String> = WAIT_EVENTS
        .iter()
        .enumerate()
        .filter(|&(i, _)| w.events[i] > 0)
        .map(|(i, (name, state))| {
            format!(
                "{name} ({} events, {} {})",
                w.events[i],
                w.samples[i],
                state.name()
            )
        })
        .collect();
    let parks = WAIT_EVENTS
        .iter()
        .position(|(n, _)| *n == "jdk.ThreadPark")
        .map_or(0, |i| w.events[i]);
    let mut s = if from.is_empty() {
        "JFR samples running threads only, and this recording has no park, monitor, \
         sleep or I/O events to make wait samples from"
            .to_string()
    } else {
        format!(
            "JFR samples running threads only: {} wait samples were made, one per {} ms ({}), from {}",
            w.total(),
            w.period_ns as f64 / 1e6,
            w.period_from.describe(),
            from.join(", ")
        )
    };
    if w.covered > 0 {
        let _ = write!(
            s,
            "; {} slots left out where JFR had sampled the thread itself",
            w.covered
        );
    }
    if w.dropped > 0 {
        let _ = write!(
            s,
            "; {} more not made (at most {} per chunk)",
            w.dropped,
            vmview_jfr::waits::MAX_PER_CHUNK
        );
    }
    if parks == 0 {
        s.push_str(
            "; without jdk.ThreadPark events a thread waiting in a queue or a lock has no samples \
             (and reactions misses a handler fed by a queue): record with \
             settings=profile,locking-threshold=0ms (docs/JFR.md)",
        );
    }
    s
}
