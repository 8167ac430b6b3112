//! The jmethodID cache: for every method the JVM reports, whether it is
//! traced, how to read its parameters, and (lazily) its symbol and line
//! table.
//!
//! Method events arrive for every method of every thread, so the common
//! question "is this method traced?" must be a hash lookup: an uncached
//! class-name check adds ~110 ns per event. Each thread keeps its own map
//! in front of the shared one, so the hot path takes no lock at all.
//! jmethodIDs are never reused by HotSpot (a method of an unloaded class
//! keeps its id), so entries never go stale.

use crate::classes;
use crate::jvmti::Jni;
use crate::recording::Recording;
use crate::sys;
use crate::threads::with_state;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, OnceLock, RwLock};
use vmview_format::{Loc, MethodId, MethodSymbol, StringId};
use vmview_options::{CaptureMode, EventGroup};

/// The JVM's `ACC_STATIC` and `ACC_NATIVE` modifier bits.
const ACC_STATIC: i32 = 0x0008;
const ACC_NATIVE: i32 = 0x0100;

/// A parameter: its descriptor type code (`I`, `J`, `L` for any reference
/// …) and its local variable slot at method entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    pub ty: u8,
    pub slot: i32,
}

/// What the agent keeps per jmethodID.
pub struct MethodInfo {
    pub traced: bool,
    pub native: bool,
    /// Parameters (`this` excluded); filled for traced methods only.
    pub params: Box<[Param]>,
    /// Return type code (`V` for void, `L` for any reference).
    pub ret: u8,
    symbol: OnceLock<MethodId>,
    lines: OnceLock<Box<[(i64, u32)]>>,
    /// Where the probe's catch-all handler starts, in an instrumented
    /// method (bci mode).
    probe_handler: OnceLock<Option<i64>>,
    /// The method's instructions as (offset, text) for BYTECODE events,
    /// sorted by offset; disassembled on the first single step into it.
    pub instructions: OnceLock<Box<[(u32, StringId)]>>,
}

impl MethodInfo {
    /// The method's symbol, defined on first use (always set for traced
    /// methods).
    pub fn symbol(&self, agent: &Recording, jni: Jni, method: sys::jmethodID) -> MethodId {
        *self
            .symbol
            .get_or_init(|| define_symbol(agent, jni, method, &self.params))
    }

    /// Whether `bci` lies in the catch-all handler the bytecode rewriter
    /// appended to this method (`at_start`: is its first instruction, the
    /// catch site it reports). Only trace-class methods in bci mode have
    /// one; the answer is cached.
    pub fn in_probe_handler(
        &self,
        agent: &Recording,
        method: sys::jmethodID,
        bci: i64,
        at_start: bool,
    ) -> bool {
        if !self.traced || self.native || !instruments_classes(agent) {
            return false;
        }
        let start = *self
            .probe_handler
            .get_or_init(|| match agent.jvmti.bytecodes(method) {
                Ok(code) => probe_handler_start(&code),
                Err(e) => {
                    agent.problems.jvmti(e);
                    None
                }
            });
        match start {
            Some(h) if at_start => bci == h,
            Some(h) => bci >= h,
            None => false,
        }
    }

    /// The source line of a bytecode index, from the cached line table.
    pub fn loc(&self, agent: &Recording, method: sys::jmethodID, bci: i64) -> Loc {
        let lines = self
            .lines
            .get_or_init(|| match agent.jvmti.line_number_table(method) {
                Ok(mut t) => {
                    t.sort_unstable();
                    t.into_boxed_slice()
                }
                Err(e) => {
                    agent.problems.jvmti(e);
                    Box::default()
                }
            });
        let i = lines.partition_point(|(start, _)| *start <= bci);
        Loc {
            bci: i32::try_from(bci).unwrap_or(-1),
            line: (bci >= 0 && i > 0).then(|| lines[i - 1].1),
        }
    }
}

/// The method's cache entry: this thread's map first, then the shared one.
pub fn lookup(
    agent: &Recording,
    jni: Jni,
    thread: sys::jthread,
    method: sys::jmethodID,
) -> Option<Arc<MethodInfo>> {
    let key = method as usize;
    if let Some(m) = with_state(agent, Some((jni, thread)), |s| s.methods.get(&key).cloned())? {
        return Some(m);
    }
    let m = agent.methods.get(agent, jni, method);
    with_state(agent, Some((jni, thread)), |s| {
        s.methods.insert(key, m.clone())
    });
    Some(m)
}

