//! The timeline's index saved to disk, so that a trace opened a second
//! time shows its timeline at once instead of after a full read.
//!
//! Building the index reads every event of the trace: minutes for the
//! hundreds of millions of events one server run records. What the index
//! keeps is bounded ([`Limits`]: at most some 250 MB), so it is written once,
//! after the first build, to a file in the user's cache directory (never
//! next to, and never over, the trace), and read back by later opens in
//! the time it takes to read that file.
//!
//! A saved index is never trusted blindly. Its file names the trace by its
//! canonical path, size, modification time and a checksum of its first and
//! last 64 KiB (where the header and the index footer are), and records the
//! limits it was built under; any difference means the trace changed and
//! the index is rebuilt. The file ends with a CRC-32C of all of it, each
//! count is bounded by the bytes left, and each slice and marker is checked
//! for the order the queries rely on, so a damaged file is rebuilt with a
//! message and never makes a query panic or loop. Files are written under
//! a temporary name and renamed, so a reader never sees half of one, and
//! the directory keeps only the [`KEEP`] most recently written.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

use vmview_format::{MethodId, MethodSymbol, StringId, Symbol, SymbolTable};

use crate::timeline::{Limits, Marker, MarkerKind, Marks, Slice, Timeline, Track, KINDS};

const MAGIC: &[u8; 8] = b"VMVTLIDX";
/// Bumped whenever the layout below changes: an older file is rebuilt.
const VERSION: u32 = 1;
/// How much of each end of the trace its identity checksums.
const ENDS: u64 = 64 * 1024;
/// Saved indexes kept in the directory (each up to ~250 MB); the oldest
/// beyond this are removed when a new one is written.
pub const KEEP: usize = 8;
/// The file name prefix and extension of saved indexes.
const PREFIX: &str = "timeline-";
const EXT: &str = "vmtl";

/// Where saved indexes go, and from which trace size they are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheConfig {
    pub dir: PathBuf,
    /// Traces with fewer events are indexed in well under a second: their
    /// index is not saved (unless this is 0).
    pub min_events: u64,
}

/// Traces from this many events have their index saved by default.
pub const DEFAULT_MIN_EVENTS: u64 = 1_000_000;

impl CacheConfig {
    /// `$XDG_CACHE_HOME/vmview`, else `$HOME/.cache/vmview`; `None` when
    /// neither is set.
    pub fn default_dir() -> Option<PathBuf> {
        let nonempty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        nonempty("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| nonempty("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .map(|d| d.join("vmview"))
    }
}

/// Who the trace is: what a saved index must match to be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceIdentity {
    path: String,
    size: u64,
    mtime_ns: i64,
    ends_crc: u32,
}

impl TraceIdentity {
    pub fn of(trace: &Path) -> io::Result<TraceIdentity> {
        let canonical = trace.canonicalize()?;
        let mut f = File::open(&canonical)?;
        let meta = f.metadata()?;
        let size = meta.len();
        let mut buf = vec![0u8; ENDS.min(size) as usize];
        f.read_exact(&mut buf)?;
        let mut crc = crc32c::crc32c(&buf);
        if size > ENDS {
            let tail = ENDS.min(size - ENDS);
            f.seek(SeekFrom::Start(size - tail))?;
            buf.resize(tail as usize, 0);
            f.read_exact(&mut buf)?;
            crc = crc32c::crc32c_append(crc, &buf);
        }
        Ok(TraceIdentity {
            path: canonical.to_string_lossy().into_owned(),
            size,
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            ends_crc: crc,
        })
    }

