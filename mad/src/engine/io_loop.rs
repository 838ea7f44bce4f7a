//! The [`Engine`]: the I/O loop that drives a [`Ledger`] over one local port, sending up to
//! the window and reading replies until every request of a batch is done.

use std::time::{Duration, Instant};

use super::cancel::CancelToken;
use super::config::{EngineConfig, EngineStats, MAX_OUTSTANDING, SIMULATOR_MAX_OUTSTANDING};
use super::error::MadError;
use super::ledger::{Ledger, Outcome};
use super::mad_trace::{Trace, TRACE_ENV};
use super::pacing::{RttEstimator, Window, INITIAL_WINDOW, PER_DESTINATION};
use super::packed::{FollowUps, PackedMad, PackedRequest};
use super::request::{Request, Response};
use crate::attribute::{Attribute, Class};
use crate::header::{class, class_version, MadHeader, MAD_SIZE};
use crate::smp::SmpFrame;
use crate::transport::AnyPort;
use crate::umad::{LocalPort, MadPort, TransportError};

/// The request engine over one port ([`AnyPort`]: a local umad port or a relay; tests
/// drive it over a fake [`MadPort`]).
#[derive(Debug)]
pub struct Engine<P: MadPort = AnyPort> {
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
    /// The adaptive window, carried from batch to batch (see [`super::pacing`]).
    window: Window,
    /// Requests in flight to one destination at most.
    per_destination: usize,
    /// Round trips measured so far: how soon to resend (see [`super::pacing`]).
    rtt: RttEstimator,
    trace: Option<Trace>,
    /// Where the trace goes when the engine is dropped ([`TRACE_ENV`]).
    trace_file: Option<std::path::PathBuf>,
}

/// Where an engine's trace goes: the file [`TRACE_ENV`] names for the process's first
/// engine, then `FILE.1`, `FILE.2`, ... for the engines of further fabrics (`-C all`), so
/// they do not overwrite each other.
fn trace_path(path: std::path::PathBuf) -> std::path::PathBuf {
    static OPENED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    match OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) {
        0 => path,
        n => {
            let mut p = path.into_os_string();
            p.push(format!(".{n}"));
            p.into()
        }
    }
}

/// The requests of a batch the ledger has not taken yet: the follow-ups pushed so far, then
/// the rest of the caller's batch. The ledger takes them one at a time as it runs out of
/// requests to send, so a batch of a million requests is not held twice, in the caller's
/// list and in the pending table. Follow-ups go first so that they are sent as they come
/// rather than piling up: a counter sweep's batch is one ClassPortInfo per node and each
/// answer brings two reads per port; taken after the batch, all 2.4M reads of a 100k-HCA
/// fabric were held at once (about 700 MB).
struct Intake<T, R: Into<PackedRequest>, I: Iterator<Item = (T, R)>> {
    batch: std::iter::Peekable<std::iter::Fuse<I>>,
    /// Follow-ups, packed as the ledger keeps them.
    later: std::collections::VecDeque<(T, PackedRequest)>,
}

impl<T, R: Into<PackedRequest>, I: Iterator<Item = (T, R)>> Intake<T, R, I> {
    fn new(batch: I) -> Self {
        Intake {
            batch: batch.fuse().peekable(),
            later: std::collections::VecDeque::new(),
        }
    }

    fn is_empty(&mut self) -> bool {
        self.later.is_empty() && self.batch.peek().is_none()
    }

    /// Requests not taken (the batch's as far as its iterator knows).
    fn len(&self) -> usize {
        self.batch.size_hint().0 + self.later.len()
    }

    /// The next request, to the ledger: `false` if there is none.
    fn hand_one(&mut self, ledger: &mut Ledger<T>) -> bool {
        if let Some((token, request)) = self.later.pop_front() {
            ledger.push_packed(token, request);
        } else if let Some((token, request)) = self.batch.next() {
            ledger.push_packed(token, request.into());
        } else {
            return false;
        }
        true
    }

    /// A follow-up: behind the follow-ups not taken yet, or straight to the ledger when
    /// nothing waits here.
    fn add(&mut self, ledger: &mut Ledger<T>, token: T, request: PackedRequest) {
        if self.is_empty() {
            ledger.push_packed(token, request);
        } else {
            self.later.push_back((token, request));
        }
    }

    /// Everything left, to the ledger (to fail or cancel it all at once).
    fn hand_all(&mut self, ledger: &mut Ledger<T>) {
        while self.hand_one(ledger) {}
    }
}

