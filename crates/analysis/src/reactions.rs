//! DYMON's "reactions" (Reiss, 2008): from periodic stack samples with
//! thread states, find the event handlers of a program without knowing it.
//!
//! Servers, crawlers and UIs are loops of "get next event, process event".
//! In samples that shows as a node of the *user-call trie* whose waiting
//! (WAIT or IO) sits in the node itself (the loop calls the JDK directly:
//! `BlockingQueue.take()`, `InputStream.read()`) or in a child (the slides'
//! `getNextUrl`), next to a child whose subtree is dominated by RUN: that
//! child is the handler. Only user frames become trie nodes, so the shape
//! does not depend on how deep the JDK's own machinery goes.
//!
//! Most servers do not own their loop: the "get next event" half lives in a
//! framework (Jetty, Tomcat, Netty, the JDK's HttpServer, a thread pool)
//! and the application's code is what the framework calls per event. When
//! the trace says which classes are the application's own (the header's
//! `app_packages`, from the class path's application entries), only those
//! make trie nodes, and a second rule applies at the root: an application
//! method entered from library code, RUN-dominated, on threads whose
//! samples *without* application frames wait (the library waiting for the
//! next event between entries) is a handler too. The framework profiles
//! ([`crate::frameworks`]) label such handlers and keep a framework's own
//! classes library code; detection does not depend on them.
//!
//! [`ReactionTrie`] is an [`EventSink`]: feed it SAMPLE events (others are
//! ignored), then [`ReactionTrie::finish`] runs the detection. It is pure:
//! handles in, handles out; the CLI names and prints them.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use vmview_format::{Event, EventKind, MethodId, SymbolTable, ThreadRef, ThreadState};
use vmview_options::glob_matches;

use crate::frameworks::Profiles;
use crate::latency::LatencySummary;
use crate::EventSink;

/// Class-name prefixes that are system code unless `--user` says otherwise:
/// the JDK (with its `org.` API packages: SAX, DOM, GSS) and the Kotlin and
/// Scala runtimes; `vmview.` is the agent's probe, on the stack of
/// instrumented handlers.
pub const DEFAULT_SYSTEM: &[&str] = &[
    "java.",
    "javax.",
    "jdk.",
    "sun.",
    "com.sun.",
    "org.xml.sax.",
    "org.w3c.dom.",
    "org.ietf.jgss.",
    "kotlin.",
    "scala.",
    "vmview.",
];

/// Samples per state, indexed by [`ThreadState::index`].
pub type StateCounts = [u64; 5];

/// How to split user from system code, and the significance cut-offs.
#[derive(Debug, Clone)]
pub struct ReactionConfig {
    /// Class globs that are user code; when non-empty, everything else is
    /// system code.
    pub user: Vec<String>,
    /// Class globs that are system code in addition to [`DEFAULT_SYSTEM`].
    pub system: Vec<String>,
    /// A handler needs at least this many RUN samples, and its loop at
    /// least this many WAIT or IO samples.
    pub min_samples: u64,
    /// A handler needs at least this share of all RUN samples (0..=1).
    pub min_share: f64,
    /// The packages of the application's own classes (the trace header's
    /// `app_packages`): when set and `user` is empty, user code is exactly
    /// their classes; everything else (JDK, frameworks, dependencies) is
    /// library code. `None`: the [`DEFAULT_SYSTEM`] prefixes decide.
    pub app_packages: Option<HashSet<String>>,
    /// Framework profiles: library classes, event loops, dispatch points.
    pub profiles: Profiles,
}

impl ReactionConfig {
    /// The default configuration for a trace with these header
    /// properties: its `app_packages`, if recorded, split user code from
    /// library code.
    pub fn for_trace(properties: &[(String, String)]) -> Self {
        ReactionConfig {
            app_packages: properties
                .iter()
                .find(|(k, _)| k == APP_PACKAGES_PROPERTY)
                .map(|(_, v)| parse_app_packages(v)),
            ..ReactionConfig::default()
        }
    }
}

/// The trace header property listing the application's packages
/// (space-separated, the default package as [`DEFAULT_PACKAGE`]).
pub const APP_PACKAGES_PROPERTY: &str = "app_packages";

/// How `app_packages` writes the unnamed package.
pub const DEFAULT_PACKAGE: &str = "(default)";

/// The package of a dotted class name, [`DEFAULT_PACKAGE`] for none.
pub fn package_of(class: &str) -> &str {
    match class.rfind('.') {
        Some(i) => &class[..i],
        None => DEFAULT_PACKAGE,
    }
}

/// The packages of an `app_packages` property value.
pub fn parse_app_packages(value: &str) -> HashSet<String> {
    value.split_whitespace().map(str::to_string).collect()
}

impl Default for ReactionConfig {
    fn default() -> Self {
        ReactionConfig {
            user: Vec::new(),
            system: Vec::new(),
            min_samples: 5,
            min_share: 0.01,
            app_packages: None,
            profiles: Profiles::builtin(),
        }
    }
}

/// One node of the user-call trie. Node 0 is the root (the stack base).
#[derive(Debug, Clone)]
pub struct TrieNode {
    /// `None` for the root.
    pub method: Option<MethodId>,
    pub parent: usize,
    pub children: Vec<usize>,
    /// Samples whose deepest user frame is this node, by state.
    pub own: StateCounts,
    /// `own` summed over the subtree (filled by `finish`).
    pub total: StateCounts,
    /// `own` per thread.
    pub threads: BTreeMap<ThreadRef, StateCounts>,
}

