//! Compiling an expression against the field table, and evaluating it.
//!
//! The hot path is a trace of hundreds of millions of events where most do
//! not match. So the compiled form is a small tree whose leaves are cheap:
//! an event-type test is a bit test; a test on a symbol field (class,
//! method, thread …) looks the event's handle up in a per-leaf verdict
//! table filled the first time that handle is seen, so the regex runs once
//! per distinct name; `&&` children are reordered to run the cheapest first.
//! Free text (messages, values) is tested per event, as it must be.

use regex::{Regex, RegexBuilder};
use vmview_format::{
    Event, EventKind, Loc, MethodId, Outcome, Scanned, StringId, SymbolTable, ThreadRef, Value,
    EVENT_TYPE_NAMES,
};

use crate::fields::{self, Field, FieldType};
use crate::parse::{self, Ast, Lit, LitKind, Op, ParseError};

/// A compiled filter expression. See the crate docs for the language.
#[derive(Debug)]
pub struct EventFilter {
    root: Node,
    source: String,
    /// [`type_mask`](Self::type_mask), kept for the scan's first test.
    mask: u32,
    /// [`matches_method`](Self::matches_method)'s verdicts by method
    /// handle: bit 0 "CALL known", bit 1 "a CALL matches", bits 2 and 3
    /// the same for RETURN.
    by_method: Vec<u8>,
}

/// Method handles past this are not cached by `matches_method` (handles
/// come from files; real ones are dense and far smaller).
const METHOD_CACHE_LIMIT: u32 = 1 << 20;

/// Verdicts for one leaf, by symbol handle: 0 unknown, 1 no, 2 yes.
#[derive(Debug, Default)]
struct Verdicts {
    dense: Vec<u8>,
    sparse: std::collections::HashMap<u32, bool>,
}

/// Past this handle verdicts go to the hash map (handles come from files).
const DENSE_LIMIT: u32 = 1 << 22;

impl Verdicts {
    #[inline]
    fn get(&self, id: u32) -> Option<bool> {
        if id < DENSE_LIMIT {
            match self.dense.get(id as usize) {
                Some(1) => Some(false),
                Some(2) => Some(true),
                _ => None,
            }
        } else {
            self.sparse.get(&id).copied()
        }
    }

    fn set(&mut self, id: u32, v: bool) {
        if id < DENSE_LIMIT {
            let i = id as usize;
            if i >= self.dense.len() {
                self.dense.resize(i + 1, 0);
            }
            self.dense[i] = if v { 2 } else { 1 };
        } else {
            self.sparse.insert(id, v);
        }
    }
}

/// A test on a string.
#[derive(Debug)]
enum StrTest {
    Regex(Regex),
    Eq(String),
    In(Vec<String>),
}

impl StrTest {
    fn test(&self, s: &str) -> bool {
        match self {
            StrTest::Regex(r) => r.is_match(s),
            StrTest::Eq(x) => x == s,
            StrTest::In(xs) => xs.iter().any(|x| x == s),
        }
    }
}

/// A literal for numeric comparisons: exact when integral.
#[derive(Debug, Clone, Copy)]
enum Number {
    Int(i128),
    Float(f64),
}

impl Number {
    fn cmp_int(self, op: Op, x: i128) -> bool {
        match self {
            Number::Int(n) => apply(op, x.cmp(&n)),
            Number::Float(f) => match (x as f64).partial_cmp(&f) {
                Some(o) => apply(op, o),
                None => false,
            },
        }
    }

    fn cmp_float(self, op: Op, x: f64) -> bool {
        let n = match self {
            Number::Int(n) => n as f64,
            Number::Float(f) => f,
        };
        match x.partial_cmp(&n) {
            Some(o) => apply(op, o),
            None => op == Op::Ne,
        }
    }
}

fn apply(op: Op, o: std::cmp::Ordering) -> bool {
    use std::cmp::Ordering::*;
    match op {
        Op::Eq => o == Equal,
        Op::Ne => o != Equal,
        Op::Lt => o == Less,
        Op::Le => o != Greater,
        Op::Gt => o == Greater,
        Op::Ge => o != Less,
        Op::Match | Op::NotMatch => false,
    }
}

/// What a test on a captured value compares with.
#[derive(Debug)]
enum ValueTest {
    Null,
    Bool(bool),
    Number(Op, Number),
    /// `==` a string or `~` a regex, on the value's text.
    Text(StrTest),
}

#[derive(Debug)]
enum Node {
    And(Vec<Node>),
    Or(Vec<Node>),
    Not(Box<Node>),
    Const(bool),
    /// The event's type is in the mask (bit = index in `EVENT_TYPE_NAMES`).
    Types(u32),
    /// A symbol field; `negate` turns `!=`/`!~` (still false when absent).
    Symbol {
        field: Field,
        test: StrTest,
        negate: bool,
        /// By string handle.
        verdicts: Verdicts,
        /// By the handle the name hangs off (the method for `class`,
        /// `method`, `sig` and the `2` fields, the thread for `thread`),
        /// which saves resolving it to a string handle first.
        by_handle: Verdicts,
    },
    /// `field == null`: the field is absent (or null in JSON terms).
    Absent(Field),
    Text {
        field: Field,
        test: StrTest,
        negate: bool,
    },
    Number {
        field: Field,
        op: Op,
        value: Number,
    },
    Bool {
        field: Field,
        value: bool,
        negate: bool,
    },
    Value {
        field: Field,
        test: ValueTest,
        negate: bool,
    },
}

impl Node {
    /// Rough cost, to run cheap tests first inside `&&` and `||`.
    fn cost(&self) -> u8 {
        match self {
            Node::Const(_) | Node::Types(_) => 0,
            Node::Number { .. } | Node::Bool { .. } | Node::Absent(_) => 1,
            Node::Symbol { .. } => 2,
            Node::Not(n) => n.cost(),
            Node::And(v) | Node::Or(v) => v.iter().map(Node::cost).max().unwrap_or(0).max(3),
            Node::Text { .. } | Node::Value { .. } => 4,
        }
    }
}

