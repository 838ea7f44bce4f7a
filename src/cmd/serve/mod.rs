//! `ibscope serve`: a Prometheus exporter. A sweeper process owns the management port
//! (discovery, then a counter sweep every --interval) and hands each sweep's page to this
//! one, which keeps it in a cache and starts a new sweeper process when one ends (the
//! fabric lost: see `supervisor`). HTTP threads answer from that cache only, so a scrape
//! never waits on the fabric and never sends a MAD, and the exporter keeps answering while
//! the fabric is unreachable.

mod frames;
mod http;
mod supervisor;
mod sweeper;

use std::collections::HashMap;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use ibscope_mad::engine::CancelToken;
use ibscope_topo::counters;
use ibscope_topo::export::prometheus::PortFilter;

use crate::cli::{exit, Global};
use crate::signals;
use http::{listen_addr, Cache};
use supervisor::{Event, Supervisor};
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
///              errors/timeouts, sweep timing, and per scrape: ibscope_up (0 while the
///              fabric is unreachable), ibscope_sample_stale, ibscope_sweep_age_seconds,
///              ibscope_port_reopens_total.
///   /healthz   200 "ok" when the fabric answers and the last sweep succeeded and is fresh
///              (younger than 3 x --interval + 5 s), else 503 with the reason.
///
/// A sweeper process (this binary, started by serve) discovers the fabric, then sweeps the
/// counters every --interval seconds, and rediscovers when a sweep sees a topology change
/// (a switch port whose state differs from the discovered one: one PortInfo per switch
/// port per sweep; or a port whose LinkDownedCounter moved or whose PMA started or stopped
/// answering), and every --rediscover-every sweeps. Scrapes are answered from a cache,
/// never from the fabric.
///
/// When the fabric becomes unreachable (the HCA resets, the driver reloads, the umad
/// device or the simulator goes away) serve keeps answering: /metrics serves the last good
/// sample with ibscope_up 0 and ibscope_sample_stale 1, /healthz says 503 and why. It
/// reopens the port in a new sweeper process 1 s after the loss, then backs off (2 s, 4 s,
/// ...) up to 30 s between attempts, and serves fresh data after the first sweep once the
/// fabric is back. Only a port that cannot be opened at start fails the command (exit 2).
///
/// Page size and how the options trim it: see AFTER_HELP (the end of `serve --help`).
///
/// Stops on SIGTERM, SIGINT or SIGHUP: stops accepting, the sweeper abandons its sweep (a
/// MAD in flight gets its timeout, no retry) and closes the management port, and serve
/// exits 0. A second signal exits at once (code 1).
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
    /// Allow a non-loopback --listen address. Off by default because the metrics describe
    /// every node and link of the fabric and are served without authentication or TLS.
    #[arg(long)]
    pub allow_remote: bool,
    /// HTTP worker threads.
    #[arg(long, default_value_t = 4, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub http_threads: u32,
    /// Run as serve's sweeper process: frames on stdout (started by serve itself).
    #[arg(long, hide = true)]
    pub sweeper_process: bool,
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

Stops on SIGTERM, SIGINT or SIGHUP: stops accepting, abandons the running sweep (a MAD in
flight gets its timeout, no retry), closes the management port and exits 0 with one line
on stderr. A second signal exits at once (code 1). While the fabric is unreachable it
keeps serving the last good page (ibscope_up 0) and reopens the port 1 s after the loss,
then at doubling intervals up to 30 s.";

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
    if a.sweeper_process {
        return run_sweeper_process(g, a);
    }
    let addr = listen_addr(&a.listen, a.allow_remote)?;
    // Read now so a bad file fails the command at once, not every sweeper process.
    crate::fabric::names(g)?;
    crate::fabric::thresholds(g, None)?;
    signals::install(signals::STOP_SIGNALS, signals::Second::Exit);
    let state = crate::statedir::StateDir::create("serve")?;
    // Every thread started from here on (tiny_http's, ours) inherits it.
    signals::block_stop_signals(true);
    let server = tiny_http::Server::from_listener(http::listener(addr)?, None)
        .map_err(|e| anyhow!("cannot serve on {addr}: {e}"))?;
    let server = Arc::new(server);
    let cache = Arc::new(Cache::default());
    let interval = Duration::from_secs_f64(a.interval);
    let (events_tx, events) = mpsc::channel::<Event>();
    let supervisor = Supervisor::spawn(
        sweeper_args(),
        state.path().to_path_buf(),
        cache.clone(),
        events_tx,
    )?;
    let max_age = interval * 3 + Duration::from_secs(5);
    let workers = spawn_http_workers(&server, &cache, max_age, a.http_threads)?;
    signals::block_stop_signals(false);

    let why = wait_for_stop(&events, addr);
    // Stop: no new requests; the sweeper process sends no new MAD, lets what is in flight
    // finish and closes the port.
    let started = Instant::now();
    stop_http_workers(server, workers);
    let engine = crate::fabric::engine_config(g);
    // What the sweeper may still wait for: the attempt in flight (the cancelled engine
    // sends no retry), the engine's drain of late replies (at most 1 s) before it
    // unregisters, a render already under way, and its exit. Generous: the engine's own
    // retries would fit too.
    let limit = engine.timeout * (engine.retries + 1) + Duration::from_secs(2);
    let sweeps = supervisor.pages();
    let closed = supervisor.stop(limit);
    let took = started.elapsed();
    // Said once the port is closed; the sweeper process may take a moment more to exit.
    let code = why.map(|signal| report_stop(signal, sweeps, closed, took, limit));
    supervisor.join();
    // Only now: the sweeper process kept its files there until it exited.
    drop(state);
    code
}

