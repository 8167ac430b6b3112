//! The 40-byte form an event takes in a thread buffer.
//!
//! An [`Event`] is 88 bytes, most of them for rare kinds. Buffers are
//! written on one core and read on another, so every cache line of a
//! block crosses between cores twice per use: the bytes per event are the
//! cost of the push. A [`Slot`] holds a CALL without arguments and a
//! RETURN with no value, a primitive, null, an array or an object (class
//! and hash) in 40 bytes, and with `metrics=` a CALL without arguments and
//! a RETURN without a value (elapsed under 4.3 s), and a CALL with other
//! arguments in 40 bytes and one block of encoded values; any other event
//! is boxed.

use vmview_format::{
    Event, EventKind, FormatError, MethodId, Metrics, Outcome, StringId, ThreadRef, TraceWriter,
    Value,
};

/// Highest depth a small slot holds (a deeper event is boxed): the top
/// byte of `depth_tag` is the tag.
const MAX_DEPTH: u32 = 0x00FF_FFFF;

const CALL: u32 = 0;
const RETURN_VOID: u32 = 1;
const RETURN_UNAVAILABLE: u32 = 2;
const RETURN_EXCEPTION: u32 = 3;
const RETURN_NULL: u32 = 4;
const RETURN_BOOLEAN: u32 = 5;
const RETURN_BYTE: u32 = 6;
const RETURN_CHAR: u32 = 7;
const RETURN_SHORT: u32 = 8;
const RETURN_INT: u32 = 9;
const RETURN_LONG: u32 = 10;
const RETURN_FLOAT: u32 = 11;
const RETURN_DOUBLE: u32 = 12;
const RETURN_OBJECT: u32 = 13;
const RETURN_ARRAY: u32 = 14;
/// `boxed` is a `Box<Event>` (`Box::into_raw`).
const BOXED: u32 = 15;
/// A CALL with argument values, encoded into one heap block
/// ([`encode_params`]): its pointer, length and the number of values in
/// `elapsed_or_box`, `value` and `class`. No `Vec<Value>` and no `String`
/// per string argument that the calling thread allocates and the writer
/// frees (each such allocation misses the calling thread's malloc cache);
/// a short block is reused ([`spare`]).
const CALL_PARAMS: u32 = 16;
/// A CALL without arguments but with metrics (`metrics=`): the CPU time
/// in `elapsed_or_box`, the allocated bytes in `value`, [`ABSENT`] for one
/// not measured.
const CALL_METRICS: u32 = 17;
/// A RETURN of `void` (or with the value not captured, for
/// RETURN_UNAVAILABLE_METRICS) with metrics: CPU time and allocated bytes
/// as in CALL_METRICS, the elapsed ns (below 2^32) in `class`.
const RETURN_VOID_METRICS: u32 = 18;
const RETURN_UNAVAILABLE_METRICS: u32 = 19;
/// A CALL with one or two argument values that own no heap (primitives,
/// null, objects and arrays by class and hash or length): the values'
/// bits in `elapsed_or_box` and `value`, [`value_bits`]; their count in
/// the low byte of `class`, their kinds (RETURN_* tags) in the next two.
/// The call path's form of `step(long, int)`: no `Vec` allocated on the
/// calling thread and freed on the writer's.
const CALL_ARGS: u32 = 20;
/// A metric not measured, in a slot: no thread runs 584 years or
/// allocates 16 EiB.
const ABSENT: u64 = u64::MAX;

pub struct Slot {
    time_ns: u64,
    /// Elapsed ns of a RETURN, or the boxed event.
    elapsed_or_box: u64,
    /// A returned value's bits (primitive, hash, array length).
    value: u64,
    method: u32,
    thread: u32,
    depth_tag: u32,
    /// Class of a returned object or array, or of the exception.
    class: u32,
}

// SAFETY: the boxed event is owned by the slot, and `Event` is Send.
unsafe impl Send for Slot {}

impl Drop for Slot {
    fn drop(&mut self) {
        match self.tag() {
            // SAFETY: made by `Box::into_raw` in `pack`, and `unpack`
            // (which takes it back) forgets the slot.
            BOXED => drop(unsafe { Box::from_raw(self.elapsed_or_box as *mut Event) }),
            // SAFETY: the parts of a vector `pack` forgot; as above.
            CALL_PARAMS => give_back(unsafe { self.params() }),
            _ => {}
        }
    }
}

impl Slot {
    /// The event's time, for ordering slots before they are unpacked.
    pub fn time_ns(&self) -> u64 {
        self.time_ns
    }

    fn tag(&self) -> u32 {
        self.depth_tag >> 24
    }

    /// Whether this is the calibration's own work, never to be written nor
    /// counted: its timed CALL/RETURN of `method`, or the CALIBRATION
    /// record itself (a small `buffer=` can drop it, and the recording's
    /// drop count must not include it).
    pub fn is_calibration(&self, method: MethodId) -> bool {
        if self.is_call_of(method) {
            return true;
        }
        if self.tag() != BOXED {
            return false;
        }
        // SAFETY: as in `Drop`: a live box made by `pack`.
        let ev = unsafe { &*(self.elapsed_or_box as *const Event) };
        matches!(ev.kind, EventKind::Calibration { .. })
    }

