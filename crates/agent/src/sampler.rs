//! The stack sampler (`events=…+samples`, `interval=`): every interval, one
//! `GetAllStackTraces` and one SAMPLE event per live Java thread with its
//! stack and what it was doing (RUN, IO, WAIT, BLOCKED, SLEEP).
//!
//! Why this shape: the DYMON reactions analysis needs cheap, fixed-overhead
//! samples of *all* threads, and one whole-JVM walk costs one safepoint per
//! tick where per-thread walks would cost one per thread. The sampler is a
//! JVMTI agent thread (a Java daemon thread running native code, started at
//! VMInit and stopped and joined at VMDeath), so it holds a JNIEnv for the
//! thread references and method lookups. Frame names are cached by
//! jmethodID (an uncached lookup costs 1–2 µs per frame) and stacks are
//! interned, so a stack seen again costs its handle only.
//!
//! Monitors held (with the depth of the frame that entered each) cost a
//! handshake per thread, so they are asked only in ticks where some thread
//! is BLOCKED — when they say who holds what the blocked thread wants.
//!
//! The same thread keeps the time of `period=`: it switches call tracing
//! on and off ([`crate::recording::Recording::tracing`]) and writes PERIOD_START, with every
//! thread's stack, and PERIOD_END (see [`Sampler::begin_period`]). It runs
//! when samples or periods are asked for.
//!
//! "IO" is not a JVMTI state: a runnable thread in native code is IO when
//! one of its top frames is a known I/O method ([`BUILTIN_IO`], plus the
//! `io=` globs), else RUN. Some natives block while JVMTI calls the thread
//! runnable (the Reference Handler waits inside the VM for the GC's pending
//! list; the process reaper in `waitpid`): a runnable thread whose top
//! frame is one of [`BUILTIN_WAIT`] (plus the `wait=` globs) is WAIT.

use crate::agent::{self, Agent};
use crate::buffers::Producer;
use crate::classes;
use crate::clock;
use crate::jvmti::{Jni, LocalRef, StackTrace};
use crate::methods::{MethodInfo, PtrMap};
use crate::sys;
use rustc_hash::FxHashMap as HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use vmview_format::{Event, EventKind, Loc, MethodId, Monitor, StackId, ThreadRef, ThreadState};
use vmview_options::{ClassFilter, EventGroup, TracePeriod};

/// Deepest stack recorded; deeper frames (towards the base) are cut.
pub const MAX_DEPTH: i32 = 64;
/// Deepest stack a PERIOD_START carries: its frames give the depths of
/// the calls open when the period began, so it is cut only past this.
const MAX_PERIOD_DEPTH: i32 = 4096;
/// How far apart a period switch and the time stamp of its PERIOD_START
/// or PERIOD_END are kept, so that the time stamps of the calls traced
/// in the period, taken on other cores, fall strictly inside it.
const SWITCH_MARGIN_NS: u64 = 2_000;
/// How many top frames are searched for an I/O method: the native call
/// sits under a few JDK wrappers at most (`Net.poll` under `park`).
const IO_SEARCH_DEPTH: usize = 4;
/// Most threads whose held monitors are remembered (`Sampler::held`);
/// past it the memory starts again empty.
const HELD_CACHE: usize = 4096;
/// How long VMDeath waits for the sampler to finish its tick.
const JOIN_TIMEOUT: Duration = Duration::from_secs(2);

pub use vmview_options::{BUILTIN_IO, BUILTIN_WAIT};

/// Whether the recording needs the sampler thread: for samples, or for
/// the periods of `period=` when calls are traced.
pub fn wanted(agent: &Agent, calls: bool) -> bool {
    agent.options.events.contains(EventGroup::Samples) || (calls && agent.options.period.is_some())
}

/// Starts the sampler thread (at VMInit). Problems are counted, never fatal.
pub fn start(agent: &'static Agent, jni: Jni) {
    agent
        .sampler
        .start(agent, jni, c"vmview-sampler", "sampler", sampler_main);
}

