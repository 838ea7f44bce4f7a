//! `ibscope serve`: a Prometheus exporter. One background thread owns the management port
//! (discovery, then a counter sweep every --interval); after each sweep it renders the
//! whole exposition text into a shared cache. HTTP threads answer from that cache only, so a
//! scrape never waits on the fabric and never sends a MAD.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{Cursor, Write as _};
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use ibscope_mad::attr::{PhysState, PortState};
use ibscope_mad::engine::{CancelToken, Engine, Request};
use ibscope_topo::counters::{self, CounterTarget, Sample};
use ibscope_topo::discover::{self, DiscoverOptions, SmpExecutor};
use ibscope_topo::escape::for_prometheus_label;
use ibscope_topo::findings;
use ibscope_topo::health::{self, HealthOptions, HealthReport};
use ibscope_topo::namemap::{display_name, NameMap};
use ibscope_topo::{End, Fabric, Node, NodeKind};

use crate::cli::{exit, Global};

/// Serve fabric metrics for Prometheus over HTTP (read-only).
///
/// Endpoints (GET only; nothing here changes the fabric):
///   /metrics   Prometheus text exposition from the last sweep: every port's counters
///              (64-bit PortCountersExtended where implemented, data in bytes; the same
///              metric names as `counters --format prom`, less a trailing `_counter`:
///              ibscope_port_symbol_error_total), link state, width, speed,
///              degraded flag, node info, per-node scrape errors/timeouts, sweep timing.
///   /healthz   200 "ok" when the last sweep succeeded and is fresh (younger than
///              3 x --interval + 5 s), else 503 with the reason.
///
/// A background thread discovers the fabric at start, then sweeps the counters every
/// --interval seconds, and rediscovers when a sweep sees a topology change (a switch port
/// whose state differs from the discovered one: one PortInfo per switch port per sweep; or
/// a port whose LinkDownedCounter moved or whose PMA started or stopped answering), and
/// every --rediscover-every sweeps. Scrapes are answered from a cache, never from the fabric.
///
/// Page size and how the options trim it: see AFTER_HELP (the end of `serve --help`).
///
/// Stops on SIGTERM or SIGINT: stops accepting, abandons the running sweep (a MAD in
/// flight gets its timeout, no retry), closes the management port, and exits 0. A second
/// signal exits at once (code 1). When the connection to the fabric is lost (the umad
/// device or the simulator gone) it stops the same way and exits 2 with one error line.
///
/// Defaults for every option below can be kept in the [serve] table of the config file
/// (see `ibscope config show`); flags win.
///
/// Listens on loopback only unless --allow-remote is given: the metrics name every node
/// and link of the fabric and there is no authentication or TLS, so exposing them beyond
/// this host is a decision to make explicitly (or put a reverse proxy in front).
///
/// Examples:
///   ibscope serve
///   ibscope serve --listen 127.0.0.1:9315 --interval 30 --switches-only
///   ibscope serve --counters errors --active-only
///   ibscope serve --listen 0.0.0.0:9315 --allow-remote
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment, after_long_help = AFTER_HELP)]
pub struct Args {
    /// Address to listen on (host:port). Must be loopback unless --allow-remote.
    #[arg(long, default_value = "127.0.0.1:9315", value_name = "ADDR")]
    pub listen: String,
    /// Seconds between counter sweeps.
    #[arg(long, default_value_t = 10.0, value_name = "S")]
    pub interval: f64,
    /// Counter families on the page: all 21 (default), errors (the 12 PortCounters error
    /// counters, SymbolErrorCounter to VL15Dropped) or data (the 9 traffic counters: data,
    /// packets, unicast/multicast packets, XmitWait). On the 2,048-host benchmark fabric:
    /// 442,638 series (4.9 MiB gzip), errors 311,454 (3.4 MiB), data 267,726 (3.0 MiB).
    /// Trims the page only: one PortCounters MAD carries every counter. Link, node and
    /// sweep families are always there.
    #[arg(long, value_enum, default_value_t = CounterFamilies::All, value_name = "WHICH")]
    pub counters: CounterFamilies,
    /// Only ports that are Active (and physically LinkUp) at the last discovery: only their
    /// counters are read, and other ports have no series at all (a port that goes down
    /// leaves the page at the rediscovery this triggers). On the benchmark fabric 1,840 of
    /// 14,576 ports are down or unused: 389,278 series instead of 442,638.
    #[arg(long)]
    pub active_only: bool,
    /// Read the counters of switch ports only (fewer MADs; each CA port's traffic is
    /// also seen at its switch port). CA ports then have no port series, CA nodes keep
    /// theirs: 381,198 series instead of 442,638 on the benchmark fabric.
    #[arg(long)]
    pub switches_only: bool,
    /// Rediscover the fabric every N sweeps even without a sign of change (0: never).
    #[arg(long, default_value_t = 30, value_name = "N")]
    pub rediscover_every: u64,
    /// Allow a non-loopback --listen address. Off by default because the metrics describe
    /// every node and link of the fabric and are served without authentication or TLS.
    #[arg(long)]
    pub allow_remote: bool,
    /// HTTP worker threads.
    #[arg(long, default_value_t = 4, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub http_threads: u32,
}

/// The end of `serve --help`: what the page holds, how to trim it, how it stops.
const AFTER_HELP: &str = "\
Page size: per port 21 counter series, a saturation gauge and up to 8 link gauges (state,
physical state, active, link up, width, speed, data rate, degraded); per node 3 series.
Measured on the 2,048-host fat tree of bench/serve_scrape.sh (2,396 nodes, 14,576 ports):
  (default)                                         442,638 series, 92 MB text, 4.9 MiB gzip
  --counters errors                                 311,454 series, 3.4 MiB gzip
  --counters data                                   267,726 series, 3.0 MiB gzip
  --active-only                                     389,278 series, 4.5 MiB gzip
  --switches-only                                   381,198 series, 4.1 MiB gzip
  --counters errors --active-only --switches-only   231,646 series, 2.6 MiB gzip

