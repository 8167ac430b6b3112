//! `vmview stats`: a summary of a trace — what happened, on which threads,
//! where the time went, which exceptions and locks — plus how much of the
//! file could be read.
//!
//! The numbers come from `vmview_analysis::TraceStats`; this module only
//! renders them (as aligned text or one JSON document).

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde_json::{json, to_value, Value as Json};
use vmview_analysis::{EventSink, MethodStats, StatsBuilder, TraceStats};
use vmview_export::names::{duration_display, hash_hex};
use vmview_format::parallel::{in_order_asked, ordered_map_fold, ChunkFault};
use vmview_format::{DiagnosticKind, SymbolTable, TraceHeader};

use crate::trace;

const LONG_ABOUT: &str = "\
Summarise a trace: events by type, threads, the methods called most and \
those with the most total and self time (from CALL/RETURN pairs), exceptions \
by type split into caught and uncaught, the most contended monitors, events \
the agent dropped, and how many chunks of the file were read or damaged.

Self time is a method's time less the time of the traced methods it called \
directly; untraced callees count as self time.";

const EXAMPLES: &str = "\
Examples:
  vmview stats trace.vmv
  vmview stats trace.vmv --top 25
  vmview stats trace.vmv --format json | jq '.exceptions[] | select(.uncaught > 0)'";

#[derive(Args)]
#[command(about = "Summarise a trace: events, threads, methods, exceptions, locks", long_about = LONG_ABOUT, after_long_help = EXAMPLES)]
pub struct StatsArgs {
    /// The trace: binary (.vmv) or XML.
    file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// How many methods and monitors to list in each ranking.
    #[arg(long, value_name = "N", default_value_t = 10)]
    top: usize,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// Aligned tables, for people.
    Text,
    /// One JSON document, for tools.
    Json,
}

/// What the reader saw of the file itself.
struct FileFacts {
    bytes: u64,
    header: TraceHeader,
    chunks_total: usize,
    chunks_damaged: usize,
    tail_truncated: bool,
    unfinished: bool,
    /// The JFR format version, when the file is a JFR recording.
    jfr: Option<String>,
}

impl FileFacts {
    fn chunks_read(&self) -> usize {
        self.chunks_total.saturating_sub(self.chunks_damaged)
    }
}

pub fn run(args: &StatsArgs) -> anyhow::Result<ExitCode> {
    crate::overwrite::refuse_input_as_output(&[&args.file], None)?;
    let mut reader = trace::Input::open(&args.file)?;
    let builder = match in_parallel(&mut reader) {
        Some(b) => b,
        None => {
            // The statistics use no value: skip them while decoding.
            if let Some(r) = reader.source().binary() {
                r.set_skip_values(true);
            }
            reader
                .fold(StatsBuilder::new, |b, ev, syms| b.event(ev, syms))?
                .0
        }
    };
    let stats = builder.finish();
    // The index is known after a full read, rebuilt if the footer is missing.
    let chunks_total = reader.chunk_count().unwrap_or(0);
    let diags = reader.diagnostics().to_vec();
    let jfr = (reader.source().kind() == vmview_export::SourceKind::Jfr)
        .then(|| {
            reader
                .header()
                .properties
                .iter()
                .find(|(k, _)| k == "jfr_version")
                .map(|(_, v)| v.clone())
        })
        .flatten();
    let facts = FileFacts {
        jfr,
        bytes: std::fs::metadata(&args.file).map(|m| m.len()).unwrap_or(0),
        header: reader.header().clone(),
        chunks_total,
        chunks_damaged: diags
            .iter()
            .filter(|d| {
                matches!(
                    d.kind,
                    DiagnosticKind::ChecksumMismatch | DiagnosticKind::BadChunk
                )
            })
            .count(),
        tail_truncated: diags
            .iter()
            .any(|d| d.kind == DiagnosticKind::TruncatedTail),
        unfinished: diags.iter().any(|d| {
            matches!(
                d.kind,
                DiagnosticKind::TruncatedTail | DiagnosticKind::IndexRebuilt
            )
        }),
    };

    let mut out = io::stdout().lock();
    let written = match args.format {
        Format::Text => out.write_all(render_text(args, &stats, &facts).as_bytes()),
        Format::Json => {
            let mut doc = render_json(args, &stats, &facts)?;
            doc["diagnostics"] = diags
                .iter()
                .map(|d| json!({"chunk": d.chunk, "offset": d.offset, "kind": format!("{:?}", d.kind), "message": d.message}))
                .collect();
            serde_json::to_writer_pretty(&mut out, &doc)
                .map_err(io::Error::from)
                .and_then(|()| out.write_all(b"\n"))
        }
    };
    written.and_then(|()| out.flush())?;
    trace::warn_diagnostics(&diags, stats.events);
    Ok(ExitCode::SUCCESS)
}

