//! Call capture by bytecode instrumentation (`mode=bci`).
//!
//! JVMTI method events cost 70–100× on call-heavy code because they force
//! the interpreter; a static call inserted into the method costs a few
//! nanoseconds once the JIT has compiled it. So at VMInit the agent defines
//! the probe class `vmview/Probe` in the bootstrap loader (where classes of
//! every loader find it) and binds its natives ([`super::probe_natives`]),
//! then turns on the ClassFileLoadHook: each trace class that loads from
//! then on is rewritten by [`vmview_classfile::instrument`] to call the
//! probe at entry, before each return and when an exception unwinds it.
//!
//! Trace classes already loaded when a recording starts (`vmview attach`,
//! or a second recording in the same JVM) are rewritten through
//! RetransformClasses, which runs the same hook on their original bytes;
//! a recording stopped by `vmview attach PID stop` retransforms them again
//! with the hook off, which gives them back their original code.
//!
//! What it does not see, by design (docs/OPTIONS.md lists it too):
//!
//! - the JDK's own boot classes;
//! - JDK classes (`java.`, `javax.`, `jdk.`, `sun.`, `com.sun.`): they live
//!   in named modules that cannot read the probe's unnamed module, so they
//!   are counted and left alone (`mode=jvmti` traces them);
//! - native and abstract methods, and hidden classes (lambda proxies),
//!   for which the JVM posts no ClassFileLoadHook;
//! - constructor code before the `super(...)`/`this(...)` call: a
//!   constructor's CALL comes once that call has returned.
//!
//! The method ids in the rewritten code are the trace's own [`MethodId`]s:
//! each method's symbol is defined while the class is rewritten, before any
//! event can use it. A class that fails to rewrite loads unchanged.

use super::probe_class::{self, PROBE_CLASS};
use super::probe_natives;
use super::CallCapture;
use crate::jvmti::Jni;
use crate::recording::{self, Recording};
use crate::sys;
use std::ffi::{c_char, c_uchar, CStr, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use vmview_classfile::{HookConfig, MethodInfo, SkipReason};
use vmview_format::{MethodId, MethodSymbol, StringId};
use vmview_options::EventGroup;

pub struct Bytecode;

impl CallCapture for Bytecode {
    fn name(&self) -> &'static str {
        "bytecode-instrumentation"
    }

    fn add_capabilities(&self, _caps: &mut sys::jvmtiCapabilities) {
        // The ClassFileLoadHook needs no capability for classes loaded in
        // the live phase, the only ones rewritten.
    }

    fn install_callbacks(&self, cb: &mut sys::jvmtiEventCallbacks) {
        cb.ClassFileLoadHook = Some(class_file_load_hook);
    }

    fn start(&self, agent: &'static Recording, jni: Jni) -> Result<(), String> {
        ensure_probe(agent, jni)?;
        agent
            .jvmti
            .set_event(true, sys::JVMTI_EVENT_CLASS_FILE_LOAD_HOOK)
            .map_err(|e| e.to_string())?;
        // Trace classes loaded before this recording (attach, or a second
        // recording): rewritten now, through the hook, with this
        // recording's method ids.
        if let Err(e) = retransform_traced(agent, jni) {
            agent.problems.capture(|| {
                format!(
                    "trace classes loaded before the recording started are not instrumented: {e}"
                )
            });
        }
        Ok(())
    }

    fn stop(&self, jvmti: crate::jvmti::Jvmti) {
        let _ = jvmti.set_event(false, sys::JVMTI_EVENT_CLASS_FILE_LOAD_HOOK);
    }
}

/// Whether the probe class exists and its natives are bound: once per
/// JVM, by the first recording that needs it.
static PROBE_DEFINED: AtomicBool = AtomicBool::new(false);

/// Defines the probe class and binds its natives, once per JVM (the
/// calibration calls the probe before the capture starts).
pub fn ensure_probe(_agent: &Recording, jni: Jni) -> Result<(), String> {
    if !PROBE_DEFINED.load(Ordering::Acquire) {
        define_probe(jni, PROBE_CLASS)?;
        PROBE_DEFINED.store(true, Ordering::Release);
    }
    Ok(())
}

