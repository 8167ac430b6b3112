//! The fixture program (`tests/fixtures/*.java`) run plain and instrumented:
//! same output, every class verified, and a probe log that shows each call
//! with its arguments, its return value or the exception that unwound it.

use crate::support::*;
use vmview_classfile::HookConfig;

struct Traced {
    events: Vec<Event>,
    plain_stdout: String,
    /// Every rewritten class file, one after another.
    rewritten: Vec<u8>,
}

/// Compiles the fixtures with `jdk`, instruments them with `config`, runs
/// both versions and checks what every run must satisfy.
fn trace_fixtures(jdk: &Jdk, config: &HookConfig) -> Traced {
    let tmp = TempDir::new("fixtures");
    let (plain, inst, probe) = (
        tmp.join("plain"),
        tmp.join("instrumented"),
        tmp.join("probe"),
    );
    jdk.javac(&java_sources(&fixtures_dir()), &plain, &[]);
    compile_probe(jdk, &probe);
    let done = instrument_tree(&plain, &inst, config);
    assert_eq!(done.unexpected_skips(), Vec::<String>::new());
    assert!(
        done.method_count() > 100,
        "only {} methods",
        done.method_count()
    );

    let before = jdk.run(&[&plain], "Main", None);
    assert_eq!(
        before.status,
        Some(0),
        "plain run failed: {}",
        before.stderr
    );
    let log = tmp.join("probe.log");
    let after = jdk.run(&[&inst, &probe], "Main", Some(&log));
    assert_eq!(
        after.stdout, before.stdout,
        "instrumented output differs; stderr:\n{}",
        after.stderr
    );
    assert_eq!(after.status, before.status, "stderr:\n{}", after.stderr);
    assert_eq!(after.stderr, before.stderr);

    let events = read_log(&log, &done.names);
    let open = check_nesting(&events);
    assert!(open.is_empty(), "calls never closed: {open:?}");
    Traced {
        events,
        plain_stdout: before.stdout,
        rewritten: done
            .results
            .iter()
            .filter_map(|r| r.bytes())
            .flatten()
            .copied()
            .collect(),
    }
}

fn check_calls_and_values(t: &Traced) {
    let e = &t.events;
    assert!(t.plain_stdout.ends_with("done\n"));
    assert_in_order(
        e,
        &[
            "ENTER Main.main([Ljava/lang/String;)V [java.lang.String[0]]",
            "ENTER Calc.add(II)I [2, 3]",
            "EXIT Calc.add(II)I 5",
            "ENTER Calc.mul(JI)J [1099511627776L, 3]",
            "EXIT Calc.mul(JI)J 3298534883328L",
            "ENTER Calc.avg(DDD)D [1.5d, 2.5d, 3.5d]",
            "EXIT Calc.avg(DDD)D 2.5d",
            "ENTER Calc.half(F)F [5.0f]",
            "EXIT Calc.half(F)F 2.5f",
            "EXIT Calc.isEven(I)Z true",
            "ENTER Calc.isEven(I)Z [7]",
            "EXIT Calc.isEven(I)Z false",
            "ENTER Calc.upper(C)C ['q']",
            "EXIT Calc.upper(C)C 'Q'",
            "ENTER Calc.low(S)B [300s]",
            "EXIT Calc.low(S)B 44b",
            "ENTER Calc.widen(B)S [-7b]",
            "EXIT Calc.widen(B)S -14s",
            r#"ENTER Calc.greet(Ljava/lang/String;I)Ljava/lang/String; ["bob", 2]"#,
            r#"EXIT Calc.greet(Ljava/lang/String;I)Ljava/lang/String; "hi bob hi bob""#,
            "ENTER Calc.sum([I)I [int[0]]",
            "EXIT Calc.sum([I)I 0",
            "ENTER Calc.sum([I)I [int[3]]",
            "EXIT Calc.sum([I)I 6",
            r#"ENTER Calc.join(Ljava/lang/String;[Ljava/lang/Object;)Ljava/lang/String; ["-", java.lang.Object[4]]"#,
            "EXIT Calc.range(I)[I int[4]",
            r#"ENTER Calc.mixed(IJDFLjava/lang/String;J)J [1, 2L, 3.5d, 4.5f, "five", 6L]"#,
            "EXIT Calc.mixed(IJDFLjava/lang/String;J)J 20L",
            "ENTER Calc.countdown(I)I [5]",
            "EXIT Calc.countdown(I)I 0",
            "ENTER Calc.noop()V []",
            "EXIT Calc.noop()V",
            "ENTER Calc.<init>(I)V [40]",
            "EXIT Calc.<init>(I)V",
            "ENTER Calc.instanceAdd(I)I [2]",
            "EXIT Calc.instanceAdd(I)I 42",
        ],
    );
    // Regression: the loop of `countdown` jumps back to offset 0, which must
    // land after the entry hook, not before it.
    assert_eq!(count(e, "ENTER", "Calc.countdown(I)I"), 1);
    let many = e
        .iter()
        .find(|ev| ev.kind == "ENTER" && ev.method.starts_with("Calc.manyLongs("))
        .expect("manyLongs entered");
    assert!(many.detail.starts_with("[0L, 1L, 2L,") && many.detail.ends_with(", 126L]"));
    assert!(e.iter().any(|ev| ev.kind == "EXIT"
        && ev.method.starts_with("Calc.manyLongs(")
        && ev.detail == "945L"));
}

