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
//! pure bookkeeping), `packed.rs` (a request as the ledger keeps it), `pacing.rs` (the window and the cap per destination), `io_loop.rs`
//! (the [`Engine`]: the loop over a port), `mad_trace.rs` (the in-flight time series),
//! `config.rs` (its settings and counters), `error.rs` and `cancel.rs`.

mod cancel;
mod config;
mod error;
mod io_loop;
mod ledger;
pub mod mad_trace;
pub mod pacing;
mod packed;
mod request;

pub use crate::umad::{Dest, LocalPort, MadPort, Received, TransportError, GSI_QKEY};
pub use cancel::CancelToken;
pub use config::{
    EngineConfig, EngineStats, DEFAULT_MAX_OUTSTANDING, MAX_OUTSTANDING, SIMULATOR_MAX_OUTSTANDING,
};
pub use error::{MadError, UmadCall};
pub use io_loop::Engine;
pub use ledger::{Ledger, Outcome};
pub use packed::{DirectedGet, FollowUps, PackedRequest, PortSelectGet};
pub use request::{Request, Response, Target};

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