/// Stops the sampler and waits (bounded) until it has left its loop, so no
/// SAMPLE is pushed after the writer's last drain. Without a sampler
/// thread (no `samples`, or not started yet), returns at once.
pub fn stop(agent: &Agent) {
    agent.sampler.stop(JOIN_TIMEOUT);
}

unsafe extern "C" fn sampler_main(
    _jvmti: *mut sys::jvmtiEnv,
    jni: *mut sys::JNIEnv,
    arg: *mut std::ffi::c_void,
) {
    // SAFETY: `arg` is the `&'static Agent` `start` passed (agents are
    // never freed).
    let Some(agent) = (unsafe { arg.cast::<Agent>().cast_const().as_ref() }) else {
        return;
    };
    agent::guard("sampler thread", || {
        if !jni.is_null() {
            // SAFETY: the JVM hands the agent thread its own JNIEnv.
            let jni = unsafe { Jni::new(jni) };
            Sampler::new(agent).run(jni);
        }
    });
    agent.sampler.exited();
}

/// What the sampler keeps per jmethodID.
struct Frame {
    id: MethodId,
    info: Arc<MethodInfo>,
    /// A native on the I/O list.
    io: bool,
    /// A native on the wait list.
    wait: bool,
    /// A method of the agent's own classes (`vmview.Probe`): not part of
    /// a PERIOD_START stack.
    agent: bool,
}

/// Where `period=` stands.
struct PeriodClock {
    period: TracePeriod,
    /// The number of the current or next period.
    number: u32,
    on: bool,
    next: Instant,
}

/// What a thread's top frames add to its JVMTI state bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NativeCall {
    /// No listed native method.
    None,
    /// A native I/O method among the top frames.
    Io,
    /// The top frame is a native that waits.
    Wait,
}

struct Sampler {
    agent: &'static Agent,
    buffer: Producer,
    io: ClassFilter,
    wait: ClassFilter,
    frames: PtrMap<Frame>,
    /// The monitors each idle thread (by OS thread id) was last found
    /// holding, for the signal sampler's repeated walks.
    held: HashMap<i32, Vec<(Monitor, u32)>>,
    /// The stack handle and top-frame native each thread (by OS thread
    /// id) got from its last fresh walk: a repeated walk
    /// ([`crate::signal_sampler::Walk::reused`]) has the same frames and
    /// pc, so its sample takes them from here instead of resolving and
    /// interning the frames again.
    stacks: HashMap<i32, (StackId, NativeCall)>,
    /// Reused per thread per tick.
    scratch: Vec<(MethodId, Loc)>,
    /// Whether each frame of `scratch` is a native method.
    natives: Vec<bool>,
    /// Whether the environment may list the monitors a thread holds (an
    /// agent attached to a running JDK 17 may not).
    monitors: bool,
    /// With `reactions`: the warm-up's handler detection.
    reactions: Option<crate::reactions::Detector>,
    /// Whether SAMPLE events are asked for.
    samples: bool,
    periods: Option<PeriodClock>,
    /// This thread's handle, once it wrote an event.
    me: Option<ThreadRef>,
    /// The signal sampler (`sampler=signal|cpu`), or none: safepoint.
    signal: Option<crate::signal_sampler::SignalSampler>,
}

impl Sampler {
    fn new(agent: &'static Agent) -> Sampler {
        let list = |builtin: &[&str], extra: &ClassFilter| {
            ClassFilter::new(
                builtin
                    .iter()
                    .copied()
                    .chain(extra.patterns().iter().map(String::as_str)),
            )
            .unwrap_or_default()
        };
        Sampler {
            agent,
            buffer: agent.buffers.register(),
            io: list(BUILTIN_IO, &agent.options.io),
            wait: list(BUILTIN_WAIT, &agent.options.wait),
            frames: PtrMap::default(),
            held: HashMap::default(),
            stacks: HashMap::default(),
            scratch: Vec::with_capacity(MAX_DEPTH as usize),
            natives: Vec::with_capacity(MAX_DEPTH as usize),
            monitors: agent
                .jvmti
                .capabilities()
                .is_ok_and(|c| c.can_get_owned_monitor_stack_depth_info() != 0),
            reactions: crate::reactions::Detector::new(agent),
            samples: agent.options.events.contains(EventGroup::Samples),
            periods: agent
                .options
                .period
                .filter(|_| agent.tracing() != crate::agent::TRACING_ALWAYS)
                .map(|period| PeriodClock {
                    period,
                    number: 0,
                    on: false,
                    next: Instant::now(),
                }),
            me: None,
            signal: None,
        }
    }

