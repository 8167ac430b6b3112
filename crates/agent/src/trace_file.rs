//! Creating the trace file without ever losing another recording.
//!
//! `File::create` truncated whatever held the name: the trace of the
//! previous run, or the file another JVM was writing at that moment (two
//! JVMs recording to one `-o` both reported success, and the file held
//! only the second). The policy (docs/RECORDING.md) is `perf record`'s,
//! plus a lock:
//!
//! - A finished trace that holds the name is moved aside to `NAME.old`
//!   (replacing an older `.old`), so the name always holds the newest
//!   recording and the one before survives.
//! - A recording holds an exclusive `flock` on its file until it is
//!   finished. A name whose file is locked belongs to a live recording:
//!   this one goes to `STEM.PID.EXT` instead and says so.
//!
//! Both names come from `vmview_options`, where `vmview record` finds them.
//!
//! The new file is created under a temporary name, locked, and only then
//! given its name with `link(2)`, which fails instead of replacing: no other
//! recording can see the name taken by a file it could still lock and move.
//! A name that is not a regular file (`/dev/null`, a FIFO) is opened as
//! before. An existing trace in a directory we may not write (so nothing
//! can be created or moved there) is replaced in place, unless it is live,
//! and the recording says so.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

/// How often taking the name may lose a race before giving up.
const ATTEMPTS: usize = 8;

/// The opened trace and what became of the name.
pub struct TraceFile {
    pub file: File,
    /// Where the trace is being written.
    pub path: String,
    /// The earlier, finished trace that held the name, moved here.
    pub moved_aside: Option<String>,
    /// The name was held by a live recording, so `path` is another one.
    pub taken_by_live: bool,
    /// A finished trace held the name and could not be moved aside (its
    /// directory is not writable): it was replaced.
    pub replaced: bool,
}

/// Creates the trace file for `name` (see the module docs).
pub fn create(name: &str) -> io::Result<TraceFile> {
    let target = Path::new(name);
    let plain = |file| TraceFile {
        file,
        path: name.to_string(),
        moved_aside: None,
        taken_by_live: false,
        replaced: false,
    };
    let existing = fs::metadata(target).ok();
    if existing.as_ref().is_some_and(|m| !m.is_file()) {
        return File::create(target).map(plain);
    }
    let (tmp, file) = match create_temporary(target) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied && existing.is_some() => {
            return replace_in_place(target).map(|file| TraceFile {
                replaced: true,
                ..plain(file)
            });
        }
        Err(e) => return Err(e),
    };
    let result = give_name(&tmp, target);
    let _ = fs::remove_file(&tmp);
    let (path, moved_aside, taken_by_live) = result?;
    Ok(TraceFile {
        file,
        path,
        moved_aside,
        taken_by_live,
        replaced: false,
    })
}

/// Opens the writable trace at `target` in a directory we may not write,
/// and empties it, unless a live recording holds it.
fn replace_in_place(target: &Path) -> io::Result<File> {
    let file = OpenOptions::new().write(true).open(target)?;
    match lock(&file) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(io::Error::other(
            "it is being written by another recording, and its directory is not writable \
             (so no other name can be taken beside it)",
        )),
        _ => {
            file.set_len(0)?;
            Ok(file)
        }
    }
}

/// A new, locked, empty file beside `target`.
fn create_temporary(target: &Path) -> io::Result<(PathBuf, File)> {
    let name = target
        .file_name()
        .map_or_else(|| "trace".into(), |n| n.to_string_lossy());
    let tmp = target.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let open = || OpenOptions::new().write(true).create_new(true).open(&tmp);
    let file = match open() {
        Ok(f) => f,
        // Left by a killed process that had our pid: nobody uses it.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            fs::remove_file(&tmp)?;
            open()?
        }
        Err(e) => return Err(e),
    };
    // A file system without flock cannot tell live recordings apart; the
    // recording goes on without the lock.
    let _ = lock(&file);
    Ok((tmp, file))
}

