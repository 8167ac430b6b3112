//! `vmview reactions`: the event handlers and callbacks of a program, found
//! from SAMPLE events (`vmview record --events samples`) as DYMON did.
//!
//! The analysis is `vmview_analysis::ReactionTrie`; this module reads the
//! trace, names the handles and renders the result as text, as JSON for
//! tools, or as XML in the shapes of the DYMON slides (`<REACTIONS>`,
//! `<TRIE>`, `<REACTION>`). A trace of `record --reactions` also has the
//! handlers' latencies (`vmview_analysis::latency`): events handled, mean,
//! p50, p90, p99 and max per handler the agent instrumented.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde_json::{json, Value as Json};
use vmview_analysis::frameworks::Profiles;
use vmview_analysis::latency::{
    HandlerLatency, HandlerTiming, LatencyHistogram, LatencySummary, TimingStatus,
};
use vmview_analysis::reactions::{HandlerRule, MethodRef, Reactions, StateCounts};
use vmview_analysis::{EventSink, ReactionConfig, ReactionTrie};
use vmview_export::names::MethodNames;
use vmview_format::{MethodId, SymbolTable, ThreadState};
use vmview_jfr::{JfrOptions, WaitSampleStats, WAIT_EVENTS};

use crate::error::hinted;
use crate::trace;

const LONG_ABOUT: &str = "\
Find the event handlers of a program from stack samples (record with \
--events samples): servers, crawlers and UIs loop over \"get the next event, \
process it\". vmview builds one trie of user calls over all threads, counts \
each sample at its deepest user frame by state (RUN, IO, WAIT, BLOCKED, \
SLEEP), and reports handlers by two rules, each with at least --min-samples \
RUN samples and --min-share of all RUN samples:

own-loop (DYMON's): a RUN-dominated child of a user node that waits \
(NODE_WAIT) or reads (NODE_IO) for its next event: the program owns its loop.

library-loop: a RUN-dominated user method entered from library code, on \
threads whose samples outside user code wait or read (at least \
--min-samples): a framework (Jetty, Tomcat, Netty, the JDK's HttpServer, a \
thread pool) owns the loop and calls the application per event.

User code is the application's own classes: recordings with samples list \
the packages of the class path's application entries (its directories, the \
-jar jar, or record --app) in the header; the JDK, frameworks and other \
dependency jars are library code. Older traces fall back to \"not the JDK\" \
(java., javax., jdk., sun., com.sun., org.xml.sax., org.w3c.dom., \
org.ietf.jgss., kotlin., scala., vmview.). --user replaces the split; \
--system adds library classes. Framework profiles (a built-in table of \
known event loops and dispatch methods, extended by --frameworks FILE, off \
with --no-frameworks) keep framework classes library code and label each \
handler with the framework that dispatched it; detection does not need \
them. Callbacks are user methods called by system code that user code \
called (a comparator called by a sort).

A trace recorded with `vmview record --reactions` also times the handlers: \
the agent ran this analysis at the end of its warm-up (--reactions-after), \
instrumented the handler methods it found, and recorded each of their \
calls from then on; this command reports per timed handler the events \
handled and their mean, p50, p90, p99 and max latency.

A Java Flight Recorder recording (.jfr) works too. JFR samples only running \
threads, so the samples of waiting ones are made from its jdk.ThreadPark, \
jdk.JavaMonitorWait, jdk.ThreadSleep, jdk.JavaMonitorEnter and socket and \
file I/O events, one per sampling period (stderr says how many, and from \
what); --no-wait-samples reads JFR's own samples only. JFR keeps only waits \
over 10 ms (profile) or 20 ms (default): record with settings=profile,\
locking-threshold=0ms,socket-threshold=0ms to keep them all (docs/JFR.md).";

const EXAMPLES: &str = "\
Examples:
  vmview record --events samples --interval 10ms -o srv.vmv -- java -jar server.jar
  vmview reactions srv.vmv
  vmview record --reactions --reactions-after 5s -o timed.vmv -- java -jar server.jar
  vmview reactions timed.vmv --format json | jq '.timing.handlers[] | {method, p99_ns}'
  vmview reactions srv.vmv --format json | jq '.handlers[] | {method, type, share}'
  vmview reactions srv.vmv --user 'com.acme.*' --format xml
  vmview reactions srv.vmv --frameworks my-frameworks.txt
  vmview record --reactions --handler javax.servlet.http.HttpServlet.service -o t.vmv -- java -cp ... Main

A --frameworks file has one entry a line, FRAMEWORK KIND GLOB, with KIND \
library (a class glob), loop (a Class.method glob where it waits for the \
next event) or dispatch (a Class.method glob that calls the application):
  acme  library   com.acme.web.*
  acme  loop      com.acme.web.EventLoop.next
  acme  dispatch  com.acme.web.Router.route";

#[derive(Args)]
#[command(about = "Find event handlers and callbacks from stack samples (DYMON reactions)", long_about = LONG_ABOUT, after_long_help = EXAMPLES)]
pub struct ReactionsArgs {
    /// The trace, binary (.vmv), XML or JFR, recorded with --events samples.
    file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// A handler needs at least N RUN samples, and its loop N WAIT or IO samples.
    #[arg(long, value_name = "N", default_value_t = 5)]
    min_samples: u64,
    /// A handler needs at least this share (0 to 1) of all RUN samples.
    #[arg(long, value_name = "F", default_value_t = 0.01)]
    min_share: f64,
    /// Only classes matching GLOB are user code (repeatable).
    #[arg(long, value_name = "GLOB")]
    user: Vec<String>,
    /// Classes matching GLOB are system code too (repeatable).
    #[arg(long, value_name = "GLOB")]
    system: Vec<String>,
    /// More framework profiles from FILE (FRAMEWORK KIND GLOB lines; repeatable).
    #[arg(long, value_name = "FILE")]
    frameworks: Vec<PathBuf>,
    /// Use no framework profiles, not even the built-in ones.
    #[arg(long)]
    no_frameworks: bool,
    /// A JFR recording: read JFR's own samples only, without the wait
    /// samples made from its park, monitor, sleep and I/O events.
    #[arg(long)]
    no_wait_samples: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// Tables, for people.
    Text,
    /// One XML document in the DYMON slides' shapes.
    Xml,
    /// One JSON document, for tools.
    Json,
}

pub fn run(args: &ReactionsArgs) -> anyhow::Result<ExitCode> {
    if !(0.0..=1.0).contains(&args.min_share) {
        return Err(hinted(
            format!("--min-share {} is not between 0 and 1", args.min_share),
            "write a fraction: --min-share 0.05 for 5%",
        ));
    }
    let mut profiles = if args.no_frameworks {
        Profiles::default()
    } else {
        Profiles::builtin()
    };
    for f in &args.frameworks {
        let text = std::fs::read_to_string(f).map_err(|e| {
            hinted(
                format!("cannot read --frameworks {}: {e}", f.display()),
                "give a text file of FRAMEWORK KIND GLOB lines (see vmview reactions --help)",
            )
        })?;
        profiles
            .add_text(&text, &f.display().to_string())
            .map_err(|e| {
                hinted(
                    e,
                    "each line is FRAMEWORK KIND GLOB, KIND one of library, loop, dispatch",
                )
            })?;
    }
    crate::overwrite::refuse_input_as_output(&[&args.file], None)?;
    let jfr = JfrOptions {
        wait_samples: !args.no_wait_samples,
    };
    let mut reader = trace::Input::open_with(&args.file, jfr)?;
    let config = ReactionConfig {
        user: args.user.clone(),
        system: args.system.clone(),
        min_samples: args.min_samples,
        min_share: args.min_share,
        profiles,
        ..ReactionConfig::for_trace(&reader.header().properties)
    };
    let new_trie = || ReactionTrie::new(config.clone());
    let warmup = reader
        .header()
        .properties
        .iter()
        .find(|(k, _)| k == "reactions_after")
        .map(|(_, v)| v.clone());
    let ((trie, latency), events) = reader.fold(
        || (new_trie(), HandlerLatency::new(warmup.is_some())),
        |(trie, latency), ev, syms| {
            trie.event(ev, syms);
            latency.event(ev, syms);
        },
    )?;
    reader.warn(events);
    let waits = reader.source().jfr().map(|j| j.wait_samples().clone());
    if let Some(w) = waits.as_ref().filter(|_| jfr.wait_samples) {
        say!("vmview: note: {}", trace::wait_samples_note(w));
    }
    let r = trie.finish();
    let timing = Timing {
        warmup: warmup.unwrap_or_default(),
        t: latency.finish(),
    };
    if r.samples == 0 {
        return Err(hinted(
            format!("{} holds no SAMPLE events", args.file.display()),
            "record with stack samples: vmview record --events samples --interval 10ms -- java ...",
        ));
    }
    let syms = reader.symbols();
    let text = match args.format {
        Format::Text => render_text(&r, &timing, syms),
        Format::Json => {
            let mut doc = render_json(&r, &timing, syms)?;
            if let Some(w) = &waits {
                doc["jfr_wait_samples"] = wait_samples_json(w, jfr.wait_samples);
            }
            let mut s = serde_json::to_string_pretty(&doc)?;
            s.push('\n');
            s
        }
        Format::Xml => render_xml(&r, &timing, syms),
    };
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn wait_samples_json(w: &WaitSampleStats, made: bool) -> Json {
    let from: serde_json::Map<String, Json> = WAIT_EVENTS
        .iter()
        .enumerate()
        .filter(|&(i, _)| w.events[i] > 0)
        .map(|(i, (name, state))| {
            (
                name.to_string(),
                json!({"events": w.events[i], "samples": w.samples[i], "state": state.name()}),
            )
        })
        .collect();
    json!({
        "made": made,
        "samples": w.total(),
        "period_ns": w.period_ns,
        "period_from": w.period_from.describe(),
        "from": from,
        "covered": w.covered,
        "dropped": w.dropped,
    })
}

fn names(syms: &SymbolTable, m: Option<MethodId>) -> (String, String) {
    match m {
        Some(m) => {
            let n = MethodNames::resolve(syms, m);
            (n.class.to_string(), n.name.to_string())
        }
        None => (String::new(), "<root>".to_string()),
    }
}

fn qualified(syms: &SymbolTable, m: Option<MethodId>) -> String {
    let (c, n) = names(syms, m);
    if c.is_empty() {
        n
    } else {
        format!("{c}.{n}")
    }
}

fn duration_ns(r: &Reactions) -> u64 {
    r.last_ns.saturating_sub(r.first_ns)
}

/// The handler latencies and the warm-up they followed.
struct Timing {
    /// `reactions_after` as recorded (empty without `--reactions`).
    warmup: String,
    t: HandlerTiming,
}

impl Timing {
    fn status(&self) -> &'static str {
        match self.t.status {
            TimingStatus::NotRequested => "not_requested",
            TimingStatus::EndedBeforeWarmup => "ended_before_warmup",
            TimingStatus::Chosen if self.t.handlers.is_empty() && self.t.skipped.is_empty() => {
                "no_handler"
            }
            TimingStatus::Chosen => "timed",
        }
    }

    /// One sentence on what was timed, or why nothing was.
    fn summary(&self, syms: &SymbolTable) -> String {
        let t = &self.t;
        match self.status() {
            "ended_before_warmup" => format!(
                "none: the program ended at {:.2}s, before the {} warm-up ended (record with a shorter --reactions-after)",
                t.last_ns as f64 / 1e9,
                self.warmup
            ),
            "no_handler" => format!(
                "none: no event handler was found in the {} warm-up ({} thread samples)",
                self.warmup, t.samples
            ),
            _ => {
                let mut s = format!(
                    "instrumented at {:.2}s, after the {} warm-up ({} thread samples)",
                    t.chosen_ns as f64 / 1e9,
                    self.warmup,
                    t.samples
                );
                if !t.skipped.is_empty() {
                    let names: Vec<String> =
                        t.skipped.iter().map(|m| qualified(syms, Some(*m))).collect();
                    let _ = write!(
                        s,
                        "; found but not instrumentable (JDK or hidden class): {}",
                        names.join(", ")
                    );
                }
                s
            }
        }
    }
}

fn latency_json(h: &LatencyHistogram) -> Json {
    serde_json::to_value(LatencySummary::from(h)).unwrap_or(Json::Null)
}

fn timing_json(timing: &Timing, syms: &SymbolTable) -> Json {
    let t = &timing.t;
    let method = |m: MethodId| {
        let (c, n) = names(syms, Some(m));
        json!({"class": c, "method": n})
    };
    json!({
        "status": timing.status(),
        "warmup": timing.warmup,
        "chosen_ns": t.chosen_ns,
        "samples": t.samples,
        "handlers": t.handlers.iter().map(|h| {
            let mut o = method(h.method);
            if let (Json::Object(o), Json::Object(l)) = (&mut o, latency_json(&h.latency)) {
                o.extend(l);
            }
            o
        }).collect::<Vec<_>>(),
        "skipped": t.skipped.iter().map(|m| method(*m)).collect::<Vec<_>>(),
    })
}

fn render_json(r: &Reactions, timing: &Timing, syms: &SymbolTable) -> serde_json::Result<Json> {
    let name = |m: Option<MethodId>| {
        let (class, method) = names(syms, m);
        MethodRef { class, method }
    };
    let latency = |m: MethodId| timing.t.of(m).map(LatencySummary::from);
    let mut doc = serde_json::to_value(r.report(syms, &name, &latency, None))?;
    doc["timing"] = timing_json(timing, syms);
    Ok(doc)
}

fn latency_text(ns: u64) -> String {
    match ns {
        n if n >= 1_000_000_000 => format!("{:.3}s", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.3}ms", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.1}us", n as f64 / 1e3),
        n => format!("{n}ns"),
    }
}

fn timing_text(timing: &Timing, syms: &SymbolTable, s: &mut String) {
    let _ = writeln!(s, "\nhandler latency");
    let _ = writeln!(s, "  {}", timing.summary(syms));
    if timing.t.handlers.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "  {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}  handler",
        "events", "mean", "p50", "p90", "p99", "max"
    );
    for h in &timing.t.handlers {
        let l = &h.latency;
        // Overloads (both HttpServlet.service methods) get their descriptor.
        let mut name = qualified(syms, Some(h.method));
        let overloaded = timing
            .t
            .handlers
            .iter()
            .filter(|o| qualified(syms, Some(o.method)) == name)
            .count()
            > 1;
        if overloaded {
            if let Some(m) = syms.method(h.method) {
                name.push_str(syms.string(m.sig));
            }
        }
        let _ = writeln!(
            s,
            "  {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}  {}",
            l.count(),
            latency_text(l.mean()),
            latency_text(l.quantile(0.50)),
            latency_text(l.quantile(0.90)),
            latency_text(l.quantile(0.99)),
            latency_text(l.max()),
            name
        );
    }
}

