//! Data-flow profiles: what values flow into and out of each traced method.
//!
//! This is the IBM patents' argument and return-value distribution: for
//! every traced method, each parameter and the return value get a
//! [`ValueProfile`] — the runtime types seen, how many values were `null`,
//! the most frequent values with their counts, and for numbers their range,
//! mean and percentiles, for Strings and arrays their lengths. RETURNs
//! caused by an exception are counted by exception class. A profile tells
//! what a method is *actually* called with, which no signature says: the
//! argument that is always 1, the String that is null one call in ten, the
//! return value that is never negative.
//!
//! The analysis is fed events like every [`EventSink`] and must not grow
//! with the length of a trace, so each profile is bounded:
//!
//! - **Frequent values** are counted with the Space-Saving idea, in batches:
//!   at most [`TRACKED_VALUES`] distinct values are held; when a new value
//!   arrives and the table is full, the less frequent half is dropped and the
//!   highest count dropped becomes the *floor*. A value entering later starts
//!   at floor + 1 and remembers the floor as its possible error, so every
//!   reported count is an upper bound, `count - count_error` a lower bound,
//!   and `count_error` is 0 (the count is exact) for every value as long as
//!   no more than [`TRACKED_VALUES`] distinct values were seen.
//! - **Numbers**: count, NaNs, min, max and mean are always exact. The
//!   values themselves are kept up to [`EXACT_NUMBERS`]; up to there the
//!   percentiles are exact (nearest rank: the p-th percentile of n sorted
//!   values is the value at rank ⌈p·n/100⌉). Past it they move into a
//!   log-linear histogram keyed on the top bits of the IEEE-754 double
//!   (sign, exponent, 7 mantissa bits: integers up to ±256 keep a bucket of
//!   their own, larger values are within 0.4 % of the bucket midpoint
//!   reported); when it holds more than [`HISTOGRAM_BUCKETS`] buckets (the
//!   values span more than 8 powers of two) it drops a mantissa bit and
//!   merges neighbours, doubling the error bound each time, so the error
//!   can grow but the memory cannot (values from 1 to 100,000 end within
//!   1.6 %). [`NumberStats::percentiles_exact`] says which.
//! - **Distinct values** are counted exactly while the frequent-value table
//!   holds them all, then estimated with a 1024-register HyperLogLog
//!   (standard error 3.3 %).
//! - **Lengths** of Strings (the full length, also when the agent cut the
//!   content) and arrays: count, min, max, mean, exact.
//! - **Types**: at most [`MAX_TYPES`] runtime types are named per profile;
//!   the rest are counted together.
//!
//! At worst a profile holds about 100 KB (mostly Strings of up to the
//! agent's `strings=` length in the frequent-value table), so memory grows
//! with the number of traced methods and parameters, never with the number
//! of calls.

use std::collections::{BTreeMap, HashMap};

use vmview_format::{Event, EventKind, MethodId, Outcome, StringId, SymbolTable, Value};

use crate::EventSink;

/// Most distinct values whose counts a profile tracks at once.
pub const TRACKED_VALUES: usize = 128;
/// Most numbers a profile keeps for exact percentiles.
pub const EXACT_NUMBERS: usize = 1024;
/// Most histogram buckets before the histogram coarsens.
pub const HISTOGRAM_BUCKETS: usize = 1024;
/// Most runtime types named per profile.
pub const MAX_TYPES: usize = 16;
/// Frequent values reported per profile unless told otherwise.
pub const DEFAULT_TOP: usize = 10;

/// Mantissa bits of a histogram bucket before any coarsening.
const HISTOGRAM_PRECISION: u32 = 7;

/// The data-flow profiles of a trace: one per selected method with a CALL
/// or RETURN, sorted by class, method name and descriptor.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DataflowProfile {
    pub methods: Vec<MethodProfile>,
}

/// One method's profile.
#[derive(Debug, Clone, PartialEq)]
pub struct MethodProfile {
    /// Dotted class name, method name, JVM descriptor (`?` when the trace
    /// lost the method's symbol).
    pub class: String,
    pub name: String,
    pub sig: String,
    /// CALL events.
    pub calls: u64,
    /// RETURN events: normal ones and those caused by an exception.
    pub returns: u64,
    pub exceptional_returns: u64,
    /// One profile per declared parameter (`this` excluded), in order.
    pub params: Vec<ParamProfile>,
    /// The values returned normally; `None` for a method that never
    /// returned a value (a `void` method, or one that only threw).
    pub returned: Option<ValueProfile>,
    /// RETURNs by exception, per exception class, most frequent first.
    pub exceptions: Vec<(String, u64)>,
}

/// One parameter's profile.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamProfile {
    /// From the LocalVariableTable, else `arg0`, `arg1` …
    pub name: String,
    pub values: ValueProfile,
}

/// The distribution of the values seen in one place (a parameter, a
/// return value).
#[derive(Debug, Clone, PartialEq)]
pub struct ValueProfile {
    /// Every value seen, `null` and unreadable ones included.
    pub count: u64,
    pub nulls: u64,
    /// Values the agent could not read (or did not capture).
    pub unavailable: u64,
    /// Runtime types of the non-null values (`int`, `java.lang.String`,
    /// `shop.Item`, `int[]`, `java.lang.Integer` for a boxed value), most
    /// frequent first; `other_types` counts values of types past
    /// [`MAX_TYPES`].
    pub types: Vec<(String, u64)>,
    pub other_types: u64,
    /// The most frequent non-null values, most frequent first (ties: the
    /// value seen first comes first).
    pub top: Vec<ValueCount>,
    /// Non-null, readable values not in `top`.
    pub other: u64,
    /// Distinct non-null values seen: exact while at most
    /// [`TRACKED_VALUES`] were seen (`distinct_exact`), else a HyperLogLog
    /// estimate (1024 registers: standard error 3.3 %).
    pub distinct: u64,
    pub distinct_exact: bool,
    /// For numeric values (byte, short, int, long, float, double and their
    /// boxes).
    pub numbers: Option<NumberStats>,
    /// For Strings and arrays.
    pub lengths: Option<LengthStats>,
}

