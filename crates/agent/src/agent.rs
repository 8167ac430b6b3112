//! The agent's global state and its life: start in `Agent_OnLoad`, go live
//! at VMInit, stop at VMDeath (or `Agent_OnUnload` when the VM never got
//! that far) — or start in `Agent_OnAttach` in a running JVM and stop on
//! `vmview attach PID stop` ([`crate::control`]).
//!
//! There is one current recording per JVM, reached from every callback
//! through a `static`. Callbacks do nothing until it is live (`live()` is
//! `None`) and nothing after it stopped, when the writer thread has been
//! stopped and the trace finished. A stopped recording may be followed by
//! another ([`start_attached`]); the JVMTI environment is shared by all.

use crate::buffers::Buffers;
use crate::callbacks;
use crate::capture::{self, CallCapture};
use crate::clock;
use crate::jvmti::{Jni, Jvmti};
use crate::methods::MethodCache;
use crate::problems::Problems;
pub use crate::recording::{
    pack_window, tracing_in_period, unpack_window, TRACING_ALWAYS, TRACING_OFF,
};
use crate::symbols::Symbols;
use crate::sys;
use crate::threads::ThreadRegistry;
use crate::values::Fields;
use crate::writer::WriterThread;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};
use vmview_format::TraceHeader;
use vmview_options::{
    duration_text, expand_file_pattern, AgentOptions, CaptureMode, CivilTime, EventGroup,
    ExceptionScope,
};

use crate::recording::{Recording, LIVE, LOADED, STOPPED};

/// One recording's life: its state ([`Recording`], which the hot path
/// reads without this module) and its writer thread.
pub struct Agent {
    pub rec: Recording,
    writer: Mutex<Option<WriterThread>>,
    reported: AtomicBool,
}

impl std::ops::Deref for Agent {
    type Target = Recording;
    fn deref(&self) -> &Recording {
        &self.rec
    }
}

/// The current recording; never freed once set (see [`Agent`]).
static AGENT: AtomicPtr<Agent> = AtomicPtr::new(std::ptr::null_mut());
/// The agent's one JVMTI environment: capabilities, callbacks and tags
/// outlive a recording.
static ENV: OnceLock<Jvmti> = OnceLock::new();
static NEXT_GENERATION: AtomicU32 = AtomicU32::new(1);

/// The current (or last) recording, once one was set up.
pub fn get() -> Option<&'static Agent> {
    // SAFETY: the pointer comes from `Box::leak` in `create` and is never
    // freed.
    unsafe { AGENT.load(Ordering::Acquire).as_ref() }
}

/// The agent while it records (between VMInit, or attach, and its stop).
#[inline]
pub fn live() -> Option<&'static Agent> {
    get().filter(|a| a.is_live())
}

pub use crate::recording::guard;

/// Everything `Agent_OnLoad` does; the error is the one line to print.
///
/// # Safety
/// `vm` must be the JavaVM* passed to `Agent_OnLoad`.
pub unsafe fn load(vm: *mut sys::JavaVM, raw_options: &str) -> Result<(), String> {
    let options = AgentOptions::parse(raw_options).map_err(|e| e.to_string())?;
    if ENV.get().is_some() {
        return Err("the agent is loaded twice; give -agentpath only once".to_string());
    }
    let jvmti = get_env(vm)?;
    let capture = capture::for_mode(options.mode);
    let potential = jvmti.potential_capabilities().ok();
    let caps = capabilities(&options, capture, potential.as_ref());
    if let Some(potential) = &potential {
        let missing = missing_capabilities(&caps, potential);
        if !missing.is_empty() {
            return Err(format!(
                "this JVM cannot give events={} the JVMTI capabilities {} (is another agent holding them?)",
                options.events,
                missing.join(", ")
            ));
        }
    }
    jvmti.add_capabilities(&caps).map_err(|e| {
        format!(
            "this JVM does not grant the JVMTI capabilities events={} needs ({e})",
            options.events
        )
    })?;
    install_callbacks(jvmti, true)?;
    let _ = ENV.set(jvmti);
    create(jvmti, options, raw_options, false, Vec::new())?;
    Ok(())
}

