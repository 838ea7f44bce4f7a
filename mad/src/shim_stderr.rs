//! Keeping the simulator shim's attach line off the user's terminal.
//!
//! libumad2sim connects to ibsim the first time the process looks at the InfiniBand
//! devices, and when no `SIM_HOST` names the node it attaches at, it says so on stderr
//! with libibmad's IBWARN: `ibwarn: [pid] sim_connect: attached as client N at node "X"`.
//! That is the shim talking about itself on every command. [`capture`] runs the first look
//! with stderr (fd 2) pointed at a memory file, then puts stderr back and passes on every
//! line but that one, which goes to the debug log. A real error the shim prints there (it
//! cannot reach ibsim, say) still reaches stderr, also when the shim exits the process
//! right after printing it: an exit handler passes on whatever was captured.
//!
//! Only under the shim (LD_PRELOAD naming libumad2sim); elsewhere nothing is redirected.

use std::io::Write;
use std::sync::atomic::{AtomicI32, Ordering};

/// The memory file stderr points at while capturing, and the saved real stderr; -1 when
/// not capturing.
static CAPTURE: AtomicI32 = AtomicI32::new(-1);
static SAVED: AtomicI32 = AtomicI32::new(-1);

/// What marks the shim's attach line.
const ATTACH_LINE: &str = "sim_connect: attached as client";

/// Whether this process runs under the simulator's shim.
pub fn under_shim() -> bool {
    std::env::var_os("LD_PRELOAD").is_some_and(|p| p.to_string_lossy().contains("umad2sim"))
}

/// Run `f` (the first call that touches the devices) with the shim's attach line kept off
/// stderr; outside the shim, just run it.
pub fn capture<T>(f: impl FnOnce() -> T) -> T {
    if !under_shim() || !start() {
        return f();
    }
    let result = f();
    finish();
    result
}

/// Point fd 2 at a fresh memory file, keeping the real stderr; false if that failed (then
/// nothing changed).
fn start() -> bool {
    // SAFETY: plain descriptor calls on fds this function owns or on fd 2; every failure
    // path undoes what was done.
    unsafe {
        let memfd = libc::memfd_create(c"ibscope-shim-stderr".as_ptr(), libc::MFD_CLOEXEC);
        if memfd < 0 {
            return false;
        }
        let saved = libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 3);
        if saved < 0 {
            libc::close(memfd);
            return false;
        }
        SAVED.store(saved, Ordering::SeqCst);
        CAPTURE.store(memfd, Ordering::SeqCst);
        static REGISTERED: std::sync::Once = std::sync::Once::new();
        REGISTERED.call_once(|| {
            libc::atexit(finish_at_exit);
        });
        if libc::dup2(memfd, 2) < 0 {
            finish();
            return false;
        }
    }
    true
}

extern "C" fn finish_at_exit() {
    finish();
}

/// Put the real stderr back and pass on what was captured (once; later calls do nothing).
fn finish() {
    let memfd = CAPTURE.swap(-1, Ordering::SeqCst);
    let saved = SAVED.swap(-1, Ordering::SeqCst);
    if memfd < 0 || saved < 0 {
        return;
    }
    let mut text = Vec::new();
    // SAFETY: both fds were opened by `start` and are closed here exactly once; the read
    // goes into a buffer of the stated length.
    unsafe {
        libc::dup2(saved, 2);
        libc::close(saved);
        libc::lseek(memfd, 0, libc::SEEK_SET);
        let mut buf = [0u8; 4096];
        loop {
            let n = libc::read(memfd, buf.as_mut_ptr().cast(), buf.len());
            if n <= 0 {
                break;
            }
            text.extend_from_slice(&buf[..n as usize]);
        }
        libc::close(memfd);
    }
    let text = String::from_utf8_lossy(&text);
    let (kept, attach) = split_attach_lines(&text);
    for line in attach {
        tracing::debug!(target: "ibscope::shim", "{line}");
    }
    if !kept.is_empty() {
        let _ = std::io::stderr().write_all(kept.as_bytes());
    }
}

/// Split captured stderr text into what to pass on and the shim's attach lines.
fn split_attach_lines(text: &str) -> (String, Vec<&str>) {
    let mut kept = String::new();
    let mut attach = Vec::new();
    for line in text.split_inclusive('\n') {
        if line.contains(ATTACH_LINE) {
            attach.push(line.trim_end());
        } else {
            kept.push_str(line);
        }
    }
    (kept, attach)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_attach_line_is_kept_back() {
        let text = "ibwarn: [42] sim_connect: attached as client 3 at node \"Switch1\"\n\
                    ibpanic: [42] sim_attach: can't connect to sim socket x\n\
                    partial line";
        let (kept, attach) = split_attach_lines(text);
        assert_eq!(
            attach,
            ["ibwarn: [42] sim_connect: attached as client 3 at node \"Switch1\""]
        );
        assert_eq!(
            kept,
            "ibpanic: [42] sim_attach: can't connect to sim socket x\npartial line"
        );
        assert_eq!(split_attach_lines(""), (String::new(), vec![]));
    }
}