fn ceil_ms(d: Duration) -> u32 {
    u32::try_from(d.as_micros().div_ceil(1000)).unwrap_or(u32::MAX)
}

impl Engine<AnyPort> {
    /// Open a local port (see [`crate::umad::UmadPort::open`] for the defaults).
    pub fn open(
        ca: Option<&str>,
        port: Option<u8>,
        config: EngineConfig,
    ) -> Result<Engine, TransportError> {
        Ok(Engine::over(AnyPort::open(ca, port)?, config))
    }

    /// Reach a port through the agent `agent` starts (see [`crate::relay`]); `stop`
    /// returning true gives up waiting for the agent.
    pub fn relay(
        agent: &crate::relay::AgentCommand,
        config: EngineConfig,
        stop: &dyn Fn() -> bool,
    ) -> Result<Engine, TransportError> {
        Ok(Engine::over(AnyPort::relay(agent, stop)?, config))
    }

    /// An engine over `port`, TIDs starting somewhere unpredictable.
    pub fn over(port: AnyPort, config: EngineConfig) -> Engine {
        // Start TIDs somewhere unpredictable so a stray reply meant for an earlier process
        // on this port is unlikely to match.
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
            ^ (std::process::id() << 12);
        let mut engine = Engine::with_port(port, config, seed | 1);
        if let Some(path) = std::env::var_os(TRACE_ENV).filter(|p| !p.is_empty()) {
            engine.enable_trace();
            engine.trace_file = Some(trace_path(path.into()));
        }
        engine
    }

