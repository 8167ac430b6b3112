//! Timing the event handlers found from samples (`reactions`): DYMON's
//! "detailed analysis by instrumenting the handlers".
//!
//! During the warm-up (`reactions-after=`) the sampler feeds every sample
//! it writes to a [`Detector`] as well, which builds the same
//! [`ReactionTrie`] that `vmview reactions` builds from the trace. When the
//! warm-up is over, the sampler thread — a JVMTI agent thread, never a
//! callback — runs the detection, puts the handler methods in the
//! recording's [`Selection`] and retransforms their classes: the
//! ClassFileLoadHook then instruments exactly those methods (not their
//! classes' other methods) with the probe, so from then on every call of a
//! handler is a CALL/RETURN pair whose distance is its latency. The choice
//! is written as one REACTION_HANDLERS event. Sampling goes on, so the
//! reactions analysis still sees the whole run.
//!
//! User code is the application's own classes (`crate::app`: the
//! `app_packages` of the trace header), so handlers that a framework calls
//! from its own loop are found as `vmview reactions` finds them. Methods
//! matching `handler=` that appear in the warm-up's samples are timed too:
//! a framework's dispatch method (`HttpServlet.service`) as the event
//! boundary, when the user prefers it.
//!
//! Memory during the warm-up grows with distinct user paths and methods
//! seen, not with samples; the trie is dropped at the switch.

use crate::agent::Agent;
use crate::capture::bytecode::JDK_PACKAGES;
use crate::classes;
use crate::clock;
use crate::jvmti::{Jni, LocalRef};
use crate::sys;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::RwLock;
use std::time::Instant;
use vmview_analysis::frameworks::Profiles;
use vmview_analysis::{ReactionConfig, ReactionTrie};
use vmview_format::{
    EventKind, Loc, MethodId, MethodSymbol, StringId, Symbol, SymbolTable, ThreadRef, ThreadState,
};

/// The handler methods to instrument, by dotted class name, with whether
/// the switch happened. Read by the ClassFileLoadHook (a lock-free flag
/// first, so class loads before the switch pay one load).
#[derive(Default)]
pub struct Selection {
    chosen: AtomicBool,
    methods: RwLock<HashMap<String, Vec<(String, String)>>>,
}

impl Selection {
    /// The methods (name, descriptor) of class `dotted` to instrument, if
    /// it holds a chosen handler.
    pub fn methods_of(&self, dotted: &str) -> Option<Vec<(String, String)>> {
        if !self.chosen.load(Ordering::Acquire) {
            return None;
        }
        self.methods
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(dotted)
            .cloned()
    }

    /// Whether the warm-up ended and the handlers were chosen.
    pub fn is_chosen(&self) -> bool {
        self.chosen.load(Ordering::Acquire)
    }
}

/// What the detector knows of a method seen in a sample.
struct Seen {
    jmethod: usize,
}

/// The sampler's half: the warm-up's samples, then the switch.
pub struct Detector {
    deadline: Instant,
    trie: Option<ReactionTrie>,
    /// Method symbols of the sampled frames, with class names, for the
    /// trie's user/system split (string ids local to this table).
    syms: SymbolTable,
    strings: HashMap<String, StringId>,
    seen: HashMap<MethodId, Seen>,
}

impl Detector {
    /// A detector when the recording asked for `reactions`.
    pub fn new(agent: &Agent) -> Option<Detector> {
        agent.options.reactions.then(|| Detector {
            deadline: Instant::now() + agent.options.reactions_after,
            trie: Some(ReactionTrie::new(ReactionConfig {
                app_packages: agent
                    .app_packages
                    .as_ref()
                    .map(|p| p.iter().cloned().collect()),
                profiles: profiles(agent),
                ..ReactionConfig::default()
            })),
            syms: SymbolTable::default(),
            strings: HashMap::new(),
            seen: HashMap::new(),
        })
    }

    /// Adds one sample written by the sampler: `frames` top first, with
    /// their jmethodIDs in `jmethods`.
    #[allow(clippy::too_many_arguments)]
    pub fn add(
        &mut self,
        agent: &Agent,
        jni: Jni,
        thread: ThreadRef,
        time_ns: u64,
        state: ThreadState,
        frames: &[(MethodId, Loc)],
        jmethods: impl Iterator<Item = sys::jmethodID>,
    ) {
        if self.trie.is_none() {
            return;
        }
        for (&(m, _), jm) in frames.iter().zip(jmethods) {
            if !self.seen.contains_key(&m) {
                self.learn(agent, jni, m, jm);
            }
        }
        let ids: Vec<MethodId> = frames.iter().map(|(m, _)| *m).collect();
        if let Some(trie) = &mut self.trie {
            trie.add_sample(thread, time_ns, state, &ids, &self.syms);
        }
    }

