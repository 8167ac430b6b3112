//! The server's time for each `/api/timeline` answer, in process (no
//! HTTP, no trace file): an index built the way `vmview serve` builds the
//! serve benchmark's synthetic trace's (`crates/filter/benches/synthetic.rs`:
//! CALL/RETURN pairs of up to 2 ms on 8 threads, a THROW per 100 pairs),
//! then each zoom step from the whole trace to 1 µs around its middle (4×
//! a step, 1,200 px): the time of the answer's text as the server sends
//! it (`Timeline::query_text`), the fastest of 3, as wall time and as the
//! thread's CPU time (`/proc/thread-self/schedstat`: on a loaded machine
//! the wall time counts the waits for a core too). Harness benchmark: one
//! line per step.
//!
//! ```text
//! VMVIEW_BENCH_PAIRS=250000000 cargo bench -p vmview-view --bench timeline_query
//! ```

use std::time::Instant;

use vmview_format::{
    Event, EventKind, Loc, MethodId, MethodSymbol, StringId, Symbol, SymbolTable, ThreadRef,
};
use vmview_view::timeline::{Limits, TimelineBuilder, View};

/// This thread's CPU time so far, in seconds (0 where Linux does not say).
fn cpu() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

fn main() {
    let pairs: u64 = std::env::var("VMVIEW_BENCH_PAIRS")
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(250_000_000);
    let t = Instant::now();
    let mut b = TimelineBuilder::new(Limits::default());
    let (mut id, mut time) = (0u64, 0u64);
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for i in 0..pairs {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let thread = (rng % 8) as u32;
        let method = ((rng >> 8) % 64) as u32;
        let elapsed = (rng >> 20) % 2_000_000;
        id += 1;
        time += 100;
        b.call(thread, time, id, method);
        if i % 100 == 99 {
            id += 1;
            b.event(&Event {
                id,
                time_ns: time + 1,
                thread: ThreadRef(thread),
                kind: EventKind::Throw {
                    exception: StringId(0),
                    message: None,
                    method: MethodId(method),
                    loc: Loc::default(),
                    catch: None,
                },
            });
        }
        id += 1;
        time += elapsed;
        b.ret(thread, time, id, method);
    }
    let mut syms = SymbolTable::default();
    syms.insert(Symbol::String {
        id: StringId(0),
        text: "java.lang.IllegalStateException".into(),
    });
    for m in 0..64 {
        syms.insert(Symbol::Method(MethodSymbol {
            id: MethodId(m),
            class: StringId(0),
            name: StringId(0),
            sig: StringId(0),
            param_names: vec![],
            modifiers: 1,
        }));
    }
    let tl = b.finish(&syms);
    let end = tl.end_ns();
    println!(
        "{pairs} pairs indexed in {:.1} s; load average {}",
        t.elapsed().as_secs_f64(),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    println!("| span (ns) | answer (wall) | answer (CPU) | bytes |");
    println!("|---|---|---|---|");
    let mut span = end + 1;
    let (mut worst, mut worst_cpu) = (0f64, 0f64);
    while span >= 1_000 {
        let from = (end / 2).saturating_sub(span / 2);
        let view = View {
            from,
            to: from + span,
            px: 1200,
        };
        // The fastest of 3, as a quiet machine would give.
        let (mut best, mut best_cpu, mut bytes) = (f64::MAX, f64::MAX, 0);
        for _ in 0..3 {
            let (t, c) = (Instant::now(), cpu());
            let s = tl.query_text(view, &[]);
            best = best.min(t.elapsed().as_secs_f64());
            best_cpu = best_cpu.min(cpu() - c);
            bytes = s.len();
        }
        worst = worst.max(best);
        worst_cpu = worst_cpu.max(best_cpu);
        println!(
            "| {span} | {:.2} ms | {:.2} ms | {bytes} |",
            best * 1e3,
            best_cpu * 1e3
        );
        span /= 4;
    }
    println!(
        "slowest: {:.2} ms wall, {:.2} ms CPU",
        worst * 1e3,
        worst_cpu * 1e3
    );
}
