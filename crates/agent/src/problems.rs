//! What went wrong while recording, counted where it happens and reported
//! once, on stderr, when the agent stops.
//!
//! Callbacks must not print or panic, so a failed JVMTI call or a caught
//! panic is only counted here (with the first message of each kind kept for
//! the report). A write error is the exception: it comes from the writer
//! thread, a plain OS thread, which says it at once (a full disk is news
//! the user wants while the JVM still runs); the final report then adds how
//! many events were discarded after it.

use crate::jvmti::JvmtiError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

#[derive(Default)]
pub struct Problems {
    jvmti: Counter,
    panics: Counter,
    writer: Counter,
    /// Events discarded because writing had stopped, set when the writer
    /// ends.
    writer_lost: AtomicU64,
    capture: Counter,
    rewrite_failed: Counter,
    methods_skipped: Counter,
    jdk_classes: Counter,
    reentrant: AtomicU64,
    virtual_unrecorded: AtomicU64,
}

#[derive(Default)]
struct Counter {
    count: AtomicU64,
    first: OnceLock<String>,
}

impl Counter {
    fn add(&self, first: impl FnOnce() -> String) {
        if self.count.fetch_add(1, Ordering::Relaxed) == 0 {
            let _ = self.first.set(first());
        }
    }

    fn line(&self, what: &str, out: &mut Vec<String>) {
        let n = self.count.load(Ordering::Relaxed);
        if n > 0 {
            let first = self.first.get().map(String::as_str).unwrap_or("?");
            out.push(format!("{n} {what} (first: {first})"));
        }
    }
}

/// Prints one line on stderr, prefixed `vmview agent: `. Never panics
/// (unlike `eprintln!` when stderr is closed).
pub fn say(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "vmview agent: {message}");
}

/// The message of the first panic, set by the quiet panic hook.
static PANIC_MESSAGE: Mutex<Option<String>> = Mutex::new(None);

/// Replaces the default panic hook (which prints to the JVM's stderr) with
/// one that only remembers the first message for the final report.
pub fn install_quiet_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        if let Ok(mut m) = PANIC_MESSAGE.try_lock() {
            if m.is_none() {
                let loc = info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                let msg = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "panic".to_string());
                *m = Some(format!("{msg}{loc}"));
            }
        }
    }));
}

impl Problems {
    /// Counts a failed JVMTI call unless the caller expects that answer.
    pub fn jvmti(&self, e: JvmtiError) {
        if !e.is_expected() {
            self.jvmti.add(|| e.to_string());
        }
    }

    /// Counts a panic caught at the FFI boundary in `entry`.
    pub fn panic(&self, entry: &'static str) {
        self.panics.add(|| {
            let msg = PANIC_MESSAGE
                .try_lock()
                .ok()
                .and_then(|m| m.clone())
                .unwrap_or_else(|| "panic".to_string());
            format!("{entry}: {msg}")
        });
    }

    /// Records the write error that stopped the trace and, the first time
    /// (unless `quiet`), says it on stderr at once. Only the writer thread
    /// calls this: it is not a JVMTI callback, so it may print.
    pub fn writer_stopped(&self, message: &str, quiet: bool) {
        let mut first = false;
        self.writer.add(|| {
            first = true;
            message.to_string()
        });
        if first && !quiet {
            say(&format!(
                "cannot write the trace: {message}; recording stops here, the JVM runs on \
                 and the trace ends at its last complete chunk"
            ));
        }
    }

    /// How many events were discarded after the write error, known when
    /// the writer ends.
    pub fn writer_lost(&self, events: u64) {
        self.writer_lost.store(events, Ordering::Relaxed);
    }

    /// Counts a failure to set up call capture (the probe class could not
    /// be defined, say): no calls are recorded.
    pub fn capture(&self, message: impl FnOnce() -> String) {
        self.capture.add(message);
    }

    /// Counts a trace class left as it was because rewriting it failed.
    pub fn rewrite_failed(&self, message: impl FnOnce() -> String) {
        self.rewrite_failed.add(message);
    }

    /// Counts a method of a trace class that has code but was not
    /// instrumented (too large, unsupported shape).
    pub fn method_skipped(&self, message: impl FnOnce() -> String) {
        self.methods_skipped.add(message);
    }

    /// Counts a JDK class that `classes=` matched but bytecode
    /// instrumentation leaves alone.
    pub fn jdk_class(&self, message: impl FnOnce() -> String) {
        self.jdk_classes.add(message);
    }

    /// Counts an event skipped because a callback ran inside another one
    /// on the same thread.
    /// Counts an event of a virtual thread numbered past the handle
    /// bound (`threads::VIRTUAL_HANDLES`).
    pub fn virtual_unrecorded(&self) {
        self.virtual_unrecorded.fetch_add(1, Ordering::Relaxed);
    }

    pub fn reentrant(&self) {
        self.reentrant.fetch_add(1, Ordering::Relaxed);
    }

    /// The lines of the final report (empty when all went well).
    pub fn report(&self, dropped: u64, budget: u64) -> Vec<String> {
        let mut out = Vec::new();
        if dropped > 0 {
            out.push(format!(
                "{dropped} events dropped: more than buffer={} waited to be written (raise buffer= or trace fewer classes)",
                size_name(budget)
            ));
        }
        if self.writer.count.load(Ordering::Relaxed) > 0 {
            let lost = self.writer_lost.load(Ordering::Relaxed);
            out.push(format!(
                "{lost} events discarded after the trace write error (writing stopped there)"
            ));
        }
        self.capture.line(
            "failures to set up call capture, no calls recorded",
            &mut out,
        );
        self.rewrite_failed.line(
            "trace classes left uninstrumented after a rewrite error",
            &mut out,
        );
        self.methods_skipped
            .line("methods of trace classes not instrumented", &mut out);
        self.jdk_classes.line(
            "JDK classes matched by classes= not instrumented in mode=bci (use mode=jvmti to trace them)",
            &mut out,
        );
        self.jvmti.line("JVMTI calls failed", &mut out);
        self.panics.line("internal errors caught", &mut out);
        let v = self.virtual_unrecorded.load(Ordering::Relaxed);
        if v > 0 {
            out.push(format!(
                "{v} events of virtual threads not recorded: more than {} threads ran in this recording (a trace numbers at most that many)",
                crate::threads::VIRTUAL_HANDLES
            ));
        }
        let r = self.reentrant.load(Ordering::Relaxed);
        if r > 0 {
            out.push(format!("{r} nested callbacks skipped"));
        }
        out
    }
}

/// A byte count as an option value: `64m`, `512k`, `1000`.
fn size_name(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{}g", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}m", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}k", b >> 10),
        b => b.to_string(),
    }
}
