//! The XML trace reader: turns a document in the shape of [`crate::xml`]'s
//! DTD back into events, streaming.
//!
//! VMView filtered its XML traces with SAX rather than a DOM because traces
//! are large; so does this reader: it pulls one element at a time from
//! `quick-xml` and keeps only the event being read, so memory depends on
//! the number of distinct names (classes, methods, threads) and not on the
//! length of the trace. It accepts what vmview writes and what a person or
//! another tool writes by hand in the same shape: children in any order,
//! optional fields left out (`?` or 0 in their place), class names in the
//! JVM form or dotted, entity and character references, comments.
//!
//! Names are interned as they are met, so the events refer to symbols by
//! handle exactly like events read from a binary trace, and any consumer of
//! events (filters, exporters, the binary writer) works on both. Thread
//! handles are the document's `TID`s when it has them, so a binary → XML →
//! binary round trip keeps them.
//!
//! A document that is not well-formed, or not in this shape, stops the
//! reader with an [`XmlError`] that carries the byte offset
//! ([`line_column`] turns it into a line and column).

use std::collections::HashMap;
use std::fmt;
use std::io::{self, BufRead, Read};

use quick_xml::events::{BytesStart, Event as XmlEvent};
use vmview_format::{
    Event, EventKind, FrameType, Loc, MethodId, MethodSymbol, Metrics, Monitor, Outcome, StackId,
    StackSymbol, StringId, Symbol, SymbolTable, ThreadRef, ThreadState, ThreadSymbol, TraceHeader,
    Value, WindowReason, MAX_THREAD_REF,
};

use crate::xml::class_from_jvm;

/// How deeply elements may nest inside an event that is skipped without
/// being decoded (a type mask). The DTD nests at most `HELD` > `MON` (and
/// `<U/>` in text); the limit leaves room for hand-written extras while
/// still refusing nesting that no trace has. Events that are decoded
/// allow exactly the DTD's shape, so they need no counter: the reader has
/// no recursion, and its depth is fixed by the code.
pub const MAX_SKIP_DEPTH: usize = 16;

/// Why an XML trace could not be read further.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XmlError {
    /// Byte offset in the document near which the problem is.
    pub offset: u64,
    /// A complete sentence.
    pub message: String,
}

impl fmt::Display for XmlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at byte {})", self.message, self.offset)
    }
}

impl std::error::Error for XmlError {}

/// The 1-based line and column (in characters) of byte `offset` of `input`.
pub fn line_column(input: impl Read, offset: u64) -> io::Result<(u64, u64)> {
    let mut line = 1;
    let mut line_start = Vec::new();
    let mut r = io::BufReader::new(input.take(offset));
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = r.read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        if buf.last() == Some(&b'\n') {
            line += 1;
            line_start.clear();
        } else {
            line_start.extend_from_slice(&buf);
        }
    }
    let col = String::from_utf8_lossy(&line_start).chars().count() as u64 + 1;
    Ok((line, col))
}

/// The children of an event element the reader knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Child {
    Thrd,
    Class,
    Mtd,
    Sig,
    Loc,
    Class2,
    Mtd2,
    Sig2,
    Loc2,
    Depth,
    Elapsed,
    Exc,
    Msg,
    Loader,
    Src,
    Mon,
    Owner,
    Wait,
    Timeout,
    TimedOut,
    Duration,
    Count,
    Value,
    Param,
    Cpu,
    Alloc,
    MinDepth,
    MaxDepth,
    Reason,
    Rate,
    Period,
    Record,
    Cost,
    Insn,
    State,
    Frame,
    Held,
    Size,
}

const CHILDREN: usize = 38;

impl Child {
    fn name(self) -> &'static str {
        [
            "THRD", "CLASS", "MTD", "SIG", "LOC", "CLASS2", "MTD2", "SIG2", "LOC2", "DEPTH",
            "ELAPSED", "EXC", "MSG", "LOADER", "SRC", "MON", "OWNER", "WAIT", "TIMEOUT",
            "TIMEDOUT", "DURATION", "COUNT", "VALUE", "PARAM", "CPU", "ALLOC", "MINDEPTH",
            "MAXDEPTH", "REASON", "RATE", "PERIOD", "RECORD", "COST", "INSN", "STATE", "FRAME",
            "HELD", "SIZE",
        ][self as usize]
    }

    fn from_name(n: &[u8]) -> Option<Child> {
        Some(match n {
            b"THRD" => Child::Thrd,
            b"CLASS" => Child::Class,
            b"MTD" => Child::Mtd,
            b"SIG" => Child::Sig,
            b"LOC" => Child::Loc,
            b"CLASS2" => Child::Class2,
            b"MTD2" => Child::Mtd2,
            b"SIG2" => Child::Sig2,
            b"LOC2" => Child::Loc2,
            b"DEPTH" => Child::Depth,
            b"ELAPSED" => Child::Elapsed,
            b"EXC" => Child::Exc,
            b"MSG" => Child::Msg,
            b"LOADER" => Child::Loader,
            b"SRC" => Child::Src,
            b"MON" => Child::Mon,
            b"OWNER" => Child::Owner,
            b"WAIT" => Child::Wait,
            b"TIMEOUT" => Child::Timeout,
            b"TIMEDOUT" => Child::TimedOut,
            b"DURATION" => Child::Duration,
            b"COUNT" => Child::Count,
            b"SIZE" => Child::Size,
            b"VALUE" => Child::Value,
            b"PARAM" => Child::Param,
            b"CPU" => Child::Cpu,
            b"ALLOC" => Child::Alloc,
            b"MINDEPTH" => Child::MinDepth,
            b"MAXDEPTH" => Child::MaxDepth,
            b"REASON" => Child::Reason,
            b"RATE" => Child::Rate,
            b"PERIOD" => Child::Period,
            b"RECORD" => Child::Record,
            b"COST" => Child::Cost,
            b"INSN" => Child::Insn,
            b"STATE" => Child::State,
            b"FRAME" => Child::Frame,
            b"HELD" => Child::Held,
            _ => return None,
        })
    }
}

/// The event element names, in `EVENT_TYPE_NAMES` order.
fn event_type(n: &[u8]) -> Option<u8> {
    vmview_format::EVENT_TYPE_NAMES
        .iter()
        .position(|t| t.as_bytes() == n)
        .map(|i| i as u8)
}

/// The text of one child plus the attributes that matter for it.
#[derive(Default)]
struct Slot {
    text: String,
    /// A lone surrogate (from `<U C="d800"/>`), for `char` values.
    surrogate: Option<u16>,
    /// `TID` of THRD/OWNER, `LINE` of LOC/LOC2.
    num: Option<u64>,
    attrs: ValueAttrs,
}

/// Attributes of PARAM and VALUE, in buffers reused from event to event.
#[derive(Default, Clone)]
struct ValueAttrs {
    values: [String; 7],
    /// Bit `A_…`: the attribute was present.
    present: u8,
}

const A_NAME: usize = 0;
const A_KIND: usize = 1;
const A_BOX: usize = 2;
const A_CLASS: usize = 3;
const A_LEN: usize = 4;
const A_HASH: usize = 5;
const A_FULL: usize = 6;

impl ValueAttrs {
    fn get(&self, i: usize) -> Option<&str> {
        (self.present & (1 << i) != 0).then(|| self.values[i].as_str())
    }
}

/// A stack's frames and their types (empty: none known).
type StackKey = (Vec<(MethodId, Loc)>, Vec<FrameType>);

/// A `FRAME` of a SAMPLE or PERIOD_START, as written.
#[derive(Default)]
struct FrameAttrs {
    class: String,
    method: String,
    /// `SIG` (written since SAMPLE frames carry it; `?` when absent).
    sig: Option<String>,
    bci: i32,
    line: Option<u32>,
    /// `TYPE`: how the frame ran (absent: unknown).
    ty: FrameType,
}

