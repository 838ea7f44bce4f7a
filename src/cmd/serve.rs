//! `ibscope serve`: a Prometheus exporter. One background thread owns the management port
//! (discovery, then a counter sweep every --interval); after each sweep it renders the
//! whole exposition text into a shared cache. HTTP threads answer from that cache only, so a
//! scrape never waits on the fabric and never sends a MAD.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{Cursor, Read};
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::sync::{mpsc, Arc, RwLock};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use ibscope_mad::engine::{Engine, Request};
use ibscope_topo::counters::{self, CounterTarget, Sample};
use ibscope_topo::discover::DiscoverOptions;
use ibscope_topo::escape::for_prometheus_label;
use ibscope_topo::health::{self, HealthOptions};
use ibscope_topo::model::{phys_state, port_state};
use ibscope_topo::namemap::{display_name, NameMap};
use ibscope_topo::{End, Fabric, NodeKind};

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
/// Listens on loopback only unless --allow-remote is given: the metrics name every node
/// and link of the fabric and there is no authentication or TLS, so exposing them beyond
/// this host is a decision to make explicitly (or put a reverse proxy in front).
///
/// Examples:
///   ibscope serve
///   ibscope serve --listen 127.0.0.1:9315 --interval 30 --switches-only
///   ibscope serve --listen 0.0.0.0:9315 --allow-remote
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Address to listen on (host:port). Must be loopback unless --allow-remote.
    #[arg(long, default_value = "127.0.0.1:9315", value_name = "ADDR")]
    pub listen: String,
    /// Seconds between counter sweeps.
    #[arg(long, default_value_t = 10.0, value_name = "S")]
    pub interval: f64,
    /// Read the counters of switch ports only (fewer MADs; each CA port's traffic is
    /// also seen at its switch port).
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

/// The cache shared between the sweeper and the HTTP threads.
pub type Cache = Arc<RwLock<Option<Arc<Snapshot>>>>;

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

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    if g.topology.is_some() {
        bail!("serve reads the live fabric: --topology cannot be used here");
    }
    if !(a.interval.is_finite() && a.interval > 0.0) {
        bail!("--interval must be a positive number of seconds");
    }
    let addr = listen_addr(&a.listen, a.allow_remote)?;
    let names = crate::fabric::names(g)?;
    let server =
        tiny_http::Server::http(addr).map_err(|e| anyhow!("cannot listen on {addr}: {e}"))?;
    let cache: Cache = Arc::new(RwLock::new(None));
    let interval = Duration::from_secs_f64(a.interval);

    // The engine is opened inside the sweeper thread (it owns it); report the open result
    // back so a missing CA fails the command at once.
    let (opened_tx, opened_rx) = mpsc::channel::<Result<()>>();
    let sweeper = Sweeper {
        g: g.clone(),
        names,
        switches_only: a.switches_only,
        interval,
        rediscover_every: a.rediscover_every,
        cache: cache.clone(),
        scrape_errors: HashMap::new(),
        sweeps: 0,
        discoveries: 0,
    };
    std::thread::Builder::new()
        .name("sweeper".into())
        .spawn(move || sweeper.run(opened_tx))?;
    match opened_rx.recv() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(e),
        Err(_) => bail!("the sweeper thread ended before opening the port"),
    }
    eprintln!("ibscope serve: listening on http://{addr}/metrics");

    let server = Arc::new(server);
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
                        let _ = answer(req, &cache, max_age);
                    }
                })?,
        );
    }
    for w in workers {
        let _ = w.join();
    }
    Ok(ExitCode::from(exit::OK))
}

/// A snapshot's text as the body of a response without copying it.
struct SharedText(Arc<Snapshot>, bool);

impl AsRef<[u8]> for SharedText {
    fn as_ref(&self) -> &[u8] {
        if self.1 {
            &self.0.gzip
        } else {
            self.0.text.as_bytes()
        }
    }
}

/// Fast gzip: the page is rebuilt every sweep, so speed matters more than ratio.
pub fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
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

