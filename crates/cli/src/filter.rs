//! `vmview filter`: keep the events an expression selects, from a binary or
//! an XML trace, as a binary trace, XML, JSON Lines or text.
//!
//! Streaming end to end (one event in memory at a time; symbol caches grow
//! with distinct names only), so a multi-gigabyte trace filters in a small
//! constant RSS. The output keeps the original event ids and names its
//! source trace in its header, so `vmview show SOURCE --around ID` opens
//! any selected event in its context.
//!
//! The scan shared with `vmview search` lives here too: [`scan_matches`],
//! on every core for a clean binary trace, in order otherwise.

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use vmview_export::{EventWriter, JsonlWriter, TextWriter, XmlWriter};
use vmview_filter::{EventFilter, SubsetWriter};
use vmview_format::parallel::{decode_threads, in_order_asked, ordered_map_fold, MethodScan};
use vmview_format::{ChunkInfo, Event, EventKind, MethodId, Scanned, SymbolTable, TraceHeader};

use crate::error::{hinted, plain};
use crate::export::output;
use crate::overwrite::refuse_input_as_output;
use crate::progress::Progress;
use crate::trace::{self, Input};

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

/// Streams the events `filter` selects into `on_match`, which answers
/// whether to go on. Starts at the filter's lowest id and stops past its
/// highest (when ids increase), skips types the filter cannot match, moves
/// `progress`, and reports what the reader worked around. The shared loop
/// of `vmview filter` and `vmview search`.
///
/// A clean binary trace is filtered on every core: each chunk is decoded
/// and tested on a pool thread (lazily, without building values, when the
/// expression reads none: see [`EventFilter::needs_values`]), and the
/// matches are handed to `on_match` in trace order here.
pub fn scan_matches(
    input: &mut Input,
    filter: &mut EventFilter,
    progress: &mut Progress,
    mut on_match: impl FnMut(&mut MatchCtx, &Event) -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let (first_id, mut last_id) = filter.id_bounds();
    if !input.source().ids_increase() {
        // A hand-written XML trace may list ids in any order: no early stop.
        last_id = u64::MAX;
    }
    let bounds = (first_id, last_id);
    let resume = match scan_parallel(input, filter, bounds, progress, true, &mut on_match)? {
        Parallel::Done { read, .. } => {
            progress.finish();
            input.warn(read);
            return Ok(());
        }
        Parallel::No => None,
        Parallel::ResumeAt { chunk, read, .. } => Some((chunk, read)),
    };
    scan_in_order(input, filter, last_id, progress, resume, on_match)
}

/// The sequential scan of [`scan_matches`], from the start or, after a
/// parallel scan met a damaged chunk, from that chunk on (having read
/// `read` events before it).
fn scan_in_order(
    input: &mut Input,
    filter: &mut EventFilter,
    last_id: u64,
    progress: &mut Progress,
    resume: Option<(ChunkInfo, u64)>,
    mut on_match: impl FnMut(&mut MatchCtx, &Event) -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let first_id = filter.id_bounds().0;
    input.source().set_type_mask(filter.type_mask());
    let mut read: u64 = resume.as_ref().map_or(0, |r| r.1);
    let result = (|| -> anyhow::Result<()> {
        match (&resume, input.source().binary()) {
            (Some((chunk, _)), Some(r)) => r.seek_to_chunk(chunk)?,
            _ => {
                if !input
                    .source()
                    .skip_to(first_id)
                    .map_err(trace::source_error)?
                {
                    return Ok(());
                }
            }
        }
        while let Some(ev) = input.next_event()? {
            read += 1;
            if read & 0xffff == 0 {
                progress.set(input.source().position());
            }
            if ev.id > last_id {
                break;
            }
            if filter.matches(&ev, input.symbols()) {
                let redefined = input.source().take_redefined();
                let mut ctx = MatchCtx {
                    symbols: input.symbols(),
                    redefined,
                };
                if !on_match(&mut ctx, &ev)? {
                    break;
                }
            }
        }
        Ok(())
    })();
    progress.finish();
    input.warn(read);
    result
}

/// What `on_match` gets beside the event: the symbols that resolve it and
/// the methods an XML input redefined since the last match.
pub struct MatchCtx<'a> {
    pub symbols: &'a SymbolTable,
    pub redefined: Vec<vmview_format::MethodId>,
}

