//! The one walk over the symbol handles an event names.
//!
//! Whatever renumbers or collects symbols — `vmview merge` (each source's
//! handles renumbered into the merged trace), the subset writer of `vmview
//! filter` (the symbols a selected event needs, defined in the output) —
//! goes through [`map_handles`], the single exhaustive match over
//! [`EventKind`] that reaches every `StringId`, `MethodId`, `ThreadRef` and
//! `StackId` in an event, values and monitors included. A new event kind
//! with a handle is a compile error here, and only here.

use crate::{Event, EventKind, MethodId, Monitor, Outcome, StackId, StringId, ThreadRef, Value};

/// What to do with each handle: return the handle to put in its place (the
/// same one to only look at it).
pub trait HandleMap {
    fn string(&mut self, id: StringId) -> StringId;
    fn method(&mut self, id: MethodId) -> MethodId;
    fn thread(&mut self, id: ThreadRef) -> ThreadRef;
    fn stack(&mut self, id: StackId) -> StackId;
}

/// Maps the event's thread, then every handle of its kind, in place.
pub fn map_event(ev: &mut Event, m: &mut impl HandleMap) {
    ev.thread = m.thread(ev.thread);
    map_handles(&mut ev.kind, m);
}

/// Maps every handle of `kind` in place, in field order.
pub fn map_handles(kind: &mut EventKind, m: &mut impl HandleMap) {
    match kind {
        EventKind::ThreadStart
        | EventKind::ThreadEnd
        | EventKind::GcStart
        | EventKind::GcFinish { .. }
        | EventKind::Dropped { .. }
        | EventKind::TraceWindow { .. }
        | EventKind::PeriodEnd { .. }
        | EventKind::Calibration { .. } => {}
        EventKind::ClassLoad {
            class,
            loader,
            source,
        } => {
            *class = m.string(*class);
            *loader = m.string(*loader);
            *source = m.string(*source);
        }
        EventKind::Call {
            method,
            caller,
            params,
            ..
        } => {
            *method = m.method(*method);
            if let Some((c, _)) = caller {
                *c = m.method(*c);
            }
            for v in params {
                map_value(v, m);
            }
        }
        EventKind::Return {
            method, outcome, ..
        } => {
            *method = m.method(*method);
            match outcome {
                Outcome::Void => {}
                Outcome::Value(v) => map_value(v, m),
                Outcome::Exception { class } => *class = m.string(*class),
            }
        }
        EventKind::Throw {
            exception,
            method,
            catch,
            ..
        } => {
            *exception = m.string(*exception);
            *method = m.method(*method);
            if let Some((c, _)) = catch {
                *c = m.method(*c);
            }
        }
        EventKind::Catch {
            exception, method, ..
        } => {
            *exception = m.string(*exception);
            *method = m.method(*method);
        }
        EventKind::MonitorContendedEnter { monitor, owner } => {
            map_monitor(monitor, m);
            if let Some(o) = owner {
                *o = m.thread(*o);
            }
        }
        EventKind::MonitorContendedEntered { monitor, .. }
        | EventKind::MonitorWait { monitor, .. }
        | EventKind::MonitorWaited { monitor, .. }
        | EventKind::MonitorEnter { monitor, .. }
        | EventKind::MonitorExit { monitor, .. } => map_monitor(monitor, m),
        EventKind::Sample {
            stack, monitors, ..
        } => {
            *stack = m.stack(*stack);
            for (mon, _) in monitors {
                map_monitor(mon, m);
            }
        }
        EventKind::PeriodStart { stack, .. } | EventKind::VthreadPinned { stack, .. } => {
            *stack = m.stack(*stack)
        }
        EventKind::AllocSample { class, stack, .. } => {
            *class = m.string(*class);
            *stack = m.stack(*stack);
        }
        EventKind::Bytecode { method, insn, .. } => {
            *method = m.method(*method);
            *insn = m.string(*insn);
        }
        EventKind::ReactionHandlers {
            handlers, skipped, ..
        } => {
            for h in handlers.iter_mut().chain(skipped.iter_mut()) {
                *h = m.method(*h);
            }
        }
        EventKind::Foreign { name, fields } => {
            *name = m.string(*name);
            for (key, _) in fields {
                *key = m.string(*key);
            }
        }
        EventKind::Demotion { method, .. } => *method = m.method(*method),
        EventKind::MethodCounts { counts, .. } => {
            for (h, _) in counts {
                *h = m.method(*h);
            }
        }
    }
}

fn map_monitor(mon: &mut Monitor, m: &mut impl HandleMap) {
    mon.class = m.string(mon.class);
}

/// Maps the class handles inside a captured value.
pub fn map_value(v: &mut Value, m: &mut impl HandleMap) {
    match v {
        Value::Boxed { class, value } => {
            *class = m.string(*class);
            map_value(value, m);
        }
        Value::Array { class, .. } | Value::Object { class, .. } => *class = m.string(*class),
        Value::Null
        | Value::Boolean(_)
        | Value::Byte(_)
        | Value::Char(_)
        | Value::Short(_)
        | Value::Int(_)
        | Value::Long(_)
        | Value::Float(_)
        | Value::Double(_)
        | Value::Str { .. }
        | Value::Unavailable => {}
    }
}