    fn run(&mut self, jni: Jni) {
        let agent = self.agent;
        if self.samples && crate::signal_sampler::in_use(&agent.options) {
            match crate::signal_sampler::SignalSampler::new(agent, jni) {
                Ok(s) => self.signal = Some(s),
                Err(why) => agent.problems.capture(|| {
                    format!("signal sampling could not start ({why}): samples taken at safepoints")
                }),
            }
        }
        self.run_loop(jni);
        if let Some(s) = &mut self.signal {
            s.stop(agent);
        }
    }

    fn run_loop(&mut self, jni: Jni) {
        let interval = self.agent.options.interval;
        let mut next_sample = self.samples.then(|| Instant::now() + interval);
        loop {
            let next_switch = self.periods.as_ref().map(|p| p.next);
            let Some(next) = next_sample.into_iter().chain(next_switch).min() else {
                return;
            };
            let stopping = self.wait_until(next);
            if stopping || !self.agent.is_live() {
                // A period still on ends with the recording.
                if self.periods.as_ref().is_some_and(|p| p.on) {
                    jni.with_local_frame(64, || self.end_period(jni));
                }
                return;
            }
            let now = Instant::now();
            if next_switch.is_some_and(|t| t <= now) {
                jni.with_local_frame(512, || self.switch_period(jni));
            }
            if let Some(t) = next_sample.filter(|t| *t <= now) {
                // One reference per thread arrives at once (HotSpot's default
                // -XX:MaxJNILocalCapacity, as for the loaded classes).
                jni.with_local_frame(65_536, || self.tick(jni));
                // A tick that overran starts the next interval now, not in
                // a burst.
                next_sample = Some((t + interval).max(Instant::now()));
            }
        }
    }

    /// Waits until `next` or the stop request; true when stopping.
    fn wait_until(&self, next: Instant) -> bool {
        self.agent.sampler.wait_until(next)
    }

    /// Begins the next period or ends the current one, and sets the time
    /// of the next switch.
    fn switch_period(&mut self, jni: Jni) {
        let Some(p) = &self.periods else { return };
        if p.on {
            self.end_period(jni);
        } else {
            self.begin_period(jni);
        }
        if let Some(p) = &mut self.periods {
            let length = if p.on { p.period.on } else { p.period.off };
            // A switch that came late does not shorten the next period.
            p.next = (p.next + length).max(Instant::now() + length / 2);
        }
    }

