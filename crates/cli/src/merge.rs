//! `vmview merge`: several traces (one per JVM of a fleet, or several runs)
//! as one, ordered by time, keeping where each event came from.
//!
//! The merged trace is an ordinary trace, so every command and export
//! reads it. Its event ids must increase in file order, so they cannot be
//! the sources' ids; instead each id carries its source (`n × 256 +
//! source`), the header lists the sources (file, pid, start, the ranges of
//! their event ids), and each source's events keep their order, so the
//! k-th event of a source has the k-th of its listed ids: the Parquet
//! export resolves them (docs/PARQUET.md explains the scheme and the
//! trade-off against per-source id offsets).
//!
//! Symbols (strings, methods, threads, sampled stacks) are renumbered per
//! source by `vmview_filter::MergeWriter` (two JVMs' string 7 are different strings); times are rebased on the earliest source's start, so wall
//! clock time is unchanged. Each source is read twice: once for its ids
//! (the header, written first, lists them), once to merge. Memory holds one
//! event per source and the symbol maps.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use vmview_export::parquet::{format_id_ranges, MERGE_SOURCE_BITS};
use vmview_filter::MergeWriter;
use vmview_format::{Event, TraceHeader};

use crate::error::hinted;
use crate::progress::Progress;
use crate::trace;

const LONG_ABOUT: &str = "\
Combine traces into one, ordered by time.

Each event keeps its source: its id in the merged trace is n*256 + S for the \
S-th input (0-based), and the header lists every input (merge.source.S.file, \
.pid, .start_unix_ns, .ids). The Parquet export turns that back into a \
`source`, `pid` and `source_id` (the event's id in its own trace) per row. \
Times are rebased on the earliest input's start. At most 256 inputs.";

const EXAMPLES: &str = "\
Examples:
  vmview merge app-4242.vmv app-4243.vmv -o fleet.vmv
  vmview export fleet.vmv --format parquet -o fleet.parquet
  vmview export fleet.vmv --format chrome -o fleet.json   # one process per JVM in Perfetto";

#[derive(Args)]
#[command(about = "Combine traces into one, ordered by time, keeping each event's source", long_about = LONG_ABOUT, after_long_help = EXAMPLES)]
pub struct MergeArgs {
    /// The traces to combine (.vmv), at least two.
    #[arg(required = true, num_args = 2..)]
    files: Vec<PathBuf>,
    /// The merged trace.
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
}

/// One input: its reader, header and what the merge needs to know of it.
struct Input {
    path: PathBuf,
    reader: trace::Input,
    header: TraceHeader,
    /// Added to its events' times (its start less the merged start).
    shift_ns: u64,
    ids: Vec<(u64, u64)>,
    events: u64,
    head: Option<Event>,
}

/// The ids of a trace's readable events, as inclusive ranges.
fn id_ranges(path: &Path) -> anyhow::Result<(Vec<(u64, u64)>, u64)> {
    let mut reader = trace::Input::open(path)?;
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    let mut n = 0;
    while let Some(ev) = reader.next_event()? {
        n += 1;
        match ranges.last_mut() {
            Some((_, last)) if *last + 1 == ev.id => *last = ev.id,
            _ => ranges.push((ev.id, ev.id)),
        }
    }
    Ok((ranges, n))
}

fn prop<'a>(h: &'a TraceHeader, key: &str) -> Option<&'a str> {
    h.properties
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

pub fn run(args: &MergeArgs) -> anyhow::Result<ExitCode> {
    let max_sources = 1usize << MERGE_SOURCE_BITS;
    if args.files.len() > max_sources {
        return Err(hinted(
            format!(
                "{} traces to merge; at most {max_sources} fit",
                args.files.len()
            ),
            "merge them in groups, or export each to Parquet and query the files together",
        ));
    }
    let inputs: Vec<&Path> = args.files.iter().map(PathBuf::as_path).collect();
    crate::overwrite::refuse_input_as_output(&inputs, Some(&args.output))?;
    let mut inputs = Vec::new();
    for path in &args.files {
        let reader = trace::Input::open(path)?;
        let header = reader.header().clone();
        let (ids, events) = id_ranges(path)?;
        inputs.push(Input {
            path: path.clone(),
            reader,
            header,
            shift_ns: 0,
            ids,
            events,
            head: None,
        });
    }
    let start = inputs
        .iter()
        .map(|i| i.header.start_unix_ns)
        .min()
        .unwrap_or(0);
    let mut header = TraceHeader {
        version: 0,
        pid: inputs[0].header.pid,
        start_unix_ns: start,
        properties: vec![("merge.sources".into(), inputs.len().to_string())],
    };
    // Sources are named by file name, or by path where two names collide.
    let base = |p: &Path| {
        p.file_name().map_or_else(
            || p.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    };
    let mut names: Vec<String> = inputs.iter().map(|i| base(&i.path)).collect();
    let mut sorted = names.clone();
    sorted.sort();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        names = inputs
            .iter()
            .map(|i| i.path.display().to_string())
            .collect();
    }
    for (s, input) in inputs.iter_mut().enumerate() {
        input.shift_ns = input.header.start_unix_ns - start;
        let name = names[s].clone();
        let h = &input.header;
        let mut add = |k: &str, v: String| {
            header.properties.push((format!("merge.source.{s}.{k}"), v));
        };
        add("file", name);
        add("pid", h.pid.to_string());
        add("start_unix_ns", h.start_unix_ns.to_string());
        for key in ["jvm", "command"] {
            if let Some(v) = prop(h, key) {
                add(key, v.to_string());
            }
        }
        add("events", input.events.to_string());
        add("ids", format_id_ranges(&input.ids));
    }

    let file = File::create(&args.output)
        .with_context(|| format!("cannot create {}", args.output.display()))?;
    let mut out = MergeWriter::new(
        BufWriter::with_capacity(256 * 1024, file),
        &header,
        inputs.len(),
    )
    .with_context(|| format!("cannot write {}", args.output.display()))?;

    let total: u64 = args
        .files
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum();
    let mut progress = Progress::new(total, "merging");
    let mut heap = BinaryHeap::new();
    for (s, input) in inputs.iter_mut().enumerate() {
        input.head = input.reader.next_event()?;
        if let Some(ev) = &input.head {
            heap.push(Reverse((ev.time_ns + input.shift_ns, s)));
        }
    }
    let mut n: u64 = 0;
    while let Some(Reverse((time, s))) = heap.pop() {
        let input = &mut inputs[s];
        let ev = input.head.take().expect("a source in the heap has a head");
        n += 1;
        // An XML source may give a method handle a new meaning.
        for m in input.reader.source().take_redefined() {
            out.forget_method(s, m);
        }
        let id = (n << MERGE_SOURCE_BITS) | s as u64;
        out.write(s, &ev, input.reader.symbols(), id, time)
            .with_context(|| format!("cannot write {}", args.output.display()))?;
        input.head = input.reader.next_event()?;
        if let Some(ev) = &input.head {
            heap.push(Reverse((ev.time_ns + input.shift_ns, s)));
        }
        if n & 0xffff == 0 {
            let done: u64 = inputs.iter().map(|i| i.reader.position()).sum();
            progress.set(done);
        }
    }
    progress.finish();
    out.finish()
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    for input in &inputs {
        input.reader.warn(input.events);
    }
    say!(
        "vmview: merged {n} events from {} traces into {}",
        inputs.len(),
        args.output.display()
    );
    Ok(ExitCode::SUCCESS)
}