/// Counts the events `filter` selects: on every core, from lazily decoded
/// events, for a clean binary trace; by [`scan_matches`] otherwise.
pub fn count_matches(
    input: &mut Input,
    filter: &mut EventFilter,
    progress: &mut Progress,
) -> anyhow::Result<u64> {
    let (first_id, mut last_id) = filter.id_bounds();
    if !input.source().ids_increase() {
        last_id = u64::MAX;
    }
    let mut never = |_: &mut MatchCtx, _: &Event| Ok(true);
    let bounds = (first_id, last_id);
    let (resume, mut hits) =
        match scan_parallel(input, filter, bounds, progress, false, &mut never)? {
            Parallel::Done { read, hits } => {
                progress.finish();
                input.warn(read);
                return Ok(hits);
            }
            Parallel::No => (None, 0),
            Parallel::ResumeAt { chunk, read, hits } => (Some((chunk, read)), hits),
        };
    // Only counted: the values are read by the filter or by nothing.
    let lazy = !filter.needs_values();
    if let Some(r) = input.source().binary() {
        r.set_skip_values(lazy);
    }
    scan_in_order(input, filter, last_id, progress, resume, |_, _| {
        hits += 1;
        Ok(true)
    })?;
    Ok(hits)
}

/// How a parallel scan ended.
enum Parallel {
    /// Every chunk scanned (or `on_match` said stop).
    Done { read: u64, hits: u64 },
    /// The trace must be read in order.
    No,
    /// A chunk the index vouched for is damaged: read on in order from it,
    /// so its damage is skipped and reported as the sequential reader does.
    ResumeAt {
        chunk: ChunkInfo,
        read: u64,
        hits: u64,
    },
}

/// A type-and-method expression's side of
/// [`ChunkFile::for_each_method_match`](vmview_format::parallel::ChunkFile::for_each_method_match).
struct ByMethod<'a> {
    filter: &'a mut EventFilter,
    keep: bool,
    /// The matches, when kept.
    events: &'a mut Vec<Event>,
    /// Matches among the events given whole.
    hits: u64,
}

impl MethodScan for ByMethod<'_> {
    fn verdict(&mut self, ret: bool, method: MethodId, symbols: &SymbolTable) -> bool {
        self.filter.matches_method(ret, method, symbols)
    }

    fn can_pick(&self, ret: bool) -> bool {
        self.filter.may_match_head(ret)
    }

    fn event(&mut self, ev: Event, symbols: &SymbolTable) {
        // A CALL or RETURN comes only when picked.
        let hit = matches!(ev.kind, EventKind::Call { .. } | EventKind::Return { .. })
            || self.filter.matches(&ev, symbols);
        if hit {
            self.hits += 1;
            if self.keep {
                self.events.push(ev);
            }
        }
    }
}

/// One chunk's share of a parallel scan.
struct ChunkMatches {
    symbols: SymbolTable,
    events: Vec<Event>,
    hits: u64,
    read: u64,
    end: u64,
}

