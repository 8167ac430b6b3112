//! Interning of the names events refer to, and the queue of symbol records
//! the writer thread still has to write.
//!
//! Callbacks intern a name once (on a cache miss), get a small handle and
//! put the handle in events. The matching symbol record goes to a pending
//! list under the same lock, before any event that uses the handle can be
//! pushed; the writer drains events first and symbols second, so every
//! event it writes has its symbols defined.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use vmview_format::{
    FrameType, Loc, MethodId, MethodSymbol, StackId, StackSymbol, StringId, Symbol, ThreadRef,
    ThreadSymbol,
};

#[derive(Default)]
pub struct Symbols {
    inner: Mutex<Inner>,
    next_method: AtomicU32,
    next_thread: AtomicU32,
}

/// A frame of a typed stack: method, place, how it ran.
type TypedFrame = (MethodId, Loc, FrameType);

#[derive(Default)]
struct Inner {
    strings: HashMap<Box<str>, StringId>,
    /// Methods by (class, name, descriptor): the probe's ids and the
    /// jmethodID cache (exception sites) name one method with one handle.
    methods: HashMap<(StringId, StringId, StringId), MethodId>,
    /// Stacks of samples (SAMPLE, PERIOD_START, ALLOC_SAMPLE), top first:
    /// the sampler thread and the allocating threads share the handles.
    stacks: HashMap<Box<[(MethodId, Loc)]>, StackId>,
    /// Stacks with frame types, the types beside each frame.
    typed_stacks: HashMap<Box<[TypedFrame]>, StackId>,
    /// Handles given out, of both maps.
    stack_count: u32,
    pending: Vec<Symbol>,
}

impl Symbols {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The handle of `text`, defining it on first use.
    pub fn string(&self, text: &str) -> StringId {
        let mut inner = self.lock();
        if let Some(id) = inner.strings.get(text) {
            return *id;
        }
        let id = StringId(inner.strings.len() as u32);
        inner.strings.insert(text.into(), id);
        inner.pending.push(Symbol::String {
            id,
            text: text.to_string(),
        });
        id
    }

    /// The handle of the method `class.name sig`, defining its symbol with
    /// `make` on first use. `make` runs under the symbol lock: it must not
    /// intern anything.
    pub fn method_named(
        &self,
        class: StringId,
        name: StringId,
        sig: StringId,
        make: impl FnOnce(MethodId) -> MethodSymbol,
    ) -> MethodId {
        let mut inner = self.lock();
        if let Some(id) = inner.methods.get(&(class, name, sig)) {
            return *id;
        }
        let id = MethodId(self.next_method.fetch_add(1, Ordering::Relaxed));
        inner.methods.insert((class, name, sig), id);
        inner.pending.push(Symbol::Method(make(id)));
        id
    }

    /// The handle of the stack `frames` (top first), defining it on first
    /// use.
    pub fn stack(&self, frames: &[(MethodId, Loc)]) -> StackId {
        let mut inner = self.lock();
        if let Some(id) = inner.stacks.get(frames) {
            return *id;
        }
        let id = StackId(inner.stack_count);
        inner.stack_count += 1;
        inner.stacks.insert(frames.into(), id);
        inner.pending.push(Symbol::Stack(StackSymbol {
            id,
            frames: frames.to_vec(),
            types: Vec::new(),
        }));
        id
    }

    /// The handle of the stack `frames` whose frames ran as `types` (one
    /// per frame; empty: none known, as [`Symbols::stack`]).
    pub fn stack_typed(&self, frames: &[(MethodId, Loc)], types: &[FrameType]) -> StackId {
        if types.iter().all(|t| *t == FrameType::Unknown) {
            return self.stack(frames);
        }
        let key: Box<[TypedFrame]> = frames
            .iter()
            .enumerate()
            .map(|(i, &(m, loc))| (m, loc, types.get(i).copied().unwrap_or_default()))
            .collect();
        let mut inner = self.lock();
        if let Some(id) = inner.typed_stacks.get(&key) {
            return *id;
        }
        let id = StackId(inner.stack_count);
        inner.stack_count += 1;
        inner.pending.push(Symbol::Stack(StackSymbol {
            id,
            frames: frames.to_vec(),
            types: key.iter().map(|f| f.2).collect(),
        }));
        inner.typed_stacks.insert(key, id);
        id
    }

    /// The class, name and descriptor of a method handle, by a scan of
    /// the tables: for the rare report (the overhead budget's demotions),
    /// never on a call path.
    pub fn method_names(&self, id: MethodId) -> Option<(String, String, String)> {
        let inner = self.lock();
        let &(class, name, sig) = inner
            .methods
            .iter()
            .find(|(_, m)| **m == id)
            .map(|(k, _)| k)?;
        let text = |s: StringId| {
            inner
                .strings
                .iter()
                .find(|(_, v)| **v == s)
                .map(|(k, _)| k.to_string())
        };
        Some((text(class)?, text(name)?, text(sig)?))
    }

    /// A fresh thread handle; define it with [`Symbols::define_thread`].
    pub fn new_thread_ref(&self) -> ThreadRef {
        ThreadRef(self.next_thread.fetch_add(1, Ordering::Relaxed))
    }

    /// How many thread handles were handed out.
    pub fn threads_numbered(&self) -> u32 {
        self.next_thread.load(Ordering::Relaxed)
    }

    pub fn define_thread(&self, sym: ThreadSymbol) {
        self.lock().pending.push(Symbol::Thread(sym));
    }

    /// Moves the symbols defined since the last call into `out`, in
    /// definition order.
    pub fn drain_pending(&self, out: &mut Vec<Symbol>) {
        out.append(&mut self.lock().pending);
    }
}
