//! The thread counters of `metrics=cpu+alloc`, read on every traced CALL
//! and RETURN of the thread itself.
//!
//! **CPU time** is `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`: user + system
//! ns of the calling thread, a system call (the vDSO does not serve
//! per-thread clocks). `pthread_getcpuclockid` names the same clock and
//! costs the same, so the cheaper-to-call constant is used.
//!
//! **Allocated bytes** come from HotSpot's own per-thread counter, read in
//! place the way async-profiler reads `JavaThread` fields: the JVM exports
//! its field offsets in `gHotSpotVMStructs` (the table the Serviceability
//! Agent reads), so the agent finds `Thread::_allocated_bytes` (bytes of
//! retired TLABs and of allocations outside TLABs) and the current TLAB's
//! `_start` and `_top`, and adds the TLAB's used bytes, which is exactly
//! `Thread::cooked_allocated_bytes()` behind
//! `ThreadMXBean.getCurrentThreadAllocatedBytes()`. A read is three loads
//! and no JVM transition; the JMM call behind the MXBean costs a
//! native-to-VM state transition per read. The `JavaThread` of the calling
//! thread is its `JNIEnv*` minus a fixed offset, measured once at start
//! from `Thread.eetop` (the `JavaThread*` Java keeps in every `Thread`).
//! Where a JVM does not export the fields, the agent records CPU time
//! alone and says so once.

use crate::jvmti::Jni;
use crate::recording::Recording;
use std::ffi::{c_char, c_void, CStr};
use std::sync::OnceLock;
use vmview_format::Metrics;

extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

/// The calling thread's CPU time, ns (user + system).
#[inline]
pub fn thread_cpu_ns() -> u64 {
    crate::clock::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0)
}

/// Where HotSpot keeps a thread's allocation counter, as byte offsets.
#[derive(Debug, Clone, Copy)]
struct AllocFields {
    /// `JNIEnv*` − `JavaThread*`.
    env_offset: isize,
    /// `Thread::_allocated_bytes` (a `jlong`).
    allocated_bytes: isize,
    /// `Thread::_tlab` + `ThreadLocalAllocBuffer::_start`.
    tlab_start: isize,
    /// `Thread::_tlab` + `ThreadLocalAllocBuffer::_top`.
    tlab_top: isize,
}

/// HotSpot's largest TLAB is far below this; a bigger "used" figure means
/// a TLAB being set up under the reader's feet (the JVM's own reader drops
/// it the same way).
const MAX_TLAB_USED: u64 = 1 << 40;

static ALLOC: OnceLock<Result<AllocFields, String>> = OnceLock::new();

/// Prepares the counters `metrics=` asks for (at VMInit or attach, on a
/// Java thread). The error is one line for the problem report: that
/// metric is then left out of every event.
pub fn start(agent: &Recording, jni: Jni) -> Result<(), String> {
    if !agent.options.metrics.alloc {
        return Ok(());
    }
    ALLOC
        .get_or_init(|| alloc_fields(agent, jni))
        .as_ref()
        .map(|_| ())
        .map_err(Clone::clone)
}

/// The counters `metrics=` asks for, of the calling thread, whose JNIEnv
/// is `jni`.
#[inline]
pub fn read(agent: &Recording, jni: Option<Jni>) -> Metrics {
    let m = agent.options.metrics;
    if !m.any() {
        return Metrics::NONE;
    }
    Metrics {
        cpu_ns: m.cpu.then(thread_cpu_ns),
        alloc_bytes: if m.alloc {
            jni.and_then(allocated_bytes)
        } else {
            None
        },
    }
}

/// The bytes the thread of `jni` has allocated, TLAB included.
#[inline]
fn allocated_bytes(jni: Jni) -> Option<u64> {
    let f = ALLOC.get()?.as_ref().ok()?;
    let thread = (jni.raw() as *const u8).wrapping_offset(-f.env_offset);
    // SAFETY: `thread` is the calling thread's own JavaThread (the JNIEnv
    // is embedded in it at `env_offset`, checked at start); the fields
    // are plain words, written by this thread when it allocates and by a
    // GC retiring its TLAB at a safepoint, which a thread in native code
    // does not stop.
    let load = |at: isize| unsafe { (thread.offset(at) as *const u64).read_volatile() };
    // A GC that retires the TLAB between the loads changes the retired
    // count: read again (a TLAB retired with nothing used changes
    // nothing, and costs nothing either).
    for _ in 0..3 {
        let retired = load(f.allocated_bytes);
        let used = load(f.tlab_top).wrapping_sub(load(f.tlab_start));
        if load(f.allocated_bytes) != retired {
            continue;
        }
        return Some(if used < MAX_TLAB_USED {
            retired.wrapping_add(used)
        } else {
            retired
        });
    }
    None
}

/// Finds the offsets in `gHotSpotVMStructs` and the JNIEnv's place in the
/// `JavaThread` through `Thread.eetop`.
fn alloc_fields(agent: &Recording, jni: Jni) -> Result<AllocFields, String> {
    let cannot = |why: &str| format!("metrics=alloc: {why}; allocated bytes are not recorded");
    let table = VmStructs::find().ok_or_else(|| {
        cannot("this JVM exports no gHotSpotVMStructs (not HotSpot, or a JVM without them)")
    })?;
    let field = |ty: &str, name: &str| {
        table
            .offset(ty, name)
            .ok_or_else(|| cannot(&format!("this JVM does not export {ty}::{name}")))
    };
    let allocated_bytes = field("Thread", "_allocated_bytes")?;
    let tlab = field("Thread", "_tlab")?;
    let start = field("ThreadLocalAllocBuffer", "_start")?;
    let top = field("ThreadLocalAllocBuffer", "_top")?;

    let class = jni.find_class(c"java/lang/Thread");
    let eetop = (!class.is_null())
        .then(|| jni.field_id(class.get(), c"eetop", c"J"))
        .flatten()
        .ok_or_else(|| cannot("java.lang.Thread has no eetop field"))?;
    let me = agent
        .jvmti
        .current_thread(jni)
        .map_err(|e| cannot(&e.to_string()))?;
    let java_thread = jni.long_field(me.get(), eetop) as usize;
    let env = jni.raw() as usize;
    // The JNIEnv is a field of the JavaThread: a few hundred bytes in.
    let env_offset = env.wrapping_sub(java_thread) as isize;
    if java_thread == 0 || !(0..1 << 16).contains(&env_offset) {
        return Err(cannot(
            "the JNIEnv does not lie inside the thread's JavaThread",
        ));
    }
    Ok(AllocFields {
        env_offset,
        allocated_bytes: allocated_bytes as isize,
        tlab_start: (tlab + start) as isize,
        tlab_top: (tlab + top) as isize,
    })
}