    /// Switches call tracing on and writes one PERIOD_START per thread
    /// with its stack. The events' time is taken before tracing goes on
    /// and the stacks after, so every call traced in the period is later
    /// than its PERIOD_START and every frame whose RETURN the period can
    /// see is in the stack; events younger than the PERIOD_STARTs wait in
    /// the writer until they are queued ([`Agent::hold_from`]).
    fn begin_period(&mut self, jni: Jni) {
        let agent = self.agent;
        let Some(number) = self.periods.as_ref().map(|p| p.number) else {
            return;
        };
        let start = clock::now_ns();
        agent.hold_from.store(start, Ordering::Release);
        agent.capture.set_tracing(agent, true);
        while clock::now_ns() <= start + SWITCH_MARGIN_NS {
            std::hint::spin_loop();
        }
        agent
            .tracing
            .store(crate::agent::tracing_in_period(number), Ordering::Relaxed);
        // The period's first PERIOD_START, on this thread with no stack:
        // it says the period began even when no thread is in traced code.
        let me = self.own_thread(jni);
        self.scratch.clear();
        let empty = self.intern_stack();
        agent.buffers.push(
            &mut self.buffer,
            Event {
                id: 0,
                time_ns: start,
                thread: me,
                kind: EventKind::PeriodStart {
                    period: number,
                    stack: empty,
                },
            },
        );
        match agent.jvmti.all_stack_traces(MAX_PERIOD_DEPTH) {
            Ok(traces) => {
                for t in traces.iter() {
                    if t.frames.is_empty() || t.state & sys::JVMTI_THREAD_STATE_ALIVE == 0 {
                        continue;
                    }
                    if t.frames.len() >= MAX_PERIOD_DEPTH as usize {
                        agent.problems.capture(|| {
                            format!(
                                "a thread's stack was over {MAX_PERIOD_DEPTH} frames deep when a period began: its calls of that period hang at the wrong depth"
                            )
                        });
                    }
                    self.scratch.clear();
                    // From the innermost frame of a traced method down: the
                    // frames above it (the probe the thread is in, untraced
                    // code it called) have no RETURN to come, and a call
                    // they make belongs under that traced frame. The
                    // untraced frames below stay, so that the frames'
                    // positions are their depths. A thread in no traced
                    // method gets no PERIOD_START.
                    let Some(top) = t.frames.iter().position(|f| {
                        let frame = self.frame(jni, f.method);
                        frame.info.traced && !frame.info.native && !frame.agent
                    }) else {
                        continue;
                    };
                    for f in &t.frames[top..] {
                        let frame = self.frame(jni, f.method);
                        let loc = frame.info.loc(agent, f.method, f.location);
                        let id = frame.id;
                        self.scratch.push((id, loc));
                    }
                    let stack = self.intern_stack();
                    let thread = agent.threads.thread_ref(agent, jni, t.thread);
                    agent.buffers.push(
                        &mut self.buffer,
                        Event {
                            id: 0,
                            time_ns: start,
                            thread,
                            kind: EventKind::PeriodStart {
                                period: number,
                                stack,
                            },
                        },
                    );
                }
            }
            Err(e) => agent.problems.jvmti(e),
        }
        agent.hold_from.store(u64::MAX, Ordering::Release);
        if let Some(p) = &mut self.periods {
            p.on = true;
        }
    }

    /// This thread's handle, for the period events.
    fn own_thread(&mut self, jni: Jni) -> ThreadRef {
        let agent = self.agent;
        *self
            .me
            .get_or_insert_with(|| match agent.jvmti.current_thread(jni) {
                Ok(t) if !t.is_null() => agent.threads.thread_ref(agent, jni, t.get()),
                _ => agent.threads.vm_thread_ref(agent),
            })
    }

    /// Switches call tracing off and writes PERIOD_END, timed after the
    /// last call the period traced.
    fn end_period(&mut self, jni: Jni) {
        let agent = self.agent;
        let Some(number) = self.periods.as_ref().map(|p| p.number) else {
            return;
        };
        agent
            .tracing
            .store(crate::agent::TRACING_OFF, Ordering::Relaxed);
        agent.capture.set_tracing(agent, false);
        let off = clock::now_ns();
        while clock::now_ns() <= off + SWITCH_MARGIN_NS {
            std::hint::spin_loop();
        }
        let me = self.own_thread(jni);
        agent.buffers.push(
            &mut self.buffer,
            Event {
                id: 0,
                time_ns: clock::now_ns(),
                thread: me,
                kind: EventKind::PeriodEnd { period: number },
            },
        );
        if let Some(p) = &mut self.periods {
            p.on = false;
            p.number = p.number.wrapping_add(1);
        }
    }

