//! The Chrome trace-event exporter: a JSON file that Perfetto
//! (<https://ui.perfetto.dev>) and `chrome://tracing` open as a timeline.
//!
//! Java developers already know these viewers; giving them a vmview trace
//! in this shape lets them zoom through calls per thread without learning a
//! new tool. The format is Google's "Trace Event Format" (JSON object form):
//!
//! - one track per thread: `pid` is the JVM's process id, `tid` the
//!   thread's handle in the trace, and a `thread_name` metadata event names
//!   it (a `process_name` one names the JVM); a trace made by `vmview
//!   merge` gets one process per source JVM;
//! - a traced call is a `B`/`E` slice pair named `class.method`, its
//!   arguments (`args`: the descriptor, depth, event id and each parameter
//!   by name) on `B`, its return value or exception on `E`. Slices nest
//!   properly even when the trace is cut off: [`crate::calls`] closes
//!   calls whose RETURN is missing (marked `"cut_off": true`) and drops
//!   RETURNs whose CALL is missing;
//! - THROW and CATCH are thread-scoped instant events (`ph: "i"`), and so
//!   is the end of a contended monitor enter (with the time blocked);
//! - counters (`ph: "C"`) follow the JVM: `GC` (1 while a collection
//!   runs), `monitors` (threads blocked entering a monitor, threads in
//!   `Object.wait`);
//! - a SAMPLE (`events=samples`) is a thread-scoped instant event named by
//!   the thread's state (`RUN`, `IO`, `WAIT`, `BLOCKED`, `SLEEP`), its
//!   stack in `args.stack` (top first, `class.method:line`; the top
//!   [`vmview_format::DEFAULT_MAX_DEPTH`] frames, then `[truncated N
//!   frames]` for the rest) and the
//!   monitors it holds in `args.monitors`;
//! - DROPPED becomes a process-scoped instant event;
//! - with a weight ([`ChromeWriter::weighted`], `--weight
//!   samples|cpu|wall|alloc|lock`, see [`crate::weight`]) the document
//!   also carries the format's sampling section: `stackFrames` (a tree of
//!   frames, `parent` toward the stack base) and `samples` (one per event
//!   of that weight: time, thread, leaf frame `sf` and `weight`, in the
//!   weight's unit: samples, bytes or nanoseconds waited), which
//!   chrome://tracing shows as sampled stacks.
//!
//! Times are microseconds (`ts`, as the format wants) with nanosecond
//! decimals; `displayTimeUnit` is `ns`. The writer streams: one event in,
//! at most a few JSON objects out, memory bounded by the open calls.

use std::borrow::Cow;
use std::io::{self, Write};

use serde::Serialize;
use serde_json::{Map, Value as Json};
use vmview_format::{
    Event, EventKind, Loc, MethodId, Outcome, SymbolTable, ThreadRef, TraceHeader,
};

use crate::calls::{CallMatcher, Closed, Transition};
use crate::jsonl::{held_json, value_json};
use crate::names::{loc_display, monitor_name, MethodNames};
use crate::parquet::{merge_sources, MERGE_SOURCE_BITS};
use crate::weight::{blocked_label, Weighed, Weigher, WeightError};
use crate::EventWriter;

/// The `stackFrames` and `samples` of a weighed export.
#[derive(Default)]
struct Sampling {
    /// (parent frame + 1, or 0 at the base; name).
    frames: Vec<(u32, String)>,
    frame_of: std::collections::HashMap<(u32, String), u32>,
    /// Time (ns), pid, tid, leaf frame, weight.
    samples: Vec<(u64, u32, u32, u32, u64)>,
}

impl Sampling {
    /// The leaf of a path of frame names, base first; `None` for an empty one.
    fn leaf(&mut self, names: impl IntoIterator<Item = String>) -> Option<u32> {
        let mut parent = 0u32;
        for name in names {
            let next = self.frames.len() as u32;
            let id = *self.frame_of.entry((parent, name.clone())).or_insert(next);
            if id == next {
                self.frames.push((parent, name));
            }
            parent = id + 1;
        }
        parent.checked_sub(1)
    }
}

