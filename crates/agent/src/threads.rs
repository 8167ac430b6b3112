//! Per-thread agent state and the dense [`ThreadRef`] numbering.
//!
//! A JVM thread is an OS thread, and a JVMTI callback runs on the thread
//! the event is about, so per-thread state lives in a Rust thread-local:
//! the event buffer, the jmethodID cache in front of the shared one, the
//! stack of open traced calls (for elapsed times) and the start times of
//! monitor waits. It is created at the thread's first callback; the
//! thread is numbered and its buffer registered at its first event.
//!
//! Another thread can need a thread's handle too (the owner of a contended
//! monitor), so the handle is also stored in the `Thread` object's JVMTI
//! tag; whoever sees a thread first numbers it and defines its symbol.
//!
//! A virtual thread is no OS thread: it runs on a carrier for a while,
//! unmounts (it parks, sleeps, blocks) and later mounts on any carrier.
//! So the thread-local slot holds the state of the Java thread *mounted*
//! on this OS thread: [`mount`] (called from the JVMTI mount events,
//! [`crate::vthreads`]) puts the carrier's own state aside and brings the
//! virtual thread's from its JVMTI thread-local storage; [`unmount`]
//! stores it back there and restores the carrier's. The hot path reads
//! the same Rust thread-local as before and pays nothing per call.

use crate::buffers::Producer;
use crate::jvmti::Jni;
use crate::methods::{MethodInfo, PtrMap};
use crate::recording::Recording;
use crate::slot::Slot;
use crate::sys;
use std::cell::RefCell;
use std::sync::{Arc, Mutex};
use vmview_format::{
    Event, EventKind, Loc, MethodId, Metrics, Outcome, StringId, ThreadRef, ThreadSymbol, Value,
};

/// A traced call not yet returned.
pub struct OpenCall {
    pub method: usize,
    pub start_ns: u64,
    pub depth: u32,
}

pub struct ThreadState {
    /// The recording this state belongs to ([`Recording::generation`]): a
    /// later recording starts every thread afresh.
    generation: u32,
    /// Numbered at the thread's first event, not at its first callback: a
    /// thread that only runs untraced code gets no handle and no symbol.
    thread: Option<ThreadRef>,
    /// Registered with the writer at the first event, too.
    buffer: Option<Producer>,
    /// The Java thread of the callback in progress (`None` for a VM
    /// thread, and between callbacks). The `jthread` is null in probe
    /// natives, which are not handed one: the thread is then looked up
    /// when it needs numbering.
    java: Option<(Jni, sys::jthread)>,
    /// This thread's view of the jmethodID cache.
    pub methods: PtrMap<Arc<MethodInfo>>,
    /// Traced calls in progress, innermost last.
    pub calls: Vec<OpenCall>,
    /// The [`Recording::tracing`] value `calls` were traced under.
    period: u32,
    /// Class of the exception unwinding the stack since the last THROW.
    pub unwinding: Option<StringId>,
    /// Argument values the probe buffered for the next `enter` (bci mode).
    pub pending_args: Vec<Value>,
    /// A THROW whose catch site so far is only a probe's catch-all handler
    /// (bci mode): written once the exception reaches a real handler or
    /// leaves the thread.
    pub pending_throw: Option<PendingThrow>,
    /// Monitors acquired in trace-class code and not yet released
    /// (`events=monitors`), innermost last.
    pub held: Vec<HeldMonitor>,
    /// When the current monitor contention began.
    pub contended_since: u64,
    /// When the current `Object.wait` began.
    pub wait_since: u64,
    /// A virtual thread whose THREAD_START was written (its THREAD_END
    /// is then written too).
    pub virtual_recorded: bool,
    /// The state of a virtual thread (made at its first mount).
    is_virtual: bool,
    /// A virtual thread numbered past [`VIRTUAL_HANDLES`]: its events are
    /// counted, not written.
    muted: bool,
}

/// Thread handles virtual threads may take: the format's bound on
/// handles (2^20) less room for platform threads. A program that runs
/// more virtual threads than this in one recording has the events of the
/// later ones counted in the final report instead of written: a handle
/// past the bound would stop the trace.
pub const VIRTUAL_HANDLES: u32 = vmview_format::MAX_THREAD_REF - (1 << 16);

/// A monitor held by trace-class code.
pub struct HeldMonitor {
    pub monitor: vmview_format::Monitor,
    /// The depth of the frame holding it.
    pub depth: u32,
    /// Held by a `synchronized` method (released by its frame's
    /// `methodMonitorExit`), not a block.
    pub method: bool,
}

/// The first report of an exception, held back while only probe handlers
/// catch it.
pub struct PendingThrow {
    pub time_ns: u64,
    pub exception: StringId,
    pub message: Option<String>,
    pub method: MethodId,
    pub loc: Loc,
    /// Whether the throw site is in a trace class.
    pub traced: bool,
}