Stops on SIGTERM or SIGINT: stops accepting, abandons the running sweep (a MAD in flight
gets its timeout, no retry), closes the management port and exits 0 with one line on
stderr. A second signal exits at once (code 1).";

/// Which counter families `/metrics` carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CounterFamilies {
    /// The 12 error counters (as `counters` and thresholds use them).
    Errors,
    /// The 9 data, packet and wait counters.
    Data,
    /// All 21.
    All,
}

impl CounterFamilies {
    /// The counter names on the page, in page order.
    pub fn names(self) -> Vec<&'static str> {
        counters::PORT_COUNTER_NAMES
            .iter()
            .chain(counters::EXTENDED_ONLY.iter())
            .copied()
            .filter(|n| {
                let error = counters::ERROR_COUNTERS.contains(n);
                match self {
                    CounterFamilies::Errors => error,
                    CounterFamilies::Data => !error,
                    CounterFamilies::All => true,
                }
            })
            .collect()
    }
}

/// Which ports have series (and have their counters read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortFilter {
    pub switches_only: bool,
    pub active_only: bool,
}

impl PortFilter {
    pub fn keeps(&self, node: &Node, port: u8) -> bool {
        if self.switches_only && !node.is_switch() {
            return false;
        }
        if self.active_only {
            // A switch's port 0 has no physical link of its own: its logical state counts.
            let up = |p: &ibscope_topo::Port| {
                p.is_active() && (p.is_phys_up() || (node.is_switch() && p.number == 0))
            };
            return node.port(port).is_some_and(up);
        }
        true
    }
}

/// What the sweeper publishes after each sweep.
#[derive(Debug)]
pub struct Snapshot {
    /// The whole exposition except the age family (computed per scrape).
    pub text: String,
    /// `text` gzip-compressed once per sweep, for scrapers that accept gzip.
    pub gzip: Vec<u8>,
    /// Unix time (seconds) the sweep started.
    pub sweep_unix: f64,
    pub finished: Instant,
    /// `None` when the sweep succeeded, else why not.
    pub failure: Option<String>,
}

/// The last snapshot, shared between the sweeper and the HTTP threads. The lock only
/// guards the pointer: a scrape clones the `Arc`, the sweeper swaps in a new one; nothing
/// renders, compresses or frees a page while holding it.
#[derive(Debug, Default)]
pub struct Cache(Mutex<Option<Arc<Snapshot>>>);

impl Cache {
    pub fn load(&self) -> Option<Arc<Snapshot>> {
        match self.0.lock() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Publish `snap`; returns the previous snapshot, for the caller to drop outside the
    /// lock.
    pub fn store(&self, snap: Arc<Snapshot>) -> Option<Arc<Snapshot>> {
        let mut g = match self.0.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        g.replace(snap)
    }
}

/// Check --listen: resolvable, and loopback unless remote access is allowed.
pub fn listen_addr(text: &str, allow_remote: bool) -> Result<SocketAddr> {
    let addrs: Vec<SocketAddr> = text
        .to_socket_addrs()
        .with_context(|| format!("--listen {text:?}: not a host:port address"))?
        .collect();
    let first = *addrs
        .first()
        .ok_or_else(|| anyhow!("--listen {text:?} resolves to no address"))?;
    if !allow_remote && !first.ip().is_loopback() {
        bail!(
            "--listen {text}: {} is not a loopback address; the metrics describe the whole \
             fabric and are served without authentication: add --allow-remote to expose them",
            first.ip()
        );
    }
    Ok(first)
}

// ---------------------------------------------------------------------------------------------
// Stopping on SIGTERM / SIGINT.

/// The signal that asked us to stop (0: none yet).
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_stop_signal(signal: libc::c_int) {
    if STOP_SIGNAL.swap(signal, Ordering::SeqCst) != 0 {
        // Asked twice: the operator does not want to wait for the clean stop.
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(1) };
    }
}

fn stop_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        set
    }
}

/// Handlers that only store the signal number (async-signal-safe); the main thread polls it.
fn install_stop_handlers() {
    // SAFETY: the handler only touches an atomic (or calls _exit).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_stop_signal as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut action.sa_mask);
        action.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
        libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
    }
}

/// Block (or unblock) the stop signals in the calling thread. Threads inherit the mask, so
/// blocking before spawning keeps the signals off the sweeper's MAD waits and the HTTP
/// threads: they reach the main thread, which only waits for them.
fn mask_stop_signals(block: bool) {
    let set = stop_signals();
    let how = if block {
        libc::SIG_BLOCK
    } else {
        libc::SIG_UNBLOCK
    };
    // SAFETY: a valid set; the old mask is not wanted.
    unsafe { libc::pthread_sigmask(how, &set, std::ptr::null_mut()) };
}

fn sweeps_word(n: u64) -> &'static str {
    if n == 1 {
        "sweep"
    } else {
        "sweeps"
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        _ => "a signal",
    }
}

/// Give the calling thread (the sweeper) a lower CPU priority than the HTTP threads, so a
/// scrape is not queued behind rendering and compressing the page on a busy machine. Only
/// ever lowers it (nice + 10, at most 19); threads it starts (the umad transport's) inherit
/// the value.
fn lower_own_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: plain syscalls on this thread's own id; errno is read right after.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        *libc::__errno_location() = 0;
        let current = libc::getpriority(libc::PRIO_PROCESS, tid);
        if current == -1 && *libc::__errno_location() != 0 {
            return;
        }
        let lower = (current + SWEEPER_NICE).min(19);
        if libc::setpriority(libc::PRIO_PROCESS, tid, lower) != 0 {
            tracing::debug!("could not lower the sweeper's priority");
        }
    }
}

/// How much nicer the sweeper is than the HTTP threads.
const SWEEPER_NICE: i32 = 10;

/// How often the main thread looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