    /// The saved index's file in `dir`: named by a hash of the path (the
    /// file itself holds the whole identity) and the trace's file name,
    /// for whoever lists the directory.
    pub fn file_in(&self, dir: &Path) -> PathBuf {
        let h1 = crc32c::crc32c(self.path.as_bytes());
        let h2 = crc32c::crc32c_append(0x5a5a_5a5a, self.path.as_bytes());
        let stem: String = Path::new(&self.path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        dir.join(format!("{PREFIX}{h1:08x}{h2:08x}-{stem}.{EXT}"))
    }
}

/// Why a saved index was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unusable {
    /// There is none.
    Missing,
    /// It is for another trace, or this trace before it changed, or other
    /// limits.
    Stale(&'static str),
    /// It cannot be read as an index: the reason.
    Damaged(String),
}

/// Reads the saved index at `file` if it is `id`'s, built under `limits`.
pub fn load(file: &Path, id: &TraceIdentity, limits: Limits) -> Result<Timeline, Unusable> {
    let f = match File::open(file) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(Unusable::Missing),
        Err(e) => return Err(Unusable::Damaged(format!("cannot be opened: {e}"))),
    };
    let len = f
        .metadata()
        .map_err(|e| Unusable::Damaged(e.to_string()))?
        .len();
    let mut r = In {
        inner: BufReader::with_capacity(1 << 20, f),
        crc: 0,
        left: len.saturating_sub(4),
    };
    let bad = |e: io::Error| Unusable::Damaged(format!("cannot be read: {e}"));
    let mut magic = [0u8; 8];
    r.bytes(&mut magic).map_err(bad)?;
    if &magic != MAGIC {
        return Err(Unusable::Damaged("it is not a saved timeline index".into()));
    }
    if r.u32().map_err(bad)? != VERSION {
        return Err(Unusable::Stale("it was saved by another vmview version"));
    }
    let saved = TraceIdentity {
        path: r.string().map_err(bad)?,
        size: r.u64().map_err(bad)?,
        mtime_ns: r.u64().map_err(bad)? as i64,
        ends_crc: r.u32().map_err(bad)?,
    };
    if saved.path != id.path {
        return Err(Unusable::Stale("it is another trace's"));
    }
    if saved != *id {
        return Err(Unusable::Stale("the trace changed since it was saved"));
    }
    let saved_limits = Limits {
        slices: r.u64().map_err(bad)? as usize,
        markers: r.u64().map_err(bad)? as usize,
        samples: r.u64().map_err(bad)? as usize,
    };
    if saved_limits != limits {
        return Err(Unusable::Stale("it was built under other limits"));
    }
    let tl = read_timeline(&mut r).map_err(|e| match e.kind() {
        io::ErrorKind::InvalidData => Unusable::Damaged(e.to_string()),
        _ => bad(e),
    })?;
    let computed = r.crc;
    let mut tail = [0u8; 4];
    r.inner.read_exact(&mut tail).map_err(bad)?;
    if u32::from_le_bytes(tail) != computed {
        return Err(Unusable::Damaged("its checksum does not match".into()));
    }
    if r.inner.read(&mut [0u8; 1]).map_err(bad)? != 0 {
        return Err(Unusable::Damaged("it has bytes after its checksum".into()));
    }
    Ok(tl)
}

