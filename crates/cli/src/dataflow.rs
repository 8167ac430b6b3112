//! `vmview dataflow`: per traced method, the distribution of its argument
//! and return values — the IBM patents' data-flow profile, which tells what
//! a method is actually called with and what it actually returns.
//!
//! The profiles come from `vmview_analysis::dataflow`; this module reads the
//! trace, selects methods and renders the result as text for people or as
//! one JSON document for tools. The JSON keys are a contract (docs/DATAFLOW.md,
//! "Data-flow profiles"): add keys, never rename or remove them.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde_json::{json, Value as Json};
use vmview_analysis::dataflow::{
    DataflowBuilder, DataflowProfile, LengthStats, MethodProfile, MethodReport, Number,
    NumberStats, ReportNames, SeenValue, ValueProfile, DEFAULT_TOP, TRACKED_VALUES,
};
use vmview_analysis::EventSink;
use vmview_export::names::{array_display, descriptor_types, hash_hex};
use vmview_options::ClassFilter;

use crate::error::hinted;
use crate::trace;

const LONG_ABOUT: &str = "\
Profile the values that flow through each traced method: for every argument \
(by name and declared type) and for the return value, the runtime types seen, \
how many were null, the most frequent values with their counts, min / max / \
mean / p50 / p90 / p99 of numbers and the lengths of Strings and arrays; and \
the exceptions that ended calls, by class.

Counts are exact while a place has seen at most 128 distinct values; past \
that the counts of frequent values are upper bounds with a stated error. \
Percentiles are exact over the first 1024 numbers, then come from a \
histogram (within 0.4 % for values spanning up to 8 powers of two). The \
trace needs CALL/RETURN events with values: record with --classes.";

const EXAMPLES: &str = "\
Examples:
  vmview dataflow trace.vmv
  vmview dataflow trace.vmv --method 'shop.Inventory.*'
  vmview dataflow trace.vmv --method '*.parse*' --top 3
  vmview dataflow trace.vmv --format json | jq '.methods[] | select(.exceptional_returns > 0)'";

#[derive(Args)]
#[command(about = "Argument and return-value distributions per traced method", long_about = LONG_ABOUT, after_long_help = EXAMPLES)]
pub struct DataflowArgs {
    /// The trace: binary (.vmv) or XML.
    file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Only methods matching these globs ('+'-separated), matched against
    /// `class.method` and against the class alone: 'shop.Inventory.add',
    /// 'shop.Inventory' (all its methods), '*.parse*', 'shop.*'.
    #[arg(long, value_name = "GLOB")]
    method: Option<String>,
    /// How many of the most frequent values to list per argument.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_TOP)]
    top: usize,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// Indented sections, for people.
    Text,
    /// One JSON document, for tools.
    Json,
}

/// The builder for `args`; `--method` parsed (and checked by the caller).
fn new_builder(args: &DataflowArgs) -> anyhow::Result<DataflowBuilder> {
    let mut builder = DataflowBuilder::new().top(args.top);
    if let Some(globs) = &args.method {
        let filter = ClassFilter::parse(globs).map_err(|e| {
            hinted(
                format!("--method {globs:?}: {e}"),
                "write class.method globs such as 'shop.Inventory.add', '*.parse*' or 'shop.*'",
            )
        })?;
        builder = builder.select(move |class, name| {
            filter.matches(class) || filter.matches(&format!("{class}.{name}"))
        });
    }
    Ok(builder)
}

