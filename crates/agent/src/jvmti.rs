//! Thin wrappers over the JVMTI and JNI function tables.
//!
//! They exist so the rest of the agent never juggles raw out-pointers and
//! `Deallocate`: each wrapper returns owned Rust values (strings are copied
//! and the JVM's buffer freed at once) or a [`JvmtiError`]. JNI local
//! references that the agent creates come back as [`LocalRef`], which
//! deletes itself, so `-Xcheck:jni` never sees a leak.
//!
//! The environment pointers are only valid on the JVM's terms: a `Jvmti`
//! may be used from any thread while the VM is live; a `Jni` only on the
//! thread whose callback received it.

use crate::sys;
use std::ffi::{c_char, CStr, CString};
use std::ptr;

/// A failed JVMTI call: the function and the error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JvmtiError {
    pub function: &'static str,
    pub code: sys::jvmtiError,
}

impl JvmtiError {
    /// An answer the caller expects sometimes (no line table, native
    /// frame, VM shutting down), not a problem worth reporting.
    pub fn is_expected(&self) -> bool {
        matches!(
            self.code,
            sys::JVMTI_ERROR_ABSENT_INFORMATION
                | sys::JVMTI_ERROR_OPAQUE_FRAME
                | sys::JVMTI_ERROR_WRONG_PHASE
                | sys::JVMTI_ERROR_NATIVE_METHOD
                | sys::JVMTI_ERROR_THREAD_NOT_ALIVE
        )
    }

    pub fn code_name(&self) -> &'static str {
        match self.code {
            sys::JVMTI_ERROR_INVALID_THREAD => "INVALID_THREAD",
            sys::JVMTI_ERROR_INVALID_OBJECT => "INVALID_OBJECT",
            sys::JVMTI_ERROR_INVALID_CLASS => "INVALID_CLASS",
            sys::JVMTI_ERROR_INVALID_METHODID => "INVALID_METHODID",
            sys::JVMTI_ERROR_INVALID_SLOT => "INVALID_SLOT",
            sys::JVMTI_ERROR_TYPE_MISMATCH => "TYPE_MISMATCH",
            sys::JVMTI_ERROR_NO_MORE_FRAMES => "NO_MORE_FRAMES",
            sys::JVMTI_ERROR_OPAQUE_FRAME => "OPAQUE_FRAME",
            sys::JVMTI_ERROR_ABSENT_INFORMATION => "ABSENT_INFORMATION",
            sys::JVMTI_ERROR_NATIVE_METHOD => "NATIVE_METHOD",
            sys::JVMTI_ERROR_WRONG_PHASE => "WRONG_PHASE",
            sys::JVMTI_ERROR_MUST_POSSESS_CAPABILITY => "MUST_POSSESS_CAPABILITY",
            sys::JVMTI_ERROR_NOT_AVAILABLE => "NOT_AVAILABLE",
            sys::JVMTI_ERROR_OUT_OF_MEMORY => "OUT_OF_MEMORY",
            sys::JVMTI_ERROR_ILLEGAL_ARGUMENT => "ILLEGAL_ARGUMENT",
            sys::JVMTI_ERROR_NULL_POINTER => "NULL_POINTER",
            sys::JVMTI_ERROR_UNATTACHED_THREAD => "UNATTACHED_THREAD",
            sys::JVMTI_ERROR_THREAD_NOT_ALIVE => "THREAD_NOT_ALIVE",
            sys::JVMTI_ERROR_INTERNAL => "INTERNAL",
            _ => "OTHER",
        }
    }
}

impl std::fmt::Display for JvmtiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: JVMTI_ERROR_{} ({})",
            self.function,
            self.code_name(),
            self.code
        )
    }
}

pub type Result<T> = std::result::Result<T, JvmtiError>;

macro_rules! call {
    ($env:expr, $f:ident $(, $arg:expr)* $(,)?) => {{
        let env = $env;
        // SAFETY: `env` is a live jvmtiEnv* (see `Jvmti::new`); the function
        // table is never null for a live environment.
        let code = unsafe {
            match (**env).$f {
                Some(f) => f(env $(, $arg)*),
                None => sys::JVMTI_ERROR_NOT_AVAILABLE,
            }
        };
        if code == sys::JVMTI_ERROR_NONE {
            Ok(())
        } else {
            Err(JvmtiError { function: stringify!($f), code })
        }
    }};
}

/// A JVMTI environment. `Copy`, `Send` and `Sync`: JVMTI environments are
/// shared by all threads.
#[derive(Clone, Copy)]
pub struct Jvmti(*mut sys::jvmtiEnv);