    /// Whether this is a CALL or RETURN of `method` (the writer drops the
    /// calibration's).
    pub fn is_call_of(&self, method: MethodId) -> bool {
        match self.tag() {
            BOXED => {
                // SAFETY: as in `Drop`: a live box made by `pack`.
                let ev = unsafe { &*(self.elapsed_or_box as *const Event) };
                matches!(
                    &ev.kind,
                    EventKind::Call { method: m, .. } | EventKind::Return { method: m, .. }
                        if *m == method
                )
            }
            _ => self.method == method.0,
        }
    }

    /// The encoded argument values of a CALL_PARAMS slot.
    ///
    /// # Safety
    /// Once only: the box owns the allocation afterwards.
    unsafe fn params(&self) -> Box<[u8]> {
        let bytes =
            std::ptr::slice_from_raw_parts_mut(self.elapsed_or_box as *mut u8, self.value as usize);
        // SAFETY: made by `Box::into_raw` in `call_params`.
        unsafe { Box::from_raw(bytes) }
    }

    /// The argument values of a CALL_PARAMS slot, decoded; the block goes
    /// back for reuse.
    ///
    /// # Safety
    /// As [`params`](Slot::params): once only, and the slot is not
    /// dropped afterwards.
    unsafe fn take_params(&self) -> Vec<Value> {
        // SAFETY: passed on to the caller.
        let block = unsafe { self.params() };
        let params = decode_params(&block, self.class as usize);
        give_back(block);
        params
    }

    /// Heap bytes the slot holds beyond its own 40: a boxed event and
    /// its parts, or the encoded arguments.
    pub fn heap_bytes(&self) -> u64 {
        if self.tag() == CALL_PARAMS {
            return self.value;
        }
        if self.tag() != BOXED {
            return 0;
        }
        // SAFETY: a boxed slot's pointer is live until it is dropped or
        // unpacked.
        let ev = unsafe { &*(self.elapsed_or_box as *const Event) };
        std::mem::size_of::<Event>() as u64 + heap_parts(ev)
    }

    /// The slot of a CALL without arguments, caller or metrics, unless
    /// `depth` is too deep for one. The call path's fast path: no
    /// [`Event`] is built.
    #[inline]
    pub fn small_call(
        time_ns: u64,
        thread: ThreadRef,
        method: MethodId,
        depth: u32,
    ) -> Option<Slot> {
        (depth <= MAX_DEPTH).then_some(Slot {
            time_ns,
            elapsed_or_box: 0,
            value: 0,
            method: method.0,
            thread: thread.0,
            depth_tag: depth | CALL << 24,
            class: 0,
        })
    }

    /// The slot of a CALL with one or two argument values that own no heap
    /// and no caller or metrics ([`CALL_ARGS`]), unless they do not fit
    /// (more values, a string or boxed value, too deep).
    #[inline]
    pub fn small_call_args(
        time_ns: u64,
        thread: ThreadRef,
        method: MethodId,
        depth: u32,
        args: &[Value],
    ) -> Option<Slot> {
        if depth > MAX_DEPTH || args.is_empty() || args.len() > 2 {
            return None;
        }
        let mut bits = [0u64; 2];
        let mut kinds = args.len() as u32;
        for (i, v) in args.iter().enumerate() {
            let (kind, b) = value_bits(v)?;
            bits[i] = b;
            kinds |= kind << (8 + 8 * i);
        }
        Some(Slot {
            time_ns,
            elapsed_or_box: bits[0],
            value: bits[1],
            method: method.0,
            thread: thread.0,
            depth_tag: depth | CALL_ARGS << 24,
            class: kinds,
        })
    }

    /// The slot of a CALL with argument values `args` (any number, any
    /// kind) and no caller or metrics ([`CALL_PARAMS`]), unless `depth` is
    /// too deep for one. The values are copied: `args` keeps them (and the
    /// calling thread frees them).
    pub fn call_params(
        time_ns: u64,
        thread: ThreadRef,
        method: MethodId,
        depth: u32,
        args: &[Value],
    ) -> Option<Slot> {
        if depth > MAX_DEPTH {
            return None;
        }
        let bytes = Box::into_raw(encode_params(args));
        Some(Slot {
            time_ns,
            elapsed_or_box: bytes as *mut u8 as u64,
            value: bytes.len() as u64,
            method: method.0,
            thread: thread.0,
            depth_tag: depth | CALL_PARAMS << 24,
            class: args.len() as u32,
        })
    }

