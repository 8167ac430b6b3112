//! Throughput of filtering and of the XML exporter and reader, on the
//! synthetic trace of `synthetic.rs` (about 400 k events).
//!
//! - `filter/eval_symbols`: the filter alone over decoded events (symbol
//!   predicates: class and thread regexes), the cost the filter adds.
//! - `filter/read_binary`: the binary reader alone, the floor for the next.
//! - `filter/binary_symbols`: read + filter a binary trace.
//! - `filter/binary_symbols_no_args`: the same on CALLs without argument
//!   values (decoding no strings).
//! - `xml/export`: render every event as XML (bytes of XML out).
//! - `xml/filter`: read + filter the XML form (bytes of XML in).
//! - `around/open_seek_context`: what `vmview show --around ID` does —
//!   open a 5 M-event trace file, read its index, seek to the chunk before
//!   the event and read to 5 events past it (the cost does not depend on
//!   the trace's length; the CLI measurement on 50 M events is in the
//!   docs/PERFORMANCE.md).
//!
//! Aims (issue 4): binary filter ≥ 100 M events/s on symbol predicates,
//! XML filter ≥ 300 MB/s.

#[path = "synthetic.rs"]
mod synthetic;

use std::hint::black_box;
use std::io::Cursor;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use vmview_export::{EventWriter, XmlTraceReader, XmlWriter};
use vmview_filter::EventFilter;
use vmview_format::{Event, SymbolTable, TraceReader};

const PAIRS: u64 = 200_000;
const SYMBOL_EXPR: &str =
    r#"type in [CALL, THROW] && class ~ "Service1[0-5]$" && thread ~ "-[0-3]$""#;

fn decode(bytes: &[u8]) -> (Vec<Event>, SymbolTable) {
    let mut r = TraceReader::new(Cursor::new(bytes)).expect("trace");
    let mut events = Vec::new();
    while let Some(e) = r.next_event() {
        events.push(e);
    }
    (events, r.symbols().clone())
}

fn to_xml(bytes: &[u8]) -> Vec<u8> {
    let mut r = TraceReader::new(Cursor::new(bytes)).expect("trace");
    let mut w = XmlWriter::new(Vec::new(), r.header());
    while let Some(e) = r.next_event() {
        w.write_event(&e, r.symbols()).expect("in memory");
    }
    w.finish().expect("in memory");
    w.into_inner()
}

fn benches(c: &mut Criterion) {
    let bin = synthetic::write(Vec::new(), PAIRS).expect("synthetic trace");
    let (events, syms) = decode(&bin);
    let n = events.len() as u64;
    let xml = to_xml(&bin);
    let matched = {
        let mut f = EventFilter::parse(SYMBOL_EXPR).expect("expr");
        events.iter().filter(|e| f.matches(e, &syms)).count()
    };
    eprintln!(
        "synthetic trace: {n} events, {} bytes binary, {} bytes XML, {matched} match {SYMBOL_EXPR}",
        bin.len(),
        xml.len()
    );

    let mut g = c.benchmark_group("filter");
    g.sample_size(10);
    g.throughput(Throughput::Elements(n));
    g.bench_function("eval_symbols", |b| {
        let mut f = EventFilter::parse(SYMBOL_EXPR).expect("expr");
        b.iter(|| events.iter().filter(|e| f.matches(e, &syms)).count())
    });
    g.bench_function("read_binary", |b| {
        b.iter(|| {
            let mut r = TraceReader::new(Cursor::new(black_box(&bin[..]))).expect("trace");
            let mut k = 0u64;
            while let Some(e) = r.next_event() {
                black_box(&e);
                k += 1;
            }
            k
        })
    });
    g.bench_function("binary_symbols", |b| {
        b.iter(|| {
            let mut f = EventFilter::parse(SYMBOL_EXPR).expect("expr");
            let mut r = TraceReader::new(Cursor::new(black_box(&bin[..]))).expect("trace");
            let mut k = 0u64;
            while let Some(e) = r.next_event() {
                k += u64::from(f.matches(&e, r.symbols()));
            }
            assert_eq!(k, matched as u64);
            k
        })
    });
    let bare = synthetic::write_with(Vec::new(), PAIRS, false).expect("synthetic trace");
    g.bench_function("binary_symbols_no_args", |b| {
        b.iter(|| {
            let mut f = EventFilter::parse(SYMBOL_EXPR).expect("expr");
            let mut r = TraceReader::new(Cursor::new(black_box(&bare[..]))).expect("trace");
            let mut k = 0u64;
            while let Some(e) = r.next_event() {
                k += u64::from(f.matches(&e, r.symbols()));
            }
            k
        })
    });
    g.finish();

    let mut g = c.benchmark_group("xml");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(xml.len() as u64));
    g.bench_function("export", |b| {
        b.iter(|| {
            let mut w = XmlWriter::new(Vec::with_capacity(xml.len()), &Default::default());
            for e in &events {
                w.write_event(e, &syms).expect("in memory");
            }
            w.finish().expect("in memory");
            w.into_inner().len()
        })
    });
    g.bench_function("filter", |b| {
        b.iter(|| {
            let mut f = EventFilter::parse(SYMBOL_EXPR).expect("expr");
            let mut r = XmlTraceReader::new(Cursor::new(black_box(&xml[..]))).expect("xml");
            let mut k = 0u64;
            while let Some(e) = r.next_event().expect("well-formed") {
                k += u64::from(f.matches(&e, r.symbols()));
            }
            assert_eq!(k, matched as u64);
            k
        })
    });
    g.finish();
}

fn around(c: &mut Criterion) {
    let path = std::env::temp_dir().join(format!("vmview-bench-around-{}.vmv", std::process::id()));
    let f = std::io::BufWriter::new(std::fs::File::create(&path).expect("temp file"));
    synthetic::write(f, 2_500_000).expect("synthetic trace");
    let mut g = c.benchmark_group("around");
    g.sample_size(50);
    let mut k = 0u64;
    g.bench_function("open_seek_context", |b| {
        b.iter(|| {
            // A different id each time, spread over the trace.
            k = (k + 1_234_567) % 5_000_000 + 1;
            let mut r = TraceReader::open(&path).expect("trace");
            let index = r.index().expect("index").clone();
            let pos = index.position_of(k).expect("id in trace");
            r.seek_to_chunk(&index.chunks[pos.saturating_sub(1)])
                .expect("seek");
            let mut after = 0;
            while let Some(e) = r.next_event() {
                if e.id > k {
                    after += 1;
                    if after == 5 {
                        break;
                    }
                }
            }
            black_box(after)
        })
    });
    g.finish();
    let _ = std::fs::remove_file(&path);
}

criterion_group!(filter_benches, benches, around);
criterion_main!(filter_benches);
