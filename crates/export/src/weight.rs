//! What a sampled stack weighs: `--weight samples|cpu|wall|alloc|lock`,
//! shared by the flame-graph, speedscope, Chrome and `calltree` outputs so
//! that one weight means the same thing in all of them.
//!
//! A trace holds up to three kinds of weighed stacks: SAMPLE events (wall
//! or CPU samples, as the header's `sampler` property says), ALLOC_SAMPLE
//! events (bytes) and contended monitor enters (MONITOR_CONTENDED_ENTERED,
//! the time waited). A [`Weigher`] turns each event into the stack and the
//! weight it contributes, and knows which recording option would have
//! given a weight the trace lacks, so a wrong `--weight` is a clear error
//! instead of an empty flame graph.
//!
//! The agent records no stack with a contended enter: a lock weight goes
//! to the waiting thread's traced call path at that moment (the CALLs
//! still open on it, `events=calls`), under a last frame
//! `[blocked on CLASS]` naming the monitor's class; with no traced call
//! open, to that frame alone.

use std::fmt;

use vmview_format::{Event, EventKind, StackId, StringId, ThreadState, TraceHeader};

/// What a weighed stack's number counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SampleWeight {
    /// Every SAMPLE, one each (wall or CPU samples, as the trace's
    /// `sampler` says).
    Samples,
    /// CPU samples: every SAMPLE of a `sampler=cpu` trace, else the wall
    /// samples whose thread was RUN.
    Cpu,
    /// Wall-clock samples, every state (not a `sampler=cpu` trace).
    Wall,
    /// Bytes of ALLOC_SAMPLE events.
    Alloc,
    /// Nanoseconds waited to enter a contended monitor.
    Lock,
}

impl SampleWeight {
    /// The `--weight` value.
    pub fn name(self) -> &'static str {
        match self {
            SampleWeight::Samples => "samples",
            SampleWeight::Cpu => "cpu",
            SampleWeight::Wall => "wall",
            SampleWeight::Alloc => "alloc",
            SampleWeight::Lock => "lock",
        }
    }

    /// The unit of the weight, for viewers that show one.
    pub fn unit(self) -> &'static str {
        match self {
            SampleWeight::Samples | SampleWeight::Cpu | SampleWeight::Wall => "samples",
            SampleWeight::Alloc => "bytes",
            SampleWeight::Lock => "nanoseconds",
        }
    }
}

/// A weight the trace cannot give, and how to record one that can.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightError {
    /// What is missing, as a sentence.
    pub problem: String,
    /// The recording option (or other `--weight`) that gives it.
    pub hint: String,
}

impl fmt::Display for WeightError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.problem, self.hint)
    }
}

impl std::error::Error for WeightError {}

impl WeightError {
    /// As an I/O error, for [`crate::EventWriter::finish`]; the CLI finds it
    /// again with [`WeightError::of`].
    pub fn into_io(self) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, self)
    }

    /// The weight error inside an I/O error, if that is what it is.
    pub fn of(e: &std::io::Error) -> Option<&WeightError> {
        e.get_ref().and_then(|inner| inner.downcast_ref())
    }
}

/// One event's contribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weighed {
    /// A sampled stack (SAMPLE, ALLOC_SAMPLE) and its weight.
    Stack { stack: StackId, weight: u64 },
    /// A contended monitor enter: the waiting thread's call path (the
    /// caller's to find), then the monitor's class, weighing `wait_ns`.
    Lock { class: StringId, wait_ns: u64 },
}

/// Picks the events of one weight out of a stream and checks at the end
/// that the trace had some.
#[derive(Debug, Clone)]
pub struct Weigher {
    weight: SampleWeight,
    cpu_sampler: bool,
    /// SAMPLE events seen, and of those RUN ones.
    samples: u64,
    run_samples: u64,
    allocs: u64,
    entered: u64,
}

/// The value of a header property.
fn property<'h>(header: &'h TraceHeader, key: &str) -> Option<&'h str> {
    header
        .properties
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

impl Weigher {
    /// A weigher for a trace with this header. Fails at once when the
    /// header already says the weight cannot be had (`wall` of a
    /// `sampler=cpu` trace).
    pub fn new(weight: SampleWeight, header: &TraceHeader) -> Result<Weigher, WeightError> {
        let cpu_sampler = property(header, "sampler") == Some("cpu");
        if weight == SampleWeight::Wall && cpu_sampler {
            return Err(WeightError {
                problem: "the trace's samples are CPU samples (sampler=cpu), not wall-clock ones"
                    .into(),
                hint: "use --weight cpu, or record with --sampler signal (the default) for wall samples"
                    .into(),
            });
        }
        Ok(Weigher {
            weight,
            cpu_sampler,
            samples: 0,
            run_samples: 0,
            allocs: 0,
            entered: 0,
        })
    }

    pub fn weight(&self) -> SampleWeight {
        self.weight
    }