/// Wait until `handle`'s thread ends or `limit` passes; true if it ended.
fn finished_within<T>(handle: &JoinHandle<T>, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while !handle.is_finished() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// A listener whose connections send at once (TCP_NODELAY is inherited by accepted
/// sockets on Linux): the end of a page is not held back waiting for an ACK.
fn listener(addr: SocketAddr) -> Result<TcpListener> {
    use std::os::fd::AsRawFd;
    let l = TcpListener::bind(addr).with_context(|| format!("cannot listen on {addr}"))?;
    let one: libc::c_int = 1;
    // SAFETY: a valid socket and a c_int option value of the right size.
    let rc = unsafe {
        libc::setsockopt(
            l.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        tracing::debug!("TCP_NODELAY not set on the listener");
    }
    Ok(l)
}

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    if g.topology.is_some() {
        bail!("serve reads the live fabric: --topology cannot be used here");
    }
    if !(a.interval.is_finite() && a.interval > 0.0) {
        bail!("--interval must be a positive number of seconds");
    }
    let addr = listen_addr(&a.listen, a.allow_remote)?;
    let names = crate::fabric::names(g)?;
    let thresholds = crate::fabric::thresholds(g, None)?;
    install_stop_handlers();
    // Every thread started from here on (tiny_http's, ours, the transport's) inherits it.
    mask_stop_signals(true);
    let server = tiny_http::Server::from_listener(listener(addr)?, None)
        .map_err(|e| anyhow!("cannot serve on {addr}: {e}"))?;
    let server = Arc::new(server);
    let cache = Arc::new(Cache::default());
    let interval = Duration::from_secs_f64(a.interval);
    // Set on SIGTERM/SIGINT: the sweeper's engine sends nothing more (see Engine::run).
    let stop = CancelToken::new();
    let sweeps = Arc::new(AtomicU64::new(0));

    // The engine is opened inside the sweeper thread (it owns it); it reports the open
    // result back, so a missing CA fails the command at once, and later the loss of the
    // transport, which ends the command. Dropping `wake` ends its sleep.
    let (opened_tx, opened_rx) = mpsc::channel::<Result<()>>();
    let (wake, sleeper) = mpsc::channel::<()>();
    let sweeper = Sweeper {
        g: g.clone(),
        names,
        thresholds,
        filter: PortFilter {
            switches_only: a.switches_only,
            active_only: a.active_only,
        },
        counters: a.counters.names(),
        interval,
        rediscover_every: a.rediscover_every,
        cache: cache.clone(),
        stop: stop.clone(),
        sweeps: sweeps.clone(),
        scrape_errors: HashMap::new(),
        discoveries: 0,
    };
    let sweeper = std::thread::Builder::new()
        .name("sweeper".into())
        .spawn(move || sweeper.run(opened_tx, sleeper))?;

    let max_age = interval * 3 + Duration::from_secs(5);
    let mut workers = Vec::new();
    for i in 0..a.http_threads {
        let server = server.clone();
        let cache = cache.clone();
        workers.push(
            std::thread::Builder::new()
                .name(format!("http-{i}"))
                .spawn(move || {
                    while let Ok(req) = server.recv() {
                        serve_one(req, &cache, max_age);
                    }
                })?,
        );
    }
    mask_stop_signals(false);

    let mut announced = false;
    let why = loop {
        let signal = STOP_SIGNAL.load(Ordering::SeqCst);
        if signal != 0 {
            break Stop::Signal(signal);
        }
        match opened_rx.recv_timeout(STOP_POLL) {
            Ok(Ok(())) => {
                eprintln!("ibscope serve: listening on http://{addr}/metrics");
                announced = true;
            }
            // The transport went away under a sweep: stop as for a signal, then fail.
            Ok(Err(e)) if announced => break Stop::Lost(e),
            Ok(Err(e)) => return Err(e),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) if announced => {
                bail!("the sweeper thread ended unexpectedly; the metrics would only get stale")
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                bail!("the sweeper thread ended before opening the port")
            }
        }
    };

    // Stop: no new requests, no new MADs; let what is in flight finish, then close.
    let started = Instant::now();
    stop.cancel();
    drop(wake);
    for _ in &workers {
        server.unblock();
    }
    // A worker still writing a page to a slow client gets a moment, not forever.
    let deadline = Instant::now() + Duration::from_secs(2);
    let workers_done = workers
        .iter()
        .all(|w| finished_within(w, deadline.saturating_duration_since(Instant::now())));
    if workers_done {
        for w in workers {
            let _ = w.join();
        }
    }
    // The last reference: closes the listening socket.
    drop(server);
    let engine = crate::fabric::engine_config(g);
    // What the sweeper may still wait for: the attempt in flight (the cancelled engine
    // sends no retry), the engine's drain of late replies (at most 1 s) before it
    // unregisters, and a render already under way. Generous: the engine's own retries
    // would fit too.
    let limit = engine.timeout * (engine.retries + 1) + Duration::from_secs(2);
    let closed = finished_within(&sweeper, limit) && sweeper.join().is_ok();
    let n = sweeps.load(Ordering::SeqCst);
    let signal = match why {
        Stop::Signal(signal) => signal,
        Stop::Lost(e) => {
            if !closed {
                tracing::warn!("the sweeper did not finish after the transport was lost");
            }
            return Err(e);
        }
    };
    if closed {
        eprintln!(
            "ibscope serve: {} received; stopped after {n} {} in {:.2} s, management port closed",
            signal_name(signal),
            sweeps_word(n),
            started.elapsed().as_secs_f64()
        );
        Ok(ExitCode::from(exit::OK))
    } else {
        eprintln!(
            "ibscope serve: {} received; stopped after {n} {}, but the sweeper did not \
             finish within {:.1} s: exiting without closing the management port",
            signal_name(signal),
            sweeps_word(n),
            limit.as_secs_f64()
        );
        Ok(ExitCode::from(exit::FINDINGS))
    }
}

/// Why the main thread stops serving.
enum Stop {
    Signal(i32),
    /// The sweeper lost the transport (the "lost the connection to the fabric" error).
    Lost(anyhow::Error),
}

// ---------------------------------------------------------------------------------------------
// HTTP.

/// Fast gzip: the page is rebuilt every sweep, so speed matters more than ratio.
pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing to a Vec cannot fail.
    let _ = enc.write_all(data);
    enc.finish().unwrap_or_default()
}

