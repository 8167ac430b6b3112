//! Call trees: the IBM patents' "model of software in execution".
//!
//! Every traced call becomes a node under the call that made it, keyed by
//! method (and, under a `[monitor CLASS@hash]` placeholder, by the monitor
//! held while the call ran), so each path from the root is a distinct
//! calling context. Nodes accumulate call counts and inclusive/exclusive
//! wall time, and CPU time and allocated bytes when the trace carries
//! metrics (`metrics=cpu,alloc`). One tree per thread and per tracing
//! period (`period=`), merged as the caller asks.
//!
//! [`CallTreeBuilder`] is fed events one by one and keeps, per thread, only
//! the stack of open calls and its trees, so memory grows with the number
//! of distinct calling contexts, not with the length of the trace.
//!
//! **Compensation.** A traced call's measured times include the cost of the
//! records the agent emitted while it ran. With the CALIBRATION events a
//! recording carries, each call's compensated time is its measured time
//! less the cost of the records its thread emitted between its CALL and
//! its RETURN, and less half the cost of its own CALL and RETURN (the part
//! of the probes that runs between the two time stamps). Exclusive times
//! follow from inclusive ones and are clamped at 0.
//!
//! **Periods.** A PERIOD_START gives the thread's stack when the period
//! began: those frames become the period tree's context nodes (no calls
//! counted, time from the period's start), and calls still open at
//! PERIOD_END are closed there, so a period's tree holds exactly the time
//! inside it. Merging the trees of all periods gives the whole trace's.
//! A thread with no PERIOD_START of its own (it ran no traced method when
//! the period began) joins the period at its first event with an empty
//! stack.
//! A RETURN of a frame missing from the stack (it returned while the
//! agent was taking the stacks) becomes a context node closed there, under
//! the frames that are.
//!
//! **Depth cap.** Paths are kept to [`CallTreeBuilder::max_depth`] frames
//! (default [`vmview_format::DEFAULT_MAX_DEPTH`]); a deeper call, with all
//! it calls, counts in one [`NodeKey::Truncated`] node under the last kept
//! frame, so a recursion 40,000 deep is a tree of about a thousand nodes
//! and everything that walks or prints the tree stays bounded.

use std::collections::HashMap;

use serde::Serialize;
use vmview_format::{
    truncated_label, Event, EventKind, MethodId, Metrics, Monitor, SymbolTable, ThreadRef,
    DEFAULT_MAX_DEPTH,
};

use crate::EventSink;

/// What a node stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeKey {
    /// The root of a tree (a thread, or all threads).
    Root,
    /// A call of this method.
    Method(MethodId),
    /// A placeholder: the calls below it ran while this monitor was held.
    Monitor(Monitor),
    /// The frames below the depth cap, all in one node ([`Node::truncated`]
    /// says how many at most).
    Truncated,
}

/// Accumulated figures of one node. Times in ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// Calls (for a monitor placeholder: acquisitions).
    pub calls: u64,
    pub wall_incl_ns: u64,
    pub wall_excl_ns: u64,
    /// Wall times less the calibrated cost of the records emitted within.
    pub comp_incl_ns: u64,
    pub comp_excl_ns: u64,
    /// Thread CPU time, when the trace has it.
    pub cpu_incl_ns: u64,
    pub cpu_excl_ns: u64,
    /// Bytes allocated, when the trace has them.
    pub alloc_incl: u64,
    pub alloc_excl: u64,
    /// Records the thread emitted inside these calls (their own CALL and
    /// RETURN excluded).
    pub records: u64,
}

impl NodeStats {
    fn add(&mut self, o: &NodeStats) {
        self.calls += o.calls;
        self.wall_incl_ns += o.wall_incl_ns;
        self.wall_excl_ns += o.wall_excl_ns;
        self.comp_incl_ns += o.comp_incl_ns;
        self.comp_excl_ns += o.comp_excl_ns;
        self.cpu_incl_ns += o.cpu_incl_ns;
        self.cpu_excl_ns += o.cpu_excl_ns;
        self.alloc_incl += o.alloc_incl;
        self.alloc_excl += o.alloc_excl;
        self.records += o.records;
    }
}

/// One node of a [`CallTree`].
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub key: NodeKey,
    /// Index of the parent node; `None` for the root.
    pub parent: Option<u32>,
    /// Child indices, in order of first appearance.
    pub children: Vec<u32>,
    pub stats: NodeStats,
    /// For a [`NodeKey::Truncated`] node: the most frames it stood for at
    /// once (the depth beyond the cap); else 0.
    pub truncated: u32,
    /// Frames from the root (the root is 0).
    pub depth: u32,
}

/// A tree of calling contexts, nodes in an arena (index 0 is the root).
#[derive(Debug, Clone, PartialEq)]
pub struct CallTree {
    nodes: Vec<Node>,
    index: HashMap<(u32, NodeKey), u32>,
}

impl Default for CallTree {
    fn default() -> Self {
        CallTree::new()
    }
}

impl CallTree {
    pub fn new() -> CallTree {
        CallTree {
            nodes: vec![Node {
                key: NodeKey::Root,
                parent: None,
                children: Vec::new(),
                stats: NodeStats::default(),
                truncated: 0,
                depth: 0,
            }],
            index: HashMap::new(),
        }
    }

    pub const ROOT: u32 = 0;

    pub fn node(&self, i: u32) -> &Node {
        &self.nodes[i as usize]
    }