// SAFETY: a jvmtiEnv may be used from any thread (JVMTI spec, "Environments").
unsafe impl Send for Jvmti {}
unsafe impl Sync for Jvmti {}

/// Thread information as [`Jvmti::thread_info`] returns it.
pub struct ThreadInfo {
    pub name: String,
    pub group: String,
    pub priority: i32,
    pub daemon: bool,
}

/// One row of a local variable table.
pub struct LocalVariable {
    pub start: i64,
    pub slot: i32,
    pub name: String,
}

impl Jvmti {
    /// # Safety
    /// `env` must be a valid jvmtiEnv* obtained from `GetEnv`.
    pub unsafe fn new(env: *mut sys::jvmtiEnv) -> Jvmti {
        Jvmti(env)
    }

    /// Copies a JVMTI-allocated C string and frees it.
    fn take_string(self, p: *mut c_char) -> String {
        if p.is_null() {
            return String::new();
        }
        // SAFETY: JVMTI hands back NUL-terminated modified UTF-8.
        let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
        self.deallocate(p);
        s
    }

    fn deallocate<T>(self, p: *mut T) {
        if !p.is_null() {
            let _ = call!(self.0, Deallocate, p.cast::<u8>());
        }
    }

    /// Copies `n` JVMTI-allocated items and frees the array.
    fn take_array<T: Copy>(self, p: *mut T, n: sys::jint) -> Vec<T> {
        if p.is_null() {
            return Vec::new();
        }
        // SAFETY: JVMTI returned an array of `n` initialised items.
        let v = unsafe { std::slice::from_raw_parts(p, n.max(0) as usize) }.to_vec();
        self.deallocate(p);
        v
    }

    pub fn version_number(self) -> Result<i32> {
        let mut v = 0;
        call!(self.0, GetVersionNumber, &mut v)?;
        Ok(v)
    }

    pub fn potential_capabilities(self) -> Result<sys::jvmtiCapabilities> {
        // SAFETY: jvmtiCapabilities is plain bits; all zero is valid.
        let mut caps: sys::jvmtiCapabilities = unsafe { std::mem::zeroed() };
        call!(self.0, GetPotentialCapabilities, &mut caps)?;
        Ok(caps)
    }

    /// The capabilities this environment holds.
    pub fn capabilities(self) -> Result<sys::jvmtiCapabilities> {
        // SAFETY: jvmtiCapabilities is plain bits; all zero is valid.
        let mut caps: sys::jvmtiCapabilities = unsafe { std::mem::zeroed() };
        call!(self.0, GetCapabilities, &mut caps)?;
        Ok(caps)
    }

    pub fn add_capabilities(self, caps: &sys::jvmtiCapabilities) -> Result<()> {
        call!(self.0, AddCapabilities, caps)
    }

    pub fn set_event_callbacks(self, cb: &sys::jvmtiEventCallbacks) -> Result<()> {
        call!(
            self.0,
            SetEventCallbacks,
            cb,
            std::mem::size_of::<sys::jvmtiEventCallbacks>() as sys::jint
        )
    }

    /// Replays the events of things that exist already (the nmethods of
    /// `JVMTI_EVENT_COMPILED_METHOD_LOAD`), to this environment's callback.
    pub fn generate_events(self, event: sys::jvmtiEvent) -> Result<()> {
        call!(self.0, GenerateEvents, event)
    }

    pub fn set_event(self, enable: bool, event: sys::jvmtiEvent) -> Result<()> {
        let mode = if enable {
            sys::JVMTI_ENABLE
        } else {
            sys::JVMTI_DISABLE
        };
        call!(
            self.0,
            SetEventNotificationMode,
            mode,
            event,
            ptr::null_mut()
        )
    }

    pub fn system_property(self, name: &str) -> Option<String> {
        let name = CString::new(name).ok()?;
        let mut value = ptr::null_mut();
        call!(self.0, GetSystemProperty, name.as_ptr(), &mut value).ok()?;
        Some(self.take_string(value))
    }

    /// The class's JVM signature, e.g. `Ljava/lang/String;` or `[I`.
    pub fn class_signature(self, class: sys::jclass) -> Result<String> {
        let mut sig = ptr::null_mut();
        call!(self.0, GetClassSignature, class, &mut sig, ptr::null_mut())?;
        Ok(self.take_string(sig))
    }

    pub fn class_status(self, class: sys::jclass) -> Result<i32> {
        let mut status = 0;
        call!(self.0, GetClassStatus, class, &mut status)?;
        Ok(status)
    }

    pub fn source_file_name(self, class: sys::jclass) -> Result<String> {
        let mut name = ptr::null_mut();
        call!(self.0, GetSourceFileName, class, &mut name)?;
        Ok(self.take_string(name))
    }

