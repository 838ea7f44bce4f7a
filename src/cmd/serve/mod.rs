//! `ibscope serve`: a Prometheus exporter. One background thread owns the management port
//! (discovery, then a counter sweep every --interval); after each sweep it renders the
//! whole exposition text into a shared cache. HTTP threads answer from that cache only, so a
//! scrape never waits on the fabric and never sends a MAD.

mod http;
mod sweeper;
mod tls;
mod web;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use ibscope_mad::engine::CancelToken;
use ibscope_topo::counters;
use ibscope_topo::export::prometheus::PortFilter;

use crate::cli::{exit, Global};
use crate::fabrics::Planned;
use crate::signals;
use http::{listen_addr, Pages, Slot};
use sweeper::Sweeper;

/// Serve fabric metrics for Prometheus over HTTP (read-only).
///
/// Endpoints (GET only; nothing here changes the fabric):
///   /metrics   Prometheus text exposition from the last sweep: every port's counters
///              (64-bit PortCountersExtended where implemented, the error counters too
///              where the PMA has them 64 bits wide; data in bytes; the same metric names
///              as `counters --format prom`, less a trailing `_counter`:
///              ibscope_port_symbol_error_total), the breakdown of PortRcvErrors and
///              PortXmitDiscards by cause for ports where those counted
///              (PortRcvErrorDetails, PortXmitDiscardDetails: ibscope_port_looping_errors_total
///              ...), link state, width, speed, degraded flag, node info, per-node scrape
///              errors/timeouts, sweep timing.
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
/// Listens on loopback only unless TLS is configured (--web-config) or --allow-remote is
/// given: the metrics name every node and link of the fabric, so plain HTTP beyond this
/// host is a decision to make explicitly. --web-config FILE (the exporter-toolkit format
/// node_exporter reads) adds TLS (rustls: TLS 1.2 and 1.3) and basic auth with
/// bcrypt-hashed passwords; every path then asks for them.
///
/// Several fabrics (-C all, a list; see -C): one sweeper thread per fabric, each on its
/// own schedule, so a slow or lost fabric never delays another. Every series carries a
/// `fabric` label (with one fabric too); ibscope_up{fabric} is 1 while the fabric's last
/// sweep succeeded and is fresh. A fabric whose port cannot be opened, or whose connection
/// is lost, leaves the page (ibscope_up 0) and is opened again every --interval; with one
/// fabric a lost connection ends serve instead. /healthz then has one line per fabric
/// and says 200 only when every fabric is fresh.
///
/// Examples:
///   ibscope serve
///   ibscope serve --listen 127.0.0.1:9315 --interval 30 --switches-only
///   ibscope serve --counters errors --active-only
///   ibscope serve --listen 0.0.0.0:9315 --allow-remote
///   ibscope serve --listen 0.0.0.0:9315 --web-config /etc/ibscope/web.yml
///   ibscope -C all serve                  # every fabric this host reaches
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment, after_long_help = AFTER_HELP)]
pub struct Args {
    /// Address to listen on (host:port). Must be loopback unless --allow-remote.
    #[arg(long, default_value = "127.0.0.1:9315", value_name = "ADDR")]
    pub listen: String,
    /// Seconds between counter sweeps.
    #[arg(long, default_value_t = 10.0, value_name = "S")]
    pub interval: f64,
    /// Counter families on the page: all 31 (default), errors (the 12 PortCounters error
    /// counters, SymbolErrorCounter to VL15Dropped, and the 10 breakdown counters, with
    /// series only for ports whose PortRcvErrors or PortXmitDiscards counted) or data (the
    /// 9 traffic counters: data, packets, unicast/multicast packets, XmitWait). On the
    /// 2,048-host benchmark fabric (no errors, so no breakdown series):
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
    /// Allow a non-loopback --listen address over plain HTTP. Off by default because the
    /// metrics describe every node and link of the fabric (not needed with TLS from
    /// --web-config).
    #[arg(long)]
    pub allow_remote: bool,
    /// HTTP worker threads.
    #[arg(long, default_value_t = 4, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub http_threads: u32,
    /// TLS and basic auth, in the exporter-toolkit's web configuration format (YAML, the
    /// --web.config.file of node_exporter): tls_server_config (cert_file, key_file,
    /// min_version TLS12|TLS13, max_version, client_auth_type with client_ca_file) and
    /// basic_auth_users (user: bcrypt hash). With TLS a non-loopback --listen needs no
    /// --allow-remote. A file that cannot be used fails at start.
    #[arg(long, value_name = "FILE")]
    pub web_config: Option<PathBuf>,
}

