//! The overhead budget (`budget=PERCENT`, on by default): the agent keeps
//! its own estimated cost under a share of the JVM's CPU time by demoting
//! the methods that cost most tracing for least information.
//!
//! Why this shape: a traced call costs the calling thread a calibrated,
//! nearly constant time (the CALIBRATION events), whatever the method
//! does, so a method of a few nanoseconds called a hundred million times a
//! second costs seconds of tracing per second and tells little that its
//! count does not. No per-call decision can avoid that cost, because the
//! probe itself is it; only taking the probe out of the method can. So:
//!
//! - every traced return adds one to its method's call counter and its
//!   elapsed time to the method's total ([`note`]: two relaxed loads and
//!   stores into a fixed table, racy by design — a lost update only blurs
//!   an estimate);
//! - a thread of its own (`vmview-budget`, a JVMTI agent thread) wakes
//!   every [`TICK`] ([`FAST_TICK`] early on and while over the budget),
//!   reads the table, the process's CPU time, the probe natives' time
//!   measured on the program's threads ([`crate::in_situ`]) and the CPU
//!   time of the writer and compiler threads ([`crate::own_cpu`]), and
//!   estimates the overhead as that tracing time over the CPU time the
//!   program itself used in the interval;
//! - over budget (after a warm-up, [`WARM_UP`], unless it is
//!   [`FAR_OVER`] times over, and once tracing has cost [`OVERDRAFT_NS`]
//!   in all), it demotes methods with the most calls first, among those
//!   that cost at least [`MIN_SHARE_BP`] of the program's time and average
//!   under [`LONG_CALL_NS`] (a call of 10 µs or more is never demoted:
//!   tracing it costs under 1 % of it), until the estimate is back under
//!   the budget with a margin — a method only when two ticks in a row
//!   choose it ([`confirm`]), with the second tick's estimates;
//! - each demotion is a DEMOTION event, stamped before its class is
//!   retransformed, and the class-file hook then gives the method only a
//!   counter (`Probe.counts[slot]++`, [`vmview_classfile::Hooks::Count`]):
//!   no JNI call, no time stamp;
//! - the counters are read every second into METHOD_COUNTS events (with
//!   the last estimate), and once more when the recording stops — once
//!   the budget had to act: a recording within its budget has no event
//!   of the budget's.
//!
//! In `mode=jvmti` (or without `can_retransform_classes`) nothing can be
//! demoted: the estimate is still made and reported. Decisions stop by
//! themselves once the estimate is under the budget.

use crate::agent::Agent;
use crate::buffers::Producer;
use crate::clock;
use crate::jvmti::Jni;
use crate::sys;
use rustc_hash::FxHashSet;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};
use vmview_classfile::Hooks;
use vmview_format::{Event, EventKind, MethodId, ThreadRef};
use vmview_options::CaptureMode;

/// Method ids tracked (the table is 16 bytes each): methods with larger
/// ids are traced but never demoted.
const TRACKED: usize = 1 << 17;
/// Counter slots of the probe's `counts` array (per JVM, never reused):
/// a method demoted past them is left uninstrumented, uncounted.
pub const COUNTER_SLOTS: usize = 1 << 14;
/// Array elements per slot: one slot per 64-byte cache line, so threads
/// counting different methods do not contend for a line (1 MiB in all).
const STRIDE: usize = 16;
/// How often the budget looks.
const TICK: Duration = Duration::from_millis(250);
/// How often it looks in the first [`FIRST_FOR`] of the recording and
/// while the estimate is over the budget: a program that runs at full
/// speed pays the whole trace until the first demotion, so the first ones
/// come early.
const FAST_TICK: Duration = Duration::from_millis(50);
const FIRST_FOR: Duration = Duration::from_secs(2);
/// No demotion this soon after the last one: retransformed classes run
/// interpreted until the JIT compiles them again, and the rates of those
/// moments are unlike the steady ones (each demotion is a
/// retransformation, a safepoint and a recompilation: fewer and bigger
/// is cheaper).
const SETTLE: Duration = Duration::from_millis(150);
/// METHOD_COUNTS about this often.
const REPORT_EVERY: Duration = Duration::from_secs(1);
/// No demotion before this much of the recording has passed, unless the
/// estimate is [`FAR_OVER`] times the budget: the JIT has not compiled the
/// program yet, and rates are unlike the steady ones.
const WARM_UP: Duration = Duration::from_secs(1);
/// An estimate this many times the budget demotes before the warm-up
/// ends: such a program pays several times its own time for every moment
/// it is traced whole.
const FAR_OVER: u64 = 4;
/// No demotion before tracing is estimated to have cost this much CPU
/// time in all: a short run (a test, a quick look) is traced whole,
/// whatever its rate, since the most it pays is this.
const OVERDRAFT_NS: f64 = 250e6;
/// A method demoted must have cost at least this share of the program's
/// CPU time in the interval (basis points): rarer methods cost little
/// however short they are. (Floors of 40 000, 8 000 and 1 000 calls a
/// second were tried first: on H2 with `org.h2.*` the cost is spread over
/// hundreds of methods of a few thousand calls a second each, fewer still
/// on a loaded machine, where the program gets less of the CPU, and the
/// estimate stayed over the budget with nothing left to demote.)
const MIN_SHARE_BP: f64 = 10.0;
/// Calls averaging this long or longer are never demoted.
pub const LONG_CALL_NS: u64 = 10_000;
/// Assumed cost per traced call when no calibration was made (ns).
const DEFAULT_CALL_COST_PS: u64 = 100_000;
/// What the counter costs a call (ns), in the "after" estimate.
const COUNT_COST_NS: f64 = 1.0;
/// Demotions stop once the estimate is under this share of the budget.
const MARGIN: f64 = 0.8;
/// At most this many demotions per tick.
const MAX_PER_TICK: usize = 4096;