impl EventFilter {
    /// Parses and compiles an expression.
    pub fn parse(src: &str) -> Result<EventFilter, ParseError> {
        let ast = parse::parse(src)?;
        let root = compile(&ast)?;
        Ok(EventFilter::new(root, src.to_string()))
    }

    /// Events matching both `self` and `other`, as `(self) && (other)`
    /// would, but from two expressions parsed on their own: neither can
    /// close the other's parenthesis (`a) || (true` is an error alone, and
    /// stays one), and each keeps its own nesting limit and error columns.
    pub fn and(self, other: EventFilter) -> EventFilter {
        let source = format!("({}) && ({})", self.source, other.source);
        let mut nodes = Vec::new();
        for root in [self.root, other.root] {
            match root {
                Node::And(items) => nodes.extend(items),
                n => nodes.push(n),
            }
        }
        nodes.sort_by_key(Node::cost);
        EventFilter::new(merge_types(nodes, true), source)
    }

    fn new(root: Node, source: String) -> EventFilter {
        let mask = mask_of(&root);
        EventFilter {
            root,
            source,
            mask,
            by_method: Vec::new(),
        }
    }

    /// The expression as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Does `ev` match? `syms` must resolve the event's handles (it may
    /// grow between calls; a handle must keep its meaning).
    #[inline]
    pub fn matches(&mut self, ev: &Event, syms: &SymbolTable) -> bool {
        eval(&mut self.root, ev, syms)
    }

    /// Does the expression read only the event type, id, thread, or the
    /// class, method or signature of the event's method? Then
    /// [`matches_scanned`](Self::matches_scanned) on events from
    /// `ChunkFile::for_each_scanned` gives exactly what `matches` gives on
    /// fully decoded ones.
    pub fn reads_only_heads(&self) -> bool {
        fn heads(n: &Node) -> bool {
            match n {
                Node::And(v) | Node::Or(v) => v.iter().all(heads),
                Node::Not(n) => heads(n),
                Node::Const(_) | Node::Types(_) => true,
                Node::Symbol { field, .. } => matches!(
                    field,
                    Field::Thread | Field::Class | Field::Method | Field::Sig
                ),
                Node::Number { field, .. } => *field == Field::Id,
                _ => false,
            }
        }
        heads(&self.root)
    }

    /// Does the expression read only the event type and the class, method
    /// or signature of the event's method? Then a CALL's or RETURN's
    /// verdict depends on its type and method handle alone, and
    /// [`matches_method`](Self::matches_method) gives it.
    pub fn reads_only_type_and_method(&self) -> bool {
        fn tm(n: &Node) -> bool {
            match n {
                Node::And(v) | Node::Or(v) => v.iter().all(tm),
                Node::Not(n) => tm(n),
                Node::Const(_) | Node::Types(_) => true,
                Node::Symbol { field, .. } => {
                    matches!(field, Field::Class | Field::Method | Field::Sig)
                }
                _ => false,
            }
        }
        tm(&self.root)
    }

    /// [`matches`](Self::matches) for a CALL (`ret == false`) or RETURN of
    /// `method`, from nothing else; for an expression that
    /// [`reads_only_type_and_method`](Self::reads_only_type_and_method).
    /// The verdict is worked out once per type and method (while `syms`
    /// knows the method), then looked up: what a scan of hundreds of
    /// millions of CALLs and RETURNs over a few thousand methods needs.
    #[inline]
    pub fn matches_method(&mut self, ret: bool, method: MethodId, syms: &SymbolTable) -> bool {
        let shift = if ret { 2 } else { 0 };
        match self.by_method.get(method.0 as usize) {
            Some(&b) if b >> shift & 1 != 0 => b >> shift & 2 != 0,
            _ => self.method_verdict(ret, method, syms),
        }
    }

    #[cold]
    #[inline(never)]
    fn method_verdict(&mut self, ret: bool, method: MethodId, syms: &SymbolTable) -> bool {
        let type_bit = if ret { RETURN_BIT } else { CALL_BIT };
        let v = self.mask & type_bit != 0
            && eval_head(
                &mut self.root,
                &Head {
                    id: 0,
                    thread: ThreadRef(0),
                    type_bit,
                    method,
                },
                syms,
            );
        // A method not (yet) defined gets no cached verdict: in a forged
        // chunk its symbol may still come.
        if method.0 < METHOD_CACHE_LIMIT && syms.method(method).is_some() {
            let i = method.0 as usize;
            if i >= self.by_method.len() {
                self.by_method.resize(i + 1, 0);
            }
            let shift = if ret { 2 } else { 0 };
            self.by_method[i] |= (1 | u8::from(v) << 1) << shift;
        }
        v
    }

    /// Can a RETURN (`ret`) or a CALL match at all (by the top-level
    /// type test, see [`type_mask`](Self::type_mask))?
    pub fn may_match_head(&self, ret: bool) -> bool {
        self.mask & if ret { RETURN_BIT } else { CALL_BIT } != 0
    }

    /// Does the expression test an event's id? When not, which events
    /// match does not depend on their ids (nor on their order), and a
    /// count may read a chunk's events in any order.
    pub fn reads_ids(&self) -> bool {
        fn ids(n: &Node) -> bool {
            match n {
                Node::And(v) | Node::Or(v) => v.iter().any(ids),
                Node::Not(n) => ids(n),
                Node::Number { field, .. } | Node::Absent(field) => *field == Field::Id,
                _ => false,
            }
        }
        ids(&self.root)
    }

    /// [`matches`](Self::matches) for a scanned event; for an expression
    /// that [`reads_only_heads`](Self::reads_only_heads) (any other gives
    /// `false` on a head).
    #[inline]
    pub fn matches_scanned(&mut self, ev: &Scanned, syms: &SymbolTable) -> bool {
        match ev {
            Scanned::Full(ev) => eval(&mut self.root, ev, syms),
            Scanned::Head {
                id,
                thread,
                ret,
                method,
                ..
            } => {
                let type_bit = if *ret { RETURN_BIT } else { CALL_BIT };
                // Most heads fail the top-level type test: no tree walk.
                if self.mask & type_bit == 0 {
                    return false;
                }
                let head = Head {
                    id: *id,
                    thread: *thread,
                    type_bit,
                    method: *method,
                };
                eval_head(&mut self.root, &head, syms)
            }
        }
    }

