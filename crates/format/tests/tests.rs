//! The format crate's integration tests, in one binary to keep link time
//! down (see STYLE.md).

mod chunks;
mod example;
mod fast_path;
mod invariants;
mod recovery;
mod round_trip;
mod scan;
mod size;
mod stream;
mod support;
mod v2;
