//! End-to-end tests of `vmview`: real Java fixtures, compiled with `javac -g`,
//! recorded by the real agent, read back through the CLI. One test binary
//! (STYLE.md) keeps link time down on small machines.

mod support;

mod attach;
mod bci;
mod budget;
mod bytecode_trace;
mod calltree;
mod dataflow;
mod deep_stacks;
mod errors;
mod faults;
mod filter;
mod format_v2;
mod formats;
mod install;
mod jfr;
mod locks;
mod metrics;
mod monitors;
mod outputs;
mod periods;
mod reaction_servers;
mod reaction_timing;
mod reactions;
mod reading;
mod recording;
mod recovery;
mod report_regex;
mod sampling;
mod serve_limits;
mod timeline;
mod view;
mod vthreads;
mod weights;
mod xml;