    /// The ids an event can have and match, from the top-level `&&` terms
    /// on `id` (for skipping chunks through the index). Inclusive bounds.
    pub fn id_bounds(&self) -> (u64, u64) {
        bounds(&self.root, Field::Id)
    }

    /// Like [`id_bounds`](Self::id_bounds) for `time_ns`.
    pub fn time_bounds(&self) -> (u64, u64) {
        bounds(&self.root, Field::Time)
    }

    /// Does the expression read a parameter value, a returned value or an
    /// exception message? When not, events decoded lazily (without those:
    /// `ChunkFile::for_each_event` with `skip_values`) match exactly as
    /// fully decoded ones do.
    pub fn needs_values(&self) -> bool {
        fn reads_values(n: &Node) -> bool {
            let value_field = |f: &Field| {
                matches!(
                    f,
                    Field::Value | Field::Param | Field::ParamName | Field::Message
                )
            };
            match n {
                Node::And(v) | Node::Or(v) => v.iter().any(reads_values),
                Node::Not(n) => reads_values(n),
                Node::Const(_) | Node::Types(_) => false,
                Node::Symbol { field, .. }
                | Node::Absent(field)
                | Node::Text { field, .. }
                | Node::Number { field, .. }
                | Node::Bool { field, .. }
                | Node::Value { field, .. } => value_field(field),
            }
        }
        reads_values(&self.root)
    }

    /// The event types that can match (bit = index in `EVENT_TYPE_NAMES`),
    /// from the top-level `&&` terms.
    pub fn type_mask(&self) -> u32 {
        self.mask
    }
}

/// [`EventFilter::type_mask`] of a compiled tree.
fn mask_of(root: &Node) -> u32 {
    let all = (1u32 << EVENT_TYPE_NAMES.len()) - 1;
    match root {
        Node::Types(m) => *m,
        Node::And(items) => items.iter().fold(all, |acc, n| match n {
            Node::Types(m) => acc & m,
            _ => acc,
        }),
        _ => all,
    }
}

/// Inclusive bounds on `field` implied by the top-level conjunction.
fn bounds(root: &Node, field: Field) -> (u64, u64) {
    let mut lo = 0u64;
    let mut hi = u64::MAX;
    let mut apply_one = |n: &Node| {
        if let Node::Number {
            field: f,
            op,
            value: Number::Int(v),
        } = n
        {
            if *f != field {
                return;
            }
            let v = *v;
            let clamp = |x: i128| x.clamp(0, i128::from(u64::MAX)) as u64;
            match op {
                Op::Eq => {
                    lo = lo.max(clamp(v));
                    hi = hi.min(clamp(v));
                }
                Op::Ge => lo = lo.max(clamp(v)),
                Op::Gt => lo = lo.max(clamp(v + 1)),
                Op::Le => hi = hi.min(clamp(v)),
                Op::Lt => hi = hi.min(clamp(v - 1)),
                _ => {}
            }
        }
    };
    match root {
        Node::And(items) => items.iter().for_each(&mut apply_one),
        n => apply_one(n),
    }
    (lo, hi)
}

fn compile(ast: &Ast) -> Result<Node, ParseError> {
    Ok(match ast {
        Ast::Const(b) => Node::Const(*b),
        Ast::Not(inner) => Node::Not(Box::new(compile(inner)?)),
        Ast::And(items) | Ast::Or(items) => {
            let mut nodes = items.iter().map(compile).collect::<Result<Vec<_>, _>>()?;
            nodes.sort_by_key(Node::cost);
            if matches!(ast, Ast::And(_)) {
                // Type tests merge into one mask.
                merge_types(nodes, true)
            } else {
                merge_types(nodes, false)
            }
        }
        Ast::Test {
            field,
            field_col,
            op,
            op_col,
            lit,
        } => {
            let (f, ty) = field_named(field, *field_col)?;
            test(f, ty, *op, *op_col, lit)?
        }
        Ast::In {
            field,
            field_col,
            negated,
            lits,
        } => {
            let (f, ty) = field_named(field, *field_col)?;
            let node = match ty {
                FieldType::Type => {
                    let mut mask = 0;
                    for l in lits {
                        mask |= type_bits(Op::Eq, l)?;
                    }
                    Node::Types(mask)
                }
                FieldType::Symbol | FieldType::Text => {
                    let strs = lits.iter().map(lit_string).collect();
                    let test = StrTest::In(strs);
                    if ty == FieldType::Symbol {
                        Node::Symbol {
                            field: f,
                            test,
                            negate: false,
                            verdicts: Verdicts::default(),
                            by_handle: Verdicts::default(),
                        }
                    } else {
                        Node::Text {
                            field: f,
                            test,
                            negate: false,
                        }
                    }
                }
                _ => {
                    let alts = lits
                        .iter()
                        .map(|l| test(f, ty, Op::Eq, l.col, l))
                        .collect::<Result<Vec<_>, _>>()?;
                    Node::Or(alts)
                }
            };
            if *negated {
                Node::Not(Box::new(node))
            } else {
                node
            }
        }
    })
}

/// Within an `&&` (`and`) or `||`, folds the event-type tests into one.
fn merge_types(nodes: Vec<Node>, and: bool) -> Node {
    let mut mask: Option<u32> = None;
    let mut rest = Vec::new();
    for n in nodes {
        match n {
            Node::Types(m) => {
                mask = Some(match mask {
                    None => m,
                    Some(x) if and => x & m,
                    Some(x) => x | m,
                })
            }
            other => rest.push(other),
        }
    }
    if let Some(m) = mask {
        rest.insert(0, Node::Types(m));
    }
    if rest.len() == 1 {
        return rest.pop().expect("one node");
    }
    if and {
        Node::And(rest)
    } else {
        Node::Or(rest)
    }
}

fn field_named(name: &str, col: usize) -> Result<(Field, FieldType), ParseError> {
    fields::lookup(name).ok_or_else(|| {
        ParseError::new(
            col,
            name.chars().count(),
            format!(
                "unknown field {name:?}; fields: {}",
                fields::names().join(", ")
            ),
        )
    })
}

