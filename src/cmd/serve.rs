//! `ibscope serve`: a Prometheus exporter. For each fabric a sweeper process owns the
//! management port (discovery, then a counter sweep every --interval) and hands each
//! sweep's page to this one, where that fabric's supervisor thread keeps it in the
//! fabric's slot and starts a new sweeper process when one ends (the fabric lost: see
//! `supervisor`). HTTP threads answer from the slots only, so a scrape never waits on a
//! fabric and never sends a MAD, and the exporter keeps answering while a fabric is
//! unreachable.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use ibscope_mad::engine::CancelToken;
use ibscope_topo::counters;
use ibscope_topo::export::prometheus::PortFilter;

use crate::cli::{exit, Global};
use crate::fabric_set::{Planned, Reach};
use crate::signals;
/// How a sweeper compresses its page and `serve` holds it, for the scale benchmark to
/// measure.
pub use ibscope_exporter::http::Family;
use ibscope_exporter::http::{listen_addr, Pages, Slot};
pub use ibscope_exporter::pieces::{Deflated, PageDeflater, PieceCache};
use ibscope_exporter::plane_counts;
use ibscope_exporter::server::{http_server, spawn_http_workers, Running};
use ibscope_exporter::supervisor::{self, Event, Supervisor};
use ibscope_exporter::sweeper::SweeperProcess;
use ibscope_exporter::web::{self, TlsConfig};

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
///              errors/timeouts, sweep timing, and per scrape, for each fabric:
///              ibscope_up (0 while it is unreachable), ibscope_sample_stale,
///              ibscope_sweep_age_seconds, ibscope_port_reopens_total.
///   /healthz   200 "ok" when every fabric answers and its last sweep succeeded and is
///              fresh (younger than 3 x --interval + 5 s), else 503 with the reason.
///
/// A sweeper process per fabric (this binary, started by serve) discovers the fabric,
/// then sweeps the counters every --interval seconds, and rediscovers when a sweep sees a
/// topology change (a switch port whose state differs from the discovered one: one
/// PortInfo per switch port per sweep; or a port whose LinkDownedCounter moved or whose
/// PMA started or stopped answering), and every --rediscover-every sweeps. Scrapes are
/// answered from a cache, never from the fabric.
///
/// When a fabric becomes unreachable (the HCA resets, the driver reloads, the umad device,
/// the relay agent or the simulator goes away) serve keeps answering: /metrics serves its
/// last good sample with ibscope_up 0 and ibscope_sample_stale 1, /healthz says 503 and
/// why. It reopens the port in a new sweeper process 1 s after the loss, then backs off
/// (2 s, 4 s, ...) up to 30 s between attempts, and serves fresh data after the first
/// sweep once the fabric is back. With one fabric, only a port that cannot be opened at
/// start fails the command (exit 2).
///
/// Page size and how the options trim it: docs/exporter.md.
///
/// Stops on SIGTERM, SIGINT or SIGHUP: stops accepting, the sweepers abandon their sweeps
/// (a MAD in flight gets its timeout, no retry) and close the management ports, and serve
/// exits 0. A second signal exits at once (code 1).
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
/// Several fabrics (-C all, a list; see -C): one sweeper process per fabric, each on its
/// own schedule, so a slow or lost fabric never delays another. Every series carries a
/// `fabric` label (with one fabric too); ibscope_up{fabric} is 1 while the fabric answers
/// and its last sweep succeeded and is fresh. A fabric whose port cannot be opened, or
/// whose connection is lost, keeps its last good series marked stale (ibscope_up 0,
/// ibscope_sample_stale 1) and is opened again with the backoff above. Ports that reach
/// one subnet are swept once. /healthz then has one line per fabric and says 200 only
/// when every fabric is up and fresh. Planes of multi-plane HCA ports (one port GUID in
/// several fabrics) are compared as `check -C all` does: a plane that disagrees counts in
/// its fabric's ibscope_findings{kind="planes-disagree"} from that fabric's next sweep.
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
    /// 9 traffic counters: data, packets, unicast/multicast packets, XmitWait).
    /// Trims the page only: one PortCounters MAD carries every counter. Link, node and
    /// sweep families are always there.
    #[arg(long, value_enum, default_value_t = CounterFamilies::All, value_name = "WHICH")]
    pub counters: CounterFamilies,
    /// Only ports that are Active (and physically LinkUp) at the last discovery: only their
    /// counters are read, and other ports have no series at all (a port that goes down
    /// leaves the page at the rediscovery this triggers).
    #[arg(long)]
    pub active_only: bool,
    /// Read the counters of switch ports only (fewer MADs; each CA port's traffic is
    /// also seen at its switch port). CA ports then have no port series, CA nodes keep
    /// theirs.
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
    /// Run as serve's sweeper process: frames on stdout (started by serve itself).
    #[arg(long, hide = true)]
    pub sweeper_process: bool,
    /// The sweeper process's fabric: its name ("" for the one fabric of -C/-P).
    #[arg(long, hide = true, requires = "sweeper_process", value_name = "NAME")]
    pub sweeper_fabric: Option<String>,
    /// The sweeper process's fabric: how it is reached (see `reach_arg`).
    #[arg(long, hide = true, requires = "sweeper_process", value_name = "REACH")]
    pub sweeper_reach: Option<String>,
    /// The sweeper process sends its fabric after each discovery (several fabrics: their
    /// planes are compared).
    #[arg(long, hide = true, requires = "sweeper_process")]
    pub sweeper_planes: bool,
}