/// `counts` of the probe class (a global reference), once defined.
static COUNTERS: AtomicPtr<sys::_jobject> = AtomicPtr::new(std::ptr::null_mut());
/// The next free slot of [`COUNTERS`].
static NEXT_SLOT: AtomicU32 = AtomicU32::new(0);
/// No slot: demoted to nothing.
const NO_SLOT: u32 = u32::MAX;

#[derive(Default)]
struct MethodStat {
    calls: AtomicU32,
    total_ns: AtomicU64,
}

/// A demoted method, for the end-of-run report.
#[derive(Clone)]
pub struct Demoted {
    pub method: MethodId,
    pub slot: u32,
    pub rate_per_s: u64,
    pub mean_ns: u64,
    /// Calls counted since the demotion.
    pub counted: u64,
    /// Traced calls before it.
    pub traced: u64,
}

/// The budget's state in one recording (`Agent::budget`).
pub struct Budget {
    /// The budget in basis points; `None` when off or calls are not traced.
    limit_bp: Option<u32>,
    stats: Box<[MethodStat]>,
    /// Calibrated cost of a traced call (CALL + RETURN), picoseconds.
    cost_ps: AtomicU64,
    /// Calibrated cost of one JNI transition into a probe native and
    /// back, picoseconds.
    transition_ps: AtomicU64,
    any_demoted: AtomicBool,
    demoted: RwLock<HashMap<MethodId, u32>>,
    /// The last estimate, basis points.
    pub last_bp: AtomicU64,
    /// The highest estimate seen.
    pub peak_bp: AtomicU64,
    /// The estimate over the whole recording so far: all estimated
    /// tracing time over all the program's own CPU time.
    pub run_bp: AtomicU64,
    report: Mutex<Vec<Demoted>>,
    /// Whether the estimate ever passed the budget where nothing could be
    /// demoted (jvmti mode).
    could_not_demote: AtomicBool,
    thread: crate::agent_thread::AgentThread,
}

impl Budget {
    /// The budget of a recording with these options: a table only when it
    /// is on.
    pub fn new(limit_bp: Option<u32>) -> Budget {
        let stats = match limit_bp {
            Some(_) => (0..TRACKED).map(|_| MethodStat::default()).collect(),
            None => Box::default(),
        };
        Budget {
            limit_bp,
            stats,
            cost_ps: AtomicU64::new(0),
            transition_ps: AtomicU64::new(0),
            any_demoted: AtomicBool::new(false),
            demoted: RwLock::new(HashMap::new()),
            last_bp: AtomicU64::new(0),
            peak_bp: AtomicU64::new(0),
            run_bp: AtomicU64::new(0),
            report: Mutex::new(Vec::new()),
            could_not_demote: AtomicBool::new(false),
            thread: Default::default(),
        }
    }

    /// The calibration measured a traced call (CALL and RETURN) at `ps`.
    pub fn set_call_cost(&self, ps: u64) {
        self.cost_ps.store(ps, Ordering::Relaxed);
    }

    /// The calibration measured a JNI transition into a probe native and
    /// back at `ps`.
    pub fn set_transition_cost(&self, ps: u64) {
        self.transition_ps.store(ps, Ordering::Relaxed);
    }
}

/// Called at every traced return with the call's elapsed time. Cheap: a
/// bounds check on an empty table when the budget is off.
#[inline]
pub fn note(agent: &crate::recording::Recording, method: MethodId, elapsed_ns: u64) {
    if let Some(s) = agent.budget.stats.get(method.0 as usize) {
        s.calls.store(
            s.calls.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );
        s.total_ns.store(
            s.total_ns.load(Ordering::Relaxed).wrapping_add(elapsed_ns),
            Ordering::Relaxed,
        );
    }
}