    /// The class's defining loader (a local reference; null for bootstrap).
    pub fn class_loader(self, jni: Jni, class: sys::jclass) -> Result<LocalRef> {
        let mut loader = ptr::null_mut();
        call!(self.0, GetClassLoader, class, &mut loader)?;
        Ok(LocalRef::new(jni, loader))
    }

    /// Every loaded class, as local references.
    pub fn loaded_classes(self, jni: Jni) -> Result<Vec<LocalRef>> {
        let mut n = 0;
        let mut classes = ptr::null_mut();
        call!(self.0, GetLoadedClasses, &mut n, &mut classes)?;
        Ok(self
            .take_array(classes, n)
            .into_iter()
            .map(|c| LocalRef::new(jni, c))
            .collect())
    }

    /// Whether RetransformClasses may change `class` (not an array, a
    /// primitive or a hidden class).
    pub fn is_modifiable_class(self, class: sys::jclass) -> bool {
        let mut b: sys::jboolean = 0;
        call!(self.0, IsModifiableClass, class, &mut b).is_ok() && b != 0
    }

    /// Reruns the ClassFileLoadHook of every retransformation-capable
    /// environment on `classes`, from their original bytes.
    pub fn retransform_classes(self, classes: &[sys::jclass]) -> Result<()> {
        if classes.is_empty() {
            return Ok(());
        }
        call!(
            self.0,
            RetransformClasses,
            classes.len() as sys::jint,
            classes.as_ptr()
        )
    }

    /// Name and descriptor.
    pub fn method_name(self, method: sys::jmethodID) -> Result<(String, String)> {
        let (mut name, mut sig) = (ptr::null_mut(), ptr::null_mut());
        call!(
            self.0,
            GetMethodName,
            method,
            &mut name,
            &mut sig,
            ptr::null_mut()
        )?;
        Ok((self.take_string(name), self.take_string(sig)))
    }

    pub fn method_declaring_class(self, jni: Jni, method: sys::jmethodID) -> Result<LocalRef> {
        let mut class = ptr::null_mut();
        call!(self.0, GetMethodDeclaringClass, method, &mut class)?;
        Ok(LocalRef::new(jni, class))
    }

    pub fn method_modifiers(self, method: sys::jmethodID) -> Result<i32> {
        let mut m = 0;
        call!(self.0, GetMethodModifiers, method, &mut m)?;
        Ok(m)
    }

    pub fn local_variable_table(self, method: sys::jmethodID) -> Result<Vec<LocalVariable>> {
        let mut n = 0;
        let mut table = ptr::null_mut();
        call!(self.0, GetLocalVariableTable, method, &mut n, &mut table)?;
        Ok(self
            .take_array(table, n)
            .into_iter()
            .map(|e| {
                self.deallocate(e.signature);
                self.deallocate(e.generic_signature);
                LocalVariable {
                    start: e.start_location,
                    slot: e.slot,
                    name: self.take_string(e.name),
                }
            })
            .collect())
    }

    /// `(start bci, line)` pairs.
    pub fn line_number_table(self, method: sys::jmethodID) -> Result<Vec<(i64, u32)>> {
        let mut n = 0;
        let mut table = ptr::null_mut();
        call!(self.0, GetLineNumberTable, method, &mut n, &mut table)?;
        Ok(self
            .take_array(table, n)
            .into_iter()
            .map(|e: sys::jvmtiLineNumberEntry| (e.start_location, e.line_number.max(0) as u32))
            .collect())
    }

    /// Frames on the thread's stack (null: the current thread).
    pub fn frame_count(self, thread: sys::jthread) -> Result<i32> {
        let mut n = 0;
        call!(self.0, GetFrameCount, thread, &mut n)?;
        Ok(n)
    }

    pub fn frame_location(self, thread: sys::jthread, depth: i32) -> Result<(sys::jmethodID, i64)> {
        let (mut method, mut loc) = (ptr::null_mut(), 0);
        call!(
            self.0,
            GetFrameLocation,
            thread,
            depth,
            &mut method,
            &mut loc
        )?;
        Ok((method, loc))
    }

    /// Every live thread's stack, at most `max_depth` frames each, taken
    /// at one safepoint. The thread references are local references of
    /// the calling thread: call inside [`Jni::with_local_frame`].
    pub fn all_stack_traces(self, max_depth: i32) -> Result<AllStackTraces> {
        let (mut p, mut n) = (ptr::null_mut(), 0);
        call!(self.0, GetAllStackTraces, max_depth, &mut p, &mut n)?;
        Ok(AllStackTraces {
            env: self,
            ptr: p,
            len: n.max(0) as usize,
        })
    }

