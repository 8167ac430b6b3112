//! The JSON Lines exporter: one JSON object per event, one event per line,
//! for `jq`, scripts and other tools. The keys are a contract; change them
//! only with a version note.
//!
//! # Keys
//!
//! Every line has `id` (number), `time_ns` (ns since trace start), `type`
//! (`THREAD_START`, `THREAD_END`, `CLASS_LOAD`, `CALL`, `RETURN`, `THROW`,
//! `CATCH`, `MONITOR_CONTENDED_ENTER`, `MONITOR_CONTENDED_ENTERED`,
//! `MONITOR_WAIT`, `MONITOR_WAITED`, `GC_START`, `GC_FINISH`, `DROPPED`,
//! `SAMPLE`, `TRACE_WINDOW`, `PERIOD_START`, `PERIOD_END`, `CALIBRATION`,
//! `MONITOR_ENTER`, `MONITOR_EXIT`) and
//! `thread` (the thread's name; `thread-N` when the trace lost it). Then, by
//! type (a key not listed for a type is absent):
//!
//! | type | keys |
//! |---|---|
//! | THREAD_START, THREAD_END | `daemon`, `priority`, `group` (absent when the thread's symbol was lost) |
//! | CLASS_LOAD | `class`, `loader`, `source` (`null` when unknown) |
//! | CALL | `class`, `method`, `sig`, `depth`, `params`; `cpu_ns`, `alloc_bytes` when recorded (`metrics=`: the thread's totals at entry) |
//! | RETURN | `class`, `method`, `sig`, `depth`, `elapsed_ns`, and `value` (absent for `void`) or `exception` (the class that unwound the frame); `cpu_ns`, `alloc_bytes` as for CALL |
//! | THROW | `exception`, `message` (`null` when none), `class`, `method`, `sig`, `loc` (the throw site), `catch_class`, `catch_method`, `catch_loc` (all three `null` when uncaught) |
//! | CATCH | `exception`, `class`, `method`, `sig`, `loc` (the catch site) |
//! | MONITOR_CONTENDED_ENTER | `monitor`, `owner` (thread name, `null` when unknown) |
//! | MONITOR_CONTENDED_ENTERED | `monitor`, `wait_ns` |
//! | MONITOR_WAIT | `monitor`, `timeout_ms` (0 = no timeout) |
//! | MONITOR_WAITED | `monitor`, `timed_out`, `wait_ns` |
//! | GC_FINISH | `duration_ns` |
//! | DROPPED | `count` |
//! | TRACE_WINDOW | `min_depth`, `max_depth` (`null` = no bound), `reason` (`start`, `narrow`, `widen`), `rate_per_s` |
//! | PERIOD_START | `period`, `stack` (as for SAMPLE) |
//! | PERIOD_END | `period` |
//! | CALIBRATION | `record` (event type measured, `*` for any), `cost_ps` (picoseconds per record) |
//! | DEMOTION | `class`, `method`, `sig`, `rate_per_s`, `mean_ns`, `before_bp`, `after_bp` (estimated overhead, basis points), `counted` |
//! | METHOD_COUNTS | `overhead_bp` (estimated, whole recording so far), `counts` (`[["Class.method(sig)", count], …]`, running totals since each demotion) |
//! | MONITOR_ENTER, MONITOR_EXIT | `monitor`, `depth` (of the frame holding it) |
//! | FOREIGN | `name` (the source's event type, `jdk.CPULoad`), `fields` (an object of the source's fields, each value a string) |
//! | SAMPLE | `state` (`RUN`, `IO`, `WAIT`, `BLOCKED`, `SLEEP`), `stack` (frames top first: `{"class", "method", "line"}`, `line` `null` when unknown, plus `"type"` (`interpreted`, `compiled`, `inlined`, `native`) when the sampler knew how the frame ran), `monitors` (`{"monitor", "depth"}`, depth 0 = top frame) |
//!
//! Names: `class`, `exception`, `catch_class` are dotted binary names
//! (`shop.Inventory$Clerk`); `method` and `catch_method` are bare method
//! names (`add`, `<init>`); `sig` is the JVM descriptor of `method`.
//! `monitor` is `class@hash` with the identity hash in lowercase hex, as
//! `Object.toString` prints it (`shop.Inventory@1b6d3586`).
//!
//! A location (`loc`, `catch_loc`) is `{"bci": 12, "line": 34}`: `bci` is the
//! bytecode index (-1 for a native method or an unknown location), `line`
//! the source line or `null` when the class has no line numbers.
//!
//! `params` is a list, one entry per declared parameter (`this` excluded):
//! `{"name": "qty", "type": "int", "value": 7}`. `name` comes from the
//! LocalVariableTable (`arg0`, `arg1` … without one); `type` is the declared
//! Java type from the descriptor (`int`, `java.lang.String`, `int[]`, `?` if
//! the descriptor is damaged).
//!
//! # Values
//!
//! `value` (in a parameter and on RETURN) is encoded by what was captured:
//!
//! - `boolean` → `true` / `false`.
//! - `byte`, `short`, `int`, `long` → a JSON integer (longs too: readers that
//!   parse numbers as doubles lose precision past 2^53).
//! - `float`, `double` → a JSON number (a float is written with its shortest
//!   decimal form, `0.1`, not `0.10000000149011612`); NaN and the infinities,
//!   which JSON cannot express, are the strings `"NaN"`, `"Infinity"`,
//!   `"-Infinity"`.
//! - `char` → a one-character string (a lone surrogate becomes U+FFFD).
//! - `java.lang.String` → its contents as a JSON string. When the agent kept
//!   only the first part (option `strings=N`), the kept part is followed by
//!   `…(+N chars)` where N is the number of UTF-16 chars cut, as in the text
//!   format.
//! - boxed primitives (`java.lang.Integer` …) → the unboxed value as above.
//! - `null` → `null`.
//! - arrays → the string `type[length]`: `"int[3]"`, `"java.lang.String[2][]"`.
//! - any other object → the string `class@hash` (lowercase hex identity
//!   hash): `"shop.Item@1b6d3586"`.
//! - a value the agent could not read → the `value` key is absent.
//!
//! Objects, arrays and Strings all become JSON strings: use the parameter's
//! `type` to tell them apart. Where the declared type is `java.lang.Object`
//! the string alone cannot say whether it was a String or a reference.

