//! `vmview record`: run a Java command with the vmview agent injected and
//! report what it recorded.
//!
//! The agent is configured by one option string (`file=…,classes=…`). This
//! module builds it from flags — the dedicated `--classes`, `--exclude`,
//! `--events`, `-o`, plus one `--NAME VALUE` flag per entry of
//! `vmview_options::OPTIONS` — and validates it with the same parser the
//! agent uses, so a typo is reported before Java starts.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use clap::{Arg, ArgAction, ArgMatches, Args};
use indicatif::{HumanBytes, HumanCount};
use vmview_format::TraceReader;
use vmview_options::{split_file_pattern, AgentOptions, OptionError, OPTIONS};

use crate::error::{hinted, plain};

/// The trace file when no `-o` is given: predictable, in the current directory.
const DEFAULT_OUTPUT: &str = "trace.vmv";
/// Options with a dedicated flag above; every other entry of `OPTIONS`
/// becomes `--NAME VALUE`.
const DEDICATED: &[&str] = &["file", "classes", "exclude", "events"];
const AGENT_HEADING: &str = "Agent options";

const LONG_ABOUT: &str = "\
Run a Java command with the vmview agent and record a trace.

Everything after `--` (or from the first argument that is not a vmview \
option on) is the command, starting with the java executable; \
vmview inserts -agentpath:libvmview_agent.so=OPTIONS right after it, runs it \
with the terminal's stdin, stdout and stderr, and exits with the JVM's exit \
code. The trace goes to trace.vmv in the current directory unless -o says \
otherwise (%p in the name becomes the JVM's process id, %t its start time). \
A trace already there is moved to NAME.old; while another recording is \
writing it, this one goes to STEM.PID.EXT instead (docs/RECORDING.md).

Method calls are recorded only for the trace classes chosen with --classes; \
exceptions, threads, locks and GC are recorded without it.

The agent library is inside vmview: it is written once to \
$XDG_CACHE_HOME/vmview/HASH/ (else ~/.cache/vmview/HASH/) and loaded from \
there (`vmview agent-path` prints where). The VMVIEW_AGENT environment \
variable names another library to load instead.";

const EXAMPLES: &str = "\
Examples:
  # Calls of shop.* with their arguments, exceptions, threads, locks, GC
  vmview record --classes 'shop.*' -- java -cp classes shop.Main

  # Two packages but not the generated code, calls and exceptions only
  vmview record --classes 'com.acme.*' --classes 'org.partner.*' \\
      --exclude 'com.acme.gen.*' --events calls,exceptions -o run-%p.vmv -- java -jar app.jar

  # Long strings kept whole, every exception in the JVM
  vmview record --classes 'shop.*' --strings 4096 --exceptions all -- java -cp classes shop.Main

  # CPU time and allocated bytes per call, and the monitors held around calls,
  # for `vmview calltree`
  vmview record --classes 'shop.*' --metrics cpu,alloc --events calls,monitors -- java -cp classes shop.Main";

#[derive(Args)]
#[command(
    about = "Run a Java command under the vmview agent and record a trace",
    override_usage = "vmview record [OPTIONS] -- java [JAVA_OPTIONS] MAIN_CLASS|-jar JAR [ARGS]...",
    long_about = LONG_ABOUT,
    after_long_help = EXAMPLES
)]
pub struct RecordArgs {
    /// Trace the methods of classes matching GLOB (repeatable, or comma-separated):
    /// com.acme.* (a package and its subpackages), shop.Inventory (one class),
    /// * and ? wildcards.
    #[arg(long, value_name = "GLOB", help_heading = AGENT_HEADING)]
    classes: Vec<String>,
    /// Never trace classes matching GLOB, even when --classes matches them (repeatable).
    #[arg(long, value_name = "GLOB", help_heading = AGENT_HEADING)]
    exclude: Vec<String>,
    /// Events to record, comma- or '+'-separated: calls, exceptions, threads,
    /// classes, locks, gc, samples (stack samples every --interval), bytecode,
    /// monitors (monitors held by trace-class code, shown by `vmview calltree`),
    /// all (all but samples, bytecode and monitors) [default: calls,exceptions,threads,locks,gc].
    #[arg(long, value_name = "LIST", help_heading = AGENT_HEADING)]
    events: Option<String>,
    /// Trace file to write; %p = the JVM's process id, %t = its start time.
    /// An existing one is moved to FILE.old; one being recorded is left alone
    /// and this recording goes to STEM.PID.EXT.
    #[arg(short = 'o', long = "output", visible_alias = "file", value_name = "FILE", default_value = DEFAULT_OUTPUT, help_heading = AGENT_HEADING)]
    output: String,
    /// Where the trace's timeline index is saved once the JVM exits, so
    /// that `vmview serve` shows its timeline at once: as `serve
    /// --timeline-cache` (by default the user's cache directory, for
    /// traces of 1 M events or more; with a directory given, for any
    /// trace); `off` saves none.
    #[arg(long, value_name = "DIR|off")]
    timeline_cache: Option<PathBuf>,
    /// Save no timeline index after the recording (as --timeline-cache off).
    #[arg(long, conflicts_with = "timeline_cache")]
    no_timeline_index: bool,
    /// The Java command: the java executable, its options, the main class or
    /// -jar and the program's arguments.
    #[arg(required = true, trailing_var_arg = true, value_name = "JAVA_COMMAND")]
    command: Vec<OsString>,
}