/// A fast hasher for pointer-sized keys (jmethodIDs).
#[derive(Default)]
pub struct PtrHasher(u64);

impl Hasher for PtrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64 ^ (n as u64 >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

pub type PtrMap<V> = HashMap<usize, V, BuildHasherDefault<PtrHasher>>;

/// The shared jmethodID → [`MethodInfo`] map.
#[derive(Default)]
pub struct MethodCache {
    map: RwLock<PtrMap<Arc<MethodInfo>>>,
}

impl MethodCache {
    /// The method's info, computed on first sight.
    pub fn get(&self, agent: &Recording, jni: Jni, method: sys::jmethodID) -> Arc<MethodInfo> {
        let key = method as usize;
        if let Some(m) = self.map.read().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return m.clone();
        }
        // Computed outside the lock: it calls into the JVM. Two threads may
        // both compute it; the first insert wins.
        let info = Arc::new(compute(agent, jni, method));
        self.map
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_insert(info)
            .clone()
    }
}

fn compute(agent: &Recording, jni: Jni, method: sys::jmethodID) -> MethodInfo {
    let j = agent.jvmti;
    let (sig, modifiers) = match (j.method_name(method), j.method_modifiers(method)) {
        (Ok((_, sig)), Ok(m)) => (sig, m),
        (Err(e), _) | (_, Err(e)) => {
            agent.problems.jvmti(e);
            (String::from("()V"), 0)
        }
    };
    let (types, ret) = parse_descriptor(&sig);
    let traced = match j
        .method_declaring_class(jni, method)
        .and_then(|class| classes::facts(agent, class.get(), false))
    {
        Ok(f) => f.traced,
        Err(e) => {
            agent.problems.jvmti(e);
            false
        }
    };
    let info = MethodInfo {
        traced,
        native: modifiers & ACC_NATIVE != 0,
        params: if traced {
            param_slots(&types, modifiers & ACC_STATIC != 0).into_boxed_slice()
        } else {
            Box::default()
        },
        ret,
        symbol: OnceLock::new(),
        lines: OnceLock::new(),
        probe_handler: OnceLock::new(),
        instructions: OnceLock::new(),
    };
    if traced {
        info.symbol(agent, jni, method);
    }
    info
}

fn define_symbol(
    agent: &Recording,
    jni: Jni,
    method: sys::jmethodID,
    params: &[Param],
) -> MethodId {
    let s = &agent.symbols;
    let class = agent
        .jvmti
        .method_declaring_class(jni, method)
        .map(|c| classes::name(agent, c.get()))
        .unwrap_or_else(|_| s.string("?"));
    let modifiers = agent.jvmti.method_modifiers(method).unwrap_or(0);
    let (name, sig) = agent
        .jvmti
        .method_name(method)
        .unwrap_or_else(|_| ("?".to_string(), "()V".to_string()));
    let params = if params.is_empty() {
        // An untraced method: its parameters were not worked out yet.
        param_slots(&parse_descriptor(&sig).0, modifiers & ACC_STATIC != 0)
    } else {
        params.to_vec()
    };
    let param_names = param_names(agent, method, &params);
    let (name, sig) = (s.string(&name), s.string(&sig));
    s.method_named(class, name, sig, |id| MethodSymbol {
        id,
        class,
        name,
        sig,
        param_names,
        modifiers: modifiers as u16,
    })
}

/// Names from the LocalVariableTable (entries live from bci 0 in a
/// parameter's slot), else `arg0`, `arg1` ….
fn param_names(agent: &Recording, method: sys::jmethodID, params: &[Param]) -> Vec<StringId> {
    let table = agent.jvmti.local_variable_table(method).unwrap_or_default();
    params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let name = table
                .iter()
                .find(|v| v.slot == p.slot && v.start == 0)
                .map(|v| v.name.clone())
                .unwrap_or_else(|| format!("arg{i}"));
            agent.symbols.string(&name)
        })
        .collect()
}

/// Whether trace classes are rewritten: bci mode with calls recorded.
fn instruments_classes(agent: &Recording) -> bool {
    let o = &agent.options;
    o.mode == CaptureMode::Bci && o.events.contains(EventGroup::Calls) && !o.classes.is_empty()
}

