//! `mode=bci` (bytecode instrumentation, the default) against `mode=jvmti`
//! (JVMTI method events): both record the same calls, with the same
//! arguments, return values and exception outcomes, on real fixtures; the
//! instrumented classes pass HotSpot's verifier and the program's output
//! does not change, also with a whole Debian library jar traced.
//!
//! The two modes differ in ways docs/OPTIONS.md documents, which the
//! comparison normalises away rather than ignores wholesale:
//!
//! - a constructor's CALL: JVMTI reports it at the start of the
//!   constructor, bci once its `super(...)`/`this(...)` call returned, so
//!   calls made to compute the super call's arguments and the super
//!   constructor itself come before it in bci mode, not inside it;
//! - lambda proxies are hidden classes, which the JVM never hands to the
//!   ClassFileLoadHook: JVMTI traces their methods, bci cannot;
//! - depth counts untraced frames only up to a thread's outermost traced
//!   call in bci mode, and there is no caller location: neither is compared.

use crate::support::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const VERIFY: [&str; 3] = [
    "-XX:+UnlockDiagnosticVMOptions",
    "-XX:+BytecodeVerificationLocal",
    "-XX:+BytecodeVerificationRemote",
];

/// One call as both modes must see it: method, arguments (identity hashes
/// blanked: they differ between runs), outcome, and the calls it made.
#[derive(Debug, Clone, PartialEq)]
struct Call {
    class: String,
    method: String,
    sig: String,
    params: Vec<String>,
    outcome: String,
    children: Vec<Call>,
}

fn shown(v: &Value) -> String {
    let s = v.to_string();
    // Lambda proxies are numbered and placed as the JVM pleases.
    if let Some(i) = s.find("$$Lambda") {
        return format!("{}$$Lambda@", &s[..i]);
    }
    match s.find('@') {
        // "fx.Shapes@4f47d241" -> "fx.Shapes@"
        Some(at)
            if v.is_string()
                && s[at + 1..]
                    .trim_end_matches('"')
                    .chars()
                    .all(|c| c.is_ascii_hexdigit()) =>
        {
            format!("{}@", &s[..at])
        }
        _ => s,
    }
}

/// The call trees of each thread, from CALL and RETURN events in order.
fn call_trees(events: &[Value]) -> BTreeMap<String, Vec<Call>> {
    let mut stacks: BTreeMap<String, Vec<Call>> = BTreeMap::new();
    let mut roots: BTreeMap<String, Vec<Call>> = BTreeMap::new();
    for e in events {
        let thread = e["thread"].as_str().unwrap_or("?").to_string();
        let stack = stacks.entry(thread.clone()).or_default();
        match e["type"].as_str() {
            Some("CALL") => stack.push(Call {
                class: e["class"].as_str().unwrap_or("?").to_string(),
                method: e["method"].as_str().unwrap_or("?").to_string(),
                sig: e["sig"].as_str().unwrap_or("?").to_string(),
                params: e["params"]
                    .as_array()
                    .map(|ps| ps.iter().map(|p| shown(&p["value"])).collect())
                    .unwrap_or_default(),
                outcome: String::new(),
                children: Vec::new(),
            }),
            Some("RETURN") => {
                let mut call = stack
                    .pop()
                    .unwrap_or_else(|| panic!("RETURN without CALL: {e}"));
                assert_eq!(
                    call.method,
                    e["method"].as_str().unwrap_or("?"),
                    "RETURN matches its CALL: {e}"
                );
                call.outcome = match (e.get("exception"), e.get("value")) {
                    (Some(x), _) => format!("threw {}", x.as_str().unwrap_or("?")),
                    (None, Some(v)) => format!("= {}", shown(v)),
                    (None, None) => "void".to_string(),
                };
                match stack.last_mut() {
                    Some(parent) => parent.children.push(call),
                    None => roots.entry(thread).or_default().push(call),
                }
            }
            _ => {}
        }
    }
    for (thread, stack) in stacks {
        assert!(
            stack.is_empty(),
            "thread {thread} ends with open calls: {stack:?}"
        );
    }
    roots
}