/// Starts a recording in a running JVM (`Agent_OnAttach`, live phase).
/// Event groups the JVM cannot give an attached agent are left out and
/// named in [`Agent::notes`] instead of failing.
///
/// # Safety
/// `vm` must be the JavaVM* passed to `Agent_OnAttach`, `jni` the calling
/// thread's environment. `attached` false keeps reporting problems on the
/// JVM's stderr (a `dump` of a recording started with `-agentpath`).
pub unsafe fn start_attached(
    vm: *mut sys::JavaVM,
    jni: Jni,
    raw_options: &str,
    attached: bool,
) -> Result<&'static Agent, String> {
    let mut options = AgentOptions::parse(raw_options).map_err(|e| e.to_string())?;
    if let Some(a) = get().filter(|a| a.phase.load(Ordering::Acquire) != STOPPED) {
        return Err(format!(
            "a recording is already running into {}; stop it first (vmview attach PID stop)",
            a.path
        ));
    }
    let jvmti = match ENV.get() {
        Some(j) => *j,
        None => {
            let j = get_env(vm)?;
            install_callbacks(j, false)?;
            *ENV.get_or_init(|| j)
        }
    };
    let capture = capture::for_mode(options.mode);
    let potential = jvmti
        .potential_capabilities()
        .map_err(|e| format!("cannot ask this JVM for JVMTI capabilities: {e}"))?;
    let mut notes = Vec::new();
    for group in options.events.iter() {
        let mut alone = options.clone();
        alone.events = vmview_options::EventSet::EMPTY.with(group);
        let missing =
            missing_capabilities(&capabilities(&alone, capture, Some(&potential)), &potential);
        if !missing.is_empty() {
            options.events = options.events.without(group);
            notes.push(format!(
                "{} not recorded: this JVM grants {} only to agents loaded at startup (use vmview record{})",
                group.name(),
                missing.join(", "),
                match (group, options.mode) {
                    // events=bytecode chose mode=jvmti for the calls.
                    (EventGroup::Calls, CaptureMode::Jvmti)
                        if options.events.contains(EventGroup::Bytecode) =>
                    {
                        ", or leave out events=bytecode: calls then use mode=bci"
                    }
                    (EventGroup::Calls, CaptureMode::Jvmti) => ", or mode=bci",
                    _ => "",
                }
            ));
        }
    }
    let caps = capabilities(&options, capture, Some(&potential));
    if options.events.contains(EventGroup::Samples)
        && caps.can_get_owned_monitor_stack_depth_info() == 0
    {
        notes.push(
            "samples do not list the monitors each thread holds: this JVM grants \
             can_get_owned_monitor_stack_depth_info only to agents loaded at startup"
                .to_string(),
        );
    }
    jvmti.add_capabilities(&caps).map_err(|e| {
        format!("this JVM does not grant the JVMTI capabilities the recording needs ({e})")
    })?;
    let agent = create(jvmti, options, raw_options, attached, notes)?;
    agent.start_recording(jni);
    Ok(agent)
}

/// Sets the callbacks and the events that bracket a recording: VMInit
/// (when loaded at startup) and VMDeath, which finishes the trace.
fn install_callbacks(jvmti: Jvmti, at_startup: bool) -> Result<(), String> {
    // SAFETY: all-zero is "no callback" for every entry.
    let mut cb: sys::jvmtiEventCallbacks = unsafe { std::mem::zeroed() };
    callbacks::install(&mut cb);
    crate::vthreads::install(&mut cb);
    crate::signal_sampler::install_callbacks(&mut cb);
    crate::code_table::install_callbacks(&mut cb);
    crate::alloc_sampler::install_callbacks(&mut cb);
    crate::pinning::install_callbacks(&mut cb);
    // Every capture's callbacks: a later recording may use the other mode.
    for mode in [CaptureMode::Bci, CaptureMode::Jvmti] {
        capture::for_mode(mode).install_callbacks(&mut cb);
    }
    let setup = || -> crate::jvmti::Result<()> {
        jvmti.set_event_callbacks(&cb)?;
        if at_startup {
            jvmti.set_event(true, sys::JVMTI_EVENT_VM_INIT)?;
        }
        jvmti.set_event(true, sys::JVMTI_EVENT_VM_DEATH)
    };
    setup().map_err(|e| format!("cannot register JVMTI callbacks: {e}"))
}

