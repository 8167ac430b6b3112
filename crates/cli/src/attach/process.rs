//! What vmview learns about a process from `/proc` before it touches it:
//! whether it exists, whose it is, whether it is a HotSpot JVM that accepts
//! attach, and where its files are when it lives in other namespaces.
//!
//! A JVM in a container sees its own pid (the last `NSpid` of
//! `/proc/PID/status`) and its own `/tmp`; vmview reaches that `/tmp`
//! through `/proc/PID/root/tmp`, the kernel's view of the target's root, so
//! it never has to enter the target's mount namespace.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::perfdata::{self, PerfValue};

/// A live process, as `/proc` describes it.
pub struct Process {
    pub pid: u32,
    /// Its pid in its own PID namespace (names its attach files).
    pub nspid: u32,
    pub uid: u32,
    pub gid: u32,
    /// `/proc/PID/root`, or `/` when it shares our mount namespace.
    pub root: PathBuf,
    pub cmdline: Vec<String>,
}

/// Why a process cannot be looked at.
pub enum Lookup {
    Found(Process),
    NoSuchProcess,
}

impl Process {
    pub fn find(pid: u32) -> Lookup {
        let status = match std::fs::read_to_string(format!("/proc/{pid}/status")) {
            Ok(s) => s,
            Err(_) => return Lookup::NoSuchProcess,
        };
        let field = |name: &str| -> Vec<u32> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| {
                    v.split_whitespace()
                        .filter_map(|x| x.parse().ok())
                        .collect()
                })
                .unwrap_or_default()
        };
        // Uid: real, effective, saved, fs. HotSpot compares the effective ones.
        let uid = field("Uid:").get(1).copied().unwrap_or(u32::MAX);
        let gid = field("Gid:").get(1).copied().unwrap_or(u32::MAX);
        let nspid = field("NSpid:").last().copied().unwrap_or(pid);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| {
                b.split(|c| *c == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let root = if same_namespace(pid, "mnt") {
            PathBuf::from("/")
        } else {
            PathBuf::from(format!("/proc/{pid}/root"))
        };
        Lookup::Found(Process {
            pid,
            nspid,
            uid,
            gid,
            root,
            cmdline,
        })
    }

    /// A path of the target's file system, as vmview reaches it.
    pub fn path(&self, inside: &str) -> PathBuf {
        self.root.join(inside.trim_start_matches('/'))
    }

    /// Whether it shares vmview's mount namespace.
    pub fn same_mounts(&self) -> bool {
        self.root == Path::new("/")
    }

    /// Which VM the process runs, from the libraries it maps; `None` when `/proc/PID/maps` is not readable (another user's).
    pub fn jvm_library(&self) -> Option<JvmKind> {
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", self.pid)).ok()?;
        Some(if maps.contains("libj9vm") {
            JvmKind::OpenJ9
        } else if maps.contains("/libjvm.so") {
            JvmKind::HotSpot
        } else {
            JvmKind::NotJava
        })
    }

    /// Whether the vmview agent is loaded (by `record` or `attach`).
    pub fn has_vmview_agent(&self) -> bool {
        std::fs::read_to_string(format!("/proc/{}/maps", self.pid))
            .is_ok_and(|m| m.contains("libvmview_agent"))
    }

    /// The JVM's perf-data counters (`-XX:-UsePerfData` leaves none).
    pub fn perf_counters(&self) -> HashMap<String, PerfValue> {
        let tmp = self.path("/tmp");
        let Ok(dirs) = std::fs::read_dir(&tmp) else {
            return HashMap::new();
        };
        for d in dirs.flatten() {
            if d.file_name().to_string_lossy().starts_with("hsperfdata_") {
                if let Ok(bytes) = std::fs::read(d.path().join(self.nspid.to_string())) {
                    return perfdata::parse(&bytes);
                }
            }
        }
        HashMap::new()
    }

    /// Whether the JVM says it refuses attach: `-XX:+DisableAttachMechanism`
    /// on its command line, or its perf data's capability flag.
    pub fn attach_disabled(&self, counters: &HashMap<String, PerfValue>) -> bool {
        let last_flag = self
            .cmdline
            .iter()
            .rev()
            .find(|a| a.ends_with("DisableAttachMechanism") && a.starts_with("-XX:"));
        if let Some(flag) = last_flag {
            return flag.starts_with("-XX:+");
        }
        perfdata::text(counters, "sun.rt.jvmCapabilities").is_some_and(|c| c.starts_with('0'))
    }

    /// The main class or `-jar` file, from perf data or the command line.
    pub fn main_class(&self, counters: &HashMap<String, PerfValue>) -> String {
        if let Some(cmd) = perfdata::text(counters, "sun.rt.javaCommand") {
            if let Some(first) = cmd.split_whitespace().next() {
                return first.to_string();
            }
        }
        main_from_cmdline(&self.cmdline).unwrap_or_else(|| "?".to_string())
    }

    /// The Java version: perf data, else the JDK's `release` file.
    pub fn java_version(&self, counters: &HashMap<String, PerfValue>) -> String {
        if let Some(v) = perfdata::text(counters, "java.property.java.version") {
            return v.to_string();
        }
        let exe = std::fs::read_link(format!("/proc/{}/exe", self.pid)).ok();
        let release = exe
            .as_deref()
            .and_then(|e| e.parent()?.parent())
            .map(|home| self.path(&home.join("release").to_string_lossy()));
        release
            .and_then(|r| std::fs::read_to_string(r).ok())
            .and_then(|text| {
                text.lines().find_map(|l| {
                    l.strip_prefix("JAVA_VERSION=")
                        .map(|v| v.trim_matches('"').to_string())
                })
            })
            .unwrap_or_else(|| "?".to_string())
    }
}

/// Which virtual machine a process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JvmKind {
    HotSpot,
    OpenJ9,
    NotJava,
}

/// Whether `pid` shares vmview's namespace of `kind` (`mnt`, `pid`).
pub fn same_namespace(pid: u32, kind: &str) -> bool {
    let ours = std::fs::read_link(format!("/proc/self/ns/{kind}"));
    let theirs = std::fs::read_link(format!("/proc/{pid}/ns/{kind}"));
    match (ours, theirs) {
        (Ok(a), Ok(b)) => a == b,
        // Unreadable (another user's process): assume shared.
        _ => true,
    }
}

/// The main class or jar of a `java` command line: the first argument
/// after the options (skipping the values of `-cp` and friends).
pub fn main_from_cmdline(args: &[String]) -> Option<String> {
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "-jar" => return it.next().cloned(),
            "-cp" | "-classpath" | "--class-path" | "-p" | "--module-path" | "--add-modules"
            | "--add-opens" | "--add-exports" | "--add-reads" => {
                it.next();
            }
            "-m" | "--module" => return it.next().cloned(),
            s if s.starts_with('-') => {}
            s => return Some(s.to_string()),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn main_class_is_the_first_argument_after_the_options() {
        assert_eq!(
            main_from_cmdline(&args("java -Xmx1g -cp a:b fx.Loop 3")).as_deref(),
            Some("fx.Loop")
        );
        assert_eq!(
            main_from_cmdline(&args("java -jar app.jar --port 1")).as_deref(),
            Some("app.jar")
        );
        assert_eq!(main_from_cmdline(&args("java -version")), None);
    }
}