/// The tree rewritten to what bci mode reports: hidden lambda-proxy
/// classes leave (their calls move up to their caller), and calls made
/// before a constructor's `super(...)`/`this(...)` call returned, that
/// call included, move out in front of the constructor. `supers` maps a
/// class to its traced superclass.
fn as_bci_sees_it(calls: Vec<Call>, supers: &[(&str, &str)]) -> Vec<Call> {
    let mut out = Vec::new();
    for mut call in calls {
        if call.class.contains("$$Lambda") {
            out.extend(as_bci_sees_it(call.children, supers));
            continue;
        }
        let mut before = Vec::new();
        if call.method == "<init>" {
            let parent = supers
                .iter()
                .find(|(c, _)| *c == call.class)
                .map(|(_, s)| *s);
            let delegation = call.children.iter().position(|c| {
                c.method == "<init>" && (c.class == call.class || Some(c.class.as_str()) == parent)
            });
            if let Some(i) = delegation {
                before = call.children.drain(..=i).collect();
            }
        }
        out.extend(as_bci_sees_it(before, supers));
        call.children = as_bci_sees_it(call.children, supers);
        out.push(call);
    }
    out
}

fn flat(calls: &[Call], depth: usize, out: &mut Vec<String>) {
    for c in calls {
        out.push(format!(
            "{}{}.{}{} {:?}",
            "  ".repeat(depth),
            c.class,
            c.method,
            c.sig,
            c.params
        ));
        flat(&c.children, depth + 1, out);
        out.push(format!("{}-> {}", "  ".repeat(depth), c.outcome));
    }
}

/// THROW and CATCH as both modes must see them: the bytecode index of a
/// site moves with instrumentation, its line does not.
fn exception_events(events: &[Value]) -> Vec<String> {
    let line = |v: &Value| v["line"].to_string();
    events
        .iter()
        .filter(|e| e["type"] == "THROW" || e["type"] == "CATCH")
        .map(|e| {
            format!(
                "{} {} {} {}.{} line {} -> {}.{} line {}",
                e["thread"],
                e["type"],
                e["exception"],
                e["class"],
                e["method"],
                line(&e["loc"]),
                e["catch_class"],
                e["catch_method"],
                line(&e["catch_loc"])
            )
        })
        .collect()
}

/// Like `support::record`, with the `java` executable given.
fn record_with(java: &Path, flags: &[&str], jvm_args: &[&str], main: &str) -> Recording {
    let trace = scratch(main).join("trace.vmv");
    let output = Command::new(vmview())
        .arg("record")
        .args(format_flags())
        .args(flags)
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(java)
        .args(jvm_args)
        .arg("-cp")
        .arg(crate::support::classes())
        .arg(main)
        .output()
        .expect("run vmview record");
    Recording { trace, output }
}

/// Records `main` in both modes (bci under full verification) and checks
/// that output, calls and exceptions agree.
fn assert_modes_agree(
    classes: &str,
    main: &str,
    supers: &[(&str, &str)],
) -> (Recording, Recording) {
    assert_modes_agree_on(Path::new("java"), classes, main, supers)
}

fn assert_modes_agree_on(
    java: &Path,
    classes: &str,
    main: &str,
    supers: &[(&str, &str)],
) -> (Recording, Recording) {
    agent();
    let plain = Command::new(java)
        .arg("-cp")
        .arg(crate::support::classes())
        .arg(main)
        .output()
        .expect("java");
    let bci = record_with(
        java,
        &["--classes", classes, "--mode", "bci"],
        &VERIFY,
        main,
    );
    let jvmti = record_with(java, &["--classes", classes, "--mode", "jvmti"], &[], main);
    assert_eq!(
        bci.stdout(),
        String::from_utf8_lossy(&plain.stdout),
        "bci run changed the output; stderr: {}",
        bci.stderr()
    );
    assert_eq!(jvmti.stdout(), bci.stdout());
    assert_eq!(bci.output.status.code(), plain.status.code());
    for (mode, run) in [("bci", &bci), ("jvmti", &jvmti)] {
        assert!(
            !run.stderr().contains("vmview agent:"),
            "agent complained in mode={mode}: {}",
            run.stderr()
        );
    }

    let (be, je) = (bci.events(), jvmti.events());
    let bci_trees = call_trees(&be);
    let jvmti_trees = call_trees(&je);
    assert_eq!(
        bci_trees.keys().collect::<Vec<_>>(),
        jvmti_trees.keys().collect::<Vec<_>>(),
        "the same threads make traced calls"
    );
    for (thread, calls) in &bci_trees {
        let mut b = Vec::new();
        flat(calls, 0, &mut b);
        let mut j = Vec::new();
        flat(
            &as_bci_sees_it(jvmti_trees[thread].clone(), supers),
            0,
            &mut j,
        );
        assert!(!b.is_empty());
        assert_eq!(
            b, j,
            "calls of thread {thread} differ (left bci, right jvmti)"
        );
    }
    assert_eq!(
        exception_events(&be),
        exception_events(&je),
        "THROW and CATCH differ (left bci, right jvmti)"
    );
    (bci, jvmti)
}

