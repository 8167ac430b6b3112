//! Java Flight Recorder recordings (`.jfr`) read as vmview traces.
//!
//! Teams already record JFR in production; reading those files lets every
//! vmview analysis (reactions, lock waits net of GC, calltree, filter) run
//! on them without a new recording. The reader is written for this crate
//! rather than taken from a general JFR library so that it streams a chunk
//! at a time with memory bounded by the chunk, and so that a damaged or
//! cut file yields what could be read plus a diagnostic saying where and
//! why it stopped, never a panic.
//!
//! Code map: `wire.rs` the primitive encodings (LEB128 integers, strings),
//! `chunk.rs` one chunk decoded generically from its metadata (types,
//! constant pools, events as value trees), `reader.rs` the mapping onto
//! vmview's events and symbols, chunk after chunk, `waits.rs` the wait
//! samples made from JFR's duration events (for `reactions`).

#![forbid(unsafe_code)]

pub mod chunk;
mod reader;
pub mod waits;
pub mod wire;

pub use reader::{is_jfr, JfrError, JfrOptions, JfrReader};
pub use waits::{PeriodSource, WaitSampleStats, WAIT_EVENTS};
