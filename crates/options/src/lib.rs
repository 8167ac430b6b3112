//! The vmview agent's option language, shared by the agent (which parses the
//! string after `-agentpath:…=`) and the CLI (which lists the options in
//! `--help` and turns `vmview record --NAME VALUE` into `NAME=VALUE`).
//!
//! It is pure Rust with no FFI so both sides agree on one grammar and it can
//! be tested without a JVM.
//!
//! # Syntax
//!
//! Options are `key=value` pairs separated by commas, as in async-profiler:
//!
//! ```text
//! file=trace-%p.vmv,classes=com.acme.*+shop.Inventory,exclude=com.acme.gen.*,events=calls+exceptions
//! ```
//!
//! Since the comma separates options, **list items are separated by `+`**
//! (no shell quoting needed); `;` is accepted as well. A flag such as `quiet`
//! may stand alone or take `true`/`false`. When an option is repeated, the
//! last one wins. [`OPTIONS`] lists every option with its help line.
//!
//! Value types have reusable parsers: [`parse_size`] (`64m`, `512k`, `1g`),
//! [`parse_duration`] (`10ms`, `1s`), [`parse_bool`], [`split_list`].
//!
//! The helpers every crate shares live here too, so that a glob, a file
//! pattern or a duration means and prints the same everywhere: [`Glob`],
//! [`split_file_pattern`], [`duration_text`], [`duration_exact`],
//! [`duration_short`].

#![forbid(unsafe_code)]

/// Native `Class.method` globs that count as I/O: socket and file reads
/// and writes, accept and connect, NIO select/poll/epoll. `io=` adds more.
/// The agent's sampler and the JFR reader (`jdk.NativeMethodSample`)
/// classify samples with this list and [`BUILTIN_WAIT`].
pub const BUILTIN_IO: &[&str] = &[
    "java.net.SocketInputStream.socketRead0",
    "java.net.SocketOutputStream.socketWrite0",
    "java.net.PlainSocketImpl.socketAccept",
    "java.net.PlainSocketImpl.accept0",
    "java.net.PlainDatagramSocketImpl.receive0",
    "java.io.FileInputStream.readBytes",
    "java.io.FileInputStream.read0",
    "java.io.FileOutputStream.writeBytes",
    "java.io.FileOutputStream.write",
    "java.io.RandomAccessFile.readBytes",
    "java.io.RandomAccessFile.read0",
    "java.io.RandomAccessFile.writeBytes",
    "sun.nio.ch.*.read0",
    "sun.nio.ch.*.readv0",
    "sun.nio.ch.*.pread0",
    "sun.nio.ch.*.write0",
    "sun.nio.ch.*.writev0",
    "sun.nio.ch.*.pwrite0",
    "sun.nio.ch.*.accept0",
    "sun.nio.ch.*.receive0",
    "sun.nio.ch.*.send0",
    "sun.nio.ch.*.transferTo0",
    "sun.nio.ch.Net.poll",
    "sun.nio.ch.Net.pollConnect",
    "sun.nio.ch.Net.accept",
    "sun.nio.ch.Net.connect0",
    "sun.nio.ch.EPoll.wait",
    "sun.nio.ch.KQueue.poll",
    "sun.nio.fs.LinuxWatchService.poll",
    "sun.awt.X11.XToolkit.waitForEvents",
];

/// Native `Class.method` globs that wait although JVMTI reports the thread
/// RUNNABLE (the JDK's service threads). `wait=` adds more.
pub const BUILTIN_WAIT: &[&str] = &[
    // Reference Handler (JDK 9+): blocks in the VM on the heap lock until a
    // GC hands over discovered references; its state bits say RUNNABLE and
    // not even IN_NATIVE.
    "java.lang.ref.Reference.waitForReferencePendingList",
    // process reaper: waitpid() for a child process.
    "java.lang.ProcessHandleImpl.waitForProcessExit0",
    "java.lang.UNIXProcess.waitForProcessExit",
    // JDK 24+: the VirtualThread-unblocker waits in the VM for virtual
    // threads to unblock.
    "java.lang.VirtualThread.takeVirtualThreadListToUnblock",
];

mod duration;
mod filter;
mod glob;

pub use duration::{duration_exact, duration_short, duration_text};
pub use filter::{ClassFilter, GlobError};
pub use glob::{glob_matches, Glob};

use std::fmt;
use std::time::Duration;

/// One known agent option: what the CLI shows in `--help` and how the
/// parser applies it.
pub struct OptionSpec {
    /// The key, as written before `=` (and as the CLI's `--NAME` flag).
    pub name: &'static str,
    /// Placeholder for the value in help texts (`GLOBS`, `SIZE` …), or
    /// `None` for a flag that takes no value.
    pub value: Option<&'static str>,
    /// The default, as it would be written in an option string.
    pub default: Option<&'static str>,
    /// One line of help.
    pub help: &'static str,
    apply: fn(&mut AgentOptions, &str) -> Result<(), String>,
}

impl OptionSpec {
    /// True for a flag (`quiet`) that needs no value.
    pub fn is_flag(&self) -> bool {
        self.value.is_none()
    }
}

impl fmt::Debug for OptionSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OptionSpec")
            .field("name", &self.name)
            .field("value", &self.value)
            .field("default", &self.default)
            .finish_non_exhaustive()
    }
}

