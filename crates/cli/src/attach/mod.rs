//! `vmview attach PID …`: record a JVM that is already running, and
//! control a recording (started by `attach` or by `record`) while it runs.
//!
//! Every action is one dynamic `load` of the agent library into the JVM
//! ([`hotspot`]) with options `cmd=ACTION,reply=FILE,…`; the agent answers
//! in the reply file, which vmview reads through `/proc/PID/root` and
//! deletes (see the agent's `control` module). Before anything reaches the
//! JVM, [`process`] checks from `/proc` that the pid is a HotSpot JVM that
//! vmview may attach to, so a wrong pid gets one clear error and is never
//! signalled.

mod hotspot;
mod loaded;
pub mod perfdata;
pub mod process;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{ArgMatches, Args, ValueEnum};
use vmview_options::AgentOptions;

use crate::error::{hinted, plain};
use crate::record::{self, AgentFlags};
use process::{JvmKind, Lookup, Process};

const LONG_ABOUT: &str = "\
Load the vmview agent into a running HotSpot JVM and record it, or control \
the recording running in it.

With no ACTION (or `start`), a recording starts with the given options; \
with --duration vmview waits, stops it and reports the trace, otherwise it \
returns at once and the JVM records until `vmview attach PID stop` (or \
until it exits). `status`, `stop` and `dump` work on any vmview recording, \
including one started by `vmview record`.

Calls of trace classes already loaded are instrumented on the fly \
(RetransformClasses) and restored when the recording stops; the JVM keeps \
running. Events a JVM grants only to agents loaded at startup (exceptions, \
for one) are left out and named. The JVM must run as your user (as root, \
vmview takes the JVM's user for the attach).";

const EXAMPLES: &str = "\
Examples:
  # Which JVMs can I attach to?
  vmview jvms

  # Calls of shop.* and stack samples for 30 seconds
  vmview attach 4242 --classes 'shop.*' --events calls,samples --duration 30s -o shop.vmv

  # Start, look, cut the file, stop
  vmview attach 4242 --classes 'shop.*' -o shop.vmv
  vmview attach 4242 status
  vmview attach 4242 dump                        # shop.vmv done, now into shop.2.vmv
  vmview attach 4242 dump --classes 'shop.cart.*'  # and from now on only shop.cart.*
  vmview attach 4242 stop";

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Action {
    /// Start a recording (the default).
    Start,
    /// Show the recording's state: file, events, bytes, drops.
    Status,
    /// Stop the recording and finish its file; the JVM keeps running.
    Stop,
    /// Finish the current file and go on recording into a new one
    /// (-o, or NAME.2.vmv), with any options given changed.
    Dump,
}

#[derive(Args)]
#[command(
    about = "Record a running JVM, or control its recording (status, stop, dump)",
    override_usage = "vmview attach PID [start|status|stop|dump] [OPTIONS]",
    long_about = LONG_ABOUT,
    after_long_help = EXAMPLES
)]
pub struct AttachArgs {
    /// Process id of the JVM (`vmview jvms` lists them).
    pid: u32,
    /// What to do.
    #[arg(value_enum, default_value = "start", hide_default_value = true)]
    action: Action,
    /// Trace the methods of classes matching GLOB (repeatable, or comma-separated).
    #[arg(long, value_name = "GLOB", help_heading = "Agent options")]
    classes: Vec<String>,
    /// Never trace classes matching GLOB (repeatable).
    #[arg(long, value_name = "GLOB", help_heading = "Agent options")]
    exclude: Vec<String>,
    /// Events to record, comma- or '+'-separated: calls, exceptions, threads,
    /// classes, locks, gc, samples, all [default: calls,exceptions,threads,locks,gc].
    #[arg(long, value_name = "LIST", help_heading = "Agent options")]
    events: Option<String>,
    /// Trace file [default: trace-PID.vmv in the current directory]; an
    /// existing one is moved to FILE.old.
    #[arg(
        short = 'o',
        long = "output",
        visible_alias = "file",
        value_name = "FILE",
        help_heading = "Agent options"
    )]
    output: Option<String>,
    /// Record this long (e.g. 30s, 2m), then stop and report; without it the
    /// recording runs until `vmview attach PID stop`.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Where the trace's timeline index is saved once the recording
    /// stops (at `stop`, or at the end of --duration), so that `vmview
    /// serve` shows its timeline at once: as `record --timeline-cache`.
    #[arg(long, value_name = "DIR|off")]
    timeline_cache: Option<PathBuf>,
    /// Save no timeline index when the recording stops.
    #[arg(long, conflicts_with = "timeline_cache")]
    no_timeline_index: bool,
}