fn lit_string(l: &Lit) -> String {
    match &l.kind {
        LitKind::Word(w) | LitKind::Str(w) => w.clone(),
        LitKind::Num(n, u) => format!("{n}{}", u.as_deref().unwrap_or("")),
    }
}

fn type_bits(op: Op, l: &Lit) -> Result<u32, ParseError> {
    let name = lit_string(l);
    let mut mask = 0u32;
    match op {
        Op::Match | Op::NotMatch => {
            let re = regex(&name, l)?;
            for (i, t) in EVENT_TYPE_NAMES.iter().enumerate() {
                if re.is_match(t) {
                    mask |= 1 << i;
                }
            }
        }
        _ => {
            let upper = name.to_ascii_uppercase();
            match EVENT_TYPE_NAMES.iter().position(|t| *t == upper) {
                Some(i) => mask |= 1 << i,
                None => {
                    return Err(ParseError::new(
                        l.col,
                        l.width,
                        format!(
                            "unknown event type {name}; types: {}",
                            EVENT_TYPE_NAMES.join(", ")
                        ),
                    ))
                }
            }
        }
    }
    Ok(mask)
}

/// The most memory one compiled regular expression of a filter may take.
/// Names of classes, methods and threads need a few KiB (`\w+` is 50 KiB,
/// being Unicode-aware); the regex crate's own default, 10 MiB, lets a
/// pattern such as `\w{100}` take 45 ms to compile and `(?:\w{20}){20}`
/// 200 ms to be refused, which a filter typed by hand never needs.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

fn regex(pattern: &str, l: &Lit) -> Result<Regex, ParseError> {
    RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| {
            let message = match e {
                regex::Error::CompiledTooBig(limit) => format!(
                    "regular expression too big: compiled, it would take more than {} KiB \
                     (a counted repetition such as \\w{{50}} is the usual cause: \
                     try a smaller count, + or *, or [a-zA-Z0-9_] for \\w)",
                    limit / 1024
                ),
                e => {
                    let msg = e.to_string();
                    let last = msg.lines().last().unwrap_or("invalid").trim().to_string();
                    format!("bad regular expression: {last}")
                }
            };
            ParseError::new(l.col, l.width, message)
        })
}

fn number(l: &Lit, ty: FieldType, field: Field) -> Result<Number, ParseError> {
    let (text, unit) = match &l.kind {
        LitKind::Num(n, u) => (n.as_str(), u.as_deref()),
        _ => {
            return Err(ParseError::new(
                l.col,
                l.width,
                format!("{} takes a number here", canonical(field)),
            ))
        }
    };
    let bad = || ParseError::new(l.col, l.width, format!("{text:?} is not a number"));
    let scale: Option<f64> = match unit {
        None => None,
        Some(u) => {
            let FieldType::Duration(field_unit) = ty else {
                return Err(ParseError::new(
                    l.col,
                    l.width,
                    format!(
                        "{} is not a duration: write the number without a unit",
                        canonical(field)
                    ),
                ));
            };
            let ns: f64 = match u {
                "ns" => 1.0,
                "us" | "µs" => 1e3,
                "ms" => 1e6,
                "s" => 1e9,
                "m" | "min" => 60e9,
                "h" => 3600e9,
                _ => {
                    return Err(ParseError::new(
                        l.col,
                        l.width,
                        format!("unknown unit {u:?}: use ns, us, ms, s, m or h"),
                    ))
                }
            };
            Some(ns / field_unit as f64)
        }
    };
    if let (Ok(i), None) = (text.parse::<i128>(), scale) {
        return Ok(Number::Int(i));
    }
    let f: f64 = text.parse().map_err(|_| bad())?;
    let v = f * scale.unwrap_or(1.0);
    if v.fract() == 0.0 && v.abs() < 1e30 {
        Ok(Number::Int(v as i128))
    } else {
        Ok(Number::Float(v))
    }
}

fn canonical(f: Field) -> &'static str {
    fields::FIELDS
        .iter()
        .find(|x| x.0 == f)
        .map_or("?", |x| x.1)
}

fn test(f: Field, ty: FieldType, op: Op, op_col: usize, l: &Lit) -> Result<Node, ParseError> {
    let ordering = matches!(op, Op::Lt | Op::Le | Op::Gt | Op::Ge);
    let regex_op = matches!(op, Op::Match | Op::NotMatch);
    let negate = matches!(op, Op::Ne | Op::NotMatch);
    let not_for = |what: &str| {
        ParseError::new(
            op_col,
            op.text().chars().count(),
            format!("{} cannot be used on {} ({what})", op.text(), canonical(f)),
        )
    };
    Ok(match ty {
        FieldType::Type => {
            if ordering {
                return Err(not_for("an event type"));
            }
            let mask = type_bits(op, l)?;
            let all = (1u32 << EVENT_TYPE_NAMES.len()) - 1;
            Node::Types(if negate { all & !mask } else { mask })
        }
        FieldType::Symbol | FieldType::Text => {
            if ordering {
                return Err(not_for("a name: use == != ~ !~ or in"));
            }
            let s = lit_string(l);
            if !regex_op && matches!(&l.kind, LitKind::Word(w) if w == "null") {
                let n = Node::Absent(f);
                return Ok(if negate { Node::Not(Box::new(n)) } else { n });
            }
            let test = if regex_op {
                StrTest::Regex(regex(&s, l)?)
            } else {
                StrTest::Eq(s)
            };
            if ty == FieldType::Symbol {
                Node::Symbol {
                    field: f,
                    test,
                    negate,
                    verdicts: Verdicts::default(),
                    by_handle: Verdicts::default(),
                }
            } else {
                Node::Text {
                    field: f,
                    test,
                    negate,
                }
            }
        }
        FieldType::Number | FieldType::Duration(_) => {
            if regex_op {
                return Err(not_for("a number: use == != < <= > >="));
            }
            Node::Number {
                field: f,
                op,
                value: number(l, ty, f)?,
            }
        }
        FieldType::Bool => {
            if ordering || regex_op {
                return Err(not_for("true or false: use == or !="));
            }
            let value = match lit_string(l).as_str() {
                "true" => true,
                "false" => false,
                _ => {
                    return Err(ParseError::new(
                        l.col,
                        l.width,
                        format!("{} is true or false", canonical(f)),
                    ))
                }
            };
            Node::Bool {
                field: f,
                value,
                negate,
            }
        }
        FieldType::Value => {
            let test = match (&l.kind, op) {
                (_, Op::Match | Op::NotMatch) => {
                    ValueTest::Text(StrTest::Regex(regex(&lit_string(l), l)?))
                }
                (LitKind::Num(..), _) => ValueTest::Number(
                    if negate { Op::Eq } else { op },
                    number(l, FieldType::Number, f)?,
                ),
                (_, Op::Lt | Op::Le | Op::Gt | Op::Ge) => {
                    return Err(ParseError::new(
                        l.col,
                        l.width,
                        "ordering comparisons take a number",
                    ))
                }
                (LitKind::Word(w), _) if w == "null" => ValueTest::Null,
                (LitKind::Word(w), _) if w == "true" || w == "false" => {
                    ValueTest::Bool(w == "true")
                }
                (LitKind::Word(w) | LitKind::Str(w), _) => ValueTest::Text(StrTest::Eq(w.clone())),
            };
            Node::Value {
                field: f,
                test,
                negate,
            }
        }
    })
}