/// Every option the agent knows, in the order `--help` shows them. Adding an
/// option is one entry here plus its field in [`AgentOptions`].
pub const OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        name: "file",
        value: Some("PATH"),
        default: Some(DEFAULT_FILE),
        help: "trace file to write; %p = process id, %t = start time YYYYMMDD-HHMMSS, %% = %",
        apply: |o, v| {
            check_file_pattern(v)?;
            o.file = v.to_string();
            Ok(())
        },
    },
    OptionSpec {
        name: "classes",
        value: Some("GLOBS"),
        default: None,
        help: "trace classes, '+'-separated: com.acme.* (package and subpackages), shop.Inventory (exact), * and ? wildcards",
        apply: |o, v| {
            o.classes = ClassFilter::parse(v).map_err(|e| e.to_string())?;
            Ok(())
        },
    },
    OptionSpec {
        name: "exclude",
        value: Some("GLOBS"),
        default: None,
        help: "classes never traced even when 'classes' matches them (same globs)",
        apply: |o, v| {
            o.exclude = ClassFilter::parse(v).map_err(|e| e.to_string())?;
            Ok(())
        },
    },
    OptionSpec {
        name: "events",
        value: Some("LIST"),
        default: Some("calls+exceptions+threads+locks+gc"),
        help: "events to record, '+'-separated: calls, exceptions, threads, classes, locks, gc, samples, bytecode, alloc (allocation samples), monitors (or all = all but samples, bytecode, alloc and monitors, default)",
        apply: |o, v| {
            o.events = EventSet::parse(v)?;
            Ok(())
        },
    },
    OptionSpec {
        name: "exceptions",
        value: Some("traced|all"),
        default: Some("traced"),
        help: "which exceptions: those thrown or caught in trace classes, or all",
        apply: |o, v| {
            o.exceptions = match v {
                "traced" => ExceptionScope::Traced,
                "all" => ExceptionScope::All,
                _ => return Err(format!("expected 'traced' or 'all', got '{v}'")),
            };
            Ok(())
        },
    },
    OptionSpec {
        name: "mode",
        value: Some("bci|jvmti"),
        default: Some("bci"),
        help: "how calls are captured: bci (probe calls inserted into trace classes as they load; fast) or jvmti (JVMTI method events; interpreter only, 70-100x slower; the default with events=...+bytecode)",
        apply: |o, v| {
            o.mode = match v {
                "bci" => CaptureMode::Bci,
                "jvmti" => CaptureMode::Jvmti,
                _ => return Err(format!("expected 'bci' or 'jvmti', got '{v}'")),
            };
            Ok(())
        },
    },
    OptionSpec {
        name: "args",
        value: Some("on|off"),
        default: Some("on"),
        help: "record argument and return values of traced calls (off: CALL and RETURN carry no values)",
        apply: |o, v| {
            o.args = parse_bool(v)?;
            Ok(())
        },
    },
    OptionSpec {
        name: "strings",
        value: Some("N"),
        default: Some("256"),
        help: "characters kept of a String value (longer ones are cut, their length kept)",
        apply: |o, v| {
            o.strings = parse_count(v, MAX_STRINGS)?;
            Ok(())
        },
    },
    OptionSpec {
        name: "buffer",
        value: Some("SIZE"),
        default: Some("64m"),
        help: "memory for events not yet written (k, m, g); events past it are dropped and counted",
        apply: |o, v| {
            let n = parse_size(v)?;
            if n < MIN_BUFFER {
                return Err(format!("'{v}' is too small (at least 64k)"));
            }
            o.buffer = n;
            Ok(())
        },
    },
    OptionSpec {
        name: "flush",
        value: Some("DURATION"),
        default: Some("1s"),
        help: "longest time between two writes to the file (ns, us, ms, s): what a crash can lose",
        apply: |o, v| {
            let d = parse_duration(v)?;
            if d < Duration::from_millis(1) {
                return Err(format!("'{v}' is too short (at least 1ms)"));
            }
            o.flush = d;
            Ok(())
        },
    },
    OptionSpec {
        name: "format",
        value: Some("1|2"),
        default: Some("1"),
        help: "trace format version written: 1, or 2 (one stream per thread in each chunk, docs/FORMAT.md); every vmview reading command reads both",
        apply: |o, v| {
            o.format = match v {
                "1" => 1,
                "2" => 2,
                _ => return Err(format!("expected 1 or 2, got '{v}'")),
            };
            Ok(())
        },
    },
    OptionSpec {
        name: "depth",
        value: Some("MIN..MAX"),
        default: Some("1.."),
        help: "trace only calls whose stack depth (frames from the thread's base, 1 = its first) lies in MIN..MAX; MAX may be left out (no bound)",
        apply: |o, v| {
            o.depth = DepthWindow::parse(v)?;
            Ok(())
        },
    },
    OptionSpec {
        name: "adapt",
        value: Some("RATE"),
        default: None,
        help: "keep the CALL/RETURN rate near RATE events per second (200k/s, 1m/s) by moving the depth window's deep end: narrower when the rate is over twice RATE, wider again when under half; each move is a TRACE_WINDOW event",
        apply: |o, v| {
            let rate = v.strip_suffix("/s").unwrap_or(v);
            let (digits, unit) = split_number(rate);
            let n: u64 = digits
                .parse()
                .map_err(|_| format!("expected an event rate such as 200k/s, got '{v}'"))?;
            let scale = match unit.to_ascii_lowercase().as_str() {
                "" => 1,
                "k" => 1_000,
                "m" => 1_000_000,
                _ => return Err(format!("unknown unit '{unit}' in '{v}' (use k or m, as in 200k/s)")),
            };
            if n == 0 {
                return Err("adapt=0 would trace nothing: give a rate such as 200k/s".to_string());
            }
            o.adapt = Some(n.saturating_mul(scale));
            Ok(())
        },
    },
    OptionSpec {
        name: "budget",
        value: Some("PERCENT"),
        default: Some("10%"),
        help: "keep the tracer's estimated overhead under PERCENT of the JVM's CPU time (calibrated cost x calls per second): past it, the methods that cost most for least information (very frequent calls averaging under 10us) are demoted to a call counter, each a DEMOTION event, their counts in METHOD_COUNTS; off traces everything (docs/BUDGET.md)",
        apply: |o, v| {
            o.budget_bp = parse_budget(v)?;
            Ok(())
        },
    },
    OptionSpec {
        name: "metrics",
        value: Some("LIST"),
        default: Some("wall"),
        help: "what each CALL and RETURN measures, '+'-separated (',' also with vmview record): wall (always), cpu (the thread's CPU time), alloc (bytes the thread allocated); vmview calltree reports each per node",
        apply: |o, v| {
            o.metrics = MetricSet::parse(v)?;
            Ok(())
        },
    },
    OptionSpec {
        name: "period",
        value: Some("ON/OFF"),
        default: None,
        help: "trace calls in periods, e.g. 100ms/900ms: CALL/RETURN for ON, then none for OFF (samples go on), repeated; each period starts with every thread's stack (PERIOD_START) and ends with PERIOD_END; vmview calltree --per-period shows one tree per period",
        apply: |o, v| {
            o.period = Some(TracePeriod::parse(v)?);
            Ok(())
        },
    },
    OptionSpec {
        name: "interval",
        value: Some("DURATION"),
        default: Some("10ms"),
        help: "time between two stack samples of every thread with events=...+samples (ns, us, ms, s)",
        apply: |o, v| {
            let d = parse_duration(v)?;
            if d < Duration::from_micros(100) {
                return Err(format!("'{v}' is too short (at least 100us)"));
            }
            o.interval = d;
            Ok(())
        },
    },
    OptionSpec {
        name: "sampler",
        value: Some("signal|cpu|safepoint"),
        default: Some("signal"),
        help: "how events=samples walks stacks: signal (wall-clock samples: each interval the sampler thread signals every thread, a rotating subset of 32 when there are more, and the thread walks its own stack with AsyncGetCallTrace, no safepoint), cpu (the same walk from a per-thread CPU-time timer: samples of running threads only, weighted by CPU time) or safepoint (one GetAllStackTraces per interval: stops the JVM, lands on safepoint polls); signal and cpu fall back to safepoint where AsyncGetCallTrace is missing, and the trace header's 'sampler' says which ran",
        apply: |o, v| {
            o.sampler = match v {
                "signal" | "wall" => SamplerKind::Signal,
                "cpu" => SamplerKind::Cpu,
                "safepoint" => SamplerKind::Safepoint,
                _ => return Err(format!("expected 'signal', 'cpu' or 'safepoint', got '{v}'")),
            };
            Ok(())
        },
    },
    OptionSpec {
        name: "alloc-interval",
        value: Some("SIZE"),
        default: Some("512k"),
        help: "with events=...+alloc: about one allocation sample per SIZE bytes each thread allocates (k, m, g)",
        apply: |o, v| {
            let n = parse_size(v)?;
            if n == 0 || n > i32::MAX as u64 {
                return Err(format!("'{v}' is out of range (1 byte to 2g)"));
            }
            o.alloc_interval = n;
            Ok(())
        },
    },
    OptionSpec {
        name: "io",
        value: Some("GLOBS"),
        default: None,
        help: "more Class.method globs that count as I/O when a sampled thread runs native code in them (adds to the built-in list)",
        apply: |o, v| {
            o.io = ClassFilter::parse(v).map_err(|e| e.to_string())?;
            Ok(())
        },
    },
    OptionSpec {
        name: "wait",
        value: Some("GLOBS"),
        default: None,
        help: "more native Class.method globs that block without JVMTI saying so: a sampled runnable thread whose top frame is one of them is WAIT (adds to the built-in list)",
        apply: |o, v| {
            o.wait = ClassFilter::parse(v).map_err(|e| e.to_string())?;
            Ok(())
        },
    },
    OptionSpec {
        name: "reactions",
        value: None,
        default: None,
        help: "find the event handlers from stack samples during a warm-up (reactions-after), then instrument just those methods and record each call's latency (implies events=...+samples; vmview reactions reports them)",
        apply: |o, v| {
            o.reactions = parse_bool(v)?;
            Ok(())
        },
    },
    OptionSpec {
        name: "reactions-after",
        value: Some("DURATION"),
        default: Some("5s"),
        help: "with reactions: how long to sample before choosing the handlers to time (ns, us, ms, s)",
        apply: |o, v| {
            let d = parse_duration(v)?;
            if d < Duration::from_millis(10) {
                return Err(format!("'{v}' is too short (at least 10ms: the handlers are found from samples)"));
            }
            o.reactions_after = d;
            Ok(())
        },
    },
    OptionSpec {
        name: "handler",
        value: Some("GLOBS"),
        default: None,
        help: "with reactions: also time the methods matching these '+'-separated Class.method globs when they appear in the warm-up's samples, e.g. javax.servlet.http.HttpServlet.service (a framework's dispatch method as the event boundary)",
        apply: |o, v| {
            o.handler = ClassFilter::parse(v).map_err(|e| e.to_string())?;
            Ok(())
        },
    },
    OptionSpec {
        name: "frameworks",
        value: Some("FILE"),
        default: None,
        help: "with reactions: more framework profiles for the warm-up's detection, a file of FRAMEWORK KIND GLOB lines (see vmview reactions --help; vmview reactions takes the same file with --frameworks)",
        apply: |o, v| {
            if v.is_empty() {
                return Err("expected a file of framework profiles".to_string());
            }
            o.frameworks = Some(v.to_string());
            Ok(())
        },
    },
    OptionSpec {
        name: "app",
        value: Some("PATHS"),
        default: None,
        help: "with samples: the class path entries (directories or jars, ':'-separated) that hold the application; its classes are user code for vmview reactions, all others library code [default: the class path's directories and the -jar or main class's jar]",
        apply: |o, v| {
            let paths: Vec<String> = v
                .split(':')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect();
            if paths.is_empty() {
                return Err("expected one or more paths, ':'-separated".to_string());
            }
            o.app = paths;
            Ok(())
        },
    },
    OptionSpec {
        name: "quiet",
        value: None,
        default: None,
        help: "print nothing on stderr except errors that stop the JVM",
        apply: |o, v| {
            o.quiet = parse_bool(v)?;
            Ok(())
        },
    },
];