/// The statistics of a clean binary trace, each chunk's computed on a pool
/// thread from lazily decoded events (the numbers use no value) and merged
/// in trace order; `None` when the trace must be read in order. On one
/// core too (one pool thread): a chunk's threads are read one after
/// another there, which the sequential reader cannot do; `VMVIEW_THREADS=1`
/// keeps the sequential reader, the reference.
fn in_parallel(reader: &mut trace::Input) -> Option<StatsBuilder> {
    let (cf, threads) = match reader.parallel() {
        Some(p) => p,
        None if in_order_asked() => return None,
        None => {
            let path = reader.path().to_path_buf();
            (reader.source().chunk_file(&path)?, 1)
        }
    };
    let mut total = StatsBuilder::new();
    let whole = ordered_map_fold(
        threads,
        cf.chunks().len(),
        threads * trace::CHUNKS_IN_FLIGHT_PER_THREAD,
        |i| -> Result<StatsBuilder, ChunkFault> {
            // Thread by thread: nothing here but the budget's last
            // estimate depends on the order across threads (and a chunk
            // where it does is read again, in order).
            let mut part = StatsBuilder::partial();
            let mut syms = SymbolTable::default();
            cf.for_each_event_by_thread(i, true, &mut syms, |ev, syms| part.event(&ev, syms))?;
            if part.depends_on_thread_order() {
                part = StatsBuilder::partial();
                syms = SymbolTable::default();
                cf.for_each_event(i, true, &mut syms, |ev, syms| part.event(&ev, syms))?;
            }
            Ok(part)
        },
        |part| match part {
            Ok(p) => {
                total.merge(p);
                true
            }
            Err(_) => false,
        },
    );
    whole.then_some(total)
}

fn render_text(args: &StatsArgs, s: &TraceStats, f: &FileFacts) -> String {
    let mut o = String::new();
    let mut kv = |k: &str, v: String| o.push_str(&format!("{k:<15}{v}\n"));
    kv(
        "trace",
        match &f.jfr {
            Some(v) => format!(
                "{} ({} bytes, JFR recording, format {v})",
                args.file.display(),
                f.bytes
            ),
            None => format!(
                "{} ({} bytes, format version {})",
                args.file.display(),
                f.bytes,
                f.header.version
            ),
        },
    );
    kv(
        "recorded",
        format!(
            "pid {} at {}",
            f.header.pid,
            utc_time(f.header.start_unix_ns)
        ),
    );
    for (k, v) in &f.header.properties {
        if matches!(k.as_str(), "jvm" | "command" | "agent_options") {
            kv(k, v.clone());
        }
    }
    let property = |key: &str| {
        f.header
            .properties
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    if let Some(version) = property("agent_version") {
        // Traces before build ids carry only the version.
        match property("agent_build") {
            Some(build) => kv("agent", format!("{version} (build {build})")),
            None => kv("agent", version.to_string()),
        }
    }
    kv("duration", duration_display(s.duration_ns()));
    kv(
        "events",
        format!("{} ({} dropped by the agent)", s.events, s.dropped),
    );
    kv(
        "gc",
        format!(
            "{} collections, {}",
            s.gc_count,
            duration_display(s.gc_total_ns)
        ),
    );
    kv(
        "chunks",
        format!(
            "{} read, {} damaged, {}",
            f.chunks_read(),
            f.chunks_damaged,
            if f.tail_truncated {
                "tail truncated (the recording did not finish)"
            } else if f.unfinished {
                "no index footer (the recording did not finish cleanly)"
            } else {
                "complete"
            }
        ),
    );

    section(
        &mut o,
        "events by type",
        &["type", "events"],
        s.events_by_type
            .iter()
            .map(|(t, n)| vec![t.to_string(), n.to_string()]),
    );
    section(
        &mut o,
        "threads",
        &["thread", "events"],
        s.threads
            .iter()
            .map(|t| vec![t.name.clone(), t.events.to_string()]),
    );
    let method_rows = |ms: Vec<&MethodStats>| {
        ms.into_iter()
            .map(|m| {
                vec![
                    format!("{}.{}{}", m.class, m.name, m.sig),
                    m.calls.to_string(),
                    duration_display(m.total_ns),
                    duration_display(m.self_ns),
                ]
            })
            .collect::<Vec<_>>()
    };
    let head = ["method", "calls", "total", "self"];
    section(
        &mut o,
        "top methods by calls",
        &head,
        method_rows(s.top_methods_by_calls(args.top)),
    );
    section(
        &mut o,
        "top methods by total time",
        &head,
        method_rows(s.top_methods_by_total_time(args.top)),
    );
    section(
        &mut o,
        "top methods by self time",
        &head,
        method_rows(s.top_methods_by_self_time(args.top)),
    );
    let demoted: Vec<&MethodStats> = s.methods.iter().filter(|m| m.demoted).collect();
    if !demoted.is_empty() {
        section(
            &mut o,
            "demoted by the overhead budget: calls counted, not traced (their later time is in their callers')",
            &["method", "traced", "counted", "calls"],
            demoted.iter().take(args.top).map(|m| {
                vec![
                    format!("{}.{}{}", m.class, m.name, m.sig),
                    m.calls.to_string(),
                    m.counted.to_string(),
                    (m.calls + m.counted).to_string(),
                ]
            }),
        );
    }
    section(
        &mut o,
        "exceptions",
        &["exception", "thrown", "caught", "uncaught"],
        s.exceptions.iter().map(|e| {
            vec![
                e.class.clone(),
                e.thrown.to_string(),
                e.caught.to_string(),
                e.uncaught.to_string(),
            ]
        }),
    );
    section(
        &mut o,
        "most contended monitors",
        &["monitor", "contentions", "total wait", "max wait"],
        s.monitors.iter().take(args.top).map(|m| {
            vec![
                format!("{}@{}", m.class, hash_hex(m.hash)),
                m.contentions.to_string(),
                duration_display(m.total_wait_ns),
                duration_display(m.max_wait_ns),
            ]
        }),
    );
    o
}

/// A titled table: first column left-aligned, the others right-aligned;
/// `(none)` when there are no rows.
fn section(
    o: &mut String,
    title: &str,
    head: &[&str],
    rows: impl IntoIterator<Item = Vec<String>>,
) {
    let rows: Vec<Vec<String>> = rows.into_iter().collect();
    o.push('\n');
    o.push_str(title);
    o.push('\n');
    if rows.is_empty() {
        o.push_str("  (none)\n");
        return;
    }
    let mut widths: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            let pad = w - cell.chars().count();
            l.push_str(if i == 0 { "  " } else { "   " });
            if i == 0 {
                l.push_str(cell);
                l.push_str(&" ".repeat(pad));
            } else {
                l.push_str(&" ".repeat(pad));
                l.push_str(cell);
            }
        }
        l.truncate(l.trim_end().len());
        l.push('\n');
        l
    };
    o.push_str(&line(&mut head.iter().copied()));
    for r in &rows {
        o.push_str(&line(&mut r.iter().map(String::as_str)));
    }
}