/// One trace event, as the format spells it.
#[derive(Serialize)]
struct WireEvent<'a> {
    /// Empty (left out) on `E`, which ends the innermost open slice.
    #[serde(skip_serializing_if = "str::is_empty")]
    name: Cow<'a, str>,
    #[serde(skip_serializing_if = "str::is_empty")]
    cat: &'static str,
    ph: &'static str,
    ts: f64,
    pid: u32,
    tid: u32,
    /// Scope of an instant event: `t` thread, `p` process.
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'static str>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    args: Map<String, Json>,
}

/// Writes a Chrome trace-event JSON document.
pub struct ChromeWriter<W: Write> {
    out: W,
    /// The process of the event being written.
    pid: u32,
    /// One per JVM: the trace's, or each source of a merged trace.
    processes: Vec<Process>,
    merged: bool,
    /// The process of each thread, for slices closed at the end.
    thread_pid: Vec<u32>,
    buf: Vec<u8>,
    first: bool,
    calls: CallMatcher,
    named: Vec<bool>,
    blocked: Vec<bool>,
    waiting: Vec<bool>,
    header_written: bool,
    /// The weight asked for, and the sampled stacks of it.
    weigher: Option<Weigher>,
    sampling: Sampling,
}

/// A JVM's track group and its monitor counters.
struct Process {
    pid: u32,
    name: String,
    blocked: u32,
    waiting: u32,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

impl<W: Write> ChromeWriter<W> {
    /// A writer for a trace with this header (the JVM's pid and command
    /// name the process track; a merged trace gets one process per source).
    pub fn new(out: W, header: &TraceHeader) -> Self {
        let name = |command: Option<&str>, pid: u32| match command {
            Some(c) if !c.is_empty() => format!("java {c} (pid {pid})"),
            _ => format!("java (pid {pid})"),
        };
        let prop = |k: &str| {
            header
                .properties
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        let sources = merge_sources(header);
        let merged = !sources.is_empty();
        let processes: Vec<Process> = if merged {
            sources
                .iter()
                .enumerate()
                .map(|(i, s)| Process {
                    pid: s.pid,
                    name: format!(
                        "{} {}",
                        s.file,
                        name(prop(&format!("merge.source.{i}.command")), s.pid)
                    ),
                    blocked: 0,
                    waiting: 0,
                })
                .collect()
        } else {
            vec![Process {
                pid: header.pid,
                name: name(prop("command"), header.pid),
                blocked: 0,
                waiting: 0,
            }]
        };
        ChromeWriter {
            out,
            pid: processes[0].pid,
            processes,
            merged,
            thread_pid: Vec::new(),
            buf: Vec::with_capacity(4096),
            first: true,
            calls: CallMatcher::new(),
            named: Vec::new(),
            blocked: Vec::new(),
            waiting: Vec::new(),
            header_written: false,
            weigher: None,
            sampling: Sampling::default(),
        }
    }

    /// A writer that also writes the sampled stacks of `weigher`'s weight
    /// (`stackFrames` and `samples`).
    pub fn weighted(out: W, header: &TraceHeader, weigher: Weigher) -> Self {
        ChromeWriter {
            weigher: Some(weigher),
            ..Self::new(out, header)
        }
    }

    /// Adds `ev` to the sampled stacks if it is of the weight asked for.
    fn weigh(&mut self, ev: &Event, syms: &SymbolTable) {
        let Some(w) = &mut self.weigher else {
            return;
        };
        let cap = vmview_format::DEFAULT_MAX_DEPTH as usize;
        let (leaf, weight) = match w.weigh(ev) {
            None => return,
            Some(Weighed::Stack { stack, weight }) => {
                let frames = syms.stack(stack).map_or(&[][..], |s| s.frames.as_slice());
                let cut = frames.len().saturating_sub(cap);
                let names = frames
                    .iter()
                    .rev()
                    .take(cap)
                    .map(|(m, _)| slice_name(syms, *m))
                    .chain((cut > 0).then(|| {
                        vmview_format::truncated_label(u32::try_from(cut).unwrap_or(u32::MAX))
                    }));
                (self.sampling.leaf(names), weight)
            }
            Some(Weighed::Lock { class, wait_ns }) => {
                let open = self.calls.stack(ev.thread);
                let cut = open.len().saturating_sub(cap);
                let names: Vec<String> = open
                    .iter()
                    .take(cap)
                    .map(|f| slice_name(syms, f.method))
                    .chain((cut > 0).then(|| {
                        vmview_format::truncated_label(u32::try_from(cut).unwrap_or(u32::MAX))
                    }))
                    .chain(std::iter::once(blocked_label(syms.string(class))))
                    .collect();
                (self.sampling.leaf(names), wait_ns)
            }
        };
        if let Some(leaf) = leaf {
            self.sampling
                .samples
                .push((ev.time_ns, self.pid, ev.thread.0, leaf, weight));
        }
    }

    /// `,"stackFrames":{…},"samples":[…]` of a weighed export.
    fn write_sampling(&mut self) -> io::Result<()> {
        let s = &self.sampling;
        let buf = &mut self.buf;
        buf.extend_from_slice(b",\"stackFrames\":{");
        for (i, (parent, name)) in s.frames.iter().enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            let mut frame = Map::new();
            frame.insert("category".into(), Json::String("java".into()));
            frame.insert("name".into(), Json::String(name.clone()));
            if *parent > 0 {
                frame.insert("parent".into(), Json::String((parent - 1).to_string()));
            }
            write!(buf, "\n\"{i}\":")?;
            serde_json::to_writer(&mut *buf, &frame)?;
        }
        buf.extend_from_slice(b"},\"samples\":[");
        let name = self
            .weigher
            .as_ref()
            .map_or("samples", |w| w.weight().name());
        for (i, (at, pid, tid, sf, weight)) in s.samples.iter().enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            let mut sample = Map::new();
            sample.insert("cpu".into(), Json::from(0));
            sample.insert("pid".into(), Json::from(*pid));
            sample.insert("tid".into(), Json::from(*tid));
            sample.insert("ts".into(), Json::from(us(*at)));
            sample.insert("name".into(), Json::String(name.into()));
            sample.insert("sf".into(), Json::String(sf.to_string()));
            sample.insert("weight".into(), Json::from(*weight));
            buf.push(b'\n');
            serde_json::to_writer(&mut *buf, &sample)?;
        }
        buf.extend_from_slice(b"]");
        Ok(())
    }