/// Whether a handler's loop waits for events or reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandlerKind {
    /// The loop waits (queues, `wait()`, `park`): the slides' NODE_WAIT.
    Wait,
    /// The loop reads or polls (sockets, files, selectors): NODE_IO.
    Io,
}

impl HandlerKind {
    pub fn name(self) -> &'static str {
        match self {
            HandlerKind::Wait => "NODE_WAIT",
            HandlerKind::Io => "NODE_IO",
        }
    }
}

/// Which rule found a handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandlerRule {
    /// DYMON's: a RUN child of an application node that waits or reads
    /// for the next event (the program owns its loop).
    OwnLoop,
    /// An application method entered from library code, on threads whose
    /// samples outside application code wait (a framework owns the loop).
    LibraryLoop,
}

impl HandlerRule {
    pub fn name(self) -> &'static str {
        match self {
            HandlerRule::OwnLoop => "own-loop",
            HandlerRule::LibraryLoop => "library-loop",
        }
    }
}

/// An event handler found in the trie.
#[derive(Debug, Clone, PartialEq)]
pub struct Handler {
    pub rule: HandlerRule,
    /// With [`HandlerRule::LibraryLoop`]: where its threads waited most
    /// outside application code (a profile's loop method when one matched).
    pub wait_site: Option<MethodId>,
    /// With [`HandlerRule::LibraryLoop`]: the library method that called it
    /// most often (the first profile dispatch method below it, else its
    /// direct caller).
    pub dispatch: Option<MethodId>,
    /// The framework a profile names for the dispatch method or the wait
    /// site, if any.
    pub framework: Option<String>,
    /// The handler's trie node (the loop node's child on the path to the
    /// run time).
    pub node: usize,
    /// The loop node: the one that gets the next event.
    pub loop_node: usize,
    pub kind: HandlerKind,
    /// Samples in the handler's subtree.
    pub samples: u64,
    /// RUN samples in its subtree.
    pub run: u64,
    /// `run` over all RUN samples of the trace.
    pub share: f64,
    /// State mix in its subtree.
    pub states: StateCounts,
    /// WAIT or IO samples of the loop that qualified it.
    pub waiting: u64,
    /// Threads that ran it, with their samples in the subtree.
    pub threads: Vec<(ThreadRef, u64)>,
}

/// A user method called from system code that user code called (a
/// comparator called by a sort, a SAX handler called by the parser).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Callback {
    pub method: MethodId,
    /// Samples with this method on the stack as a callback.
    pub samples: u64,
}

/// One thread's behaviour: its state mix and the handlers it ran.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadBehaviour {
    pub thread: ThreadRef,
    pub states: StateCounts,
    /// (index into [`Reactions::handlers`], samples in that handler).
    pub handlers: Vec<(usize, u64)>,
}

/// What [`ReactionTrie::finish`] found.
#[derive(Debug, Clone)]
pub struct Reactions {
    pub nodes: Vec<TrieNode>,
    /// Largest RUN count first.
    pub handlers: Vec<Handler>,
    /// Most samples first.
    pub callbacks: Vec<Callback>,
    /// By thread handle.
    pub threads: Vec<ThreadBehaviour>,
    /// Thread samples (SAMPLE events).
    pub samples: u64,
    /// Sampling ticks (distinct sample times).
    pub ticks: u64,
    pub run_samples: u64,
    pub first_ns: u64,
    pub last_ns: u64,
}

/// What the profiles say about one method.
struct Profiled {
    /// The framework whose loop it is.
    event_loop: Option<String>,
    /// The framework whose dispatch method it is.
    dispatch: Option<String>,
    /// In a [`DEFAULT_SYSTEM`] package.
    jdk: bool,
}

/// Builds the trie from SAMPLE events.
pub struct ReactionTrie {
    config: ReactionConfig,
    nodes: Vec<TrieNode>,
    index: HashMap<(usize, MethodId), usize>,
    user: HashMap<MethodId, bool>,
    callbacks: HashMap<MethodId, u64>,
    per_thread: BTreeMap<ThreadRef, StateCounts>,
    samples: u64,
    ticks: u64,
    first_ns: Option<u64>,
    last_ns: u64,
    /// Reused per sample.
    seen_callbacks: Vec<MethodId>,
    /// Per thread: where samples without application frames waited.
    root_waits: HashMap<ThreadRef, HashMap<MethodId, u64>>,
    /// Per root child (first application frame): its dispatch methods.
    dispatch: HashMap<usize, HashMap<MethodId, u64>>,
    /// Per method: its profile lookups and whether it is the JDK's.
    profiled: HashMap<MethodId, Profiled>,
}

impl ReactionTrie {
    pub fn new(config: ReactionConfig) -> Self {
        ReactionTrie {
            config,
            nodes: vec![new_node(None, 0)],
            index: HashMap::new(),
            user: HashMap::new(),
            callbacks: HashMap::new(),
            per_thread: BTreeMap::new(),
            samples: 0,
            ticks: 0,
            first_ns: None,
            last_ns: 0,
            seen_callbacks: Vec::new(),
            root_waits: HashMap::new(),
            dispatch: HashMap::new(),
            profiled: HashMap::new(),
        }
    }