    /// The monitors `thread` owns, each with the depth of the frame that
    /// entered it (0 = top; -1 = entered through JNI). The objects are
    /// local references of the calling thread.
    pub fn owned_monitor_depths(self, thread: sys::jthread) -> Result<Vec<(sys::jobject, i32)>> {
        let (mut n, mut p) = (0, ptr::null_mut());
        call!(
            self.0,
            GetOwnedMonitorStackDepthInfo,
            thread,
            &mut n,
            &mut p
        )?;
        Ok(self
            .take_array(p, n)
            .into_iter()
            .map(|i: sys::jvmtiMonitorStackDepthInfo| (i.monitor, i.stack_depth))
            .collect())
    }

    /// Starts `proc_` on `thread` (a fresh `java.lang.Thread`) as a JVMTI
    /// agent thread: a daemon the JVM does not wait for.
    pub fn run_agent_thread(
        self,
        thread: sys::jthread,
        proc_: sys::jvmtiStartFunction,
        arg: *const std::ffi::c_void,
    ) -> Result<()> {
        call!(
            self.0,
            RunAgentThread,
            thread,
            proc_,
            arg,
            sys::JVMTI_THREAD_NORM_PRIORITY as sys::jint
        )
    }

    pub fn local_int(self, thread: sys::jthread, depth: i32, slot: i32) -> Result<i32> {
        let mut v = 0;
        call!(self.0, GetLocalInt, thread, depth, slot, &mut v)?;
        Ok(v)
    }

    pub fn local_long(self, thread: sys::jthread, depth: i32, slot: i32) -> Result<i64> {
        let mut v = 0;
        call!(self.0, GetLocalLong, thread, depth, slot, &mut v)?;
        Ok(v)
    }

    pub fn local_float(self, thread: sys::jthread, depth: i32, slot: i32) -> Result<f32> {
        let mut v = 0.0;
        call!(self.0, GetLocalFloat, thread, depth, slot, &mut v)?;
        Ok(v)
    }

    pub fn local_double(self, thread: sys::jthread, depth: i32, slot: i32) -> Result<f64> {
        let mut v = 0.0;
        call!(self.0, GetLocalDouble, thread, depth, slot, &mut v)?;
        Ok(v)
    }

    pub fn local_object(
        self,
        jni: Jni,
        thread: sys::jthread,
        depth: i32,
        slot: i32,
    ) -> Result<LocalRef> {
        let mut v = ptr::null_mut();
        call!(self.0, GetLocalObject, thread, depth, slot, &mut v)?;
        Ok(LocalRef::new(jni, v))
    }

    pub fn thread_info(self, jni: Jni, thread: sys::jthread) -> Result<ThreadInfo> {
        // SAFETY: plain C struct; all zero is a valid value to be overwritten.
        let mut info: sys::jvmtiThreadInfo = unsafe { std::mem::zeroed() };
        call!(self.0, GetThreadInfo, thread, &mut info)?;
        let _loader = LocalRef::new(jni, info.context_class_loader);
        let group = LocalRef::new(jni, info.thread_group);
        let group_name = if group.is_null() {
            String::new()
        } else {
            // SAFETY: as above.
            let mut g: sys::jvmtiThreadGroupInfo = unsafe { std::mem::zeroed() };
            match call!(self.0, GetThreadGroupInfo, group.get(), &mut g) {
                Ok(()) => {
                    let _parent = LocalRef::new(jni, g.parent);
                    self.take_string(g.name)
                }
                Err(_) => String::new(),
            }
        };
        Ok(ThreadInfo {
            name: self.take_string(info.name),
            group: group_name,
            priority: info.priority,
            daemon: info.is_daemon != 0,
        })
    }

    pub fn object_hash_code(self, object: sys::jobject) -> Result<u32> {
        let mut h = 0;
        call!(self.0, GetObjectHashCode, object, &mut h)?;
        Ok(h as u32)
    }

    /// The thread owning the object's monitor, if any (a local reference).
    pub fn monitor_owner(self, jni: Jni, object: sys::jobject) -> Result<LocalRef> {
        // SAFETY: plain C struct; all zero is a valid value to be overwritten.
        let mut usage: sys::jvmtiMonitorUsage = unsafe { std::mem::zeroed() };
        call!(self.0, GetObjectMonitorUsage, object, &mut usage)?;
        for t in self.take_array(usage.waiters, usage.waiter_count) {
            drop(LocalRef::new(jni, t));
        }
        for t in self.take_array(usage.notify_waiters, usage.notify_waiter_count) {
            drop(LocalRef::new(jni, t));
        }
        Ok(LocalRef::new(jni, usage.owner))
    }