#[inline]
fn type_bit(ev: &Event) -> u32 {
    1 << ev.kind.type_index()
}

/// A CALL or RETURN as [`Scanned::Head`] gives it.
struct Head {
    id: u64,
    thread: ThreadRef,
    type_bit: u32,
    method: MethodId,
}

/// Type bits of CALL and RETURN (their `EventKind::type_index`).
const CALL_BIT: u32 = 1 << 3;
const RETURN_BIT: u32 = 1 << 4;

/// [`eval`] on a head, for the nodes `reads_only_heads` admits; the same
/// verdict caches, so a head and a full event get the same answer.
fn eval_head(node: &mut Node, ev: &Head, syms: &SymbolTable) -> bool {
    match node {
        Node::Types(mask) => *mask & ev.type_bit != 0,
        Node::And(items) => items.iter_mut().all(|n| eval_head(n, ev, syms)),
        Node::Or(items) => items.iter_mut().any(|n| eval_head(n, ev, syms)),
        Node::Not(n) => !eval_head(n, ev, syms),
        Node::Const(b) => *b,
        Node::Symbol {
            field,
            test,
            negate,
            verdicts,
            by_handle,
        } => {
            let h = match field {
                Field::Thread => ev.thread.0,
                Field::Class | Field::Method | Field::Sig => ev.method.0,
                _ => return false,
            };
            if let Some(v) = by_handle.get(h) {
                return v != *negate;
            }
            let id = match field {
                Field::Thread => thread_name(ev.thread, syms),
                Field::Class => syms.method(ev.method).map(|m| m.class),
                Field::Method => syms.method(ev.method).map(|m| m.name),
                _ => syms.method(ev.method).map(|m| m.sig),
            };
            let Some(id) = id else {
                return false;
            };
            let v = symbol_verdict(id, test, verdicts, syms);
            by_handle.set(h, v);
            v != *negate
        }
        Node::Number {
            field: Field::Id,
            op,
            value,
        } => value.cmp_int(*op, i128::from(ev.id)),
        _ => false,
    }
}

fn eval(node: &mut Node, ev: &Event, syms: &SymbolTable) -> bool {
    match node {
        Node::Types(mask) => *mask & type_bit(ev) != 0,
        Node::And(items) => items.iter_mut().all(|n| eval(n, ev, syms)),
        Node::Or(items) => items.iter_mut().any(|n| eval(n, ev, syms)),
        Node::Not(n) => !eval(n, ev, syms),
        Node::Const(b) => *b,
        Node::Symbol {
            field,
            test,
            negate,
            verdicts,
            by_handle,
        } => {
            if let Some(h) = handle_of(*field, ev) {
                if let Some(v) = by_handle.get(h) {
                    return v != *negate;
                }
                let Some(id) = symbol_of(*field, ev, syms) else {
                    return false;
                };
                let v = symbol_verdict(id, test, verdicts, syms);
                by_handle.set(h, v);
                return v != *negate;
            }
            if *field == Field::ParamName {
                let EventKind::Call { method, params, .. } = &ev.kind else {
                    return false;
                };
                return param_names(*method, params.len(), syms)
                    .any(|n| symbol_verdict(n, test, verdicts, syms) != *negate);
            }
            match symbol_of(*field, ev, syms) {
                Some(id) => symbol_verdict(id, test, verdicts, syms) != *negate,
                None => false,
            }
        }
        Node::Absent(f) => absent(*f, ev, syms),
        Node::Text {
            field,
            test,
            negate,
        } => match text_of(*field, ev, syms) {
            Some(s) => test.test(&s) != *negate,
            None => false,
        },
        Node::Number { field, op, value } => match number_of(*field, ev, syms) {
            Some(x) => value.cmp_int(*op, x),
            None => false,
        },
        Node::Bool {
            field,
            value,
            negate,
        } => match bool_of(*field, ev, syms) {
            Some(b) => (b == *value) != *negate,
            None => false,
        },
        Node::Value {
            field,
            test,
            negate,
        } => match (&ev.kind, *field) {
            (
                EventKind::Return {
                    outcome: Outcome::Value(v),
                    ..
                },
                Field::Value,
            ) => value_test(v, test, syms) != *negate,
            (EventKind::Call { params, .. }, Field::Param) => {
                params.iter().any(|v| value_test(v, test, syms) != *negate)
            }
            _ => false,
        },
    }
}

#[inline]
fn symbol_verdict(
    id: StringId,
    test: &StrTest,
    verdicts: &mut Verdicts,
    syms: &SymbolTable,
) -> bool {
    if let Some(v) = verdicts.get(id.0) {
        return v;
    }
    let v = test.test(syms.string(id));
    verdicts.set(id.0, v);
    v
}

