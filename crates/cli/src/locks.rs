//! `vmview locks`: contention per monitor — who blocked, how often, how
//! long (as measured and with overlapping GC pauses taken out), and which
//! threads held the monitor meanwhile.
//!
//! The numbers come from `vmview_analysis::locks`; this module reads the
//! trace twice (first for the GC pauses, then for the waits, so memory
//! stays bounded however long the trace) and renders text or one JSON
//! document (keys are a contract: add, never rename).

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde::Serialize;
use serde_json::Value as Json;
use vmview_analysis::locks::{GcPauses, LockReport, LocksBuilder, Waits};
use vmview_analysis::EventSink;
use vmview_export::names::duration_display;

use crate::trace;

const LONG_ABOUT: &str = "\
Report lock contention per monitor: the threads that blocked on it, how \
many contended acquisitions, the total, mean and longest wait, the same \
waits with the garbage-collection pauses they overlapped taken out (a thread \
that blocked while the holder was stopped for a GC waited for the GC, not \
for the lock), and which threads held the monitor while others waited. \
Needs MONITOR_CONTENDED_ENTER/ENTERED events (recorded by default) and \
GC_START/GC_FINISH for the correction.";

const EXAMPLES: &str = "\
Examples:
  vmview locks trace.vmv
  vmview locks trace.vmv --format json | jq '.monitors[0].holders'";

#[derive(Args)]
#[command(about = "Lock contention per monitor, with GC pauses taken out of the waits", long_about = LONG_ABOUT, after_long_help = EXAMPLES)]
pub struct LocksArgs {
    /// The trace: binary (.vmv) or XML.
    file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// A section per monitor, for people.
    Text,
    /// One JSON document, for tools.
    Json,
}

pub fn run(args: &LocksArgs) -> anyhow::Result<ExitCode> {
    crate::overwrite::refuse_input_as_output(&[&args.file], None)?;
    let mut reader = trace::Input::open(&args.file)?;
    let (gc, _) = reader.fold(GcPauses::default, |gc, ev, syms| gc.event(ev, syms))?;
    let pauses = gc.finish();
    let mut reader = trace::Input::open(&args.file)?;
    let (builder, events) = reader.fold(
        || LocksBuilder::new(pauses.clone()),
        |b, ev, syms| b.event(ev, syms),
    )?;
    let report = builder.finish(reader.symbols());
    let diags = reader.diagnostics().to_vec();

    let mut out = io::stdout().lock();
    match args.format {
        Format::Text => out.write_all(render_text(&report).as_bytes())?,
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, &render_json(args, &report)?)
                .map_err(io::Error::from)?;
            out.write_all(b"\n")?;
        }
    }
    out.flush()?;
    trace::warn_diagnostics(&diags, events);
    if report.monitors.is_empty() {
        say!(
            "vmview: note: no contended monitor in {} (no MONITOR_CONTENDED_ENTERED event; recorded with --events excluding locks?)",
            args.file.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn waits_text(w: &Waits) -> String {
    format!(
        "total {}, mean {}, max {}",
        duration_display(w.total_ns),
        duration_display(w.mean_ns()),
        duration_display(w.max_ns)
    )
}

fn render_text(r: &LockReport) -> String {
    let mut o = String::new();
    for (i, m) in r.monitors.iter().enumerate() {
        if i > 0 {
            o.push('\n');
        }
        let _ = writeln!(o, "{}", m.monitor);
        let _ = writeln!(
            o,
            "  contended    {} acquisitions by {} threads: {}",
            m.waits.count,
            m.threads.len(),
            m.threads.join(", ")
        );
        let _ = writeln!(o, "  wait         {}", waits_text(&m.waits));
        let _ = writeln!(
            o,
            "  without GC   {} ({} of the waits were GC pauses)",
            waits_text(&m.gc_corrected),
            duration_display(m.gc_overlap_ns)
        );
        let w = m.holders.iter().map(|h| h.name.len()).max().unwrap_or(0);
        for (j, h) in m.holders.iter().enumerate() {
            let _ = writeln!(
                o,
                "  {:<12} {:<w$}  blocked {} waits, {}",
                if j == 0 { "held by" } else { "" },
                h.name,
                h.blocked,
                duration_display(h.wait_ns)
            );
        }
    }
    let _ = writeln!(
        o,
        "{}GC: {} pauses, {} in all",
        if r.monitors.is_empty() { "" } else { "\n" },
        r.gc_pauses,
        duration_display(r.gc_total_ns)
    );
    o
}

/// The JSON document: the analysis report under the trace's file name.
/// Going through `serde_json::Value` keeps the keys sorted, as they were.
fn render_json(args: &LocksArgs, r: &LockReport) -> serde_json::Result<Json> {
    #[derive(Serialize)]
    struct Doc<'a> {
        file: String,
        #[serde(flatten)]
        report: &'a LockReport,
    }
    serde_json::to_value(Doc {
        file: args.file.display().to_string(),
        report: r,
    })
}