/// Writes `tl` as `id`'s saved index in `dir` (under a temporary name,
/// then renamed), then removes the oldest saved indexes beyond [`KEEP`].
/// Returns the file and its size.
pub fn save(
    dir: &Path,
    id: &TraceIdentity,
    limits: Limits,
    tl: &Timeline,
) -> io::Result<(PathBuf, u64)> {
    std::fs::create_dir_all(dir)?;
    let file = id.file_in(dir);
    let tmp = file.with_extension(format!("{EXT}.tmp-{}", std::process::id()));
    let written = (|| {
        let mut w = Out {
            inner: BufWriter::with_capacity(1 << 20, File::create(&tmp)?),
            crc: 0,
        };
        w.bytes(MAGIC)?;
        w.u32(VERSION)?;
        w.string(&id.path)?;
        w.u64(id.size)?;
        w.u64(id.mtime_ns as u64)?;
        w.u32(id.ends_crc)?;
        w.u64(limits.slices as u64)?;
        w.u64(limits.markers as u64)?;
        w.u64(limits.samples as u64)?;
        write_timeline(&mut w, tl)?;
        let crc = w.crc;
        w.inner.write_all(&crc.to_le_bytes())?;
        let f = w.inner.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        Ok::<u64, io::Error>(f.metadata()?.len())
    })();
    let size = match written {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    if let Err(e) = std::fs::rename(&tmp, &file) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    prune(dir, &file);
    Ok((file, size))
}

/// Builds `trace`'s timeline index (every core, as `serve` does) and saves
/// it in `dir` where `serve` looks for it, so that even the first serve
/// of a freshly recorded trace shows its timeline at once. `read` counts
/// the events read so far. Returns the file and its size.
pub fn build_and_save(
    trace: &Path,
    dir: &Path,
    read: &AtomicU64,
) -> Result<(PathBuf, u64), String> {
    let limits = Limits::default();
    let id = TraceIdentity::of(trace).map_err(|e| e.to_string())?;
    let tl = Timeline::build(trace, limits, read).map_err(|e| e.to_string())?;
    // The trace must still be the one that was read.
    if TraceIdentity::of(trace).map_err(|e| e.to_string())? != id {
        return Err("the trace changed while it was indexed".into());
    }
    save(dir, &id, limits, &tl).map_err(|e| format!("cannot write in {}: {e}", dir.display()))
}

/// Removes the oldest saved indexes beyond [`KEEP`] (never `keep`).
fn prune(dir: &Path, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut saved: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with(PREFIX) && n.ends_with(&format!(".{EXT}"))
        })
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .filter(|(_, p)| p != keep)
        .collect();
    saved.sort();
    let extra = (saved.len() + 1).saturating_sub(KEEP);
    for (_, p) in saved.into_iter().take(extra) {
        let _ = std::fs::remove_file(p);
    }
}

/// Writes little-endian values, keeping the CRC-32C of what it wrote.
struct Out<W: Write> {
    inner: W,
    crc: u32,
}

impl<W: Write> Out<W> {
    fn bytes(&mut self, b: &[u8]) -> io::Result<()> {
        self.crc = crc32c::crc32c_append(self.crc, b);
        self.inner.write_all(b)
    }
    fn u32(&mut self, v: u32) -> io::Result<()> {
        self.bytes(&v.to_le_bytes())
    }
    fn u64(&mut self, v: u64) -> io::Result<()> {
        self.bytes(&v.to_le_bytes())
    }
    fn string(&mut self, s: &str) -> io::Result<()> {
        self.u64(s.len() as u64)?;
        self.bytes(s.as_bytes())
    }
}