fn render_text(r: &Reactions, timing: &Timing, syms: &SymbolTable) -> String {
    let mut s = String::new();
    let secs = duration_ns(r) as f64 / 1e9;
    let _ = writeln!(
        s,
        "{} thread samples in {} ticks over {secs:.2}s, {} of them RUN",
        r.samples, r.ticks, r.run_samples
    );
    let _ = writeln!(s, "\nhandlers");
    if r.handlers.is_empty() {
        let _ = writeln!(s, "  none above the cut-offs");
    }
    for h in &r.handlers {
        let threads: Vec<String> = h
            .threads
            .iter()
            .map(|(t, _)| syms.thread_name(*t))
            .collect();
        let via = match (h.rule, h.dispatch, &h.framework) {
            (HandlerRule::OwnLoop, _, _) => String::new(),
            (HandlerRule::LibraryLoop, d, f) => format!(
                "; called by {}{}",
                d.map_or("?".to_string(), |m| qualified(syms, Some(m))),
                f.as_ref().map_or(String::new(), |f| format!(" ({f})"))
            ),
        };
        let _ = writeln!(
            s,
            "  {:<9}  {}  ({}: {} samples, {:.1}% of RUN; loop {} waited {}{via}; {}; threads {})",
            h.kind.name(),
            qualified(syms, r.nodes[h.node].method),
            h.rule.name(),
            h.samples,
            h.share * 100.0,
            qualified(syms, h.loop_method(r)),
            h.waiting,
            states_text(&h.states),
            threads.join(", ")
        );
    }
    if timing.t.status != TimingStatus::NotRequested {
        timing_text(timing, syms, &mut s);
    }
    let _ = writeln!(s, "\ncallbacks");
    if r.callbacks.is_empty() {
        let _ = writeln!(s, "  none");
    }
    for c in &r.callbacks {
        let _ = writeln!(s, "  {:>7}  {}", c.samples, qualified(syms, Some(c.method)));
    }
    let _ = writeln!(s, "\nthreads");
    for t in &r.threads {
        let hs: Vec<String> = t
            .handlers
            .iter()
            .map(|(i, n)| {
                format!(
                    "{} ({n})",
                    qualified(syms, r.nodes[r.handlers[*i].node].method)
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "  {}: {}{}",
            syms.thread_name(t.thread),
            states_text(&t.states),
            if hs.is_empty() {
                String::new()
            } else {
                format!("; handlers {}", hs.join(", "))
            }
        );
    }
    let _ = writeln!(s, "\ntrie (own samples by state at the deepest user frame)");
    trie_text(r, syms, 0, 1, &mut s);
    s
}

fn states_text(c: &StateCounts) -> String {
    ThreadState::ALL
        .iter()
        .filter(|st| c[st.index()] > 0)
        .map(|st| format!("{} {}", st.name(), c[st.index()]))
        .collect::<Vec<_>>()
        .join(" ")
}

fn trie_text(r: &Reactions, syms: &SymbolTable, i: usize, depth: usize, s: &mut String) {
    let n = &r.nodes[i];
    let _ = writeln!(
        s,
        "{:indent$}{}  [{}]",
        "",
        qualified(syms, n.method),
        states_text(&n.own),
        indent = depth * 2
    );
    for c in &n.children {
        trie_text(r, syms, *c, depth + 1, s);
    }
}

/// `class@method`, as the slides name methods.
fn at_name(syms: &SymbolTable, m: Option<MethodId>) -> String {
    let (c, n) = names(syms, m);
    format!("{c}@{n}")
}

fn attr(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '\'' => o.push_str("&apos;"),
            '"' => o.push_str("&quot;"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "&#{};", c as u32);
            }
            c => o.push(c),
        }
    }
    o
}