/// Whether the request's Accept-Encoding allows gzip.
fn accepts_gzip(req: &tiny_http::Request) -> bool {
    req.headers().iter().any(|h| {
        h.field.equiv("Accept-Encoding")
            && h.value
                .as_str()
                .split(',')
                .any(|e| e.trim().split(';').next() == Some("gzip"))
    })
}

fn header(name: &str, value: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes())
        .expect("static header names and ASCII values")
}

fn text_response(status: u16, body: String) -> tiny_http::Response<Cursor<Vec<u8>>> {
    tiny_http::Response::from_string(body)
        .with_status_code(status)
        .with_header(header("Content-Type", "text/plain; charset=utf-8"))
}

/// An IMF-fixdate (RFC 9110 5.6.7) for the Date header.
fn http_date(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        WEEKDAYS[days.rem_euclid(7) as usize],
        MONTHS[(month - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// What one request got, for the debug log.
struct Served {
    status: u16,
    bytes: usize,
    gzip: bool,
}

/// Answer one request and log how long it took on this side (at debug level).
fn serve_one(req: tiny_http::Request, cache: &Cache, max_age: Duration) {
    let started = Instant::now();
    let path = req.url().split('?').next().unwrap_or("").to_string();
    match answer(req, &path, cache, max_age) {
        Ok(s) => tracing::debug!(
            path,
            status = s.status,
            bytes = s.bytes,
            gzip = s.gzip,
            us = started.elapsed().as_micros() as u64,
            "served"
        ),
        Err(e) => tracing::debug!(
            path,
            error = %e,
            us = started.elapsed().as_micros() as u64,
            "not served"
        ),
    }
}

fn respond_text(req: tiny_http::Request, status: u16, body: String) -> std::io::Result<Served> {
    let bytes = body.len();
    req.respond(text_response(status, body))?;
    Ok(Served {
        status,
        bytes,
        gzip: false,
    })
}

fn answer(
    req: tiny_http::Request,
    path: &str,
    cache: &Cache,
    max_age: Duration,
) -> std::io::Result<Served> {
    if *req.method() != tiny_http::Method::Get {
        let r =
            text_response(405, "only GET is served\n".into()).with_header(header("Allow", "GET"));
        req.respond(r)?;
        return Ok(Served {
            status: 405,
            bytes: 0,
            gzip: false,
        });
    }
    let snapshot = cache.load();
    match path {
        "/metrics" => match snapshot {
            None => respond_text(
                req,
                503,
                "no sweep finished yet (discovery in progress)\n".into(),
            ),
            Some(snap) => write_metrics(req, &snap),
        },
        "/healthz" => {
            let (status, body) = match snapshot {
                None => (503, "no sweep finished yet\n".to_string()),
                Some(s) => match &s.failure {
                    Some(why) => (503, format!("last sweep failed: {why}\n")),
                    None if s.finished.elapsed() > max_age => (
                        503,
                        format!(
                            "last sweep is stale: finished {:.0} s ago (limit {:.0} s)\n",
                            s.finished.elapsed().as_secs_f64(),
                            max_age.as_secs_f64()
                        ),
                    ),
                    None => (200, "ok\n".to_string()),
                },
            };
            respond_text(req, status, body)
        }
        _ => respond_text(req, 404, "not found: try /metrics or /healthz\n".into()),
    }
}

/// The page: the cached text (or its gzip) and the per-scrape age family, written straight
/// to the socket with a Content-Length. (tiny_http's own writer would copy it through an
/// 8 KiB buffer in chunked encoding: one write per 8 KiB.)
fn write_metrics(req: tiny_http::Request, snap: &Snapshot) -> std::io::Result<Served> {
    let age = snap.finished.elapsed().as_secs_f64();
    let tail = format!(
        "# HELP ibscope_sweep_age_seconds Seconds since the last sweep finished.\n\
         # TYPE ibscope_sweep_age_seconds gauge\n\
         ibscope_sweep_age_seconds {age:.3}\n"
    );
    let zipped = accepts_gzip(&req);
    // The cached page is compressed once per sweep; the small age family is a second
    // gzip member (RFC 1952 allows concatenated members).
    let (body, tail) = if zipped {
        (&snap.gzip[..], gzip(tail.as_bytes()))
    } else {
        (snap.text.as_bytes(), tail.into_bytes())
    };
    let version = req.http_version();
    let (major, minor) = (version.0, version.1);
    let mut head = format!(
        "HTTP/{major}.{minor} 200 OK\r\nServer: ibscope\r\nDate: {}\r\n\
         Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n",
        http_date(SystemTime::now())
    );
    if zipped {
        head.push_str("Content-Encoding: gzip\r\n");
    }
    let len = body.len() + tail.len();
    let _ = write!(head, "Content-Length: {len}\r\n\r\n");
    let mut w = req.into_writer();
    w.write_all(head.as_bytes())?;
    w.write_all(body)?;
    w.write_all(&tail)?;
    w.flush()?;
    Ok(Served {
        status: 200,
        bytes: len,
        gzip: zipped,
    })
}

// ---------------------------------------------------------------------------------------------
// The sweeper.

/// Cumulative per-node query failures.
#[derive(Debug, Default, Clone, Copy)]
pub struct NodeErrors {
    errors: u64,
    timeouts: u64,
}

struct Sweeper {
    g: Global,
    names: Option<NameMap>,
    /// `check`'s thresholds in force, for the findings family.
    thresholds: counters::Thresholds,
    filter: PortFilter,
    counters: Vec<&'static str>,
    interval: Duration,
    rediscover_every: u64,
    cache: Arc<Cache>,
    /// The sweeper engine's cancel token, set by the main thread to stop.
    stop: CancelToken,
    sweeps: Arc<AtomicU64>,
    /// By node GUID, kept across rediscoveries.
    scrape_errors: HashMap<u64, NodeErrors>,
    discoveries: u64,
}

/// The discovered fabric and what is derived from it once per discovery.
struct Discovered {
    fabric: Fabric,
    targets: Vec<CounterTarget>,
    /// The links' health (degraded or not): it changes only with the fabric.
    health: HealthReport,
    duration: Duration,
}

fn micros(since: Instant) -> u64 {
    since.elapsed().as_micros() as u64
}

impl Sweeper {
    fn stopped(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// Until stopped. The engine is closed (agents unregistered after a drain) when this
    /// returns.
    fn run(mut self, opened: mpsc::Sender<Result<()>>, sleeper: mpsc::Receiver<()>) {
        lower_own_priority();
        let mut engine = match crate::fabric::open_engine(&self.g) {
            Ok(e) => {
                let _ = opened.send(Ok(()));
                e
            }
            Err(e) => {
                let _ = opened.send(Err(e));
                return;
            }
        };
        // A stop then abandons the running sweep within about one MAD timeout.
        engine.set_cancel(Some(self.stop.clone()));
        // Once the transport is gone every MAD fails at once: hand the one error to the
        // main thread, which ends the command with it, rather than serve a page of
        // unreadable ports.
        let lost = |engine: &Engine| match crate::fabric::ensure_connected(engine) {
            Ok(()) => false,
            Err(e) => {
                let _ = opened.send(Err(e));
                true
            }
        };
        let mut current: Option<Discovered> = None;
        let mut previous: Option<Sample> = None;
        // Kept one sweep longer than the cache does, so the sweeper (not a scrape) usually
        // frees a page.
        let mut retired: Option<Arc<Snapshot>> = None;
        let mut since_discovery = 0u64;
        while !self.stopped() {
            let started = Instant::now();
            if current.is_none() {
                current = Some(self.discover(&mut engine));
                previous = None;
                since_discovery = 0;
            }
            if lost(&engine) || self.stopped() {
                break;
            }
            let d = current.as_ref().expect("discovered above");
            let t = Instant::now();
            let sample = counters::sweep(&mut engine, &d.fabric, &d.targets, self.names.as_ref());
            let sweep_us = micros(t);
            if lost(&engine) || self.stopped() {
                break;
            }
            // The SM check `check` makes, against the SM the local port names now.
            let local = engine.local().clone();
            let sm_lid =
                findings::local_master_sm_lid(&mut engine, local.port_num).unwrap_or(local.sm_lid);
            let sm = findings::sm_finding(&findings::read_sm(&mut engine, sm_lid));
            if lost(&engine) || self.stopped() {
                break;
            }
            let sweeps = self.sweeps.fetch_add(1, Ordering::SeqCst) + 1;
            since_discovery += 1;
            let failure = self.account(&sample, d);
            let t = Instant::now();
            let text = self.render(d, &sample, sweeps, sm.as_ref());
            let render_us = micros(t);
            if self.stopped() {
                break;
            }
            let t = Instant::now();
            let gzip = gzip(text.as_bytes());
            tracing::debug!(
                sweep_us,
                render_us,
                gzip_us = micros(t),
                text = text.len(),
                gzip = gzip.len(),
                "swept"
            );
            let snap = Snapshot {
                gzip,
                text,
                sweep_unix: sample.time_ms as f64 / 1000.0,
                finished: Instant::now(),
                failure,
            };
            drop(retired.take());
            retired = self.cache.store(Arc::new(snap));
            let t = Instant::now();
            let states_moved = port_states_changed(&mut engine, &d.fabric);
            tracing::debug!(us = micros(t), "port states checked");
            if lost(&engine) {
                break;
            }
            let changed = states_moved
                || previous
                    .as_ref()
                    .is_some_and(|p| topology_changed(p, &sample));
            let empty = d.targets.is_empty();
            if changed
                || empty
                || (self.rediscover_every > 0 && since_discovery >= self.rediscover_every)
            {
                tracing::info!("rediscovering (change seen: {changed})");
                current = None;
            }
            previous = Some(sample);
            match sleeper.recv_timeout(self.interval.saturating_sub(started.elapsed())) {
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                // Woken (or the sender gone): the main thread wants us to stop.
                _ => break,
            }
        }
        // `engine` drops here: late replies drained, agents unregistered.
    }

    fn discover(&mut self, exec: &mut Engine) -> Discovered {
        let t = Instant::now();
        let fabric = discover::discover(exec, DiscoverOptions::default(), |_| {});
        self.discoveries += 1;
        let mut targets = counters::targets(&fabric, None, None);
        targets.retain(|t| self.filter.keeps(fabric.node(t.node), t.port));
        tracing::debug!(
            us = micros(t),
            nodes = fabric.node_count(),
            targets = targets.len(),
            "discovered"
        );
        let health = health::assess(&fabric, self.names.as_ref(), &HealthOptions::default());
        Discovered {
            fabric,
            targets,
            health,
            duration: t.elapsed(),
        }
    }

    /// Count this sweep's failures per node; the sweep failed when no port answered.
    fn account(&mut self, sample: &Sample, d: &Discovered) -> Option<String> {
        for (_, node) in d.fabric.nodes() {
            self.scrape_errors.entry(node.guid).or_default();
        }
        let mut answered = 0usize;
        for p in &sample.ports {
            if p.counters.is_some() {
                answered += 1;
            }
            let e = self.scrape_errors.entry(p.at.node_guid).or_default();
            for msg in &p.errors {
                e.errors += 1;
                if msg.contains("no reply after") {
                    e.timeouts += 1;
                }
            }
        }
        if d.targets.is_empty() {
            Some(format!(
                "no port with a LID to read ({} nodes discovered; is an SM running?)",
                d.fabric.node_count()
            ))
        } else if answered == 0 {
            Some(format!(
                "none of {} ports answered PortCounters",
                sample.ports.len()
            ))
        } else {
            None
        }
    }

    fn render(
        &self,
        d: &Discovered,
        sample: &Sample,
        sweeps: u64,
        sm: Option<&findings::Finding>,
    ) -> String {
        render(
            &d.fabric,
            &d.health,
            self.names.as_ref(),
            sample,
            &RenderStats {
                filter: self.filter,
                counters: &self.counters,
                sweeps,
                discoveries: self.discoveries,
                discovery_seconds: d.duration.as_secs_f64(),
                scrape_errors: &self.scrape_errors,
                thresholds: &self.thresholds,
                sm,
            },
        )
    }
}

/// Whether any switch port's logical state differs from the one discovery recorded: one
/// PortInfo per switch port (1..N) per sweep, over the discovery's directed routes. Covers
/// links going down and coming up; a back-to-back CA link is seen only through its
/// counters. (ibsim changes neither SwitchInfo.PortStateChange nor LinkDownedCounter on
/// Unlink, so this is the signal that works everywhere.) With --active-only this is also
/// what brings a port that came up onto the page.
fn port_states_changed<E: SmpExecutor>(exec: &mut E, fabric: &Fabric) -> bool {
    use ibscope_mad::attr::PortInfo;
    use ibscope_mad::smp::{DrPath, SmpRoute};
    let mut batch = Vec::new();
    for (_, node) in fabric.switches() {
        let route = match node.dr_path.as_deref().map(DrPath::parse) {
            Some(Ok(path)) => SmpRoute::Directed(path),
            _ => match node.lid() {
                Some(lid) => SmpRoute::Lid(lid),
                None => continue,
            },
        };
        for p in &node.ports {
            if p.number == 0 {
                continue;
            }
            batch.push((
                p.state,
                Request::get::<PortInfo>(&route, u32::from(p.number)),
            ));
        }
    }
    let mut changed = false;
    exec.execute(batch, &mut |known, result, _| {
        if let Ok(Ok(info)) = result.map(|r| r.decode::<PortInfo>()) {
            if Some(info.state()) != known {
                changed = true;
            }
        }
    });
    changed
}

/// A sign that the fabric changed under us: a port's LinkDownedCounter moved, or its PMA
/// started or stopped answering.
fn topology_changed(prev: &Sample, cur: &Sample) -> bool {
    let before: HashMap<(u64, u8), (bool, Option<u64>)> = prev
        .ports
        .iter()
        .map(|p| {
            (
                (p.at.node_guid, p.at.port),
                (p.counters.is_some(), p.value("LinkDownedCounter")),
            )
        })
        .collect();
    cur.ports
        .iter()
        .any(|p| match before.get(&(p.at.node_guid, p.at.port)) {
            Some(&(answered, downed)) => {
                answered != p.counters.is_some()
                    || (downed.is_some()
                        && p.counters.is_some()
                        && downed != p.value("LinkDownedCounter"))
            }
            None => true,
        })
}

/// Process-wide numbers that go with a rendering.
pub struct RenderStats<'a> {
    filter: PortFilter,
    /// Counter families on the page.
    counters: &'a [&'static str],
    sweeps: u64,
    discoveries: u64,
    discovery_seconds: f64,
    scrape_errors: &'a HashMap<u64, NodeErrors>,
    thresholds: &'a counters::Thresholds,
    /// The SM check's finding (None: a master SM answered).
    sm: Option<&'a findings::Finding>,
}

impl<'a> RenderStats<'a> {
    /// The numbers of a first sweep with no failures so far (for benchmarks of `render`).
    pub fn first_sweep(
        counters: &'a [&'static str],
        scrape_errors: &'a HashMap<u64, NodeErrors>,
        thresholds: &'a counters::Thresholds,
    ) -> Self {
        RenderStats {
            filter: PortFilter::default(),
            counters,
            sweeps: 1,
            discoveries: 1,
            discovery_seconds: 0.0,
            scrape_errors,
            thresholds,
            sm: None,
        }
    }
}

/// Counter metric names are the same as `ibscope counters --format prom` writes.
pub use super::counters::metric_name;

/// HELP text of a gauge that holds a coded value: "PortState (1 Down, 2 Initialize, ...;
/// 0 not read)", from the value's table.
fn code_help<'a>(what: &str, codes: impl Iterator<Item = (u8, &'a str)>) -> String {
    let known: Vec<String> = codes
        .filter(|(c, _)| *c != 0)
        .map(|(c, n)| format!("{c} {n}"))
        .collect();
    format!("{what} ({}; 0 not read).", known.join(", "))
}