    /// The pointer this environment stored with `thread` (null when none).
    pub fn thread_local_storage(self, thread: sys::jthread) -> Result<*mut std::ffi::c_void> {
        let mut p = ptr::null_mut();
        call!(self.0, GetThreadLocalStorage, thread, &mut p)?;
        Ok(p)
    }

    /// Stores `data` with `thread` (a virtual thread's own with
    /// `can_support_virtual_threads`, not its carrier's).
    pub fn set_thread_local_storage(
        self,
        thread: sys::jthread,
        data: *mut std::ffi::c_void,
    ) -> Result<()> {
        call!(self.0, SetThreadLocalStorage, thread, data.cast_const())
    }

    /// The index of the extension event named `id` (such as
    /// `com.sun.hotspot.events.VirtualThreadMount`), if this JVM has it.
    pub fn extension_event_index(self, id: &str) -> Result<Option<i32>> {
        let (mut n, mut p) = (0, ptr::null_mut());
        call!(self.0, GetExtensionEvents, &mut n, &mut p)?;
        let mut found = None;
        for info in self.take_array(p, n) {
            let name = self.take_string(info.id);
            self.deallocate(info.short_description);
            for param in self.take_array(info.params, info.param_count) {
                self.deallocate(param.name);
            }
            if name == id {
                found = Some(info.extension_event_index);
            }
        }
        Ok(found)
    }

    /// Sets (and so enables) or, with `None`, clears and disables the
    /// callback of an extension event.
    pub fn set_extension_event_callback(
        self,
        index: i32,
        callback: sys::jvmtiExtensionEvent,
    ) -> Result<()> {
        call!(self.0, SetExtensionEventCallback, index, callback)
    }

    /// Every live platform thread (local references of the calling thread:
    /// call inside [`Jni::with_local_frame`]). No safepoint: HotSpot reads
    /// its thread list under a hazard pointer.
    pub fn all_threads(self, jni: Jni) -> Result<Vec<LocalRef>> {
        let (mut n, mut p) = (0, ptr::null_mut());
        call!(self.0, GetAllThreads, &mut n, &mut p)?;
        Ok(self
            .take_array(p, n)
            .into_iter()
            .map(|t| LocalRef::new(jni, t))
            .collect())
    }

    /// The JVMTI state bits of `thread` (`JVMTI_THREAD_STATE_*`), read
    /// without stopping it.
    pub fn thread_state(self, thread: sys::jthread) -> Result<u32> {
        let mut st = 0;
        call!(self.0, GetThreadState, thread, &mut st)?;
        Ok(st as u32)
    }

    /// Makes sure every method of `class` has its jmethodID (HotSpot
    /// creates them lazily; `AsyncGetCallTrace` cannot name a frame of a
    /// method that has none). The ids themselves are not kept.
    pub fn create_method_ids(self, class: sys::jclass) -> Result<()> {
        let (mut n, mut p) = (0, ptr::null_mut());
        call!(self.0, GetClassMethods, class, &mut n, &mut p)?;
        self.deallocate(p);
        Ok(())
    }

    /// The calling thread's own stack, top first, at most `max` frames
    /// (no safepoint: a thread walks itself).
    pub fn own_stack(self, max: usize) -> Result<Vec<sys::jvmtiFrameInfo>> {
        let mut frames = vec![
            sys::jvmtiFrameInfo {
                method: ptr::null_mut(),
                location: 0,
            };
            max
        ];
        let mut n = 0;
        call!(
            self.0,
            GetStackTrace,
            ptr::null_mut(),
            0,
            max as sys::jint,
            frames.as_mut_ptr(),
            &mut n
        )?;
        frames.truncate(n.max(0) as usize);
        Ok(frames)
    }

    /// Samples about one allocation per `bytes` allocated by each thread
    /// (`SampledObjectAlloc`).
    pub fn set_heap_sampling_interval(self, bytes: i32) -> Result<()> {
        call!(self.0, SetHeapSamplingInterval, bytes)
    }

    /// The calling thread's `Thread` object (a local reference).
    pub fn current_thread(self, jni: Jni) -> Result<LocalRef> {
        let mut t = ptr::null_mut();
        call!(self.0, GetCurrentThread, &mut t)?;
        Ok(LocalRef::new(jni, t))
    }