    fn tick(&mut self, jni: Jni) {
        if let Some(mut signal) = self.signal.take() {
            let walks = signal.tick(self.agent, jni);
            self.signal = Some(signal);
            let contended = self.monitors
                && walks
                    .iter()
                    .any(|w| w.state & sys::JVMTI_THREAD_STATE_BLOCKED_ON_MONITOR_ENTER != 0);
            if self.held.len() > HELD_CACHE {
                self.held.clear();
            }
            if self.stacks.len() > HELD_CACHE {
                self.stacks.clear();
            }
            for w in &walks {
                let t = StackTrace {
                    thread: w.thread.get(),
                    state: w.state,
                    frames: &w.frames,
                };
                // A thread that has not run since its last walk holds what
                // it held then: asking again (a handshake with the thread)
                // would only stop it. One that ran is asked afresh.
                if !w.reused {
                    self.held.remove(&w.tid);
                }
                let monitors = if !contended {
                    Vec::new()
                } else if let Some(held) = self.held.get(&w.tid).filter(|_| w.reused) {
                    held.clone()
                } else {
                    let held = held_monitors(self.agent, jni, t.thread);
                    self.held.insert(w.tid, held.clone());
                    held
                };
                // The reactions detector reads each sample's frames, so
                // it gets them resolved every time.
                let known = (w.reused && self.reactions.is_none())
                    .then(|| self.stacks.get(&w.tid).copied())
                    .flatten();
                let resolved = match known {
                    Some(known) => known,
                    None => self.resolve(jni, &t, w.pc),
                };
                if !w.reused {
                    self.stacks.insert(w.tid, resolved);
                }
                self.record(jni, &t, resolved, w.time_ns, monitors);
            }
            if let Some(d) = self.reactions.as_mut().filter(|d| d.due()) {
                d.switch(self.agent, jni);
            }
            return;
        }
        let j = self.agent.jvmti;
        let walk = match j.all_stack_traces(MAX_DEPTH) {
            Ok(t) => t,
            Err(e) => {
                self.agent.problems.jvmti(e);
                return;
            }
        };
        let now = clock::now_ns();
        let contended = self.monitors
            && walk
                .iter()
                .any(|t| t.state & sys::JVMTI_THREAD_STATE_BLOCKED_ON_MONITOR_ENTER != 0);
        for t in walk.iter() {
            // No Java frame: the sampler itself, or a thread just starting.
            if t.frames.is_empty() || t.state & sys::JVMTI_THREAD_STATE_ALIVE == 0 {
                continue;
            }
            // GetAllStackTraces says nothing of how a frame runs: only
            // native methods are typed (pc 0).
            let monitors = if contended {
                held_monitors(self.agent, jni, t.thread)
            } else {
                Vec::new()
            };
            self.sample(jni, &t, 0, now, monitors);
        }
        if let Some(d) = self.reactions.as_mut().filter(|d| d.due()) {
            d.switch(self.agent, jni);
        }
    }

    /// One SAMPLE of `t`; `pc` is where a signal interrupted the thread
    /// (0: not known), which types the top frames.
    fn sample(
        &mut self,
        jni: Jni,
        t: &StackTrace<'_>,
        pc: usize,
        now: u64,
        monitors: Vec<(Monitor, u32)>,
    ) {
        let resolved = self.resolve(jni, t, pc);
        self.record(jni, t, resolved, now, monitors);
    }

    /// The handle of `t`'s stack (frames named, typed by `pc` and
    /// interned) and what its top frames add to its state; leaves the
    /// frames in `scratch`.
    fn resolve(&mut self, jni: Jni, t: &StackTrace<'_>, pc: usize) -> (StackId, NativeCall) {
        let agent = self.agent;
        self.scratch.clear();
        self.natives.clear();
        let mut native = NativeCall::None;
        for (i, f) in t.frames.iter().enumerate() {
            let frame = self.frame(jni, f.method);
            let is_native = frame.info.native;
            if i == 0 && frame.wait {
                native = NativeCall::Wait;
            } else if i < IO_SEARCH_DEPTH && frame.io && native == NativeCall::None {
                native = NativeCall::Io;
            }
            let loc = frame.info.loc(agent, f.method, f.location);
            let id = frame.id;
            self.scratch.push((id, loc));
            self.natives.push(is_native);
        }
        let methods: Vec<usize> = t.frames.iter().map(|f| f.method as usize).collect();
        let types = crate::code_table::frame_types(pc, &methods, &self.natives);
        (
            self.agent.symbols.stack_typed(&self.scratch, &types),
            native,
        )
    }

