//! Analyses over vmview event streams.
//!
//! Everything here is a pure consumer: it is fed events (with the symbol
//! table that names their handles) and never opens a file, so the same code
//! serves the CLI, tests with hand-built streams and any future front end.
//! Each analysis implements [`EventSink`], the one seam between whatever
//! produces events (a `TraceReader`, a filter) and whatever consumes them.

#![forbid(unsafe_code)]

pub mod budget;
pub mod calltree;
pub mod dataflow;
pub mod frameworks;
pub mod latency;
pub mod locks;
pub mod reactions;
pub mod stats;

use vmview_format::{Event, SymbolTable};

pub use reactions::{ReactionConfig, ReactionTrie, Reactions};
pub use stats::{ExceptionStats, MethodStats, MonitorStats, StatsBuilder, ThreadStats, TraceStats};

/// A consumer of an event stream.
///
/// Events arrive in trace order. `syms` resolves every handle in `ev` (it
/// may grow between calls as the reader meets new symbol records; handles
/// never change meaning).
pub trait EventSink {
    fn event(&mut self, ev: &Event, syms: &SymbolTable);
}