/// The hooks the class-file hook gives method `id`: traced, counted, or
/// (`None`) nothing.
pub fn hooks_for(agent: &crate::recording::Recording, id: MethodId) -> Option<Hooks> {
    let b = &agent.budget;
    if !b.any_demoted.load(Ordering::Acquire) {
        return Some(Hooks::Trace(id.0));
    }
    let slot = b
        .demoted
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&id)
        .copied();
    match slot {
        None => Some(Hooks::Trace(id.0)),
        Some(NO_SLOT) => None,
        Some(slot) => Some(Hooks::Count {
            id: id.0,
            slot: slot * STRIDE as u32,
        }),
    }
}

/// Allocates the probe class's counters (once per JVM, when the probe is
/// defined). Without them demoted methods get no hooks at all.
pub fn install_counters(jni: Jni, probe_class: sys::jclass) {
    let (name, _) = vmview_classfile::probe::COUNTS_FIELD;
    let Ok(name) = std::ffi::CString::new(name) else {
        return;
    };
    let len = (COUNTER_SLOTS * STRIDE) as i32;
    if let Some(array) = jni.new_static_int_array(probe_class, &name, len) {
        COUNTERS.store(array, Ordering::Release);
    }
}

/// Whether the recording runs the budget's thread: it is on and calls
/// are traced.
pub fn wanted(agent: &Agent, calls: bool) -> bool {
    calls && agent.budget.limit_bp.is_some()
}

/// Whether demotion is possible: bytecode instrumentation that may
/// retransform classes.
fn can_demote(agent: &Agent) -> bool {
    agent.options.mode == CaptureMode::Bci
        && agent
            .jvmti
            .capabilities()
            .is_ok_and(|c| c.can_retransform_classes() != 0)
}

/// Starts the budget's thread (at VMInit, after the calibration).
pub fn start(agent: &'static Agent, jni: Jni) {
    agent
        .budget
        .thread
        .start(agent, jni, c"vmview-budget", "overhead budget", budget_main);
}

/// Stops the thread and waits (bounded) until it wrote its last
/// METHOD_COUNTS: call before the writer's last drain.
pub fn stop(agent: &Agent) {
    agent.budget.thread.stop(Duration::from_secs(5));
}

unsafe extern "C" fn budget_main(
    _jvmti: *mut sys::jvmtiEnv,
    jni: *mut sys::JNIEnv,
    arg: *mut std::ffi::c_void,
) {
    // SAFETY: `arg` is the `&'static Agent` `start` passed (agents are
    // never freed).
    let Some(agent) = (unsafe { arg.cast::<Agent>().cast_const().as_ref() }) else {
        return;
    };
    crate::agent::guard("budget thread", || {
        if !jni.is_null() {
            // SAFETY: the JVM hands the agent thread its own JNIEnv.
            let jni = unsafe { Jni::new(jni) };
            Loop::new(agent).run(jni);
        }
    });
    agent.budget.thread.exited();
}

/// The process's CPU time, ns (every thread, user + system).
fn process_cpu_ns() -> u64 {
    clock::clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID).unwrap_or(0)
}

/// The estimated overhead of `tracing_ns` of tracer time in an interval
/// where the process used `cpu_ns`, in basis points of the program's own
/// share (the rest); never divided by less than 5 % of the interval's CPU.
pub fn overhead_bp(tracing_ns: f64, cpu_ns: f64) -> u64 {
    let program = (cpu_ns - tracing_ns).max(cpu_ns / 20.0).max(1.0);
    (tracing_ns / program * 10_000.0).round().max(0.0) as u64
}

/// The compiler threads' share of the tracing time: their `compilers_ns`
/// in an interval where the process used `cpu_ns`, the agent's writers
/// `writers_ns` and the probes `probes_ns` on the program's threads, in
/// the probes' share of those threads' time. Compiled code of traced
/// methods is bigger and calls the probe, and a demotion makes the JIT
/// compile its class again; the compilers' extra time cannot be told from
/// the time they would have taken anyway, so it is attributed: when the
/// probes take most of the program's threads, most of what the JIT does
/// is compiling them.
pub fn jit_share(compilers_ns: f64, probes_ns: f64, cpu_ns: f64, writers_ns: f64) -> f64 {
    let threads_ns = (cpu_ns - compilers_ns - writers_ns).max(1.0);
    compilers_ns * (probes_ns / threads_ns).clamp(0.0, 1.0)
}

/// The methods of `chosen` that were chosen in the tick before too (in
/// `pending`); `pending` becomes this tick's choice. A demotion lasts for
/// the rest of the recording, so it is made on two intervals in a row,
/// not one: an interval that straddles a change of phase (the end of a
/// burst of long calls, the start of a hot loop) gives a method a share
/// of the cost that the next interval does not confirm, and a method hot
/// for one interval only (class loading, a warm-up burst) is not
/// demoted for it. It costs one more interval of tracing per decision.
pub fn confirm(pending: &mut FxHashSet<usize>, chosen: &[Choice]) -> FxHashSet<usize> {
    let now: FxHashSet<usize> = chosen.iter().map(|c| c.method).collect();
    let confirmed = now.intersection(pending).copied().collect();
    *pending = now;
    confirmed
}