fn check_constructors(e: &[Event]) {
    // `new Helper` before the super call is its own call; Derived's entry
    // comes once its super call has returned.
    assert_in_order(
        e,
        &[
            "ENTER Ctors$Helper.<init>(I)V [7]",
            "EXIT Ctors$Helper.<init>(I)V",
            "EXIT Ctors$Helper.value()I 14",
            r#"ENTER Ctors$Base.<init>(Ljava/lang/String;)V ["yes14"]"#,
            "EXIT Ctors$Base.<init>(Ljava/lang/String;)V",
            "ENTER Ctors$Derived.<init>(IZ)V [7, true]",
            "EXIT Ctors$Derived.<init>(IZ)V",
            // this(...) delegation: the delegate runs (and exits) first.
            "ENTER Ctors$Derived.<init>(IZ)V [-1, false]",
            "EXIT Ctors$Derived.<init>(IZ)V",
            "ENTER Ctors$Derived.<init>(I)V [-1]",
            "EXIT Ctors$Derived.<init>(I)V",
            "ENTER Ctors$Helper.<init>(I)V [5]",
            r#"ENTER Ctors$Derived.<init>(Ljava/lang/String;JD)V ["abc", 5L, 2.0d]"#,
            "EXIT Ctors$Derived.<init>(Ljava/lang/String;JD)V",
            r#"ENTER Ctors$Base.<init>(Ljava/lang/String;)V ["n3"]"#,
            "ENTER Ctors$Base.<init>(I)V [3]",
            "EXIT Ctors$Base.<init>(I)V",
            // An exception in the super call's arguments: the constructor
            // was never entered, so it neither enters nor throws.
            "THROW Ctors$Failing.check(I)Ljava/lang/String; java.lang.IllegalArgumentException",
            "ENTER Ctors$Failing.<init>(I)V [0]",
            "THROW Ctors$Failing.<init>(I)V java.lang.IllegalStateException",
            "ENTER Ctors$Failing.<init>(I)V [1]",
            "EXIT Ctors$Failing.<init>(I)V",
            r#"ENTER Ctors$WithTry.<init>(Ljava/lang/String;)V ["41"]"#,
            "EXIT Ctors$WithTry.<init>(Ljava/lang/String;)V",
            r#"ENTER Ctors$WithTry.<init>(Ljava/lang/String;)V ["x"]"#,
            "EXIT Ctors$WithTry.<init>(Ljava/lang/String;)V",
            "ENTER Ctors$Initialised.<init>()V []",
            "ENTER Ctors$Initialised.lambda$new$0()V []",
            "EXIT Ctors$Initialised.<init>()V",
            "ENTER Ctors$ArrayMerge.<init>(Z)V [true]",
            "EXIT Ctors$ArrayMerge.<init>(Z)V",
            "ENTER Ctors.choose(Z)LCtors$Helper; [true]",
            "EXIT Ctors.choose(Z)LCtors$Helper; Ctors$Helper",
        ],
    );
    assert_eq!(count(e, "ENTER", "Ctors$Failing.<init>(I)V"), 2);
    assert_eq!(count(e, "THROW", "Ctors$Failing.<init>(I)V"), 1);
}