    /// Number of nodes, the root included.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when the tree holds only its root.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() == 1
    }

    /// The child of `parent` with `key`, created when missing.
    pub fn child(&mut self, parent: u32, key: NodeKey) -> u32 {
        if let Some(&i) = self.index.get(&(parent, key)) {
            return i;
        }
        let i = self.nodes.len() as u32;
        let depth = self.nodes[parent as usize].depth + 1;
        self.nodes.push(Node {
            key,
            parent: Some(parent),
            children: Vec::new(),
            stats: NodeStats::default(),
            truncated: 0,
            depth,
        });
        self.nodes[parent as usize].children.push(i);
        self.index.insert((parent, key), i);
        i
    }

    /// The child of `parent` with `key`, if there is one.
    pub fn find(&self, parent: u32, key: NodeKey) -> Option<u32> {
        self.index.get(&(parent, key)).copied()
    }

    /// Follows a path of keys from the root.
    pub fn path(&self, keys: &[NodeKey]) -> Option<u32> {
        keys.iter()
            .try_fold(Self::ROOT, |node, key| self.find(node, *key))
    }

    /// Adds `other`'s nodes into this tree, path by path.
    pub fn merge(&mut self, other: &CallTree) {
        let mut work = vec![(CallTree::ROOT, CallTree::ROOT)];
        while let Some((mine, theirs)) = work.pop() {
            let n = other.node(theirs);
            let m = &mut self.nodes[mine as usize];
            m.stats.add(&n.stats);
            m.truncated = m.truncated.max(n.truncated);
            for &c in &n.children {
                let k = other.node(c).key;
                let m = self.child(mine, k);
                work.push((m, c));
            }
        }
    }

    /// Drops nodes with no call, no time and nothing below them: frames of
    /// a PERIOD_START stack that returned before the period saw them run
    /// (a CALL at their depth showed they were gone).
    fn prune_empty(&mut self) {
        // Children come after their parent: one backward pass, no recursion.
        let mut kept: Vec<bool> = self
            .nodes
            .iter()
            .map(|n| n.stats != NodeStats::default())
            .collect();
        kept[0] = true;
        for i in (1..self.nodes.len()).rev() {
            if kept[i] {
                let p = self.nodes[i].parent.unwrap_or(0);
                kept[p as usize] = true;
            }
        }
        if kept.iter().all(|k| *k) {
            return;
        }
        let mut out = CallTree::new();
        out.nodes[0].stats = self.nodes[0].stats;
        let mut work = vec![(CallTree::ROOT, CallTree::ROOT)];
        while let Some((mine, theirs)) = work.pop() {
            for &c in &self.nodes[theirs as usize].children {
                if kept[c as usize] {
                    let m = out.child(mine, self.nodes[c as usize].key);
                    out.nodes[m as usize].stats = self.nodes[c as usize].stats;
                    out.nodes[m as usize].truncated = self.nodes[c as usize].truncated;
                    work.push((m, c));
                }
            }
        }
        *self = out;
    }

    /// Sets the root's figures to the sum of its children's inclusive ones
    /// (the root has no time of its own).
    fn total_root(&mut self) {
        let mut s = NodeStats::default();
        for &c in &self.nodes[0].children {
            let n = &self.nodes[c as usize].stats;
            s.wall_incl_ns += n.wall_incl_ns;
            s.comp_incl_ns += n.comp_incl_ns;
            s.cpu_incl_ns += n.cpu_incl_ns;
            s.alloc_incl += n.alloc_incl;
            s.records += n.records;
        }
        self.nodes[0].stats = s;
    }
}

/// A method as reports name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MethodName {
    pub class: String,
    pub method: String,
    pub sig: String,
}

/// One node of a call tree as reports show it, with its children: the
/// schema of `vmview calltree --format json` and of the browser view's
/// call tree and flame graph. Keys are a contract: add, never rename.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeReport {
    /// `root`, `method`, `monitor` or `truncated`.
    pub kind: &'static str,
    /// `Class.method`, `[monitor CLASS@hash]` or `[truncated N frames]`;
    /// absent on the root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<MethodName>,
    /// A monitor placeholder's `CLASS@hash`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub monitor: Option<String>,
    /// A truncated node's most frames cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frames: Option<u32>,
    pub calls: u64,
    pub wall_incl_ns: u64,
    pub wall_excl_ns: u64,
    pub records: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comp_incl_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comp_excl_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_incl_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_excl_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alloc_incl_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alloc_excl_bytes: Option<u64>,
    pub children: Vec<NodeReport>,
}

/// What [`CallTree::report`] includes and how it names things.
pub struct ReportOptions<'a> {
    pub syms: &'a SymbolTable,
    /// `CLASS@hash` of a monitor.
    pub monitor_name: &'a dyn Fn(&Monitor) -> String,
    /// The fields present only when the trace has them.
    pub compensated: bool,
    pub cpu: bool,
    pub alloc: bool,
    /// The children of a node to include, in order.
    pub visible: &'a dyn Fn(&CallTree, u32) -> Vec<u32>,
}

impl CallTree {
    /// Node `n` and the subtree below it as a report. The recursion is
    /// bounded by the tree's depth cap.
    pub fn report(&self, n: u32, o: &ReportOptions) -> NodeReport {
        let node = self.node(n);
        let s = &node.stats;
        let mut r = NodeReport {
            kind: "root",
            name: None,
            method: None,
            monitor: None,
            frames: None,
            calls: s.calls,
            wall_incl_ns: s.wall_incl_ns,
            wall_excl_ns: s.wall_excl_ns,
            records: s.records,
            comp_incl_ns: o.compensated.then_some(s.comp_incl_ns),
            comp_excl_ns: o.compensated.then_some(s.comp_excl_ns),
            cpu_incl_ns: o.cpu.then_some(s.cpu_incl_ns),
            cpu_excl_ns: o.cpu.then_some(s.cpu_excl_ns),
            alloc_incl_bytes: o.alloc.then_some(s.alloc_incl),
            alloc_excl_bytes: o.alloc.then_some(s.alloc_excl),
            children: Vec::new(),
        };
        match node.key {
            NodeKey::Root => {}
            NodeKey::Method(m) => {
                let (class, method, sig) = match o.syms.method(m) {
                    Some(ms) => (
                        o.syms.string(ms.class),
                        o.syms.string(ms.name),
                        o.syms.string(ms.sig),
                    ),
                    None => ("?", "?", "?"),
                };
                r.kind = "method";
                r.name = Some(format!("{class}.{method}"));
                r.method = Some(MethodName {
                    class: class.to_string(),
                    method: method.to_string(),
                    sig: sig.to_string(),
                });
            }
            NodeKey::Monitor(m) => {
                let name = (o.monitor_name)(&m);
                r.kind = "monitor";
                r.name = Some(format!("[monitor {name}]"));
                r.monitor = Some(name);
            }
            NodeKey::Truncated => {
                r.kind = "truncated";
                r.name = Some(truncated_label(node.truncated));
                r.frames = Some(node.truncated);
            }
        }
        r.children = (o.visible)(self, n)
            .into_iter()
            .map(|c| self.report(c, o))
            .collect();
        r
    }

