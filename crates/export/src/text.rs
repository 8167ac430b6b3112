//! The text exporter: VMView's "viewing with field labels", in a terminal.
//!
//! One header line per event (id, time since trace start, type, thread),
//! then one indented `LABEL  value` line per field, labels aligned within
//! the event:
//!
//! ```text
//! #42  1.234567ms  CALL  main
//!     METHOD  shop.Inventory.add(Ljava/lang/String;I)V
//!     DEPTH   3
//!     PARAM   name: java.lang.String = "apple"
//!     PARAM   qty: int = 7
//! ```
//!
//! Values are written as a Java programmer would read them: strings quoted
//! and escaped (`"a\nb"`), chars quoted (`'x'`), `null`, arrays as element
//! type and length (`int[3]`), objects as `class@identityHash`, boxed
//! primitives as `java.lang.Integer(5)`, and cut strings marked with what
//! was cut (`"abc"…(+97 chars)`).

use std::fmt::Write as _;
use std::io::{self, Write};

use vmview_format::{
    Event, EventKind, FrameType, MethodId, Outcome, StackSymbol, SymbolTable, Value,
};

use crate::names::{
    array_display, descriptor_types, duration_display, hash_hex, loc_display, monitor_name,
    MethodNames,
};
use crate::EventWriter;

/// Writes events as labelled, indented text.
pub struct TextWriter<W: Write> {
    out: W,
    buf: String,
}

impl<W: Write> TextWriter<W> {
    pub fn new(out: W) -> Self {
        TextWriter {
            out,
            buf: String::new(),
        }
    }

    /// Gives the underlying writer back (after [`EventWriter::finish`]).
    pub fn into_inner(self) -> W {
        self.out
    }
}

impl<W: Write> EventWriter for TextWriter<W> {
    fn write_event(&mut self, ev: &Event, syms: &SymbolTable) -> io::Result<()> {
        self.buf.clear();
        render_event(&mut self.buf, ev, syms);
        self.out.write_all(self.buf.as_bytes())
    }