    /// What the profiles say about `m` (looked up once per method).
    fn profile(&mut self, m: MethodId, syms: &SymbolTable) -> &Profiled {
        let p = &self.config.profiles;
        self.profiled.entry(m).or_insert_with(|| {
            let q = qualified_name(syms, m);
            Profiled {
                event_loop: p.event_loop(&q).map(str::to_string),
                dispatch: p.dispatch(&q).map(str::to_string),
                jdk: DEFAULT_SYSTEM.iter().any(|p| q.starts_with(p)),
            }
        })
    }

    /// Where a sample without application frames waits: a profile's loop
    /// method, else the topmost non-JDK frame, else the outermost frame
    /// below the thread's base.
    fn wait_site(&mut self, frames: &[MethodId], syms: &SymbolTable) -> Option<MethodId> {
        for &m in frames {
            if self.profile(m, syms).event_loop.is_some() {
                return Some(m);
            }
        }
        if let Some(&m) = frames
            .iter()
            .find(|m| self.profiled.get(*m).is_some_and(|p| !p.jdk))
        {
            return Some(m);
        }
        match frames {
            [.., m, base] if qualified_name(syms, *base) == "java.lang.Thread.run" => Some(*m),
            [.., m] => Some(*m),
            [] => None,
        }
    }

    fn is_user(&mut self, m: MethodId, syms: &SymbolTable) -> bool {
        if let Some(u) = self.user.get(&m) {
            return *u;
        }
        let class = syms.method(m).map_or("?", |s| syms.string(s.class));
        let c = &self.config;
        let user = if !c.user.is_empty() {
            c.user.iter().any(|g| glob_matches(g, class))
        } else if DEFAULT_SYSTEM.iter().any(|p| class.starts_with(p))
            || c.system.iter().any(|g| glob_matches(g, class))
            || c.profiles.library(class).is_some()
        {
            false
        } else if let Some(app) = &c.app_packages {
            app.contains(package_of(class))
        } else {
            true
        };
        self.user.insert(m, user);
        user
    }

    /// Adds one sample: `frames` top first.
    pub fn add_sample(
        &mut self,
        thread: ThreadRef,
        time_ns: u64,
        state: ThreadState,
        frames: &[MethodId],
        syms: &SymbolTable,
    ) {
        self.samples += 1;
        match self.first_ns {
            None => {
                self.first_ns = Some(time_ns);
                self.ticks = 1;
            }
            Some(_) if time_ns != self.last_ns => self.ticks += 1,
            Some(_) => {}
        }
        self.last_ns = time_ns;
        let mut node = 0;
        let mut seen_user = false;
        let mut system_between = false;
        self.seen_callbacks.clear();
        for (i, &m) in frames.iter().enumerate().rev() {
            if self.is_user(m, syms) {
                if !seen_user {
                    // The first application frame: what called it from
                    // library code (frames below it, towards the base).
                    let below = &frames[i + 1..];
                    let dispatch = below
                        .iter()
                        .copied()
                        .find(|b| self.profile(*b, syms).dispatch.is_some())
                        .or_else(|| below.first().copied());
                    if let Some(d) = dispatch {
                        let child = self.child(0, m);
                        *self
                            .dispatch
                            .entry(child)
                            .or_default()
                            .entry(d)
                            .or_default() += 1;
                    }
                }
                if seen_user && system_between && !self.seen_callbacks.contains(&m) {
                    self.seen_callbacks.push(m);
                }
                node = self.child(node, m);
                seen_user = true;
                system_between = false;
            } else if seen_user {
                system_between = true;
            }
        }
        for m in &self.seen_callbacks {
            *self.callbacks.entry(*m).or_default() += 1;
        }
        if node == 0 && matches!(state, ThreadState::Wait | ThreadState::Io) {
            if let Some(site) = self.wait_site(frames, syms) {
                *self
                    .root_waits
                    .entry(thread)
                    .or_default()
                    .entry(site)
                    .or_default() += 1;
            }
        }
        let s = state.index();
        let n = &mut self.nodes[node];
        n.own[s] += 1;
        n.threads.entry(thread).or_default()[s] += 1;
        self.per_thread.entry(thread).or_default()[s] += 1;
    }

    fn child(&mut self, parent: usize, m: MethodId) -> usize {
        if let Some(&c) = self.index.get(&(parent, m)) {
            return c;
        }
        let c = self.nodes.len();
        self.nodes.push(new_node(Some(m), parent));
        self.nodes[parent].children.push(c);
        self.index.insert((parent, m), c);
        c
    }

