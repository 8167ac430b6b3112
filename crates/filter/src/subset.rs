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

use vmview_format::{
    Event, EventKind, FormatError, MethodId, Outcome, StackId, StringId, Symbol, SymbolTable,
    ThreadRef, TraceHeader, TraceWriter, Value,
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
        Ok(SubsetWriter {
            out: TraceWriter::new(out, header)?,
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
        self.thread(ev.thread, syms);
        match &ev.kind {
            EventKind::ThreadStart | EventKind::ThreadEnd | EventKind::GcStart => {}
            EventKind::GcFinish { .. } | EventKind::Dropped { .. } => {}
            EventKind::TraceWindow { .. }
            | EventKind::PeriodEnd { .. }
            | EventKind::Calibration { .. } => {}
            EventKind::PeriodStart { stack, .. } => self.stack(*stack, syms),
            EventKind::MonitorEnter { monitor, .. } | EventKind::MonitorExit { monitor, .. } => {
                self.string(monitor.class, syms)
            }
            EventKind::Bytecode { method, insn, .. } => {
                self.method(*method, syms);
                self.string(*insn, syms);
            }
            EventKind::ReactionHandlers {
                handlers, skipped, ..
            } => {
                for m in handlers.iter().chain(skipped) {
                    self.method(*m, syms);
                }
            }
            EventKind::Sample {
                stack, monitors, ..
            } => {
                self.stack(*stack, syms);
                for (m, _) in monitors {
                    self.string(m.class, syms);
                }
            }
            EventKind::ClassLoad {
                class,
                loader,
                source,
            } => {
                self.string(*class, syms);
                self.string(*loader, syms);
                self.string(*source, syms);
            }
            EventKind::Call {
                method,
                caller,
                params,
                ..
            } => {
                self.method(*method, syms);
                if let Some((m, _)) = caller {
                    self.method(*m, syms);
                }
                for v in params {
                    self.value(v, syms);
                }
            }
            EventKind::Return {
                method, outcome, ..
            } => {
                self.method(*method, syms);
                match outcome {
                    Outcome::Value(v) => self.value(v, syms),
                    Outcome::Exception { class } => self.string(*class, syms),
                    Outcome::Void => {}
                }
            }
            EventKind::Throw {
                exception,
                method,
                catch,
                ..
            } => {
                self.string(*exception, syms);
                self.method(*method, syms);
                if let Some((m, _)) = catch {
                    self.method(*m, syms);
                }
            }
            EventKind::Catch {
                exception, method, ..
            } => {
                self.string(*exception, syms);
                self.method(*method, syms);
            }
            EventKind::MonitorContendedEnter { monitor, owner } => {
                self.string(monitor.class, syms);
                if let Some(o) = owner {
                    self.thread(*o, syms);
                }
            }
            EventKind::MonitorContendedEntered { monitor, .. }
            | EventKind::MonitorWait { monitor, .. }
            | EventKind::MonitorWaited { monitor, .. } => self.string(monitor.class, syms),
        }
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

    fn value(&mut self, v: &Value, syms: &SymbolTable) {
        match v {
            Value::Boxed { class, value } => {
                self.string(*class, syms);
                self.value(value, syms);
            }
            Value::Array { class, .. } | Value::Object { class, .. } => self.string(*class, syms),
            _ => {}
        }
    }
}