fn param_names<'a>(
    m: MethodId,
    count: usize,
    syms: &'a SymbolTable,
) -> impl Iterator<Item = StringId> + 'a {
    syms.method(m)
        .map(|s| s.param_names.as_slice())
        .unwrap_or(&[])
        .iter()
        .take(count)
        .copied()
}

/// The method and site the `2` fields read: catch site of a THROW, caller
/// of a CALL.
fn second_site(ev: &Event) -> Option<(MethodId, Loc)> {
    match &ev.kind {
        EventKind::Throw { catch, .. } => *catch,
        EventKind::Call { caller, .. } => *caller,
        _ => None,
    }
}

/// The method of the event (CALL, RETURN, THROW, CATCH).
fn method_of(ev: &Event) -> Option<MethodId> {
    match &ev.kind {
        EventKind::Call { method, .. }
        | EventKind::Return { method, .. }
        | EventKind::Throw { method, .. }
        | EventKind::Catch { method, .. }
        | EventKind::Bytecode { method, .. } => Some(*method),
        _ => None,
    }
}

fn thread_name(t: ThreadRef, syms: &SymbolTable) -> Option<StringId> {
    syms.thread(t).map(|t| t.name)
}

/// For fields named through a method or thread: that handle (cached
/// verdicts by it skip a symbol lookup). `None` for the other fields, and
/// for events where the field is a plain string (a CLASS_LOAD's class).
#[inline]
fn handle_of(f: Field, ev: &Event) -> Option<u32> {
    match f {
        Field::Thread => Some(ev.thread.0),
        Field::Class | Field::Method | Field::Sig => match &ev.kind {
            EventKind::Call { method, .. }
            | EventKind::Return { method, .. }
            | EventKind::Throw { method, .. }
            | EventKind::Catch { method, .. }
            | EventKind::Bytecode { method, .. } => Some(method.0),
            _ => None,
        },
        _ => None,
    }
}

/// The handle of a symbol field, `None` when the event has no such field
/// (or the trace lost the symbol).
#[inline]
fn symbol_of(f: Field, ev: &Event, syms: &SymbolTable) -> Option<StringId> {
    match f {
        Field::Thread => thread_name(ev.thread, syms),
        Field::Class => match &ev.kind {
            EventKind::ClassLoad { class, .. } => Some(*class),
            _ => syms.method(method_of(ev)?).map(|m| m.class),
        },
        Field::Method => syms.method(method_of(ev)?).map(|m| m.name),
        Field::Sig => syms.method(method_of(ev)?).map(|m| m.sig),
        Field::Class2 => syms.method(second_site(ev)?.0).map(|m| m.class),
        Field::Method2 => syms.method(second_site(ev)?.0).map(|m| m.name),
        Field::Sig2 => syms.method(second_site(ev)?.0).map(|m| m.sig),
        Field::Exception => match &ev.kind {
            EventKind::Throw { exception, .. } | EventKind::Catch { exception, .. } => {
                Some(*exception)
            }
            EventKind::Return {
                outcome: Outcome::Exception { class },
                ..
            } => Some(*class),
            _ => None,
        },
        Field::Loader => match &ev.kind {
            EventKind::ClassLoad { loader, .. } => Some(*loader),
            _ => None,
        },
        Field::Source => match &ev.kind {
            EventKind::ClassLoad { source, .. } => Some(*source),
            _ => None,
        },
        Field::Owner => match &ev.kind {
            EventKind::MonitorContendedEnter { owner: Some(o), .. } => thread_name(*o, syms),
            _ => None,
        },
        Field::Insn => match &ev.kind {
            EventKind::Bytecode { insn, .. } => Some(*insn),
            _ => None,
        },
        Field::Name => match &ev.kind {
            EventKind::Foreign { name, .. } => Some(*name),
            _ => None,
        },
        Field::Group => match &ev.kind {
            EventKind::ThreadStart | EventKind::ThreadEnd => {
                syms.thread(ev.thread).map(|t| t.group)
            }
            _ => None,
        },
        _ => None,
    }
}