/// Adds a `--NAME VALUE` flag for every agent option without a dedicated one.
pub fn add_agent_option_args(mut cmd: clap::Command) -> clap::Command {
    for spec in OPTIONS.iter().filter(|o| !DEDICATED.contains(&o.name)) {
        let mut help = capitalized(spec.help);
        if let Some(d) = spec.default {
            help.push_str(&format!(" [default: {d}]"));
        }
        let mut arg = Arg::new(spec.name)
            .long(spec.name)
            .help(help)
            .help_heading(AGENT_HEADING);
        arg = match spec.value {
            Some(v) => arg.value_name(v).action(ArgAction::Set),
            // A flag: `--quiet`, or `--quiet=false`.
            None => arg
                .num_args(0..=1)
                .require_equals(true)
                .default_missing_value("true")
                .value_name("BOOL")
                .action(ArgAction::Set),
        };
        cmd = cmd.arg(arg);
    }
    cmd
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// One sentence listing every flag that sets an agent option.
pub fn known_flags_sentence() -> String {
    let mut flags = vec![
        "--classes GLOB".to_string(),
        "--exclude GLOB".to_string(),
        "--events LIST".to_string(),
        "-o/--file FILE".to_string(),
    ];
    for spec in OPTIONS.iter().filter(|o| !DEDICATED.contains(&o.name)) {
        flags.push(match spec.value {
            Some(v) => format!("--{} {v}", spec.name),
            None => format!("--{}", spec.name),
        });
    }
    format!(
        "vmview record sets agent options with: {}. See `vmview record --help`.",
        flags.join(", ")
    )
}

pub fn run(args: RecordArgs, matches: &ArgMatches) -> anyhow::Result<ExitCode> {
    let option_string = agent_option_string(&args, matches)?;
    let parsed = AgentOptions::parse(&option_string).map_err(|e| option_error(&e))?;
    // --quiet: nothing on stderr but errors and warnings, as the agent's
    // option promises for the JVM's side.
    let quiet = parsed.quiet;
    let no_classes = args.classes.is_empty() && !quiet;
    // With --reactions, calls of the handlers found are recorded anyway.
    if no_classes && parsed.events.contains(vmview_options::EventGroup::Calls) && !parsed.reactions
    {
        say!(
            "vmview: note: no --classes given, so no method calls are recorded \
             (trace your code with e.g. --classes 'com.acme.*')"
        );
    } else if no_classes && parsed.events.contains(vmview_options::EventGroup::Bytecode) {
        say!(
            "vmview: note: no --classes given, so no bytecode is traced \
             (events=bytecode single-steps only trace-class methods: --classes 'com.acme.Hot')"
        );
    }
    check_output_dir(&args.output)?;
    let agent = find_agent()?;
    let (program, rest) = args.command.split_first().expect("clap requires a command");

    let mut java = Command::new(program);
    java.arg(format!("-agentpath:{}={}", agent.display(), option_string))
        .args(rest);
    let output_pattern = args.output.clone();
    let before = written_at(Path::new(&output_pattern));
    let started = SystemTime::now();
    // What held the name before this JVM could take it (docs/RECORDING.md);
    // a name with %p is known only once the JVM runs.
    let plain_name = !output_pattern.contains('%');
    let mut earlier = file_id(Path::new(&output_pattern)).filter(|_| plain_name);
    let mut child = java.spawn().map_err(|e| spawn_error(program, e))?;
    let pid = child.id();
    if !plain_name {
        earlier = expand_pid(&output_pattern, pid).and_then(|p| file_id(&p));
    }

    let status = wait(&mut child, &output_pattern, pid, before, quiet)?;
    let code = exit_code(status);

    let wanted = resolve_output(&output_pattern, pid, started);
    // `-o /dev/null`, a FIFO: nothing to look at afterwards.
    if wanted
        .as_deref()
        .is_some_and(|w| std::fs::metadata(w).is_ok_and(|m| !m.is_file()))
    {
        return Ok(ExitCode::from(code));
    }
    let found = wanted
        .as_deref()
        .and_then(|w| find_own_trace(w, pid, before, started));
    if let (Some(w), Some(id)) = (&wanted, earlier) {
        let old = PathBuf::from(vmview_options::old_file_name(&w.to_string_lossy()));
        if !quiet && file_id(&old) == Some(id) {
            say!(
                "vmview: note: the earlier {} was moved to {}",
                w.display(),
                old.display()
            );
        }
    }
    match found {
        Some(path) => {
            if wanted.as_deref() != Some(path.as_path()) {
                say!(
                    "vmview: warning: {} was being written by another recording at the same time; \
                     this one is in {}",
                    wanted.as_deref().unwrap_or(Path::new("?")).display(),
                    path.display()
                );
            }
            match probe(&path) {
                Some((events, bytes)) => {
                    if !quiet {
                        say!(
                            "vmview: wrote {events} events ({bytes} bytes) to {}",
                            path.display()
                        );
                    }
                    let cache = if args.no_timeline_index {
                        None
                    } else {
                        crate::serve::cache_config(args.timeline_cache.as_deref())
                    };
                    if let Some(c) = cache.filter(|c| events >= c.min_events) {
                        index_timeline(&path, &c.dir, events, bytes, quiet);
                    }
                }
                None => say!(
                    "vmview: warning: {} holds no complete chunk yet; `vmview show` will say what it can read",
                    path.display()
                ),
            }
        }
        None if !status.success()
            && started.elapsed().unwrap_or_default() < Duration::from_secs(10) =>
        {
            crate::report(&hinted(
                format!(
                    "the JVM exited with {} before the vmview agent wrote {}: the agent probably failed to load",
                    describe_status(status),
                    output_pattern
                ),
                "see the JVM's message above; a bad agent library or option is named there",
            ));
        }
        None => say!("vmview: warning: no trace was written to {output_pattern}"),
    }
    Ok(ExitCode::from(code))
}

/// From this many events, `record` says that it indexes the timeline
/// before it does (the index takes seconds).
const SAY_INDEXING_FROM: u64 = 20_000_000;

/// Builds the trace's timeline index and saves it in `dir`, where `serve`
/// looks for it, with a progress bar on a terminal. A failure is a
/// warning: the recording stands, and `serve` builds the index itself.
pub(crate) fn index_timeline(path: &Path, dir: &Path, events: u64, bytes: u64, quiet: bool) {
    use std::sync::atomic::AtomicU64;
    let started = Instant::now();
    if !quiet && events >= SAY_INDEXING_FROM {
        say!(
            "vmview: indexing the timeline of {events} events for `vmview serve` \
             (--no-timeline-index skips this)"
        );
    }
    let read = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let result = std::thread::scope(|s| {
        let builder = s.spawn(|| {
            let run = std::panic::AssertUnwindSafe(|| {
                vmview_view::timeline_cache::build_and_save(path, dir, &read)
            });
            let r = std::panic::catch_unwind(run)
                .unwrap_or_else(|_| Err("building it failed (a vmview bug)".into()));
            done.store(true, Ordering::Release);
            r
        });
        // The bar moves by bytes: the share of events read, of the file.
        let mut bar = crate::progress::Progress::new(bytes, "indexing the timeline");
        while !done.load(Ordering::Acquire) {
            let share = read.load(Ordering::Relaxed).min(events) as f64 / events.max(1) as f64;
            bar.set((share * bytes as f64) as u64);
            std::thread::sleep(Duration::from_millis(100));
        }
        bar.finish();
        builder
            .join()
            .unwrap_or_else(|_| Err("building it failed (a vmview bug)".into()))
    });
    match result {
        Ok((file, size)) if !quiet => say!(
            "vmview: saved the timeline index to {} ({} MB, {:.1} s): `vmview serve` shows the timeline at once",
            file.display(),
            size.div_ceil(1 << 20),
            started.elapsed().as_secs_f64()
        ),
        Ok(_) => {}
        Err(e) => say!(
            "vmview: warning: the timeline index was not saved ({e}); `vmview serve` builds it when it opens the trace"
        ),
    }
}

/// The trace this JVM wrote for `wanted`: `wanted` itself, or the per-pid
/// name the agent takes when another live recording holds `wanted`
/// (docs/RECORDING.md). The one whose header names this pid is ours; else
/// `wanted` when it was written since the JVM started (a launcher script
/// may fork the JVM under another pid).
fn find_own_trace(
    wanted: &Path,
    pid: u32,
    before: Option<SystemTime>,
    started: SystemTime,
) -> Option<PathBuf> {
    let own = PathBuf::from(vmview_options::own_file_name(
        &wanted.to_string_lossy(),
        pid,
    ));
    let header_pid = |p: &Path| TraceReader::open(p).ok().map(|r| r.header().pid);
    [wanted.to_path_buf(), own]
        .into_iter()
        .find(|p| header_pid(p) == Some(pid))
        .or_else(|| {
            let t = written_at(wanted)?;
            (before.is_none_or(|b| t > b) || t >= started).then(|| wanted.to_path_buf())
        })
}

/// Device and inode of a file, to recognise it under another name.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// `file=…,classes=…,…` from the flags. List flags may be repeated or
/// comma-separated; their items are joined with `+`, the option language's
/// list separator.
fn agent_option_string(args: &RecordArgs, matches: &ArgMatches) -> anyhow::Result<String> {
    let flags = AgentFlags {
        classes: &args.classes,
        exclude: &args.exclude,
        events: args.events.as_deref(),
    };
    option_string(Some(&args.output), &flags, matches)
}

/// The agent-option flags `record` and `attach` share.
pub struct AgentFlags<'a> {
    pub classes: &'a [String],
    pub exclude: &'a [String],
    pub events: Option<&'a str>,
}

