//! Turning a stream of CALL/RETURN events into properly nested frames.
//!
//! Timeline formats (Chrome trace events, speedscope) and call-tree folds
//! (collapsed stacks, flame graphs) all need calls that nest: every frame
//! closes after its children and before its parent. A real trace does not
//! promise that. It may start or be cut in the middle of calls (a window,
//! a filter, a JVM killed with SIGKILL), lose events (DROPPED), and see
//! RETURNs whose CALL came before the trace started. [`CallMatcher`] is the
//! one place that repairs this, so every exporter tells the same story:
//!
//! - a RETURN closes the open frame of the same method at the same depth,
//!   after closing (as *cut off*) any frames still open above it;
//! - a RETURN with no such frame is ignored, but first closes open frames
//!   at its depth or deeper (they cannot outlive a return from below them);
//! - a CALL at depth `d` first closes open frames at depth `d` or deeper
//!   (their RETURNs were lost);
//! - THREAD_END closes all of its thread's open frames, and
//!   [`CallMatcher::finish`] closes what is left at the time of each
//!   thread's last event.
//!
//! Times are made monotonic per thread (an event never goes back before the
//! thread's previous one), so the nesting holds in time too.

use vmview_format::{Event, EventKind, MethodId, ThreadRef};

/// An open call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    pub method: MethodId,
    /// Depth from the stack base, as the CALL reported it.
    pub depth: u32,
    /// When it was entered (ns since trace start).
    pub start_ns: u64,
    /// Id of its CALL event.
    pub call_id: u64,
}

/// Why a frame was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// Its RETURN was seen.
    Returned,
    /// Its RETURN is not in the trace (lost, or after the end).
    CutOff,
}

/// What the matcher tells its consumer, always in properly nested order.
#[derive(Debug)]
pub enum Transition<'a> {
    /// `frame` was entered on `thread`; it is the top of the thread's stack.
    Open { thread: ThreadRef, frame: &'a Frame },
    /// The top frame of `thread` closed at `at_ns`.
    Close {
        thread: ThreadRef,
        frame: Frame,
        at_ns: u64,
        how: Closed,
        /// The RETURN event that closed it (`Returned` only).
        ret: Option<&'a Event>,
    },
}

#[derive(Default)]
struct ThreadCalls {
    stack: Vec<Frame>,
    last_ns: u64,
    seen: bool,
}

/// Per-thread call stacks of a trace being streamed.
#[derive(Default)]
pub struct CallMatcher {
    threads: Vec<ThreadCalls>,
    /// RETURNs that matched no open frame.
    pub unmatched_returns: u64,
    /// Frames closed without their RETURN.
    pub cut_off: u64,
}

impl CallMatcher {
    pub fn new() -> Self {
        Self::default()
    }

    /// The event's time, made monotonic for its thread. Call it for every
    /// event (also those the consumer does not otherwise use) before
    /// [`CallMatcher::event`], or let `event` do it.
    pub fn time_of(&mut self, ev: &Event) -> u64 {
        let t = self.thread_mut(ev.thread);
        t.seen = true;
        t.last_ns = t.last_ns.max(ev.time_ns);
        t.last_ns
    }

    /// The time of `thread`'s latest event so far.
    pub fn last_ns(&self, thread: ThreadRef) -> u64 {
        self.threads.get(thread.0 as usize).map_or(0, |t| t.last_ns)
    }

    /// Open frames of `thread`, outermost first.
    pub fn stack(&self, thread: ThreadRef) -> &[Frame] {
        self.threads
            .get(thread.0 as usize)
            .map_or(&[], |t| t.stack.as_slice())
    }

    fn thread_mut(&mut self, thread: ThreadRef) -> &mut ThreadCalls {
        let i = thread.0 as usize;
        if i >= self.threads.len() {
            self.threads.resize_with(i + 1, ThreadCalls::default);
        }
        &mut self.threads[i]
    }