/// A value and how often it was seen.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueCount {
    pub value: SeenValue,
    /// An upper bound of the true count, exact when `count_error` is 0.
    pub count: u64,
    /// The true count is at least `count - count_error`.
    pub count_error: u64,
}

/// A captured value with its names resolved. Boxed values appear as the
/// primitive they hold (their box class is among the types).
#[derive(Debug, Clone, PartialEq)]
pub enum SeenValue {
    Boolean(bool),
    Char(u16),
    /// byte, short, int, long.
    Integer(i64),
    /// float (in its shortest decimal form) or double.
    Float(f64),
    /// A String's (possibly cut) contents; `full_len` is `Some(n)` when only
    /// the first part of an `n`-character String was kept.
    Str {
        text: String,
        full_len: Option<u32>,
    },
    /// An array: its type (`int[]`) and length.
    Array {
        class: String,
        length: u32,
    },
    /// Any other object: class and identity hash.
    Object {
        class: String,
        hash: u32,
    },
}

/// A number as captured: integers stay exact.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    Int(i64),
    Float(f64),
}

impl Number {
    pub fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }

    fn total_cmp(&self, other: &Number) -> std::cmp::Ordering {
        match (self, other) {
            (Number::Int(a), Number::Int(b)) => a.cmp(b),
            _ => self.as_f64().total_cmp(&other.as_f64()),
        }
    }
}

/// Statistics of the numeric values of a profile. NaNs are counted apart
/// and left out of everything else.
#[derive(Debug, Clone, PartialEq)]
pub struct NumberStats {
    /// Numbers seen, NaNs excluded.
    pub count: u64,
    pub nan: u64,
    pub min: Number,
    pub max: Number,
    pub mean: f64,
    pub p50: Number,
    pub p90: Number,
    pub p99: Number,
    /// True when the percentiles are exact (at most [`EXACT_NUMBERS`]
    /// numbers); false when they come from the histogram (bucket midpoints
    /// clamped to min..max).
    pub percentiles_exact: bool,
}

/// Lengths of the Strings or arrays of a profile (a String's full length,
/// in UTF-16 chars as Java counts them, also when its content was cut).
#[derive(Debug, Clone, PartialEq)]
pub struct LengthStats {
    pub count: u64,
    pub min: u64,
    pub max: u64,
    pub mean: f64,
}

/// A float as the JSON reports write it: a number, or `"NaN"`,
/// `"Infinity"`, `"-Infinity"` (JSON has no such numbers).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JsonFloat(pub f64);

impl serde::Serialize for JsonFloat {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let x = self.0;
        if x.is_finite() {
            s.serialize_f64(x)
        } else if x.is_nan() {
            s.serialize_str("NaN")
        } else if x > 0.0 {
            s.serialize_str("Infinity")
        } else {
            s.serialize_str("-Infinity")
        }
    }
}

/// A number of a report: integers exact.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum NumberReport {
    Int(i64),
    Float(JsonFloat),
}

impl From<Number> for NumberReport {
    fn from(n: Number) -> Self {
        match n {
            Number::Int(i) => NumberReport::Int(i),
            Number::Float(f) => NumberReport::Float(JsonFloat(f)),
        }
    }
}

/// A value of a report, as `vmview show --format jsonl` encodes one:
/// booleans, numbers, and text for chars, Strings, arrays and objects.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum ValueReport {
    Boolean(bool),
    Integer(i64),
    Float(JsonFloat),
    Text(String),
}

/// A [`DataflowProfile`] as reports show it: the schema of `vmview
/// dataflow --format json` (its `methods`). Keys are a contract: add,
/// never rename.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MethodReport {
    pub class: String,
    pub method: String,
    pub sig: String,
    pub calls: u64,
    pub returns: u64,
    pub exceptional_returns: u64,
    pub params: Vec<ParamReport>,
    #[serde(rename = "return")]
    pub returned: Option<ProfileReport>,
    pub exceptions: Vec<ClassCount>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ClassCount {
    pub class: String,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TypeCount {
    #[serde(rename = "type")]
    pub ty: String,
    pub count: u64,
}

/// A parameter's profile, with its name and declared type.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ParamReport {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: String,
    #[serde(flatten)]
    pub values: ProfileReport,
}