/// An element directly inside `TRACE`, with the attributes that matter.
#[derive(Debug, Clone)]
enum Top {
    Prop {
        name: String,
    },
    Thread {
        tid: Option<u64>,
        java_id: i64,
        group: String,
        priority: i32,
        daemon: bool,
    },
    Event {
        ty: u8,
        id: u64,
        time_ns: u64,
    },
}

/// An element start: what it is and whether it is empty (`<X/>`).
#[derive(Debug, Clone)]
struct Elem {
    top: Top,
    empty: bool,
}

/// Reads events from an XML trace; see the module docs.
pub struct XmlTraceReader<R: BufRead> {
    xml: quick_xml::Reader<R>,
    buf: Vec<u8>,
    header: TraceHeader,
    symbols: SymbolTable,
    strings: FxMap<String, StringId>,
    /// Class names as written (JVM form or dotted) → interned dotted name.
    classes: FxMap<String, StringId>,
    /// `class \0 name \0 sig` as written → method.
    methods: FxMap<String, MethodId>,
    /// Threads named by text only (no `TID`).
    threads_by_name: FxMap<String, ThreadRef>,
    /// Event types to return (bit = index in `EVENT_TYPE_NAMES`); the others
    /// are skipped without being decoded.
    type_mask: u32,
    /// `thread_defined[t]`: a symbol exists for handle `t`.
    thread_defined: Vec<bool>,
    next_auto_thread: u32,
    redefined: Vec<MethodId>,
    /// An element read ahead while looking for the header's properties.
    pending: Option<Elem>,
    done: bool,
    slots: Vec<Slot>,
    /// Bit `Child as u32`: that child was present in the current event.
    present: u64,
    /// PARAM slots, reused; the current event's are `params[..nparams]`.
    params: Vec<Slot>,
    nparams: usize,
    /// FRAME children of the current event: `frames[..nframes]`, reused.
    frames: Vec<FrameAttrs>,
    nframes: usize,
    /// HELD children of the current event: (depth, MON text).
    held: Vec<(u32, String)>,
    /// Interned stacks, so a stack read again gets its handle.
    stacks: HashMap<StackKey, StackId>,
    key: String,
}

impl<R: BufRead> XmlTraceReader<R> {
    /// Reads the prolog, the `TRACE` start tag and the `PROP` elements that
    /// follow it. Fails when the document is not an XML trace.
    pub fn new(input: R) -> Result<Self, XmlError> {
        let mut xml = quick_xml::Reader::from_reader(input);
        xml.config_mut().trim_text(false);
        let mut r = XmlTraceReader {
            xml,
            buf: Vec::with_capacity(1024),
            header: TraceHeader {
                version: 1,
                ..TraceHeader::default()
            },
            symbols: SymbolTable::default(),
            strings: FxMap::default(),
            classes: FxMap::default(),
            methods: FxMap::default(),
            threads_by_name: FxMap::default(),
            type_mask: u32::MAX,
            thread_defined: Vec::new(),
            next_auto_thread: 0,
            redefined: Vec::new(),
            pending: None,
            done: false,
            slots: (0..CHILDREN).map(|_| Slot::default()).collect(),
            present: 0,
            params: Vec::new(),
            nparams: 0,
            frames: Vec::new(),
            nframes: 0,
            held: Vec::new(),
            stacks: HashMap::new(),
            key: String::new(),
        };
        r.read_prolog()?;
        Ok(r)
    }

    pub fn header(&self) -> &TraceHeader {
        &self.header
    }

    /// Symbols of every event returned so far.
    pub fn symbols(&self) -> &SymbolTable {
        &self.symbols
    }

    /// Bytes of the document consumed so far (for progress).
    pub fn position(&self) -> u64 {
        self.xml.buffer_position()
    }

    /// Return only events whose type bit (index in `EVENT_TYPE_NAMES`) is
    /// set; others are skipped over without decoding their fields, which
    /// is how a filter on event types reads XML fast.
    pub fn set_type_mask(&mut self, mask: u32) {
        self.type_mask = mask;
    }

    /// Methods whose symbol changed since the last call (a CALL named the
    /// parameters of a method first met without them). A consumer that
    /// copied the symbol (the binary writer) should copy it again.
    pub fn take_redefined(&mut self) -> Vec<MethodId> {
        std::mem::take(&mut self.redefined)
    }

    fn pos(&self) -> u64 {
        self.xml.buffer_position()
    }

    fn xml_err(&self, e: quick_xml::Error) -> XmlError {
        let at = match e {
            quick_xml::Error::Io(_) => self.pos(),
            _ => self.xml.error_position(),
        };
        err(at, format!("malformed XML: {e}"))
    }

    fn read_prolog(&mut self) -> Result<(), XmlError> {
        loop {
            self.buf.clear();
            let ev = match self.xml.read_event_into(&mut self.buf) {
                Ok(ev) => ev,
                Err(e) => return Err(self.xml_err(e)),
            };
            let at = self.xml.buffer_position();
            match ev {
                XmlEvent::Decl(_)
                | XmlEvent::DocType(_)
                | XmlEvent::Comment(_)
                | XmlEvent::PI(_) => {}
                XmlEvent::Text(t) if t.iter().all(u8::is_ascii_whitespace) => {}
                XmlEvent::Start(ref s) | XmlEvent::Empty(ref s)
                    if s.name().as_ref() == b"TRACE" =>
                {
                    let empty = matches!(ev, XmlEvent::Empty(_));
                    trace_attrs(s, at, &mut self.header)?;
                    if empty {
                        self.done = true;
                        return Ok(());
                    }
                    break;
                }
                XmlEvent::Start(s) | XmlEvent::Empty(s) => {
                    let name = name_of(s.name().as_ref());
                    return Err(err(
                        at,
                        format!("not a vmview XML trace: the root element is <{name}>, expected <TRACE>"),
                    ));
                }
                XmlEvent::Eof => return Err(err(at, "not a vmview XML trace: no <TRACE> element")),
                _ => {
                    return Err(err(
                        at,
                        "not a vmview XML trace: content before the <TRACE> element",
                    ))
                }
            }
        }
        // Properties come first; the first other element is kept for later.
        loop {
            let Some(elem) = self.next_element()? else {
                return Ok(());
            };
            match elem.top {
                Top::Prop { name } => {
                    let mut slot = Slot::default();
                    if !elem.empty {
                        self.read_text(&mut slot, "PROP")?;
                    }
                    self.header.properties.push((name, slot.text));
                }
                _ => {
                    self.pending = Some(elem);
                    return Ok(());
                }
            }
        }
    }

    /// The next element inside `TRACE`, or `None` after `</TRACE>`.
    /// Whitespace, comments and processing instructions are skipped.
    fn next_element(&mut self) -> Result<Option<Elem>, XmlError> {
        if let Some(p) = self.pending.take() {
            return Ok(Some(p));
        }
        if self.done {
            return Ok(None);
        }
        loop {
            self.buf.clear();
            let ev = match self.xml.read_event_into(&mut self.buf) {
                Ok(ev) => ev,
                Err(e) => return Err(self.xml_err(e)),
            };
            let at = self.xml.buffer_position();
            match ev {
                XmlEvent::Start(s) => return top_elem(&s, false, at).map(Some),
                XmlEvent::Empty(s) => return top_elem(&s, true, at).map(Some),
                XmlEvent::End(_) => {
                    self.done = true;
                    return Ok(None);
                }
                XmlEvent::Text(t) if t.iter().all(u8::is_ascii_whitespace) => {}
                XmlEvent::Comment(_) | XmlEvent::PI(_) => {}
                XmlEvent::Eof => {
                    return Err(err(at, "the document ends before </TRACE> (truncated?)"))
                }
                _ => {
                    return Err(err(
                        at,
                        "unexpected text between events (events are elements inside <TRACE>)",
                    ))
                }
            }
        }
    }