/// ` COUNT='…' MEAN='…' P50='…' P90='…' P99='…' MAX='…'`, times in ms.
fn latency_attrs(l: &LatencyHistogram) -> String {
    let ms = |ns: u64| format!("{:.3}", ns as f64 / 1e6);
    format!(
        " COUNT='{}' MEAN='{}' P50='{}' P90='{}' P99='{}' MAX='{}'",
        l.count(),
        ms(l.mean()),
        ms(l.quantile(0.50)),
        ms(l.quantile(0.90)),
        ms(l.quantile(0.99)),
        ms(l.max())
    )
}

fn timing_xml(timing: &Timing, syms: &SymbolTable, s: &mut String) {
    let t = &timing.t;
    let _ = write!(
        s,
        "  <TIMING STATUS='{}' WARMUP='{}' SAMPLES='{}'",
        timing.status(),
        attr(&timing.warmup),
        t.samples
    );
    if t.status == TimingStatus::Chosen {
        let _ = write!(s, " START='{}'", t.chosen_ns / 1_000_000);
    }
    if t.handlers.is_empty() && t.skipped.is_empty() {
        s.push_str(" />\n");
        return;
    }
    s.push_str(">\n");
    for h in &t.handlers {
        let _ = writeln!(
            s,
            "    <HANDLER METHOD='{}'{} />",
            attr(&at_name(syms, Some(h.method))),
            latency_attrs(&h.latency)
        );
    }
    for m in &t.skipped {
        let _ = writeln!(
            s,
            "    <SKIPPED METHOD='{}' />",
            attr(&at_name(syms, Some(*m)))
        );
    }
    s.push_str("  </TIMING>\n");
}