impl AttachArgs {
    /// Where `stop` saves the trace's timeline index, and from which size.
    fn timeline_cache(&self) -> Option<vmview_view::timeline_cache::CacheConfig> {
        if self.no_timeline_index {
            None
        } else {
            crate::serve::cache_config(self.timeline_cache.as_deref())
        }
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    if let Some(m) = s.strip_suffix('m').and_then(|m| m.parse::<u64>().ok()) {
        return Ok(Duration::from_secs(m * 60));
    }
    vmview_options::parse_duration(s)
}

pub fn run(args: AttachArgs, matches: &ArgMatches) -> anyhow::Result<ExitCode> {
    // --quiet: nothing on stderr but errors and warnings.
    let quiet = matches
        .get_one::<String>("quiet")
        .is_some_and(|v| vmview_options::parse_bool(v).unwrap_or(true));
    let target = attachable(args.pid)?;
    let agent = record::find_agent()?;
    let bytes = std::fs::read(&agent)
        .map_err(|e| plain(format!("cannot read the agent {}: {e}", agent.display())))?;
    let ours = crate::agent::build_in(&bytes).unwrap_or_else(crate::agent::build);
    let library = match loaded::choose(&target, &ours)? {
        Some(loaded) => loaded,
        None => library_for(&target, &agent, &bytes)?,
    };

    match args.action {
        Action::Start => start(&args, matches, &target, &library, quiet),
        Action::Status => {
            let reply = command(&target, &library, "status", "")?;
            print_status(&target, &reply);
            Ok(ExitCode::SUCCESS)
        }
        Action::Stop => {
            stop(&target, &library, None, args.timeline_cache(), quiet)?;
            Ok(ExitCode::SUCCESS)
        }
        Action::Dump => {
            let options = options(&args, matches, &target, false)?;
            let reply = command(&target, &library, "dump", &options)?;
            let old = reply.host_file(&target, "file");
            if !quiet {
                say!(
                    "vmview: finished {} ({} events, {} bytes); recording on into {}",
                    old.display(),
                    reply.get("events").unwrap_or("?"),
                    reply.get("bytes").unwrap_or("?"),
                    reply.host_file(&target, "next_file").display()
                );
            }
            reply.print_notes(quiet);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The target, once `/proc` says vmview may attach to it; nothing has
/// been sent to it yet.
fn attachable(pid: u32) -> anyhow::Result<Process> {
    let p = match Process::find(pid) {
        Lookup::Found(p) => p,
        Lookup::NoSuchProcess => {
            return Err(hinted(
                format!("no process with pid {pid}"),
                "`vmview jvms` lists the JVMs you can attach to",
            ))
        }
    };
    let euid = nix::unistd::geteuid().as_raw();
    let name = p.cmdline.first().map_or("?", String::as_str);
    if euid != 0 && p.uid != euid {
        return Err(hinted(
            format!(
                "pid {pid} ({name}) belongs to uid {}, not to you (uid {euid})",
                p.uid
            ),
            format!(
                "HotSpot accepts attach only from its own user: run vmview as that user \
                 (sudo -u '#{}' vmview attach …) or as root",
                p.uid
            ),
        ));
    }
    match p.jvm_library() {
        Some(JvmKind::HotSpot) => {}
        Some(JvmKind::OpenJ9) => {
            return Err(hinted(
                format!("pid {pid} runs OpenJ9, whose attach mechanism differs from HotSpot's"),
                "start it with the agent instead: vmview record … -- java …",
            ))
        }
        Some(JvmKind::NotJava) => {
            return Err(hinted(
                format!("pid {pid} ({name}) is not a Java virtual machine (no libjvm.so loaded)"),
                "`vmview jvms` lists the JVMs you can attach to",
            ))
        }
        None => {
            return Err(hinted(
                format!("cannot read the memory map of pid {pid} ({name})"),
                "run vmview as the JVM's user or as root",
            ))
        }
    }
    let counters = p.perf_counters();
    if p.attach_disabled(&counters) {
        return Err(hinted(
            format!("pid {pid} was started with -XX:+DisableAttachMechanism and refuses attach"),
            "restart it without that flag, or record it from the start: vmview record … -- java …",
        ));
    }
    Ok(p)
}

/// The agent library's path as the JVM sees it. A JVM in another mount
/// namespace (a container) cannot see vmview's file, and one of another
/// user (root attaching) cannot read vmview's private cache: a copy goes
/// into its `/tmp`, named by a hash of the library's bytes, so every
/// command loads the same copy (one agent instance in the JVM). A file of
/// that name is used only when it holds exactly these bytes.
fn library_for(p: &Process, agent: &Path, bytes: &[u8]) -> anyhow::Result<String> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let own_user = p.uid == nix::unistd::geteuid().as_raw();
    let visible =
        own_user && (p.same_mounts() || same_file(agent, &p.path(&agent.to_string_lossy())));
    if visible {
        return Ok(agent.to_string_lossy().into_owned());
    }
    let inside = format!("/tmp/libvmview_agent-{}.so", crate::agent::hash_of(bytes));
    let copy = p.path(&inside);
    if std::fs::read(&copy).is_ok_and(|b| b == bytes) {
        return Ok(inside);
    }
    // A new file (O_EXCL: never through a link someone left in /tmp).
    let part = p.path(&format!(
        "{inside}.{}.{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&part)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| {
            // Readable by the JVM's user whatever vmview's umask.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&part, std::fs::Permissions::from_mode(0o644))
        })
        .and_then(|()| std::fs::rename(&part, &copy))
        .map_err(|e| {
            let _ = std::fs::remove_file(&part);
            plain(format!(
                "cannot copy the agent into the JVM's /tmp ({}): {e}",
                copy.display()
            ))
        })?;
    Ok(inside)
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// The recording's agent options, with `file=` a path the JVM can write
/// and vmview can read.
fn options(
    args: &AttachArgs,
    matches: &ArgMatches,
    p: &Process,
    default_file: bool,
) -> anyhow::Result<String> {
    let output = match &args.output {
        Some(o) => Some(PathBuf::from(o)),
        None if default_file => Some(PathBuf::from(format!("trace-{}.vmv", p.pid))),
        None => None,
    };
    let output = output.map(|o| std::path::absolute(&o).unwrap_or(o));
    if let Some(dir) = output.as_deref().and_then(Path::parent) {
        if !dir.is_dir() {
            return Err(hinted(
                format!(
                    "cannot write the trace into {}: no such directory",
                    dir.display()
                ),
                format!(
                    "create it (mkdir -p {}) or choose another -o",
                    dir.display()
                ),
            ));
        }
    }
    let file = output.map(|o| target_path(p, &o));
    let flags = AgentFlags {
        classes: &args.classes,
        exclude: &args.exclude,
        events: args.events.as_deref(),
    };
    let options = record::option_string(file.as_deref(), &flags, matches)?;
    let parsed = AgentOptions::parse(&options).map_err(|e| record::option_error(&e))?;
    if let Some(dir) = parsed
        .file
        .rsplit_once('/')
        .map(|(d, _)| p.path(if d.is_empty() { "/" } else { d }))
    {
        if !dir.is_dir() {
            return Err(hinted(
                format!(
                    "cannot write the trace to {}: no such directory",
                    parsed.file
                ),
                "create it, or choose another -o",
            ));
        }
    }
    Ok(options)
}

/// Where the JVM should write `host`: the same path when it sees the same
/// directory, else its own `/tmp` (vmview copies the file out at `stop`).
fn target_path(p: &Process, host: &Path) -> String {
    let dir = host.parent().unwrap_or(Path::new("/"));
    if p.same_mounts() || same_file(dir, &p.path(&dir.to_string_lossy())) {
        host.to_string_lossy().into_owned()
    } else {
        let name = host
            .file_name()
            .map_or_else(|| "trace.vmv".into(), |n| n.to_string_lossy());
        format!("/tmp/{name}")
    }
}

fn start(
    args: &AttachArgs,
    matches: &ArgMatches,
    p: &Process,
    library: &str,
    quiet: bool,
) -> anyhow::Result<ExitCode> {
    let options = options(args, matches, p, true)?;
    let reply = command(p, library, "start", &options)?;
    let file = reply.host_file(p, "file");
    let started = |line: &str| {
        if !quiet {
            say!("{line}");
        }
    };
    started(&format!(
        "vmview: recording pid {} ({}) into {}",
        p.pid,
        reply
            .get("recording")
            .filter(|r| !r.is_empty())
            .unwrap_or("no events"),
        file.display()
    ));
    reply.print_notes(quiet);
    let Some(duration) = args.duration else {
        started(&format!(
            "vmview: stop it with: vmview attach {} stop",
            p.pid
        ));
        return Ok(ExitCode::SUCCESS);
    };
    let interrupted = Arc::new(AtomicBool::new(false));
    let _ = signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&interrupted));
    let _ = signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&interrupted));
    let end = Instant::now() + duration;
    let mut line = if quiet {
        None
    } else {
        crate::status::StatusLine::start()
    };
    while Instant::now() < end && !interrupted.load(Ordering::Relaxed) {
        if !p.path("/").exists() || !Path::new(&format!("/proc/{}", p.pid)).exists() {
            drop(line);
            say!(
                "vmview: pid {} exited; its trace is {}",
                p.pid,
                file.display()
            );
            return Ok(ExitCode::SUCCESS);
        }
        if let Some(l) = line.as_mut() {
            let left = end.saturating_duration_since(Instant::now()).as_secs();
            l.draw(&format!(
                "vmview: recording pid {} into {}: {left} s left (Ctrl-C stops now)",
                p.pid,
                file.display()
            ));
        }
        std::thread::sleep(
            Duration::from_millis(100).min(end.saturating_duration_since(Instant::now())),
        );
    }
    drop(line);
    let copy_to = args.output.as_deref().map(Path::new);
    stop(p, library, copy_to, args.timeline_cache(), quiet)?;
    Ok(ExitCode::SUCCESS)
}

