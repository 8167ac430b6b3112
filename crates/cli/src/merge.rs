//! `vmview merge`: several traces (one per JVM of a fleet, or several runs)
//! as one, ordered by time, keeping where each event came from.
//!
//! The merged trace is an ordinary trace, so every command and export
//! reads it. Its event ids must increase in file order, so they cannot be
//! the sources' ids; instead each id carries its source (`n × 256 +
//! source`), the header lists the sources (file, pid, start, the ranges of
//! their event ids), and each source's events keep their order, so the
//! k-th event of a source has the k-th of its listed ids: the Parquet
//! export resolves them (docs/PARQUET.md explains the scheme and the
//! trade-off against per-source id offsets).
//!
//! Symbols (strings, methods, threads, sampled stacks) are renumbered per
//! source (two JVMs' string 7 are different strings); times are rebased on the earliest source's start, so wall
//! clock time is unchanged. Each source is read twice: once for its ids
//! (the header, written first, lists them), once to merge. Memory holds one
//! event per source and the symbol maps.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use vmview_export::parquet::{format_id_ranges, MERGE_SOURCE_BITS};
use vmview_format::{
    Event, EventKind, MethodId, MethodSymbol, Outcome, StackId, StackSymbol, StringId, Symbol,
    SymbolTable, ThreadRef, ThreadSymbol, TraceHeader, TraceWriter, Value,
};

use crate::error::hinted;
use crate::progress::Progress;
use crate::trace::{self, Reader};

const LONG_ABOUT: &str = "\
Combine traces into one, ordered by time.

Each event keeps its source: its id in the merged trace is n*256 + S for the \
S-th input (0-based), and the header lists every input (merge.source.S.file, \
.pid, .start_unix_ns, .ids). The Parquet export turns that back into a \
`source`, `pid` and `source_id` (the event's id in its own trace) per row. \
Times are rebased on the earliest input's start. At most 256 inputs.";

const EXAMPLES: &str = "\
Examples:
  vmview merge app-4242.vmv app-4243.vmv -o fleet.vmv
  vmview export fleet.vmv --format parquet -o fleet.parquet
  vmview export fleet.vmv --format chrome -o fleet.json   # one process per JVM in Perfetto";

#[derive(Args)]
#[command(about = "Combine traces into one, ordered by time, keeping each event's source", long_about = LONG_ABOUT, after_long_help = EXAMPLES)]
pub struct MergeArgs {
    /// The traces to combine (.vmv), at least two.
    #[arg(required = true, num_args = 2..)]
    files: Vec<PathBuf>,
    /// The merged trace.
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
}

/// Handles of one source, renumbered into the merged trace.
#[derive(Default)]
struct Renumber {
    strings: HashMap<u32, StringId>,
    methods: HashMap<u32, MethodId>,
    threads: HashMap<u32, ThreadRef>,
    stacks: HashMap<u32, StackId>,
}

/// Next free handles in the merged trace.
#[derive(Default)]
struct Next {
    string: u32,
    method: u32,
    thread: u32,
    stack: u32,
}

/// Maps one source's events into the merged trace, defining symbols in the
/// output the first time they are used.
struct Mapper<'a, W: std::io::Write> {
    map: &'a mut Renumber,
    next: &'a mut Next,
    syms: &'a SymbolTable,
    out: &'a mut TraceWriter<W>,
}

