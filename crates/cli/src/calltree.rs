//! `vmview calltree`: the call tree of each thread and of all threads —
//! call counts, inclusive and exclusive wall time, CPU time and allocated
//! bytes (when recorded with `metrics=`), monitors held as placeholder
//! nodes, optionally compensated for the tracer's own cost and split by
//! tracing period.
//!
//! The trees come from `vmview_analysis::calltree`; this module reads the
//! trace, picks the trees asked for and renders them as indented text, as
//! one JSON document (keys are a contract: add, never rename), or as
//! collapsed stacks for flame-graph tools.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use clap::{Args, ValueEnum};
use serde_json::{json, Value as Json};
use vmview_analysis::calltree::{
    CallTree, CallTreeBuilder, CallTrees, Node, NodeKey, NodeStats, ReportOptions,
};
use vmview_analysis::EventSink;
use vmview_export::names::{monitor_name, MethodNames};
use vmview_format::{truncated_label, SymbolTable};
use vmview_options::{duration_short as short_ns, Glob};

use crate::error::hinted;
use crate::trace;

const LONG_ABOUT: &str = "\
Show where the time went, call by call: one tree per thread and one for all \
threads merged, each node a calling context (a method under the chain of \
calls that led to it) with its number of calls, inclusive time (the calls \
with everything they called) and exclusive time (their own code and \
untraced callees). Recorded with metrics=cpu,alloc the tree also shows CPU \
time and allocated bytes. A monitor held while calls ran is a placeholder \
node `[monitor CLASS@hash]` with those calls below it.

--compensate subtracts from every node the calibrated cost of the records \
the agent emitted inside it (the CALIBRATION events of the trace), so cheap, \
often-called methods no longer look expensive because they are traced. \
--per-period shows one tree per tracing period (record with period=); the \
default merges them. The trace needs CALL/RETURN events: record with --classes.

--weight samples|cpu|wall|alloc|lock shows the tree of the trace's sampled \
stacks instead, each frame with its total and self weight: samples, CPU \
samples (--sampler cpu, or RUN-state wall samples), wall samples, sampled \
allocation bytes (--events alloc) or time waited on contended monitors \
(--events locks, under the waiting thread's traced call path). The same \
tree as `vmview export --format svg --weight W`.";

const EXAMPLES: &str = "\
Examples:
  vmview calltree trace.vmv
  vmview calltree trace.vmv --thread main --compensate
  vmview calltree trace.vmv --min-share 1% --per-period
  vmview calltree trace.vmv --format collapsed | flamegraph.pl > calls.svg
  vmview calltree trace.vmv --format json | jq '.merged.children[0]'
  vmview calltree trace.vmv --weight cpu --min-share 2%      # record with --events samples";

#[derive(Args)]
#[command(about = "Call trees per thread: counts, inclusive/exclusive wall, CPU and allocation", long_about = LONG_ABOUT, after_long_help = EXAMPLES)]
pub struct CalltreeArgs {
    /// The trace: binary (.vmv) or XML.
    pub(crate) file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
    /// Only threads whose name matches GLOB (`*` any text, `?` one
    /// character; repeatable).
    #[arg(long, value_name = "GLOB")]
    pub(crate) thread: Vec<String>,
    /// Subtract the calibrated cost of the records emitted inside each node.
    #[arg(long)]
    pub(crate) compensate: bool,
    /// One tree per tracing period instead of one merged tree.
    #[arg(long)]
    pub(crate) per_period: bool,
    /// The tree of sampled stacks instead of traced calls, weighed by
    /// samples, cpu (CPU samples), wall (wall samples), alloc (sampled
    /// bytes) or lock (time waited on contended monitors); time and calls
    /// are the traced-call tree (the default).
    #[arg(long, value_enum)]
    pub(crate) weight: Option<crate::export::WeightBy>,
    /// Hide nodes below this share of their tree's total inclusive time:
    /// 0.01 or 1%.
    #[arg(long, value_name = "F", value_parser = parse_share, default_value = "0")]
    pub(crate) min_share: f64,
    /// Keep call paths to N frames from the thread's first traced frame;
    /// deeper calls count in one `[truncated N frames]` node under the last
    /// kept frame (a recursion 40,000 deep stays a tree of N nodes).
    #[arg(long, value_name = "N", default_value_t = vmview_format::DEFAULT_MAX_DEPTH,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_depth: u32,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Format {
    /// Indented trees, for people.
    Text,
    /// One JSON document, for tools.
    Json,
    /// `thread;frame;frame exclusive-ns` lines, for flame-graph tools.
    Collapsed,
}