    /// Reads character data up to the end tag of the element just started
    /// (`what` names it in errors) into `slot.text`.
    fn read_text(&mut self, slot: &mut Slot, what: &str) -> Result<(), XmlError> {
        slot.text.clear();
        slot.surrogate = None;
        loop {
            self.buf.clear();
            let ev = match self.xml.read_event_into(&mut self.buf) {
                Ok(ev) => ev,
                Err(e) => return Err(self.xml_err(e)),
            };
            let at = self.xml.buffer_position();
            match ev {
                XmlEvent::Text(t) => match t.xml10_content() {
                    Ok(s) => slot.text.push_str(&s),
                    Err(e) => return Err(err(at, format!("bad text in <{what}>: {e}"))),
                },
                XmlEvent::CData(t) => match t.xml10_content() {
                    Ok(s) => slot.text.push_str(&s),
                    Err(e) => return Err(err(at, format!("bad CDATA in <{what}>: {e}"))),
                },
                XmlEvent::GeneralRef(r) => {
                    let c = match r.resolve_char_ref() {
                        Ok(Some(c)) => c,
                        Ok(None) => match r.as_ref() {
                            b"lt" => '<',
                            b"gt" => '>',
                            b"amp" => '&',
                            b"apos" => '\'',
                            b"quot" => '"',
                            other => {
                                return Err(err(at, format!("unknown entity &{};", name_of(other))))
                            }
                        },
                        Err(e) => return Err(err(at, format!("bad character reference: {e}"))),
                    };
                    slot.text.push(c);
                }
                XmlEvent::Empty(s) if s.name().as_ref() == b"U" => {
                    let code = attr(&s, b"C", at)?
                        .and_then(|c| u32::from_str_radix(c.trim(), 16).ok())
                        .ok_or_else(|| err(at, "<U> needs a hex character code: <U C=\"1b\"/>"))?;
                    match char::from_u32(code) {
                        Some(c) => slot.text.push(c),
                        None if (0xD800..0xE000).contains(&code) => {
                            slot.surrogate = Some(code as u16)
                        }
                        None => {
                            return Err(err(at, format!("<U C=\"{code:x}\"/> is not a character")))
                        }
                    }
                }
                XmlEvent::End(_) => return Ok(()),
                XmlEvent::Comment(_) | XmlEvent::PI(_) => {}
                XmlEvent::Start(s) | XmlEvent::Empty(s) => {
                    let name = name_of(s.name().as_ref());
                    return Err(err(
                        at,
                        format!("unexpected element <{name}> inside <{what}>"),
                    ));
                }
                XmlEvent::Eof => {
                    return Err(err(
                        at,
                        format!("the document ends inside <{what}> (truncated?)"),
                    ))
                }
                XmlEvent::Decl(_) | XmlEvent::DocType(_) => {
                    return Err(err(at, format!("unexpected declaration inside <{what}>")))
                }
            }
        }
    }

    /// The next event, `Ok(None)` at the end of the trace.
    pub fn next_event(&mut self) -> Result<Option<Event>, XmlError> {
        loop {
            let Some(elem) = self.next_element()? else {
                return Ok(None);
            };
            match elem.top {
                Top::Prop { .. } => {
                    let mut slot = Slot::default();
                    if !elem.empty {
                        self.read_text(&mut slot, "PROP")?;
                    }
                }
                Top::Thread {
                    tid,
                    java_id,
                    group,
                    priority,
                    daemon,
                } => {
                    let mut slot = Slot::default();
                    if !elem.empty {
                        self.read_text(&mut slot, "THREAD")?;
                    }
                    let at = self.pos();
                    let t = match tid {
                        Some(t) => self.checked_tid(t, at)?,
                        None => self.thread_by_name(&slot.text),
                    };
                    let sym = ThreadSymbol {
                        id: t,
                        java_id,
                        name: self.intern(&slot.text),
                        group: self.intern(&group),
                        priority,
                        daemon,
                    };
                    self.define_thread(sym);
                }
                Top::Event { ty, id, time_ns } => {
                    if self.type_mask & (1 << ty) == 0 {
                        if !elem.empty {
                            self.skip_element(ty)?;
                        }
                        continue;
                    }
                    self.read_children(ty, elem.empty)?;
                    let at = self.pos();
                    let kind = self.build_kind(ty, at)?;
                    let thread = self.child_thread(Child::Thrd, at)?;
                    return Ok(Some(Event {
                        id,
                        time_ns,
                        thread,
                        kind,
                    }));
                }
            }
        }
    }

    /// Skips to the end of the event element just started, refusing
    /// elements nested deeper than [`MAX_SKIP_DEPTH`] inside it (the
    /// skipped content is not checked against the DTD, and a document of
    /// a million nested elements would otherwise pass as one event).
    fn skip_element(&mut self, ty: u8) -> Result<(), XmlError> {
        let name = vmview_format::EVENT_TYPE_NAMES[ty as usize];
        let mut depth = 0usize;
        loop {
            self.buf.clear();
            let ev = match self.xml.read_event_into(&mut self.buf) {
                Ok(ev) => ev,
                Err(e) => return Err(self.xml_err(e)),
            };
            let at = self.xml.buffer_position();
            match ev {
                XmlEvent::Start(_) => {
                    depth += 1;
                    if depth > MAX_SKIP_DEPTH {
                        return Err(err(
                            at,
                            format!(
                                "elements nested too deep inside <{name}> (limit {MAX_SKIP_DEPTH}; \
                                 an event's fields are at most 2 levels deep)"
                            ),
                        ));
                    }
                }
                XmlEvent::End(_) if depth == 0 => return Ok(()),
                XmlEvent::End(_) => depth -= 1,
                XmlEvent::Eof => {
                    return Err(err(
                        at,
                        format!("the document ends inside <{name}> (truncated?)"),
                    ))
                }
                _ => {}
            }
        }
    }

    fn read_children(&mut self, ty: u8, empty: bool) -> Result<(), XmlError> {
        self.present = 0;
        self.nparams = 0;
        self.nframes = 0;
        self.held.clear();
        if empty {
            return Ok(());
        }
        let what = vmview_format::EVENT_TYPE_NAMES[ty as usize];
        loop {
            self.buf.clear();
            let ev = match self.xml.read_event_into(&mut self.buf) {
                Ok(ev) => ev,
                Err(e) => return Err(self.xml_err(e)),
            };
            let at = self.xml.buffer_position();
            let (s, empty) = match ev {
                XmlEvent::Start(s) => (s, false),
                XmlEvent::Empty(s) => (s, true),
                XmlEvent::End(_) => return Ok(()),
                XmlEvent::Text(t) if t.iter().all(u8::is_ascii_whitespace) => continue,
                XmlEvent::Comment(_) | XmlEvent::PI(_) => continue,
                XmlEvent::Eof => {
                    return Err(err(
                        at,
                        format!("the document ends inside <{what}> (truncated?)"),
                    ))
                }
                _ => {
                    return Err(err(
                        at,
                        format!("unexpected text in <{what}> (its fields are child elements)"),
                    ))
                }
            };
            let Some(child) = Child::from_name(s.name().as_ref()) else {
                let name = name_of(s.name().as_ref());
                return Err(err(at, format!("unknown element <{name}> in <{what}>")));
            };
            if child == Child::Frame {
                let frame = frame_attrs(&s, at)?;
                self.read_frame(frame, empty)?;
                continue;
            }
            if child == Child::Held {
                let depth = attr_num(&s, b"DEPTH", at)?.unwrap_or(0);
                let depth = u32::try_from(depth)
                    .map_err(|_| err(at, format!("HELD DEPTH {depth} is too large")))?;
                let monitor = if empty {
                    String::new()
                } else {
                    self.read_held()?
                };
                self.held.push((depth, monitor));
                continue;
            }
            let mut slot = if child == Child::Param {
                if self.nparams == self.params.len() {
                    self.params.push(Slot::default());
                }
                std::mem::take(&mut self.params[self.nparams])
            } else {
                std::mem::take(&mut self.slots[child as usize])
            };
            slot.num = None;
            match child {
                Child::Thrd | Child::Owner => {
                    slot.num = attr_num(&s, b"TID", at)?;
                }
                Child::Loc | Child::Loc2 => {
                    slot.num = attr_num(&s, b"LINE", at)?;
                }
                Child::Value | Child::Param => value_attrs(&s, at, &mut slot.attrs)?,
                _ => {}
            }
            if empty {
                slot.text.clear();
                slot.surrogate = None;
            } else {
                self.read_text(&mut slot, child.name())?;
            }
            if child == Child::Param {
                self.params[self.nparams] = slot;
                self.nparams += 1;
            } else {
                self.slots[child as usize] = slot;
                self.present |= 1u64 << child as u32;
            }
        }
    }