/// The default trace file name.
pub const DEFAULT_FILE: &str = "vmview-%p.vmv";
const MAX_STRINGS: u64 = 1 << 20;
const MIN_BUFFER: u64 = 64 << 10;

/// The option named `name`, if the agent knows it.
pub fn option(name: &str) -> Option<&'static OptionSpec> {
    OPTIONS.iter().find(|o| o.name == name)
}

/// Everything the agent was asked to do.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentOptions {
    /// Trace file pattern; expand it with [`expand_file_pattern`].
    pub file: String,
    /// Trace classes. Empty: no class is traced.
    pub classes: ClassFilter,
    /// Classes never traced.
    pub exclude: ClassFilter,
    pub events: EventSet,
    pub exceptions: ExceptionScope,
    /// How calls of trace-class methods are observed.
    pub mode: CaptureMode,
    /// Whether CALL and RETURN carry argument and return values.
    pub args: bool,
    /// Characters kept of a `String` value.
    pub strings: u32,
    /// Memory budget for buffered events, bytes.
    pub buffer: u64,
    /// Longest interval between two chunk flushes.
    pub flush: Duration,
    /// Trace format version written (`format=`): 1 or 2.
    pub format: u16,
    /// Time between two stack samples (with [`EventGroup::Samples`]).
    pub interval: Duration,
    /// How stacks are sampled (`sampler=`).
    pub sampler: SamplerKind,
    /// Mean bytes between two allocation samples (`alloc-interval=`).
    pub alloc_interval: u64,
    /// The depths whose calls are traced (`depth=`).
    pub depth: DepthWindow,
    /// Target CALL+RETURN rate, events per second (`adapt=`).
    pub adapt: Option<u64>,
    /// The overhead budget (`budget=`), in basis points of the JVM's CPU
    /// time; `None` for `budget=off`.
    pub budget_bp: Option<u32>,
    /// Thread counters recorded on CALL and RETURN (`metrics=`).
    pub metrics: MetricSet,
    /// Tracing periods (`period=`): calls traced only during ON.
    pub period: Option<TracePeriod>,
    /// Extra `Class.method` globs whose native frames count as I/O.
    pub io: ClassFilter,
    /// Extra native `Class.method` globs that count as waiting (`wait=`).
    pub wait: ClassFilter,
    /// Time the event handlers found after a warm-up (`reactions`).
    pub reactions: bool,
    /// The warm-up of `reactions`: sampling only, before handlers are chosen.
    pub reactions_after: Duration,
    /// `Class.method` globs timed as handlers too (`handler=`).
    pub handler: ClassFilter,
    /// The application's class path entries (`app=`); empty: guessed.
    pub app: Vec<String>,
    /// A file of more framework profiles (`frameworks=`).
    pub frameworks: Option<String>,
    pub quiet: bool,
}

