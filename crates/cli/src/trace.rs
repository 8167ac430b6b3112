//! Opening trace files with messages a user can act on, and reporting what
//! the reader had to work around.

use std::fs::File;
use std::io::{self, BufReader};
use std::path::Path;

use anyhow::Context as _;
use vmview_format::{Diagnostic, DiagnosticKind, FormatError, TraceReader};

use crate::error::hinted;

pub type Reader = TraceReader<BufReader<File>>;

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
            format!("{shown} uses trace format version {found}, this vmview reads version {supported}"),
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
