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

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::error::DecodeError;
use crate::header::{class, method, MadHeader, MadStatus, MAD_SIZE};
use crate::smp::{self, MadView, SmpRoute, GMP_DATA_LEN, GMP_DATA_OFFSET, SA_DATA_LEN};
use crate::smp::{SA_DATA_OFFSET, SMP_DATA_LEN, SMP_DATA_OFFSET};
use crate::umad::{class_version, UmadPort};
pub use crate::umad::{Dest, LocalPort, PortState, TransportError, GSI_QKEY};

/// More than about 330 MADs in flight deadlock libumad2sim (its socket buffers fill while it
/// holds a lock) and stall ibsim for every client; 64 already gives most of the throughput
/// there (measured: 1 in flight 15-20k MADs/s, 16 about 200k/s, 64 about 230-380k/s).
pub const SIMULATOR_MAX_OUTSTANDING: usize = 64;
/// An upper bound for real hardware too: the kernel queues sends per agent, and hundreds of
/// SMPs in flight only overrun switch SMA queues.
pub const MAX_OUTSTANDING: usize = 1024;

/// ETIMEDOUT in the umad header: the kernel (or the shim, at once) gave the send back
/// unanswered, e.g. a directed route through a dead port or an unknown LID.
const UMAD_STATUS_TIMEOUT: i32 = 110;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineConfig {
    /// Requests in flight at once (clamped to 1..=64 under the simulator).
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
    #[error("malformed reply: {0}")]
    Decode(#[from] DecodeError),
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
    /// Every TID this request went out under: the first valid reply to any of them wins.
    tids: Vec<u32>,
    in_flight: bool,
}

/// The pending table of one batch: TIDs, deadlines and retries, with time passed in.
pub struct Ledger<T> {
    window: usize,
    timeout: Duration,
    retries: u32,
    next_tid: u32,
    next_id: u64,
    entries: HashMap<u64, Entry<T>>,
    /// Waiting to be sent; retries go in front.
    ready: VecDeque<u64>,
    /// (deadline, entry, attempt) in send order, hence in deadline order since the timeout
    /// is fixed per batch. Finished or resent entries are skipped lazily.
    timers: VecDeque<(Instant, u64, u32)>,
    by_tid: HashMap<u32, u64>,
    in_flight: usize,
    stats: EngineStats,
}

impl<T> Ledger<T> {
    pub fn new(first_tid: u32, window: usize, timeout: Duration, retries: u32) -> Self {
        Ledger {
            window: window.max(1),
            timeout,
            retries,
            next_tid: first_tid,
            next_id: 0,
            entries: HashMap::new(),
            ready: VecDeque::new(),
            timers: VecDeque::new(),
            by_tid: HashMap::new(),
            in_flight: 0,
            stats: EngineStats::default(),
        }
    }

    pub fn push(&mut self, token: T, request: Request) {
        let id = self.next_id;
        self.next_id += 1;
        self.entries.insert(
            id,
            Entry {
                token,
                request,
                attempts: 0,
                tids: Vec::new(),
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

    /// The next request to send, if the window has room: its fresh TID and the request.
    pub fn next_send(&mut self, now: Instant) -> Option<(u32, &Request)> {
        if self.in_flight >= self.window {
            return None;
        }
        let id = loop {
            let id = self.ready.pop_front()?;
            if self.entries.contains_key(&id) {
                break id;
            }
        };
        let tid = self.alloc_tid();
        let entry = self.entries.get_mut(&id)?;
        entry.attempts += 1;
        entry.tids.push(tid);
        entry.in_flight = true;
        self.in_flight += 1;
        self.by_tid.insert(tid, id);
        self.timers
            .push_back((now + self.timeout, id, entry.attempts));
        Some((tid, &entry.request))
    }

    fn finish(&mut self, id: u64) -> Option<Entry<T>> {
        let entry = self.entries.remove(&id)?;
        for tid in &entry.tids {
            self.by_tid.remove(tid);
        }
        if entry.in_flight {
            self.in_flight -= 1;
        }
        Some(entry)
    }

    /// The current attempt failed: queue another, or give up with `error(attempts)`.
    fn retry_or_fail(
        &mut self,
        id: u64,
        error: impl FnOnce(u32) -> MadError,
    ) -> Option<(T, MadError)> {
        let entry = self.entries.get_mut(&id)?;
        if entry.in_flight {
            entry.in_flight = false;
            self.in_flight -= 1;
        }
        if entry.attempts <= self.retries {
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
    pub fn send_failed(&mut self, tid: u32, error: TransportError) -> Option<(T, MadError)> {
        let id = *self.by_tid.get(&tid)?;
        self.finish(id)
            .map(|e| (e.token, MadError::Transport(error)))
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
        let Some(entry) = self.entries.get(&id) else {
            self.stats.unmatched += 1;
            return Outcome::Unmatched;
        };
        let latest = entry.in_flight && entry.tids.last() == Some(&tid);
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
            .get(&id)
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

    /// End every request, queued or in flight, with `error`.
    pub fn fail_all(&mut self, error: &TransportError) -> Vec<(T, MadError)> {
        let ids: Vec<u64> = self.entries.keys().copied().collect();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(e) = self.finish(id) {
                out.push((e.token, MadError::Transport(error.clone())));
            }
        }
        self.ready.clear();
        self.timers.clear();
        out
    }
}

/// The request engine over one local port.
#[derive(Debug)]
pub struct Engine {
    port: UmadPort,
    config: EngineConfig,
    /// Agent per management class, registered on first use.
    agents: Vec<(u8, u32)>,
    next_tid: u32,
    stats: EngineStats,
}

fn ceil_ms(d: Duration) -> u32 {
    u32::try_from(d.as_micros().div_ceil(1000)).unwrap_or(u32::MAX)
}

impl Engine {
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
        let mut engine = Engine {
            port,
            config,
            agents: Vec::new(),
            next_tid: seed | 1,
            stats: EngineStats::default(),
        };
        engine.set_config(config);
        Ok(engine)
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
        let timeout_ms = ceil_ms(self.config.timeout);
        // Kernel retries 0: the engine resends itself, with a fresh TID.
        self.port.send(agent, &mad, &request.dest, timeout_ms, 0)?;
        self.stats.sent += 1;
        Ok(())
    }

    /// Run a batch. `on_done` sees each request as it completes (in any order) and may push
    /// follow-ups into the `Vec` it is handed; they join the same window. Returns when
    /// nothing is pending.
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
        // Once receiving fails the port is unusable: fail whatever is left with that error.
        let mut broken: Option<TransportError> = None;
        while !ledger.is_idle() {
            if let Some(error) = &broken {
                done.extend(ledger.fail_all(error).into_iter().map(|(t, e)| (t, Err(e))));
            }
            while let Some((tid, request)) = ledger.next_send(Instant::now()) {
                if let Err(e) = self.transmit(tid, request) {
                    if let Some((t, e)) = ledger.send_failed(tid, e) {
                        done.push((t, Err(e)));
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
                            tracing::error!(error = %e, "umad receive failed; failing pending MADs");
                            broken = Some(e);
                            break;
                        }
                    }
                }
                ledger.expire(Instant::now(), &mut failed);
                done.extend(failed.drain(..).map(|(t, e)| (t, Err(e))));
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

impl Drop for Engine {
    fn drop(&mut self) {
        // A reply arriving after its agent is unregistered kills the shim's receiver thread:
        // give late replies (to requests that already timed out) a short while to arrive.
        self.drain((self.config.timeout * 2).min(Duration::from_secs(1)));
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
            .send_failed(a, TransportError::Send { errno: 22 })
            .unwrap();
        assert_eq!(t, 1);
        assert!(matches!(
            e,
            MadError::Transport(TransportError::Send { errno: 22 })
        ));
        let rest = l.fail_all(&TransportError::Recv { errno: 5 });
        assert_eq!(rest.len(), 1);
        assert!(l.is_idle());
        assert_eq!(l.in_flight(), 0);
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
}