use std::borrow::Cow;
use std::io::{self, Write};

use serde::Serialize;
use serde_json::Value as Json;
use vmview_format::{
    Event, EventKind, FrameType, Loc, MethodId, Monitor, Outcome, StackId, SymbolTable, Value,
};

use crate::names::{array_display, descriptor_types, hash_hex, monitor_name, MethodNames};
use crate::EventWriter;

/// Writes one JSON object per event, newline-terminated.
pub struct JsonlWriter<W: Write> {
    out: W,
    line: Vec<u8>,
}

impl<W: Write> JsonlWriter<W> {
    pub fn new(out: W) -> Self {
        JsonlWriter {
            out,
            line: Vec::new(),
        }
    }

    /// Gives the underlying writer back (after [`EventWriter::finish`]).
    pub fn into_inner(self) -> W {
        self.out
    }
}

impl<W: Write> EventWriter for JsonlWriter<W> {
    fn write_event(&mut self, ev: &Event, syms: &SymbolTable) -> io::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, &wire_event(ev, syms))?;
        self.line.push(b'\n');
        self.out.write_all(&self.line)
    }

    fn finish(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// One line. Field order is output order; `None` fields are left out,
/// `Some(None)` is written as `null`.
#[derive(Serialize, Default)]
struct WireEvent<'a> {
    id: u64,
    time_ns: u64,
    #[serde(rename = "type")]
    kind: &'static str,
    thread: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exception: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<Option<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    class: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sig: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    loc: Option<WireLoc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    depth: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<Vec<WireParam>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<Json>,
    #[serde(skip_serializing_if = "Option::is_none")]
    elapsed_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    alloc_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min_depth: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_depth: Option<Option<u32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rate_per_s: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    period: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    record: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cost_ps: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    samples: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    handlers: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mean_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    before_bp: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    after_bp: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    counted: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    overhead_bp: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    counts: Option<Vec<(String, u64)>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    catch_class: Option<Option<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    catch_method: Option<Option<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    catch_loc: Option<Option<WireLoc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    monitor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    wait_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timed_out: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    loader: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<Option<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    daemon: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    priority: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stack: Option<Vec<WireFrame<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    monitors: Option<Vec<WireHeld>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    insn: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fields: Option<serde_json::Map<String, Json>>,
}