/// The end of `serve --help`: what the page holds, how to trim it, how it stops.
const AFTER_HELP: &str = "\
Page size: per port 21 counter series, a saturation gauge and up to 8 link gauges; per
node 3 series. --counters, --active-only and --switches-only trim it (docs/exporter.md).

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
    let web = match &a.web_config {
        Some(path) => Some(web::WebConfig::load(path)?),
        None => None,
    };
    let tls_config = web.as_ref().and_then(|w| w.tls.clone());
    let auth = web.and_then(|w| w.auth).map(Arc::new);
    let addr = listen_addr(&a.listen, a.allow_remote || tls_config.is_some())?;
    // Read now so a bad file fails the command at once, not every sweeper process.
    crate::fabric::names(g)?;
    crate::fabric::thresholds(g, None)?;
    let planned = crate::fabric_set::planned(g)?;
    signals::install(signals::STOP_SIGNALS, signals::Second::Exit);
    let state = crate::statedir::StateDir::create("serve")?;
    // Every thread started from here on (tiny_http's, ours) inherits it.
    signals::block_stop_signals(true);
    let started = start(g, a, planned, &state, addr, tls_config, auth);
    signals::block_stop_signals(false);
    let (running, events) = started?;
    let scheme = if running.front.is_some() {
        "https"
    } else {
        "http"
    };
    let why = wait_for_stop(
        &events,
        &running.pages,
        &format!("{scheme}://{addr}/metrics"),
    );
    let limit = stop_limit(g);
    let stopped = running.shut_down(limit);
    let code =
        why.map(|signal| report_stop(signal, stopped.sweeps, stopped.closed, stopped.took, limit));
    stopped.join();
    // Only now: the sweeper processes kept their files there until they exited.
    drop(state);
    code
}

/// Listen, start a supervisor (and so a sweeper process) per fabric, and the HTTP workers.
fn start(
    g: &Global,
    a: &Args,
    planned: Vec<Planned>,
    state: &crate::statedir::StateDir,
    addr: std::net::SocketAddr,
    tls_config: Option<Arc<TlsConfig>>,
    auth: Option<Arc<web::BasicAuth>>,
) -> Result<(Running, mpsc::Receiver<Event>)> {
    let front_stop = Arc::new(AtomicBool::new(false));
    let (server, front) = http_server(addr, tls_config.as_ref(), &front_stop)?;
    let server = Arc::new(server);
    let multi = crate::fabric_set::is_multi(g.ca.as_deref());
    let pages = Arc::new(Pages {
        slots: planned.iter().map(|p| Slot::new(slot_name(g, p))).collect(),
        multi,
    });
    let sweeps = Arc::new(AtomicU64::new(0));
    let (events_tx, events) = mpsc::channel::<Event>();
    let shared = supervisor::Shared {
        dir: state.path().to_path_buf(),
        pages: pages.clone(),
        sweeps: sweeps.clone(),
        subnets: Arc::new(Mutex::new(vec![None; planned.len()])),
        planes: plane_counts::Planes::new(planned.len(), crate::fabric::names(g)?),
        events: events_tx,
    };
    let own_args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let mut supervisors = Vec::new();
    for (slot, p) in planned.iter().enumerate() {
        let mut args = own_args.clone();
        args.extend(sweeper_args(p));
        if multi {
            args.push("--sweeper-planes".into());
        }
        let fabric = supervisor::SweeperCommand { slot, args, multi };
        supervisors.push(Supervisor::spawn(fabric, shared.clone())?);
    }
    let max_age = Duration::from_secs_f64(a.interval) * 3 + Duration::from_secs(5);
    let workers = spawn_http_workers(&server, &pages, auth, max_age, a.http_threads)?;
    let running = Running {
        pages,
        supervisors,
        sweeps,
        server,
        workers,
        front,
        front_stop,
    };
    Ok((running, events))
}