#[test]
fn bci_and_jvmti_agree_on_parameters_and_return_values() {
    let (bci, _) = assert_modes_agree("fx.Params*", "fx.Params", &[]);
    let events = bci.events();
    let all = find(&events, "CALL", "all");
    assert_eq!(all["params"].as_array().map(Vec::len), Some(9), "{all}");
    assert_eq!(find(&events, "RETURN", "describe")["value"], "box:cupx5");
}

/// The JVM refuses GetLocalObject (INVALID_SLOT) for a parameter missing
/// from a method's LocalVariableTable: an enum constructor's name and
/// ordinal, a bridge method's parameter. mode=jvmti counted each as a
/// failed JVMTI call (found by the soak on javac, whose classes have such
/// tables). It is a value mode=jvmti cannot read (mode=bci can), as in a
/// native method.
#[test]
fn jvmti_mode_reads_enum_constructors_and_bridge_methods_without_complaint() {
    let jvmti = record(
        &["--classes", "fx.Enums*", "--mode", "jvmti"],
        &[],
        "fx.Enums",
        &[],
    );
    assert_eq!(jvmti.stdout(), "l3 true false\n");
    assert!(
        !jvmti.stderr().contains("vmview agent:"),
        "agent complained: {}",
        jvmti.stderr()
    );
    let events = jvmti.events();
    let ctor = events
        .iter()
        .find(|e| e["type"] == "CALL" && e["class"] == "fx.Enums$Size" && e["method"] == "<init>")
        .expect("CALL of the enum constructor");
    let params = ctor["params"].as_array().expect("params");
    let named: Vec<(&str, Option<&Value>)> = params
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p.get("value")))
        .collect();
    assert_eq!(
        named,
        [
            ("arg0", None),
            ("arg1", None),
            ("letter", Some(&json!("s"))),
            ("weight", Some(&json!(1)))
        ],
        "{ctor}"
    );
}

#[test]
fn bci_and_jvmti_agree_on_exceptions_unwinding_through_instrumented_frames() {
    let (bci, _) = assert_modes_agree("fx.Exceptions", "fx.Exceptions", &[]);
    let events = bci.events();
    // The probe's catch-all handlers are no catch site: the THROW names
    // the real one, and no CATCH is reported in between.
    let throw = events
        .iter()
        .find(|e| e["type"] == "THROW" && e["exception"] == "java.lang.IllegalArgumentException")
        .expect("THROW");
    assert_eq!(
        (throw["method"].as_str(), throw["catch_method"].as_str()),
        (Some("level3"), Some("top"))
    );
    let catches = of_type(&events, "CATCH");
    assert!(
        catches
            .iter()
            .all(|c| c["method"] != "level3" && c["method"] != "level2"),
        "{catches:?}"
    );
}

#[test]
fn bci_and_jvmti_agree_on_constructors_initialisers_lambdas_and_switches() {
    let (bci, _) = assert_modes_agree(
        "fx.Shapes*",
        "fx.Shapes",
        &[("fx.Shapes$Square", "fx.Shapes$Base")],
    );
    let events = bci.events();
    for m in [
        "<clinit>",
        "bump",
        "scale",
        "sum",
        "kind",
        "letters",
        "greet",
        "prefix",
        "lambda$main$0",
        "deep",
        "parseOrFail",
    ] {
        find(&events, "CALL", m);
    }
    let scale = find(&events, "CALL", "scale");
    let values: Vec<&Value> = scale["params"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["value"])
        .collect();
    assert_eq!(
        values,
        [
            &serde_json::json!(1u64 << 40),
            &serde_json::json!(1.5),
            &serde_json::json!(2)
        ]
    );
    // deep(3) .. deep(0) each end by the exception, parseOrFail by one thrown in the JDK.
    let returns = of_type(&events, "RETURN");
    let deep: Vec<&&Value> = returns.iter().filter(|e| e["method"] == "deep").collect();
    assert_eq!(deep.len(), 4);
    assert!(
        deep.iter()
            .all(|e| e["exception"] == "java.lang.IllegalStateException"),
        "{deep:?}"
    );
    let parse = find(&events, "RETURN", "parseOrFail");
    assert_eq!(parse["exception"], "java.lang.NumberFormatException");
}

