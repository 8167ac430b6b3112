//! Computes the agent's build id: a hash of every source file the agent is
//! built from (its own crate, the workspace crates it depends on, and the
//! workspace's Cargo.lock, which pins everything else). The id is compiled
//! into the agent (`VMVIEW_BUILD_ID`), written into every trace header and
//! answered to `vmview attach`; the CLI reads it back out of the agent it
//! embeds, so `vmview --version`, the agent and the trace name one build
//! and an agent of another build is recognised. A hash of the sources
//! rather than of the library's bytes, because the library cannot contain
//! a hash of itself; two builds of the same sources (debug and release)
//! share an id, and behave the same.

use std::path::{Path, PathBuf};

/// The workspace crates the agent is compiled from, relative to this one.
const CRATES: &[&str] = &[
    ".",
    "../format",
    "../options",
    "../analysis",
    "../classfile",
];

fn main() {
    let here = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let mut files = Vec::new();
    for c in CRATES {
        let dir = here.join(c);
        files.push(dir.join("Cargo.toml"));
        collect(&dir.join("src"), &mut files);
        for extra in ["build.rs", "java"] {
            let p = dir.join(extra);
            if p.is_file() {
                files.push(p);
            } else if p.is_dir() {
                collect(&p, &mut files);
            }
        }
        println!("cargo:rerun-if-changed={}", dir.display());
    }
    for f in ["../../Cargo.lock", "../../Cargo.toml"] {
        let p = here.join(f);
        if p.is_file() {
            println!("cargo:rerun-if-changed={}", p.display());
            files.push(p);
        }
    }
    files.sort();
    use std::hash::Hasher as _;
    let mut hasher = twox_hash::XxHash3_64::with_seed(0);
    for f in &files {
        // The path relative to the agent crate, so where the checkout
        // lives does not change the id.
        let rel = f.strip_prefix(&here).unwrap_or(f);
        let bytes = std::fs::read(f).unwrap_or_default();
        hasher.write(rel.to_string_lossy().as_bytes());
        hasher.write(&(bytes.len() as u64).to_le_bytes());
        hasher.write(&bytes);
    }
    println!("cargo:rustc-env=VMVIEW_BUILD_ID={:016x}", hasher.finish());
}

/// Every file under `dir`, recursively.
fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else {
            out.push(p);
        }
    }
}