/// `file=…,classes=…,…` from the shared flags and the `--NAME VALUE` ones.
pub fn option_string(
    output: Option<&str>,
    args: &AgentFlags<'_>,
    matches: &ArgMatches,
) -> anyhow::Result<String> {
    let mut parts: Vec<String> = Vec::new();
    let mut push = |name: &str, flag: &str, value: &str| -> anyhow::Result<()> {
        if value.contains(',') {
            return Err(hinted(
                format!("{flag} '{value}': an agent option value cannot contain ','"),
                "',' separates agent options; choose a value without one",
            ));
        }
        parts.push(format!("{name}={value}"));
        Ok(())
    };
    if let Some(output) = output {
        push("file", "-o/--file", output)?;
    }
    let list = |values: &[String]| -> String {
        values
            .iter()
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("+")
    };
    if !args.classes.is_empty() {
        push("classes", "--classes", &list(args.classes))?;
    }
    if !args.exclude.is_empty() {
        push("exclude", "--exclude", &list(args.exclude))?;
    }
    if let Some(events) = args.events {
        push("events", "--events", &list(&[events.to_string()]))?;
    }
    for spec in OPTIONS.iter().filter(|o| !DEDICATED.contains(&o.name)) {
        if let Some(v) = matches.get_one::<String>(spec.name) {
            // A list flag takes commas (`--metrics cpu,alloc`) like `--events`.
            let v = if spec.value == Some("LIST") {
                list(std::slice::from_ref(v))
            } else {
                v.clone()
            };
            push(spec.name, &format!("--{}", spec.name), &v)?;
        }
    }
    Ok(parts.join(","))
}