    /// Subtree totals, then handlers, callbacks and thread behaviour.
    pub fn finish(mut self) -> Reactions {
        for i in 0..self.nodes.len() {
            self.nodes[i].total = self.nodes[i].own;
        }
        // Children always come after their parent.
        for i in (1..self.nodes.len()).rev() {
            let (t, p) = (self.nodes[i].total, self.nodes[i].parent);
            for (sum, n) in self.nodes[p].total.iter_mut().zip(t) {
                *sum += n;
            }
        }
        let run_samples = self.nodes[0].total[ThreadState::Run.index()];
        let handlers = self.detect(run_samples);
        let mut callbacks: Vec<Callback> = self
            .callbacks
            .iter()
            .map(|(m, n)| Callback {
                method: *m,
                samples: *n,
            })
            .collect();
        callbacks.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.method.cmp(&b.method)));
        let threads = self
            .per_thread
            .iter()
            .map(|(t, states)| ThreadBehaviour {
                thread: *t,
                states: *states,
                handlers: handlers
                    .iter()
                    .enumerate()
                    .filter_map(|(i, h)| {
                        h.threads
                            .iter()
                            .find(|(ht, _)| ht == t)
                            .map(|(_, n)| (i, *n))
                    })
                    .collect(),
            })
            .collect();
        Reactions {
            nodes: self.nodes,
            handlers,
            callbacks,
            threads,
            samples: self.samples,
            ticks: self.ticks,
            run_samples,
            first_ns: self.first_ns.unwrap_or(0),
            last_ns: self.last_ns,
        }
    }

    fn detect(&self, run_samples: u64) -> Vec<Handler> {
        let c = &self.config;
        let (run, io, wait) = (
            ThreadState::Run.index(),
            ThreadState::Io.index(),
            ThreadState::Wait.index(),
        );
        // A framework's handler that reads or writes (its request, its
        // reply) waits as part of the event, not for the next one: no
        // loop lies inside a library-loop handler.
        let library = self.detect_library_loops(run_samples);
        let inside_library_handler = |mut i: usize| {
            while i != 0 {
                if library.iter().any(|h| h.node == i) {
                    return true;
                }
                i = self.nodes[i].parent;
            }
            false
        };
        let mut found = Vec::new();
        for (i, n) in self.nodes.iter().enumerate().skip(1) {
            if inside_library_handler(i) {
                continue;
            }
            let mut waiting = [0u64; 5];
            waiting[wait] = n.own[wait];
            waiting[io] = n.own[io];
            for &ch in &n.children {
                let t = &self.nodes[ch].total;
                match dominant(t) {
                    d if d == wait || d == io => waiting[d] += t[d],
                    _ => {}
                }
            }
            let (kind, waited) = if waiting[io] > waiting[wait] {
                (HandlerKind::Io, waiting[io])
            } else {
                (HandlerKind::Wait, waiting[wait])
            };
            if waited == 0 || waited < c.min_samples {
                continue;
            }
            for &ch in &n.children {
                let t = self.nodes[ch].total;
                let Some(share) = self.significant_run_share(&t, run_samples) else {
                    continue;
                };
                found.push(Handler {
                    rule: HandlerRule::OwnLoop,
                    wait_site: None,
                    dispatch: None,
                    framework: None,
                    node: ch,
                    loop_node: i,
                    kind,
                    samples: t.iter().sum(),
                    run: t[run],
                    share,
                    states: t,
                    waiting: waited,
                    threads: self.subtree_threads(ch),
                });
            }
        }
        found.extend(library);
        found.sort_by(|a, b| b.run.cmp(&a.run).then(a.node.cmp(&b.node)));
        found
    }

    /// A candidate handler's share of all RUN samples, when its subtree is
    /// RUN-dominated and passes both cut-offs (absolute and relative);
    /// the test both rules apply to a candidate.
    fn significant_run_share(&self, t: &StateCounts, run_samples: u64) -> Option<f64> {
        let c = &self.config;
        let run = ThreadState::Run.index();
        if dominant(t) != run {
            return None;
        }
        let share = if run_samples == 0 {
            0.0
        } else {
            t[run] as f64 / run_samples as f64
        };
        (t[run] >= c.min_samples && share >= c.min_share).then_some(share)
    }

    /// The second rule: application methods entered from library code
    /// (children of the root) on threads that wait outside application
    /// code between entries.
    fn detect_library_loops(&self, run_samples: u64) -> Vec<Handler> {
        let c = &self.config;
        let (run, io, wait) = (
            ThreadState::Run.index(),
            ThreadState::Io.index(),
            ThreadState::Wait.index(),
        );
        let root = &self.nodes[0];
        let mut found = Vec::new();
        for &ch in &root.children {
            let t = self.nodes[ch].total;
            let Some(share) = self.significant_run_share(&t, run_samples) else {
                continue;
            };
            let threads = self.subtree_threads(ch);
            let (mut w, mut r) = (0u64, 0u64);
            let mut sites: HashMap<MethodId, u64> = HashMap::new();
            for (th, _) in &threads {
                if let Some(own) = root.threads.get(th) {
                    w += own[wait];
                    r += own[io];
                }
                for (m, n) in self.root_waits.get(th).into_iter().flatten() {
                    *sites.entry(*m).or_default() += n;
                }
            }
            let (kind, waited) = if r > w {
                (HandlerKind::Io, r)
            } else {
                (HandlerKind::Wait, w)
            };
            if waited == 0 || waited < c.min_samples {
                continue;
            }
            let wait_site = most(&sites);
            let dispatch = self.dispatch.get(&ch).and_then(most);
            let framework = dispatch
                .and_then(|m| self.profiled.get(&m))
                .and_then(|p| p.dispatch.clone())
                .or_else(|| {
                    wait_site
                        .and_then(|m| self.profiled.get(&m))
                        .and_then(|p| p.event_loop.clone())
                });
            found.push(Handler {
                rule: HandlerRule::LibraryLoop,
                wait_site,
                dispatch,
                framework,
                node: ch,
                loop_node: 0,
                kind,
                samples: t.iter().sum(),
                run: t[run],
                share,
                states: t,
                waiting: waited,
                threads,
            });
        }
        found
    }

    fn subtree_threads(&self, root: usize) -> Vec<(ThreadRef, u64)> {
        let mut per: BTreeMap<ThreadRef, u64> = BTreeMap::new();
        let mut stack = vec![root];
        while let Some(i) = stack.pop() {
            let n = &self.nodes[i];
            for (t, counts) in &n.threads {
                *per.entry(*t).or_default() += counts.iter().sum::<u64>();
            }
            stack.extend(&n.children);
        }
        per.into_iter().collect()
    }
}

