//! BYTECODE events (`events=bytecode`): JVMTI single-stepping, reported
//! for the methods of trace classes only.
//!
//! Single-stepping is enabled for every thread at VMInit, which puts the
//! JVM in interpreter-only mode; the JVM then posts SingleStep for every
//! instruction of every method. The callback first asks the jmethodID
//! cache (a per-thread hash map, no lock) whether the method is traced,
//! so an untraced instruction costs the JVM's event posting plus that
//! lookup. Enabling stepping only while a traced frame is on top
//! (MethodEntry/FramePop) would save the posting for untraced code, but
//! every toggle is a JVMTI call that recomputes the thread's
//! interpreter-only state; filtering in the callback is simpler and, with
//! the interpreter forced either way, the measured difference is what the
//! docs/PERFORMANCE.md reports.
//!
//! The instruction text comes from `crates/classfile`'s disassembler, run
//! once per method on `GetBytecodes` and `GetConstantPool`: those give the
//! running method's code and pool with consistent indices, for any class
//! however it was loaded (already loaded, hidden, redefined), and need no
//! copy of class bytes kept from the ClassFileLoadHook. Each distinct text
//! is interned once, so a BYTECODE event is a few varints.

use crate::clock;
use crate::jvmti::Jni;
use crate::methods::lookup;
use crate::recording::{self, Recording};
use crate::sys;
use crate::threads::with_state;
use vmview_format::{EventKind, StringId};

/// The JVMTI SingleStep callback.
pub unsafe extern "C" fn single_step(
    _jvmti: *mut sys::jvmtiEnv,
    jni: *mut sys::JNIEnv,
    thread: sys::jthread,
    method: sys::jmethodID,
    location: sys::jlocation,
) {
    recording::guard("SingleStep", || {
        let Some(agent) = recording::live() else {
            return;
        };
        // SAFETY: the JVM passes this thread's JNIEnv.
        let jni = unsafe { Jni::new(jni) };
        let Some(info) = lookup(agent, jni, thread, method) else {
            return;
        };
        if !info.traced {
            return;
        }
        let time = clock::now_ns();
        let Ok(bci) = u32::try_from(location) else {
            return;
        };
        let code = info
            .instructions
            .get_or_init(|| disassemble(agent, jni, method));
        let Ok(i) = code.binary_search_by_key(&bci, |&(offset, _)| offset) else {
            return;
        };
        let insn = code[i].1;
        let id = info.symbol(agent, jni, method);
        with_state(agent, Some((jni, thread)), |s| {
            s.emit(
                agent,
                time,
                EventKind::Bytecode {
                    method: id,
                    bci,
                    insn,
                },
            )
        });
    });
}

/// The method's instructions, their texts interned; empty when the code
/// or pool cannot be read (counted as a problem).
fn disassemble(agent: &Recording, jni: Jni, method: sys::jmethodID) -> Box<[(u32, StringId)]> {
    let j = agent.jvmti;
    let read = || -> Result<Vec<vmview_classfile::disasm::Instruction>, String> {
        let code = j.bytecodes(method).map_err(|e| e.to_string())?;
        let class = j
            .method_declaring_class(jni, method)
            .map_err(|e| e.to_string())?;
        let (count, pool) = j.constant_pool(class.get()).map_err(|e| e.to_string())?;
        vmview_classfile::disasm::disassemble(&code, count, &pool).map_err(|e| e.to_string())
    };
    match read() {
        Ok(insns) => insns
            .into_iter()
            .map(|i| (i.offset, agent.symbols.string(&i.text)))
            .collect(),
        Err(e) => {
            agent
                .problems
                .capture(|| format!("cannot disassemble a traced method for BYTECODE events: {e}"));
            Box::default()
        }
    }
}