/// The end of `serve --help`: what the page holds, how to trim it, how it stops.
const AFTER_HELP: &str = "\
Page size: per port 21 counter series, a saturation gauge and up to 8 link gauges (state,
physical state, active, link up, width, speed, data rate, degraded); per node 3 series;
and 6 or 4 breakdown series per port whose PortRcvErrors or PortXmitDiscards counted.
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
    /// The 12 error counters (as `counters` and thresholds use them) and the 10 that break
    /// PortRcvErrors and PortXmitDiscards down.
    Errors,
    /// The 9 data, packet and wait counters.
    Data,
    /// All 31.
    All,
}

impl CounterFamilies {
    /// The counter names on the page, in page order: PortCounters and the extended-only
    /// ones, then the breakdown counters.
    pub fn names(self) -> Vec<&'static str> {
        counters::all_counter_names()
            .into_iter()
            .chain(counters::detail_counter_names())
            .filter(|n| {
                let error = counters::ERROR_COUNTERS.contains(n)
                    || counters::detail_counter_names().contains(n);
                match self {
                    CounterFamilies::Errors => error,
                    CounterFamilies::Data => !error,
                    CounterFamilies::All => true,
                }
            })
            .collect()
    }
}

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    if g.topology.is_some() {
        bail!("serve reads the live fabric: --topology cannot be used here");
    }
    if !(a.interval.is_finite() && a.interval > 0.0) {
        bail!("--interval must be a positive number of seconds");
    }
    let web = match &a.web_config {
        Some(path) => Some(web::WebConfig::load(path)?),
        None => None,
    };
    let tls_config = web.as_ref().and_then(|w| w.tls.clone());
    let auth = web.and_then(|w| w.auth).map(Arc::new);
    let addr = listen_addr(&a.listen, a.allow_remote || tls_config.is_some())?;
    let check = Check {
        names: crate::fabric::names(g)?,
        thresholds: crate::fabric::thresholds(g, None)?,
    };
    signals::install(&[libc::SIGTERM, libc::SIGINT], signals::Second::Exit);
    // Every thread started from here on (tiny_http's, ours, the transport's) inherits it.
    signals::block_stop_signals(true);
    let started = start(g, a, &check, addr, tls_config, auth);
    signals::block_stop_signals(false);
    let running = started?;
    let scheme = if running.front.is_some() {
        "https"
    } else {
        "http"
    };
    eprintln!("ibscope serve: listening on {scheme}://{addr}/metrics");
    let why = wait_for_stop(&running.lost)?;
    running.shut_down(g, why)
}

/// What runs while serving: the HTTP front, its workers and a sweeper per fabric.
struct Running {
    /// The one fabric's loss of its transport (several fabrics are opened again instead).
    lost: mpsc::Receiver<anyhow::Error>,
    /// Set on SIGTERM/SIGINT: the sweepers' engines send nothing more (see Engine::run).
    stop: CancelToken,
    /// Dropping them ends the sweepers' sleep.
    wakers: Vec<mpsc::Sender<()>>,
    sweepers: Vec<JoinHandle<()>>,
    sweeps: Arc<AtomicU64>,
    server: Arc<tiny_http::Server>,
    workers: Vec<JoinHandle<()>>,
    /// The TLS accept loop, when there is TLS, and what stops it.
    front: Option<JoinHandle<()>>,
    front_stop: Arc<AtomicBool>,
}

/// What the sweepers judge findings by: the node names and the counter thresholds.
struct Check {
    names: Option<ibscope_topo::namemap::NameMap>,
    thresholds: ibscope_topo::counters::Thresholds,
}

/// Open the fabrics, listen, start the sweepers and the HTTP workers.
fn start(
    g: &Global,
    a: &Args,
    check: &Check,
    addr: std::net::SocketAddr,
    tls_config: Option<Arc<rustls::ServerConfig>>,
    auth: Option<Arc<web::BasicAuth>>,
) -> Result<Running> {
    let opened = crate::fabrics::open(g)?;
    if opened.iter().all(|o| o.is_err()) {
        let lines: Vec<String> = opened
            .iter()
            .filter_map(|o| o.as_ref().err())
            .map(|u| crate::fabrics::failure_line(&u.name, &u.error))
            .collect();
        bail!("no fabric could be opened: {}", lines.join("; "));
    }
    let front_stop = Arc::new(AtomicBool::new(false));
    let (server, front) = http_server(addr, tls_config.as_ref(), &front_stop)?;
    let server = Arc::new(server);
    let pages = Arc::new(Pages {
        slots: opened
            .iter()
            .map(|o| match o {
                Ok(o) => Slot::new(o.id.name.clone()),
                Err(u) => Slot::new(u.name.clone()),
            })
            .collect(),
        multi: crate::fabrics::is_multi(g.ca.as_deref()),
    });
    let stop = CancelToken::new();
    let sweeps = Arc::new(AtomicU64::new(0));
    let (lost, wakers, sweepers) = spawn_sweepers(g, a, check, opened, &pages, &stop, &sweeps)?;
    let max_age = Duration::from_secs_f64(a.interval) * 3 + Duration::from_secs(5);
    let workers = spawn_http_workers(&server, &pages, auth, max_age, a.http_threads)?;
    Ok(Running {
        lost,
        stop,
        wakers,
        sweepers,
        sweeps,
        server,
        workers,
        front,
        front_stop,
    })
}

