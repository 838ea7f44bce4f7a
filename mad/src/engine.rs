//! One request engine for every management class: a window of MADs in flight over one umad
//! port, matched to replies by transaction ID, each with its own deadline and retries.
//!
//! Single-threaded on purpose: the simulator shim's `poll()` only watches the first umad fd
//! and epoll is not intercepted at all, so the loop is "send up to the window, then
//! `umad_recv` with the nearest deadline as timeout". A slow or dead target only holds its
//! own window slot until its deadline; it never stalls the others.
//!
//! The bookkeeping (pending table, TIDs, deadlines, retries) is the pure [`Ledger`], driven
//! with explicit time so it is tested without a fabric.
//!
//! A send or receive error that means the transport itself is gone (device removed, the
//! simulator killed) breaks the engine: everything pending fails at once with
//! [`MadError::TransportLost`], and so does every later request, without a send.
//!
//! A [`CancelToken`] given with [`Engine::set_cancel`] stops a batch from another thread
//! (a signal handler's poller, say) within one MAD timeout: see [`Engine::run`].

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::error::DecodeError;
use crate::header::{class, method, MadHeader, MadStatus, MAD_SIZE};
use crate::smp::{self, MadView, SmpRoute, GMP_DATA_LEN, GMP_DATA_OFFSET, SA_DATA_LEN};
use crate::smp::{SA_DATA_OFFSET, SMP_DATA_LEN, SMP_DATA_OFFSET};
use crate::umad::{class_version, errno_description, is_transport_gone, UmadPort};
pub use crate::umad::{Dest, LocalPort, MadPort, Received, TransportError, GSI_QKEY};

/// More than about 330 MADs in flight deadlock libumad2sim (its socket buffers fill while it
/// holds a lock) and stall ibsim for every client. 64 gives most of the throughput (1 in
/// flight 15-20k MADs/s, 16 about 200k/s, 64 about 230-380k/s); 128 still keeps well clear
/// of the deadlock and discovered 8,192 hosts about 7% faster than 64 (1.01 s vs 1.09 s,
/// medians of 6), so that is the cap.
pub const SIMULATOR_MAX_OUTSTANDING: usize = 128;
/// An upper bound for real hardware too: the kernel queues sends per agent, and hundreds of
/// SMPs in flight only overrun switch SMA queues.
pub const MAX_OUTSTANDING: usize = 1024;

/// ETIMEDOUT in the umad header: the kernel (or the shim, at once) gave the send back
/// unanswered, e.g. a directed route through a dead port or an unknown LID.
const UMAD_STATUS_TIMEOUT: i32 = 110;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineConfig {
    /// Requests in flight at once (clamped to 1..=128 under the simulator).
    pub max_outstanding: usize,
    /// Deadline of one attempt.
    pub timeout: Duration,
    /// Further attempts after the first, each with a fresh TID.
    pub retries: u32,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_outstanding: 16,
            timeout: Duration::from_millis(200),
            retries: 3,
        }
    }
}

/// One MAD to send and where to. The TID is filled in by the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub mad: [u8; MAD_SIZE],
    pub dest: Dest,
}

impl Request {
    /// SubnGet(attribute) over a LID or directed route.
    pub fn smp_get(route: &SmpRoute, attribute_id: u16, modifier: u32) -> Self {
        Request {
            mad: smp::build_smp(route, method::GET, attribute_id, modifier, 0, &[]),
            dest: Dest::Smp(route.clone()),
        }
    }

    /// SubnSet(attribute) with a payload of at most 64 bytes (longer is cut).
    pub fn smp_set(route: &SmpRoute, attribute_id: u16, modifier: u32, data: &[u8]) -> Self {
        Request {
            mad: smp::build_smp(route, method::SET, attribute_id, modifier, 0, data),
            dest: Dest::Smp(route.clone()),
        }
    }

    /// A PerfMgt request to the PMA at `lid` (QP1).
    pub fn perf(lid: u16, method_code: u8, attribute_id: u16, modifier: u32, data: &[u8]) -> Self {
        Request {
            mad: smp::build_gmp(class::PERF, method_code, attribute_id, modifier, data),
            dest: Dest::Gsi {
                lid,
                qpn: 1,
                qkey: GSI_QKEY,
            },
        }
    }

    /// An SA request to the SM at `sm_lid` (QP1).
    pub fn sa(
        sm_lid: u16,
        method_code: u8,
        attribute_id: u16,
        comp_mask: u64,
        record: &[u8],
    ) -> Self {
        Request {
            mad: smp::build_sa(method_code, attribute_id, comp_mask, 0, record),
            dest: Dest::Gsi {
                lid: sm_lid,
                qpn: 1,
                qkey: GSI_QKEY,
            },
        }
    }

    pub fn mgmt_class(&self) -> u8 {
        self.mad[1]
    }

    pub fn class_version(&self) -> u8 {
        self.mad[2]
    }
}

/// A successful reply: the whole 256-byte MAD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub mad: Box<[u8; MAD_SIZE]>,
}

impl Response {
    pub fn view(&self) -> Result<MadView<'_>, DecodeError> {
        MadView::parse(&self.mad[..])
    }
    pub fn header(&self) -> Result<MadHeader, DecodeError> {
        MadHeader::decode(&self.mad[..])
    }
    /// The 64-byte SMP attribute payload.
    pub fn smp_data(&self) -> &[u8] {
        &self.mad[SMP_DATA_OFFSET..SMP_DATA_OFFSET + SMP_DATA_LEN]
    }
    /// The 192-byte PerfMgt payload.
    pub fn gmp_data(&self) -> &[u8] {
        &self.mad[GMP_DATA_OFFSET..GMP_DATA_OFFSET + GMP_DATA_LEN]
    }
    /// The 200-byte SA payload.
    pub fn sa_data(&self) -> &[u8] {
        &self.mad[SA_DATA_OFFSET..SA_DATA_OFFSET + SA_DATA_LEN]
    }
}

/// The libibumad call that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UmadCall {
    Send,
    Recv,
}

impl std::fmt::Display for UmadCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            UmadCall::Send => "umad send",
            UmadCall::Recv => "umad receive",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MadError {
    #[error(
        "no reply after {attempts} attempt(s): the target is unreachable (dead link, wrong \
         route or LID) or not answering"
    )]
    Timeout { attempts: u32 },
    #[error("the target answered with MAD status {0}")]
    Status(MadStatus),
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The transport itself is gone (device removed, simulator dead): every request of
    /// the engine fails with this from then on, without being sent.
    #[error(
        "lost the connection to the fabric ({call} failed: {}): is the simulator or the \
         ib_umad device still there?",
        errno_description(*errno)
    )]
    TransportLost { call: UmadCall, errno: i32 },
    #[error("malformed reply: {0}")]
    Decode(#[from] DecodeError),
    /// The engine's [`CancelToken`] was set: the request was not sent, or was in flight and
    /// its deadline passed without a reply; no retry is made after a cancel.
    #[error("cancelled before a reply came (the engine is being stopped)")]
    Cancelled,
}

impl MadError {
    /// A transport failure as the engine reports it: [`MadError::TransportLost`] when the
    /// errno says the transport is gone (see [`crate::umad::is_transport_gone`]), else
    /// [`MadError::Transport`].
    pub fn from_transport(error: TransportError) -> MadError {
        match error {
            TransportError::Send { errno } if is_transport_gone(errno) => MadError::TransportLost {
                call: UmadCall::Send,
                errno,
            },
            TransportError::Recv { errno } if is_transport_gone(errno) => MadError::TransportLost {
                call: UmadCall::Recv,
                errno,
            },
            other => MadError::Transport(other),
        }
    }

    pub fn is_transport_lost(&self) -> bool {
        matches!(self, MadError::TransportLost { .. })
    }

    pub fn is_cancelled(&self) -> bool {
        matches!(self, MadError::Cancelled)
    }
}

/// A flag shared between an [`Engine`] and whoever may want to stop it (clones share it).
/// Setting it is one atomic store, so any thread may do it; the engine reads it once per
/// turn of its loop, a single atomic load.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub fn new() -> Self {
        CancelToken::default()
    }

    /// Stop every engine holding this token: see [`Engine::run`] for what happens to the
    /// requests of the running batch.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Release);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Clear the flag: the engines holding the token run requests again.
    pub fn reset(&self) {
        self.0.store(false, Ordering::Release);
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
}