fn render_json(args: &StatsArgs, s: &TraceStats, f: &FileFacts) -> serde_json::Result<Json> {
    let properties: serde_json::Map<String, Json> = f
        .header
        .properties
        .iter()
        .map(|(k, v)| (k.clone(), Json::String(v.clone())))
        .collect();
    Ok(json!({
        "file": args.file.display().to_string(),
        "bytes": f.bytes,
        "format_version": f.header.version,
        "pid": f.header.pid,
        "start_unix_ns": f.header.start_unix_ns,
        "properties": properties,
        "events": s.events,
        "duration_ns": s.duration_ns(),
        "first_time_ns": s.first_time_ns,
        "last_time_ns": s.last_time_ns,
        "budget": {
            "demoted": s.methods.iter().filter(|m| m.demoted).count(),
            "reports": s.budget_reports,
            "estimated_overhead_bp": s.budget_bp,
        },
        "events_by_type": s.events_by_type.iter().map(|(t, n)| (t.to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
        "threads": to_value(&s.threads)?,
        "methods": {
            "by_calls": to_value(s.top_methods_by_calls(args.top))?,
            "by_total_time": to_value(s.top_methods_by_total_time(args.top))?,
            "by_self_time": to_value(s.top_methods_by_self_time(args.top))?,
        },
        "exceptions": to_value(&s.exceptions)?,
        "monitors": to_value(&s.monitors[..s.monitors.len().min(args.top)])?,
        "gc": {"count": s.gc_count, "total_ns": s.gc_total_ns},
        "dropped": s.dropped,
        "chunks": {
            "total": f.chunks_total,
            "read": f.chunks_read(),
            "damaged": f.chunks_damaged,
            "tail_truncated": f.tail_truncated,
            "finished_cleanly": !f.unfinished,
        },
    }))
}

/// `2026-11-29 19:21:14 UTC`.
fn utc_time(unix_ns: u64) -> String {
    let t = vmview_options::CivilTime::from_unix((unix_ns / 1_000_000_000) as i64, 0);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    )
}