/// The HTTP server: on `addr`, or with TLS on a private socket behind the TLS front
/// (which `front_stop` ends).
fn http_server(
    addr: std::net::SocketAddr,
    tls_config: Option<&Arc<rustls::ServerConfig>>,
    front_stop: &Arc<AtomicBool>,
) -> Result<(tiny_http::Server, Option<JoinHandle<()>>)> {
    match tls_config {
        Some(config) => {
            let (inner, inner_addr) = tls::inner_listener()?;
            let server = tiny_http::Server::from_listener(inner, None)
                .map_err(|e| anyhow!("cannot serve on a private socket: {e}"))?;
            let front = tls::spawn(
                http::listener(addr)?,
                config.clone(),
                inner_addr,
                front_stop.clone(),
            )?;
            Ok((server, Some(front)))
        }
        None => Ok((
            tiny_http::Server::from_listener(http::listener(addr)?, None)
                .map_err(|e| anyhow!("cannot serve on {addr}: {e}"))?,
            None,
        )),
    }
}

/// The sweepers' threads: their wakers, and where the one fabric's loss is reported.
type Sweepers = (
    mpsc::Receiver<anyhow::Error>,
    Vec<mpsc::Sender<()>>,
    Vec<JoinHandle<()>>,
);

/// A sweeper per fabric, each owning its engine (or opening it again, for a fabric that
/// did not open). With one fabric it reports the loss of the transport, which ends the
/// command.
fn spawn_sweepers(
    g: &Global,
    a: &Args,
    check: &Check,
    opened: Vec<Result<crate::fabrics::Opened, crate::fabrics::Unreached>>,
    pages: &Arc<Pages>,
    stop: &CancelToken,
    sweeps: &Arc<AtomicU64>,
) -> Result<Sweepers> {
    let (lost_tx, lost_rx) = mpsc::channel::<anyhow::Error>();
    let mut wakers = Vec::new();
    let mut sweepers = Vec::new();
    for (slot, fabric) in opened.into_iter().enumerate() {
        let (planned, engine) = match fabric {
            Ok(o) => (
                Planned {
                    name: o.id.name,
                    reach: o.reach,
                },
                Some(o.engine),
            ),
            Err(u) => {
                eprintln!(
                    "ibscope serve: {}; trying again every {} s",
                    crate::fabrics::failure_line(&u.name, &u.error),
                    a.interval
                );
                pages.slots[slot].set_down(format!("{:#}", u.error));
                (
                    Planned {
                        name: u.name,
                        reach: u.reach,
                    },
                    None,
                )
            }
        };
        let sweeper = Sweeper {
            g: g.clone(),
            slot,
            planned,
            engine,
            multi: pages.multi,
            names: check.names.clone(),
            thresholds: check.thresholds.clone(),
            filter: PortFilter {
                switches_only: a.switches_only,
                active_only: a.active_only,
            },
            counters: a.counters.names(),
            interval: Duration::from_secs_f64(a.interval),
            rediscover_every: a.rediscover_every,
            pages: pages.clone(),
            stop: stop.clone(),
            sweeps: sweeps.clone(),
            own_sweeps: 0,
            scrape_errors: HashMap::new(),
            discoveries: 0,
        };
        let (wake, sleeper) = mpsc::channel::<()>();
        wakers.push(wake);
        let lost = lost_tx.clone();
        sweepers.push(
            std::thread::Builder::new()
                .name(format!("sweeper-{slot}"))
                .spawn(move || sweeper.run(lost, sleeper))?,
        );
    }
    Ok((lost_rx, wakers, sweepers))
}