impl EventSink for ReactionTrie {
    fn event(&mut self, ev: &Event, syms: &SymbolTable) {
        if let EventKind::Sample { state, stack, .. } = &ev.kind {
            let frames: Vec<MethodId> = syms
                .stack(*stack)
                .map(|s| s.frames.iter().map(|(m, _)| *m).collect())
                .unwrap_or_default();
            self.add_sample(ev.thread, ev.time_ns, *state, &frames, syms);
        }
    }
}

fn new_node(method: Option<MethodId>, parent: usize) -> TrieNode {
    TrieNode {
        method,
        parent,
        children: Vec::new(),
        own: [0; 5],
        total: [0; 5],
        threads: BTreeMap::new(),
    }
}

/// The key with the largest count (the smallest key on a tie).
fn most(counts: &HashMap<MethodId, u64>) -> Option<MethodId> {
    counts
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(m, _)| *m)
}

/// `class.method` of a method handle.
fn qualified_name(syms: &SymbolTable, m: MethodId) -> String {
    match syms.method(m) {
        Some(s) => format!("{}.{}", syms.string(s.class), syms.string(s.name)),
        None => "?".to_string(),
    }
}

/// The state with the most samples (RUN on a tie, then in state order).
fn dominant(c: &StateCounts) -> usize {
    let mut best = 0;
    for s in 1..5 {
        if c[s] > c[best] {
            best = s;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmview_format::{MethodSymbol, StringId, Symbol};

    /// Methods 0.. named by class, all with name `m`.
    fn syms(classes: &[&str]) -> SymbolTable {
        let mut s = SymbolTable::default();
        s.insert(Symbol::String {
            id: StringId(0),
            text: "m".into(),
        });
        for (i, c) in classes.iter().enumerate() {
            let id = i as u32 + 1;
            s.insert(Symbol::String {
                id: StringId(id),
                text: c.to_string(),
            });
            s.insert(Symbol::Method(MethodSymbol {
                id: MethodId(i as u32),
                class: StringId(id),
                name: StringId(0),
                sig: StringId(0),
                param_names: vec![],
                modifiers: 0,
            }));
        }
        s
    }

    const BASE: MethodId = MethodId(0); // java.lang.Thread
    const LOOP: MethodId = MethodId(1); // app.Loop
    const TAKE: MethodId = MethodId(2); // java.util.concurrent.Queue
    const HANDLE: MethodId = MethodId(3); // app.Handler
    const WORK: MethodId = MethodId(4); // app.Work
    const SORT: MethodId = MethodId(5); // java.util.Collections
    const CMP: MethodId = MethodId(6); // app.Cmp

    fn table() -> SymbolTable {
        syms(&[
            "java.lang.Thread",
            "app.Loop",
            "java.util.concurrent.Queue",
            "app.Handler",
            "app.Work",
            "java.util.Collections",
            "app.Cmp",
        ])
    }

    /// A queue consumer: `wait` samples in take(), `run` in handle()→work().
    fn consumer(trie: &mut ReactionTrie, syms: &SymbolTable, wait: u64, run: u64) {
        let t = ThreadRef(1);
        for i in 0..wait {
            trie.add_sample(t, i, ThreadState::Wait, &[TAKE, LOOP, BASE], syms);
        }
        for i in 0..run {
            let frames: &[MethodId] = if i % 2 == 0 {
                &[WORK, HANDLE, LOOP, BASE]
            } else {
                &[HANDLE, LOOP, BASE]
            };
            trie.add_sample(t, wait + i, ThreadState::Run, frames, syms);
        }
    }

    #[test]
    fn counts_go_to_the_deepest_user_frame_and_totals_to_ancestors() {
        let s = table();
        let mut trie = ReactionTrie::new(ReactionConfig::default());
        consumer(&mut trie, &s, 7, 10);
        let r = trie.finish();
        // Root, Loop, Handler, Work: the JDK frames are no nodes.
        assert_eq!(r.nodes.len(), 4);
        let node = |m| r.nodes.iter().position(|n| n.method == Some(m)).unwrap();
        let (lp, h, w) = (node(LOOP), node(HANDLE), node(WORK));
        assert_eq!(r.nodes[lp].own, [0, 0, 7, 0, 0]);
        assert_eq!(r.nodes[h].own, [5, 0, 0, 0, 0]);
        assert_eq!(r.nodes[w].own, [5, 0, 0, 0, 0]);
        assert_eq!(r.nodes[lp].total, [10, 0, 7, 0, 0]);
        assert_eq!(r.nodes[0].total, [10, 0, 7, 0, 0]);
        assert_eq!(r.samples, 17);
        assert_eq!(r.ticks, 17);
        assert_eq!(r.run_samples, 10);
    }

    #[test]
    fn a_run_child_of_a_waiting_loop_is_a_wait_handler() {
        let s = table();
        let mut trie = ReactionTrie::new(ReactionConfig::default());
        consumer(&mut trie, &s, 7, 10);
        let r = trie.finish();
        assert_eq!(r.handlers.len(), 1);
        let h = &r.handlers[0];
        assert_eq!(r.nodes[h.node].method, Some(HANDLE));
        assert_eq!(r.nodes[h.loop_node].method, Some(LOOP));
        assert_eq!(h.kind, HandlerKind::Wait);
        assert_eq!((h.samples, h.run, h.waiting), (10, 10, 7));
        assert_eq!(h.share, 1.0);
        assert_eq!(h.threads, vec![(ThreadRef(1), 10)]);
        assert_eq!(r.threads[0].handlers, vec![(0, 10)]);
        assert!(r.callbacks.is_empty());
    }

    #[test]
    fn cut_offs_are_absolute_and_relative() {
        let s = table();
        // 5 RUN samples in the handler: exactly the absolute cut-off.
        let cfg = ReactionConfig {
            min_samples: 5,
            min_share: 0.0,
            ..ReactionConfig::default()
        };
        let mut trie = ReactionTrie::new(cfg.clone());
        consumer(&mut trie, &s, 5, 5);
        assert_eq!(trie.finish().handlers.len(), 1);
        let mut trie = ReactionTrie::new(ReactionConfig {
            min_samples: 6,
            ..cfg.clone()
        });
        consumer(&mut trie, &s, 9, 5);
        assert!(trie.finish().handlers.is_empty(), "5 RUN < 6");
        let mut trie = ReactionTrie::new(ReactionConfig {
            min_samples: 6,
            ..cfg.clone()
        });
        consumer(&mut trie, &s, 5, 9);
        assert!(trie.finish().handlers.is_empty(), "5 WAIT < 6");
        // Relative: 10 of 40 RUN samples is 25%.
        for (share, found) in [(0.25, 1), (0.26, 0)] {
            let mut trie = ReactionTrie::new(ReactionConfig {
                min_share: share,
                ..cfg.clone()
            });
            consumer(&mut trie, &s, 7, 10);
            for i in 0..30 {
                trie.add_sample(ThreadRef(2), i, ThreadState::Run, &[WORK, BASE], &s);
            }
            assert_eq!(trie.finish().handlers.len(), found, "min_share {share}");
        }
    }

    #[test]
    fn a_pure_compute_loop_is_no_handler_and_its_comparator_is_a_callback() {
        let s = table();
        let mut trie = ReactionTrie::new(ReactionConfig::default());
        for i in 0..20 {
            let frames: &[MethodId] = if i % 4 == 0 {
                &[SORT, LOOP, BASE]
            } else {
                &[CMP, SORT, SORT, LOOP, BASE]
            };
            trie.add_sample(ThreadRef(3), i, ThreadState::Run, frames, &s);
        }
        let r = trie.finish();
        assert!(r.handlers.is_empty());
        assert_eq!(
            r.callbacks,
            vec![Callback {
                method: CMP,
                samples: 15
            }]
        );
        // The loop's caller is the thread's base, not a callback's.
        assert!(r.callbacks.iter().all(|c| c.method != LOOP));
    }

    #[test]
    fn user_and_system_globs_move_the_boundary() {
        let s = table();
        let mut trie = ReactionTrie::new(ReactionConfig {
            system: vec!["app.Work".into()],
            ..ReactionConfig::default()
        });
        consumer(&mut trie, &s, 7, 10);
        let r = trie.finish();
        assert!(r.nodes.iter().all(|n| n.method != Some(WORK)));
        let mut trie = ReactionTrie::new(ReactionConfig {
            user: vec!["app.Loop".into()],
            ..ReactionConfig::default()
        });
        consumer(&mut trie, &s, 7, 10);
        let r = trie.finish();
        assert_eq!(r.nodes.len(), 2, "only app.Loop is user code");
        assert!(r.handlers.is_empty());
    }

    #[test]
    fn the_jdks_org_packages_are_system_code() {
        let s = syms(&["org.xml.sax.helpers.DefaultHandler", "org.acme.Handler"]);
        let mut trie = ReactionTrie::new(ReactionConfig::default());
        assert!(!trie.is_user(MethodId(0), &s));
        assert!(trie.is_user(MethodId(1), &s));
    }

    /// A framework worker: idle in the framework's queue (no application
    /// frame), then running the application's doGet under the
    /// framework's dispatch method.
    fn server_table() -> SymbolTable {
        syms(&[
            "java.lang.Thread",               // 0
            "org.acme.web.Pool",              // 1 the framework's loop
            "org.acme.web.Queue",             // 2 where it waits
            "javax.servlet.http.HttpServlet", // 3 dispatch (`m`)
            "shop.Orders",                    // 4 the application
            "shop.Pricing",                   // 5 the application
            "org.acme.web.Selector",          // 6 another framework thread
        ])
    }

    fn server(trie: &mut ReactionTrie, s: &SymbolTable) {
        let m = |i| MethodId(i);
        for t in [1, 2] {
            for i in 0..40 {
                let (state, frames): (ThreadState, &[MethodId]) = match i % 4 {
                    0 | 1 => (ThreadState::Wait, &[m(2), m(1), m(0)]),
                    2 => (ThreadState::Run, &[m(4), m(3), m(1), m(0)]),
                    _ => (ThreadState::Run, &[m(5), m(4), m(3), m(1), m(0)]),
                };
                trie.add_sample(ThreadRef(t), i, state, frames, s);
            }
        }
        // A selector thread that only waits, and a busy framework thread.
        for i in 0..40 {
            trie.add_sample(ThreadRef(3), i, ThreadState::Io, &[m(6), m(0)], s);
            trie.add_sample(ThreadRef(4), i, ThreadState::Run, &[m(1), m(0)], s);
        }
    }

    #[test]
    fn a_library_loop_handler_writing_its_reply_is_no_loop_of_its_own() {
        // shop.Orders does IO itself (it writes the reply) above a RUN
        // child: DYMON's rule alone would make shop.Pricing a handler
        // under an Orders "loop"; this broke the JDK HttpServer test.
        let s = server_table();
        let mut trie = ReactionTrie::new(ReactionConfig {
            app_packages: app(&["shop"]),
            profiles: Profiles::default(),
            ..ReactionConfig::default()
        });
        server(&mut trie, &s);
        for i in 0..20 {
            let frames = [MethodId(4), MethodId(3), MethodId(1), MethodId(0)];
            trie.add_sample(ThreadRef(1), 100 + i, ThreadState::Io, &frames, &s);
        }
        let r = trie.finish();
        let found: Vec<_> = r.handlers.iter().map(|h| r.nodes[h.node].method).collect();
        assert_eq!(found, vec![Some(MethodId(4))], "{:?}", r.handlers);
    }

    fn app(packages: &[&str]) -> Option<HashSet<String>> {
        Some(packages.iter().map(|p| p.to_string()).collect())
    }

    #[test]
    fn an_application_method_entered_from_a_waiting_library_is_a_handler() {
        let s = server_table();
        let mut trie = ReactionTrie::new(ReactionConfig {
            app_packages: app(&["shop"]),
            profiles: Profiles::default(),
            ..ReactionConfig::default()
        });
        server(&mut trie, &s);
        let r = trie.finish();
        assert_eq!(r.handlers.len(), 1, "{:?}", r.handlers);
        let h = &r.handlers[0];
        assert_eq!(r.nodes[h.node].method, Some(MethodId(4)), "shop.Orders");
        assert_eq!(h.rule, HandlerRule::LibraryLoop);
        assert_eq!(h.kind, HandlerKind::Wait);
        assert_eq!((h.run, h.waiting), (40, 40), "threads 1 and 2: 20 + 20");
        assert_eq!(h.wait_site, Some(MethodId(2)), "the framework's queue");
        assert_eq!(h.dispatch, Some(MethodId(3)), "the direct caller");
        assert_eq!(h.framework, None, "no profiles");
        assert_eq!(h.threads, vec![(ThreadRef(1), 20), (ThreadRef(2), 20)]);
        // The framework's own busy thread makes no node: it is library code.
        assert!(r.nodes.iter().all(|n| n.method != Some(MethodId(1))));
        assert!(r.callbacks.is_empty(), "{:?}", r.callbacks);
    }

    #[test]
    fn profiles_label_the_dispatch_and_make_a_framework_library_code() {
        let s = server_table();
        let mut profiles = Profiles::builtin();
        profiles
            .add_text(
                "acme library org.acme.web.*\nacme loop org.acme.web.Queue.m\nweb dispatch javax.servlet.http.HttpServlet.m\n",
                "t",
            )
            .unwrap();
        // No app_packages (an old trace): the profile alone keeps the
        // framework out of the trie.
        let mut trie = ReactionTrie::new(ReactionConfig {
            profiles,
            ..ReactionConfig::default()
        });
        server(&mut trie, &s);
        let r = trie.finish();
        assert_eq!(r.handlers.len(), 1, "{:?}", r.handlers);
        let h = &r.handlers[0];
        assert_eq!(r.nodes[h.node].method, Some(MethodId(4)));
        assert_eq!(
            h.framework.as_deref(),
            Some("web"),
            "the dispatch's profile"
        );
        assert_eq!(h.wait_site, Some(MethodId(2)));
        // Without profiles nor app_packages the framework is user code:
        // its pool is the loop that owns the program (DYMON's rule).
        let mut trie = ReactionTrie::new(ReactionConfig {
            profiles: Profiles::default(),
            ..ReactionConfig::default()
        });
        server(&mut trie, &s);
        let r = trie.finish();
        assert!(r.handlers.iter().all(|h| h.rule == HandlerRule::OwnLoop));
    }
}

/// A method as the reactions report names it (dotted class, method name);
/// the trie's root is `{class: "", method: "<root>"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MethodRef {
    pub class: String,
    pub method: String,
}

/// Samples per state, serialized as `{"RUN": n, "IO": n, ...}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct States(pub StateCounts);

impl Serialize for States {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(ThreadState::ALL.len()))?;
        for st in ThreadState::ALL {
            m.serialize_entry(st.name(), &self.0[st.index()])?;
        }
        m.end()
    }
}