    /// A copy of `bytes` in memory the JVM owns (for a ClassFileLoadHook's
    /// new class data, which the JVM frees).
    pub fn allocate_copy(self, bytes: &[u8]) -> Result<*mut u8> {
        let mut p = ptr::null_mut();
        call!(self.0, Allocate, bytes.len() as sys::jlong, &mut p)?;
        if p.is_null() {
            return Err(JvmtiError {
                function: "Allocate",
                code: sys::JVMTI_ERROR_OUT_OF_MEMORY,
            });
        }
        // SAFETY: `p` points to `bytes.len()` freshly allocated bytes.
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) };
        Ok(p)
    }

    /// The method's bytecodes, as the class file (after any rewriting by
    /// the ClassFileLoadHook) has them.
    /// `GetConstantPool`: the pool's `constant_pool_count` and its entries
    /// in class-file form, with the indices `GetBytecodes` uses.
    pub fn constant_pool(self, class: sys::jclass) -> Result<(u16, Vec<u8>)> {
        let (mut count, mut len, mut p) = (0, 0, ptr::null_mut());
        call!(self.0, GetConstantPool, class, &mut count, &mut len, &mut p)?;
        let bytes = self.take_array(p, len);
        Ok((u16::try_from(count).unwrap_or(0), bytes))
    }

    /// Sets a breakpoint: the `Breakpoint` event fires when a thread is
    /// about to execute the instruction at `location` of `method`.
    pub fn set_breakpoint(self, method: sys::jmethodID, location: i64) -> Result<()> {
        call!(self.0, SetBreakpoint, method, location)
    }

    pub fn clear_breakpoint(self, method: sys::jmethodID, location: i64) -> Result<()> {
        call!(self.0, ClearBreakpoint, method, location)
    }

    pub fn bytecodes(self, method: sys::jmethodID) -> Result<Vec<u8>> {
        let (mut n, mut p) = (0, ptr::null_mut());
        call!(self.0, GetBytecodes, method, &mut n, &mut p)?;
        Ok(self.take_array(p, n))
    }

    pub fn tag(self, object: sys::jobject) -> Result<i64> {
        let mut t = 0;
        call!(self.0, GetTag, object, &mut t)?;
        Ok(t)
    }

    pub fn set_tag(self, object: sys::jobject, tag: i64) -> Result<()> {
        call!(self.0, SetTag, object, tag)
    }
}

/// The result of `GetAllStackTraces` or `GetThreadListStackTraces`: one
/// JVMTI allocation, freed on drop.
pub struct AllStackTraces {
    env: Jvmti,
    ptr: *mut sys::jvmtiStackInfo,
    len: usize,
}

/// One thread's entry in [`AllStackTraces`].
pub struct StackTrace<'a> {
    pub thread: sys::jthread,
    /// JVMTI thread state bits (`JVMTI_THREAD_STATE_*`).
    pub state: u32,
    /// Frames, top first.
    pub frames: &'a [sys::jvmtiFrameInfo],
}

impl AllStackTraces {
    pub fn iter(&self) -> impl Iterator<Item = StackTrace<'_>> {
        let infos: &[sys::jvmtiStackInfo] = if self.ptr.is_null() {
            &[]
        } else {
            // SAFETY: JVMTI returned `len` initialised entries, alive until
            // `self` deallocates them.
            unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
        };
        infos.iter().map(|i| StackTrace {
            thread: i.thread,
            state: i.state as u32,
            frames: if i.frame_buffer.is_null() || i.frame_count <= 0 {
                &[]
            } else {
                // SAFETY: the frame buffers live in the same allocation.
                unsafe { std::slice::from_raw_parts(i.frame_buffer, i.frame_count as usize) }
            },
        })
    }
}

impl Drop for AllStackTraces {
    fn drop(&mut self) {
        self.env.deallocate(self.ptr);
    }
}

/// The JNI environment of the current thread.
#[derive(Clone, Copy)]
pub struct Jni(*mut sys::JNIEnv);

macro_rules! jni {
    ($env:expr, $f:ident $(, $arg:expr)* $(,)?) => {{
        let env = $env;
        // SAFETY: `env` is the current thread's JNIEnv* (see `Jni::new`).
        unsafe {
            match (**env).$f {
                Some(f) => Some(f(env $(, $arg)*)),
                None => None,
            }
        }
    }};
}

impl Jni {
    /// # Safety
    /// `env` must be the JNIEnv* of the calling thread.
    pub unsafe fn new(env: *mut sys::JNIEnv) -> Jni {
        Jni(env)
    }

    /// The JNIEnv* itself (HotSpot embeds it in the thread's `JavaThread`).
    pub fn raw(self) -> *mut sys::JNIEnv {
        self.0
    }

    pub fn object_class(self, object: sys::jobject) -> LocalRef {
        LocalRef::new(
            self,
            jni!(self.0, GetObjectClass, object).unwrap_or(ptr::null_mut()),
        )
    }

    pub fn find_class(self, name: &CStr) -> LocalRef {
        let c = jni!(self.0, FindClass, name.as_ptr()).unwrap_or(ptr::null_mut());
        self.clear_exception();
        LocalRef::new(self, c)
    }

