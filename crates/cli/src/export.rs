//! `vmview export`: convert a whole trace to XML (VMView's flat shape, with
//! its DTD), JSON Lines or text, for other tools and for people.
//!
//! The conversion streams: one event is decoded, rendered and written at a
//! time, so a trace of any size converts in constant memory.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use vmview_export::{
    ChromeWriter, CollapseOptions, CollapsedWriter, EventWriter, FlameGraphWriter, JsonlWriter,
    ParquetWriter, SampleWeight, SpeedscopeWriter, TextWriter, Weigher, Weight, WeightError,
    XmlWriter,
};

use crate::error::{hinted, plain};
use crate::progress::Progress;
use crate::trace;
use vmview_format::parallel::ordered_map_fold;

const LONG_ABOUT: &str = "\
Convert a trace to another format.

xml is VMView's flat XML trace: one element per event (CALL, RETURN, THROW \
...) with an ID attribute and one child per field (THRD, CLASS, MTD, SIG, \
LOC, CLASS2 ...), class names in the JVM form (Lshop/Inventory;), and the \
DTD embedded, so `xmllint --valid` checks it and `vmview filter` reads it \
back. jsonl is one JSON object per event (the keys of `vmview show --format \
jsonl`); text is what `vmview show` prints.

For other people's tools: chrome is Chrome trace-event JSON (Perfetto, \
chrome://tracing: a track per thread, a slice per call); speedscope is \
speedscope's JSON (a time-ordered profile per thread); collapsed is folded \
stacks of the call tree and svg a flame graph of it (weighed by self time \
or, with --weight calls, by calls); parquet is one row per event with \
typed columns (docs/PARQUET.md) for DuckDB, Spark, Trino. Calls whose \
RETURN is missing end as cut off, RETURNs without their CALL are left out, \
so timelines nest even on a cut trace.

--weight samples|cpu|wall|alloc|lock makes collapsed and svg fold sampled \
stacks instead of the call tree, and adds them to speedscope (a sampled \
profile per thread, opened first) and chrome (the stackFrames/samples \
section): samples counts every SAMPLE (--events samples); cpu the CPU ones \
(--sampler cpu, or the RUN-state wall samples); wall every wall sample; \
alloc the bytes of ALLOC_SAMPLE events (--events alloc); lock the \
nanoseconds waited on contended monitors (--events locks), under the \
waiting thread's traced call path (calls+locks) and a frame \
[blocked on CLASS]: the agent records no stack with a contended enter. \
A weight the trace cannot give is an error that names the recording \
option. docs/SAMPLING.md has the details.";

const EXAMPLES: &str = "\
Examples:
  vmview export trace.vmv --format xml -o trace.xml
  xmllint --valid --noout trace.xml
  vmview export trace.vmv --format jsonl | jq -c 'select(.type == \"THROW\")'
  vmview export trace.vmv --format chrome -o trace.json      # open in ui.perfetto.dev
  vmview export trace.vmv --format svg --weight calls -o calls.svg
  vmview export trace.vmv --format svg --weight cpu -o cpu.svg        # record with --events samples
  vmview export trace.vmv --format speedscope --weight alloc -o alloc.json
  vmview export trace.vmv --format parquet -o trace.parquet
  duckdb -c \"SELECT method, count(*) FROM 'trace.parquet' WHERE type = 'CALL' GROUP BY ALL\"";

#[derive(Args)]
#[command(about = "Convert a trace to XML, JSON Lines, text, Chrome/Perfetto, speedscope, flame graphs or Parquet", long_about = LONG_ABOUT, after_long_help = EXAMPLES)]
pub struct ExportArgs {
    /// The trace: binary (.vmv) or XML.
    file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ExportTo::Xml)]
    format: ExportTo,
    /// Output file (default: standard output).
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// collapsed, svg: what a stack weighs (default: time); speedscope,
    /// chrome: the sampled stacks to add (samples, cpu, wall, alloc, lock).
    #[arg(long, value_enum)]
    weight: Option<WeightBy>,
    /// collapsed, svg: start each stack with its thread's name instead of
    /// merging all threads.
    #[arg(long)]
    thread_frames: bool,
    /// collapsed, svg of sampled stacks (--weight samples, cpu, wall):
    /// mark each frame the sampler typed as async-profiler does, `_[j]`
    /// JIT-compiled, `_[i]` inlined, `_[0]` interpreted (the svg then
    /// colours by type).
    #[arg(long)]
    frame_types: bool,
    /// collapsed, svg: keep call paths to N frames from the stack base;
    /// what is deeper becomes one `[truncated N frames]` frame with its
    /// weight, so a deep recursion stays a bounded file.
    #[arg(long, value_name = "N", default_value_t = vmview_format::DEFAULT_MAX_DEPTH,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_depth: u32,
    /// A JFR recording: also make WAIT, SLEEP, BLOCKED and IO samples from
    /// its park, monitor, sleep and I/O events (JFR samples only running
    /// threads), one per sampling period: a wall-clock picture, as
    /// `reactions` reads it (docs/JFR.md).
    #[arg(long)]
    wait_samples: bool,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ExportTo {
    /// VMView-style flat XML with the DTD embedded.
    Xml,
    /// One JSON object per line.
    Jsonl,
    /// Labelled fields, for people.
    Text,
    /// Chrome trace-event JSON: open in Perfetto (ui.perfetto.dev) or chrome://tracing.
    Chrome,
    /// Folded stacks of the call tree (`a;b;c 1234`), for flame-graph tools.
    Collapsed,
    /// A flame graph of the call tree (SVG, drawn by inferno): open in a browser.
    Svg,
    /// speedscope's JSON, one time-ordered profile per thread: open at speedscope.app.
    Speedscope,
    /// Apache Parquet, one row per event (docs/PARQUET.md): query with DuckDB, Spark, Trino...
    Parquet,
}

