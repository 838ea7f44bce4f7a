//! The pending table of one batch: TIDs, the window, deadlines and retries, driven with
//! explicit time so it is tested without a fabric. No I/O happens here.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::{EngineStats, MadError, Request, Response, TransportError};
use crate::header::MAD_SIZE;
use crate::smp::MadView;

/// ETIMEDOUT in the umad header: the kernel (or the shim, at once) gave the send back
/// unanswered, e.g. a directed route through a dead port or an unknown LID.
const UMAD_STATUS_TIMEOUT: i32 = 110;

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
        Outcome::Done(entry.token, Ok(Response::from_mad(*mad)))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribute::{Class, SubnMgt};
    use crate::engine::testing::dr;
    use crate::engine::UmadCall;
    use crate::header::{class, MadHeader, MadStatus};

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
        assert_eq!(result.unwrap().payload::<SubnMgt>()[0], 0x42);
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
        assert_eq!(result.unwrap().payload::<SubnMgt>()[0], 0x42);
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
}