    /// The figures of node `i`, to fill a tree built by hand (the browser
    /// view's tree of a time range).
    pub fn stats_mut(&mut self, i: u32) -> &mut NodeStats {
        &mut self.nodes[i as usize].stats
    }
}

/// The calibrated cost of emitting records, from CALIBRATION events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Calibration {
    /// Picoseconds per record, by event type name (`CALL`, `RETURN`, `*`).
    pub costs: Vec<(String, u64)>,
}

impl Calibration {
    /// The cost of one record of this type: its own entry, else `*`, else 0.
    pub fn cost_ps(&self, type_name: &str) -> u64 {
        let find = |n: &str| self.costs.iter().find(|(k, _)| k == n).map(|(_, c)| *c);
        find(type_name).or_else(|| find("*")).unwrap_or(0)
    }
}

/// The trees of one thread, one per period (`None`: outside any period,
/// which is the whole trace when it has no periods).
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadTrees {
    pub thread: ThreadRef,
    pub name: String,
    pub periods: Vec<(Option<u32>, CallTree)>,
}

impl ThreadTrees {
    /// This thread's tree over all periods.
    pub fn merged(&self) -> CallTree {
        let mut t = CallTree::new();
        for (_, p) in &self.periods {
            t.merge(p);
        }
        t.total_root();
        t
    }

    /// This thread's tree of one period, if it had one.
    pub fn period(&self, period: Option<u32>) -> Option<&CallTree> {
        self.periods
            .iter()
            .find(|(p, _)| *p == period)
            .map(|(_, t)| t)
    }
}

/// Everything [`CallTreeBuilder::finish`] found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallTrees {
    /// Selected threads, in order of their first event.
    pub threads: Vec<ThreadTrees>,
    /// Some CALL or RETURN carried CPU time / allocated bytes.
    pub has_cpu: bool,
    pub has_alloc: bool,
    /// The recording's CALIBRATION events, if any.
    pub calibration: Option<Calibration>,
    /// RETURNs whose CALL was not in the trace (recording started inside
    /// the call, or events were dropped): not in the trees.
    pub unmatched_returns: u64,
    /// Period numbers seen, in order.
    pub periods: Vec<u32>,
}

impl CallTrees {
    /// All selected threads over all periods, in one tree.
    pub fn merged(&self) -> CallTree {
        let mut t = CallTree::new();
        for th in &self.threads {
            for (_, p) in &th.periods {
                t.merge(p);
            }
        }
        t.total_root();
        t
    }

    /// All selected threads' trees of one period, in one tree.
    pub fn period(&self, period: Option<u32>) -> CallTree {
        let mut t = CallTree::new();
        for th in &self.threads {
            if let Some(p) = th.period(period) {
                t.merge(p);
            }
        }
        t.total_root();
        t
    }
}

/// An open call (or held monitor) of a thread.
#[derive(Debug, Clone)]
struct Frame {
    node: u32,
    /// What the frame is (its node may be a truncated one that stands for
    /// many frames).
    key: NodeKey,
    depth: u32,
    /// For a monitor placeholder: the monitor.
    monitor: Option<Monitor>,
    start_ns: u64,
    cpu: Option<u64>,
    alloc: Option<u64>,
    /// The thread's record count and record cost after this frame's own
    /// opening record.
    records: u64,
    cost_ps: u64,
    /// Half the cost of the records opening and closing this frame.
    own_cost_ps: u64,
    child_wall: u64,
    child_comp: u64,
    child_cpu: u64,
    child_alloc: u64,
}

#[derive(Debug, Default)]
struct ThreadBuild {
    selected: Option<bool>,
    name: String,
    periods: Vec<(Option<u32>, CallTree)>,
    /// Index in `periods` of the tree being built.
    current: Option<usize>,
    period: Option<u32>,
    /// When the thread's current period began.
    period_start: u64,
    stack: Vec<Frame>,
    records: u64,
    cost_ps: u64,
    last_time: u64,
    last_metrics: Metrics,
}

impl ThreadBuild {
    fn tree(&mut self) -> &mut CallTree {
        let i = match self.current {
            Some(i) => i,
            None => {
                let p = self.period;
                let i = match self.periods.iter().position(|(q, _)| *q == p) {
                    Some(i) => i,
                    None => {
                        self.periods.push((p, CallTree::new()));
                        self.periods.len() - 1
                    }
                };
                self.current = Some(i);
                i
            }
        };
        &mut self.periods[i].1
    }

    /// The node new children go under: the innermost open frame, or the root.
    fn parent_node(&self) -> u32 {
        self.stack.last().map_or(CallTree::ROOT, |f| f.node)
    }

    /// The node of a new frame `key` on top of the stack: its own node while
    /// the path is within `max_depth` frames, else the truncated node under
    /// the last kept frame.
    fn node_for(&mut self, key: NodeKey, max_depth: u32) -> u32 {
        let parent = self.parent_node();
        let extra = (self.stack.len() as u32 + 1).saturating_sub(max_depth);
        let tree = self.tree();
        let p = &tree.nodes[parent as usize];
        let node = if p.key == NodeKey::Truncated {
            parent
        } else if p.depth >= max_depth {
            tree.child(parent, NodeKey::Truncated)
        } else {
            return tree.child(parent, key);
        };
        let n = &mut tree.nodes[node as usize];
        n.truncated = n.truncated.max(extra.max(1));
        node
    }