thread_local! {
    static STATE: RefCell<Option<ThreadState>> = const { RefCell::new(None) };
    /// While a virtual thread is mounted on this OS thread: `Some`, with
    /// the carrier's own state (itself `None` when it had none).
    static CARRIER: RefCell<Option<Option<ThreadState>>> = const { RefCell::new(None) };
}

/// A virtual thread mounts on the calling (carrier) thread: its state,
/// kept in its JVMTI thread-local storage while it was unmounted (none
/// at its start), becomes the calling thread's, and the carrier's is put
/// aside until [`unmount`]. `vthread` may be null while it is the current
/// thread.
pub fn mount(agent: &Recording, vthread: sys::jthread) {
    let mut stored = match agent.jvmti.thread_local_storage(vthread) {
        Ok(p) if !p.is_null() => {
            if let Err(e) = agent
                .jvmti
                .set_thread_local_storage(vthread, std::ptr::null_mut())
            {
                agent.problems.jvmti(e);
            }
            // SAFETY: only `unmount` stores pointers there, from
            // `Box::into_raw`, and the slot was just cleared, so the box is
            // taken back once.
            Some(*unsafe { Box::from_raw(p.cast::<ThreadState>()) })
        }
        Ok(_) => None,
        Err(e) => {
            agent.problems.jvmti(e);
            None
        }
    };
    if stored.is_none() && !virtual_mounted() {
        let mut s = ThreadState::new(agent.generation);
        s.is_virtual = true;
        stored = Some(s);
    }
    let swapped = STATE.try_with(|cell| {
        let Ok(mut current) = cell.try_borrow_mut() else {
            return false;
        };
        CARRIER.with_borrow_mut(|carrier| {
            if carrier.is_none() {
                *carrier = Some(std::mem::replace(&mut *current, stored));
            } else if stored.is_some() {
                // Mounted twice without an unmount seen between (the
                // events were switched on meanwhile): the carrier's state
                // is the one already put aside, the current one belonged
                // to a virtual thread and is lost.
                *current = stored;
            }
            // Else a second notice of the same mount (VirtualThreadStart,
            // then VirtualThreadMount): the state in place is its own.
        });
        true
    });
    if swapped != Ok(true) {
        agent.problems.reentrant();
    }
}

/// Whether a virtual thread's state is the calling thread's (between
/// [`mount`] and [`unmount`]).
pub fn virtual_mounted() -> bool {
    CARRIER
        .try_with(|c| c.try_borrow().is_ok_and(|c| c.is_some()))
        .unwrap_or(false)
}

/// A virtual thread unmounts from the calling thread (`end`: it ends):
/// its state goes back to its JVMTI thread-local storage (or is dropped)
/// and the carrier's own state is the calling thread's again.
pub fn unmount(agent: &Recording, vthread: sys::jthread, end: bool) {
    let taken = STATE.try_with(|cell| {
        let mut current = cell.try_borrow_mut().ok()?;
        CARRIER.with_borrow_mut(|carrier| {
            // No mount was seen (the events were switched on while it ran):
            // the state in use is the carrier's.
            let own = carrier.take()?;
            Some(std::mem::replace(&mut *current, own))
        })
    });
    let state = match taken {
        Ok(Some(state)) => state,
        Ok(None) => return,
        Err(_) => {
            agent.problems.reentrant();
            return;
        }
    };
    if let Some(mut state) = state.filter(|_| !end) {
        // A parked virtual thread holds no buffer block.
        if let Some(buffer) = state.buffer.as_mut() {
            crate::buffers::Buffers::let_go(buffer);
        }
        let p = Box::into_raw(Box::new(state));
        if let Err(e) = agent.jvmti.set_thread_local_storage(vthread, p.cast()) {
            agent.problems.jvmti(e);
            // SAFETY: `p` came from `Box::into_raw` just above and was not
            // stored.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

/// Runs `f` on the calling thread's state, creating it on first use.
/// `java` names the callback's Java thread (`None` on a VM thread such as
/// the one reporting GC). Returns `None` when the state is in use further
/// up this thread's stack, or the thread is exiting.
pub fn with_state<R>(
    agent: &Recording,
    java: Option<(Jni, sys::jthread)>,
    f: impl FnOnce(&mut ThreadState) -> R,
) -> Option<R> {
    let r = STATE.try_with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        if let Some(old) = slot.as_ref().filter(|s| s.generation != agent.generation) {
            let mut fresh = ThreadState::new(agent.generation);
            fresh.is_virtual = old.is_virtual;
            *slot = Some(fresh);
        }
        let state = slot.get_or_insert_with(|| ThreadState::new(agent.generation));
        state.java = java;
        let r = f(state);
        state.java = None;
        Some(r)
    });
    match r {
        Ok(Some(r)) => Some(r),
        _ => {
            agent.problems.reentrant();
            None
        }
    }
}

/// Drops the calling thread's state: its Java thread ended (or a new one
/// starts on this OS thread). Queued events stay with the writer.
pub fn forget_current() {
    let _ = STATE.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            *s = None;
        }
    });
}