fn lock(file: &File) -> io::Result<()> {
    rustix::fs::flock(file, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        .map_err(io::Error::from)
}

/// Links `tmp` (open and locked by the caller) to `target`, moving a finished
/// trace aside, or to the per-pid name when a live recording holds it.
fn give_name(tmp: &Path, target: &Path) -> io::Result<(String, Option<String>, bool)> {
    let shown = |p: &Path| p.to_string_lossy().into_owned();
    let mut moved_aside = None;
    for _ in 0..ATTEMPTS {
        match fs::hard_link(tmp, target) {
            Ok(()) => return Ok((shown(target), moved_aside, false)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            // No hard links here (some FUSE and FAT file systems): keep the
            // old trace, then rename, which replaces nothing after it.
            Err(_) => {
                if target.exists() {
                    let old = old_name(target);
                    fs::rename(target, &old)?;
                    moved_aside = Some(shown(&old));
                }
                fs::rename(tmp, target)?;
                return Ok((shown(target), moved_aside, false));
            }
        }
        match Holder::of(target) {
            Holder::Gone => continue,
            Holder::Finished(held) => {
                // Still the file we locked (not one that replaced it since)?
                let still = same_file(&held, target);
                if still {
                    let old = old_name(target);
                    fs::rename(target, &old)?;
                    moved_aside = Some(shown(&old));
                }
                drop(held);
            }
            Holder::Live => {
                let own = pid_name(target);
                return match fs::hard_link(tmp, &own) {
                    Ok(()) => Ok((shown(&own), None, true)),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        Err(io::Error::other(format!(
                            "it is being written by another recording, and so is {}",
                            own.display()
                        )))
                    }
                    Err(e) => Err(e),
                };
            }
        }
    }
    Err(io::Error::other(
        "other processes kept creating it at the same moment; try again",
    ))
}

/// Who holds the name.
enum Holder {
    /// Nothing any more.
    Gone,
    /// A finished trace, now locked by us (released when dropped).
    Finished(File),
    /// A recording that is still writing it.
    Live,
}

impl Holder {
    fn of(target: &Path) -> Holder {
        let Ok(f) = File::open(target) else {
            return Holder::Gone;
        };
        match lock(&f) {
            Ok(()) => Holder::Finished(f),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Holder::Live,
            // flock not supported: nobody can hold it, treat it as finished.
            Err(_) => Holder::Finished(f),
        }
    }
}

fn same_file(f: &File, p: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (f.metadata(), fs::metadata(p)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

fn old_name(target: &Path) -> PathBuf {
    PathBuf::from(vmview_options::old_file_name(&target.to_string_lossy()))
}

fn pid_name(target: &Path) -> PathBuf {
    PathBuf::from(vmview_options::own_file_name(
        &target.to_string_lossy(),
        std::process::id(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn dir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("vmview-trace-file-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_finished_trace_is_moved_aside_to_old() {
        let d = dir("finished");
        let name = d.join("t.vmv");
        fs::write(&name, b"first").unwrap();
        let t = create(name.to_str().unwrap()).unwrap();
        assert_eq!(t.path, name.to_str().unwrap());
        assert!(!t.taken_by_live);
        assert_eq!(fs::read(d.join("t.vmv.old")).unwrap(), b"first");
        assert_eq!(fs::read(&name).unwrap(), b"");
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(&d).unwrap().count(), 2);
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn a_live_recording_keeps_its_name_and_the_second_gets_its_own() {
        let d = dir("live");
        let name = d.join("t.vmv");
        let mut first = create(name.to_str().unwrap()).unwrap();
        first.file.write_all(b"first").unwrap();
        let second = create(name.to_str().unwrap()).unwrap();
        assert!(second.taken_by_live);
        assert_eq!(PathBuf::from(&second.path), pid_name(&name));
        assert_eq!(fs::read(&name).unwrap(), b"first");
        // Once the first is finished (closed), the name is free to reuse.
        drop(first);
        drop(second);
        let third = create(name.to_str().unwrap()).unwrap();
        assert!(!third.taken_by_live);
        assert_eq!(fs::read(d.join("t.vmv.old")).unwrap(), b"first");
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn replacing_in_place_empties_a_finished_trace_but_not_a_live_one() {
        // The path taken when the directory is not writable (not reachable
        // by a test running as root, which may write anywhere).
        let d = dir("in-place");
        let name = d.join("t.vmv");
        fs::write(&name, b"first").unwrap();
        let live = replace_in_place(&name).unwrap();
        assert_eq!(fs::read(&name).unwrap(), b"");
        fs::write(&name, b"second").unwrap();
        assert!(replace_in_place(&name).is_err(), "the first is live");
        assert_eq!(fs::read(&name).unwrap(), b"second");
        drop(live);
        assert!(replace_in_place(&name).is_ok());
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn a_device_is_opened_as_it_is() {
        let t = create("/dev/null").unwrap();
        assert_eq!(t.path, "/dev/null");
        assert!(t.moved_aside.is_none());
    }
}
