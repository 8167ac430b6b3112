//! Where the JIT's code and the interpreter's code lie, so that a signal
//! sample can say how its top frames ran (`FrameType` in the STACK record):
//! compiled, inlined into the compiled frame below, or interpreted.
//!
//! `AsyncGetCallTrace` gives each frame's method and bytecode index, not
//! how it ran. The signal handler keeps the interrupted pc (from the
//! ucontext) beside the walk; the sampler thread, when it drains the
//! ring, looks the pc up here:
//!
//! * **Compiled code.** JVMTI `CompiledMethodLoad` names each nmethod's
//!   code range and its root method (the method that was compiled; the
//!   methods inlined into it share its code), `CompiledMethodUnload` its
//!   end, and `GenerateEvents` replays the nmethods compiled before the
//!   recording. A pc inside a range: the frames from the top down to the
//!   first frame of the root method are the root's inlinees (`Inlined`),
//!   that frame `Compiled`. No frame of the root method among them (a
//!   range reused before its unload event came): nothing is marked.
//! * **The interpreter.** The template interpreter's code is one block,
//!   `AbstractInterpreter::_code` (a `StubQueue`, from `gHotSpotVMStructs`):
//!   a pc inside it makes the top frame `Interpreted`.
//! * Anything else (a pc in the VM, a runtime stub, a native library) and
//!   every frame below the top compiled or interpreted one stays unknown:
//!   the walk does not say where those frames' code lies.
//!
//! Why the lookup is not in the handler: the handler only stores one more
//! word, so it stays as simple as before (no shared table to read
//! lock-free, no snapshot to retire while a handler may hold it). The
//! price is a few milliseconds between the sample and the lookup, in which
//! an nmethod may be unloaded (its frames stay unknown) or its range
//! reused (caught by the root-method check above).
//!
//! Memory is bounded: one entry per live nmethod (the code cache holds at
//! most some tens of thousands), capped at [`MAX_ENTRIES`].

use crate::agent::Agent;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use vmview_format::FrameType;
use vmview_options::{AgentOptions, EventGroup, SamplerKind};

use crate::sys;

/// Far more nmethods than a code cache of 2 GB holds.
const MAX_ENTRIES: usize = 1 << 20;

/// A compiled code range: its end and root method.
#[derive(Clone, Copy)]
struct Code {
    end: usize,
    method: usize,
}

/// Code ranges by start address, while signal sampling is on.
static TABLE: Mutex<BTreeMap<usize, Code>> = Mutex::new(BTreeMap::new());
/// Whether the compiled-method events feed [`TABLE`].
static ON: AtomicBool = AtomicBool::new(false);
/// The interpreter's code, `[start, end)`, if the JVM exports where.
static INTERPRETER: OnceLock<Option<(usize, usize)>> = OnceLock::new();