/// The default overhead budget, 10 %: see docs/BUDGET.md for why.
pub const DEFAULT_BUDGET_BP: u32 = 1_000;

/// `budget=`: `off`, or a percentage (`5%`, `2.5`) over 0 and at most 1000.
fn parse_budget(v: &str) -> Result<Option<u32>, String> {
    if v.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let digits = v.strip_suffix('%').unwrap_or(v);
    let pct: f64 = digits
        .parse()
        .ok()
        .filter(|p: &f64| p.is_finite())
        .ok_or_else(|| format!("expected a percentage such as 10% or off, got '{v}'"))?;
    if pct <= 0.0 {
        return Err(format!(
            "budget={v} would demote every method: give a percentage such as 10%, or off to trace everything"
        ));
    }
    if pct > 1000.0 {
        return Err(format!(
            "budget={v} is over 1000%: give off to trace everything"
        ));
    }
    Ok(Some(((pct * 100.0).round() as u32).max(1)))
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            file: DEFAULT_FILE.to_string(),
            classes: ClassFilter::default(),
            exclude: ClassFilter::default(),
            events: EventSet::DEFAULT,
            exceptions: ExceptionScope::Traced,
            mode: CaptureMode::Bci,
            args: true,
            strings: 256,
            buffer: 64 << 20,
            flush: Duration::from_secs(1),
            format: 1,
            interval: Duration::from_millis(10),
            sampler: SamplerKind::Signal,
            alloc_interval: 512 << 10,
            depth: DepthWindow::ALL,
            adapt: None,
            budget_bp: Some(DEFAULT_BUDGET_BP),
            metrics: MetricSet::default(),
            period: None,
            io: ClassFilter::default(),
            wait: ClassFilter::default(),
            reactions: false,
            reactions_after: Duration::from_secs(5),
            handler: ClassFilter::default(),
            app: Vec::new(),
            frameworks: None,
            quiet: false,
        }
    }
}

impl AgentOptions {
    /// Parses an agent option string (the part after `=` in
    /// `-agentpath:LIB=OPTIONS`). An empty string gives the defaults.
    pub fn parse(s: &str) -> Result<AgentOptions, OptionError> {
        let mut opts = AgentOptions::default();
        let mut mode_given = false;
        for item in s.split(',') {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (item, None),
            };
            let spec = option(key).ok_or_else(|| OptionError::unknown(key))?;
            mode_given |= spec.name == "mode";
            let value = match (value, spec.is_flag()) {
                (Some(v), _) => v,
                (None, true) => "true",
                (None, false) => {
                    let mut message = format!("needs a value ({})", spec.value.unwrap_or("VALUE"));
                    if EventGroup::from_name(key).is_some() {
                        message += &format!("; to list events write events=calls+{key}");
                    }
                    return Err(OptionError::Invalid {
                        option: spec.name,
                        message,
                    });
                }
            };
            (spec.apply)(&mut opts, value).map_err(|message| OptionError::Invalid {
                option: spec.name,
                message,
            })?;
        }
        // Single-stepping a rewritten class would show the probe's calls,
        // at offsets javac never wrote; stepping forces the interpreter
        // anyway, so JVMTI method events cost little more.
        if opts.events.contains(EventGroup::Bytecode) && opts.mode == CaptureMode::Bci {
            if mode_given {
                return Err(OptionError::Invalid {
                    option: "mode",
                    message: "events=bytecode needs mode=jvmti (single-stepping classes rewritten by mode=bci would show vmview's probe calls); drop mode=bci".to_string(),
                });
            }
            opts.mode = CaptureMode::Jvmti;
        }
        // Monitors are seen by instrumenting monitorenter/monitorexit.
        if opts.events.contains(EventGroup::Monitors) && !opts.events.contains(EventGroup::Calls) {
            return Err(OptionError::Invalid {
                option: "events",
                message: "events=monitors reports monitors held by traced calls: add calls (events=calls+monitors)".to_string(),
            });
        }
        if opts.events.contains(EventGroup::Monitors) && opts.mode != CaptureMode::Bci {
            return Err(OptionError::Invalid {
                option: "events",
                message: "events=monitors needs mode=bci (monitorenter and monitorexit are instrumented in rewritten classes); drop mode=jvmti or monitors".to_string(),
            });
        }
        // The handlers are found from samples and timed by the bytecode
        // rewriter, restricted to their methods.
        if opts.reactions {
            if opts.mode != CaptureMode::Bci {
                return Err(OptionError::Invalid {
                    option: "reactions",
                    message: "reactions times the handlers with bytecode instrumentation (mode=bci); drop mode=jvmti and events=bytecode".to_string(),
                });
            }
            opts.events = opts.events.with(EventGroup::Samples);
        } else if !opts.handler.is_empty() {
            return Err(OptionError::Invalid {
                option: "handler",
                message: "handler= names methods for reactions to time; add reactions".to_string(),
            });
        }
        Ok(opts)
    }

    /// Whether methods of the class named `dotted` are traced: `classes`
    /// matches it and `exclude` does not.
    pub fn is_traced_class(&self, dotted: &str) -> bool {
        self.classes.matches(dotted) && !self.exclude.matches(dotted)
    }
}

