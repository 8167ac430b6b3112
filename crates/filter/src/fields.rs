//! The fields an expression can test, their names and their types.
//!
//! Field names are the JSON Lines keys (`vmview show --format jsonl`), so
//! an expression reads like the `jq` one a user would otherwise write;
//! VMView's XML element names (`CLASS`, `MTD`, `THRD`, `MSG`, `CLASS2` …)
//! are accepted as aliases, so the expression can be written while looking
//! at an XML trace. A field is present on the event types whose JSON Lines
//! objects have the key; a comparison on an absent field is false.

/// A field of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    Id,
    Time,
    Type,
    Thread,
    Class,
    Method,
    Sig,
    Exception,
    Message,
    Loc,
    Line,
    Class2,
    Method2,
    Sig2,
    Loc2,
    Line2,
    Depth,
    Elapsed,
    Cpu,
    Alloc,
    Period,
    Value,
    Param,
    ParamName,
    Monitor,
    Owner,
    Wait,
    Timeout,
    TimedOut,
    Duration,
    Count,
    Loader,
    Source,
    Daemon,
    Priority,
    Group,
    Insn,
    Name,
    Fields,
}

/// What a field holds, which decides the operators and literals it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    /// An integer.
    Number,
    /// A duration; the number is the unit's multiple of a nanosecond
    /// (`1` for `_ns` fields, `1_000_000` for `timeout_ms`), so `1ms`
    /// literals convert.
    Duration(u64),
    Bool,
    /// The event type (`CALL`, `THROW` …).
    Type,
    /// An interned name (class, method, thread …): regex verdicts are
    /// cached per distinct name.
    Symbol,
    /// Free text (exception messages, monitor names).
    Text,
    /// A captured Java value (numbers compare numerically, strings as text).
    Value,
}