    /// What `ev` adds to the weighed stacks, if anything.
    pub fn weigh(&mut self, ev: &Event) -> Option<Weighed> {
        match &ev.kind {
            EventKind::Sample { state, stack, .. } => {
                self.samples += 1;
                let run = *state == ThreadState::Run;
                self.run_samples += u64::from(run);
                let counted = match self.weight {
                    SampleWeight::Samples | SampleWeight::Wall => true,
                    SampleWeight::Cpu => self.cpu_sampler || run,
                    SampleWeight::Alloc | SampleWeight::Lock => false,
                };
                counted.then_some(Weighed::Stack {
                    stack: *stack,
                    weight: 1,
                })
            }
            EventKind::AllocSample { stack, size, .. } => {
                self.allocs += 1;
                (self.weight == SampleWeight::Alloc).then_some(Weighed::Stack {
                    stack: *stack,
                    weight: *size,
                })
            }
            EventKind::MonitorContendedEntered { monitor, wait_ns } => {
                self.entered += 1;
                (self.weight == SampleWeight::Lock).then_some(Weighed::Lock {
                    class: monitor.class,
                    wait_ns: *wait_ns,
                })
            }
            _ => None,
        }
    }

    /// After the last event: an error when the trace had nothing of this
    /// weight, saying which recording option gives it.
    pub fn check(&self) -> Result<(), WeightError> {
        let no_samples = || WeightError {
            problem: "the trace has no stack samples (SAMPLE events)".into(),
            hint: "record with --events samples (add it to the other events: calls+samples)".into(),
        };
        match self.weight {
            SampleWeight::Samples | SampleWeight::Wall if self.samples == 0 => Err(no_samples()),
            SampleWeight::Cpu if self.samples == 0 => Err(no_samples()),
            SampleWeight::Cpu if !self.cpu_sampler && self.run_samples == 0 => Err(WeightError {
                problem: format!(
                    "none of the trace's {} wall samples is of a running (RUN) thread",
                    self.samples
                ),
                hint: "record with --sampler cpu for CPU samples, or use --weight wall".into(),
            }),
            SampleWeight::Alloc if self.allocs == 0 => Err(WeightError {
                problem: "the trace has no allocation samples (ALLOC_SAMPLE events)".into(),
                hint: "record with --events alloc (or samples+alloc, calls+alloc)".into(),
            }),
            SampleWeight::Lock if self.entered == 0 => Err(WeightError {
                problem: "the trace has no contended monitor enter (MONITOR_CONTENDED_ENTERED events)"
                    .into(),
                hint: "record with --events locks (calls+locks attributes the waits to the traced call path); a recording with locks on and no contention has none"
                    .into(),
            }),
            _ => Ok(()),
        }
    }
}

/// The last frame of a lock weight's path: `[blocked on CLASS]`.
pub fn blocked_label(class: &str) -> String {
    format!("[blocked on {class}]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmview_format::{Monitor, ThreadRef};

    fn header(sampler: &str) -> TraceHeader {
        TraceHeader {
            version: 1,
            pid: 1,
            start_unix_ns: 0,
            properties: vec![("sampler".into(), sampler.into())],
        }
    }

    fn ev(kind: EventKind) -> Event {
        Event {
            id: 1,
            time_ns: 0,
            thread: ThreadRef(0),
            kind,
        }
    }

    fn sample(state: ThreadState) -> Event {
        ev(EventKind::Sample {
            state,
            stack: StackId(3),
            monitors: vec![],
        })
    }

    #[test]
    fn cpu_weight_of_wall_samples_takes_only_running_threads() {
        let mut w = Weigher::new(SampleWeight::Cpu, &header("signal")).unwrap();
        assert!(w.weigh(&sample(ThreadState::Wait)).is_none());
        assert_eq!(
            w.weigh(&sample(ThreadState::Run)),
            Some(Weighed::Stack {
                stack: StackId(3),
                weight: 1
            })
        );
        assert!(w.check().is_ok());
        let mut cpu = Weigher::new(SampleWeight::Cpu, &header("cpu")).unwrap();
        assert!(cpu.weigh(&sample(ThreadState::Wait)).is_some());
    }

    #[test]
    fn wall_weight_of_a_cpu_sampler_trace_is_refused_up_front() {
        let e = Weigher::new(SampleWeight::Wall, &header("cpu")).unwrap_err();
        assert!(e.hint.contains("--sampler signal"), "{e}");
    }

    #[test]
    fn a_weight_the_trace_lacks_names_the_recording_option() {
        for (weight, option) in [
            (SampleWeight::Samples, "--events samples"),
            (SampleWeight::Alloc, "--events alloc"),
            (SampleWeight::Lock, "--events locks"),
        ] {
            let mut w = Weigher::new(weight, &header("signal")).unwrap();
            w.weigh(&ev(EventKind::GcStart));
            let e = w.check().unwrap_err();
            assert!(e.hint.contains(option), "{weight:?}: {e}");
        }
        let mut w = Weigher::new(SampleWeight::Cpu, &header("signal")).unwrap();
        w.weigh(&sample(ThreadState::Sleep));
        assert!(w.check().unwrap_err().hint.contains("--sampler cpu"));
    }

    #[test]
    fn lock_weight_is_the_time_waited() {
        let mut w = Weigher::new(SampleWeight::Lock, &header("signal")).unwrap();
        let m = Monitor {
            class: StringId(7),
            hash: 1,
        };
        assert_eq!(
            w.weigh(&ev(EventKind::MonitorContendedEntered {
                monitor: m,
                wait_ns: 500
            })),
            Some(Weighed::Lock {
                class: StringId(7),
                wait_ns: 500
            })
        );
        assert!(w.weigh(&sample(ThreadState::Run)).is_none());
    }
}
