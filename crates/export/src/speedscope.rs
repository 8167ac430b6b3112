//! The speedscope exporter: speedscope's own JSON file format
//! (<https://www.speedscope.app/file-format-schema.json>), which the
//! speedscope web app and `npx speedscope FILE` open with its time-order,
//! left-heavy and sandwich views.
//!
//! speedscope is the flame-graph viewer that keeps time order, so it shows
//! a traced run as it happened. Each thread becomes an *evented* profile:
//! an `O` (open) event when a traced method is entered and a `C` (close)
//! when it returns, at nanoseconds since the trace started. Frames are
//! shared by all profiles (`shared.frames`, one per method, named
//! `class.method`). Calls are matched by [`crate::calls`], so the events
//! nest as speedscope requires even when the trace is cut: a call whose
//! RETURN is missing closes at its thread's next return from below or last
//! event, and a RETURN without its CALL is left out.
//!
//! SAMPLE events (`events=samples`) become one *sampled* profile per thread
//! (named `THREAD (samples)`, unit `none`, weight 1 per sample): each
//! sample is its stack, base first, cut at
//! [`vmview_format::DEFAULT_MAX_DEPTH`] frames with a `[truncated N
//! frames]` frame for the rest. Stacks are interned, so a sample costs 4
//! bytes in memory until the document is written.
//!
//! With a weight ([`SpeedscopeWriter::weighted`], `--weight
//! samples|cpu|wall|alloc|lock`, see [`crate::weight`]) the sampled
//! profiles hold the stacks of that weight instead (CPU or wall SAMPLEs,
//! ALLOC_SAMPLEs in bytes, contended monitor waits in nanoseconds under
//! the waiting thread's traced call path and a `[blocked on CLASS]`
//! frame), named `THREAD (WEIGHT)`, and speedscope opens the first of them.
//!
//! The file is one JSON object whose profiles each list one thread's
//! events, while a trace interleaves threads; so events are kept in memory
//! (12 bytes each) until [`EventWriter::finish`] writes the document.

use std::collections::HashMap;
use std::io::{self, Write};

use serde::Serialize;
use vmview_format::{
    truncated_label, Event, EventKind, MethodId, StackId, SymbolTable, ThreadRef, DEFAULT_MAX_DEPTH,
};

use crate::calls::{CallMatcher, Transition};
use crate::names::MethodNames;
use crate::weight::{blocked_label, Weighed, Weigher, WeightError};
use crate::EventWriter;

const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

#[derive(Serialize)]
struct WireFrame<'a> {
    name: &'a str,
}

#[derive(Serialize)]
struct WireEvent {
    #[serde(rename = "type")]
    kind: &'static str,
    frame: u32,
    at: u64,
}

/// One thread's timeline, compact: times and frame indexes with the
/// open/close bit in the top bit.
#[derive(Default)]
struct Timeline {
    name: String,
    at: Vec<u64>,
    frame: Vec<u32>,
    first_ns: Option<u64>,
    /// Indexes into `SpeedscopeWriter::stacks` and weights, one per SAMPLE
    /// (or per event of the weight asked for).
    samples: Vec<(u32, u64)>,
}

const CLOSE_BIT: u32 = 1 << 31;

/// Writes a speedscope document at [`EventWriter::finish`].
pub struct SpeedscopeWriter<W: Write> {
    out: W,
    name: String,
    calls: CallMatcher,
    frames: Vec<String>,
    frame_of: HashMap<MethodId, u32>,
    named: HashMap<String, u32>,
    threads: Vec<Timeline>,
    /// Sampled stacks as frame indexes, base first.
    stacks: Vec<Vec<u32>>,
    stack_of: HashMap<StackId, u32>,
    /// Lock stacks (call path and blocked frame), by their frames.
    stack_of_frames: HashMap<Vec<u32>, u32>,
    /// The weight asked for; `None`: SAMPLEs, one each.
    weigher: Option<Weigher>,
}

impl<W: Write> SpeedscopeWriter<W> {
    /// `name` titles the document in speedscope (the trace's file name, say).
    pub fn new(out: W, name: impl Into<String>) -> Self {
        SpeedscopeWriter {
            out,
            name: name.into(),
            calls: CallMatcher::new(),
            frames: Vec::new(),
            frame_of: HashMap::new(),
            named: HashMap::new(),
            threads: Vec::new(),
            stacks: Vec::new(),
            stack_of: HashMap::new(),
            stack_of_frames: HashMap::new(),
            weigher: None,
        }
    }

