//! `vmview show`: print events as text or JSON Lines, all of them or one
//! event in its context.
//!
//! `--id` and `--around` use the trace's index to seek to the chunk that
//! holds the event (or a few chunks before it, for context), so they answer
//! without reading the whole file.

use std::collections::VecDeque;
use std::io::{self, BufWriter};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use vmview_export::{EventWriter, ExportFormat};
use vmview_format::Event;

use crate::error::{hinted, plain};
use crate::trace::{self, Input};

const LONG_ABOUT: &str = "\
Print the events of a trace, in trace order.

The text format shows one header line per event (id, time since the trace \
started, type, thread) and its fields labelled below it. The jsonl format \
writes one JSON object per event with stable keys (id, time_ns, type, \
thread, class, method, sig, params, ...), for jq and scripts.

If the trace is damaged or was cut short (the JVM was killed), every \
complete chunk is shown and what was lost is reported on stderr.";

const EXAMPLES: &str = "\
Examples:
  vmview show trace.vmv | less
  vmview show trace.vmv --limit 20
  vmview show trace.vmv --format jsonl | jq 'select(.type == \"THROW\" and .catch_loc == null)'
  vmview show trace.vmv --id 4242                # one event
  vmview show trace.vmv --around 4242 --context 10  # and the 10 before and after";

#[derive(Args)]
#[command(about = "Print the events of a trace", long_about = LONG_ABOUT, after_long_help = EXAMPLES)]
pub struct ShowArgs {
    /// The trace: binary (.vmv) or XML.
    file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Print only the event with this id.
    #[arg(long, value_name = "N", conflicts_with = "around")]
    id: Option<u64>,
    /// Print the event with this id and the events just before and after it.
    #[arg(long, value_name = "N")]
    around: Option<u64>,
    /// With --around: how many events to show on each side.
    #[arg(long, value_name = "K", default_value_t = 5)]
    context: usize,
    /// Print at most N events.
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// Labelled fields, for people.
    Text,
    /// One JSON object per line, for tools.
    Jsonl,
}

impl From<Format> for ExportFormat {
    fn from(f: Format) -> Self {
        match f {
            Format::Text => ExportFormat::Text,
            Format::Jsonl => ExportFormat::Jsonl,
        }
    }
}

