//! `vmview view`: the browser view as one self-contained HTML file.
//!
//! The report embeds the events, the analyses and the flame graph, so it
//! opens anywhere without vmview or a network; it is bounded in size, and
//! a larger trace gets a message pointing to `vmview serve` or to
//! `vmview filter`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use vmview_view::report::{report_html, ReportError, DEFAULT_MAX_EVENTS};

use crate::error::hinted;
use crate::trace;

const EXAMPLES: &str = "\
Examples:
  vmview view trace.vmv                     # writes trace.html
  vmview view trace.vmv -o report.html
  vmview filter big.vmv -o part.vmv 'thread ~ \"worker\"' && vmview view part.vmv";

#[derive(Args)]
#[command(
    about = "Write the browser view of a trace as one self-contained HTML file",
    after_long_help = EXAMPLES
)]
pub struct ViewArgs {
    /// The trace: binary (.vmv) or XML.
    trace: PathBuf,
    /// Where to write the report (default: the trace's name with .html).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Refuse traces with more events than this (browsers load the whole
    /// report at once).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_EVENTS)]
    max_events: u64,
}

pub fn run(args: &ViewArgs) -> anyhow::Result<ExitCode> {
    let out = args
        .output
        .clone()
        .unwrap_or_else(|| args.trace.with_extension("html"));
    crate::overwrite::refuse_input_as_output(&[&args.trace], Some(&out))?;
    let binary = trace::BinaryTrace::of(&args.trace)?;
    let mut reader = trace::open(&binary.path)?;
    let title = args.trace.file_name().map_or_else(
        || args.trace.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let html = match report_html(&mut reader, &title, args.max_events) {
        Ok(h) => h,
        Err(ReportError::TooLarge { events, max }) => {
            return Err(hinted(
                format!("{} has {events} events; a self-contained report holds at most {max}", args.trace.display()),
                format!(
                    "browse it with `vmview serve {0}`, or cut it first: `vmview filter {0} -o part.vmv 'EXPR'` \
                     (or raise --max-events)",
                    args.trace.display()
                ),
            ))
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", args.trace.display())),
    };
    let events = reader.index().map_or(0, |i| i.event_count());
    trace::warn_diagnostics(reader.diagnostics(), events);
    std::fs::write(&out, html).with_context(|| format!("cannot write {}", out.display()))?;
    out!("vmview: wrote {}", out.display());
    Ok(ExitCode::SUCCESS)
}