impl ThreadState {
    fn new(generation: u32) -> ThreadState {
        ThreadState {
            generation,
            thread: None,
            buffer: None,
            java: None,
            methods: PtrMap::default(),
            calls: Vec::new(),
            period: crate::recording::TRACING_ALWAYS,
            unwinding: None,
            pending_args: Vec::new(),
            pending_throw: None,
            held: Vec::new(),
            contended_since: 0,
            wait_since: 0,
            virtual_recorded: false,
            is_virtual: false,
            muted: false,
        }
    }

    /// The JNI environment of the callback in progress (none on a VM thread).
    pub fn jni(&self) -> Option<Jni> {
        self.java.map(|(jni, _)| jni)
    }

    /// Called by the call path with the [`Recording::tracing`] value it runs
    /// under: when a new period of `period=` began since this thread's
    /// last traced call, the calls it had open are forgotten (their
    /// RETURNs went unseen between the periods) along with arguments
    /// buffered for a call not traced and the monitors it held.
    #[inline]
    pub fn enter_period(&mut self, tracing: u32) {
        if self.period != tracing {
            self.period = tracing;
            self.calls.clear();
            self.pending_args.clear();
            self.held.clear();
        }
    }

    /// Queues an event of this thread, numbering the thread first if this
    /// is its first event.
    pub fn emit(&mut self, agent: &Recording, time_ns: u64, kind: EventKind) {
        let Some(thread) = self.thread(agent) else {
            return;
        };
        self.push_event(agent, thread, time_ns, kind);
    }

    /// Queues an event of `thread` (this thread's handle), packed.
    fn push_event(&mut self, agent: &Recording, thread: ThreadRef, time_ns: u64, kind: EventKind) {
        let buffer = self.buffer(agent);
        agent.buffers.push(
            buffer,
            Event {
                id: 0,
                time_ns,
                thread,
                kind,
            },
        );
    }

    /// [`emit`](ThreadState::emit) of a CALL without caller or metrics:
    /// the call path's fast path, with no [`Event`] built. The arguments
    /// (the probe's buffered ones, `pending_args`) go into the slot when
    /// one or two plain values fit it, else into one block the slot owns
    /// ([`Slot::call_params`]); `pending_args` is cleared, keeping its
    /// capacity, and its strings are freed here, on the thread that
    /// allocated them.
    #[inline]
    pub fn emit_call(&mut self, agent: &Recording, time_ns: u64, method: MethodId, depth: u32) {
        let Some(thread) = self.thread(agent) else {
            self.pending_args.clear();
            return;
        };
        let args = &self.pending_args;
        if args.is_empty() {
            if let Some(slot) = Slot::small_call(time_ns, thread, method, depth) {
                let buffer = self.buffer(agent);
                agent.buffers.push_small(buffer, slot);
                return;
            }
        } else if let Some(slot) = Slot::small_call_args(time_ns, thread, method, depth, args) {
            self.pending_args.clear();
            let buffer = self.buffer(agent);
            agent.buffers.push_small(buffer, slot);
            return;
        } else if let Some(slot) = Slot::call_params(time_ns, thread, method, depth, args) {
            self.pending_args.clear();
            let buffer = self.buffer(agent);
            agent.buffers.push_slot(buffer, slot);
            return;
        }
        // Deeper than a slot holds.
        let params = std::mem::take(&mut self.pending_args);
        let kind = EventKind::Call {
            metrics: Metrics::NONE,
            method,
            depth,
            caller: None,
            params,
        };
        self.push_event(agent, thread, time_ns, kind);
    }

    /// [`emit`](ThreadState::emit) of a RETURN without metrics: a small
    /// slot unless its value needs the heap (a string, a boxed value).
    #[inline]
    pub fn emit_return(
        &mut self,
        agent: &Recording,
        time_ns: u64,
        method: MethodId,
        depth: u32,
        elapsed_ns: u64,
        outcome: Outcome,
    ) {
        let Some(thread) = self.thread(agent) else {
            return;
        };
        match Slot::small_return(time_ns, thread, method, depth, elapsed_ns, &outcome) {
            Some(slot) => {
                let buffer = self.buffer(agent);
                agent.buffers.push_small(buffer, slot);
            }
            None => {
                let kind = EventKind::Return {
                    metrics: Metrics::NONE,
                    method,
                    depth,
                    outcome,
                    elapsed_ns,
                };
                self.push_event(agent, thread, time_ns, kind);
            }
        }
    }