/// One demotion chosen by [`choose`].
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub method: usize,
    pub calls: u64,
    pub mean_ns: u64,
    pub before_bp: u64,
    pub after_bp: u64,
}

/// The methods to demote, in order, given each method's calls and total
/// elapsed time in the interval (`calls[i]`, `total_ns[i]` for method id
/// `i`), the interval's process CPU time and the cost of one traced call.
/// Most calls first, shorter mean first among equals; never a method whose
/// calls average [`LONG_CALL_NS`] or more, or whose calls cost less than
/// [`MIN_SHARE_BP`] of the program's time; stops once the estimate is
/// under `MARGIN` of the budget.
pub fn choose(
    deltas: &[(usize, u64, u64)],
    cpu_ns: f64,
    cost_ns: f64,
    limit_bp: u32,
    skip: impl Fn(usize) -> bool,
) -> Vec<Choice> {
    let total_calls: u64 = deltas.iter().map(|d| d.1).sum();
    let mut tracing_ns = total_calls as f64 * cost_ns;
    let mut bp = overhead_bp(tracing_ns, cpu_ns);
    if bp <= u64::from(limit_bp) {
        return Vec::new();
    }
    let program_ns = (cpu_ns - tracing_ns).max(cpu_ns / 20.0);
    let min_calls = (program_ns * MIN_SHARE_BP / 10_000.0 / cost_ns.max(1.0))
        .ceil()
        .max(1.0) as u64;
    let mut candidates: Vec<(usize, u64, u64)> = deltas
        .iter()
        .filter(|(m, calls, total)| {
            *calls >= min_calls && total / calls < LONG_CALL_NS && !skip(*m)
        })
        .map(|&(m, calls, total)| (m, calls, total / calls))
        .collect();
    candidates.sort_by(|a, b| b.1.cmp(&a.1).then(a.2.cmp(&b.2)).then(a.0.cmp(&b.0)));
    let target = f64::from(limit_bp) * MARGIN;
    let mut out = Vec::new();
    for (m, calls, mean_ns) in candidates.into_iter().take(MAX_PER_TICK) {
        if (bp as f64) <= target {
            break;
        }
        let saved = calls as f64 * (cost_ns - COUNT_COST_NS).max(0.0);
        tracing_ns = (tracing_ns - saved).max(0.0);
        let after = overhead_bp(tracing_ns, cpu_ns);
        out.push(Choice {
            method: m,
            calls,
            mean_ns,
            before_bp: bp,
            after_bp: after,
        });
        bp = after;
    }
    out
}

struct Loop {
    agent: &'static Agent,
    buffer: Producer,
    me: Option<ThreadRef>,
    prev_calls: Vec<u32>,
    prev_ns: Vec<u64>,
    prev_cpu: u64,
    prev_at: Instant,
    started: Instant,
    last_report: Instant,
    /// When the last demotion was applied.
    last_demotion: Option<Instant>,
    /// Per demoted slot: the counter's last value and the running total.
    counters: Vec<(u32, i32, u64)>,
    scratch: Vec<i32>,
    demote: bool,
    /// Estimated tracing time so far, ns.
    spent_ns: f64,
    /// The program's own CPU time so far (the process's, less the
    /// estimated tracing time), ns.
    program_ns: f64,
    /// The agent's writer threads' CPU time.
    writers: crate::own_cpu::OwnCpu,
    prev_writers_ns: u64,
    /// The JIT compiler threads' CPU time.
    compilers: crate::own_cpu::OwnCpu,
    prev_compilers_ns: u64,
    /// The probe natives' time and calls measured in the program's
    /// threads (`in_situ`), at the last tick.
    prev_in_situ: (u64, u64),
    /// This thread's own CPU clock at the last tick: the budget's work,
    /// the retransformations it asks for (the class-file hook runs on the
    /// thread that calls RetransformClasses) included. Counted in the
    /// whole-run estimate only: demoting a method does not save it.
    prev_own_ns: u64,
    /// Whether the budget ever had to act (or would have, in jvmti mode):
    /// only then are METHOD_COUNTS written, so a recording within its
    /// budget has no event of the budget's.
    engaged: bool,
    /// The methods the last over-budget tick chose, demoted if the next
    /// one chooses them again ([`confirm`]).
    pending: FxHashSet<usize>,
}