    /// The slot of a RETURN without metrics, unless its value needs a box
    /// (a string, a boxed primitive) or `depth` is too deep for one.
    #[inline]
    pub fn small_return(
        time_ns: u64,
        thread: ThreadRef,
        method: MethodId,
        depth: u32,
        elapsed_ns: u64,
        outcome: &Outcome,
    ) -> Option<Slot> {
        let (tag, value, class) = match outcome {
            Outcome::Void => (RETURN_VOID, 0, 0),
            Outcome::Exception { class } => (RETURN_EXCEPTION, 0, class.0),
            Outcome::Value(v) => match *v {
                Value::Unavailable => (RETURN_UNAVAILABLE, 0, 0),
                Value::Null => (RETURN_NULL, 0, 0),
                Value::Boolean(b) => (RETURN_BOOLEAN, u64::from(b), 0),
                Value::Byte(b) => (RETURN_BYTE, b as u8 as u64, 0),
                Value::Char(c) => (RETURN_CHAR, u64::from(c), 0),
                Value::Short(s) => (RETURN_SHORT, s as u16 as u64, 0),
                Value::Int(i) => (RETURN_INT, i as u32 as u64, 0),
                Value::Long(l) => (RETURN_LONG, l as u64, 0),
                Value::Float(f) => (RETURN_FLOAT, u64::from(f.to_bits()), 0),
                Value::Double(d) => (RETURN_DOUBLE, d.to_bits(), 0),
                Value::Object { class, hash } => (RETURN_OBJECT, u64::from(hash), class.0),
                Value::Array { class, length } => (RETURN_ARRAY, u64::from(length), class.0),
                Value::Str { .. } | Value::Boxed { .. } => return None,
            },
        };
        (depth <= MAX_DEPTH).then_some(Slot {
            time_ns,
            elapsed_or_box: elapsed_ns,
            value,
            method: method.0,
            thread: thread.0,
            depth_tag: depth | tag << 24,
            class,
        })
    }

    /// The slot of `ev` (its id is not kept: the writer numbers events).
    pub fn pack(ev: Event) -> Slot {
        let small = |tag: u32, method: MethodId, depth: u32| Slot {
            time_ns: ev.time_ns,
            elapsed_or_box: 0,
            value: 0,
            method: method.0,
            thread: ev.thread.0,
            depth_tag: depth.min(MAX_DEPTH) | tag << 24,
            class: 0,
        };
        match &ev.kind {
            EventKind::Call {
                method,
                depth,
                caller: None,
                params,
                metrics,
            } if params.is_empty() && *depth <= MAX_DEPTH => {
                if no_metrics(metrics) {
                    return small(CALL, *method, *depth);
                }
                if let Some((cpu, alloc)) = slot_metrics(metrics) {
                    let mut s = small(CALL_METRICS, *method, *depth);
                    s.elapsed_or_box = cpu;
                    s.value = alloc;
                    return s;
                }
            }
            EventKind::Call {
                method,
                depth,
                caller: None,
                metrics,
                ..
            } if *depth <= MAX_DEPTH && no_metrics(metrics) => {
                let EventKind::Call { params, .. } = &ev.kind else {
                    unreachable!("matched above")
                };
                if let Some(s) =
                    Slot::small_call_args(ev.time_ns, ev.thread, *method, *depth, params)
                {
                    return s;
                }
                if let Some(s) = Slot::call_params(ev.time_ns, ev.thread, *method, *depth, params) {
                    return s;
                }
            }
            EventKind::Return {
                method,
                depth,
                outcome,
                elapsed_ns,
                metrics,
            } if no_metrics(metrics) => {
                if let Some(s) =
                    Slot::small_return(ev.time_ns, ev.thread, *method, *depth, *elapsed_ns, outcome)
                {
                    return s;
                }
            }
            EventKind::Return {
                method,
                depth,
                outcome: outcome @ (Outcome::Void | Outcome::Value(Value::Unavailable)),
                elapsed_ns,
                metrics,
            } if *depth <= MAX_DEPTH && *elapsed_ns <= u64::from(u32::MAX) => {
                if let Some((cpu, alloc)) = slot_metrics(metrics) {
                    let tag = match outcome {
                        Outcome::Void => RETURN_VOID_METRICS,
                        _ => RETURN_UNAVAILABLE_METRICS,
                    };
                    let mut s = small(tag, *method, *depth);
                    s.elapsed_or_box = cpu;
                    s.value = alloc;
                    s.class = *elapsed_ns as u32;
                    return s;
                }
            }
            _ => {}
        }
        let (time_ns, thread) = (ev.time_ns, ev.thread.0);
        Slot {
            time_ns,
            elapsed_or_box: Box::into_raw(Box::new(ev)) as u64,
            value: 0,
            method: 0,
            thread,
            depth_tag: BOXED << 24,
            class: 0,
        }
    }