    /// A writer whose sampled profiles hold the events of `weigher`'s weight.
    pub fn weighted(out: W, name: impl Into<String>, weigher: Weigher) -> Self {
        SpeedscopeWriter {
            weigher: Some(weigher),
            ..Self::new(out, name)
        }
    }

    /// A lock wait's stack: the thread's open traced calls, base first,
    /// then the blocked frame.
    fn lock_stack(&mut self, thread: ThreadRef, class: &str) -> u32 {
        let open: Vec<MethodId> = self.calls.stack(thread).iter().map(|f| f.method).collect();
        let cap = DEFAULT_MAX_DEPTH as usize;
        let mut frames: Vec<u32> = open
            .iter()
            .take(cap)
            .map(|m| self.frame_of.get(m).copied().unwrap_or(0))
            .collect();
        if open.len() > cap {
            let label = truncated_label(u32::try_from(open.len() - cap).unwrap_or(u32::MAX));
            frames.push(self.named_frame(label));
        }
        frames.push(self.named_frame(blocked_label(class)));
        if let Some(&s) = self.stack_of_frames.get(&frames) {
            return s;
        }
        let s = self.stacks.len() as u32;
        self.stacks.push(frames.clone());
        self.stack_of_frames.insert(frames, s);
        s
    }

    fn stack(&mut self, id: StackId, syms: &SymbolTable) -> u32 {
        if let Some(&s) = self.stack_of.get(&id) {
            return s;
        }
        let methods: Vec<MethodId> = syms
            .stack(id)
            .map(|s| s.frames.iter().rev().map(|(m, _)| *m).collect())
            .unwrap_or_default();
        let cap = DEFAULT_MAX_DEPTH as usize;
        let mut frames: Vec<u32> = methods
            .iter()
            .take(cap)
            .map(|m| self.frame(*m, syms))
            .collect();
        if methods.len() > cap {
            let label = truncated_label(u32::try_from(methods.len() - cap).unwrap_or(u32::MAX));
            frames.push(self.named_frame(label));
        }
        let s = self.stacks.len() as u32;
        self.stacks.push(frames);
        self.stack_of.insert(id, s);
        s
    }

    fn frame(&mut self, m: MethodId, syms: &SymbolTable) -> u32 {
        if let Some(&f) = self.frame_of.get(&m) {
            return f;
        }
        let n = MethodNames::resolve(syms, m);
        let f = self.frames.len() as u32;
        self.frames.push(format!("{}.{}", n.class, n.name));
        self.frame_of.insert(m, f);
        f
    }

    /// A frame that is no method (`[truncated N frames]`), by its name.
    fn named_frame(&mut self, name: String) -> u32 {
        if let Some(&f) = self.named.get(&name) {
            return f;
        }
        let f = self.frames.len() as u32;
        self.frames.push(name.clone());
        self.named.insert(name, f);
        f
    }

    fn timeline(threads: &mut Vec<Timeline>, t: ThreadRef) -> &mut Timeline {
        let i = t.0 as usize;
        if i >= threads.len() {
            threads.resize_with(i + 1, Timeline::default);
        }
        &mut threads[i]
    }

    fn record(&mut self, tr: Transition<'_>, opened: Option<u32>) {
        match tr {
            Transition::Open { thread, frame } => {
                let tl = Self::timeline(&mut self.threads, thread);
                tl.at.push(frame.start_ns);
                tl.frame.push(opened.expect("an Open comes from a CALL"));
            }
            Transition::Close {
                thread,
                frame,
                at_ns,
                ..
            } => {
                let f = self.frame_of[&frame.method];
                let tl = Self::timeline(&mut self.threads, thread);
                tl.at.push(at_ns);
                tl.frame.push(f | CLOSE_BIT);
            }
        }
    }
}