/// The agent parser's complaint, in terms of the flag the user typed.
pub fn option_error(e: &OptionError) -> anyhow::Error {
    let flag = |name: &str| match name {
        "file" => "-o/--file".to_string(),
        n => format!("--{n}"),
    };
    match e {
        OptionError::Invalid { option, message } => hinted(
            format!("invalid {}: {message}", flag(option)),
            "see `vmview record --help` for the values each option takes",
        ),
        OptionError::Unknown { name, .. } => plain(format!("invalid {}: {e}", flag(name))),
    }
}

/// Where the agent library is: `$VMVIEW_AGENT`, else the one inside
/// vmview, in its cache.
pub fn find_agent() -> anyhow::Result<PathBuf> {
    crate::agent::path()
}

/// The agent cannot create the trace in a missing directory, and would
/// only say so from inside the JVM: say it first.
fn check_output_dir(pattern: &str) -> anyhow::Result<()> {
    let prefix = split_file_pattern(pattern, 0).swap_remove(0);
    let dir = match Path::new(&prefix).parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => return Ok(()),
    };
    if dir.is_dir() {
        Ok(())
    } else {
        Err(hinted(
            format!(
                "cannot write the trace to {pattern}: directory {} does not exist",
                dir.display()
            ),
            format!(
                "create it (mkdir -p {}) or choose another -o",
                dir.display()
            ),
        ))
    }
}

