//! One request engine for every management class: a window of MADs in flight over one umad
//! port, matched to replies by transaction ID, each with its own deadline and retries.
//!
//! Single-threaded on purpose: the simulator shim's `poll()` only watches the first umad fd
//! and epoll is not intercepted at all, so the loop is "send up to the window, then
//! `umad_recv` with the nearest deadline as timeout". A slow or dead target only holds its
//! own window slot until its deadline; it never stalls the others.
//!
//! The bookkeeping (pending table, TIDs, deadlines, retries) is the pure [`Ledger`], driven
//! with explicit time so it is tested without a fabric. How much goes out at once is paced
//! ([`pacing`]): an adaptive window bounded by `max_outstanding`, and at most
//! [`pacing::PER_DESTINATION`] in flight to one destination.
//!
//! A send or receive error that means the transport itself is gone (device removed, the
//! simulator killed) breaks the engine: everything pending fails at once with
//! [`MadError::TransportLost`], and so does every later request, without a send.
//!
//! A [`CancelToken`] given with [`Engine::set_cancel`] stops a batch from another thread
//! (a signal handler's poller, say) within one MAD timeout: see [`Engine::run`].
//!
//! Files: `request.rs` (what goes out and comes back, typed by attribute), `ledger.rs` (the
//! pure bookkeeping), `pacing.rs` (the window and the cap per destination), `io_loop.rs`
//! (the [`Engine`]: the loop over a port), `trace.rs` (the in-flight time series),
//! `error.rs` and `cancel.rs`.

mod cancel;
mod error;
mod io_loop;
mod ledger;
pub mod pacing;
mod request;
pub mod trace;

use std::time::Duration;

pub use crate::umad::{Dest, LocalPort, MadPort, Received, TransportError, GSI_QKEY};
pub use cancel::CancelToken;
pub use error::{MadError, UmadCall};
pub use io_loop::Engine;
pub use ledger::{Ledger, Outcome};
pub use request::{Request, Response, Target};

/// More than about 330 MADs in flight deadlock libumad2sim (its socket buffers fill while it
/// holds a lock) and stall ibsim for every client. 64 gives most of the throughput (1 in
/// flight 15-20k MADs/s, 16 about 200k/s, 64 about 230-380k/s); 128 still keeps well clear
/// of the deadlock and discovered 8,192 hosts about 7% faster than 64 (1.01 s vs 1.09 s,
/// medians of 6), so that is the cap.
pub const SIMULATOR_MAX_OUTSTANDING: usize = 128;
/// An upper bound for real hardware too: the kernel queues sends per agent, and hundreds of
/// SMPs in flight only overrun switch SMA queues.
pub const MAX_OUTSTANDING: usize = 1024;
/// The default bound of the window: the window itself starts at
/// [`pacing::INITIAL_WINDOW`] and grows only while replies come back in time, and no
/// destination sees more than [`pacing::PER_DESTINATION`] of these at once.
pub const DEFAULT_MAX_OUTSTANDING: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineConfig {
    /// Requests in flight at once at most: the bound of the adaptive window (clamped to
    /// 1..=128 under the simulator).
    pub max_outstanding: usize,
    /// Deadline of one attempt.
    pub timeout: Duration,
    /// Further attempts after the first, each with a fresh TID.
    pub retries: u32,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_outstanding: DEFAULT_MAX_OUTSTANDING,
            timeout: Duration::from_millis(200),
            retries: 3,
        }
    }
}

/// Counters since the engine was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct EngineStats {
    /// MADs handed to the kernel (every attempt counts).
    pub sent: u64,
    /// MADs read back (replies, unroutable returns and unmatched ones).
    pub received: u64,
    /// Attempts after the first.
    pub retries: u64,
    /// Requests that failed with [`MadError::Timeout`].
    pub timeouts: u64,
    /// Replies matching no pending request: late replies to a finished request, or strays.
    pub unmatched: u64,
    /// Sends given back with umad status ETIMEDOUT (dead route, unknown LID).
    pub unroutable: u64,
    /// Times the window was cut (a loss episode: timeouts or busy replies).
    pub window_cuts: u64,
    /// Cuts taken back: the reply that seemed lost came after all.
    pub window_cuts_undone: u64,
    /// Requests completed by a reply to an attempt already resent (its resend was not
    /// needed).
    pub late_replies: u64,
    /// Times a request waited because its destination had its cap in flight.
    pub dest_waits: u64,
}

#[cfg(test)]
pub(crate) mod testing {
    use super::Request;
    use crate::attr::NodeInfo;
    use crate::smp::{DrPath, SmpRoute};

    /// A NodeInfo Get along the directed route `path`.
    pub(crate) fn dr(path: &[u8]) -> Request {
        let route = SmpRoute::Directed(DrPath::from_hops(path).unwrap());
        Request::get::<NodeInfo>(&route, 0)
    }
}