fn define_probe(jni: Jni, probe: &str) -> Result<(), String> {
    let hooks: Vec<_> = vmview_classfile::probe::ALL
        .into_iter()
        .chain(vmview_classfile::probe::MONITORS)
        .collect();
    let bytes = probe_class::class_bytes(PROBE_CLASS, &hooks);
    let name = CString::new(probe).map_err(|e| e.to_string())?;
    let class = jni
        .define_boot_class(&name, &bytes)
        .ok_or_else(|| format!("cannot define the probe class {probe} in the bootstrap loader"))?;
    let implementations: Vec<(&str, &str, *mut std::ffi::c_void)> =
        probe_natives::implementations()
            .iter()
            .map(|(m, f)| (m.name, m.descriptor, *f))
            .collect();
    // The names must outlive RegisterNatives only.
    let names: Vec<(CString, CString)> = implementations
        .iter()
        .map(|(n, d, _)| {
            (
                CString::new(*n).unwrap_or_default(),
                CString::new(*d).unwrap_or_default(),
            )
        })
        .collect();
    let methods: Vec<sys::JNINativeMethod> = implementations
        .iter()
        .zip(&names)
        .map(|((_, _, f), (n, d))| sys::JNINativeMethod {
            name: n.as_ptr().cast_mut(),
            signature: d.as_ptr().cast_mut(),
            fnPtr: *f,
        })
        .collect();
    if !jni.register_natives(class.get(), &methods) {
        return Err(format!("cannot register the natives of {probe}"));
    }
    crate::budget::install_counters(jni, class.get());
    Ok(())
}