/// What a received MAD meant to the [`Ledger`].
#[derive(Debug)]
pub enum Outcome<T> {
    /// The request finished.
    Done(T, Result<Response, MadError>),
    /// It belongs to a pending request that goes on (resent, or a superseded attempt).
    Pending,
    /// No pending request has this TID, or it is not a reply to what was asked.
    Unmatched,
}

struct Entry<T> {
    token: T,
    request: Request,
    /// Sends so far.
    attempts: u32,
    /// The TID of the latest send (0 before the first).
    last_tid: u32,
    /// Earlier TIDs of a resent request: a late reply to any of them still wins. Empty (no
    /// allocation) unless the request was resent.
    older_tids: Vec<u32>,
    in_flight: bool,
}

/// Entries by id. Ids are handed out in order and requests finish roughly in order, so a
/// deque indexed by `id - first` does what a hash map did, without hashing or probing a
/// table that holds the whole discovery frontier.
struct Slab<E> {
    first: u64,
    slots: VecDeque<Option<E>>,
    live: usize,
}

impl<E> Slab<E> {
    fn new() -> Self {
        Slab {
            first: 0,
            slots: VecDeque::new(),
            live: 0,
        }
    }
    /// Store `entry` under the next id (`first + slots.len()`), which the caller hands out.
    fn push(&mut self, id: u64, entry: E) {
        if self.slots.is_empty() {
            self.first = id;
        }
        debug_assert_eq!(id, self.first + self.slots.len() as u64);
        self.slots.push_back(Some(entry));
        self.live += 1;
    }
    fn index(&self, id: u64) -> Option<usize> {
        usize::try_from(id.checked_sub(self.first)?).ok()
    }
    fn get(&self, id: u64) -> Option<&E> {
        self.slots.get(self.index(id)?)?.as_ref()
    }
    fn get_mut(&mut self, id: u64) -> Option<&mut E> {
        let i = self.index(id)?;
        self.slots.get_mut(i)?.as_mut()
    }
    fn contains(&self, id: u64) -> bool {
        self.get(id).is_some()
    }
    fn remove(&mut self, id: u64) -> Option<E> {
        let i = self.index(id)?;
        let entry = self.slots.get_mut(i)?.take()?;
        self.live -= 1;
        while let Some(None) = self.slots.front() {
            self.slots.pop_front();
            self.first += 1;
        }
        Some(entry)
    }
    fn is_empty(&self) -> bool {
        self.live == 0
    }
    fn ids(&self) -> Vec<u64> {
        (self.first..)
            .zip(self.slots.iter())
            .filter(|(_, e)| e.is_some())
            .map(|(id, _)| id)
            .collect()
    }
}

/// The pending table of one batch: TIDs, deadlines and retries, with time passed in.
pub struct Ledger<T> {
    window: usize,
    timeout: Duration,
    retries: u32,
    next_tid: u32,
    next_id: u64,
    entries: Slab<Entry<T>>,
    /// Waiting to be sent; retries go in front.
    ready: VecDeque<u64>,
    /// (deadline, entry, attempt) in send order, hence in deadline order since the timeout
    /// is fixed per batch. Finished or resent entries are skipped lazily.
    timers: VecDeque<(Instant, u64, u32)>,
    by_tid: foldhash::HashMap<u32, u64>,
    in_flight: usize,
    stats: EngineStats,
    /// Set by [`Ledger::cancel`]: nothing more is sent or resent.
    cancelled: bool,
}

impl<T> Ledger<T> {
    pub fn new(first_tid: u32, window: usize, timeout: Duration, retries: u32) -> Self {
        Ledger {
            window: window.max(1),
            timeout,
            retries,
            next_tid: first_tid,
            next_id: 0,
            entries: Slab::new(),
            ready: VecDeque::new(),
            timers: VecDeque::new(),
            by_tid: foldhash::HashMap::default(),
            in_flight: 0,
            stats: EngineStats::default(),
            cancelled: false,
        }
    }

    pub fn push(&mut self, token: T, request: Request) {
        let id = self.next_id;
        self.next_id += 1;
        self.entries.push(
            id,
            Entry {
                token,
                request,
                attempts: 0,
                last_tid: 0,
                older_tids: Vec::new(),
                in_flight: false,
            },
        );
        self.ready.push_back(id);
    }

    /// Nothing queued, nothing in flight.
    pub fn is_idle(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// The TID the next send will get (carry it to the next batch).
    pub fn next_tid(&self) -> u32 {
        self.next_tid
    }

    /// Retries, timeouts, unmatched and unroutable counts of this batch (sent/received are
    /// the engine's).
    pub fn stats(&self) -> EngineStats {
        self.stats
    }

    fn alloc_tid(&mut self) -> u32 {
        loop {
            let tid = self.next_tid;
            self.next_tid = self.next_tid.wrapping_add(1);
            // 0 is what an uninitialised MAD carries; skip it and any TID still pending.
            if tid != 0 && !self.by_tid.contains_key(&tid) {
                return tid;
            }
        }
    }

    /// The next request to send, if the window has room (and the batch was not
    /// cancelled): its fresh TID and the request.
    pub fn next_send(&mut self, now: Instant) -> Option<(u32, &Request)> {
        if self.cancelled || self.in_flight >= self.window {
            return None;
        }
        let id = loop {
            let id = self.ready.pop_front()?;
            if self.entries.contains(id) {
                break id;
            }
        };
        let tid = self.alloc_tid();
        let entry = self.entries.get_mut(id)?;
        entry.attempts += 1;
        if entry.last_tid != 0 {
            entry.older_tids.push(entry.last_tid);
        }
        entry.last_tid = tid;
        entry.in_flight = true;
        self.in_flight += 1;
        self.by_tid.insert(tid, id);
        self.timers
            .push_back((now + self.timeout, id, entry.attempts));
        Some((tid, &entry.request))
    }

    fn finish(&mut self, id: u64) -> Option<Entry<T>> {
        let entry = self.entries.remove(id)?;
        self.by_tid.remove(&entry.last_tid);
        for tid in &entry.older_tids {
            self.by_tid.remove(tid);
        }
        if entry.in_flight {
            self.in_flight -= 1;
        }
        Some(entry)
    }

    /// The current attempt failed: queue another, or give up with `error(attempts)`. After
    /// a cancel the retry is not made: the request fails with [`MadError::Cancelled`]
    /// (with `error` when its retries were used up anyway).
    fn retry_or_fail(
        &mut self,
        id: u64,
        error: impl FnOnce(u32) -> MadError,
    ) -> Option<(T, MadError)> {
        let entry = self.entries.get_mut(id)?;
        if entry.in_flight {
            entry.in_flight = false;
            self.in_flight -= 1;
        }
        if entry.attempts <= self.retries {
            if self.cancelled {
                return self.finish(id).map(|e| (e.token, MadError::Cancelled));
            }
            self.stats.retries += 1;
            self.ready.push_front(id);
            return None;
        }
        let attempts = entry.attempts;
        let err = error(attempts);
        if matches!(err, MadError::Timeout { .. }) {
            self.stats.timeouts += 1;
        }
        self.finish(id).map(|e| (e.token, err))
    }

    /// The send of `tid` failed locally: the request ends with that error.
    pub fn send_failed(&mut self, tid: u32, error: MadError) -> Option<(T, MadError)> {
        let id = *self.by_tid.get(&tid)?;
        self.finish(id).map(|e| (e.token, error))
    }

    /// Account for a received MAD: `umad_status` from the umad header, `mad` the 256 bytes.
    pub fn on_reply(&mut self, umad_status: i32, mad: &[u8; MAD_SIZE]) -> Outcome<T> {
        let Ok(view) = MadView::parse(&mad[..]) else {
            self.stats.unmatched += 1;
            return Outcome::Unmatched;
        };
        // Only the low 32 bits are ours: the kernel and the shim rewrite the upper half.
        let tid = view.header.transaction_id as u32;
        let Some(&id) = self.by_tid.get(&tid) else {
            self.stats.unmatched += 1;
            return Outcome::Unmatched;
        };
        let Some(entry) = self.entries.get(id) else {
            self.stats.unmatched += 1;
            return Outcome::Unmatched;
        };
        let latest = entry.in_flight && entry.last_tid == tid;
        if umad_status != 0 {
            if umad_status == UMAD_STATUS_TIMEOUT {
                self.stats.unroutable += 1;
            }
            // A superseded attempt failing says nothing about the one in flight.
            if !latest {
                return Outcome::Pending;
            }
            let done = self.retry_or_fail(id, |attempts| {
                if umad_status == UMAD_STATUS_TIMEOUT {
                    MadError::Timeout { attempts }
                } else {
                    MadError::Transport(TransportError::Send { errno: umad_status })
                }
            });
            return done.map_or(Outcome::Pending, |(t, e)| Outcome::Done(t, Err(e)));
        }
        if !view.header.response || view.header.mgmt_class != entry.request.mgmt_class() {
            self.stats.unmatched += 1;
            return Outcome::Unmatched;
        }
        // MadView::status masks the directed-route D bit.
        let status = view.status();
        if status.0 & 0x1 != 0 {
            // Busy: ask again (bounded by the same retry budget).
            if !latest {
                return Outcome::Pending;
            }
            let done = self.retry_or_fail(id, |_| MadError::Status(status));
            return done.map_or(Outcome::Pending, |(t, e)| Outcome::Done(t, Err(e)));
        }
        let Some(entry) = self.finish(id) else {
            return Outcome::Unmatched;
        };
        if !status.is_ok() {
            return Outcome::Done(entry.token, Err(MadError::Status(status)));
        }
        Outcome::Done(
            entry.token,
            Ok(Response {
                mad: Box::new(*mad),
            }),
        )
    }

    fn timer_is_live(&self, id: u64, attempt: u32) -> bool {
        self.entries
            .get(id)
            .is_some_and(|e| e.in_flight && e.attempts == attempt)
    }

    /// Drop finished or superseded timers from the front.
    fn prune_timers(&mut self) {
        while let Some(&(_, id, attempt)) = self.timers.front() {
            if self.timer_is_live(id, attempt) {
                break;
            }
            self.timers.pop_front();
        }
    }

    /// The nearest deadline of a request in flight.
    pub fn next_deadline(&mut self) -> Option<Instant> {
        self.prune_timers();
        self.timers.front().map(|&(d, _, _)| d)
    }

    /// Handle every deadline at or before `now`: resend (fresh TID) or fail with Timeout.
    /// A late reply to an earlier TID of a resent request still counts.
    pub fn expire(&mut self, now: Instant, failed: &mut Vec<(T, MadError)>) {
        loop {
            self.prune_timers();
            let Some(&(deadline, id, _)) = self.timers.front() else {
                return;
            };
            if deadline > now {
                return;
            }
            self.timers.pop_front();
            if let Some(done) = self.retry_or_fail(id, |attempts| MadError::Timeout { attempts }) {
                failed.push(done);
            }
        }
    }

    /// Stop the batch: from now on nothing is sent or resent. Every request not in flight
    /// (never sent, or waiting for a resend) ends here with [`MadError::Cancelled`], in
    /// push order. Requests in flight stay: a reply still completes them, and at their
    /// deadline they fail with `Cancelled` instead of being resent. Requests pushed later
    /// wait for the next call (call it again after pushing follow-ups).
    pub fn cancel(&mut self) -> Vec<(T, MadError)> {
        self.cancelled = true;
        self.ready.clear();
        let mut out = Vec::new();
        for id in self.entries.ids() {
            if self.entries.get(id).is_some_and(|e| !e.in_flight) {
                if let Some(e) = self.finish(id) {
                    out.push((e.token, MadError::Cancelled));
                }
            }
        }
        out
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled
    }

    /// End every request, queued or in flight, with `error`, in the order they were
    /// pushed.
    pub fn fail_all(&mut self, error: &MadError) -> Vec<(T, MadError)> {
        // In push order: ids() walks the slab front to back.
        let ids = self.entries.ids();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(e) = self.finish(id) {
                out.push((e.token, error.clone()));
            }
        }
        self.ready.clear();
        self.timers.clear();
        out
    }
}