#[derive(Serialize)]
struct WireFrame<'a> {
    class: &'a str,
    method: &'a str,
    line: Option<u32>,
    /// How the frame ran, when the sampler knew (`interpreted`,
    /// `compiled`, `inlined`, `native`).
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    ty: Option<&'static str>,
}

#[derive(Serialize)]
struct WireHeld {
    monitor: String,
    depth: u32,
}

#[derive(Serialize)]
struct WireLoc {
    bci: i32,
    line: Option<u32>,
}

impl From<&Loc> for WireLoc {
    fn from(loc: &Loc) -> Self {
        WireLoc {
            bci: loc.bci,
            line: loc.line,
        }
    }
}

#[derive(Serialize)]
struct WireParam {
    name: String,
    #[serde(rename = "type")]
    ty: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<Json>,
}

fn wire_event<'a>(ev: &'a Event, syms: &'a SymbolTable) -> WireEvent<'a> {
    let mut w = WireEvent {
        id: ev.id,
        time_ns: ev.time_ns,
        kind: ev.kind.type_name(),
        thread: match syms.thread(ev.thread) {
            Some(t) => Cow::Borrowed(syms.string(t.name)),
            None => Cow::Owned(syms.thread_name(ev.thread)),
        },
        ..WireEvent::default()
    };
    let set_method = |w: &mut WireEvent<'a>, id: MethodId| {
        let n = MethodNames::resolve(syms, id);
        w.class = Some(n.class);
        w.method = Some(n.name);
        w.sig = Some(n.sig);
        n
    };
    match &ev.kind {
        EventKind::ThreadStart | EventKind::ThreadEnd => {
            if let Some(t) = syms.thread(ev.thread) {
                w.daemon = Some(t.daemon);
                w.priority = Some(t.priority);
                w.group = Some(syms.string(t.group));
            }
        }
        EventKind::ClassLoad {
            class,
            loader,
            source,
        } => {
            w.class = Some(syms.string(*class));
            w.loader = Some(syms.string(*loader));
            let source = syms.string(*source);
            w.source = Some((!source.is_empty()).then_some(source));
        }
        EventKind::Call {
            method,
            depth,
            params,
            metrics,
            ..
        } => {
            let names = set_method(&mut w, *method);
            w.depth = Some(*depth);
            w.cpu_ns = metrics.cpu_ns;
            w.alloc_bytes = metrics.alloc_bytes;
            let types = descriptor_types(names.sig).map(|(p, _)| p);
            let param_names = syms
                .method(*method)
                .map(|m| m.param_names.as_slice())
                .unwrap_or(&[]);
            let wire = params
                .iter()
                .enumerate()
                .map(|(i, v)| WireParam {
                    name: match param_names.get(i) {
                        Some(n) => syms.string(*n).to_string(),
                        None => format!("arg{i}"),
                    },
                    ty: types
                        .as_ref()
                        .and_then(|t| t.get(i))
                        .map_or_else(|| "?".to_string(), Clone::clone),
                    value: value_json(v, syms),
                })
                .collect();
            w.params = Some(wire);
        }
        EventKind::Return {
            method,
            depth,
            outcome,
            elapsed_ns,
            metrics,
        } => {
            set_method(&mut w, *method);
            w.depth = Some(*depth);
            w.cpu_ns = metrics.cpu_ns;
            w.alloc_bytes = metrics.alloc_bytes;
            match outcome {
                Outcome::Void => {}
                Outcome::Value(v) => w.value = value_json(v, syms),
                Outcome::Exception { class } => w.exception = Some(syms.string(*class)),
            }
            w.elapsed_ns = Some(*elapsed_ns);
        }
        EventKind::Throw {
            exception,
            message,
            method,
            loc,
            catch,
        } => {
            w.exception = Some(syms.string(*exception));
            w.message = Some(message.as_deref());
            set_method(&mut w, *method);
            w.loc = Some(loc.into());
            match catch {
                Some((m, loc)) => {
                    let n = MethodNames::resolve(syms, *m);
                    w.catch_class = Some(Some(n.class));
                    w.catch_method = Some(Some(n.name));
                    w.catch_loc = Some(Some(loc.into()));
                }
                None => {
                    w.catch_class = Some(None);
                    w.catch_method = Some(None);
                    w.catch_loc = Some(None);
                }
            }
        }
        EventKind::Catch {
            exception,
            method,
            loc,
        } => {
            w.exception = Some(syms.string(*exception));
            set_method(&mut w, *method);
            w.loc = Some(loc.into());
        }
        EventKind::MonitorContendedEnter { monitor, owner } => {
            w.monitor = Some(monitor_name(syms, monitor));
            w.owner = Some(owner.map(|t| syms.thread_name(t)));
        }
        EventKind::MonitorContendedEntered { monitor, wait_ns } => {
            w.monitor = Some(monitor_name(syms, monitor));
            w.wait_ns = Some(*wait_ns);
        }
        EventKind::MonitorWait {
            monitor,
            timeout_ms,
        } => {
            w.monitor = Some(monitor_name(syms, monitor));
            w.timeout_ms = Some(*timeout_ms);
        }
        EventKind::MonitorWaited {
            monitor,
            timed_out,
            wait_ns,
        } => {
            w.monitor = Some(monitor_name(syms, monitor));
            w.timed_out = Some(*timed_out);
            w.wait_ns = Some(*wait_ns);
        }
        EventKind::GcStart => {}
        EventKind::GcFinish { duration_ns } => w.duration_ns = Some(*duration_ns),
        EventKind::Dropped { count } => w.count = Some(*count),
        EventKind::Bytecode { method, bci, insn } => {
            set_method(&mut w, *method);
            w.loc = Some(WireLoc {
                bci: *bci as i32,
                line: None,
            });
            w.insn = Some(syms.string(*insn));
        }
        EventKind::Sample {
            state,
            stack,
            monitors,
        } => {
            w.state = Some(state.name());
            w.stack = Some(wire_stack(syms, *stack));
            w.monitors = Some(wire_held(syms, monitors));
        }
        EventKind::TraceWindow {
            min_depth,
            max_depth,
            reason,
            rate_per_s,
        } => {
            w.min_depth = Some(*min_depth);
            w.max_depth = Some(*max_depth);
            w.reason = Some(reason.name());
            w.rate_per_s = Some(*rate_per_s);
        }
        EventKind::PeriodStart { period, stack } => {
            w.period = Some(*period);
            w.stack = Some(wire_stack(syms, *stack));
        }
        EventKind::PeriodEnd { period } => w.period = Some(*period),
        EventKind::VthreadPinned { stack, duration_ns } => {
            w.duration_ns = Some(*duration_ns);
            w.stack = Some(wire_stack(syms, *stack));
        }
        EventKind::AllocSample { class, size, stack } => {
            w.class = Some(syms.string(*class));
            w.size = Some(*size);
            w.stack = Some(wire_stack(syms, *stack));
        }
        EventKind::Calibration { record, cost_ps } => {
            w.record = Some(record);
            w.cost_ps = Some(*cost_ps);
        }
        EventKind::ReactionHandlers {
            samples,
            handlers,
            skipped,
        } => {
            let list = |ms: &[MethodId]| {
                ms.iter()
                    .map(|m| MethodNames::resolve(syms, *m).display())
                    .collect()
            };
            w.samples = Some(*samples);
            w.handlers = Some(list(handlers));
            w.skipped = Some(list(skipped));
        }
        EventKind::Demotion {
            method,
            rate_per_s,
            mean_ns,
            before_bp,
            after_bp,
            counted,
        } => {
            set_method(&mut w, *method);
            w.rate_per_s = Some(*rate_per_s);
            w.mean_ns = Some(*mean_ns);
            w.before_bp = Some(*before_bp);
            w.after_bp = Some(*after_bp);
            w.counted = Some(*counted);
        }
        EventKind::MethodCounts {
            overhead_bp,
            counts,
        } => {
            w.overhead_bp = Some(*overhead_bp);
            w.counts = Some(
                counts
                    .iter()
                    .map(|(m, n)| (MethodNames::resolve(syms, *m).display(), *n))
                    .collect(),
            );
        }
        EventKind::MonitorEnter { monitor, depth } | EventKind::MonitorExit { monitor, depth } => {
            w.monitor = Some(monitor_name(syms, monitor));
            w.depth = Some(*depth);
        }
        EventKind::Foreign { name, fields } => {
            w.name = Some(syms.string(*name));
            w.fields = Some(
                fields
                    .iter()
                    .map(|(k, v)| (syms.string(*k).to_string(), Json::String(v.clone())))
                    .collect(),
            );
        }
    }
    w
}