impl Loop {
    fn new(agent: &'static Agent) -> Loop {
        let mut writers = crate::own_cpu::OwnCpu::writers();
        let mut compilers = crate::own_cpu::OwnCpu::compilers();
        Loop {
            agent,
            buffer: agent.buffers.register(),
            me: None,
            prev_calls: vec![0; TRACKED],
            prev_ns: vec![0; TRACKED],
            prev_cpu: process_cpu_ns(),
            prev_at: Instant::now(),
            started: Instant::now(),
            last_report: Instant::now(),
            last_demotion: None,
            counters: Vec::new(),
            scratch: Vec::new(),
            demote: can_demote(agent),
            spent_ns: 0.0,
            program_ns: 0.0,
            prev_writers_ns: writers.total_ns(),
            writers,
            prev_compilers_ns: compilers.total_ns(),
            compilers,
            prev_in_situ: crate::in_situ::totals(),
            prev_own_ns: crate::metrics::thread_cpu_ns(),
            engaged: false,
            pending: FxHashSet::default(),
        }
    }

    fn run(&mut self, jni: Jni) {
        loop {
            let over = self.demote
                && self.agent.budget.last_bp.load(Ordering::Relaxed)
                    > self.agent.budget.limit_bp.map_or(u64::MAX, u64::from);
            let tick = if over || self.started.elapsed() < FIRST_FOR {
                FAST_TICK
            } else {
                TICK
            };
            let stopping = self.wait(tick);
            if stopping || !self.agent.is_live() {
                self.read_counters(jni);
                self.report(jni);
                return;
            }
            jni.with_local_frame(64, || self.tick(jni));
        }
    }

    /// Waits `d` or until asked to stop; true when stopping.
    fn wait(&self, d: Duration) -> bool {
        self.agent.budget.thread.wait_until(Instant::now() + d)
    }

    fn own_thread(&mut self, jni: Jni) -> ThreadRef {
        let agent = self.agent;
        *self
            .me
            .get_or_insert_with(|| match agent.jvmti.current_thread(jni) {
                Ok(t) if !t.is_null() => agent.threads.thread_ref(agent, jni, t.get()),
                _ => agent.threads.vm_thread_ref(agent),
            })
    }

    fn push(&mut self, jni: Jni, time_ns: u64, kind: EventKind) {
        let thread = self.own_thread(jni);
        self.agent.buffers.push(
            &mut self.buffer,
            Event {
                id: 0,
                time_ns,
                thread,
                kind,
            },
        );
    }

    /// The estimated tracing time of the interval since the last tick, ns,
    /// for `calls` traced calls.
    fn tracing_ns(&mut self, calls: u64, cpu_ns: f64) -> f64 {
        let b = &self.agent.budget;
        let cost_ps = match b.cost_ps.load(Ordering::Relaxed) {
            0 => DEFAULT_CALL_COST_PS,
            c => c,
        };
        let calibrated_ns = calls as f64 * cost_ps as f64 / 1000.0;
        // The natives' time measured in the program's threads, and the
        // calibrated transitions into them and back.
        let (in_ns, natives) = crate::in_situ::totals();
        let (prev_ns, prev_natives) = std::mem::replace(&mut self.prev_in_situ, (in_ns, natives));
        let in_ns = in_ns.saturating_sub(prev_ns) as f64;
        let natives = natives.saturating_sub(prev_natives) as f64;
        let transition_ns = b.transition_ps.load(Ordering::Relaxed) as f64 / 1000.0;
        let measured_ns = in_ns + natives * transition_ns;
        let probes_ns = measured_ns.max(calibrated_ns);
        // The agent's own threads (the writer above all) work for the
        // traced calls: their measured CPU time is spread over the calls
        // of the interval, so that demoting a method also saves its share.
        let writers = self.writers.total_ns();
        let writers_ns = writers.saturating_sub(self.prev_writers_ns) as f64;
        self.prev_writers_ns = writers;
        let compilers = self.compilers.total_ns();
        let compilers_ns = compilers.saturating_sub(self.prev_compilers_ns) as f64;
        self.prev_compilers_ns = compilers;
        probes_ns + writers_ns + jit_share(compilers_ns, probes_ns, cpu_ns, writers_ns)
    }

