//! Collapsed ("folded") stacks: `frame;frame;frame weight` lines, the input
//! of Brendan Gregg's `flamegraph.pl`, inferno, speedscope and many other
//! flame-graph tools.
//!
//! The stacks come from one of two sources. By default, the call tree that
//! CALL/RETURN pairs build: every path of traced methods from a thread's
//! first traced frame down, weighted by its **self time** in nanoseconds
//! (time in the method minus time in its traced callees; a flame graph then
//! shows total time as width) or by its **number of calls**. With
//! [`Weight::Sampled`], the stacks of SAMPLE events (`events=samples`),
//! base first, all frames (JDK ones included), one count per sample (all
//! of them, the CPU or the wall ones), or those of ALLOC_SAMPLE events by
//! bytes, or contended monitor enters by the time waited, under the
//! waiting thread's traced call path (see [`crate::weight`]).
//!
//! Frames are `class.method` (dotted class name, no descriptor: the folded
//! format separates frames with `;`, which descriptors contain; overloads
//! therefore share a frame). Calls are matched by [`crate::calls`], so
//! missing RETURNs (a cut trace) close at the thread's next return from
//! below or at its last event, and RETURNs without a CALL are ignored.
//!
//! Memory grows with the number of distinct call paths, not with the
//! number of events; nothing is written before [`EventWriter::finish`],
//! since a path's weight is only known at the end. Paths are cut at
//! [`CollapseOptions::max_depth`] frames: what lies deeper is one
//! `[truncated N frames]` frame under the last kept one, with the weight of
//! everything below, so a recursion thousands deep gives a bounded number
//! of lines of bounded length (without the cap a 12,000-deep recursion
//! folded to a 1 GB file: one line per depth, each as long as the depth).

use std::collections::HashMap;
use std::io::{self, Write};

use vmview_format::{
    truncated_label, Event, FrameType, MethodId, StackId, SymbolTable, ThreadRef, DEFAULT_MAX_DEPTH,
};

use crate::calls::{CallMatcher, Transition};
use crate::names::MethodNames;
use crate::weight::{blocked_label, SampleWeight, Weighed, Weigher, WeightError};
use crate::EventWriter;
use vmview_format::TraceHeader;

/// async-profiler's annotation of a frame's type in collapsed stacks.
pub fn type_suffix(ty: FrameType) -> &'static str {
    match ty {
        FrameType::Compiled => "_[j]",
        FrameType::Inlined => "_[i]",
        FrameType::Interpreted => "_[0]",
        FrameType::Native | FrameType::Unknown => "",
    }
}

/// What a folded line's number counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weight {
    /// Self time of the path's last frame, in nanoseconds.
    SelfTime,
    /// Calls of the path's last frame.
    Calls,
    /// Sampled stacks ([`crate::weight`]): SAMPLE events whose stack is
    /// the path (all, CPU or wall ones), bytes of the ALLOC_SAMPLE events
    /// whose stack is the path (each sample's object size: with HotSpot's
    /// heap sampler a sample stands for about `alloc-interval` bytes, big
    /// objects are picked more often), or nanoseconds waited on contended
    /// monitors under the waiting call path. CALL/RETURN only place lock
    /// waits.
    Sampled(SampleWeight),
}

/// How stacks are folded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollapseOptions {
    pub weight: Weight,
    /// Start every stack with its thread's name (one tower per thread),
    /// instead of merging all threads.
    pub thread_frames: bool,
    /// Frames kept from the stack base (the thread frame not counted);
    /// deeper ones become one `[truncated N frames]` frame. At least 1.
    pub max_depth: u32,
    /// Sampled stacks: end each frame whose type the sampler knew in
    /// async-profiler's annotation (`_[j]` compiled, `_[i]` inlined,
    /// `_[0]` interpreted; native and unknown frames get none), which
    /// flame-graph tools' `java` palettes colour by.
    pub frame_types: bool,
}

impl Default for CollapseOptions {
    fn default() -> Self {
        CollapseOptions {
            weight: Weight::SelfTime,
            thread_frames: false,
            max_depth: DEFAULT_MAX_DEPTH,
            frame_types: false,
        }
    }
}

/// The `name` of a node that stands for the frames below the depth cap.
const TRUNCATED: u32 = u32::MAX;

