//! The writer thread's throughput on one core: slots published in thread
//! buffers in, trace bytes out (take, order by time, number, encode), as
//! [`Sequencer`] does it each round. The goal (issue 16): more events per
//! second than one thread calling a traced method as fast as it can
//! makes (about 11 M/s: a CALL and a RETURN per ~180 ns).
//!
//! `cargo bench -p vmview-agent --bench writer`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use vmview_agent::bench::{Buffers, Producer, RoundStats, Sequencer, Slot};
use vmview_format::{
    Event, EventKind, MethodId, MethodSymbol, Metrics, Outcome, StringId, Symbol, ThreadRef,
    ThreadSymbol, TraceHeader, TraceWriter, Value, DEFAULT_CHUNK_BYTES,
};

/// Events per measured round (a 25 ms round of a thread making 11 M/s is
/// about 280,000).
const EVENTS: usize = 400_000;

/// The shape of the traced calls.
#[derive(Clone, Copy)]
enum Shape {
    /// `--args off`: a CALL and a void RETURN.
    ArgsOff,
    /// Two primitives in and one out: a CALL with a `long` and an `int`,
    /// a RETURN of a `long`.
    TwoPrimitives,
}

fn symbols(threads: u32) -> Vec<Symbol> {
    let mut s = Vec::new();
    for (i, text) in ["CallCost", "step", "(JI)J", "main", "x", "y", "worker"]
        .into_iter()
        .enumerate()
    {
        s.push(Symbol::String {
            id: StringId(i as u32),
            text: text.into(),
        });
    }
    for (m, name) in [(1, 1), (2, 3)] {
        s.push(Symbol::Method(MethodSymbol {
            id: MethodId(m),
            class: StringId(0),
            name: StringId(name),
            sig: StringId(2),
            param_names: vec![StringId(4), StringId(5)],
            modifiers: 8,
        }));
    }
    for t in 0..threads {
        s.push(Symbol::Thread(ThreadSymbol {
            id: ThreadRef(t),
            java_id: i64::from(t) + 1,
            name: StringId(6),
            group: StringId(6),
            priority: 5,
            daemon: false,
        }));
    }
    s
}

/// `threads` threads' buffers holding `EVENTS` events in all: each thread
/// calls `main` once and then `step` over and over, a CALL and its RETURN
/// ~90 ns apart, the threads' times interleaved.
fn filled(threads: u32, shape: Shape) -> (Buffers, Vec<Producer>) {
    let buffers = Buffers::new(64 << 20);
    let mut producers: Vec<Producer> = (0..threads).map(|_| buffers.register()).collect();
    let per_thread = EVENTS / threads as usize;
    for (t, p) in producers.iter_mut().enumerate() {
        let thread = ThreadRef(t as u32);
        let mut time = 1_000_000 + t as u64 * 7;
        let main = Slot::small_call(time, thread, MethodId(2), 1).expect("small");
        buffers.push_small(p, main);
        for i in 0..(per_thread as u64 - 1) / 2 {
            time += 90;
            match shape {
                Shape::ArgsOff => buffers.push_small(
                    p,
                    Slot::small_call(time, thread, MethodId(1), 2).expect("small"),
                ),
                Shape::TwoPrimitives => buffers.push(
                    p,
                    Event {
                        id: 0,
                        time_ns: time,
                        thread,
                        kind: EventKind::Call {
                            method: MethodId(1),
                            depth: 2,
                            caller: None,
                            params: vec![Value::Long(i as i64), Value::Int(3)],
                            metrics: Metrics::NONE,
                        },
                    },
                ),
            }
            let elapsed = 30 + i % 7;
            let outcome = match shape {
                Shape::ArgsOff => Outcome::Void,
                Shape::TwoPrimitives => Outcome::Value(Value::Long(i as i64 * 3)),
            };
            time += elapsed;
            let ret =
                Slot::small_return(time, thread, MethodId(1), 2, elapsed, &outcome).expect("small");
            buffers.push_small(p, ret);
        }
    }
    (buffers, producers)
}

fn header() -> TraceHeader {
    TraceHeader {
        version: 1,
        pid: 1,
        start_unix_ns: 0,
        properties: vec![("jvm".into(), "bench".into())],
    }
}

/// One writer round over everything in `buffers`: the bytes written.
fn round(buffers: &Buffers, seq: &mut Sequencer, syms: &[Symbol], version: u16) -> u64 {
    let mut out =
        TraceWriter::with_version(std::io::sink(), &header(), DEFAULT_CHUNK_BYTES, version)
            .expect("sink");
    for s in syms {
        out.define(s.clone());
    }
    let heap = seq.take_from(buffers);
    buffers.retire(heap);
    seq.order();
    let mut stats = RoundStats::default();
    seq.write_ready(u64::MAX, 0, &mut out, &mut stats)
        .expect("valid events");
    assert_eq!(seq.held(), 0);
    out.flush().expect("sink");
    out.bytes_written()
}

/// The round as the writer did it before the [`Sequencer`]: slot by
/// slot into one vector, a stable sort, every slot unpacked into an
/// `Event` and written with `TraceWriter::write`.
fn round_before(buffers: &Buffers, syms: &[Symbol], version: u16) -> u64 {
    let mut out =
        TraceWriter::with_version(std::io::sink(), &header(), DEFAULT_CHUNK_BYTES, version)
            .expect("sink");
    for s in syms {
        out.define(s.clone());
    }
    let mut held = Vec::new();
    let mut heap = 0;
    for mut t in buffers.snapshot() {
        while let Some(slot) = t.take() {
            heap += slot.heap_bytes();
            held.push(slot);
        }
    }
    buffers.retire(heap);
    held.sort_by_key(Slot::time_ns);
    for (id, slot) in (1..).zip(held.drain(..)) {
        let mut e = slot.unpack();
        e.id = id;
        out.write(&e).expect("valid events");
    }
    out.flush().expect("sink");
    out.bytes_written()
}

fn writer(c: &mut Criterion) {
    let mut g = c.benchmark_group("writer");
    g.sample_size(20);
    let cases = [
        ("one_thread_args_off", 1, Shape::ArgsOff, 1),
        ("one_thread_args_off_v2", 1, Shape::ArgsOff, 2),
        ("one_thread_two_primitives", 1, Shape::TwoPrimitives, 1),
        ("four_threads_args_off", 4, Shape::ArgsOff, 1),
    ];
    for (name, threads, shape, version) in cases {
        let syms = symbols(threads);
        let mut seq = Sequencer::new();
        let n = {
            let (b, _p) = filled(threads, shape);
            let bytes = round(&b, &mut seq, &syms, version);
            let n = seq.next_id - 1;
            eprintln!("{name}: {n} events, {bytes} bytes");
            n
        };
        g.throughput(Throughput::Elements(n));
        g.bench_function(name, |b| {
            b.iter_batched(
                || filled(threads, shape),
                |input| {
                    black_box(round(&input.0, &mut seq, &syms, version));
                    input
                },
                BatchSize::PerIteration,
            )
        });
    }
    for (name, threads, shape) in [
        ("one_thread_args_off_before", 1, Shape::ArgsOff),
        ("four_threads_args_off_before", 4, Shape::ArgsOff),
    ] {
        let syms = symbols(threads);
        g.throughput(Throughput::Elements(EVENTS as u64 - 1));
        g.bench_function(name, |b| {
            b.iter_batched(
                || filled(threads, shape),
                |input| {
                    black_box(round_before(&input.0, &syms, 1));
                    input
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, writer);
criterion_main!(benches);