/// The last component of a path, for names inside exported files.
fn file_name(p: &std::path::Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// What collapsed stacks and flame graphs weigh.
#[derive(Clone, Copy, ValueEnum)]
pub enum WeightBy {
    /// Self time in nanoseconds (time in a method less its traced callees).
    Time,
    /// Number of calls.
    Calls,
    /// Stack samples (SAMPLE events, `--events samples`): wall-clock or
    /// CPU samples, as the trace's `sampler` says.
    Samples,
    /// CPU samples: those of `--sampler cpu`, else the wall samples of
    /// running (RUN) threads.
    Cpu,
    /// Wall-clock samples in every state (not of a `--sampler cpu` trace).
    Wall,
    /// Bytes of allocation samples (ALLOC_SAMPLE events, `--events alloc`).
    Alloc,
    /// Nanoseconds waited on contended monitors (`--events locks`), under
    /// the waiting thread's traced call path.
    Lock,
}

impl WeightBy {
    /// The sampled weight, or `None` for time and calls.
    pub fn sampled(self) -> Option<SampleWeight> {
        match self {
            WeightBy::Time | WeightBy::Calls => None,
            WeightBy::Samples => Some(SampleWeight::Samples),
            WeightBy::Cpu => Some(SampleWeight::Cpu),
            WeightBy::Wall => Some(SampleWeight::Wall),
            WeightBy::Alloc => Some(SampleWeight::Alloc),
            WeightBy::Lock => Some(SampleWeight::Lock),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            WeightBy::Time => "time",
            WeightBy::Calls => "calls",
            WeightBy::Samples => "samples",
            WeightBy::Cpu => "cpu",
            WeightBy::Wall => "wall",
            WeightBy::Alloc => "alloc",
            WeightBy::Lock => "lock",
        }
    }
}

/// A weight error as the CLI reports it.
pub fn weight_error(e: &WeightError) -> anyhow::Error {
    hinted(e.problem.clone(), e.hint.clone())
}

/// Standard output or a created file, buffered.
pub fn output(path: Option<&PathBuf>) -> anyhow::Result<Box<dyn Write>> {
    Ok(match path {
        None => Box::new(BufWriter::with_capacity(256 * 1024, io::stdout().lock())),
        Some(p) => Box::new(BufWriter::with_capacity(
            256 * 1024,
            File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        )),
    })
}

fn collapse_options(args: &ExportArgs) -> CollapseOptions {
    let weight = args.weight.unwrap_or(WeightBy::Time);
    CollapseOptions {
        weight: match weight.sampled() {
            Some(w) => Weight::Sampled(w),
            None if matches!(weight, WeightBy::Calls) => Weight::Calls,
            None => Weight::SelfTime,
        },
        thread_frames: args.thread_frames,
        max_depth: args.max_depth,
        frame_types: args.frame_types,
    }
}

pub fn run(args: &ExportArgs) -> anyhow::Result<ExitCode> {
    crate::overwrite::refuse_input_as_output(&[&args.file], args.output.as_deref())?;
    let mut reader = trace::Input::open_with(
        &args.file,
        vmview_jfr::JfrOptions {
            wait_samples: args.wait_samples,
        },
    )?;
    let total = std::fs::metadata(&args.file).map_or(0, |m| m.len());
    if matches!(args.format, ExportTo::Parquet) && args.output.is_none() {
        return Err(hinted(
            "Parquet goes to a file, not to standard output",
            "name the file: vmview export TRACE --format parquet -o trace.parquet",
        ));
    }
    // A weight the format has no use for, or the header already rules out,
    // fails before any output is made.
    let weigher = match (args.weight, args.format) {
        (None, _) | (Some(_), ExportTo::Collapsed | ExportTo::Svg) => None,
        (Some(w), ExportTo::Speedscope | ExportTo::Chrome) => match w.sampled() {
            Some(s) => Some(Weigher::new(s, reader.header()).map_err(|e| weight_error(&e))?),
            None => {
                return Err(hinted(
                    format!(
                        "--weight {} applies to collapsed and svg; speedscope and chrome already show every traced call in time order",
                        w.name()
                    ),
                    "for their sampled stacks use --weight samples, cpu, wall, alloc or lock",
                ))
            }
        },
        (Some(w), _) => {
            return Err(hinted(
                format!("--weight {} does not apply to this format", w.name()),
                "--weight is for --format collapsed, svg, speedscope and chrome",
            ))
        }
    };
    let sampled_fold = matches!(args.format, ExportTo::Collapsed | ExportTo::Svg)
        && args.weight.and_then(WeightBy::sampled).is_some();
    if args.frame_types && !sampled_fold {
        return Err(hinted(
            "--frame-types marks the frames of sampled stacks in a flame graph",
            "use it with --format collapsed or svg and --weight samples, cpu, wall, alloc or lock",
        ));
    }
    if let (Some(w), ExportTo::Collapsed | ExportTo::Svg) =
        (args.weight.and_then(WeightBy::sampled), args.format)
    {
        Weigher::new(w, reader.header()).map_err(|e| weight_error(&e))?;
    }
    // Parquet's writer wants a `Send` sink; the others take any output.
    let out: Box<dyn Write> = match args.format {
        ExportTo::Parquet => Box::new(io::sink()),
        _ => output(args.output.as_ref())?,
    };
    let mut writer: Box<dyn EventWriter> = match args.format {
        ExportTo::Xml => Box::new(XmlWriter::new(out, reader.header())),
        ExportTo::Jsonl => Box::new(JsonlWriter::new(out)),
        ExportTo::Text => Box::new(TextWriter::new(out)),
        ExportTo::Chrome => match weigher {
            Some(w) => Box::new(ChromeWriter::weighted(out, reader.header(), w)),
            None => Box::new(ChromeWriter::new(out, reader.header())),
        },
        ExportTo::Collapsed => Box::new(
            CollapsedWriter::for_trace(out, collapse_options(args), reader.header())
                .map_err(|e| weight_error(&e))?,
        ),
        ExportTo::Svg => Box::new(
            FlameGraphWriter::for_trace(
                out,
                collapse_options(args),
                format!("{} (vmview)", args.file.display()),
                reader.header(),
            )
            .map_err(|e| weight_error(&e))?,
        ),
        ExportTo::Speedscope => match weigher {
            Some(w) => Box::new(SpeedscopeWriter::weighted(out, file_name(&args.file), w)),
            None => Box::new(SpeedscopeWriter::new(out, file_name(&args.file))),
        },
        ExportTo::Parquet => {
            let path = args.output.as_ref().expect("checked above");
            let file =
                File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
            Box::new(ParquetWriter::new(
                BufWriter::with_capacity(256 * 1024, file),
                reader.header(),
                &file_name(&args.file),
            )?)
        }
    };
    let mut progress = Progress::new(total, "exporting");
    let mut n: u64 = 0;
    let result = (|| -> anyhow::Result<()> {
        // A clean binary trace is decoded on every core, and written here
        // in order.
        if let Some((cf, threads)) = reader.parallel() {
            let mut syms = vmview_format::SymbolTable::default();
            let mut failed: Option<anyhow::Error> = None;
            let mut folded = 0usize;
            let whole = ordered_map_fold(
                threads,
                cf.chunks().len(),
                threads * trace::CHUNKS_IN_FLIGHT_PER_THREAD,
                |i| cf.decode(i).map(|c| (c, cf.chunks()[i].offset)),
                |chunk| {
                    let Ok((c, offset)) = chunk else {
                        return false;
                    };
                    syms.absorb(c.symbols);
                    for ev in &c.events {
                        if let Err(e) = writer.write_event(ev, &syms) {
                            failed = Some(e.into());
                            return false;
                        }
                    }
                    n += c.events.len() as u64;
                    folded += 1;
                    progress.set(offset);
                    true
                },
            );
            if let Some(e) = failed {
                return Err(e);
            }
            if whole {
                writer.finish()?;
                return Ok(());
            }
            // A chunk the index vouched for is damaged: read on in order
            // from it, so its damage is skipped and reported as always.
            let chunk = cf.chunks()[folded].clone();
            if let Some(r) = reader.source().binary() {
                r.seek_to_chunk(&chunk)?;
            }
        }
        while let Some(ev) = reader.next_event()? {
            writer.write_event(&ev, reader.symbols())?;
            n += 1;
            if n & 0xffff == 0 {
                progress.set(reader.source().position());
            }
        }
        writer.finish()?;
        Ok(())
    })();
    progress.finish();
    reader.warn(n);
    if args.wait_samples {
        match reader.source().jfr() {
            Some(j) => say!(
                "vmview: note: {}",
                trace::wait_samples_note(j.wait_samples())
            ),
            None => say!(
                "vmview: warning: --wait-samples applies to JFR recordings only; {} is not one",
                args.file.display()
            ),
        }
    }
    if let Err(e) = &result {
        if let Some(w) = e.downcast_ref::<io::Error>().and_then(WeightError::of) {
            // Nothing worth keeping was written: no half file is left behind.
            if let Some(p) = &args.output {
                let _ = std::fs::remove_file(p);
            }
            return Err(weight_error(w));
        }
    }
    result?;
    if n == 0 && !reader.diagnostics().is_empty() {
        return Err(plain(format!(
            "no event could be read from {}",
            args.file.display()
        )));
    }
    Ok(ExitCode::SUCCESS)
}