fn check_other_shapes_of_code(e: &[Event]) {
    assert_in_order(
        e,
        &[
            "ENTER Statics.<clinit>()V []",
            "EXIT Statics.<clinit>()V",
            "ENTER Statics$Holder.<clinit>()V []",
            "EXIT Statics$Holder.<clinit>()V",
            "THROW Sync.failInside()V java.lang.IllegalStateException",
            "EXIT Sync.blockReturn(Ljava/lang/Object;)I 1010",
            "EXIT Sync.blockReturn(Ljava/lang/Object;)I -1",
            r#"ENTER Lambdas.shout(Ljava/lang/String;)Ljava/lang/String; ["b"]"#,
            r#"EXIT Lambdas.shout(Ljava/lang/String;)Ljava/lang/String; "B!""#,
            "EXIT Inner$Peeker.peek()I 42",
            "ENTER Inner$1Acc.add(I)V [2]",
            "ENTER Shape.unit()LShape; []",
            "ENTER Shape.describe()Ljava/lang/String; []",
            "ENTER Shape.fmt(D)Ljava/lang/String; [1.0d]",
            r#"EXIT Shape.fmt(D)Ljava/lang/String; "1.00""#,
            "ENTER Color.<clinit>()V []",
            r#"ENTER Color.<init>(Ljava/lang/String;IIII)V ["RED", 0, 255, 0, 0]"#,
            "EXIT Color.<init>(Ljava/lang/String;IIII)V",
            r#"ENTER Color$1.<init>(Ljava/lang/String;IIII)V ["RED", 0, 255, 0, 0]"#,
            r#"EXIT Color$1.mood()Ljava/lang/String; "angry""#,
            r#"EXIT Color.parse(Ljava/lang/String;)LColor; Color$2"#,
            "ENTER Point.<init>(II)V [1, 2]",
            r#"EXIT Point.toString()Ljava/lang/String; "Point[x=1, y=2]""#,
            "ENTER Point.<init>(II)V [-1, 0]",
            "THROW Point.<init>(II)V java.lang.IllegalArgumentException",
            r#"EXIT Switches.dense(I)Ljava/lang/String; "seven""#,
            "ENTER Switches.sparse(I)I [2147483647]",
            "EXIT Switches.sparse(I)I 4",
            r#"EXIT Switches.strings(Ljava/lang/String;)I 3"#,
            "EXIT Switches.expression(I)I 7",
            "EXIT Switches.nested(II)J 30L",
        ],
    );
    assert_eq!(count(e, "ENTER", "Sync.inc()V"), 1000);
    for worker in ["worker-0", "worker-1"] {
        assert_eq!(
            e.iter()
                .filter(|ev| ev.thread == worker && ev.method == "Sync.inc()V" && ev.kind == "EXIT")
                .count(),
            500
        );
    }
    assert!(
        e.iter().any(|ev| ev.kind == "EXIT"
            && ev.method == "Lambdas.lambda$run$0(II)I"
            && ev.detail == "15"),
        "the capturing lambda returns 15"
    );
    assert!(e.iter().any(|ev| ev.kind == "THROW"
        && ev.method.starts_with("Lambdas.lambda$run$")
        && ev.detail == "java.lang.UnsupportedOperationException"));
}

fn check_exceptions(e: &[Event]) {
    // The exception unwinds through every recursive frame.
    assert_in_order(
        e,
        &[
            "ENTER Exceptions.catcher()I []",
            "ENTER Exceptions.depth(I)I [0]",
            "ENTER Exceptions.depth(I)I [3]",
            "THROW Exceptions.depth(I)I java.lang.IllegalStateException",
            "THROW Exceptions.depth(I)I java.lang.IllegalStateException",
            "THROW Exceptions.depth(I)I java.lang.IllegalStateException",
            "THROW Exceptions.depth(I)I java.lang.IllegalStateException",
            "EXIT Exceptions.catcher()I -1",
            r#"EXIT Exceptions.finallyWins()Ljava/lang/String; "finally wins""#,
            "EXIT Exceptions.nested(I)I 2",
            "EXIT Exceptions.nested(I)I -2",
            "ENTER Exceptions.resources(Z)V [true]",
            "ENTER Exceptions$Res.close()V []",
            "THROW Exceptions.resources(Z)V java.lang.Exception",
            "EXIT Exceptions.loopWithTry(I)I 23",
            "ENTER Exceptions.divide(DJ)D [1.0d, 0L]",
            "THROW Exceptions.divide(DJ)D java.lang.Exception",
            "EXIT Main.main([Ljava/lang/String;)V",
        ],
    );
    assert_eq!(count(e, "THROW", "Exceptions.depth(I)I"), 4);
    assert_eq!(
        count(e, "THROW", "Exceptions.finallyWins()Ljava/lang/String;"),
        0
    );
}

#[test]
fn fixtures_on_jdk17_run_identically_and_report_every_call() {
    let t = trace_fixtures(&Jdk::default(), &config());
    check_calls_and_values(&t);
    check_constructors(&t.events);
    check_other_shapes_of_code(&t.events);
    check_exceptions(&t.events);
}

#[test]
fn fixtures_compiled_by_jdk25_run_identically_on_jdk25() {
    let Some(jdk) = Jdk::jdk25() else {
        eprintln!("JDK 25 not installed; skipped");
        return;
    };
    let t = trace_fixtures(&jdk, &config());
    check_calls_and_values(&t);
    check_constructors(&t.events);
    check_other_shapes_of_code(&t.events);
    check_exceptions(&t.events);
}