/// A bad option string. The message names the option and says what is
/// accepted; the agent prints it on one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionError {
    #[error("unknown agent option '{name}' (known: {known}){hint}")]
    Unknown {
        name: String,
        known: String,
        /// Empty, or a sentence starting with `; ` that suggests a fix.
        hint: String,
    },
    #[error("{option}: {message}")]
    Invalid {
        option: &'static str,
        message: String,
    },
}

impl OptionError {
    fn unknown(name: &str) -> OptionError {
        let known = OPTIONS
            .iter()
            .map(|o| o.name)
            .collect::<Vec<_>>()
            .join(", ");
        let hint = if EventGroup::from_name(name).is_some() {
            format!("; separate list items with '+', e.g. events=calls+{name}")
        } else if let Some(close) = OPTIONS
            .iter()
            .map(|o| o.name)
            .find(|k| edit_distance(k, name) <= 2)
        {
            format!("; did you mean '{close}'?")
        } else {
            String::new()
        };
        OptionError::Unknown {
            name: name.to_string(),
            known,
            hint,
        }
    }

    /// The option the error is about, as the user wrote it.
    pub fn option(&self) -> &str {
        match self {
            OptionError::Unknown { name, .. } => name,
            OptionError::Invalid { option, .. } => option,
        }
    }
}

/// How `events=samples` walks the threads' stacks (`sampler=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SamplerKind {
    /// Wall-clock samples: the sampler thread signals the threads and each
    /// walks its own stack (`AsyncGetCallTrace`), without a safepoint.
    #[default]
    Signal,
    /// CPU samples: a per-thread CPU-time timer signals the thread.
    Cpu,
    /// One `GetAllStackTraces` per interval, at a safepoint.
    Safepoint,
}

impl SamplerKind {
    /// The name used in `sampler=`.
    pub fn name(self) -> &'static str {
        match self {
            SamplerKind::Signal => "signal",
            SamplerKind::Cpu => "cpu",
            SamplerKind::Safepoint => "safepoint",
        }
    }
}

/// A group of events that `events=` switches on or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventGroup {
    /// CALL and RETURN of methods in trace classes.
    Calls,
    /// THROW and CATCH.
    Exceptions,
    /// THREAD_START and THREAD_END.
    Threads,
    /// CLASS_LOAD.
    Classes,
    /// MONITOR_CONTENDED_ENTER/ENTERED and MONITOR_WAIT/WAITED.
    Locks,
    /// GC_START and GC_FINISH.
    Gc,
    /// SAMPLE: every thread's stack and state each `interval`. Not in
    /// `default` nor `all`: sampling is a mode of its own (reactions).
    Samples,
    /// BYTECODE: every instruction executed in trace-class methods, by
    /// JVMTI single-stepping (interpreter only). Not in `default` nor `all`.
    Bytecode,
    /// ALLOC_SAMPLE: about one allocation per `alloc-interval` bytes a
    /// thread allocates, with class, size and stack (JVMTI
    /// `SampledObjectAlloc`, JDK 11+). Not in `default` nor `all`.
    Alloc,
    /// MONITOR_ENTER and MONITOR_EXIT: monitors acquired and released by
    /// trace-class code (`synchronized` blocks and methods), instrumented
    /// in bci mode. Not in `default` nor `all`: it costs two probe calls
    /// per acquisition.
    Monitors,
}

impl EventGroup {
    pub const ALL: [EventGroup; 10] = [
        EventGroup::Calls,
        EventGroup::Exceptions,
        EventGroup::Threads,
        EventGroup::Classes,
        EventGroup::Locks,
        EventGroup::Gc,
        EventGroup::Samples,
        EventGroup::Bytecode,
        EventGroup::Alloc,
        EventGroup::Monitors,
    ];

    /// The name used in `events=`.
    pub fn name(self) -> &'static str {
        match self {
            EventGroup::Calls => "calls",
            EventGroup::Exceptions => "exceptions",
            EventGroup::Threads => "threads",
            EventGroup::Classes => "classes",
            EventGroup::Locks => "locks",
            EventGroup::Gc => "gc",
            EventGroup::Samples => "samples",
            EventGroup::Bytecode => "bytecode",
            EventGroup::Alloc => "alloc",
            EventGroup::Monitors => "monitors",
        }
    }

    pub fn from_name(name: &str) -> Option<EventGroup> {
        EventGroup::ALL.into_iter().find(|g| g.name() == name)
    }

    fn bit(self) -> u16 {
        1 << self as u16
    }
}

/// A set of [`EventGroup`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventSet(u16);

impl EventSet {
    pub const EMPTY: EventSet = EventSet(0);
    /// Everything but `classes`: a Hello World traced with `classes=Hello`
    /// stays a handful of events instead of hundreds of class loads.
    pub const DEFAULT: EventSet = EventSet(0b11_0111);
    /// Every group but `samples` and `bytecode`.
    pub const ALL: EventSet = EventSet(0b11_1111);

    pub fn contains(self, g: EventGroup) -> bool {
        self.0 & g.bit() != 0
    }

