//! Running one JVM and measuring it: wall time from spawn to exit, CPU time
//! (user + system, all threads: JIT compilers and GC included) from the
//! child's `rusage` as `wait4` reports it.
//!
//! `wait4` is the only honest source of a finished child's CPU time: the
//! process's `/proc` entry is gone once it is reaped, and `RUSAGE_CHILDREN`
//! would mix children together.
//!
//! A tracer can hang a JVM, so every run has a deadline: a timer thread
//! kills the child with SIGKILL when it passes. The child is reaped only
//! after the timer has stood down (`waitid` with `WNOWAIT` sees the exit
//! without reaping), so the kill can never hit a recycled pid.

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

/// What one run cost and printed.
#[derive(Debug, Clone)]
pub struct Run {
    pub wall: Duration,
    pub cpu: Duration,
    pub stdout: String,
    pub stderr: String,
    pub success: bool,
    /// Killed at the deadline.
    pub timed_out: bool,
}

impl Run {
    /// The workload's own measure of its work (`vmbench: work_ns=N` on
    /// stderr), which leaves out JVM start-up and shutdown.
    pub fn work(&self) -> Option<Duration> {
        self.stderr.lines().find_map(|l| {
            l.strip_prefix("vmbench: work_ns=")
                .and_then(|n| n.trim().parse().ok())
                .map(Duration::from_nanos)
        })
    }
}

/// Runs `cmd` to completion, or kills it after `timeout`, with stdout and
/// stderr in files under `dir` (no pipe to drain, so a chatty program
/// cannot stall on it).
pub fn run(mut cmd: Command, dir: &Path, timeout: Duration) -> anyhow::Result<Run> {
    let out_path = dir.join("stdout");
    let err_path = dir.join("stderr");
    cmd.stdin(Stdio::null())
        .stdout(File::create(&out_path).context("create stdout file")?)
        .stderr(File::create(&err_path).context("create stderr file")?);
    let start = Instant::now();
    let child = cmd
        .spawn()
        .with_context(|| format!("cannot run {:?}", cmd.get_program()))?;
    let pid = child.id() as libc::pid_t;

    // The deadline: `exited` turns true (under the lock) before the child is
    // reaped, and the timer kills only while it is false.
    let exited = Arc::new((Mutex::new(false), Condvar::new()));
    let timer = {
        let exited = Arc::clone(&exited);
        std::thread::spawn(move || {
            let (lock, cv) = &*exited;
            let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
            let (guard, _) = cv
                .wait_timeout_while(guard, timeout, |done| !*done)
                .unwrap_or_else(|e| e.into_inner());
            if *guard {
                return false;
            }
            // SAFETY: `pid` is our child and not reaped yet (see above).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            true
        })
    };
    loop {
        // SAFETY: an all-zero siginfo_t is a valid out-parameter.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waits for our child's exit without reaping it (WNOWAIT).
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            bail!("waitid on pid {pid}: {e}");
        }
    }
    let wall = start.elapsed();
    {
        let (lock, cv) = &*exited;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
    }
    let timed_out = timer.join().unwrap_or(false);

    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our child, not yet reaped (we never call
        // `Child::wait`); `status` and `usage` are valid for writes.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            bail!("wait4 on pid {pid}: {e}");
        }
    }
    drop(child);
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    Ok(Run {
        wall,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
        success: !timed_out && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        timed_out,
    })
}

/// The median of durations (the mean of the middle two for an even count).
pub fn median(xs: &[Duration]) -> Option<Duration> {
    let mut v = xs.to_vec();
    v.sort();
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        let ms = Duration::from_millis;
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[ms(5), ms(1), ms(3)]), Some(ms(3)));
        assert_eq!(
            median(&[ms(4), ms(1), ms(3), ms(2)]),
            Some(Duration::from_micros(2500))
        );
    }

    #[test]
    fn a_child_burning_cpu_reports_its_cpu_time() {
        let dir = std::env::temp_dir().join(format!("vmview-overhead-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo done",
        ]);
        let r = run(cmd, &dir, Duration::from_secs(60)).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        assert!(r.success && !r.timed_out);
        assert_eq!(r.stdout, "done\n");
        assert!(r.cpu > Duration::from_millis(10), "{r:?}");
        assert!(r.cpu <= r.wall + Duration::from_millis(20), "{r:?}");
    }

    #[test]
    fn a_hung_child_is_killed_at_the_deadline() {
        let dir = std::env::temp_dir().join(format!("vmview-overhead-hang-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let r = run(cmd, &dir, Duration::from_millis(300)).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        assert!(r.timed_out && !r.success, "{r:?}");
        assert!(r.wall < Duration::from_secs(5), "{r:?}");
    }
}
