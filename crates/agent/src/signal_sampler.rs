//! Stack samples without a safepoint (`sampler=signal`, the default, and
//! `sampler=cpu`): the sampled thread walks its own stack in a signal
//! handler with HotSpot's exported `AsyncGetCallTrace`, where it stands,
//! instead of waiting for a safepoint poll.
//!
//! Why this shape: `GetAllStackTraces` stops every thread at a safepoint,
//! so each sample lands on a poll the JIT placed (never inside inlined
//! code) and each tick pauses the JVM. A signal interrupts the thread at
//! the instruction it runs, and `AsyncGetCallTrace` (the walker JFR's
//! predecessor and async-profiler use) maps that pc to the Java frames,
//! inlined ones included, with their bytecode index.
//!
//! * **Wall** (`signal`): each interval the sampler thread lists the
//!   threads (`GetAllThreads`), reads each one's JVMTI state (no
//!   safepoint), and sends SIGPROF to it with `tgkill`; when there are
//!   more than [`WALL_THREADS`], a rotating subset, as async-profiler's
//!   wall mode does. A thread blocked in a system call walks from its last
//!   Java frame. The state comes from the sampler thread, never the
//!   handler.
//! * **CPU** (`cpu`): a POSIX timer per thread on the thread's own CPU
//!   clock (`timer_create` with `SIGEV_THREAD_ID`) fires SIGPROF into the
//!   thread after every `interval` of CPU time it used.
//!
//! The handler is async-signal-safe: no allocation, no lock, no panic. It
//! gets the thread's `JNIEnv` from `JavaVM::GetEnv` (a thread-local read),
//! claims a free slot of a preallocated ring ([`RING`]) with one CAS,
//! lets `AsyncGetCallTrace` write the frames into it and publishes it; the
//! sampler thread drains the ring every tick and resolves the jmethodIDs.
//! `AsyncGetCallTrace` names only methods that have a jmethodID, which
//! HotSpot creates lazily, so every prepared class gets its ids (the
//! JVMTI ClassPrepare event and one pass over the loaded classes,
//! async-profiler's warm-up), and ClassLoad is enabled, without which it
//! refuses to walk.
//!
//! A walk that fails is a dropped sample, counted by the error code
//! `AsyncGetCallTrace` returns (GC active, not walkable, deoptimizing …).
//! No SIGSEGV guard is installed around the walk: HotSpot owns SIGSEGV
//! (implicit null checks, stack banging, safepoint polls) and chaining
//! in front of it is only sound through libjsig; since JDK 17 the
//! HotSpot walker reports the unwalkable cases through those codes.
//! The handler stays installed after a recording (a late signal must not
//! hit SIGPROF's default action, which kills the process) and does
//! nothing while no recording samples.

use crate::agent::Agent;
use crate::jvmti::{Jni, LocalRef};
use crate::sys;
use rustc_hash::FxHashMap as HashMap;
use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};
use vmview_options::{AgentOptions, EventGroup, SamplerKind};

/// Deepest walk; the same cut as the safepoint sampler's.
const DEPTH: usize = crate::sampler::MAX_DEPTH as usize;
/// Slots of the ring: samples taken but not yet drained.
const SLOTS: usize = 256;
/// Most threads signalled per wall tick.
pub const WALL_THREADS: usize = 32;
/// The longest a wall tick waits for the signalled threads to answer. A
/// thread that answers later is dropped (its state would be stale).
const ANSWER_WAIT: Duration = Duration::from_millis(50);
const SIGNAL: c_int = libc::SIGPROF;
/// A wall request unanswered this long is taken as lost (at least ten
/// intervals): its thread is signalled again.
const LOST_AFTER: Duration = Duration::from_secs(1);

/// The answer of a thread without a JNIEnv (not `AsyncGetCallTrace`'s).
const NOT_JAVA: i32 = -100;

const FREE: u8 = 0;
const WRITING: u8 = 1;
const READY: u8 = 2;

#[repr(C)]
#[derive(Clone, Copy)]
struct CallFrame {
    /// The bytecode index, or negative (-3: a native method).
    lineno: i32,
    method: sys::jmethodID,
}

#[repr(C)]
struct CallTrace {
    env: *mut sys::JNIEnv,
    /// Frames written, or an error code (<= 0).
    num_frames: i32,
    frames: *mut CallFrame,
}

type Agct = unsafe extern "C" fn(*mut CallTrace, c_int, *mut c_void);

/// One sample between the handler that took it and the sampler thread.
struct Slot {
    state: AtomicU8,
    tid: AtomicI32,
    cpu: AtomicBool,
    time: AtomicU64,
    /// The walking thread's CPU time when its walk ended.
    thread_cpu: AtomicU64,
    count: AtomicI32,
    /// The interrupted pc (0: not known), for the frames' types
    /// ([`crate::code_table`]).
    pc: AtomicUsize,
    frames: UnsafeCell<[CallFrame; DEPTH]>,
}

// SAFETY: `frames` is written only by the handler that moved `state` from
// FREE to WRITING and read only by the sampler after it saw READY.
unsafe impl Sync for Slot {}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_SLOT: Slot = Slot {
    state: AtomicU8::new(FREE),
    tid: AtomicI32::new(0),
    cpu: AtomicBool::new(false),
    time: AtomicU64::new(0),
    thread_cpu: AtomicU64::new(0),
    count: AtomicI32::new(0),
    pc: AtomicUsize::new(0),
    frames: UnsafeCell::new(
        [CallFrame {
            lineno: 0,
            method: std::ptr::null_mut(),
        }; DEPTH],
    ),
};

