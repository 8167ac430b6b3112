//! Merging traces: each source's events, their symbols renumbered into one
//! trace (two JVMs' string 7 are different strings).
//!
//! The twin of [`SubsetWriter`](crate::SubsetWriter): both write events of
//! other traces and define, on first use, the symbols the events name,
//! found through the one handle walk of `vmview_format::handles`. The
//! subset keeps the source's handles; the merge gives every source's
//! handles new numbers. Ordering by time, the ids of merged events and the
//! header are the caller's (`vmview merge`).

use std::collections::HashMap;
use std::io::Write;

use vmview_format::handles::{map_event, HandleMap};
use vmview_format::{
    Event, FormatError, MethodId, MethodSymbol, StackId, StackSymbol, StringId, Symbol,
    SymbolTable, ThreadRef, ThreadSymbol, TraceHeader, TraceWriter,
};

/// Writes the merged trace: the events of several sources, each source's
/// handles renumbered.
pub struct MergeWriter<W: Write> {
    out: TraceWriter<W>,
    next: Next,
    sources: Vec<Renumber>,
}

impl<W: Write> MergeWriter<W> {
    /// Writes the file header, for `sources` inputs.
    pub fn new(out: W, header: &TraceHeader, sources: usize) -> Result<Self, FormatError> {
        Ok(MergeWriter {
            out: TraceWriter::new(out, header)?,
            next: Next::default(),
            sources: (0..sources).map(|_| Renumber::default()).collect(),
        })
    }

    /// Source `source` changed method `m`'s symbol (an XML input can):
    /// give it a new handle on next use.
    pub fn forget_method(&mut self, source: usize, m: MethodId) {
        self.sources[source].methods.remove(&m.0);
    }

    /// Writes `ev` of source `source` (whose symbols `syms` resolves) with
    /// the merged trace's `id` and `time_ns`; ids must increase.
    pub fn write(
        &mut self,
        source: usize,
        ev: &Event,
        syms: &SymbolTable,
        id: u64,
        time_ns: u64,
    ) -> Result<(), FormatError> {
        let mut merged = ev.clone();
        merged.id = id;
        merged.time_ns = time_ns;
        let mut mapper = Mapper {
            map: &mut self.sources[source],
            next: &mut self.next,
            syms,
            out: &mut self.out,
        };
        map_event(&mut merged, &mut mapper);
        self.out.write(&merged)
    }

    /// Writes the last chunk and the index; returns the underlying writer.
    pub fn finish(self) -> Result<W, FormatError> {
        self.out.finish()
    }
}

impl<W: Write> HandleMap for Mapper<'_, W> {
    fn string(&mut self, id: StringId) -> StringId {
        self.string_(id)
    }
    fn method(&mut self, id: MethodId) -> MethodId {
        self.method_(id)
    }
    fn thread(&mut self, id: ThreadRef) -> ThreadRef {
        self.thread_(id)
    }
    fn stack(&mut self, id: StackId) -> StackId {
        self.stack_(id)
    }
}

/// Handles of one source, renumbered into the merged trace.
#[derive(Default)]
struct Renumber {
    strings: HashMap<u32, StringId>,
    methods: HashMap<u32, MethodId>,
    threads: HashMap<u32, ThreadRef>,
    stacks: HashMap<u32, StackId>,
}

/// Next free handles in the merged trace.
#[derive(Default)]
struct Next {
    string: u32,
    method: u32,
    thread: u32,
    stack: u32,
}

/// Maps one source's events into the merged trace, defining symbols in the
/// output the first time they are used.
struct Mapper<'a, W: Write> {
    map: &'a mut Renumber,
    next: &'a mut Next,
    syms: &'a SymbolTable,
    out: &'a mut TraceWriter<W>,
}