    fn tick(&mut self, jni: Jni) {
        let agent = self.agent;
        let b = &agent.budget;
        let Some(limit_bp) = b.limit_bp else { return };
        let cpu = process_cpu_ns();
        let cpu_ns = cpu.saturating_sub(self.prev_cpu) as f64;
        self.prev_cpu = cpu;
        let secs = self.prev_at.elapsed().as_secs_f64().max(1e-3);
        self.prev_at = Instant::now();
        let mut deltas = Vec::new();
        for (i, s) in b.stats.iter().enumerate() {
            let calls = s.calls.load(Ordering::Relaxed);
            let ns = s.total_ns.load(Ordering::Relaxed);
            let dc = calls.wrapping_sub(self.prev_calls[i]);
            if dc != 0 {
                deltas.push((i, u64::from(dc), ns.wrapping_sub(self.prev_ns[i])));
            }
            self.prev_calls[i] = calls;
            self.prev_ns[i] = ns;
        }
        let total: u64 = deltas.iter().map(|d| d.1).sum();
        let tracing_ns = self.tracing_ns(total, cpu_ns);
        let cost_ns = tracing_ns / (total.max(1) as f64);
        let bp = overhead_bp(tracing_ns, cpu_ns);
        let own = crate::metrics::thread_cpu_ns();
        let own_ns = own.saturating_sub(self.prev_own_ns) as f64;
        self.prev_own_ns = own;
        self.spent_ns += tracing_ns + own_ns;
        self.program_ns += (cpu_ns - tracing_ns - own_ns).max(0.0);
        b.last_bp.store(bp, Ordering::Relaxed);
        b.run_bp.store(
            overhead_bp(self.spent_ns, self.spent_ns + self.program_ns),
            Ordering::Relaxed,
        );
        b.peak_bp.fetch_max(bp, Ordering::Relaxed);
        let over = bp > u64::from(limit_bp)
            && self.spent_ns >= OVERDRAFT_NS
            && (self.started.elapsed() >= WARM_UP || bp >= u64::from(limit_bp) * FAR_OVER);
        self.engaged |= over;
        let settled = self.last_demotion.is_none_or(|t| t.elapsed() >= SETTLE);
        if over && !self.demote {
            b.could_not_demote.store(true, Ordering::Relaxed);
        } else if over && settled {
            let calibration = crate::calibrate::CALIBRATION_METHOD.0 as usize;
            let choices = {
                let demoted = b.demoted.read().unwrap_or_else(|e| e.into_inner());
                let skip = |m: usize| m == calibration || demoted.contains_key(&MethodId(m as u32));
                let chosen = choose(&deltas, cpu_ns, cost_ns, limit_bp, skip);
                let confirmed = confirm(&mut self.pending, &chosen);
                if confirmed.is_empty() {
                    Vec::new()
                } else {
                    // The estimates of the confirmed ones alone: a method
                    // chosen last tick but not now is not demoted.
                    choose(&deltas, cpu_ns, cost_ns, limit_bp, |m| {
                        skip(m) || !confirmed.contains(&m)
                    })
                }
            };
            if !choices.is_empty() {
                self.apply(jni, &choices, secs);
                self.last_demotion = Some(Instant::now());
                self.pending.clear();
            }
        } else if !over {
            self.pending.clear();
        }
        if self.last_report.elapsed() >= REPORT_EVERY {
            self.last_report = Instant::now();
            self.read_counters(jni);
            self.report(jni);
        }
    }

    /// Demotes the chosen methods: publishes them for the class-file hook,
    /// writes their DEMOTION events, retransforms their classes.
    fn apply(&mut self, jni: Jni, choices: &[Choice], secs: f64) {
        let agent = self.agent;
        let b = &agent.budget;
        let time = clock::now_ns();
        let mut classes: Vec<String> = Vec::new();
        let mut fresh = Vec::new();
        {
            let mut map = b.demoted.write().unwrap_or_else(|e| e.into_inner());
            for c in choices {
                let id = MethodId(c.method as u32);
                let has_counters = !COUNTERS.load(Ordering::Acquire).is_null();
                let slot = if has_counters {
                    let s = NEXT_SLOT.fetch_add(1, Ordering::Relaxed);
                    if (s as usize) < COUNTER_SLOTS {
                        s
                    } else {
                        NO_SLOT
                    }
                } else {
                    NO_SLOT
                };
                map.insert(id, slot);
                fresh.push((id, slot, c));
                if let Some((class, _, _)) = agent.symbols.method_names(id) {
                    if !classes.contains(&class) {
                        classes.push(class);
                    }
                }
            }
            b.any_demoted.store(true, Ordering::Release);
        }
        for (id, slot, c) in &fresh {
            let rate = (c.calls as f64 / secs).round() as u64;
            self.push(
                jni,
                time,
                EventKind::Demotion {
                    method: *id,
                    rate_per_s: rate,
                    mean_ns: c.mean_ns,
                    before_bp: c.before_bp,
                    after_bp: c.after_bp,
                    counted: *slot != NO_SLOT,
                },
            );
            if *slot != NO_SLOT {
                self.counters.push((*slot, 0, 0));
            }
            let traced = agent
                .budget
                .stats
                .get(id.0 as usize)
                .map_or(0, |s| u64::from(s.calls.load(Ordering::Relaxed)));
            b.report
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Demoted {
                    method: *id,
                    slot: *slot,
                    rate_per_s: rate,
                    mean_ns: c.mean_ns,
                    counted: 0,
                    traced,
                });
        }
        if let Err(e) = retransform(agent, jni, &classes) {
            agent
                .problems
                .capture(|| format!("the overhead budget could not re-instrument a class: {e}"));
        }
    }

    /// Reads the counters of the demoted methods into their totals.
    fn read_counters(&mut self, jni: Jni) {
        let array = COUNTERS.load(Ordering::Acquire);
        if array.is_null() || self.counters.is_empty() {
            return;
        }
        let used = (NEXT_SLOT.load(Ordering::Relaxed) as usize).min(COUNTER_SLOTS);
        self.scratch.resize(used * STRIDE, 0);
        jni.int_array_region(array, &mut self.scratch);
        for (slot, last, total) in &mut self.counters {
            if let Some(&now) = self.scratch.get(*slot as usize * STRIDE) {
                *total += u64::from((now as u32).wrapping_sub(*last as u32));
                *last = now;
            }
        }
    }

    /// Writes METHOD_COUNTS: the estimate and the counted totals.
    fn report(&mut self, jni: Jni) {
        if !self.engaged {
            return;
        }
        let b = &self.agent.budget;
        let by_slot: HashMap<u32, u64> = self.counters.iter().map(|c| (c.0, c.2)).collect();
        let counts: Vec<(MethodId, u64)> = {
            let mut r = b.report.lock().unwrap_or_else(|e| e.into_inner());
            for d in r.iter_mut() {
                if let Some(&n) = by_slot.get(&d.slot) {
                    d.counted = n;
                }
            }
            r.iter()
                .filter(|d| d.slot != NO_SLOT)
                .map(|d| (d.method, d.counted))
                .collect()
        };
        let overhead_bp = b.run_bp.load(Ordering::Relaxed);
        self.push(
            jni,
            clock::now_ns(),
            EventKind::MethodCounts {
                overhead_bp,
                counts,
            },
        );
    }
}