    /// Names the method for the local symbol table (once per method).
    fn learn(&mut self, agent: &Agent, jni: Jni, m: MethodId, jm: sys::jmethodID) {
        let j = agent.jvmti;
        // The local reference to the class is deleted at once.
        let class = j
            .method_declaring_class(jni, jm)
            .and_then(|c| j.class_signature(c.get()))
            .map(|s| classes::dotted_name(&s))
            .unwrap_or_else(|_| "?".to_string());
        let (name, sig) = j
            .method_name(jm)
            .unwrap_or_else(|_| ("?".to_string(), "()V".to_string()));
        let class = self.string(&class);
        let name = self.string(&name);
        let sig = self.string(&sig);
        self.syms.insert(Symbol::Method(MethodSymbol {
            id: m,
            class,
            name,
            sig,
            param_names: Vec::new(),
            modifiers: 0,
        }));
        self.seen.insert(
            m,
            Seen {
                jmethod: jm as usize,
            },
        );
    }

    fn string(&mut self, text: &str) -> StringId {
        if let Some(id) = self.strings.get(text) {
            return *id;
        }
        let id = StringId(self.strings.len() as u32);
        self.strings.insert(text.to_string(), id);
        self.syms.insert(Symbol::String {
            id,
            text: text.to_string(),
        });
        id
    }

    /// Whether the warm-up is over and the switch still to do.
    pub fn due(&self) -> bool {
        self.trie.is_some() && Instant::now() >= self.deadline
    }

    /// Runs the detection, instruments the handlers found and writes the
    /// REACTION_HANDLERS event. Call on the sampler thread, in a local
    /// frame.
    pub fn switch(&mut self, agent: &'static Agent, jni: Jni) {
        let Some(trie) = self.trie.take() else { return };
        let found = trie.finish();
        let mut handlers: Vec<MethodId> = Vec::new();
        for h in &found.handlers {
            if let Some(m) = found.nodes[h.node].method {
                if !handlers.contains(&m) {
                    handlers.push(m);
                }
            }
        }
        // handler=: the sampled methods it names, in a stable order.
        if !agent.options.handler.is_empty() {
            let mut named: Vec<MethodId> = self
                .seen
                .keys()
                .copied()
                .filter(|m| {
                    self.syms.method(*m).is_some_and(|s| {
                        let q =
                            format!("{}.{}", self.syms.string(s.class), self.syms.string(s.name));
                        agent.options.handler.matches(&q)
                    })
                })
                .collect();
            named.sort();
            for m in named {
                if !handlers.contains(&m) {
                    handlers.push(m);
                }
            }
        }
        let mut chosen: Vec<(MethodId, String, LocalRef)> = Vec::new();
        let mut skipped: Vec<MethodId> = Vec::new();
        for &m in &handlers {
            match self.instrumentable(agent, jni, m) {
                Some((dotted, class)) => chosen.push((m, dotted, class)),
                None => skipped.push(m),
            }
        }
        {
            let mut map = agent
                .reactions
                .methods
                .write()
                .unwrap_or_else(|e| e.into_inner());
            for (m, dotted, _) in &chosen {
                if let Some(s) = self.syms.method(*m) {
                    let name = self.syms.string(s.name).to_string();
                    let sig = self.syms.string(s.sig).to_string();
                    map.entry(dotted.clone()).or_default().push((name, sig));
                }
            }
        }
        agent.reactions.chosen.store(true, Ordering::Release);
        // The event's time is before the first instrumented call can start.
        let time = clock::now_ns();
        let refused = retransform(agent, &chosen);
        if !refused.is_empty() {
            let mut map = agent
                .reactions
                .methods
                .write()
                .unwrap_or_else(|e| e.into_inner());
            for (m, dotted, _) in chosen.iter().filter(|c| refused.contains(&c.0)) {
                map.remove(dotted);
                skipped.push(*m);
            }
        }
        let timed: Vec<MethodId> = chosen
            .iter()
            .map(|c| c.0)
            .filter(|m| !refused.contains(m))
            .collect();
        self.say(agent, found.samples, &timed, &skipped);
        let event = EventKind::ReactionHandlers {
            samples: found.samples,
            handlers: timed,
            skipped,
        };
        crate::threads::with_state(agent, Some((jni, std::ptr::null_mut())), |s| {
            s.emit(agent, time, event)
        });
        self.seen = HashMap::new();
    }