#[test]
fn bci_depth_is_exact_at_the_outermost_call_and_counts_traced_calls_below_it() {
    let rec = record(&["--classes", "fx.Exceptions"], &[], "fx.Exceptions", &[]);
    let events = rec.events();
    assert_eq!(find(&events, "CALL", "main")["depth"], 1);
    assert_eq!(find(&events, "CALL", "top")["depth"], 2);
    assert_eq!(find(&events, "CALL", "level3")["depth"], 5);
    assert_eq!(find(&events, "RETURN", "level3")["depth"], 5);
    // boom runs on its own thread under Thread.run and a lambda proxy: its
    // depth counts those frames (taken once, at the thread's outermost call).
    let boom = find(&events, "CALL", "boom");
    assert!(boom["depth"].as_u64() >= Some(2), "{boom}");
}

#[test]
fn args_off_records_calls_and_returns_without_values() {
    let rec = record(
        &["--classes", "fx.Params*", "--args", "off"],
        &VERIFY,
        "fx.Params",
        &[],
    );
    assert_eq!(rec.stdout(), "all=45\nbox:cupx5\n");
    let events = rec.events();
    let calls = of_type(&events, "CALL");
    assert!(calls.len() >= 5, "{calls:?}");
    for c in &calls {
        let params = c["params"].as_array().map_or(0, Vec::len);
        assert_eq!(params, 0, "no argument values with --args off: {c}");
    }
    let returns = of_type(&events, "RETURN");
    assert_eq!(returns.len(), calls.len());
    assert!(
        returns.iter().all(|r| r.get("value").is_none()),
        "no return values with --args off"
    );
    assert_eq!(find(&events, "RETURN", "all")["method"], "all");
}

#[test]
fn check_jni_is_clean_in_bci_mode_with_every_kind_of_value() {
    for fixture in ["fx.Shapes", "fx.Params"] {
        let rec = record(
            &["--classes", "fx.*", "--mode", "bci"],
            &["-Xcheck:jni"],
            fixture,
            &[],
        );
        let err = rec.stderr();
        assert!(
            !err.contains("WARNING") && !err.contains("FATAL"),
            "-Xcheck:jni complained: {err}"
        );
        assert!(!of_type(&rec.events(), "CALL").is_empty());
    }
}

#[test]
fn only_jvmti_mode_sees_lambda_proxies_which_the_jvm_never_hands_to_the_class_hook() {
    let lambda_calls = |mode: &str| {
        let rec = record(
            &["--classes", "fx.Shapes*", "--mode", mode],
            &[],
            "fx.Shapes",
            &[],
        );
        let events = rec.events();
        assert!(!of_type(&events, "CALL").is_empty());
        of_type(&events, "CALL")
            .iter()
            .filter(|e| e["class"].as_str().unwrap_or("").contains("$$Lambda"))
            .count()
    };
    assert!(
        lambda_calls("jvmti") > 0,
        "JVMTI method events see the hidden class"
    );
    assert_eq!(lambda_calls("bci"), 0, "bci cannot rewrite a hidden class");
}

const LANG3: &str = "/usr/share/java/commons-lang3.jar";