    /// Keeps a `FRAME` (and reads to its end tag: it has no content).
    fn read_frame(&mut self, frame: FrameAttrs, empty: bool) -> Result<(), XmlError> {
        if !empty {
            let mut slot = Slot::default();
            self.read_text(&mut slot, "FRAME")?;
        }
        if self.nframes == self.frames.len() {
            self.frames.push(FrameAttrs::default());
        }
        self.frames[self.nframes] = frame;
        self.nframes += 1;
        Ok(())
    }

    /// The `MON` inside a `HELD`, up to `</HELD>`.
    fn read_held(&mut self) -> Result<String, XmlError> {
        let mut monitor = String::new();
        loop {
            self.buf.clear();
            let ev = match self.xml.read_event_into(&mut self.buf) {
                Ok(ev) => ev,
                Err(e) => return Err(self.xml_err(e)),
            };
            let at = self.xml.buffer_position();
            match ev {
                XmlEvent::Start(s) if s.name().as_ref() == b"MON" => {
                    let mut slot = Slot::default();
                    self.read_text(&mut slot, "MON")?;
                    monitor = slot.text;
                }
                XmlEvent::End(_) => return Ok(monitor),
                XmlEvent::Text(t) if t.iter().all(u8::is_ascii_whitespace) => {}
                XmlEvent::Comment(_) | XmlEvent::PI(_) => {}
                XmlEvent::Eof => {
                    return Err(err(at, "the document ends inside <HELD> (truncated?)"))
                }
                _ => return Err(err(at, "<HELD> holds one <MON> and nothing else")),
            }
        }
    }

    /// The method `class.name sig` as written (interned on first sight).
    fn method_named(&mut self, class: &str, name: &str, sig: &str) -> MethodId {
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        key.push_str(class);
        key.push('\0');
        key.push_str(name);
        key.push('\0');
        key.push_str(sig);
        let id = match self.methods.get(&key) {
            Some(&id) => id,
            None => {
                let id = MethodId(self.methods.len() as u32);
                let sym = MethodSymbol {
                    id,
                    class: self.intern_class(class),
                    name: self.intern(name),
                    sig: self.intern(sig),
                    param_names: Vec::new(),
                    modifiers: 0,
                };
                self.symbols.insert(Symbol::Method(sym));
                self.methods.insert(key.clone(), id);
                id
            }
        };
        self.key = key;
        id
    }

    /// The stack of the current event's FRAMEs, interned.
    fn stack(&mut self) -> StackId {
        let frames_attrs = std::mem::take(&mut self.frames);
        let frames: Vec<(MethodId, Loc)> = frames_attrs[..self.nframes]
            .iter()
            .map(|f| {
                let m = self.method_named(&f.class, &f.method, f.sig.as_deref().unwrap_or("?"));
                (
                    m,
                    Loc {
                        bci: f.bci,
                        line: f.line,
                    },
                )
            })
            .collect();
        let mut types: Vec<FrameType> = frames_attrs[..self.nframes].iter().map(|f| f.ty).collect();
        if types.iter().all(|t| *t == FrameType::Unknown) {
            types.clear();
        }
        self.frames = frames_attrs;
        let key = (frames, types);
        if let Some(&id) = self.stacks.get(&key) {
            return id;
        }
        let id = StackId(self.stacks.len() as u32);
        self.symbols.insert(Symbol::Stack(StackSymbol {
            id,
            frames: key.0.clone(),
            types: key.1.clone(),
        }));
        self.stacks.insert(key, id);
        id
    }

    fn has(&self, c: Child) -> bool {
        self.present & (1u64 << c as u32) != 0
    }

    fn text(&self, c: Child) -> Option<&str> {
        self.has(c).then(|| self.slots[c as usize].text.as_str())
    }

    fn intern(&mut self, s: &str) -> StringId {
        if let Some(&id) = self.strings.get(s) {
            return id;
        }
        let id = StringId(self.strings.len() as u32);
        self.strings.insert(s.to_string(), id);
        self.symbols.insert(Symbol::String {
            id,
            text: s.to_string(),
        });
        id
    }

    fn intern_class(&mut self, written: &str) -> StringId {
        if let Some(&id) = self.classes.get(written) {
            return id;
        }
        let id = self.intern(&class_from_jvm(written));
        self.classes.insert(written.to_string(), id);
        id
    }

    /// The names of the current CALL's parameters (`argN` where absent).
    fn param_names(&self) -> Vec<String> {
        self.params[..self.nparams]
            .iter()
            .enumerate()
            .map(|(i, p)| {
                p.attrs
                    .get(A_NAME)
                    .map_or_else(|| format!("arg{i}"), str::to_string)
            })
            .collect()
    }

    /// The method named by CLASS, MTD, SIG (or their `2` forms); with
    /// `call`, the current CALL's PARAM names complete its symbol.
    fn method(&mut self, second: bool, call: bool) -> MethodId {
        let (c, m, s) = if second {
            (Child::Class2, Child::Mtd2, Child::Sig2)
        } else {
            (Child::Class, Child::Mtd, Child::Sig)
        };
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        key.push_str(self.text(c).unwrap_or("?"));
        key.push('\0');
        key.push_str(self.text(m).unwrap_or("?"));
        key.push('\0');
        key.push_str(self.text(s).unwrap_or("?"));
        let id = match self.methods.get(&key) {
            Some(&id) => {
                let current = self.symbols.method(id).map_or(0, |m| m.param_names.len());
                if call && current < self.nparams {
                    let names = self.param_names();
                    if let Some(mut sym) = self.symbols.method(id).cloned() {
                        sym.param_names = names.iter().map(|n| self.intern(n)).collect();
                        self.symbols.insert(Symbol::Method(sym));
                        self.redefined.push(id);
                    }
                }
                id
            }
            None => {
                let id = MethodId(self.methods.len() as u32);
                let class = self.text(c).unwrap_or("?").to_string();
                let name = self.text(m).unwrap_or("?").to_string();
                let sig = self.text(s).unwrap_or("?").to_string();
                let names = if call { self.param_names() } else { Vec::new() };
                let sym = MethodSymbol {
                    id,
                    class: self.intern_class(&class),
                    name: self.intern(&name),
                    sig: self.intern(&sig),
                    param_names: names.iter().map(|n| self.intern(n)).collect(),
                    modifiers: 0,
                };
                self.symbols.insert(Symbol::Method(sym));
                self.methods.insert(key.clone(), id);
                id
            }
        };
        self.key = key;
        id
    }

    fn loc(&self, c: Child, at: u64) -> Result<Loc, XmlError> {
        if !self.has(c) {
            return Ok(Loc {
                bci: -1,
                line: None,
            });
        }
        let slot = &self.slots[c as usize];
        let bci = parse_num::<i32>(&slot.text, "LOC", at)?;
        let line = slot
            .num
            .map(|l| u32::try_from(l).map_err(|_| err(at, format!("LINE {l} is too large"))))
            .transpose()?;
        Ok(Loc { bci, line })
    }

