//! `ibscope serve`: its arguments, which fabrics it serves and how each one's port is
//! opened, and one call to the exporter (the `ibscope-exporter` crate: a sweeper thread
//! per fabric keeps that fabric's page in memory and reopens its port when it is lost;
//! HTTP answers from memory only, so a scrape never waits on a fabric).

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Result};
use ibscope_exporter::server::{self, HostPage, Serve, StopSignals};
use ibscope_exporter::sweeper::{FabricToServe, OpenFabric, SweepSettings};
use ibscope_mad::engine::TransportError;
use ibscope_mad::relay::AgentCommand;
use ibscope_mad::runtime_dir::RuntimeDir;
use ibscope_topo::export::prometheus::PortFilter;
use ibscope_topo::journal::JournalFile;

use crate::cli::{exit, Global};
use crate::fabric_set::{FabricToOpen, Reach};
use crate::settings::ServeSettings;
use crate::signals;

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
/// Stops on SIGTERM, SIGINT or SIGHUP: stops accepting, the sweepers abandon their sweeps
/// (a MAD in flight gets its timeout, no retry) and close the management ports, and serve
/// exits 0 with one line on stderr. A second signal exits at once (code 1).
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
    /// The `[serve]` keys' flags; what is in force is `g.serve`.
    #[command(flatten)]
    pub settings: ServeSettings,
    /// HTTP worker threads.
    #[arg(long, default_value_t = 4, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub http_threads: u32,
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

/// The end of `serve --help`: what the page holds and how to trim it.
const AFTER_HELP: &str = "\
Page size: per port 21 counter series, a saturation gauge and up to 8 link gauges; per
node 3 series. --counters, --active-only and --switches-only trim it (docs/exporter.md).";

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    let s = &g.serve;
    // Read once: a bad file fails the command at once.
    let names = crate::fabric::names(g)?;
    let thresholds = crate::fabric::thresholds(g, None)?;
    let selected = if a.no_fabric {
        Vec::new()
    } else {
        crate::fabric_set::selected(g)?
    };
    signals::install(signals::STOP_SIGNALS, signals::Second::Exit);
    // The agents run there; removed when serve returns, after they have exited.
    let agents_dir = RuntimeDir::create("serve")?;
    let sweep = SweepSettings {
        name: String::new(),
        names,
        thresholds,
        filter: PortFilter {
            switches_only: s.switches_only,
            active_only: s.active_only,
        },
        counters: s.counters.names(),
        interval: Duration::from_secs_f64(s.interval),
        rediscover_every: s.rediscover_every,
        journal: s.journal.clone().map(JournalFile::new),
    };
    let fabrics = selected
        .into_iter()
        .map(|p| {
            Ok(FabricToServe {
                settings: SweepSettings {
                    name: slot_name(g, &p),
                    ..sweep.clone()
                },
                open: opener(g, p, agents_dir.path())?,
            })
        })
        .collect::<Result<_>>()?;
    // Every device of the host, whichever port -C gives the fabric sweeps.
    let roce = g.roce.clone();
    let read_host = move || Ok(ibscope_host::prometheus::read_page(roce.clone())?);
    let host_page = a.host.then(|| Box::new(read_host) as HostPage);
    let closed = server::serve(
        Serve {
            listen: s.listen.clone(),
            allow_remote: s.allow_remote,
            web_config: s.web_config.clone(),
            http_threads: a.http_threads,
            interval: Duration::from_secs_f64(s.interval),
            fabrics,
            multi: crate::fabric_set::is_multi(g.ca.as_deref()),
            host_page,
            stop_limit: stop_limit(g),
        },
        &StopSignals {
            received: &signals::received,
            block_in_new_threads: &signals::block_stop_signals,
            name: signals::name,
        },
    )?;
    Ok(ExitCode::from(if closed {
        exit::OK
    } else {
        exit::FINDINGS
    }))
}

/// A fabric's name before its sweeper opened it: the selected name, or for the
/// one fabric of -C/-P what names it (its real name, CA:port, comes with the port).
fn slot_name(g: &Global, p: &FabricToOpen) -> String {
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
/// `ibscope agent` of its own (the relay, run in `dir`, where the simulator's shim keeps
/// its files), so that a port lost with its transport is reopened by a new agent process;
/// a fabric the config reaches through a command, through that.
fn opener(g: &Global, selected: FabricToOpen, dir: &Path) -> Result<OpenFabric> {
    let (ca, port) = match &selected.reach {
        Reach::Relay { .. } => {
            let g = g.clone();
            return Ok(Arc::new(move |stop| {
                let o = crate::fabric_set::open_one_until(&g, &selected, stop)?;
                Ok((o.id, o.engine))
            }));
        }
        Reach::Local { ca, port } => (Some(ca.clone()), Some(*port)),
        Reach::Default { ca, port } => (ca.clone(), *port),
    };
    let exe = std::env::current_exe().map_err(|e| anyhow!("locating ibscope: {e}"))?;
    let mut argv: Vec<OsString> = vec![exe.into()];
    if let Some(ca) = ca {
        argv.extend(["-C".into(), ca.into()]);
    }
    if let Some(port) = port {
        argv.extend(["-P".into(), port.to_string().into()]);
    }
    argv.push("agent".into());
    let agent = AgentCommand::Program {
        argv,
        dir: dir.to_path_buf(),
    };
    let g = g.clone();
    Ok(Arc::new(move |stop| {
        match crate::fabric_set::open_by_agent_until(&g, &selected, &agent, stop) {
            Ok(o) => Ok((o.id, o.engine)),
            // Its command line says nothing to the operator: the reason alone.
            Err(e) => Err(match e.downcast::<TransportError>() {
                Ok(TransportError::Relay { reason, .. }) => anyhow!("{reason}"),
                Ok(other) => anyhow::Error::new(other),
                Err(e) => e,
            }),
        }
    }))
}

/// How long a sweeper gets to stop once asked: the attempt in flight (the cancelled engine
/// sends no retry), its agent's exit (at most 1 s), a render already under way. Generous:
/// the engine's own retries would fit too.
fn stop_limit(g: &Global) -> Duration {
    let engine = g.engine_config();
    engine.timeout * (engine.retries + 1) + Duration::from_secs(4)
}