    /// Closes the innermost frame at `time` with the thread's metrics then.
    fn close_top(&mut self, time: u64, metrics: Metrics, cost_now: u64, records_now: u64) {
        let Some(f) = self.stack.pop() else { return };
        let wall = time.saturating_sub(f.start_ns);
        let overhead_ps = cost_now.saturating_sub(f.cost_ps) + f.own_cost_ps;
        let comp = wall.saturating_sub(overhead_ps / 1000);
        let cpu = match (metrics.cpu_ns, f.cpu) {
            (Some(a), Some(b)) => a.saturating_sub(b),
            _ => 0,
        };
        let alloc = match (metrics.alloc_bytes, f.alloc) {
            (Some(a), Some(b)) => a.saturating_sub(b),
            _ => 0,
        };
        // A monitor placeholder has no CPU or allocation of its own: its
        // figures are its children's.
        let (cpu, alloc) = if f.monitor.is_some() {
            (f.child_cpu, f.child_alloc)
        } else {
            (cpu, alloc)
        };
        let records = records_now.saturating_sub(f.records);
        // Frames below the depth cap nest inside one truncated node: only
        // the outermost adds its inclusive figures, or they would count
        // once per frame.
        let mut nested = false;
        if let Some(parent) = self.stack.last_mut() {
            parent.child_wall += wall;
            parent.child_comp += comp;
            parent.child_cpu += cpu;
            parent.child_alloc += alloc;
            nested = parent.node == f.node;
        }
        let s = &mut self.tree().nodes[f.node as usize].stats;
        s.wall_excl_ns += wall.saturating_sub(f.child_wall);
        s.comp_excl_ns += comp.saturating_sub(f.child_comp);
        s.cpu_excl_ns += cpu.saturating_sub(f.child_cpu);
        s.alloc_excl += alloc.saturating_sub(f.child_alloc);
        if !nested {
            s.wall_incl_ns += wall;
            s.comp_incl_ns += comp;
            s.cpu_incl_ns += cpu;
            s.alloc_incl += alloc;
            s.records += records;
        }
    }

    /// Closes every open frame (the period ended, or the trace did).
    fn close_all(&mut self, time: u64) {
        let (cost, records, metrics) = (self.cost_ps, self.records, self.last_metrics);
        while !self.stack.is_empty() {
            self.close_top(time, metrics, cost, records);
        }
    }
}

/// Decides from its name whether a thread's calls are kept.
type ThreadSelector = Box<dyn FnMut(&str) -> bool>;

/// Builds [`CallTrees`] from an event stream (see the module docs).
pub struct CallTreeBuilder {
    threads: HashMap<ThreadRef, ThreadBuild>,
    order: Vec<ThreadRef>,
    select: Option<ThreadSelector>,
    calibration: Calibration,
    has_cpu: bool,
    has_alloc: bool,
    unmatched_returns: u64,
    periods: Vec<u32>,
    /// The period begun by the last PERIOD_START and not yet ended.
    current_period: Option<u32>,
    max_depth: u32,
}

impl Default for CallTreeBuilder {
    fn default() -> Self {
        CallTreeBuilder::new()
    }
}

