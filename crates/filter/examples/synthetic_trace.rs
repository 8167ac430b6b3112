//! Writes a synthetic trace for measuring filters, exports and `--around`
//! on large inputs: `cargo run --release -p vmview-filter --example
//! synthetic_trace -- OUT.vmv PAIRS [VERSION]` (about 2 × PAIRS events;
//! format version 1 unless VERSION is 2).

#[path = "../benches/synthetic.rs"]
mod synthetic;

use std::io::BufWriter;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(out), Some(pairs)) = (args.next(), args.next()) else {
        return Err("usage: synthetic_trace OUT.vmv PAIRS [VERSION]".into());
    };
    let pairs: u64 = pairs.parse()?;
    let version: u16 = args.next().map_or(Ok(1), |v| v.parse())?;
    let f = BufWriter::with_capacity(1 << 20, std::fs::File::create(&out)?);
    synthetic::write_version(f, pairs, true, version)?;
    Ok(())
}