static RING: [Slot; SLOTS] = [EMPTY_SLOT; SLOTS];
/// Wall answers the sampler thread still waits for in this tick: each
/// wall handler takes one off and the last wakes the sampler (a futex
/// word), so that a tick sleeps once instead of polling the ring.
static PENDING: AtomicI32 = AtomicI32::new(0);
static NEXT_SLOT: AtomicU64 = AtomicU64::new(0);
/// Whether a recording samples now: the handler does nothing otherwise.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Whether ClassPrepare gives new classes their jmethodIDs: from before
/// the warm-up pass to the end of the recording, so that a class prepared
/// while the pass runs is not missed by both.
static MAKE_IDS: AtomicBool = AtomicBool::new(false);
/// The shortest time between two passes over the loaded classes made
/// because walks named methods without a jmethodID.
const HEAL_EVERY: Duration = Duration::from_secs(1);
static AGCT: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static VM: AtomicPtr<sys::JavaVM> = AtomicPtr::new(std::ptr::null_mut());
/// Samples lost because every slot was taken.
static RING_FULL: AtomicU64 = AtomicU64::new(0);
/// The outcome of the one-time set-up: the handler installed, or why not.
static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
/// `Thread::_osthread` and `OSThread::_thread_id`, from `gHotSpotVMStructs`.
static OFFSETS: OnceLock<(usize, usize)> = OnceLock::new();

/// What the recording's sampler is, decided when it is created: written
/// to the trace header as `sampler`.
pub fn choose(options: &AgentOptions) -> (&'static str, Option<String>) {
    if !options.events.contains(EventGroup::Samples) {
        return ("none", None);
    }
    let wanted = match options.sampler {
        SamplerKind::Safepoint => return ("safepoint", None),
        SamplerKind::Signal => "signal",
        SamplerKind::Cpu => "cpu",
    };
    match INSTALLED.get_or_init(install) {
        Ok(()) => (wanted, None),
        Err(why) => (
            "safepoint",
            Some(format!("sampler={wanted} unavailable: {why}")),
        ),
    }
}

/// Whether the current options sample with signals (after [`choose`]).
pub fn in_use(options: &AgentOptions) -> bool {
    options.events.contains(EventGroup::Samples)
        && options.sampler != SamplerKind::Safepoint
        && matches!(INSTALLED.get(), Some(Ok(())))
}

/// Finds `AsyncGetCallTrace` and installs the SIGPROF handler, once.
fn install() -> Result<(), String> {
    // SAFETY: dlsym with RTLD_DEFAULT only looks a symbol up.
    let agct = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"AsyncGetCallTrace".as_ptr()) };
    if agct.is_null() {
        return Err("this JVM exports no AsyncGetCallTrace".to_string());
    }
    let table = crate::metrics::VmStructs::find()
        .ok_or("this JVM exports no gHotSpotVMStructs (needed for thread ids)")?;
    let osthread = table
        .offset("Thread", "_osthread")
        .or_else(|| table.offset("JavaThread", "_osthread"))
        .ok_or("this JVM does not export Thread::_osthread")?;
    let thread_id = table
        .offset("OSThread", "_thread_id")
        .ok_or("this JVM does not export OSThread::_thread_id")?;
    let _ = OFFSETS.set((osthread, thread_id));
    debug_non_safepoints(&table);
    AGCT.store(agct, Ordering::Release);
    // SAFETY: sigaction with a zeroed struct, filled field by field; the
    // old action is only read.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(SIGNAL, std::ptr::null(), &mut old) != 0 {
            return Err("cannot read the SIGPROF action".to_string());
        }
        if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN {
            return Err(
                "SIGPROF already has a handler (another profiler in this JVM?)".to_string(),
            );
        }
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(SIGNAL, &sa, std::ptr::null_mut()) != 0 {
            return Err("cannot install the SIGPROF handler".to_string());
        }
    }
    Ok(())
}

/// Switches HotSpot's `DebugNonSafepoints` on, as async-profiler does:
/// without it the JIT records where each inlined method's code lies only
/// at safepoint polls and calls, so `AsyncGetCallTrace` maps a pc inside
/// inlined code to the nearest poll, in the caller, the very skew the
/// signal walk is there to avoid. Set while the agent loads, it holds for
/// every method compiled; attached later, for those compiled from then
/// on. The flag is found in HotSpot's own flag table (`JVMFlag::flags`),
/// and only a flag of that name and type `bool` is written.
fn debug_non_safepoints(table: &crate::metrics::VmStructs) {
    let flag = || -> Option<()> {
        let flags = table.static_address("JVMFlag", "flags")?;
        let count = table.static_address("JVMFlag", "numFlags")?;
        let name_at = table.offset("JVMFlag", "_name")?;
        let addr_at = table.offset("JVMFlag", "_addr")?;
        let size = crate::metrics::VmStructs::type_size("JVMFlag")?;
        // SAFETY: `flags` holds a `JVMFlag*` to `numFlags` entries of
        // `size` bytes, each with a C-string name and the flag's address.
        unsafe {
            let first = (flags as *const *const u8).read();
            let n = (count as *const usize).read();
            if first.is_null() || size == 0 || n > 10_000 {
                return None;
            }
            for i in 0..n {
                let entry = first.add(i * size);
                let name = (entry.add(name_at) as *const *const std::ffi::c_char).read();
                if name.is_null()
                    || std::ffi::CStr::from_ptr(name).to_bytes() != b"DebugNonSafepoints"
                {
                    continue;
                }
                let addr = (entry.add(addr_at) as *const *mut u8).read();
                if !addr.is_null() {
                    addr.write_volatile(1);
                }
                return Some(());
            }
        }
        None
    };
    let _ = flag();
}