/// HELP and TYPE of a family; its samples follow at once.
fn family_head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// One sample line.
fn sample_line(out: &mut String, name: &str, labels: &str, value: impl std::fmt::Display) {
    if labels.is_empty() {
        let _ = writeln!(out, "{name} {value}");
    } else {
        let _ = writeln!(out, "{name}{{{labels}}} {value}");
    }
}

/// One metric family: HELP, TYPE, then its samples, together.
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, String)]) {
    family_head(out, name, kind, help);
    for (labels, value) in samples {
        sample_line(out, name, labels, value);
    }
}

fn node_labels(guid: u64, name: &str, kind: NodeKind) -> String {
    format!(
        "node_guid=\"{guid:#018x}\",node_name=\"{}\",kind=\"{}\"",
        for_prometheus_label(name),
        kind.as_str()
    )
}

/// The label set of one port: itself and its link's far end (empty values when none).
fn port_labels(fabric: &Fabric, names: Option<&NameMap>, end: End) -> String {
    let node = fabric.node(end.node);
    let mut s = node_labels(node.guid, display_name(node, names), node.kind);
    let _ = write!(s, ",port=\"{}\"", end.port);
    match fabric.peer(end) {
        Some(r) => {
            let rn = fabric.node(r.node);
            let _ = write!(
                s,
                ",remote_guid=\"{:#018x}\",remote_name=\"{}\",remote_port=\"{}\"",
                rn.guid,
                for_prometheus_label(display_name(rn, names)),
                r.port
            );
        }
        None => s.push_str(",remote_guid=\"\",remote_name=\"\",remote_port=\"\""),
    }
    s
}

