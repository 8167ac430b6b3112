//! The analyses behind the page's views, computed in one pass over the
//! trace and handed to the page as one JSON document.
//!
//! Each view needs the whole trace (a count of exceptions, a call tree, a
//! flame graph), so they are gathered together in a single read instead of
//! one read per view; memory grows with distinct methods, threads,
//! exception sites and monitors, not with events. The numbers come from
//! the existing analyses (`vmview-analysis` statistics, `vmview-export`'s
//! call tree and inferno flame graph, the reactions analysis of SAMPLE
//! events) so the page and the CLI agree.

use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value as Json};
use vmview_analysis::calltree::{CallTree, CallTreeBuilder, CallTrees, ReportOptions};
use vmview_analysis::reactions::{MethodRef, Reactions};
use vmview_analysis::{EventSink, ReactionConfig, ReactionTrie, StatsBuilder};
use vmview_export::names::{loc_display, monitor_name, MethodNames};
use vmview_export::{CollapseOptions, EventWriter, FlameGraphWriter, Weight};
use vmview_format::{Event, EventKind, MethodId, SymbolTable};

/// Columns of the threads timeline.
pub const TIMELINE_BUCKETS: usize = 120;
/// Distinct throw → catch site pairs listed (the rest are counted).
const MAX_SITES: usize = 5_000;
/// Call-tree nodes sent to the page (the heaviest first).
const MAX_TREE_NODES: usize = 20_000;
/// Reaction-trie nodes sent to the page (the most sampled first).
const MAX_TRIE_NODES: usize = 5_000;

/// Feeds every event of a trace; [`TraceAnalysis::finish`] gives the JSON
/// of the views and the flame-graph SVG.
pub struct TraceAnalysis {
    stats: StatsBuilder,
    /// Each thread's call tree, as `vmview calltree` builds it.
    calltree: CallTreeBuilder,
    flame: FlameGraphWriter<SharedBuf>,
    svg: SharedBuf,
    sites: HashMap<(String, String, Option<String>), Site>,
    sites_dropped: u64,
    threads: HashMap<u32, ThreadLine>,
    duration_ns: u64,
    reactions: ReactionTrie,
}

struct Site {
    count: u64,
    first_id: u64,
}

struct ThreadLine {
    name: String,
    first_ns: u64,
    last_ns: u64,
    events: u64,
    first_id: u64,
    buckets: Vec<u32>,
}

impl TraceAnalysis {
    /// `duration_ns` (from the index) spreads the timeline's columns; `title`
    /// heads the flame graph.
    pub fn new(duration_ns: u64, title: &str) -> Self {
        let opts = |weight| CollapseOptions {
            weight,
            thread_frames: true,
            ..CollapseOptions::default()
        };
        let svg = SharedBuf::default();
        TraceAnalysis {
            flame: FlameGraphWriter::new(svg.clone(), opts(Weight::SelfTime), title),
            svg,
            stats: StatsBuilder::new(),
            calltree: CallTreeBuilder::new(),
            sites: HashMap::new(),
            sites_dropped: 0,
            threads: HashMap::new(),
            duration_ns: duration_ns.max(1),
            reactions: ReactionTrie::new(ReactionConfig::default()),
        }
    }

    /// Reads the reactions analysis' user/library split from the trace
    /// header (`app_packages`); call before the first event.
    pub fn use_header(&mut self, properties: &[(String, String)]) {
        self.reactions = ReactionTrie::new(ReactionConfig::for_trace(properties));
    }

    pub fn event(&mut self, ev: &Event, syms: &SymbolTable) {
        self.stats.event(ev, syms);
        self.reactions.event(ev, syms);
        self.calltree.event(ev, syms);
        let _ = self.flame.write_event(ev, syms);
        let bucket = ((u128::from(ev.time_ns) * TIMELINE_BUCKETS as u128
            / u128::from(self.duration_ns)) as usize)
            .min(TIMELINE_BUCKETS - 1);
        let line = self
            .threads
            .entry(ev.thread.0)
            .or_insert_with(|| ThreadLine {
                name: syms.thread(ev.thread).map_or_else(
                    || format!("thread {}", ev.thread.0),
                    |t| syms.string(t.name).to_string(),
                ),
                first_ns: ev.time_ns,
                last_ns: ev.time_ns,
                events: 0,
                first_id: ev.id,
                buckets: vec![0; TIMELINE_BUCKETS],
            });
        line.events += 1;
        line.first_ns = line.first_ns.min(ev.time_ns);
        line.last_ns = line.last_ns.max(ev.time_ns);
        line.buckets[bucket] = line.buckets[bucket].saturating_add(1);
        if let EventKind::Throw {
            exception,
            method,
            loc,
            catch,
            ..
        } = &ev.kind
        {
            let thrown_at = format!(
                "{} {}",
                MethodNames::resolve(syms, *method).display(),
                loc_display(loc)
            );
            let caught_at = catch.as_ref().map(|(m, l)| {
                format!(
                    "{} {}",
                    MethodNames::resolve(syms, *m).display(),
                    loc_display(l)
                )
            });
            let key = (syms.string(*exception).to_string(), thrown_at, caught_at);
            let full = self.sites.len() >= MAX_SITES;
            match self.sites.get_mut(&key) {
                Some(s) => s.count += 1,
                None if full => self.sites_dropped += 1,
                None => {
                    self.sites.insert(
                        key,
                        Site {
                            count: 1,
                            first_id: ev.id,
                        },
                    );
                }
            }
        }
    }