/// A [`ValueProfile`] as reports show it; `type` is the declared type.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ProfileReport {
    /// The declared type, on a return value's profile (a parameter's is
    /// in its [`ParamReport`]).
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub ty: Option<String>,
    pub count: u64,
    pub nulls: u64,
    pub unavailable: u64,
    pub types: Vec<TypeCount>,
    pub other_types: u64,
    pub distinct: u64,
    pub distinct_exact: bool,
    pub top: Vec<TopReport>,
    pub other: u64,
    pub numbers: Option<NumbersReport>,
    pub lengths: Option<LengthsReport>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TopReport {
    pub value: ValueReport,
    pub count: u64,
    pub count_error: u64,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NumbersReport {
    pub count: u64,
    pub nan: u64,
    pub min: NumberReport,
    pub max: NumberReport,
    pub mean: JsonFloat,
    pub p50: NumberReport,
    pub p90: NumberReport,
    pub p99: NumberReport,
    pub percentiles_exact: bool,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LengthsReport {
    pub count: u64,
    pub min: u64,
    pub max: u64,
    pub mean: JsonFloat,
}

/// How a report names what the analysis keeps raw: the declared types of
/// a descriptor (parameters, return), and the text of a String, array or
/// object value.
pub struct ReportNames<'a> {
    pub types: &'a dyn Fn(&str) -> (Vec<String>, String),
    pub text: &'a dyn Fn(&SeenValue) -> String,
}

impl ValueProfile {
    /// This profile as reports show it.
    pub fn report(&self, ty: Option<String>, names: &ReportNames) -> ProfileReport {
        ProfileReport {
            ty,
            count: self.count,
            nulls: self.nulls,
            unavailable: self.unavailable,
            types: self
                .types
                .iter()
                .map(|(t, n)| TypeCount {
                    ty: t.clone(),
                    count: *n,
                })
                .collect(),
            other_types: self.other_types,
            distinct: self.distinct,
            distinct_exact: self.distinct_exact,
            top: self
                .top
                .iter()
                .map(|t| TopReport {
                    value: match &t.value {
                        SeenValue::Boolean(b) => ValueReport::Boolean(*b),
                        SeenValue::Char(c) => ValueReport::Text(
                            char::from_u32(u32::from(*c))
                                .unwrap_or('\u{fffd}')
                                .to_string(),
                        ),
                        SeenValue::Integer(i) => ValueReport::Integer(*i),
                        SeenValue::Float(f) => ValueReport::Float(JsonFloat(*f)),
                        other => ValueReport::Text((names.text)(other)),
                    },
                    count: t.count,
                    count_error: t.count_error,
                })
                .collect(),
            other: self.other,
            numbers: self.numbers.as_ref().map(|n| NumbersReport {
                count: n.count,
                nan: n.nan,
                min: n.min.into(),
                max: n.max.into(),
                mean: JsonFloat(n.mean),
                p50: n.p50.into(),
                p90: n.p90.into(),
                p99: n.p99.into(),
                percentiles_exact: n.percentiles_exact,
            }),
            lengths: self.lengths.as_ref().map(|l| LengthsReport {
                count: l.count,
                min: l.min,
                max: l.max,
                mean: JsonFloat(l.mean),
            }),
        }
    }
}

impl MethodProfile {
    /// This method's profile as reports show it.
    pub fn report(&self, names: &ReportNames) -> MethodReport {
        let (param_types, ret_type) = (names.types)(&self.sig);
        MethodReport {
            class: self.class.clone(),
            method: self.name.clone(),
            sig: self.sig.clone(),
            calls: self.calls,
            returns: self.returns,
            exceptional_returns: self.exceptional_returns,
            params: self
                .params
                .iter()
                .enumerate()
                .map(|(j, p)| ParamReport {
                    name: p.name.clone(),
                    ty: param_types.get(j).map_or("?", String::as_str).to_string(),
                    values: p.values.report(None, names),
                })
                .collect(),
            returned: self
                .returned
                .as_ref()
                .map(|r| r.report(Some(ret_type.clone()), names)),
            exceptions: self
                .exceptions
                .iter()
                .map(|(c, n)| ClassCount {
                    class: c.clone(),
                    count: *n,
                })
                .collect(),
        }
    }
}

/// Decides from a class and a method name whether to profile a method.
type MethodSelection = Box<dyn Fn(&str, &str) -> bool>;

/// Accumulates a [`DataflowProfile`] from a stream of events.
pub struct DataflowBuilder {
    methods: HashMap<MethodId, MethodAcc>,
    /// Which methods to profile, by class and method name; `None`: all.
    select: Option<MethodSelection>,
    /// The selection's answer per method, asked once.
    selected: HashMap<MethodId, bool>,
    top: usize,
}

impl Default for DataflowBuilder {
    fn default() -> Self {
        DataflowBuilder {
            methods: HashMap::new(),
            select: None,
            selected: HashMap::new(),
            top: DEFAULT_TOP,
        }
    }
}

impl std::fmt::Debug for DataflowBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataflowBuilder")
            .field("methods", &self.methods.len())
            .field("top", &self.top)
            .finish_non_exhaustive()
    }
}