/// Stops the recording and reports its file; a file left in another mount
/// namespace's `/tmp` is copied to `copy_to` (or the current directory).
/// Then saves the trace's timeline index in `cache` (as `record` does).
fn stop(
    p: &Process,
    library: &str,
    copy_to: Option<&Path>,
    cache: Option<vmview_view::timeline_cache::CacheConfig>,
    quiet: bool,
) -> anyhow::Result<()> {
    let reply = command(p, library, "stop", "")?;
    let mut file = reply.host_file(p, "file");
    let inside = reply.get("file").unwrap_or_default();
    if !p.same_mounts() && !same_file(Path::new(inside), &file) {
        let dest = copy_to.map_or_else(
            || PathBuf::from(file.file_name().unwrap_or_default()),
            Path::to_path_buf,
        );
        std::fs::copy(&file, &dest).map_err(|e| {
            plain(format!(
                "cannot copy the trace from the JVM's /tmp ({}) to {}: {e}",
                file.display(),
                dest.display()
            ))
        })?;
        let _ = std::fs::remove_file(&file);
        file = dest;
    }
    if !quiet {
        say!(
            "vmview: stopped; wrote {} events ({} bytes) to {}",
            reply.get("events").unwrap_or("?"),
            reply.get("bytes").unwrap_or("?"),
            file.display()
        );
    }
    let dropped = reply.get("dropped").unwrap_or("0");
    if dropped != "0" {
        say!("vmview: note: {dropped} events dropped (buffer full)");
    }
    for problem in reply.all("problem") {
        say!("vmview: agent: {problem}");
    }
    if let Some(c) = cache {
        match record::probe(&file) {
            Some((events, bytes)) if events >= c.min_events => {
                record::index_timeline(&file, &c.dir, events, bytes, quiet)
            }
            Some(_) => {}
            None => say!(
                "vmview: warning: {} holds no complete chunk; no timeline index was saved",
                file.display()
            ),
        }
    }
    Ok(())
}