/// Retransforms the loaded classes named `dotted` (every loader's).
fn retransform(agent: &Agent, jni: Jni, dotted: &[String]) -> Result<(), String> {
    if dotted.is_empty() {
        return Ok(());
    }
    let wanted: Vec<String> = dotted
        .iter()
        .map(|d| format!("L{};", d.replace('.', "/")))
        .collect();
    jni.with_local_frame(65_536, || {
        let loaded = agent.jvmti.loaded_classes(jni).map_err(|e| e.to_string())?;
        let mut found = Vec::new();
        for class in &loaded {
            let Ok(sig) = agent.jvmti.class_signature(class.get()) else {
                continue;
            };
            if wanted.contains(&sig) && agent.jvmti.is_modifiable_class(class.get()) {
                found.push(class.get());
            }
        }
        if found.is_empty() {
            return Ok(());
        }
        agent
            .jvmti
            .retransform_classes(&found)
            .map_err(|e| e.to_string())
    })
}

/// One line for `vmview attach PID status`: the budget, the last
/// estimate and the methods demoted; `None` when the budget is off.
pub fn status(agent: &Agent) -> Option<String> {
    let b = &agent.budget;
    let limit = b.limit_bp?;
    let demoted = b.report.lock().map_or(0, |r| r.len());
    Some(format!(
        "{:.1}% (estimated overhead {:.1}%, {demoted} methods demoted)",
        f64::from(limit) / 100.0,
        b.last_bp.load(Ordering::Relaxed) as f64 / 100.0
    ))
}