    /// Writes the SAMPLE of `t` with the stack [`Sampler::resolve`] gave
    /// (and hands it to the reactions detector, which reads `scratch`).
    fn record(
        &mut self,
        jni: Jni,
        t: &StackTrace<'_>,
        (stack, native): (StackId, NativeCall),
        now: u64,
        monitors: Vec<(Monitor, u32)>,
    ) {
        let agent = self.agent;
        let state = classify(t.state, native);
        let thread = agent.threads.thread_ref(agent, jni, t.thread);
        if let Some(d) = &mut self.reactions {
            let jmethods = t.frames.iter().map(|f| f.method);
            d.add(agent, jni, thread, now, state, &self.scratch, jmethods);
        }
        agent.buffers.push(
            &mut self.buffer,
            Event {
                id: 0,
                time_ns: now,
                thread,
                kind: EventKind::Sample {
                    state,
                    stack,
                    monitors,
                },
            },
        );
    }

    fn frame(&mut self, jni: Jni, method: sys::jmethodID) -> &Frame {
        let agent = self.agent;
        let (io, wait) = (&self.io, &self.wait);
        self.frames.entry(method as usize).or_insert_with(|| {
            let info = agent.methods.get(agent, jni, method);
            let id = info.symbol(agent, jni, method);
            let (io, wait, agent) = if info.native {
                let name = qualified_name(agent, jni, method);
                (
                    io.matches(&name),
                    wait.matches(&name),
                    name.starts_with("vmview."),
                )
            } else {
                (false, false, false)
            };
            Frame {
                id,
                info,
                io,
                wait,
                agent,
            }
        })
    }

    /// The handle of the stack in `scratch`, defining its symbol (before
    /// any event uses it) on first sight.
    fn intern_stack(&mut self) -> StackId {
        self.agent.symbols.stack(&self.scratch)
    }
}

/// The monitors `thread` holds, with the depth of the frame that entered
/// each; those entered through JNI (no frame) are left out.
fn held_monitors(agent: &Agent, jni: Jni, thread: sys::jthread) -> Vec<(Monitor, u32)> {
    let owned = match agent.jvmti.owned_monitor_depths(thread) {
        Ok(o) => o,
        Err(e) => {
            agent.problems.jvmti(e);
            return Vec::new();
        }
    };
    let mut held = Vec::with_capacity(owned.len());
    for (object, depth) in owned {
        let object = LocalRef::new(jni, object);
        if let Ok(depth) = u32::try_from(depth) {
            let monitor = Monitor {
                class: classes::name(agent, jni.object_class(object.get()).get()),
                hash: agent.jvmti.object_hash_code(object.get()).unwrap_or(0),
            };
            held.push((monitor, depth));
        }
    }
    held
}

/// `java.net.SocketInputStream.socketRead0`, for matching against the
/// I/O globs (once per jmethodID).
fn qualified_name(agent: &Agent, jni: Jni, method: sys::jmethodID) -> String {
    let j = agent.jvmti;
    let class = j
        .method_declaring_class(jni, method)
        .and_then(|c| j.class_signature(c.get()))
        .map(|sig| {
            sig.trim_start_matches('L')
                .trim_end_matches(';')
                .replace('/', ".")
        })
        .unwrap_or_default();
    let name = j.method_name(method).map(|(n, _)| n).unwrap_or_default();
    format!("{class}.{name}")
}

