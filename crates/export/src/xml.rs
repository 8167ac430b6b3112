//! The XML exporter: VMView's flat XML trace, with its DTD inside.
//!
//! VMView (NIST, 1999) wrote its traces as flat XML — one element per event,
//! one child element per field, the catch site as `CLASS2`/`MTD2`/`SIG2`/`LOC2`
//! rather than a nested element — because a flat shape is what a streaming
//! (SAX) filter and a browser handle best, and it embedded the DTD so that
//! every file carries its own structure and a validating parser can check
//! it. vmview keeps that shape and those names, adds an `ID` attribute to
//! every event (so an event found in a filtered trace can be opened in its
//! original), and carries enough to rebuild the events exactly: the XML
//! reader ([`crate::xml_reader`]) turns a document in this shape back into
//! events, and `vmview filter` accepts it as input.
//!
//! # Shape
//!
//! ```xml
//! <TRACE VERSION="1" PID="4242" START="1700000000000000000">
//! <PROP NAME="jvm">17.0.9</PROP>
//! <THREAD TID="0" JID="1" GROUP="main" PRIORITY="5" DAEMON="false">main</THREAD>
//! <CALL ID="7" TIME="1200"><THRD TID="0">main</THRD><CLASS>Lshop/Inventory;</CLASS>
//!   <MTD><![CDATA[<init>]]></MTD><SIG>(I)V</SIG><DEPTH>2</DEPTH>
//!   <PARAM NAME="qty" KIND="int">7</PARAM></CALL>
//! ```
//!
//! (Events are written one per line; the line break above is for the page.)
//! `THREAD` declares a thread before the first event that names it, like
//! the binary format's symbol records, so thread details (Java id, group,
//! priority, daemon) survive a filter that drops `THREAD_START`. The DTD,
//! [`DTD`], is the reference for every element and attribute; `docs/vmview.dtd`
//! holds the same text.
//!
//! Class names (`CLASS`, `CLASS2`, `EXC`, the class of a value or monitor)
//! are in the JVM's form, `Lshop/Inventory$Clerk;`, arrays as descriptors
//! (`[I`, `[Ljava/lang/String;`), primitives as their letter (`I`), hidden
//! classes as the JVM writes them (`Lfx/Main$$Lambda.0x0a08;` for
//! `fx.Main$$Lambda/0x0a08`).
//!
//! # Strings
//!
//! Text that contains `<` or `&` is written as CDATA (`<![CDATA[<init>]]>`),
//! a `]]>` inside it split across two sections. Characters XML 1.0 cannot
//! carry — control characters other than tab and newline, carriage return
//! (which parsers turn into a newline), U+FFFE, U+FFFF and lone UTF-16
//! surrogates in `char` values — are written as an empty element
//! `<U C="1b"/>` holding the character's hex code, which the reader puts
//! back. Attribute values (parameter, property and thread-group names) are
//! escaped with entities; a forbidden character there becomes U+FFFD.
//! Method access flags are not written.

use std::io::{self, Write};

use vmview_format::{
    Event, EventKind, FrameType, Loc, MethodId, Metrics, Monitor, Outcome, StackId, SymbolTable,
    ThreadRef, TraceHeader, Value,
};

use crate::names::{hash_hex, MethodNames};
use crate::EventWriter;

/// The document type definition, embedded as the internal subset of every
/// exported document (and kept in `docs/vmview.dtd`).
pub const DTD: &str = include_str!("xml.dtd");

/// Writes events as VMView-style flat XML with the DTD embedded.
pub struct XmlWriter<W: Write> {
    out: W,
    header: TraceHeader,
    started: bool,
    buf: Vec<u8>,
    /// `declared[t]`: a `THREAD` element for thread handle `t` was written.
    declared: Vec<bool>,
}

impl<W: Write> XmlWriter<W> {
    /// A writer whose `TRACE` element carries `header` (pid, start time,
    /// properties).
    pub fn new(out: W, header: &TraceHeader) -> Self {
        XmlWriter {
            out,
            header: header.clone(),
            started: false,
            buf: Vec::with_capacity(4096),
            declared: Vec::new(),
        }
    }

