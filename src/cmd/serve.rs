//! `ibscope serve`: its arguments, which fabrics it serves and how each one's port is
//! opened, and its stop. The exporter itself is the `ibscope-exporter` crate: a sweeper
//! thread per fabric (discovery, then a counter sweep every --interval) keeps that
//! fabric's page in memory and reopens its port when it is lost; HTTP answers from
//! memory only, so a scrape never waits on a fabric.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use ibscope_mad::engine::TransportError;
use ibscope_topo::counters;
use ibscope_topo::export::prometheus::PortFilter;

use crate::cli::{exit, Global};
use crate::fabric_set::{Planned, Reach};
use crate::signals;
use ibscope_exporter::http::listen_addr;
use ibscope_exporter::server::{self, Listen};
use ibscope_exporter::sweeper::{FabricToServe, OpenFabric, SweepSettings};
use ibscope_exporter::web;

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
///   /metrics?fabric=NAME  the same for one fabric (one scrape target per fabric).
///   /healthz   200 "ok" when every fabric answers and its last sweep succeeded and is
///              fresh (younger than 3 x --interval + 5 s), else 503 with the reason.
///   /          a page that lists the fabrics, their state and their pages.
///
/// A sweeper thread per fabric discovers the fabric, then sweeps the counters every
/// --interval seconds, and rediscovers when a sweep sees a topology change (a switch port
/// whose state differs from the discovered one: one PortInfo per switch port per sweep;
/// or a port whose LinkDownedCounter moved or whose PMA started or stopped answering),
/// and every --rediscover-every sweeps. Each sweep's page is compressed once and kept in
/// memory: a scrape never waits on the fabric.
///
/// When a fabric becomes unreachable (the HCA resets, the driver reloads, the umad device,
/// the relay agent or the simulator goes away) serve keeps answering: /metrics serves its
/// last good sample with ibscope_up 0 and ibscope_sample_stale 1, /healthz says 503 and
/// why. It reopens the port (a new agent process) 1 s after the loss, then backs off
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
/// Several fabrics (-C all, a list; see -C): one sweeper per fabric, each on its
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
    /// Append what changes between discoveries (links down and up, port state changes,
    /// width and speed downshifts) to this JSON Lines file, rotated at 16 MiB to FILE.1;
    /// `ibscope events` reads it and `check --journal` finds flapping links in it.
    #[arg(long, value_name = "FILE")]
    pub journal: Option<PathBuf>,
    /// Also export this host's RDMA side on the page of every fabric together: the
    /// ibscope_host_* families `ibscope host --prometheus` writes (versions, ports, every
    /// RDMA counter and RoCE pause statistic, the host check's findings, ready), read
    /// every --interval.
    #[arg(long)]
    pub host: bool,
    /// With --host: serve this host's page alone, no fabric (a RoCE compute node has no
    /// InfiniBand port to sweep).
    #[arg(long, requires = "host")]
    pub no_fabric: bool,
    #[command(flatten)]
    pub fabric: crate::cli::FabricArgs,
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
    if !(a.interval.is_finite() && a.interval > 0.0) {
        bail!("--interval must be a positive number of seconds");
    }
    let web = match &a.web_config {
        Some(path) => Some(web::WebConfig::load(path)?),
        None => None,
    };
    let tls_config = web.as_ref().and_then(|w| w.tls.clone());
    let scheme = if tls_config.is_some() {
        "https"
    } else {
        "http"
    };
    let auth = web.and_then(|w| w.auth).map(Arc::new);
    let addr = listen_addr(&a.listen, a.allow_remote || tls_config.is_some())?;
    // Read once: a bad file fails the command at once.
    let names = crate::fabric::names(g)?;
    let thresholds = crate::fabric::thresholds(g, None)?;
    let planned = if a.no_fabric {
        Vec::new()
    } else {
        crate::fabric_set::planned(g)?
    };
    signals::install(signals::STOP_SIGNALS, signals::Second::Exit);
    let state = crate::statedir::StateDir::create("serve")?;
    // Every thread started from here on (the HTTP runtime's, the sweepers') inherits it.
    signals::block_stop_signals(true);
    let multi = crate::fabric_set::is_multi(g.ca.as_deref());
    let settings = SweepSettings {
        name: String::new(),
        names,
        thresholds,
        filter: PortFilter {
            switches_only: a.switches_only,
            active_only: a.active_only,
        },
        counters: a.counters.names(),
        interval: Duration::from_secs_f64(a.interval),
        rediscover_every: a.rediscover_every,
        journal: a
            .journal
            .clone()
            .map(ibscope_topo::journal::JournalFile::new),
    };
    let fabrics: Result<Vec<FabricToServe>> = planned
        .into_iter()
        .map(|p| {
            Ok(FabricToServe {
                settings: SweepSettings {
                    name: slot_name(g, &p),
                    ..settings.clone()
                },
                open: opener(g, p, state.path())?,
            })
        })
        .collect();
    let listen = Listen {
        addr,
        tls: tls_config,
        auth,
        http_threads: a.http_threads,
        max_age: Duration::from_secs_f64(a.interval) * 3 + Duration::from_secs(5),
    };
    let started = fabrics.and_then(|fabrics| server::start(fabrics, listen, multi));
    signals::block_stop_signals(false);
    let (running, events) = started?;
    if a.host {
        signals::block_stop_signals(true);
        let spawned = spawn_host_reader(g, &running.pages, Duration::from_secs_f64(a.interval));
        signals::block_stop_signals(false);
        spawned?;
    }
    if a.no_fabric {
        // No sweeper opens a port to say so.
        eprintln!("ibscope serve: listening on {scheme}://{addr}/metrics (this host only)");
    }
    let why = server::wait_for_stop(
        &events,
        &running.pages,
        &format!("{scheme}://{addr}/metrics"),
        &signals::received,
    );
    let limit = stop_limit(g);
    let stopped = running.shut_down(limit);
    let code =
        why.map(|signal| report_stop(signal, stopped.sweeps, stopped.closed, stopped.took, limit));
    // Only now: the agents kept their files there until they exited.
    drop(state);
    code
}