/// The request engine over one local port ([`UmadPort`]; tests drive it over a fake
/// [`MadPort`]).
#[derive(Debug)]
pub struct Engine<P: MadPort = UmadPort> {
    port: P,
    config: EngineConfig,
    /// Agent per management class, registered on first use.
    agents: Vec<(u8, u32)>,
    next_tid: u32,
    stats: EngineStats,
    /// M_Key put into every SMP sent (0: none; only fabrics whose SM sets M_Keys need one).
    m_key: u64,
    /// Set once a send or receive says the transport is gone: from then on every request
    /// fails with this error at once, without being sent.
    lost: Option<MadError>,
    /// Set from outside to stop the running batch and refuse later ones.
    cancel: Option<CancelToken>,
}

fn ceil_ms(d: Duration) -> u32 {
    u32::try_from(d.as_micros().div_ceil(1000)).unwrap_or(u32::MAX)
}

impl Engine<UmadPort> {
    /// Open a local port (see [`UmadPort::open`] for the defaults).
    pub fn open(
        ca: Option<&str>,
        port: Option<u8>,
        config: EngineConfig,
    ) -> Result<Engine, TransportError> {
        let port = UmadPort::open(ca, port)?;
        // Start TIDs somewhere unpredictable so a stray reply meant for an earlier process
        // on this port is unlikely to match.
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
            ^ (std::process::id() << 12);
        Ok(Engine::with_port(port, config, seed | 1))
    }
}

impl<P: MadPort> Engine<P> {
    /// An engine over an already opened port, TIDs starting at `first_tid`.
    pub fn with_port(port: P, config: EngineConfig, first_tid: u32) -> Engine<P> {
        let mut engine = Engine {
            port,
            config,
            agents: Vec::new(),
            next_tid: first_tid,
            stats: EngineStats::default(),
            m_key: 0,
            lost: None,
            cancel: None,
        };
        engine.set_config(config);
        engine
    }

    pub fn local(&self) -> &LocalPort {
        self.port.info()
    }

    pub fn config(&self) -> EngineConfig {
        self.config
    }

    /// Change window, timeout or retries for the next batches (the window is clamped, see
    /// [`SIMULATOR_MAX_OUTSTANDING`]).
    pub fn set_config(&mut self, config: EngineConfig) {
        let cap = if self.port.info().is_simulator() {
            SIMULATOR_MAX_OUTSTANDING
        } else {
            MAX_OUTSTANDING
        };
        if config.max_outstanding > cap {
            tracing::warn!(
                requested = config.max_outstanding,
                cap,
                "max_outstanding clamped"
            );
        }
        self.config = EngineConfig {
            max_outstanding: config.max_outstanding.clamp(1, cap),
            ..config
        };
    }

    /// The M_Key every SMP is sent with (IBA 14.2.4): a request built with M_Key 0 gets
    /// this one; a request that carries its own non-zero M_Key keeps it.
    pub fn set_m_key(&mut self, m_key: u64) {
        self.m_key = m_key;
    }

    pub fn m_key(&self) -> u64 {
        self.m_key
    }

    /// Stop requests through `token` (None: no token, the default). See [`Engine::run`]
    /// for what a cancel does.
    pub fn set_cancel(&mut self, token: Option<CancelToken>) {
        self.cancel = token;
    }

