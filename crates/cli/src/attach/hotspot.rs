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
//! HotSpot checks the peer's credentials, so vmview running as root takes
//! the JVM's effective uid and gid for the exchange. `<PID>` is the pid the
//! JVM sees in its own PID namespace, and `/tmp` is the JVM's, reached
//! through `/proc/PID/root` ([`Process::path`]).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::process::Process;
use crate::error::{hinted, plain};

/// How long the JVM may take to start its Attach Listener.
const LISTENER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a command may take to answer (a stop drains the buffers).
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `load LIBRARY OPTIONS` in the JVM; returns Agent_OnAttach's result
/// and the JVM's text.
pub fn load_agent(p: &Process, library: &str, options: &str) -> anyhow::Result<(i32, String)> {
    let _as_target = Credentials::take(p)?;
    let socket = p.path(&format!("/tmp/.java_pid{}", p.nspid));
    let mut stream = match UnixStream::connect(&socket) {
        Ok(s) => s,
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
    let trigger = candidates
        .iter()
        .find(|c| std::fs::File::create(c).is_ok())
        .cloned()
        .ok_or_else(|| {
            hinted(
                format!(
                    "cannot create {name} in the working directory or /tmp of pid {}",
                    p.pid
                ),
                "run vmview as the JVM's user (or as root)",
            )
        })?;
    let result = signal_and_wait(p, socket);
    let _ = std::fs::remove_file(&trigger);
    result
}

fn signal_and_wait(p: &Process, socket: &Path) -> anyhow::Result<()> {
    // SAFETY: kill(2) with a pid and a signal number has no memory effects.
    if unsafe { libc::kill(p.pid as libc::pid_t, libc::SIGQUIT) } != 0 {
        return Err(plain(format!(
            "cannot signal pid {}: {}",
            p.pid,
            std::io::Error::last_os_error()
        )));
    }
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

/// The JVM's effective uid and gid while alive, when vmview runs as root
/// and the JVM does not: HotSpot accepts only its own user (or root, on
/// newer JDKs) as a peer, and creates its files for its own user.
struct Credentials {
    restore: Option<(libc::uid_t, libc::gid_t)>,
}

impl Credentials {
    fn take(p: &Process) -> anyhow::Result<Credentials> {
        // SAFETY: plain getters.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        if uid != 0 || (p.uid == uid && p.gid == gid) {
            return Ok(Credentials { restore: None });
        }
        // SAFETY: setegid/seteuid change this process's credentials only.
        let ok = unsafe { libc::setegid(p.gid) == 0 && libc::seteuid(p.uid) == 0 };
        if !ok {
            let e = std::io::Error::last_os_error();
            // SAFETY: as above; back to root.
            unsafe {
                libc::seteuid(uid);
                libc::setegid(gid);
            }
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
            // SAFETY: back to the saved root credentials.
            unsafe {
                libc::seteuid(uid);
                libc::setegid(gid);
            }
        }
    }
}