impl CallTreeBuilder {
    pub fn new() -> CallTreeBuilder {
        CallTreeBuilder {
            threads: HashMap::new(),
            order: Vec::new(),
            select: None,
            calibration: Calibration::default(),
            has_cpu: false,
            has_alloc: false,
            unmatched_returns: 0,
            periods: Vec::new(),
            current_period: None,
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }

    /// Keeps paths to `frames` frames from the root (at least 1); deeper
    /// calls count in one [`NodeKey::Truncated`] node.
    pub fn max_depth(mut self, frames: u32) -> Self {
        self.max_depth = frames.max(1);
        self
    }

    /// Keeps only threads whose name `select` accepts.
    pub fn select_threads(mut self, select: impl FnMut(&str) -> bool + 'static) -> Self {
        self.select = Some(Box::new(select));
        self
    }

    fn cost(&self, kind: &EventKind) -> u64 {
        if self.calibration.costs.is_empty() {
            return 0;
        }
        self.calibration.cost_ps(kind.type_name())
    }

    fn end_period(&mut self, period: u32, time: u64) {
        if self.current_period == Some(period) {
            self.current_period = None;
        }
        for t in self.threads.values_mut() {
            if t.period == Some(period) {
                t.close_all(time);
                t.period = None;
                t.current = None;
            }
        }
    }

    /// The trees, with open calls closed at their thread's last event.
    pub fn finish(mut self) -> CallTrees {
        let mut threads = Vec::new();
        for t in &self.order {
            let Some(mut b) = self.threads.remove(t) else {
                continue;
            };
            if b.selected != Some(true) {
                continue;
            }
            let last = b.last_time;
            b.close_all(last);
            let mut periods = b.periods;
            for (_, tree) in &mut periods {
                tree.prune_empty();
                tree.total_root();
            }
            periods.retain(|(_, tree)| !tree.is_empty());
            if periods.is_empty() {
                continue;
            }
            threads.push(ThreadTrees {
                thread: *t,
                name: b.name,
                periods,
            });
        }
        CallTrees {
            threads,
            has_cpu: self.has_cpu,
            has_alloc: self.has_alloc,
            calibration: (!self.calibration.costs.is_empty()).then_some(self.calibration),
            unmatched_returns: self.unmatched_returns,
            periods: self.periods,
        }
    }
}

impl EventSink for CallTreeBuilder {
    fn event(&mut self, ev: &Event, syms: &SymbolTable) {
        // Trace-wide events first.
        match &ev.kind {
            EventKind::Calibration { record, cost_ps } => {
                match self.calibration.costs.iter_mut().find(|(k, _)| k == record) {
                    Some(e) => e.1 = *cost_ps,
                    None => self.calibration.costs.push((record.clone(), *cost_ps)),
                }
                return;
            }
            EventKind::PeriodEnd { period } => {
                self.end_period(*period, ev.time_ns);
                return;
            }
            EventKind::Call { .. }
            | EventKind::Return { .. }
            | EventKind::MonitorEnter { .. }
            | EventKind::MonitorExit { .. }
            | EventKind::PeriodStart { .. } => {}
            _ => return,
        }
        let cost = self.cost(&ev.kind);
        let max_depth = self.max_depth;
        let call_cost = self.calibration.cost_ps("CALL");
        let return_cost = self.calibration.cost_ps("RETURN");
        if !self.threads.contains_key(&ev.thread) {
            self.order.push(ev.thread);
        }
        let t = self.threads.entry(ev.thread).or_default();
        if t.selected.is_none() {
            t.name = syms.thread_name(ev.thread);
            t.selected = Some(match &mut self.select {
                Some(f) => f(&t.name),
                None => true,
            });
        }
        if t.selected != Some(true) {
            return;
        }
        t.last_time = t.last_time.max(ev.time_ns);
        if let (Some(p), false) = (
            self.current_period,
            matches!(ev.kind, EventKind::PeriodStart { .. }),
        ) {
            if t.period != Some(p) {
                // No PERIOD_START of its own: joins with an empty stack.
                t.close_all(ev.time_ns);
                t.period = Some(p);
                t.period_start = ev.time_ns;
                t.current = None;
            }
        }
        match &ev.kind {
            EventKind::PeriodStart { period, stack } => {
                if !self.periods.contains(period) {
                    self.periods.push(*period);
                }
                self.current_period = Some(*period);
                t.close_all(ev.time_ns);
                t.period = Some(*period);
                t.period_start = ev.time_ns;
                t.current = None;
                let frames: Vec<MethodId> = syms
                    .stack(*stack)
                    .map(|s| s.frames.iter().rev().map(|(m, _)| *m).collect())
                    .unwrap_or_default();
                let (records, cost_ps, metrics) = (t.records, t.cost_ps, t.last_metrics);
                for (i, m) in frames.into_iter().enumerate() {
                    let node = t.node_for(NodeKey::Method(m), max_depth);
                    t.stack.push(Frame {
                        node,
                        key: NodeKey::Method(m),
                        depth: i as u32 + 1,
                        monitor: None,
                        start_ns: ev.time_ns,
                        cpu: metrics.cpu_ns,
                        alloc: metrics.alloc_bytes,
                        records,
                        cost_ps,
                        own_cost_ps: 0,
                        child_wall: 0,
                        child_comp: 0,
                        child_cpu: 0,
                        child_alloc: 0,
                    });
                }
            }
            EventKind::Call {
                method,
                depth,
                metrics,
                ..
            } => {
                self.has_cpu |= metrics.cpu_ns.is_some();
                self.has_alloc |= metrics.alloc_bytes.is_some();
                // Frames at this depth or deeper are over (their RETURNs
                // were lost, or they were monitors of a frame now gone).
                while t.stack.last().is_some_and(|f| f.depth >= *depth) {
                    let f = t.stack.last().expect("checked");
                    if f.monitor.is_some() {
                        let (c, r) = (t.cost_ps, t.records);
                        t.close_top(ev.time_ns, t.last_metrics, c, r);
                    } else {
                        t.stack.pop();
                    }
                }
                t.records += 1;
                t.cost_ps += cost;
                let node = t.node_for(NodeKey::Method(*method), max_depth);
                t.tree().nodes[node as usize].stats.calls += 1;
                t.stack.push(Frame {
                    node,
                    key: NodeKey::Method(*method),
                    depth: *depth,
                    monitor: None,
                    start_ns: ev.time_ns,
                    cpu: metrics.cpu_ns,
                    alloc: metrics.alloc_bytes,
                    records: t.records,
                    cost_ps: t.cost_ps,
                    own_cost_ps: (call_cost + return_cost) / 2,
                    child_wall: 0,
                    child_comp: 0,
                    child_cpu: 0,
                    child_alloc: 0,
                });
                t.last_metrics = merge_metrics(t.last_metrics, *metrics);
            }
            EventKind::Return {
                method,
                depth,
                metrics,
                ..
            } => {
                self.has_cpu |= metrics.cpu_ns.is_some();
                self.has_alloc |= metrics.alloc_bytes.is_some();
                t.last_metrics = merge_metrics(t.last_metrics, *metrics);
                let found = t.stack.iter().rposition(|f| {
                    f.monitor.is_none() && f.depth == *depth && f.key == NodeKey::Method(*method)
                });
                match found {
                    Some(i) => {
                        let (c, r) = (t.cost_ps, t.records);
                        while t.stack.len() > i + 1 {
                            let top = t.stack.last().expect("above i");
                            if top.monitor.is_some() {
                                t.close_top(ev.time_ns, *metrics, c, r);
                            } else {
                                // Lost RETURN: its time is unknown.
                                t.stack.pop();
                            }
                        }
                        t.close_top(ev.time_ns, *metrics, c, r);
                    }
                    // A frame of the period's first moments, returned
                    // before the PERIOD_START stack was taken: a context
                    // node under the frames that were taken.
                    None if t.period.is_some()
                        && *depth > 0
                        && t.stack.last().is_none_or(|f| f.depth < *depth) =>
                    {
                        let node = t.node_for(NodeKey::Method(*method), max_depth);
                        let (c, r, start) = (t.cost_ps, t.records, t.period_start);
                        t.stack.push(Frame {
                            node,
                            key: NodeKey::Method(*method),
                            depth: *depth,
                            monitor: None,
                            start_ns: start,
                            cpu: None,
                            alloc: None,
                            records: r,
                            cost_ps: c,
                            own_cost_ps: 0,
                            child_wall: 0,
                            child_comp: 0,
                            child_cpu: 0,
                            child_alloc: 0,
                        });
                        t.close_top(ev.time_ns, *metrics, c, r);
                    }
                    None => self.unmatched_returns += 1,
                }
                t.records += 1;
                t.cost_ps += cost;
            }
            EventKind::MonitorEnter { monitor, depth } => {
                while t.stack.last().is_some_and(|f| f.depth > *depth) {
                    t.stack.pop();
                }
                t.records += 1;
                t.cost_ps += cost;
                let node = t.node_for(NodeKey::Monitor(*monitor), max_depth);
                t.tree().nodes[node as usize].stats.calls += 1;
                let metrics = t.last_metrics;
                t.stack.push(Frame {
                    node,
                    key: NodeKey::Monitor(*monitor),
                    depth: *depth,
                    monitor: Some(*monitor),
                    start_ns: ev.time_ns,
                    cpu: metrics.cpu_ns,
                    alloc: metrics.alloc_bytes,
                    records: t.records,
                    cost_ps: t.cost_ps,
                    own_cost_ps: cost,
                    child_wall: 0,
                    child_comp: 0,
                    child_cpu: 0,
                    child_alloc: 0,
                });
            }
            EventKind::MonitorExit { monitor, .. } => {
                if let Some(i) = t.stack.iter().rposition(|f| f.monitor == Some(*monitor)) {
                    let (c, r, m) = (t.cost_ps, t.records, t.last_metrics);
                    while t.stack.len() > i {
                        let top = t.stack.last().expect("at least i + 1");
                        if top.monitor.is_some() {
                            t.close_top(ev.time_ns, m, c, r);
                        } else {
                            t.stack.pop();
                        }
                    }
                }
                t.records += 1;
                t.cost_ps += cost;
            }
            _ => {}
        }
    }
}

/// The newest value of each metric.
fn merge_metrics(old: Metrics, new: Metrics) -> Metrics {
    Metrics {
        cpu_ns: new.cpu_ns.or(old.cpu_ns),
        alloc_bytes: new.alloc_bytes.or(old.alloc_bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmview_format::{
        MethodSymbol, Outcome, StackId, StackSymbol, StringId, Symbol, ThreadSymbol, TraceHeader,
        TraceReader, TraceWriter,
    };

    const MAIN: MethodId = MethodId(0);
    const A: MethodId = MethodId(1);
    const B: MethodId = MethodId(2);
    const T0: ThreadRef = ThreadRef(0);
    const T1: ThreadRef = ThreadRef(1);

    fn symbols() -> Vec<Symbol> {
        let mut v = Vec::new();
        for (i, s) in [
            "fx.M",
            "main",
            "a",
            "b",
            "()V",
            "t0",
            "t1",
            "g",
            "java.lang.Object",
        ]
        .iter()
        .enumerate()
        {
            v.push(Symbol::String {
                id: StringId(i as u32),
                text: s.to_string(),
            });
        }
        for (m, name) in [(MAIN, 1), (A, 2), (B, 3)] {
            v.push(Symbol::Method(MethodSymbol {
                id: m,
                class: StringId(0),
                name: StringId(name),
                sig: StringId(4),
                param_names: vec![],
                modifiers: 0,
            }));
        }
        for (t, name) in [(T0, 5), (T1, 6)] {
            v.push(Symbol::Thread(ThreadSymbol {
                id: t,
                java_id: i64::from(t.0),
                name: StringId(name),
                group: StringId(7),
                priority: 5,
                daemon: false,
            }));
        }
        v.push(Symbol::Stack(StackSymbol {
            id: StackId(0),
            types: Vec::new(),
            frames: vec![(MAIN, Default::default())],
        }));
        v
    }

    /// Events (thread, time, kind) written with the trace writer and read
    /// back, as the CLI would see them.
    fn through_a_trace(events: &[(ThreadRef, u64, EventKind)]) -> (Vec<Event>, SymbolTable) {
        let mut w = TraceWriter::new(Vec::new(), &TraceHeader::default()).expect("header");
        for s in symbols() {
            w.define(s);
        }
        for (i, (t, time, kind)) in events.iter().enumerate() {
            w.write(&Event {
                id: i as u64,
                time_ns: *time,
                thread: *t,
                kind: kind.clone(),
            })
            .expect("write");
        }
        let bytes = w.finish().expect("finish");
        let mut r = TraceReader::new(std::io::Cursor::new(bytes)).expect("read");
        let mut out = Vec::new();
        while let Some(e) = r.next_event() {
            out.push(e);
        }
        (out, r.symbols().clone())
    }

    fn build(events: &[(ThreadRef, u64, EventKind)]) -> CallTrees {
        let (events, syms) = through_a_trace(events);
        let mut b = CallTreeBuilder::new();
        for e in &events {
            b.event(e, &syms);
        }
        b.finish()
    }

    fn call(m: MethodId, depth: u32) -> EventKind {
        call_m(m, depth, Metrics::NONE)
    }

    fn call_m(m: MethodId, depth: u32, metrics: Metrics) -> EventKind {
        EventKind::Call {
            method: m,
            depth,
            caller: None,
            params: vec![],
            metrics,
        }
    }

    fn ret(m: MethodId, depth: u32) -> EventKind {
        ret_m(m, depth, Metrics::NONE)
    }

    fn ret_m(m: MethodId, depth: u32, metrics: Metrics) -> EventKind {
        EventKind::Return {
            method: m,
            depth,
            outcome: Outcome::Void,
            elapsed_ns: 0,
            metrics,
        }
    }

    const MON: Monitor = Monitor {
        class: StringId(8),
        hash: 0xabc,
    };

    #[test]
    fn counts_and_inclusive_exclusive_times() {
        // main(0..100) calls a() twice (10..30, 40..50); the first a() calls b (15..20).
        let t = build(&[
            (T0, 0, call(MAIN, 1)),
            (T0, 10, call(A, 2)),
            (T0, 15, call(B, 3)),
            (T0, 20, ret(B, 3)),
            (T0, 30, ret(A, 2)),
            (T0, 40, call(A, 2)),
            (T0, 50, ret(A, 2)),
            (T0, 100, ret(MAIN, 1)),
        ]);
        let tree = t.merged();
        let main = tree.path(&[NodeKey::Method(MAIN)]).unwrap();
        let a = tree
            .path(&[NodeKey::Method(MAIN), NodeKey::Method(A)])
            .unwrap();
        let b = tree
            .path(&[
                NodeKey::Method(MAIN),
                NodeKey::Method(A),
                NodeKey::Method(B),
            ])
            .unwrap();
        let s = |n| tree.node(n).stats;
        assert_eq!((s(main).calls, s(a).calls, s(b).calls), (1, 2, 1));
        assert_eq!((s(main).wall_incl_ns, s(main).wall_excl_ns), (100, 70));
        assert_eq!((s(a).wall_incl_ns, s(a).wall_excl_ns), (30, 25));
        assert_eq!((s(b).wall_incl_ns, s(b).wall_excl_ns), (5, 5));
        assert_eq!(tree.node(CallTree::ROOT).stats.wall_incl_ns, 100);
        // Records inside: main holds 6, the first a() 2, the second none.
        assert_eq!(s(main).records, 6);
        assert_eq!(s(a).records, 2);
        assert_eq!(t.unmatched_returns, 0);
    }

    #[test]
    fn frames_below_the_depth_cap_fold_into_one_truncated_node() {
        // Issue 21: a recursion 40,000 deep was a 40,000-node path, and
        // `calltree` took 5 GB printing it. main → a → b → b → … 10 deep,
        // each frame 10 ns in and 10 ns out, cut at 3 frames.
        let mut events = vec![(T0, 0, call(MAIN, 1)), (T0, 10, call(A, 2))];
        for d in 3..=10 {
            events.push((T0, 10 * u64::from(d), call(B, d)));
        }
        for d in (3..=10).rev() {
            events.push((T0, 200 - 10 * u64::from(d), ret(B, d)));
        }
        events.push((T0, 190, ret(A, 2)));
        events.push((T0, 200, ret(MAIN, 1)));
        let (events, syms) = through_a_trace(&events);
        let mut b = CallTreeBuilder::new().max_depth(3);
        for e in &events {
            b.event(e, &syms);
        }
        let tree = b.finish().merged();
        // root, main, a, b, and one node for the 7 frames below.
        assert_eq!(tree.len(), 5);
        let keys = [
            NodeKey::Method(MAIN),
            NodeKey::Method(A),
            NodeKey::Method(B),
            NodeKey::Truncated,
        ];
        let b3 = tree.path(&keys[..3]).expect("b at depth 3");
        let cut = tree.path(&keys).expect("the truncated node");
        let n = tree.node(cut);
        assert_eq!(n.truncated, 7);
        assert!(n.children.is_empty());
        assert_eq!(n.stats.calls, 7);
        // Inclusive: the outermost truncated frame only (40..160), not the
        // sum over the nested ones; exclusive: all of it.
        assert_eq!(n.stats.wall_incl_ns, 120);
        assert_eq!(n.stats.wall_excl_ns, 120);
        assert_eq!(tree.node(b3).stats.wall_incl_ns, 140);
        assert_eq!(tree.node(b3).stats.wall_excl_ns, 20);
    }

    #[test]
    fn calls_under_a_held_monitor_hang_below_its_placeholder() {
        let t = build(&[
            (T0, 0, call(MAIN, 1)),
            (
                T0,
                10,
                EventKind::MonitorEnter {
                    monitor: MON,
                    depth: 1,
                },
            ),
            (T0, 20, call(A, 2)),
            (T0, 30, ret(A, 2)),
            (
                T0,
                40,
                EventKind::MonitorExit {
                    monitor: MON,
                    depth: 1,
                },
            ),
            (T0, 50, call(B, 2)),
            (T0, 60, ret(B, 2)),
            (T0, 100, ret(MAIN, 1)),
        ]);
        let tree = t.merged();
        let m = NodeKey::Method(MAIN);
        let held = tree.path(&[m, NodeKey::Monitor(MON)]).unwrap();
        assert_eq!(tree.node(held).stats.calls, 1);
        assert_eq!(tree.node(held).stats.wall_incl_ns, 30);
        assert_eq!(tree.node(held).stats.wall_excl_ns, 20);
        assert!(tree
            .path(&[m, NodeKey::Monitor(MON), NodeKey::Method(A)])
            .is_some());
        assert!(tree.path(&[m, NodeKey::Method(A)]).is_none());
        assert!(tree.path(&[m, NodeKey::Method(B)]).is_some());
        let main = tree.node(tree.path(&[m]).unwrap()).stats;
        assert_eq!(main.wall_excl_ns, 100 - 30 - 10);
    }

    #[test]
    fn a_synchronized_method_returning_releases_its_placeholder() {
        // No MONITOR_EXIT before the holder's RETURN: the RETURN closes it.
        let t = build(&[
            (T0, 0, call(A, 1)),
            (
                T0,
                0,
                EventKind::MonitorEnter {
                    monitor: MON,
                    depth: 1,
                },
            ),
            (T0, 5, call(B, 2)),
            (T0, 8, ret(B, 2)),
            (T0, 10, ret(A, 1)),
            (
                T0,
                11,
                EventKind::MonitorExit {
                    monitor: MON,
                    depth: 1,
                },
            ),
        ]);
        let tree = t.merged();
        let held = tree
            .path(&[NodeKey::Method(A), NodeKey::Monitor(MON)])
            .unwrap();
        assert_eq!(tree.node(held).stats.wall_incl_ns, 10);
        assert_eq!(tree.node(held).stats.calls, 1);
    }

    #[test]
    fn compensation_subtracts_the_records_emitted_within() {
        // 1 µs per CALL, 2 µs per RETURN: main's 4 inner records cost 6 µs,
        // plus half its own pair (1.5 µs); a()'s own half pair is 1.5 µs.
        let cal = |r: &str, ns: u64| EventKind::Calibration {
            record: r.into(),
            cost_ps: ns * 1000,
        };
        let t = build(&[
            (T0, 0, cal("CALL", 1_000)),
            (T0, 0, cal("RETURN", 2_000)),
            (T0, 0, call(MAIN, 1)),
            (T0, 10_000, call(A, 2)),
            (T0, 20_000, ret(A, 2)),
            (T0, 30_000, call(A, 2)),
            (T0, 40_000, ret(A, 2)),
            (T0, 100_000, ret(MAIN, 1)),
        ]);
        let tree = t.merged();
        let main = tree
            .node(tree.path(&[NodeKey::Method(MAIN)]).unwrap())
            .stats;
        let a = tree
            .node(
                tree.path(&[NodeKey::Method(MAIN), NodeKey::Method(A)])
                    .unwrap(),
            )
            .stats;
        assert_eq!(main.comp_incl_ns, 100_000 - 6_000 - 1_500);
        assert_eq!(a.comp_incl_ns, 2 * (10_000 - 1_500));
        assert_eq!(main.comp_excl_ns, main.comp_incl_ns - a.comp_incl_ns);
        assert_eq!(main.wall_incl_ns, 100_000, "uncompensated times stay");
        assert_eq!(
            t.calibration.as_ref().map(|c| c.cost_ps("RETURN")),
            Some(2_000_000)
        );
    }

    #[test]
    fn cpu_and_allocation_come_from_metric_differences() {
        let m = |cpu: u64, alloc: u64| Metrics {
            cpu_ns: Some(cpu),
            alloc_bytes: Some(alloc),
        };
        let t = build(&[
            (T0, 0, call_m(MAIN, 1, m(1_000, 500))),
            (T0, 10, call_m(A, 2, m(1_100, 600))),
            (T0, 20, ret_m(A, 2, m(1_400, 1_600))),
            (T0, 30, ret_m(MAIN, 1, m(1_500, 1_700))),
        ]);
        assert!(t.has_cpu && t.has_alloc);
        let tree = t.merged();
        let main = tree
            .node(tree.path(&[NodeKey::Method(MAIN)]).unwrap())
            .stats;
        assert_eq!((main.cpu_incl_ns, main.cpu_excl_ns), (500, 200));
        assert_eq!((main.alloc_incl, main.alloc_excl), (1_200, 200));
    }

    #[test]
    fn per_period_trees_merge_to_the_whole() {
        // Two periods on two threads. Period 1 starts while t0 is inside
        // main (depth 1): main is a context node, a() hangs below it.
        let ps = |p: u32| EventKind::PeriodStart {
            period: p,
            stack: StackId(0),
        };
        let pe = |p: u32| EventKind::PeriodEnd { period: p };
        let t = build(&[
            (T0, 0, ps(0)),
            (T1, 0, ps(0)),
            (T0, 10, call(A, 2)),
            (T0, 20, ret(A, 2)),
            (T1, 15, call(B, 2)),
            (T1, 25, call(A, 3)),
            (T0, 100, pe(0)),
            // b() and a() on t1 are cut at the end of period 0.
            (T0, 1_000, ps(1)),
            (T1, 1_000, ps(1)),
            (T0, 1_010, call(A, 2)),
            (T0, 1_030, ret(A, 2)),
            (T1, 1_040, call(B, 2)),
            (T1, 1_050, ret(B, 2)),
            (T0, 1_060, ret(MAIN, 1)),
            (T0, 1_100, pe(1)),
        ]);
        assert_eq!(t.periods, vec![0, 1]);
        let p0 = t.period(Some(0));
        let p1 = t.period(Some(1));
        let whole = t.merged();
        let mut sum = p0.clone();
        sum.merge(&p1);
        sum.total_root();
        assert_eq!(sum, whole, "the periods' trees add up to the whole");
        let key = |ks: &[MethodId]| ks.iter().map(|m| NodeKey::Method(*m)).collect::<Vec<_>>();
        let stats =
            |tree: &CallTree, ks: &[MethodId]| tree.node(tree.path(&key(ks)).unwrap()).stats;
        assert_eq!(stats(&p0, &[MAIN, A]).calls, 1);
        assert_eq!(stats(&p1, &[MAIN, A]).calls, 1);
        assert_eq!(stats(&whole, &[MAIN, A]).calls, 2);
        assert_eq!(stats(&whole, &[MAIN, B]).calls, 2);
        assert_eq!(stats(&whole, &[MAIN, B, A]).calls, 1);
        // Context frames count no calls; their time is the period's.
        assert_eq!(stats(&p1, &[MAIN]).calls, 0);
        assert_eq!(
            stats(&p0, &[MAIN]).wall_incl_ns,
            200,
            "100 ns on each thread"
        );
        assert_eq!(
            stats(&p0, &[MAIN, B]).wall_incl_ns,
            85,
            "cut at the period's end"
        );
        assert_eq!(stats(&p1, &[MAIN]).wall_incl_ns, 60 + 100);
    }

    #[test]
    fn a_thread_without_its_own_period_start_joins_the_period() {
        // t1 had no Java frame when period 0 began; its calls belong to
        // period 0 all the same. t0's a() returned while the stacks were
        // taken: not in its PERIOD_START stack (main only), it becomes a
        // context node under main, timed from the period's start.
        let t = build(&[
            (
                T0,
                100,
                EventKind::PeriodStart {
                    period: 0,
                    stack: StackId(0),
                },
            ),
            (T0, 105, ret(A, 2)),
            (T1, 110, call(B, 1)),
            (T1, 120, ret(B, 1)),
            (T0, 200, EventKind::PeriodEnd { period: 0 }),
            (T1, 300, call(B, 1)),
        ]);
        let p0 = t.period(Some(0));
        let b = p0
            .path(&[NodeKey::Method(B)])
            .expect("t1's call in period 0");
        assert_eq!(p0.node(b).stats.calls, 1);
        let a = p0
            .path(&[NodeKey::Method(MAIN), NodeKey::Method(A)])
            .expect("a() under main");
        assert_eq!(p0.node(a).stats.calls, 0);
        assert_eq!(p0.node(a).stats.wall_incl_ns, 5);
        assert_eq!(t.unmatched_returns, 0);
        // After the period ended, a call is outside every period.
        assert_eq!(t.period(None).node(CallTree::ROOT).children.len(), 1);
    }

    #[test]
    fn thread_selection_and_unmatched_returns() {
        let (events, syms) =
            through_a_trace(&[(T0, 0, call(A, 1)), (T1, 5, ret(B, 4)), (T0, 10, ret(A, 1))]);
        let mut b = CallTreeBuilder::new().select_threads(|n| n == "t1");
        for e in &events {
            b.event(e, &syms);
        }
        let t = b.finish();
        assert_eq!(
            t.threads.len(),
            0,
            "t1 has no tree: its only RETURN had no CALL"
        );
        assert_eq!(t.unmatched_returns, 1);
    }
}