fn print_status(p: &Process, reply: &Reply) {
    let state = reply.get("state").unwrap_or("?");
    if state == "none" {
        out!("pid {}: no vmview recording", p.pid);
        return;
    }
    out!("pid {}: {state}", p.pid);
    out!("  file     {}", reply.host_file(p, "file").display());
    for key in ["agent", "recording", "events", "bytes", "dropped", "budget"] {
        if let Some(v) = reply.get(key) {
            out!("  {key:<8} {v}");
        }
    }
    for note in reply.all("note") {
        out!("  note     {note}");
    }
}

/// The agent's answer to one command.
struct Reply {
    lines: Vec<(String, String)>,
}

impl Reply {
    fn get(&self, key: &str) -> Option<&str> {
        self.lines
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.lines
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A file the agent named, as vmview reaches it.
    fn host_file(&self, p: &Process, key: &str) -> PathBuf {
        p.path(self.get(key).unwrap_or("?"))
    }

    /// The agent's notes; one saying the trace went to another file than
    /// asked (a live recording held the name) is a warning, shown even
    /// with --quiet.
    fn print_notes(&self, quiet: bool) {
        for note in self.all("note") {
            if note.contains("is being written by another recording") {
                say!("vmview: warning: {note}");
            } else if !quiet {
                say!("vmview: note: {note}");
            }
        }
    }
}

/// Runs one control command in the JVM and returns the agent's reply.
fn command(p: &Process, library: &str, action: &str, options: &str) -> anyhow::Result<Reply> {
    let inside = format!(
        "/tmp/.vmview-reply-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let reply_path = p.path(&inside);
    let mut all = format!("cmd={action},reply={inside}");
    if !options.is_empty() {
        all = format!("{all},{options}");
    }
    let (code, jvm_text) = hotspot::load_agent(p, library, &all)?;
    let text = std::fs::read_to_string(&reply_path);
    let _ = std::fs::remove_file(&reply_path);
    let text = match text {
        Ok(t) => t,
        Err(_) => {
            return Err(hinted(
                format!(
                    "the agent in pid {} did not answer (Agent_OnAttach returned {code}){}",
                    p.pid,
                    if jvm_text.trim().is_empty() {
                        String::new()
                    } else {
                        format!(": {}", jvm_text.trim().replace('\n', " "))
                    }
                ),
                "the JVM's stderr says more; a JVM older than JDK 9 or another vmview version's agent already loaded cannot be controlled",
            ))
        }
    };
    let mut lines = text.lines();
    let status = lines.next().unwrap_or_default();
    let reply = Reply {
        lines: lines
            .filter_map(|l| l.split_once(": "))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    if let Some(message) = status.strip_prefix("error: ") {
        let hint = if message.starts_with("no recording") {
            format!("start one with: vmview attach {} --classes 'GLOB'", p.pid)
        } else if message.contains("cannot create trace file") {
            "the JVM writes the trace as its own user: choose a directory that user can write with -o"
                .to_string()
        } else if message.contains("already running") {
            format!(
                "`vmview attach {0} status` shows it; `vmview attach {0} stop` ends it",
                p.pid
            )
        } else {
            "see `vmview attach --help`".to_string()
        };
        return Err(hinted(message.to_string(), hint));
    }
    Ok(reply)
}
