//! `vmview calltree --weight samples|cpu|wall|alloc|lock`: the tree of the
//! trace's sampled stacks instead of its traced calls.
//!
//! Sampled stacks hold JDK frames and untraced code, which a CALL/RETURN
//! tree never shows, and they exist without `--classes`. The tree is the
//! one the flame graphs fold (`vmview_export::collapsed::CallTree`, with
//! one subtree per thread), so `calltree --weight cpu` and `export --format
//! svg --weight cpu` always agree; this module only renders it: each node
//! with its total weight (the node and everything below it), its self
//! weight (stacks ending there) and its share of the tree's total.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::bail;
use serde_json::{json, Value as Json};
use vmview_export::collapsed::CallTree as Folded;
use vmview_export::{CollapseOptions, SampleWeight, Weight};
use vmview_format::{SymbolTable, ThreadRef};
use vmview_options::{duration_short as short_ns, Glob};

use crate::calltree::{CalltreeArgs, Format};
use crate::error::hinted;
use crate::export::weight_error;
use crate::trace;

/// A folded tree with its children lists and totals.
struct Shaped {
    tree: Folded,
    children: Vec<Vec<u32>>,
    total: Vec<u64>,
}

impl Shaped {
    fn new(mut tree: Folded) -> Shaped {
        tree.close_open_calls();
        let n = tree.len();
        let mut children = vec![Vec::new(); n];
        let mut total: Vec<u64> = (0..n).map(|i| tree.node(i).samples).collect();
        // Children come after their parent: one backward pass sums them.
        for i in (1..n).rev() {
            let p = tree.node(i).parent as usize;
            total[p] += total[i];
            children[p].push(i as u32);
        }
        for c in &mut children {
            c.sort_by_key(|&k| std::cmp::Reverse(total[k as usize]));
        }
        Shaped {
            tree,
            children,
            total,
        }
    }

    fn own(&self, i: u32) -> u64 {
        self.tree.node(i as usize).samples
    }
}

/// A weight for people: samples as a count, bytes and nanoseconds with units.
fn show(w: SampleWeight, v: u64) -> String {
    match w {
        SampleWeight::Alloc => crate::calltree::short_bytes(v),
        SampleWeight::Lock => short_ns(v),
        _ => v.to_string(),
    }
}

pub fn run(args: &CalltreeArgs, weight: SampleWeight) -> anyhow::Result<ExitCode> {
    if args.compensate || args.per_period {
        bail!(hinted(
            "--compensate and --per-period apply to the tree of traced calls, not to sampled stacks",
            "leave them out with --weight samples, cpu, wall, alloc or lock",
        ));
    }
    crate::overwrite::refuse_input_as_output(&[&args.file], None)?;
    let mut reader = trace::Input::open(&args.file)?;
    let opts = |thread_frames| CollapseOptions {
        weight: Weight::Sampled(weight),
        thread_frames,
        max_depth: args.max_depth,
        frame_types: false,
    };
    let header = reader.header().clone();
    vmview_export::Weigher::new(weight, &header).map_err(|e| weight_error(&e))?;
    let fresh = |thread_frames| {
        Folded::for_trace(opts(thread_frames), &header)
            .unwrap_or_else(|_| Folded::new(opts(thread_frames)))
    };
    let globs: Vec<Glob> = args.thread.iter().map(|g| Glob::new(g)).collect();
    let ((per_thread, merged, _), events) = reader.fold(
        || (fresh(true), fresh(false), HashMap::<ThreadRef, bool>::new()),
        |(t, m, keep), ev, syms| {
            let kept = *keep.entry(ev.thread).or_insert_with(|| {
                globs.is_empty()
                    || globs
                        .iter()
                        .any(|g| g.matches(&syms.thread_name(ev.thread)))
            });
            if kept {
                t.add(ev, syms);
                m.add(ev, syms);
            }
        },
    )?;
    if let Err(e) = per_thread.check() {
        return Err(weight_error(&e));
    }
    let diags = reader.diagnostics().to_vec();
    let syms = reader.symbols();
    let threads = Shaped::new(per_thread);
    let merged = Shaped::new(merged);
    let mut out = io::stdout().lock();
    match args.format {
        Format::Text => out.write_all(text(args, weight, &threads, &merged).as_bytes())?,
        Format::Json => {
            serde_json::to_writer(&mut out, &document(args, weight, &threads, &merged, syms))
                .map_err(io::Error::from)?;
            out.write_all(b"\n")?;
        }
        Format::Collapsed => {
            for line in threads.tree.folded() {
                out.write_all(line.as_bytes())?;
                out.write_all(b"\n")?;
            }
        }
    }
    out.flush()?;
    trace::warn_diagnostics(&diags, events);
    Ok(ExitCode::SUCCESS)
}