impl<W: std::io::Write> Mapper<'_, W> {
    fn string(&mut self, id: StringId) -> StringId {
        if let Some(&s) = self.map.strings.get(&id.0) {
            return s;
        }
        let new = StringId(self.next.string);
        self.next.string += 1;
        self.map.strings.insert(id.0, new);
        self.out.define(Symbol::String {
            id: new,
            text: self.syms.string(id).to_string(),
        });
        new
    }

    fn method(&mut self, id: MethodId) -> MethodId {
        if let Some(&m) = self.map.methods.get(&id.0) {
            return m;
        }
        let new = MethodId(self.next.method);
        self.next.method += 1;
        self.map.methods.insert(id.0, new);
        let sym = match self.syms.method(id).cloned() {
            Some(m) => MethodSymbol {
                id: new,
                class: self.string(m.class),
                name: self.string(m.name),
                sig: self.string(m.sig),
                param_names: m.param_names.iter().map(|&p| self.string(p)).collect(),
                modifiers: m.modifiers,
            },
            // A method the source lost (damaged chunk): "?" names, as
            // readers show for an undefined handle.
            None => {
                let q = self.unknown_string();
                MethodSymbol {
                    id: new,
                    class: q,
                    name: q,
                    sig: q,
                    param_names: Vec::new(),
                    modifiers: 0,
                }
            }
        };
        self.out.define(Symbol::Method(sym));
        new
    }

    /// A sampled stack: its frames' methods renumbered, defined once.
    fn stack(&mut self, id: StackId) -> StackId {
        if let Some(&s) = self.map.stacks.get(&id.0) {
            return s;
        }
        let new = StackId(self.next.stack);
        self.next.stack += 1;
        self.map.stacks.insert(id.0, new);
        // A stack the source lost (damaged chunk) stays empty.
        let frames = self
            .syms
            .stack(id)
            .map(|s| s.frames.clone())
            .unwrap_or_default();
        let frames = frames
            .into_iter()
            .map(|(m, loc)| (self.method(m), loc))
            .collect();
        self.out
            .define(Symbol::Stack(StackSymbol { id: new, frames }));
        new
    }

    fn unknown_string(&mut self) -> StringId {
        let id = StringId(self.next.string);
        self.next.string += 1;
        self.out.define(Symbol::String {
            id,
            text: "?".to_string(),
        });
        id
    }

    fn thread(&mut self, t: ThreadRef) -> ThreadRef {
        if let Some(&n) = self.map.threads.get(&t.0) {
            return n;
        }
        let new = ThreadRef(self.next.thread);
        self.next.thread += 1;
        self.map.threads.insert(t.0, new);
        let sym = match self.syms.thread(t).cloned() {
            Some(s) => ThreadSymbol {
                id: new,
                java_id: s.java_id,
                name: self.string(s.name),
                group: self.string(s.group),
                priority: s.priority,
                daemon: s.daemon,
            },
            None => {
                let name = StringId(self.next.string);
                self.next.string += 1;
                self.out.define(Symbol::String {
                    id: name,
                    text: self.syms.thread_name(t),
                });
                ThreadSymbol {
                    id: new,
                    java_id: -1,
                    name,
                    group: name,
                    priority: 0,
                    daemon: false,
                }
            }
        };
        self.out.define(Symbol::Thread(sym));
        new
    }

    fn value(&mut self, v: &Value) -> Value {
        match v {
            Value::Boxed { class, value } => Value::Boxed {
                class: self.string(*class),
                value: Box::new(self.value(value)),
            },
            Value::Array { class, length } => Value::Array {
                class: self.string(*class),
                length: *length,
            },
            Value::Object { class, hash } => Value::Object {
                class: self.string(*class),
                hash: *hash,
            },
            other => other.clone(),
        }
    }

    fn monitor(&mut self, m: &vmview_format::Monitor) -> vmview_format::Monitor {
        vmview_format::Monitor {
            class: self.string(m.class),
            hash: m.hash,
        }
    }

    fn kind(&mut self, k: &EventKind) -> EventKind {
        match k {
            EventKind::ClassLoad {
                class,
                loader,
                source,
            } => EventKind::ClassLoad {
                class: self.string(*class),
                loader: self.string(*loader),
                source: self.string(*source),
            },
            EventKind::Call {
                method,
                depth,
                caller,
                params,
                metrics,
            } => EventKind::Call {
                metrics: *metrics,
                method: self.method(*method),
                depth: *depth,
                caller: caller.map(|(m, l)| (self.method(m), l)),
                params: params.iter().map(|v| self.value(v)).collect(),
            },
            EventKind::Return {
                method,
                depth,
                outcome,
                elapsed_ns,
                metrics,
            } => EventKind::Return {
                metrics: *metrics,
                method: self.method(*method),
                depth: *depth,
                outcome: match outcome {
                    Outcome::Void => Outcome::Void,
                    Outcome::Value(v) => Outcome::Value(self.value(v)),
                    Outcome::Exception { class } => Outcome::Exception {
                        class: self.string(*class),
                    },
                },
                elapsed_ns: *elapsed_ns,
            },
            EventKind::Throw {
                exception,
                message,
                method,
                loc,
                catch,
            } => EventKind::Throw {
                exception: self.string(*exception),
                message: message.clone(),
                method: self.method(*method),
                loc: *loc,
                catch: catch.map(|(m, l)| (self.method(m), l)),
            },
            EventKind::Catch {
                exception,
                method,
                loc,
            } => EventKind::Catch {
                exception: self.string(*exception),
                method: self.method(*method),
                loc: *loc,
            },
            EventKind::MonitorContendedEnter { monitor, owner } => {
                EventKind::MonitorContendedEnter {
                    monitor: self.monitor(monitor),
                    owner: owner.map(|t| self.thread(t)),
                }
            }
            EventKind::MonitorContendedEntered { monitor, wait_ns } => {
                EventKind::MonitorContendedEntered {
                    monitor: self.monitor(monitor),
                    wait_ns: *wait_ns,
                }
            }
            EventKind::MonitorWait {
                monitor,
                timeout_ms,
            } => EventKind::MonitorWait {
                monitor: self.monitor(monitor),
                timeout_ms: *timeout_ms,
            },
            EventKind::MonitorWaited {
                monitor,
                timed_out,
                wait_ns,
            } => EventKind::MonitorWaited {
                monitor: self.monitor(monitor),
                timed_out: *timed_out,
                wait_ns: *wait_ns,
            },
            EventKind::MonitorEnter { monitor, depth } => EventKind::MonitorEnter {
                monitor: self.monitor(monitor),
                depth: *depth,
            },
            EventKind::MonitorExit { monitor, depth } => EventKind::MonitorExit {
                monitor: self.monitor(monitor),
                depth: *depth,
            },
            EventKind::Sample {
                state,
                stack,
                monitors,
            } => EventKind::Sample {
                state: *state,
                stack: self.stack(*stack),
                monitors: monitors
                    .iter()
                    .map(|(m, depth)| (self.monitor(m), *depth))
                    .collect(),
            },
            EventKind::PeriodStart { period, stack } => EventKind::PeriodStart {
                period: *period,
                stack: self.stack(*stack),
            },
            EventKind::Bytecode { method, bci, insn } => EventKind::Bytecode {
                method: self.method(*method),
                bci: *bci,
                insn: self.string(*insn),
            },
            // The rest name no symbol.
            other => other.clone(),
        }
    }
}