/// Reads what [`Out`] wrote, keeping the CRC-32C and the bytes left
/// before the checksum (no count may promise more than those).
struct In<R: Read> {
    inner: R,
    crc: u32,
    left: u64,
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

impl<R: Read> In<R> {
    fn bytes(&mut self, b: &mut [u8]) -> io::Result<()> {
        if b.len() as u64 > self.left {
            return Err(invalid("it is cut short"));
        }
        self.inner.read_exact(b)?;
        self.left -= b.len() as u64;
        self.crc = crc32c::crc32c_append(self.crc, b);
        Ok(())
    }
    fn u32(&mut self) -> io::Result<u32> {
        let mut b = [0u8; 4];
        self.bytes(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    fn u64(&mut self) -> io::Result<u64> {
        let mut b = [0u8; 8];
        self.bytes(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    /// A count of items of `size` bytes each, which must fit in the bytes
    /// left.
    fn count(&mut self, size: u64) -> io::Result<usize> {
        let n = self.u64()?;
        if n.saturating_mul(size) > self.left {
            return Err(invalid("a count larger than the file"));
        }
        Ok(n as usize)
    }
    fn string(&mut self) -> io::Result<String> {
        let n = self.count(1)?;
        let mut b = vec![0u8; n];
        self.bytes(&mut b)?;
        Ok(String::from_utf8_lossy(&b).into_owned())
    }
    /// `n` records of `size` bytes, read in blocks and decoded by `f`.
    fn records<T>(
        &mut self,
        n: usize,
        size: usize,
        mut f: impl FnMut(&[u8]) -> io::Result<T>,
    ) -> io::Result<Vec<T>> {
        let mut out = Vec::with_capacity(n);
        let mut buf = Vec::new();
        let mut left = n;
        while left > 0 {
            let k = left.min(1 << 16);
            buf.resize(k * size, 0);
            self.bytes(&mut buf)?;
            for r in buf.chunks_exact(size) {
                out.push(f(r)?);
            }
            left -= k;
        }
        Ok(out)
    }
}

fn le64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}
fn le32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

const SLICE: usize = 40;
const MARKER: usize = 29;
const SAMPLE: usize = 9;

fn write_markers<W: Write>(w: &mut Out<W>, v: &[Marker]) -> io::Result<()> {
    w.u64(v.len() as u64)?;
    let mut buf = Vec::with_capacity(v.len().min(1 << 16) * MARKER);
    for c in v.chunks(1 << 16) {
        buf.clear();
        for m in c {
            buf.extend_from_slice(&m.start.to_le_bytes());
            buf.extend_from_slice(&m.time.to_le_bytes());
            buf.extend_from_slice(&m.id.to_le_bytes());
            buf.extend_from_slice(&m.what.to_le_bytes());
            buf.push(m.kind as u8);
        }
        w.bytes(&buf)?;
    }
    Ok(())
}

/// Markers, each starting no later than it ends, in the order of their
/// times (what `markers_in`'s binary searches need).
fn read_markers<R: Read>(r: &mut In<R>) -> io::Result<Vec<Marker>> {
    let n = r.count(MARKER as u64)?;
    let v = r.records(n, MARKER, |b| {
        let m = Marker {
            start: le64(b, 0),
            time: le64(b, 8),
            id: le64(b, 16),
            what: le32(b, 24),
            kind: MarkerKind::from_u8(b[28]).ok_or_else(|| invalid("a marker of no kind"))?,
        };
        if m.start > m.time || m.time == u64::MAX {
            return Err(invalid("a marker that ends before it starts"));
        }
        Ok(m)
    })?;
    if v.windows(2).any(|p| p[0].time > p[1].time) {
        return Err(invalid("markers out of order"));
    }
    Ok(v)
}

fn write_timeline<W: Write>(w: &mut Out<W>, tl: &Timeline) -> io::Result<()> {
    for v in [
        tl.end_ns,
        tl.min_ns,
        tl.dropped_markers,
        tl.dropped_samples,
        tl.unmatched_returns,
    ] {
        w.u64(v)?;
    }
    write_markers(w, &tl.gc)?;
    w.u64(tl.tracks.len() as u64)?;
    let mut methods: Vec<u32> = Vec::new();
    let mut strings: Vec<u32> = Vec::new();
    let mut buf = Vec::new();
    for t in &tl.tracks {
        w.string(&t.name)?;
        w.u32(t.thread)?;
        w.u64(t.first_ns)?;
        w.u64(t.last_ns)?;
        w.u64(t.first_id)?;
        w.u64(t.levels.len() as u64)?;
        for level in &t.levels {
            w.u64(level.len() as u64)?;
            for c in level.chunks(1 << 16) {
                buf.clear();
                for s in c {
                    buf.extend_from_slice(&s.start.to_le_bytes());
                    buf.extend_from_slice(&s.end.to_le_bytes());
                    buf.extend_from_slice(&s.call_id.to_le_bytes());
                    buf.extend_from_slice(&s.ret_id.to_le_bytes());
                    buf.extend_from_slice(&s.method.to_le_bytes());
                    buf.extend_from_slice(&s.parent.to_le_bytes());
                    methods.push(s.method);
                }
                w.bytes(&buf)?;
                methods.sort_unstable();
                methods.dedup();
            }
        }
        w.u64(t.samples.len() as u64)?;
        for c in t.samples.chunks(1 << 16) {
            buf.clear();
            for s in c {
                buf.extend_from_slice(&s.0.to_le_bytes());
                buf.push(s.1);
            }
            w.bytes(&buf)?;
        }
        // One list in the order of the events, as the trace has them.
        let mut all: Vec<Marker> = t.markers.iter().flat_map(|v| v.iter()).copied().collect();
        all.sort_by_key(|m| (m.time, m.id));
        write_markers(w, &all)?;
        strings.extend(
            all.iter()
                .filter_map(|m| names_what(m.kind).then_some(m.what)),
        );
        strings.sort_unstable();
        strings.dedup();
    }
    // The symbols the queries name: the slices' methods, and the classes
    // of the exceptions and monitors the markers stand for.
    let methods: Vec<&MethodSymbol> = methods
        .iter()
        .filter_map(|&m| tl.syms.method(MethodId(m)))
        .collect();
    for m in &methods {
        strings.extend([m.class.0, m.name.0, m.sig.0]);
        strings.extend(m.param_names.iter().map(|s| s.0));
    }
    strings.sort_unstable();
    strings.dedup();
    w.u64(strings.len() as u64)?;
    for &s in &strings {
        w.u32(s)?;
        w.string(tl.syms.string(StringId(s)))?;
    }
    w.u64(methods.len() as u64)?;
    for m in methods {
        for v in [m.id.0, m.class.0, m.name.0, m.sig.0] {
            w.u32(v)?;
        }
        w.u64(m.param_names.len() as u64)?;
        for p in &m.param_names {
            w.u32(p.0)?;
        }
        w.u32(u32::from(m.modifiers))?;
    }
    Ok(())
}

/// Whether a marker's `what` is a string the queries name.
fn names_what(kind: MarkerKind) -> bool {
    matches!(
        kind,
        MarkerKind::Throw | MarkerKind::Catch | MarkerKind::Contended | MarkerKind::Wait
    )
}

fn read_timeline<R: Read>(r: &mut In<R>) -> io::Result<Timeline> {
    let mut head = [0u64; 5];
    for v in &mut head {
        *v = r.u64()?;
    }
    let [end_ns, min_ns, dropped_markers, dropped_samples, unmatched_returns] = head;
    let gc = Marks::from(read_markers(r)?);
    let n = r.count(36)?;
    let mut tracks = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.string()?;
        let thread = r.u32()?;
        let (first_ns, last_ns, first_id) = (r.u64()?, r.u64()?, r.u64()?);
        let nl = r.count(8)?;
        let mut levels = Vec::with_capacity(nl);
        for _ in 0..nl {
            let k = r.count(SLICE as u64)?;
            let v = r.records(k, SLICE, |b| {
                let s = Slice {
                    start: le64(b, 0),
                    end: le64(b, 8),
                    call_id: le64(b, 16),
                    ret_id: le64(b, 24),
                    method: le32(b, 32),
                    parent: le32(b, 36),
                };
                if s.start > s.end || s.end == u64::MAX {
                    return Err(invalid("a call that ends before it starts"));
                }
                Ok(s)
            })?;
            // The queries' binary searches need each level ordered by
            // start (a parent index out of range only names no parent).
            if v.windows(2).any(|p| p[0].start > p[1].start) {
                return Err(invalid("calls out of order"));
            }
            levels.push(v);
        }
        let k = r.count(SAMPLE as u64)?;
        let samples = r.records(k, SAMPLE, |b| Ok((le64(b, 0), b[8])))?;
        if samples.windows(2).any(|p| p[0].0 > p[1].0) {
            return Err(invalid("samples out of order"));
        }
        let mut markers: [Marks; KINDS] = Default::default();
        for m in read_markers(r)? {
            markers[m.kind as usize].push(m);
        }
        tracks.push(Track {
            name,
            thread,
            first_ns,
            last_ns,
            first_id,
            levels,
            open: Vec::new(),
            samples,
            markers,
        });
    }
    let mut syms = SymbolTable::default();
    let n = r.count(12)?;
    for _ in 0..n {
        let id = r.u32()?;
        let text = r.string()?;
        syms.insert(Symbol::String {
            id: StringId(id),
            text,
        });
    }
    let n = r.count(28)?;
    for _ in 0..n {
        let [id, class, name, sig] = [r.u32()?, r.u32()?, r.u32()?, r.u32()?];
        let k = r.count(4)?;
        let mut param_names = Vec::with_capacity(k);
        for _ in 0..k {
            param_names.push(StringId(r.u32()?));
        }
        let modifiers = r.u32()? as u16;
        syms.insert(Symbol::Method(MethodSymbol {
            id: MethodId(id),
            class: StringId(class),
            name: StringId(name),
            sig: StringId(sig),
            param_names,
            modifiers,
        }));
    }
    Ok(Timeline {
        tracks,
        gc,
        syms,
        end_ns,
        min_ns,
        dropped_markers,
        dropped_samples,
        unmatched_returns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::{TimelineBuilder, View};
    use vmview_format::{
        Event, EventKind, Loc, Metrics, Monitor, Outcome, StringId, ThreadRef, ThreadSymbol,
    };

    fn syms() -> SymbolTable {
        let mut s = SymbolTable::default();
        for (i, t) in [
            "shop.A",
            "run",
            "(I)V",
            "main",
            "x.Err",
            "java.lang.Object",
            "n",
        ]
        .iter()
        .enumerate()
        {
            s.insert(Symbol::String {
                id: StringId(i as u32),
                text: t.to_string(),
            });
        }
        s.insert(Symbol::Method(MethodSymbol {
            id: MethodId(9),
            class: StringId(0),
            name: StringId(1),
            sig: StringId(2),
            param_names: vec![StringId(6)],
            modifiers: 9,
        }));
        s.insert(Symbol::Thread(ThreadSymbol {
            id: ThreadRef(2),
            java_id: 1,
            name: StringId(3),
            group: StringId(3),
            priority: 5,
            daemon: false,
        }));
        s
    }

    /// `main`: 50 nested pairs of run() of 10 ns inside one of 1000 ns,
    /// a THROW, a contended monitor and a GC.
    fn timeline(limits: Limits) -> Timeline {
        let mut b = TimelineBuilder::new(limits);
        let t = ThreadRef(2);
        let ev = |id: u64, time_ns: u64, kind: EventKind| Event {
            id,
            time_ns,
            thread: t,
            kind,
        };
        let call = || EventKind::Call {
            method: MethodId(9),
            depth: 1,
            caller: None,
            params: vec![],
            metrics: Metrics::NONE,
        };
        let ret = || EventKind::Return {
            method: MethodId(9),
            depth: 1,
            outcome: Outcome::Void,
            elapsed_ns: 0,
            metrics: Metrics::NONE,
        };
        b.event(&ev(1, 0, call()));
        for k in 0..50 {
            b.event(&ev(2 + 2 * k, 10 + k * 20, call()));
            b.event(&ev(3 + 2 * k, 20 + k * 20, ret()));
        }
        let throw = EventKind::Throw {
            exception: StringId(4),
            message: None,
            method: MethodId(9),
            loc: Loc::default(),
            catch: None,
        };
        b.event(&ev(200, 1005, throw));
        let contended = EventKind::MonitorContendedEntered {
            monitor: Monitor {
                class: StringId(5),
                hash: 3,
            },
            wait_ns: 5,
        };
        b.event(&ev(201, 1010, contended));
        b.event(&ev(202, 1020, EventKind::GcStart));
        b.event(&ev(203, 1030, EventKind::GcFinish { duration_ns: 10 }));
        b.event(&ev(204, 2000, ret()));
        b.finish(&syms())
    }

    /// A scratch directory and a "trace" file in it (the identity reads
    /// only its bytes).
    fn scratch(name: &str) -> (PathBuf, PathBuf) {
        let dir =
            std::env::temp_dir().join(format!("vmview-tlcache-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let trace = dir.join("t.vmv");
        std::fs::write(&trace, b"VMVIEW\0 a trace's bytes").unwrap();
        (dir, trace)
    }

    fn answers(tl: &Timeline) -> (serde_json::Value, serde_json::Value) {
        let v = tl.query(
            View {
                from: 0,
                to: 2001,
                px: 4000,
            },
            &[],
        );
        (v, tl.tree(0, 2001, &[]))
    }

    #[test]
    fn a_saved_index_reads_back_to_the_same_answers() {
        let (dir, trace) = scratch("same");
        let limits = Limits::default();
        let tl = timeline(limits);
        let id = TraceIdentity::of(&trace).unwrap();
        let (file, bytes) = save(&dir.join("cache"), &id, limits, &tl).unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().len(), bytes);
        let back = load(&file, &id, limits).expect("loads");
        let (want, got) = (answers(&tl), answers(&back));
        assert_eq!(want.0["tracks"][0]["slices"].as_array().unwrap().len(), 51);
        assert_eq!(want, got);
        assert_eq!(got.1["exceptions"][0]["class"], "x.Err");
        assert_eq!(got.1["monitors"][0]["class"], "java.lang.Object");
        assert_eq!(got.0["gc"].as_array().unwrap().len(), 1);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_damaged_or_stale_saved_index_is_refused_with_its_reason() {
        let (dir, trace) = scratch("refused");
        let limits = Limits::default();
        let tl = timeline(limits);
        let id = TraceIdentity::of(&trace).unwrap();
        let (file, _) = save(&dir, &id, limits, &tl).unwrap();
        let good = std::fs::read(&file).unwrap();
        // Every byte flipped in turn, and every length cut: never a
        // panic, never a wrong index.
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x41;
            std::fs::write(&file, &bad).unwrap();
            assert!(load(&file, &id, limits).is_err(), "byte {i} flipped");
        }
        for n in 0..good.len() {
            std::fs::write(&file, &good[..n]).unwrap();
            assert!(
                matches!(load(&file, &id, limits), Err(Unusable::Damaged(_))),
                "cut at {n}"
            );
        }
        std::fs::write(&file, &good).unwrap();
        assert!(load(&file, &id, limits).is_ok());
        let other = Limits {
            slices: 7,
            ..limits
        };
        assert_eq!(
            load(&file, &id, other).err(),
            Some(Unusable::Stale("it was built under other limits"))
        );
        // The trace changed (same size, other bytes).
        std::fs::write(&trace, b"VMVIEW\0 a trace's BYTES").unwrap();
        let changed = TraceIdentity::of(&trace).unwrap();
        assert_eq!(
            load(&file, &changed, limits).err(),
            Some(Unusable::Stale("the trace changed since it was saved"))
        );
        assert_eq!(
            load(&dir.join("none.vmtl"), &id, limits).err(),
            Some(Unusable::Missing)
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_directory_keeps_only_the_newest_saved_indexes() {
        let (dir, _) = scratch("keep");
        let limits = Limits::default();
        let tl = timeline(limits);
        for k in 0..KEEP + 3 {
            let trace = dir.join(format!("t{k}.vmv"));
            std::fs::write(&trace, format!("trace {k}")).unwrap();
            let id = TraceIdentity::of(&trace).unwrap();
            save(&dir.join("cache"), &id, limits, &tl).unwrap();
        }
        let n = std::fs::read_dir(dir.join("cache")).unwrap().count();
        assert_eq!(n, KEEP);
        let _ = std::fs::remove_dir_all(dir);
    }
}