/// Samples of one thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadSamples {
    pub thread: String,
    pub samples: u64,
}

/// Samples of one method.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MethodSamples {
    #[serde(flatten)]
    pub method: MethodRef,
    pub samples: u64,
}

/// One event handler, named.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HandlerReport {
    #[serde(flatten)]
    pub method: MethodRef,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub rule: &'static str,
    pub framework: Option<String>,
    pub dispatch: Option<MethodRef>,
    #[serde(rename = "loop")]
    pub loop_method: MethodRef,
    pub samples: u64,
    pub run: u64,
    pub share: f64,
    pub waiting: u64,
    pub states: States,
    pub threads: Vec<ThreadSamples>,
    /// Its latency when the recording timed it (`--reactions`).
    pub latency: Option<LatencySummary>,
}

/// One thread's behaviour, named.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadReport {
    pub thread: String,
    pub states: States,
    pub handlers: Vec<MethodSamples>,
}

/// One node of the trie of user calls, with its children.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TrieReport {
    #[serde(flatten)]
    pub method: MethodRef,
    pub own: States,
    pub total: States,
    pub children: Vec<TrieReport>,
}

/// [`Reactions`] with its handles resolved to names: the schema of
/// `vmview reactions --format json` (which adds `timing`) and of the
/// browser view's reactions page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReactionsReport {
    pub samples: u64,
    pub ticks: u64,
    pub run_samples: u64,
    pub duration_ns: u64,
    pub handlers: Vec<HandlerReport>,
    pub callbacks: Vec<MethodSamples>,
    pub threads: Vec<ThreadReport>,
    pub trie: TrieReport,
}