/// The SIGPROF handler. Async-signal-safe: atomics, `GetEnv`, the walk.
unsafe extern "C" fn on_signal(_sig: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    // SAFETY: errno is this thread's; restored so that the interrupted
    // code sees its own.
    let errno = unsafe { libc::__errno_location() };
    let saved = unsafe { *errno };
    // SAFETY: `info` and `context` come from the kernel.
    unsafe { take_sample(info, context) };
    unsafe { *errno = saved };
}

unsafe fn take_sample(info: *mut libc::siginfo_t, context: *mut c_void) {
    if !ACTIVE.load(Ordering::Acquire) {
        return;
    }
    let agct = AGCT.load(Ordering::Acquire);
    let vm = VM.load(Ordering::Acquire);
    if agct.is_null() || vm.is_null() {
        return;
    }
    // SAFETY: `info` is the kernel's siginfo for this signal.
    let cpu = !info.is_null() && unsafe { (*info).si_code } == libc::SI_TIMER;
    let mut env: *mut c_void = std::ptr::null_mut();
    // SAFETY: `vm` is the live JavaVM; GetEnv reads the thread's
    // thread-local JavaThread and allocates nothing.
    let rc = unsafe {
        match (**vm).GetEnv {
            Some(get_env) => get_env(vm, &mut env, sys::JNI_VERSION_1_6),
            None => sys::JNI_ERR,
        }
    };
    if rc != sys::JNI_OK || env.is_null() {
        env = std::ptr::null_mut();
    }
    let start = NEXT_SLOT.fetch_add(1, Ordering::Relaxed) as usize;
    let mut claimed = None;
    for i in 0..SLOTS {
        if let Some(slot) = RING.get((start + i) % SLOTS) {
            if slot
                .state
                .compare_exchange(FREE, WRITING, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                claimed = Some(slot);
                break;
            }
        }
    }
    let Some(slot) = claimed else {
        RING_FULL.fetch_add(1, Ordering::Relaxed);
        // A lost answer: the sampler need not wait for it.
        if !cpu && PENDING.fetch_sub(1, Ordering::AcqRel) == 1 {
            wake_sampler();
        }
        return;
    };
    let mut trace = CallTrace {
        env: env.cast(),
        num_frames: 0,
        frames: slot.frames.get().cast(),
    };
    if env.is_null() {
        // Not a Java thread (any more): the answer says so.
        trace.num_frames = NOT_JAVA;
    } else {
        // SAFETY: AGCT is HotSpot's `AsyncGetCallTrace(ASGCT_CallTrace*,
        // jint depth, void* ucontext)`; the frame buffer holds DEPTH frames.
        unsafe {
            let walk: Agct = std::mem::transmute::<*mut c_void, Agct>(agct);
            walk(&mut trace, DEPTH as c_int, context);
        }
    }
    slot.tid.store(unsafe { libc::gettid() }, Ordering::Relaxed);
    slot.cpu.store(cpu, Ordering::Relaxed);
    slot.time.store(crate::clock::now_ns(), Ordering::Relaxed);
    // clock_gettime is async-signal-safe.
    let thread_cpu = crate::clock::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0);
    slot.thread_cpu.store(thread_cpu, Ordering::Relaxed);
    slot.count.store(trace.num_frames, Ordering::Relaxed);
    // SAFETY: `context` is the kernel's ucontext for this signal, or null.
    slot.pc
        .store(unsafe { interrupted_pc(context) }, Ordering::Relaxed);
    slot.state.store(READY, Ordering::Release);
    if !cpu && PENDING.fetch_sub(1, Ordering::AcqRel) == 1 {
        wake_sampler();
    }
}

/// Wakes the sampler thread from [`wait_for_answers`]; async-signal-safe.
fn wake_sampler() {
    // SAFETY: futex(2) on a static word.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            PENDING.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        )
    };
}

/// Sleeps until a wall handler wakes the sampler or `timeout` passes,
/// while PENDING is `seen`.
fn wait_for_answers(seen: i32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: futex(2) on a static word with a valid timeout; a changed
    // word or a signal returns at once.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            PENDING.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            seen,
            &ts as *const libc::timespec,
        )
    };
}

/// The pc the signal interrupted, from the ucontext; 0 when unknown.
///
/// # Safety
/// `context` is null or the `ucontext_t` the kernel passed the handler.
#[inline]
unsafe fn interrupted_pc(context: *mut c_void) -> usize {
    if context.is_null() {
        return 0;
    }
    // SAFETY: the caller's.
    unsafe { pc_of(context as *const libc::ucontext_t) }
}

#[cfg(target_arch = "x86_64")]
#[inline]
unsafe fn pc_of(uc: *const libc::ucontext_t) -> usize {
    // SAFETY: a live ucontext; REG_RIP indexes `gregs`.
    unsafe { (*uc).uc_mcontext.gregs[libc::REG_RIP as usize] as usize }
}

