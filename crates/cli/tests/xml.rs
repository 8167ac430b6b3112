//! `vmview export --format xml`: VMView's flat XML with its DTD, checked by
//! a validating parser (xmllint) on a trace whose strings are hostile to
//! XML, and read back by vmview itself.

use std::path::Path;
use std::process::Command;

use crate::support::{jsonl, path_str, record, run, scratch, Recording};

/// The `fx.Strings` fixture: markup, `]]>`, control characters, CR,
/// non-BMP characters, U+FFFF and a lone surrogate in arguments, return
/// values and exception messages.
pub fn hostile_strings() -> Recording {
    let rec = record(&["--classes", "fx.*"], &[], "fx.Strings", &[]);
    assert!(
        rec.output.status.success(),
        "record failed: {}",
        rec.stderr()
    );
    rec
}

/// `vmview export TRACE --format FORMAT -o OUT`; panics with stderr on failure.
pub fn export(trace: &Path, format: &str, out: &Path) {
    let o = run(&[
        "export",
        path_str(trace),
        "--format",
        format,
        "-o",
        path_str(out),
    ]);
    assert!(
        o.status.success(),
        "vmview export failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Runs `xmllint --valid --noout` on `file` and panics with its complaints.
pub fn assert_valid_xml(file: &Path) {
    let out = Command::new("xmllint")
        .args(["--valid", "--noout"])
        .arg(file)
        .output()
        .expect("run xmllint (Debian package libxml2-utils; .ci/run installs it)");
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "xmllint rejects {}:\n{}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn exported_xml_with_hostile_strings_is_valid_against_its_embedded_dtd() {
    let rec = hostile_strings();
    let xml = rec.trace.with_extension("xml");
    export(&rec.trace, "xml", &xml);
    assert_valid_xml(&xml);

    let text = std::fs::read_to_string(&xml).expect("read xml");
    assert!(text.contains("<!DOCTYPE TRACE [\n<!--"), "DTD not embedded");
    // VMView's names and forms.
    assert!(
        text.contains("<MTD><![CDATA[<init>]]></MTD>"),
        "<init> not in CDATA"
    );
    assert!(
        text.contains("<CLASS>Lfx/Strings;</CLASS>"),
        "class not in JVM form"
    );
    assert!(text.contains("<EXC>Ljava/lang/IllegalStateException;</EXC><MSG>"));
    // `]]>` split across two CDATA sections, markup kept as text.
    assert!(text.contains("<![CDATA[a]]]]><![CDATA[>b]]>"));
    assert!(text.contains("<MSG><![CDATA[<script>alert('x')</script>]]></MSG>"));
    // Characters XML forbids, encoded; non-BMP characters as they are.
    assert!(text.contains("<MSG>ctl<U C=\"1\"/><U C=\"2\"/><U C=\"1f\"/> end</MSG>"));
    assert!(text.contains("cr<U C=\"d\"/>lf\n tab\t"));
    assert!(text.contains("<PARAM NAME=\"c\" KIND=\"char\"><U C=\"d800\"/></PARAM>"));
    assert!(text.contains("emoji \u{1F600} and \u{1D11E}"));

    // One element with an ID per event, in trace order.
    let events = rec.events();
    let ids: Vec<u64> = text
        .lines()
        .filter_map(|l| l.split_once(" ID=\"").map(|(_, r)| r))
        .map(|r| r[..r.find('"').unwrap()].parse().unwrap())
        .collect();
    let expected: Vec<u64> = events.iter().map(|e| e["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, expected);
}

#[test]
fn export_to_jsonl_and_text_matches_show() {
    let rec = hostile_strings();
    let dir = scratch("export-formats");
    let out = dir.join("events.jsonl");
    export(&rec.trace, "jsonl", &out);
    let exported: Vec<serde_json::Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(exported, jsonl(&rec.trace));

    let txt = dir.join("events.txt");
    export(&rec.trace, "text", &txt);
    let show = run(&["show", path_str(&rec.trace)]);
    assert_eq!(std::fs::read(&txt).unwrap(), show.stdout);
}

#[test]
fn xml_read_back_gives_the_same_events() {
    // binary → XML → (vmview reads the XML) → JSON Lines: every id and
    // every value, the hostile strings included, comes back.
    let rec = hostile_strings();
    let xml = rec.trace.with_extension("xml");
    export(&rec.trace, "xml", &xml);
    let out = run(&["filter", path_str(&xml), "--format", "jsonl", "true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let back: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(back, rec.events());
}