impl DataflowBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Profiles only the methods for which `select(class, method_name)` is
    /// true (asked once per method; `?` for names the trace lost).
    pub fn select(mut self, select: impl Fn(&str, &str) -> bool + 'static) -> Self {
        self.select = Some(Box::new(select));
        self
    }

    /// Reports the `n` most frequent values per profile (at most
    /// [`TRACKED_VALUES`]).
    pub fn top(mut self, n: usize) -> Self {
        self.top = n.min(TRACKED_VALUES);
        self
    }

    /// Computes the profiles of a whole event stream.
    pub fn from_events<'a>(
        events: impl IntoIterator<Item = &'a Event>,
        syms: &SymbolTable,
    ) -> DataflowProfile {
        let mut b = DataflowBuilder::new();
        for ev in events {
            b.event(ev, syms);
        }
        b.finish(syms)
    }

    fn method(&mut self, id: MethodId, syms: &SymbolTable) -> Option<&mut MethodAcc> {
        let selected = match &self.select {
            None => true,
            Some(select) => *self
                .selected
                .entry(id)
                .or_insert_with(|| match syms.method(id) {
                    Some(m) => select(syms.string(m.class), syms.string(m.name)),
                    None => select("?", "?"),
                }),
        };
        if !selected {
            return None;
        }
        let m = self.methods.entry(id).or_default();
        if m.names.is_none() {
            if let Some(sym) = syms.method(id) {
                m.names = Some(MethodNames {
                    class: syms.string(sym.class).to_string(),
                    name: syms.string(sym.name).to_string(),
                    sig: syms.string(sym.sig).to_string(),
                    params: sym
                        .param_names
                        .iter()
                        .map(|n| syms.string(*n).to_string())
                        .collect(),
                });
            }
        }
        Some(m)
    }

    /// Resolves names and orders everything; `syms` must know the symbols
    /// of every event fed (the reader's table after the last event).
    pub fn finish(self, syms: &SymbolTable) -> DataflowProfile {
        let top = self.top;
        let mut methods: Vec<MethodProfile> = self
            .methods
            .into_iter()
            .map(|(id, m)| {
                let names = m.names.unwrap_or_else(|| MethodNames {
                    class: "?".to_string(),
                    name: format!("method#{}", id.0),
                    sig: "?".to_string(),
                    params: Vec::new(),
                });
                let params = m
                    .params
                    .into_iter()
                    .enumerate()
                    .map(|(i, acc)| ParamProfile {
                        name: names
                            .params
                            .get(i)
                            .cloned()
                            .unwrap_or_else(|| format!("arg{i}")),
                        values: acc.finish(syms, top),
                    })
                    .collect();
                let mut exceptions: Vec<(String, u64)> = m
                    .exceptions
                    .into_iter()
                    .map(|(class, n)| (syms.string(class).to_string(), n))
                    .collect();
                exceptions.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                MethodProfile {
                    class: names.class,
                    name: names.name,
                    sig: names.sig,
                    calls: m.calls,
                    returns: m.returns,
                    exceptional_returns: m.exceptional_returns,
                    params,
                    returned: m.returned.map(|acc| acc.finish(syms, top)),
                    exceptions,
                }
            })
            .collect();
        methods.sort_by(|a, b| (&a.class, &a.name, &a.sig).cmp(&(&b.class, &b.name, &b.sig)));
        DataflowProfile { methods }
    }
}

impl EventSink for DataflowBuilder {
    fn event(&mut self, ev: &Event, syms: &SymbolTable) {
        match &ev.kind {
            EventKind::Call { method, params, .. } => {
                let Some(m) = self.method(*method, syms) else {
                    return;
                };
                m.calls += 1;
                if m.params.len() < params.len() {
                    m.params.resize_with(params.len(), ValueAcc::default);
                }
                for (acc, v) in m.params.iter_mut().zip(params) {
                    acc.add(v);
                }
            }
            EventKind::Return {
                method, outcome, ..
            } => {
                let Some(m) = self.method(*method, syms) else {
                    return;
                };
                m.returns += 1;
                match outcome {
                    Outcome::Void => {}
                    Outcome::Value(v) => m.returned.get_or_insert_with(ValueAcc::default).add(v),
                    Outcome::Exception { class } => {
                        m.exceptional_returns += 1;
                        *m.exceptions.entry(*class).or_default() += 1;
                    }
                }
            }
            _ => {}
        }
    }
}

#[derive(Debug)]
struct MethodNames {
    class: String,
    name: String,
    sig: String,
    params: Vec<String>,
}

#[derive(Debug, Default)]
struct MethodAcc {
    names: Option<MethodNames>,
    calls: u64,
    returns: u64,
    exceptional_returns: u64,
    params: Vec<ValueAcc>,
    returned: Option<ValueAcc>,
    exceptions: HashMap<StringId, u64>,
}

/// A value as a hash key: equal keys are the same Java value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum ValueKey {
    Boolean(bool),
    Char(u16),
    Integer(i64),
    /// A float by the bits of its f32, a double by the bits of its f64, so
    /// `0.1f` is not mistaken for `0.1`.
    Float(u32),
    Double(u64),
    Str(Box<str>, Option<u32>),
    Array(StringId, u32),
    Object(StringId, u32),
}

/// A runtime type: a primitive by name, a class by handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum TypeKey {
    Primitive(&'static str),
    Class(StringId),
}

#[derive(Debug)]
struct Tracked {
    count: u64,
    error: u64,
    /// Order of first sight, for stable ties.
    seq: u64,
}

#[derive(Debug, Default)]
struct ValueAcc {
    count: u64,
    nulls: u64,
    unavailable: u64,
    types: Vec<(TypeKey, u64)>,
    other_types: u64,
    tracked: HashMap<ValueKey, Tracked>,
    /// Highest count dropped from `tracked` (0: nothing dropped yet).
    floor: u64,
    evicted: bool,
    /// HyperLogLog registers over every value's hash, for the distinct
    /// count once `tracked` can no longer give it.
    sketch: DistinctSketch,
    seq: u64,
    numbers: Option<NumberAcc>,
    lengths: Option<LengthAcc>,
}

impl ValueAcc {
    fn add(&mut self, v: &Value) {
        self.count += 1;
        let (ty, key) = match v {
            Value::Null => {
                self.nulls += 1;
                return;
            }
            Value::Unavailable => {
                self.unavailable += 1;
                return;
            }
            Value::Boxed { class, value } => {
                let Some(key) = self.primitive(value) else {
                    // A box holding something odd: count it by its class only.
                    self.add_type(TypeKey::Class(*class));
                    return;
                };
                (TypeKey::Class(*class), key)
            }
            Value::Str { text, full_len } => {
                let len = full_len.map_or_else(|| text.encode_utf16().count() as u64, u64::from);
                self.lengths.get_or_insert_with(LengthAcc::default).add(len);
                (
                    TypeKey::Primitive("java.lang.String"),
                    ValueKey::Str(text.as_str().into(), *full_len),
                )
            }
            Value::Array { class, length } => {
                self.lengths
                    .get_or_insert_with(LengthAcc::default)
                    .add(u64::from(*length));
                (TypeKey::Class(*class), ValueKey::Array(*class, *length))
            }
            Value::Object { class, hash } => {
                (TypeKey::Class(*class), ValueKey::Object(*class, *hash))
            }
            prim => {
                let Some(key) = self.primitive(prim) else {
                    return;
                };
                (TypeKey::Primitive(prim.type_name()), key)
            }
        };
        self.add_type(ty);
        self.add_value(key);
    }

