//! HotSpot's dynamic attach protocol, client side, in Rust (what `jcmd`
//! and `jattach` do, without a JDK at run time).
//!
//! 1. The JVM listens on the UNIX socket `/tmp/.java_pid<PID>` once its
//!    Attach Listener runs. If the socket is not there yet, vmview creates
//!    `.attach_pid<PID>` in the JVM's working directory (or `/tmp`) and
//!    sends SIGQUIT: the JVM sees the file and starts the listener instead
//!    of printing a thread dump.
//! 2. vmview connects and sends `1\0load\0LIBRARY\0true\0OPTIONS\0`
//!    (protocol 1, the `load` command with an absolute library path).
//! 3. The JVM answers with a status line (0 = the command ran) and the
//!    command's output (`return code: N`, Agent_OnAttach's result).
//!
//! A SIGQUIT that reaches a JVM whose listener already runs, or that finds
//! no `.attach_pid` file, prints a thread dump on the JVM's stdout (two
//! `vmview attach` at once did that: the second signalled after the first
//! had started the listener). So attaches to one JVM take turns, holding
//! an exclusive `flock` on `/tmp/.vmview_attach_pid<PID>.lock` in the
//! JVM's `/tmp` for the whole exchange ([`AttachLock`]); under it, the
//! socket is tried again, and the signal is sent only when the socket is
//! missing and the trigger file is the one vmview just created, in place.
//!
//! HotSpot checks the peer's credentials, so vmview running as root takes
//! the JVM's effective uid and gid for the exchange. `<PID>` is the pid the
//! JVM sees in its own PID namespace, and `/tmp` is the JVM's, reached
//! through `/proc/PID/root` ([`Process::path`]).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg, OFlag};
use nix::sys::signal::{kill, Signal};
use nix::unistd::{getegid, geteuid, setegid, seteuid, Gid, Pid, Uid};

use super::process::Process;
use crate::error::{hinted, plain};

/// How long the JVM may take to start its Attach Listener.
const LISTENER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a command may take to answer (a stop drains the buffers).
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long to wait for another vmview's exchange with the same JVM: its
/// listener start and its reply, with room to spare.
const LOCK_TIMEOUT: Duration = Duration::from_secs(90);

/// Runs `load LIBRARY OPTIONS` in the JVM; returns Agent_OnAttach's result
/// and the JVM's text.
pub fn load_agent(p: &Process, library: &str, options: &str) -> anyhow::Result<(i32, String)> {
    let _as_target = Credentials::take(p)?;
    let _turn = AttachLock::take(p)?;
    let socket = p.path(&format!("/tmp/.java_pid{}", p.nspid));
    let mut stream = match UnixStream::connect(&socket) {
        Ok(s) => s,
        // Only a missing (or dead) socket means the listener is not running;
        // any other failure must not become a SIGQUIT to a running one.
        Err(e)
            if !matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Err(plain(format!(
                "cannot connect to the attach socket of pid {} ({}): {e}",
                p.pid,
                socket.display()
            )));
        }
        Err(_) => {
            start_listener(p, &socket)?;
            UnixStream::connect(&socket).map_err(|e| {
                plain(format!(
                    "cannot connect to the attach socket of pid {} ({}): {e}",
                    p.pid,
                    socket.display()
                ))
            })?
        }
    };
    stream.set_read_timeout(Some(REPLY_TIMEOUT))?;
    stream.set_write_timeout(Some(REPLY_TIMEOUT))?;
    let mut request = Vec::new();
    for part in ["1", "load", library, "true", options] {
        request.extend_from_slice(part.as_bytes());
        request.push(0);
    }
    stream
        .write_all(&request)
        .map_err(|e| plain(format!("pid {} closed its attach socket: {e}", p.pid)))?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).map_err(|e| {
        hinted(
            format!("pid {} did not answer the attach request: {e}", p.pid),
            "the JVM may be stuck in a long safepoint or out of memory; try again",
        )
    })?;
    let (status, rest) = answer.split_once('\n').unwrap_or((answer.as_str(), ""));
    let status: i32 = status.trim().parse().unwrap_or(-1);
    if status != 0 {
        return Err(hinted(
            format!(
                "pid {} refused to load the agent (attach status {status}): {}",
                p.pid,
                rest.trim()
            ),
            "the JVM's own message is above; an agent library for another platform or a JVM older than 9 is refused this way",
        ));
    }
    // `return code: N` since JDK 9; older JVMs print N alone.
    let code = rest
        .lines()
        .find_map(|l| l.trim().strip_prefix("return code:").or(Some(l.trim())))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    Ok((code, rest.to_string()))
}

/// Asks the JVM to start its Attach Listener and waits for the socket.
fn start_listener(p: &Process, socket: &Path) -> anyhow::Result<()> {
    let name = format!(".attach_pid{}", p.nspid);
    let candidates = [
        PathBuf::from(format!("/proc/{}/cwd/{name}", p.pid)),
        p.path(&format!("/tmp/{name}")),
    ];
    let (trigger, file) = candidates
        .iter()
        .find_map(|c| File::create(c).ok().map(|f| (c.clone(), f)))
        .ok_or_else(|| {
            hinted(
                format!(
                    "cannot create {name} in the working directory or /tmp of pid {}",
                    p.pid
                ),
                "run vmview as the JVM's user (or as root)",
            )
        })?;
    let result = signal_and_wait(p, socket, &trigger, &file);
    // Only our own trigger: another tool may have put its own there since.
    if is_ours(&trigger, &file) {
        let _ = std::fs::remove_file(&trigger);
    }
    result
}

