//! The pending table of one batch: TIDs, the window, deadlines and retries, driven with
//! explicit time so it is tested without a fabric. No I/O happens here.
//!
//! What goes out when is paced (see [`super::pacing`]): at most the [`Window`]'s limit in
//! flight, at most `per_destination` to one destination. A request whose destination is
//! at its cap waits in that destination's queue and moves to the front of the line when
//! one of its requests there ends, so one busy destination never holds back the others.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::config::EngineStats;
use super::error::MadError;
use super::pacing::{DestState, RttEstimator, Window};
use super::packed::{dest_key, PackedMad, PackedRequest};
use super::request::Request;
use crate::header::MAD_SIZE;
use crate::smp::MadView;
use crate::umad::TransportError;

/// ETIMEDOUT in the umad header: the kernel (or the shim, at once) gave the send back
/// unanswered, e.g. a directed route through a dead port or an unknown LID.
const UMAD_STATUS_TIMEOUT: i32 = 110;

/// What a received MAD meant to the [`Ledger`].
#[derive(Debug)]
pub enum Outcome<T> {
    /// The request finished: `Ok` when the MAD handed in is its answer (the caller, who
    /// holds those bytes, makes the [`Response`](super::Response) of them: a reply is
    /// copied once less).
    Done(T, Result<(), MadError>),
    /// It belongs to a pending request that goes on (resent, or a superseded attempt).
    Pending,
    /// No pending request has this TID, or it is not a reply to what was asked.
    Unmatched,
}

/// `timer` in its place in `timers` (by deadline, nearest first): after every timer due
/// no later, searched from the back. Timers due at once stay in the order they were set
/// (a burst of sends shares one clock reading and so one deadline; ordered by request
/// too, a request promoted late walked back past the whole burst).
fn add_timer(timers: &mut VecDeque<(Instant, u64, u32)>, timer: (Instant, u64, u32)) {
    let at = timers
        .iter()
        .rposition(|t| t.0 <= timer.0)
        .map_or(0, |i| i + 1);
    timers.insert(at, timer);
}

