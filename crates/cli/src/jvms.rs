//! `vmview jvms`: the HotSpot JVMs on this machine that you may attach to,
//! like `jps`, from `/proc` and the JVMs' perf data (also those in
//! containers, through `/proc/PID/root`). Nothing is sent to the JVMs.

use std::process::ExitCode;

use clap::Args;

use crate::attach::process::{JvmKind, Lookup, Process};

#[derive(Args)]
#[command(
    about = "List the running JVMs you can attach to (pid, Java version, main class or jar)",
    long_about = "List the running HotSpot JVMs you can attach to: pid, Java version, main class \
or jar. As root, every user's JVMs; otherwise your own. A JVM started with \
-XX:+DisableAttachMechanism is listed with 'attach disabled'; one that already \
runs the vmview agent with 'agent loaded'."
)]
pub struct JvmsArgs {}

pub fn run(_args: &JvmsArgs) -> anyhow::Result<ExitCode> {
    let euid = nix::unistd::geteuid().as_raw();
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|pid| *pid != std::process::id())
        .collect();
    pids.sort_unstable();
    out!("{:>8}  {:<10}  MAIN", "PID", "VERSION");
    for pid in pids {
        let Lookup::Found(p) = Process::find(pid) else {
            continue;
        };
        if euid != 0 && p.uid != euid {
            continue;
        }
        if p.jvm_library() != Some(JvmKind::HotSpot) {
            continue;
        }
        let counters = p.perf_counters();
        let mut notes = Vec::new();
        if p.attach_disabled(&counters) {
            notes.push("attach disabled");
        }
        if p.has_vmview_agent() {
            notes.push("agent loaded");
        }
        let notes = if notes.is_empty() {
            String::new()
        } else {
            format!("  ({})", notes.join(", "))
        };
        out!(
            "{:>8}  {:<10}  {}{notes}",
            p.pid,
            p.java_version(&counters),
            p.main_class(&counters)
        );
    }
    Ok(ExitCode::SUCCESS)
}