    /// The handler's dotted class name and class, when its class may be
    /// instrumented: not a JDK class (their modules cannot see the probe),
    /// not a hidden class, modifiable.
    fn instrumentable(&self, agent: &Agent, jni: Jni, m: MethodId) -> Option<(String, LocalRef)> {
        let jm = self.seen.get(&m)?.jmethod as sys::jmethodID;
        let j = agent.jvmti;
        let class = j.method_declaring_class(jni, jm).ok()?;
        let sig = j.class_signature(class.get()).ok()?;
        let internal = sig.strip_prefix('L')?.strip_suffix(';')?;
        // A javax/ class of the class path (the servlet API of a server,
        // for handler=) is in no JDK module: it may be instrumented.
        let jdk = JDK_PACKAGES.iter().any(|p| internal.starts_with(p))
            && !(internal.starts_with("javax/") && on_class_path(agent, jni, class.get()));
        if internal.contains('.')
            || internal.starts_with("vmview/")
            || jdk
            || !j.is_modifiable_class(class.get())
        {
            return None;
        }
        Some((internal.replace('/', "."), class))
    }

    /// One line on the JVM's stderr (unless quiet or attached): what is
    /// timed from now on.
    fn say(&self, agent: &Agent, samples: u64, timed: &[MethodId], skipped: &[MethodId]) {
        if agent.options.quiet || agent.attached {
            return;
        }
        let name = |m: &MethodId| match self.syms.method(*m) {
            Some(s) => format!("{}.{}", self.syms.string(s.class), self.syms.string(s.name)),
            None => "?".to_string(),
        };
        let warmup = vmview_options::duration_text(agent.options.reactions_after);
        let mut line = if timed.is_empty() && skipped.is_empty() {
            format!(
                "reactions: no event handler found in {warmup} of samples ({samples} thread samples); no latency is recorded"
            )
        } else {
            format!(
                "reactions: after {warmup} of samples ({samples} thread samples), timing {}",
                if timed.is_empty() {
                    "no handler".to_string()
                } else {
                    timed.iter().map(name).collect::<Vec<_>>().join(", ")
                }
            )
        };
        if !skipped.is_empty() {
            line.push_str(&format!(
                "; not instrumentable (JDK or hidden class): {}",
                skipped.iter().map(name).collect::<Vec<_>>().join(", ")
            ));
        }
        crate::problems::say(&line);
    }
}

/// The built-in framework profiles plus `frameworks=`'s file (read once,
/// when the recording starts; a bad file is said and left out).
fn profiles(agent: &Agent) -> Profiles {
    let mut p = Profiles::builtin();
    if let Some(path) = &agent.options.frameworks {
        let added = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {path}: {e}"))
            .and_then(|text| {
                let mut more = Profiles::default();
                more.add_text(&text, path).map(|()| more)
            });
        match added {
            Ok(more) => p.entries.extend(more.entries),
            Err(e) => crate::problems::say(&format!("reactions: frameworks={path} left out: {e}")),
        }
    }
    p
}

/// Whether `class` was defined by a class loader other than the bootstrap
/// and platform ones (so it is in no JDK module).
fn on_class_path(agent: &Agent, jni: Jni, class: sys::jclass) -> bool {
    let Ok(loader) = agent.jvmti.class_loader(jni, class) else {
        return false;
    };
    if loader.is_null() {
        return false;
    }
    let loader_class = jni.object_class(loader.get());
    agent
        .jvmti
        .class_signature(loader_class.get())
        .is_ok_and(|s| s != "Ljdk/internal/loader/ClassLoaders$PlatformClassLoader;")
}

/// Retransforms the chosen handlers' classes (the hook instruments their
/// handler methods now); returns the handlers whose class the JVM refused.
fn retransform(agent: &Agent, chosen: &[(MethodId, String, LocalRef)]) -> Vec<MethodId> {
    let mut classes: Vec<(&str, sys::jclass)> = Vec::new();
    for (_, dotted, class) in chosen {
        if !classes.iter().any(|(d, _)| d == dotted) {
            classes.push((dotted, class.get()));
        }
    }
    let all: Vec<sys::jclass> = classes.iter().map(|c| c.1).collect();
    if agent.jvmti.retransform_classes(&all).is_ok() {
        return Vec::new();
    }
    // One class the JVM refuses fails the whole batch: one at a time.
    let mut refused = Vec::new();
    for (dotted, class) in &classes {
        if let Err(e) = agent.jvmti.retransform_classes(&[*class]) {
            agent
                .problems
                .capture(|| format!("reactions: cannot instrument the handlers of {dotted}: {e}"));
            refused.extend(chosen.iter().filter(|c| c.1 == *dotted).map(|c| c.0));
        }
    }
    refused
}