/// Whether `path` is still the file vmview created (`file`), owned by the
/// uid HotSpot will compare with its own.
fn is_ours(path: &Path, file: &File) -> bool {
    match (std::fs::symlink_metadata(path), file.metadata()) {
        (Ok(there), Ok(ours)) => {
            there.dev() == ours.dev()
                && there.ino() == ours.ino()
                && there.uid() == geteuid().as_raw()
        }
        _ => false,
    }
}

fn signal_and_wait(p: &Process, socket: &Path, trigger: &Path, file: &File) -> anyhow::Result<()> {
    // A listener started meanwhile (by jcmd, say) would take the signal for
    // a thread dump request.
    if socket.exists() {
        return Ok(());
    }
    if !is_ours(trigger, file) {
        return Err(plain(format!(
            "the attach trigger {} was replaced or removed before pid {} was signalled; \
             nothing was sent (another attach tool at the same moment?): try again",
            trigger.display(),
            p.pid
        )));
    }
    let pid = i32::try_from(p.pid).map_err(|_| plain(format!("pid {} is out of range", p.pid)))?;
    kill(Pid::from_raw(pid), Signal::SIGQUIT)
        .map_err(|e| plain(format!("cannot signal pid {}: {e}", p.pid)))?;
    let deadline = Instant::now() + LISTENER_TIMEOUT;
    let mut pause = Duration::from_millis(10);
    loop {
        if socket.exists() {
            return Ok(());
        }
        if !Path::new(&format!("/proc/{}", p.pid)).exists() {
            return Err(plain(format!("pid {} exited while vmview attached", p.pid)));
        }
        if Instant::now() >= deadline {
            return Err(hinted(
                format!(
                    "pid {} did not open its attach socket within {} s",
                    p.pid,
                    LISTENER_TIMEOUT.as_secs()
                ),
                "the JVM may refuse attach (-XX:+DisableAttachMechanism in a flags file or JDK_JAVA_OPTIONS), \
                 or still be starting: try again, or record it from the start with vmview record",
            ));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

/// This vmview's turn to talk to one JVM: an exclusive lock on a file in
/// the JVM's `/tmp` named by its pid, held until dropped. Taken after the
/// credentials, so the file belongs to the JVM's user.
struct AttachLock {
    _lock: Flock<File>,
}

impl AttachLock {
    fn take(p: &Process) -> anyhow::Result<AttachLock> {
        let path = p.path(&format!("/tmp/.vmview_attach_pid{}.lock", p.nspid));
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(OFlag::O_NOFOLLOW.bits())
            .open(&path)
            .map_err(|e| {
                hinted(
                    format!("cannot create the attach lock {}: {e}", path.display()),
                    "run vmview as the JVM's user (or as root)",
                )
            })?;
        let deadline = Instant::now() + LOCK_TIMEOUT;
        loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => return Ok(AttachLock { _lock: lock }),
                Err((f, nix::errno::Errno::EWOULDBLOCK)) if Instant::now() < deadline => {
                    file = f;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                    return Err(hinted(
                        format!(
                            "another vmview attach to pid {} has been talking to it for {} s",
                            p.pid,
                            LOCK_TIMEOUT.as_secs()
                        ),
                        "wait for it to finish (or stop it), then try again",
                    ))
                }
                Err((_, e)) => return Err(plain(format!("cannot lock {}: {e}", path.display()))),
            }
        }
    }
}

/// The JVM's effective uid and gid while alive, when vmview runs as root
/// and the JVM does not: HotSpot accepts only its own user (or root, on
/// newer JDKs) as a peer, and creates its files for its own user.
struct Credentials {
    restore: Option<(Uid, Gid)>,
}

impl Credentials {
    fn take(p: &Process) -> anyhow::Result<Credentials> {
        let (uid, gid) = (geteuid(), getegid());
        let (to_uid, to_gid) = (Uid::from_raw(p.uid), Gid::from_raw(p.gid));
        if !uid.is_root() || (to_uid == uid && to_gid == gid) {
            return Ok(Credentials { restore: None });
        }
        if let Err(e) = setegid(to_gid).and_then(|()| seteuid(to_uid)) {
            let _ = seteuid(uid);
            let _ = setegid(gid);
            return Err(plain(format!(
                "cannot take the uid {} and gid {} of pid {}: {e}",
                p.uid, p.gid, p.pid
            )));
        }
        Ok(Credentials {
            restore: Some((uid, gid)),
        })
    }
}

impl Drop for Credentials {
    fn drop(&mut self) {
        if let Some((uid, gid)) = self.restore {
            // Back to root first: only root may set the gid back.
            let _ = seteuid(uid);
            let _ = setegid(gid);
        }
    }
}