fn table() -> std::sync::MutexGuard<'static, BTreeMap<usize, Code>> {
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the recording samples with signals (the only sampler whose
/// walks have a pc).
fn wanted(o: &AgentOptions) -> bool {
    o.events.contains(EventGroup::Samples) && o.sampler != SamplerKind::Safepoint
}

/// The capability of the compiled-method events (HotSpot grants it in
/// every phase).
pub fn add_capabilities(
    o: &AgentOptions,
    potential: Option<&sys::jvmtiCapabilities>,
    caps: &mut sys::jvmtiCapabilities,
) {
    if wanted(o) && potential.is_none_or(|p| p.can_generate_compiled_method_load_events() != 0) {
        caps.set_can_generate_compiled_method_load_events(1);
    }
}

pub fn install_callbacks(cb: &mut sys::jvmtiEventCallbacks) {
    cb.CompiledMethodLoad = Some(compiled_method_load);
    cb.CompiledMethodUnload = Some(compiled_method_unload);
}

/// Starts keeping the table (on the sampler thread, before signals are
/// sent): the events on, then the nmethods that exist already. A failure
/// leaves every frame's type unknown, and says so once.
pub fn start(agent: &Agent) {
    let _ = INTERPRETER.get_or_init(interpreter_range);
    table().clear();
    ON.store(true, Ordering::Release);
    let j = agent.jvmti;
    let r = (|| {
        j.set_event(true, sys::JVMTI_EVENT_COMPILED_METHOD_LOAD)?;
        j.set_event(true, sys::JVMTI_EVENT_COMPILED_METHOD_UNLOAD)?;
        j.generate_events(sys::JVMTI_EVENT_COMPILED_METHOD_LOAD)
    })();
    if let Err(e) = r {
        agent.problems.capture(|| {
            format!(
                "sampled frames are not typed compiled or inlined (compiled-method events: {e})"
            )
        });
    }
}

/// Stops keeping the table and empties it.
pub fn stop(agent: &Agent) {
    ON.store(false, Ordering::Release);
    let j = agent.jvmti;
    let _ = j.set_event(false, sys::JVMTI_EVENT_COMPILED_METHOD_LOAD);
    let _ = j.set_event(false, sys::JVMTI_EVENT_COMPILED_METHOD_UNLOAD);
    table().clear();
}

unsafe extern "C" fn compiled_method_load(
    _env: *mut sys::jvmtiEnv,
    method: sys::jmethodID,
    code_size: sys::jint,
    code_addr: *const c_void,
    _map_length: sys::jint,
    _map: *const sys::jvmtiAddrLocationMap,
    _compile_info: *const c_void,
) {
    crate::agent::guard("CompiledMethodLoad", || {
        if !ON.load(Ordering::Acquire) || code_addr.is_null() || code_size <= 0 {
            return;
        }
        let start = code_addr as usize;
        let mut t = table();
        if t.len() < MAX_ENTRIES || t.contains_key(&start) {
            t.insert(
                start,
                Code {
                    end: start.saturating_add(code_size as usize),
                    method: method as usize,
                },
            );
        }
    });
}

unsafe extern "C" fn compiled_method_unload(
    _env: *mut sys::jvmtiEnv,
    method: sys::jmethodID,
    code_addr: *const c_void,
) {
    crate::agent::guard("CompiledMethodUnload", || {
        let start = code_addr as usize;
        let mut t = table();
        // Only the entry of that method: the range may already hold the
        // code of a newer compile whose load came first.
        if t.get(&start).is_some_and(|c| c.method == method as usize) {
            t.remove(&start);
        }
    });
}

/// `AbstractInterpreter::_code`'s buffer: `StubQueue::_stub_buffer` and
/// `_buffer_limit` (its used size), from `gHotSpotVMStructs`.
fn interpreter_range() -> Option<(usize, usize)> {
    let table = crate::metrics::VmStructs::find()?;
    let code = table.static_address("AbstractInterpreter", "_code")?;
    let buffer_at = table.offset("StubQueue", "_stub_buffer")?;
    let limit_at = table.offset("StubQueue", "_buffer_limit")?;
    // SAFETY: `_code` is a static `StubQueue*`, set when the interpreter
    // was generated (before any agent runs Java code) and never freed;
    // `_stub_buffer` is an `address`, `_buffer_limit` an `int`.
    unsafe {
        let queue = (code as *const *const u8).read();
        if queue.is_null() {
            return None;
        }
        let start = (queue.add(buffer_at) as *const usize).read();
        let limit = (queue.add(limit_at) as *const i32).read();
        (start != 0 && limit > 0).then(|| (start, start + limit as usize))
    }
}

/// The types of a signal walk's frames (top first: `methods[i]` is frame
/// `i`'s jmethodID), from the interrupted `pc` (0: not known), with the
/// native frames (`native[i]`) already known from their methods. Empty
/// when no frame's type is known.
pub fn frame_types(pc: usize, methods: &[usize], native: &[bool]) -> Vec<FrameType> {
    let mut types: Vec<FrameType> = native
        .iter()
        .map(|&n| {
            if n {
                FrameType::Native
            } else {
                FrameType::Unknown
            }
        })
        .collect();
    if pc != 0 && !methods.is_empty() {
        let root = {
            let t = table();
            t.range(..=pc)
                .next_back()
                .filter(|(_, c)| pc < c.end)
                .map(|(_, c)| c.method)
        };
        if let Some(root) = root {
            mark_compiled(&mut types, methods, root);
        } else if INTERPRETER
            .get()
            .copied()
            .flatten()
            .is_some_and(|(start, end)| (start..end).contains(&pc))
            && types.first() == Some(&FrameType::Unknown)
        {
            types[0] = FrameType::Interpreted;
        }
    }
    if types.iter().all(|t| *t == FrameType::Unknown) {
        types.clear();
    }
    types
}

/// Marks the frames from the top down to the first of `root` inlined and
/// that one compiled; nothing when a native frame comes first or `root`
/// is not among them.
fn mark_compiled(types: &mut [FrameType], methods: &[usize], root: usize) {
    let Some(at) = methods.iter().position(|&m| m == root) else {
        return;
    };
    if types[..=at].contains(&FrameType::Native) {
        // A native method's compiled wrapper: the native frame says it.
        return;
    }
    for t in &mut types[..at] {
        *t = FrameType::Inlined;
    }
    types[at] = FrameType::Compiled;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_above_the_root_method_are_inlined_into_it() {
        let mut types = vec![FrameType::Unknown; 4];
        mark_compiled(&mut types, &[10, 11, 12, 13], 12);
        assert_eq!(
            types,
            [
                FrameType::Inlined,
                FrameType::Inlined,
                FrameType::Compiled,
                FrameType::Unknown
            ]
        );
    }

    #[test]
    fn a_root_method_missing_from_the_walk_marks_nothing() {
        let mut types = vec![FrameType::Unknown; 2];
        mark_compiled(&mut types, &[10, 11], 99);
        assert_eq!(types, [FrameType::Unknown, FrameType::Unknown]);
        let mut types = vec![FrameType::Native, FrameType::Unknown];
        mark_compiled(&mut types, &[10, 11], 11);
        assert_eq!(types, [FrameType::Native, FrameType::Unknown]);
    }

    #[test]
    fn a_walk_without_pc_only_knows_its_natives() {
        assert!(frame_types(0, &[1, 2], &[false, false]).is_empty());
        assert_eq!(
            frame_types(0, &[1, 2], &[true, false]),
            [FrameType::Native, FrameType::Unknown]
        );
    }
}