impl Running {
    /// Stop: no new requests, no new MADs; let what is in flight finish, then close.
    fn shut_down(self, g: &Global, why: Stop) -> Result<ExitCode> {
        let started = Instant::now();
        self.stop.cancel();
        drop(self.wakers);
        self.front_stop.store(true, Ordering::SeqCst);
        if let Some(front) = self.front {
            if finished_within(&front, Duration::from_secs(1)) {
                let _ = front.join();
            }
        }
        stop_http_workers(self.server, self.workers);
        let engine = crate::fabric::engine_config(g);
        // What a sweeper may still wait for: the attempt in flight (the cancelled engine
        // sends no retry), the engine's drain of late replies (at most 1 s) before it
        // unregisters, a relay agent's exit (at most 2 s) and a render already under way.
        // Generous: the engine's own retries would fit too.
        let limit = engine.timeout * (engine.retries + 1) + Duration::from_secs(4);
        let deadline = Instant::now() + limit;
        let mut closed = true;
        for s in self.sweepers {
            let left = deadline.saturating_duration_since(Instant::now());
            closed &= finished_within(&s, left) && s.join().is_ok();
        }
        let signal = match why {
            Stop::Signal(signal) => signal,
            Stop::Lost(e) => {
                if !closed {
                    tracing::warn!("the sweeper did not finish after the transport was lost");
                }
                return Err(e);
            }
        };
        let n = self.sweeps.load(Ordering::SeqCst);
        Ok(report_stop(signal, n, closed, started.elapsed(), limit))
    }
}

/// Why the main thread stops serving.
enum Stop {
    Signal(i32),
    /// The sweeper lost the transport (the "lost the connection to the fabric" error).
    Lost(anyhow::Error),
}

fn spawn_http_workers(
    server: &Arc<tiny_http::Server>,
    pages: &Arc<Pages>,
    auth: Option<Arc<web::BasicAuth>>,
    max_age: Duration,
    threads: u32,
) -> Result<Vec<JoinHandle<()>>> {
    let mut workers = Vec::new();
    for i in 0..threads {
        let server = server.clone();
        let pages = pages.clone();
        let auth = auth.clone();
        workers.push(
            std::thread::Builder::new()
                .name(format!("http-{i}"))
                .spawn(move || {
                    while let Ok(req) = server.recv() {
                        http::serve_one(req, &pages, auth.as_deref(), max_age);
                    }
                })?,
        );
    }
    Ok(workers)
}

/// Wait for a stop signal, or the loss of the one fabric's transport.
fn wait_for_stop(lost: &mpsc::Receiver<anyhow::Error>) -> Result<Stop> {
    loop {
        if let Some(signal) = signals::received() {
            return Ok(Stop::Signal(signal));
        }
        match lost.recv_timeout(STOP_POLL) {
            // The transport went away under a sweep: stop as for a signal, then fail.
            Ok(e) => return Ok(Stop::Lost(e)),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // Every sweeper ended on its own (none is left to report): nothing more will
            // be swept.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                bail!("the sweeper threads ended unexpectedly; the metrics would only get stale")
            }
        }
    }
}

/// Stop accepting and let the workers finish what they are writing, for a moment.
fn stop_http_workers(server: Arc<tiny_http::Server>, workers: Vec<JoinHandle<()>>) {
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
}

/// The one line on stderr after a signal, and the exit code: 0 when the management port
/// was closed, 1 when the sweeper did not finish in time.
fn report_stop(
    signal: i32,
    sweeps: u64,
    closed: bool,
    took: Duration,
    limit: Duration,
) -> ExitCode {
    let word = if sweeps == 1 { "sweep" } else { "sweeps" };
    let name = signals::name(signal);
    if closed {
        eprintln!(
            "ibscope serve: {name} received; stopped after {sweeps} {word} in {:.2} s, management port closed",
            took.as_secs_f64()
        );
        ExitCode::from(exit::OK)
    } else {
        eprintln!(
            "ibscope serve: {name} received; stopped after {sweeps} {word}, but the sweeper did not \
             finish within {:.1} s: exiting without closing the management port",
            limit.as_secs_f64()
        );
        ExitCode::from(exit::FINDINGS)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_families_split_the_counters() {
        let errors = CounterFamilies::Errors.names();
        let data = CounterFamilies::Data.names();
        let all = CounterFamilies::All.names();
        assert_eq!((errors.len(), data.len(), all.len()), (22, 9, 31));
        assert_eq!(&errors[..12], counters::ERROR_COUNTERS);
        assert_eq!(errors[12..], counters::detail_counter_names());
        assert!(data.contains(&"PortXmitData") && data.contains(&"PortMulticastRcvPkts"));
        assert!(data.contains(&"PortXmitWait"));
        assert!(errors.iter().all(|e| !data.contains(e)));
        let mut both: Vec<_> = errors.iter().chain(&data).copied().collect();
        both.sort_unstable();
        let mut every = all.clone();
        every.sort_unstable();
        assert_eq!(both, every);
    }
}