    fn num<T: std::str::FromStr + Default>(
        &self,
        c: Child,
        what: &str,
        at: u64,
    ) -> Result<T, XmlError> {
        match self.text(c) {
            Some(t) => parse_num(t, what, at),
            None => Ok(T::default()),
        }
    }

    fn checked_tid(&self, t: u64, at: u64) -> Result<ThreadRef, XmlError> {
        match u32::try_from(t) {
            Ok(t) if t < MAX_THREAD_REF => Ok(ThreadRef(t)),
            _ => Err(err(
                at,
                format!("TID {t} is too large (thread handles are below {MAX_THREAD_REF})"),
            )),
        }
    }

    fn thread_by_name(&mut self, name: &str) -> ThreadRef {
        if let Some(&t) = self.threads_by_name.get(name) {
            return t;
        }
        while self
            .thread_defined
            .get(self.next_auto_thread as usize)
            .copied()
            .unwrap_or(false)
        {
            self.next_auto_thread += 1;
        }
        let t = ThreadRef(self.next_auto_thread);
        self.next_auto_thread += 1;
        self.threads_by_name.insert(name.to_string(), t);
        t
    }

    fn define_thread(&mut self, sym: ThreadSymbol) {
        let i = sym.id.0 as usize;
        if i >= self.thread_defined.len() {
            self.thread_defined.resize(i + 1, false);
        }
        self.thread_defined[i] = true;
        self.symbols.insert(Symbol::Thread(sym));
    }

    /// The thread a THRD or OWNER child names (declaring it from its text
    /// when no THREAD element did).
    fn child_thread(&mut self, c: Child, at: u64) -> Result<ThreadRef, XmlError> {
        let tid = self.slots[c as usize].num.filter(|_| self.has(c));
        if let Some(t) = tid {
            let t = self.checked_tid(t, at)?;
            if self
                .thread_defined
                .get(t.0 as usize)
                .copied()
                .unwrap_or(false)
            {
                return Ok(t);
            }
        }
        let name = self.text(c).unwrap_or("?").to_string();
        let t = match tid {
            Some(t) => self.checked_tid(t, at)?,
            None => self.thread_by_name(&name),
        };
        if !self
            .thread_defined
            .get(t.0 as usize)
            .copied()
            .unwrap_or(false)
        {
            let sym = ThreadSymbol {
                id: t,
                java_id: -1,
                name: self.intern(&name),
                group: self.intern(""),
                priority: 0,
                daemon: false,
            };
            self.define_thread(sym);
        }
        Ok(t)
    }

    fn monitor(&mut self, at: u64) -> Result<Monitor, XmlError> {
        let text = self.text(Child::Mon).unwrap_or("?@0").to_string();
        self.monitor_named(text, at)
    }

    fn monitor_named(&mut self, text: String, at: u64) -> Result<Monitor, XmlError> {
        let Some((class, hash)) = text.rsplit_once('@') else {
            return Err(err(at, format!("<MON>{text}</MON> is not class@hash")));
        };
        let hash = u32::from_str_radix(hash, 16).map_err(|_| {
            err(
                at,
                format!("<MON>{text}</MON>: the hash is not hexadecimal"),
            )
        })?;
        Ok(Monitor {
            class: self.intern_class(class),
            hash,
        })
    }

    fn build_kind(&mut self, ty: u8, at: u64) -> Result<EventKind, XmlError> {
        use Child as C;
        Ok(match ty {
            0 => EventKind::ThreadStart,
            1 => EventKind::ThreadEnd,
            2 => {
                let class = self.text(C::Class).unwrap_or("?").to_string();
                let loader = self.text(C::Loader).unwrap_or("").to_string();
                let source = self.text(C::Src).unwrap_or("").to_string();
                EventKind::ClassLoad {
                    class: self.intern_class(&class),
                    loader: self.intern(&loader),
                    source: self.intern(&source),
                }
            }
            3 => {
                let method = self.method(false, true);
                let caller = if self.has(C::Class2) || self.has(C::Mtd2) {
                    let m = self.method(true, false);
                    Some((m, self.loc(C::Loc2, at)?))
                } else {
                    None
                };
                let params = std::mem::take(&mut self.params);
                let values = params[..self.nparams]
                    .iter()
                    .map(|p| self.value(p, at))
                    .collect::<Result<Vec<_>, _>>();
                self.params = params;
                EventKind::Call {
                    method,
                    depth: self.num(C::Depth, "DEPTH", at)?,
                    caller,
                    params: values?,
                    metrics: self.metrics(at)?,
                }
            }
            4 => {
                let method = self.method(false, false);
                let outcome = if self.has(C::Value) {
                    let slot = std::mem::take(&mut self.slots[C::Value as usize]);
                    let v = self.value(&slot, at);
                    self.slots[C::Value as usize] = slot;
                    Outcome::Value(v?)
                } else if let Some(exc) = self.text(C::Exc).map(str::to_string) {
                    Outcome::Exception {
                        class: self.intern_class(&exc),
                    }
                } else {
                    Outcome::Void
                };
                EventKind::Return {
                    method,
                    depth: self.num(C::Depth, "DEPTH", at)?,
                    outcome,
                    elapsed_ns: self.num(C::Elapsed, "ELAPSED", at)?,
                    metrics: self.metrics(at)?,
                }
            }
            5 => {
                let exc = self.text(C::Exc).unwrap_or("?").to_string();
                let message = self.text(C::Msg).map(str::to_string);
                let method = self.method(false, false);
                let catch = if self.has(C::Class2) || self.has(C::Mtd2) {
                    let m = self.method(true, false);
                    Some((m, self.loc(C::Loc2, at)?))
                } else {
                    None
                };
                EventKind::Throw {
                    exception: self.intern_class(&exc),
                    message,
                    method,
                    loc: self.loc(C::Loc, at)?,
                    catch,
                }
            }
            6 => {
                let exc = self.text(C::Exc).unwrap_or("?").to_string();
                EventKind::Catch {
                    exception: self.intern_class(&exc),
                    method: self.method(false, false),
                    loc: self.loc(C::Loc, at)?,
                }
            }
            7 => {
                let monitor = self.monitor(at)?;
                let owner = if self.has(C::Owner) {
                    Some(self.child_thread(C::Owner, at)?)
                } else {
                    None
                };
                EventKind::MonitorContendedEnter { monitor, owner }
            }
            8 => EventKind::MonitorContendedEntered {
                monitor: self.monitor(at)?,
                wait_ns: self.num(C::Wait, "WAIT", at)?,
            },
            9 => EventKind::MonitorWait {
                monitor: self.monitor(at)?,
                timeout_ms: self.num(C::Timeout, "TIMEOUT", at)?,
            },
            10 => EventKind::MonitorWaited {
                monitor: self.monitor(at)?,
                timed_out: self.num(C::TimedOut, "TIMEDOUT", at)?,
                wait_ns: self.num(C::Wait, "WAIT", at)?,
            },
            11 => EventKind::GcStart,
            12 => EventKind::GcFinish {
                duration_ns: self.num(C::Duration, "DURATION", at)?,
            },
            13 => EventKind::Dropped {
                count: self.num(C::Count, "COUNT", at)?,
            },
            _ => self.build_newer_kind(ty, at)?,
        })
    }

