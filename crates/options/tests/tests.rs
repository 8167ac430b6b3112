//! The agent option language as a user writes it after `-agentpath:…=`.

use std::time::Duration;
use vmview_options::*;

fn parse(s: &str) -> AgentOptions {
    AgentOptions::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

fn error(s: &str) -> String {
    match AgentOptions::parse(s) {
        Ok(o) => panic!("{s:?} should be rejected, parsed as {o:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn empty_string_gives_the_documented_defaults() {
    let o = parse("");
    assert_eq!(o, AgentOptions::default());
    assert_eq!(o.file, "vmview-%p.vmv");
    assert!(o.classes.is_empty() && !o.is_traced_class("Hello"));
    assert_eq!(o.events.to_string(), "calls+exceptions+threads+locks+gc");
    assert!(
        !o.events.contains(EventGroup::Classes),
        "class loads are off by default"
    );
    assert_eq!(o.exceptions, ExceptionScope::Traced);
    assert_eq!(o.strings, 256);
    assert_eq!(o.buffer, 64 << 20);
    assert_eq!(o.flush, Duration::from_secs(1));
    assert_eq!(o.format, 1);
    assert!(!o.quiet);
}

#[test]
fn every_default_in_the_table_parses_to_the_default_value() {
    // The help table and AgentOptions::default() must not drift apart.
    for spec in OPTIONS {
        if let Some(d) = spec.default {
            let o = parse(&format!("{}={d}", spec.name));
            assert_eq!(o, AgentOptions::default(), "default of {}", spec.name);
        }
        assert!(
            !spec.help.is_empty() && !spec.help.contains('\n'),
            "{}",
            spec.name
        );
    }
}

#[test]
fn a_full_option_string_sets_every_field() {
    let o = parse(
        "file=/tmp/trace-%p.vmv,classes=com.acme.*;shop.Inventory,exclude=com.acme.gen.*,\
         events=calls+exceptions+locks,exceptions=all,strings=40,buffer=16m,flush=250ms,quiet",
    );
    assert_eq!(o.file, "/tmp/trace-%p.vmv");
    assert_eq!(o.classes.patterns(), ["com.acme.*", "shop.Inventory"]);
    assert_eq!(o.events.to_string(), "calls+exceptions+locks");
    assert_eq!(o.exceptions, ExceptionScope::All);
    assert_eq!(o.strings, 40);
    assert_eq!(o.buffer, 16 << 20);
    assert_eq!(o.flush, Duration::from_millis(250));
    assert!(o.quiet);
    assert!(o.is_traced_class("com.acme.shop.Cart"));
    assert!(!o.is_traced_class("com.acme.gen.Stub"), "exclude wins");
    assert!(o.is_traced_class("shop.Inventory"));
    assert!(
        !o.is_traced_class("shop.Inventory$Clerk"),
        "exact means exact"
    );
}

#[test]
fn lists_accept_plus_and_semicolon_and_the_last_repeat_wins() {
    assert_eq!(
        parse("events=calls;gc").events,
        parse("events=gc+calls").events
    );
    assert_eq!(parse("events=all").events, EventSet::ALL);
    assert_eq!(parse("events=default+classes").events, EventSet::ALL);
    assert_eq!(parse("strings=1,strings=2").strings, 2);
    assert!(!parse("quiet,quiet=false").quiet);
}

#[test]
fn unknown_option_is_named_with_the_known_ones() {
    let e = error("file=x.vmv,evnts=calls");
    assert!(
        e.starts_with("unknown agent option 'evnts' (known: file, classes, exclude, events,"),
        "{e}"
    );
    assert!(e.contains("did you mean 'events'?"), "{e}");
    assert!(!e.contains('\n'));
}

#[test]
fn comma_separated_events_get_a_hint_about_plus() {
    // async-profiler habits: events=calls,exceptions splits at the comma.
    let e = error("events=calls,gc");
    assert!(e.contains("'gc'") && e.contains("events=calls+gc"), "{e}");
    let e = error("events=calls,exceptions");
    assert!(
        e.starts_with("exceptions: needs a value") && e.contains("events=calls+exceptions"),
        "{e}"
    );
}

#[test]
fn bad_values_name_the_option_and_what_is_accepted() {
    let e = error("events=cals");
    assert_eq!(e, "events: unknown event 'cals' (known: calls, exceptions, threads, classes, locks, gc, samples, bytecode, alloc, monitors, all, default)");
    assert_eq!(
        error("exceptions=some"),
        "exceptions: expected 'traced' or 'all', got 'some'"
    );
    assert!(error("strings=lots").starts_with("strings: expected a whole number"));
    assert!(error("buffer=12q").contains("use k, m or g"));
    assert!(error("buffer=1k").contains("too small"));
    assert!(error("flush=10").contains("needs a unit"));
    assert!(error("format=3").contains("expected 1 or 2, got '3'"));
    assert!(error("flush=3h").starts_with("flush: unknown duration unit 'h'"));
    assert!(error("file=a%q").contains("unknown placeholder '%q'"));
    assert!(error("classes=").starts_with("classes: expected one or more class patterns"));
    assert!(error("classes=a b").contains("' ' cannot appear"));
    assert_eq!(error("file"), "file: needs a value (PATH)");
    assert!(error("quiet=maybe").starts_with("quiet: expected true or false"));
}

#[test]
fn sizes_and_durations_parse_with_their_units() {
    assert_eq!(parse_size("65536"), Ok(65536));
    assert_eq!(parse_size("512k"), Ok(512 << 10));
    assert_eq!(parse_size("64M"), Ok(64 << 20));
    assert_eq!(parse_size("1GiB"), Ok(1 << 30));
    assert!(parse_size("99999999999999g").is_err());
    assert!(parse_size("").is_err());
    assert_eq!(parse_duration("10ms"), Ok(Duration::from_millis(10)));
    assert_eq!(parse_duration("7us"), Ok(Duration::from_micros(7)));
    assert_eq!(parse_duration("5ns"), Ok(Duration::from_nanos(5)));
    assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
    assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
}

#[test]
fn class_globs_cover_packages_exact_names_and_wildcards() {
    let f = ClassFilter::parse("com.acme.*+shop.Inventory+*Test+a.?.C+x/y/Z").unwrap();
    assert!(f.matches("com.acme.Cart"));
    assert!(
        f.matches("com.acme.deep.sub.Thing$Inner"),
        "subpackages too"
    );
    assert!(
        !f.matches("com.acme"),
        "the package name itself is not a class in it"
    );
    assert!(!f.matches("com.acmex.Cart"));
    assert!(f.matches("shop.Inventory"));
    assert!(!f.matches("shop.InventoryX"));
    assert!(f.matches("org.FooTest") && f.matches("FooTest"));
    assert!(!f.matches("org.FooTests"));
    assert!(f.matches("a.b.C") && !f.matches("a.bb.C"));
    assert!(f.matches("x.y.Z"), "slashes are read as dots");
    assert!(ClassFilter::parse("*").unwrap().matches("anything.At$All"));
    assert!(ClassFilter::parse("a*b*c").unwrap().matches("aXXbYYbZZc"));
    assert!(!ClassFilter::parse("a*b*c").unwrap().matches("aXXbYYcZZ"));
    assert!(!ClassFilter::default().matches("Hello"));
}

#[test]
fn option_table_serves_the_cli() {
    assert!(option("quiet").unwrap().is_flag());
    assert_eq!(option("buffer").unwrap().value, Some("SIZE"));
    assert!(option("nope").is_none());
    let names: Vec<&str> = OPTIONS.iter().map(|o| o.name).collect();
    for n in [
        "file",
        "classes",
        "exclude",
        "events",
        "exceptions",
        "strings",
        "buffer",
        "flush",
        "quiet",
    ] {
        assert!(names.contains(&n), "{n}");
    }
}

#[test]
fn file_pattern_expands_pid_and_start_time() {
    // 2026-11-29 19:18:22 UTC.
    let t = CivilTime::from_unix(1_795_979_902, 0);
    assert_eq!(
        t,
        CivilTime {
            year: 2026,
            month: 11,
            day: 29,
            hour: 19,
            minute: 18,
            second: 22
        }
    );
    assert_eq!(
        expand_file_pattern("t-%p-%t.vmv", 4242, t),
        "t-4242-20261129-191822.vmv"
    );
    assert_eq!(expand_file_pattern("100%%-%p", 7, t), "100%-7");
    assert_eq!(CivilTime::from_unix(0, 3600).hour, 1);
    assert_eq!(CivilTime::from_unix(951_782_400, 0).day, 29, "2000-02-29");
}

/// `vmview record` finds the agent's file from these pieces; a literal
/// `%%t` once came back as a time placeholder when the pieces were glued
/// back together with `%t`.
#[test]
fn file_patterns_split_at_each_time_and_keep_literal_percents() {
    assert_eq!(split_file_pattern("t-%p.vmv", 42), ["t-42.vmv"]);
    assert_eq!(split_file_pattern("100%%-%p", 7), ["100%-7"]);
    assert_eq!(split_file_pattern("run-%p-%t.vmv", 9), ["run-9-", ".vmv"]);
    assert_eq!(split_file_pattern("%t-%t", 1), ["", "-", ""]);
    assert_eq!(split_file_pattern("a%%t", 1), ["a%t"], "%%t is no time");
    assert_eq!(split_file_pattern("odd%x%", 1), ["odd%x%"]);
}

#[test]
fn mode_and_args_default_to_bytecode_instrumentation_with_values() {
    let o = parse("");
    assert_eq!(o.mode, CaptureMode::Bci);
    assert!(o.args);
    let o = parse("mode=jvmti,args=off");
    assert_eq!(o.mode, CaptureMode::Jvmti);
    assert_eq!(o.mode.name(), "jvmti");
    assert!(!o.args);
    assert!(parse("args=on").args);
    let e = error("mode=asm");
    assert!(e.contains("mode") && e.contains("'bci' or 'jvmti'"), "{e}");
    let e = error("args=maybe");
    assert!(e.starts_with("args:"), "{e}");
}

#[test]
fn samples_are_off_by_default_and_interval_io_and_wait_parse() {
    let o = AgentOptions::parse("").unwrap();
    assert!(!o.events.contains(EventGroup::Samples));
    assert!(!AgentOptions::parse("events=all")
        .unwrap()
        .events
        .contains(EventGroup::Samples));
    assert_eq!(o.interval, std::time::Duration::from_millis(10));
    let o =
        AgentOptions::parse("events=samples,interval=5ms,io=com.acme.Db.query+org.x.*").unwrap();
    assert!(o.events.contains(EventGroup::Samples));
    assert_eq!(o.interval, std::time::Duration::from_millis(5));
    assert!(o.io.matches("org.x.Net.read"));
    assert!(!o.wait.matches("org.x.Net.read"));
    let o = AgentOptions::parse("events=samples,wait=org.x.Lock.await0").unwrap();
    assert!(o.wait.matches("org.x.Lock.await0"));
    assert!(error("interval=10us").contains("too short"));
}

#[test]
fn bytecode_is_off_by_default_and_brings_jvmti_method_events() {
    assert!(!parse("").events.contains(EventGroup::Bytecode));
    assert!(!parse("events=all").events.contains(EventGroup::Bytecode));
    let o = parse("events=calls+bytecode,classes=fx.Loop");
    assert!(o.events.contains(EventGroup::Bytecode));
    assert_eq!(
        o.mode,
        CaptureMode::Jvmti,
        "chosen, since bci would show probe calls"
    );
    assert_eq!(parse("events=bytecode,mode=jvmti").mode, CaptureMode::Jvmti);
    let e = error("events=bytecode,mode=bci");
    assert!(e.starts_with("mode:") && e.contains("mode=jvmti"), "{e}");
}

#[test]
fn monitors_are_opt_in_and_need_bci_mode() {
    assert!(!parse("").events.contains(EventGroup::Monitors));
    assert!(!parse("events=all").events.contains(EventGroup::Monitors));
    let o = parse("events=calls+monitors,classes=fx.Held");
    assert!(o.events.contains(EventGroup::Monitors));
    assert_eq!(o.events.to_string(), "calls+monitors");
    let e = error("events=calls+monitors,mode=jvmti");
    assert!(e.starts_with("events:") && e.contains("mode=bci"), "{e}");
    let e = error("events=monitors");
    assert!(e.contains("events=calls+monitors"), "{e}");
}

#[test]
fn a_colliding_recording_gets_the_pid_before_the_extension() {
    assert_eq!(own_file_name("out/trace.vmv", 42), "out/trace.42.vmv");
    assert_eq!(own_file_name("trace", 42), "trace.42");
    assert_eq!(old_file_name("trace.vmv"), "trace.vmv.old");
}
