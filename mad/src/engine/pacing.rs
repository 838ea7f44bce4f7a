//! How many requests go out at once: a global window that adapts (AIMD) and a cap per
//! destination. Pure: time is passed in, nothing here sends.
//!
//! What the reference tools do, and why ibscope does more:
//! - libibnetdisc (ibnetdiscover `-o`) keeps 2 SMPs on the wire by default
//!   (`DEFAULT_MAX_SMP_ON_WIRE`), for the whole fabric, fixed.
//! - OpenSM keeps `max_wire_smps` (default 4) SMPs on the wire for the whole subnet;
//!   `max_wire_smps2` and `max_smps_timeout` let more go out only after a wait.
//! - ibdiagnet keeps `--smp_window` (default 8) QP0 MADs and `--gmp_window` (default 128)
//!   QP1 MADs on the wire, fixed.
//!
//! None of them limits MADs per destination, so each switch sees at most their whole
//! window. A switch's SMA drops VL15 MADs it has no buffer for (VL15 has no flow control),
//! so ibscope bounds what any one destination sees instead of the whole fabric: at most
//! [`PER_DESTINATION`] (4, OpenSM's window for a whole subnet) in flight to one
//! destination, and 1 after a timeout there, until it answers again. Across destinations a
//! window starts at [`INITIAL_WINDOW`] (ibdiagnet's SMP window), doubles every round trip
//! while every reply comes back well within its deadline (slow start), then grows by one
//! per round trip, up to the engine's `max_outstanding`; a timeout (or a busy reply) halves
//! it, once per loss episode: attempts sent before the last cut do not cut it again.
//!
//! Retransmission: the reference tools wait their whole timeout (200-1000 ms) before a
//! resend, so every lost MAD holds a window slot that long; at 1% loss that alone slows a
//! sweep a hundredfold. ibscope measures round trips ([`RttEstimator`], first attempts
//! only) and resends after the larger of TCP's estimate (RFC 6298: smoothed RTT plus four
//! deviations) and twice the slowest recent round trip, doubled per resend, never below
//! [`MIN_RTO`]. The slowest-recent term is there because round trips through a busy host
//! are not bell-shaped: a process not scheduled for a few milliseconds makes a burst of
//! replies late at once, which the mean deviation does not foresee. The last attempt always
//! waits the full configured timeout, and a late reply to any earlier attempt still
//! completes the request, so a slow node that answers within the timeout is never given up
//! on; the window cut its seeming loss caused is then taken back.

use std::time::{Duration, Instant};

/// Requests in flight to one destination (a LID, or a directed route) at most.
pub const PER_DESTINATION: usize = 4;

/// The window a fresh engine starts with (ibdiagnet's default `--smp_window`).
pub const INITIAL_WINDOW: usize = 8;

/// The shortest wait before a resend, whatever the round trips measured: a scheduler hiccup
/// on a busy host must not look like loss.
pub const MIN_RTO: Duration = Duration::from_millis(1);

/// Round-trip estimate (RFC 6298): smoothed RTT and its mean deviation, from first attempts
/// only (a reply to a resent request is ambiguous).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RttEstimator {
    srtt: Duration,
    rttvar: Duration,
    samples: u64,
    /// The slowest round trip of this period of [`PEAK_PERIOD`] samples, and of the last.
    peak: Duration,
    last_peak: Duration,
}

/// Samples per period of the slowest-recent-round-trip term.
const PEAK_PERIOD: u64 = 1024;

impl RttEstimator {
    pub fn sample(&mut self, rtt: Duration) {
        if self.samples == 0 {
            self.srtt = rtt;
            self.rttvar = rtt / 2;
        } else {
            let dev = if self.srtt > rtt {
                self.srtt - rtt
            } else {
                rtt - self.srtt
            };
            self.rttvar = (self.rttvar * 3 + dev) / 4;
            self.srtt = (self.srtt * 7 + rtt) / 8;
        }
        self.samples += 1;
        self.peak = self.peak.max(rtt);
        if self.samples % PEAK_PERIOD == 0 {
            self.last_peak = self.peak;
            self.peak = Duration::ZERO;
        }
    }