    /// The key of a primitive value, feeding the number statistics on the way.
    fn primitive(&mut self, v: &Value) -> Option<ValueKey> {
        let mut number = |n: Number| self.numbers.get_or_insert_with(NumberAcc::default).add(n);
        Some(match *v {
            Value::Boolean(b) => ValueKey::Boolean(b),
            Value::Char(c) => ValueKey::Char(c),
            Value::Byte(x) => {
                number(Number::Int(x.into()));
                ValueKey::Integer(x.into())
            }
            Value::Short(x) => {
                number(Number::Int(x.into()));
                ValueKey::Integer(x.into())
            }
            Value::Int(x) => {
                number(Number::Int(x.into()));
                ValueKey::Integer(x.into())
            }
            Value::Long(x) => {
                number(Number::Int(x));
                ValueKey::Integer(x)
            }
            Value::Float(x) => {
                number(Number::Float(float_as_double(x)));
                ValueKey::Float(x.to_bits())
            }
            Value::Double(x) => {
                number(Number::Float(x));
                ValueKey::Double(x.to_bits())
            }
            _ => return None,
        })
    }

    fn add_type(&mut self, ty: TypeKey) {
        if let Some(e) = self.types.iter_mut().find(|(t, _)| *t == ty) {
            e.1 += 1;
        } else if self.types.len() < MAX_TYPES {
            self.types.push((ty, 1));
        } else {
            self.other_types += 1;
        }
    }

    fn add_value(&mut self, key: ValueKey) {
        self.sketch.add(&key);
        if let Some(t) = self.tracked.get_mut(&key) {
            t.count += 1;
            return;
        }
        if self.tracked.len() >= TRACKED_VALUES {
            self.evict_half();
        }
        self.seq += 1;
        self.tracked.insert(
            key,
            Tracked {
                count: self.floor + 1,
                error: self.floor,
                seq: self.seq,
            },
        );
    }

    /// Drops the less frequent half of the tracked values; the highest count
    /// dropped becomes the floor new values start from.
    fn evict_half(&mut self) {
        let mut counts: Vec<u64> = self.tracked.values().map(|t| t.count).collect();
        counts.sort_unstable();
        let cut = counts[counts.len() / 2];
        // Keep strictly more frequent values; when many tie at the cut, drop
        // them all (the table may empty further than half, never less).
        let mut dropped_max = 0;
        self.tracked.retain(|_, t| {
            if t.count > cut {
                true
            } else {
                dropped_max = dropped_max.max(t.count);
                false
            }
        });
        self.floor = self.floor.max(dropped_max);
        self.evicted = true;
    }

    fn finish(self, syms: &SymbolTable, top: usize) -> ValueProfile {
        let mut types: Vec<(String, u64)> = self
            .types
            .into_iter()
            .map(|(t, n)| {
                let name = match t {
                    TypeKey::Primitive(p) => p.to_string(),
                    TypeKey::Class(c) => syms.string(c).to_string(),
                };
                (name, n)
            })
            .collect();
        types.sort_by_key(|t| std::cmp::Reverse(t.1));

        let distinct = if self.evicted {
            // More than TRACKED_VALUES were seen, whatever the estimate says.
            self.sketch.estimate().max(TRACKED_VALUES as u64 + 1)
        } else {
            self.tracked.len() as u64
        };
        let mut tracked: Vec<(ValueKey, Tracked)> = self.tracked.into_iter().collect();
        tracked.sort_by(|a, b| b.1.count.cmp(&a.1.count).then(a.1.seq.cmp(&b.1.seq)));
        tracked.truncate(top);
        let valued = self.count - self.nulls - self.unavailable;
        let shown: u64 = tracked.iter().map(|(_, t)| t.count).sum();
        let top = tracked
            .into_iter()
            .map(|(key, t)| ValueCount {
                value: seen_value(key, syms),
                count: t.count,
                count_error: t.error,
            })
            .collect();

        ValueProfile {
            count: self.count,
            nulls: self.nulls,
            unavailable: self.unavailable,
            types,
            other_types: self.other_types,
            top,
            other: valued.saturating_sub(shown),
            distinct,
            distinct_exact: !self.evicted,
            numbers: self.numbers.and_then(NumberAcc::finish),
            lengths: self.lengths.map(LengthAcc::finish),
        }
    }
}

/// A float as the double with the same shortest decimal form (`0.1f` →
/// `0.1`, not `0.10000000149011612`), as the JSON exporter writes it.
fn float_as_double(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(f64::from(x))
}

fn seen_value(key: ValueKey, syms: &SymbolTable) -> SeenValue {
    match key {
        ValueKey::Boolean(b) => SeenValue::Boolean(b),
        ValueKey::Char(c) => SeenValue::Char(c),
        ValueKey::Integer(i) => SeenValue::Integer(i),
        ValueKey::Float(bits) => SeenValue::Float(float_as_double(f32::from_bits(bits))),
        ValueKey::Double(bits) => SeenValue::Float(f64::from_bits(bits)),
        ValueKey::Str(text, full_len) => SeenValue::Str {
            text: text.into(),
            full_len,
        },
        ValueKey::Array(class, length) => SeenValue::Array {
            class: syms.string(class).to_string(),
            length,
        },
        ValueKey::Object(class, hash) => SeenValue::Object {
            class: syms.string(class).to_string(),
            hash,
        },
    }
}