/// A fabric's name before its sweeper process opened it: the planned name, or for the
/// one fabric of -C/-P what names it (its real name, CA:port, comes with the port).
fn slot_name(g: &Global, p: &Planned) -> String {
    if !p.name.is_empty() {
        return p.name.clone();
    }
    match (&g.ca, g.port) {
        (Some(ca), Some(port)) => crate::fabric_set::port_name(ca, port),
        (Some(ca), None) => ca.clone(),
        _ => "default".to_string(),
    }
}

/// The arguments that make a sweeper process of `p`'s fabric.
fn sweeper_args(p: &Planned) -> Vec<OsString> {
    vec![
        "--sweeper-process".into(),
        "--sweeper-fabric".into(),
        p.name.clone().into(),
        "--sweeper-reach".into(),
        reach_arg(&p.reach).into(),
    ]
}

/// How a fabric is reached, as one argument: `default` (-C/-P as given), `local:PORT:CA`,
/// `relay:COMMAND`.
fn reach_arg(reach: &Reach) -> String {
    match reach {
        Reach::Default { .. } => "default".to_string(),
        Reach::Local { ca, port } => format!("local:{port}:{ca}"),
        Reach::Relay { command } => format!("relay:{command}"),
    }
}

/// [`reach_arg`] read back; `Default` takes -C/-P from `g`.
fn parse_reach(g: &Global, text: &str) -> Result<Reach> {
    let bad = || anyhow!("--sweeper-reach {text:?}: not a fabric's reach");
    Ok(match text.split_once(':') {
        None if text == "default" => Reach::Default {
            ca: g.ca.clone(),
            port: g.port,
        },
        Some(("local", rest)) => {
            let (port, ca) = rest.split_once(':').ok_or_else(bad)?;
            Reach::Local {
                ca: ca.to_string(),
                port: port.parse().map_err(|_| bad())?,
            }
        }
        Some(("relay", command)) => Reach::Relay {
            command: command.to_string(),
        },
        _ => return Err(bad()),
    })
}