    /// Whether the engine's token is set now.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(CancelToken::is_cancelled)
    }

    /// The [`MadError::TransportLost`] that broke this engine, if one did.
    pub fn transport_lost(&self) -> Option<&MadError> {
        self.lost.as_ref()
    }

    pub fn stats(&self) -> EngineStats {
        self.stats
    }

    fn agent_for(&mut self, mgmt_class: u8) -> Result<u32, TransportError> {
        if let Some(&(_, agent)) = self.agents.iter().find(|(c, _)| *c == mgmt_class) {
            return Ok(agent);
        }
        let agent = self.port.register(mgmt_class, class_version(mgmt_class))?;
        self.agents.push((mgmt_class, agent));
        Ok(agent)
    }

    fn transmit(&mut self, tid: u32, request: &Request) -> Result<(), TransportError> {
        let agent = self.agent_for(request.mgmt_class())?;
        let mut mad = request.mad;
        mad[8..12].fill(0);
        mad[12..16].copy_from_slice(&tid.to_be_bytes());
        let is_smp = matches!(request.mgmt_class(), class::SMI_LID | class::SMI_DIRECT);
        if is_smp && mad[24..32] == [0; 8] {
            mad[24..32].copy_from_slice(&self.m_key.to_be_bytes());
        }
        let timeout_ms = ceil_ms(self.config.timeout);
        // Kernel retries 0: the engine resends itself, with a fresh TID.
        self.port.send(agent, &mad, &request.dest, timeout_ms, 0)?;
        self.stats.sent += 1;
        Ok(())
    }

    /// Note a transport failure: a lost transport breaks the engine for good.
    fn classify(&mut self, error: TransportError) -> MadError {
        let error = MadError::from_transport(error);
        if error.is_transport_lost() && self.lost.is_none() {
            tracing::debug!(%error, "transport lost; failing every request from now on");
            self.lost = Some(error.clone());
        }
        error
    }

    /// Run a batch. `on_done` sees each request as it completes (in any order) and may push
    /// follow-ups into the `Vec` it is handed; they join the same window. Returns when
    /// nothing is pending.
    ///
    /// Once the transport is lost (see [`Engine::transport_lost`]) every request still
    /// queued or in flight, and every later one, fails at once with
    /// [`MadError::TransportLost`] and nothing more is sent.
    ///
    /// The cancel token (see [`Engine::set_cancel`]) is read once per turn of the loop, so
    /// a cancel is seen at the latest when the current wait for a reply ends (the nearest
    /// deadline). From then on nothing is sent and nothing resent; queued requests, and
    /// follow-ups pushed from `on_done`, fail at once with [`MadError::Cancelled`]; a
    /// request in flight keeps its slot until its reply (which completes it as usual) or
    /// its deadline (then `Cancelled`, unless its retries were used up: `Timeout`).
    /// Waiting for those keeps the replies already on their way (on a live fabric nearly
    /// all, within microseconds) and costs at most one timeout for a target that does not
    /// answer. Every request in flight was sent before the cancel (or within the
    /// microseconds between the check and a send), so a cancelled batch ends about one
    /// timeout after the cancel at the latest. While the token stays set, later batches and
    /// [`Engine::call`]s fail at once with `Cancelled` without a send; after
    /// [`CancelToken::reset`] the engine works again (from the next batch on).
    pub fn run<T>(
        &mut self,
        requests: impl IntoIterator<Item = (T, Request)>,
        mut on_done: impl FnMut(T, Result<Response, MadError>, &mut Vec<(T, Request)>),
    ) {
        let mut ledger = Ledger::new(
            self.next_tid,
            self.config.max_outstanding,
            self.config.timeout,
            self.config.retries,
        );
        for (token, request) in requests {
            ledger.push(token, request);
        }
        let mut follow_ups = Vec::new();
        let mut done: Vec<(T, Result<Response, MadError>)> = Vec::new();
        let mut failed = Vec::new();
        // A receive error that does not mean the transport is gone still leaves this
        // batch unable to read replies: fail whatever is left of it with that error.
        let mut broken: Option<MadError> = None;
        while !ledger.is_idle() {
            if let Some(error) = self.lost.as_ref().or(broken.as_ref()) {
                done.extend(ledger.fail_all(error).into_iter().map(|(t, e)| (t, Err(e))));
            }
            // Once cancelled, the batch stays so (a reset of the token counts from the next
            // batch): follow-ups pushed since the last turn fail here.
            if ledger.is_cancelled() || self.is_cancelled() {
                done.extend(ledger.cancel().into_iter().map(|(t, e)| (t, Err(e))));
            }
            while let Some((tid, request)) = ledger.next_send(Instant::now()) {
                if let Err(e) = self.transmit(tid, request) {
                    let error = self.classify(e);
                    if let Some((t, e)) = ledger.send_failed(tid, error) {
                        done.push((t, Err(e)));
                    }
                    if let Some(lost) = &self.lost {
                        done.extend(ledger.fail_all(lost).into_iter().map(|(t, e)| (t, Err(e))));
                        break;
                    }
                }
            }
            if ledger.in_flight() > 0 {
                let wait = ledger
                    .next_deadline()
                    .map(|d| ceil_ms(d.saturating_duration_since(Instant::now())))
                    .unwrap_or(0);
                // Block for the first reply only, then take whatever else is already
                // queued before refilling the window: replies and sends then move in
                // bursts, which saves a thread hand-off per MAD in the shim (and a
                // syscall round per MAD on hardware).
                let mut wait = wait;
                for _ in 0..ledger.in_flight() {
                    match self.port.recv(wait) {
                        Ok(Some(rx)) => {
                            self.stats.received += 1;
                            if let Outcome::Done(t, r) = ledger.on_reply(rx.status, &rx.mad) {
                                done.push((t, r));
                            }
                            wait = 0;
                        }
                        Ok(None) => break,
                        Err(e) => {
                            let error = self.classify(e);
                            tracing::error!(%error, "umad receive failed; failing pending MADs");
                            broken = Some(error);
                            break;
                        }
                    }
                }
                if self.lost.is_none() && broken.is_none() {
                    ledger.expire(Instant::now(), &mut failed);
                    done.extend(failed.drain(..).map(|(t, e)| (t, Err(e))));
                }
            }
            for (token, result) in done.drain(..) {
                on_done(token, result, &mut follow_ups);
                for (t, r) in follow_ups.drain(..) {
                    ledger.push(t, r);
                }
            }
        }
        let s = ledger.stats();
        self.stats.retries += s.retries;
        self.stats.timeouts += s.timeouts;
        self.stats.unmatched += s.unmatched;
        self.stats.unroutable += s.unroutable;
        self.next_tid = ledger.next_tid();
    }

    /// One request, waited for.
    pub fn call(&mut self, request: Request) -> Result<Response, MadError> {
        let mut out = None;
        self.run([((), request)], |(), result, _| out = Some(result));
        // run() always completes every request it was given.
        out.unwrap_or(Err(MadError::Timeout { attempts: 0 }))
    }

    /// Read replies still on their way (sends not yet answered), for at most `limit`.
    fn drain(&mut self, limit: Duration) {
        let end = Instant::now() + limit;
        while self.stats.sent > self.stats.received {
            let now = Instant::now();
            if now >= end {
                break;
            }
            match self.port.recv(ceil_ms(end - now)) {
                Ok(Some(_)) => {
                    self.stats.received += 1;
                    self.stats.unmatched += 1;
                }
                Ok(None) => {}
                Err(_) => break,
            }
        }
    }
}

