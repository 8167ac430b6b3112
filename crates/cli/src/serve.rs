//! `vmview serve`: the browser view of a trace of any size, served from
//! the trace's index on loopback.
//!
//! The page and its API live in `vmview-view`; this module only parses the
//! flags, opens the trace with the CLI's error messages, prints the URL
//! and, with `--open`, starts the user's browser.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use vmview_view::model::TraceModel;
use vmview_view::server::{Limits, Server};
use vmview_view::timeline_cache::{CacheConfig, DEFAULT_MIN_EVENTS};

use crate::error::hinted;
use crate::trace;

const EXAMPLES: &str = "\
Examples:
  vmview serve trace.vmv                # then open the printed URL
  vmview serve trace.vmv --open         # and start the browser
  vmview serve trace.vmv --port 0       # any free port
  vmview serve trace.vmv --bind 192.168.1.5   # reachable from the LAN (no authentication!)
  vmview serve trace.vmv --timeline-cache off  # never save or read a timeline index

The URL keeps the page's state (filter, search, selected event, view): a
teammate serving the same file on the same port opens the same place.";

/// The default port: fixed, so that links into a trace stay valid.
const DEFAULT_PORT: u16 = 7177;

#[derive(Args)]
#[command(
    about = "Browse a trace in a web browser: events, filter, search, exceptions, call tree, flame graph, locks, threads",
    after_long_help = EXAMPLES
)]
pub struct ServeArgs {
    /// The trace: binary (.vmv) or XML.
    trace: PathBuf,
    /// Port to listen on (0 = any free port).
    #[arg(long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Address to listen on. Only loopback by default: the trace may hold
    /// secrets, and the server has no authentication.
    #[arg(long, value_name = "ADDR", default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    bind: IpAddr,
    /// Start the default browser on the page.
    #[arg(long)]
    open: bool,
    /// Connections served at once; more get a quick 503 and are closed.
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_connections as u32,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    max_connections: u32,
    /// Each connection is closed this long after it was accepted, request
    /// and answer included, however slowly the client sends (e.g. 10s,
    /// 500ms). See docs/SERVE.md.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_deadline)]
    request_timeout: Duration,
    /// Where the timeline's index is saved after its first build, so that
    /// the next serve of the same trace shows the timeline at once; `off`
    /// saves and reads none. By default $XDG_CACHE_HOME/vmview (or
    /// ~/.cache/vmview), for traces of 1 M events or more; with a
    /// directory given, for any trace. A saved index is used only while
    /// the trace is unchanged (path, size, time, checksums); see
    /// docs/SERVE.md.
    #[arg(long, value_name = "DIR|off")]
    timeline_cache: Option<PathBuf>,
}

fn parse_deadline(v: &str) -> Result<Duration, String> {
    match vmview_options::parse_duration(v)? {
        d if d.is_zero() => Err("the timeout must be longer than 0".into()),
        d if d > Duration::from_secs(3600) => Err("at most 1h".into()),
        d => Ok(d),
    }
}

pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    // The CLI's messages for a missing or broken file; an XML trace is
    // served from a binary copy (the view reads chunks by position).
    let binary = trace::BinaryTrace::of(&args.trace)?;
    drop(trace::open(&binary.path)?);
    if binary.path != args.trace {
        remove_on_signal(binary.path.clone());
    }
    let model = TraceModel::open(&binary.path).map_err(|e| {
        hinted(
            format!("cannot read {}: {e}", args.trace.display()),
            "vmview serve reads binary traces (.vmv) and XML traces",
        )
    })?;
    model.start_analysis_saving(timeline_cache(args, binary.path != args.trace));
    let events = model.event_count();
    let server = Server::bind(SocketAddr::new(args.bind, args.port), model).map_err(|e| {
        hinted(
            format!("cannot listen on {}:{}: {e}", args.bind, args.port),
            "another program (or another vmview serve) uses this port; pick one with --port N, or --port 0 for any",
        )
    })?;
    let server = server.with_limits(Limits {
        max_connections: args.max_connections as usize,
        deadline: args.request_timeout,
    });
    let addr = server.local_addr()?;
    let url = format!("http://{addr}/");
    out!(
        "vmview: serving {} ({events} events) at {url}  (Ctrl-C stops)",
        args.trace.display()
    );
    if !args.bind.is_loopback() {
        say!("vmview: warning: listening on {addr}: anyone who can reach it can read the trace");
    }
    if args.open {
        open_browser(&url);
    }
    server.run()?;
    Ok(ExitCode::SUCCESS)
}

/// Where the timeline's index is saved: nowhere for a temporary binary
/// copy of an XML trace (its name and time change at each serve).
fn timeline_cache(args: &ServeArgs, converted: bool) -> Option<CacheConfig> {
    if converted {
        return None;
    }
    cache_config(args.timeline_cache.as_deref())
}

/// The `--timeline-cache DIR|off` flag of `serve` and `record`: `off`
/// none; a directory for any trace; by default the user's cache
/// directory for traces of [`DEFAULT_MIN_EVENTS`] or more.
pub fn cache_config(flag: Option<&Path>) -> Option<CacheConfig> {
    match flag {
        Some(d) if d.as_os_str() == "off" => None,
        Some(d) => Some(CacheConfig {
            dir: d.to_path_buf(),
            min_events: 0,
        }),
        None => CacheConfig::default_dir().map(|dir| CacheConfig {
            dir,
            min_events: DEFAULT_MIN_EVENTS,
        }),
    }
}

/// Removes the temporary binary copy when Ctrl-C (or a TERM) ends the
/// server, which never returns otherwise.
fn remove_on_signal(copy: PathBuf) {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            let _ = std::fs::remove_file(&copy);
            std::process::exit(128 + sig);
        }
    });
}

/// Starts `$BROWSER`, else `xdg-open` (`open` on macOS), and says so when
/// none works.
fn open_browser(url: &str) {
    let candidates: Vec<String> = std::env::var("BROWSER")
        .ok()
        .into_iter()
        .chain(["xdg-open".to_string(), "open".to_string()])
        .collect();
    for c in candidates {
        if std::process::Command::new(&c)
            .arg(url)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .is_ok()
        {
            return;
        }
    }
    say!("vmview: could not start a browser; open {url}");
}