    /// The event again (id 0).
    pub fn unpack(self) -> Event {
        let slot = std::mem::ManuallyDrop::new(self);
        let tag = slot.tag();
        if tag == BOXED {
            // SAFETY: see `Drop`; the slot is not dropped after this.
            return *unsafe { Box::from_raw(slot.elapsed_or_box as *mut Event) };
        }
        let method = MethodId(slot.method);
        let depth = slot.depth_tag & MAX_DEPTH;
        if tag == CALL_ARGS {
            let n = (slot.class & 0xff) as usize;
            let params = [slot.elapsed_or_box, slot.value]
                .iter()
                .take(n)
                .enumerate()
                .map(|(i, &b)| value_from_bits((slot.class >> (8 + 8 * i)) & 0xff, b))
                .collect();
            return Event {
                id: 0,
                time_ns: slot.time_ns,
                thread: ThreadRef(slot.thread),
                kind: EventKind::Call {
                    method,
                    depth,
                    caller: None,
                    params,
                    metrics: Metrics::NONE,
                },
            };
        }
        if tag == CALL_PARAMS {
            // SAFETY: the slot is not dropped after this.
            let params = unsafe { slot.take_params() };
            return Event {
                id: 0,
                time_ns: slot.time_ns,
                thread: ThreadRef(slot.thread),
                kind: EventKind::Call {
                    method,
                    depth,
                    caller: None,
                    params,
                    metrics: Metrics::NONE,
                },
            };
        }
        let metric = |v: u64| (v != ABSENT).then_some(v);
        let metrics = Metrics {
            cpu_ns: metric(slot.elapsed_or_box),
            alloc_bytes: metric(slot.value),
        };
        match tag {
            CALL_METRICS => {
                return Event {
                    id: 0,
                    time_ns: slot.time_ns,
                    thread: ThreadRef(slot.thread),
                    kind: EventKind::Call {
                        method,
                        depth,
                        caller: None,
                        params: Vec::new(),
                        metrics,
                    },
                }
            }
            RETURN_VOID_METRICS | RETURN_UNAVAILABLE_METRICS => {
                return Event {
                    id: 0,
                    time_ns: slot.time_ns,
                    thread: ThreadRef(slot.thread),
                    kind: EventKind::Return {
                        method,
                        depth,
                        outcome: if tag == RETURN_VOID_METRICS {
                            Outcome::Void
                        } else {
                            Outcome::Value(Value::Unavailable)
                        },
                        elapsed_ns: u64::from(slot.class),
                        metrics,
                    },
                }
            }
            _ => {}
        }
        let kind = if tag == CALL {
            EventKind::Call {
                method,
                depth,
                caller: None,
                params: Vec::new(),
                metrics: Metrics::NONE,
            }
        } else {
            EventKind::Return {
                method,
                depth,
                outcome: slot.small_outcome(tag),
                elapsed_ns: slot.elapsed_or_box,
                metrics: Metrics::NONE,
            }
        };
        Event {
            id: 0,
            time_ns: slot.time_ns,
            thread: ThreadRef(slot.thread),
            kind,
        }
    }

    /// The outcome of a RETURN slot of tag RETURN_VOID to RETURN_ARRAY.
    #[inline]
    fn small_outcome(&self, tag: u32) -> Outcome {
        let v = self.value;
        let class = StringId(self.class);
        match tag {
            RETURN_VOID => Outcome::Void,
            RETURN_EXCEPTION => Outcome::Exception { class },
            _ => Outcome::Value(match tag {
                RETURN_NULL => Value::Null,
                RETURN_BOOLEAN => Value::Boolean(v != 0),
                RETURN_BYTE => Value::Byte(v as u8 as i8),
                RETURN_CHAR => Value::Char(v as u16),
                RETURN_SHORT => Value::Short(v as u16 as i16),
                RETURN_INT => Value::Int(v as u32 as i32),
                RETURN_LONG => Value::Long(v as i64),
                RETURN_FLOAT => Value::Float(f32::from_bits(v as u32)),
                RETURN_DOUBLE => Value::Double(f64::from_bits(v)),
                RETURN_OBJECT => Value::Object {
                    class,
                    hash: v as u32,
                },
                RETURN_ARRAY => Value::Array {
                    class,
                    length: v as u32,
                },
                _ => Value::Unavailable,
            }),
        }
    }

    /// Writes the event as number `id`, its time counted from `origin`
    /// (saturating). A CALL (with its arguments) or RETURN of a small
    /// slot, and a CALL of encoded arguments, go straight from the slot's
    /// fields to the trace writer (no [`Event`] built); any other is
    /// unpacked. Says what was written, for `adapt=`.
    #[inline]
    pub fn write_to<W: std::io::Write>(
        self,
        id: u64,
        origin: u64,
        out: &mut TraceWriter<W>,
    ) -> Result<Written, FormatError> {
        let tag = self.tag();
        let time_ns = self.time_ns.saturating_sub(origin);
        let (thread, method) = (ThreadRef(self.thread), MethodId(self.method));
        let depth = self.depth_tag & MAX_DEPTH;
        if tag == CALL {
            out.write_call(id, time_ns, thread, method, depth)?;
            return Ok(Written::Call { depth });
        }
        if (RETURN_VOID..=RETURN_ARRAY).contains(&tag) {
            let outcome = self.small_outcome(tag);
            out.write_return(
                id,
                time_ns,
                thread,
                method,
                depth,
                self.elapsed_or_box,
                &outcome,
            )?;
            return Ok(Written::Return);
        }
        if tag == CALL_ARGS {
            // The values on the stack: no `Event`, no `Vec`.
            let n = ((self.class & 0xff) as usize).min(2);
            let values = [
                value_from_bits((self.class >> 8) & 0xff, self.elapsed_or_box),
                value_from_bits((self.class >> 16) & 0xff, self.value),
            ];
            out.write_call_args(id, time_ns, thread, method, depth, &values[..n])?;
            return Ok(Written::Call { depth });
        }
        if tag == CALL_PARAMS {
            let slot = std::mem::ManuallyDrop::new(self);
            // SAFETY: the slot is not dropped after this.
            let params = unsafe { slot.take_params() };
            out.write_call_args(id, time_ns, thread, method, depth, &params)?;
            return Ok(Written::Call { depth });
        }
        let mut e = self.unpack();
        e.id = id;
        e.time_ns = time_ns;
        out.write(&e)?;
        Ok(match e.kind {
            EventKind::Call { depth, .. } => Written::Call { depth },
            EventKind::Return { .. } => Written::Return,
            _ => Written::Other,
        })
    }
}