fn answer(req: tiny_http::Request, cache: &Cache, max_age: Duration) -> std::io::Result<()> {
    if *req.method() != tiny_http::Method::Get {
        let r =
            text_response(405, "only GET is served\n".into()).with_header(header("Allow", "GET"));
        return req.respond(r);
    }
    let path = req.url().split('?').next().unwrap_or("").to_string();
    let snapshot = cache.read().map(|c| c.clone()).unwrap_or(None);
    match path.as_str() {
        "/metrics" => {
            let Some(snap) = snapshot else {
                return req.respond(text_response(
                    503,
                    "no sweep finished yet (discovery in progress)\n".into(),
                ));
            };
            let age = snap.finished.elapsed().as_secs_f64();
            let tail = format!(
                "# HELP ibscope_sweep_age_seconds Seconds since the last sweep finished.\n\
                 # TYPE ibscope_sweep_age_seconds gauge\n\
                 ibscope_sweep_age_seconds {age:.3}\n"
            );
            let zipped = accepts_gzip(&req);
            let mut headers = vec![header(
                "Content-Type",
                "text/plain; version=0.0.4; charset=utf-8",
            )];
            // The cached page is compressed once per sweep; the small age family is a
            // second gzip member (RFC 1952 allows concatenated members).
            let tail = if zipped {
                headers.push(header("Content-Encoding", "gzip"));
                gzip(tail.as_bytes())
            } else {
                tail.into_bytes()
            };
            let shared = SharedText(snap, zipped);
            let len = shared.as_ref().len() + tail.len();
            let body = Cursor::new(shared).chain(Cursor::new(tail));
            let r = tiny_http::Response::new(
                tiny_http::StatusCode(200),
                headers,
                body,
                Some(len),
                None,
            );
            req.respond(r)
        }
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
            req.respond(text_response(status, body))
        }
        _ => req.respond(text_response(
            404,
            "not found: try /metrics or /healthz\n".into(),
        )),
    }
}

/// Cumulative per-node query failures.
#[derive(Debug, Default, Clone, Copy)]
struct NodeErrors {
    errors: u64,
    timeouts: u64,
}

struct Sweeper {
    g: Global,
    names: Option<NameMap>,
    switches_only: bool,
    interval: Duration,
    rediscover_every: u64,
    cache: Cache,
    /// By node GUID, kept across rediscoveries.
    scrape_errors: HashMap<u64, NodeErrors>,
    sweeps: u64,
    discoveries: u64,
}

/// The discovered fabric and what is derived from it once per discovery.
struct Discovered {
    fabric: Fabric,
    targets: Vec<CounterTarget>,
    duration: Duration,
}

impl Sweeper {
    fn run(mut self, opened: mpsc::Sender<Result<()>>) {
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
        let mut current: Option<Discovered> = None;
        let mut previous: Option<Sample> = None;
        let mut since_discovery = 0u64;
        loop {
            let started = Instant::now();
            if current.is_none() {
                current = Some(self.discover(&mut engine));
                previous = None;
                since_discovery = 0;
            }
            let d = current.as_ref().expect("discovered above");
            let sample = counters::sweep(&mut engine, &d.fabric, &d.targets, self.names.as_ref());
            self.sweeps += 1;
            since_discovery += 1;
            let failure = self.account(&sample, d);
            let text = self.render(d, &sample);
            let gzip = gzip(text.as_bytes());
            let snap = Snapshot {
                gzip,
                text,
                sweep_unix: sample.time_ms as f64 / 1000.0,
                finished: Instant::now(),
                failure,
            };
            if let Ok(mut c) = self.cache.write() {
                *c = Some(Arc::new(snap));
            }
            let states_moved = port_states_changed(&mut engine, &d.fabric);
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
            std::thread::sleep(self.interval.saturating_sub(started.elapsed()));
        }
    }