/// A new recording: its file, header and writer thread. It becomes the
/// current one, not yet live.
fn create(
    jvmti: Jvmti,
    options: AgentOptions,
    raw_options: &str,
    attached: bool,
    notes: Vec<String>,
) -> Result<&'static Agent, String> {
    // The bindings come from JDK 25's header, but everything the agent calls
    // exists since JVMTI 1.2 (JDK 6). A call to anything newer must first
    // compare this version (it is also recorded in the trace header).
    let jvmti_version = jvmti.version_number().map_err(|e| e.to_string())?;
    let capture = capture::for_mode(options.mode);
    let generation = NEXT_GENERATION.fetch_add(1, Ordering::Relaxed);
    let start_unix_ns = clock::start();
    let time_origin_ns = if generation == 1 { 0 } else { clock::now_ns() };
    let secs = (start_unix_ns / 1_000_000_000) as i64;
    let civil = CivilTime::from_unix(secs, clock::local_utc_offset(secs));
    let wanted = expand_file_pattern(&options.file, std::process::id(), civil);
    let opened = crate::trace_file::create(&wanted)
        .map_err(|e| format!("cannot create trace file '{wanted}': {e}"))?;
    let (file, path) = (opened.file, opened.path);
    let mut notes = notes;
    if opened.taken_by_live {
        let note =
            format!("{wanted} is being written by another recording: this one goes to {path}");
        // Loaded at startup, the JVM's stderr is the user's; an attached
        // recording tells `vmview attach` in its reply's notes.
        if !attached && !options.quiet {
            crate::problems::say(&note);
        }
        notes.push(note);
    }
    if let Some(old) = &opened.moved_aside {
        notes.push(format!("the earlier {wanted} was moved to {old}"));
    }
    if opened.replaced {
        let note = format!(
            "the earlier {wanted} was replaced: its directory is not writable, so it could not be moved aside"
        );
        if !attached && !options.quiet {
            crate::problems::say(&note);
        }
        notes.push(note);
    }

    let mut properties = vec![
        ("agent_options".to_string(), raw_options.to_string()),
        (
            "agent_version".to_string(),
            env!("CARGO_PKG_VERSION").to_string(),
        ),
        ("agent_build".to_string(), crate::build_id().to_string()),
        ("capture".to_string(), capture.name().to_string()),
        ("jvmti_version".to_string(), format_version(jvmti_version)),
    ];
    if attached {
        properties.push(("attached".to_string(), "true".to_string()));
    }
    let (sampler, fallback) = crate::signal_sampler::choose(&options);
    if sampler != "none" {
        properties.push(("sampler".to_string(), sampler.to_string()));
    }
    if let Some(why) = fallback {
        if !attached && !options.quiet {
            crate::problems::say(&why);
        }
        notes.push(why.clone());
        properties.push(("sampler_fallback".to_string(), why));
    }
    if options.reactions {
        properties.push((
            "reactions_after".to_string(),
            duration_text(options.reactions_after),
        ));
    }
    for (key, prop) in [
        ("jvm", "java.vm.version"),
        ("jvm_name", "java.vm.name"),
        ("command", "sun.java.command"),
    ] {
        if let Some(v) = jvmti.system_property(prop) {
            properties.push((key.to_string(), v));
        }
    }
    let app_packages = options
        .events
        .contains(EventGroup::Samples)
        .then(|| {
            let entries = crate::app::entries(
                &options.app,
                jvmti.system_property("java.class.path").as_deref(),
                jvmti.system_property("sun.java.command").as_deref(),
            );
            crate::app::packages(&entries)
        })
        .filter(|p| !p.is_empty());
    if let Some(p) = &app_packages {
        properties.push((
            vmview_analysis::reactions::APP_PACKAGES_PROPERTY.to_string(),
            p.join(" "),
        ));
    }
    properties.sort();
    let header = TraceHeader {
        version: 0,
        pid: std::process::id(),
        start_unix_ns,
        properties,
    };

    let options_depth = options.depth;
    let budget_bp = options
        .budget_bp
        .filter(|_| options.events.contains(EventGroup::Calls) && !options.classes.is_empty());
    let agent: &'static Agent = Box::leak(Box::new(Agent {
        rec: Recording {
            jvmti,
            buffers: Buffers::new(options.buffer),
            options,
            capture,
            symbols: Symbols::default(),
            methods: MethodCache::default(),
            threads: ThreadRegistry::default(),
            problems: Problems::default(),
            fields: OnceLock::new(),
            gc_start: AtomicU64::new(0),
            generation,
            attached,
            path,
            raw_options: raw_options.to_string(),
            notes,
            time_origin_ns,
            written: AtomicU64::new(0),
            sampler: Default::default(),
            reactions: Default::default(),
            budget: crate::budget::Budget::new(budget_bp),
            app_packages,
            window: AtomicU64::new(pack_window(options_depth)),
            tracing: AtomicU32::new(TRACING_ALWAYS),
            hold_from: AtomicU64::new(u64::MAX),
            phase: AtomicU8::new(LOADED),
        },
        writer: Mutex::new(None),
        reported: AtomicBool::new(false),
    }));
    AGENT.store(std::ptr::from_ref(agent).cast_mut(), Ordering::Release);
    crate::recording::set(&agent.rec);

    let writer = WriterThread::spawn(agent, file, header)
        .map_err(|e| format!("cannot start the writer thread: {e}"))?;
    *agent.writer.lock().unwrap_or_else(|e| e.into_inner()) = Some(writer);
    Ok(agent)
}

