//! The Parquet exporter: one row per event, typed columns, for fleet-wide
//! questions asked of DuckDB, Spark, Trino, DataFusion or pandas.
//!
//! vmview does not grow its own query engine for many JVMs: each JVM
//! writes its own trace, each trace becomes a Parquet file, and any engine
//! queries them all at once (`SELECT … FROM 'traces/*.parquet'`). The
//! columns are the JSON Lines keys (docs/PARQUET.md is the contract), plus
//! what a query over many files needs: `source` (the trace file), `pid`
//! (the JVM), `source_id` (the event's id in that trace, for `vmview show
//! SOURCE --around ID`) and `time` (absolute wall-clock time, a
//! nanosecond timestamp, so traces of different JVMs line up).
//!
//! A trace made by `vmview merge` names its sources in its header
//! (`merge.source.N.*` properties) and carries each event's source index in
//! the low 8 bits of its id; this writer resolves `source`, `pid` and
//! `source_id` from those, so a merged trace exports to the same rows its
//! sources would have.
//!
//! The writer uses the `parquet` crate's low-level column API (no Arrow:
//! a fraction of the build time). Rows are buffered column by column and
//! written as a row group every [`ROW_GROUP_ROWS`] events, so memory is
//! bounded; symbols become shared byte buffers once, so a repeated class
//! name costs a reference count, and Parquet's dictionary encoding stores
//! it once per row group. Pages are Snappy-compressed.

use std::io::{self, Write};
use std::sync::Arc;

use ::parquet::basic::Compression;
use ::parquet::column::writer::ColumnWriter;
use ::parquet::data_type::ByteArray;
use ::parquet::file::properties::WriterProperties;
use ::parquet::file::writer::SerializedFileWriter;
use ::parquet::schema::parser::parse_message_type;
use serde_json::json;
use vmview_format::{
    Event, EventKind, Loc, MethodId, Outcome, StringId, SymbolTable, ThreadRef, TraceHeader, Value,
};

use crate::jsonl::{held_text, stack_text, value_json};
use crate::names::{descriptor_types, monitor_name};
use crate::EventWriter;

/// Events per row group.
pub const ROW_GROUP_ROWS: usize = 1 << 17;

/// Bits of a merged trace's event id that hold the source index.
pub const MERGE_SOURCE_BITS: u32 = 8;

/// One source of a merged trace, as its header describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct MergeSource {
    pub file: String,
    pub pid: u32,
    pub start_unix_ns: u64,
    /// The source's event ids, in order, as inclusive ranges.
    pub ids: Vec<(u64, u64)>,
}

