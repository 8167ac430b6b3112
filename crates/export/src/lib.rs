//! Writers that turn vmview events into formats people and other tools read.
//!
//! Every output format implements one small trait, [`EventWriter`], so the
//! CLI (and anything else that streams events) can pick a format at run time
//! and a new format is a new module, not an edit across the tree. Each
//! exporter owns the shapes it writes (the JSON Lines exporter has its own
//! `Serialize` wire structs): changing an output format never changes the
//! event model in `vmview-format`.
//!
//! Exporters only write: they never open files. Give them any [`Write`]
//! (stdout, a file, a `Vec<u8>` in tests).

#![forbid(unsafe_code)]

pub mod calls;
pub mod chrome;
pub mod collapsed;
pub mod flamegraph;
pub mod jsonl;
pub mod names;
pub mod parquet;
pub mod source;
pub mod speedscope;
pub mod text;
pub mod weight;
pub mod xml;
pub mod xml_reader;

use std::io::{self, Write};

use vmview_format::{Event, SymbolTable};

pub use chrome::ChromeWriter;
pub use collapsed::{CollapseOptions, CollapsedWriter, Weight};
pub use flamegraph::FlameGraphWriter;
pub use jsonl::JsonlWriter;
pub use parquet::ParquetWriter;
pub use source::{SourceError, SourceKind, TraceSource};
pub use speedscope::SpeedscopeWriter;
pub use text::TextWriter;
pub use weight::{SampleWeight, Weigher, WeightError};
pub use xml::XmlWriter;
pub use xml_reader::{XmlError, XmlTraceReader};

/// A consumer of events that renders them somewhere.
///
/// Call [`EventWriter::write_event`] once per event in trace order, with the
/// symbol table that resolves the event's handles, then
/// [`EventWriter::finish`] once. Writers may buffer: nothing is guaranteed to
/// reach the underlying writer before `finish`.
pub trait EventWriter {
    /// Renders one event.
    fn write_event(&mut self, ev: &Event, syms: &SymbolTable) -> io::Result<()>;
    /// Writes whatever the format needs after the last event (a closing
    /// bracket, a footer) and flushes.
    fn finish(&mut self) -> io::Result<()>;
}

/// The output formats this crate offers, by the names the CLI accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// Human-readable, one header line per event and labelled fields.
    Text,
    /// One JSON object per line; see [`jsonl`] for the exact keys.
    Jsonl,
}

impl ExportFormat {
    /// A boxed writer for this format over `out`.
    pub fn writer<'w, W: Write + 'w>(self, out: W) -> Box<dyn EventWriter + 'w> {
        match self {
            ExportFormat::Text => Box::new(TextWriter::new(out)),
            ExportFormat::Jsonl => Box::new(JsonlWriter::new(out)),
        }
    }
}