    /// Event types added after the first XML release, by name.
    fn build_newer_kind(&mut self, ty: u8, at: u64) -> Result<EventKind, XmlError> {
        use Child as C;
        let name = vmview_format::EVENT_TYPE_NAMES[ty as usize];
        Ok(match name {
            "TRACE_WINDOW" => {
                let reason = self.text(C::Reason).unwrap_or("start");
                let reason = WindowReason::ALL
                    .into_iter()
                    .find(|r| r.name() == reason)
                    .ok_or_else(|| {
                        err(
                            at,
                            format!("<REASON>{reason}</REASON>: expected start, narrow or widen"),
                        )
                    })?;
                EventKind::TraceWindow {
                    min_depth: self.num(C::MinDepth, "MINDEPTH", at)?,
                    max_depth: match self.has(C::MaxDepth) {
                        true => Some(self.num(C::MaxDepth, "MAXDEPTH", at)?),
                        false => None,
                    },
                    reason,
                    rate_per_s: self.num(C::Rate, "RATE", at)?,
                }
            }
            "SAMPLE" => {
                let written = self.text(C::State).unwrap_or("RUN");
                let state = ThreadState::ALL
                    .into_iter()
                    .find(|s| s.name() == written)
                    .ok_or_else(|| {
                        err(
                            at,
                            format!("<STATE>{written}</STATE>: expected RUN, IO, WAIT, BLOCKED or SLEEP"),
                        )
                    })?;
                let held = std::mem::take(&mut self.held);
                let mut monitors = Vec::with_capacity(held.len());
                for (depth, text) in held {
                    monitors.push((self.monitor_named(text, at)?, depth));
                }
                EventKind::Sample {
                    state,
                    stack: self.stack(),
                    monitors,
                }
            }
            "ALLOC_SAMPLE" => {
                let class = self.text(C::Class).unwrap_or("?").to_string();
                EventKind::AllocSample {
                    class: self.intern_class(&class),
                    size: self.num(C::Size, "SIZE", at)?,
                    stack: self.stack(),
                }
            }
            "VTHREAD_PINNED" => EventKind::VthreadPinned {
                duration_ns: self.num(C::Duration, "DURATION", at)?,
                stack: self.stack(),
            },
            "PERIOD_START" => EventKind::PeriodStart {
                period: self.num(C::Period, "PERIOD", at)?,
                stack: self.stack(),
            },
            "PERIOD_END" => EventKind::PeriodEnd {
                period: self.num(C::Period, "PERIOD", at)?,
            },
            "CALIBRATION" => EventKind::Calibration {
                record: self.text(C::Record).unwrap_or("*").to_string(),
                cost_ps: self.num(C::Cost, "COST", at)?,
            },
            "MONITOR_ENTER" => EventKind::MonitorEnter {
                monitor: self.monitor(at)?,
                depth: self.num(C::Depth, "DEPTH", at)?,
            },
            "MONITOR_EXIT" => EventKind::MonitorExit {
                monitor: self.monitor(at)?,
                depth: self.num(C::Depth, "DEPTH", at)?,
            },
            "FOREIGN" => {
                let name = self.text(C::Record).unwrap_or("?").to_string();
                let name = self.intern(&name);
                let params = std::mem::take(&mut self.params);
                let fields = params[..self.nparams]
                    .iter()
                    .map(|p| {
                        let key = p.attrs.get(A_NAME).unwrap_or("?").to_string();
                        (self.intern(&key), p.text.clone())
                    })
                    .collect();
                self.params = params;
                EventKind::Foreign { name, fields }
            }
            "BYTECODE" => {
                let insn = self.text(C::Insn).unwrap_or("?").to_string();
                EventKind::Bytecode {
                    method: self.method(false, false),
                    bci: self.num(C::Loc, "LOC", at)?,
                    insn: self.intern(&insn),
                }
            }
            _ => {
                return Err(err(
                    at,
                    format!("{name} elements are written but not read back yet; convert the .vmv trace instead"),
                ))
            }
        })
    }

    /// `CPU` and `ALLOC` of a CALL or RETURN.
    fn metrics(&self, at: u64) -> Result<Metrics, XmlError> {
        let get = |c: Child, what: &str| -> Result<Option<u64>, XmlError> {
            self.text(c).map(|t| parse_num(t, what, at)).transpose()
        };
        Ok(Metrics {
            cpu_ns: get(Child::Cpu, "CPU")?,
            alloc_bytes: get(Child::Alloc, "ALLOC")?,
        })
    }

    /// A PARAM or VALUE element's value.
    fn value(&mut self, slot: &Slot, at: u64) -> Result<Value, XmlError> {
        let a = &slot.attrs;
        let text = slot.text.as_str();
        let kind = a.get(A_KIND).unwrap_or("string");
        let v = match kind {
            "null" => Value::Null,
            "unavailable" => Value::Unavailable,
            "boolean" => Value::Boolean(parse_num(text, "a boolean value", at)?),
            "byte" => Value::Byte(parse_num(text, "a byte value", at)?),
            "short" => Value::Short(parse_num(text, "a short value", at)?),
            "int" => Value::Int(parse_num(text, "an int value", at)?),
            "long" => Value::Long(parse_num(text, "a long value", at)?),
            "float" => Value::Float(parse_num(text, "a float value", at)?),
            "double" => Value::Double(parse_num(text, "a double value", at)?),
            "char" => {
                let mut units = text.encode_utf16();
                match (units.next(), units.next(), slot.surrogate) {
                    (Some(u), None, None) => Value::Char(u),
                    (None, None, Some(u)) => Value::Char(u),
                    _ => {
                        return Err(err(
                            at,
                            format!("a char value must be one UTF-16 unit, not {text:?}"),
                        ))
                    }
                }
            }
            "string" => Value::Str {
                text: text.to_string(),
                full_len: a
                    .get(A_FULL)
                    .map(|f| parse_num(f, "FULL", at))
                    .transpose()?,
            },
            "array" => {
                let length = parse_num(a.get(A_LEN).unwrap_or("0"), "LEN", at)?;
                let class = a.get(A_CLASS).unwrap_or("?").to_string();
                Value::Array {
                    class: self.intern_class(&class),
                    length,
                }
            }
            "object" => {
                let class = a.get(A_CLASS).unwrap_or("?").to_string();
                let hash = a.get(A_HASH).unwrap_or("0");
                Value::Object {
                    class: self.intern_class(&class),
                    hash: u32::from_str_radix(hash, 16)
                        .map_err(|_| err(at, format!("HASH {hash:?} is not hexadecimal")))?,
                }
            }
            other => return Err(err(at, format!("unknown value KIND {other:?}"))),
        };
        Ok(match a.get(A_BOX).map(str::to_string) {
            Some(b) => Value::Boxed {
                class: self.intern_class(&b),
                value: Box::new(v),
            },
            None => v,
        })
    }
}

fn parse_num<T: std::str::FromStr>(text: &str, what: &str, at: u64) -> Result<T, XmlError> {
    text.trim().parse().map_err(|_| {
        err(
            at,
            format!("{what}: {:?} is not a valid value", text.trim()),
        )
    })
}

/// An attribute's unescaped value.
fn attr(s: &BytesStart<'_>, key: &[u8], at: u64) -> Result<Option<String>, XmlError> {
    for a in s.attributes() {
        let a = a.map_err(|e| err(at, format!("malformed attribute: {e}")))?;
        if a.key.as_ref() == key {
            let v = a
                .unescape_value()
                .map_err(|e| err(at, format!("malformed attribute value: {e}")))?;
            return Ok(Some(v.into_owned()));
        }
    }
    Ok(None)
}

/// A numeric attribute, read from its raw bytes when they are plain
/// digits (the common case: no allocation), else unescaped and parsed.
/// A `FRAME`'s attributes: `CLASS`, `MTD`, `SIG`, `LOC`, `LINE`, `TYPE`.
fn frame_attrs(s: &BytesStart<'_>, at: u64) -> Result<FrameAttrs, XmlError> {
    let bci = match attr(s, b"LOC", at)? {
        Some(l) => parse_num::<i32>(&l, "FRAME LOC", at)?,
        None => -1,
    };
    let line = attr_num(s, b"LINE", at)?
        .map(|l| u32::try_from(l).map_err(|_| err(at, format!("LINE {l} is too large"))))
        .transpose()?;
    Ok(FrameAttrs {
        class: attr(s, b"CLASS", at)?.unwrap_or_else(|| "?".to_string()),
        method: attr(s, b"MTD", at)?.unwrap_or_else(|| "?".to_string()),
        sig: attr(s, b"SIG", at)?,
        bci,
        line,
        ty: match attr(s, b"TYPE", at)? {
            None => FrameType::Unknown,
            Some(t) => FrameType::from_name(&t)
                .filter(|t| *t != FrameType::Unknown)
                .ok_or_else(|| {
                    err(
                        at,
                        format!("FRAME TYPE {t:?} is not interpreted, compiled, inlined or native"),
                    )
                })?,
        },
    })
}