/// One input: its reader, header and what the merge needs to know of it.
struct Input {
    path: PathBuf,
    reader: Reader,
    header: TraceHeader,
    /// Added to its events' times (its start less the merged start).
    shift_ns: u64,
    ids: Vec<(u64, u64)>,
    events: u64,
    head: Option<Event>,
    map: Renumber,
}

/// The ids of a trace's readable events, as inclusive ranges.
fn id_ranges(path: &Path) -> anyhow::Result<(Vec<(u64, u64)>, u64)> {
    let mut reader = trace::open(path)?;
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    let mut n = 0;
    while let Some(ev) = reader.next_event() {
        n += 1;
        match ranges.last_mut() {
            Some((_, last)) if *last + 1 == ev.id => *last = ev.id,
            _ => ranges.push((ev.id, ev.id)),
        }
    }
    Ok((ranges, n))
}

fn prop<'a>(h: &'a TraceHeader, key: &str) -> Option<&'a str> {
    h.properties
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

pub fn run(args: &MergeArgs) -> anyhow::Result<ExitCode> {
    let max_sources = 1usize << MERGE_SOURCE_BITS;
    if args.files.len() > max_sources {
        return Err(hinted(
            format!(
                "{} traces to merge; at most {max_sources} fit",
                args.files.len()
            ),
            "merge them in groups, or export each to Parquet and query the files together",
        ));
    }
    let inputs: Vec<&Path> = args.files.iter().map(PathBuf::as_path).collect();
    crate::overwrite::refuse_input_as_output(&inputs, Some(&args.output))?;
    let mut inputs = Vec::new();
    for path in &args.files {
        let reader = trace::open(path)?;
        let header = reader.header().clone();
        let (ids, events) = id_ranges(path)?;
        inputs.push(Input {
            path: path.clone(),
            reader,
            header,
            shift_ns: 0,
            ids,
            events,
            head: None,
            map: Renumber::default(),
        });
    }
    let start = inputs
        .iter()
        .map(|i| i.header.start_unix_ns)
        .min()
        .unwrap_or(0);
    let mut header = TraceHeader {
        version: 0,
        pid: inputs[0].header.pid,
        start_unix_ns: start,
        properties: vec![("merge.sources".into(), inputs.len().to_string())],
    };
    // Sources are named by file name, or by path where two names collide.
    let base = |p: &Path| {
        p.file_name().map_or_else(
            || p.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    };
    let mut names: Vec<String> = inputs.iter().map(|i| base(&i.path)).collect();
    let mut sorted = names.clone();
    sorted.sort();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        names = inputs
            .iter()
            .map(|i| i.path.display().to_string())
            .collect();
    }
    for (s, input) in inputs.iter_mut().enumerate() {
        input.shift_ns = input.header.start_unix_ns - start;
        let name = names[s].clone();
        let h = &input.header;
        let mut add = |k: &str, v: String| {
            header.properties.push((format!("merge.source.{s}.{k}"), v));
        };
        add("file", name);
        add("pid", h.pid.to_string());
        add("start_unix_ns", h.start_unix_ns.to_string());
        for key in ["jvm", "command"] {
            if let Some(v) = prop(h, key) {
                add(key, v.to_string());
            }
        }
        add("events", input.events.to_string());
        add("ids", format_id_ranges(&input.ids));
    }

    let file = File::create(&args.output)
        .with_context(|| format!("cannot create {}", args.output.display()))?;
    let mut out = TraceWriter::new(BufWriter::with_capacity(256 * 1024, file), &header)
        .with_context(|| format!("cannot write {}", args.output.display()))?;

    let total: u64 = args
        .files
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum();
    let mut progress = Progress::new(total, "merging");
    let mut heap = BinaryHeap::new();
    for (s, input) in inputs.iter_mut().enumerate() {
        input.head = input.reader.next_event();
        if let Some(ev) = &input.head {
            heap.push(Reverse((ev.time_ns + input.shift_ns, s)));
        }
    }
    let mut next = Next::default();
    let mut n: u64 = 0;
    while let Some(Reverse((time, s))) = heap.pop() {
        let input = &mut inputs[s];
        let ev = input.head.take().expect("a source in the heap has a head");
        n += 1;
        let mut mapper = Mapper {
            map: &mut input.map,
            next: &mut next,
            syms: input.reader.symbols(),
            out: &mut out,
        };
        let merged = Event {
            id: (n << MERGE_SOURCE_BITS) | s as u64,
            time_ns: time,
            thread: mapper.thread(ev.thread),
            kind: mapper.kind(&ev.kind),
        };
        out.write(&merged)
            .with_context(|| format!("cannot write {}", args.output.display()))?;
        input.head = input.reader.next_event();
        if let Some(ev) = &input.head {
            heap.push(Reverse((ev.time_ns + input.shift_ns, s)));
        }
        if n & 0xffff == 0 {
            let done: u64 = inputs
                .iter()
                .map(|i| i.reader.current_chunk().map_or(0, |c| c.offset))
                .sum();
            progress.set(done);
        }
    }
    progress.finish();
    out.finish()
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    for input in &inputs {
        trace::warn_diagnostics(input.reader.diagnostics(), input.events);
    }
    say!(
        "vmview: merged {n} events from {} traces into {}",
        inputs.len(),
        args.output.display()
    );
    Ok(ExitCode::SUCCESS)
}
