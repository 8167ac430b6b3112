"""Plausibility of one soak run's trace, from `vmview stats --format json`.

Usage: check.py STATS_JSON APP RUN CLASSES [key=value ...]

CLASSES is the --classes given, or `none` (no calls are expected).

The key=values come from the application's own parameters (requests sent,
transactions, script rounds, source files). Prints what is implausible and
exits 1, or exits 0 silently.
"""

import json
import sys

stats = json.load(open(sys.argv[1]))
app, run, traced = sys.argv[2], sys.argv[3], sys.argv[4] != "none"
expect = {k: int(v) for k, v in (a.split("=", 1) for a in sys.argv[5:])}
by_type = stats["events_by_type"]
props = stats.get("properties", {})
problems = []


def calls(cls, method):
    """Calls and returns of one method, summed over its signatures."""
    c = r = 0
    for m in stats["methods"]["by_calls"]:
        if m["class"] == cls and m["method"] == method:
            c += m["calls"]
            r += m["returns"] + m["exceptional_returns"]
    return c, r


def thrown(cls):
    return sum(e["thrown"] for e in stats["exceptions"] if e["class"] == cls)


def need(what, ok):
    if not ok:
        problems.append(what)


chunks = stats["chunks"]
need(f"damaged chunks: {chunks}", chunks["damaged"] == 0 and chunks["finished_cleanly"])
need(f"dropped events: {stats['dropped']}", stats["dropped"] == 0)
need("no events", stats["events"] > 0)
kinds = {run} if run != "all" else {"calls", "exceptions", "threads", "classes", "locks", "gc", "samples", "alloc"}
if run == "calls-jvmti":
    kinds = {"calls"}

if "calls" in kinds and traced:
    method = {
        "jetty": ("soak.JettySoak$Squares", "handle", "requests"),
        "h2": ("soak.H2Soak", "transfer", "transactions"),
        "rhino": ("soak.JsHost", "tick", "rounds"),
        "javac": ("com.sun.tools.javac.parser.JavacParser", "parseCompilationUnit", "sources"),
    }[app]
    c, r = calls(method[0], method[1])
    n = expect[method[2]]
    need(f"{method[0]}.{method[1]}: {c} calls for {n} {method[2]}", c == n)
    need(f"{method[0]}.{method[1]}: {c} calls but {r} returns", c == r)
    need("CALL and RETURN counts differ", by_type.get("CALL", 0) == by_type.get("RETURN", 0))
if "exceptions" in kinds:
    # Jetty's handler and H2's duplicate keys throw a known number of
    # exceptions at least (the libraries may throw more internally).
    least = {
        "jetty": ("java.lang.NumberFormatException", expect.get("requests", 0) // 10),
        "h2": ("org.h2.jdbc.JdbcSQLIntegrityConstraintViolationException", expect.get("transactions", 0) // 10),
        "rhino": ("org.mozilla.javascript.JavaScriptException", expect.get("throws", 0)),
        "javac": (None, 0),
    }[app]
    if least[0]:
        t = thrown(least[0])
        need(f"{t} {least[0]} thrown, expected at least {least[1]}", t >= least[1])
if "threads" in kinds:
    need(f"THREAD_START: {by_type.get('THREAD_START', 0)}", by_type.get("THREAD_START", 0) >= (5 if app in ("jetty", "h2") else 1))
if "classes" in kinds:
    need(f"CLASS_LOAD: {by_type.get('CLASS_LOAD', 0)}", by_type.get("CLASS_LOAD", 0) >= 100)
if "gc" in kinds and app != "javac":
    # The drivers end with System.gc().
    need(f"GC_START: {by_type.get('GC_START', 0)}", by_type.get("GC_START", 0) >= 1)
    need("GC_START and GC_FINISH differ", by_type.get("GC_START", 0) == by_type.get("GC_FINISH", 0))
if "samples" in kinds:
    need(f"SAMPLE: {by_type.get('SAMPLE', 0)}", by_type.get("SAMPLE", 0) >= 1)
    # The signal sampler is the default; a fallback would say why.
    need(f"sampler: {props.get('sampler')}", props.get("sampler") == "signal")
if "alloc" in kinds:
    need(f"ALLOC_SAMPLE: {by_type.get('ALLOC_SAMPLE', 0)}", by_type.get("ALLOC_SAMPLE", 0) >= 1)

if problems:
    print("implausible trace: " + "; ".join(problems))
    sys.exit(1)