/// The commons-lang3 driver, compiled apart (it needs the jar).
fn lang3_driver() -> PathBuf {
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fx/lang3/Lang3Driver.java");
    let out = scratch("lang3-classes");
    let status = Command::new("javac")
        .args(["-g", "-nowarn", "-cp", LANG3, "-d"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("javac");
    assert!(status.success(), "javac failed on {}", src.display());
    out
}

#[test]
fn all_of_commons_lang3_instrumented_and_verified_runs_with_unchanged_output() {
    assert!(
        Path::new(LANG3).exists(),
        "{LANG3} is missing: apt-get install libcommons-lang3-java (bash .ci/run does)"
    );
    let classes = lang3_driver();
    let cp = format!("{}:{LANG3}", classes.display());
    let plain = Command::new("java")
        .args(["-cp", &cp, "fx.lang3.Lang3Driver"])
        .output()
        .expect("java");
    assert!(plain.status.success());
    let trace = scratch("lang3").join("trace.vmv");
    let traced = Command::new(vmview())
        .args([
            "record",
            "--classes",
            "org.apache.commons.lang3.*",
            // Every class instrumented and every call traced: on a loaded
            // machine the default budget may demote a method, and its
            // summary on stderr is not a problem of the instrumentation.
            "--budget",
            "off",
            "-o",
            path_str(&trace),
            "--",
            "java",
        ])
        .args(VERIFY)
        .args(["-cp", &cp, "fx.lang3.Lang3Driver"])
        .output()
        .expect("vmview record");
    let stderr = String::from_utf8_lossy(&traced.stderr);
    assert!(traced.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&traced.stdout),
        String::from_utf8_lossy(&plain.stdout)
    );
    assert!(
        !stderr.contains("VerifyError") && !stderr.contains("vmview agent:"),
        "{stderr}"
    );
    let events = jsonl(&trace);
    let calls = of_type(&events, "CALL");
    assert!(
        calls.len() > 1000,
        "commons-lang3 calls recorded: {}",
        calls.len()
    );
    assert!(calls.iter().all(|c| c["class"]
        .as_str()
        .is_some_and(|c| c.starts_with("org.apache.commons.lang3."))));
    let abbreviate = find(&events, "CALL", "abbreviate");
    assert_eq!(
        abbreviate["params"][0]["value"],
        "The quick brown fox jumps"
    );
    assert_eq!(
        of_type(&events, "RETURN").len(),
        calls.len(),
        "every call returned"
    );
    // NumberUtils.toInt swallows the JDK's NumberFormatException: seen.
    let nfe = events
        .iter()
        .find(|e| e["type"] == "THROW" && e["exception"] == "java.lang.NumberFormatException")
        .expect("THROW of the swallowed NumberFormatException");
    assert_eq!(
        nfe["catch_class"],
        "org.apache.commons.lang3.math.NumberUtils"
    );
}

#[test]
fn classes_of_a_loader_that_delegates_only_to_the_bootstrap_loader_find_the_probe() {
    let rec = record(&["--classes", "fx.Loaders*"], &VERIFY, "fx.Loaders", &[]);
    assert_eq!(
        rec.stdout(),
        "isolated=ababab\napp=cc\n",
        "stderr: {}",
        rec.stderr()
    );
    let events = rec.events();
    let runs: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "RETURN" && e["method"] == "run")
        .collect();
    let values: Vec<&Value> = runs.iter().map(|e| &e["value"]).collect();
    assert_eq!(values, ["ababab", "cc"], "both copies of Plugin traced");
}

#[test]
fn bci_and_jvmti_agree_on_jdk_25_too() {
    let Some(jdk25) = std::fs::read_dir("/usr/lib/jvm")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin/java"))
        .find(|p| p.to_string_lossy().contains("25") && p.exists())
    else {
        eprintln!("no JDK 25 under /usr/lib/jvm: skipped");
        return;
    };
    let shapes = [("fx.Shapes$Square", "fx.Shapes$Base")];
    assert_modes_agree_on(&jdk25, "fx.Shapes*", "fx.Shapes", &shapes);
    assert_modes_agree_on(&jdk25, "fx.Exceptions", "fx.Exceptions", &[]);
}