    pub fn with(self, g: EventGroup) -> EventSet {
        EventSet(self.0 | g.bit())
    }

    pub fn without(self, g: EventGroup) -> EventSet {
        EventSet(self.0 & !g.bit())
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn iter(self) -> impl Iterator<Item = EventGroup> {
        EventGroup::ALL
            .into_iter()
            .filter(move |g| self.contains(*g))
    }

    /// Parses a `+`- or `;`-separated list of group names; `all` and
    /// `default` stand for those sets.
    pub fn parse(list: &str) -> Result<EventSet, String> {
        let mut set = EventSet::EMPTY;
        for name in split_list(list) {
            set = match name {
                "all" => EventSet(set.0 | EventSet::ALL.0),
                "default" => EventSet(set.0 | EventSet::DEFAULT.0),
                _ => match EventGroup::from_name(name) {
                    Some(g) => set.with(g),
                    None => {
                        let known: Vec<&str> = EventGroup::ALL.iter().map(|g| g.name()).collect();
                        return Err(format!(
                            "unknown event '{name}' (known: {}, all, default)",
                            known.join(", ")
                        ));
                    }
                },
            };
        }
        if set.is_empty() {
            return Err("expected one or more events, e.g. calls+exceptions".to_string());
        }
        Ok(set)
    }
}

impl fmt::Display for EventSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(|g| g.name()).collect();
        f.write_str(&names.join("+"))
    }
}

/// The thread counters `metrics=` adds to CALL and RETURN. Wall time is
/// always measured (it is the event's time), so it is not a flag here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MetricSet {
    /// The thread's CPU time (user + system).
    pub cpu: bool,
    /// The bytes the thread allocated on the Java heap.
    pub alloc: bool,
}

impl MetricSet {
    /// Parses a `+`- or `;`-separated list of `wall`, `cpu`, `alloc`.
    pub fn parse(list: &str) -> Result<MetricSet, String> {
        let mut set = MetricSet::default();
        let mut any = false;
        for name in split_list(list) {
            any = true;
            match name {
                "wall" => {}
                "cpu" => set.cpu = true,
                "alloc" => set.alloc = true,
                _ => {
                    return Err(format!(
                        "unknown metric '{name}' (known: wall, cpu, alloc; e.g. metrics=cpu+alloc)"
                    ))
                }
            }
        }
        if !any {
            return Err("expected one or more metrics, e.g. cpu+alloc".to_string());
        }
        Ok(set)
    }

    /// Whether any counter beyond wall time is measured.
    pub fn any(self) -> bool {
        self.cpu || self.alloc
    }
}

impl fmt::Display for MetricSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("wall")?;
        if self.cpu {
            f.write_str("+cpu")?;
        }
        if self.alloc {
            f.write_str("+alloc")?;
        }
        Ok(())
    }
}

/// Which exceptions become THROW/CATCH events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExceptionScope {
    /// Those thrown or caught in a trace class.
    Traced,
    /// Every exception.
    All,
}

/// The call-stack depths whose calls are traced (`depth=MIN..MAX`): depth
/// 1 is a thread's first frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DepthWindow {
    pub min: u32,
    /// `None`: no bound.
    pub max: Option<u32>,
}

impl DepthWindow {
    /// Every depth.
    pub const ALL: DepthWindow = DepthWindow { min: 1, max: None };

    /// Parses `MIN..MAX`, `MIN..` or `..MAX`.
    pub fn parse(v: &str) -> Result<DepthWindow, String> {
        let Some((lo, hi)) = v.split_once("..") else {
            return Err(format!(
                "'{v}' is not a depth range: write MIN..MAX, MIN.. or ..MAX (for example 3..12)"
            ));
        };
        let number = |s: &str, default: Option<u32>| -> Result<Option<u32>, String> {
            let s = s.trim();
            if s.is_empty() {
                return Ok(default);
            }
            s.parse::<u32>()
                .map(Some)
                .map_err(|_| format!("'{s}' in depth range '{v}' is not a whole number"))
        };
        let min = number(lo, Some(1))?.unwrap_or(1);
        let max = number(hi, None)?;
        if min == 0 {
            return Err(format!(
                "depth range '{v}' starts at 0: depths count from 1 (a thread's first frame)"
            ));
        }
        if let Some(max) = max {
            if max < min {
                return Err(format!("depth range '{v}' is empty: {max} is below {min}"));
            }
        }
        Ok(DepthWindow { min, max })
    }

    pub fn contains(&self, depth: u32) -> bool {
        depth >= self.min && self.max.is_none_or(|m| depth <= m)
    }

    pub fn is_all(&self) -> bool {
        *self == DepthWindow::ALL
    }
}

/// Periodic tracing (`period=ON/OFF`): calls are traced for `on`, then
/// not for `off`, over and over, starting with an ON period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TracePeriod {
    pub on: Duration,
    pub off: Duration,
}

impl TracePeriod {
    /// Parses `ON/OFF`, two durations (`100ms/900ms`, `1s/4s`).
    pub fn parse(v: &str) -> Result<TracePeriod, String> {
        let Some((on, off)) = v.split_once('/') else {
            return Err(format!(
                "'{v}' is not a period: write ON/OFF, the time traced then the time not traced (for example 100ms/900ms)"
            ));
        };
        let on = parse_duration(on).map_err(|e| format!("ON in period '{v}': {e}"))?;
        let off = parse_duration(off).map_err(|e| format!("OFF in period '{v}': {e}"))?;
        if on < Duration::from_millis(1) {
            return Err(format!(
                "period '{v}' would trace nothing: ON must be at least 1ms (for example 100ms/900ms)"
            ));
        }
        if off < Duration::from_millis(1) {
            return Err(format!(
                "period '{v}' never stops tracing: OFF must be at least 1ms (leave period= out to trace all the time)"
            ));
        }
        Ok(TracePeriod { on, off })
    }
}

/// How the agent observes calls of trace-class methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureMode {
    /// Bytecode instrumentation: trace classes are rewritten as they load
    /// to call a probe at entry and exit. Untraced code runs at full speed.
    Bci,
    /// JVMTI MethodEntry/MethodExit events: sees every method, including
    /// JDK classes loaded before the agent and native methods, but runs
    /// every thread in the interpreter.
    Jvmti,
}