/// A HyperLogLog distinct-value counter with 1024 one-byte registers
/// (standard error 1.04/√1024 ≈ 3.3 %).
///
/// Keys are hashed with SipHash under fixed keys (`DefaultHasher::new`), so
/// the same trace always gives the same estimate.
#[derive(Debug)]
struct DistinctSketch {
    registers: Box<[u8; 1024]>,
}

impl Default for DistinctSketch {
    fn default() -> Self {
        DistinctSketch {
            registers: Box::new([0; 1024]),
        }
    }
}

impl DistinctSketch {
    fn add(&mut self, key: &ValueKey) {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        key.hash(&mut h);
        let h = h.finish();
        let index = (h >> 54) as usize;
        // Leading zeros of the remaining 54 bits, plus one (a sentinel bit
        // caps it at 55).
        let rank = ((h << 10) | (1 << 9)).leading_zeros() as u8 + 1;
        let r = &mut self.registers[index];
        *r = (*r).max(rank);
    }

    fn estimate(&self) -> u64 {
        let m = self.registers.len() as f64;
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let sum: f64 = self
            .registers
            .iter()
            .map(|&r| 2f64.powi(-i32::from(r)))
            .sum();
        let raw = alpha * m * m / sum;
        let zeros = self.registers.iter().filter(|&&r| r == 0).count();
        let e = if raw <= 2.5 * m && zeros > 0 {
            // Linear counting is more accurate for small cardinalities.
            m * (m / zeros as f64).ln()
        } else {
            raw
        };
        e.round() as u64
    }
}

#[derive(Debug, Default)]
struct NumberAcc {
    count: u64,
    nan: u64,
    min: Option<Number>,
    max: Option<Number>,
    int_sum: i128,
    float_sum: f64,
    /// Floating-point numbers among them (0: histogram percentiles are
    /// reported as integers).
    floats: u64,
    /// All numbers, until there are more than [`EXACT_NUMBERS`].
    exact: Vec<Number>,
    histogram: Option<Histogram>,
}

impl NumberAcc {
    fn add(&mut self, n: Number) {
        match n {
            Number::Float(f) if f.is_nan() => {
                self.nan += 1;
                return;
            }
            Number::Int(i) => self.int_sum += i128::from(i),
            Number::Float(f) => {
                self.float_sum += f;
                self.floats += 1;
            }
        }
        self.count += 1;
        if !matches!(self.min, Some(m) if n.total_cmp(&m).is_ge()) {
            self.min = Some(n);
        }
        if !matches!(self.max, Some(m) if n.total_cmp(&m).is_le()) {
            self.max = Some(n);
        }
        match &mut self.histogram {
            Some(h) => h.add(n.as_f64()),
            None if self.exact.len() < EXACT_NUMBERS => self.exact.push(n),
            None => {
                let mut h = Histogram::default();
                for x in self.exact.drain(..) {
                    h.add(x.as_f64());
                }
                h.add(n.as_f64());
                self.exact = Vec::new();
                self.histogram = Some(h);
            }
        }
    }

    fn finish(mut self) -> Option<NumberStats> {
        let (min, max) = (self.min?, self.max?);
        let mean = (self.int_sum as f64 + self.float_sum) / self.count as f64;
        let (p50, p90, p99, exact) = match &self.histogram {
            None => {
                self.exact.sort_by(Number::total_cmp);
                let at = |p: u64| self.exact[nearest_rank(p, self.count) as usize - 1];
                (at(50), at(90), at(99), true)
            }
            Some(h) => {
                let integers = self.floats == 0;
                let at = |p: u64| {
                    let v = h
                        .value_at_rank(nearest_rank(p, self.count), integers)
                        .clamp(min.as_f64(), max.as_f64());
                    if integers {
                        Number::Int(v as i64)
                    } else {
                        Number::Float(v)
                    }
                };
                (at(50), at(90), at(99), false)
            }
        };
        Some(NumberStats {
            count: self.count,
            nan: self.nan,
            min,
            max,
            mean,
            p50,
            p90,
            p99,
            percentiles_exact: exact,
        })
    }
}

/// The 1-based rank of the p-th percentile of `n` sorted values: ⌈p·n/100⌉,
/// at least 1.
fn nearest_rank(p: u64, n: u64) -> u64 {
    (p * n).div_ceil(100).clamp(1, n)
}

/// A log-linear histogram of doubles: a bucket is the sign, the exponent and
/// the top `precision` mantissa bits, so bucket keys are ordered like the
/// values and a bucket spans a relative width of 2^-precision.
#[derive(Debug)]
struct Histogram {
    precision: u32,
    buckets: BTreeMap<i64, u64>,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            precision: HISTOGRAM_PRECISION,
            buckets: BTreeMap::new(),
        }
    }
}

impl Histogram {
    fn key(&self, x: f64) -> i64 {
        let magnitude = (x.abs().to_bits() >> (52 - self.precision)) as i64;
        if x.is_sign_negative() {
            -magnitude - 1
        } else {
            magnitude
        }
    }

    fn add(&mut self, x: f64) {
        *self.buckets.entry(self.key(x)).or_default() += 1;
        while self.buckets.len() > HISTOGRAM_BUCKETS && self.precision > 0 {
            self.precision -= 1;
            let old = std::mem::take(&mut self.buckets);
            for (k, n) in old {
                let coarse = if k >= 0 {
                    k >> 1
                } else {
                    -(((-k - 1) >> 1) + 1)
                };
                *self.buckets.entry(coarse).or_default() += n;
            }
        }
    }