impl Handler {
    /// The method its threads wait in for the next event: the loop node's
    /// (own-loop) or the library wait site (library-loop).
    pub fn loop_method(&self, r: &Reactions) -> Option<MethodId> {
        match self.rule {
            HandlerRule::OwnLoop => r.nodes[self.loop_node].method,
            HandlerRule::LibraryLoop => self.wait_site,
        }
    }
}

impl Reactions {
    /// Resolves the handles: `name` names a method (`None` is the trie's
    /// root), `latency` gives a handler method's timing if any. With
    /// `keep`, the trie has only the kept nodes, children most sampled
    /// first; without, the whole trie in its order.
    pub fn report(
        &self,
        syms: &SymbolTable,
        name: &dyn Fn(Option<MethodId>) -> MethodRef,
        latency: &dyn Fn(MethodId) -> Option<LatencySummary>,
        keep: Option<&[bool]>,
    ) -> ReactionsReport {
        let node = |i: usize| name(self.nodes[i].method);
        let handlers = self
            .handlers
            .iter()
            .map(|h| HandlerReport {
                method: node(h.node),
                kind: h.kind.name(),
                rule: h.rule.name(),
                framework: h.framework.clone(),
                dispatch: h.dispatch.map(|m| name(Some(m))),
                loop_method: name(h.loop_method(self)),
                samples: h.samples,
                run: h.run,
                share: h.share,
                waiting: h.waiting,
                states: States(h.states),
                threads: h
                    .threads
                    .iter()
                    .map(|(t, n)| ThreadSamples {
                        thread: syms.thread_name(*t),
                        samples: *n,
                    })
                    .collect(),
                latency: self.nodes[h.node].method.and_then(latency),
            })
            .collect();
        let callbacks = self
            .callbacks
            .iter()
            .map(|c| MethodSamples {
                method: name(Some(c.method)),
                samples: c.samples,
            })
            .collect();
        let threads = self
            .threads
            .iter()
            .map(|t| ThreadReport {
                thread: syms.thread_name(t.thread),
                states: States(t.states),
                handlers: t
                    .handlers
                    .iter()
                    .map(|(i, n)| MethodSamples {
                        method: node(self.handlers[*i].node),
                        samples: *n,
                    })
                    .collect(),
            })
            .collect();
        ReactionsReport {
            samples: self.samples,
            ticks: self.ticks,
            run_samples: self.run_samples,
            duration_ns: self.last_ns.saturating_sub(self.first_ns),
            handlers,
            callbacks,
            threads,
            trie: self.trie_report(0, name, keep),
        }
    }

    fn trie_report(
        &self,
        i: usize,
        name: &dyn Fn(Option<MethodId>) -> MethodRef,
        keep: Option<&[bool]>,
    ) -> TrieReport {
        let n = &self.nodes[i];
        let children: Vec<usize> = match keep {
            None => n.children.clone(),
            Some(keep) => {
                let mut c: Vec<usize> = n.children.iter().copied().filter(|&c| keep[c]).collect();
                c.sort_by_key(|&c| std::cmp::Reverse(self.nodes[c].total.iter().sum::<u64>()));
                c
            }
        };
        TrieReport {
            method: name(n.method),
            own: States(n.own),
            total: States(n.total),
            children: children
                .into_iter()
                .map(|c| self.trie_report(c, name, keep))
                .collect(),
        }
    }
}