/// Render the exposition text of a sweep (everything but the per-scrape age).
///
/// Samples are written straight into the page (no per-family list of label copies): at
/// 16k ports and 40 series each this is most of a sweep's CPU time.
/// `health` is `health::assess` of `fabric` (computed once per discovery, not per sweep).
pub fn render(
    fabric: &Fabric,
    health: &HealthReport,
    names: Option<&NameMap>,
    sample: &Sample,
    stats: &RenderStats<'_>,
) -> String {
    let mut out = String::with_capacity(200 * sample.ports.len() * (stats.counters.len() + 10));

    // Ports described by the model: every switch port 1..N and every CA/router port, less
    // what the filter leaves out.
    let mut port_ends: Vec<(End, String)> = Vec::new();
    for (id, node) in fabric.nodes() {
        for p in &node.ports {
            if node.is_switch() && p.number == 0 {
                continue;
            }
            if !stats.filter.keeps(node, p.number) {
                continue;
            }
            let end = End {
                node: id,
                port: p.number,
            };
            port_ends.push((end, port_labels(fabric, names, end)));
        }
    }
    let by_port: HashMap<(u64, u8), usize> = port_ends
        .iter()
        .enumerate()
        .map(|(i, (e, _))| ((fabric.node(e.node).guid, e.port), i))
        .collect();

    // Labels of every swept port (switch port 0 is not in `port_ends`).
    let sample_labels: Vec<std::borrow::Cow<'_, str>> = sample
        .ports
        .iter()
        .map(|p| match by_port.get(&(p.at.node_guid, p.at.port)) {
            Some(&i) => std::borrow::Cow::Borrowed(port_ends[i].1.as_str()),
            None => std::borrow::Cow::Owned(match fabric.node_by_guid(p.at.node_guid) {
                Some(n) => port_labels(
                    fabric,
                    names,
                    End {
                        node: n,
                        port: p.at.port,
                    },
                ),
                None => format!(
                    "node_guid=\"{:#018x}\",port=\"{}\"",
                    p.at.node_guid, p.at.port
                ),
            }),
        })
        .collect();

    // Counters, one family each, in `counters --format prom` naming.
    for &name in stats.counters {
        let metric = metric_name(name);
        let unit = if counters::is_data_counter(name) {
            " in bytes"
        } else {
            ""
        };
        family_head(
            &mut out,
            &metric,
            "counter",
            &format!("IB {name}{unit} (PMA; 64-bit PortCountersExtended where implemented)."),
        );
        for (p, labels) in sample.ports.iter().zip(&sample_labels) {
            if let Some(v) = p.value(name) {
                sample_line(&mut out, &metric, labels, v);
            }
        }
    }
    family_head(
        &mut out,
        "ibscope_port_saturated_counters",
        "gauge",
        "Counters of the port on this page stuck at their maximum without a 64-bit replacement.",
    );
    for (p, labels) in sample.ports.iter().zip(&sample_labels) {
        if p.counters.is_some() {
            let n = p
                .saturated
                .iter()
                .filter(|s| stats.counters.contains(&s.as_str()) && p.is_saturated(s))
                .count();
            sample_line(&mut out, "ibscope_port_saturated_counters", labels, n);
        }
    }

    // The findings `ibscope check` reports, counted by kind: the same policy and thresholds
    // (the threshold file in force) as `check` without --thresholds.
    let mut found = findings::fabric_findings(fabric, names, health);
    found.extend(findings::counter_findings(sample, stats.thresholds));
    found.extend(stats.sm.cloned());
    family_head(
        &mut out,
        "ibscope_findings",
        "gauge",
        "Findings of `ibscope check` on the last sweep, by kind and severity.",
    );
    for (kind, n) in findings::count_by_kind(&found) {
        let labels = format!("kind=\"{kind}\",severity=\"{}\"", kind.severity().as_str());
        sample_line(&mut out, "ibscope_findings", &labels, n);
    }

    // Link facts from the last discovery.
    let link_family = |out: &mut String,
                       name: &str,
                       help: &str,
                       f: &dyn Fn(&ibscope_topo::Port) -> Option<String>| {
        family_head(out, name, "gauge", help);
        for (e, labels) in &port_ends {
            if let Some(v) = fabric.node(e.node).port(e.port).and_then(f) {
                sample_line(out, name, labels, v);
            }
        }
    };
    link_family(
        &mut out,
        "ibscope_port_state",
        &code_help(
            "PortState",
            PortState::KNOWN.iter().map(|s| (s.code(), s.name())),
        ),
        &|p| Some(p.state.map_or(0, PortState::code).to_string()),
    );
    link_family(
        &mut out,
        "ibscope_port_phys_state",
        &code_help(
            "PortPhysicalState",
            PhysState::KNOWN.iter().map(|s| (s.code(), s.name())),
        ),
        &|p| Some(p.phys_state.map_or(0, PhysState::code).to_string()),
    );
    link_family(
        &mut out,
        "ibscope_port_active",
        "1 if the port is Active, else 0.",
        &|p| Some(u8::from(p.is_active()).to_string()),
    );
    link_family(
        &mut out,
        "ibscope_port_link_up",
        "1 if the port is physically LinkUp, else 0.",
        &|p| Some(u8::from(p.is_phys_up()).to_string()),
    );
    link_family(
        &mut out,
        "ibscope_port_width_lanes",
        "Active link width in lanes (ports with a link only).",
        &|p| p.width_active.map(|w| w.lanes().to_string()),
    );
    link_family(
        &mut out,
        "ibscope_port_speed_gbps_per_lane",
        "Active link speed: signalling rate of one lane in Gb/s.",
        &|p| p.speed_active.map(|s| s.lane_gbps().to_string()),
    );
    link_family(
        &mut out,
        "ibscope_port_data_rate_gbps",
        "Active data rate of the link in Gb/s (lanes x lane data rate after encoding).",
        &|p| {
            let (w, s) = (p.width_active?, p.speed_active?);
            Some((f64::from(w.lanes()) * s.lane_data_gbps()).to_string())
        },
    );

    // Degraded flag of both ends of every link (healthy ones as 0).
    family_head(
        &mut out,
        "ibscope_port_degraded",
        "gauge",
        "1 if the port's link runs below what both ends could do or below the fabric norm.",
    );
    for link in &health.links {
        let value = u8::from(link.degraded);
        for end in [&link.a, &link.b] {
            if let Some(&i) = by_port.get(&(end.at.node_guid, end.at.port)) {
                sample_line(&mut out, "ibscope_port_degraded", &port_ends[i].1, value);
            }
        }
    }

    // Nodes.
    let node_base: Vec<(u64, String)> = fabric
        .nodes()
        .map(|(_, node)| {
            (
                node.guid,
                node_labels(node.guid, display_name(node, names), node.kind),
            )
        })
        .collect();
    family_head(
        &mut out,
        "ibscope_node_info",
        "gauge",
        "One per discovered node; its facts are labels.",
    );
    for ((_, node), (_, base)) in fabric.nodes().zip(&node_base) {
        let labels = format!(
            "{base},description=\"{}\",lid=\"{}\",num_ports=\"{}\",vendor_id=\"{:#08x}\",device_id=\"{:#06x}\",system_image_guid=\"{:#018x}\"",
            for_prometheus_label(&node.description),
            node.lid().unwrap_or(0),
            node.num_ports,
            node.vendor_id,
            node.device_id,
            node.system_image_guid
        );
        sample_line(&mut out, "ibscope_node_info", &labels, 1);
    }
    let errors_of = |guid: &u64| stats.scrape_errors.get(guid).copied().unwrap_or_default();
    family_head(
        &mut out,
        "ibscope_node_scrape_errors_total",
        "counter",
        "PMA queries of this node that failed (timeouts included), since the exporter started.",
    );
    for (guid, base) in &node_base {
        sample_line(
            &mut out,
            "ibscope_node_scrape_errors_total",
            base,
            errors_of(guid).errors,
        );
    }
    family_head(
        &mut out,
        "ibscope_node_scrape_timeouts_total",
        "counter",
        "PMA queries of this node that got no reply after every retry, since start.",
    );
    for (guid, base) in &node_base {
        sample_line(
            &mut out,
            "ibscope_node_scrape_timeouts_total",
            base,
            errors_of(guid).timeouts,
        );
    }

    // The exporter itself.
    let one = |v: String| vec![(String::new(), v)];
    family(
        &mut out,
        "ibscope_fabric_nodes",
        "gauge",
        "Nodes found by the last discovery.",
        &one(fabric.node_count().to_string()),
    );
    family(
        &mut out,
        "ibscope_fabric_links",
        "gauge",
        "Links found by the last discovery.",
        &one(fabric.link_count().to_string()),
    );
    family(
        &mut out,
        "ibscope_sweep_ports",
        "gauge",
        "Ports whose counters the last sweep read (or tried to).",
        &one(sample.ports.len().to_string()),
    );
    family(
        &mut out,
        "ibscope_sweep_mads",
        "gauge",
        "MADs the last sweep sent.",
        &one(sample.mads_sent.to_string()),
    );
    family(
        &mut out,
        "ibscope_sweep_timestamp_seconds",
        "gauge",
        "Unix time the last sweep started.",
        &one(format!("{:.3}", sample.time_ms as f64 / 1000.0)),
    );
    family(
        &mut out,
        "ibscope_sweep_duration_seconds",
        "gauge",
        "How long the last counter sweep took.",
        &one(format!("{:.6}", sample.duration_ms as f64 / 1000.0)),
    );
    family(
        &mut out,
        "ibscope_sweeps_total",
        "counter",
        "Counter sweeps since the exporter started.",
        &one(stats.sweeps.to_string()),
    );
    family(
        &mut out,
        "ibscope_discoveries_total",
        "counter",
        "Fabric discoveries since the exporter started.",
        &one(stats.discoveries.to_string()),
    );
    family(
        &mut out,
        "ibscope_discovery_duration_seconds",
        "gauge",
        "How long the last discovery took.",
        &one(format!("{:.6}", stats.discovery_seconds)),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only_by_default() {
        assert!(listen_addr("127.0.0.1:9315", false).is_ok());
        assert!(listen_addr("[::1]:9315", false).is_ok());
        let e = listen_addr("0.0.0.0:9315", false).unwrap_err().to_string();
        assert!(e.contains("--allow-remote"), "{e}");
        assert!(listen_addr("0.0.0.0:9315", true).is_ok());
        assert!(listen_addr("nonsense", false).is_err());
    }

    #[test]
    fn counter_names_pass_the_lint() {
        assert_eq!(
            metric_name("SymbolErrorCounter"),
            "ibscope_port_symbol_error_total"
        );
        assert_eq!(
            metric_name("LinkDownedCounter"),
            "ibscope_port_link_downed_total"
        );
        assert_eq!(
            metric_name("PortXmitData"),
            "ibscope_port_xmit_data_bytes_total"
        );
        assert_eq!(
            metric_name("VL15Dropped"),
            "ibscope_port_vl15_dropped_total"
        );
    }

    #[test]
    fn families_have_help_and_type() {
        let mut out = String::new();
        family(
            &mut out,
            "ibscope_x",
            "gauge",
            "X.",
            &[("a=\"1\"".into(), "2".into()), (String::new(), "3".into())],
        );
        assert_eq!(
            out,
            "# HELP ibscope_x X.\n# TYPE ibscope_x gauge\nibscope_x{a=\"1\"} 2\nibscope_x 3\n"
        );
    }

    #[test]
    fn counter_families_split_the_counters() {
        let errors = CounterFamilies::Errors.names();
        let data = CounterFamilies::Data.names();
        let all = CounterFamilies::All.names();
        assert_eq!((errors.len(), data.len(), all.len()), (12, 9, 21));
        assert_eq!(errors, counters::ERROR_COUNTERS);
        assert!(data.contains(&"PortXmitData") && data.contains(&"PortMulticastRcvPkts"));
        assert!(data.contains(&"PortXmitWait"));
        assert!(errors.iter().all(|e| !data.contains(e)));
        let mut both: Vec<_> = errors.iter().chain(&data).copied().collect();
        both.sort_unstable();
        let mut every = all.clone();
        every.sort_unstable();
        assert_eq!(both, every);
    }

    #[test]
    fn http_dates_are_imf_fixdates() {
        let at = |s: u64| http_date(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        // RFC 9110's own example.
        assert_eq!(at(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(at(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(at(4_102_444_799), "Thu, 31 Dec 2099 23:59:59 GMT");
    }
}