/// A stack as JSON Lines writes it: frames top first, each
/// `{"class","method","line"}` in that order (the Parquet `stack` column).
pub fn stack_text(syms: &SymbolTable, stack: StackId) -> String {
    serde_json::to_string(&wire_stack(syms, stack)).unwrap_or_default()
}

/// Monitors held, as JSON Lines writes them: `[{"monitor","depth"}]`.
pub fn held_text(syms: &SymbolTable, held: &[(Monitor, u32)]) -> String {
    serde_json::to_string(&wire_held(syms, held)).unwrap_or_default()
}

/// Monitors held as a JSON value (for exporters that nest it).
pub fn held_json(syms: &SymbolTable, held: &[(Monitor, u32)]) -> Json {
    serde_json::to_value(wire_held(syms, held)).unwrap_or(Json::Null)
}

fn wire_held(syms: &SymbolTable, held: &[(Monitor, u32)]) -> Vec<WireHeld> {
    held.iter()
        .map(|(m, depth)| WireHeld {
            monitor: monitor_name(syms, m),
            depth: *depth,
        })
        .collect()
}

fn wire_stack(syms: &SymbolTable, stack: StackId) -> Vec<WireFrame<'_>> {
    let Some(st) = syms.stack(stack) else {
        return Vec::new();
    };
    st.frames
        .iter()
        .enumerate()
        .map(|(i, (m, loc))| {
            let n = MethodNames::resolve(syms, *m);
            let ty = st.frame_type(i);
            WireFrame {
                class: n.class,
                method: n.name,
                line: loc.line,
                ty: (ty != FrameType::Unknown).then(|| ty.name()),
            }
        })
        .collect()
}