fn render_xml(r: &Reactions, timing: &Timing, syms: &SymbolTable) -> String {
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        s,
        "<REACTIONS LAST='{}' MONTIME='{}' SAMPLES='{}' TSAMPLES='{}'>",
        r.last_ns / 1_000_000,
        duration_ns(r) / 1_000_000,
        r.ticks,
        r.samples
    );
    for c in &r.callbacks {
        let _ = writeln!(
            s,
            "  <CALLBACK STACK='{}' USER='{}' />",
            c.samples,
            attr(&at_name(syms, Some(c.method)))
        );
    }
    s.push_str("  <TRIE>\n");
    for c in &r.nodes[0].children {
        trie_xml(r, syms, *c, 2, &mut s);
    }
    s.push_str("  </TRIE>\n");
    let tick_ms = if r.ticks > 1 {
        duration_ns(r) as f64 / 1e6 / (r.ticks - 1) as f64
    } else {
        0.0
    };
    let handler_samples: u64 = r.handlers.iter().map(|h| h.samples).sum();
    let _ = writeln!(
        s,
        "  <REACTION TOTTIME='{:.2}' TOTSAMP='{}'>",
        handler_samples as f64 * tick_ms,
        handler_samples
    );
    for c in &r.callbacks {
        let _ = writeln!(
            s,
            "    <CALLBACK METHOD='{}' />",
            attr(&at_name(syms, Some(c.method)))
        );
    }
    for h in &r.handlers {
        let latency = r.nodes[h.node]
            .method
            .and_then(|m| timing.t.of(m))
            .map(latency_attrs)
            .unwrap_or_default();
        let framework = h
            .framework
            .as_ref()
            .map(|f| format!(" FRAMEWORK='{}'", attr(f)))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "    <EVENT METHOD='{}' TYPE='{}' RULE='{}'{framework} SAMPLES='{}' RUN='{}' SHARE='{:.4}'{latency} />",
            attr(&at_name(syms, r.nodes[h.node].method)),
            h.kind.name(),
            h.rule.name(),
            h.samples,
            h.run,
            h.share
        );
    }
    s.push_str("  </REACTION>\n");
    if timing.t.status != TimingStatus::NotRequested {
        timing_xml(timing, syms, &mut s);
    }
    s.push_str("</REACTIONS>\n");
    s
}

fn trie_xml(r: &Reactions, syms: &SymbolTable, i: usize, depth: usize, s: &mut String) {
    let n = &r.nodes[i];
    let (class, method) = names(syms, n.method);
    let c = |st: ThreadState| n.own[st.index()];
    let _ = write!(
        s,
        "{:indent$}<TRIENODE CLASS='{}' IO='{}' METHOD='{}' RUN='{}' WAIT='{}' BLOCKED='{}' SLEEP='{}'",
        "",
        attr(&class),
        c(ThreadState::Io),
        attr(&method),
        c(ThreadState::Run),
        c(ThreadState::Wait),
        c(ThreadState::Blocked),
        c(ThreadState::Sleep),
        indent = depth * 2
    );
    if n.children.is_empty() {
        s.push_str(" />\n");
        return;
    }
    s.push_str(">\n");
    for ch in &n.children {
        trie_xml(r, syms, *ch, depth + 1, s);
    }
    let _ = writeln!(s, "{:indent$}</TRIENODE>", "", indent = depth * 2);
}
