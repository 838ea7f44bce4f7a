//! Stopping on SIGINT / SIGTERM / SIGHUP: one place for the process's signal handling.
//!
//! The handler only records which signal came (an atomic store, async-signal-safe); the
//! code that waits polls [`received`] and stops cleanly, so cleanup (Drop, closing the
//! management port, stopping simulators) always runs. Optionally a second signal exits at
//! once, for an operator who does not want to wait for the clean stop.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// The first stop signal received (0: none yet).
static RECEIVED: AtomicI32 = AtomicI32::new(0);
/// Whether a second signal exits the process at once (code 1).
static EXIT_ON_SECOND: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(signal: libc::c_int) {
    let first = RECEIVED
        .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok();
    if !first && EXIT_ON_SECOND.load(Ordering::SeqCst) {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(1) };
    }
}

/// The signals that ask a long-running command to stop: Ctrl-C, `kill`, and the terminal
/// going away.
pub const STOP_SIGNALS: &[libc::c_int] = &[libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// What a second signal does once the first has asked for a clean stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Second {
    /// Nothing more: the clean stop goes on.
    Wait,
    /// Exit at once with code 1.
    Exit,
}

/// Catch `signals` (e.g. `[libc::SIGINT]`): from now on they only set [`received`].
pub fn install(signals: &[libc::c_int], second: Second) {
    EXIT_ON_SECOND.store(second == Second::Exit, Ordering::SeqCst);
    // SAFETY: the handler only touches atomics (or calls _exit); the action is zeroed,
    // then filled.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut action.sa_mask);
        action.sa_flags = libc::SA_RESTART;
        for &signal in signals {
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// The first signal caught since [`install`], if any.
pub fn received() -> Option<libc::c_int> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// Block (or unblock) the [`STOP_SIGNALS`] in the calling thread. Threads inherit the mask,
/// so blocking before spawning keeps the signals off worker threads: they reach the
/// thread that unblocks them again, which only waits.
pub fn block_stop_signals(block: bool) {
    // SAFETY: sigemptyset/sigaddset fill a local set; the old mask is not wanted.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &signal in STOP_SIGNALS {
            libc::sigaddset(&mut set, signal);
        }
        let how = if block {
            libc::SIG_BLOCK
        } else {
            libc::SIG_UNBLOCK
        };
        libc::pthread_sigmask(how, &set, std::ptr::null_mut());
    }
}

/// "SIGTERM", "SIGINT", "SIGHUP", or "a signal".
pub fn name(signal: libc::c_int) -> &'static str {
    match signal {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}