fn spawn_error(program: &OsString, e: io::Error) -> anyhow::Error {
    let name = program.to_string_lossy();
    if e.kind() == io::ErrorKind::NotFound {
        let where_ = if name.contains('/') { "" } else { " on PATH" };
        hinted(
            format!("cannot run '{name}': not found{where_}"),
            "install a JDK or pass the full path of its java executable",
        )
    } else {
        anyhow::Error::new(e).context(format!("cannot run '{name}'"))
    }
}

/// Waits for the JVM. On a terminal, a status line shows the events and
/// bytes written so far (the growing file's chunk index, read every 250 ms).
///
/// Ctrl-C reaches the JVM too (same process group), which then shuts down
/// and finishes its trace: vmview keeps waiting, to report the trace and
/// pass on the exit code. A second Ctrl-C quits at once (status 130), and
/// so does SIGTERM (143), leaving the terminal tidy.
fn wait(
    child: &mut std::process::Child,
    pattern: &str,
    pid: u32,
    before: Option<SystemTime>,
    quiet: bool,
) -> anyhow::Result<ExitStatus> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let interrupt = Arc::new(AtomicBool::new(false));
    let terminate = Arc::new(AtomicBool::new(false));
    let _ = signal_hook::flag::register(SIGINT, Arc::clone(&interrupt));
    let _ = signal_hook::flag::register(SIGTERM, Arc::clone(&terminate));

    let mut status_line = if quiet {
        None
    } else {
        crate::status::StatusLine::start()
    };
    let wanted = expand_pid(pattern, pid);
    // The agent's name for this recording when another one holds `wanted`.
    let own = wanted
        .as_ref()
        .map(|p| PathBuf::from(vmview_options::own_file_name(&p.to_string_lossy(), pid)));
    let mut interrupted = false;
    let mut last_probe: Option<Instant> = None;
    // The overhead budget's last report (estimate, methods demoted).
    let mut budget: Option<(u64, usize)> = None;
    loop {
        if let Some(status) = child.try_wait().context("waiting for the JVM")? {
            return Ok(status);
        }
        if terminate.load(Ordering::Relaxed) {
            drop(status_line);
            std::process::exit(143);
        }
        if interrupt.swap(false, Ordering::Relaxed) {
            if interrupted {
                drop(status_line);
                std::process::exit(130);
            }
            interrupted = true;
            last_probe = None;
        }
        if let Some(line) = status_line.as_mut() {
            if last_probe.is_none_or(|t| t.elapsed() >= Duration::from_millis(250)) {
                last_probe = Some(Instant::now());
                let path = own.as_deref().filter(|o| o.exists()).or(wanted.as_deref());
                let shown = path.map_or_else(|| pattern.to_string(), |p| p.display().to_string());
                // A trace left by an earlier run is not progress.
                let fresh =
                    path.filter(|p| written_at(p).is_some_and(|t| before.is_none_or(|b| t > b)));
                if let Some(b) = fresh.and_then(budget_probe) {
                    budget = Some(b);
                }
                let progress = match fresh.and_then(probe) {
                    Some((events, bytes)) => {
                        format!("{} events, {}", HumanCount(events), HumanBytes(bytes))
                    }
                    None => "starting".to_string(),
                };
                let progress = match budget {
                    Some((bp, demoted)) => format!(
                        "{progress}, overhead ~{:.1}%, {demoted} demoted",
                        bp as f64 / 100.0
                    ),
                    None => progress,
                };
                let note = if interrupted {
                    " (interrupted: waiting for the JVM to finish the trace; Ctrl-C again to quit)"
                } else {
                    ""
                };
                line.draw(&format!("vmview: recording {shown}: {progress}{note}"));
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The overhead budget's last report in the trace's last chunk: its
/// estimate (basis points) and how many methods it demoted. Only a small
/// last chunk is decoded, so the status line stays cheap while the trace
/// grows fast; `None` keeps the previous report.
fn budget_probe(path: &Path) -> Option<(u64, usize)> {
    const MAX_DECODED: u64 = 2 << 20;
    let mut reader = TraceReader::open(path).ok()?;
    let last = reader.index().ok()?.chunks.last().cloned()?;
    if last.len > MAX_DECODED {
        return None;
    }
    reader.seek_to_chunk(&last).ok()?;
    let mut found = None;
    while let Some(ev) = reader.next_event() {
        if reader.current_chunk().is_some_and(|c| c.seq != last.seq) {
            break;
        }
        if let vmview_format::EventKind::MethodCounts {
            overhead_bp,
            counts,
        } = &ev.kind
        {
            found = Some((*overhead_bp, counts.len()));
        }
    }
    found
}

/// Events and bytes in a trace, from its chunk index; `None` while the file
/// has no readable header.
pub(crate) fn probe(path: &Path) -> Option<(u64, u64)> {
    let bytes = std::fs::metadata(path).ok()?.len();
    let mut reader = TraceReader::open(path).ok()?;
    let events = reader.index().ok()?.event_count();
    Some((events, bytes))
}

fn written_at(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// The JVM's exit code, or 128 + signal when a signal ended it (as shells do).
fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => (128 + sig) as u8,
        (None, None) => 1,
    }
}

fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("status {c}"),
        (None, Some(sig)) => format!("signal {sig}"),
        (None, None) => "an unknown status".to_string(),
    }
}

