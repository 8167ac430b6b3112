//! Throughput of the trace writer and reader on a realistic CALL/RETURN
//! stream (the one `tests/stream.rs` describes), plus the encoded size per
//! CALL+RETURN pair. Targets: writer ≥ 20 M events/s, reader ≥ 50 M
//! events/s, ≤ 12 bytes per pair.

use std::hint::black_box;
use std::io::Cursor;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use vmview_format::{TraceHeader, TraceReader, TraceWriter, DEFAULT_CHUNK_BYTES};

#[path = "../tests/stream.rs"]
mod stream;

const EVENTS: usize = 500_000;

fn header() -> TraceHeader {
    TraceHeader {
        version: 1,
        pid: 1,
        start_unix_ns: 0,
        properties: vec![("jvm".into(), "bench".into())],
    }
}

fn encode(rec: &stream::Recording, capacity: usize, version: u16) -> Vec<u8> {
    let mut w = TraceWriter::with_version(
        Vec::with_capacity(capacity),
        &header(),
        DEFAULT_CHUNK_BYTES,
        version,
    )
    .expect("in-memory writer");
    for s in &rec.symbols {
        w.define(s.clone());
    }
    for e in &rec.events {
        w.write(e).expect("valid event");
    }
    w.finish().expect("in-memory writer")
}

fn format(c: &mut Criterion) {
    let rec = stream::realistic(EVENTS, 1);
    let n = rec.events.len();
    let bytes = encode(&rec, 0, 1);
    let bytes_v2 = encode(&rec, 0, 2);
    eprintln!("version 2: {} bytes", bytes_v2.len());
    let pairs = n as f64 / 2.0;
    eprintln!(
        "realistic stream: {n} events, {} bytes, {:.2} bytes per CALL+RETURN pair (all overhead included)",
        bytes.len(),
        bytes.len() as f64 / pairs
    );

    let mut g = c.benchmark_group("format");
    g.sample_size(20);
    g.throughput(Throughput::Elements(n as u64));
    // One core: the writer thread's work per event in each version.
    for (version, name) in [(1, "write_call_return"), (2, "write_call_return_v2")] {
        g.bench_function(name, |b| {
            b.iter(|| black_box(encode(black_box(&rec), bytes.len() + 4096, version)))
        });
    }
    for (trace, name) in [
        (&bytes, "read_call_return"),
        (&bytes_v2, "read_call_return_v2"),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut r = TraceReader::new(Cursor::new(black_box(&trace[..]))).expect("trace");
                let mut count = 0usize;
                while let Some(e) = r.next_event() {
                    black_box(&e);
                    count += 1;
                }
                assert_eq!(count, n);
                count
            })
        });
    }
    g.finish();
}

criterion_group!(benches, format);
criterion_main!(benches);