#[test]
fn primitive_entry_hooks_report_the_same_calls_and_values() {
    let primitive = HookConfig {
        primitive_entry: true,
        ..config()
    };
    let t = trace_fixtures(&Jdk::default(), &primitive);
    check_calls_and_values(&t);
    check_constructors(&t.events);
    check_other_shapes_of_code(&t.events);
    check_exceptions(&t.events);
    let calls = |name: &[u8]| t.rewritten.windows(name.len()).any(|w| w == name);
    assert!(calls(b"enter1") && calls(b"enter2"));
    // And the same log (threads may interleave differently) as with one
    // arg* call per value.
    let before = trace_fixtures(&Jdk::default(), &config());
    let show = |t: &Traced| -> Vec<String> {
        let mut lines: Vec<String> = t.events.iter().map(|e| e.to_string()).collect();
        lines.sort();
        lines
    };
    assert_eq!(show(&t), show(&before));
}

#[test]
fn without_capture_hooks_pass_only_method_ids() {
    let config = HookConfig {
        capture_args: false,
        capture_return: false,
        ..config()
    };
    let t = trace_fixtures(&Jdk::default(), &config);
    assert!(t.events.iter().all(|e| match e.kind.as_str() {
        "ENTER" => e.detail == "[]",
        "EXIT" => e.detail.is_empty(),
        _ => e.detail.starts_with("java.lang."),
    }));
    assert_in_order(
        &t.events,
        &[
            "ENTER Calc.add(II)I []",
            "EXIT Calc.add(II)I",
            "ENTER Ctors$Derived.<init>(IZ)V []",
        ],
    );
}

#[test]
fn monitors_are_reported_where_they_are_held_on_every_path() {
    let config = HookConfig {
        monitors: true,
        ..config()
    };
    // Verified (-XX:+BytecodeVerificationLocal/Remote), same output, and
    // `check_nesting` pairs every release with the innermost acquisition.
    let t = trace_fixtures(&Jdk::default(), &config);
    check_calls_and_values(&t);
    check_exceptions(&t.events);
    let e = &t.events;
    // A synchronized method: its monitor after ENTER, released before EXIT.
    assert_in_order(
        e,
        &[
            "ENTER Sync.inc()V []",
            "METHOD_MONITOR_ENTER  Sync",
            "METHOD_MONITOR_EXIT",
            "EXIT Sync.inc()V",
        ],
    );
    // ... and before the throw that leaves it.
    assert_in_order(
        e,
        &[
            "ENTER Sync.failInside()V []",
            "METHOD_MONITOR_ENTER  Sync",
            "METHOD_MONITOR_EXIT",
            "THROW Sync.failInside()V java.lang.IllegalStateException",
        ],
    );
    // A block, left normally, by a return inside it, and by an exception
    // (javac's catch-any handler runs the monitorexit).
    assert_in_order(
        e,
        &[
            "ENTER Sync.block(Ljava/lang/Object;)V [java.lang.Object]",
            "MONITOR_ENTER  java.lang.Object",
            "MONITOR_EXIT  java.lang.Object",
            "EXIT Sync.block(Ljava/lang/Object;)V",
            "ENTER Sync.blockReturn(Ljava/lang/Object;)I [java.lang.Object]",
            "MONITOR_ENTER  java.lang.Object",
            "MONITOR_EXIT  java.lang.Object",
            "EXIT Sync.blockReturn(Ljava/lang/Object;)I 1010",
            "ENTER Sync.nested(Ljava/lang/Object;Ljava/lang/Object;)I [java.lang.Object, \"b\"]",
            "METHOD_MONITOR_ENTER  class Sync",
            "MONITOR_ENTER  java.lang.Object",
            "MONITOR_ENTER  java.lang.String",
            "MONITOR_EXIT  java.lang.String",
            "MONITOR_EXIT  java.lang.Object",
            "METHOD_MONITOR_EXIT",
            "EXIT Sync.nested(Ljava/lang/Object;Ljava/lang/Object;)I 2",
            "ENTER Sync.blockThrow(Ljava/lang/Object;)V [java.lang.Object]",
            "MONITOR_ENTER  java.lang.Object",
            "MONITOR_EXIT  java.lang.Object",
            "THROW Sync.blockThrow(Ljava/lang/Object;)V java.lang.IllegalArgumentException",
        ],
    );
    let acquired = e
        .iter()
        .filter(|e| e.kind.ends_with("MONITOR_ENTER"))
        .count();
    let released = e
        .iter()
        .filter(|e| e.kind.ends_with("MONITOR_EXIT"))
        .count();
    assert_eq!(acquired, released);
    assert!(
        acquired >= 1000,
        "{acquired}: Sync.inc alone runs 1000 times"
    );
}
