//! Builds the agent library and hands it to the CLI, which embeds it
//! (`include_bytes!`) and writes it to a per-user cache when `record` or
//! `attach` needs it: one `vmview` file is the whole install.
//!
//! Cargo has no stable artifact dependencies, so this script runs a nested
//! `cargo build` of `crates/agent` for the same profile and target. It uses
//! its own target directory (`TARGET/PROFILE/embedded-agent`), because the
//! outer cargo holds the lock of its own; the nested cargo inherits the
//! outer one's jobserver, so `-j` still bounds the whole build, and its own
//! fingerprints make a run with nothing changed take a fraction of a
//! second. Packagers who build the agent separately can point
//! `VMVIEW_EMBED_AGENT` at the library instead.
//!
//! It also reads the agent's build marker out of the library (see the
//! agent's `BUILD_MARKER`), so `vmview --version` names the build of the
//! agent it carries, and hashes the bytes for the cache directory's name.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "src/marker.rs"]
mod marker;

fn main() {
    let manifest = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env("OUT_DIR"));
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=VMVIEW_EMBED_AGENT");
    let lib = match std::env::var_os("VMVIEW_EMBED_AGENT").filter(|v| !v.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => build_agent(&manifest, &out),
    };
    println!("cargo:rerun-if-changed={}", lib.display());
    let bytes = std::fs::read(&lib)
        .unwrap_or_else(|e| fail(&format!("cannot read the agent {}: {e}", lib.display())));
    let build = marker::build_in(&bytes).unwrap_or_else(|| {
        fail(&format!(
            "{} holds no vmview build marker: it is not a vmview agent of this version",
            lib.display()
        ))
    });
    let version = env("CARGO_PKG_VERSION");
    let (agent_version, build_id) = build.split_once('+').unwrap_or((&build, ""));
    if agent_version != version {
        fail(&format!(
            "the agent {} is version {agent_version}, this CLI is {version}: both must come from one checkout",
            lib.display()
        ));
    }
    let hash = twox_hash::XxHash3_128::oneshot(&bytes);
    println!("cargo:rustc-env=VMVIEW_AGENT_LIB={}", lib.display());
    println!("cargo:rustc-env=VMVIEW_AGENT_HASH={hash:032x}");
    println!("cargo:rustc-env=VMVIEW_BUILD_ID={build_id}");
}

/// `cargo build` of the agent next to this crate; returns the library.
fn build_agent(manifest: &Path, out: &Path) -> PathBuf {
    let agent = manifest.join("../agent");
    if !agent.join("Cargo.toml").is_file() {
        fail(
            "vmview-cli embeds the agent built from ../agent, which is missing: build it from a \
             checkout of the whole repository (cargo install --path crates/cli, or --git URL), \
             or set VMVIEW_EMBED_AGENT to a libvmview_agent.so of the same version",
        );
    }
    // The sources the agent is built from; the nested cargo decides what
    // to recompile, this only decides when to ask it.
    for dir in ["agent", "format", "options", "analysis", "classfile"] {
        println!(
            "cargo:rerun-if-changed={}",
            manifest.join("..").join(dir).display()
        );
    }
    for f in ["../../Cargo.lock", "../../Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", manifest.join(f).display());
    }
    let profile = env("PROFILE");
    let target = env("TARGET");
    let cross = target != env("HOST");
    let target_dir = embed_dir(out, &profile);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .arg("--manifest-path")
        .arg(agent.join("Cargo.toml"))
        .arg("--lib")
        .arg("--target-dir")
        .arg(&target_dir);
    if profile == "release" {
        cmd.arg("--release");
    }
    if cross {
        cmd.args(["--target", &target]);
    }
    if Path::new(&manifest.join("../../Cargo.lock")).is_file() {
        // Never rewrite the checkout's lock file from inside a build.
        cmd.arg("--locked");
    }
    // Clippy's wrapper (and a `cargo check`'s) must not compile the agent:
    // the library is needed whole, and the same one for every command.
    for var in [
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_TARGET_DIR",
    ] {
        cmd.env_remove(var);
    }
    let output = cmd
        .output()
        .unwrap_or_else(|e| fail(&format!("cannot run cargo to build the agent: {e}")));
    if !output.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&output.stderr));
        fail("building the agent (crates/agent) failed; its errors are above");
    }
    let mut lib = target_dir;
    if cross {
        lib.push(&target);
    }
    lib.push(&profile);
    lib.push("libvmview_agent.so");
    lib
}

/// The nested build's target directory: beside the outer build's
/// artefacts (`TARGET/PROFILE/embedded-agent`), shared by `cargo build`,
/// `clippy` and `test`, whose build scripts have different OUT_DIRs; else
/// inside OUT_DIR.
fn embed_dir(out: &Path, profile: &str) -> PathBuf {
    // OUT_DIR is TARGET/[TRIPLE/]PROFILE/build/vmview-cli-HASH/out.
    match out.ancestors().nth(3) {
        Some(p) if p.file_name().is_some_and(|n| n == profile) => p.join("embedded-agent"),
        _ => out.join("embedded-agent"),
    }
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| fail(&format!("cargo did not set {name}")))
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1)
}
