//! `vmview filter`: keep the events an expression selects, from a binary or
//! an XML trace, as a binary trace, XML, JSON Lines or text.
//!
//! Streaming end to end (one event in memory at a time; symbol caches grow
//! with distinct names only), so a multi-gigabyte trace filters in a small
//! constant RSS. The output keeps the original event ids and names its
//! source trace in its header, so `vmview show SOURCE --around ID` opens
//! any selected event in its context.
//!
//! The input reading shared with `vmview search` lives here too: [`Input`]
//! sniffs the file (binary magic or XML) and reports XML errors with a line
//! and column.

use std::fs::File;
use std::io::{self, BufReader, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use vmview_export::{EventWriter, JsonlWriter, TextWriter, XmlTraceReader, XmlWriter};
use vmview_filter::{EventFilter, SubsetWriter};
use vmview_format::{Event, SymbolTable, TraceHeader};

use crate::error::{hinted, plain};
use crate::export::output;
use crate::overwrite::refuse_input_as_output;
use crate::progress::Progress;
use crate::trace::{self, Reader};

const LONG_ABOUT: &str = "\
Keep the events that match an expression.

The input is a binary trace (.vmv) or an XML trace (`vmview export --format \
xml`, or any document in the shape of docs/vmview.dtd). The output keeps the \
original event ids: open any of them in context with `vmview show \
ORIGINAL.vmv --around ID`. A binary output also names its source in its \
header.

Expressions test fields by name: the JSON Lines keys (type, thread, class, \
method, sig, exception, message, loc, line, catch_class, catch_method, \
depth, elapsed_ns, value, param, monitor, owner, wait_ns, timeout_ms, \
duration_ns, id, time_ns, ...) or VMView's XML names (CLASS, MTD, SIG, LOC, \
THRD, MSG, EXC, CLASS2, MTD2, ...). Operators: == != ~ (regex) !~ < <= > >= \
in [...], combined with && || ! and parentheses. Numbers take units on \
durations: 500us, 1ms, 2s. A test on a field the event does not have is \
false; `field == null` is true when it is absent.";

const EXAMPLES: &str = "\
Examples:
  vmview filter trace.vmv -o throws.vmv 'type == THROW && class ~ \"^java\\\\.util\"'
  vmview filter trace.vmv '(type in [CALL, RETURN]) && method ~ \"^handle\" && thread ~ \"pool-.*\"'
  vmview filter trace.vmv --format jsonl '!(class ~ \"Logger\")' | jq .
  vmview filter trace.vmv 'elapsed_ns > 1ms'
  vmview filter trace.xml -o slow.xml 'MSG ~ \"timeout\"'";

#[derive(Args)]
#[command(about = "Keep the events that match an expression", long_about = LONG_ABOUT, after_long_help = EXAMPLES)]
pub struct FilterArgs {
    /// The input trace: binary (.vmv) or XML.
    input: PathBuf,
    /// The expression (quote it for the shell).
    expr: String,
    /// Output file (default: standard output).
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// Output format (default: from OUT's extension, .xml .jsonl .txt,
    /// else vmv; text on standard output).
    #[arg(long, value_enum)]
    format: Option<OutFormat>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutFormat {
    /// A binary trace with the original ids.
    Vmv,
    /// VMView-style XML with the DTD.
    Xml,
    /// One JSON object per line.
    Jsonl,
    /// Labelled fields, for people.
    Text,
}

/// A binary or XML trace, read event by event.
pub enum Input {
    Binary(Box<Reader>),
    Xml {
        reader: Box<XmlTraceReader<BufReader<File>>>,
        path: PathBuf,
    },
}

impl Input {
    /// Opens `path`, binary or XML by its first bytes.
    pub fn open(path: &Path) -> anyhow::Result<Input> {
        let mut head = [0u8; 4];
        let n = File::open(path)
            .and_then(|mut f| f.read(&mut head))
            .unwrap_or(0);
        let head = &head[..n];
        if head.starts_with(b"\x89VMV") || n == 0 {
            return Ok(Input::Binary(Box::new(trace::open(path)?)));
        }
        let looks_xml = head
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|&b| b == b'<' || b == 0xEF);
        if !looks_xml {
            // Let the binary reader say what is wrong with it.
            return Ok(Input::Binary(Box::new(trace::open(path)?)));
        }
        let f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        match XmlTraceReader::new(BufReader::with_capacity(256 * 1024, f)) {
            Ok(r) => Ok(Input::Xml {
                reader: Box::new(r),
                path: path.to_path_buf(),
            }),
            Err(e) => Err(xml_error(path, &e)),
        }
    }

    pub fn header(&self) -> &TraceHeader {
        match self {
            Input::Binary(r) => r.header(),
            Input::Xml { reader, .. } => reader.header(),
        }
    }

    pub fn symbols(&self) -> &SymbolTable {
        match self {
            Input::Binary(r) => r.symbols(),
            Input::Xml { reader, .. } => reader.symbols(),
        }
    }

    /// The next event; an error only for a malformed XML document (a
    /// damaged binary trace is skipped over and reported at the end).
    #[inline]
    pub fn next_event(&mut self) -> anyhow::Result<Option<Event>> {
        match self {
            Input::Binary(r) => Ok(r.next_event()),
            Input::Xml { reader, path } => reader.next_event().map_err(|e| xml_error(path, &e)),
        }
    }

    /// Bytes of input consumed, for progress.
    pub fn position(&mut self) -> u64 {
        match self {
            Input::Binary(r) => r.current_chunk().map_or(0, |c| c.offset + c.len),
            Input::Xml { reader, .. } => reader.position(),
        }
    }

    /// With a binary input, starts reading at the chunk that holds `first_id`
    /// (the index answers without reading what comes before). Returns false
    /// when no event can have an id in `first_id..` .
    pub fn skip_to(&mut self, first_id: u64) -> anyhow::Result<bool> {
        let Input::Binary(r) = self else {
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

    /// Are ids strictly increasing (a binary trace guarantees it; an XML
    /// document is only expected to)?
    pub fn ids_increase(&self) -> bool {
        matches!(self, Input::Binary(_))
    }

    /// Only events of these types can match (bit = index in
    /// `EVENT_TYPE_NAMES`): an XML input skips the others undecoded.
    pub fn set_type_mask(&mut self, mask: u32) {
        if let Input::Xml { reader, .. } = self {
            reader.set_type_mask(mask);
        }
    }

    /// Streams the events `filter` selects into `on_match`, which answers
    /// whether to go on. Starts at the filter's lowest id and stops past its
    /// highest (when ids increase), skips types the filter cannot match,
    /// moves `progress`, and reports what the reader worked around. The
    /// shared loop of `vmview filter` and `vmview search`.
    pub fn scan_matches(
        &mut self,
        filter: &mut EventFilter,
        progress: &mut Progress,
        mut on_match: impl FnMut(&mut Input, &Event) -> anyhow::Result<bool>,
    ) -> anyhow::Result<()> {
        let (first_id, mut last_id) = filter.id_bounds();
        if !self.ids_increase() {
            // A hand-written XML trace may list ids in any order: no early stop.
            last_id = u64::MAX;
        }
        self.set_type_mask(filter.type_mask());
        let mut read: u64 = 0;
        let result = (|| -> anyhow::Result<()> {
            if !self.skip_to(first_id)? {
                return Ok(());
            }
            while let Some(ev) = self.next_event()? {
                read += 1;
                if read & 0xffff == 0 {
                    let pos = self.position();
                    progress.set(pos);
                }
                if ev.id > last_id {
                    break;
                }
                if filter.matches(&ev, self.symbols()) && !on_match(self, &ev)? {
                    break;
                }
            }
            Ok(())
        })();
        progress.finish();
        self.warn(read);
        result
    }

    /// Reports what the binary reader had to work around.
    pub fn warn(&self, events: u64) {
        if let Input::Binary(r) = self {
            trace::warn_diagnostics(r.diagnostics(), events);
        }
    }

    /// Takes the methods an XML input redefined (see
    /// [`XmlTraceReader::take_redefined`]).
    fn redefined(&mut self) -> Vec<vmview_format::MethodId> {
        match self {
            Input::Xml { reader, .. } => reader.take_redefined(),
            Input::Binary(_) => Vec::new(),
        }
    }
}

/// An XML error as `FILE:LINE:COLUMN: message`.
fn xml_error(path: &Path, e: &vmview_export::XmlError) -> anyhow::Error {
    let place = File::open(path)
        .and_then(|f| vmview_export::xml_reader::line_column(f, e.offset))
        .map(|(l, c)| format!("{}:{l}:{c}", path.display()))
        .unwrap_or_else(|_| format!("{} (byte {})", path.display(), e.offset));
    hinted(
        format!("{place}: {}", e.message),
        "vmview reads XML traces in the shape of docs/vmview.dtd (what `vmview export --format xml` writes)",
    )
}

/// Parses an expression, or an error that shows it with a caret.
pub fn compile(expr: &str) -> anyhow::Result<EventFilter> {
    EventFilter::parse(expr).map_err(|e| {
        plain(format!(
            "bad expression at column {}:\n  {}",
            e.column + 1,
            e.render(expr).replace('\n', "\n  ")
        ))
    })
}

/// Where the selected events go.
enum Sink {
    Binary(Box<SubsetWriter<Box<dyn Write>>>),
    Events(Box<dyn EventWriter>),
}

pub fn run(args: &FilterArgs) -> anyhow::Result<ExitCode> {
    let mut filter = compile(&args.expr)?;
    refuse_input_as_output(&[&args.input], args.output.as_deref())?;
    let mut input = Input::open(&args.input)?;
    let format = args.format.unwrap_or_else(|| match &args.output {
        None => OutFormat::Text,
        Some(p) => match p.extension().and_then(|e| e.to_str()) {
            Some("xml") => OutFormat::Xml,
            Some("jsonl" | "json") => OutFormat::Jsonl,
            Some("txt") => OutFormat::Text,
            _ => OutFormat::Vmv,
        },
    });
    if format == OutFormat::Vmv && args.output.is_none() && io::stdout().is_terminal() {
        return Err(hinted(
            "will not write a binary trace to the terminal",
            "give an output file with -o, or pick --format text",
        ));
    }
    let header = derived_header(input.header(), &args.input, &args.expr);
    let out = output(args.output.as_ref())?;
    let mut sink = match format {
        OutFormat::Vmv => Sink::Binary(Box::new(SubsetWriter::new(out, &header)?)),
        OutFormat::Xml => Sink::Events(Box::new(XmlWriter::new(out, &header))),
        OutFormat::Jsonl => Sink::Events(Box::new(JsonlWriter::new(out))),
        OutFormat::Text => Sink::Events(Box::new(TextWriter::new(out))),
    };

    let total = std::fs::metadata(&args.input).map_or(0, |m| m.len());
    let mut progress = Progress::new(total, "filtering");
    let mut kept: u64 = 0;
    input.scan_matches(&mut filter, &mut progress, |input, ev| {
        kept += 1;
        match &mut sink {
            Sink::Binary(w) => {
                for m in input.redefined() {
                    w.forget_method(m);
                }
                w.write(ev, input.symbols())
                    .with_context(|| format!("cannot write event {}", ev.id))?;
            }
            Sink::Events(w) => w.write_event(ev, input.symbols())?,
        }
        Ok(true)
    })?;
    match sink {
        Sink::Binary(w) => {
            w.finish()?.flush()?;
        }
        Sink::Events(mut w) => w.finish()?,
    }
    if let Some(out) = &args.output {
        say!("vmview: {kept} events matched; wrote {}", out.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The input's header plus where the derived trace came from: `source`
/// (the trace whose ids it keeps; an input that was itself derived passes
/// its own source on) and `filter` (each expression applied, in order).
pub fn derived_header(input: &TraceHeader, path: &Path, expr: &str) -> TraceHeader {
    let mut h = input.clone();
    if !h.properties.iter().any(|(k, _)| k == "source") {
        let shown = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        h.properties
            .push(("source".into(), shown.display().to_string()));
        h.properties.push((
            "source_start_unix_ns".into(),
            input.start_unix_ns.to_string(),
        ));
    }
    h.properties.push(("filter".into(), expr.to_string()));
    h
}
