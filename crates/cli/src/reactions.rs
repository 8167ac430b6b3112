//! `vmview reactions`: the event handlers and callbacks of a program, found
//! from SAMPLE events (`vmview record --events samples`) as DYMON did.
//!
//! The analysis is `vmview_analysis::ReactionTrie`; this module reads the
//! trace, names the handles and renders the result as text, as JSON for
//! tools, or as XML in the shapes of the DYMON slides (`<REACTIONS>`,
//! `<TRIE>`, `<REACTION>`).

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde_json::{json, Value as Json};
use vmview_analysis::reactions::{Reactions, StateCounts};
use vmview_analysis::{EventSink, ReactionConfig, ReactionTrie};
use vmview_export::names::MethodNames;
use vmview_format::{MethodId, SymbolTable, ThreadState};

use crate::error::hinted;
use crate::trace;

const LONG_ABOUT: &str = "\
Find the event handlers of a program from stack samples (record with \
--events samples): servers, crawlers and UIs loop over \"get the next event, \
process it\". vmview builds one trie of user calls over all threads (system \
code — java., javax., jdk., sun., com.sun., org.xml.sax., org.w3c.dom., \
org.ietf.jgss., kotlin., scala. and --system — \
makes no nodes), counts each sample at its deepest user frame by state \
(RUN, IO, WAIT, BLOCKED, SLEEP), and reports as a handler each RUN-dominated \
child of a node that waits (NODE_WAIT) or reads (NODE_IO) for its next event, \
when it has at least --min-samples RUN samples and --min-share of all RUN \
samples. Callbacks are user methods called by system code that user code \
called (a comparator called by a sort).";

const EXAMPLES: &str = "\
Examples:
  vmview record --events samples --interval 10ms -o srv.vmv -- java -jar server.jar
  vmview reactions srv.vmv
  vmview reactions srv.vmv --format json | jq '.handlers[] | {method, type, share}'
  vmview reactions srv.vmv --user 'com.acme.*' --format xml";

#[derive(Args)]
#[command(about = "Find event handlers and callbacks from stack samples (DYMON reactions)", long_about = LONG_ABOUT, after_long_help = EXAMPLES)]
pub struct ReactionsArgs {
    /// The trace file (.vmv), recorded with --events samples.
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
    let mut reader = trace::open(&args.file)?;
    let mut trie = ReactionTrie::new(ReactionConfig {
        user: args.user.clone(),
        system: args.system.clone(),
        min_samples: args.min_samples,
        min_share: args.min_share,
    });
    let mut events = 0u64;
    while let Some(ev) = reader.next_event() {
        events += 1;
        trie.event(&ev, reader.symbols());
    }
    trace::warn_diagnostics(reader.diagnostics(), events);
    let r = trie.finish();
    if r.samples == 0 {
        return Err(hinted(
            format!("{} holds no SAMPLE events", args.file.display()),
            "record with stack samples: vmview record --events samples --interval 10ms -- java ...",
        ));
    }
    let syms = reader.symbols();
    let text = match args.format {
        Format::Text => render_text(&r, syms),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&render_json(&r, syms))?;
            s.push('\n');
            s
        }
        Format::Xml => render_xml(&r, syms),
    };
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
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

fn states_json(c: &StateCounts) -> Json {
    let mut o = serde_json::Map::new();
    for s in ThreadState::ALL {
        o.insert(s.name().to_string(), json!(c[s.index()]));
    }
    Json::Object(o)
}

fn duration_ns(r: &Reactions) -> u64 {
    r.last_ns.saturating_sub(r.first_ns)
}

fn render_json(r: &Reactions, syms: &SymbolTable) -> Json {
    let method = |m: Option<MethodId>| {
        let (c, n) = names(syms, m);
        json!({"class": c, "method": n})
    };
    let handlers: Vec<Json> = r
        .handlers
        .iter()
        .map(|h| {
            let (class, name) = names(syms, r.nodes[h.node].method);
            json!({
                "class": class,
                "method": name,
                "type": h.kind.name(),
                "loop": method(r.nodes[h.loop_node].method),
                "samples": h.samples,
                "run": h.run,
                "share": h.share,
                "waiting": h.waiting,
                "states": states_json(&h.states),
                "threads": h.threads.iter().map(|(t, n)| json!({"thread": syms.thread_name(*t), "samples": n})).collect::<Vec<_>>(),
            })
        })
        .collect();
    let callbacks: Vec<Json> = r
        .callbacks
        .iter()
        .map(|c| {
            let (class, name) = names(syms, Some(c.method));
            json!({"class": class, "method": name, "samples": c.samples})
        })
        .collect();
    let threads: Vec<Json> = r
        .threads
        .iter()
        .map(|t| {
            json!({
                "thread": syms.thread_name(t.thread),
                "states": states_json(&t.states),
                "handlers": t.handlers.iter().map(|(i, n)| {
                    let (class, name) = names(syms, r.nodes[r.handlers[*i].node].method);
                    json!({"class": class, "method": name, "samples": n})
                }).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "samples": r.samples,
        "ticks": r.ticks,
        "run_samples": r.run_samples,
        "duration_ns": duration_ns(r),
        "handlers": handlers,
        "callbacks": callbacks,
        "threads": threads,
        "trie": trie_json(r, syms, 0),
    })
}

fn trie_json(r: &Reactions, syms: &SymbolTable, i: usize) -> Json {
    let n = &r.nodes[i];
    let (class, name) = names(syms, n.method);
    json!({
        "class": class,
        "method": name,
        "own": states_json(&n.own),
        "total": states_json(&n.total),
        "children": n.children.iter().map(|c| trie_json(r, syms, *c)).collect::<Vec<_>>(),
    })
}

fn render_text(r: &Reactions, syms: &SymbolTable) -> String {
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
        let _ = writeln!(
            s,
            "  {:<9}  {}  ({} samples, {:.1}% of RUN; loop {} waited {}; {}; threads {})",
            h.kind.name(),
            qualified(syms, r.nodes[h.node].method),
            h.samples,
            h.share * 100.0,
            qualified(syms, r.nodes[h.loop_node].method),
            h.waiting,
            states_text(&h.states),
            threads.join(", ")
        );
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

fn render_xml(r: &Reactions, syms: &SymbolTable) -> String {
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
        let _ = writeln!(
            s,
            "    <EVENT METHOD='{}' TYPE='{}' SAMPLES='{}' RUN='{}' SHARE='{:.4}' />",
            attr(&at_name(syms, r.nodes[h.node].method)),
            h.kind.name(),
            h.samples,
            h.run,
            h.share
        );
    }
    s.push_str("  </REACTION>\n</REACTIONS>\n");
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