struct Node {
    parent: u32,
    /// Index into `CallTree::names`, or [`TRUNCATED`].
    name: u32,
    /// Frames below the kept path: 0, or for a truncated node the most
    /// frames it stood for at once.
    truncated: u32,
    /// Frames of the path from the root (the thread frame not counted).
    depth: u32,
    self_ns: u64,
    calls: u64,
    samples: u64,
}

/// One node of a [`CallTree`], as [`CallTree::node`] shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeInfo<'a> {
    /// The parent's index (the root, 0, is its own parent).
    pub parent: u32,
    /// The frame's name; empty for a truncated node, see `truncated`.
    pub name: &'a str,
    /// For a `[truncated N frames]` node, N; else 0.
    pub truncated: u32,
    pub self_ns: u64,
    pub calls: u64,
    pub samples: u64,
}

/// The merged call tree of a trace (all threads, or one subtree per
/// thread), built as events stream past.
pub struct CallTree {
    opts: CollapseOptions,
    calls: CallMatcher,
    /// Node 0 is the root.
    nodes: Vec<Node>,
    children: HashMap<(u32, u32), u32>,
    names: Vec<String>,
    /// Frame names by method and, with `frame_types`, frame type.
    method_names: HashMap<(MethodId, FrameType), u32>,
    thread_roots: HashMap<ThreadRef, u32>,
    /// Per thread: open frames as (node, start, time in callees).
    stacks: Vec<Vec<(u32, u64, u64)>>,
    /// Sampled stacks already placed, by (thread root, stack): the node of
    /// their last frame, so a stack is walked once, not once per sample.
    sampled: HashMap<(u32, StackId), u32>,
    /// For a sampled weight: picks the events and checks the trace had some.
    weigher: Option<Weigher>,
    /// Frames that are no method (`[blocked on CLASS]`), by name.
    labels: HashMap<String, u32>,
}

/// A name that cannot break a folded line.
fn frame_name(s: &str) -> String {
    s.replace(';', ":").replace(['\n', '\r'], " ")
}

impl CallTree {
    /// A tree for a trace whose header is not known (a sampled weight then
    /// takes the samples for wall samples: `--weight cpu` counts RUN ones).
    pub fn new(opts: CollapseOptions) -> Self {
        let header = TraceHeader {
            version: 0,
            pid: 0,
            start_unix_ns: 0,
            properties: Vec::new(),
        };
        Self::for_trace(opts, &header).unwrap_or_else(|_| {
            Self::for_trace(
                CollapseOptions {
                    weight: Weight::SelfTime,
                    ..opts
                },
                &header,
            )
            .expect("self time needs no header")
        })
    }

    /// A tree for the trace with this header; fails when the header says
    /// the weight cannot be had (`--weight wall` of CPU samples).
    pub fn for_trace(opts: CollapseOptions, header: &TraceHeader) -> Result<Self, WeightError> {
        let weigher = match opts.weight {
            Weight::Sampled(w) => Some(Weigher::new(w, header)?),
            _ => None,
        };
        Ok(CallTree {
            opts: CollapseOptions {
                max_depth: opts.max_depth.max(1),
                ..opts
            },
            calls: CallMatcher::new(),
            nodes: vec![Node {
                parent: 0,
                name: 0,
                truncated: 0,
                depth: 0,
                self_ns: 0,
                calls: 0,
                samples: 0,
            }],
            children: HashMap::new(),
            names: vec![String::new()],
            method_names: HashMap::new(),
            thread_roots: HashMap::new(),
            stacks: Vec::new(),
            sampled: HashMap::new(),
            weigher,
            labels: HashMap::new(),
        })
    }

    /// After the last event: an error when the trace had nothing of the
    /// sampled weight asked for.
    pub fn check(&self) -> Result<(), WeightError> {
        self.weigher.as_ref().map_or(Ok(()), Weigher::check)
    }

    fn child(&mut self, parent: u32, name: u32, depth: u32) -> u32 {
        let next = self.nodes.len() as u32;
        let id = *self.children.entry((parent, name)).or_insert(next);
        if id == next {
            self.nodes.push(Node {
                parent,
                name,
                truncated: 0,
                depth,
                self_ns: 0,
                calls: 0,
                samples: 0,
            });
        }
        id
    }