pub fn run(args: &DataflowArgs) -> anyhow::Result<ExitCode> {
    let builder = new_builder(args)?;
    if args.top > TRACKED_VALUES {
        say!(
            "vmview: note: --top {} lists at most {TRACKED_VALUES} values",
            args.top
        );
    }

    crate::overwrite::refuse_input_as_output(&[&args.file], None)?;
    let mut reader = trace::Input::open(&args.file)?;
    let mut builder = Some(builder);
    let ((builder, notes), events) = reader.fold(
        || {
            let b = builder
                .take()
                .or_else(|| new_builder(args).ok())
                .unwrap_or_default();
            (b, vmview_analysis::budget::BudgetNotes::default())
        },
        |(b, n), ev, syms| {
            n.event(ev, syms);
            b.event(ev, syms)
        },
    )?;
    let profile = builder.finish(reader.symbols());
    let diags = reader.diagnostics().to_vec();

    let mut out = io::stdout().lock();
    match args.format {
        Format::Text => out.write_all(render_text(&profile).as_bytes())?,
        Format::Json => {
            let doc = render_json(args, &profile);
            serde_json::to_writer_pretty(&mut out, &doc).map_err(io::Error::from)?;
            out.write_all(b"\n")?;
        }
    }
    out.flush()?;
    trace::warn_diagnostics(&diags, events);
    if let Some(note) = notes.note("their values are those of the traced calls only") {
        say!("vmview: note: {note}");
    }
    if profile.methods.is_empty() {
        say!(
            "vmview: note: no CALL or RETURN event{} in {}; record with --classes to trace methods",
            if args.method.is_some() {
                " of the selected methods"
            } else {
                ""
            },
            args.file.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Declared parameter types and return type from the descriptor, `?` where
/// it is damaged.
fn declared_types(m: &MethodProfile) -> (Vec<String>, String) {
    descriptor_types(&m.sig).unwrap_or_else(|| (Vec::new(), "?".to_string()))
}

fn render_text(p: &DataflowProfile) -> String {
    let mut o = String::new();
    for (i, m) in p.methods.iter().enumerate() {
        if i > 0 {
            o.push('\n');
        }
        let (param_types, ret_type) = declared_types(m);
        o.push_str(&format!("{}.{}{}\n", m.class, m.name, m.sig));
        o.push_str(&format!(
            "  {} calls, {} returns ({} by exception)\n",
            m.calls, m.returns, m.exceptional_returns
        ));
        for (j, param) in m.params.iter().enumerate() {
            let ty = param_types.get(j).map_or("?", String::as_str);
            o.push_str(&format!("  param {}: {ty}\n", param.name));
            profile_text(&mut o, &param.values);
        }
        if m.calls > 0 && m.params.len() < param_types.len() {
            o.push_str(&format!(
                "  params: {} not captured (recorded with args=off?)\n",
                param_types.len() - m.params.len()
            ));
        }
        match &m.returned {
            Some(r) if r.unavailable == r.count => {
                o.push_str(&format!("  return: {ret_type}, not captured\n"));
            }
            Some(r) => {
                o.push_str(&format!("  return: {ret_type}\n"));
                profile_text(&mut o, r);
            }
            None => {}
        }
        if !m.exceptions.is_empty() {
            o.push_str("  exceptions\n");
            let w = m.exceptions.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
            for (class, n) in &m.exceptions {
                o.push_str(&format!("    {class:<w$}  {n}\n"));
            }
        }
    }
    if p.methods.is_empty() {
        o.push_str("(no traced methods)\n");
    }
    o
}

fn profile_text(o: &mut String, v: &ValueProfile) {
    let mut line = format!("    values   {}", v.count);
    line += &format!(", {} null", v.nulls);
    if v.unavailable > 0 {
        line += &format!(", {} not captured", v.unavailable);
    }
    let distinct = if v.distinct_exact {
        format!(", {} distinct", v.distinct)
    } else {
        format!(", about {} distinct", v.distinct)
    };
    line += &distinct;
    o.push_str(&line);
    o.push('\n');
    if !v.types.is_empty() {
        let mut types: Vec<String> = v.types.iter().map(|(t, n)| format!("{t} {n}")).collect();
        if v.other_types > 0 {
            types.push(format!("other types {}", v.other_types));
        }
        o.push_str(&format!("    types    {}\n", types.join(", ")));
    }
    if let Some(n) = &v.numbers {
        o.push_str(&format!("    numbers  {}\n", numbers_text(n)));
    }
    if let Some(l) = &v.lengths {
        o.push_str(&format!("    lengths  {}\n", lengths_text(l)));
    }
    if !v.top.is_empty() {
        let cells: Vec<(String, String)> = v
            .top
            .iter()
            .map(|t| {
                let count = if t.count_error == 0 {
                    t.count.to_string()
                } else {
                    format!("{} (±{})", t.count, t.count_error)
                };
                (value_text(&t.value), count)
            })
            .chain((v.other > 0).then(|| ("(other)".to_string(), v.other.to_string())))
            .collect();
        let w = cells
            .iter()
            .map(|(c, _)| c.chars().count())
            .max()
            .unwrap_or(0);
        let wn = cells.iter().map(|(_, n)| n.len()).max().unwrap_or(0);
        o.push_str("    top\n");
        for (value, count) in cells {
            let pad = w - value.chars().count();
            o.push_str(&format!("      {value}{}  {count:>wn$}\n", " ".repeat(pad)));
        }
    }
}

fn numbers_text(n: &NumberStats) -> String {
    let mut s = format!(
        "min {}  max {}  mean {}  p50 {}  p90 {}  p99 {}",
        number_text(n.min),
        number_text(n.max),
        float_text(n.mean),
        number_text(n.p50),
        number_text(n.p90),
        number_text(n.p99)
    );
    if !n.percentiles_exact {
        s.push_str("  (percentiles from a histogram)");
    }
    if n.nan > 0 {
        s.push_str(&format!("  NaN {}", n.nan));
    }
    s
}

fn lengths_text(l: &LengthStats) -> String {
    format!("min {}  max {}  mean {}", l.min, l.max, float_text(l.mean))
}

fn number_text(n: Number) -> String {
    match n {
        Number::Int(i) => i.to_string(),
        Number::Float(f) => float_text(f),
    }
}

/// A float with at most 3 decimals, trailing zeros dropped.
fn float_text(f: f64) -> String {
    if !f.is_finite() {
        return f.to_string();
    }
    let s = format!("{f:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// A value as the text exporter shows one: Strings and chars quoted.
fn value_text(v: &SeenValue) -> String {
    match v {
        SeenValue::Boolean(b) => b.to_string(),
        SeenValue::Char(c) => format!("{:?}", char_of(*c)),
        SeenValue::Integer(i) => i.to_string(),
        SeenValue::Float(f) => f.to_string(),
        SeenValue::Str { text, full_len } => {
            let mut s = format!("{text:?}");
            if let Some(full) = full_len {
                let cut = u64::from(*full).saturating_sub(text.encode_utf16().count() as u64);
                s.push_str(&format!("…(+{cut} chars)"));
            }
            s
        }
        SeenValue::Array { class, length } => array_display(class, *length),
        SeenValue::Object { class, hash } => format!("{class}@{}", hash_hex(*hash)),
    }
}

fn char_of(c: u16) -> char {
    char::from_u32(u32::from(c)).unwrap_or('\u{fffd}')
}

/// The profiles in the analysis' report schema, with the file name.
fn render_json(args: &DataflowArgs, p: &DataflowProfile) -> Json {
    let types = |sig: &str| descriptor_types(sig).unwrap_or_else(|| (Vec::new(), "?".to_string()));
    let names = ReportNames {
        types: &types,
        text: &value_text_unquoted,
    };
    let methods: Vec<MethodReport> = p.methods.iter().map(|m| m.report(&names)).collect();
    json!({
        "file": args.file.display().to_string(),
        "methods": serde_json::to_value(methods).unwrap_or(Json::Null),
    })
}

fn value_text_unquoted(v: &SeenValue) -> String {
    match v {
        SeenValue::Str { text, full_len } => {
            let mut s = text.clone();
            if let Some(full) = full_len {
                let cut = u64::from(*full).saturating_sub(text.encode_utf16().count() as u64);
                s.push_str(&format!("…(+{cut} chars)"));
            }
            s
        }
        other => value_text(other),
    }
}