/// A captured value as JSON (see the module docs); `None` when the agent
/// could not read it.
pub fn value_json(v: &Value, syms: &SymbolTable) -> Option<Json> {
    Some(match v {
        Value::Null => Json::Null,
        Value::Boolean(b) => Json::Bool(*b),
        Value::Byte(x) => Json::from(*x),
        Value::Short(x) => Json::from(*x),
        Value::Int(x) => Json::from(*x),
        Value::Long(x) => Json::from(*x),
        // Through the shortest decimal form, so 0.1f stays 0.1.
        Value::Float(x) => float_json(x.to_string().parse().unwrap_or(f64::from(*x))),
        Value::Double(x) => float_json(*x),
        Value::Char(c) => Json::String(
            char::from_u32(u32::from(*c))
                .unwrap_or('\u{fffd}')
                .to_string(),
        ),
        Value::Str { text, full_len } => {
            let mut s = text.clone();
            if let Some(full) = full_len {
                let cut = u64::from(*full).saturating_sub(text.encode_utf16().count() as u64);
                s.push_str(&format!("…(+{cut} chars)"));
            }
            Json::String(s)
        }
        Value::Boxed { value, .. } => return value_json(value, syms),
        Value::Array { class, length } => Json::String(array_display(syms.string(*class), *length)),
        Value::Object { class, hash } => {
            Json::String(format!("{}@{}", syms.string(*class), hash_hex(*hash)))
        }
        Value::Unavailable => return None,
    })
}

fn float_json(x: f64) -> Json {
    match serde_json::Number::from_f64(x) {
        Some(n) => Json::Number(n),
        None if x.is_nan() => Json::String("NaN".to_string()),
        None if x > 0.0 => Json::String("Infinity".to_string()),
        None => Json::String("-Infinity".to_string()),
    }
}
