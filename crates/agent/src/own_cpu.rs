//! CPU time of threads named by a prefix, for the overhead budget: the
//! agent's writer threads (`vmview-writer`), so that what encoding and
//! writing the traced calls' events costs is measured, not estimated, and
//! the JIT's compiler threads, which compile the instrumented code. (The
//! sampler's and the budget's own threads are not counted: demoting
//! methods would not save their time.)
//!
//! The threads are found by name in `/proc/self/task/*/comm` and read
//! through their per-thread CPU clocks (`clock_gettime` on the clock id
//! Linux derives from a thread id), so no thread has to register itself
//! and nothing is added to their loops. Only the budget's thread calls
//! this, between ticks: it may read files.

use std::collections::{HashMap, HashSet};

/// The names of the agent's writer threads (a prefix).
const WRITERS: &[&[u8]] = &[b"vmview-writer"];
/// HotSpot's compiler threads (`C2 CompilerThread0`, as `comm` truncates
/// it to 15 bytes).
const COMPILERS: &[&[u8]] = &[b"C1 CompilerThre", b"C2 CompilerThre"];

/// The CPU clock of thread `tid` of this process (Linux's
/// `MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`).
fn thread_clock(tid: i32) -> libc::clockid_t {
    ((!tid) << 3) | 6
}

/// CPU time of thread `tid`, ns; `None` once it has exited.
fn thread_cpu_ns(tid: i32) -> Option<u64> {
    crate::clock::clock_ns(thread_clock(tid))
}

/// Running total of some threads' CPU time.
pub struct OwnCpu {
    /// The name prefixes of the threads counted.
    prefixes: &'static [&'static [u8]],
    /// Per agent thread: the CPU time last read.
    seen: HashMap<i32, u64>,
    /// Live threads not counted (only those of the last
    /// listing, so that a program starting thread after thread does not
    /// grow it).
    others: HashSet<i32>,
    total_ns: u64,
}

impl OwnCpu {
    /// The agent's writer threads.
    pub fn writers() -> OwnCpu {
        OwnCpu::named(WRITERS)
    }

    /// The JIT's compiler threads.
    pub fn compilers() -> OwnCpu {
        OwnCpu::named(COMPILERS)
    }

    /// Counts the threads whose names start with one of `prefixes`.
    fn named(prefixes: &'static [&'static [u8]]) -> OwnCpu {
        OwnCpu {
            prefixes,
            seen: HashMap::new(),
            others: HashSet::new(),
            total_ns: 0,
        }
    }

    /// The threads' CPU time since the first call, ns: threads that
    /// appeared since are counted whole, threads that exited keep what
    /// was last read of them.
    pub fn total_ns(&mut self) -> u64 {
        if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
            let mut others = HashSet::with_capacity(self.others.len());
            for entry in dir.flatten() {
                let Some(tid) = entry
                    .file_name()
                    .to_str()
                    .and_then(|s| s.parse::<i32>().ok())
                else {
                    continue;
                };
                if self.seen.contains_key(&tid) {
                    continue;
                }
                if self.others.contains(&tid) {
                    others.insert(tid);
                    continue;
                }
                let ours = std::fs::read(entry.path().join("comm"))
                    .map(|name| self.prefixes.iter().any(|p| name.starts_with(p)))
                    .unwrap_or(false);
                if ours {
                    self.seen.insert(tid, 0);
                } else {
                    others.insert(tid);
                }
            }
            self.others = others;
        }
        let mut gone = Vec::new();
        for (&tid, last) in self.seen.iter_mut() {
            match thread_cpu_ns(tid) {
                Some(now) => {
                    self.total_ns += now.saturating_sub(*last);
                    *last = now;
                }
                None => gone.push(tid),
            }
        }
        for tid in gone {
            self.seen.remove(&tid);
        }
        self.total_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn own_thread_cpu_ns() -> u64 {
        crate::clock::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).unwrap()
    }

    #[test]
    fn a_busy_agent_thread_is_measured_and_other_threads_are_not() {
        // Threads of this test's own prefix, so that agent threads other
        // tests run at the same time are not counted.
        let mut own = OwnCpu::named(&[b"vmvtest-"]);
        let before = own.total_ns();
        let spin = |d: Duration| {
            let until = Instant::now() + d;
            let mut x = 0u64;
            while Instant::now() < until {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            x
        };
        // A thread of another name spins: not counted.
        std::thread::Builder::new()
            .name("program".into())
            .spawn(move || {
                while own_thread_cpu_ns() < 100_000_000 {
                    spin(Duration::from_millis(5));
                }
            })
            .unwrap()
            .join()
            .unwrap();
        let between = own.total_ns();
        assert_eq!(
            between - before,
            0,
            "CPU time counted for a thread that is not the agent's"
        );
        // An agent thread spins 100 ms of CPU, and is seen while it runs.
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::Builder::new()
            .name("vmvtest-spin".into())
            .spawn(move || {
                // 100 ms of this thread's own CPU time, however loaded the
                // machine is.
                while own_thread_cpu_ns() < 100_000_000 {
                    spin(Duration::from_millis(5));
                }
                tx.send(()).unwrap();
                // Stay alive until measured.
                std::thread::sleep(Duration::from_millis(500));
            })
            .unwrap();
        rx.recv().unwrap();
        let after = own.total_ns();
        t.join().unwrap();
        assert!(
            after - between >= 100_000_000,
            "only {} ns counted for the agent thread's spin",
            after - between
        );
    }
}