fn attr_num(s: &BytesStart<'_>, key: &[u8], at: u64) -> Result<Option<u64>, XmlError> {
    for a in s.attributes() {
        let a = a.map_err(|e| err(at, format!("malformed attribute: {e}")))?;
        if a.key.as_ref() != key {
            continue;
        }
        let raw = a.value.as_ref();
        if !raw.is_empty() && raw.len() <= 19 && raw.iter().all(u8::is_ascii_digit) {
            let n = raw.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
            return Ok(Some(n));
        }
        let v = a
            .unescape_value()
            .map_err(|e| err(at, format!("malformed attribute value: {e}")))?;
        let what = String::from_utf8_lossy(key);
        return parse_num(&v, &what, at).map(Some);
    }
    Ok(None)
}

fn value_attrs(s: &BytesStart<'_>, at: u64, v: &mut ValueAttrs) -> Result<(), XmlError> {
    v.present = 0;
    for a in s.attributes() {
        let a = a.map_err(|e| err(at, format!("malformed attribute: {e}")))?;
        let i = match a.key.as_ref() {
            b"NAME" => A_NAME,
            b"KIND" => A_KIND,
            b"BOX" => A_BOX,
            b"CLASS" => A_CLASS,
            b"LEN" => A_LEN,
            b"HASH" => A_HASH,
            b"FULL" => A_FULL,
            _ => continue,
        };
        let val = a
            .unescape_value()
            .map_err(|e| err(at, format!("malformed attribute value: {e}")))?;
        v.values[i].clear();
        v.values[i].push_str(&val);
        v.present |= 1 << i;
    }
    Ok(())
}

fn trace_attrs(s: &BytesStart<'_>, at: u64, header: &mut TraceHeader) -> Result<(), XmlError> {
    if let Some(v) = attr(s, b"VERSION", at)? {
        if v.trim() != "1" {
            return Err(err(
                at,
                format!("unsupported XML trace version {v} (this vmview reads version 1)"),
            ));
        }
    }
    if let Some(p) = attr(s, b"PID", at)? {
        header.pid = parse_num(&p, "PID", at)?;
    }
    if let Some(t) = attr(s, b"START", at)? {
        header.start_unix_ns = parse_num(&t, "START", at)?;
    }
    Ok(())
}

fn top_elem(s: &BytesStart<'_>, empty: bool, at: u64) -> Result<Elem, XmlError> {
    let name = s.name();
    let top = match name.as_ref() {
        b"PROP" => Top::Prop {
            name: attr(s, b"NAME", at)?.unwrap_or_default(),
        },
        b"THREAD" => Top::Thread {
            tid: attr(s, b"TID", at)?
                .map(|t| parse_num(&t, "TID", at))
                .transpose()?,
            java_id: attr(s, b"JID", at)?
                .map(|t| parse_num(&t, "JID", at))
                .transpose()?
                .unwrap_or(-1),
            group: attr(s, b"GROUP", at)?.unwrap_or_default(),
            priority: attr(s, b"PRIORITY", at)?
                .map(|t| parse_num(&t, "PRIORITY", at))
                .transpose()?
                .unwrap_or(0),
            daemon: attr(s, b"DAEMON", at)?
                .map(|t| parse_num(&t, "DAEMON", at))
                .transpose()?
                .unwrap_or(false),
        },
        n => match event_type(n) {
            Some(ty) => {
                let what = vmview_format::EVENT_TYPE_NAMES[ty as usize];
                let id = attr_num(s, b"ID", at)?
                    .ok_or_else(|| err(at, format!("<{what}> has no ID attribute")))?;
                Top::Event {
                    ty,
                    id,
                    time_ns: attr_num(s, b"TIME", at)?.unwrap_or(0),
                }
            }
            None => {
                return Err(err(
                    at,
                    format!(
                        "unknown element <{}> in <TRACE> (expected an event such as <CALL>, or <THREAD>, <PROP>)",
                        name_of(n)
                    ),
                ))
            }
        },
    };
    Ok(Elem { top, empty })
}

/// FxHash (rustc's): names are short and not attacker-chosen in a way that
/// matters here (a slow lookup, not a wrong one), and SipHash would cost
/// more than parsing them.
type FxMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// The XML reader's errors carry their place; this builds one.
fn err(offset: u64, message: impl Into<String>) -> XmlError {
    XmlError {
        offset,
        message: message.into(),
    }
}

