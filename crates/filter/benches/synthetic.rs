//! A synthetic trace for benchmarks: CALL/RETURN pairs with an int and a
//! String parameter on 8 threads over 64 methods of 16 classes, a THROW
//! with a message every 100 pairs, in format version 1 or 2. Deterministic
//! (xorshift).

use std::io::Write;

use vmview_format::{
    Event, EventKind, FormatError, Loc, MethodId, MethodSymbol, Outcome, StringId, Symbol,
    ThreadRef, ThreadSymbol, TraceHeader, TraceWriter, Value,
};

/// Writes about `pairs` CALL/RETURN pairs (plus a THROW per 100) to `out`.
#[allow(dead_code)] // Not every benchmark that includes this file uses each.
pub fn write<W: Write>(out: W, pairs: u64) -> Result<W, FormatError> {
    write_with(out, pairs, true)
}

/// Like [`write`]; without `args` the CALLs carry no parameter values
/// (what a trace of argument-less methods, or one recorded without
/// argument capture, decodes like).
#[allow(dead_code)]
pub fn write_with<W: Write>(out: W, pairs: u64, args: bool) -> Result<W, FormatError> {
    write_version(out, pairs, args, 1)
}

/// Like [`write_with`], in format `version` (1 or 2: version 2 keeps each
/// thread's events in a stream of its own and length-prefixes the CALL and
/// RETURN bodies, which a filter steps over with one varint).
#[allow(dead_code)] // Not every benchmark that includes this file writes v2.
pub fn write_version<W: Write>(
    out: W,
    pairs: u64,
    args: bool,
    version: u16,
) -> Result<W, FormatError> {
    let header = TraceHeader {
        version,
        pid: 1,
        start_unix_ns: 1_700_000_000_000_000_000,
        properties: vec![("jvm".into(), "synthetic".into())],
    };
    let mut w =
        TraceWriter::with_version(out, &header, vmview_format::DEFAULT_CHUNK_BYTES, version)?;
    let mut next = 0u32;
    let mut string = |w: &mut TraceWriter<W>, text: String| {
        let id = StringId(next);
        next += 1;
        w.define(Symbol::String { id, text });
        id
    };
    let group = string(&mut w, "main".into());
    for t in 0..8u32 {
        let name = string(&mut w, format!("pool-1-thread-{t}"));
        w.define(Symbol::Thread(ThreadSymbol {
            id: ThreadRef(t),
            java_id: i64::from(t) + 1,
            name,
            group,
            priority: 5,
            daemon: false,
        }));
    }
    let sig = if args {
        string(&mut w, "(ILjava/lang/String;)I".into())
    } else {
        string(&mut w, "()I".into())
    };
    let (qty, label) = (string(&mut w, "qty".into()), string(&mut w, "label".into()));
    let exc = string(&mut w, "java.lang.IllegalStateException".into());
    for m in 0..64u32 {
        let class = string(&mut w, format!("com.acme.shop.Service{}", m % 16));
        let name = string(&mut w, format!("handle{m}"));
        w.define(Symbol::Method(MethodSymbol {
            id: MethodId(m),
            class,
            name,
            sig,
            param_names: if args { vec![qty, label] } else { Vec::new() },
            modifiers: 1,
        }));
    }
    let (mut id, mut time) = (0u64, 0u64);
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for i in 0..pairs {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let thread = ThreadRef((rng % 8) as u32);
        let method = MethodId(((rng >> 8) % 64) as u32);
        let elapsed = (rng >> 20) % 2_000_000;
        id += 1;
        time += 100;
        w.write(&Event {
            id,
            time_ns: time,
            thread,
            kind: EventKind::Call {
                metrics: Default::default(),
                method,
                depth: 3,
                caller: None,
                params: if args {
                    vec![
                        Value::Int((rng % 1000) as i32),
                        Value::Str {
                            text: format!("order-{}", rng % 10_000),
                            full_len: None,
                        },
                    ]
                } else {
                    Vec::new()
                },
            },
        })?;
        if i % 100 == 99 {
            id += 1;
            w.write(&Event {
                id,
                time_ns: time + 1,
                thread,
                kind: EventKind::Throw {
                    exception: exc,
                    message: Some(format!("timeout after {} ms", rng % 100)),
                    method,
                    loc: Loc {
                        bci: 12,
                        line: Some(40),
                    },
                    catch: None,
                },
            })?;
        }
        id += 1;
        time += elapsed;
        w.write(&Event {
            id,
            time_ns: time,
            thread,
            kind: EventKind::Return {
                metrics: Default::default(),
                method,
                depth: 3,
                outcome: Outcome::Value(Value::Int((rng % 7) as i32)),
                elapsed_ns: elapsed,
            },
        })?;
    }
    w.finish()
}