/// The start of the probe's catch-all handler at the end of `code`:
/// `dup; <push id>; invokestatic Probe.exitThrow; athrow`, where the id is
/// pushed with `iconst_*`, `bipush`, `sipush`, `ldc` or `ldc_w`.
fn probe_handler_start(code: &[u8]) -> Option<i64> {
    const DUP: u8 = 0x59;
    const INVOKESTATIC: u8 = 0xb8;
    const ATHROW: u8 = 0xbf;
    let n = code.len();
    if n < 6 || code[n - 1] != ATHROW || code[n - 4] != INVOKESTATIC {
        return None;
    }
    let push = n - 4;
    [1usize, 2, 3].into_iter().find_map(|len| {
        let op = *code.get(push.checked_sub(len)?)?;
        let fits = match len {
            1 => (0x02..=0x08).contains(&op),
            2 => op == 0x10 || op == 0x12,
            _ => op == 0x11 || op == 0x13,
        };
        let start = push.checked_sub(len + 1)?;
        (fits && code[start] == DUP).then_some(start as i64)
    })
}

/// Parameter type codes and the return type code of a method descriptor;
/// every reference type (object or array) is `L`.
pub fn parse_descriptor(desc: &str) -> (Vec<u8>, u8) {
    let b = desc.as_bytes();
    let mut types = Vec::new();
    let mut i = usize::from(b.first() == Some(&b'('));
    let mut ret = b'V';
    let mut in_params = true;
    while i < b.len() {
        let start = i;
        while i < b.len() && b[i] == b'[' {
            i += 1;
        }
        let Some(&c) = b.get(i) else { break };
        if c == b')' {
            in_params = false;
            i += 1;
            continue;
        }
        if c == b'L' {
            while i < b.len() && b[i] != b';' {
                i += 1;
            }
        }
        i += 1;
        let code = if c == b'L' || i - start > 1 { b'L' } else { c };
        if in_params {
            types.push(code);
        } else {
            ret = code;
            break;
        }
    }
    (types, ret)
}

/// Slots of the parameters at method entry: `this` takes slot 0 of an
/// instance method, `long` and `double` take two slots.
pub fn param_slots(types: &[u8], is_static: bool) -> Vec<Param> {
    let mut slot = i32::from(!is_static);
    types
        .iter()
        .map(|&ty| {
            let p = Param { ty, slot };
            slot += if ty == b'J' || ty == b'D' { 2 } else { 1 };
            p
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_handlers_are_found_at_the_end_of_the_code() {
        // ... iload_0; ireturn | dup; sipush 300; invokestatic #9; athrow
        let code = [0x1a, 0xac, 0x59, 0x11, 0x01, 0x2c, 0xb8, 0x00, 0x09, 0xbf];
        assert_eq!(probe_handler_start(&code), Some(2));
        let code = [0x1a, 0xac, 0x59, 0x04, 0xb8, 0x00, 0x09, 0xbf];
        assert_eq!(probe_handler_start(&code), Some(2));
        let code = [0x2a, 0x59, 0x12, 0x07, 0xb8, 0x00, 0x09, 0xbf];
        assert_eq!(probe_handler_start(&code), Some(1));
        // A plain rethrow is not one.
        assert_eq!(probe_handler_start(&[0x2b, 0xbf]), None);
        assert_eq!(
            probe_handler_start(&[0x1a, 0x1a, 0x1a, 0xb8, 0x00, 0x09, 0xbf]),
            None
        );
    }

    #[test]
    fn descriptors_give_parameter_types_and_slots() {
        let (t, r) =
            parse_descriptor("(IJDZCLjava/lang/String;Ljava/lang/String;[ILjava/lang/Object;)I");
        assert_eq!(t, b"IJDZCLLLL");
        assert_eq!(r, b'I');
        let slots: Vec<i32> = param_slots(&t, true).iter().map(|p| p.slot).collect();
        assert_eq!(slots, [0, 1, 3, 5, 6, 7, 8, 9, 10]);
        let slots: Vec<i32> = param_slots(&t, false).iter().map(|p| p.slot).collect();
        assert_eq!(slots[0], 1, "this takes slot 0");
        assert_eq!(parse_descriptor("()V"), (vec![], b'V'));
        assert_eq!(
            parse_descriptor("([[J)[Ljava/lang/String;"),
            (vec![b'L'], b'L')
        );
    }
}
