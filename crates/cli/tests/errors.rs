//! Bad input gives one clear message and a non-zero exit, never a panic.

use crate::support::*;

fn assert_clean_error(args: &[&str], needle: &str) {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} should fail");
    assert!(
        stderr.contains(needle),
        "{args:?}: expected {needle:?} in {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
}

#[test]
fn missing_file_is_named() {
    assert_clean_error(
        &["show", "/nonexistent/trace.vmv"],
        "/nonexistent/trace.vmv",
    );
    assert_clean_error(
        &["stats", "/nonexistent/trace.vmv"],
        "/nonexistent/trace.vmv",
    );
}

#[test]
fn a_file_that_is_not_a_trace_is_rejected() {
    let dir = scratch("notatrace");
    let f = dir.join("notes.txt");
    std::fs::write(&f, "these are not the events you are looking for\n").unwrap();
    assert_clean_error(&["show", path_str(&f)], "not a vmview trace");
    let empty = dir.join("empty.vmv");
    std::fs::write(&empty, "").unwrap();
    assert_clean_error(&["stats", path_str(&empty)], "not a vmview trace");
}

#[test]
fn a_bad_agent_option_stops_the_jvm_with_one_line_naming_it() {
    let dir = scratch("badopt");
    let out = std::process::Command::new("java")
        .arg(format!(
            "-agentpath:{}=file={}/t.vmv,evnts=calls",
            agent().display(),
            dir.display()
        ))
        .arg("-version")
        .output()
        .unwrap();
    assert!(!out.status.success(), "the JVM must refuse to start");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("evnts"), "{stderr}");

    // Through `vmview record`, a bad flag is refused before java starts.
    let rec = record(&["--events", "calls,nonsense"], &[], "fx.Hello", &[]);
    assert!(!rec.output.status.success());
    assert!(rec.stderr().contains("nonsense"), "{}", rec.stderr());
    assert!(!rec.stdout().contains("Hello"), "java must not have run");
}

#[test]
fn java_not_found_is_explained() {
    agent();
    let dir = scratch("nojava");
    let out = run(&[
        "record",
        "-o",
        path_str(&dir.join("t.vmv")),
        "--",
        "/no/such/java",
        "-version",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/no/such/java"), "{stderr}");
}

#[test]
fn show_of_an_unknown_event_id_says_which_ids_exist() {
    let rec = record(&["--classes", "fx.Hello"], &[], "fx.Hello", &[]);
    assert_clean_error(&["show", path_str(&rec.trace), "--id", "999999"], "999999");
}