fn parse_share(s: &str) -> Result<f64, String> {
    let (num, scale) = match s.strip_suffix('%') {
        Some(n) => (n, 100.0),
        None => (s, 1.0),
    };
    match num.trim().parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&(v / scale)) => Ok(v / scale),
        _ => Err(format!(
            "'{s}' is not a share: write a fraction from 0 to 1 (0.01) or a percentage (1%)"
        )),
    }
}

/// One tree to show, with its title.
struct Section {
    title: String,
    period: Option<u32>,
    thread: Option<String>,
    tree: CallTree,
}

pub fn run(args: &CalltreeArgs) -> anyhow::Result<ExitCode> {
    if let Some(w) = args.weight.and_then(crate::export::WeightBy::sampled) {
        return crate::calltree_weighed::run(args, w);
    }
    let new_builder = || {
        let mut builder = CallTreeBuilder::new().max_depth(args.max_depth);
        if !args.thread.is_empty() {
            let globs: Vec<Glob> = args.thread.iter().map(|g| Glob::new(g)).collect();
            builder = builder.select_threads(move |name| globs.iter().any(|g| g.matches(name)));
        }
        builder
    };
    crate::overwrite::refuse_input_as_output(&[&args.file], None)?;
    let mut reader = trace::Input::open(&args.file)?;
    let ((builder, notes), events) = reader.fold(
        || {
            (
                new_builder(),
                vmview_analysis::budget::BudgetNotes::default(),
            )
        },
        |(b, n), ev, syms| {
            n.event(ev, syms);
            b.event(ev, syms)
        },
    )?;
    let trees = builder.finish();
    let diags = reader.diagnostics().to_vec();
    let syms = reader.symbols();
    if args.compensate && trees.calibration.is_none() {
        bail!(hinted(
            format!(
                "{} has no CALIBRATION event, so there is no cost to compensate",
                args.file.display()
            ),
            "record it again with a vmview agent that calibrates (this one does), or leave out --compensate",
        ));
    }
    if args.per_period && trees.periods.is_empty() {
        say!(
            "vmview: note: {} has no tracing periods (record with period=ON/OFF); showing the whole trace",
            args.file.display()
        );
    }
    let sections = sections(args, &trees);
    let mut out = io::stdout().lock();
    match args.format {
        Format::Text => out.write_all(render_text(args, &trees, &sections, syms).as_bytes())?,
        Format::Json => {
            let doc = render_json(args, &trees, &sections, syms);
            // Compact: indentation grows with the nesting, and a tree at the
            // depth cap pretty-printed was 63 MB.
            serde_json::to_writer(&mut out, &doc).map_err(io::Error::from)?;
            out.write_all(b"\n")?;
        }
        Format::Collapsed => out.write_all(render_collapsed(args, &sections, syms).as_bytes())?,
    }
    out.flush()?;
    trace::warn_diagnostics(&diags, events);
    if trees.threads.is_empty() {
        say!(
            "vmview: note: no CALL or RETURN event{} in {}; record with --classes to trace methods",
            if args.thread.is_empty() {
                ""
            } else {
                " of the selected threads"
            },
            args.file.display()
        );
    }
    if let Some(note) =
        notes.note("a caller's time includes theirs and they appear with their traced calls only")
    {
        say!("vmview: note: {note}");
    }
    if trees.unmatched_returns > 0 {
        say!(
            "vmview: note: {} RETURN events had no CALL (recording began inside those calls, or events were dropped); they are not in the trees",
            trees.unmatched_returns
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Per thread then all threads; per period when asked.
fn sections(args: &CalltreeArgs, trees: &CallTrees) -> Vec<Section> {
    let mut out = Vec::new();
    let periods: Vec<Option<u32>> = if args.per_period && !trees.periods.is_empty() {
        trees.periods.iter().map(|p| Some(*p)).collect()
    } else {
        vec![None]
    };
    let per_period = periods != [None];
    for period in periods {
        let prefix = match period {
            Some(p) => format!("period {p}, "),
            None => String::new(),
        };
        let mut shown = 0;
        for th in &trees.threads {
            let tree = if per_period {
                match th.period(period) {
                    Some(t) => {
                        let mut m = CallTree::new();
                        m.merge(t);
                        m
                    }
                    None => continue,
                }
            } else {
                th.merged()
            };
            shown += 1;
            out.push(Section {
                title: format!("{prefix}thread {}", th.name),
                period,
                thread: Some(th.name.clone()),
                tree,
            });
        }
        if shown > 1 {
            out.push(Section {
                title: format!("{prefix}all threads"),
                period,
                thread: None,
                tree: if per_period {
                    trees.period(period)
                } else {
                    trees.merged()
                },
            });
        }
    }
    out
}

fn node_name(node: &Node, syms: &SymbolTable) -> String {
    match node.key {
        NodeKey::Root => "(root)".to_string(),
        NodeKey::Truncated => truncated_label(node.truncated),
        NodeKey::Method(m) => {
            let n = MethodNames::resolve(syms, m);
            format!("{}.{}", n.class, n.name)
        }
        NodeKey::Monitor(m) => format!("[monitor {}]", monitor_name(syms, &m)),
    }
}

/// Inclusive and exclusive wall time as asked (compensated or not).
fn wall(args: &CalltreeArgs, s: &NodeStats) -> (u64, u64) {
    if args.compensate {
        (s.comp_incl_ns, s.comp_excl_ns)
    } else {
        (s.wall_incl_ns, s.wall_excl_ns)
    }
}

/// Three significant digits with a unit: `812ns`, `45.6µs`, `12.3ms`, `1.50s`.
pub(crate) fn short_bytes(b: u64) -> String {
    let f = b as f64;
    if b < 1024 {
        format!("{b}B")
    } else if b < 1 << 20 {
        format!("{:.1}KiB", f / 1024.0)
    } else if b < 1 << 30 {
        format!("{:.1}MiB", f / f64::from(1 << 20))
    } else {
        format!("{:.2}GiB", f / f64::from(1 << 30))
    }
}

/// Children to show, biggest inclusive time first, above the cut-off.
fn visible(args: &CalltreeArgs, tree: &CallTree, node: u32, total: u64) -> Vec<u32> {
    let mut kids: Vec<u32> = tree
        .node(node)
        .children
        .iter()
        .copied()
        .filter(|c| {
            let incl = wall(args, &tree.node(*c).stats).0;
            args.min_share <= 0.0 || (incl as f64) >= args.min_share * total as f64
        })
        .collect();
    kids.sort_by_key(|c| std::cmp::Reverse(wall(args, &tree.node(*c).stats).0));
    kids
}

fn render_text(
    args: &CalltreeArgs,
    trees: &CallTrees,
    sections: &[Section],
    syms: &SymbolTable,
) -> String {
    let mut o = String::new();
    if args.compensate {
        if let Some(c) = &trees.calibration {
            let costs: Vec<String> = c
                .costs
                .iter()
                .map(|(k, ps)| format!("{k} {:.1}ns", *ps as f64 / 1000.0))
                .collect();
            let _ = writeln!(
                o,
                "compensated: wall times less the calibrated cost per record ({})\n",
                costs.join(", ")
            );
        }
    }
    let (cpu, alloc) = (trees.has_cpu, trees.has_alloc);
    for (i, s) in sections.iter().enumerate() {
        if i > 0 {
            o.push('\n');
        }
        let total = wall(args, &s.tree.node(CallTree::ROOT).stats).0;
        let _ = writeln!(o, "== {} ({} traced) ==", s.title, short_ns(total));
        let mut head = format!("{:>9} {:>9} {:>9} {:>6}", "calls", "incl", "excl", "share");
        if cpu {
            head += &format!(" {:>9} {:>9}", "cpu incl", "cpu excl");
        }
        if alloc {
            head += &format!(" {:>9} {:>9}", "alloc inc", "alloc exc");
        }
        let _ = writeln!(o, "{head}  method");
        let mut stack: Vec<(u32, usize)> = visible(args, &s.tree, CallTree::ROOT, total)
            .into_iter()
            .rev()
            .map(|c| (c, 0))
            .collect();
        while let Some((n, level)) = stack.pop() {
            let node = s.tree.node(n);
            let st = &node.stats;
            let (incl, excl) = wall(args, st);
            let share = if total > 0 {
                100.0 * incl as f64 / total as f64
            } else {
                0.0
            };
            let mut line = format!(
                "{:>9} {:>9} {:>9} {:>5.1}%",
                st.calls,
                short_ns(incl),
                short_ns(excl),
                share
            );
            if cpu {
                line += &format!(
                    " {:>9} {:>9}",
                    short_ns(st.cpu_incl_ns),
                    short_ns(st.cpu_excl_ns)
                );
            }
            if alloc {
                line += &format!(
                    " {:>9} {:>9}",
                    short_bytes(st.alloc_incl),
                    short_bytes(st.alloc_excl)
                );
            }
            let _ = writeln!(o, "{line}  {}{}", "  ".repeat(level), node_name(node, syms));
            for c in visible(args, &s.tree, n, total).into_iter().rev() {
                stack.push((c, level + 1));
            }
        }
    }
    if sections.is_empty() {
        o.push_str("(no traced calls)\n");
    }
    o
}

/// Node `n` and its visible subtree, in the analysis' report schema.
fn node_json(
    args: &CalltreeArgs,
    tree: &CallTree,
    n: u32,
    total: u64,
    trees: &CallTrees,
    syms: &SymbolTable,
) -> Json {
    let visible = |t: &CallTree, c: u32| visible(args, t, c, total);
    let report = tree.report(
        n,
        &ReportOptions {
            syms,
            monitor_name: &|m| monitor_name(syms, m),
            compensated: trees.calibration.is_some(),
            cpu: trees.has_cpu,
            alloc: trees.has_alloc,
            visible: &visible,
        },
    );
    serde_json::to_value(report).unwrap_or(Json::Null)
}

fn render_json(
    args: &CalltreeArgs,
    trees: &CallTrees,
    sections: &[Section],
    syms: &SymbolTable,
) -> Json {
    let tree_json = |s: &Section| {
        let total = wall(args, &s.tree.node(CallTree::ROOT).stats).0;
        node_json(args, &s.tree, CallTree::ROOT, total, trees, syms)
    };
    let threads: Vec<Json> = sections
        .iter()
        .filter(|s| s.thread.is_some())
        .map(|s| {
            let mut j = json!({"thread": s.thread, "tree": tree_json(s)});
            if let Some(p) = s.period {
                j["period"] = json!(p);
            }
            j
        })
        .collect();
    let merged: Vec<Json> = sections
        .iter()
        .filter(|s| s.thread.is_none())
        .map(|s| {
            let mut j = tree_json(s);
            if let Some(p) = s.period {
                j["period"] = json!(p);
            }
            j
        })
        .collect();
    let merged = if args.per_period {
        Json::Array(merged)
    } else {
        // One thread: its tree is the merged one.
        match merged.into_iter().next() {
            Some(m) => m,
            None => sections.first().map(tree_json).unwrap_or_else(|| {
                tree_json(&Section {
                    title: String::new(),
                    period: None,
                    thread: None,
                    tree: CallTree::new(),
                })
            }),
        }
    };
    json!({
        "file": args.file.display().to_string(),
        "compensated": args.compensate,
        "calibration": trees.calibration.as_ref().map(|c| {
            c.costs.iter().map(|(k, ps)| json!({"record": k, "cost_ps": ps})).collect::<Vec<_>>()
        }),
        "periods": trees.periods,
        "unmatched_returns": trees.unmatched_returns,
        "threads": threads,
        "merged": merged,
    })
}

/// Folded stacks: `thread;a;b 1234` with the exclusive wall time in ns.
fn render_collapsed(args: &CalltreeArgs, sections: &[Section], syms: &SymbolTable) -> String {
    let mut o = String::new();
    for s in sections.iter().filter(|s| s.thread.is_some()) {
        let total = wall(args, &s.tree.node(CallTree::ROOT).stats).0;
        let mut root = s.thread.clone().unwrap_or_default().replace(';', ":");
        if let Some(p) = s.period {
            root = format!("period {p};{root}");
        }
        let mut stack: Vec<(u32, String)> = visible(args, &s.tree, CallTree::ROOT, total)
            .into_iter()
            .map(|c| (c, root.clone()))
            .collect();
        while let Some((n, prefix)) = stack.pop() {
            let node = s.tree.node(n);
            let path = format!("{prefix};{}", node_name(node, syms).replace(';', ":"));
            let excl = wall(args, &node.stats).1;
            if excl > 0 {
                let _ = writeln!(o, "{path} {excl}");
            }
            for c in visible(args, &s.tree, n, total) {
                stack.push((c, path.clone()));
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_fractions_or_percentages() {
        assert_eq!(parse_share("0.25"), Ok(0.25));
        assert_eq!(parse_share("5%"), Ok(0.05));
        assert!(parse_share("150%").is_err());
        assert!(parse_share("lots").is_err());
    }

    #[test]
    fn bytes_keep_one_decimal() {
        assert_eq!(short_bytes(4096), "4.0KiB");
    }
}