/// The pattern with `%p` and `%%` expanded; `None` when it holds `%t`,
/// whose exact value only the agent knows.
fn expand_pid(pattern: &str, pid: u32) -> Option<PathBuf> {
    match split_file_pattern(pattern, pid).as_slice() {
        [name] => Some(PathBuf::from(name)),
        _ => None,
    }
}

/// The file the agent wrote for `pattern`: `%p` is the child's pid; for
/// `%t` (a `YYYYMMDD-HHMMSS` time) the newest matching file written since
/// the JVM started.
fn resolve_output(pattern: &str, pid: u32, started: SystemTime) -> Option<PathBuf> {
    let parts = split_file_pattern(pattern, pid);
    if let [name] = parts.as_slice() {
        return Some(PathBuf::from(name));
    }
    // Each `%t` becomes a NUL, which no file name holds.
    let full = parts.join("\u{0}");
    let full = Path::new(&full);
    let dir = full
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = full.file_name()?.to_str()?;
    let (before, after) = name.split_once('\u{0}')?;
    let mut best: Option<(SystemTime, PathBuf)> = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let file_name = entry.file_name();
        let Some(n) = file_name.to_str() else {
            continue;
        };
        if !time_pattern_matches(n, before, after) {
            continue;
        }
        let Some(t) = written_at(&entry.path()) else {
            continue;
        };
        // Written since the JVM started (allowing for coarse file times).
        let recent = match t.duration_since(started) {
            Ok(_) => true,
            Err(e) => e.duration() < Duration::from_secs(2),
        };
        if recent && best.as_ref().is_none_or(|(bt, _)| t > *bt) {
            best = Some((t, entry.path()));
        }
    }
    best.map(|(_, p)| p)
}