/// What [`Slot::write_to`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    Call { depth: u32 },
    Return,
    Other,
}

/// An argument value that owns no heap as a kind (its RETURN_* tag) and
/// 64 bits: an object or array's class in the high half, its hash or
/// length in the low one.
#[inline]
fn value_bits(v: &Value) -> Option<(u32, u64)> {
    Some(match *v {
        Value::Unavailable => (RETURN_UNAVAILABLE, 0),
        Value::Null => (RETURN_NULL, 0),
        Value::Boolean(b) => (RETURN_BOOLEAN, u64::from(b)),
        Value::Byte(b) => (RETURN_BYTE, b as u8 as u64),
        Value::Char(c) => (RETURN_CHAR, u64::from(c)),
        Value::Short(s) => (RETURN_SHORT, s as u16 as u64),
        Value::Int(i) => (RETURN_INT, i as u32 as u64),
        Value::Long(l) => (RETURN_LONG, l as u64),
        Value::Float(f) => (RETURN_FLOAT, u64::from(f.to_bits())),
        Value::Double(d) => (RETURN_DOUBLE, d.to_bits()),
        Value::Object { class, hash } => {
            (RETURN_OBJECT, u64::from(class.0) << 32 | u64::from(hash))
        }
        Value::Array { class, length } => {
            (RETURN_ARRAY, u64::from(class.0) << 32 | u64::from(length))
        }
        Value::Str { .. } | Value::Boxed { .. } => return None,
    })
}

/// The value of [`value_bits`] again.
fn value_from_bits(kind: u32, v: u64) -> Value {
    let (class, low) = (StringId((v >> 32) as u32), v as u32);
    match kind {
        RETURN_NULL => Value::Null,
        RETURN_BOOLEAN => Value::Boolean(v != 0),
        RETURN_BYTE => Value::Byte(v as u8 as i8),
        RETURN_CHAR => Value::Char(v as u16),
        RETURN_SHORT => Value::Short(v as u16 as i16),
        RETURN_INT => Value::Int(v as u32 as i32),
        RETURN_LONG => Value::Long(v as i64),
        RETURN_FLOAT => Value::Float(f32::from_bits(v as u32)),
        RETURN_DOUBLE => Value::Double(f64::from_bits(v)),
        RETURN_OBJECT => Value::Object { class, hash: low },
        RETURN_ARRAY => Value::Array { class, length: low },
        _ => Value::Unavailable,
    }
}

/// A string in [`encode_params`]: `full_len` (u32, [`NO_FULL_LEN`]
/// for none), the UTF-8 length (u32), the bytes.
const PARAM_STR: u8 = 0xF0;
/// A boxed primitive in [`encode_params`]: its class (u32), then its
/// value, encoded.
const PARAM_BOXED: u8 = 0xF1;
/// `full_len` of a string that was not cut (no Java string has 2^32 - 1
/// characters).
const NO_FULL_LEN: u32 = u32::MAX;

/// The bytes [`encode_params`] writes for `v`.
fn param_len(v: &Value) -> usize {
    match v {
        Value::Str { text, .. } => 9 + text.len(),
        Value::Boxed { value, .. } => 5 + param_len(value),
        _ => 9,
    }
}

/// Argument values as one block: per value a kind byte (the
/// [`value_bits`] kind, [`PARAM_STR`] or [`PARAM_BOXED`]) and its bits,
/// little-endian; [`decode_params`] reads them back. A block of up to
/// [`spare::BYTES`] is a reused one of exactly that size (the rest is
/// not read), a longer one is allocated to size.
fn encode_params(args: &[Value]) -> Box<[u8]> {
    fn put(out: &mut [u8], at: &mut usize, v: &Value) {
        let mut bytes = |b: &[u8]| {
            out[*at..*at + b.len()].copy_from_slice(b);
            *at += b.len();
        };
        match v {
            Value::Str { text, full_len } => {
                bytes(&[PARAM_STR]);
                bytes(&full_len.unwrap_or(NO_FULL_LEN).to_le_bytes());
                bytes(&(text.len() as u32).to_le_bytes());
                bytes(text.as_bytes());
            }
            Value::Boxed { class, value } => {
                bytes(&[PARAM_BOXED]);
                bytes(&class.0.to_le_bytes());
                put(out, at, value);
            }
            v => {
                let (kind, bits) = value_bits(v).unwrap_or((RETURN_UNAVAILABLE, 0));
                bytes(&[kind as u8]);
                bytes(&bits.to_le_bytes());
            }
        }
    }
    let len: usize = args.iter().map(param_len).sum();
    let mut out = if len <= spare::BYTES {
        spare::take()
    } else {
        vec![0; len].into_boxed_slice()
    };
    let mut at = 0;
    for v in args {
        put(&mut out, &mut at, v);
    }
    out
}