/// The sweeper process's command line: this one's arguments (the flag that makes it the
/// sweeper is added by the supervisor).
fn sweeper_args() -> Vec<OsString> {
    std::env::args_os().skip(1).collect()
}

/// `serve --sweeper-process`: sweep and hand the pages over on stdout until a stop signal
/// comes or `serve` is gone.
fn run_sweeper_process(g: &Global, a: &Args) -> Result<ExitCode> {
    use std::os::fd::FromRawFd;
    // The stop is serve's to order; a second signal must not cut the clean close short.
    signals::install(signals::STOP_SIGNALS, signals::Second::Wait);
    // The frames get stdout to themselves: whatever else would print there goes to stderr.
    // SAFETY: dup of fd 1 gives a new descriptor owned by `out` alone; dup2 then points
    // fd 1 at stderr.
    let out = unsafe {
        let fd = libc::dup(1);
        if fd < 0 || libc::dup2(2, 1) < 0 {
            bail!("setting up the sweeper process's output");
        }
        std::fs::File::from_raw_fd(fd)
    };
    let stop = CancelToken::new();
    let (wake, sleeper) = mpsc::channel::<()>();
    let watcher = {
        let stop = stop.clone();
        // SAFETY: getppid has no preconditions.
        let parent = unsafe { libc::getppid() };
        std::thread::Builder::new()
            .name("stop-watcher".into())
            .spawn(move || loop {
                // SAFETY: as above.
                let orphaned = unsafe { libc::getppid() } != parent;
                if signals::received().is_some() || orphaned || stop.is_cancelled() {
                    stop.cancel();
                    drop(wake);
                    return;
                }
                std::thread::sleep(STOP_POLL);
            })?
    };
    let sweeper = Sweeper {
        g: g.clone(),
        names: crate::fabric::names(g)?,
        thresholds: crate::fabric::thresholds(g, None)?,
        filter: PortFilter {
            switches_only: a.switches_only,
            active_only: a.active_only,
        },
        counters: a.counters.names(),
        interval: Duration::from_secs_f64(a.interval),
        rediscover_every: a.rediscover_every,
        stop: stop.clone(),
        out: Box::new(std::io::BufWriter::new(out)),
        scrape_errors: HashMap::new(),
        sweeps: 0,
        discoveries: 0,
    };
    let code = sweeper.run(sleeper);
    stop.cancel();
    let _ = watcher.join();
    Ok(ExitCode::from(code))
}

fn spawn_http_workers(
    server: &Arc<tiny_http::Server>,
    cache: &Arc<Cache>,
    max_age: Duration,
    threads: u32,
) -> Result<Vec<JoinHandle<()>>> {
    let mut workers = Vec::new();
    for i in 0..threads {
        let server = server.clone();
        let cache = cache.clone();
        workers.push(
            std::thread::Builder::new()
                .name(format!("http-{i}"))
                .spawn(move || {
                    while let Ok(req) = server.recv() {
                        http::serve_one(req, &cache, max_age);
                    }
                })?,
        );
    }
    Ok(workers)
}

/// Wait for a stop signal, announcing the address once the sweeper opened the port; an
/// error when the first sweeper process could not open it.
fn wait_for_stop(events: &mpsc::Receiver<Event>, addr: SocketAddr) -> Result<i32> {
    loop {
        if let Some(signal) = signals::received() {
            return Ok(signal);
        }
        match events.recv_timeout(STOP_POLL) {
            Ok(Event::Opened(port)) => {
                tracing::info!("management port {port} open");
                eprintln!("ibscope serve: listening on http://{addr}/metrics");
            }
            Ok(Event::Fatal(e)) => return Err(e),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // The supervisor ends only after a stop: wait for the signal.
            Err(mpsc::RecvTimeoutError::Disconnected) => std::thread::sleep(STOP_POLL),
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