    /// Feeds one event; `on` sees the frames it closes and opens, in order.
    /// Returns the event's (monotonic) time.
    pub fn event(&mut self, ev: &Event, mut on: impl FnMut(Transition<'_>)) -> u64 {
        let at = self.time_of(ev);
        let thread = ev.thread;
        match &ev.kind {
            EventKind::Call { method, depth, .. } => {
                self.close_from(thread, *depth, at, &mut on);
                let frame = Frame {
                    method: *method,
                    depth: *depth,
                    start_ns: at,
                    call_id: ev.id,
                };
                let t = self.thread_mut(thread);
                t.stack.push(frame);
                on(Transition::Open {
                    thread,
                    frame: t.stack.last().expect("just pushed"),
                });
            }
            EventKind::Return { method, depth, .. } => {
                self.close_from(thread, depth.saturating_add(1), at, &mut on);
                let t = self.thread_mut(thread);
                match t.stack.last() {
                    Some(top) if top.depth == *depth && top.method == *method => {
                        let frame = t.stack.pop().expect("non-empty");
                        on(Transition::Close {
                            thread,
                            frame,
                            at_ns: at,
                            how: Closed::Returned,
                            ret: Some(ev),
                        });
                    }
                    _ => {
                        // Another method at this depth cannot still be open
                        // once something at this depth returned.
                        self.close_from(thread, *depth, at, &mut on);
                        self.unmatched_returns += 1;
                    }
                }
            }
            EventKind::ThreadEnd => self.close_from(thread, 0, at, &mut on),
            _ => {}
        }
        at
    }

    /// Closes `thread`'s open frames at depth `depth` or deeper.
    fn close_from(
        &mut self,
        thread: ThreadRef,
        depth: u32,
        at: u64,
        on: &mut impl FnMut(Transition<'_>),
    ) {
        let Some(t) = self.threads.get_mut(thread.0 as usize) else {
            return;
        };
        while let Some(top) = t.stack.last() {
            if top.depth < depth {
                break;
            }
            let frame = t.stack.pop().expect("non-empty");
            self.cut_off += 1;
            on(Transition::Close {
                thread,
                frame,
                at_ns: at,
                how: Closed::CutOff,
                ret: None,
            });
        }
    }

    /// Closes every frame still open, at the time of its thread's last
    /// event, innermost first.
    pub fn finish(&mut self, mut on: impl FnMut(Transition<'_>)) {
        for i in 0..self.threads.len() {
            let at = self.threads[i].last_ns;
            self.close_from(ThreadRef(i as u32), 0, at, &mut on);
        }
    }

    /// Threads that emitted at least one event, in handle order.
    pub fn threads_seen(&self) -> impl Iterator<Item = ThreadRef> + '_ {
        self.threads
            .iter()
            .enumerate()
            .filter(|(_, t)| t.seen)
            .map(|(i, _)| ThreadRef(i as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmview_format::Outcome;

    fn call(id: u64, t: u64, m: u32, depth: u32) -> Event {
        Event {
            id,
            time_ns: t,
            thread: ThreadRef(0),
            kind: EventKind::Call {
                metrics: Default::default(),
                method: MethodId(m),
                depth,
                caller: None,
                params: vec![],
            },
        }
    }

    fn ret(id: u64, t: u64, m: u32, depth: u32) -> Event {
        Event {
            id,
            time_ns: t,
            thread: ThreadRef(0),
            kind: EventKind::Return {
                metrics: Default::default(),
                method: MethodId(m),
                depth,
                outcome: Outcome::Void,
                elapsed_ns: 0,
            },
        }
    }

    /// "+m@t" for opens, "-m@t" / "~m@t" for returned / cut-off closes.
    fn run(events: &[Event]) -> Vec<String> {
        let mut log = Vec::new();
        let mut m = CallMatcher::new();
        let mut rec = |tr: Transition<'_>| match tr {
            Transition::Open { frame, .. } => {
                log.push(format!("+{}@{}", frame.method.0, frame.start_ns))
            }
            Transition::Close {
                frame, at_ns, how, ..
            } => log.push(format!(
                "{}{}@{}",
                if how == Closed::Returned { "-" } else { "~" },
                frame.method.0,
                at_ns
            )),
        };
        for e in events {
            m.event(e, &mut rec);
        }
        m.finish(&mut rec);
        log
    }

    #[test]
    fn matched_calls_nest() {
        let log = run(&[
            call(1, 10, 1, 1),
            call(2, 20, 2, 2),
            ret(3, 30, 2, 2),
            ret(4, 40, 1, 1),
        ]);
        assert_eq!(log, ["+1@10", "+2@20", "-2@30", "-1@40"]);
    }

    #[test]
    fn return_without_call_is_ignored() {
        let log = run(&[ret(1, 5, 9, 3), call(2, 10, 1, 1), ret(3, 20, 1, 1)]);
        assert_eq!(log, ["+1@10", "-1@20"]);
    }

    #[test]
    fn lost_returns_are_closed_before_the_outer_return_and_at_the_end() {
        let log = run(&[
            call(1, 10, 1, 1),
            call(2, 20, 2, 2),
            call(3, 25, 3, 5),
            ret(4, 30, 1, 1),
            call(5, 40, 4, 1),
            call(6, 50, 5, 2),
        ]);
        assert_eq!(
            log,
            [
                "+1@10", "+2@20", "+3@25", "~3@30", "~2@30", "-1@30", "+4@40", "+5@50", "~5@50",
                "~4@50"
            ]
        );
    }

    #[test]
    fn a_call_at_an_open_depth_closes_the_frame_whose_return_was_lost() {
        let log = run(&[
            call(1, 10, 1, 1),
            call(2, 20, 2, 2),
            call(3, 30, 3, 2),
            ret(4, 40, 3, 2),
        ]);
        assert_eq!(log, ["+1@10", "+2@20", "~2@30", "+3@30", "-3@40", "~1@40"]);
    }

    #[test]
    fn time_never_goes_back_within_a_thread() {
        let log = run(&[call(1, 10, 1, 1), ret(2, 5, 1, 1)]);
        assert_eq!(log, ["+1@10", "-1@10"]);
    }
}