    /// Gives the underlying writer back (after [`EventWriter::finish`]).
    pub fn into_inner(self) -> W {
        self.out
    }

    fn push(buf: &mut Vec<u8>, first: &mut bool, ev: &WireEvent<'_>) -> io::Result<()> {
        if !*first {
            buf.extend_from_slice(b",\n");
        }
        *first = false;
        serde_json::to_writer(&mut *buf, ev)?;
        Ok(())
    }

    fn start(&mut self) -> io::Result<()> {
        if self.header_written {
            return Ok(());
        }
        self.header_written = true;
        self.out.write_all(
            b"{\"displayTimeUnit\":\"ns\",\"otherData\":{\"exporter\":\"vmview\"},\"traceEvents\":[\n",
        )?;
        for p in &self.processes {
            let mut args = Map::new();
            args.insert("name".into(), Json::String(p.name.clone()));
            let ev = WireEvent {
                name: "process_name".into(),
                cat: "",
                ph: "M",
                ts: 0.0,
                pid: p.pid,
                tid: 0,
                s: None,
                args,
            };
            Self::push(&mut self.buf, &mut self.first, &ev)?;
        }
        Ok(())
    }

    /// The process an event belongs to (its source, in a merged trace).
    fn process_of(&self, id: u64) -> usize {
        if self.merged {
            let s = (id & ((1 << MERGE_SOURCE_BITS) - 1)) as usize;
            s.min(self.processes.len() - 1)
        } else {
            0
        }
    }