impl CaptureMode {
    /// The name used in `mode=`.
    pub fn name(self) -> &'static str {
        match self {
            CaptureMode::Bci => "bci",
            CaptureMode::Jvmti => "jvmti",
        }
    }
}

/// Splits a list value on `+` and `;`, trimming items and skipping empty ones.
pub fn split_list(list: &str) -> impl Iterator<Item = &str> {
    list.split(['+', ';'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// Parses `true`/`false` (also `yes`/`no`, `on`/`off`, `1`/`0`).
pub fn parse_bool(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" => Ok(true),
        "false" | "no" | "off" | "0" => Ok(false),
        _ => Err(format!("expected true or false, got '{v}'")),
    }
}

fn parse_count(v: &str, max: u64) -> Result<u32, String> {
    match v.parse::<u64>() {
        Ok(n) if n <= max => Ok(n as u32),
        Ok(_) => Err(format!("'{v}' is too large (at most {max})")),
        Err(_) => Err(format!("expected a whole number, got '{v}'")),
    }
}

/// Parses a size in bytes: a whole number with an optional binary unit
/// `k`, `m`, `g` (any case, optionally followed by `b` or `ib`):
/// `65536`, `512k`, `64m`, `1GiB`.
pub fn parse_size(v: &str) -> Result<u64, String> {
    let (digits, unit) = split_number(v);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("expected a size such as 64m or 512k, got '{v}'"))?;
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => {
            return Err(format!(
                "unknown size unit '{unit}' in '{v}' (use k, m or g)"
            ))
        }
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("'{v}' is too large"))
}

/// Parses a duration: a whole number followed by `ns`, `us`, `ms` or `s`
/// (`10ms`, `1s`). A unit is required, except for `0`.
pub fn parse_duration(v: &str) -> Result<Duration, String> {
    let (digits, unit) = split_number(v);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("expected a duration such as 10ms or 1s, got '{v}'"))?;
    let d = match unit {
        "ns" => Duration::from_nanos(n),
        "us" | "µs" => Duration::from_micros(n),
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "" if n == 0 => Duration::ZERO,
        "" => return Err(format!("'{v}' needs a unit (ns, us, ms, s), e.g. {v}ms")),
        _ => {
            return Err(format!(
                "unknown duration unit '{unit}' in '{v}' (use ns, us, ms or s)"
            ))
        }
    };
    Ok(d)
}

fn split_number(v: &str) -> (&str, &str) {
    let v = v.trim();
    let end = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    (&v[..end], v[end..].trim())
}

/// A wall-clock time broken into calendar fields, for `%t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CivilTime {
    pub year: i32,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
}

impl CivilTime {
    /// The calendar time `secs` seconds after the Unix epoch, shifted by
    /// `utc_offset_secs` (the local zone's offset; 0 for UTC).
    pub fn from_unix(secs: i64, utc_offset_secs: i64) -> CivilTime {
        let t = secs + utc_offset_secs;
        let days = t.div_euclid(86_400);
        let rem = t.rem_euclid(86_400);
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = (yoe + era * 400 + i64::from(month <= 2)) as i32;
        CivilTime {
            year,
            month,
            day,
            hour: (rem / 3600) as u32,
            minute: (rem / 60 % 60) as u32,
            second: (rem % 60) as u32,
        }
    }
}

fn check_file_pattern(p: &str) -> Result<(), String> {
    if p.is_empty() {
        return Err("expected a file name".to_string());
    }
    let mut chars = p.chars();
    while let Some(c) = chars.next() {
        if c == '%' {
            match chars.next() {
                Some('p' | 't' | '%') => {}
                Some(x) => return Err(format!("unknown placeholder '%{x}' (known: %p, %t, %%)")),
                None => return Err("'%' at the end (write %% for a literal %)".to_string()),
            }
        }
    }
    Ok(())
}

/// Where a recording goes when a live recording holds the trace file's
/// name: `STEM.PID.EXT` (`trace.vmv` → `trace.4242.vmv`). The agent chooses
/// it and `vmview record` looks for it, so both take it from here
/// (docs/RECORDING.md).
pub fn own_file_name(path: &str, pid: u32) -> String {
    let p = std::path::Path::new(path);
    match (p.file_stem(), p.extension()) {
        (Some(stem), Some(ext)) => p
            .with_file_name(format!(
                "{}.{pid}.{}",
                stem.to_string_lossy(),
                ext.to_string_lossy()
            ))
            .to_string_lossy()
            .into_owned(),
        _ => format!("{path}.{pid}"),
    }
}

/// Where a finished trace that held the name is moved when a new
/// recording takes it: `NAME.old`, as `perf record` keeps `perf.data.old`.
pub fn old_file_name(path: &str) -> String {
    format!("{path}.old")
}

/// Splits a `file=` pattern at each `%t`, with `%p` (process id) and `%%`
/// expanded in the pieces: `run-%p-%t.vmv` with pid 9 gives
/// `["run-9-", ".vmv"]`. One piece means the name holds no time; the agent
/// joins the pieces with its start time, and `vmview record`, which does
/// not know that time exactly, looks for a file whose name fits them.
pub fn split_file_pattern(pattern: &str, pid: u32) -> Vec<String> {
    let mut parts = vec![String::with_capacity(pattern.len() + 8)];
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        let out = parts.last_mut().expect("one part at least");
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('p') => out.push_str(&pid.to_string()),
            Some('t') => parts.push(String::new()),
            Some('%') => out.push('%'),
            Some(x) => {
                out.push('%');
                out.push(x);
            }
            None => out.push('%'),
        }
    }
    parts
}