impl<P: MadPort> Drop for Engine<P> {
    fn drop(&mut self) {
        // A reply arriving after its agent is unregistered kills the shim's receiver thread:
        // give late replies (to requests that already timed out) a short while to arrive.
        // With the transport gone no reply will come: do not wait for one.
        if self.lost.is_none() {
            self.drain((self.config.timeout * 2).min(Duration::from_secs(1)));
        }
        for (_, agent) in std::mem::take(&mut self.agents) {
            self.port.unregister(agent);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::attr;
    use crate::smp::DrPath;

    const T: Duration = Duration::from_millis(100);

    #[test]
    fn slab_keeps_ids_across_holes_and_advances_past_them() {
        let mut slab = Slab::new();
        for id in 10..14 {
            slab.push(id, id * 100);
        }
        assert_eq!(slab.remove(11), Some(1100));
        assert_eq!(slab.remove(11), None);
        assert_eq!(slab.get(12), Some(&1200));
        assert_eq!(slab.remove(10), Some(1000));
        // 10 and 11 are gone: the front moved past both.
        assert_eq!(slab.first, 12);
        assert_eq!(slab.ids(), vec![12, 13]);
        assert!(slab.get(9).is_none() && slab.get(99).is_none());
        slab.remove(13);
        slab.remove(12);
        assert!(slab.is_empty());
        slab.push(14, 1);
        assert_eq!(slab.get(14), Some(&1));
    }

    fn dr(path: &[u8]) -> Request {
        let route = SmpRoute::Directed(DrPath::new(path.to_vec()).unwrap());
        Request::smp_get(&route, attr::NODE_INFO, 0)
    }

    /// The reply a node would send to `request` sent under `tid`.
    fn reply(request: &Request, tid: u32, status: u16) -> [u8; MAD_SIZE] {
        let mut mad = request.mad;
        mad[3] |= 0x80;
        mad[4..6].copy_from_slice(&status.to_be_bytes());
        // Upper half as the kernel rewrites it: must be ignored.
        mad[8..12].copy_from_slice(&0xdead_beefu32.to_be_bytes());
        mad[12..16].copy_from_slice(&tid.to_be_bytes());
        mad[64] = 0x42;
        mad
    }

    /// What the shim gives back for an unroutable request: the request itself, status 110.
    fn returned(request: &Request, tid: u32) -> [u8; MAD_SIZE] {
        let mut mad = request.mad;
        mad[12..16].copy_from_slice(&tid.to_be_bytes());
        mad
    }

    fn send(l: &mut Ledger<u32>, now: Instant) -> Option<(u32, Request)> {
        l.next_send(now).map(|(t, r)| (t, r.clone()))
    }

    fn done(o: Outcome<u32>) -> (u32, Result<Response, MadError>) {
        match o {
            Outcome::Done(t, r) => (t, r),
            other => panic!("expected Done, got {other:?}"),
        }
    }

    #[test]
    fn window_limits_sends_and_replies_free_slots() {
        let t0 = Instant::now();
        let mut l = Ledger::new(10, 2, T, 3);
        for i in 0..3 {
            l.push(i, dr(&[1]));
        }
        let (a, ra) = send(&mut l, t0).unwrap();
        let (b, _) = send(&mut l, t0).unwrap();
        assert_ne!(a, b);
        assert!(send(&mut l, t0).is_none(), "window of 2 is full");
        let (token, result) = done(l.on_reply(0, &reply(&ra, a, 0)));
        assert_eq!(token, 0);
        assert_eq!(result.unwrap().smp_data()[0], 0x42);
        assert!(send(&mut l, t0).is_some(), "a slot was freed");
        assert_eq!(l.in_flight(), 2);
    }

    #[test]
    fn unknown_and_repeated_tids_are_unmatched() {
        let t0 = Instant::now();
        let mut l = Ledger::new(1, 4, T, 0);
        l.push(7, dr(&[]));
        let (tid, r) = send(&mut l, t0).unwrap();
        assert!(matches!(
            l.on_reply(0, &reply(&r, tid + 1000, 0)),
            Outcome::Unmatched
        ));
        assert!(matches!(
            l.on_reply(0, &reply(&r, tid, 0)),
            Outcome::Done(7, Ok(_))
        ));
        assert!(matches!(
            l.on_reply(0, &reply(&r, tid, 0)),
            Outcome::Unmatched
        ));
        assert_eq!(l.stats().unmatched, 2);
        assert!(l.is_idle());
    }

    #[test]
    fn not_a_response_or_other_class_is_unmatched() {
        let t0 = Instant::now();
        let mut l = Ledger::new(1, 4, T, 0);
        l.push(1, dr(&[]));
        let (tid, r) = send(&mut l, t0).unwrap();
        // Our own request looped back without the R bit and with status 0.
        assert!(matches!(
            l.on_reply(0, &returned(&r, tid)),
            Outcome::Unmatched
        ));
        let mut other = reply(&r, tid, 0);
        other[1] = class::PERF;
        assert!(matches!(l.on_reply(0, &other), Outcome::Unmatched));
        assert_eq!(l.in_flight(), 1);
    }

    #[test]
    fn timeout_resends_with_fresh_tid_and_late_reply_wins() {
        let t0 = Instant::now();
        let mut l = Ledger::new(100, 4, T, 3);
        l.push(1, dr(&[1, 3]));
        let (first, r) = send(&mut l, t0).unwrap();
        assert_eq!(l.next_deadline(), Some(t0 + T));
        let mut failed = Vec::new();
        l.expire(t0 + T / 2, &mut failed);
        assert!(
            send(&mut l, t0).is_none(),
            "nothing to resend before the deadline"
        );
        l.expire(t0 + T, &mut failed);
        assert!(failed.is_empty());
        let t1 = t0 + T;
        let (second, _) = send(&mut l, t1).unwrap();
        assert_ne!(first, second);
        assert_eq!(l.next_deadline(), Some(t1 + T));
        // The reply to the first attempt arrives late: it still completes the request.
        assert!(matches!(
            l.on_reply(0, &reply(&r, first, 0)),
            Outcome::Done(1, Ok(_))
        ));
        // And the second reply is now stale.
        assert!(matches!(
            l.on_reply(0, &reply(&r, second, 0)),
            Outcome::Unmatched
        ));
        assert_eq!(l.stats().retries, 1);
        assert!(l.is_idle());
        assert_eq!(l.next_deadline(), None);
    }

    #[test]
    fn retries_exhausted_is_timeout_with_attempt_count() {
        let mut now = Instant::now();
        let mut l = Ledger::new(1, 4, T, 2);
        l.push(5, dr(&[9]));
        let mut failed = Vec::new();
        let mut tids = Vec::new();
        while let Some((tid, _)) = send(&mut l, now) {
            tids.push(tid);
            now += T;
            l.expire(now, &mut failed);
        }
        assert_eq!(tids.len(), 3);
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].0, 5);
        assert_eq!(failed[0].1, MadError::Timeout { attempts: 3 });
        assert_eq!(l.stats().timeouts, 1);
        assert!(l.is_idle());
    }

    #[test]
    fn unroutable_status_retries_at_once_then_times_out() {
        let t0 = Instant::now();
        let mut l = Ledger::new(1, 4, T, 1);
        l.push(3, dr(&[1, 5]));
        let (a, r) = send(&mut l, t0).unwrap();
        assert!(matches!(
            l.on_reply(110, &returned(&r, a)),
            Outcome::Pending
        ));
        // Resent without waiting for any deadline.
        let (b, _) = send(&mut l, t0).unwrap();
        // A second 110 for the superseded first attempt is ignored.
        assert!(matches!(
            l.on_reply(110, &returned(&r, a)),
            Outcome::Pending
        ));
        assert_eq!(l.in_flight(), 1);
        let (token, result) = done(l.on_reply(110, &returned(&r, b)));
        assert_eq!(token, 3);
        assert_eq!(result.unwrap_err(), MadError::Timeout { attempts: 2 });
        assert_eq!(l.stats().unroutable, 3);
        assert!(l.is_idle());
    }

    #[test]
    fn busy_is_retried_other_status_is_an_error() {
        let t0 = Instant::now();
        let mut l = Ledger::new(1, 4, T, 1);
        l.push(1, dr(&[]));
        let (a, r) = send(&mut l, t0).unwrap();
        assert!(matches!(
            l.on_reply(0, &reply(&r, a, 0x0001)),
            Outcome::Pending
        ));
        let (b, _) = send(&mut l, t0).unwrap();
        let (_, result) = done(l.on_reply(0, &reply(&r, b, 0x001c)));
        assert_eq!(result.unwrap_err(), MadError::Status(MadStatus(0x1c)));
    }

    #[test]
    fn directed_route_d_bit_is_not_an_error() {
        let t0 = Instant::now();
        let mut l = Ledger::new(1, 4, T, 0);
        l.push(1, dr(&[1]));
        let (a, r) = send(&mut l, t0).unwrap();
        assert!(matches!(
            l.on_reply(0, &reply(&r, a, 0x8000)),
            Outcome::Done(1, Ok(_))
        ));
        // With the D bit and "method not supported" the code still counts.
        l.push(2, dr(&[1]));
        let (b, r) = send(&mut l, t0).unwrap();
        let (_, result) = done(l.on_reply(0, &reply(&r, b, 0x8008)));
        assert_eq!(result.unwrap_err(), MadError::Status(MadStatus(0x0008)));
    }