/// The end-of-run lines: what was demoted and how to keep it, or that
/// nothing could be.
pub fn summary(agent: &Agent) -> Vec<String> {
    let b = &agent.budget;
    let Some(limit) = b.limit_bp else {
        return Vec::new();
    };
    let pct = |bp: u64| format!("{:.1}%", bp as f64 / 100.0);
    let mut lines = Vec::new();
    if b.could_not_demote.load(Ordering::Relaxed) {
        lines.push(format!(
            "budget: the estimated tracing overhead reached {} (budget {}), but {} cannot demote methods: everything was traced (mode=bci can; or trace fewer classes)",
            pct(b.peak_bp.load(Ordering::Relaxed)),
            pct(u64::from(limit)),
            if agent.options.mode == CaptureMode::Jvmti {
                "mode=jvmti"
            } else {
                "this JVM (no can_retransform_classes)"
            }
        ));
    }
    let mut demoted = b.report.lock().map(|r| r.clone()).unwrap_or_default();
    if demoted.is_empty() {
        return lines;
    }
    demoted.sort_by_key(|d| std::cmp::Reverse(d.counted + d.traced));
    lines.push(format!(
        "budget: {} method{} demoted to keep the estimated overhead under {} (it reached {}); their later calls were counted, not traced:",
        demoted.len(),
        if demoted.len() == 1 { " was" } else { "s were" },
        pct(u64::from(limit)),
        pct(b.peak_bp.load(Ordering::Relaxed)),
    ));
    const SHOWN: usize = 5;
    let mut first = None;
    for d in demoted.iter().take(SHOWN) {
        let name = agent
            .symbols
            .method_names(d.method)
            .map(|(c, n, s)| (format!("{c}.{n}"), s));
        let (name, sig) = name.unwrap_or_else(|| (format!("method#{}", d.method.0), String::new()));
        first.get_or_insert_with(|| name.clone());
        let counted = if d.slot == NO_SLOT {
            "not counted".to_string()
        } else {
            format!("{} counted", d.counted)
        };
        lines.push(format!(
            "  {name}{sig}: {} traced, then {counted} ({}/s, {} ns each)",
            d.traced, d.rate_per_s, d.mean_ns
        ));
    }
    if demoted.len() > SHOWN {
        lines.push(format!(
            "  and {} more (DEMOTION events in the trace)",
            demoted.len() - SHOWN
        ));
    }
    lines.push(format!(
        "  to trace them all: --budget off; to drop one: --exclude '{}'; or trace fewer methods with a narrower --classes",
        first.unwrap_or_default()
    ));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overhead_is_tracing_time_over_the_programs_own_cpu() {
        // 100 ms of tracing in 1.1 s of CPU: 10 % of the program's 1 s.
        assert_eq!(overhead_bp(100e6, 1.1e9), 1_000);
        // The tracer's estimate above the CPU used: bounded, not infinite.
        assert_eq!(overhead_bp(2e9, 1e9), 400_000);
        assert_eq!(overhead_bp(0.0, 0.0), 0);
    }

    #[test]
    fn the_busiest_short_methods_are_demoted_until_under_the_budget() {
        // Method 1: 1M calls of 5 ns; 2: 500k of 20 ns; 3: 200k of 50 µs
        // (long: never); 4: 200 (rare: never). 100 ns a call, 1 s of CPU.
        let deltas = [
            (1, 1_000_000, 5_000_000),
            (2, 500_000, 10_000_000),
            (3, 200_000, 10_000_000_000),
            (4, 200, 1_000),
        ];
        // 170.5 ms of tracing: 20.5 % of the program's 829.5 ms. Under a
        // 10 % budget demoting 1 is enough (7.7 %, under 80 % of it); under
        // 5 %, 2 goes too (2.2 %).
        let ids = |limit| -> Vec<usize> {
            choose(&deltas, 1e9, 100.0, limit, |_| false)
                .iter()
                .map(|c| c.method)
                .collect()
        };
        assert_eq!(ids(1_000), vec![1]);
        assert_eq!(ids(500), vec![1, 2]);
        let chosen = choose(&deltas, 1e9, 100.0, 500, |_| false);
        assert!(chosen[0].before_bp > chosen[0].after_bp);
        assert_eq!(chosen[1].before_bp, chosen[0].after_bp);
        assert_eq!(chosen[0].mean_ns, 5);
        // Under budget: nothing.
        assert!(choose(&deltas, 1e12, 100.0, 1_000, |_| false).is_empty());
        // Already demoted ones are skipped.
        let again = choose(&deltas, 1e9, 100.0, 1_000, |m| m == 1);
        assert_eq!(again.first().map(|c| c.method), Some(2));
    }

    #[test]
    fn the_compilers_time_is_shared_as_the_probes_share_the_programs_threads() {
        // 1 s of process CPU: 200 ms compiling, 100 ms writing, the probes
        // 350 ms of the other 700 ms: half the compilers' time is theirs.
        assert_eq!(jit_share(200e6, 350e6, 1e9, 100e6), 100e6);
        // No probes, none of it; probes beyond the threads' time, all.
        assert_eq!(jit_share(200e6, 0.0, 1e9, 0.0), 0.0);
        assert_eq!(jit_share(200e6, 2e9, 1e9, 0.0), 200e6);
        assert_eq!(jit_share(0.0, 0.0, 0.0, 0.0), 0.0);
    }

    #[test]
    fn a_method_is_demoted_only_when_two_ticks_in_a_row_choose_it() {
        let pick = |ids: &[usize]| -> Vec<Choice> {
            ids.iter()
                .map(|&m| Choice {
                    method: m,
                    calls: 1,
                    mean_ns: 1,
                    before_bp: 2,
                    after_bp: 1,
                })
                .collect()
        };
        let mut pending = FxHashSet::default();
        assert!(confirm(&mut pending, &pick(&[1, 2])).is_empty());
        let got = confirm(&mut pending, &pick(&[2, 3]));
        assert_eq!(got.into_iter().collect::<Vec<_>>(), vec![2]);
        // Only the tick just before counts: 1 (two ticks ago) is not
        // confirmed, 3 (just before) is.
        let mut got: Vec<_> = confirm(&mut pending, &pick(&[1, 3])).into_iter().collect();
        got.sort();
        assert_eq!(got, vec![3]);
        assert!(confirm(&mut pending, &[]).is_empty());
        assert!(pending.is_empty());
    }

    #[test]
    fn calls_of_ten_microseconds_or_more_are_never_demoted() {
        let deltas = [(7, 1_000_000, 1_000_000 * LONG_CALL_NS)];
        assert!(choose(&deltas, 1e6, 100.0, 1, |_| false).is_empty());
        let deltas = [(7, 1_000_000, 1_000_000 * (LONG_CALL_NS - 1))];
        assert_eq!(choose(&deltas, 1e6, 100.0, 1, |_| false).len(), 1);
    }
}
