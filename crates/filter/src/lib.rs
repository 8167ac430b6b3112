//! vmview's filter language: predicates over events, evaluated while a
//! trace streams past.
//!
//! VMView's users filtered their XML traces with regular expressions over
//! several fields and several event types at once, because an unfiltered
//! trace was too large to read. This crate is that filter for vmview's
//! event model: an expression such as
//!
//! ```text
//! type in [CALL, RETURN] && class ~ "^shop\\." && elapsed_ns > 1ms
//! ```
//!
//! is parsed once ([`EventFilter::parse`], with errors that point at the
//! column), compiled against the field table ([`fields`]: the JSON Lines
//! keys, and VMView's XML element names as aliases), and evaluated per event
//! by [`EventFilter::matches`]. Memory does not grow with the trace: the
//! only state is a verdict cache per distinct symbol, so a regular
//! expression over class, method or thread names runs once per name, not
//! once per event.
//!
//! [`SubsetWriter`] writes the selected events as a binary trace that keeps
//! their original ids (so `vmview show ORIGINAL --around ID` finds them),
//! copying only the symbol records they use.
//!
//! This is its own crate, not a module of `vmview-analysis`, so that the
//! `regex` dependency and the language stay out of analyses that have no
//! use for them.

#![forbid(unsafe_code)]

mod eval;
pub mod fields;
mod merge;
mod parse;
mod subset;

pub use eval::EventFilter;
pub use merge::MergeWriter;
pub use parse::{ParseError, MAX_NESTING};
pub use subset::SubsetWriter;