    /// The node of a frame `name` called from `parent`: a new path node
    /// while the path is shorter than the cap, else the truncated node
    /// under the last kept frame, which then stands for `extra` more
    /// frames than the cap (at least).
    fn frame_under(&mut self, parent: u32, name: u32, extra: u32) -> u32 {
        let p = &self.nodes[parent as usize];
        if p.name == TRUNCATED && parent != 0 {
            let n = &mut self.nodes[parent as usize];
            n.truncated = n.truncated.max(extra);
            return parent;
        }
        // The root and the thread frames have depth 0.
        let depth = p.depth + 1;
        if depth > self.opts.max_depth {
            let t = self.child(parent, TRUNCATED, depth);
            let n = &mut self.nodes[t as usize];
            n.truncated = n.truncated.max(extra.max(1));
            return t;
        }
        self.child(parent, name, depth)
    }

    /// Number of nodes, the root (index 0) included. Children come after
    /// their parent.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when the tree holds only its root.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() == 1
    }

    /// Node `i` (0 is the root; with thread frames, its children are the
    /// threads).
    pub fn node(&self, i: usize) -> NodeInfo<'_> {
        let n = &self.nodes[i];
        NodeInfo {
            parent: n.parent,
            name: if n.name == TRUNCATED {
                ""
            } else {
                &self.names[n.name as usize]
            },
            truncated: n.truncated,
            self_ns: n.self_ns,
            calls: n.calls,
            samples: n.samples,
        }
    }

    /// Node `i`'s frame as a folded line shows it.
    pub fn label(&self, i: usize) -> std::borrow::Cow<'_, str> {
        let n = &self.nodes[i];
        if n.name == TRUNCATED {
            truncated_label(n.truncated).into()
        } else {
            self.names[n.name as usize].as_str().into()
        }
    }

    fn intern_method(&mut self, m: MethodId, syms: &SymbolTable) -> u32 {
        self.intern_frame(m, FrameType::Unknown, syms)
    }

    /// A method's frame, annotated with its type ([`type_suffix`]).
    fn intern_frame(&mut self, m: MethodId, ty: FrameType, syms: &SymbolTable) -> u32 {
        if let Some(&n) = self.method_names.get(&(m, ty)) {
            return n;
        }
        let names = MethodNames::resolve(syms, m);
        let n = self.names.len() as u32;
        self.names.push(frame_name(&format!(
            "{}.{}{}",
            names.class,
            names.name,
            type_suffix(ty)
        )));
        self.method_names.insert((m, ty), n);
        n
    }

    fn thread_root(&mut self, t: ThreadRef, syms: &SymbolTable) -> u32 {
        if !self.opts.thread_frames {
            return 0;
        }
        if let Some(&n) = self.thread_roots.get(&t) {
            return n;
        }
        let name = self.names.len() as u32;
        self.names.push(frame_name(&syms.thread_name(t)));
        let node = self.child(0, name, 0);
        self.thread_roots.insert(t, node);
        node
    }

    /// A frame that is no method, by its name.
    fn intern_label(&mut self, label: String) -> u32 {
        if let Some(&n) = self.labels.get(&label) {
            return n;
        }
        let n = self.names.len() as u32;
        self.names.push(frame_name(&label));
        self.labels.insert(label, n);
        n
    }

    /// Adds one event to the tree.
    pub fn add(&mut self, ev: &Event, syms: &SymbolTable) {
        if let Some(weigher) = &mut self.weigher {
            let lock = weigher.weight() == SampleWeight::Lock;
            match weigher.weigh(ev) {
                Some(Weighed::Stack { stack, weight }) => {
                    let root = self.thread_root(ev.thread, syms);
                    let node = match self.sampled.get(&(root, stack)) {
                        Some(&n) => n,
                        None => {
                            let st = syms.stack(stack);
                            let frames = st.map_or(&[][..], |s| s.frames.as_slice());
                            let cap = self.opts.max_depth as usize;
                            let mut node = root;
                            for (i, (m, _)) in frames.iter().enumerate().rev().take(cap) {
                                let ty = match st {
                                    Some(s) if self.opts.frame_types => s.frame_type(i),
                                    _ => FrameType::Unknown,
                                };
                                let name = self.intern_frame(*m, ty, syms);
                                node = self.frame_under(node, name, 0);
                            }
                            if frames.len() > cap {
                                let extra = u32::try_from(frames.len() - cap).unwrap_or(u32::MAX);
                                node = self.frame_under(node, TRUNCATED, extra);
                            }
                            self.sampled.insert((root, stack), node);
                            node
                        }
                    };
                    if node != 0 {
                        self.nodes[node as usize].samples += weight;
                    }
                }
                Some(Weighed::Lock { class, wait_ns }) => {
                    // Under the calls open on the waiting thread, if any.
                    let root = self.thread_root(ev.thread, syms);
                    let open = self.stacks.get(ev.thread.0 as usize);
                    let parent = open.and_then(|s| s.last()).map_or(root, |&(n, _, _)| n);
                    let extra = open.map_or(0, |s| s.len() as u32 + 1);
                    let name = self.intern_label(blocked_label(syms.string(class)));
                    let node =
                        self.frame_under(parent, name, extra.saturating_sub(self.opts.max_depth));
                    self.nodes[node as usize].samples += wait_ns;
                }
                None => {}
            }
            if !lock {
                return;
            }
        }
        // Names are interned before the matcher runs, while `syms` is at hand.
        let mut opened = None;
        if let vmview_format::EventKind::Call { method, .. } = ev.kind {
            opened = Some((
                self.intern_method(method, syms),
                self.thread_root(ev.thread, syms),
            ));
        }
        let mut calls = std::mem::take(&mut self.calls);
        calls.event(ev, |tr| self.apply(tr, opened));
        self.calls = calls;
    }

    fn apply(&mut self, tr: Transition<'_>, opened: Option<(u32, u32)>) {
        match tr {
            Transition::Open { thread, frame } => {
                let (name, root) = opened.expect("an Open comes from a CALL");
                let i = thread.0 as usize;
                if i >= self.stacks.len() {
                    self.stacks.resize_with(i + 1, Vec::new);
                }
                let parent = self.stacks[i].last().map_or(root, |&(n, _, _)| n);
                let extra = (self.stacks[i].len() as u32 + 1).saturating_sub(self.opts.max_depth);
                let node = self.frame_under(parent, name, extra);
                self.nodes[node as usize].calls += 1;
                self.stacks[i].push((node, frame.start_ns, 0));
            }
            Transition::Close { thread, at_ns, .. } => {
                let stack = &mut self.stacks[thread.0 as usize];
                let (node, start, callees) = stack.pop().expect("matched close");
                let total = at_ns.saturating_sub(start);
                self.nodes[node as usize].self_ns += total.saturating_sub(callees);
                if let Some(parent) = stack.last_mut() {
                    parent.2 += total;
                }
            }
        }
    }

    /// Closes the calls still open at each thread's last event.
    pub fn close_open_calls(&mut self) {
        let mut calls = std::mem::take(&mut self.calls);
        calls.finish(|tr| self.apply(tr, None));
        self.calls = calls;
    }

    /// The folded lines, sorted, without zero weights.
    pub fn folded(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let mut path = Vec::new();
        for (i, n) in self.nodes.iter().enumerate().skip(1) {
            let w = match self.opts.weight {
                Weight::SelfTime => n.self_ns,
                Weight::Calls => n.calls,
                Weight::Sampled(_) => n.samples,
            };
            if w == 0 {
                continue;
            }
            path.clear();
            let mut at = i;
            while at != 0 {
                path.push(self.label(at));
                at = self.nodes[at].parent as usize;
            }
            path.reverse();
            lines.push(format!("{} {w}", path.join(";")));
        }
        lines.sort_unstable();
        lines
    }
}

/// Writes collapsed stacks at [`EventWriter::finish`].
pub struct CollapsedWriter<W: Write> {
    out: W,
    tree: CallTree,
}

impl<W: Write> CollapsedWriter<W> {
    pub fn new(out: W, opts: CollapseOptions) -> Self {
        CollapsedWriter {
            out,
            tree: CallTree::new(opts),
        }
    }

    /// A writer for the trace with this header (a sampled weight needs
    /// its `sampler`); fails when the header says the weight cannot be had.
    pub fn for_trace(
        out: W,
        opts: CollapseOptions,
        header: &TraceHeader,
    ) -> Result<Self, WeightError> {
        Ok(CollapsedWriter {
            out,
            tree: CallTree::for_trace(opts, header)?,
        })
    }
}

impl<W: Write> EventWriter for CollapsedWriter<W> {
    fn write_event(&mut self, ev: &Event, syms: &SymbolTable) -> io::Result<()> {
        self.tree.add(ev, syms);
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        self.tree.check().map_err(WeightError::into_io)?;
        self.tree.close_open_calls();
        for line in self.tree.folded() {
            self.out.write_all(line.as_bytes())?;
            self.out.write_all(b"\n")?;
        }
        self.out.flush()
    }
}