    /// The wait before a first resend: the larger of RFC 6298's estimate and twice the
    /// slowest recent round trip (see the module docs), not below [`MIN_RTO`].
    pub fn rto(&self) -> Duration {
        let tcp = self.srtt + self.rttvar * 4;
        let recent = self.peak.max(self.last_peak) * 2;
        tcp.max(recent).max(MIN_RTO)
    }

    /// The smoothed round trip, once measured.
    pub fn srtt(&self) -> Option<Duration> {
        (self.samples > 0).then_some(self.srtt)
    }

    /// How long to wait for attempt `attempt` (1-based) of a request allowed `attempts` in
    /// all, with `timeout` configured: the estimate doubled per resend, within
    /// [`MIN_RTO`]..=`timeout`; the last attempt, and every attempt before any round trip
    /// was measured, get `timeout`.
    pub fn deadline_for(&self, attempt: u32, attempts: u32, timeout: Duration) -> Duration {
        if self.samples == 0 || attempt >= attempts {
            return timeout;
        }
        let backoff = 1u32 << (attempt - 1).min(16);
        self.rto().saturating_mul(backoff).min(timeout)
    }
}

/// The global window: how many requests may be in flight at once, adapted to replies
/// (additive increase, multiplicative decrease).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    limit: usize,
    max: usize,
    /// Below this the window doubles per round trip; at or above it grows by one.
    threshold: usize,
    /// Replies counted toward the next step of additive increase.
    credit: usize,
    /// When the window was last cut: losses of attempts sent before it belong to that
    /// episode and do not cut it again.
    cut_at: Option<Instant>,
    /// Limit and threshold before the last cut, until it is confirmed or undone.
    before_cut: Option<(usize, usize)>,
    cuts: u64,
    undone: u64,
    low: usize,
    high: usize,
}

impl Window {
    /// A window starting at `initial` (at least 1) that may grow up to `max`.
    pub fn new(initial: usize, max: usize) -> Self {
        let max = max.max(1);
        let limit = initial.clamp(1, max);
        Window {
            limit,
            max,
            threshold: max,
            credit: 0,
            cut_at: None,
            before_cut: None,
            cuts: 0,
            undone: 0,
            low: limit,
            high: limit,
        }
    }

    /// Requests that may be in flight now.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The upper bound (`--max-outstanding`).
    pub fn max(&self) -> usize {
        self.max
    }

    /// Times the window was cut.
    pub fn cuts(&self) -> u64 {
        self.cuts
    }

    /// Cuts taken back because the loss that caused them was not one.
    pub fn undone(&self) -> u64 {
        self.undone
    }

    /// The smallest and the largest limit the window had.
    pub fn range(&self) -> (usize, usize) {
        (self.low, self.high)
    }

    /// A new upper bound; the limit follows it down, and may grow up to it.
    pub fn set_max(&mut self, max: usize) {
        self.max = max.max(1);
        self.threshold = self.threshold.clamp(1, self.max);
        self.set_limit(self.limit.min(self.max));
        if self.cut_at.is_none() {
            // Never cut: keep slow start open up to the new bound.
            self.threshold = self.max;
        }
    }

    fn set_limit(&mut self, limit: usize) {
        self.limit = limit.clamp(1, self.max);
        self.low = self.low.min(self.limit);
        self.high = self.high.max(self.limit);
    }

    /// A reply arrived `rtt` after its attempt was sent, whose deadline was `timeout`.
    /// `limited`: the window, not a lack of work, held back the last send. Only then does
    /// the window grow, and only for a reply that took under half its deadline (a slower
    /// one means queues are building up somewhere on its way).
    pub fn on_reply(&mut self, rtt: Duration, timeout: Duration, limited: bool) {
        if !limited || rtt > timeout / 2 || self.limit >= self.max {
            return;
        }
        if self.limit < self.threshold {
            self.set_limit(self.limit + 1);
            return;
        }
        self.credit += 1;
        if self.credit >= self.limit {
            self.credit = 0;
            self.set_limit(self.limit + 1);
        }
    }

    /// An attempt sent at `sent_at` went unanswered (or was answered busy), seen at `now`.
    /// Halves the window unless the window was already cut after that attempt was sent.
    /// True when it cut.
    pub fn on_loss(&mut self, sent_at: Instant, now: Instant) -> bool {
        if self.cut_at.is_some_and(|cut| sent_at < cut) {
            return false;
        }
        let half = (self.limit / 2).max(1);
        self.before_cut = Some((self.limit, self.threshold));
        self.threshold = half;
        self.credit = 0;
        self.set_limit(half);
        self.cut_at = Some(now);
        self.cuts += 1;
        true
    }