    fn name_thread(&mut self, thread: ThreadRef, syms: &SymbolTable) -> io::Result<()> {
        let i = thread.0 as usize;
        if self.named.get(i).copied().unwrap_or(false) {
            return Ok(());
        }
        if i >= self.named.len() {
            self.named.resize(i + 1, false);
        }
        self.named[i] = true;
        if i >= self.thread_pid.len() {
            self.thread_pid.resize(i + 1, 0);
        }
        self.thread_pid[i] = self.pid;
        let mut args = Map::new();
        args.insert("name".into(), Json::String(syms.thread_name(thread)));
        let ev = WireEvent {
            name: "thread_name".into(),
            cat: "",
            ph: "M",
            ts: 0.0,
            pid: self.pid,
            tid: thread.0,
            s: None,
            args,
        };
        Self::push(&mut self.buf, &mut self.first, &ev)
    }

    /// Sets `flags[thread]` to `on`; returns by how much the count changes.
    fn flip(flags: &mut Vec<bool>, thread: ThreadRef, on: bool) -> i32 {
        let i = thread.0 as usize;
        if i >= flags.len() {
            flags.resize(i + 1, false);
        }
        let was = std::mem::replace(&mut flags[i], on);
        i32::from(on) - i32::from(was)
    }

    fn monitors_counter(&mut self, at: u64, process: usize) -> io::Result<()> {
        let mut args = Map::new();
        let p = &self.processes[process];
        args.insert("blocked".into(), Json::from(p.blocked));
        args.insert("waiting".into(), Json::from(p.waiting));
        let ev = WireEvent {
            name: "monitors".into(),
            cat: "lock",
            ph: "C",
            ts: us(at),
            pid: self.pid,
            tid: 0,
            s: None,
            args,
        };
        Self::push(&mut self.buf, &mut self.first, &ev)
    }
}

fn site(syms: &SymbolTable, m: MethodId, loc: &Loc) -> Json {
    Json::String(format!(
        "{} {}",
        MethodNames::resolve(syms, m).display(),
        loc_display(loc)
    ))
}

/// A slice's name: `class.method`.
fn slice_name(syms: &SymbolTable, m: MethodId) -> String {
    let n = MethodNames::resolve(syms, m);
    format!("{}.{}", n.class, n.name)
}

/// Renders the matcher's transitions as B/E events.
fn slice_event<'a>(
    pid: u32,
    tr: &Transition<'_>,
    call: Option<&Event>,
    syms: &'a SymbolTable,
) -> WireEvent<'a> {
    match tr {
        Transition::Open { thread, frame } => {
            let mut args = Map::new();
            let n = MethodNames::resolve(syms, frame.method);
            args.insert("sig".into(), Json::String(n.sig.to_string()));
            args.insert("depth".into(), Json::from(frame.depth));
            args.insert("id".into(), Json::from(frame.call_id));
            if let Some(Event {
                kind: EventKind::Call { params, .. },
                ..
            }) = call
            {
                let names = syms
                    .method(frame.method)
                    .map(|m| m.param_names.as_slice())
                    .unwrap_or(&[]);
                let mut values = Map::new();
                for (i, v) in params.iter().enumerate() {
                    let key = match names.get(i) {
                        Some(s) => syms.string(*s).to_string(),
                        None => format!("arg{i}"),
                    };
                    if let Some(j) = value_json(v, syms) {
                        values.insert(key, j);
                    }
                }
                if !values.is_empty() {
                    args.insert("params".into(), Json::Object(values));
                }
            }
            WireEvent {
                name: slice_name(syms, frame.method).into(),
                cat: "call",
                ph: "B",
                ts: us(frame.start_ns),
                pid,
                tid: thread.0,
                s: None,
                args,
            }
        }
        Transition::Close {
            thread,
            at_ns,
            how,
            ret,
            ..
        } => {
            let mut args = Map::new();
            match (how, ret) {
                (
                    Closed::Returned,
                    Some(Event {
                        kind: EventKind::Return { outcome, .. },
                        ..
                    }),
                ) => match outcome {
                    Outcome::Void => {}
                    Outcome::Value(v) => {
                        if let Some(j) = value_json(v, syms) {
                            args.insert("return".into(), j);
                        }
                    }
                    Outcome::Exception { class } => {
                        args.insert(
                            "exception".into(),
                            Json::String(syms.string(*class).to_string()),
                        );
                    }
                },
                _ => {
                    args.insert("cut_off".into(), Json::Bool(true));
                }
            }
            WireEvent {
                name: "".into(),
                cat: "call",
                ph: "E",
                ts: us(*at_ns),
                pid,
                tid: thread.0,
                s: None,
                args,
            }
        }
    }
}

