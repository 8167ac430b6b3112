//! Event time: monotonic nanoseconds since the agent started.
//!
//! `Instant` is `clock_gettime(CLOCK_MONOTONIC)` through the vDSO, the same
//! clock on every core, so times taken on different threads can be merged
//! and sorted. The wall-clock start goes into the trace header and `%t`.

use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

static START: OnceLock<Instant> = OnceLock::new();

/// Fixes time zero; returns the wall-clock start in ns since the Unix epoch.
pub fn start() -> u64 {
    START.get_or_init(Instant::now);
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Nanoseconds since [`start`].
#[inline]
pub fn now_ns() -> u64 {
    match START.get() {
        Some(s) => s.elapsed().as_nanos() as u64,
        None => 0,
    }
}

/// glibc's and musl's `struct tm` (the fields after `tm_isdst` are the
/// offset and zone name on both).
#[repr(C)]
struct Tm {
    tm_sec: std::ffi::c_int,
    tm_min: std::ffi::c_int,
    tm_hour: std::ffi::c_int,
    tm_mday: std::ffi::c_int,
    tm_mon: std::ffi::c_int,
    tm_year: std::ffi::c_int,
    tm_wday: std::ffi::c_int,
    tm_yday: std::ffi::c_int,
    tm_isdst: std::ffi::c_int,
    tm_gmtoff: std::ffi::c_long,
    tm_zone: *const std::ffi::c_char,
}

extern "C" {
    fn localtime_r(time: *const i64, result: *mut Tm) -> *mut Tm;
}

/// The local time zone's offset from UTC at `unix_secs`, in seconds (0 if
/// the C library cannot tell).
pub fn local_utc_offset(unix_secs: i64) -> i64 {
    // SAFETY: all-zero is a valid `Tm`; localtime_r only writes into it.
    let mut tm: Tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call; localtime_r is thread-safe.
    let r = unsafe { localtime_r(&unix_secs, &mut tm) };
    if r.is_null() {
        0
    } else {
        tm.tm_gmtoff
    }
}
