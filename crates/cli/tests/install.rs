//! The agent inside `vmview`: written to a fresh per-user cache on first
//! use, by two runs at once without either seeing half a file, repaired
//! when damaged, and named by the same build everywhere (`--version`, the
//! trace header, `agent-path`). The installs themselves (`cargo install`,
//! the .deb, the archive) are tested by scripts/test-install.sh in CI.

use crate::support::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `vmview record` of fx.Hello with the cache at `cache`, no VMVIEW_AGENT.
fn record_with_cache(cache: &Path, trace: &Path) -> Command {
    let mut c = Command::new(vmview());
    c.env_remove("VMVIEW_AGENT")
        .env("XDG_CACHE_HOME", cache)
        .arg("record")
        .arg("--classes")
        .arg("fx.*")
        .arg("-o")
        .arg(trace)
        .arg("--")
        .arg("java")
        .arg("-cp")
        .arg(classes())
        .arg("fx.Hello");
    c
}

/// The cache's entries: (directory, files in it).
fn entries(cache: &Path) -> Vec<(PathBuf, Vec<String>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(cache.join("vmview")).unwrap() {
        let dir = e.unwrap().path();
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|f| f.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        out.push((dir, files));
    }
    out
}

#[test]
fn two_records_started_at_once_on_a_clean_cache_both_work() {
    // Both find no agent in the cache and write it: neither may load half
    // a file, fail on the other's temporary file, or leave one behind.
    for round in 0..3 {
        let dir = scratch("cache-race");
        let cache = dir.join("cache");
        let traces = [dir.join("a.vmv"), dir.join("b.vmv")];
        let children: Vec<_> = traces
            .iter()
            .map(|t| {
                record_with_cache(&cache, t)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("spawn vmview record")
            })
            .collect();
        for (child, trace) in children.into_iter().zip(&traces) {
            let out = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "round {round}: {stderr}");
            assert!(String::from_utf8_lossy(&out.stdout).contains("Hello"));
            let events = jsonl(trace);
            assert!(
                events
                    .iter()
                    .any(|e| e["type"] == "CALL" && e["class"] == "fx.Hello"),
                "round {round}: no calls in {}",
                trace.display()
            );
        }
        let entries = entries(&cache);
        assert_eq!(entries.len(), 1, "one build, one entry: {entries:?}");
        let (entry, files) = &entries[0];
        assert_eq!(files, &["libvmview_agent.so"], "no temporary file left");
        let lib = entry.join("libvmview_agent.so");
        assert_eq!(
            std::fs::read(&lib).unwrap(),
            std::fs::read(agent()).unwrap()
        );
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(entry), 0o700, "private cache entry");
        assert_eq!(mode(&cache.join("vmview")), 0o700, "private cache");
    }
}

#[test]
fn a_damaged_cached_agent_is_rewritten_before_the_jvm_loads_it() {
    // A file cut short (a full disk, a killed run of an older vmview) must
    // not be handed to the JVM, which would refuse to start.
    let dir = scratch("cache-damaged");
    let cache = dir.join("cache");
    let path_of = || {
        let out = Command::new(vmview())
            .env_remove("VMVIEW_AGENT")
            .env("XDG_CACHE_HOME", &cache)
            .arg("agent-path")
            .output()
            .unwrap();
        assert!(out.status.success());
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    };
    let lib = path_of();
    assert!(lib.starts_with(cache.join("vmview")), "{}", lib.display());
    let whole = std::fs::read(&lib).unwrap();
    std::fs::write(&lib, &whole[..whole.len() / 2]).unwrap();
    let trace = dir.join("t.vmv");
    let out = record_with_cache(&cache, &trace).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(&lib).unwrap(), whole);
    assert_eq!(path_of(), lib, "the same build keeps its path");
}

#[test]
fn version_trace_header_and_agent_name_one_build() {
    let version = run(&["--version"]);
    let version = String::from_utf8_lossy(&version.stdout).into_owned();
    let build = version
        .trim()
        .strip_prefix("vmview 0.1.0 (agent build ")
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("unexpected --version: {version}"));
    assert_eq!(build.len(), 16, "{version}");
    assert!(build.bytes().all(|b| b.is_ascii_hexdigit()), "{version}");

    let rec = record(&["--classes", "fx.*"], &[], "fx.Hello", &[]);
    assert!(rec.output.status.success(), "{}", rec.stderr());
    let stats = run(&["stats", path_str(&rec.trace)]);
    let stats = String::from_utf8_lossy(&stats.stdout).into_owned();
    assert!(
        stats.contains(&format!("agent          0.1.0 (build {build})")),
        "{stats}"
    );
    let json = run(&["stats", path_str(&rec.trace), "--format", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["properties"]["agent_build"], build, "{json}");
    assert_eq!(json["properties"]["agent_version"], "0.1.0", "{json}");
}

#[test]
fn vmview_agent_overrides_the_embedded_agent_and_is_checked() {
    let dir = scratch("agent-override");
    let lib = dir.join("libvmview_agent.so");
    std::fs::copy(agent(), &lib).unwrap();
    let out = Command::new(vmview())
        .env("VMVIEW_AGENT", &lib)
        .arg("agent-path")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), path_str(&lib));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "",
        "same build: no note"
    );

    let missing = dir.join("nope.so");
    let out = Command::new(vmview())
        .env("VMVIEW_AGENT", &missing)
        .arg("agent-path")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("VMVIEW_AGENT is set to") && stderr.contains("which is not a file"),
        "{stderr}"
    );
}

#[test]
fn an_unwritable_cache_is_one_clear_error() {
    // A file where the directory should be (it stops root too, whom no
    // mode stops).
    let dir = scratch("cache-blocked");
    let blocked = dir.join("cache");
    std::fs::write(&blocked, b"a file, not a directory").unwrap();
    let out = Command::new(vmview())
        .env_remove("VMVIEW_AGENT")
        .env("XDG_CACHE_HOME", &blocked)
        .arg("agent-path")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("cannot create the agent cache"), "{stderr}");
    assert!(stderr.contains("hint: set XDG_CACHE_HOME"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