fn get_env(vm: *mut sys::JavaVM) -> Result<Jvmti, String> {
    let mut env: *mut std::ffi::c_void = std::ptr::null_mut();
    // SAFETY: `vm` is the JavaVM* the JVM gave Agent_OnLoad. JVMTI 1.2 is
    // asked for because every JVM accepts it (JDK 17 refuses 25).
    let rc = unsafe {
        match (**vm).GetEnv {
            Some(get_env) => get_env(vm, &mut env, sys::JVMTI_VERSION_1_2 as sys::jint),
            None => sys::JNI_ERR,
        }
    };
    if rc != sys::JNI_OK || env.is_null() {
        return Err(format!(
            "this JVM offers no JVMTI 1.2 environment (GetEnv returned {rc})"
        ));
    }
    // SAFETY: GetEnv returned a jvmtiEnv*.
    Ok(unsafe { Jvmti::new(env.cast()) })
}

fn format_version(v: i32) -> String {
    let major = crate::vthreads::major(v);
    let minor = (v & sys::JVMTI_VERSION_MASK_MINOR as i32) >> sys::JVMTI_VERSION_SHIFT_MINOR;
    format!("{major}.{minor}")
}

/// Which JVMTI event families the options call for. Without trace
/// classes there is no call to record and no "traced" exception: the
/// expensive events (interpreter-only mode, deoptimising throws) stay off.
struct Plan {
    calls: bool,
    exceptions: bool,
    /// Exception events are needed for THROW, and (with JVMTI method
    /// events) for calls to name the exception that unwound a traced
    /// method; the probe is handed that exception.
    exception_events: bool,
    /// THROW events in bci mode must look past the probe's catch-all
    /// handlers to the real catch site, which takes the bytecodes.
    probe_handlers: bool,
    locks: bool,
    gc: bool,
    classes: bool,
    samples: bool,
    /// Handlers found from samples are instrumented after the warm-up
    /// (`reactions`): the probe and the class-file hook, but no trace
    /// classes.
    reactions: bool,
    /// Single-stepping trace-class methods (`events=bytecode`).
    bytecode: bool,
}