    /// The relay command, when the port is reached through one.
    pub fn relay_command(&self) -> Option<&str> {
        self.port.relay_command()
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
            window: Window::new(INITIAL_WINDOW, config.max_outstanding),
            per_destination: PER_DESTINATION,
            rtt: RttEstimator::default(),
            trace: None,
            trace_file: None,
        };
        engine.set_config(config);
        engine
    }

    /// Requests in flight to one destination (a LID or a directed route) at most; default
    /// [`PER_DESTINATION`].
    pub fn set_per_destination(&mut self, cap: usize) {
        self.per_destination = cap.max(1);
    }

    pub fn per_destination(&self) -> usize {
        self.per_destination
    }

    /// The adaptive window as it stands: its limit now, its bound, its cuts.
    pub fn window(&self) -> Window {
        self.window
    }

    /// The round trips measured so far.
    pub fn rtt(&self) -> RttEstimator {
        self.rtt
    }

    /// Start the window over at `initial` (e.g. to measure one fixed window: pass the
    /// bound).
    pub fn reset_window(&mut self, initial: usize) {
        self.window = Window::new(initial, self.config.max_outstanding);
    }

    /// Record a [`Trace`] from now on.
    pub fn enable_trace(&mut self) {
        self.trace.get_or_insert_with(Trace::new);
    }

    /// The trace so far, if one is recorded.
    pub fn trace(&self) -> Option<&Trace> {
        self.trace.as_ref()
    }

    pub fn local(&self) -> &LocalPort {
        self.port.info()
    }

    /// The port the engine runs over.
    pub fn port(&self) -> &P {
        &self.port
    }

    pub fn port_mut(&mut self) -> &mut P {
        &mut self.port
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
        self.window.set_max(self.config.max_outstanding);
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

    /// That error, if the transport is gone: the check a caller makes between steps, so a
    /// lost fabric ends its work with one error instead of a failure per query.
    pub fn ensure_connected(&self) -> Result<(), MadError> {
        self.lost.clone().map_or(Ok(()), Err)
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

    fn transmit(&mut self, tid: u32, request: &PackedMad) -> Result<(), TransportError> {
        let mgmt_class = request.mgmt_class();
        let agent = self.agent_for(mgmt_class)?;
        let mut mad = [0; MAD_SIZE];
        let dest = request.unpack_into(&mut mad);
        // Our TID in the low 32 bits, the upper half zero (the kernel and the shim rewrite
        // it). Both slots lie inside every MAD and take any u64: the writes cannot fail.
        let _ = MadHeader::transaction_id.write(&mut mad, &u64::from(tid));
        let is_smp = matches!(mgmt_class, class::SMI_LID | class::SMI_DIRECT);
        if is_smp && SmpFrame::m_key.read(&mad) == Ok(0) {
            let _ = SmpFrame::m_key.write(&mut mad, &self.m_key);
        }
        let timeout_ms = ceil_ms(self.config.timeout);
        // Kernel retries 0: the engine resends itself, with a fresh TID.
        self.port.send(agent, &mad, &dest, timeout_ms, 0)?;
        self.stats.sent += 1;
        if let Some(trace) = &mut self.trace {
            trace.count_send(request.route_len());
        }
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
    /// follow-ups into the [`FollowUps`] it is handed; they join the same window. Returns when
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
    pub fn run<T, R: Into<PackedRequest>>(
        &mut self,
        requests: impl IntoIterator<Item = (T, R)>,
        mut on_done: impl FnMut(T, Result<Response, MadError>, &mut FollowUps<T>),
    ) {
        let mut ledger = Ledger::paced(
            self.next_tid,
            self.window,
            self.per_destination,
            self.config.timeout,
            self.config.retries,
        );
        ledger.set_rtt(self.rtt);
        let mut intake = Intake::new(requests.into_iter());
        let mut follow_ups = FollowUps::new();
        let mut done: Vec<(T, Result<Response, MadError>)> = Vec::new();
        let mut failed = Vec::new();
        // A receive error that does not mean the transport is gone still leaves this
        // batch unable to read replies: fail whatever is left of it with that error.
        let mut broken: Option<MadError> = None;
        while !(ledger.is_idle() && intake.is_empty()) {
            if let Some(error) = self.lost.as_ref().or(broken.as_ref()) {
                intake.hand_all(&mut ledger);
                done.extend(ledger.fail_all(error).into_iter().map(|(t, e)| (t, Err(e))));
            }
            // Once cancelled, the batch stays so (a reset of the token counts from the next
            // batch): follow-ups pushed since the last turn fail here.
            if ledger.is_cancelled() || self.is_cancelled() {
                intake.hand_all(&mut ledger);
                done.extend(ledger.cancel().into_iter().map(|(t, e)| (t, Err(e))));
            }
            self.send_burst(&mut ledger, &mut intake, &mut done);
            self.record(&ledger, intake.len());
            if let Some(report) = ledger.unstick() {
                debug_assert!(false, "requests stranded: {report}");
                tracing::warn!("requests stranded, let go: {report}");
                continue;
            }
            if ledger.in_flight() > 0 {
                self.receive_burst(&mut ledger, &mut done, &mut broken);
                if self.lost.is_none() && broken.is_none() {
                    ledger.expire(Instant::now(), &mut failed);
                    done.extend(failed.drain(..).map(|(t, e)| (t, Err(e))));
                }
            }
            for (token, result) in done.drain(..) {
                on_done(token, result, &mut follow_ups);
                for (t, r) in follow_ups.drain_packed() {
                    intake.add(&mut ledger, t, r);
                }
            }
        }
        let s = ledger.stats();
        self.stats.retries += s.retries;
        self.stats.timeouts += s.timeouts;
        self.stats.unmatched += s.unmatched;
        self.stats.unroutable += s.unroutable;
        self.stats.window_cuts += s.window_cuts;
        self.stats.window_cuts_undone += s.window_cuts_undone;
        self.stats.late_replies += s.late_replies;
        self.stats.dest_waits += s.dest_waits;
        self.next_tid = ledger.next_tid();
        self.window = ledger.window();
        self.rtt = ledger.rtt();
        self.record(&ledger, 0);
    }

    /// Send while the window and the destination caps allow, handing the ledger the
    /// batch's requests one at a time as it runs out of requests ready to go.
    fn send_burst<T, R: Into<PackedRequest>, I: Iterator<Item = (T, R)>>(
        &mut self,
        ledger: &mut Ledger<T>,
        intake: &mut Intake<T, R, I>,
        done: &mut Vec<(T, Result<Response, MadError>)>,
    ) {
        // One clock reading per burst of sends (and per burst of replies): they take
        // microseconds, and at a million MADs the readings showed in profiles.
        let now = Instant::now();
        loop {
            if !ledger.has_ready() {
                intake.hand_one(ledger);
            }
            let Some((tid, request)) = ledger.next_send(now) else {
                // What the ledger had went to destinations at their cap while the window
                // has room: the next requests of the batch may go.
                if ledger.has_room() && !intake.is_empty() {
                    continue;
                }
                break;
            };
            if let Err(e) = self.transmit(tid, request) {
                let error = self.classify(e);
                if let Some((t, e)) = ledger.send_failed(tid, error) {
                    done.push((t, Err(e)));
                }
                if let Some(lost) = &self.lost {
                    intake.hand_all(ledger);
                    done.extend(ledger.fail_all(lost).into_iter().map(|(t, e)| (t, Err(e))));
                    break;
                }
            }
        }
    }

    /// Block for the first reply only, then take whatever else is already queued before
    /// refilling the window: replies and sends then move in bursts, which saves a thread
    /// hand-off per MAD in the shim (and a syscall round per MAD on hardware).
    fn receive_burst<T>(
        &mut self,
        ledger: &mut Ledger<T>,
        done: &mut Vec<(T, Result<Response, MadError>)>,
        broken: &mut Option<MadError>,
    ) {
        let mut wait = ledger
            .next_deadline()
            .map(|d| ceil_ms(d.saturating_duration_since(Instant::now())))
            .unwrap_or(0);
        let mut burst_at = None;
        for _ in 0..ledger.in_flight() {
            match self.port.recv(wait) {
                Ok(Some(rx)) => {
                    self.stats.received += 1;
                    let now = *burst_at.get_or_insert_with(Instant::now);
                    if let Outcome::Done(t, r) = ledger.on_reply_at(now, rx.status, &rx.mad) {
                        // The ledger matched the first MAD; the length and the tail of a
                        // reassembled RMPP reply come with it.
                        let r = r.map(|()| Response {
                            mad: rx.mad,
                            len: rx.len,
                            tail: rx.tail,
                        });
                        done.push((t, r));
                    }
                    wait = 0;
                }
                Ok(None) => break,
                Err(e) => {
                    let error = self.classify(e);
                    tracing::error!(%error, "umad receive failed; failing pending MADs");
                    *broken = Some(error);
                    break;
                }
            }
        }
    }

    /// The engine's totals as one `key value` line for the trace.
    fn trace_summary(&self) -> String {
        let s = &self.stats;
        let (low, high) = self.window.range();
        format!(
            "engine sent {} received {} retries {} timeouts {} unmatched {} unroutable {} \
             window_cuts {} window_cuts_undone {} late_replies {} dest_waits {} window {} \
             window_low {low} window_high {high} \
             max_outstanding {} per_destination {} srtt_us {}",
            s.sent,
            s.received,
            s.retries,
            s.timeouts,
            s.unmatched,
            s.unroutable,
            s.window_cuts,
            s.window_cuts_undone,
            s.late_replies,
            s.dest_waits,
            self.window.limit(),
            self.window.max(),
            self.per_destination,
            self.rtt.srtt().map_or(0, |d| d.as_micros()),
        )
    }

    /// Note the state in the trace; `not_taken`: requests of the batch the ledger has not
    /// taken yet (they count as queued).
    fn record<T>(&mut self, ledger: &Ledger<T>, not_taken: usize) {
        if let Some(trace) = &mut self.trace {
            trace.record(
                Instant::now(),
                ledger.in_flight(),
                ledger.window().limit(),
                ledger.queued() + not_taken,
                self.stats.sent,
                self.stats.received,
            );
        }
    }

    /// One request, waited for.
    pub fn call(&mut self, request: Request) -> Result<Response, MadError> {
        let mut out = None;
        self.run([((), request)], |(), result, _| out = Some(result));
        // run() always completes every request it was given.
        out.unwrap_or(Err(MadError::Timeout { attempts: 0 }))
    }

    /// Get(`A`) from `target`, waited for and decoded: `engine.get::<PortInfo>(&route, 1)`.
    pub fn get<A: Attribute>(
        &mut self,
        target: &<A::Class as Class>::Target,
        modifier: u32,
    ) -> Result<A, MadError> {
        let response = self.call(Request::get::<A>(target, modifier))?;
        Ok(response.decode::<A>()?)
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
    /// Close the port: unregister the agents after a short drain of late replies.
    ///
    /// Under the simulator a reply that arrives for an unregistered agent, or on a closed
    /// descriptor, makes the shim's receiver thread dereference a NULL queue and kills the
    /// process (SIGSEGV), possibly while it exits. A frozen or slow ibsim answers long after
    /// the request was given up, so no drain is ever long enough: when some sent MAD is
    /// still unanswered after it, the agents stay registered and the port open. The
    /// process's exit closes them after the shim's own exit handler stopped that thread,
    /// and a late reply meanwhile only lands in a queue nobody reads. The kernel drops such
    /// replies itself: on hardware, and once the transport is gone, the port always closes.
    fn drop(&mut self) {
        let mut keep_open = false;
        // With the transport gone no reply will come: do not wait for one. Nor for a
        // relay's: late replies reach its agent, not this process.
        if self.lost.is_none() && self.port.is_in_process() {
            self.drain((self.config.timeout * 2).min(Duration::from_secs(1)));
            let unanswered = self.stats.sent.saturating_sub(self.stats.received);
            if unanswered > 0 && self.port.info().is_simulator() {
                tracing::debug!(
                    unanswered,
                    "replies still due: the simulator's port stays open until exit"
                );
                keep_open = true;
            }
        }
        if keep_open {
            self.port.leave_open();
        } else {
            for (_, agent) in std::mem::take(&mut self.agents) {
                self.port.unregister(agent);
            }
        }
        let summary = self.trace_summary();
        if let Some(trace) = &mut self.trace {
            trace.notes.push(summary);
        }
        if let (Some(trace), Some(path)) = (&self.trace, &self.trace_file) {
            let written = std::fs::File::create(path).and_then(|f| {
                let mut out = std::io::BufWriter::new(f);
                trace.write_to(&mut out)?;
                std::io::Write::flush(&mut out)
            });
            if let Err(e) = written {
                tracing::warn!("cannot write the MAD trace to {}: {e}", path.display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;
    use crate::attr::{ClassPortInfo, NodeInfo, PortInfo};
    use crate::engine::testing::dr;
    use crate::engine::{Dest, Received, UmadCall};
    use crate::header::{method, MAD_SIZE};
    use crate::smp::SmpRoute;

    #[test]
    fn ceil_ms_rounds_up() {
        assert_eq!(ceil_ms(Duration::ZERO), 0);
        assert_eq!(ceil_ms(Duration::from_micros(1)), 1);
        assert_eq!(ceil_ms(Duration::from_millis(200)), 200);
    }

    #[test]
    fn each_engine_of_a_process_traces_to_its_own_file() {
        let paths: Vec<std::path::PathBuf> =
            (0..3).map(|_| trace_path("trace.json".into())).collect();
        assert!(paths[1] != paths[0] && paths[2] != paths[1], "{paths:?}");
        for p in &paths[1..] {
            let name = p.to_str().unwrap();
            let n = name.strip_prefix("trace.json.").unwrap();
            assert!(n.parse::<usize>().is_ok(), "{name}");
        }
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
        /// Appended to every reply as the tail of a reassembled RMPP transfer.
        reply_tail: Vec<u8>,
        /// What happened to the port as it was closed: "unregister" per agent, "leave
        /// open"; shared so a test reads it after the engine is gone.
        closing: std::rc::Rc<std::cell::RefCell<Vec<&'static str>>>,
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
                    sm_disabled: false,
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
                reply_tail: Vec::new(),
                closing: Default::default(),
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
        fn unregister(&mut self, _agent: u32) {
            self.closing.borrow_mut().push("unregister");
        }
        fn leave_open(&mut self) {
            self.closing.borrow_mut().push("leave open");
        }
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
                MadHeader::response.write(&mut reply, &true).unwrap();
                let received = Received {
                    agent,
                    status: 0,
                    len: MAD_SIZE + self.reply_tail.len(),
                    mad: reply,
                    tail: self.reply_tail.clone(),
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
            engine.call(Request::get::<NodeInfo>(&SmpRoute::Lid(3), 0)),
            Err(lost.clone())
        );
        assert_eq!(engine.port.sends, 11);
        assert!(t.elapsed() < FAKE_TIMEOUT, "took {:?}", t.elapsed());
    }

    #[test]
    fn follow_ups_go_before_the_rest_of_the_batch() {
        // A counter sweep's shape: a long batch, each answer bringing more requests. Taken
        // after the batch, the follow-ups of all 500 would wait at once.
        let mut engine = fake_engine(FakePort::new(), 4, 0);
        let (mut waiting, mut most_waiting, mut answered) = (0usize, 0usize, 0usize);
        engine.run((0..500u32).map(|i| (i, dr(&[1]))), |i, r, more| {
            assert!(r.is_ok(), "{r:?}");
            answered += 1;
            if i < 1000 {
                for k in 0..2 {
                    more.push((1000 + 2 * i + k, dr(&[1, 2])));
                }
                waiting += 2;
            } else {
                waiting -= 1;
            }
            most_waiting = most_waiting.max(waiting);
        });
        assert_eq!(answered, 1500);
        assert_eq!(waiting, 0);
        // A window's worth of answers pushes 8 before the next burst of sends.
        assert!(
            most_waiting <= 16,
            "{most_waiting} follow-ups waited at once"
        );
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
    fn a_reassembled_reply_reaches_the_caller_whole() {
        let mut port = FakePort::new();
        port.reply_tail = vec![0xab; 400];
        let mut engine = fake_engine(port, 4, 0);
        let template = crate::sa::NodeRecord::default();
        let reply = engine.call(Request::sa_get_table(1, 0, &template)).unwrap();
        assert_eq!(reply.len, MAD_SIZE + 400);
        let message = reply.message();
        assert_eq!(message.len(), 656);
        assert_eq!(&message[..MAD_SIZE], &reply.mad[..]);
        assert!(message[MAD_SIZE..].iter().all(|&b| b == 0xab));
        let sent = MadHeader::decode(&engine.port.sent[0][..]).unwrap();
        assert_eq!(
            (sent.mgmt_class, sent.method),
            (class::SUBN_ADM, method::GET_TABLE)
        );
        // The first MAD is the port's answer to that send, not the request echoed.
        let got = reply.header().unwrap();
        assert!(got.response);
        assert_eq!(got.transaction_id, sent.transaction_id);
    }

    /// Closing with a request given up while its reply may still come (ibsim frozen):
    /// under the simulator the agent stays registered, else it is unregistered.
    fn close_after_an_unanswered_request(simulator: bool) -> Vec<&'static str> {
        let mut port = FakePort::new();
        if simulator {
            port.info.ca_type = "simulator".into();
        }
        port.answer_until = 1;
        let closing = port.closing.clone();
        let mut engine = fake_engine(port, 2, 0);
        let (ok, errors) = run_batch(&mut engine, 2);
        assert_eq!((ok, errors.len()), (1, 1));
        assert_eq!(engine.stats().sent, 2);
        let t = Instant::now();
        drop(engine);
        // The drain waited for the late reply (2 x the timeout), then gave up.
        assert!(t.elapsed() >= FAKE_TIMEOUT * 2, "{:?}", t.elapsed());
        let seen = closing.borrow().clone();
        seen
    }

    #[test]
    fn a_reply_still_due_keeps_the_simulators_agents_registered() {
        assert_eq!(close_after_an_unanswered_request(true), ["leave open"]);
        assert_eq!(
            close_after_an_unanswered_request(false),
            ["unregister"],
            "the kernel drops late replies itself"
        );
        // Everything answered: closed as usual, also under the simulator.
        let mut port = FakePort::new();
        port.info.ca_type = "simulator".into();
        let closing = port.closing.clone();
        let mut engine = fake_engine(port, 2, 0);
        assert_eq!(run_batch(&mut engine, 3).0, 3);
        drop(engine);
        assert_eq!(*closing.borrow(), ["unregister"]);
    }

    #[test]
    fn m_key_goes_into_smps_only() {
        let mut engine = fake_engine(FakePort::new(), 4, 0);
        engine.set_m_key(0x1234_5678_9abc_def0);
        let mut own = Request::get::<PortInfo>(&SmpRoute::Lid(2), 1);
        SmpFrame::m_key.write(&mut own.mad, &7).unwrap();
        let requests = vec![
            (0, dr(&[1])),
            (1, Request::set(&SmpRoute::Lid(2), 1, &PortInfo::default())),
            (2, own),
            (3, Request::get::<ClassPortInfo>(&2, 0)),
        ];
        engine.run(requests, |_, r, _| assert!(r.is_ok()));
        let sent = &engine.port.sent;
        assert_eq!(sent.len(), 4);
        let key = |m: &[u8; MAD_SIZE]| SmpFrame::m_key.read(m).unwrap();
        let by_class = |c: u8, method_code: u8| {
            sent.iter()
                .filter(move |m| {
                    let h = MadHeader::decode(&m[..]).unwrap();
                    h.mgmt_class == c && h.method == method_code
                })
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
            engine.call(Request::get::<NodeInfo>(&SmpRoute::Lid(3), 0)),
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
            .call(Request::get::<NodeInfo>(&SmpRoute::Lid(3), 0))
            .is_ok());
    }
}