#[cfg(target_arch = "aarch64")]
#[inline]
unsafe fn pc_of(uc: *const libc::ucontext_t) -> usize {
    // SAFETY: a live ucontext.
    unsafe { (*uc).uc_mcontext.pc as usize }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
#[inline]
unsafe fn pc_of(_uc: *const libc::ucontext_t) -> usize {
    0
}

/// One thread's sampled stack, resolved enough for the sampler.
pub struct Walk {
    pub thread: LocalRef,
    /// JVMTI state bits, read by the sampler thread.
    pub state: u32,
    pub time_ns: u64,
    /// Top first, as JVMTI gives them (location = bci, -1 when unknown).
    pub frames: Vec<sys::jvmtiFrameInfo>,
    /// The pc the signal interrupted (0: not known), which says how the
    /// top frames ran ([`crate::code_table::frame_types`]).
    pub pc: usize,
    /// The OS thread id.
    pub tid: i32,
    /// Whether the thread has not run since its last walk, whose frames
    /// these are (it holds the same monitors too).
    pub reused: bool,
}

/// A walk as the handler left it: the frames, and the thread's CPU time
/// when the walk ended.
struct Answer {
    frames: Vec<sys::jvmtiFrameInfo>,
    thread_cpu: u64,
    /// The pc the signal interrupted.
    pc: usize,
}

/// The CPU time a thread may use after its walk and still be taken as
/// standing where the walk found it: the handler's own return and the
/// system call it goes back to, not a Java frame's worth of work (the
/// same bound as async-profiler's wall mode).
const IDLE_CPU_NS: u64 = 10_000;

/// A thread's CPU clock, as the kernel numbers it
/// (`MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`).
fn thread_cpu_clock(tid: i32) -> libc::clockid_t {
    ((!(tid as libc::clockid_t)) << 3) | 6
}

/// Why walks failed, by `AsyncGetCallTrace`'s codes (0 to -10).
const CODE_NAMES: [&str; 11] = [
    "no Java frame",
    "no class load event",
    "GC active",
    "unknown state, not Java",
    "not walkable, not Java",
    "unknown Java state",
    "not walkable, Java",
    "unknown thread state",
    "thread exiting",
    "deoptimizing",
    "at a safepoint",
];

/// The sampler thread's side: which threads to signal, their timers, the
/// drain of the ring.
pub struct SignalSampler {
    cpu: bool,
    interval: Duration,
    eetop: sys::jfieldID,
    /// `Thread::_osthread` and `OSThread::_thread_id`.
    osthread: usize,
    thread_id: usize,
    own_tid: i32,
    rotate: usize,
    /// CPU timers by thread id.
    timers: HashMap<i32, libc::timer_t>,
    walks: u64,
    failed: [u64; CODE_NAMES.len()],
    /// Answers of threads without a JNIEnv.
    not_java: u64,
    /// Wall requests not answered yet: thread id to (state bits asked,
    /// time the signal was sent).
    outstanding: HashMap<i32, (u32, u64)>,
    /// Whether a jmethodID is `Continuation.enterSpecial`, by id.
    entry_frames: HashMap<usize, bool>,
    /// Whether this JVM has continuations (JDK 19 and later), whose
    /// entry frames [`SignalSampler::cut_continuations`] looks for.
    continuations: bool,
    late: u64,
    /// Each thread's last walk (wall sampling), repeated while the thread
    /// does not run.
    last_walk: HashMap<i32, Answer>,
    /// Wall samples that repeated a thread's last walk.
    reused: u64,
    /// Walks dropped because a frame's method had no jmethodID yet.
    unresolved: u64,
    /// When the loaded classes were last given their jmethodIDs, and
    /// whether a walk has since met a method without one.
    ids_made: Instant,
    ids_missing: bool,
}

impl SignalSampler {
    /// Prepares signal sampling on the sampler thread: the thread-id
    /// offsets, the jmethodID warm-up, and switches the handler on.
    pub fn new(agent: &Agent, jni: Jni) -> Result<SignalSampler, String> {
        let (osthread, thread_id) = *OFFSETS.get().ok_or("the signal handler is not installed")?;
        let class = jni.find_class(c"java/lang/Thread");
        let eetop = (!class.is_null())
            .then(|| jni.field_id(class.get(), c"eetop", c"J"))
            .flatten()
            .ok_or("java.lang.Thread has no eetop field")?;
        let mut vm: *mut sys::JavaVM = std::ptr::null_mut();
        // SAFETY: the sampler thread's own JNIEnv.
        let rc = unsafe {
            let env = jni.raw();
            match (**env).GetJavaVM {
                Some(f) => f(env, &mut vm),
                None => sys::JNI_ERR,
            }
        };
        if rc != sys::JNI_OK || vm.is_null() {
            return Err("cannot get the JavaVM".to_string());
        }
        VM.store(vm, Ordering::Release);
        // AsyncGetCallTrace walks only while ClassLoad is enabled; the
        // ClassPrepare callback gives new classes their jmethodIDs. Both
        // before the pass over the loaded classes, so none is missed.
        MAKE_IDS.store(true, Ordering::Release);
        for e in [sys::JVMTI_EVENT_CLASS_LOAD, sys::JVMTI_EVENT_CLASS_PREPARE] {
            agent
                .jvmti
                .set_event(true, e)
                .map_err(|e| format!("cannot enable class events: {e}"))?;
        }
        make_method_ids(agent, jni);
        // Where compiled code lies, for the frames' types.
        crate::code_table::start(agent);
        ACTIVE.store(true, Ordering::Release);
        Ok(SignalSampler {
            cpu: agent.options.sampler == SamplerKind::Cpu,
            interval: agent.options.interval,
            eetop,
            osthread,
            thread_id,
            // SAFETY: gettid has no preconditions.
            own_tid: unsafe { libc::gettid() },
            rotate: 0,
            timers: HashMap::default(),
            walks: 0,
            failed: [0; CODE_NAMES.len()],
            not_java: 0,
            entry_frames: HashMap::default(),
            continuations: agent
                .jvmti
                .version_number()
                .is_ok_and(|v| crate::vthreads::major(v) >= 19),
            outstanding: HashMap::default(),
            late: 0,
            last_walk: HashMap::default(),
            reused: 0,
            unresolved: 0,
            // The first miss is healed at the next tick.
            ids_made: Instant::now()
                .checked_sub(HEAL_EVERY)
                .unwrap_or_else(Instant::now),
            ids_missing: false,
        })
    }

    /// The OS thread id of a live `thread`, through `Thread.eetop` (its
    /// `JavaThread*`, 0 once it ended) and HotSpot's exported offsets.
    fn tid(&self, jni: Jni, thread: sys::jthread) -> Option<i32> {
        let java_thread = jni.long_field(thread, self.eetop) as usize;
        if java_thread == 0 {
            return None;
        }
        // SAFETY: the thread was alive a moment ago (JVMTI state) and its
        // JavaThread and OSThread are C-heap objects that stay mapped; a
        // thread that ended in between yields a stale id at worst, which
        // tgkill refuses or a non-Java thread ignores (no JNIEnv).
        let tid = unsafe {
            let os = ((java_thread + self.osthread) as *const usize).read_volatile();
            if os == 0 {
                return None;
            }
            ((os + self.thread_id) as *const i32).read_volatile()
        };
        (tid > 0).then_some(tid)
    }

    /// One tick: signals the threads (wall) or keeps their CPU timers, and
    /// returns the samples taken.
    pub fn tick(&mut self, agent: &Agent, jni: Jni) -> Vec<Walk> {
        // A walk met a method without a jmethodID (a class that slipped
        // past both the pass and ClassPrepare): another pass, at most one
        // a second, so that the thread's next walks resolve.
        if self.ids_missing && self.ids_made.elapsed() >= HEAL_EVERY {
            make_method_ids(agent, jni);
            self.ids_made = Instant::now();
            self.ids_missing = false;
        }
        let threads = match agent.jvmti.all_threads(jni) {
            Ok(t) => t,
            Err(e) => {
                agent.problems.jvmti(e);
                return Vec::new();
            }
        };
        // (tid, thread, state bits)
        let mut live: Vec<(i32, LocalRef, u32)> = Vec::with_capacity(threads.len());
        for t in threads {
            let Ok(state) = agent.jvmti.thread_state(t.get()) else {
                continue;
            };
            if state & sys::JVMTI_THREAD_STATE_ALIVE == 0 {
                continue;
            }
            let Some(tid) = self.tid(jni, t.get()) else {
                continue;
            };
            if tid != self.own_tid {
                live.push((tid, t, state));
            }
        }
        // Where each live thread is in `live`: the answers, the idle set
        // and the timers look threads up by tid, and a server can have
        // thousands of them (a scan per answer would be quadratic).
        let index: HashMap<i32, usize> = live
            .iter()
            .enumerate()
            .map(|(i, (tid, _, _))| (*tid, i))
            .collect();
        // A carrier running a virtual thread: the sample is the virtual
        // thread's, with its own state (JVMTI calls the carrier waiting).
        let vthreads: Vec<(i32, usize)> = {
            let map = mounted();
            let mut v = Vec::new();
            if let Some(map) = map.as_ref() {
                for entry in live.iter_mut() {
                    if let Some(&global) = map.get(&entry.0) {
                        let local = jni_new_local(jni, global as sys::jobject);
                        if local.is_null() {
                            continue;
                        }
                        let local = LocalRef::new(jni, local);
                        if let Ok(state) = agent.jvmti.thread_state(local.get()) {
                            entry.1 = local;
                            entry.2 = state;
                            v.push((entry.0, global));
                        }
                    }
                }
            }
            v
        };
        // Whether the carrier `tid` still runs the virtual thread it ran
        // when the tick began (else its walk is of something else).
        let same_mount = |tid: i32| -> bool {
            match vthreads.iter().find(|(t, _)| *t == tid) {
                None => true,
                Some((_, global)) => mounted()
                    .as_ref()
                    .and_then(|m| m.get(&tid))
                    .is_some_and(|g| g == global),
            }
        };
        if self.cpu {
            self.keep_timers(agent, &live, &index);
            let mut out = Vec::new();
            self.drain(|tid, cpu, time, answer| {
                let Some(Answer { frames, pc, .. }) = answer.filter(|_| cpu) else {
                    return;
                };
                if !same_mount(tid) {
                    return;
                }
                if let Some((_, t, _)) = index.get(&tid).map(|&i| &live[i]) {
                    out.push(Walk {
                        thread: LocalRef::new(jni, jni_new_local(jni, t.get())),
                        state: sys::JVMTI_THREAD_STATE_ALIVE | sys::JVMTI_THREAD_STATE_RUNNABLE,
                        time_ns: time,
                        frames,
                        tid,
                        reused: false,
                        pc,
                    });
                }
            });
            self.cut_continuations(agent, jni, &mut out);
            return out;
        }
        // Answers to signals of earlier ticks that came after their tick
        // stopped waiting: a thread that waits for a CPU on a loaded
        // machine answers late, and dropping those would leave out the
        // busiest threads. They are taken with the state asked when they
        // were signalled, at this tick's time; a thread with a request
        // outstanding is not signalled again until it answers (or, past
        // LOST_AFTER, its signal is taken as lost).
        let mut outstanding = std::mem::take(&mut self.outstanding);
        let now_ns = crate::clock::now_ns();
        let lost_after = LOST_AFTER.max(self.interval * 10).as_nanos() as u64;
        outstanding.retain(|_, (_, sent)| now_ns.saturating_sub(*sent) < lost_after);
        // Wall samples carry the tick's time, as the safepoint sampler's
        // do: the samples of one tick are one moment of the JVM (the
        // monitors a blocked thread waits for and who holds them).
        let tick_ns = now_ns;
        let mut out = Vec::new();
        let mut late = 0;
        // The last walk of each thread, for the threads that have not run
        // since (see IDLE_CPU_NS); only threads still alive are kept.
        let mut last = std::mem::take(&mut self.last_walk);
        last.retain(|tid, _| index.contains_key(tid));
        let carrier = |tid: i32| vthreads.iter().any(|(t, _)| *t == tid);
        let mut take = |outstanding: &mut HashMap<i32, (u32, u64)>,
                        last: &mut HashMap<i32, Answer>,
                        out: &mut Vec<Walk>,
                        tid: i32,
                        cpu: bool,
                        time: u64,
                        answer: Option<Answer>| {
            if cpu {
                return;
            }
            match outstanding.get(&tid) {
                Some(&(state, sent)) if time >= sent => {
                    outstanding.remove(&tid);
                    let Some(answer) = answer.filter(|_| same_mount(tid)) else {
                        last.remove(&tid);
                        return;
                    };
                    if let Some((_, t, _)) = index.get(&tid).map(|&i| &live[i]) {
                        out.push(Walk {
                            thread: LocalRef::new(jni, jni_new_local(jni, t.get())),
                            state,
                            time_ns: tick_ns,
                            frames: answer.frames.clone(),
                            tid,
                            reused: false,
                            pc: answer.pc,
                        });
                        // A carrier's walk is its virtual thread's: never
                        // reused (the next mount is another thread's).
                        if carrier(tid) || answer.thread_cpu == 0 {
                            last.remove(&tid);
                        } else {
                            last.insert(tid, answer);
                        }
                    }
                }
                _ => late += 1,
            }
        };
        self.drain(|tid, cpu, time, answer| {
            take(
                &mut outstanding,
                &mut last,
                &mut out,
                tid,
                cpu,
                time,
                answer,
            )
        });
        // A rotating subset when there are many threads.
        let ready: Vec<usize> = (0..live.len())
            .filter(|&i| !outstanding.contains_key(&live[i].0))
            .collect();
        let n = ready.len();
        let chosen: Vec<usize> = if n <= WALL_THREADS {
            ready
        } else {
            let first = self.rotate % n;
            self.rotate = (first + WALL_THREADS) % n;
            (0..WALL_THREADS).map(|i| ready[(first + i) % n]).collect()
        };
        let pid = std::process::id() as i32;
        let mut asked = Vec::with_capacity(chosen.len());
        // Counted up before each signal; answers of earlier ticks that
        // come now take one off too: at worst the wait below wakes early.
        PENDING.store(0, Ordering::Release);
        for i in chosen {
            let (tid, thread, state) = &live[i];
            // A thread that has used (almost) no CPU since its last walk
            // stands where that walk found it: its sample repeats that
            // stack, with the state read now, and it is not woken by a
            // signal (async-profiler's wall mode does the same).
            if let Some(prev) = last.get(tid).filter(|_| !carrier(*tid)) {
                let now = crate::clock::clock_ns(thread_cpu_clock(*tid));
                if now.is_some_and(|now| now.saturating_sub(prev.thread_cpu) <= IDLE_CPU_NS) {
                    out.push(Walk {
                        thread: LocalRef::new(jni, jni_new_local(jni, thread.get())),
                        state: *state,
                        time_ns: tick_ns,
                        frames: prev.frames.clone(),
                        tid: *tid,
                        reused: true,
                        pc: prev.pc,
                    });
                    self.reused += 1;
                    continue;
                }
            }
            let sent = crate::clock::now_ns();
            PENDING.fetch_add(1, Ordering::AcqRel);
            // SAFETY: tgkill only sends a signal to a thread of this process.
            let rc = unsafe { libc::syscall(libc::SYS_tgkill, pid, *tid, SIGNAL) };
            if rc == 0 {
                outstanding.insert(*tid, (*state, sent));
                asked.push(*tid);
            } else {
                PENDING.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let deadline =
            Instant::now() + ANSWER_WAIT.min(self.interval.max(Duration::from_millis(5)) * 4);
        loop {
            let waiting = asked.iter().filter(|t| outstanding.contains_key(t)).count();
            let now = Instant::now();
            if waiting == 0 || now >= deadline {
                break;
            }
            let seen = PENDING.load(Ordering::Acquire);
            if seen <= 0 {
                // Woken by an earlier tick's late answer before all of
                // this tick's came: wait for the ones still out (an
                // answer that lands in between costs one short sleep).
                PENDING.store(waiting as i32, Ordering::Release);
            } else {
                wait_for_answers(seen, (deadline - now).min(Duration::from_millis(1)));
            }
            self.drain(|tid, cpu, time, answer| {
                take(
                    &mut outstanding,
                    &mut last,
                    &mut out,
                    tid,
                    cpu,
                    time,
                    answer,
                )
            });
        }
        self.last_walk = last;
        self.late += late;
        self.outstanding = outstanding;
        self.cut_continuations(agent, jni, &mut out);
        out
    }

    /// Cuts each walk below `Continuation.enterSpecial`: a carrier's walk
    /// goes on from its virtual thread's frames into the carrier's own
    /// (the ForkJoinPool worker loop), which are not the virtual thread's.
    fn cut_continuations(&mut self, agent: &Agent, jni: Jni, walks: &mut [Walk]) {
        // Before JDK 19 no thread runs a continuation: nothing to look for.
        if !self.continuations {
            return;
        }
        for w in walks {
            let mut cut = None;
            for (i, f) in w.frames.iter().enumerate() {
                let entry = *self
                    .entry_frames
                    .entry(f.method as usize)
                    .or_insert_with(|| is_continuation_entry(agent, jni, f.method));
                if entry {
                    cut = Some(i + 1);
                    break;
                }
            }
            if let Some(n) = cut {
                w.frames.truncate(n);
            }
        }
    }

    /// Takes every ready slot out of the ring, counting failed walks and
    /// handing each to `f(tid, cpu, time, answer)`: the walk's frames and
    /// the thread's CPU time when it ended (`None`: the walk failed, or
    /// the thread has no Java frame).
    fn drain(&mut self, mut f: impl FnMut(i32, bool, u64, Option<Answer>)) {
        for slot in RING.iter() {
            if slot.state.load(Ordering::Acquire) != READY {
                continue;
            }
            let count = slot.count.load(Ordering::Relaxed);
            let tid = slot.tid.load(Ordering::Relaxed);
            let cpu = slot.cpu.load(Ordering::Relaxed);
            let time = slot.time.load(Ordering::Relaxed);
            let thread_cpu = slot.thread_cpu.load(Ordering::Relaxed);
            let pc = slot.pc.load(Ordering::Relaxed);
            self.walks += 1;
            if count <= 0 {
                let code = count.unsigned_abs() as usize;
                if let Some(c) = self.failed.get_mut(code) {
                    *c += 1;
                } else {
                    self.not_java += 1;
                }
                slot.state.store(FREE, Ordering::Release);
                f(tid, cpu, time, None);
                continue;
            }
            // SAFETY: READY: the handler finished writing `count` frames.
            let frames = unsafe { &*slot.frames.get() };
            let frames: Vec<sys::jvmtiFrameInfo> = frames
                .iter()
                .take((count as usize).min(DEPTH))
                .map(|c| sys::jvmtiFrameInfo {
                    method: c.method,
                    location: if c.lineno >= 0 { c.lineno.into() } else { -1 },
                })
                .collect();
            slot.state.store(FREE, Ordering::Release);
            if frames.iter().any(|f| f.method.is_null()) {
                self.unresolved += 1;
                self.ids_missing = true;
                f(tid, cpu, time, None);
                continue;
            }
            f(
                tid,
                cpu,
                time,
                Some(Answer {
                    frames,
                    thread_cpu,
                    pc,
                }),
            );
        }
    }

    /// Gives every live thread a CPU timer and deletes those of threads
    /// gone.
    fn keep_timers(
        &mut self,
        agent: &Agent,
        live: &[(i32, LocalRef, u32)],
        index: &HashMap<i32, usize>,
    ) {
        let ns = self.interval.as_nanos().min(999_999_999_999) as i64;
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: ns / 1_000_000_000,
                tv_nsec: ns % 1_000_000_000,
            },
            it_value: libc::timespec {
                tv_sec: ns / 1_000_000_000,
                tv_nsec: ns % 1_000_000_000,
            },
        };
        for (tid, _, _) in live {
            if self.timers.contains_key(tid) {
                continue;
            }
            let clock = thread_cpu_clock(*tid);
            // SAFETY: a zeroed sigevent filled for SIGEV_THREAD_ID; the
            // timer id is written by timer_create.
            unsafe {
                let mut ev: libc::sigevent = std::mem::zeroed();
                ev.sigev_signo = SIGNAL;
                ev.sigev_notify = libc::SIGEV_THREAD_ID;
                ev.sigev_notify_thread_id = *tid;
                let mut timer: libc::timer_t = std::ptr::null_mut();
                if libc::timer_create(clock, &mut ev, &mut timer) != 0 {
                    agent.problems.capture(|| {
                        format!(
                            "sampler=cpu: timer_create failed for thread {tid}: {}",
                            std::io::Error::last_os_error()
                        )
                    });
                    continue;
                }
                libc::timer_settime(timer, 0, &spec, std::ptr::null_mut());
                self.timers.insert(*tid, timer);
            }
        }
        self.timers.retain(|tid, timer| {
            let alive = index.contains_key(tid);
            if !alive {
                // SAFETY: a timer this sampler created.
                unsafe { libc::timer_delete(*timer) };
            }
            alive
        });
    }

    /// Switches the handler off and deletes the timers; says how many
    /// walks failed when it was a large share.
    pub fn stop(&mut self, agent: &Agent) {
        ACTIVE.store(false, Ordering::Release);
        MAKE_IDS.store(false, Ordering::Release);
        crate::code_table::stop(agent);
        for (_, timer) in self.timers.drain() {
            // SAFETY: a timer this sampler created.
            unsafe { libc::timer_delete(timer) };
        }
        // Codes 0 and -3 are threads without a walkable Java frame (the
        // Signal Dispatcher, a thread inside the VM's own code): no loss.
        let failed: u64 = self
            .failed
            .iter()
            .enumerate()
            .filter(|(code, _)| *code != 0 && *code != 3)
            .map(|(_, n)| n)
            .sum::<u64>()
            + self.unresolved;
        let full = RING_FULL.swap(0, Ordering::Relaxed);
        if self.walks > 0 && (failed + full) * 4 > self.walks && !agent.options.quiet {
            let mut why: Vec<String> = self
                .failed
                .iter()
                .zip(CODE_NAMES)
                .enumerate()
                .filter(|(code, (n, _))| **n > 0 && *code != 0 && *code != 3)
                .map(|(_, x)| x)
                .map(|(n, name)| format!("{name}: {n}"))
                .collect();
            if self.unresolved > 0 {
                why.push(format!("method without a jmethodID: {}", self.unresolved));
            }
            crate::problems::say(&format!(
                "{} of {} stack walks failed and were dropped ({}), {full} lost to a full ring",
                failed,
                self.walks,
                why.join(", ")
            ));
        }
    }
}

/// Gives every prepared class its jmethodIDs, which HotSpot makes lazily
/// and `AsyncGetCallTrace` needs (async-profiler's warm-up).
fn make_method_ids(agent: &Agent, jni: Jni) {
    // One reference per loaded class arrives at once.
    jni.with_local_frame(65_536, || {
        if let Ok(classes) = agent.jvmti.loaded_classes(jni) {
            for c in &classes {
                let prepared = agent
                    .jvmti
                    .class_status(c.get())
                    .is_ok_and(|s| s & sys::JVMTI_CLASS_STATUS_PREPARED as i32 != 0);
                if prepared {
                    let _ = agent.jvmti.create_method_ids(c.get());
                }
            }
        }
    });
}

/// Whether `method` is `jdk.internal.vm.Continuation.enterSpecial`, the
/// frame a virtual thread's stack starts from on its carrier.
fn is_continuation_entry(agent: &Agent, jni: Jni, method: sys::jmethodID) -> bool {
    let j = agent.jvmti;
    j.method_name(method)
        .is_ok_and(|(name, _)| name == "enterSpecial")
        && j.method_declaring_class(jni, method)
            .and_then(|c| j.class_signature(c.get()))
            .is_ok_and(|sig| sig == "Ljdk/internal/vm/Continuation;")
}

/// A new local reference to `obj` (the walk outlives the tick's list).
fn jni_new_local(jni: Jni, obj: sys::jobject) -> sys::jobject {
    // SAFETY: the sampler thread's own JNIEnv and a live local reference.
    unsafe {
        let env = jni.raw();
        match (**env).NewLocalRef {
            Some(f) => f(env, obj),
            None => std::ptr::null_mut(),
        }
    }
}

/// The virtual thread mounted on each carrier (by OS thread id), as a JNI
/// global reference, while signal sampling is on: a carrier's walk shows
/// the mounted virtual thread's frames, and the sample is the virtual
/// thread's. Kept by the mount events ([`crate::vthreads`]); the lock is
/// also held while the sampler makes its local references from these, so
/// an unmount never deletes one in use.
static MOUNTED: Mutex<Option<HashMap<i32, usize>>> = Mutex::new(None);

fn mounted() -> std::sync::MutexGuard<'static, Option<HashMap<i32, usize>>> {
    MOUNTED.lock().unwrap_or_else(|e| e.into_inner())
}

