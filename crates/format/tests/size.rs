//! The compactness target: a CALL+RETURN pair without arguments takes at
//! most 12 bytes on a realistic stream, everything included (file header,
//! chunk headers, symbol records re-emitted in every chunk, footer).

use crate::stream::realistic;
use crate::support::{header, read};
use vmview_format::*;

#[test]
fn call_return_pair_takes_at_most_12_bytes_on_a_realistic_stream() {
    let rec = realistic(2_000_000, 11);
    let mut w = TraceWriter::new(Vec::new(), &header()).expect("header");
    for s in &rec.symbols {
        w.define(s.clone());
    }
    for e in &rec.events {
        w.write(e).expect("write");
    }
    let bytes = w.finish().expect("finish");
    let pairs = rec.events.len() as f64 / 2.0;
    let per_pair = bytes.len() as f64 / pairs;
    println!(
        "{} events in {} chunks: {} bytes, {per_pair:.2} bytes per CALL+RETURN pair",
        rec.events.len(),
        TraceReader::new(std::io::Cursor::new(&bytes))
            .expect("trace")
            .index()
            .expect("index")
            .chunks
            .len(),
        bytes.len()
    );
    assert!(per_pair <= 12.0, "{per_pair:.2} bytes per pair");
    // And it all reads back.
    let (back, diags, _) = read(&bytes);
    assert_eq!(diags, vec![]);
    assert!(back == rec.events, "the realistic stream round-trips");
}