impl<W: Write> Mapper<'_, W> {
    fn string_(&mut self, id: StringId) -> StringId {
        if let Some(&s) = self.map.strings.get(&id.0) {
            return s;
        }
        let new = StringId(self.next.string);
        self.next.string += 1;
        self.map.strings.insert(id.0, new);
        self.out.define(Symbol::String {
            id: new,
            text: self.syms.string(id).to_string(),
        });
        new
    }

    fn method_(&mut self, id: MethodId) -> MethodId {
        if let Some(&m) = self.map.methods.get(&id.0) {
            return m;
        }
        let new = MethodId(self.next.method);
        self.next.method += 1;
        self.map.methods.insert(id.0, new);
        let sym = match self.syms.method(id).cloned() {
            Some(m) => MethodSymbol {
                id: new,
                class: self.string_(m.class),
                name: self.string_(m.name),
                sig: self.string_(m.sig),
                param_names: m.param_names.iter().map(|&p| self.string_(p)).collect(),
                modifiers: m.modifiers,
            },
            // A method the source lost (damaged chunk): "?" names, as
            // readers show for an undefined handle.
            None => {
                let q = self.unknown_string();
                MethodSymbol {
                    id: new,
                    class: q,
                    name: q,
                    sig: q,
                    param_names: Vec::new(),
                    modifiers: 0,
                }
            }
        };
        self.out.define(Symbol::Method(sym));
        new
    }

    /// A sampled stack: its frames' methods renumbered, defined once.
    fn stack_(&mut self, id: StackId) -> StackId {
        if let Some(&s) = self.map.stacks.get(&id.0) {
            return s;
        }
        let new = StackId(self.next.stack);
        self.next.stack += 1;
        self.map.stacks.insert(id.0, new);
        // A stack the source lost (damaged chunk) stays empty.
        let (frames, types) = self
            .syms
            .stack(id)
            .map(|s| (s.frames.clone(), s.types.clone()))
            .unwrap_or_default();
        let frames = frames
            .into_iter()
            .map(|(m, loc)| (self.method_(m), loc))
            .collect();
        self.out.define(Symbol::Stack(StackSymbol {
            id: new,
            frames,
            types,
        }));
        new
    }

    fn unknown_string(&mut self) -> StringId {
        let id = StringId(self.next.string);
        self.next.string += 1;
        self.out.define(Symbol::String {
            id,
            text: "?".to_string(),
        });
        id
    }

    fn thread_(&mut self, t: ThreadRef) -> ThreadRef {
        if let Some(&n) = self.map.threads.get(&t.0) {
            return n;
        }
        let new = ThreadRef(self.next.thread);
        self.next.thread += 1;
        self.map.threads.insert(t.0, new);
        let sym = match self.syms.thread(t).cloned() {
            Some(s) => ThreadSymbol {
                id: new,
                java_id: s.java_id,
                name: self.string_(s.name),
                group: self.string_(s.group),
                priority: s.priority,
                daemon: s.daemon,
            },
            None => {
                let name = StringId(self.next.string);
                self.next.string += 1;
                self.out.define(Symbol::String {
                    id: name,
                    text: self.syms.thread_name(t),
                });
                ThreadSymbol {
                    id: new,
                    java_id: -1,
                    name,
                    group: name,
                    priority: 0,
                    daemon: false,
                }
            }
        };
        self.out.define(Symbol::Thread(sym));
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmview_format::{EventKind, TraceReader};

    /// A source whose method 0 is `name` and whose thread 0 is `main`.
    fn source(name: &str) -> SymbolTable {
        let mut s = SymbolTable::default();
        for (i, t) in ["C", name, "()V", "main"].iter().enumerate() {
            s.insert(Symbol::String {
                id: StringId(i as u32),
                text: t.to_string(),
            });
        }
        s.insert(Symbol::Method(MethodSymbol {
            id: MethodId(0),
            class: StringId(0),
            name: StringId(1),
            sig: StringId(2),
            param_names: vec![],
            modifiers: 0,
        }));
        s.insert(Symbol::Thread(ThreadSymbol {
            id: ThreadRef(0),
            java_id: 1,
            name: StringId(3),
            group: StringId(3),
            priority: 5,
            daemon: false,
        }));
        s
    }

    // The merge once copied REACTION_HANDLERS unchanged, so the second
    // source's handler named the first source's method 0.
    #[test]
    fn every_sources_reaction_handlers_name_its_own_methods() {
        let (a, b) = (source("onOrder"), source("onMessage"));
        let ev = Event {
            id: 1,
            time_ns: 5,
            thread: ThreadRef(0),
            kind: EventKind::ReactionHandlers {
                samples: 10,
                handlers: vec![MethodId(0)],
                skipped: vec![],
            },
        };
        let mut w = MergeWriter::new(Vec::new(), &TraceHeader::default(), 2).unwrap();
        w.write(0, &ev, &a, 1 << 8, 5).unwrap();
        w.write(1, &ev, &b, (2 << 8) | 1, 6).unwrap();
        let bytes = w.finish().unwrap();
        let mut r = TraceReader::new(std::io::Cursor::new(bytes)).unwrap();
        let mut named = Vec::new();
        while let Some(ev) = r.next_event() {
            let EventKind::ReactionHandlers { handlers, .. } = &ev.kind else {
                panic!("{ev:?}");
            };
            let m = r.symbols().method(handlers[0]).expect("a defined method");
            named.push(r.symbols().string(m.name).to_string());
        }
        assert_eq!(named, ["onOrder", "onMessage"]);
    }
}