    #[test]
    fn nearest_deadline_skips_finished_requests() {
        let t0 = Instant::now();
        let mut l = Ledger::new(1, 4, T, 0);
        l.push(1, dr(&[1]));
        l.push(2, dr(&[2]));
        let (a, r) = send(&mut l, t0).unwrap();
        let t1 = t0 + Duration::from_millis(30);
        send(&mut l, t1).unwrap();
        assert_eq!(l.next_deadline(), Some(t0 + T));
        l.on_reply(0, &reply(&r, a, 0));
        assert_eq!(l.next_deadline(), Some(t1 + T));
        let mut failed = Vec::new();
        l.expire(t0 + T, &mut failed);
        assert!(
            failed.is_empty(),
            "the first deadline belonged to a finished request"
        );
        l.expire(t1 + T, &mut failed);
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].0, 2);
    }

    #[test]
    fn tids_skip_zero_and_pending_on_wrap() {
        let t0 = Instant::now();
        let mut l = Ledger::new(u32::MAX, 8, T, 0);
        l.push(1, dr(&[]));
        l.push(2, dr(&[]));
        let (a, _) = send(&mut l, t0).unwrap();
        let (b, _) = send(&mut l, t0).unwrap();
        assert_eq!((a, b), (u32::MAX, 1));
    }

    #[test]
    fn send_failure_and_fail_all_end_requests() {
        let t0 = Instant::now();
        let mut l = Ledger::new(1, 1, T, 3);
        l.push(1, dr(&[]));
        l.push(2, dr(&[]));
        let (a, _) = send(&mut l, t0).unwrap();
        let (t, e) = l
            .send_failed(
                a,
                MadError::from_transport(TransportError::Send { errno: 22 }),
            )
            .unwrap();
        assert_eq!(t, 1);
        assert!(matches!(
            e,
            MadError::Transport(TransportError::Send { errno: 22 })
        ));
        let lost = MadError::from_transport(TransportError::Recv { errno: 5 });
        let rest = l.fail_all(&lost);
        assert_eq!(rest.len(), 1);
        assert!(l.is_idle());
        assert_eq!(l.in_flight(), 0);
    }

    #[test]
    fn fail_all_ends_queued_and_in_flight_in_push_order() {
        let t0 = Instant::now();
        let mut l = Ledger::new(1, 2, T, 3);
        for i in 0..5 {
            l.push(i, dr(&[]));
        }
        send(&mut l, t0).unwrap();
        send(&mut l, t0).unwrap();
        let lost = MadError::TransportLost {
            call: UmadCall::Send,
            errno: 5,
        };
        let out = l.fail_all(&lost);
        let tokens: Vec<u32> = out.iter().map(|(t, _)| *t).collect();
        assert_eq!(tokens, vec![0, 1, 2, 3, 4]);
        assert!(out.iter().all(|(_, e)| *e == lost));
        assert!(l.is_idle());
        assert_eq!(l.in_flight(), 0);
        assert_eq!(l.next_deadline(), None);
        assert!(send(&mut l, t0).is_none());
    }

    #[test]
    fn cancel_fails_queued_keeps_in_flight_and_sends_nothing_more() {
        let t0 = Instant::now();
        let mut l = Ledger::new(1, 2, T, 3);
        for i in 0..5 {
            l.push(i, dr(&[1]));
        }
        let (a, ra) = send(&mut l, t0).unwrap();
        send(&mut l, t0).unwrap();
        let cancelled = l.cancel();
        // The three never sent end at once, in push order; the two in flight stay.
        let tokens: Vec<u32> = cancelled.iter().map(|(t, _)| *t).collect();
        assert_eq!(tokens, vec![2, 3, 4]);
        assert!(cancelled.iter().all(|(_, e)| *e == MadError::Cancelled));
        assert!(l.is_cancelled());
        assert_eq!(l.in_flight(), 2);
        assert!(send(&mut l, t0).is_none(), "nothing is sent after a cancel");
        // A reply for a request in flight still completes it.
        let (token, result) = done(l.on_reply(0, &reply(&ra, a, 0)));
        assert_eq!(token, 0);
        assert_eq!(result.unwrap().smp_data()[0], 0x42);
        assert!(send(&mut l, t0).is_none(), "a freed slot is not refilled");
        // The other one's deadline ends it with Cancelled, not with a resend.
        assert_eq!(l.next_deadline(), Some(t0 + T));
        let mut failed = Vec::new();
        l.expire(t0 + T, &mut failed);
        assert_eq!(failed, vec![(1, MadError::Cancelled)]);
        assert!(send(&mut l, t0 + T).is_none());
        assert_eq!(l.stats().retries, 0);
        assert_eq!(l.stats().timeouts, 0);
        assert!(l.is_idle());
        // A follow-up pushed after the cancel is not sent; the next cancel() ends it.
        l.push(9, dr(&[2]));
        assert!(send(&mut l, t0 + T).is_none());
        assert_eq!(l.cancel(), vec![(9, MadError::Cancelled)]);
        assert!(l.is_idle());
    }

    #[test]
    fn cancel_ends_a_request_waiting_for_its_resend() {
        let t0 = Instant::now();
        let mut l = Ledger::new(1, 4, T, 3);
        l.push(1, dr(&[1]));
        let (first, r) = send(&mut l, t0).unwrap();
        let mut failed = Vec::new();
        l.expire(t0 + T, &mut failed);
        assert!(failed.is_empty(), "queued for a resend");
        assert_eq!(l.cancel(), vec![(1, MadError::Cancelled)]);
        // It is over: a late reply to its first attempt matches nothing.
        assert!(matches!(
            l.on_reply(0, &reply(&r, first, 0)),
            Outcome::Unmatched
        ));
        assert!(l.is_idle());
        assert!(send(&mut l, t0 + T).is_none());
    }

    #[test]
    fn after_a_cancel_unroutable_and_busy_are_not_retried() {
        let t0 = Instant::now();
        let mut l = Ledger::new(1, 4, T, 1);
        l.push(1, dr(&[1, 5]));
        l.push(2, dr(&[1]));
        let (a, ra) = send(&mut l, t0).unwrap();
        let (b, rb) = send(&mut l, t0).unwrap();
        assert!(l.cancel().is_empty(), "both are in flight");
        let (token, result) = done(l.on_reply(110, &returned(&ra, a)));
        assert_eq!((token, result.unwrap_err()), (1, MadError::Cancelled));
        let (token, result) = done(l.on_reply(0, &reply(&rb, b, 0x0001)));
        assert_eq!((token, result.unwrap_err()), (2, MadError::Cancelled));
        assert_eq!(l.stats().retries, 0);
        assert!(l.is_idle());
    }

    #[test]
    fn after_a_cancel_a_last_attempt_still_times_out() {
        // No retry was left to refuse: the request ends as it would have anyway.
        let t0 = Instant::now();
        let mut l = Ledger::new(1, 4, T, 0);
        l.push(1, dr(&[1]));
        send(&mut l, t0).unwrap();
        assert!(l.cancel().is_empty());
        let mut failed = Vec::new();
        l.expire(t0 + T, &mut failed);
        assert_eq!(failed, vec![(1, MadError::Timeout { attempts: 1 })]);
        assert_eq!(l.stats().timeouts, 1);
    }

    #[test]
    fn cancel_tokens_share_one_flag() {
        let token = CancelToken::new();
        let other = token.clone();
        assert!(!token.is_cancelled());
        other.cancel();
        assert!(token.is_cancelled());
        token.reset();
        assert!(!other.is_cancelled());
        assert!(MadError::Cancelled.is_cancelled());
        assert!(!MadError::Cancelled.is_transport_lost());
    }

    #[test]
    fn transport_errors_are_classified() {
        let lost = MadError::from_transport(TransportError::Send { errno: 5 });
        assert_eq!(
            lost,
            MadError::TransportLost {
                call: UmadCall::Send,
                errno: 5
            }
        );
        assert_eq!(
            lost.to_string(),
            "lost the connection to the fabric (umad send failed: Input/output error): is \
             the simulator or the ib_umad device still there?"
        );
        assert!(MadError::from_transport(TransportError::Recv { errno: 19 }).is_transport_lost());
        let one_mad = MadError::from_transport(TransportError::Send { errno: 22 });
        assert!(!one_mad.is_transport_lost());
        assert!(matches!(one_mad, MadError::Transport(_)));
        assert!(!MadError::Timeout { attempts: 4 }.is_transport_lost());
    }

    #[test]
    fn request_builders_set_class_and_destination() {
        let p = Request::perf(7, method::GET, attr::PORT_COUNTERS, 0, &[0, 1]);
        assert_eq!(p.mgmt_class(), class::PERF);
        assert_eq!(
            p.dest,
            Dest::Gsi {
                lid: 7,
                qpn: 1,
                qkey: 0x8001_0000
            }
        );
        let s = Request::sa(1, method::GET, attr::SA_NODE_RECORD, 1, &[0, 5]);
        assert_eq!((s.mgmt_class(), s.class_version()), (class::SUBN_ADM, 2));
        let set = Request::smp_set(&SmpRoute::Lid(3), attr::PORT_INFO, 1, &[1, 2, 3]);
        assert_eq!(set.mad[3], method::SET);
        assert_eq!(&set.mad[64..67], &[1, 2, 3]);
    }

    #[test]
    fn ceil_ms_rounds_up() {
        assert_eq!(ceil_ms(Duration::ZERO), 0);
        assert_eq!(ceil_ms(Duration::from_micros(1)), 1);
        assert_eq!(ceil_ms(Duration::from_millis(200)), 200);
    }

    /// A scripted local port: what each send does is decided by its number (1-based).
    struct FakePort {
        info: LocalPort,
        /// Sends attempted so far (successful or not).
        sends: usize,
        /// Sends after which the "fabric" stops answering (the reply is never queued).
        answer_until: usize,
        /// From this send on, every send fails with `send_errno`.
        fail_from: usize,
        /// Only this send fails (with `send_errno`).
        fail_once: usize,
        send_errno: i32,
        /// Once no reply is queued, recv fails with this errno (0: it times out).
        recv_errno: i32,
        queue: VecDeque<Received>,
        sent: Vec<[u8; MAD_SIZE]>,
        /// When each accepted send was made, and when each MAD was read back.
        sent_at: Vec<Instant>,
        received_at: Vec<Instant>,
        /// Zero: replies are there at once. Else the reply to send n arrives n x this
        /// after it was sent (held until then).
        delay_step: Duration,
        held: VecDeque<(Instant, Received)>,
    }

    impl FakePort {
        fn new() -> Self {
            FakePort {
                info: LocalPort {
                    ca_name: "fake0".into(),
                    ca_type: "fake".into(),
                    node_guid: 1,
                    port_num: 1,
                    lid: 1,
                    sm_lid: 1,
                    lmc: 0,
                    state: crate::attr::PortState::Active,
                    phys_state: crate::attr::PhysState::LinkUp,
                    port_guid: 1,
                    link_layer: "IB".into(),
                },
                sends: 0,
                answer_until: usize::MAX,
                fail_from: usize::MAX,
                fail_once: 0,
                send_errno: 0,
                recv_errno: 0,
                queue: VecDeque::new(),
                sent: Vec::new(),
                sent_at: Vec::new(),
                received_at: Vec::new(),
                delay_step: Duration::ZERO,
                held: VecDeque::new(),
            }
        }
    }

    impl MadPort for FakePort {
        fn info(&self) -> &LocalPort {
            &self.info
        }
        fn register(&mut self, mgmt_class: u8, _version: u8) -> Result<u32, TransportError> {
            Ok(u32::from(mgmt_class))
        }
        fn unregister(&mut self, _agent: u32) {}
        fn send(
            &mut self,
            agent: u32,
            mad: &[u8; MAD_SIZE],
            _dest: &Dest,
            _timeout_ms: u32,
            _retries: u32,
        ) -> Result<(), TransportError> {
            self.sends += 1;
            if self.sends >= self.fail_from || self.sends == self.fail_once {
                return Err(TransportError::Send {
                    errno: self.send_errno,
                });
            }
            self.sent.push(*mad);
            self.sent_at.push(Instant::now());
            if self.sends <= self.answer_until {
                let mut reply = *mad;
                reply[3] |= 0x80;
                let received = Received {
                    agent,
                    status: 0,
                    len: MAD_SIZE,
                    mad: reply,
                };
                if self.delay_step.is_zero() {
                    self.queue.push_back(received);
                } else {
                    let at = Instant::now() + self.delay_step * self.sends as u32;
                    // Later sends are answered later: the held list stays in time order.
                    self.held.push_back((at, received));
                }
            }
            Ok(())
        }
        fn recv(&mut self, timeout_ms: u32) -> Result<Option<Received>, TransportError> {
            if let Some(r) = self.queue.pop_front() {
                self.received_at.push(Instant::now());
                return Ok(Some(r));
            }
            if let Some(&(at, _)) = self.held.front() {
                let now = Instant::now();
                let limit = now + Duration::from_millis(u64::from(timeout_ms));
                if at <= limit {
                    std::thread::sleep(at.saturating_duration_since(now));
                    self.received_at.push(Instant::now());
                    return Ok(self.held.pop_front().map(|(_, r)| r));
                }
            }
            if self.recv_errno != 0 {
                return Err(TransportError::Recv {
                    errno: self.recv_errno,
                });
            }
            std::thread::sleep(Duration::from_millis(u64::from(timeout_ms)));
            Ok(None)
        }
    }

    const FAKE_TIMEOUT: Duration = Duration::from_millis(40);

    fn fake_engine(port: FakePort, window: usize, retries: u32) -> Engine<FakePort> {
        let config = EngineConfig {
            max_outstanding: window,
            timeout: FAKE_TIMEOUT,
            retries,
        };
        Engine::with_port(port, config, 1)
    }

    /// Run `n` NodeInfo requests; (ok count, errors in completion order, follow-ups seen).
    fn run_batch(engine: &mut Engine<FakePort>, n: usize) -> (usize, Vec<MadError>) {
        let mut ok = 0;
        let mut errors = Vec::new();
        engine.run((0..n).map(|i| (i, dr(&[1]))), |_, r, _| match r {
            Ok(_) => ok += 1,
            Err(e) => errors.push(e),
        });
        (ok, errors)
    }

    #[test]
    fn send_eio_fails_everything_at_once_and_later_runs_send_nothing() {
        let mut port = FakePort::new();
        port.fail_from = 11;
        port.send_errno = libc::EIO;
        let mut engine = fake_engine(port, 4, 3);
        let t = Instant::now();
        let (ok, errors) = run_batch(&mut engine, 200);
        // Sends 1-8 were answered and read; 9 and 10 were in flight beside the failed
        // 11th: they end with the loss too.
        assert_eq!(ok, 8);
        assert_eq!(errors.len(), 192);
        let lost = MadError::TransportLost {
            call: UmadCall::Send,
            errno: libc::EIO,
        };
        assert!(errors.iter().all(|e| *e == lost), "{:?}", errors[0]);
        // One failed send, not one per request.
        assert_eq!(engine.port.sends, 11);
        assert_eq!(engine.transport_lost(), Some(&lost));
        assert!(t.elapsed() < FAKE_TIMEOUT, "took {:?}", t.elapsed());

        // Later batches and calls fail at once, without a send.
        let t = Instant::now();
        let (ok, errors) = run_batch(&mut engine, 50);
        assert_eq!((ok, errors.len()), (0, 50));
        assert_eq!(
            engine.call(Request::smp_get(&SmpRoute::Lid(3), 0x11, 0)),
            Err(lost.clone())
        );
        assert_eq!(engine.port.sends, 11);
        assert!(t.elapsed() < FAKE_TIMEOUT, "took {:?}", t.elapsed());
    }

    #[test]
    fn follow_ups_pushed_after_the_loss_fail_too() {
        let mut port = FakePort::new();
        port.fail_from = 3;
        port.send_errno = libc::ECONNREFUSED;
        let mut engine = fake_engine(port, 1, 1);
        let mut results = Vec::new();
        engine.run([(0u32, dr(&[]))], |token, r, more| {
            results.push((token, r.is_ok()));
            // Every completion asks for one more, as discovery does, up to 10.
            if token < 10 {
                more.push((token + 1, dr(&[1])));
            }
        });
        let tokens: Vec<u32> = results.iter().map(|r| r.0).collect();
        assert_eq!(tokens, (0..=10).collect::<Vec<_>>());
        assert_eq!(
            results.iter().filter(|r| r.1).count(),
            2,
            "sends 1 and 2 answered"
        );
        assert_eq!(engine.port.sends, 3);
    }

    #[test]
    fn requests_in_flight_at_the_loss_end_by_the_first_deadline() {
        // 3 answered, 4 more accepted but never answered (in flight when ibsim died), then
        // every send fails: the first resend ends the whole batch.
        let mut port = FakePort::new();
        port.answer_until = 3;
        port.fail_from = 8;
        port.send_errno = libc::EIO;
        let retries = 3;
        let mut engine = fake_engine(port, 4, retries);
        let t = Instant::now();
        let (ok, errors) = run_batch(&mut engine, 100);
        let took = t.elapsed();
        assert_eq!(ok, 3);
        assert_eq!(errors.len(), 97);
        assert!(errors.iter().all(MadError::is_transport_lost));
        assert_eq!(
            engine.stats().timeouts,
            0,
            "no request waited out its retries"
        );
        // Well under one request's own budget of (retries + 1) x timeout.
        assert!(
            took < FAKE_TIMEOUT * (retries + 1),
            "took {took:?}, budget per MAD {:?}",
            FAKE_TIMEOUT * (retries + 1)
        );
    }

    #[test]
    fn receive_enodev_breaks_the_engine() {
        let mut port = FakePort::new();
        port.answer_until = 0;
        port.recv_errno = libc::ENODEV;
        let mut engine = fake_engine(port, 4, 3);
        let (ok, errors) = run_batch(&mut engine, 20);
        assert_eq!(ok, 0);
        let lost = MadError::TransportLost {
            call: UmadCall::Recv,
            errno: libc::ENODEV,
        };
        assert!(errors.iter().all(|e| *e == lost));
        assert_eq!(engine.port.sends, 4, "only the first window went out");
        assert_eq!(engine.transport_lost(), Some(&lost));
    }

    #[test]
    fn other_errors_stay_per_request_or_per_batch() {
        // EINVAL on one send: that request fails, the rest go on, the engine stays usable.
        let mut port = FakePort::new();
        port.fail_once = 2;
        port.send_errno = libc::EINVAL;
        let mut engine = fake_engine(port, 1, 0);
        let mut results = Vec::new();
        engine.run((0..4).map(|i| (i, dr(&[1]))), |t, r, _| {
            results.push((t, r))
        });
        results.sort_by_key(|r| r.0);
        assert!(results[0].1.is_ok() && results[2].1.is_ok() && results[3].1.is_ok());
        assert!(matches!(
            results[1].1,
            Err(MadError::Transport(TransportError::Send { errno })) if errno == libc::EINVAL
        ));
        assert!(engine.transport_lost().is_none());

        // A receive error that is not a loss fails the batch, not the engine.
        let mut port = FakePort::new();
        port.answer_until = 0;
        port.recv_errno = libc::EINVAL;
        let mut engine = fake_engine(port, 2, 0);
        let (_, errors) = run_batch(&mut engine, 3);
        assert!(errors
            .iter()
            .all(|e| matches!(e, MadError::Transport(TransportError::Recv { errno }) if *errno == libc::EINVAL)));
        assert!(engine.transport_lost().is_none());
        engine.port.recv_errno = 0;
        engine.port.answer_until = usize::MAX;
        let before = engine.port.sends;
        let (ok, _) = run_batch(&mut engine, 3);
        assert_eq!(ok, 3);
        assert_eq!(engine.port.sends, before + 3);
    }

    #[test]
    fn m_key_goes_into_smps_only() {
        let mut engine = fake_engine(FakePort::new(), 4, 0);
        engine.set_m_key(0x1234_5678_9abc_def0);
        let mut own = Request::smp_get(&SmpRoute::Lid(2), 0x15, 1);
        own.mad[24..32].copy_from_slice(&7u64.to_be_bytes());
        let requests = vec![
            (0, dr(&[1])),
            (1, Request::smp_set(&SmpRoute::Lid(2), 0x15, 1, &[0; 64])),
            (2, own),
            (3, Request::perf(2, method::GET, 0x12, 0, &[])),
        ];
        engine.run(requests, |_, r, _| assert!(r.is_ok()));
        let sent = &engine.port.sent;
        assert_eq!(sent.len(), 4);
        let key = |m: &[u8; MAD_SIZE]| u64::from_be_bytes(m[24..32].try_into().unwrap());
        let by_class = |c: u8, method_code: u8| {
            sent.iter()
                .filter(move |m| m[1] == c && m[3] == method_code)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            key(by_class(class::SMI_DIRECT, method::GET)[0]),
            0x1234_5678_9abc_def0
        );
        assert_eq!(
            key(by_class(class::SMI_LID, method::SET)[0]),
            0x1234_5678_9abc_def0
        );
        assert_eq!(
            key(by_class(class::SMI_LID, method::GET)[0]),
            7,
            "its own key kept"
        );
        // PerfMgt bytes 24..32 are the class's own header: untouched.
        assert_eq!(key(by_class(class::PERF, method::GET)[0]), 0);
    }

    #[test]
    fn cancel_mid_batch_keeps_replies_in_flight_and_fails_the_rest() {
        // Replies to sends 1-4 arrive 5, 10, 15, 20 ms after them: the cancel, made on
        // the first completion, finds three still in flight.
        let mut port = FakePort::new();
        port.delay_step = Duration::from_millis(5);
        let mut engine = fake_engine(port, 4, 3);
        let token = CancelToken::new();
        engine.set_cancel(Some(token.clone()));
        let (mut ok, mut cancelled, mut other) = (0, Vec::new(), Vec::new());
        let mut cancelled_at = None;
        let t = Instant::now();
        engine.run((0..100u32).map(|i| (i, dr(&[1]))), |i, r, more| {
            match r {
                Ok(_) => ok += 1,
                Err(MadError::Cancelled) => cancelled.push(i),
                Err(e) => other.push(e),
            }
            if cancelled_at.is_none() {
                token.cancel();
                cancelled_at = Some(Instant::now());
            }
            // Every completion asks for a follow-up, as discovery does.
            if i < 1000 {
                more.push((1000 + i, dr(&[1, 2])));
            }
        });
        let took = t.elapsed();
        let cancelled_at = cancelled_at.unwrap();
        assert!(other.is_empty(), "{other:?}");
        // The whole first window was answered, the three in flight at the cancel too.
        assert_eq!(ok, 4);
        let late = engine.port.received_at.iter();
        assert!(
            late.filter(|&&r| r > cancelled_at).count() >= 1,
            "no reply was read after the cancel: the test proved nothing"
        );
        // The 96 never sent and the 100 follow-ups (of the 4 answered and of the 96).
        cancelled.sort_unstable();
        let expected: Vec<u32> = (4..100).chain(1000..1100).collect();
        assert_eq!(cancelled, expected);
        assert_eq!(engine.port.sends, 4, "nothing sent after the cancel");
        assert!(engine.port.sent_at.iter().all(|&s| s < cancelled_at));
        assert_eq!(engine.stats().retries, 0);
        assert_eq!(engine.stats().timeouts, 0);
        assert!(took < FAKE_TIMEOUT, "took {took:?}");
        assert!(engine.transport_lost().is_none());
    }

    #[test]
    fn cancel_from_another_thread_ends_within_one_timeout() {
        // Nothing answers: without the cancel every request would wait out 6 attempts of
        // 100 ms, 25 windows of 4 one after the other (15 s).
        let timeout = Duration::from_millis(100);
        let mut port = FakePort::new();
        port.answer_until = 0;
        let config = EngineConfig {
            max_outstanding: 4,
            timeout,
            retries: 5,
        };
        let mut engine = Engine::with_port(port, config, 1);
        let token = CancelToken::new();
        engine.set_cancel(Some(token.clone()));
        let canceller = std::thread::spawn(move || {
            // Half-way through the second attempts.
            std::thread::sleep(timeout * 3 / 2);
            token.cancel();
            Instant::now()
        });
        let (ok, errors) = run_batch(&mut engine, 100);
        let ended = Instant::now();
        let cancelled_at = canceller.join().unwrap();
        assert_eq!(ok, 0);
        assert_eq!(errors.len(), 100);
        assert!(errors.iter().all(MadError::is_cancelled), "{:?}", errors[0]);
        let after = ended.saturating_duration_since(cancelled_at);
        assert!(after < timeout * 3 / 2, "ended {after:?} after the cancel");
        // First attempts and resends of the first window only, all before the cancel.
        let sent = &engine.port.sent_at;
        assert!((4..=12).contains(&sent.len()), "{} sends", sent.len());
        assert!(sent.iter().all(|&s| s < cancelled_at));
        assert_eq!(engine.stats().timeouts, 0);
    }

    #[test]
    fn a_cancelled_engine_sends_nothing_until_the_token_is_reset() {
        let mut engine = fake_engine(FakePort::new(), 4, 3);
        let token = CancelToken::new();
        token.cancel();
        engine.set_cancel(Some(token.clone()));
        assert!(engine.is_cancelled());
        let t = Instant::now();
        let (ok, errors) = run_batch(&mut engine, 10);
        assert_eq!(ok, 0);
        assert_eq!(errors, vec![MadError::Cancelled; 10]);
        assert_eq!(
            engine.call(Request::smp_get(&SmpRoute::Lid(3), 0x11, 0)),
            Err(MadError::Cancelled)
        );
        assert_eq!(engine.port.sends, 0);
        assert!(t.elapsed() < FAKE_TIMEOUT);

        token.reset();
        let (ok, errors) = run_batch(&mut engine, 3);
        assert_eq!((ok, errors.len()), (3, 0));
        engine.set_cancel(None);
        token.cancel();
        assert!(!engine.is_cancelled(), "no longer the engine's token");
        assert!(engine
            .call(Request::smp_get(&SmpRoute::Lid(3), 0x11, 0))
            .is_ok());
    }
}