    /// The midpoint of the bucket holding the value of 1-based rank `rank`.
    /// (With `integers`, the middle integer of the bucket.)
    fn value_at_rank(&self, rank: u64, integers: bool) -> f64 {
        let mut seen = 0;
        for (&k, &n) in &self.buckets {
            seen += n;
            if seen >= rank {
                return self.midpoint(k, integers);
            }
        }
        self.buckets
            .keys()
            .last()
            .map_or(0.0, |&k| self.midpoint(k, integers))
    }

    fn midpoint(&self, k: i64, integers: bool) -> f64 {
        let shift = 52 - self.precision;
        // The middle of the magnitude range [lo, hi) of bucket m.
        let mid = |m: i64| {
            let lo = f64::from_bits((m as u64) << shift);
            let hi = f64::from_bits(((m + 1) as u64) << shift);
            if !hi.is_finite() {
                lo
            } else if integers {
                // The integers in [lo, hi) are ceil(lo) ..= ceil(hi) - 1.
                let (a, b) = (lo.ceil(), (hi.ceil() - 1.0).max(lo.ceil()));
                ((a + b) / 2.0).floor()
            } else {
                lo + (hi - lo) / 2.0
            }
        };
        if k >= 0 {
            mid(k)
        } else {
            -mid(-k - 1)
        }
    }
}

#[derive(Debug, Default)]
struct LengthAcc {
    count: u64,
    min: u64,
    max: u64,
    sum: u128,
}

impl LengthAcc {
    fn add(&mut self, len: u64) {
        self.min = if self.count == 0 {
            len
        } else {
            self.min.min(len)
        };
        self.max = self.max.max(len);
        self.count += 1;
        self.sum += u128::from(len);
    }