/// Every field: canonical name, aliases, type, one-line description.
pub const FIELDS: &[(Field, &str, &[&str], FieldType, &str)] = &[
    (Field::Id, "id", &["ID"], FieldType::Number, "event id"),
    (
        Field::Time,
        "time_ns",
        &["time", "TIME"],
        FieldType::Duration(1),
        "time since the trace started",
    ),
    (
        Field::Type,
        "type",
        &["TYPE"],
        FieldType::Type,
        "event type: THREAD_START, CLASS_LOAD, CALL, RETURN, THROW, CATCH, MONITOR_…, GC_…, DROPPED, SAMPLE, BYTECODE",
    ),
    (Field::Thread, "thread", &["THRD"], FieldType::Symbol, "thread name"),
    (
        Field::Class,
        "class",
        &["CLASS"],
        FieldType::Symbol,
        "class of the method (CALL, RETURN, THROW, CATCH, BYTECODE) or the loaded class (CLASS_LOAD)",
    ),
    (Field::Method, "method", &["MTD"], FieldType::Symbol, "method name"),
    (Field::Sig, "sig", &["SIG"], FieldType::Symbol, "JVM descriptor of the method"),
    (
        Field::Exception,
        "exception",
        &["EXC"],
        FieldType::Symbol,
        "exception class (THROW, CATCH, a RETURN unwound by an exception)",
    ),
    (Field::Message, "message", &["MSG"], FieldType::Text, "exception message (THROW)"),
    (
        Field::Loc,
        "loc",
        &["bci", "LOC"],
        FieldType::Number,
        "bytecode index of the throw or catch site, or of the instruction (BYTECODE)",
    ),
    (Field::Line, "line", &[], FieldType::Number, "source line of the throw or catch site"),
    (
        Field::Class2,
        "catch_class",
        &["caller_class", "CLASS2"],
        FieldType::Symbol,
        "the second site's class: where a THROW is caught, where a CALL came from",
    ),
    (
        Field::Method2,
        "catch_method",
        &["caller_method", "MTD2"],
        FieldType::Symbol,
        "the second site's method",
    ),
    (
        Field::Sig2,
        "catch_sig",
        &["caller_sig", "SIG2"],
        FieldType::Symbol,
        "the second site's descriptor",
    ),
    (
        Field::Loc2,
        "catch_loc",
        &["catch_bci", "caller_loc", "LOC2"],
        FieldType::Number,
        "the second site's bytecode index",
    ),
    (
        Field::Line2,
        "catch_line",
        &["caller_line"],
        FieldType::Number,
        "the second site's source line",
    ),
    (Field::Depth, "depth", &["DEPTH"], FieldType::Number, "call depth (CALL, RETURN)"),
    (
        Field::Elapsed,
        "elapsed_ns",
        &["elapsed", "ELAPSED"],
        FieldType::Duration(1),
        "time between CALL and RETURN",
    ),
    (Field::Value, "value", &["VALUE"], FieldType::Value, "return value (RETURN)"),
    (
        Field::Param,
        "param",
        &["params", "PARAM"],
        FieldType::Value,
        "any parameter value (CALL): true when one of them matches",
    ),
    (
        Field::ParamName,
        "param_name",
        &[],
        FieldType::Symbol,
        "any parameter name (CALL): true when one of them matches",
    ),
    (Field::Monitor, "monitor", &["MON"], FieldType::Text, "monitor, class@hash"),
    (Field::Owner, "owner", &["OWNER"], FieldType::Symbol, "thread owning the monitor"),
    (
        Field::Wait,
        "wait_ns",
        &["wait", "WAIT"],
        FieldType::Duration(1),
        "time waited for a monitor",
    ),
    (
        Field::Timeout,
        "timeout_ms",
        &["timeout", "TIMEOUT"],
        FieldType::Duration(1_000_000),
        "Object.wait timeout (0 = none)",
    ),
    (Field::TimedOut, "timed_out", &["TIMEDOUT"], FieldType::Bool, "the wait timed out"),
    (
        Field::Duration,
        "duration_ns",
        &["duration", "DURATION"],
        FieldType::Duration(1),
        "GC duration (GC_FINISH)",
    ),
    (Field::Count, "count", &["COUNT"], FieldType::Number, "events dropped (DROPPED)"),
    (
        Field::Cpu,
        "cpu_ns",
        &["CPU"],
        FieldType::Duration(1),
        "thread CPU time so far (CALL, RETURN with metrics=cpu)",
    ),
    (
        Field::Alloc,
        "alloc_bytes",
        &["ALLOC"],
        FieldType::Number,
        "bytes the thread allocated so far (CALL, RETURN with metrics=alloc)",
    ),
    (
        Field::Period,
        "period",
        &["PERIOD"],
        FieldType::Number,
        "tracing period number (PERIOD_START, PERIOD_END)",
    ),
    (Field::Loader, "loader", &["LOADER"], FieldType::Symbol, "class loader (CLASS_LOAD)"),
    (Field::Source, "source", &["SRC"], FieldType::Symbol, "class source (CLASS_LOAD)"),
    (Field::Daemon, "daemon", &[], FieldType::Bool, "daemon thread (THREAD_START, THREAD_END)"),
    (
        Field::Priority,
        "priority",
        &[],
        FieldType::Number,
        "thread priority (THREAD_START, THREAD_END)",
    ),
    (Field::Group, "group", &[], FieldType::Symbol, "thread group (THREAD_START, THREAD_END)"),
    (
        Field::Insn,
        "insn",
        &["INSN"],
        FieldType::Symbol,
        "instruction as javap -c shows it, e.g. 'iinc 1, 1' (BYTECODE)",
    ),
    (
        Field::Name,
        "name",
        &["RECORD"],
        FieldType::Symbol,
        "the source's event type, e.g. jdk.CPULoad (FOREIGN)",
    ),
    (
        Field::Fields,
        "fields",
        &[],
        FieldType::Text,
        "the source's fields as 'key=value' joined by spaces (FOREIGN)",
    ),
];

/// The field named `name` (canonical name or alias) and its type.
pub fn lookup(name: &str) -> Option<(Field, FieldType)> {
    FIELDS
        .iter()
        .find(|(_, n, aliases, _, _)| *n == name || aliases.contains(&name))
        .map(|&(f, _, _, t, _)| (f, t))
}

/// The canonical names, for error messages.
pub fn names() -> Vec<&'static str> {
    FIELDS.iter().map(|f| f.1).collect()
}