/// Blocks of [`encode_params`] of [`BYTES`](spare::BYTES), reused: the
/// calling thread takes them and the writer gives them back, so that the
/// call path allocates nothing that another thread frees (such an
/// allocation always takes malloc's slow path). Each thread keeps a few
/// ([`LOCAL_MAX`]) and moves them to and from one shared list
/// ([`SHARED_MAX`], 1 MiB at most) [`MOVE`] at a time: one lock per
/// `MOVE` calls.
mod spare {
    use std::cell::RefCell;
    use std::sync::Mutex;

    pub const BYTES: usize = 64;
    const LOCAL_MAX: usize = 128;
    const MOVE: usize = 64;
    const SHARED_MAX: usize = 16384;

    static SHARED: Mutex<Vec<Box<[u8]>>> = Mutex::new(Vec::new());

    thread_local! {
        static LOCAL: RefCell<Vec<Box<[u8]>>> = const { RefCell::new(Vec::new()) };
    }

    fn shared() -> std::sync::MutexGuard<'static, Vec<Box<[u8]>>> {
        SHARED.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A block of `BYTES`, reused when there is one.
    pub fn take() -> Box<[u8]> {
        let reused = LOCAL.try_with(|local| {
            let mut local = local.try_borrow_mut().ok()?;
            if local.is_empty() {
                let mut shared = shared();
                let from = shared.len().saturating_sub(MOVE);
                local.extend(shared.drain(from..));
            }
            local.pop()
        });
        reused
            .ok()
            .flatten()
            .unwrap_or_else(|| vec![0; BYTES].into_boxed_slice())
    }

    /// Keeps `block` (of `BYTES`) for reuse, or frees it when the lists
    /// are full (or this thread is exiting).
    pub fn give(block: Box<[u8]>) {
        let _ = LOCAL.try_with(move |local| {
            let Ok(mut local) = local.try_borrow_mut() else {
                return;
            };
            local.push(block);
            if local.len() > LOCAL_MAX {
                let from = local.len() - MOVE;
                let mut shared = shared();
                let room = SHARED_MAX.saturating_sub(shared.len()).min(MOVE);
                shared.extend(local.drain(from..from + room));
                local.truncate(from);
            }
        });
    }
}

/// Gives an [`encode_params`] block back: a reused one for reuse, a
/// longer one to malloc.
fn give_back(block: Box<[u8]>) {
    if block.len() == spare::BYTES {
        spare::give(block);
    }
}

/// The `n` values [`encode_params`] wrote into `bytes`; a value cut short
/// (never written so) reads as [`Value::Unavailable`].
fn decode_params(bytes: &[u8], n: usize) -> Vec<Value> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (b.get(..n)?, b.get(n..)?);
        *b = rest;
        Some(head)
    }
    fn u32_of(b: &mut &[u8]) -> Option<u32> {
        Some(u32::from_le_bytes(take(b, 4)?.try_into().ok()?))
    }
    fn get(b: &mut &[u8]) -> Option<Value> {
        let kind = *take(b, 1)?.first()?;
        Some(match kind {
            PARAM_STR => {
                let full_len = Some(u32_of(b)?).filter(|&n| n != NO_FULL_LEN);
                let len = u32_of(b)? as usize;
                let text = String::from_utf8_lossy(take(b, len)?).into_owned();
                Value::Str { text, full_len }
            }
            PARAM_BOXED => {
                let class = StringId(u32_of(b)?);
                Value::Boxed {
                    class,
                    value: Box::new(get(b)?),
                }
            }
            kind => {
                let bits = u64::from_le_bytes(take(b, 8)?.try_into().ok()?);
                value_from_bits(u32::from(kind), bits)
            }
        })
    }
    let mut b = bytes;
    (0..n)
        .map(|_| get(&mut b).unwrap_or(Value::Unavailable))
        .collect()
}

/// Whether a CALL or RETURN carries no metrics (`metrics=` off).
fn no_metrics(m: &Metrics) -> bool {
    m.cpu_ns.is_none() && m.alloc_bytes.is_none()
}

/// The metrics as a slot holds them (CPU time, allocated bytes), unless a
/// value collides with [`ABSENT`] (then the event is boxed).
fn slot_metrics(m: &Metrics) -> Option<(u64, u64)> {
    if m.cpu_ns == Some(ABSENT) || m.alloc_bytes == Some(ABSENT) {
        return None;
    }
    Some((m.cpu_ns.unwrap_or(ABSENT), m.alloc_bytes.unwrap_or(ABSENT)))
}

