//! Event time: monotonic nanoseconds since the agent started.
//!
//! `Instant` is `clock_gettime(CLOCK_MONOTONIC)` through the vDSO, the same
//! clock on every core, so times taken on different threads can be merged
//! and sorted. The wall-clock start goes into the trace header and `%t`.
//!
//! Every traced call takes the time twice, and `clock_gettime` was a fifth
//! of the probe's cost (measured: ~25 ns a call on this machine's VM). So
//! when the kernel itself keeps time with the TSC (its clocksource is
//! `tsc`: invariant and synchronised across cores, or the kernel would
//! have switched away from it), the agent reads the TSC directly and
//! scales it with a rate calibrated against `Instant` over 2 ms at start.
//! The rate's error (~1e-5) stretches durations by as much; the order of
//! events across threads is that of the TSC, which the kernel trusts.

use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

static START: OnceLock<Instant> = OnceLock::new();
static TSC: OnceLock<Option<TscClock>> = OnceLock::new();

/// `ns = base_ns + (tsc - base_tsc) * ns_per_tick`, the rate in 32.32
/// fixed point.
struct TscClock {
    base_tsc: u64,
    base_ns: u64,
    ns_per_tick: u64,
}

/// Fixes time zero; returns the wall-clock start in ns since the Unix epoch.
pub fn start() -> u64 {
    let start = *START.get_or_init(Instant::now);
    TSC.get_or_init(|| calibrate(start));
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Nanoseconds since [`start`].
#[inline]
pub fn now_ns() -> u64 {
    if let Some(Some(t)) = TSC.get() {
        let ticks = tsc().wrapping_sub(t.base_tsc);
        // A core whose TSC reads a hair behind the calibrating one.
        if ticks > i64::MAX as u64 {
            return t.base_ns;
        }
        return t.base_ns + ((u128::from(ticks) * u128::from(t.ns_per_tick)) >> 32) as u64;
    }
    match START.get() {
        Some(s) => s.elapsed().as_nanos() as u64,
        None => 0,
    }
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn tsc() -> u64 {
    // SAFETY: RDTSC has no preconditions on x86_64.
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn tsc() -> u64 {
    0
}

/// The TSC clock, if the kernel keeps time with the TSC and the measured
/// rate is plausible (0.1 to 10 GHz).
/// A TSC reading and the `Instant` time it corresponds to: of several
/// tries, the one whose TSC read sat between the closest two clock reads.
/// A thread preempted between a clock read and a TSC read would skew the
/// rate by the preemption over the calibration span (measured: 5 % at load
/// 15 on 2 cores, with one unbracketed pair at each end); `None` when no
/// try was bracketed within 2 µs, and the agent keeps `Instant`.
fn paired_reading(start: Instant) -> Option<(Duration, u64)> {
    let mut best: Option<(Duration, Duration, u64)> = None;
    for _ in 0..16 {
        let before = start.elapsed();
        let t = tsc();
        let after = start.elapsed();
        let width = after.saturating_sub(before);
        if best.is_none_or(|(w, _, _)| width < w) {
            best = Some((width, before + width / 2, t));
        }
    }
    let (width, ns, t) = best?;
    (width <= Duration::from_micros(2)).then_some((ns, t))
}

fn calibrate(start: Instant) -> Option<TscClock> {
    if !cfg!(target_arch = "x86_64") {
        return None;
    }
    let source =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .ok()?;
    if source.trim() != "tsc" {
        return None;
    }
    let (ns0, tsc0) = paired_reading(start)?;
    let until = ns0 + Duration::from_millis(2);
    while start.elapsed() < until {
        std::hint::spin_loop();
    }
    let (ns1, tsc1) = paired_reading(start)?;
    let ns = (ns1 - ns0).as_nanos() as u64;
    let ticks = tsc1.checked_sub(tsc0)?;
    if ticks < ns / 10 || ticks > ns * 10 {
        return None;
    }
    Some(TscClock {
        base_tsc: tsc0,
        base_ns: ns0.as_nanos() as u64,
        ns_per_tick: (u128::from(ns) << 32).checked_div(u128::from(ticks))? as u64,
    })
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

/// The time of the POSIX clock `clock` (a CPU clock: the process's, the
/// calling thread's, or another thread's), ns; `None` when there is no
/// such clock (a thread that has exited).
#[inline]
pub fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; a bad clock id is an error
    // return.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(
        (ts.tv_sec as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(ts.tv_nsec as u64),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_time_follows_the_monotonic_clock() {
        start();
        let (a, i0) = (now_ns(), START.get().unwrap().elapsed());
        std::thread::sleep(Duration::from_millis(20));
        let (b, i1) = (now_ns(), START.get().unwrap().elapsed());
        let agent = b - a;
        let real = (i1 - i0).as_nanos() as u64;
        assert!(
            agent.abs_diff(real) < real / 100 + 100_000,
            "{agent} ns vs {real} ns"
        );
        assert!(now_ns() >= b);
    }
}