    /// A reply came for an attempt that had been given up on: its loss was no loss (the
    /// reply was only slow: a busy host, a scheduler hiccup). For a request first sent at
    /// `first_sent` whose late reply came at `now`: when the last cut fell between the two,
    /// that cut is taken back (as TCP's Eifel response, RFC 4015). True when it was.
    pub fn on_spurious_loss(&mut self, first_sent: Instant, now: Instant) -> bool {
        let Some(cut) = self.cut_at else {
            return false;
        };
        if !(first_sent < cut && cut <= now) {
            return false;
        }
        let Some((limit, threshold)) = self.before_cut.take() else {
            return false;
        };
        self.threshold = threshold;
        self.set_limit(limit.min(self.max));
        self.undone += 1;
        true
    }
}

/// What the ledger keeps per destination during a batch.
#[derive(Debug, Default)]
pub(crate) struct DestState {
    pub(crate) in_flight: usize,
    /// An attempt here timed out and nothing has answered since: one at a time.
    pub(crate) lossy: bool,
    /// A request here failed for good by timeout and nothing has answered since: the
    /// destination looks unreachable, so waiting requests get one attempt each.
    pub(crate) unreachable: bool,
    /// Requests held back by the cap, oldest first (ids; finished ones are skipped).
    pub(crate) waiting: std::collections::VecDeque<u64>,
}

impl DestState {
    /// Requests this destination may have in flight now.
    pub(crate) fn cap(&self, per_destination: usize) -> usize {
        if self.lossy && !self.unreachable {
            1
        } else {
            per_destination.max(1)
        }
    }