/// The sample state from JVMTI thread state bits and the listed native
/// methods among the top frames. A waiting native counts whatever the
/// bits say below BLOCKED/SLEEP/WAIT: inside it the thread may be in the
/// VM (the Reference Handler) rather than in native code.
pub fn classify(bits: u32, native: NativeCall) -> ThreadState {
    if bits & sys::JVMTI_THREAD_STATE_BLOCKED_ON_MONITOR_ENTER != 0 {
        ThreadState::Blocked
    } else if bits & sys::JVMTI_THREAD_STATE_SLEEPING != 0 {
        ThreadState::Sleep
    } else if bits & sys::JVMTI_THREAD_STATE_WAITING != 0 || native == NativeCall::Wait {
        ThreadState::Wait
    } else if native == NativeCall::Io && bits & sys::JVMTI_THREAD_STATE_IN_NATIVE != 0 {
        ThreadState::Io
    } else {
        ThreadState::Run
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALIVE: u32 = sys::JVMTI_THREAD_STATE_ALIVE;

    #[test]
    fn states_follow_the_jvmti_bits() {
        let runnable = ALIVE | sys::JVMTI_THREAD_STATE_RUNNABLE;
        let native = runnable | sys::JVMTI_THREAD_STATE_IN_NATIVE;
        use NativeCall::{Io, Wait};
        assert_eq!(classify(runnable, NativeCall::None), ThreadState::Run);
        assert_eq!(classify(native, NativeCall::None), ThreadState::Run);
        assert_eq!(classify(native, Io), ThreadState::Io);
        assert_eq!(
            classify(runnable, Io),
            ThreadState::Run,
            "an I/O method not (yet) in native code runs"
        );
        assert_eq!(
            classify(runnable, Wait),
            ThreadState::Wait,
            "the Reference Handler waits in the VM, not in native code"
        );
        assert_eq!(classify(native, Wait), ThreadState::Wait);
        let parked = ALIVE
            | sys::JVMTI_THREAD_STATE_WAITING
            | sys::JVMTI_THREAD_STATE_WAITING_INDEFINITELY
            | sys::JVMTI_THREAD_STATE_PARKED;
        assert_eq!(classify(parked, NativeCall::None), ThreadState::Wait);
        let sleeping = ALIVE
            | sys::JVMTI_THREAD_STATE_WAITING
            | sys::JVMTI_THREAD_STATE_WAITING_WITH_TIMEOUT
            | sys::JVMTI_THREAD_STATE_SLEEPING;
        assert_eq!(classify(sleeping, NativeCall::None), ThreadState::Sleep);
        let blocked = ALIVE | sys::JVMTI_THREAD_STATE_BLOCKED_ON_MONITOR_ENTER;
        assert_eq!(classify(blocked, Io), ThreadState::Blocked);
    }

    #[test]
    fn builtin_io_globs_name_socket_file_and_nio_natives() {
        let f = ClassFilter::new(BUILTIN_IO.iter().copied()).expect("valid globs");
        for m in [
            "java.net.SocketInputStream.socketRead0",
            "sun.nio.ch.SocketDispatcher.read0",
            "sun.nio.ch.Net.poll",
            "sun.nio.ch.EPoll.wait",
            "java.io.FileInputStream.readBytes",
        ] {
            assert!(f.matches(m), "{m}");
        }
        assert!(!f.matches("java.lang.Object.wait"));
        assert!(!f.matches("sun.nio.ch.Net.pollin"));
    }

    #[test]
    fn builtin_wait_globs_name_the_jdk_service_threads_natives() {
        let f = ClassFilter::new(BUILTIN_WAIT.iter().copied()).expect("valid globs");
        assert!(f.matches("java.lang.ref.Reference.waitForReferencePendingList"));
        assert!(f.matches("java.lang.ProcessHandleImpl.waitForProcessExit0"));
        assert!(!f.matches("java.lang.ref.Reference.processPendingReferences"));
        let io = ClassFilter::new(BUILTIN_IO.iter().copied()).expect("valid globs");
        assert!(BUILTIN_WAIT.iter().all(|m| !io.matches(m)));
    }
}