/// Children of `n` above `--min-share` of `total`.
fn visible<'a>(
    args: &CalltreeArgs,
    s: &'a Shaped,
    n: u32,
    total: u64,
) -> impl Iterator<Item = u32> + 'a {
    let min = args.min_share * total as f64;
    s.children[n as usize]
        .iter()
        .copied()
        // Lock weights place waits under traced calls; calls without a
        // wait weigh nothing and are not shown.
        .filter(move |&c| {
            s.total[c as usize] > 0 && (min <= 0.0 || s.total[c as usize] as f64 >= min)
        })
}

fn text(args: &CalltreeArgs, weight: SampleWeight, threads: &Shaped, merged: &Shaped) -> String {
    let mut o = String::new();
    let mut sections: Vec<(String, &Shaped, u32)> = visible(args, threads, 0, 0)
        .map(|t| {
            (
                format!("thread {}", threads.tree.label(t as usize)),
                threads,
                t,
            )
        })
        .collect();
    if sections.len() > 1 {
        sections.push(("all threads".to_string(), merged, 0));
    }
    for (i, (title, s, root)) in sections.iter().enumerate() {
        if i > 0 {
            o.push('\n');
        }
        let total = s.total[*root as usize];
        let _ = writeln!(
            o,
            "== {title} ({} {}) ==",
            show(weight, total),
            match weight {
                SampleWeight::Samples => "samples",
                SampleWeight::Cpu => "CPU samples",
                SampleWeight::Wall => "wall samples",
                SampleWeight::Alloc => "sampled allocation",
                SampleWeight::Lock => "waited on monitors",
            }
        );
        let _ = writeln!(o, "{:>9} {:>9} {:>6}  frame", "total", "self", "share");
        let mut stack: Vec<(u32, usize)> = {
            let mut v: Vec<u32> = visible(args, s, *root, total).collect();
            v.reverse();
            v.into_iter().map(|c| (c, 0)).collect()
        };
        while let Some((n, level)) = stack.pop() {
            let t = s.total[n as usize];
            let share = if total > 0 {
                100.0 * t as f64 / total as f64
            } else {
                0.0
            };
            let _ = writeln!(
                o,
                "{:>9} {:>9} {:>5.1}%  {}{}",
                show(weight, t),
                show(weight, s.own(n)),
                share,
                "  ".repeat(level),
                s.tree.label(n as usize)
            );
            let mut kids: Vec<u32> = visible(args, s, n, total).collect();
            kids.reverse();
            stack.extend(kids.into_iter().map(|c| (c, level + 1)));
        }
    }
    if sections.is_empty() {
        o.push_str("(no sampled stacks)\n");
    }
    o
}

fn node_json(args: &CalltreeArgs, s: &Shaped, n: u32, total: u64) -> Json {
    let children: Vec<Json> = visible(args, s, n, total)
        .map(|c| node_json(args, s, c, total))
        .collect();
    json!({
        "frame": s.tree.label(n as usize),
        "total": s.total[n as usize],
        "self": s.own(n),
        "children": children,
    })
}

fn document(
    args: &CalltreeArgs,
    weight: SampleWeight,
    threads: &Shaped,
    merged: &Shaped,
    _syms: &SymbolTable,
) -> Json {
    let per_thread: Vec<Json> = visible(args, threads, 0, 0)
        .map(|t| {
            let total = threads.total[t as usize];
            let children: Vec<Json> = visible(args, threads, t, total)
                .map(|c| node_json(args, threads, c, total))
                .collect();
            json!({
                "thread": threads.tree.label(t as usize),
                "total": total,
                "children": children,
            })
        })
        .collect();
    let total = merged.total[0];
    let children: Vec<Json> = visible(args, merged, 0, total)
        .map(|c| node_json(args, merged, c, total))
        .collect();
    json!({
        "file": args.file.display().to_string(),
        "weight": weight.name(),
        "unit": weight.unit(),
        "threads": per_thread,
        "merged": {"total": total, "children": children},
    })
}
