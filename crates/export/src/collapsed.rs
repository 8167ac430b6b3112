//! Collapsed ("folded") stacks: `frame;frame;frame weight` lines, the input
//! of Brendan Gregg's `flamegraph.pl`, inferno, speedscope and many other
//! flame-graph tools.
//!
//! The stacks come from one of two sources. By default, the call tree that
//! CALL/RETURN pairs build: every path of traced methods from a thread's
//! first traced frame down, weighted by its **self time** in nanoseconds
//! (time in the method minus time in its traced callees; a flame graph then
//! shows total time as width) or by its **number of calls**. With
//! [`Weight::Samples`], the stacks of SAMPLE events (`events=samples`),
//! base first, all frames (JDK ones included), one count per sample.
//!
//! Frames are `class.method` (dotted class name, no descriptor: the folded
//! format separates frames with `;`, which descriptors contain; overloads
//! therefore share a frame). Calls are matched by [`crate::calls`], so
//! missing RETURNs (a cut trace) close at the thread's next return from
//! below or at its last event, and RETURNs without a CALL are ignored.
//!
//! Memory grows with the number of distinct call paths, not with the
//! number of events; nothing is written before [`EventWriter::finish`],
//! since a path's weight is only known at the end.

use std::collections::HashMap;
use std::io::{self, Write};

use vmview_format::{Event, MethodId, SymbolTable, ThreadRef};

use crate::calls::{CallMatcher, Transition};
use crate::names::MethodNames;
use crate::EventWriter;

/// What a folded line's number counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weight {
    /// Self time of the path's last frame, in nanoseconds.
    SelfTime,
    /// Calls of the path's last frame.
    Calls,
    /// SAMPLE events whose stack is the path (CALL/RETURN are ignored).
    Samples,
}

/// How stacks are folded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollapseOptions {
    pub weight: Weight,
    /// Start every stack with its thread's name (one tower per thread),
    /// instead of merging all threads.
    pub thread_frames: bool,
}

impl Default for CollapseOptions {
    fn default() -> Self {
        CollapseOptions {
            weight: Weight::SelfTime,
            thread_frames: false,
        }
    }
}

struct Node {
    parent: u32,
    /// Index into `CallTree::names`.
    name: u32,
    self_ns: u64,
    calls: u64,
    samples: u64,
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
    method_names: HashMap<MethodId, u32>,
    thread_roots: HashMap<ThreadRef, u32>,
    /// Per thread: open frames as (node, start, time in callees).
    stacks: Vec<Vec<(u32, u64, u64)>>,
}

/// A name that cannot break a folded line.
fn frame_name(s: &str) -> String {
    s.replace(';', ":").replace(['\n', '\r'], " ")
}

impl CallTree {
    pub fn new(opts: CollapseOptions) -> Self {
        CallTree {
            opts,
            calls: CallMatcher::new(),
            nodes: vec![Node {
                parent: 0,
                name: 0,
                self_ns: 0,
                calls: 0,
                samples: 0,
            }],
            children: HashMap::new(),
            names: vec![String::new()],
            method_names: HashMap::new(),
            thread_roots: HashMap::new(),
            stacks: Vec::new(),
        }
    }

    fn child(&mut self, parent: u32, name: u32) -> u32 {
        let next = self.nodes.len() as u32;
        let id = *self.children.entry((parent, name)).or_insert(next);
        if id == next {
            self.nodes.push(Node {
                parent,
                name,
                self_ns: 0,
                calls: 0,
                samples: 0,
            });
        }
        id
    }

    fn intern_method(&mut self, m: MethodId, syms: &SymbolTable) -> u32 {
        if let Some(&n) = self.method_names.get(&m) {
            return n;
        }
        let names = MethodNames::resolve(syms, m);
        let n = self.names.len() as u32;
        self.names
            .push(frame_name(&format!("{}.{}", names.class, names.name)));
        self.method_names.insert(m, n);
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
        let node = self.child(0, name);
        self.thread_roots.insert(t, node);
        node
    }

    /// Adds one event to the tree.
    pub fn add(&mut self, ev: &Event, syms: &SymbolTable) {
        if self.opts.weight == Weight::Samples {
            if let vmview_format::EventKind::Sample { stack, .. } = ev.kind {
                let mut node = self.thread_root(ev.thread, syms);
                let frames = syms.stack(stack).map_or(&[][..], |s| s.frames.as_slice());
                for (m, _) in frames.iter().rev() {
                    let name = self.intern_method(*m, syms);
                    node = self.child(node, name);
                }
                if node != 0 {
                    self.nodes[node as usize].samples += 1;
                }
            }
            return;
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
                let node = self.child(parent, name);
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
                Weight::Samples => n.samples,
            };
            if w == 0 {
                continue;
            }
            path.clear();
            let mut at = i;
            while at != 0 {
                path.push(self.names[self.nodes[at].name as usize].as_str());
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
}

impl<W: Write> EventWriter for CollapsedWriter<W> {
    fn write_event(&mut self, ev: &Event, syms: &SymbolTable) -> io::Result<()> {
        self.tree.add(ev, syms);
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        self.tree.close_open_calls();
        for line in self.tree.folded() {
            self.out.write_all(line.as_bytes())?;
            self.out.write_all(b"\n")?;
        }
        self.out.flush()
    }
}
