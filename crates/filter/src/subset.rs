//! Writing a selection of a trace's events as a trace of its own.
//!
//! A filtered trace keeps the original event ids (the format allows gaps),
//! so any event in it can be opened in context in the original trace. It
//! carries only the symbol records its events use: [`SubsetWriter`]
//! defines each string, method and thread in the output the first time a
//! written event refers to it, reading it from the input's symbol table.
//! Its memory grows with the number of distinct symbols written, never
//! with the number of events.

use std::collections::HashSet;
use std::io::Write;

use vmview_format::handles::{map_event, HandleMap};
use vmview_format::{
    Event, FormatError, MethodId, StackId, StringId, Symbol, SymbolTable, ThreadRef, TraceHeader,
    TraceWriter,
};

/// Handles already defined in the output.
#[derive(Default)]
struct Defined {
    dense: Vec<bool>,
    sparse: HashSet<u32>,
}

impl Defined {
    /// Marks `id`; true when it was not marked before.
    #[inline]
    fn insert(&mut self, id: u32) -> bool {
        if id < 1 << 22 {
            let i = id as usize;
            if i >= self.dense.len() {
                self.dense.resize(i + 1, false);
            }
            !std::mem::replace(&mut self.dense[i], true)
        } else {
            self.sparse.insert(id)
        }
    }

    fn remove(&mut self, id: u32) {
        if let Some(d) = self.dense.get_mut(id as usize) {
            *d = false;
        }
        self.sparse.remove(&id);
    }
}

/// A [`TraceWriter`] for a subset of another trace's events.
pub struct SubsetWriter<W: Write> {
    out: TraceWriter<W>,
    strings: Defined,
    methods: Defined,
    threads: Defined,
    stacks: Defined,
}

impl<W: Write> SubsetWriter<W> {
    /// Writes the file header (give it the input's header plus whatever
    /// says where the subset came from).
    pub fn new(out: W, header: &TraceHeader) -> Result<Self, FormatError> {
        Self::with_chunk_size(out, header, vmview_format::DEFAULT_CHUNK_BYTES)
    }

    /// Like `new` with another chunk payload size target (bytes), as
    /// [`TraceWriter::with_chunk_size`].
    pub fn with_chunk_size(
        out: W,
        header: &TraceHeader,
        chunk_bytes: usize,
    ) -> Result<Self, FormatError> {
        Ok(SubsetWriter {
            out: TraceWriter::with_chunk_size(out, header, chunk_bytes)?,
            strings: Defined::default(),
            methods: Defined::default(),
            threads: Defined::default(),
            stacks: Defined::default(),
        })
    }

    /// The input changed method `m`'s symbol: define it again on next use.
    pub fn forget_method(&mut self, m: MethodId) {
        self.methods.remove(m.0);
    }

    /// Writes `ev` (ids must increase), first defining the symbols it uses
    /// from `syms`.
    pub fn write(&mut self, ev: &Event, syms: &SymbolTable) -> Result<(), FormatError> {
        // The handle walk maps in place; on a copy it only visits.
        let mut copy = ev.clone();
        map_event(&mut copy, &mut Define { w: self, syms });
        self.out.write(ev)
    }

    /// Events written so far.
    pub fn events_written(&self) -> u64 {
        self.out.events_written()
    }

    /// Writes the last chunk and the index; returns the underlying writer.
    pub fn finish(self) -> Result<W, FormatError> {
        self.out.finish()
    }

    #[inline]
    fn string(&mut self, id: StringId, syms: &SymbolTable) {
        if self.strings.insert(id.0) {
            self.out.define(Symbol::String {
                id,
                text: syms.string(id).to_string(),
            });
        }
    }

    #[inline]
    fn method(&mut self, m: MethodId, syms: &SymbolTable) {
        if !self.methods.insert(m.0) {
            return;
        }
        // A method the input never defined (damaged chunk) is left
        // undefined; the writer then refuses the event, as it should.
        if let Some(sym) = syms.method(m) {
            self.string(sym.class, syms);
            self.string(sym.name, syms);
            self.string(sym.sig, syms);
            for p in &sym.param_names {
                self.string(*p, syms);
            }
            self.out.define(Symbol::Method(sym.clone()));
        }
    }

    fn stack(&mut self, s: StackId, syms: &SymbolTable) {
        if !self.stacks.insert(s.0) {
            return;
        }
        if let Some(sym) = syms.stack(s) {
            for (m, _) in &sym.frames {
                self.method(*m, syms);
            }
            self.out.define(Symbol::Stack(sym.clone()));
        }
    }

    #[inline]
    fn thread(&mut self, t: ThreadRef, syms: &SymbolTable) {
        if !self.threads.insert(t.0) {
            return;
        }
        if let Some(sym) = syms.thread(t) {
            self.string(sym.name, syms);
            self.string(sym.group, syms);
            self.out.define(Symbol::Thread(sym.clone()));
        }
    }
}

/// Defines, in the subset, the symbol of each handle the walk visits.
struct Define<'a, W: Write> {
    w: &'a mut SubsetWriter<W>,
    syms: &'a SymbolTable,
}

impl<W: Write> HandleMap for Define<'_, W> {
    fn string(&mut self, id: StringId) -> StringId {
        self.w.string(id, self.syms);
        id
    }
    fn method(&mut self, id: MethodId) -> MethodId {
        self.w.method(id, self.syms);
        id
    }
    fn thread(&mut self, id: ThreadRef) -> ThreadRef {
        self.w.thread(id, self.syms);
        id
    }
    fn stack(&mut self, id: StackId) -> StackId {
        self.w.stack(id, self.syms);
        id
    }
}