impl Plan {
    fn new(o: &AgentOptions) -> Plan {
        let has_classes = !o.classes.is_empty();
        let calls = o.events.contains(EventGroup::Calls) && has_classes;
        let exceptions = o.events.contains(EventGroup::Exceptions)
            && (has_classes || o.exceptions == ExceptionScope::All);
        Plan {
            calls,
            exceptions,
            exception_events: (calls && o.mode == CaptureMode::Jvmti) || exceptions,
            probe_handlers: calls && exceptions && o.mode == CaptureMode::Bci,
            locks: o.events.contains(EventGroup::Locks),
            gc: o.events.contains(EventGroup::Gc),
            classes: o.events.contains(EventGroup::Classes),
            samples: o.events.contains(EventGroup::Samples),
            reactions: o.reactions && o.mode == CaptureMode::Bci,
            bytecode: o.events.contains(EventGroup::Bytecode) && has_classes,
        }
    }
}

/// Only what the plan needs: some capabilities slow the JVM down just by
/// being held (local variable access, for one, limits the JIT). With
/// `potential`, bytecode instrumentation also asks for retransformation
/// when the JVM offers it: it must be held before the ClassFileLoadHook is
/// first enabled, and it lets a recording instrument classes loaded before
/// it started (attach, or a second recording) and restore them at stop.
fn capabilities(
    o: &AgentOptions,
    capture: &dyn CallCapture,
    potential: Option<&sys::jvmtiCapabilities>,
) -> sys::jvmtiCapabilities {
    let plan = Plan::new(o);
    // SAFETY: plain bits; all zero means "nothing".
    let mut caps: sys::jvmtiCapabilities = unsafe { std::mem::zeroed() };
    caps.set_can_tag_objects(1);
    // JDK 21+: events name the virtual thread, not its carrier, and the
    // per-thread state follows it (`vthreads.rs`).
    if potential.is_some_and(|p| p.can_support_virtual_threads() != 0) {
        caps.set_can_support_virtual_threads(1);
    }
    if plan.calls || plan.reactions {
        capture.add_capabilities(&mut caps);
        if o.mode == CaptureMode::Bci && potential.is_some_and(|p| p.can_retransform_classes() != 0)
        {
            caps.set_can_retransform_classes(1);
        }
    }
    if plan.exception_events {
        caps.set_can_generate_exception_events(1);
        caps.set_can_get_line_numbers(1);
    }
    if plan.probe_handlers {
        caps.set_can_get_bytecodes(1);
    }
    if plan.locks {
        caps.set_can_generate_monitor_events(1);
        caps.set_can_get_monitor_info(1);
    }
    if plan.gc {
        caps.set_can_generate_garbage_collection_events(1);
    }
    if plan.classes {
        caps.set_can_get_source_file_name(1);
    }
    if plan.bytecode {
        caps.set_can_generate_single_step_events(1);
        caps.set_can_get_bytecodes(1);
        caps.set_can_get_constant_pool(1);
    }
    crate::alloc_sampler::add_capabilities(o, &mut caps);
    crate::code_table::add_capabilities(o, potential, &mut caps);
    crate::pinning::add_capabilities(o, potential, &mut caps);
    if plan.samples || o.events.contains(EventGroup::Alloc) {
        caps.set_can_get_line_numbers(1);
    }
    if plan.samples {
        // Only for the monitors a BLOCKED tick lists; an attached agent
        // of JDK 17 does not get it, and samples go without.
        if potential.is_none_or(|p| p.can_get_owned_monitor_stack_depth_info() != 0) {
            caps.set_can_get_owned_monitor_stack_depth_info(1);
        }
    }
    caps
}