impl<W: Write> EventWriter for ChromeWriter<W> {
    fn write_event(&mut self, ev: &Event, syms: &SymbolTable) -> io::Result<()> {
        self.start()?;
        let process = self.process_of(ev.id);
        self.pid = self.processes[process].pid;
        self.name_thread(ev.thread, syms)?;
        self.weigh(ev, syms);
        let pid = self.pid;
        let (buf, first) = (&mut self.buf, &mut self.first);
        let mut err = Ok(());
        let at = self.calls.event(ev, |tr| {
            let call = matches!(tr, Transition::Open { .. }).then_some(ev);
            if err.is_ok() {
                err = Self::push(buf, first, &slice_event(pid, &tr, call, syms));
            }
        });
        err?;
        let instant = |name: String, cat: &'static str, args: Map<String, Json>| WireEvent {
            name: name.into(),
            cat,
            ph: "i",
            ts: us(at),
            pid,
            tid: ev.thread.0,
            s: Some("t"),
            args,
        };
        match &ev.kind {
            EventKind::Throw {
                exception,
                message,
                method,
                loc,
                catch,
            } => {
                let mut args = Map::new();
                args.insert("id".into(), Json::from(ev.id));
                args.insert(
                    "message".into(),
                    message
                        .as_ref()
                        .map_or(Json::Null, |m| Json::String(m.clone())),
                );
                args.insert("thrown_at".into(), site(syms, *method, loc));
                args.insert(
                    "catch_at".into(),
                    match catch {
                        Some((m, l)) => site(syms, *m, l),
                        None => Json::String("uncaught".into()),
                    },
                );
                let e = instant(
                    format!("throw {}", syms.string(*exception)),
                    "exception",
                    args,
                );
                Self::push(&mut self.buf, &mut self.first, &e)?;
            }
            EventKind::Catch {
                exception,
                method,
                loc,
            } => {
                let mut args = Map::new();
                args.insert("id".into(), Json::from(ev.id));
                args.insert("catch_at".into(), site(syms, *method, loc));
                let e = instant(
                    format!("catch {}", syms.string(*exception)),
                    "exception",
                    args,
                );
                Self::push(&mut self.buf, &mut self.first, &e)?;
            }
            EventKind::MonitorContendedEnter { .. } => {
                let d = Self::flip(&mut self.blocked, ev.thread, true);
                let p = &mut self.processes[process];
                p.blocked = p.blocked.saturating_add_signed(d);
                self.monitors_counter(at, process)?;
            }
            EventKind::MonitorContendedEntered { monitor, wait_ns } => {
                let d = Self::flip(&mut self.blocked, ev.thread, false);
                let p = &mut self.processes[process];
                p.blocked = p.blocked.saturating_add_signed(d);
                let mut args = Map::new();
                args.insert("id".into(), Json::from(ev.id));
                args.insert("wait_ns".into(), Json::from(*wait_ns));
                let name = format!("entered {}", monitor_name(syms, monitor));
                let e = instant(name, "lock", args);
                Self::push(&mut self.buf, &mut self.first, &e)?;
                self.monitors_counter(at, process)?;
            }
            EventKind::MonitorWait { .. } => {
                let d = Self::flip(&mut self.waiting, ev.thread, true);
                let p = &mut self.processes[process];
                p.waiting = p.waiting.saturating_add_signed(d);
                self.monitors_counter(at, process)?;
            }
            EventKind::MonitorWaited { .. } => {
                let d = Self::flip(&mut self.waiting, ev.thread, false);
                let p = &mut self.processes[process];
                p.waiting = p.waiting.saturating_add_signed(d);
                self.monitors_counter(at, process)?;
            }
            EventKind::GcStart | EventKind::GcFinish { .. } => {
                let mut args = Map::new();
                let running = matches!(ev.kind, EventKind::GcStart);
                args.insert("running".into(), Json::from(u8::from(running)));
                let e = WireEvent {
                    name: "GC".into(),
                    cat: "gc",
                    ph: "C",
                    ts: us(at),
                    pid,
                    tid: 0,
                    s: None,
                    args,
                };
                Self::push(&mut self.buf, &mut self.first, &e)?;
            }
            EventKind::Sample {
                state,
                stack,
                monitors,
            } => {
                let mut args = Map::new();
                let frames = syms.stack(*stack).map_or(&[][..], |s| s.frames.as_slice());
                let cap = vmview_format::DEFAULT_MAX_DEPTH as usize;
                let cut = frames.len().saturating_sub(cap);
                let mut frames: Vec<Json> = frames
                    .iter()
                    .take(cap)
                    .map(|(m, loc)| {
                        let name = slice_name(syms, *m);
                        Json::String(match loc.line {
                            Some(l) => format!("{name}:{l}"),
                            None => name,
                        })
                    })
                    .collect();
                if cut > 0 {
                    frames.push(Json::String(vmview_format::truncated_label(
                        u32::try_from(cut).unwrap_or(u32::MAX),
                    )));
                }
                args.insert("stack".into(), Json::Array(frames));
                if !monitors.is_empty() {
                    args.insert("monitors".into(), held_json(syms, monitors));
                }
                let e = instant(state.name().to_string(), "sample", args);
                Self::push(&mut self.buf, &mut self.first, &e)?;
            }
            EventKind::Dropped { count } => {
                let mut args = Map::new();
                args.insert("count".into(), Json::from(*count));
                let mut e = instant(format!("dropped {count} events"), "vmview", args);
                e.s = Some("p");
                Self::push(&mut self.buf, &mut self.first, &e)?;
            }
            _ => {}
        }
        if self.buf.len() >= 64 * 1024 {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        if let Some(w) = &self.weigher {
            w.check().map_err(WeightError::into_io)?;
        }
        self.start()?;
        let thread_pid = &self.thread_pid;
        // Closing a cut-off call needs no name: an `E` ends the thread's
        // innermost open slice.
        let no_names = SymbolTable::default();
        let (buf, first) = (&mut self.buf, &mut self.first);
        let mut err = Ok(());
        self.calls.finish(|tr| {
            if err.is_ok() {
                let t = match &tr {
                    Transition::Open { thread, .. } | Transition::Close { thread, .. } => thread,
                };
                let pid = thread_pid.get(t.0 as usize).copied().unwrap_or(0);
                err = Self::push(buf, first, &slice_event(pid, &tr, None, &no_names));
            }
        });
        err?;
        self.buf.extend_from_slice(b"\n]");
        if self.weigher.is_some() {
            self.write_sampling()?;
        }
        self.buf.extend_from_slice(b"}\n");
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        self.out.flush()
    }
}