    /// This thread's handle, numbered at its first event; `None` for a
    /// virtual thread past [`VIRTUAL_HANDLES`] (its event is counted).
    #[inline]
    fn thread(&mut self, agent: &Recording) -> Option<ThreadRef> {
        if self.muted {
            agent.problems.virtual_unrecorded();
            return None;
        }
        match self.thread {
            Some(t) => Some(t),
            None => self.number(agent),
        }
    }

    #[cold]
    fn number(&mut self, agent: &Recording) -> Option<ThreadRef> {
        if self.is_virtual && agent.symbols.threads_numbered() >= VIRTUAL_HANDLES {
            self.muted = true;
            agent.problems.virtual_unrecorded();
            return None;
        }
        // JVMTI calls only: no callback can re-enter here.
        let t = match self.java {
            Some((jni, t)) if t.is_null() => match agent.jvmti.current_thread(jni) {
                Ok(t) if !t.is_null() => agent.threads.thread_ref(agent, jni, t.get()),
                Ok(_) => agent.threads.vm_thread_ref(agent),
                Err(e) => {
                    agent.problems.jvmti(e);
                    agent.threads.vm_thread_ref(agent)
                }
            },
            Some((jni, t)) => agent.threads.thread_ref(agent, jni, t),
            None => agent.threads.vm_thread_ref(agent),
        };
        self.thread = Some(t);
        Some(t)
    }

    /// This thread's buffer, registered with the writer at its first event.
    #[inline]
    fn buffer(&mut self, agent: &Recording) -> &mut Producer {
        let is_virtual = self.is_virtual;
        self.buffer.get_or_insert_with(|| {
            let mut b = agent.buffers.register();
            if is_virtual {
                // Thousands may start at once: small blocks first.
                crate::buffers::Buffers::let_go(&mut b);
            }
            b
        })
    }
}

/// Hands out thread handles and defines their symbols.
#[derive(Default)]
pub struct ThreadRegistry {
    /// Serialises numbering so a thread seen by two threads at once gets
    /// one handle.
    lock: Mutex<()>,
}

impl ThreadRegistry {
    /// The handle of a Java thread, numbering it on first sight.
    pub fn thread_ref(&self, agent: &Recording, jni: Jni, thread: sys::jthread) -> ThreadRef {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let j = agent.jvmti;
        match j.tag(thread) {
            Ok(t) if t > 0 && (t >> 32) == i64::from(agent.generation) => {
                return ThreadRef(((t & 0xffff_ffff) - 1) as u32)
            }
            Ok(_) => {}
            Err(e) => agent.problems.jvmti(e),
        }
        let id = agent.symbols.new_thread_ref();
        let s = &agent.symbols;
        let sym = match j.thread_info(jni, thread) {
            Ok(info) => {
                let java_id = match agent.fields.get().and_then(|f| f.thread_id) {
                    Some(f) => jni.long_field(thread, f.0),
                    None => -1,
                };
                // Virtual threads have no name unless given one.
                let name = if info.name.is_empty()
                    && crate::vthreads::enabled()
                    && jni.is_virtual_thread(thread)
                {
                    format!("virtual#{java_id}")
                } else {
                    info.name
                };
                ThreadSymbol {
                    id,
                    java_id,
                    name: s.string(&name),
                    group: s.string(&info.group),
                    priority: info.priority,
                    daemon: info.daemon,
                }
            }
            Err(e) => {
                agent.problems.jvmti(e);
                unknown_thread(agent, id, &format!("thread-{}", id.0))
            }
        };
        s.define_thread(sym);
        // The recording's generation in the high half: a tag left by an
        // earlier recording (same JVMTI environment) is not this one's.
        let tag = (i64::from(agent.generation) << 32) | (i64::from(id.0) + 1);
        if let Err(e) = j.set_tag(thread, tag) {
            agent.problems.jvmti(e);
        }
        id
    }

    /// A handle for a VM-internal thread (no `Thread` object), such as the
    /// one that reports garbage collections.
    pub fn vm_thread_ref(&self, agent: &Recording) -> ThreadRef {
        let id = agent.symbols.new_thread_ref();
        agent
            .symbols
            .define_thread(unknown_thread(agent, id, "VM Thread"));
        id
    }
}

/// A thread symbol with no Java identity.
pub fn unknown_thread(agent: &Recording, id: ThreadRef, name: &str) -> ThreadSymbol {
    ThreadSymbol {
        id,
        java_id: -1,
        name: agent.symbols.string(name),
        group: agent.symbols.string("system"),
        priority: 0,
        daemon: true,
    }
}
