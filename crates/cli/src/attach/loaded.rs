//! Which vmview agent a JVM already runs, read from `/proc/PID/maps`
//! before anything is sent to it.
//!
//! HotSpot loads a library once per path: loading this vmview's agent into
//! a JVM that runs another copy would start a second, independent agent in
//! it, and controlling the first with commands of another build could
//! misread its answers. So `attach` looks first: a loaded agent of the same
//! build is used as it is (whatever its path: the cache, a copy in the
//! JVM's /tmp, VMVIEW_AGENT), and one of another build is refused.

use super::process::Process;

/// A vmview agent mapped into the target.
pub struct Loaded {
    /// Its path as the JVM sees it.
    pub inside: String,
    /// Its `VERSION+ID`; `None` when its file cannot be read or carries no
    /// build marker (an agent older than build ids).
    pub build: Option<String>,
}

/// The vmview agents the target maps (normally none or one).
pub fn loaded(p: &Process) -> Vec<Loaded> {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{}/maps", p.pid)) else {
        return Vec::new();
    };
    let mut found: Vec<Loaded> = Vec::new();
    for line in maps.lines() {
        let Some(at) = line.find('/') else { continue };
        let mapped = line[at..].trim_end();
        let path = mapped.strip_suffix(" (deleted)").unwrap_or(mapped);
        let name = path.rsplit('/').next().unwrap_or_default();
        if !(name.starts_with("libvmview_agent") && name.ends_with(".so"))
            || found.iter().any(|l| l.inside == path)
        {
            continue;
        }
        // The file as vmview reaches it, else the mapping itself (a
        // deleted or replaced file).
        let range = line.split(' ').next().unwrap_or_default();
        let bytes = std::fs::read(p.path(path))
            .ok()
            .filter(|_| !mapped.ends_with(" (deleted)"))
            .or_else(|| std::fs::read(format!("/proc/{}/map_files/{range}", p.pid)).ok());
        found.push(Loaded {
            inside: path.to_string(),
            build: bytes.as_deref().and_then(crate::agent::build_in),
        });
    }
    found
}

/// The library path to send commands to: `Ok(Some(path))` when the JVM
/// already runs an agent of build `ours`, `Ok(None)` when it runs none, and
/// one clear error when it runs another build's.
pub fn choose(p: &Process, ours: &str) -> anyhow::Result<Option<String>> {
    let agents = loaded(p);
    if let Some(same) = agents.iter().find(|a| a.build.as_deref() == Some(ours)) {
        return Ok(Some(same.inside.clone()));
    }
    match agents.first() {
        None => Ok(None),
        Some(other) => Err(crate::error::plain(format!(
            "pid {} already runs {} ({}), not this vmview's agent {ours}: control it with the vmview that loaded it",
            p.pid,
            match &other.build {
                Some(b) => format!("vmview agent {b}"),
                None => "a vmview agent of an unknown (older) build".to_string(),
            },
            other.inside
        ))),
    }
}