#[test]
fn a_method_too_large_to_instrument_runs_untraced_and_is_reported_once() {
    // 5,000 `if (x == i) return i;` make ~55 KB of code; an exit hook
    // before each return would push it past the JVM's 64 KiB limit.
    let dir = scratch("huge");
    let mut src = String::from("public class Huge {\n    static int pick(int x) {\n");
    for i in 0..5000 {
        src.push_str(&format!("        if (x == {i}) return {i};\n"));
    }
    src.push_str(
        "        return -1;\n    }\n    static int small(int x) {\n        return x + 1;\n    }\n",
    );
    src.push_str("    public static void main(String[] a) {\n        System.out.println(pick(4321) + small(1));\n    }\n}\n");
    std::fs::write(dir.join("Huge.java"), src).expect("write Huge.java");
    let status = Command::new("javac")
        .arg("-d")
        .arg(&dir)
        .arg(dir.join("Huge.java"))
        .status()
        .expect("javac");
    assert!(status.success());
    let trace = dir.join("trace.vmv");
    let out = Command::new(vmview())
        .args([
            "record",
            "--classes",
            "Huge",
            "-o",
            path_str(&trace),
            "--",
            "java",
        ])
        .args(VERIFY)
        .arg("-cp")
        .arg(&dir)
        .arg("Huge")
        .output()
        .expect("vmview record");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "4323\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let reports: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("not instrumented"))
        .collect();
    assert_eq!(reports.len(), 1, "one line: {stderr}");
    assert!(
        reports[0].contains("1 methods") && reports[0].contains("Huge.pick(I)I"),
        "{stderr}"
    );
    let events = jsonl(&trace);
    let traced: Vec<&str> = of_type(&events, "CALL")
        .iter()
        .filter_map(|e| e["method"].as_str())
        .collect();
    assert_eq!(
        traced,
        ["main", "small"],
        "pick runs untraced, the rest of the class is traced"
    );
}

#[test]
fn exceptions_without_calls_in_bci_mode_need_no_probe_handlers() {
    // Regression: with calls off no class is rewritten, yet THROW looked
    // for probe handlers with GetBytecodes, a capability it had not asked
    // for, and every lookup failed.
    let rec = record(
        &[
            "--classes",
            "fx.Exceptions",
            "--events",
            "exceptions,threads",
        ],
        &[],
        "fx.Exceptions",
        &[],
    );
    assert!(!rec.stderr().contains("vmview agent:"), "{}", rec.stderr());
    let events = rec.events();
    assert!(of_type(&events, "CALL").is_empty());
    let throw = events
        .iter()
        .find(|e| e["type"] == "THROW" && e["exception"] == "java.lang.IllegalArgumentException")
        .expect("THROW");
    assert_eq!(throw["catch_method"], "top");
}

#[test]
fn string_arguments_of_every_length_are_kept_or_cut_at_strings() {
    let rec = record(
        &["--classes", "fx.LongStrings", "--strings", "200"],
        &[],
        "fx.LongStrings",
        &[],
    );
    assert_eq!(rec.stdout(), "total=755\n");
    let events = rec.events();
    let echoes: Vec<String> = of_type(&events, "CALL")
        .iter()
        .filter(|e| e["method"] == "echo")
        .map(|e| {
            e["params"][0]["value"]
                .as_str()
                .expect("string value")
                .to_string()
        })
        .collect();
    assert_eq!(echoes.len(), 4);
    assert_eq!(echoes[0], "a".repeat(100));
    assert_eq!(
        echoes[1],
        "b".repeat(150),
        "past the 128-char stack buffer, whole"
    );
    assert!(
        echoes[2].starts_with(&"c".repeat(200)) && !echoes[2].starts_with(&"c".repeat(201)),
        "{}",
        echoes[2]
    );
    assert!(
        echoes[2].contains('…'),
        "a cut string says so: {}",
        echoes[2]
    );
    // The cut falls inside the surrogate pair: the half is dropped, not
    // turned into a replacement character.
    assert!(echoes[3].starts_with(&"d".repeat(199)), "{}", echoes[3]);
    assert!(
        !echoes[3].contains('\u{fffd}') && !echoes[3].contains('😀'),
        "{}",
        echoes[3]
    );
}

#[test]
fn bci_and_jvmti_agree_on_each_thread_of_a_multithreaded_program() {
    let (bci, _) = assert_modes_agree("fx.Contention*", "fx.Contention", &[]);
    let events = bci.events();
    let workers: std::collections::BTreeSet<&str> = of_type(&events, "CALL")
        .iter()
        .filter(|e| e["method"] == "work")
        .filter_map(|e| e["thread"].as_str())
        .collect();
    assert_eq!(
        workers.len(),
        3,
        "each worker's calls on its own thread: {workers:?}"
    );
}