    /// The field's id, or `None` when the class has no such field (the
    /// `NoSuchFieldError` is cleared).
    pub fn field_id(self, class: sys::jclass, name: &CStr, sig: &CStr) -> Option<sys::jfieldID> {
        let f = jni!(self.0, GetFieldID, class, name.as_ptr(), sig.as_ptr())?;
        self.clear_exception();
        (!f.is_null()).then_some(f)
    }

    /// The id of an instance method, or `None` when the class has none
    /// by that name and descriptor (the `NoSuchMethodError` is cleared).
    pub fn method_id(self, class: sys::jclass, name: &CStr, sig: &CStr) -> Option<sys::jmethodID> {
        let m = jni!(self.0, GetMethodID, class, name.as_ptr(), sig.as_ptr())?;
        self.clear_exception();
        (!m.is_null()).then_some(m)
    }

    /// Clears a pending exception; whether there was one.
    fn clear_exception(self) -> bool {
        if jni!(self.0, ExceptionCheck) == Some(1) {
            jni!(self.0, ExceptionClear);
            return true;
        }
        false
    }

    pub fn object_field(self, object: sys::jobject, f: sys::jfieldID) -> LocalRef {
        LocalRef::new(
            self,
            jni!(self.0, GetObjectField, object, f).unwrap_or(ptr::null_mut()),
        )
    }

    pub fn int_field(self, object: sys::jobject, f: sys::jfieldID) -> i32 {
        jni!(self.0, GetIntField, object, f).unwrap_or(0)
    }

    /// Whether `thread` is a virtual thread. JNI has `IsVirtualThread`
    /// from version 21 only: the caller checks the JVM's version first.
    pub fn is_virtual_thread(self, thread: sys::jobject) -> bool {
        jni!(self.0, IsVirtualThread, thread).is_some_and(|b| b != 0)
    }

    pub fn long_field(self, object: sys::jobject, f: sys::jfieldID) -> i64 {
        jni!(self.0, GetLongField, object, f).unwrap_or(0)
    }

    pub fn short_field(self, object: sys::jobject, f: sys::jfieldID) -> i16 {
        jni!(self.0, GetShortField, object, f).unwrap_or(0)
    }

    pub fn byte_field(self, object: sys::jobject, f: sys::jfieldID) -> i8 {
        jni!(self.0, GetByteField, object, f).unwrap_or(0)
    }

    pub fn char_field(self, object: sys::jobject, f: sys::jfieldID) -> u16 {
        jni!(self.0, GetCharField, object, f).unwrap_or(0)
    }

    pub fn boolean_field(self, object: sys::jobject, f: sys::jfieldID) -> bool {
        jni!(self.0, GetBooleanField, object, f).unwrap_or(0) != 0
    }

    pub fn float_field(self, object: sys::jobject, f: sys::jfieldID) -> f32 {
        jni!(self.0, GetFloatField, object, f).unwrap_or(0.0)
    }

    pub fn double_field(self, object: sys::jobject, f: sys::jfieldID) -> f64 {
        jni!(self.0, GetDoubleField, object, f).unwrap_or(0.0)
    }

    pub fn array_length(self, array: sys::jobject) -> u32 {
        jni!(self.0, GetArrayLength, array).unwrap_or(0).max(0) as u32
    }

    pub fn string_length(self, s: sys::jobject) -> u32 {
        jni!(self.0, GetStringLength, s).unwrap_or(0).max(0) as u32
    }

    /// The first `buf.len()` UTF-16 units of the string.
    pub fn string_region(self, s: sys::jobject, buf: &mut [u16]) {
        jni!(
            self.0,
            GetStringRegion,
            s,
            0,
            buf.len() as sys::jsize,
            buf.as_mut_ptr()
        );
    }

    /// Runs `f` in a new local reference frame planned for `capacity`
    /// references, all of which are freed afterwards. For work that
    /// creates many references at once (`GetLoadedClasses`), which
    /// `-Xcheck:jni` would otherwise report as over capacity.
    pub fn with_local_frame<R>(self, capacity: i32, f: impl FnOnce() -> R) -> R {
        let pushed = jni!(self.0, PushLocalFrame, capacity) == Some(sys::JNI_OK);
        let r = f();
        if pushed {
            jni!(self.0, PopLocalFrame, ptr::null_mut());
        }
        r
    }

    /// Defines a class in the bootstrap loader (`loader` null); the pending
    /// exception, if any, is cleared and reported as `None`.
    pub fn define_boot_class(self, name: &CStr, bytes: &[u8]) -> Option<LocalRef> {
        let c = jni!(
            self.0,
            DefineClass,
            name.as_ptr(),
            ptr::null_mut(),
            bytes.as_ptr().cast(),
            bytes.len() as sys::jsize
        )
        .unwrap_or(ptr::null_mut());
        self.clear_exception();
        (!c.is_null()).then(|| LocalRef::new(self, c))
    }