/// `serve --sweeper-process`: sweep one fabric and hand the pages over on stdout until a
/// stop signal comes or `serve` is gone.
fn run_sweeper_process(g: &Global, a: &Args) -> Result<ExitCode> {
    use std::os::fd::FromRawFd;
    // The stop is serve's to order; a second signal must not cut the clean close short.
    signals::install(signals::STOP_SIGNALS, signals::Second::Wait);
    let planned = Planned {
        name: a.sweeper_fabric.clone().unwrap_or_default(),
        reach: parse_reach(g, a.sweeper_reach.as_deref().unwrap_or("default"))?,
    };
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
    let finished = Arc::new(AtomicBool::new(false));
    let (wake, sleeper) = mpsc::channel::<()>();
    let watcher = {
        let stop = stop.clone();
        let finished = finished.clone();
        let limit = stop_limit(g);
        // SAFETY: getppid has no preconditions.
        let parent = unsafe { libc::getppid() };
        std::thread::Builder::new()
            .name("stop-watcher".into())
            .spawn(move || {
                let asked = loop {
                    if stop.is_cancelled() {
                        break false;
                    }
                    // SAFETY: as above.
                    let orphaned = unsafe { libc::getppid() } != parent;
                    if signals::received().is_some() || orphaned {
                        break true;
                    }
                    std::thread::sleep(STOP_POLL);
                };
                stop.cancel();
                drop(wake);
                if asked {
                    end_if_stuck(&finished, limit);
                }
            })?
    };
    let name = planned.name.clone();
    let opener = g.clone();
    let open: ibscope_exporter::sweeper::OpenFabric = Box::new(move |stop| {
        let opened = crate::fabric_set::open_one_until(&opener, &planned, stop)?;
        Ok((opened.id, opened.engine))
    });
    let sweeper = SweeperProcess {
        name,
        names: crate::fabric::names(g)?,
        thresholds: crate::fabric::thresholds(g, None)?,
        filter: PortFilter {
            switches_only: a.switches_only,
            active_only: a.active_only,
        },
        counters: a.counters.names(),
        interval: Duration::from_secs_f64(a.interval),
        rediscover_every: a.rediscover_every,
        send_fabric: a.sweeper_planes,
        stop: stop.clone(),
        out: Box::new(std::io::BufWriter::new(out)),
        scrape_errors: HashMap::new(),
        sweeps: 0,
        discoveries: 0,
        pieces: PieceCache::default(),
    };
    let closed = sweeper.run(open, sleeper);
    finished.store(true, Ordering::SeqCst);
    stop.cancel();
    let _ = watcher.join();
    Ok(ExitCode::from(if closed { exit::OK } else { exit::ERROR }))
}

/// A sweeper process asked to stop (a signal, or `serve` gone) stops within one MAD
/// timeout, except where no stop reaches: the simulator's shim, opening a port while its
/// ibsim is gone, waits for it in C, retrying forever. After as long as `serve` itself
/// would wait (which then kills it), the process ends itself: an orphan of a `serve` that
/// was killed has no one else to.
fn end_if_stuck(finished: &AtomicBool, limit: Duration) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if finished.load(Ordering::SeqCst) {
            return;
        }
        std::thread::sleep(STOP_POLL);
    }
    eprintln!(
        "ibscope serve: a sweeper process still not stopped {:.1} s after the stop; ending it",
        limit.as_secs_f64()
    );
    // SAFETY: _exit ends the process at once without running destructors, which is the
    // point: the stuck thread holds the shim's state.
    unsafe { libc::_exit(i32::from(exit::ERROR)) }
}

/// Wait for a stop signal, announcing `url` once a sweeper process opened its port. An
/// error when the one fabric's port could not be opened at start, or with several, when
/// none of them could.
fn wait_for_stop(events: &mpsc::Receiver<Event>, pages: &Pages, url: &str) -> Result<i32> {
    let mut announced = false;
    let mut not_opened: Vec<String> = Vec::new();
    loop {
        if let Some(signal) = signals::received() {
            return Ok(signal);
        }
        match events.recv_timeout(STOP_POLL) {
            Ok(Event::Opened { slot, port }) => {
                tracing::info!(slot, "management port {port} open");
                if !announced {
                    eprintln!("ibscope serve: listening on {url}");
                    announced = true;
                }
            }
            Ok(Event::NotOpened { error, .. }) if !pages.multi => return Err(error),
            Ok(Event::NotOpened { slot, error }) => {
                let line = crate::fabric_set::failure_line(&pages.slots[slot].name(), &error);
                eprintln!(
                    "ibscope serve: {line}; trying again in {} s, then less often",
                    supervisor::REOPEN_FIRST.as_secs()
                );
                not_opened.push(line);
                if !announced && not_opened.len() == pages.slots.len() {
                    bail!("no fabric could be opened: {}", not_opened.join("; "));
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // The supervisors end only after a stop: wait for the signal.
            Err(mpsc::RecvTimeoutError::Disconnected) => std::thread::sleep(STOP_POLL),
        }
    }
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

/// How long a sweeper process gets to stop once asked: the attempt in flight (the
/// cancelled engine sends no retry), the engine's drain of late replies (at most 1 s)
/// before it unregisters, a relay agent's exit (at most 2 s), a render already under way,
/// and its exit. Generous: the engine's own retries would fit too.
fn stop_limit(g: &Global) -> Duration {
    let engine = g.engine_config();
    engine.timeout * (engine.retries + 1) + Duration::from_secs(4)
}

/// How often the main thread looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

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