/// Reruns the class-file hook on every loaded trace class of `agent`'s
/// `classes=`: with the hook enabled and the recording live, they are
/// instrumented for it; after [`CallCapture::stop`] disabled the hook,
/// they get their original code back. Returns how many were retransformed.
pub fn retransform_traced(agent: &Recording, jni: Jni) -> Result<usize, String> {
    if agent.options.classes.is_empty() {
        return Ok(0);
    }
    let jvmti = agent.jvmti;
    jni.with_local_frame(MAX_JNI_LOCAL_CAPACITY, || {
        let loaded = jvmti.loaded_classes(jni).map_err(|e| e.to_string())?;
        let mut traced = Vec::new();
        for class in &loaded {
            let Ok(sig) = jvmti.class_signature(class.get()) else {
                continue;
            };
            // Only plain class names (`Lshop/Inventory;`), not arrays or
            // hidden classes (`Lfx/Main$$Lambda.0x…;`, not modifiable).
            let Some(internal) = sig.strip_prefix('L').and_then(|s| s.strip_suffix(';')) else {
                continue;
            };
            if internal.starts_with("vmview/")
                || JDK_PACKAGES.iter().any(|p| internal.starts_with(p))
            {
                continue;
            }
            if agent.options.is_traced_class(&internal.replace('/', "."))
                && jvmti.is_modifiable_class(class.get())
            {
                traced.push(class.get());
            }
        }
        if traced.is_empty() {
            return Ok(0);
        }
        if jvmti.retransform_classes(&traced).is_ok() {
            return Ok(traced.len());
        }
        // One class the JVM refuses fails the whole batch: one at a time,
        // the others still go through.
        let mut done = 0;
        let mut first_error = None;
        for c in &traced {
            match jvmti.retransform_classes(std::slice::from_ref(c)) {
                Ok(()) => done += 1,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match (done, first_error) {
            (0, Some(e)) => Err(e.to_string()),
            _ => Ok(done),
        }
    })
}

/// HotSpot's default `-XX:MaxJNILocalCapacity`: one reference per loaded
/// class arrives at once.
const MAX_JNI_LOCAL_CAPACITY: i32 = 65_536;

/// Packages of the JDK's named modules, by internal-name prefix.
pub(crate) const JDK_PACKAGES: [&str; 5] = ["java/", "javax/", "jdk/", "sun/", "com/sun/"];

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn class_file_load_hook(
    _env: *mut sys::jvmtiEnv,
    _jni: *mut sys::JNIEnv,
    _class_being_redefined: sys::jclass,
    loader: sys::jobject,
    name: *const c_char,
    _protection_domain: sys::jobject,
    class_data_len: sys::jint,
    class_data: *const c_uchar,
    new_class_data_len: *mut sys::jint,
    new_class_data: *mut *mut c_uchar,
) {
    recording::guard("ClassFileLoadHook", || {
        let Some(agent) = recording::live() else {
            return;
        };
        // Hidden classes have no name. A retransformation (of a class
        // loaded before the recording) or a redefinition by a debugger
        // hands over the class's current original bytes: rewritten too.
        if name.is_null()
            || class_data.is_null()
            || class_data_len <= 0
            || new_class_data.is_null()
            || new_class_data_len.is_null()
        {
            return;
        }
        // SAFETY: the JVM passes a NUL-terminated internal class name.
        let internal = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        if internal.starts_with("vmview/") {
            return;
        }
        let dotted = internal.replace('/', ".");
        // A class holding a handler chosen by `reactions` (and not traced
        // as a whole): only the handler methods are instrumented.
        let only = if agent.options.is_traced_class(&dotted) {
            None
        } else {
            match agent.reactions.methods_of(&dotted) {
                Some(methods) => Some(methods),
                None => return,
            }
        };
        // A javax/ handler the switch chose was checked to come from a
        // class loader of the class path (reactions::on_class_path).
        let chosen_javax = only.is_some() && internal.starts_with("javax/") && !loader.is_null();
        if JDK_PACKAGES.iter().any(|p| internal.starts_with(p)) && !chosen_javax {
            agent.problems.jdk_class(|| dotted.clone());
            return;
        }
        // SAFETY: the JVM passes `class_data_len` bytes of class data.
        let bytes = unsafe { std::slice::from_raw_parts(class_data, class_data_len as usize) };
        let Some(rewritten) = rewrite(agent, &dotted, bytes, only.as_deref()) else {
            return;
        };
        match agent.jvmti.allocate_copy(&rewritten) {
            Ok(p) => {
                // SAFETY: both out-pointers were checked non-null above; the
                // JVM frees the memory it allocated.
                unsafe {
                    *new_class_data_len = rewritten.len() as sys::jint;
                    *new_class_data = p;
                }
            }
            Err(e) => agent.problems.jvmti(e),
        }
    });
}

/// The instrumented class, or `None` (counted) when it stays as it was.
/// With `only`, just the methods listed (name, descriptor) are.
fn rewrite(
    agent: &Recording,
    dotted: &str,
    bytes: &[u8],
    only: Option<&[(String, String)]>,
) -> Option<Vec<u8>> {
    let config = HookConfig {
        probe_class: PROBE_CLASS.to_string(),
        capture_args: agent.options.args,
        // One or two integral arguments ride on the entry call itself
        // (`Probe.enter1`, `enter2`): no JNI call per argument.
        primitive_entry: true,
        // Always passed: with args=off the probe ignores it, and a typed
        // exit tells a non-void return from a void one.
        capture_return: true,
        monitors: agent.options.events.contains(EventGroup::Monitors),
    };
    let class = agent.symbols.string(dotted);
    let mut next_hooks = |m: &MethodInfo| {
        let wanted = only.is_none_or(|o| {
            o.iter()
                .any(|(name, sig)| *name == m.name && *sig == m.descriptor)
        });
        // A method the overhead budget demoted gets a counter, or nothing.
        wanted
            .then(|| method_symbol(agent, class, m))
            .and_then(|id| crate::budget::hooks_for(agent, id))
    };
    let result = match vmview_classfile::instrument_with(bytes, &config, &mut next_hooks) {
        Ok(r) => r,
        Err(e) => {
            agent.problems.rewrite_failed(|| format!("{dotted}: {e}"));
            return None;
        }
    };
    for s in &result.skipped {
        let why = match &s.reason {
            SkipReason::Abstract | SkipReason::Native | SkipReason::EmptyFinalizer => continue,
            SkipReason::Declined => continue,
            SkipReason::NoCode => "no code".to_string(),
            SkipReason::TooLarge {
                instrumented_length,
                ..
            } => format!("instrumented code would be {instrumented_length} bytes, over 64 KiB"),
            SkipReason::ConstantPoolFull => "constant pool full".to_string(),
            SkipReason::Unsupported(what) => what.clone(),
        };
        agent
            .problems
            .method_skipped(|| format!("{dotted}.{}{}: {why}", s.method.name, s.method.descriptor));
    }
    result.bytes().map(<[u8]>::to_vec)
}

/// Defines the symbol of a method about to be instrumented and returns its
/// handle, which the rewritten code passes to the probe.
fn method_symbol(agent: &Recording, class: StringId, m: &MethodInfo) -> MethodId {
    let s = &agent.symbols;
    let (name, sig) = (s.string(&m.name), s.string(&m.descriptor));
    let param_names = m.parameter_names.iter().map(|p| s.string(p)).collect();
    s.method_named(class, name, sig, |id| MethodSymbol {
        id,
        class,
        name,
        sig,
        param_names,
        modifiers: m.access,
    })
}