    /// Gives the underlying writer back (after [`EventWriter::finish`]).
    pub fn into_inner(self) -> W {
        self.out
    }

    fn start(&mut self) {
        self.started = true;
        let b = &mut self.buf;
        b.extend_from_slice(b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE TRACE [\n");
        b.extend_from_slice(DTD.as_bytes());
        b.extend_from_slice(b"]>\n<TRACE VERSION=\"1\"");
        let h = &self.header;
        push_fmt(
            b,
            format_args!(" PID=\"{}\" START=\"{}\">\n", h.pid, h.start_unix_ns),
        );
        for (k, v) in &h.properties {
            b.extend_from_slice(b"<PROP NAME=\"");
            push_attr(b, k);
            b.extend_from_slice(b"\">");
            push_text(b, v);
            b.extend_from_slice(b"</PROP>\n");
        }
    }

    /// Writes a `THREAD` declaration for `t` unless one was written.
    fn declare_thread(&mut self, t: ThreadRef, syms: &SymbolTable) {
        let i = t.0 as usize;
        if self.declared.get(i).copied().unwrap_or(false) {
            return;
        }
        if i >= self.declared.len() {
            self.declared.resize(i + 1, false);
        }
        self.declared[i] = true;
        let b = &mut self.buf;
        match syms.thread(t) {
            Some(th) => {
                push_fmt(
                    b,
                    format_args!("<THREAD TID=\"{}\" JID=\"{}\" GROUP=\"", t.0, th.java_id),
                );
                push_attr(b, syms.string(th.group));
                push_fmt(
                    b,
                    format_args!("\" PRIORITY=\"{}\" DAEMON=\"{}\">", th.priority, th.daemon),
                );
                push_text(b, syms.string(th.name));
            }
            None => {
                push_fmt(b, format_args!("<THREAD TID=\"{}\">", t.0));
                push_text(b, &syms.thread_name(t));
            }
        }
        b.extend_from_slice(b"</THREAD>\n");
    }
}

impl<W: Write> EventWriter for XmlWriter<W> {
    fn write_event(&mut self, ev: &Event, syms: &SymbolTable) -> io::Result<()> {
        if !self.started {
            self.start();
        }
        self.declare_thread(ev.thread, syms);
        if let EventKind::MonitorContendedEnter {
            owner: Some(owner), ..
        } = &ev.kind
        {
            self.declare_thread(*owner, syms);
        }
        render_event(&mut self.buf, ev, syms);
        if self.buf.len() >= 64 * 1024 {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        if !self.started {
            self.start();
        }
        self.buf.extend_from_slice(b"</TRACE>\n");
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        self.out.flush()
    }
}

fn push_fmt(b: &mut Vec<u8>, args: std::fmt::Arguments<'_>) {
    // Writing into a Vec cannot fail.
    let _ = b.write_fmt(args);
}

fn push_u64(b: &mut Vec<u8>, n: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    let mut n = n;
    loop {
        i -= 1;
        tmp[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    b.extend_from_slice(&tmp[i..]);
}

/// One event element on one line.
fn render_event(b: &mut Vec<u8>, ev: &Event, syms: &SymbolTable) {
    let name = ev.kind.type_name();
    b.push(b'<');
    b.extend_from_slice(name.as_bytes());
    b.extend_from_slice(b" ID=\"");
    push_u64(b, ev.id);
    b.extend_from_slice(b"\" TIME=\"");
    push_u64(b, ev.time_ns);
    b.extend_from_slice(b"\">");
    // THROW and CATCH start with the exception, as VMView's THROW did.
    match &ev.kind {
        EventKind::Throw {
            exception, message, ..
        } => {
            elem_class(b, "EXC", syms.string(*exception));
            if let Some(m) = message {
                elem_text(b, "MSG", m);
            }
        }
        EventKind::Catch { exception, .. } => elem_class(b, "EXC", syms.string(*exception)),
        _ => {}
    }
    thrd(b, "THRD", ev.thread, syms);
    match &ev.kind {
        EventKind::ThreadStart | EventKind::ThreadEnd | EventKind::GcStart => {}
        EventKind::ClassLoad {
            class,
            loader,
            source,
        } => {
            elem_class(b, "CLASS", syms.string(*class));
            elem_text(b, "LOADER", syms.string(*loader));
            let source = syms.string(*source);
            if !source.is_empty() {
                elem_text(b, "SRC", source);
            }
        }
        EventKind::Call {
            method,
            depth,
            caller,
            params,
            metrics,
        } => {
            method_elems(b, "", *method, syms);
            elem_num(b, "DEPTH", u64::from(*depth));
            metric_elems(b, metrics);
            if let Some((m, loc)) = caller {
                method_elems(b, "2", *m, syms);
                loc_elem(b, "LOC2", loc);
            }
            let names = syms
                .method(*method)
                .map(|m| m.param_names.as_slice())
                .unwrap_or(&[]);
            for (i, v) in params.iter().enumerate() {
                b.extend_from_slice(b"<PARAM NAME=\"");
                match names.get(i) {
                    Some(n) => push_attr(b, syms.string(*n)),
                    None => push_fmt(b, format_args!("arg{i}")),
                }
                b.push(b'"');
                value_body(b, "PARAM", v, syms);
            }
        }
        EventKind::Return {
            method,
            depth,
            outcome,
            elapsed_ns,
            metrics,
        } => {
            method_elems(b, "", *method, syms);
            elem_num(b, "DEPTH", u64::from(*depth));
            elem_num(b, "ELAPSED", *elapsed_ns);
            metric_elems(b, metrics);
            match outcome {
                Outcome::Void => {}
                Outcome::Value(v) => {
                    b.extend_from_slice(b"<VALUE");
                    value_body(b, "VALUE", v, syms);
                }
                Outcome::Exception { class } => elem_class(b, "EXC", syms.string(*class)),
            }
        }
        EventKind::Throw {
            method, loc, catch, ..
        } => {
            method_elems(b, "", *method, syms);
            loc_elem(b, "LOC", loc);
            if let Some((m, loc)) = catch {
                method_elems(b, "2", *m, syms);
                loc_elem(b, "LOC2", loc);
            }
        }
        EventKind::Catch { method, loc, .. } => {
            method_elems(b, "", *method, syms);
            loc_elem(b, "LOC", loc);
        }
        EventKind::MonitorContendedEnter { monitor, owner } => {
            monitor_elem(b, monitor, syms);
            if let Some(o) = owner {
                thrd(b, "OWNER", *o, syms);
            }
        }
        EventKind::MonitorContendedEntered { monitor, wait_ns } => {
            monitor_elem(b, monitor, syms);
            elem_num(b, "WAIT", *wait_ns);
        }
        EventKind::MonitorWait {
            monitor,
            timeout_ms,
        } => {
            monitor_elem(b, monitor, syms);
            b.extend_from_slice(b"<TIMEOUT>");
            push_fmt(b, format_args!("{timeout_ms}"));
            b.extend_from_slice(b"</TIMEOUT>");
        }
        EventKind::MonitorWaited {
            monitor,
            timed_out,
            wait_ns,
        } => {
            monitor_elem(b, monitor, syms);
            push_fmt(b, format_args!("<TIMEDOUT>{timed_out}</TIMEDOUT>"));
            elem_num(b, "WAIT", *wait_ns);
        }
        EventKind::Bytecode { method, bci, insn } => {
            method_elems(b, "", *method, syms);
            elem_num(b, "LOC", u64::from(*bci));
            elem_text(b, "INSN", syms.string(*insn));
        }
        EventKind::GcFinish { duration_ns } => elem_num(b, "DURATION", *duration_ns),
        EventKind::Dropped { count } => elem_num(b, "COUNT", *count),
        EventKind::Sample {
            state,
            stack,
            monitors,
        } => {
            elem_text(b, "STATE", state.name());
            frame_elems(b, *stack, syms);
            for (m, depth) in monitors {
                push_fmt(b, format_args!("<HELD DEPTH=\"{depth}\">"));
                monitor_elem(b, m, syms);
                b.extend_from_slice(b"</HELD>");
            }
        }
        EventKind::TraceWindow {
            min_depth,
            max_depth,
            reason,
            rate_per_s,
        } => {
            elem_num(b, "MINDEPTH", u64::from(*min_depth));
            if let Some(m) = max_depth {
                elem_num(b, "MAXDEPTH", u64::from(*m));
            }
            elem_text(b, "REASON", reason.name());
            elem_num(b, "RATE", *rate_per_s);
        }
        EventKind::PeriodStart { period, stack } => {
            elem_num(b, "PERIOD", u64::from(*period));
            frame_elems(b, *stack, syms);
        }
        EventKind::PeriodEnd { period } => elem_num(b, "PERIOD", u64::from(*period)),
        EventKind::VthreadPinned { stack, duration_ns } => {
            elem_num(b, "DURATION", *duration_ns);
            frame_elems(b, *stack, syms);
        }
        EventKind::AllocSample { class, size, stack } => {
            elem_class(b, "CLASS", syms.string(*class));
            elem_num(b, "SIZE", *size);
            frame_elems(b, *stack, syms);
        }
        EventKind::Calibration { record, cost_ps } => {
            elem_text(b, "RECORD", record);
            elem_num(b, "COST", *cost_ps);
        }
        EventKind::ReactionHandlers {
            samples,
            handlers,
            skipped,
        } => {
            elem_num(b, "SAMPLES", *samples);
            for (tag, list) in [("HANDLER", handlers), ("SKIPPED", skipped)] {
                for m in list {
                    handler_elem(b, tag, *m, syms);
                }
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
            handler_elem(b, "DEMOTED", *method, syms);
            elem_num(b, "RATE", *rate_per_s);
            elem_num(b, "MEAN", *mean_ns);
            elem_num(b, "BEFORE", *before_bp);
            elem_num(b, "AFTER", *after_bp);
            elem_text(b, "COUNTED", if *counted { "true" } else { "false" });
        }
        EventKind::MethodCounts {
            overhead_bp,
            counts,
        } => {
            elem_num(b, "OVERHEAD", *overhead_bp);
            for (m, n) in counts {
                let names = MethodNames::resolve(syms, *m);
                push_fmt(b, format_args!("<COUNTS CLASS=\""));
                push_class_attr(b, names.class);
                b.extend_from_slice(b"\" MTD=\"");
                push_attr(b, names.name);
                b.extend_from_slice(b"\" SIG=\"");
                push_attr(b, names.sig);
                push_fmt(b, format_args!("\" N=\"{n}\"/>"));
            }
        }
        EventKind::MonitorEnter { monitor, depth } | EventKind::MonitorExit { monitor, depth } => {
            monitor_elem(b, monitor, syms);
            elem_num(b, "DEPTH", u64::from(*depth));
        }
        EventKind::Foreign { name, fields } => {
            elem_text(b, "RECORD", syms.string(*name));
            for (k, v) in fields {
                b.extend_from_slice(b"<PARAM NAME=\"");
                push_attr(b, syms.string(*k));
                b.extend_from_slice(b"\" KIND=\"string\">");
                push_text(b, v);
                b.extend_from_slice(b"</PARAM>");
            }
        }
    }
    b.extend_from_slice(b"</");
    b.extend_from_slice(name.as_bytes());
    b.extend_from_slice(b">\n");
}

/// A stack as `FRAME` elements, top first.
fn frame_elems(b: &mut Vec<u8>, stack: StackId, syms: &SymbolTable) {
    if let Some(st) = syms.stack(stack) {
        for (i, (m, loc)) in st.frames.iter().enumerate() {
            let n = MethodNames::resolve(syms, *m);
            b.extend_from_slice(b"<FRAME CLASS=\"");
            push_class_attr(b, n.class);
            b.extend_from_slice(b"\" MTD=\"");
            push_attr(b, n.name);
            b.extend_from_slice(b"\" SIG=\"");
            push_attr(b, n.sig);
            b.extend_from_slice(b"\" LOC=\"");
            push_fmt(b, format_args!("{}", loc.bci));
            if let Some(line) = loc.line {
                push_fmt(b, format_args!("\" LINE=\"{line}"));
            }
            let ty = st.frame_type(i);
            if ty != FrameType::Unknown {
                push_fmt(b, format_args!("\" TYPE=\"{}", ty.name()));
            }
            b.extend_from_slice(b"\"/>");
        }
    }
}

/// A method as an empty element with CLASS, MTD and SIG attributes.
fn handler_elem(b: &mut Vec<u8>, tag: &str, m: MethodId, syms: &SymbolTable) {
    let n = MethodNames::resolve(syms, m);
    push_fmt(b, format_args!("<{tag} CLASS=\""));
    push_class_attr(b, n.class);
    b.extend_from_slice(b"\" MTD=\"");
    push_attr(b, n.name);
    b.extend_from_slice(b"\" SIG=\"");
    push_attr(b, n.sig);
    b.extend_from_slice(b"\"/>");
}

/// `CPU` and `ALLOC` of a CALL or RETURN, when recorded.
fn metric_elems(b: &mut Vec<u8>, m: &Metrics) {
    if let Some(cpu) = m.cpu_ns {
        elem_num(b, "CPU", cpu);
    }
    if let Some(alloc) = m.alloc_bytes {
        elem_num(b, "ALLOC", alloc);
    }
}

fn thrd(b: &mut Vec<u8>, tag: &str, t: ThreadRef, syms: &SymbolTable) {
    push_fmt(b, format_args!("<{tag} TID=\"{}\">", t.0));
    match syms.thread(t) {
        Some(th) => push_text(b, syms.string(th.name)),
        None => push_text(b, &syms.thread_name(t)),
    }
    push_fmt(b, format_args!("</{tag}>"));
}

fn method_elems(b: &mut Vec<u8>, suffix: &str, m: MethodId, syms: &SymbolTable) {
    let (class, name, sig) = match syms.method(m) {
        Some(s) => (
            syms.string(s.class),
            syms.string(s.name),
            syms.string(s.sig),
        ),
        None => ("?", "?", "?"),
    };
    push_fmt(b, format_args!("<CLASS{suffix}>"));
    push_class(b, class);
    push_fmt(b, format_args!("</CLASS{suffix}><MTD{suffix}>"));
    push_text(b, name);
    push_fmt(b, format_args!("</MTD{suffix}><SIG{suffix}>"));
    push_text(b, sig);
    push_fmt(b, format_args!("</SIG{suffix}>"));
}

fn loc_elem(b: &mut Vec<u8>, tag: &str, loc: &Loc) {
    match loc.line {
        Some(l) => push_fmt(b, format_args!("<{tag} LINE=\"{l}\">{}</{tag}>", loc.bci)),
        None => push_fmt(b, format_args!("<{tag}>{}</{tag}>", loc.bci)),
    }
}

fn monitor_elem(b: &mut Vec<u8>, m: &Monitor, syms: &SymbolTable) {
    b.extend_from_slice(b"<MON>");
    push_class(b, syms.string(m.class));
    b.push(b'@');
    b.extend_from_slice(hash_hex(m.hash).as_bytes());
    b.extend_from_slice(b"</MON>");
}

fn elem_num(b: &mut Vec<u8>, tag: &str, n: u64) {
    b.push(b'<');
    b.extend_from_slice(tag.as_bytes());
    b.push(b'>');
    push_u64(b, n);
    b.extend_from_slice(b"</");
    b.extend_from_slice(tag.as_bytes());
    b.push(b'>');
}

fn elem_text(b: &mut Vec<u8>, tag: &str, text: &str) {
    b.push(b'<');
    b.extend_from_slice(tag.as_bytes());
    b.push(b'>');
    push_text(b, text);
    b.extend_from_slice(b"</");
    b.extend_from_slice(tag.as_bytes());
    b.push(b'>');
}

fn elem_class(b: &mut Vec<u8>, tag: &str, class: &str) {
    b.push(b'<');
    b.extend_from_slice(tag.as_bytes());
    b.push(b'>');
    push_class(b, class);
    b.extend_from_slice(b"</");
    b.extend_from_slice(tag.as_bytes());
    b.push(b'>');
}

/// The rest of a `PARAM` or `VALUE` element after its name (and `NAME`
/// attribute): `KIND` and the other attributes, the text, the end tag.
fn value_body(b: &mut Vec<u8>, tag: &str, v: &Value, syms: &SymbolTable) {
    let (v, boxed) = match v {
        Value::Boxed { class, value } => (value.as_ref(), Some(syms.string(*class))),
        other => (other, None),
    };
    let kind = match v {
        // A box around a box does not occur; write the inner one as an object.
        Value::Boxed { .. } => "object",
        other => other.type_name(),
    };
    push_fmt(b, format_args!(" KIND=\"{kind}\""));
    if let Some(class) = boxed {
        b.extend_from_slice(b" BOX=\"");
        push_class_attr(b, class);
        b.push(b'"');
    }
    match v {
        Value::Str {
            full_len: Some(n), ..
        } => push_fmt(b, format_args!(" FULL=\"{n}\"")),
        Value::Array { class, length } => {
            b.extend_from_slice(b" CLASS=\"");
            push_class_attr(b, syms.string(*class));
            push_fmt(b, format_args!("\" LEN=\"{length}\""));
        }
        Value::Object { class, hash } => {
            b.extend_from_slice(b" CLASS=\"");
            push_class_attr(b, syms.string(*class));
            push_fmt(b, format_args!("\" HASH=\"{}\"", hash_hex(*hash)));
        }
        Value::Boxed { class, .. } => {
            b.extend_from_slice(b" CLASS=\"");
            push_class_attr(b, syms.string(*class));
            b.push(b'"');
        }
        _ => {}
    }
    let text: Option<String> = match v {
        Value::Null | Value::Unavailable | Value::Boxed { .. } => None,
        Value::Boolean(x) => Some(x.to_string()),
        Value::Byte(x) => Some(x.to_string()),
        Value::Short(x) => Some(x.to_string()),
        Value::Int(x) => Some(x.to_string()),
        Value::Long(x) => Some(x.to_string()),
        Value::Float(x) => Some(float_text(f64::from(*x), x.to_string())),
        Value::Double(x) => Some(float_text(*x, x.to_string())),
        Value::Char(c) => {
            b.push(b'>');
            match char::from_u32(u32::from(*c)) {
                Some(ch) => {
                    let mut tmp = [0u8; 4];
                    push_text(b, ch.encode_utf8(&mut tmp));
                }
                None => push_fmt(b, format_args!("<U C=\"{c:x}\"/>")),
            }
            push_fmt(b, format_args!("</{tag}>"));
            return;
        }
        Value::Str { text, .. } => {
            b.push(b'>');
            push_text(b, text);
            push_fmt(b, format_args!("</{tag}>"));
            return;
        }
        Value::Array { class, length } => {
            Some(crate::names::array_display(syms.string(*class), *length))
        }
        Value::Object { class, hash } => {
            Some(format!("{}@{}", syms.string(*class), hash_hex(*hash)))
        }
    };
    match text {
        None => b.extend_from_slice(b"/>"),
        Some(t) => {
            b.push(b'>');
            push_text(b, &t);
            push_fmt(b, format_args!("</{tag}>"));
        }
    }
}

/// Floats as Java prints their special values; finite ones in Rust's
/// shortest round-tripping form.
fn float_text(x: f64, shortest: String) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        shortest
    }
}

/// A dotted binary class name in the JVM's form: `shop.Inventory$Clerk` →
/// `Lshop/Inventory$Clerk;`, `int[]` → `[I`, `java.lang.String[]` →
/// `[Ljava/lang/String;`, `int` → `I`. [`class_from_jvm`] is its inverse.
pub fn class_to_jvm(dotted: &str) -> String {
    let mut base = dotted;
    let mut dims = 0;
    while let Some(b) = base.strip_suffix("[]") {
        base = b;
        dims += 1;
    }
    let mut s = String::with_capacity(dotted.len() + 2);
    for _ in 0..dims {
        s.push('[');
    }
    match primitive_letter(base) {
        Some(c) => s.push(c),
        None => {
            s.push('L');
            s.extend(base.chars().map(swap_separators));
            s.push(';');
        }
    }
    s
}

/// The inverse of [`class_to_jvm`]; text not in the JVM form (a class
/// name written by hand as `shop.Item`) is returned unchanged.
pub fn class_from_jvm(jvm: &str) -> String {
    let dims = jvm.bytes().take_while(|&c| c == b'[').count();
    let rest = &jvm[dims..];
    let base = match rest.as_bytes() {
        [c] if dims > 0 || primitive_name(*c).is_some() => match primitive_name(*c) {
            Some(p) => p.to_string(),
            None => return jvm.to_string(),
        },
        [b'L', .., b';'] => rest[1..rest.len() - 1]
            .chars()
            .map(swap_separators)
            .collect(),
        _ => return jvm.to_string(),
    };
    let mut s = base;
    for _ in 0..dims {
        s.push_str("[]");
    }
    s
}

/// `.` ↔ `/`: package separators, and the other way round for the `/` in a
/// hidden class's name (`Foo$$Lambda/0x…` is `LFoo$$Lambda.0x…;` in the
/// JVM's own descriptors), so the conversion is reversible.
fn swap_separators(c: char) -> char {
    match c {
        '.' => '/',
        '/' => '.',
        c => c,
    }
}

fn primitive_letter(name: &str) -> Option<char> {
    Some(match name {
        "byte" => 'B',
        "char" => 'C',
        "double" => 'D',
        "float" => 'F',
        "int" => 'I',
        "long" => 'J',
        "short" => 'S',
        "boolean" => 'Z',
        "void" => 'V',
        _ => return None,
    })
}

fn primitive_name(letter: u8) -> Option<&'static str> {
    Some(match letter {
        b'B' => "byte",
        b'C' => "char",
        b'D' => "double",
        b'F' => "float",
        b'I' => "int",
        b'J' => "long",
        b'S' => "short",
        b'Z' => "boolean",
        b'V' => "void",
        _ => return None,
    })
}

fn push_class(b: &mut Vec<u8>, dotted: &str) {
    push_text(b, &class_to_jvm(dotted));
}

fn push_class_attr(b: &mut Vec<u8>, dotted: &str) {
    push_attr(b, &class_to_jvm(dotted));
}

/// Bytes that need no care in element content: everything but `<`, `&`,
/// `]` (a possible `]]>`), control characters and the UTF-8 lead byte of
/// U+FFFE/U+FFFF (0xEF, checked exactly on the slow path).
static PLAIN: [bool; 256] = {
    let mut t = [true; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = false;
        i += 1;
    }
    t[b'\t' as usize] = true;
    t[b'\n' as usize] = true;
    t[b'<' as usize] = false;
    t[b'&' as usize] = false;
    t[b']' as usize] = false;
    t[0xEF] = false;
    t
};

/// Can XML 1.0 carry `c` literally in element content (after parsing)?
fn xml_char_ok(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\u{20}'..='\u{FFFD}' | '\u{10000}'..)
}

/// Appends `s` as element content (see the module docs: CDATA where
/// needed, `]]>` split, forbidden characters as `<U C="hex"/>`).
pub(crate) fn push_text(b: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|c| PLAIN[c as usize]) {
        b.extend_from_slice(s.as_bytes());
        return;
    }
    let cdata = s.contains(['<', '&']) || s.contains("]]>");
    let mut open = false;
    let mut rest = s;
    while !rest.is_empty() {
        // The longest prefix of characters XML can carry.
        let end = rest
            .char_indices()
            .find(|&(_, c)| !xml_char_ok(c) || c == '\r')
            .map_or(rest.len(), |(i, _)| i);
        let run = &rest[..end];
        if !run.is_empty() {
            if cdata {
                if !open {
                    b.extend_from_slice(b"<![CDATA[");
                    open = true;
                }
                b.extend_from_slice(run.replace("]]>", "]]]]><![CDATA[>").as_bytes());
            } else {
                b.extend_from_slice(run.as_bytes());
            }
        }
        rest = &rest[end..];
        if let Some(c) = rest.chars().next() {
            if open {
                b.extend_from_slice(b"]]>");
                open = false;
            }
            push_fmt(b, format_args!("<U C=\"{:x}\"/>", u32::from(c)));
            rest = &rest[c.len_utf8()..];
        }
    }
    if open {
        b.extend_from_slice(b"]]>");
    }
}

/// Appends `s` as an attribute value (between double quotes).
fn push_attr(b: &mut Vec<u8>, s: &str) {
    for c in s.chars() {
        match c {
            '<' => b.extend_from_slice(b"&lt;"),
            '&' => b.extend_from_slice(b"&amp;"),
            '"' => b.extend_from_slice(b"&quot;"),
            '\t' => b.extend_from_slice(b"&#9;"),
            '\n' => b.extend_from_slice(b"&#10;"),
            '\r' => b.extend_from_slice(b"&#13;"),
            c if xml_char_ok(c) => {
                let mut tmp = [0u8; 4];
                b.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
            }
            _ => b.extend_from_slice("\u{FFFD}".as_bytes()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> String {
        let mut b = Vec::new();
        push_text(&mut b, s);
        String::from_utf8(b).unwrap()
    }

    #[test]
    fn text_uses_cdata_only_where_needed() {
        assert_eq!(text("peek"), "peek");
        assert_eq!(text("<init>"), "<![CDATA[<init>]]>");
        assert_eq!(text("a > b"), "a > b");
        assert_eq!(text("x]]>y"), "<![CDATA[x]]]]><![CDATA[>y]]>");
        assert_eq!(text("a]b"), "a]b");
        assert_eq!(text("😀 ü"), "😀 ü");
    }

    #[test]
    fn text_encodes_characters_xml_forbids() {
        assert_eq!(text("a\u{1}b"), "a<U C=\"1\"/>b");
        assert_eq!(text("a\rb"), "a<U C=\"d\"/>b");
        assert_eq!(text("<\u{0}>"), "<![CDATA[<]]><U C=\"0\"/><![CDATA[>]]>");
        assert_eq!(text("\u{FFFF}\u{FFFD}"), "<U C=\"ffff\"/>\u{FFFD}");
    }

    #[test]
    fn docs_hold_the_embedded_dtd() {
        assert_eq!(DTD, include_str!("../../../docs/vmview.dtd"));
    }

    #[test]
    fn class_names_convert_both_ways() {
        for (dotted, jvm) in [
            ("shop.Inventory$Clerk", "Lshop/Inventory$Clerk;"),
            ("int[]", "[I"),
            ("java.lang.String[][]", "[[Ljava/lang/String;"),
            ("int", "I"),
            ("?", "L?;"),
            ("I", "LI;"),
            (
                "fx.Main$$Lambda/0x00007f4b20000a08",
                "Lfx/Main$$Lambda.0x00007f4b20000a08;",
            ),
        ] {
            assert_eq!(class_to_jvm(dotted), jvm);
            assert_eq!(class_from_jvm(jvm), dotted);
        }
        assert_eq!(class_from_jvm("shop.Item"), "shop.Item");
    }
}