/// The parallel scan of a clean binary trace; `None` when the trace must
/// be read in order (one decoding thread, XML, damage). Returns the number
/// of events read and of matches. Without `keep`, matches are only
/// counted, and `on_match` is not called.
fn scan_parallel(
    input: &mut Input,
    filter: &mut EventFilter,
    (first_id, last_id): (u64, u64),
    progress: &mut Progress,
    keep: bool,
    on_match: &mut impl FnMut(&mut MatchCtx, &Event) -> anyhow::Result<bool>,
) -> anyhow::Result<Parallel> {
    let threads = decode_threads();
    // An expression decided from handles alone is faster by chunks even on
    // one core (one pool thread, folded here, in order); otherwise one core
    // reads in order. `VMVIEW_THREADS=1` always reads in order: the
    // sequential reader stays the reference the tests compare against.
    if threads <= 1 && (in_order_asked() || !filter.reads_only_heads()) {
        return Ok(Parallel::No);
    }
    let path = input.path().to_path_buf();
    let Some(cf) = input.source().chunk_file(&path) else {
        return Ok(Parallel::No);
    };
    let chunks: Vec<usize> = (0..cf.chunks().len())
        .filter(|&i| {
            let c = &cf.chunks()[i];
            c.last_id >= first_id && c.first_id <= last_id
        })
        .collect();
    let lazy = !filter.needs_values();
    let heads = filter.reads_only_heads();
    // A count that no id decides may take a version 2 chunk's thread
    // streams one after another (no merge by time).
    let any_order = !keep && !filter.reads_ids();
    // A type-and-method expression: each CALL's and RETURN's verdict is
    // looked up by its method handle, no tree walked.
    let by_method =
        heads && first_id == 0 && last_id == u64::MAX && filter.reads_only_type_and_method();
    // Lazily decoded chunks with a match are decoded again, whole, for the
    // matches' values: worth it while most chunks have none. Once most
    // scanned chunks had a match, the rest are decoded whole at once.
    let (scanned, matched) = (AtomicU64::new(0), AtomicU64::new(0));
    // Each pool thread takes a filter of its own (verdict caches are per filter).
    let filters = Mutex::new(Vec::<EventFilter>::new());
    let source = filter.source().to_string();
    let scan_chunk = |k: usize| -> Result<ChunkMatches, ()> {
        let i = chunks[k];
        let mut f = match filters.lock().map(|mut v| v.pop()) {
            Ok(Some(f)) => f,
            _ => EventFilter::parse(&source).map_err(|_| ())?,
        };
        let mut symbols = SymbolTable::default();
        let mut hits: Vec<u64> = Vec::new();
        let mut events = Vec::new();
        let (mut read, mut count) = (0u64, 0u64);
        let dense =
            keep && 2 * matched.load(Ordering::Relaxed) > scanned.load(Ordering::Relaxed) + 4;
        let r = if by_method {
            // Fastest: a verdict per method, looked up for each CALL and
            // RETURN; the matches built only when kept.
            let mut scan = ByMethod {
                filter: &mut f,
                keep,
                events: &mut events,
                hits: 0,
            };
            let picked =
                cf.for_each_method_match(i, !keep, any_order, keep, &mut symbols, &mut scan);
            read = u64::from(cf.chunks()[i].event_count);
            count = scan.hits;
            picked.map(|n| {
                if !keep {
                    count += n;
                }
            })
        } else if heads {
            // Fast: CALL and RETURN tested from their heads, built only
            // when kept (with their values), in the same pass.
            let in_range = |id: u64| id >= first_id && id <= last_id;
            cf.for_each_picked(i, !keep, any_order, &mut symbols, |ev, syms| {
                match ev {
                    Scanned::Head { id, .. } => {
                        read += 1;
                        let hit = in_range(*id) && f.matches_scanned(ev, syms);
                        if hit && !keep {
                            count += 1;
                        }
                        // A hit is built whole and comes back, below.
                        hit && keep
                    }
                    Scanned::Full(e)
                        if matches!(e.kind, EventKind::Call { .. } | EventKind::Return { .. }) =>
                    {
                        // Picked above: a match.
                        count += 1;
                        events.push(e.clone());
                        false
                    }
                    Scanned::Full(e) => {
                        read += 1;
                        if in_range(e.id) && f.matches(e, syms) {
                            count += 1;
                            if keep {
                                events.push(e.clone());
                            }
                        }
                        false
                    }
                }
            })
        } else {
            let lazy = lazy && !dense;
            cf.for_each_event(i, lazy, &mut symbols, |ev, syms| {
                read += 1;
                if ev.id >= first_id && ev.id <= last_id && f.matches(&ev, syms) {
                    count += 1;
                    if keep && lazy {
                        hits.push(ev.id);
                    } else if keep {
                        events.push(ev);
                    }
                }
            })
        };
        let lazy = lazy && !dense && !heads;
        if let Ok(mut v) = filters.lock() {
            v.push(f);
        }
        r.map_err(|_| ())?;
        scanned.fetch_add(1, Ordering::Relaxed);
        if count > 0 {
            matched.fetch_add(1, Ordering::Relaxed);
        }
        if lazy && !hits.is_empty() {
            // Decode the chunk again, whole, for the events that matched.
            let mut full = SymbolTable::default();
            let mut next = hits.iter().peekable();
            cf.for_each_event(i, false, &mut full, |ev, _| {
                if next.peek() == Some(&&ev.id) {
                    next.next();
                    events.push(ev);
                }
            })
            .map_err(|_| ())?;
            symbols = full;
        }
        let c = &cf.chunks()[i];
        Ok(ChunkMatches {
            symbols,
            events,
            hits: count,
            read,
            end: c.offset + c.len,
        })
    };
    let mut syms = SymbolTable::default();
    let (mut read, mut hits) = (0u64, 0u64);
    let mut failure: Option<anyhow::Error> = None;
    let mut stopped = false;
    let mut folded = 0usize;
    let whole = ordered_map_fold(
        threads,
        chunks.len(),
        threads * trace::CHUNKS_IN_FLIGHT_PER_THREAD,
        scan_chunk,
        |r| {
            let Ok(c) = r else {
                return false;
            };
            folded += 1;
            read += c.read;
            hits += c.hits;
            progress.set(c.end);
            if !keep {
                return true;
            }
            syms.absorb(c.symbols);
            for ev in &c.events {
                let mut ctx = MatchCtx {
                    symbols: &syms,
                    redefined: Vec::new(),
                };
                match on_match(&mut ctx, ev) {
                    Ok(true) => {}
                    Ok(false) => {
                        stopped = true;
                        return false;
                    }
                    Err(e) => {
                        failure = Some(e);
                        return false;
                    }
                }
            }
            true
        },
    );
    if let Some(e) = failure {
        return Err(e);
    }
    if whole || stopped {
        return Ok(Parallel::Done { read, hits });
    }
    Ok(Parallel::ResumeAt {
        chunk: cf.chunks()[chunks[folded]].clone(),
        read,
        hits,
    })
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
    scan_matches(&mut input, &mut filter, &mut progress, |ctx, ev| {
        kept += 1;
        match &mut sink {
            Sink::Binary(w) => {
                for m in ctx.redefined.drain(..) {
                    w.forget_method(m);
                }
                w.write(ev, ctx.symbols)
                    .with_context(|| format!("cannot write event {}", ev.id))?;
            }
            Sink::Events(w) => w.write_event(ev, ctx.symbols)?,
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