/// `--host`: a thread that reads the host (sysfs, libibverbs, counters, the check) every
/// `interval` and puts its page beside the fabrics', until a stop signal.
fn spawn_host_reader(
    g: &Global,
    pages: &Arc<ibscope_exporter::slots::Pages>,
    interval: Duration,
) -> Result<()> {
    // Every device of the host, whichever port -C gives the fabric sweeps.
    let (pages, roce) = (Arc::clone(pages), g.roce.clone());
    let read = move || ibscope_host::prometheus::read_page(roce.clone());
    std::thread::Builder::new()
        .name("host".into())
        .spawn(move || loop {
            match read() {
                Ok(page) => pages.set_host_page(page),
                Err(e) => tracing::warn!("cannot read this host: {e:#}"),
            }
            let until = std::time::Instant::now() + interval;
            while std::time::Instant::now() < until {
                if signals::received().is_some() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })?;
    Ok(())
}

/// A fabric's name before its sweeper opened it: the planned name, or for the
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

/// How a fabric's sweeper opens its port, every time: a local port through an
/// `ibscope agent` of its own (the relay, run in serve's state directory, where the
/// simulator's shim keeps its files), so that a port lost with its transport is reopened
/// by a new agent process; a fabric the config reaches through a command, through that.
fn opener(g: &Global, planned: Planned, dir: &Path) -> Result<OpenFabric> {
    let (ca, port) = match &planned.reach {
        Reach::Relay { .. } => return Ok(open_through(g.clone(), planned, false)),
        Reach::Local { ca, port } => (Some(ca.as_str()), Some(*port)),
        Reach::Default { ca, port } => (ca.as_deref(), *port),
    };
    let exe = std::env::current_exe().map_err(|e| anyhow!("locating ibscope: {e}"))?;
    let mut command = format!(
        "cd {} && exec {}",
        shell_quoted(&dir.to_string_lossy()),
        shell_quoted(&exe.to_string_lossy())
    );
    if let Some(ca) = ca {
        command.push_str(&format!(" -C {}", shell_quoted(ca)));
    }
    if let Some(port) = port {
        command.push_str(&format!(" -P {port}"));
    }
    command.push_str(" agent");
    let relayed = Planned {
        name: planned.name,
        reach: Reach::Relay { command },
    };
    Ok(open_through(g.clone(), relayed, true))
}

/// Opening `relayed` (a fabric reached through an agent's command), every time.
/// `own_agent`: serve's own agent, whose command line says nothing to the operator: a
/// failure is said by its reason alone.
fn open_through(g: Global, relayed: Planned, own_agent: bool) -> OpenFabric {
    Arc::new(
        move |stop| match crate::fabric_set::open_one_until(&g, &relayed, stop) {
            Ok(o) => Ok((o.id, o.engine)),
            Err(e) if own_agent => Err(match e.downcast::<TransportError>() {
                Ok(TransportError::Relay { reason, .. }) => anyhow!("{reason}"),
                Ok(other) => anyhow::Error::new(other),
                Err(e) => e,
            }),
            Err(e) => Err(e),
        },
    )
}

/// `text` as one word for `sh`.
fn shell_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
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

/// How long a sweeper gets to stop once asked: the attempt in flight (the cancelled engine
/// sends no retry), its agent's exit (at most 1 s), a render already under way. Generous:
/// the engine's own retries would fit too.
fn stop_limit(g: &Global) -> Duration {
    let engine = g.engine_config();
    engine.timeout * (engine.retries + 1) + Duration::from_secs(4)
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