struct Entry<T> {
    /// Taken when the entry finishes (the rest is dropped where it lies).
    token: Option<T>,
    request: PackedMad,
    /// [`dest_key`] of the request.
    dest: u64,
    /// When the first and the latest attempt were sent.
    first_sent: Option<Instant>,
    sent_at: Option<Instant>,
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
    /// Store `entry` under `id`, which the caller hands out in order: the next id
    /// (`first + slots.len()`) or a few past it (the ids skipped stay empty).
    fn push(&mut self, id: u64, entry: E) {
        if self.slots.is_empty() {
            self.first = id;
        }
        debug_assert!(
            id >= self.first + self.slots.len() as u64,
            "ids come in order"
        );
        while self.first + (self.slots.len() as u64) < id {
            self.slots.push_back(None);
        }
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
    /// Run `take` on the entry under `id` where it lies, then free its slot: what `take`
    /// leaves is dropped in place rather than moved out (a ledger entry is well over a
    /// hundred bytes, and a batch finishes millions).
    fn remove_with<R>(&mut self, id: u64, take: impl FnOnce(&mut E) -> R) -> Option<R> {
        let i = self.index(id)?;
        let slot = self.slots.get_mut(i)?;
        let taken = take(slot.as_mut()?);
        *slot = None;
        self.live -= 1;
        let freed = self.slots.iter().take_while(|s| s.is_none()).count();
        if freed > 0 {
            self.slots.drain(..freed);
            self.first += freed as u64;
        }
        Some(taken)
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

/// The entry id of each pending TID: a [`Slab`] keyed by the TID's distance from the first
/// one pending when the map was last empty. The ledger hands TIDs out in sequence (skipping
/// 0 and any still pending) and they end roughly in order, so this does what a hash map
/// did (four lookups per MAD) without hashing. A request pending long (resent until it
/// fails) holds the front: the slab then spans every TID handed out meanwhile, 16 bytes
/// each (a few MB for seconds of a fast fabric's MADs).
struct TidMap {
    /// The TID of key 0.
    base: u32,
    ids: Slab<u64>,
}

impl TidMap {
    fn new() -> Self {
        TidMap {
            base: 0,
            ids: Slab::new(),
        }
    }
    fn key(&self, tid: u32) -> u64 {
        u64::from(tid.wrapping_sub(self.base))
    }
    fn get(&self, tid: u32) -> Option<u64> {
        self.ids.get(self.key(tid)).copied()
    }
    fn contains(&self, tid: u32) -> bool {
        self.get(tid).is_some()
    }
    fn insert(&mut self, tid: u32, id: u64) {
        if self.ids.is_empty() {
            self.base = tid;
        }
        self.ids.push(self.key(tid), id);
    }
    fn remove(&mut self, tid: u32) {
        self.ids.remove_with(self.key(tid), |_| ());
    }
}

/// The pending table of one batch: TIDs, deadlines and retries, with time passed in.
pub struct Ledger<T> {
    window: Window,
    per_destination: usize,
    dests: foldhash::HashMap<u64, DestState>,
    /// The last time nothing could be sent, it was the window that held it back (not a
    /// lack of work, nor destination caps): replies may then grow the window.
    window_limited: bool,
    timeout: Duration,
    retries: u32,
    next_tid: u32,
    next_id: u64,
    entries: Slab<Entry<T>>,
    /// Waiting to be sent; retries go in front.
    ready: VecDeque<u64>,
    /// (deadline, entry, attempt), nearest first. Finished or resent entries are skipped
    /// lazily. A sorted deque, not a heap: deadlines come nearly in order (the send time
    /// plus a wait that changes slowly), so a new one goes in at or near the back, where a
    /// heap's sifting cost a few percent of every MAD.
    timers: VecDeque<(Instant, u64, u32)>,
    rtt: RttEstimator,
    by_tid: TidMap,
    in_flight: usize,
    stats: EngineStats,
    /// Set by [`Ledger::cancel`]: nothing more is sent or resent.
    cancelled: bool,
}

impl<T> Ledger<T> {
    /// A ledger with a fixed window of `window` (it is only cut by losses) and no cap per
    /// destination.
    pub fn new(first_tid: u32, window: usize, timeout: Duration, retries: u32) -> Self {
        Self::paced(
            first_tid,
            Window::new(window, window),
            usize::MAX,
            timeout,
            retries,
        )
    }

    /// A ledger paced by `window` and at most `per_destination` in flight to one
    /// destination.
    pub fn paced(
        first_tid: u32,
        window: Window,
        per_destination: usize,
        timeout: Duration,
        retries: u32,
    ) -> Self {
        Ledger {
            window,
            per_destination: per_destination.max(1),
            dests: foldhash::HashMap::default(),
            window_limited: false,
            timeout,
            retries,
            next_tid: first_tid,
            next_id: 0,
            entries: Slab::new(),
            ready: VecDeque::new(),
            timers: VecDeque::new(),
            rtt: RttEstimator::default(),
            by_tid: TidMap::new(),
            in_flight: 0,
            stats: EngineStats::default(),
            cancelled: false,
        }
    }

    pub fn push(&mut self, token: T, request: Request) {
        self.push_packed(token, PackedRequest::from(&request));
    }

    /// [`Ledger::push`] of a request packed already.
    pub(crate) fn push_packed(&mut self, token: T, request: PackedRequest) {
        let (dest, request) = request.into_parts();
        let id = self.next_id;
        self.next_id += 1;
        self.entries.push(
            id,
            Entry {
                token: Some(token),
                request,
                dest,
                first_sent: None,
                sent_at: None,
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

    /// Requests wait in the line to be sent (not counting those set aside for a
    /// destination at its cap).
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// The window has room for another send (and the batch was not cancelled).
    pub fn has_room(&self) -> bool {
        !self.cancelled && self.in_flight < self.window.limit()
    }

    /// Requests not in flight: waiting for the window, their destination or a resend.
    pub fn queued(&self) -> usize {
        self.entries.live - self.in_flight
    }

    /// Nothing in flight, nothing sendable, yet requests wait: a destination's queue was
    /// not let go when it should have been. Never expected; let every waiting request go
    /// so the batch cannot hang, and say what was found.
    pub(crate) fn unstick(&mut self) -> Option<String> {
        if self.in_flight > 0 || self.cancelled || self.is_idle() || !self.ready.is_empty() {
            return None;
        }
        let waiting: Vec<u64> = self
            .dests
            .values_mut()
            .flat_map(|d| d.waiting.drain(..))
            .collect();
        if waiting.is_empty() {
            return None;
        }
        let report = self.stall_report();
        self.ready.extend(waiting);
        Some(report)
    }

    /// The state of the queues, for a stall report.
    pub(crate) fn stall_report(&self) -> String {
        let waiting: usize = self.dests.values().map(|d| d.waiting.len()).sum();
        let stuck = self
            .dests
            .values()
            .filter(|d| d.in_flight == 0 && !d.waiting.is_empty())
            .count();
        format!(
            "{} requests live, {} in flight, {} ready, {waiting} waiting for {} destinations ({stuck} with none in flight), window {}",
            self.entries.live,
            self.in_flight,
            self.ready.len(),
            self.dests.len(),
            self.window.limit()
        )
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

    /// The window as it stands (carry it to the next batch).
    pub fn window(&self) -> Window {
        self.window
    }

    /// The round-trip estimate as it stands (carry it to the next batch).
    pub fn rtt(&self) -> RttEstimator {
        self.rtt
    }

    /// Start from an earlier batch's round-trip estimate.
    pub fn set_rtt(&mut self, rtt: RttEstimator) {
        self.rtt = rtt;
    }

    /// Requests in flight to the destination of `request`.
    pub fn in_flight_to(&self, request: &Request) -> usize {
        self.dests
            .get(&dest_key(&request.dest))
            .map_or(0, |d| d.in_flight)
    }

    fn alloc_tid(&mut self) -> u32 {
        loop {
            let tid = self.next_tid;
            self.next_tid = self.next_tid.wrapping_add(1);
            // 0 is what an uninitialised MAD carries; skip it and any TID still pending.
            if tid != 0 && !self.by_tid.contains(tid) {
                return tid;
            }
        }
    }

    /// The next request to send, if the window has room (and the batch was not
    /// cancelled): its fresh TID and the request. Requests whose destination is at its
    /// cap are set aside for it and skipped.
    pub(crate) fn next_send(&mut self, now: Instant) -> Option<(u32, &PackedMad)> {
        if self.cancelled {
            return None;
        }
        if self.in_flight >= self.window.limit() {
            self.window_limited = true;
            return None;
        }
        let id = loop {
            let Some(id) = self.ready.pop_front() else {
                self.window_limited = false;
                return None;
            };
            let Some(entry) = self.entries.get(id) else {
                continue;
            };
            let dest = self.dests.entry(entry.dest).or_default();
            if dest.in_flight >= dest.cap(self.per_destination) {
                dest.waiting.push_back(id);
                self.stats.dest_waits += 1;
                continue;
            }
            dest.in_flight += 1;
            break id;
        };
        let tid = self.alloc_tid();
        let entry = self.entries.get_mut(id)?;
        entry.attempts += 1;
        if entry.last_tid != 0 {
            entry.older_tids.push(entry.last_tid);
        }
        entry.last_tid = tid;
        entry.in_flight = true;
        entry.sent_at = Some(now);
        entry.first_sent.get_or_insert(now);
        self.in_flight += 1;
        self.by_tid.insert(tid, id);
        let wait = self
            .rtt
            .deadline_for(entry.attempts, self.retries + 1, self.timeout);
        add_timer(&mut self.timers, (now + wait, id, entry.attempts));
        Some((tid, &entry.request))
    }

    /// An attempt to `dest` ended (answered, failed or superseded): free its slot there.
    fn release(&mut self, dest: u64) {
        self.promote_after(dest, true);
    }

    /// Let the oldest requests waiting for `dest` go next, as many as its cap has room for
    /// now. Called whenever that room may have grown: a slot freed, the cap raised again,
    /// or a request of it ended while not in flight (a late reply to an earlier attempt
    /// can end a request that was waiting, or was already let go but not yet sent: then
    /// its room must go to the next one). Letting too many go is harmless: whoever finds
    /// the destination full waits again.
    fn promote(&mut self, dest: u64) {
        self.promote_after(dest, false);
    }

    /// [`Ledger::promote`], after freeing one slot of `dest` first when `released`: one
    /// lookup of the destination for both, as a reply ends a request.
    fn promote_after(&mut self, dest: u64, released: bool) {
        let Some(d) = self.dests.get_mut(&dest) else {
            return;
        };
        if released {
            d.in_flight = d.in_flight.saturating_sub(1);
        }
        let mut room = d.cap(self.per_destination).saturating_sub(d.in_flight);
        let mut promoted = Vec::new();
        while room > 0 {
            let Some(id) = d.waiting.pop_front() else {
                break;
            };
            if self.entries.contains(id) {
                promoted.push(id);
                room -= 1;
            }
        }
        // Oldest first at the front of the line.
        for id in promoted.into_iter().rev() {
            self.ready.push_front(id);
        }
        if d.in_flight == 0 && d.waiting.is_empty() && !d.lossy && !d.unreachable {
            self.dests.remove(&dest);
        }
    }

    /// End request `id`: its token.
    fn finish(&mut self, id: u64) -> Option<T> {
        let (token, last_tid, older_tids, in_flight, dest) = self.entries.remove_with(id, |e| {
            (
                e.token.take(),
                e.last_tid,
                std::mem::take(&mut e.older_tids),
                e.in_flight,
                e.dest,
            )
        })?;
        if last_tid != 0 {
            self.by_tid.remove(last_tid);
        }
        for &tid in &older_tids {
            self.by_tid.remove(tid);
        }
        if in_flight {
            self.in_flight -= 1;
            self.release(dest);
        } else {
            self.promote(dest);
        }
        token
    }

    /// The current attempt of `id` was lost (deadline, or a busy reply) at `now`: the
    /// window and the destination slow down.
    fn on_loss(&mut self, id: u64, now: Instant) {
        let Some(entry) = self.entries.get(id) else {
            return;
        };
        let sent_at = entry.sent_at.unwrap_or(now);
        if self.window.on_loss(sent_at, now) {
            self.stats.window_cuts += 1;
        }
        self.dests.entry(entry.dest).or_default().lossy = true;
    }

    /// A reply to the current attempt of `id` arrived at `now`.
    fn on_answer(&mut self, id: u64, now: Instant) {
        let Some(entry) = self.entries.get(id) else {
            return;
        };
        if let Some(sent_at) = entry.sent_at {
            let rtt = now.saturating_duration_since(sent_at);
            self.window.on_reply(rtt, self.timeout, self.window_limited);
            // Karn: only a first attempt's reply says how long a round trip takes.
            if entry.attempts == 1 {
                self.rtt.sample(rtt);
            }
        }
        // The reply ends the request (or its superseded attempt) at once after this, and
        // that promotes the destination's waiting requests, with the cap raised here.
        if let Some(d) = self.dests.get_mut(&entry.dest) {
            d.on_answer();
        }
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
        let dest = entry.dest;
        if entry.in_flight {
            entry.in_flight = false;
            self.in_flight -= 1;
            self.release(dest);
        }
        let entry = self.entries.get(id)?;
        // A destination that let a request fail for good by timeout looks unreachable: its
        // other requests get one attempt each until it answers again.
        let unreachable = self.dests.get(&dest).is_some_and(|d| d.unreachable);
        if entry.attempts <= self.retries && !unreachable {
            if self.cancelled {
                return self.finish(id).map(|t| (t, MadError::Cancelled));
            }
            self.stats.retries += 1;
            self.ready.push_front(id);
            return None;
        }
        let attempts = entry.attempts;
        let err = error(attempts);
        if matches!(err, MadError::Timeout { .. }) {
            self.stats.timeouts += 1;
            if self.cancelled {
                // Cancelled before its last deadline: no verdict on the destination.
            } else if let Some(d) = self.dests.get_mut(&dest) {
                d.unreachable = true;
            }
        }
        self.finish(id).map(|t| (t, err))
    }

    /// The send of `tid` failed locally: the request ends with that error.
    pub fn send_failed(&mut self, tid: u32, error: MadError) -> Option<(T, MadError)> {
        let id = self.by_tid.get(tid)?;
        self.finish(id).map(|t| (t, error))
    }

    /// Account for a received MAD: `umad_status` from the umad header, `mad` the 256 bytes.
    pub fn on_reply(&mut self, umad_status: i32, mad: &[u8; MAD_SIZE]) -> Outcome<T> {
        self.on_reply_at(Instant::now(), umad_status, mad)
    }

    /// [`Ledger::on_reply`] with the time it arrived (for the window's round trips).
    pub fn on_reply_at(
        &mut self,
        now: Instant,
        umad_status: i32,
        mad: &[u8; MAD_SIZE],
    ) -> Outcome<T> {
        let Ok(view) = MadView::parse(&mad[..]) else {
            self.stats.unmatched += 1;
            return Outcome::Unmatched;
        };
        // Only the low 32 bits are ours: the kernel and the shim rewrite the upper half.
        let tid = view.header.transaction_id as u32;
        let Some(id) = self.by_tid.get(tid) else {
            self.stats.unmatched += 1;
            return Outcome::Unmatched;
        };
        let Some(entry) = self.entries.get(id) else {
            self.stats.unmatched += 1;
            return Outcome::Unmatched;
        };
        let latest = entry.in_flight && entry.last_tid == tid;
        let first_sent = entry.first_sent;
        if umad_status != 0 {
            if umad_status == UMAD_STATUS_TIMEOUT {
                self.stats.unroutable += 1;
            }
            // A superseded attempt failing says nothing about the one in flight.
            if !latest {
                return Outcome::Pending;
            }
            if umad_status == UMAD_STATUS_TIMEOUT {
                // A loss: on hardware the kernel's own timeout for this send ran out; the
                // simulator's shim reports MADs it dropped (a dead route, a lossy port) so.
                self.on_loss(id, now);
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
            // Busy: ask again (bounded by the same retry budget), and slow down.
            if !latest {
                return Outcome::Pending;
            }
            self.on_loss(id, now);
            let done = self.retry_or_fail(id, |_| MadError::Status(status));
            return done.map_or(Outcome::Pending, |(t, e)| Outcome::Done(t, Err(e)));
        }
        self.on_answer(id, now);
        if !latest {
            // A reply to an attempt given up on: that timeout was no loss.
            self.stats.late_replies += 1;
            if let Some(first) = first_sent {
                if self.window.on_spurious_loss(first, now) {
                    self.stats.window_cuts_undone += 1;
                }
            }
        }
        let Some(token) = self.finish(id) else {
            return Outcome::Unmatched;
        };
        if !status.is_ok() {
            return Outcome::Done(token, Err(MadError::Status(status)));
        }
        Outcome::Done(token, Ok(()))
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
            self.on_loss(id, now);
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
        for d in self.dests.values_mut() {
            d.waiting.clear();
        }
        let mut out = Vec::new();
        for id in self.entries.ids() {
            if self.entries.get(id).is_some_and(|e| !e.in_flight) {
                if let Some(token) = self.finish(id) {
                    out.push((token, MadError::Cancelled));
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
            if let Some(token) = self.finish(id) {
                out.push((token, error.clone()));
            }
        }
        self.ready.clear();
        self.timers.clear();
        self.dests.clear();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::NodeInfo;
    use crate::attribute::{Class, SubnMgt};
    use crate::engine::pacing::MIN_RTO;
    use crate::engine::testing::dr;
    use crate::engine::UmadCall;
    use crate::header::{class, MadHeader, MadStatus};
    use crate::smp::SmpRoute;

    const T: Duration = Duration::from_millis(100);

    proptest::proptest! {
        /// Timers added in any order (mostly rising, as sends make them, with earlier
        /// ones and equal ones among them) come out by deadline, those due at once in the
        /// order they were added.
        #[test]
        fn timers_come_out_by_deadline_then_as_set(
            waits in proptest::collection::vec((0u64..50, 0u64..8, 1u32..4), 0..200),
        ) {
            let start = Instant::now();
            let mut timers = VecDeque::new();
            let mut set = Vec::new();
            for (i, &(wait, id, attempt)) in waits.iter().enumerate() {
                // Sent in bursts of four: a deadline is the burst's time plus its wait.
                let timer = (start + Duration::from_millis(i as u64 / 4 + wait), id, attempt);
                add_timer(&mut timers, timer);
                set.push(timer);
            }
            // A stable sort keeps the order of equal deadlines.
            set.sort_by_key(|t| t.0);
            proptest::prop_assert_eq!(Vec::from(timers), set);
        }
    }

    #[test]
    fn slab_keeps_ids_across_holes_and_advances_past_them() {
        let mut slab = Slab::new();
        for id in 10..14 {
            slab.push(id, id * 100);
        }
        let copy = |e: &mut u64| *e;
        assert_eq!(slab.remove_with(11, copy), Some(1100));
        assert_eq!(slab.remove_with(11, copy), None);
        assert_eq!(slab.get(12), Some(&1200));
        assert_eq!(slab.remove_with(10, copy), Some(1000));
        // 10 and 11 are gone: the front moved past both.
        assert_eq!(slab.first, 12);
        assert_eq!(slab.ids(), vec![12, 13]);
        assert!(slab.get(9).is_none() && slab.get(99).is_none());
        slab.remove_with(13, copy);
        slab.remove_with(12, copy);
        assert!(slab.is_empty());
        assert!(slab.slots.is_empty(), "freed slots stay behind");
        slab.push(14, 1);
        assert_eq!(slab.get(14), Some(&1));
    }

    /// TIDs in sequence, past u32::MAX (0 skipped) and ending out of order: each finds its
    /// entry until it ends, and the deque keeps only what lies from the oldest pending on.
    #[test]
    fn tid_map_follows_tids_across_the_wrap() {
        let mut m = TidMap::new();
        let tids = [u32::MAX - 1, u32::MAX, 1, 2, 3];
        for (id, &tid) in tids.iter().enumerate() {
            m.insert(tid, id as u64);
        }
        for (id, &tid) in tids.iter().enumerate() {
            assert_eq!(m.get(tid), Some(id as u64));
        }
        assert_eq!(m.get(0), None);
        assert_eq!(m.get(4), None);
        assert_eq!(m.get(u32::MAX - 2), None);
        m.remove(u32::MAX);
        m.remove(2);
        assert_eq!(m.get(u32::MAX), None);
        assert_eq!(m.get(1), Some(2));
        m.remove(u32::MAX - 1);
        // The front ended: the deque starts at the oldest pending TID, 1.
        let front = m.base.wrapping_add(m.ids.first as u32);
        assert_eq!((front, m.ids.slots.len()), (1, 3));
        m.remove(1);
        m.remove(3);
        assert!(m.ids.slots.is_empty());
        // Empty, it starts again wherever the next TID is.
        m.insert(77, 9);
        assert_eq!((m.get(77), m.base), (Some(9), 77));
    }

    /// The reply a node would send to `request` sent under `tid`.
    fn reply(request: &Request, tid: u32, status: u16) -> [u8; MAD_SIZE] {
        let mut mad = request.mad;
        let mut header = request.header().unwrap();
        header.response = true;
        header.status = status;
        // Upper half as the kernel rewrites it: must be ignored.
        header.transaction_id = (0xdead_beef << 32) | u64::from(tid);
        header.write_fields(&mut mad).unwrap();
        SubnMgt::PAYLOAD.bytes_mut(&mut mad).unwrap()[0] = 0x42;
        mad
    }

    /// What the shim gives back for an unroutable request: the request itself, status 110.
    fn returned(request: &Request, tid: u32) -> [u8; MAD_SIZE] {
        let mut mad = request.mad;
        MadHeader::transaction_id
            .write(&mut mad, &u64::from(tid))
            .unwrap();
        mad
    }

    fn send(l: &mut Ledger<u32>, now: Instant) -> Option<(u32, Request)> {
        l.next_send(now).map(|(t, r)| (t, r.unpack()))
    }

    fn done(o: Outcome<u32>) -> (u32, Result<(), MadError>) {
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
        assert_eq!(result, Ok(()));
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
        MadHeader::mgmt_class
            .write(&mut other, &class::PERF)
            .unwrap();
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
        assert_eq!(result, Ok(()));
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

    fn paced(window: Window, per_destination: usize, retries: u32) -> Ledger<u32> {
        Ledger::paced(1, window, per_destination, T, retries)
    }

    /// Send everything the ledger lets out now.
    fn send_all(l: &mut Ledger<u32>, now: Instant) -> Vec<(u32, Request)> {
        std::iter::from_fn(|| send(l, now)).collect()
    }

    #[test]
    fn destination_keys_tell_lids_and_routes_apart() {
        use crate::attr::PortCounters;
        let lid = |l| Request::get::<NodeInfo>(&SmpRoute::Lid(l), 0);
        assert_eq!(dest_key(&lid(5).dest), dest_key(&lid(5).dest));
        assert_ne!(dest_key(&lid(5).dest), dest_key(&lid(6).dest));
        // The SMA and the PMA of one LID count as one destination.
        let pma = Request::get::<PortCounters>(&5, 0);
        assert_eq!(dest_key(&pma.dest), dest_key(&lid(5).dest));
        assert_eq!(dest_key(&dr(&[1, 3]).dest), dest_key(&dr(&[1, 3]).dest));
        assert_ne!(dest_key(&dr(&[1, 3]).dest), dest_key(&dr(&[3, 1]).dest));
        assert_ne!(dest_key(&dr(&[1]).dest), dest_key(&dr(&[1, 0]).dest));
        assert_ne!(dest_key(&dr(&[]).dest), dest_key(&lid(0).dest));
    }

    #[test]
    fn a_destination_never_has_more_than_its_cap_in_flight() {
        let t0 = Instant::now();
        let mut l = paced(Window::new(64, 64), 4, 0);
        for i in 0..10 {
            l.push(i, dr(&[1]));
        }
        let sent = send_all(&mut l, t0);
        assert_eq!(
            sent.len(),
            4,
            "the window has room, the destination has not"
        );
        assert_eq!(l.in_flight_to(&dr(&[1])), 4);
        assert_eq!(l.stats().dest_waits, 6);
        // One answer frees one slot there, for the oldest waiting request.
        let (tid, r) = &sent[0];
        assert!(matches!(
            l.on_reply(0, &reply(r, *tid, 0)),
            Outcome::Done(0, _)
        ));
        let next = send_all(&mut l, t0);
        assert_eq!(next.len(), 1);
        let (token, _) = done(l.on_reply(0, &reply(&next[0].1, next[0].0, 0)));
        assert_eq!(token, 4, "waiting requests keep their order");
    }

    #[test]
    fn a_busy_destination_does_not_hold_back_the_others() {
        let t0 = Instant::now();
        let mut l = paced(Window::new(16, 16), 4, 0);
        // 100 for one switch first, then one each for 8 others.
        for i in 0..100 {
            l.push(i, dr(&[1]));
        }
        for i in 0..8u8 {
            l.push(100 + u32::from(i), dr(&[2, i + 1]));
        }
        let sent = send_all(&mut l, t0);
        assert_eq!(sent.len(), 12, "4 to the busy switch, 8 to the others");
        let others = sent
            .iter()
            .filter(|(_, r)| dest_key(&r.dest) != dest_key(&dr(&[1]).dest))
            .count();
        assert_eq!(others, 8);
    }

    #[test]
    fn the_window_grows_while_replies_come_back_and_caps_at_its_bound() {
        let mut now = Instant::now();
        let mut l = paced(Window::new(2, 8), 64, 0);
        for i in 0..200 {
            // Spread over many destinations: only the window limits.
            l.push(i, dr(&[1, (i % 200) as u8 + 1]));
        }
        let mut widths = Vec::new();
        loop {
            let batch = send_all(&mut l, now);
            if batch.is_empty() {
                break;
            }
            widths.push(batch.len());
            now += Duration::from_micros(100);
            for (tid, r) in &batch {
                l.on_reply_at(now, 0, &reply(r, *tid, 0));
            }
        }
        // Slow start from 2: 2, 4, 8, then the bound.
        assert_eq!(&widths[..4], &[2, 4, 8, 8]);
        assert_eq!(l.window().limit(), 8);
        assert!(l.is_idle());
    }

    #[test]
    fn a_timeout_cuts_the_window_and_slows_its_destination_to_one() {
        let t0 = Instant::now();
        let mut l = paced(Window::new(16, 16), 4, 3);
        for i in 0..6 {
            l.push(i, dr(&[1]));
        }
        l.push(6, dr(&[2]));
        let sent = send_all(&mut l, t0);
        assert_eq!(sent.len(), 5);
        // Everything times out: one loss episode, one cut.
        let mut failed = Vec::new();
        l.expire(t0 + T, &mut failed);
        assert!(failed.is_empty(), "all resent");
        assert_eq!(l.window().limit(), 8);
        assert_eq!(l.stats().window_cuts, 1);
        let resent = send_all(&mut l, t0 + T);
        let to_lossy = resent
            .iter()
            .filter(|(_, r)| dest_key(&r.dest) == dest_key(&dr(&[1]).dest))
            .count();
        assert_eq!(to_lossy, 1, "one at a time to the lossy destination");
        assert_eq!(resent.len(), 2);
        // Once it answers, it gets its full cap back.
        let (tid, r) = resent
            .iter()
            .find(|(_, r)| dest_key(&r.dest) == dest_key(&dr(&[1]).dest))
            .unwrap();
        assert!(matches!(
            l.on_reply_at(t0 + T, 0, &reply(r, *tid, 0)),
            Outcome::Done(..)
        ));
        assert_eq!(send_all(&mut l, t0 + T).len(), 4);
    }

    #[test]
    fn an_unreachable_destination_gets_one_attempt_per_request() {
        let mut now = Instant::now();
        let mut l = paced(Window::new(16, 16), 4, 3);
        for i in 0..8 {
            l.push(i, dr(&[9]));
        }
        let mut failed = Vec::new();
        let mut sends = 0;
        while !l.is_idle() {
            sends += send_all(&mut l, now).len();
            now += T;
            l.expire(now, &mut failed);
        }
        assert_eq!(failed.len(), 8);
        assert!(failed
            .iter()
            .all(|(_, e)| matches!(e, MadError::Timeout { .. })));
        // The first request used its 4 attempts (one at a time once lossy); after it
        // failed the destination looks gone: the other 7 get one attempt each, not 4.
        assert!(sends < 8 * 4, "{sends} sends for 8 requests");
        assert!(sends <= 4 + 3 + 7, "{sends} sends");
    }

    #[test]
    fn requests_waiting_for_a_destination_end_with_a_cancel() {
        let t0 = Instant::now();
        let mut l = paced(Window::new(16, 16), 1, 0);
        for i in 0..3 {
            l.push(i, dr(&[1]));
        }
        let sent = send_all(&mut l, t0);
        assert_eq!(sent.len(), 1);
        let cancelled = l.cancel();
        assert_eq!(cancelled.len(), 2, "the two waiting for the destination");
        let (tid, r) = &sent[0];
        assert!(matches!(
            l.on_reply(0, &reply(r, *tid, 0)),
            Outcome::Done(0, Ok(_))
        ));
        assert!(l.is_idle());
        assert!(send(&mut l, t0).is_none());
    }

    #[test]
    fn finished_waiters_do_not_stall_the_destination() {
        // A waiting request that ended another way (send failure of its first attempt is
        // impossible while waiting; fail_all and cancel clear the queues) is skipped.
        let t0 = Instant::now();
        let mut l = paced(Window::new(16, 16), 1, 0);
        for i in 0..3 {
            l.push(i, dr(&[1]));
        }
        let sent = send_all(&mut l, t0);
        let (tid, _) = &sent[0];
        // The request in flight fails locally: the next waiter goes.
        assert!(l
            .send_failed(
                *tid,
                MadError::from_transport(TransportError::Send { errno: 22 })
            )
            .is_some());
        let next = send_all(&mut l, t0);
        assert_eq!(next.len(), 1);
        let (token, _) = done(l.on_reply(0, &reply(&next[0].1, next[0].0, 0)));
        assert_eq!(token, 1);
        assert_eq!(send_all(&mut l, t0).len(), 1);
    }

    #[test]
    fn resends_follow_the_measured_round_trip_and_the_last_waits_the_timeout() {
        let t0 = Instant::now();
        let rtt = Duration::from_micros(200);
        let mut l = paced(Window::new(32, 32), 16, 2);
        // Twenty quick round trips teach the ledger what a reply takes.
        for i in 0..20u8 {
            l.push(u32::from(i), dr(&[1, i + 1]));
        }
        for (tid, r) in send_all(&mut l, t0) {
            l.on_reply_at(t0 + rtt, 0, &reply(&r, tid, 0));
        }
        assert_eq!(l.rtt().srtt(), Some(rtt));
        // One request is lost: its first resend comes after the floor, not the timeout.
        l.push(99, dr(&[2]));
        let t1 = t0 + Duration::from_millis(1);
        let (first, r) = send(&mut l, t1).unwrap();
        assert_eq!(l.next_deadline(), Some(t1 + MIN_RTO));
        let mut failed = Vec::new();
        l.expire(t1 + MIN_RTO, &mut failed);
        let t2 = t1 + MIN_RTO;
        let (_, _) = send(&mut l, t2).unwrap();
        assert_eq!(l.next_deadline(), Some(t2 + MIN_RTO * 2), "doubled");
        l.expire(t2 + MIN_RTO * 2, &mut failed);
        let t3 = t2 + MIN_RTO * 2;
        send(&mut l, t3).unwrap();
        assert_eq!(
            l.next_deadline(),
            Some(t3 + T),
            "the last attempt waits it all"
        );
        assert!(failed.is_empty());
        // The first attempt's reply, late, still completes it.
        let late = l.on_reply_at(t3, 0, &reply(&r, first, 0));
        assert!(matches!(late, Outcome::Done(99, Ok(_))), "{late:?}");
        // And the resends did not teach the estimate anything (Karn).
        assert_eq!(l.rtt().srtt(), Some(rtt));
    }

    #[test]
    fn a_late_reply_to_a_waiting_request_does_not_strand_the_others() {
        // A destination slowed to one at a time after a loss; requests wait behind the
        // resend. The first attempt's reply comes late, while that request is waiting or
        // let go but not yet sent: it ends there, and the others must still go.
        let t0 = Instant::now();
        let mut l = paced(Window::new(16, 16), 4, 3);
        for i in 0..6 {
            l.push(i, dr(&[1]));
        }
        let sent = send_all(&mut l, t0);
        assert_eq!(sent.len(), 4);
        let mut failed = Vec::new();
        l.expire(t0 + T, &mut failed);
        // Lossy now: one resend goes, the rest wait.
        let resent = send_all(&mut l, t0 + T);
        assert_eq!(resent.len(), 1);
        // Late replies to the three first attempts whose resends wait: they end there.
        let (resent_tid, resent_request) = &resent[0];
        let mut late = 0;
        for (tid, r) in &sent {
            if let Outcome::Done(token, Ok(_)) = l.on_reply_at(t0 + T, 0, &reply(r, *tid, 0)) {
                assert_ne!(token, 99);
                late += 1;
            }
        }
        // (The one resent was ended by its own late reply too: 4 in all.)
        assert_eq!(late, 4);
        assert!(matches!(
            l.on_reply_at(t0 + T, 0, &reply(resent_request, *resent_tid, 0)),
            Outcome::Unmatched
        ));
        // Two never sent are left: they must go, nothing is in flight to hold them.
        let rest = send_all(&mut l, t0 + T);
        assert_eq!(rest.len(), 2, "stranded: {}", l.stall_report());
        for (tid, r) in rest {
            assert!(matches!(
                l.on_reply_at(t0 + T, 0, &reply(&r, tid, 0)),
                Outcome::Done(..)
            ));
        }
        assert!(l.is_idle());
    }

    #[test]
    fn a_request_let_go_but_ended_before_its_send_passes_its_turn_on() {
        // One at a time after a loss. The slot freed by a failed send goes to the oldest
        // waiting request (1), which then ends by a late reply to its first attempt before
        // its resend went out: request 0 must get the slot, or it waits forever with
        // nothing in flight to let it go.
        let t0 = Instant::now();
        let mut l = paced(Window::new(16, 16), 4, 3);
        for i in 0..3 {
            l.push(i, dr(&[1]));
        }
        let first = send_all(&mut l, t0);
        assert_eq!(first.len(), 3);
        let mut failed = Vec::new();
        l.expire(t0 + T, &mut failed);
        // Resends go to the front, last expired first: request 2 goes, 1 and 0 wait.
        let resent = send_all(&mut l, t0 + T);
        assert_eq!(resent.len(), 1, "lossy: one at a time");
        assert_eq!(resent[0].1, first[2].1);
        let error = MadError::from_transport(TransportError::Send { errno: 22 });
        assert_eq!(l.send_failed(resent[0].0, error).map(|(t, _)| t), Some(2));
        let (tid, r) = &first[1];
        assert!(matches!(
            l.on_reply_at(t0 + T, 0, &reply(r, *tid, 0)),
            Outcome::Done(1, Ok(_))
        ));
        let last = send_all(&mut l, t0 + T);
        assert_eq!(last.len(), 1, "request 0 stranded: {}", l.stall_report());
        let (token, _) = done(l.on_reply_at(t0 + T, 0, &reply(&last[0].1, last[0].0, 0)));
        assert_eq!(token, 0);
        assert!(l.is_idle());
    }
}