/// Heap bytes of an event's parts (argument strings, parameter lists …).
fn heap_parts(ev: &Event) -> u64 {
    let heap = match &ev.kind {
        EventKind::Call { params, .. } => params
            .iter()
            .map(|v| std::mem::size_of::<Value>() + value_heap(v))
            .sum(),
        EventKind::Return {
            outcome: vmview_format::Outcome::Value(v),
            ..
        } => value_heap(v),
        EventKind::Throw { message, .. } => message.as_ref().map_or(0, String::len),
        EventKind::Sample { monitors, .. } => {
            monitors.len() * std::mem::size_of::<(vmview_format::Monitor, u32)>()
        }
        _ => 0,
    };
    heap as u64
}

/// Heap bytes a value owns beyond its own size.
fn value_heap(v: &Value) -> usize {
    match v {
        Value::Str { text, .. } => text.len(),
        Value::Boxed { .. } => std::mem::size_of::<Value>(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmview_format::{Loc, Monitor};

    fn ev(kind: EventKind) -> Event {
        Event {
            id: 0,
            time_ns: 123_456_789,
            thread: ThreadRef(7),
            kind,
        }
    }

    fn ret(outcome: Outcome) -> EventKind {
        EventKind::Return {
            method: MethodId(42),
            depth: 9,
            outcome,
            elapsed_ns: 1_000,
            metrics: Metrics::NONE,
        }
    }

    #[test]
    fn a_slot_is_40_bytes() {
        assert_eq!(std::mem::size_of::<Slot>(), 40);
    }

    #[test]
    fn one_or_two_plain_arguments_stay_in_the_slot() {
        let call = |params: Vec<Value>| {
            Slot::pack(ev(EventKind::Call {
                method: MethodId(1),
                depth: 2,
                caller: None,
                params,
                metrics: Metrics::NONE,
            }))
        };
        let two = call(vec![Value::Long(1), Value::Int(2)]);
        assert_eq!((two.tag(), two.heap_bytes()), (CALL_ARGS, 0));
        let text = Value::Str {
            text: "x".into(),
            full_len: None,
        };
        assert_eq!(call(vec![text]).tag(), CALL_PARAMS);
        let three = call(vec![Value::Int(1), Value::Int(2), Value::Int(3)]);
        assert_eq!(three.tag(), CALL_PARAMS);
    }

    #[test]
    fn a_short_arguments_block_is_reused_a_long_one_is_not() {
        let short = encode_params(&[Value::Int(1)]);
        assert_eq!(short.len(), spare::BYTES);
        let at = short.as_ptr();
        give_back(short);
        let again = encode_params(&[Value::Long(2), Value::Null]);
        assert_eq!(again.as_ptr(), at, "the block given back is taken again");
        assert_eq!(decode_params(&again, 2), vec![Value::Long(2), Value::Null]);
        let text = Value::Str {
            text: "x".repeat(spare::BYTES),
            full_len: None,
        };
        let long = encode_params(std::slice::from_ref(&text));
        assert_eq!(long.len(), param_len(&text));
        assert_eq!(decode_params(&long, 1), vec![text]);
    }

    #[test]
    fn encoded_arguments_cut_short_read_as_unavailable() {
        let text = Value::Str {
            text: "abc".into(),
            full_len: Some(7),
        };
        let bytes = encode_params(&[Value::Int(5), text.clone()]);
        let used = param_len(&Value::Int(5)) + param_len(&text);
        assert_eq!(decode_params(&bytes, 2), vec![Value::Int(5), text]);
        let cut = &bytes[..used - 1];
        assert_eq!(
            decode_params(cut, 2),
            vec![Value::Int(5), Value::Unavailable]
        );
        assert_eq!(decode_params(&[], 1), vec![Value::Unavailable]);
    }

    #[test]
    fn every_kind_of_event_comes_back_unchanged() {
        let s = StringId(3);
        let values = [
            Value::Unavailable,
            Value::Null,
            Value::Boolean(true),
            Value::Byte(-5),
            Value::Char(0xFFFF),
            Value::Short(-300),
            Value::Int(i32::MIN),
            Value::Long(-1),
            Value::Float(-0.5),
            Value::Double(f64::MAX),
            Value::Object {
                class: s,
                hash: u32::MAX,
            },
            Value::Array {
                class: s,
                length: 17,
            },
            Value::Str {
                text: "hello".into(),
                full_len: Some(99),
            },
            Value::Boxed {
                class: s,
                value: Box::new(Value::Int(4)),
            },
        ];
        // Every kind of value as arguments, a cut string and one outside
        // ASCII among them: one CALL_PARAMS block.
        let mut all = values.to_vec();
        all.push(Value::Str {
            text: "√π ünïcode".into(),
            full_len: None,
        });
        all.push(Value::Str {
            text: String::new(),
            full_len: Some(0),
        });
        let every_value = EventKind::Call {
            method: MethodId(1),
            depth: 2,
            caller: None,
            params: all,
            metrics: Metrics::NONE,
        };
        let packed = Slot::pack(ev(every_value.clone()));
        assert_eq!(packed.tag(), CALL_PARAMS);
        let EventKind::Call { params, .. } = &every_value else {
            unreachable!()
        };
        let encoded: usize = params.iter().map(param_len).sum();
        assert_eq!(packed.heap_bytes(), encoded as u64);
        drop(packed);
        let mut kinds: Vec<EventKind> =
            values.into_iter().map(|v| ret(Outcome::Value(v))).collect();
        kinds.push(every_value);
        kinds.extend([
            ret(Outcome::Void),
            ret(Outcome::Exception { class: s }),
            EventKind::Call {
                method: MethodId(1),
                depth: 2,
                caller: None,
                params: Vec::new(),
                metrics: Metrics::NONE,
            },
            EventKind::Call {
                method: MethodId(1),
                depth: 2,
                caller: Some((
                    MethodId(5),
                    Loc {
                        line: Some(10),
                        bci: 3,
                    },
                )),
                params: vec![Value::Int(1)],
                metrics: Metrics::NONE,
            },
            EventKind::Call {
                method: MethodId(1),
                depth: 2,
                caller: None,
                params: vec![Value::Long(-7), Value::Int(i32::MIN)],
                metrics: Metrics::NONE,
            },
            EventKind::Call {
                method: MethodId(1),
                depth: MAX_DEPTH,
                caller: None,
                params: vec![Value::Object {
                    class: s,
                    hash: u32::MAX,
                }],
                metrics: Metrics::NONE,
            },
            EventKind::Call {
                method: MethodId(1),
                depth: 2,
                caller: None,
                params: vec![
                    Value::Array {
                        class: s,
                        length: 3,
                    },
                    Value::Double(-0.0),
                ],
                metrics: Metrics::NONE,
            },
            EventKind::Call {
                method: MethodId(1),
                depth: 2,
                caller: None,
                params: vec![Value::Byte(-1), Value::Char(9), Value::Short(-2)],
                metrics: Metrics::NONE,
            },
            EventKind::Call {
                method: MethodId(1),
                depth: 2,
                caller: None,
                params: vec![
                    Value::Int(1),
                    Value::Str {
                        text: "an argument".into(),
                        full_len: None,
                    },
                    Value::Null,
                ],
                metrics: Metrics::NONE,
            },
            EventKind::Call {
                method: MethodId(1),
                depth: 2,
                caller: None,
                params: Vec::new(),
                metrics: Metrics {
                    cpu_ns: Some(5),
                    alloc_bytes: None,
                },
            },
            EventKind::Call {
                method: MethodId(1),
                depth: 2,
                caller: None,
                params: Vec::new(),
                metrics: Metrics {
                    cpu_ns: Some(ABSENT),
                    alloc_bytes: Some(0),
                },
            },
            EventKind::Call {
                method: MethodId(1),
                depth: 2,
                caller: None,
                params: vec![Value::Int(1)],
                metrics: Metrics {
                    cpu_ns: Some(5),
                    alloc_bytes: Some(77),
                },
            },
            EventKind::Call {
                method: MethodId(1),
                depth: MAX_DEPTH + 5,
                caller: None,
                params: Vec::new(),
                metrics: Metrics::NONE,
            },
            EventKind::Return {
                method: MethodId(1),
                depth: MAX_DEPTH + 5,
                outcome: Outcome::Void,
                elapsed_ns: 3,
                metrics: Metrics::NONE,
            },
            EventKind::Return {
                method: MethodId(1),
                depth: 4,
                outcome: Outcome::Void,
                elapsed_ns: u64::from(u32::MAX),
                metrics: Metrics {
                    cpu_ns: Some(123),
                    alloc_bytes: None,
                },
            },
            EventKind::Return {
                method: MethodId(1),
                depth: 4,
                outcome: Outcome::Value(Value::Unavailable),
                elapsed_ns: 9,
                metrics: Metrics {
                    cpu_ns: None,
                    alloc_bytes: Some(1 << 40),
                },
            },
            EventKind::Return {
                method: MethodId(1),
                depth: 4,
                outcome: Outcome::Void,
                elapsed_ns: u64::from(u32::MAX) + 1,
                metrics: Metrics {
                    cpu_ns: Some(1),
                    alloc_bytes: Some(2),
                },
            },
            EventKind::Return {
                method: MethodId(1),
                depth: 4,
                outcome: Outcome::Value(Value::Int(3)),
                elapsed_ns: 9,
                metrics: Metrics {
                    cpu_ns: Some(1),
                    alloc_bytes: Some(2),
                },
            },
            EventKind::ThreadStart,
            EventKind::MonitorContendedEnter {
                monitor: Monitor { class: s, hash: 1 },
                owner: Some(ThreadRef(2)),
            },
        ]);
        for kind in kinds {
            let e = ev(kind);
            assert_eq!(Slot::pack(e.clone()).unpack(), e);
            // A slot dropped unread frees what it holds (run under Miri
            // or valgrind to see a leak or double free).
            drop(Slot::pack(e));
        }
    }
}
