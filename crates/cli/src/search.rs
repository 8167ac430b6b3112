//! `vmview search`: find events by expression and print them, count them,
//! or stop at the first few.
//!
//! VMView's users searched by filtering again and again and then could not
//! find a hit in its original context. Here a search prints each hit with
//! its id, which `vmview show TRACE --around ID` opens in place. Where the
//! expression bounds the event id (`id >= N`, `id == N`), the index finds
//! the first chunk to read and reading stops past the last possible id; a
//! bare count of every event comes from the index alone.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use vmview_export::{EventWriter, JsonlWriter, TextWriter};

use crate::filter::{compile, count_matches, scan_matches};
use crate::progress::Progress;
use crate::trace::Input;

const EXAMPLES: &str = "\
Examples:
  vmview search trace.vmv 'type == THROW && catch_class == null'   # uncaught exceptions
  vmview search trace.vmv --count 'method == handle && elapsed_ns > 10ms'
  vmview search trace.vmv --first 1 'message ~ \"timeout\"'
  vmview show trace.vmv --around 4242                                 # a hit in context";

#[derive(Args)]
#[command(
    about = "Find events by expression (see `vmview filter --help` for the language)",
    after_long_help = EXAMPLES
)]
pub struct SearchArgs {
    /// The trace: binary (.vmv) or XML.
    trace: PathBuf,
    /// The expression (quote it for the shell).
    expr: String,
    /// Print only the number of matching events.
    #[arg(long)]
    count: bool,
    /// Stop after N matches.
    #[arg(long, value_name = "N")]
    first: Option<u64>,
    /// Output format of the matching events.
    #[arg(long, value_enum, default_value_t = SearchFormat::Text)]
    format: SearchFormat,
}

#[derive(Clone, Copy, ValueEnum)]
enum SearchFormat {
    Text,
    Jsonl,
}

pub fn run(args: &SearchArgs) -> anyhow::Result<ExitCode> {
    let mut filter = compile(&args.expr)?;
    crate::overwrite::refuse_input_as_output(&[&args.trace], None)?;
    let mut input = Input::open(&args.trace)?;
    let stdout = io::stdout();
    let limit = args.first.unwrap_or(u64::MAX);

    // Counting everything: the index knows.
    if args.count && args.first.is_none() && args.expr.trim() == "true" {
        if let Some(r) = input.source().binary() {
            let n = r.index()?.event_count();
            if r.diagnostics().is_empty() {
                writeln!(stdout.lock(), "{n}")?;
                return Ok(ExitCode::SUCCESS);
            }
        }
    }

    let mut writer: Option<Box<dyn EventWriter>> = (!args.count).then(|| {
        let out = BufWriter::new(stdout.lock());
        match args.format {
            SearchFormat::Text => Box::new(TextWriter::new(out)) as Box<dyn EventWriter>,
            SearchFormat::Jsonl => Box::new(JsonlWriter::new(out)),
        }
    });
    let total = std::fs::metadata(&args.trace).map_or(0, |m| m.len());
    let mut progress = Progress::new(total, "searching");
    let mut hits: u64 = 0;
    if limit > 0 && writer.is_none() && args.first.is_none() {
        hits = count_matches(&mut input, &mut filter, &mut progress)?;
    } else if limit > 0 {
        scan_matches(&mut input, &mut filter, &mut progress, |ctx, ev| {
            hits += 1;
            if let Some(w) = writer.as_mut() {
                w.write_event(ev, ctx.symbols)?;
            }
            Ok(hits < limit)
        })?;
    } else {
        progress.finish();
        input.warn(0);
    }
    match writer.as_mut() {
        Some(w) => w.finish()?,
        None => writeln!(stdout.lock(), "{hits}")?,
    }
    Ok(if hits == 0 {
        // Like grep: nothing found is exit status 1.
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