    fn discover(&mut self, engine: &mut Engine) -> Discovered {
        let t = Instant::now();
        let fabric = crate::fabric::discover_live(engine, DiscoverOptions::default());
        self.discoveries += 1;
        let mut targets = counters::targets(&fabric, None, None);
        if self.switches_only {
            targets.retain(|t| fabric.node(t.node).is_switch());
        }
        Discovered {
            fabric,
            targets,
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

    fn render(&self, d: &Discovered, sample: &Sample) -> String {
        render(
            &d.fabric,
            self.names.as_ref(),
            sample,
            &RenderStats {
                switches_only: self.switches_only,
                sweeps: self.sweeps,
                discoveries: self.discoveries,
                discovery_seconds: d.duration.as_secs_f64(),
                scrape_errors: &self.scrape_errors,
            },
        )
    }
}

/// Whether any switch port's logical state differs from the one discovery recorded: one
/// PortInfo per switch port (1..N) per sweep, over the discovery's directed routes. Covers
/// links going down and coming up; a back-to-back CA link is seen only through its
/// counters. (ibsim changes neither SwitchInfo.PortStateChange nor LinkDownedCounter on
/// Unlink, so this is the signal that works everywhere.)
fn port_states_changed(engine: &mut Engine, fabric: &Fabric) -> bool {
    use ibscope_mad::attr::PortInfo;
    use ibscope_mad::header::attr;
    use ibscope_mad::smp::{DrPath, SmpRoute};
    use ibscope_topo::discover::SmpExecutor;
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
                Request::smp_get(&route, attr::PORT_INFO, u32::from(p.number)),
            ));
        }
    }
    let mut changed = false;
    engine.execute(batch, &mut |known, result, _| {
        if let Ok(Ok(info)) = result.map(|r| PortInfo::decode(r.smp_data())) {
            if info.port_state != known {
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
    switches_only: bool,
    sweeps: u64,
    discoveries: u64,
    discovery_seconds: f64,
    scrape_errors: &'a HashMap<u64, NodeErrors>,
}

/// Counter metric names are the same as `ibscope counters --format prom` writes.
pub use super::counters::metric_name;

/// One metric family: HELP, TYPE, then its samples, together.
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, String)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, value) in samples {
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {value}");
        } else {
            let _ = writeln!(out, "{name}{{{labels}}} {value}");
        }
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
pub fn render(
    fabric: &Fabric,
    names: Option<&NameMap>,
    sample: &Sample,
    stats: &RenderStats<'_>,
) -> String {
    let mut out = String::with_capacity(256 * sample.ports.len() * 24 + 4096);

    // Ports described by the model: every switch port 1..N and every CA/router port.
    let mut port_ends: Vec<End> = Vec::new();
    for (id, node) in fabric.nodes() {
        if stats.switches_only && !node.is_switch() {
            continue;
        }
        for p in &node.ports {
            if node.is_switch() && p.number == 0 {
                continue;
            }
            port_ends.push(End {
                node: id,
                port: p.number,
            });
        }
    }
    let mut labels: HashMap<(u64, u8), String> = HashMap::new();
    for &end in &port_ends {
        labels.insert(
            (fabric.node(end.node).guid, end.port),
            port_labels(fabric, names, end),
        );
    }
    let label_of = |guid: u64, end: Option<End>, port: u8| -> String {
        if let Some(l) = labels.get(&(guid, port)) {
            return l.clone();
        }
        match end {
            Some(e) => port_labels(fabric, names, e),
            None => format!("node_guid=\"{guid:#018x}\",port=\"{port}\""),
        }
    };

    // Counters, one family each, in `counters --format prom` naming.
    let sample_labels: Vec<String> = sample
        .ports
        .iter()
        .map(|p| {
            let end = fabric.node_by_guid(p.at.node_guid).map(|n| End {
                node: n,
                port: p.at.port,
            });
            label_of(p.at.node_guid, end, p.at.port)
        })
        .collect();
    for name in counters::PORT_COUNTER_NAMES
        .iter()
        .chain(counters::EXTENDED_ONLY.iter())
    {
        let metric = metric_name(name);
        let unit = if counters::is_data_counter(name) {
            " in bytes"
        } else {
            ""
        };
        let samples: Vec<(String, String)> = sample
            .ports
            .iter()
            .zip(&sample_labels)
            .filter_map(|(p, l)| p.value(name).map(|v| (l.clone(), v.to_string())))
            .collect();
        family(
            &mut out,
            &metric,
            "counter",
            &format!("IB {name}{unit} (PMA; 64-bit PortCountersExtended where implemented)."),
            &samples,
        );
    }
    let saturated: Vec<(String, String)> = sample
        .ports
        .iter()
        .zip(&sample_labels)
        .filter(|(p, _)| p.counters.is_some())
        .map(|(p, l)| {
            let n = p.saturated.iter().filter(|s| p.is_saturated(s)).count();
            (l.clone(), n.to_string())
        })
        .collect();
    family(
        &mut out,
        "ibscope_port_saturated_counters",
        "gauge",
        "Counters of the port stuck at their maximum without a 64-bit replacement.",
        &saturated,
    );

    // Link facts from the last discovery.
    let port_of = |e: &End| fabric.node(e.node).port(e.port);
    let collect = |f: &dyn Fn(&ibscope_topo::Port) -> Option<String>| -> Vec<(String, String)> {
        port_ends
            .iter()
            .filter_map(|e| {
                let p = port_of(e)?;
                let v = f(p)?;
                Some((labels[&(fabric.node(e.node).guid, e.port)].clone(), v))
            })
            .collect()
    };
    family(
        &mut out,
        "ibscope_port_state",
        "gauge",
        "PortState (1 Down, 2 Initialize, 3 Armed, 4 Active; 0 unknown).",
        &collect(&|p| Some(p.state.to_string())),
    );
    family(
        &mut out,
        "ibscope_port_phys_state",
        "gauge",
        "PortPhysicalState (2 Polling, 3 Disabled, 5 LinkUp, ...; 0 unknown).",
        &collect(&|p| Some(p.phys_state.to_string())),
    );
    family(
        &mut out,
        "ibscope_port_active",
        "gauge",
        "1 if the port is Active, else 0.",
        &collect(&|p| Some(u8::from(p.state == port_state::ACTIVE).to_string())),
    );
    family(
        &mut out,
        "ibscope_port_link_up",
        "gauge",
        "1 if the port is physically LinkUp, else 0.",
        &collect(&|p| Some(u8::from(p.phys_state == phys_state::LINK_UP).to_string())),
    );
    family(
        &mut out,
        "ibscope_port_width_lanes",
        "gauge",
        "Active link width in lanes (ports with a link only).",
        &collect(&|p| p.width_active.map(|w| w.lanes().to_string())),
    );
    family(
        &mut out,
        "ibscope_port_speed_gbps_per_lane",
        "gauge",
        "Active link speed: signalling rate of one lane in Gb/s.",
        &collect(&|p| p.speed_active.map(|s| s.lane_gbps().to_string())),
    );
    family(
        &mut out,
        "ibscope_port_data_rate_gbps",
        "gauge",
        "Active data rate of the link in Gb/s (lanes x lane data rate after encoding).",
        &collect(&|p| {
            let (w, s) = (p.width_active?, p.speed_active?);
            Some((f64::from(w.lanes()) * s.lane_data_gbps()).to_string())
        }),
    );

    // Degraded flag of both ends of every link (healthy ones as 0).
    let report = health::assess(fabric, names, &HealthOptions::default());
    let mut degraded: Vec<(String, String)> = Vec::new();
    for link in &report.links {
        let value = u8::from(link.degraded).to_string();
        for end in [&link.a, &link.b] {
            if let Some(l) = labels.get(&(end.at.node_guid, end.at.port)) {
                degraded.push((l.clone(), value.clone()));
            }
        }
    }
    family(
        &mut out,
        "ibscope_port_degraded",
        "gauge",
        "1 if the port's link runs below what both ends could do or below the fabric norm.",
        &degraded,
    );

    // Nodes.
    let mut info = Vec::new();
    let mut errors = Vec::new();
    let mut timeouts = Vec::new();
    for (_, node) in fabric.nodes() {
        let base = node_labels(node.guid, display_name(node, names), node.kind);
        info.push((
            format!(
                "{base},description=\"{}\",lid=\"{}\",num_ports=\"{}\",vendor_id=\"{:#08x}\",device_id=\"{:#06x}\",system_image_guid=\"{:#018x}\"",
                for_prometheus_label(&node.description),
                node.lid().unwrap_or(0),
                node.num_ports,
                node.vendor_id,
                node.device_id,
                node.system_image_guid
            ),
            "1".to_string(),
        ));
        let e = stats
            .scrape_errors
            .get(&node.guid)
            .copied()
            .unwrap_or_default();
        errors.push((base.clone(), e.errors.to_string()));
        timeouts.push((base, e.timeouts.to_string()));
    }
    family(
        &mut out,
        "ibscope_node_info",
        "gauge",
        "One per discovered node; its facts are labels.",
        &info,
    );
    family(
        &mut out,
        "ibscope_node_scrape_errors_total",
        "counter",
        "PMA queries of this node that failed (timeouts included), since the exporter started.",
        &errors,
    );
    family(
        &mut out,
        "ibscope_node_scrape_timeouts_total",
        "counter",
        "PMA queries of this node that got no reply after every retry, since start.",
        &timeouts,
    );

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
}
