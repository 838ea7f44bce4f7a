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

/// What a stop signal does: atomics only, or `_exit` (async-signal-safe).
fn on_signal(signal: libc::c_int) {
    let first = RECEIVED
        .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok();
    if !first && EXIT_ON_SECOND.load(Ordering::SeqCst) {
        signal_hook::low_level::exit(1);
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
    for &signal in signals {
        // SAFETY: the action only touches atomics or calls _exit, both async-signal-safe.
        let registered =
            unsafe { signal_hook::low_level::register(signal, move || on_signal(signal)) };
        if let Err(e) = registered {
            tracing::warn!("cannot catch signal {signal}: {e}");
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