/// Expands `%p` (process id), `%t` (start time `YYYYMMDD-HHMMSS`) and `%%`
/// in a `file=` pattern.
pub fn expand_file_pattern(pattern: &str, pid: u32, start: CivilTime) -> String {
    let time = format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}",
        start.year, start.month, start.day, start.hour, start.minute, start.second
    );
    split_file_pattern(pattern, pid).join(&time)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod depth_window_tests {
    use super::*;

    #[test]
    fn depth_ranges_parse_with_either_bound_left_out() {
        assert_eq!(
            DepthWindow::parse("3..12"),
            Ok(DepthWindow {
                min: 3,
                max: Some(12)
            })
        );
        assert_eq!(
            DepthWindow::parse("4.."),
            Ok(DepthWindow { min: 4, max: None })
        );
        assert_eq!(
            DepthWindow::parse("..6"),
            Ok(DepthWindow {
                min: 1,
                max: Some(6)
            })
        );
        assert!(DepthWindow::parse("1..").unwrap().is_all());
        let w = DepthWindow::parse("3..5").unwrap();
        assert!(!w.contains(2) && w.contains(3) && w.contains(5) && !w.contains(6));
        for bad in ["7", "0..3", "5..2", "a..3", "3..x"] {
            assert!(DepthWindow::parse(bad).is_err(), "{bad}");
        }
        let o = AgentOptions::parse("depth=2..9").unwrap();
        assert_eq!(
            o.depth,
            DepthWindow {
                min: 2,
                max: Some(9)
            }
        );
        let e = AgentOptions::parse("depth=9..2").unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
        assert_eq!(
            AgentOptions::parse("adapt=200k/s").unwrap().adapt,
            Some(200_000)
        );
        assert_eq!(
            AgentOptions::parse("adapt=2m").unwrap().adapt,
            Some(2_000_000)
        );
        assert_eq!(
            AgentOptions::parse("budget=5%").unwrap().budget_bp,
            Some(500)
        );
        assert_eq!(
            AgentOptions::parse("budget=2.5").unwrap().budget_bp,
            Some(250)
        );
        assert_eq!(AgentOptions::parse("budget=off").unwrap().budget_bp, None);
        assert_eq!(
            AgentOptions::parse("").unwrap().budget_bp,
            Some(DEFAULT_BUDGET_BP)
        );
        for bad in [
            "budget=0",
            "budget=-3%",
            "budget=much",
            "budget=5000%",
            "budget=nan",
        ] {
            assert!(AgentOptions::parse(bad).is_err(), "{bad} accepted");
        }
        for bad in ["adapt=0", "adapt=fast", "adapt=3g/s"] {
            assert!(AgentOptions::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn handler_globs_and_app_paths_go_with_reactions() {
        let o = AgentOptions::parse(
            "reactions,handler=javax.servlet.http.HttpServlet.service+*Router.route,app=/srv/classes:/srv/app.jar",
        )
        .unwrap();
        assert!(o.handler.matches("javax.servlet.http.HttpServlet.service"));
        assert!(o.handler.matches("com.acme.Router.route"));
        assert!(!o.handler.matches("javax.servlet.http.HttpServlet.doGet"));
        assert_eq!(o.app, vec!["/srv/classes", "/srv/app.jar"]);
        // handler= alone would time nothing: said, not ignored.
        let e = AgentOptions::parse("handler=a.B.c")
            .unwrap_err()
            .to_string();
        assert!(e.contains("add reactions"), "{e}");
        assert!(AgentOptions::parse("reactions,app=::").is_err());
    }

    #[test]
    fn reactions_imply_samples_and_need_bytecode_instrumentation() {
        let o = AgentOptions::parse("events=gc,reactions,reactions-after=2s").unwrap();
        assert!(o.reactions);
        assert!(o.events.contains(EventGroup::Samples) && o.events.contains(EventGroup::Gc));
        assert_eq!(o.reactions_after, Duration::from_secs(2));
        let d = AgentOptions::parse("reactions=on").unwrap();
        assert_eq!(d.reactions_after, Duration::from_secs(5));
        assert!(!AgentOptions::parse("reactions=off")
            .unwrap()
            .events
            .contains(EventGroup::Samples));
        let e = AgentOptions::parse("reactions,mode=jvmti")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("reactions:") && e.contains("mode=bci"), "{e}");
        let e = AgentOptions::parse("reactions,reactions-after=1ms")
            .unwrap_err()
            .to_string();
        assert!(e.contains("too short"), "{e}");
    }
}

#[cfg(test)]
mod metric_tests {
    use super::*;

    #[test]
    fn metrics_list_wall_cpu_and_alloc_and_refuse_anything_else() {
        assert_eq!(AgentOptions::default().metrics, MetricSet::default());
        let o = AgentOptions::parse("metrics=wall+cpu+alloc").unwrap();
        assert_eq!(
            o.metrics,
            MetricSet {
                cpu: true,
                alloc: true
            }
        );
        assert_eq!(o.metrics.to_string(), "wall+cpu+alloc");
        let o = AgentOptions::parse("metrics=alloc").unwrap();
        assert!(o.metrics.alloc && !o.metrics.cpu);
        assert!(!AgentOptions::parse("metrics=wall").unwrap().metrics.any());
        let e = AgentOptions::parse("metrics=cpu+heap")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown metric 'heap'") && e.contains("metrics"),
            "{e}"
        );
        assert!(AgentOptions::parse("metrics=").is_err());
    }
}

#[cfg(test)]
mod period_tests {
    use super::*;

    #[test]
    fn periods_parse_as_on_slash_off_and_bad_ones_say_how_to_write_them() {
        assert_eq!(
            TracePeriod::parse("100ms/900ms"),
            Ok(TracePeriod {
                on: Duration::from_millis(100),
                off: Duration::from_millis(900)
            })
        );
        assert_eq!(
            AgentOptions::parse("period=1s/4s").unwrap().period,
            Some(TracePeriod {
                on: Duration::from_secs(1),
                off: Duration::from_secs(4)
            })
        );
        for (bad, says) in [
            ("period=100ms", "write ON/OFF"),
            ("period=0ms/900ms", "would trace nothing"),
            ("period=0/1s", "would trace nothing"),
            ("period=100ms/0ms", "never stops tracing"),
            ("period=100/900ms", "needs a unit"),
            ("period=100ms/soon", "OFF in period"),
            ("period=500us/1s", "at least 1ms"),
        ] {
            let e = AgentOptions::parse(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