/// The capabilities the agent may ask for, by name, for error messages.
type CapabilityBit = fn(&sys::jvmtiCapabilities) -> u32;
const CAPABILITY_NAMES: [(&str, CapabilityBit); 14] = [
    ("can_tag_objects", sys::jvmtiCapabilities::can_tag_objects),
    (
        "can_generate_method_entry_events",
        sys::jvmtiCapabilities::can_generate_method_entry_events,
    ),
    (
        "can_generate_method_exit_events",
        sys::jvmtiCapabilities::can_generate_method_exit_events,
    ),
    (
        "can_access_local_variables",
        sys::jvmtiCapabilities::can_access_local_variables,
    ),
    (
        "can_get_bytecodes",
        sys::jvmtiCapabilities::can_get_bytecodes,
    ),
    (
        "can_generate_single_step_events",
        sys::jvmtiCapabilities::can_generate_single_step_events,
    ),
    (
        "can_get_constant_pool",
        sys::jvmtiCapabilities::can_get_constant_pool,
    ),
    (
        "can_get_line_numbers",
        sys::jvmtiCapabilities::can_get_line_numbers,
    ),
    (
        "can_generate_exception_events",
        sys::jvmtiCapabilities::can_generate_exception_events,
    ),
    (
        "can_generate_monitor_events",
        sys::jvmtiCapabilities::can_generate_monitor_events,
    ),
    (
        "can_get_monitor_info",
        sys::jvmtiCapabilities::can_get_monitor_info,
    ),
    (
        "can_generate_garbage_collection_events",
        sys::jvmtiCapabilities::can_generate_garbage_collection_events,
    ),
    (
        "can_get_source_file_name",
        sys::jvmtiCapabilities::can_get_source_file_name,
    ),
    (
        "can_get_owned_monitor_stack_depth_info",
        sys::jvmtiCapabilities::can_get_owned_monitor_stack_depth_info,
    ),
];

fn missing_capabilities(
    wanted: &sys::jvmtiCapabilities,
    potential: &sys::jvmtiCapabilities,
) -> Vec<&'static str> {
    CAPABILITY_NAMES
        .iter()
        .filter(|(_, has)| has(wanted) != 0 && has(potential) == 0)
        .map(|(name, _)| *name)
        .collect()
}

impl Agent {
    /// VMInit (or attach): resolve fields, go live, switch on the
    /// asked-for events.
    pub fn start_recording(&'static self, jni: Jni) {
        let _ = self.fields.set(Fields::resolve(jni));
        self.phase.store(LIVE, Ordering::Release);
        let plan = Plan::new(&self.options);
        // Before anything is recorded: a virtual thread's first event
        // needs its state in place.
        crate::vthreads::start(self);
        crate::pinning::start(self, jni);
        // Thread start and end also keep per-thread state apart: always on.
        let mut events = vec![sys::JVMTI_EVENT_THREAD_START, sys::JVMTI_EVENT_THREAD_END];
        if plan.classes {
            events.push(sys::JVMTI_EVENT_CLASS_PREPARE);
        }
        if plan.exception_events {
            events.push(sys::JVMTI_EVENT_EXCEPTION);
        }
        if plan.exceptions {
            events.push(sys::JVMTI_EVENT_EXCEPTION_CATCH);
        }
        if plan.locks {
            events.extend(MONITOR_EVENTS);
        }
        if plan.gc {
            events.extend(GC_EVENTS);
        }
        if plan.bytecode {
            events.push(sys::JVMTI_EVENT_SINGLE_STEP);
        }
        for e in events {
            if let Err(err) = self.jvmti.set_event(true, e) {
                self.problems.jvmti(err);
            }
        }
        crate::alloc_sampler::start(self);
        if plan.calls {
            if let Err(err) = crate::metrics::start(self, jni) {
                self.problems.capture(|| err);
            }
            crate::calibrate::record(self, jni);
            if !self.options.depth.is_all() || self.options.adapt.is_some() {
                // The window the CALL/RETURN events of this recording keep.
                let window = vmview_format::EventKind::TraceWindow {
                    min_depth: self.options.depth.min,
                    max_depth: self.options.depth.max,
                    reason: vmview_format::WindowReason::Start,
                    rate_per_s: 0,
                };
                let time = clock::now_ns();
                crate::threads::with_state(self, Some((jni, std::ptr::null_mut())), |s| {
                    s.emit(self, time, window)
                });
            }
            if self.options.period.is_some() {
                // Off until the sampler thread begins the first period.
                self.tracing.store(TRACING_OFF, Ordering::Relaxed);
            }
            if let Err(err) = self.capture.start(self, jni) {
                self.problems.capture(|| err);
            }
        }
        if plan.reactions && !plan.calls {
            if let Err(err) = self.capture.start(self, jni) {
                self.problems.capture(|| err);
            }
        }
        if plan.samples || crate::sampler::wanted(self, plan.calls) {
            crate::sampler::start(self, jni);
        }
        if crate::budget::wanted(self, plan.calls) {
            crate::budget::start(self, jni);
        }
    }