    /// The views' JSON and the flame graph's SVG; `syms` names the
    /// reactions' handles.
    pub fn finish(mut self, syms: &SymbolTable) -> io::Result<(Json, String)> {
        let reactions = self.reactions.finish();
        let reactions = if reactions.samples == 0 {
            Json::Null
        } else {
            reactions_json(&reactions, syms).map_err(io::Error::other)?
        };
        let stats = self.stats.finish();
        self.flame.finish()?;
        let svg = String::from_utf8_lossy(&self.svg.0.lock().unwrap_or_else(|p| p.into_inner()))
            .into_owned();

        let mut sites: Vec<_> = self.sites.into_iter().collect();
        sites.sort_by(|a, b| {
            b.1.count
                .cmp(&a.1.count)
                .then(a.1.first_id.cmp(&b.1.first_id))
        });
        let sites: Vec<Json> = sites
            .into_iter()
            .map(|((exception, thrown_at, caught_at), s)| {
                json!({"exception": exception, "thrown_at": thrown_at, "caught_at": caught_at,
                       "count": s.count, "first_id": s.first_id})
            })
            .collect();

        let mut threads: Vec<ThreadLine> = self.threads.into_values().collect();
        threads.sort_by_key(|t| (t.first_ns, t.first_id));
        let threads: Vec<Json> = threads
            .into_iter()
            .map(|t| {
                json!({"name": t.name, "first_ns": t.first_ns, "last_ns": t.last_ns,
                       "events": t.events, "first_id": t.first_id, "buckets": t.buckets})
            })
            .collect();

        let tree = call_trees_json(&self.calltree.finish(), syms).map_err(io::Error::other)?;

        let to_json = |v: serde_json::Result<Json>| v.map_err(io::Error::other);
        let methods = to_json(serde_json::to_value(
            &stats.methods[..stats.methods.len().min(200)],
        ))?;
        let views = json!({
            "stats": {
                "events": stats.events,
                "duration_ns": stats.duration_ns(),
                "events_by_type": stats.events_by_type,
                "threads": to_json(serde_json::to_value(&stats.threads))?,
                "methods": methods,
                "gc_count": stats.gc_count,
                "gc_total_ns": stats.gc_total_ns,
                "dropped": stats.dropped,
            },
            "exceptions": {
                "by_type": to_json(serde_json::to_value(&stats.exceptions))?,
                "sites": sites,
                "sites_not_listed": self.sites_dropped,
            },
            "locks": to_json(serde_json::to_value(&stats.monitors))?,
            "threads": {"duration_ns": self.duration_ns, "buckets": TIMELINE_BUCKETS, "threads": threads},
            "calltree": tree,
            "reactions": reactions,
        });
        Ok((views, svg))
    }
}

/// Handlers, callbacks, thread behaviour and the user-call trie (the
/// most sampled nodes), as `vmview reactions` finds them with its default
/// cut-offs, in the schema of `vmview reactions --format json` (without
/// its `timing`).
fn reactions_json(r: &Reactions, syms: &SymbolTable) -> serde_json::Result<Json> {
    let name = |m: Option<MethodId>| match m {
        Some(m) => {
            let n = MethodNames::resolve(syms, m);
            MethodRef {
                class: n.class.to_string(),
                method: n.name.to_string(),
            }
        }
        None => MethodRef {
            class: String::new(),
            method: "<root>".to_string(),
        },
    };
    // The most sampled nodes, with their ancestors so the tree stays whole.
    let mut keep = vec![false; r.nodes.len()];
    let mut order: Vec<usize> = (0..r.nodes.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(r.nodes[i].total.iter().sum::<u64>()));
    let mut kept = 0;
    for i in order {
        let mut at = i;
        while !keep[at] && kept < MAX_TRIE_NODES {
            keep[at] = true;
            kept += 1;
            if at == 0 {
                break;
            }
            at = r.nodes[at].parent;
        }
    }
    serde_json::to_value(r.report(syms, &name, &|_| None, Some(&keep)))
}

/// Where the flame-graph writer draws (it keeps its output writer).
#[derive(Clone, Default)]
struct SharedBuf(Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuf {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Each thread's call tree, heaviest children first, at most
/// [`MAX_TREE_NODES`] nodes in all: `{"threads": [{"thread", "tree"}],
/// "unmatched_returns"}`, the trees in the schema of `vmview calltree
/// --format json` (the analysis' [`vmview_analysis::calltree::NodeReport`]).
pub fn call_trees_json(trees: &CallTrees, syms: &SymbolTable) -> serde_json::Result<Json> {
    let budget = std::cell::Cell::new(MAX_TREE_NODES);
    let visible = |t: &CallTree, n: u32| -> Vec<u32> {
        let mut kids = t.node(n).children.clone();
        kids.sort_by_key(|&c| std::cmp::Reverse(t.node(c).stats.wall_incl_ns));
        let take = kids.len().min(budget.get());
        budget.set(budget.get() - take);
        kids.truncate(take);
        kids
    };
    let opts = ReportOptions {
        syms,
        monitor_name: &|m| monitor_name(syms, m),
        compensated: false,
        cpu: trees.has_cpu,
        alloc: trees.has_alloc,
        visible: &visible,
    };
    let threads = trees
        .threads
        .iter()
        .map(|th| {
            Ok(json!({"thread": th.name, "tree": serde_json::to_value(th.merged().report(CallTree::ROOT, &opts))?}))
        })
        .collect::<serde_json::Result<Vec<Json>>>()?;
    Ok(json!({"threads": threads, "unmatched_returns": trees.unmatched_returns}))
}