/// Whether `name` is `before` + a `%t` time + `after`, where `after` may hold
/// further `%t` times marked by NUL.
fn time_pattern_matches(name: &str, before: &str, after: &str) -> bool {
    let Some(rest) = name.strip_prefix(before) else {
        return false;
    };
    let is_time = |s: &str| {
        s.len() == 15
            && s.bytes().enumerate().all(|(i, b)| {
                if i == 8 {
                    b == b'-'
                } else {
                    b.is_ascii_digit()
                }
            })
    };
    if rest.len() < 15 || !rest.is_char_boundary(15) || !is_time(&rest[..15]) {
        return false;
    }
    let rest = &rest[15..];
    match after.split_once('\u{0}') {
        None => rest == after,
        Some((mid, tail)) => rest
            .strip_prefix(mid)
            .is_some_and(|r| time_pattern_matches(r, "", tail)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::FromArgMatches;

    /// The agent option string `vmview ARGS` would pass.
    fn option_string(args: &[&str]) -> anyhow::Result<String> {
        let m = crate::cli_command().try_get_matches_from(args)?;
        let sub = m.subcommand_matches("record").expect("record");
        let a = RecordArgs::from_arg_matches(sub)?;
        let s = agent_option_string(&a, sub)?;
        AgentOptions::parse(&s).map_err(|e| option_error(&e))?;
        Ok(s)
    }

    #[test]
    fn flags_become_one_agent_option_string() {
        let s = option_string(&[
            "vmview",
            "record",
            "--classes",
            "shop.*",
            "--classes",
            "com.acme.*,org.x.Y",
            "--exclude",
            "shop.gen.*",
            "--events",
            "calls,exceptions",
            "--strings",
            "10",
            "--metrics",
            "cpu,alloc",
            "--quiet",
            "-o",
            "out-%p.vmv",
            "--",
            "java",
            "-version",
        ])
        .unwrap();
        assert_eq!(
            s,
            "file=out-%p.vmv,classes=shop.*+com.acme.*+org.x.Y,exclude=shop.gen.*,events=calls+exceptions,strings=10,metrics=cpu+alloc,quiet=true"
        );
        assert_eq!(
            option_string(&["vmview", "record", "java"]).unwrap(),
            "file=trace.vmv"
        );
        assert_eq!(
            option_string(&[
                "vmview", "record", "--file", "a.vmv", "--flush", "100ms", "java", "-cp", "x"
            ])
            .unwrap(),
            "file=a.vmv,flush=100ms"
        );
    }

    #[test]
    fn a_bad_value_names_the_flag() {
        let e =
            option_string(&["vmview", "record", "--strings", "lots", "--", "java"]).unwrap_err();
        assert!(e.to_string().starts_with("invalid --strings:"), "{e}");
        let e = option_string(&[
            "vmview",
            "record",
            "--events",
            "calls,nonsense",
            "--",
            "java",
        ])
        .unwrap_err();
        assert!(
            e.to_string().contains("--events") && e.to_string().contains("nonsense"),
            "{e}"
        );
        let e = option_string(&["vmview", "record", "--buffer", "1,2", "--", "java"]).unwrap_err();
        assert!(e.to_string().contains("cannot contain ','"), "{e}");
    }

    #[test]
    fn unknown_flags_and_a_missing_command_are_usage_errors() {
        assert!(option_string(&["vmview", "record", "--evnts", "calls", "--", "java"]).is_err());
        assert!(option_string(&["vmview", "record", "--classes", "x"]).is_err());
    }

    #[test]
    fn pid_and_percent_expand_and_time_stays_open() {
        assert_eq!(expand_pid("t-%p.vmv", 42), Some(PathBuf::from("t-42.vmv")));
        assert_eq!(expand_pid("100%%-%p", 7), Some(PathBuf::from("100%-7")));
        assert_eq!(expand_pid("a-%t", 1), None);
    }

    #[test]
    fn time_placeholder_matches_only_a_start_time() {
        assert!(time_pattern_matches(
            "run-20261129-192114.vmv",
            "run-",
            ".vmv"
        ));
        assert!(!time_pattern_matches(
            "run-2026112-192114x.vmv",
            "run-",
            ".vmv"
        ));
        assert!(!time_pattern_matches(
            "run-20261129-192114.vmv.bak",
            "run-",
            ".vmv"
        ));
        assert!(time_pattern_matches(
            "a20261129-192114b20261129-192115c",
            "a",
            "b\u{0}c"
        ));
    }

    #[test]
    fn exit_code_of_a_signal_is_128_plus_it() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(exit_code(ExitStatus::from_raw(9)), 137);
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
    }
}