    /// Binds native methods of `class`; false (exception cleared) when a
    /// method does not exist.
    pub fn register_natives(self, class: sys::jclass, methods: &[sys::JNINativeMethod]) -> bool {
        let rc = jni!(
            self.0,
            RegisterNatives,
            class,
            methods.as_ptr(),
            methods.len() as sys::jint
        );
        self.clear_exception();
        rc == Some(sys::JNI_OK)
    }

    /// A new, unstarted `java.lang.Thread` named `name`, for
    /// [`Jvmti::run_agent_thread`]; null (exception cleared) on failure.
    pub fn new_thread(self, name: &CStr) -> LocalRef {
        let class = self.find_class(c"java/lang/Thread");
        if class.is_null() {
            return LocalRef::new(self, ptr::null_mut());
        }
        let init = jni!(
            self.0,
            GetMethodID,
            class.get(),
            c"<init>".as_ptr(),
            c"(Ljava/lang/String;)V".as_ptr()
        )
        .unwrap_or(ptr::null_mut());
        self.clear_exception();
        let jname = LocalRef::new(
            self,
            jni!(self.0, NewStringUTF, name.as_ptr()).unwrap_or(ptr::null_mut()),
        );
        if init.is_null() || jname.is_null() {
            self.clear_exception();
            return LocalRef::new(self, ptr::null_mut());
        }
        let arg = sys::jvalue { l: jname.get() };
        let t = jni!(self.0, NewObjectA, class.get(), init, &arg).unwrap_or(ptr::null_mut());
        self.clear_exception();
        LocalRef::new(self, t)
    }

    /// Calls the static `void` method `name` `sig` of `class`; false
    /// (exception cleared) when there is none or it threw.
    pub fn call_static_void(
        self,
        class: sys::jclass,
        name: &CStr,
        sig: &CStr,
        args: &[sys::jvalue],
    ) -> bool {
        let m = jni!(
            self.0,
            GetStaticMethodID,
            class,
            name.as_ptr(),
            sig.as_ptr()
        )
        .unwrap_or(ptr::null_mut());
        if m.is_null() {
            self.clear_exception();
            return false;
        }
        jni!(self.0, CallStaticVoidMethodA, class, m, args.as_ptr());
        !self.clear_exception()
    }

    /// A new `int[len]` set into the static field `name` (`[I`) of
    /// `class`, returned as a global reference; `None` (exception cleared)
    /// on failure. For the overhead budget's call counters.
    pub fn new_static_int_array(
        self,
        class: sys::jclass,
        name: &CStr,
        len: i32,
    ) -> Option<sys::jobject> {
        let f = jni!(
            self.0,
            GetStaticFieldID,
            class,
            name.as_ptr(),
            c"[I".as_ptr()
        )
        .unwrap_or(ptr::null_mut());
        if f.is_null() {
            self.clear_exception();
            return None;
        }
        let array = LocalRef::new(
            self,
            jni!(self.0, NewIntArray, len).unwrap_or(ptr::null_mut()),
        );
        if array.is_null() {
            self.clear_exception();
            return None;
        }
        jni!(self.0, SetStaticObjectField, class, f, array.get());
        let global = jni!(self.0, NewGlobalRef, array.get()).unwrap_or(ptr::null_mut());
        self.clear_exception();
        (!global.is_null()).then_some(global)
    }

    /// Copies `out.len()` elements of the `int[]` `array` from index 0.
    pub fn int_array_region(self, array: sys::jobject, out: &mut [i32]) {
        jni!(
            self.0,
            GetIntArrayRegion,
            array,
            0,
            out.len() as sys::jsize,
            out.as_mut_ptr()
        );
        self.clear_exception();
    }

    pub fn delete_local_ref(self, r: sys::jobject) {
        if !r.is_null() {
            jni!(self.0, DeleteLocalRef, r);
        }
    }
}

/// A JNI local reference the agent created; deleted when dropped.
pub struct LocalRef {
    jni: Jni,
    obj: sys::jobject,
}

impl LocalRef {
    pub fn new(jni: Jni, obj: sys::jobject) -> LocalRef {
        LocalRef { jni, obj }
    }

    pub fn get(&self) -> sys::jobject {
        self.obj
    }

    pub fn is_null(&self) -> bool {
        self.obj.is_null()
    }
}

impl Drop for LocalRef {
    fn drop(&mut self) {
        self.jni.delete_local_ref(self.obj);
    }
}
