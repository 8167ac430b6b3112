//! A synthetic but realistic method-trace recording, shared by the size
//! test and the benchmarks so that both measure the same stream.
//!
//! It imitates what the agent produces: several threads, each running a
//! random walk over a call stack of ~1000 methods (popular ones called far
//! more often, with ids unrelated to popularity), calls lasting from 100 ns
//! to several µs, and events handed to the writer in per-thread batches (the
//! agent drains per-thread buffers), with ids assigned in write order, so
//! times jump back and forth between batches.

use vmview_format::{
    Event, EventKind, MethodId, MethodSymbol, Outcome, StringId, Symbol, ThreadRef, ThreadSymbol,
};

/// A small deterministic random number generator (SplitMix64).
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Symbols and events of a recording, in write order.
pub struct Recording {
    pub symbols: Vec<Symbol>,
    pub events: Vec<Event>,
}

pub const METHODS: u32 = 1000;
pub const CLASSES: u32 = 150;
pub const THREADS: u32 = 6;

struct Thread {
    clock: u64,
    /// Open frames: (method, call time).
    stack: Vec<(u32, u64)>,
}

/// About `n_events` CALL and RETURN events (ending at a batch boundary).
pub fn realistic(n_events: usize, seed: u64) -> Recording {
    let mut rng = Rng(seed);
    let mut symbols = Vec::new();
    let mut next_string = 0u32;
    let mut string = |symbols: &mut Vec<Symbol>, text: String| {
        let id = StringId(next_string);
        next_string += 1;
        symbols.push(Symbol::String { id, text });
        id
    };
    let classes: Vec<StringId> = (0..CLASSES)
        .map(|c| {
            string(
                &mut symbols,
                format!("com.example.shop.module{}.Service{c}", c % 12),
            )
        })
        .collect();
    let sigs: Vec<StringId> = [
        "()V",
        "(I)I",
        "(Ljava/lang/String;)V",
        "(JJ)Z",
        "()Ljava/util/List;",
        "(Lcom/example/shop/Item;I)V",
    ]
    .iter()
    .map(|s| string(&mut symbols, s.to_string()))
    .collect();
    for m in 0..METHODS {
        let name = string(&mut symbols, format!("operation{m}"));
        symbols.push(Symbol::Method(MethodSymbol {
            id: MethodId(m),
            class: classes[(m % CLASSES) as usize],
            name,
            sig: sigs[(m % sigs.len() as u32) as usize],
            param_names: Vec::new(),
            modifiers: 1,
        }));
    }
    let group = string(&mut symbols, "main".into());
    for t in 0..THREADS {
        let name = string(&mut symbols, format!("worker-{t}"));
        symbols.push(Symbol::Thread(ThreadSymbol {
            id: ThreadRef(t),
            java_id: i64::from(t) + 20,
            name,
            group,
            priority: 5,
            daemon: false,
        }));
    }

    // Popularity rank → method id, so popular methods are not the small ids.
    let mut by_rank: Vec<u32> = (0..METHODS).collect();
    for i in (1..by_rank.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        by_rank.swap(i, j);
    }

    let mut threads: Vec<Thread> = (0..THREADS)
        .map(|t| Thread {
            clock: 1_000_000 + u64::from(t) * 777,
            stack: Vec::new(),
        })
        .collect();
    let mut events = Vec::with_capacity(n_events + 1000);
    let mut id = 1u64;
    while events.len() < n_events {
        let t = rng.below(u64::from(THREADS)) as u32;
        let th = &mut threads[t as usize];
        let batch = 200 + rng.below(800);
        for _ in 0..batch {
            // Log-uniform gap between consecutive events of a thread: 50 ns – 5 µs.
            th.clock += (50.0 * 100f64.powf(rng.unit())) as u64;
            let depth = th.stack.len() as u32;
            let p_call = (0.5 + (12.0 - f64::from(depth)) * 0.03).clamp(0.05, 0.95);
            let kind = if depth == 0 || rng.unit() < p_call {
                let rank = (f64::from(METHODS) * rng.unit().powi(3)) as usize;
                let m = by_rank[rank.min(METHODS as usize - 1)];
                th.stack.push((m, th.clock));
                EventKind::Call {
                    metrics: Default::default(),
                    method: MethodId(m),
                    depth: depth + 1,
                    caller: None,
                    params: Vec::new(),
                }
            } else {
                let (m, at) = th.stack.pop().unwrap_or((0, th.clock));
                EventKind::Return {
                    metrics: Default::default(),
                    method: MethodId(m),
                    depth,
                    outcome: Outcome::Void,
                    elapsed_ns: th.clock - at,
                }
            };
            events.push(Event {
                id,
                time_ns: th.clock,
                thread: ThreadRef(t),
                kind,
            });
            id += 1;
        }
    }
    Recording { symbols, events }
}
