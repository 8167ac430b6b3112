//! The agent library `vmview` carries inside itself, and where it is put
//! for a JVM to load.
//!
//! build.rs builds the agent for the same target and profile and this
//! module embeds it, so the single `vmview` file is the whole install and
//! its agent cannot be of another version. A JVM needs a file, so `record`
//! and `attach` write the bytes once to a per-user cache,
//! `$XDG_CACHE_HOME/vmview/HASH/libvmview_agent.so` (else `~/.cache`),
//! named by a hash of the bytes: builds never share a name, and a build
//! finds its own copy again. The directory is private (0700); the file is
//! written under a temporary name and renamed into place, so a concurrent
//! run sees either no file or a whole one, and an existing file is compared
//! with the embedded bytes before it is used. `VMVIEW_AGENT` overrides all
//! of this with a library of the user's choice.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::error::{hinted, plain};

/// The agent library, as built with this vmview.
static LIBRARY: &[u8] = include_bytes!(env!("VMVIEW_AGENT_LIB"));
/// Hash of [`LIBRARY`] (xxh3-128, hex): the cache directory's name.
const HASH: &str = env!("VMVIEW_AGENT_HASH");
/// The agent's build id (a hash of its sources; see the agent's build.rs).
pub const BUILD_ID: &str = env!("VMVIEW_BUILD_ID");
/// `vmview --version`: the version and the build of the agent inside.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (agent build ",
    env!("VMVIEW_BUILD_ID"),
    ")"
);
/// The agent library's file name.
pub const FILE_NAME: &str = "libvmview_agent.so";
/// Cache entries of other builds unused for this long are removed when a
/// new one is written, so rebuilding does not fill the disk.
const STALE: Duration = Duration::from_secs(24 * 3600);

/// `VERSION+ID` of this vmview's agent, as an agent reports itself.
pub fn build() -> String {
    format!("{}+{BUILD_ID}", env!("CARGO_PKG_VERSION"))
}

/// The library to load: `$VMVIEW_AGENT` when set, else the embedded one,
/// written to (or found in) the cache.
pub fn path() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("VMVIEW_AGENT").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            return Err(hinted(
                format!(
                    "VMVIEW_AGENT is set to {}, which is not a file",
                    p.display()
                ),
                format!("point it at a {FILE_NAME}, or unset it to use the agent inside vmview"),
            ));
        }
        if let Some(other) = std::fs::read(&p).ok().and_then(|b| build_in(&b)) {
            if other != build() {
                eprintln!(
                    "vmview: note: VMVIEW_AGENT {} is agent build {other}, this vmview's is {}",
                    p.display(),
                    build()
                );
            }
        }
        return Ok(std::path::absolute(&p).unwrap_or(p));
    }
    cached()
}

/// The embedded library's file in the cache, written there first if it is
/// missing or not whole.
pub fn cached() -> anyhow::Result<PathBuf> {
    let root = cache_root()?.join("vmview");
    let dir = root.join(HASH);
    let file = dir.join(FILE_NAME);
    let cannot = |what: &str, p: &Path, e: std::io::Error| {
        hinted(
            format!("cannot {what} {}: {e}", p.display()),
            "set XDG_CACHE_HOME to a directory you can write, or VMVIEW_AGENT to an agent library",
        )
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| cannot("create the agent cache", &dir, e))?;
    let meta = std::fs::metadata(&dir).map_err(|e| cannot("read", &dir, e))?;
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me || meta.mode() & 0o022 != 0 {
        return Err(plain(format!(
            "the agent cache {} is not a private directory of yours (owner uid {}, mode {:o}): \
             remove it, or set VMVIEW_AGENT",
            dir.display(),
            meta.uid(),
            meta.mode() & 0o7777
        )));
    }
    if is_whole(&file) {
        // Its time says when it was last used (see `prune`).
        if let Ok(f) = std::fs::File::open(&file) {
            let _ = f.set_modified(SystemTime::now());
        }
        return Ok(file);
    }
    let part = dir.join(format!(
        ".{FILE_NAME}.{}.{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o700)
        .open(&part)
        .and_then(|mut f| f.write_all(LIBRARY))
        .and_then(|()| std::fs::rename(&part, &file));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&part);
        return Err(cannot("write the agent to", &file, e));
    }
    prune(&root);
    Ok(file)
}

/// Whether `file` holds exactly the embedded library.
fn is_whole(file: &Path) -> bool {
    std::fs::metadata(file).is_ok_and(|m| m.len() == LIBRARY.len() as u64)
        && std::fs::read(file).is_ok_and(|b| b == LIBRARY)
}

/// Removes the cache entries of other builds not used for [`STALE`].
fn prune(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name == HASH || name.len() != HASH.len() || !name.bytes().all(|b| b.is_ascii_hexdigit())
        {
            continue;
        }
        let used = std::fs::metadata(e.path().join(FILE_NAME))
            .or_else(|_| e.metadata())
            .and_then(|m| m.modified());
        if used.is_ok_and(|t| t.elapsed().is_ok_and(|age| age > STALE)) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// `$XDG_CACHE_HOME` (when absolute, as the XDG spec asks), else `~/.cache`.
fn cache_root() -> anyhow::Result<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from) {
        if x.is_absolute() {
            return Ok(x);
        }
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".cache")),
        None => Err(hinted(
            "neither XDG_CACHE_HOME nor HOME is set, so there is no cache to put the agent in",
            "set XDG_CACHE_HOME to a directory you can write, or VMVIEW_AGENT to an agent library",
        )),
    }
}

pub use crate::marker::build_in;

/// A hash of a library's bytes, for the name of a copy of it.
pub fn hash_of(bytes: &[u8]) -> String {
    format!("{:032x}", twox_hash::XxHash3_128::oneshot(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_agent_carries_this_build() {
        assert_eq!(build_in(LIBRARY).as_deref(), Some(build().as_str()));
        assert_eq!(hash_of(LIBRARY), HASH);
    }

    #[test]
    fn a_marker_is_read_up_to_its_sixteen_digit_id() {
        let bytes =
            b"xx vmview-agent-build \x00junk vmview-agent-build 0.1.0+0123456789abcdefcafe more";
        assert_eq!(build_in(bytes).as_deref(), Some("0.1.0+0123456789abcdef"));
        assert_eq!(build_in(b"vmview-agent-build 0.1.0+12"), None);
        assert_eq!(build_in(b"no marker at all"), None);
    }
}