    fn finish(self) -> LengthStats {
        LengthStats {
            count: self.count,
            min: self.min,
            max: self.max,
            mean: if self.count == 0 {
                0.0
            } else {
                self.sum as f64 / self.count as f64
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmview_format::{MethodSymbol, Symbol, ThreadRef};

    fn syms() -> SymbolTable {
        let mut s = SymbolTable::default();
        for (id, text) in [
            (1, "shop.Cart"),
            (2, "price"),
            (3, "(ILjava/lang/String;)J"),
            (4, "qty"),
            (5, "sku"),
            (6, "java.lang.IllegalStateException"),
            (7, "java.lang.Integer"),
        ] {
            s.insert(Symbol::String {
                id: StringId(id),
                text: text.to_string(),
            });
        }
        s.insert(Symbol::Method(MethodSymbol {
            id: MethodId(1),
            class: StringId(1),
            name: StringId(2),
            sig: StringId(3),
            param_names: vec![StringId(4), StringId(5)],
            modifiers: 0,
        }));
        s
    }

    fn call(params: Vec<Value>) -> Event {
        Event {
            id: 0,
            time_ns: 0,
            thread: ThreadRef(0),
            kind: EventKind::Call {
                metrics: Default::default(),
                method: MethodId(1),
                depth: 1,
                caller: None,
                params,
            },
        }
    }

    fn ret(outcome: Outcome) -> Event {
        Event {
            id: 0,
            time_ns: 0,
            thread: ThreadRef(0),
            kind: EventKind::Return {
                metrics: Default::default(),
                method: MethodId(1),
                depth: 1,
                outcome,
                elapsed_ns: 10,
            },
        }
    }

    fn text(s: &str) -> Value {
        Value::Str {
            text: s.to_string(),
            full_len: None,
        }
    }

    fn profile_of(values: impl IntoIterator<Item = Value>) -> ValueProfile {
        let syms = syms();
        let events: Vec<Event> = values.into_iter().map(|v| call(vec![v])).collect();
        let mut p = DataflowBuilder::from_events(&events, &syms);
        p.methods.remove(0).params.remove(0).values
    }

    #[test]
    fn profiles_arguments_returns_and_exceptions_exactly() {
        let syms = syms();
        let mut events = Vec::new();
        for qty in 1..=100 {
            let sku = match qty % 10 {
                0 => Value::Null,
                1..=5 => text("apple"),
                6..=8 => text("pear"),
                _ => text("plum"),
            };
            events.push(call(vec![Value::Int(qty), sku]));
            events.push(if qty % 25 == 0 {
                ret(Outcome::Exception { class: StringId(6) })
            } else {
                ret(Outcome::Value(Value::Long(i64::from(qty) * 10)))
            });
        }
        let p = DataflowBuilder::from_events(&events, &syms);
        assert_eq!(p.methods.len(), 1);
        let m = &p.methods[0];
        assert_eq!((m.class.as_str(), m.name.as_str()), ("shop.Cart", "price"));
        assert_eq!((m.calls, m.returns, m.exceptional_returns), (100, 100, 4));
        assert_eq!(
            m.exceptions,
            [("java.lang.IllegalStateException".to_string(), 4)]
        );

        let qty = &m.params[0];
        assert_eq!(qty.name, "qty");
        assert_eq!(qty.values.types, [("int".to_string(), 100)]);
        let n = qty.values.numbers.as_ref().unwrap();
        assert_eq!(
            (n.count, n.min, n.max),
            (100, Number::Int(1), Number::Int(100))
        );
        assert_eq!(n.mean, 50.5);
        assert_eq!(
            (n.p50, n.p90, n.p99),
            (Number::Int(50), Number::Int(90), Number::Int(99))
        );
        assert!(n.percentiles_exact);
        assert_eq!((qty.values.distinct, qty.values.other), (100, 90));

        let sku = &m.params[1].values;
        assert_eq!((sku.count, sku.nulls), (100, 10));
        let top: Vec<(SeenValue, u64, u64)> = sku
            .top
            .iter()
            .map(|v| (v.value.clone(), v.count, v.count_error))
            .collect();
        let s = |t: &str| SeenValue::Str {
            text: t.to_string(),
            full_len: None,
        };
        assert_eq!(
            top,
            [(s("apple"), 50, 0), (s("pear"), 30, 0), (s("plum"), 10, 0)]
        );
        assert_eq!(sku.other, 0);
        let len = sku.lengths.as_ref().unwrap();
        assert_eq!((len.count, len.min, len.max), (90, 4, 5));
        assert_eq!(len.mean, (50.0 * 5.0 + 30.0 * 4.0 + 10.0 * 4.0) / 90.0);
        assert!(sku.numbers.is_none());

        let r = m.returned.as_ref().unwrap();
        assert_eq!(r.count, 96);
        let n = r.numbers.as_ref().unwrap();
        assert_eq!((n.min, n.max), (Number::Int(10), Number::Int(990)));
    }

    #[test]
    fn boxed_values_count_by_box_class_and_feed_the_numbers() {
        let p = profile_of([
            Value::Boxed {
                class: StringId(7),
                value: Box::new(Value::Int(3)),
            },
            Value::Int(3),
            Value::Unavailable,
        ]);
        assert_eq!(
            p.types,
            [("java.lang.Integer".to_string(), 1), ("int".to_string(), 1)]
        );
        assert_eq!(p.top[0].value, SeenValue::Integer(3));
        assert_eq!(p.top[0].count, 2);
        assert_eq!((p.count, p.unavailable), (3, 1));
    }

    #[test]
    fn percentiles_stay_close_past_the_exact_limit_and_memory_stays_bounded() {
        let n = 100_000;
        let p = profile_of((1..=n).map(Value::Int));
        let s = p.numbers.unwrap();
        assert!(!s.percentiles_exact);
        assert_eq!(
            (s.min, s.max, s.count),
            (Number::Int(1), Number::Int(n.into()), n as u64)
        );
        assert_eq!(s.mean, (n as f64 + 1.0) / 2.0);
        for (got, want) in [(s.p50, 50_000.0), (s.p90, 90_000.0), (s.p99, 99_000.0)] {
            assert!(
                matches!(got, Number::Int(_)),
                "integer data, integer percentiles: {got:?}"
            );
            let got = got.as_f64();
            assert!((got - want).abs() / want < 0.016, "{got} vs {want}");
        }
        assert!(!p.distinct_exact);
        let d = p.distinct as f64;
        assert!(
            (d - n as f64).abs() / (n as f64) < 0.1,
            "distinct estimate {d} of {n}"
        );
    }

    #[test]
    fn frequent_values_survive_many_rare_ones_with_honest_error_bounds() {
        // "hot" is 1 value in 4 among 30,000 distinct rare values.
        let values = (0..40_000).map(|i| {
            if i % 4 == 0 {
                text("hot")
            } else {
                Value::Int(i)
            }
        });
        let p = profile_of(values);
        let hot = &p.top[0];
        assert_eq!(
            hot.value,
            SeenValue::Str {
                text: "hot".into(),
                full_len: None
            }
        );
        assert!(
            hot.count >= 10_000 && hot.count - hot.count_error <= 10_000,
            "{hot:?}"
        );
        assert_eq!(p.top.len(), DEFAULT_TOP);
    }

    #[test]
    fn histogram_coarsening_keeps_order_and_bounds() {
        let mut h = Histogram::default();
        let xs: Vec<f64> = (0..20_000)
            .map(|i| (i as f64 - 10_000.0) * 1.37e3)
            .collect();
        for &x in &xs {
            h.add(x);
        }
        assert!(h.buckets.len() <= HISTOGRAM_BUCKETS);
        assert!(h.precision < HISTOGRAM_PRECISION);
        let lo = h.value_at_rank(1, false);
        let hi = h.value_at_rank(20_000, false);
        assert!(lo < 0.0 && hi > 0.0 && lo < hi);
        let mid = h.value_at_rank(10_000, false);
        assert!(mid.abs() < 2.0e6, "{mid}");
    }

    #[test]
    fn histogram_percentiles_of_small_integers_are_exact() {
        // Past EXACT_NUMBERS, but every value has a bucket of its own.
        let values = (0..3000).map(|i| match i % 10 {
            0..=5 => Value::Int(-200),
            6..=8 => Value::Int(5),
            _ => Value::Int(250),
        });
        let s = profile_of(values).numbers.unwrap();
        assert!(!s.percentiles_exact);
        assert_eq!(
            (s.p50, s.p90, s.p99),
            (Number::Int(-200), Number::Int(5), Number::Int(250))
        );
    }

    #[test]
    fn distinct_values_are_estimated_once_too_many_to_count() {
        let p = profile_of((0..5000).map(|i| text(&format!("v{i}"))));
        assert!(!p.distinct_exact);
        assert!((4500..=5500).contains(&p.distinct), "{}", p.distinct);
        let few = profile_of((0..5000).map(|i| Value::Int(i % 7)));
        assert!(few.distinct_exact);
        assert_eq!(few.distinct, 7);
    }

    #[test]
    fn nans_are_counted_apart() {
        let p = profile_of([
            Value::Double(f64::NAN),
            Value::Double(1.5),
            Value::Float(0.1),
        ]);
        let s = p.numbers.unwrap();
        assert_eq!((s.count, s.nan), (2, 1));
        assert_eq!((s.min, s.max), (Number::Float(0.1), Number::Float(1.5)));
    }

    #[test]
    fn selection_skips_other_methods() {
        let syms = syms();
        let events = [call(vec![Value::Int(1), Value::Null])];
        let mut b = DataflowBuilder::new().select(|class, _| class == "other.Class");
        for e in &events {
            b.event(e, &syms);
        }
        assert!(b.finish(&syms).methods.is_empty());
    }
}