pub fn run(args: &ShowArgs) -> anyhow::Result<ExitCode> {
    crate::overwrite::refuse_input_as_output(&[&args.file], None)?;
    let mut reader = trace::Input::open(&args.file)?;
    let mut out = BufWriter::new(io::stdout().lock());
    let limit = args.limit.unwrap_or(u64::MAX);
    let result = {
        let mut writer = ExportFormat::from(args.format).writer(&mut out);
        let shown = match (args.id, args.around) {
            (Some(id), _) => window(&mut reader, args, id, 0, 0, limit, writer.as_mut()),
            (None, Some(id)) => window(
                &mut reader,
                args,
                id,
                args.context,
                args.context,
                limit,
                writer.as_mut(),
            ),
            (None, None) => all(&mut reader, limit, writer.as_mut()).map(|(n, to_the_end)| {
                if to_the_end {
                    // Looks for the index footer: a recording that did not
                    // finish cleanly has none, and the user should know.
                    let _ = reader.chunk_count();
                }
                n
            }),
        };
        shown.and_then(|n| {
            writer.finish()?;
            Ok(n)
        })
    };
    // Output first, then what went wrong while reading it.
    let read = match &result {
        Ok(n) => *n,
        Err(e) if is_broken_pipe(e) => return result.map(|_| ExitCode::SUCCESS),
        Err(_) => 0,
    };
    reader.warn(read);
    let read = result?;
    if read == 0 && !reader.diagnostics().is_empty() && args.limit != Some(0) {
        return Err(plain(format!(
            "no event could be read from {}",
            args.file.display()
        )));
    }
    Ok(ExitCode::SUCCESS)
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// Every event from the start, up to `limit`. Returns how many were shown
/// and whether the end of the trace was reached.
fn all(
    reader: &mut Input,
    limit: u64,
    writer: &mut dyn EventWriter,
) -> anyhow::Result<(u64, bool)> {
    let mut n = 0;
    while n < limit {
        let Some(ev) = reader.next_event()? else {
            return Ok((n, true));
        };
        writer.write_event(&ev, reader.symbols())?;
        n += 1;
    }
    Ok((n, false))
}

/// The event `id` with up to `before` events before it and `after` after
/// it, at most `limit` in all.
fn window(
    input: &mut Input,
    args: &ShowArgs,
    id: u64,
    before: usize,
    after: usize,
    limit: u64,
    writer: &mut dyn EventWriter,
) -> anyhow::Result<u64> {
    let Some(reader) = input.source().binary() else {
        return window_in_order(input, args, id, before, after, limit, writer);
    };
    let index = reader.index()?.clone();
    let no_such_event = || {
        let range = match index.id_range() {
            Some((first, last)) => format!("its event ids run from {first} to {last}"),
            None => "it holds no complete chunk".to_string(),
        };
        hinted(
            format!("no event with id {id} in {} ({range})", args.file.display()),
            format!(
                "list the ids with: vmview show {} --format jsonl | jq .id",
                args.file.display()
            ),
        )
    };
    let Some(pos) = index.position_of(id) else {
        return Err(no_such_event());
    };
    let chunks = &index.chunks;
    // Step back over whole chunks until they hold `before` events.
    let mut start = pos;
    let mut earlier = 0usize;
    while start > 0 && earlier < before {
        start -= 1;
        earlier += chunks[start].event_count as usize;
    }
    reader.seek_to_chunk(&chunks[start])?;

    let mut ring: VecDeque<Event> = VecDeque::with_capacity(before + 1);
    let found = loop {
        match reader.next_event() {
            None => break false,
            Some(ev) if ev.id < id => {
                if before > 0 {
                    if ring.len() == before {
                        ring.pop_front();
                    }
                    ring.push_back(ev);
                }
            }
            Some(ev) if ev.id == id => {
                ring.push_back(ev);
                break true;
            }
            Some(_) => break false,
        }
    };
    if !found {
        return Err(no_such_event());
    }
    let mut shown = 0;
    for ev in &ring {
        if shown == limit {
            return Ok(shown);
        }
        writer.write_event(ev, reader.symbols())?;
        shown += 1;
    }
    for _ in 0..after {
        if shown == limit {
            break;
        }
        let Some(ev) = reader.next_event() else { break };
        writer.write_event(&ev, reader.symbols())?;
        shown += 1;
    }
    Ok(shown)
}

/// [`window`] for a trace without an index (XML): read from the start,
/// keeping the last `before` events.
fn window_in_order(
    reader: &mut Input,
    args: &ShowArgs,
    id: u64,
    before: usize,
    after: usize,
    limit: u64,
    writer: &mut dyn EventWriter,
) -> anyhow::Result<u64> {
    let mut ring: VecDeque<Event> = VecDeque::with_capacity(before + 1);
    let found = loop {
        match reader.next_event()? {
            None => break false,
            Some(ev) if ev.id == id => {
                ring.push_back(ev);
                break true;
            }
            Some(ev) => {
                if before > 0 {
                    if ring.len() == before {
                        ring.pop_front();
                    }
                    ring.push_back(ev);
                }
            }
        }
    };
    if !found {
        return Err(hinted(
            format!("no event with id {id} in {}", args.file.display()),
            format!(
                "list the ids with: vmview show {} --format jsonl | jq .id",
                args.file.display()
            ),
        ));
    }
    let mut shown = 0;
    for ev in &ring {
        if shown == limit {
            return Ok(shown);
        }
        writer.write_event(ev, reader.symbols())?;
        shown += 1;
    }
    for _ in 0..after {
        if shown == limit {
            break;
        }
        let Some(ev) = reader.next_event()? else {
            break;
        };
        writer.write_event(&ev, reader.symbols())?;
        shown += 1;
    }
    Ok(shown)
}