fn name_of(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xml::XmlWriter;
    use crate::EventWriter;

    /// A small document with every construct the writer uses.
    fn document() -> (Vec<u8>, Vec<Event>, SymbolTable) {
        let mut syms = SymbolTable::default();
        let texts = [
            "main",
            "shop.Inventory$Clerk",
            "<init>",
            "(Ljava/lang/String;C)V",
            "label",
            "c",
            "java.lang.IllegalStateException",
            "int[]",
            "java.lang.Integer",
            "invokespecial java/lang/Object.\"<init>\":()V",
        ];
        for (i, t) in texts.iter().enumerate() {
            syms.insert(Symbol::String {
                id: StringId(i as u32),
                text: t.to_string(),
            });
        }
        syms.insert(Symbol::Method(MethodSymbol {
            id: MethodId(0),
            class: StringId(1),
            name: StringId(2),
            sig: StringId(3),
            param_names: vec![StringId(4), StringId(5)],
            modifiers: 0,
        }));
        syms.insert(Symbol::Thread(ThreadSymbol {
            id: ThreadRef(3),
            java_id: 7,
            name: StringId(0),
            group: StringId(0),
            priority: 5,
            daemon: true,
        }));
        let call = |id, params| Event {
            id,
            time_ns: id * 10,
            thread: ThreadRef(3),
            kind: EventKind::Call {
                metrics: Default::default(),
                method: MethodId(0),
                depth: 2,
                caller: Some((
                    MethodId(0),
                    Loc {
                        bci: 4,
                        line: Some(9),
                    },
                )),
                params,
            },
        };
        let events = vec![
            call(
                2,
                vec![
                    Value::Str {
                        text: "a]]>b<script>\u{1}\r\u{1F600}".into(),
                        full_len: Some(99),
                    },
                    Value::Char(0xD800),
                ],
            ),
            call(
                5,
                vec![
                    Value::Boxed {
                        class: StringId(8),
                        value: Box::new(Value::Int(-3)),
                    },
                    Value::Array {
                        class: StringId(7),
                        length: 3,
                    },
                ],
            ),
            Event {
                id: 9,
                time_ns: 100,
                thread: ThreadRef(3),
                kind: EventKind::Throw {
                    exception: StringId(6),
                    message: Some("x]]>y\u{FFFF}".into()),
                    method: MethodId(0),
                    loc: Loc { bci: 1, line: None },
                    catch: None,
                },
            },
            Event {
                id: 10,
                time_ns: 101,
                thread: ThreadRef(3),
                kind: EventKind::Return {
                    metrics: Metrics {
                        cpu_ns: Some(3_000),
                        alloc_bytes: Some(0),
                    },
                    method: MethodId(0),
                    depth: 2,
                    outcome: Outcome::Value(Value::Double(f64::NEG_INFINITY)),
                    elapsed_ns: 5,
                },
            },
            Event {
                id: 11,
                time_ns: 102,
                thread: ThreadRef(3),
                kind: EventKind::Bytecode {
                    method: MethodId(0),
                    bci: 1,
                    insn: StringId(9),
                },
            },
        ];
        let mon = Monitor {
            class: StringId(1),
            hash: 0xfeed,
        };
        let newer = [
            EventKind::MonitorEnter {
                monitor: mon,
                depth: 2,
            },
            EventKind::MonitorExit {
                monitor: mon,
                depth: 2,
            },
            EventKind::TraceWindow {
                min_depth: 1,
                max_depth: None,
                reason: WindowReason::Widen,
                rate_per_s: 12,
            },
            EventKind::PeriodEnd { period: 4 },
            EventKind::Calibration {
                record: "*".into(),
                cost_ps: 77_000,
            },
            EventKind::Sample {
                state: ThreadState::Blocked,
                stack: StackId(0),
                monitors: vec![(mon, 1)],
            },
            EventKind::Sample {
                state: ThreadState::Io,
                stack: StackId(0),
                monitors: vec![],
            },
            EventKind::PeriodStart {
                period: 5,
                stack: StackId(0),
            },
        ];
        syms.insert(Symbol::Stack(StackSymbol {
            id: StackId(0),
            types: Vec::new(),
            frames: vec![
                (
                    MethodId(0),
                    Loc {
                        bci: 3,
                        line: Some(12),
                    },
                ),
                (
                    MethodId(0),
                    Loc {
                        bci: -1,
                        line: None,
                    },
                ),
            ],
        }));
        let mut events = events;
        for (i, kind) in newer.into_iter().enumerate() {
            events.push(Event {
                id: 11 + i as u64,
                time_ns: 200,
                thread: ThreadRef(3),
                kind,
            });
        }
        let mut w = XmlWriter::new(Vec::new(), &TraceHeader::default());
        for e in &events {
            w.write_event(e, &syms).unwrap();
        }
        w.finish().unwrap();
        (w.into_inner(), events, syms)
    }

    fn read_all(doc: &[u8]) -> Result<Vec<Event>, XmlError> {
        let mut r = XmlTraceReader::new(doc)?;
        let mut out = Vec::new();
        while let Some(e) = r.next_event()? {
            out.push(e);
        }
        Ok(out)
    }

    #[test]
    fn events_come_back_exactly() {
        let (doc, events, syms) = document();
        let mut r = XmlTraceReader::new(&doc[..]).unwrap();
        let mut back = Vec::new();
        while let Some(e) = r.next_event().unwrap() {
            back.push(e);
        }
        // Handles differ (the reader interns its own); compare through names.
        let mut a = Vec::new();
        let mut b = Vec::new();
        let mut wa = XmlWriter::new(&mut a, &TraceHeader::default());
        for e in &events {
            wa.write_event(e, &syms).unwrap();
        }
        wa.finish().unwrap();
        let mut wb = XmlWriter::new(&mut b, &TraceHeader::default());
        for e in &back {
            wb.write_event(e, r.symbols()).unwrap();
        }
        wb.finish().unwrap();
        assert_eq!(String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap());
        assert_eq!(back.len(), 13);
        assert_eq!(back[6..], events[6..], "newer kinds come back exactly");
        let EventKind::Return { metrics, .. } = &back[3].kind else {
            panic!()
        };
        assert_eq!(metrics.cpu_ns, Some(3_000));
        assert_eq!(metrics.alloc_bytes, Some(0));
        assert_eq!(back[0].thread, ThreadRef(3), "TID kept as the handle");
        let EventKind::Call { params, .. } = &back[0].kind else {
            panic!()
        };
        assert_eq!(params[1], Value::Char(0xD800));
        // SAMPLE and PERIOD_START frames name their methods with signatures
        // and share one interned stack.
        let st = r.symbols().stack(StackId(0)).expect("stack symbol");
        assert_eq!(st.frames, syms.stack(StackId(0)).unwrap().frames);
        let m = r.symbols().method(st.frames[0].0).unwrap();
        assert_eq!(r.symbols().string(m.sig), "(Ljava/lang/String;C)V");
    }

    #[test]
    fn bytecode_events_come_back_with_their_instruction() {
        let (_, _, syms) = document();
        let ev = Event {
            id: 1,
            time_ns: 5,
            thread: ThreadRef(3),
            kind: EventKind::Bytecode {
                method: MethodId(0),
                bci: 4,
                insn: StringId(9),
            },
        };
        let mut w = XmlWriter::new(Vec::new(), &TraceHeader::default());
        w.write_event(&ev, &syms).unwrap();
        w.finish().unwrap();
        let doc = w.into_inner();
        let mut r = XmlTraceReader::new(&doc[..]).unwrap();
        let back = r.next_event().unwrap().unwrap();
        let EventKind::Bytecode { method, bci, insn } = back.kind else {
            panic!("{back:?}")
        };
        assert_eq!(bci, 4);
        let s = r.symbols();
        assert_eq!(
            s.string(insn),
            "invokespecial java/lang/Object.\"<init>\":()V"
        );
        assert_eq!(s.method(method).map(|m| s.string(m.name)), Some("<init>"));
    }

    /// Every truncation and many byte changes of a valid document: the
    /// reader returns events or an error, never panics, and an error's
    /// offset lies inside the document.
    #[test]
    fn damaged_documents_give_errors_not_panics() {
        let (doc, _, _) = document();
        for cut in 0..doc.len() {
            if let Err(e) = read_all(&doc[..cut]) {
                assert!(e.offset <= cut as u64, "{e}");
            }
        }
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..3000 {
            let mut d = doc.clone();
            for _ in 0..3 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let i = (rng as usize) % d.len();
                d[i] = b"<>&;\"'/=]!?x0 \n\x00\xff"[(rng >> 32) as usize % 17];
            }
            if let Err(e) = read_all(&d) {
                assert!(e.offset <= d.len() as u64, "{e}");
            }
        }
    }

    /// A skipped event (type mask) of a million nested elements was read
    /// as one event without a word (18 s in a debug build); now nesting
    /// beyond the limit is an error at its place, whether the event is
    /// skipped or decoded.
    #[test]
    fn elements_nested_too_deep_are_refused_skipped_or_not() {
        let n = 100_000;
        let doc = format!(
            "<TRACE VERSION=\"1\">\n<CALL ID=\"1\" TIME=\"0\">{}{}</CALL>\n</TRACE>\n",
            "<FRAME>".repeat(n),
            "</FRAME>".repeat(n)
        );
        let mut r = XmlTraceReader::new(doc.as_bytes()).unwrap();
        r.set_type_mask(1 << 5);
        let e = r.next_event().unwrap_err();
        assert!(
            e.message
                .contains("nested too deep inside <CALL> (limit 16"),
            "{e}"
        );
        // Just after the first <FRAME> too many.
        let at = 42 + "<FRAME>".len() as u64 * (MAX_SKIP_DEPTH as u64 + 1);
        assert_eq!(e.offset, at, "{e}");
        let e = read_all(doc.as_bytes()).unwrap_err();
        assert!(e.message.contains("FRAME"), "{e}");
        // At the limit, a skipped event is skipped.
        let ok = format!(
            "<TRACE VERSION=\"1\">\n<CALL ID=\"1\" TIME=\"0\">{}{}</CALL>\n</TRACE>\n",
            "<X>".repeat(MAX_SKIP_DEPTH),
            "</X>".repeat(MAX_SKIP_DEPTH)
        );
        let mut r = XmlTraceReader::new(ok.as_bytes()).unwrap();
        r.set_type_mask(1 << 5);
        assert_eq!(r.next_event().unwrap(), None);
    }

    #[test]
    fn line_column_counts_characters() {
        let text = "ab\ncdé\nxyz";
        assert_eq!(line_column(text.as_bytes(), 0).unwrap(), (1, 1));
        assert_eq!(line_column(text.as_bytes(), 3).unwrap(), (2, 1));
        assert_eq!(line_column(text.as_bytes(), 7).unwrap(), (2, 4));
    }
}