/// A virtual thread mounted on the calling carrier (`vthread`, or the
/// current thread when null).
pub fn on_mount(agent: &crate::recording::Recording, jni: Jni, vthread: sys::jthread) {
    // From the recording's start, before the sampler thread runs: a
    // virtual thread mounted early may stay mounted throughout.
    if !in_use(&agent.options) {
        return;
    }
    let current;
    let vthread = if vthread.is_null() {
        match agent.jvmti.current_thread(jni) {
            Ok(t) => {
                current = t;
                current.get()
            }
            Err(_) => return,
        }
    } else {
        vthread
    };
    let global = jni_global(jni, vthread, true);
    if global.is_null() {
        return;
    }
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let old = mounted()
        .get_or_insert_with(HashMap::default)
        .insert(tid, global as usize);
    if let Some(old) = old {
        jni_global(jni, old as sys::jobject, false);
    }
}

/// The calling carrier's virtual thread unmounted.
pub fn on_unmount(jni: Jni) {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let old = mounted().as_mut().and_then(|m| m.remove(&tid));
    if let Some(old) = old {
        jni_global(jni, old as sys::jobject, false);
    }
}

/// NewGlobalRef (`make`) or DeleteGlobalRef of `obj`.
fn jni_global(jni: Jni, obj: sys::jobject, make: bool) -> sys::jobject {
    // SAFETY: the calling thread's JNIEnv; `obj` a live reference.
    unsafe {
        let env = jni.raw();
        if make {
            match (**env).NewGlobalRef {
                Some(f) => f(env, obj),
                None => std::ptr::null_mut(),
            }
        } else {
            if let Some(f) = (**env).DeleteGlobalRef {
                f(env, obj);
            }
            std::ptr::null_mut()
        }
    }
}

/// ClassPrepare: gives the class's methods their jmethodIDs while signal
/// sampling is on.
pub fn on_class_prepare(agent: &Agent, class: sys::jclass) {
    if MAKE_IDS.load(Ordering::Acquire) {
        let _ = agent.jvmti.create_method_ids(class);
    }
}

/// Installs the (empty) ClassLoad callback: `AsyncGetCallTrace` only
/// walks while some environment has ClassLoad enabled.
pub fn install_callbacks(cb: &mut sys::jvmtiEventCallbacks) {
    cb.ClassLoad = Some(class_load);
}

unsafe extern "C" fn class_load(
    _env: *mut sys::jvmtiEnv,
    _jni: *mut sys::JNIEnv,
    _thread: sys::jthread,
    _class: sys::jclass,
) {
}