    pub(crate) fn on_answer(&mut self) {
        self.lossy = false;
        self.unreachable = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_millis(200);
    const FAST: Duration = Duration::from_micros(50);

    #[test]
    fn slow_start_doubles_per_round_trip_up_to_the_bound() {
        let mut w = Window::new(8, 128);
        assert_eq!(w.limit(), 8);
        // One round trip: a full window of replies, each adding one.
        for _ in 0..8 {
            w.on_reply(FAST, T, true);
        }
        assert_eq!(w.limit(), 16);
        for _ in 0..1000 {
            w.on_reply(FAST, T, true);
        }
        assert_eq!(w.limit(), 128, "never past max_outstanding");
        assert_eq!(w.range(), (8, 128));
    }

    #[test]
    fn no_growth_without_need_or_when_replies_are_slow() {
        let mut w = Window::new(8, 128);
        for _ in 0..100 {
            // Work ran out before the window did: no evidence more would be carried.
            w.on_reply(FAST, T, false);
        }
        assert_eq!(w.limit(), 8);
        for _ in 0..100 {
            // Replies near their deadline: something is queueing.
            w.on_reply(T * 3 / 4, T, true);
        }
        assert_eq!(w.limit(), 8);
    }

    #[test]
    fn a_loss_halves_once_per_episode_then_growth_is_additive() {
        let t0 = Instant::now();
        let mut w = Window::new(64, 128);
        assert!(w.on_loss(t0, t0 + T));
        assert_eq!(w.limit(), 32);
        // More losses of attempts sent before the cut: the same episode.
        assert!(!w.on_loss(t0 + T / 2, t0 + T + T / 2));
        assert_eq!(w.limit(), 32);
        // Additive increase: one per window's worth of replies.
        for _ in 0..31 {
            w.on_reply(FAST, T, true);
        }
        assert_eq!(w.limit(), 32);
        w.on_reply(FAST, T, true);
        assert_eq!(w.limit(), 33);
        // An attempt sent after the cut is a new episode.
        assert!(w.on_loss(t0 + T * 2, t0 + T * 3));
        assert_eq!(w.limit(), 16);
        assert_eq!(w.cuts(), 2);
        assert_eq!(w.range(), (16, 64));
    }

    #[test]
    fn a_cut_for_a_reply_that_was_only_late_is_taken_back_once() {
        let t0 = Instant::now();
        let mut w = Window::new(64, 128);
        assert!(w.on_loss(t0, t0 + MIN_RTO));
        assert_eq!(w.limit(), 32);
        // A request sent before the cut, resent after it, answers to its first attempt.
        assert!(w.on_spurious_loss(t0, t0 + MIN_RTO * 2));
        assert_eq!(w.limit(), 64);
        assert_eq!((w.cuts(), w.undone()), (1, 1));
        // Only once per cut.
        assert!(!w.on_spurious_loss(t0, t0 + MIN_RTO * 2));
        // A late reply from before an older episode does not undo a newer cut.
        let t1 = t0 + T;
        assert!(w.on_loss(t1, t1 + MIN_RTO));
        assert!(!w.on_spurious_loss(t1 + MIN_RTO * 3, t1 + MIN_RTO * 4));
        assert_eq!(w.limit(), 32);
    }

    #[test]
    fn the_window_never_falls_below_one() {
        let mut now = Instant::now();
        let mut w = Window::new(4, 16);
        for _ in 0..10 {
            w.on_loss(now, now + T);
            now += T * 2;
        }
        assert_eq!(w.limit(), 1);
        w.on_reply(FAST, T, true);
        assert_eq!(w.limit(), 2, "grows back, additively from 1");
    }

    #[test]
    fn the_bound_can_move() {
        let mut w = Window::new(8, 128);
        w.set_max(4);
        assert_eq!((w.limit(), w.max()), (4, 4));
        w.set_max(64);
        for _ in 0..100 {
            w.on_reply(FAST, T, true);
        }
        assert_eq!(w.limit(), 64, "slow start reopens when never cut");
        assert_eq!(Window::new(0, 0).limit(), 1);
    }

    #[test]
    fn resends_wait_the_measured_round_trip_doubled_and_the_last_the_full_timeout() {
        let mut r = RttEstimator::default();
        // Nothing measured: the configured timeout.
        assert_eq!(r.deadline_for(1, 4, T), T);
        for _ in 0..50 {
            r.sample(Duration::from_micros(400));
        }
        assert_eq!(r.srtt(), Some(Duration::from_micros(400)));
        let first = r.deadline_for(1, 4, T);
        // Converged: no deviation left; twice the slowest is 800 us, the floor holds.
        assert_eq!(first, MIN_RTO);
        r.sample(Duration::from_millis(3));
        let jittery = r.deadline_for(1, 4, T);
        assert_eq!(
            jittery,
            Duration::from_millis(6),
            "twice the slowest recent"
        );
        assert_eq!(r.deadline_for(2, 4, T), (jittery * 2).min(T));
        assert_eq!(r.deadline_for(3, 4, T), (jittery * 4).min(T));
        let mut steady = RttEstimator::default();
        for _ in 0..50 {
            steady.sample(Duration::from_micros(100));
        }
        assert_eq!(
            steady.deadline_for(2, 4, T),
            MIN_RTO * 2,
            "the floor doubles too"
        );
        // A slow round trip is forgotten after two periods of ordinary ones.
        for _ in 0..2 * PEAK_PERIOD {
            steady.sample(Duration::from_micros(100));
        }
        steady.sample(Duration::from_millis(5));
        assert_eq!(steady.deadline_for(1, 4, T), Duration::from_millis(10));
        for _ in 0..2 * PEAK_PERIOD {
            steady.sample(Duration::from_micros(100));
        }
        assert_eq!(steady.deadline_for(1, 4, T), MIN_RTO);
        assert_eq!(r.deadline_for(4, 4, T), T, "the last attempt waits it all");
        // Never past the configured timeout, even backed off.
        assert_eq!(r.deadline_for(30, 40, T), T);
        // A timeout shorter than the floor wins.
        assert_eq!(
            r.deadline_for(1, 4, Duration::from_micros(300)),
            Duration::from_micros(300)
        );
    }

    #[test]
    fn a_lossy_destination_gets_one_at_a_time_unless_it_looks_gone() {
        let mut d = DestState::default();
        assert_eq!(d.cap(4), 4);
        d.lossy = true;
        assert_eq!(d.cap(4), 1);
        d.unreachable = true;
        assert_eq!(d.cap(4), 4);
        d.on_answer();
        assert_eq!(d.cap(4), 4);
        assert_eq!(d.cap(0), 1);
    }
}