fn text_of(f: Field, ev: &Event, syms: &SymbolTable) -> Option<String> {
    match (f, &ev.kind) {
        (Field::Message, EventKind::Throw { message, .. }) => message.clone(),
        (Field::Fields, EventKind::Foreign { fields, .. }) => Some(
            fields
                .iter()
                .map(|(k, v)| format!("{}={v}", syms.string(*k)))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        (
            Field::Monitor,
            EventKind::MonitorContendedEnter { monitor, .. }
            | EventKind::MonitorContendedEntered { monitor, .. }
            | EventKind::MonitorWait { monitor, .. }
            | EventKind::MonitorWaited { monitor, .. }
            | EventKind::MonitorEnter { monitor, .. }
            | EventKind::MonitorExit { monitor, .. },
        ) => Some(format!("{}@{:x}", syms.string(monitor.class), monitor.hash)),
        _ => None,
    }
}

/// `field == null`: true when the event lacks the field.
fn absent(f: Field, ev: &Event, syms: &SymbolTable) -> bool {
    match f {
        Field::Message => !matches!(
            &ev.kind,
            EventKind::Throw {
                message: Some(_),
                ..
            }
        ),
        Field::Monitor | Field::Fields => text_of(f, ev, syms).is_none(),
        Field::Source => match &ev.kind {
            EventKind::ClassLoad { source, .. } => syms.string(*source).is_empty(),
            _ => true,
        },
        _ => symbol_of(f, ev, syms).is_none(),
    }
}

fn number_of(f: Field, ev: &Event, syms: &SymbolTable) -> Option<i128> {
    let k = &ev.kind;
    Some(match f {
        Field::Id => i128::from(ev.id),
        Field::Time => i128::from(ev.time_ns),
        Field::Loc if matches!(k, EventKind::Bytecode { .. }) => {
            let EventKind::Bytecode { bci, .. } = k else {
                return None;
            };
            i128::from(*bci)
        }
        Field::Loc | Field::Line => {
            let loc = match k {
                EventKind::Throw { loc, .. } | EventKind::Catch { loc, .. } => loc,
                _ => return None,
            };
            if f == Field::Loc {
                i128::from(loc.bci)
            } else {
                i128::from(loc.line?)
            }
        }
        Field::Loc2 => i128::from(second_site(ev)?.1.bci),
        Field::Line2 => i128::from(second_site(ev)?.1.line?),
        Field::Depth => match k {
            EventKind::Call { depth, .. }
            | EventKind::Return { depth, .. }
            | EventKind::MonitorEnter { depth, .. }
            | EventKind::MonitorExit { depth, .. } => i128::from(*depth),
            _ => return None,
        },
        Field::Cpu => match k {
            EventKind::Call { metrics, .. } | EventKind::Return { metrics, .. } => {
                i128::from(metrics.cpu_ns?)
            }
            _ => return None,
        },
        Field::Alloc => match k {
            EventKind::Call { metrics, .. } | EventKind::Return { metrics, .. } => {
                i128::from(metrics.alloc_bytes?)
            }
            _ => return None,
        },
        Field::Period => match k {
            EventKind::PeriodStart { period, .. } | EventKind::PeriodEnd { period } => {
                i128::from(*period)
            }
            _ => return None,
        },
        Field::Elapsed => match k {
            EventKind::Return { elapsed_ns, .. } => i128::from(*elapsed_ns),
            _ => return None,
        },
        Field::Wait => match k {
            EventKind::MonitorContendedEntered { wait_ns, .. }
            | EventKind::MonitorWaited { wait_ns, .. } => i128::from(*wait_ns),
            _ => return None,
        },
        Field::Timeout => match k {
            EventKind::MonitorWait { timeout_ms, .. } => i128::from(*timeout_ms),
            _ => return None,
        },
        Field::Duration => match k {
            EventKind::GcFinish { duration_ns } => i128::from(*duration_ns),
            _ => return None,
        },
        Field::Count => match k {
            EventKind::Dropped { count } => i128::from(*count),
            _ => return None,
        },
        Field::Priority => match k {
            EventKind::ThreadStart | EventKind::ThreadEnd => {
                i128::from(syms.thread(ev.thread)?.priority)
            }
            _ => return None,
        },
        _ => return None,
    })
}

fn bool_of(f: Field, ev: &Event, syms: &SymbolTable) -> Option<bool> {
    match (f, &ev.kind) {
        (Field::TimedOut, EventKind::MonitorWaited { timed_out, .. }) => Some(*timed_out),
        (Field::Daemon, EventKind::ThreadStart | EventKind::ThreadEnd) => {
            Some(syms.thread(ev.thread)?.daemon)
        }
        _ => None,
    }
}

/// A captured value against a value test, the way its JSON Lines form
/// reads: numbers compare numerically, strings as their text, objects as
/// `class@hash`, arrays as `type[length]`.
fn value_test(v: &Value, t: &ValueTest, syms: &SymbolTable) -> bool {
    let v = match v {
        Value::Boxed { value, .. } => value.as_ref(),
        v => v,
    };
    match t {
        ValueTest::Null => matches!(v, Value::Null),
        ValueTest::Bool(b) => matches!(v, Value::Boolean(x) if x == b),
        ValueTest::Number(op, n) => match v {
            Value::Byte(x) => n.cmp_int(*op, i128::from(*x)),
            Value::Short(x) => n.cmp_int(*op, i128::from(*x)),
            Value::Int(x) => n.cmp_int(*op, i128::from(*x)),
            Value::Long(x) => n.cmp_int(*op, i128::from(*x)),
            Value::Float(x) => n.cmp_float(*op, f64::from(*x)),
            Value::Double(x) => n.cmp_float(*op, *x),
            _ => false,
        },
        ValueTest::Text(test) => match v {
            Value::Str { text, .. } => test.test(text),
            Value::Char(c) => test.test(
                &char::from_u32(u32::from(*c))
                    .unwrap_or('\u{fffd}')
                    .to_string(),
            ),
            Value::Null => test.test("null"),
            Value::Boolean(b) => test.test(if *b { "true" } else { "false" }),
            Value::Byte(x) => test.test(&x.to_string()),
            Value::Short(x) => test.test(&x.to_string()),
            Value::Int(x) => test.test(&x.to_string()),
            Value::Long(x) => test.test(&x.to_string()),
            Value::Float(x) => test.test(&x.to_string()),
            Value::Double(x) => test.test(&x.to_string()),
            Value::Array { class, length } => {
                let class = syms.string(*class);
                let shown = match class.find("[]") {
                    Some(i) => format!("{}[{length}]{}", &class[..i], &class[i + 2..]),
                    None => format!("{class}[{length}]"),
                };
                test.test(&shown)
            }
            Value::Object { class, hash } => {
                test.test(&format!("{}@{hash:x}", syms.string(*class)))
            }
            Value::Boxed { .. } | Value::Unavailable => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmview_format::{MethodSymbol, Symbol, ThreadSymbol};

    fn syms() -> SymbolTable {
        let mut s = SymbolTable::default();
        for (i, t) in [
            "main",
            "shop.Inventory",
            "add",
            "(I)V",
            "java.io.IOException",
            "qty",
            "pool-1-thread-2",
        ]
        .iter()
        .enumerate()
        {
            s.insert(Symbol::String {
                id: StringId(i as u32),
                text: t.to_string(),
            });
        }
        s.insert(Symbol::Method(MethodSymbol {
            id: MethodId(0),
            class: StringId(1),
            name: StringId(2),
            sig: StringId(3),
            param_names: vec![StringId(5)],
            modifiers: 0,
        }));
        for (t, name) in [(0, 0), (1, 6)] {
            s.insert(Symbol::Thread(ThreadSymbol {
                id: ThreadRef(t),
                java_id: 1,
                name: StringId(name),
                group: StringId(0),
                priority: 5,
                daemon: false,
            }));
        }
        s
    }

    fn call(id: u64, thread: u32, qty: i32) -> Event {
        Event {
            id,
            time_ns: id * 1000,
            thread: ThreadRef(thread),
            kind: EventKind::Call {
                metrics: Default::default(),
                method: MethodId(0),
                depth: 1,
                caller: None,
                params: vec![Value::Int(qty)],
            },
        }
    }

    fn ret(id: u64, elapsed_ns: u64) -> Event {
        Event {
            id,
            time_ns: id * 1000,
            thread: ThreadRef(0),
            kind: EventKind::Return {
                metrics: Default::default(),
                method: MethodId(0),
                depth: 1,
                outcome: Outcome::Void,
                elapsed_ns,
            },
        }
    }

    fn m(expr: &str, ev: &Event) -> bool {
        EventFilter::parse(expr)
            .unwrap_or_else(|e| panic!("{}", e.render(expr)))
            .matches(ev, &syms())
    }

    /// Compilation, evaluation and dropping recurse over the tree too: at
    /// the parser's nesting limit they fit in a thread with half the stack
    /// of `vmview serve`'s request threads, even in a debug build.
    #[test]
    fn a_filter_at_the_nesting_limit_compiles_and_evaluates_on_a_small_stack() {
        let n = crate::MAX_NESTING;
        let deep_not = format!("{}type == CALL", "!".repeat(n));
        let deep_and = format!(
            "{}type == CALL{}",
            "(param == 7 && ".repeat(n),
            ")".repeat(n)
        );
        std::thread::Builder::new()
            .stack_size(1024 * 1024)
            .spawn(move || {
                // An even number of `!`: the test itself.
                assert!(m(&deep_not, &call(1, 0, 7)));
                assert!(m(&deep_and, &call(1, 0, 7)));
                assert!(!m(&deep_and, &call(1, 0, 8)));
            })
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn and_of_two_filters_is_their_conjunction_and_keeps_the_bounds() {
        let f = EventFilter::parse("type in [CALL, RETURN] && id >= 2")
            .unwrap()
            .and(EventFilter::parse("type == CALL || param == 9").unwrap());
        assert_eq!(
            f.source(),
            "(type in [CALL, RETURN] && id >= 2) && (type == CALL || param == 9)"
        );
        assert_eq!(f.id_bounds(), (2, u64::MAX));
        let mut f = f;
        assert!(f.matches(&call(2, 0, 1), &syms()));
        assert!(!f.matches(&call(1, 0, 1), &syms()));
        assert!(!f.matches(&ret(3, 5), &syms()));
    }

    #[test]
    fn fields_types_and_operators() {
        let c = call(1, 1, 7);
        assert!(m(
            "type == CALL && class ~ \"^shop\\\\.\" && thread ~ \"pool-.*\"",
            &c
        ));
        assert!(m("(type in [CALL, RETURN]) && method ~ \"^ad\"", &c));
        assert!(!m("!(class ~ \"Inventory\")", &c));
        assert!(m(
            "CLASS == shop.Inventory && MTD == add && THRD != main",
            &c
        ));
        assert!(m("param == 7 && param > 6 && param_name == qty", &c));
        assert!(!m("param < 7", &c));
        assert!(m("elapsed_ns > 1ms", &ret(2, 1_500_000)));
        assert!(!m("elapsed_ns > 1.5ms", &ret(2, 1_500_000)));
        assert!(m("elapsed_ns >= 1.5ms", &ret(2, 1_500_000)));
        assert!(!m("elapsed_ns > 1ms", &c), "absent field compares false");
        assert!(m("message == null && type != THROW", &c));
        assert!(m("id >= 1 && id < 2 || false", &c));
        assert!(m("type ~ \"^C\"", &c));
    }

    #[test]
    fn symbol_regex_runs_once_per_symbol() {
        let syms = syms();
        let mut f = EventFilter::parse("thread ~ \"pool\"").unwrap();
        for i in 0..1000 {
            assert_eq!(f.matches(&call(i, (i % 2) as u32, 1), &syms), i % 2 == 1);
        }
        let Node::Symbol { verdicts, .. } = &f.root else {
            panic!()
        };
        assert_eq!(verdicts.dense, vec![1, 0, 0, 0, 0, 0, 2]);
    }

    #[test]
    fn type_errors_point_at_the_culprit() {
        for (expr, col, needle) in [
            ("type == THORW", 8, "unknown event type THORW"),
            ("clas ~ \"x\"", 0, "unknown field \"clas\""),
            ("class > 3", 6, "cannot be used on class"),
            ("depth > 1ms", 8, "not a duration"),
            ("class ~ \"(\"", 8, "bad regular expression"),
            ("class ~ \"\\\\w{50}\"", 8, "regular expression too big"),
            ("elapsed_ns > 3 parsecs", 15, "expected && or ||"),
        ] {
            let e = EventFilter::parse(expr).unwrap_err();
            assert_eq!(e.column, col, "{expr}: {e}");
            assert!(e.message.contains(needle), "{expr}: {e}");
        }
    }

    /// A pattern that compiles to more than the limit is refused quickly,
    /// with a hint, instead of taking the regex crate's own 10 MiB (and
    /// tens of milliseconds); the same repetition over ASCII still fits.
    #[test]
    fn regex_too_big_for_the_size_limit_is_refused_with_a_hint() {
        let expr = "type == CALL && method ~ \"^\\\\w{200}$\"";
        let e = EventFilter::parse(expr).unwrap_err();
        assert_eq!(e.column, 25, "{e}");
        assert!(e.message.contains("more than 1024 KiB"), "{e}");
        assert!(e.message.contains("[a-zA-Z0-9_]"), "{e}");
        assert_eq!(e.width, "\"^\\\\w{200}$\"".len(), "{}", e.render(expr));
        for fits in [
            "method ~ \"^[a-zA-Z0-9_]{200}$\"",
            "method ~ \"^\\\\w{20}$\"",
        ] {
            EventFilter::parse(fits).unwrap_or_else(|e| panic!("{}", e.render(fits)));
        }
    }

    #[test]
    fn bounds_come_from_top_level_conjunctions() {
        let f = EventFilter::parse("id >= 10 && id < 20 && type == CALL").unwrap();
        assert_eq!(f.id_bounds(), (10, 19));
        assert_eq!(f.type_mask(), 1 << 3);
        let f = EventFilter::parse("id >= 10 || id < 20").unwrap();
        assert_eq!(f.id_bounds(), (0, u64::MAX));
    }
}