    /// VMDeath or unload: stop events, let the writer drain everything and
    /// finish the file, report problems once.
    pub fn stop_recording(&self) {
        // Before the writer's last drain, so no SAMPLE comes after it.
        crate::sampler::stop(self);
        crate::budget::stop(self);
        if self.options.reactions
            && !self.reactions.is_chosen()
            && self.is_live()
            && !self.options.quiet
            && !self.attached
        {
            crate::problems::say(&format!(
                "reactions: the JVM ended after {:.1}s, before the {} warm-up ended: no handler was chosen or timed (the samples are in the trace; shorten it with reactions-after=)",
                clock::now_ns().saturating_sub(self.time_origin_ns) as f64 / 1e9,
                duration_text(self.options.reactions_after)
            ));
        }
        if self.phase.swap(STOPPED, Ordering::AcqRel) == LIVE {
            self.capture.stop(self.jvmti);
            crate::pinning::stop(self);
            crate::vthreads::stop(self.jvmti);
            for e in ALL_EVENTS {
                let _ = self.jvmti.set_event(false, e);
            }
        }
        let writer = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(w) = writer {
            w.stop_and_join();
        }
        self.report();
    }

    /// Prints the problems once on the JVM's stderr. An attached
    /// recording leaves the JVM's output alone: `vmview attach PID stop`
    /// shows them ([`Agent::problem_lines`]).
    fn report(&self) {
        if self.reported.swap(true, Ordering::AcqRel) || self.options.quiet || self.attached {
            return;
        }
        for line in self.problem_lines() {
            crate::problems::say(&line);
        }
    }

    /// What went wrong while recording, one line each.
    pub fn problem_lines(&self) -> Vec<String> {
        let mut lines = self
            .problems
            .report(self.buffers.dropped(), self.options.buffer);
        lines.extend(crate::budget::summary(self));
        let unrecorded = crate::vthreads::unrecorded();
        if unrecorded > 0 {
            lines.push(format!(
                "{unrecorded} virtual threads started after the first {} have no THREAD_START/THREAD_END (their other events are recorded)",
                crate::vthreads::RECORDED_STARTS
            ));
        }
        lines
    }
}

const MONITOR_EVENTS: [sys::jvmtiEvent; 4] = [
    sys::JVMTI_EVENT_MONITOR_CONTENDED_ENTER,
    sys::JVMTI_EVENT_MONITOR_CONTENDED_ENTERED,
    sys::JVMTI_EVENT_MONITOR_WAIT,
    sys::JVMTI_EVENT_MONITOR_WAITED,
];

const GC_EVENTS: [sys::jvmtiEvent; 2] = [
    sys::JVMTI_EVENT_GARBAGE_COLLECTION_START,
    sys::JVMTI_EVENT_GARBAGE_COLLECTION_FINISH,
];

const ALL_EVENTS: [sys::jvmtiEvent; 14] = [
    sys::JVMTI_EVENT_SINGLE_STEP,
    sys::JVMTI_EVENT_THREAD_START,
    sys::JVMTI_EVENT_THREAD_END,
    sys::JVMTI_EVENT_CLASS_PREPARE,
    sys::JVMTI_EVENT_EXCEPTION,
    sys::JVMTI_EVENT_EXCEPTION_CATCH,
    sys::JVMTI_EVENT_MONITOR_CONTENDED_ENTER,
    sys::JVMTI_EVENT_MONITOR_CONTENDED_ENTERED,
    sys::JVMTI_EVENT_MONITOR_WAIT,
    sys::JVMTI_EVENT_MONITOR_WAITED,
    sys::JVMTI_EVENT_GARBAGE_COLLECTION_START,
    sys::JVMTI_EVENT_GARBAGE_COLLECTION_FINISH,
    sys::JVMTI_EVENT_VM_INIT,
    sys::JVMTI_EVENT_VM_DEATH,
];
