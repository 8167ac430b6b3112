//! The life of one of the agent's own JVMTI agent threads (the sampler's,
//! the budget's): started at VMInit, asked to stop when the recording
//! ends, and waited for, bounded, so that nothing it pushes arrives after
//! the writer's last drain. Each recording has its own, so a recording
//! started after another one stopped gets fresh threads.

use crate::agent::Agent;
use crate::jvmti::Jni;
use crate::sys;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// The stop request and the "has exited" flag, shared with the thread.
#[derive(Default)]
pub struct AgentThread {
    /// (stop requested, exited).
    state: Mutex<(bool, bool)>,
    wake: Condvar,
    started: AtomicBool,
}

/// The entry point the JVM runs the thread with; it gets the
/// `&'static Agent` as its argument and must call
/// [`AgentThread::exited`] when it leaves.
pub type Main = unsafe extern "C" fn(*mut sys::jvmtiEnv, *mut sys::JNIEnv, *mut std::ffi::c_void);

impl AgentThread {
    /// Starts the thread `name` running `main`. A thread that cannot be
    /// created is a counted problem, never fatal; `what` names it there.
    pub fn start(&self, agent: &'static Agent, jni: Jni, name: &CStr, what: &str, main: Main) {
        self.started.store(true, Ordering::Release);
        let thread = jni.new_thread(name);
        if thread.is_null() {
            agent
                .problems
                .capture(|| format!("cannot create the {what}'s java.lang.Thread"));
            self.exited();
            return;
        }
        let arg: *const Agent = agent;
        if let Err(e) = agent
            .jvmti
            .run_agent_thread(thread.get(), Some(main), arg.cast())
        {
            agent.problems.jvmti(e);
            self.exited();
        }
    }

    /// Asks the thread to stop and waits until it has left its loop, at
    /// most `timeout`. Returns at once when it was never started.
    pub fn stop(&self, timeout: Duration) {
        if !self.started.load(Ordering::Acquire) {
            return;
        }
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.0 = true;
        self.wake.notify_all();
        let deadline = Instant::now() + timeout;
        while !st.1 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            st = self
                .wake
                .wait_timeout(st, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The thread's last act: wakes a [`stop`](Self::stop) waiting for it.
    pub fn exited(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
        self.wake.notify_all();
    }

    /// On the thread: waits until `until` or a stop request; true when
    /// asked to stop.
    pub fn wait_until(&self, until: Instant) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if st.0 {
                return true;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            st = self
                .wake
                .wait_timeout(st, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn stop_wakes_a_waiting_thread_and_waits_for_its_exit() {
        let t = Arc::new(AgentThread::default());
        t.started.store(true, Ordering::Release);
        let t2 = Arc::clone(&t);
        let h = std::thread::spawn(move || {
            // Would wait an hour without the stop request.
            let stopped = t2.wait_until(Instant::now() + Duration::from_secs(3600));
            t2.exited();
            stopped
        });
        t.stop(Duration::from_secs(3600));
        assert!(t.state.lock().unwrap().1, "stop returned before the exit");
        assert!(h.join().unwrap(), "the wait did not report the stop");
    }

    #[test]
    fn a_thread_never_started_is_not_waited_for() {
        let t = AgentThread::default();
        t.stop(Duration::from_secs(3600));
        assert!(!t.state.lock().unwrap().0, "no stop request for no thread");
        assert!(!t.wait_until(Instant::now()));
    }
}