    fn finish(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Appends one event, header and fields, each line ending in `\n`.
fn render_event(buf: &mut String, ev: &Event, syms: &SymbolTable) {
    let _ = writeln!(
        buf,
        "#{}  {}  {}  {}",
        ev.id,
        duration_display(ev.time_ns),
        ev.kind.type_name(),
        syms.thread_name(ev.thread)
    );
    let fields = fields(ev, syms);
    let width = fields
        .iter()
        .map(|(label, _)| label.len())
        .max()
        .unwrap_or(0)
        + 2;
    for (label, value) in fields {
        let _ = writeln!(buf, "    {label:<width$}{value}");
    }
}

/// The labelled fields of an event, in display order.
fn fields(ev: &Event, syms: &SymbolTable) -> Vec<(&'static str, String)> {
    let mut f: Vec<(&'static str, String)> = Vec::new();
    match &ev.kind {
        EventKind::ThreadStart | EventKind::ThreadEnd => {
            if let Some(t) = syms.thread(ev.thread) {
                if t.java_id >= 0 {
                    f.push(("JAVA_ID", t.java_id.to_string()));
                }
                f.push(("GROUP", syms.string(t.group).to_string()));
                f.push(("PRIORITY", t.priority.to_string()));
                f.push(("DAEMON", t.daemon.to_string()));
            }
        }
        EventKind::ClassLoad {
            class,
            loader,
            source,
        } => {
            f.push(("CLASS", syms.string(*class).to_string()));
            f.push(("LOADER", syms.string(*loader).to_string()));
            let source = syms.string(*source);
            if !source.is_empty() {
                f.push(("SOURCE", source.to_string()));
            }
        }
        EventKind::Call {
            method,
            depth,
            caller,
            params,
            metrics,
        } => {
            let names = MethodNames::resolve(syms, *method);
            f.push(("METHOD", names.display()));
            f.push(("DEPTH", depth.to_string()));
            push_metrics(&mut f, metrics);
            if let Some((m, loc)) = caller {
                f.push(("CALLER", site(syms, *m, loc)));
            }
            let types = descriptor_types(names.sig).map(|(p, _)| p);
            let param_names = syms
                .method(*method)
                .map(|m| m.param_names.as_slice())
                .unwrap_or(&[]);
            for (i, v) in params.iter().enumerate() {
                let name = match param_names.get(i) {
                    Some(n) => syms.string(*n).to_string(),
                    None => format!("arg{i}"),
                };
                let ty = types
                    .as_ref()
                    .and_then(|t| t.get(i))
                    .map_or("?", |t| t.as_str());
                f.push(("PARAM", format!("{name}: {ty} = {}", value_text(v, syms))));
            }
        }
        EventKind::Return {
            method,
            depth,
            outcome,
            elapsed_ns,
            metrics,
        } => {
            let names = MethodNames::resolve(syms, *method);
            f.push(("METHOD", names.display()));
            f.push(("DEPTH", depth.to_string()));
            push_metrics(&mut f, metrics);
            match outcome {
                Outcome::Void => f.push(("RETURN", "void".to_string())),
                Outcome::Value(v) => {
                    let ty =
                        descriptor_types(names.sig).map_or_else(|| "?".to_string(), |(_, r)| r);
                    f.push(("RETURN", format!("{ty} = {}", value_text(v, syms))));
                }
                Outcome::Exception { class } => {
                    f.push(("EXCEPTION", syms.string(*class).to_string()))
                }
            }
            f.push(("ELAPSED", duration_display(*elapsed_ns)));
        }
        EventKind::Throw {
            exception,
            message,
            method,
            loc,
            catch,
        } => {
            f.push(("EXCEPTION", syms.string(*exception).to_string()));
            if let Some(msg) = message {
                f.push(("MSG", quote_str(msg)));
            }
            f.push(("THROWN_AT", site(syms, *method, loc)));
            match catch {
                Some((m, loc)) => f.push(("CATCH_AT", site(syms, *m, loc))),
                None => f.push(("CATCH_AT", "uncaught".to_string())),
            }
        }
        EventKind::Catch {
            exception,
            method,
            loc,
        } => {
            f.push(("EXCEPTION", syms.string(*exception).to_string()));
            f.push(("CATCH_AT", site(syms, *method, loc)));
        }
        EventKind::MonitorContendedEnter { monitor, owner } => {
            f.push(("MONITOR", monitor_name(syms, monitor)));
            let owner = owner.map_or_else(|| "unknown".to_string(), |t| syms.thread_name(t));
            f.push(("OWNER", owner));
        }
        EventKind::MonitorContendedEntered { monitor, wait_ns } => {
            f.push(("MONITOR", monitor_name(syms, monitor)));
            f.push(("WAITED", duration_display(*wait_ns)));
        }
        EventKind::MonitorWait {
            monitor,
            timeout_ms,
        } => {
            f.push(("MONITOR", monitor_name(syms, monitor)));
            let timeout = if *timeout_ms == 0 {
                "none".to_string()
            } else {
                format!("{timeout_ms}ms")
            };
            f.push(("TIMEOUT", timeout));
        }
        EventKind::MonitorWaited {
            monitor,
            timed_out,
            wait_ns,
        } => {
            f.push(("MONITOR", monitor_name(syms, monitor)));
            f.push(("WAITED", duration_display(*wait_ns)));
            f.push(("TIMED_OUT", timed_out.to_string()));
        }
        EventKind::GcStart => {}
        EventKind::GcFinish { duration_ns } => f.push(("DURATION", duration_display(*duration_ns))),
        EventKind::Dropped { count } => f.push(("COUNT", count.to_string())),
        EventKind::Bytecode { method, bci, insn } => {
            f.push(("METHOD", MethodNames::resolve(syms, *method).display()));
            // `javap -c`'s shape: offset, colon, instruction.
            f.push(("INSN", format!("{bci}: {}", syms.string(*insn))));
        }
        EventKind::Sample {
            state,
            stack,
            monitors,
        } => {
            f.push(("STATE", state.name().to_string()));
            match syms.stack(*stack) {
                Some(st) => frame_lines(&mut f, syms, st),
                None => f.push(("STACK", format!("unknown stack {}", stack.0))),
            }
            for (m, depth) in monitors {
                f.push((
                    "HOLDS",
                    format!("{} at depth {depth}", monitor_name(syms, m)),
                ));
            }
        }
        EventKind::TraceWindow {
            min_depth,
            max_depth,
            reason,
            rate_per_s,
        } => {
            let max = max_depth.map_or_else(|| "any".to_string(), |m| m.to_string());
            f.push(("WINDOW", format!("depth {min_depth}..{max}")));
            f.push(("REASON", reason.name().to_string()));
            if *rate_per_s > 0 {
                f.push(("RATE", format!("{rate_per_s} events/s")));
            }
        }
        EventKind::PeriodStart { period, stack } => {
            f.push(("PERIOD", period.to_string()));
            match syms.stack(*stack) {
                Some(st) => frame_lines(&mut f, syms, st),
                None => f.push(("STACK", format!("unknown stack {}", stack.0))),
            }
        }
        EventKind::PeriodEnd { period } => f.push(("PERIOD", period.to_string())),
        EventKind::VthreadPinned { stack, duration_ns } => {
            f.push(("DURATION", duration_display(*duration_ns)));
            match syms.stack(*stack) {
                Some(st) => frame_lines(&mut f, syms, st),
                None => f.push(("STACK", format!("unknown stack {}", stack.0))),
            }
        }
        EventKind::AllocSample { class, size, stack } => {
            f.push(("CLASS", syms.string(*class).to_string()));
            f.push(("SIZE", size.to_string()));
            match syms.stack(*stack) {
                Some(st) => frame_lines(&mut f, syms, st),
                None => f.push(("STACK", format!("unknown stack {}", stack.0))),
            }
        }
        EventKind::Calibration { record, cost_ps } => {
            f.push(("RECORD", record.clone()));
            f.push(("COST", format!("{:.3}ns", *cost_ps as f64 / 1000.0)));
        }
        EventKind::ReactionHandlers {
            samples,
            handlers,
            skipped,
        } => {
            f.push(("SAMPLES", samples.to_string()));
            let list = |ms: &[MethodId]| {
                ms.iter()
                    .map(|m| MethodNames::resolve(syms, *m).display())
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            f.push(("HANDLERS", list(handlers)));
            if !skipped.is_empty() {
                f.push(("SKIPPED", list(skipped)));
            }
        }
        EventKind::Demotion {
            method,
            rate_per_s,
            mean_ns,
            before_bp,
            after_bp,
            counted,
        } => {
            f.push(("METHOD", MethodNames::resolve(syms, *method).display()));
            f.push(("RATE", format!("{rate_per_s}/s")));
            f.push(("MEAN", format!("{mean_ns}ns")));
            f.push((
                "OVERHEAD",
                format!(
                    "{:.2}%->{:.2}%",
                    *before_bp as f64 / 100.0,
                    *after_bp as f64 / 100.0
                ),
            ));
            f.push(("COUNTED", counted.to_string()));
        }
        EventKind::MethodCounts {
            overhead_bp,
            counts,
        } => {
            f.push(("OVERHEAD", format!("{:.2}%", *overhead_bp as f64 / 100.0)));
            let list = counts
                .iter()
                .map(|(m, n)| format!("{}={n}", MethodNames::resolve(syms, *m).display()))
                .collect::<Vec<_>>()
                .join(" ");
            f.push(("COUNTS", list));
        }
        EventKind::MonitorEnter { monitor, depth } | EventKind::MonitorExit { monitor, depth } => {
            f.push(("MONITOR", monitor_name(syms, monitor)));
            f.push(("DEPTH", depth.to_string()));
        }
        EventKind::Foreign { name, fields } => {
            f.push(("NAME", syms.string(*name).to_string()));
            for (k, v) in fields {
                f.push(("FIELD", format!("{} = {v}", syms.string(*k))));
            }
        }
    }
    f
}

/// CPU time and allocated bytes of a CALL or RETURN, when recorded.
fn push_metrics(f: &mut Vec<(&'static str, String)>, m: &vmview_format::Metrics) {
    if let Some(cpu) = m.cpu_ns {
        f.push(("CPU", duration_display(cpu)));
    }
    if let Some(alloc) = m.alloc_bytes {
        f.push(("ALLOCATED", format!("{alloc} bytes")));
    }
}

/// A stack's `AT` lines, top first; a frame whose type is known ends in
/// `[inlined]`, `[compiled]`, `[interpreted]` or `[native]`.
fn frame_lines(f: &mut Vec<(&'static str, String)>, syms: &SymbolTable, st: &StackSymbol) {
    for (i, (m, loc)) in st.frames.iter().enumerate() {
        let mut at = site(syms, *m, loc);
        let ty = st.frame_type(i);
        if ty != FrameType::Unknown {
            at.push_str(" [");
            at.push_str(ty.name());
            at.push(']');
        }
        f.push(("AT", at));
    }
}

/// `shop.Inventory.add(I)V @ bci 12 line 34`.
fn site(syms: &SymbolTable, method: vmview_format::MethodId, loc: &vmview_format::Loc) -> String {
    format!(
        "{} {}",
        MethodNames::resolve(syms, method).display(),
        loc_display(loc)
    )
}

/// A value as a Java programmer reads it (see the module docs).
pub fn value_text(v: &Value, syms: &SymbolTable) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Boolean(b) => b.to_string(),
        Value::Byte(x) => x.to_string(),
        Value::Short(x) => x.to_string(),
        Value::Int(x) => x.to_string(),
        Value::Long(x) => x.to_string(),
        Value::Float(x) => float_text(f64::from(*x), format!("{x:?}")),
        Value::Double(x) => float_text(*x, format!("{x:?}")),
        Value::Char(c) => {
            let mut s = String::from("'");
            push_escaped_unit(&mut s, *c, '\'');
            s.push('\'');
            s
        }
        Value::Str { text, full_len } => {
            let mut s = quote_str(text);
            if let Some(full) = full_len {
                let kept = text.encode_utf16().count() as u64;
                let cut = u64::from(*full).saturating_sub(kept);
                let _ = write!(s, "…(+{cut} chars)");
            }
            s
        }
        Value::Boxed { class, value } => {
            format!("{}({})", syms.string(*class), value_text(value, syms))
        }
        Value::Array { class, length } => array_display(syms.string(*class), *length),
        Value::Object { class, hash } => format!("{}@{}", syms.string(*class), hash_hex(*hash)),
        Value::Unavailable => "<unavailable>".to_string(),
    }
}

/// Java's spelling of non-finite floats; `finite` otherwise. Whole numbers
/// keep a `.0` so a float never reads as an int.
fn float_text(x: f64, finite: String) -> String {
    if x.is_nan() {
        "NaN".to_string()
    } else if x.is_infinite() {
        if x > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
    } else if finite.contains(['.', 'e', 'E']) {
        finite
    } else {
        finite + ".0"
    }
}

/// A string in double quotes, escaped as a Java literal would be.
pub fn quote_str(text: &str) -> String {
    let mut s = String::with_capacity(text.len() + 2);
    s.push('"');
    for c in text.chars() {
        push_escaped(&mut s, c, '"');
    }
    s.push('"');
    s
}

fn push_escaped(s: &mut String, c: char, quote: char) {
    match c {
        '\\' => s.push_str("\\\\"),
        '\n' => s.push_str("\\n"),
        '\r' => s.push_str("\\r"),
        '\t' => s.push_str("\\t"),
        c if c == quote => {
            s.push('\\');
            s.push(c);
        }
        c if c.is_control() => {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                let _ = write!(s, "\\u{u:04x}");
            }
        }
        c => s.push(c),
    }
}

/// One UTF-16 unit (a Java `char`): a lone surrogate is written `\udXXX`.
fn push_escaped_unit(s: &mut String, unit: u16, quote: char) {
    match char::from_u32(u32::from(unit)) {
        Some(c) => push_escaped(s, c, quote),
        None => {
            let _ = write!(s, "\\u{unit:04x}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_read_like_java() {
        let syms = SymbolTable::default();
        assert_eq!(value_text(&Value::Double(1.0), &syms), "1.0");
        assert_eq!(value_text(&Value::Float(0.1), &syms), "0.1");
        assert_eq!(value_text(&Value::Double(f64::NAN), &syms), "NaN");
        assert_eq!(
            value_text(&Value::Float(f32::NEG_INFINITY), &syms),
            "-Infinity"
        );
        assert_eq!(value_text(&Value::Double(1e300), &syms), "1e300");
    }

    #[test]
    fn strings_and_chars_are_quoted_and_escaped() {
        let syms = SymbolTable::default();
        assert_eq!(quote_str("a\"b\\c\nd\u{1}"), r#""a\"b\\c\nd\u0001""#);
        assert_eq!(value_text(&Value::Char(u16::from(b'\'')), &syms), r"'\''");
        assert_eq!(value_text(&Value::Char(0xd800), &syms), r"'\ud800'");
        let cut = Value::Str {
            text: "héllo".to_string(),
            full_len: Some(12),
        };
        assert_eq!(value_text(&cut, &syms), "\"héllo\"…(+7 chars)");
    }
}