/// The sources a `vmview merge` header lists; empty for any other trace.
pub fn merge_sources(header: &TraceHeader) -> Vec<MergeSource> {
    let prop = |k: &str| {
        header
            .properties
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    let n: usize = prop("merge.sources")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (0..n)
        .map(|i| {
            let p = |k: &str| prop(&format!("merge.source.{i}.{k}")).unwrap_or("");
            MergeSource {
                file: p("file").to_string(),
                pid: p("pid").parse().unwrap_or(0),
                start_unix_ns: p("start_unix_ns").parse().unwrap_or(0),
                ids: parse_id_ranges(p("ids")),
            }
        })
        .collect()
}

/// `1-5000,5003-5003` → `[(1, 5000), (5003, 5003)]`; bad parts are skipped.
pub fn parse_id_ranges(s: &str) -> Vec<(u64, u64)> {
    s.split(',')
        .filter_map(|r| {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
        })
        .collect()
}

/// The inverse of [`parse_id_ranges`].
pub fn format_id_ranges(ranges: &[(u64, u64)]) -> String {
    ranges
        .iter()
        .map(|(a, b)| format!("{a}-{b}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A buffered column: values of the non-null rows, and one definition
/// level per row for optional columns.
struct Col<T> {
    values: Vec<T>,
    defs: Vec<i16>,
}

impl<T> Default for Col<T> {
    fn default() -> Self {
        Col {
            values: Vec::new(),
            defs: Vec::new(),
        }
    }
}

impl<T> Col<T> {
    fn set(&mut self, v: T) {
        self.values.push(v);
        self.defs.push(1);
    }
    fn opt(&mut self, v: Option<T>) {
        match v {
            Some(v) => self.set(v),
            None => self.defs.push(0),
        }
    }
    fn clear(&mut self) {
        self.values.clear();
        self.defs.clear();
    }
}

/// Every column, in schema order. `define_columns!` generates the struct,
/// the schema and the row-group writer from one list, so they cannot
/// disagree.
macro_rules! define_columns {
    ($( $name:ident : $kind:ident $req:ident ),* $(,)?) => {
        #[derive(Default)]
        struct Columns {
            $( $name: Col<define_columns!(@ty $kind)>, )*
        }

        impl Columns {
            fn schema() -> String {
                let mut s = String::from("message vmview_event {\n");
                $( s.push_str(&format!(
                    "  {} {} {}{};\n",
                    define_columns!(@rep $req),
                    define_columns!(@phys $kind),
                    stringify!($name).trim_start_matches("r#"),
                    define_columns!(@logical $kind),
                )); )*
                s.push('}');
                s
            }

            fn clear(&mut self) {
                $( self.$name.clear(); )*
            }

            fn write<W: Write + Send>(&self, file: &mut SerializedFileWriter<W>) -> ::parquet::errors::Result<()> {
                let mut rg = file.next_row_group()?;
                $(
                    let mut col = rg.next_column()?.expect("schema and columns agree");
                    let defs = define_columns!(@defs $req, self.$name);
                    define_columns!(@write $kind, col.untyped(), &self.$name.values, defs);
                    col.close()?;
                )*
                rg.close()?;
                Ok(())
            }
        }
    };
    (@ty str) => { ByteArray };
    (@ty i32) => { i32 };
    (@ty i64) => { i64 };
    (@ty ts) => { i64 };
    (@ty bool) => { bool };
    (@rep req) => { "REQUIRED" };
    (@rep opt) => { "OPTIONAL" };
    (@phys str) => { "BYTE_ARRAY" };
    (@phys i32) => { "INT32" };
    (@phys i64) => { "INT64" };
    (@phys ts) => { "INT64" };
    (@phys bool) => { "BOOLEAN" };
    (@logical str) => { " (STRING)" };
    (@logical ts) => { " (TIMESTAMP(NANOS,true))" };
    (@logical $k:ident) => { "" };
    (@defs req, $c:expr) => { None };
    (@defs opt, $c:expr) => { Some($c.defs.as_slice()) };
    (@write str, $w:expr, $v:expr, $d:expr) => {
        match $w { ColumnWriter::ByteArrayColumnWriter(w) => { w.write_batch($v, $d, None)?; } _ => unreachable!("BYTE_ARRAY column") }
    };
    (@write i32, $w:expr, $v:expr, $d:expr) => {
        match $w { ColumnWriter::Int32ColumnWriter(w) => { w.write_batch($v, $d, None)?; } _ => unreachable!("INT32 column") }
    };
    (@write i64, $w:expr, $v:expr, $d:expr) => {
        match $w { ColumnWriter::Int64ColumnWriter(w) => { w.write_batch($v, $d, None)?; } _ => unreachable!("INT64 column") }
    };
    (@write ts, $w:expr, $v:expr, $d:expr) => { define_columns!(@write i64, $w, $v, $d) };
    (@write bool, $w:expr, $v:expr, $d:expr) => {
        match $w { ColumnWriter::BoolColumnWriter(w) => { w.write_batch($v, $d, None)?; } _ => unreachable!("BOOLEAN column") }
    };
}

define_columns! {
    source: str req,
    pid: i32 req,
    source_id: i64 opt,
    id: i64 req,
    time_ns: i64 req,
    time: ts req,
    r#type: str req,
    thread: str req,
    thread_id: i64 opt,
    class: str opt,
    method: str opt,
    sig: str opt,
    bci: i32 opt,
    line: i32 opt,
    depth: i32 opt,
    params: str opt,
    value: str opt,
    exception: str opt,
    message: str opt,
    catch_class: str opt,
    catch_method: str opt,
    catch_sig: str opt,
    catch_bci: i32 opt,
    catch_line: i32 opt,
    monitor: str opt,
    owner: str opt,
    wait_ns: i64 opt,
    timeout_ms: i64 opt,
    timed_out: bool opt,
    elapsed_ns: i64 opt,
    duration_ns: i64 opt,
    count: i64 opt,
    loader: str opt,
    class_source: str opt,
    state: str opt,
    stack: str opt,
    monitors: str opt,
    period: i64 opt,
}

/// The Parquet schema the writer produces, in Parquet's message syntax.
pub fn schema() -> String {
    Columns::schema()
}

fn bytes(s: &str) -> ByteArray {
    ByteArray::from(s.as_bytes().to_vec())
}

fn pq_err(e: ::parquet::errors::ParquetError) -> io::Error {
    match e {
        ::parquet::errors::ParquetError::External(inner) => match inner.downcast::<io::Error>() {
            Ok(io) => *io,
            Err(other) => io::Error::other(other),
        },
        other => io::Error::other(other),
    }
}

struct Source {
    name: ByteArray,
    pid: i32,
    ids: Vec<(u64, u64)>,
    /// Position in `ids`: (range index, events of this source seen in it).
    cursor: (usize, u64),
}

impl Source {
    /// The id the next event of this source had in its own trace.
    fn next_id(&mut self) -> Option<u64> {
        let (r, k) = self.cursor;
        let &(first, last) = self.ids.get(r)?;
        let id = first + k;
        if id >= last {
            self.cursor = (r + 1, 0);
        } else {
            self.cursor = (r, k + 1);
        }
        (id <= last).then_some(id)
    }
}

/// Writes events as a Parquet file (needs `Send`, as the parquet crate does).
pub struct ParquetWriter<W: Write + Send> {
    file: Option<SerializedFileWriter<W>>,
    cols: Columns,
    rows: usize,
    start_unix_ns: u64,
    /// One source for a plain trace; the listed sources for a merged one.
    sources: Vec<Source>,
    merged: bool,
    /// `source_id` is unknown when a merged trace was filtered afterwards
    /// (counting events per source no longer finds their ids).
    source_ids_known: bool,
    strings: Vec<Option<ByteArray>>,
    param_heads: std::collections::HashMap<MethodId, Vec<String>>,
    scratch: Vec<u8>,
    thread_names: Vec<Option<ByteArray>>,
    type_names: Vec<ByteArray>,
}

impl<W: Write + Send> ParquetWriter<W> {
    /// A writer for a trace with this header; `source` names the trace in
    /// the `source` column (unless the trace is a merge, which names its
    /// own sources).
    pub fn new(out: W, header: &TraceHeader, source: &str) -> io::Result<Self> {
        let schema = Arc::new(parse_message_type(&Columns::schema()).map_err(pq_err)?);
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .set_created_by(format!("vmview {}", env!("CARGO_PKG_VERSION")))
            .build();
        let file = SerializedFileWriter::new(out, schema, Arc::new(props)).map_err(pq_err)?;
        let listed = merge_sources(header);
        let merged = !listed.is_empty();
        let sources = if merged {
            listed
                .into_iter()
                .map(|s| Source {
                    name: bytes(&s.file),
                    pid: s.pid as i32,
                    ids: s.ids,
                    cursor: (0, 0),
                })
                .collect()
        } else {
            vec![Source {
                name: bytes(source),
                pid: header.pid as i32,
                ids: Vec::new(),
                cursor: (0, 0),
            }]
        };
        let filtered = header.properties.iter().any(|(k, _)| k == "filter");
        Ok(ParquetWriter {
            file: Some(file),
            cols: Columns::default(),
            rows: 0,
            start_unix_ns: header.start_unix_ns,
            sources,
            merged,
            source_ids_known: !(merged && filtered),
            strings: Vec::new(),
            param_heads: std::collections::HashMap::new(),
            scratch: Vec::new(),
            thread_names: Vec::new(),
            type_names: vmview_format::EVENT_TYPE_NAMES
                .iter()
                .map(|s| bytes(s))
                .collect(),
        })
    }

    fn string(&mut self, id: StringId, syms: &SymbolTable) -> ByteArray {
        let i = id.0 as usize;
        if i < 1 << 22 {
            if i >= self.strings.len() {
                self.strings.resize(i + 1, None);
            }
            if let Some(b) = &self.strings[i] {
                return b.clone();
            }
            let b = bytes(syms.string(id));
            self.strings[i] = Some(b.clone());
            b
        } else {
            bytes(syms.string(id))
        }
    }

    fn thread_name(&mut self, t: ThreadRef, syms: &SymbolTable) -> ByteArray {
        let i = t.0 as usize;
        if i >= self.thread_names.len() {
            self.thread_names.resize(i + 1, None);
        }
        if let Some(b) = &self.thread_names[i] {
            return b.clone();
        }
        let b = bytes(&syms.thread_name(t));
        if syms.thread(t).is_some() {
            self.thread_names[i] = Some(b.clone());
        }
        b
    }

    fn method(&mut self, m: MethodId, syms: &SymbolTable) {
        let (class, name, sig) = match syms.method(m) {
            Some(s) => (
                self.string(s.class, syms),
                self.string(s.name, syms),
                self.string(s.sig, syms),
            ),
            None => (bytes("?"), bytes("?"), bytes("?")),
        };
        self.cols.class.set(class);
        self.cols.method.set(name);
        self.cols.sig.set(sig);
    }

    /// The JSON Lines `params` list as JSON text. The `{"name":…,"type":…`
    /// part of each parameter is rendered once per method.
    fn params_json(&mut self, m: MethodId, params: &[Value], syms: &SymbolTable) -> ByteArray {
        let heads = self.param_heads.entry(m).or_insert_with(|| {
            let sig = syms.method(m).map(|s| syms.string(s.sig));
            let types = sig.and_then(descriptor_types).map(|(p, _)| p);
            let names = syms.method(m).map(|s| s.param_names.as_slice()).unwrap_or(&[]);
            (0..params.len().max(names.len()))
                .map(|i| {
                    let head = json!({
                        "name": names.get(i).map_or_else(|| format!("arg{i}"), |n| syms.string(*n).to_string()),
                        "type": types.as_ref().and_then(|t| t.get(i)).map_or("?", String::as_str),
                    })
                    .to_string();
                    head.trim_end_matches('}').to_string()
                })
                .collect()
        });
        let buf = &mut self.scratch;
        buf.clear();
        buf.push(b'[');
        for (i, v) in params.iter().enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            match heads.get(i) {
                Some(h) => buf.extend_from_slice(h.as_bytes()),
                None => buf
                    .extend_from_slice(format!("{{\"name\":\"arg{i}\",\"type\":\"?\"").as_bytes()),
            }
            if let Some(j) = value_json(v, syms) {
                buf.extend_from_slice(b",\"value\":");
                // Writing a `Json` into a Vec cannot fail.
                let _ = serde_json::to_writer(&mut *buf, &j);
            }
            buf.push(b'}');
        }
        buf.push(b']');
        ByteArray::from(buf.clone())
    }

    fn loc(&mut self, loc: &Loc) {
        self.cols.bci.set(loc.bci);
        self.cols.line.opt(loc.line.map(|l| l as i32));
    }

    fn flush_rows(&mut self) -> io::Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        if let Some(file) = self.file.as_mut() {
            self.cols.write(file).map_err(pq_err)?;
        }
        self.cols.clear();
        self.rows = 0;
        Ok(())
    }

    /// Fills every column for one event; columns its type lacks are null.
    fn row(&mut self, ev: &Event, syms: &SymbolTable) {
        let s = if self.merged {
            (ev.id & ((1 << MERGE_SOURCE_BITS) - 1)) as usize
        } else {
            0
        };
        let known = self.source_ids_known;
        let (name, pid, source_id) = match self.sources.get_mut(s) {
            Some(src) => {
                let sid = if !src.ids.is_empty() {
                    src.next_id().filter(|_| known)
                } else if self.merged {
                    None
                } else {
                    Some(ev.id)
                };
                (src.name.clone(), src.pid, sid)
            }
            None => (bytes("?"), 0, None),
        };
        let c = &mut self.cols;
        c.source.set(name);
        c.pid.set(pid);
        c.source_id.opt(source_id.map(|i| i as i64));
        c.id.set(ev.id as i64);
        c.time_ns.set(ev.time_ns as i64);
        c.time
            .set(self.start_unix_ns.saturating_add(ev.time_ns) as i64);
        let tag = vmview_format::EVENT_TYPE_NAMES
            .iter()
            .position(|n| *n == ev.kind.type_name())
            .unwrap_or(0);
        c.r#type.set(self.type_names[tag].clone());
        let thread = self.thread_name(ev.thread, syms);
        self.cols.thread.set(thread);
        self.cols
            .thread_id
            .opt(syms.thread(ev.thread).map(|t| t.java_id));

        match &ev.kind {
            EventKind::ThreadStart | EventKind::ThreadEnd | EventKind::GcStart => {}
            EventKind::ClassLoad {
                class,
                loader,
                source,
            } => {
                let class = self.string(*class, syms);
                let loader = self.string(*loader, syms);
                let src = (!syms.string(*source).is_empty()).then(|| self.string(*source, syms));
                self.cols.class.set(class);
                self.cols.loader.set(loader);
                self.cols.class_source.opt(src);
            }
            EventKind::Call {
                method,
                depth,
                params,
                ..
            } => {
                self.method(*method, syms);
                self.cols.depth.set(*depth as i32);
                let p = self.params_json(*method, params, syms);
                self.cols.params.set(p);
            }
            EventKind::Return {
                method,
                depth,
                outcome,
                elapsed_ns,
                ..
            } => {
                self.method(*method, syms);
                self.cols.depth.set(*depth as i32);
                match outcome {
                    Outcome::Void => {}
                    Outcome::Value(v) => {
                        let j = value_json(v, syms).map(|j| bytes(&j.to_string()));
                        self.cols.value.opt(j);
                    }
                    Outcome::Exception { class } => {
                        let e = self.string(*class, syms);
                        self.cols.exception.set(e);
                    }
                }
                self.cols.elapsed_ns.set(*elapsed_ns as i64);
            }
            EventKind::Throw {
                exception,
                message,
                method,
                loc,
                catch,
            } => {
                let e = self.string(*exception, syms);
                self.cols.exception.set(e);
                self.cols.message.opt(message.as_deref().map(bytes));
                self.method(*method, syms);
                self.loc(loc);
                if let Some((m, l)) = catch {
                    match syms.method(*m) {
                        Some(s) => {
                            let (a, b, c) = (
                                self.string(s.class, syms),
                                self.string(s.name, syms),
                                self.string(s.sig, syms),
                            );
                            self.cols.catch_class.set(a);
                            self.cols.catch_method.set(b);
                            self.cols.catch_sig.set(c);
                        }
                        None => {
                            self.cols.catch_class.set(bytes("?"));
                            self.cols.catch_method.set(bytes("?"));
                            self.cols.catch_sig.set(bytes("?"));
                        }
                    }
                    self.cols.catch_bci.set(l.bci);
                    self.cols.catch_line.opt(l.line.map(|x| x as i32));
                }
            }
            EventKind::Catch {
                exception,
                method,
                loc,
            } => {
                let e = self.string(*exception, syms);
                self.cols.exception.set(e);
                self.method(*method, syms);
                self.loc(loc);
            }
            EventKind::MonitorContendedEnter { monitor, owner } => {
                self.cols.monitor.set(bytes(&monitor_name(syms, monitor)));
                let o = owner.map(|t| self.thread_name(t, syms));
                self.cols.owner.opt(o);
            }
            EventKind::MonitorContendedEntered { monitor, wait_ns } => {
                self.cols.monitor.set(bytes(&monitor_name(syms, monitor)));
                self.cols.wait_ns.set(*wait_ns as i64);
            }
            EventKind::MonitorWait {
                monitor,
                timeout_ms,
            } => {
                self.cols.monitor.set(bytes(&monitor_name(syms, monitor)));
                self.cols.timeout_ms.set(*timeout_ms);
            }
            EventKind::MonitorWaited {
                monitor,
                timed_out,
                wait_ns,
            } => {
                self.cols.monitor.set(bytes(&monitor_name(syms, monitor)));
                self.cols.timed_out.set(*timed_out);
                self.cols.wait_ns.set(*wait_ns as i64);
            }
            EventKind::GcFinish { duration_ns } => self.cols.duration_ns.set(*duration_ns as i64),
            EventKind::Dropped { count } => self.cols.count.set(*count as i64),
            EventKind::MonitorEnter { monitor, depth }
            | EventKind::MonitorExit { monitor, depth } => {
                self.cols.monitor.set(bytes(&monitor_name(syms, monitor)));
                self.cols.depth.set(*depth as i32);
            }
            EventKind::Sample {
                state,
                stack,
                monitors,
            } => {
                self.cols.state.set(bytes(state.name()));
                self.cols.stack.set(bytes(&stack_text(syms, *stack)));
                self.cols.monitors.set(bytes(&held_text(syms, monitors)));
            }
            EventKind::PeriodStart { period, stack } => {
                self.cols.period.set(i64::from(*period));
                self.cols.stack.set(bytes(&stack_text(syms, *stack)));
            }
            EventKind::PeriodEnd { period } => self.cols.period.set(i64::from(*period)),
            EventKind::VthreadPinned { stack, duration_ns } => {
                self.cols.duration_ns.set(*duration_ns as i64);
                self.cols.stack.set(bytes(&stack_text(syms, *stack)));
            }
            EventKind::AllocSample { class, size, stack } => {
                self.cols.class.set(bytes(syms.string(*class)));
                self.cols.count.set(*size as i64);
                self.cols.stack.set(bytes(&stack_text(syms, *stack)));
            }
            EventKind::TraceWindow { .. }
            | EventKind::Calibration { .. }
            | EventKind::ReactionHandlers { .. }
            | EventKind::MethodCounts { .. } => {}
            EventKind::Demotion { method, .. } => self.method(*method, syms),
            // The source's type name in `class`, its fields as a JSON
            // object (values as strings) in `params`.
            EventKind::Foreign { name, fields } => {
                let class = self.string(*name, syms);
                self.cols.class.set(class);
                let map: serde_json::Map<String, serde_json::Value> = fields
                    .iter()
                    .map(|(k, v)| {
                        (
                            syms.string(*k).to_string(),
                            serde_json::Value::String(v.clone()),
                        )
                    })
                    .collect();
                self.cols
                    .params
                    .set(bytes(&serde_json::Value::Object(map).to_string()));
            }
            // No instruction column yet: method and offset only.
            EventKind::Bytecode { method, bci, .. } => {
                self.method(*method, syms);
                self.cols.bci.set(*bci as i32);
            }
        }
        self.rows += 1;
        self.pad();
    }

    /// Gives every optional column that the event did not set a null, so
    /// all columns have one definition level per row.
    fn pad(&mut self) {
        let n = self.rows;
        macro_rules! pad {
            ($($c:ident),*) => { $( if self.cols.$c.defs.len() < n { self.cols.$c.defs.push(0); } )* };
        }
        pad!(
            class,
            method,
            sig,
            bci,
            line,
            depth,
            params,
            value,
            exception,
            message,
            catch_class,
            catch_method,
            catch_sig,
            catch_bci,
            catch_line,
            monitor,
            owner,
            wait_ns,
            timeout_ms,
            timed_out,
            elapsed_ns,
            duration_ns,
            count,
            loader,
            class_source,
            state,
            stack,
            monitors,
            period
        );
    }
}

impl<W: Write + Send> EventWriter for ParquetWriter<W> {
    fn write_event(&mut self, ev: &Event, syms: &SymbolTable) -> io::Result<()> {
        self.row(ev, syms);
        if self.rows >= ROW_GROUP_ROWS {
            self.flush_rows()?;
        }
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        self.flush_rows()?;
        if let Some(file) = self.file.take() {
            let mut out = file.into_inner().map_err(pq_err)?;
            out.flush()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_parses_and_names_every_column() {
        let s = parse_message_type(&schema()).expect("valid schema");
        let names: Vec<String> = s
            .get_fields()
            .iter()
            .map(|f| f.name().to_string())
            .collect();
        assert_eq!(names.len(), 38);
        assert_eq!(names[0], "source");
        assert!(names.contains(&"type".to_string()));
        assert!(names.ends_with(&[
            "state".into(),
            "stack".into(),
            "monitors".into(),
            "period".into()
        ]));
    }

    #[test]
    fn id_ranges_round_trip() {
        let r = vec![(1, 5000), (5003, 5003), (7, 9)];
        assert_eq!(parse_id_ranges(&format_id_ranges(&r)), r);
        assert!(parse_id_ranges("").is_empty());
    }

    #[test]
    fn source_ids_follow_the_ranges() {
        let mut s = Source {
            name: bytes("a"),
            pid: 1,
            ids: vec![(1, 3), (10, 10), (20, 21)],
            cursor: (0, 0),
        };
        let got: Vec<_> = std::iter::from_fn(|| s.next_id()).collect();
        assert_eq!(got, [1, 2, 3, 10, 20, 21]);
    }
}
