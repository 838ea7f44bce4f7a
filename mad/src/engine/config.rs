//! The engine's settings (how many MADs in flight, how long to wait, how often to retry)
//! and the counters it keeps.

use std::time::Duration;

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
/// [`INITIAL_WINDOW`](super::pacing::INITIAL_WINDOW) and grows only while replies come back in time, and no
/// destination sees more than [`PER_DESTINATION`](super::pacing::PER_DESTINATION) of these at once.
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
    /// Requests that failed with [`MadError::Timeout`](super::MadError::Timeout).
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