/// HotSpot's table of C++ field offsets (`vmStructs.cpp`): an array of
/// entries whose layout the JVM describes in exported globals.
pub(crate) struct VmStructs {
    first: *const u8,
    stride: usize,
    type_name: usize,
    field_name: usize,
    is_static: usize,
    offset: usize,
    address: usize,
}

impl VmStructs {
    pub(crate) fn find() -> Option<VmStructs> {
        // SAFETY: each symbol is an exported global of libjvm of the type
        // read here (`VMStructEntry*` or `uint64_t`).
        unsafe {
            let global = |name: &CStr| -> Option<*const c_void> {
                let p = dlsym(std::ptr::null_mut(), name.as_ptr());
                (!p.is_null()).then_some(p as *const c_void)
            };
            let number = |name: &CStr| global(name).map(|p| (p as *const u64).read() as usize);
            let first = (global(c"gHotSpotVMStructs")? as *const *const u8).read();
            if first.is_null() {
                return None;
            }
            Some(VmStructs {
                first,
                stride: number(c"gHotSpotVMStructEntryArrayStride")?,
                type_name: number(c"gHotSpotVMStructEntryTypeNameOffset")?,
                field_name: number(c"gHotSpotVMStructEntryFieldNameOffset")?,
                is_static: number(c"gHotSpotVMStructEntryIsStaticOffset")?,
                offset: number(c"gHotSpotVMStructEntryOffsetOffset")?,
                address: number(c"gHotSpotVMStructEntryAddressOffset")?,
            })
        }
    }

    /// The address of the static field `ty::name`.
    pub(crate) fn static_address(&self, ty: &str, name: &str) -> Option<*const u8> {
        for i in 0..100_000 {
            // SAFETY: as in `offset`.
            unsafe {
                let entry = self.first.add(i * self.stride);
                let t = (entry.add(self.type_name) as *const *const c_char).read();
                if t.is_null() {
                    return None;
                }
                let f = (entry.add(self.field_name) as *const *const c_char).read();
                if f.is_null() || (entry.add(self.is_static) as *const i32).read() == 0 {
                    continue;
                }
                if CStr::from_ptr(t).to_bytes() == ty.as_bytes()
                    && CStr::from_ptr(f).to_bytes() == name.as_bytes()
                {
                    let a = (entry.add(self.address) as *const *const u8).read();
                    return (!a.is_null()).then_some(a);
                }
            }
        }
        None
    }

    /// The size of the C++ type `ty`, from `gHotSpotVMTypes`.
    pub(crate) fn type_size(ty: &str) -> Option<usize> {
        // SAFETY: exported globals of libjvm describing the type table;
        // entries are read until the one with a null name.
        unsafe {
            let global = |name: &CStr| -> Option<*const c_void> {
                let p = dlsym(std::ptr::null_mut(), name.as_ptr());
                (!p.is_null()).then_some(p as *const c_void)
            };
            let number = |name: &CStr| global(name).map(|p| (p as *const u64).read() as usize);
            let first = (global(c"gHotSpotVMTypes")? as *const *const u8).read();
            let stride = number(c"gHotSpotVMTypeEntryArrayStride")?;
            let name_at = number(c"gHotSpotVMTypeEntryTypeNameOffset")?;
            let size_at = number(c"gHotSpotVMTypeEntrySizeOffset")?;
            if first.is_null() {
                return None;
            }
            for i in 0..100_000 {
                let entry = first.add(i * stride);
                let t = (entry.add(name_at) as *const *const c_char).read();
                if t.is_null() {
                    return None;
                }
                if CStr::from_ptr(t).to_bytes() == ty.as_bytes() {
                    return Some((entry.add(size_at) as *const u64).read() as usize);
                }
            }
            None
        }
    }

    /// The offset of the non-static field `ty::name`.
    pub(crate) fn offset(&self, ty: &str, name: &str) -> Option<usize> {
        // Far more entries than any HotSpot has (about 1,500): a guard
        // against a table that does not end.
        for i in 0..100_000 {
            // SAFETY: entries are read until the one with a null type
            // name, which ends the table; every field read lies in an
            // entry at the offsets the JVM published.
            unsafe {
                let entry = self.first.add(i * self.stride);
                let t = (entry.add(self.type_name) as *const *const c_char).read();
                if t.is_null() {
                    return None;
                }
                let f = (entry.add(self.field_name) as *const *const c_char).read();
                if f.is_null() || (entry.add(self.is_static) as *const i32).read() != 0 {
                    continue;
                }
                if CStr::from_ptr(t).to_bytes() == ty.as_bytes()
                    && CStr::from_ptr(f).to_bytes() == name.as_bytes()
                {
                    return Some((entry.add(self.offset) as *const u64).read() as usize);
                }
            }
        }
        None
    }
}