impl<W: Write> EventWriter for SpeedscopeWriter<W> {
    fn write_event(&mut self, ev: &Event, syms: &SymbolTable) -> io::Result<()> {
        let opened = match ev.kind {
            EventKind::Call { method, .. } => Some(self.frame(method, syms)),
            _ => None,
        };
        let sampled = match &mut self.weigher {
            None => match ev.kind {
                EventKind::Sample { stack, .. } => Some((self.stack(stack, syms), 1)),
                _ => None,
            },
            Some(w) => match w.weigh(ev) {
                Some(Weighed::Stack { stack, weight }) => Some((self.stack(stack, syms), weight)),
                Some(Weighed::Lock { class, wait_ns }) => {
                    Some((self.lock_stack(ev.thread, syms.string(class)), wait_ns))
                }
                None => None,
            },
        };
        let tl = Self::timeline(&mut self.threads, ev.thread);
        if tl.first_ns.is_none() {
            tl.first_ns = Some(ev.time_ns);
            tl.name = syms.thread_name(ev.thread);
        }
        if let Some(s) = sampled {
            tl.samples.push(s);
        }
        let mut calls = std::mem::take(&mut self.calls);
        calls.event(ev, |tr| self.record(tr, opened));
        self.calls = calls;
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        if let Some(w) = &self.weigher {
            w.check().map_err(WeightError::into_io)?;
        }
        let mut calls = std::mem::take(&mut self.calls);
        calls.finish(|tr| self.record(tr, None));
        let out = &mut self.out;
        write!(
            out,
            "{{\"$schema\":\"{SCHEMA}\",\"exporter\":\"vmview\",\"name\":"
        )?;
        serde_json::to_writer(&mut *out, &self.name)?;
        // With a weight asked for, speedscope opens its first profile.
        let active = if self.weigher.is_some() {
            self.threads.iter().filter(|t| !t.at.is_empty()).count()
        } else {
            0
        };
        write!(out, ",\"activeProfileIndex\":{active},\"profiles\":[")?;
        let mut first_profile = true;
        for (i, tl) in self.threads.iter().enumerate() {
            if tl.at.is_empty() {
                continue;
            }
            if !first_profile {
                out.write_all(b",")?;
            }
            first_profile = false;
            let start = tl.first_ns.unwrap_or(0).min(tl.at[0]);
            let end = calls.last_ns(ThreadRef(i as u32));
            out.write_all(b"\n{\"type\":\"evented\",\"name\":")?;
            serde_json::to_writer(&mut *out, &tl.name)?;
            write!(
                out,
                ",\"unit\":\"nanoseconds\",\"startValue\":{start},\"endValue\":{end},\"events\":["
            )?;
            for (j, (&at, &f)) in tl.at.iter().zip(&tl.frame).enumerate() {
                if j > 0 {
                    out.write_all(b",")?;
                }
                let ev = WireEvent {
                    kind: if f & CLOSE_BIT != 0 { "C" } else { "O" },
                    frame: f & !CLOSE_BIT,
                    at,
                };
                serde_json::to_writer(&mut *out, &ev)?;
            }
            out.write_all(b"]}")?;
        }
        for tl in self.threads.iter().filter(|t| !t.samples.is_empty()) {
            if !first_profile {
                out.write_all(b",")?;
            }
            first_profile = false;
            let (label, unit) = match &self.weigher {
                None => ("samples", "none"),
                Some(w) => (
                    w.weight().name(),
                    match w.weight().unit() {
                        "samples" => "none",
                        u => u,
                    },
                ),
            };
            out.write_all(b"\n{\"type\":\"sampled\",\"name\":")?;
            serde_json::to_writer(&mut *out, &format!("{} ({label})", tl.name))?;
            let total: u64 = tl.samples.iter().map(|(_, w)| *w).sum();
            write!(
                out,
                ",\"unit\":\"{unit}\",\"startValue\":0,\"endValue\":{total},\"samples\":["
            )?;
            for (j, (s, _)) in tl.samples.iter().enumerate() {
                if j > 0 {
                    out.write_all(b",")?;
                }
                serde_json::to_writer(&mut *out, &self.stacks[*s as usize])?;
            }
            out.write_all(b"],\"weights\":[")?;
            for (j, (_, w)) in tl.samples.iter().enumerate() {
                if j > 0 {
                    out.write_all(b",")?;
                }
                write!(out, "{w}")?;
            }
            out.write_all(b"]}")?;
        }
        out.write_all(b"\n],\"shared\":{\"frames\":[")?;
        for (j, name) in self.frames.iter().enumerate() {
            if j > 0 {
                out.write_all(b",")?;
            }
            serde_json::to_writer(&mut *out, &WireFrame { name })?;
        }
        out.write_all(b"]}}\n")?;
        self.calls = calls;
        out.flush()
    }
}
