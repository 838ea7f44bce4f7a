//! A job's network connections on the fabric: each `[send]` between servers goes from the
//! sender's HCA (its process's `NET/IB/k`) to the receiver's (the matching `[receive]`
//! line, else the HCA of the same name on the receiving server), and from the first HCA's
//! port along the forwarding tables to the second's LID. Every link crossed is listed with
//! the channels that cross it and the findings at either of its ends, so a slow job reads
//! as "ring channel 3 crosses leaf port 17, which counts symbol errors".

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use ibscope_topo::counters::{PortDelta, ERROR_COUNTERS};
use ibscope_topo::findings::Finding;
use ibscope_topo::hosts::Hosts;
use ibscope_topo::routing::{self, ChannelRef};
use ibscope_topo::{End, Fabric, PortKey, PortRef};

use crate::log::{Algorithm, ConnectionDirection, NcclLog, Transport};

/// One link the job's traffic crosses, in the direction it is crossed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CrossedLink {
    pub link: ChannelRef,
    /// Network connections (send lines) whose route crosses it.
    pub connections: usize,
    /// Ring channels and tree channels crossing it.
    pub rings: BTreeSet<u32>,
    pub trees: BTreeSet<u32>,
    /// One connection that crosses it, in words.
    pub example: String,
    /// Findings at either end.
    pub findings: Vec<Finding>,
    /// Error counters that rose at either end while the job's log was read (live, with an
    /// interval): `"node"[port] SymbolErrorCounter +120`.
    pub counter_rises: Vec<String>,
}

/// Where the job's traffic goes.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Placement {
    /// Network connections placed on routes.
    pub placed: usize,
    /// Connections that could not be, and why (the first 20 reasons).
    pub unplaced: usize,
    pub unplaced_reasons: Vec<String>,
    /// Links crossed: those with findings first, then the busiest.
    pub links: Vec<CrossedLink>,
}

/// Place every network `[send]` of `log` on `fabric`; `findings` are the fabric's,
/// `deltas` its counters' changes over an interval (empty when not read).
pub fn place(
    log: &NcclLog,
    fabric: &Fabric,
    hosts: &Hosts,
    findings: &[Finding],
    deltas: &[PortDelta],
) -> Placement {
    let mut receivers: HashMap<(Algorithm, u32, u32, u32), &str> = HashMap::new();
    for c in &log.connections {
        if c.direction == ConnectionDirection::Receive {
            if let Some(d) = log.net_device(c) {
                receivers.insert((c.pattern, c.channel, c.from, c.to), d.device.as_str());
            }
        }
    }
    let mut out = Placement::default();
    let mut links: BTreeMap<(PortKey, PortKey), CrossedLink> = BTreeMap::new();
    let mut routes: HashMap<(End, u16), Result<Vec<ChannelRef>, String>> = HashMap::new();
    let mut ends: HcaEnds = HashMap::new();
    let tracer = routing::Tracer::new(fabric);
    for c in &log.connections {
        if c.direction != ConnectionDirection::Send || !matches!(c.transport, Transport::Net { .. })
        {
            continue;
        }
        let placed = (|| -> Result<(Vec<ChannelRef>, String), String> {
            let from_dev = log.net_device(c).ok_or_else(|| {
                format!(
                    "{}: no NET/IB device list for its process",
                    c.printed_by.host
                )
            })?;
            let to = log
                .ranks
                .get(&c.to)
                .ok_or_else(|| format!("rank {} never says where it runs (no comm line)", c.to))?;
            let from_host = c.printed_by.host.as_str();
            let to_host = to.process.host.as_str();
            let to_dev = receivers
                .get(&(c.pattern, c.channel, c.from, c.to))
                .copied()
                .unwrap_or(from_dev.device.as_str());
            let (src, _) = cached(&mut ends, hosts, from_host, &from_dev.device, from_dev.port)?;
            let (_, dst_lid) = cached(&mut ends, hosts, to_host, to_dev, from_dev.port)?;
            let path = routes
                .entry((src, dst_lid))
                .or_insert_with(|| route(&tracer, hosts, src, dst_lid))
                .clone()?;
            let what = format!(
                "{} channel {}: rank {} ({from_host} {}) -> rank {} ({to_host} {to_dev})",
                pattern_name(c.pattern),
                c.channel,
                c.from,
                from_dev.device,
                c.to
            );
            Ok((path, what))
        })();
        match placed {
            Ok((path, what)) => {
                out.placed += 1;
                for link in path {
                    let e = links
                        .entry((link.from.key(), link.to.key()))
                        .or_insert_with(|| CrossedLink {
                            findings: findings_at(findings, &link),
                            counter_rises: rises_at(deltas, &link),
                            link,
                            connections: 0,
                            rings: BTreeSet::new(),
                            trees: BTreeSet::new(),
                            example: what.clone(),
                        });
                    e.connections += 1;
                    match c.pattern {
                        Algorithm::Ring => e.rings.insert(c.channel),
                        Algorithm::Tree => e.trees.insert(c.channel),
                    };
                }
            }
            Err(why) => {
                out.unplaced += 1;
                if out.unplaced_reasons.len() < 20 && !out.unplaced_reasons.contains(&why) {
                    out.unplaced_reasons.push(why);
                }
            }
        }
    }
    out.links = links.into_values().collect();
    out.links.sort_by_key(|l| {
        (
            l.findings.is_empty() && l.counter_rises.is_empty(),
            std::cmp::Reverse(l.connections),
        )
    });
    out
}

fn pattern_name(p: Algorithm) -> &'static str {
    match p {
        Algorithm::Ring => "ring",
        Algorithm::Tree => "tree",
    }
}

/// HCA ports looked up, by (host, device, port): their end and LID, or why not found.
type HcaEnds<'l> = HashMap<(&'l str, &'l str, u8), Result<(End, u16), String>>;

/// [`hca_end`], each HCA looked up once.
fn cached<'l>(
    ends: &mut HcaEnds<'l>,
    hosts: &Hosts,
    host: &'l str,
    device: &'l str,
    port: u8,
) -> Result<(End, u16), String> {
    ends.entry((host, device, port))
        .or_insert_with(|| hca_end(hosts, host, device, port))
        .clone()
}

/// The fabric port of HCA `device` (port `port`) of `host`, and its LID.
fn hca_end(hosts: &Hosts, host: &str, device: &str, port: u8) -> Result<(End, u16), String> {
    let i = hosts.find(host).ok_or_else(|| {
        format!("{host:?} is not in the fabric (no CA's NodeDescription names it)")
    })?;
    let h = &hosts.hosts()[i];
    h.hcas
        .iter()
        .find(|c| c.device.as_deref() == Some(device) && c.port == port)
        .or_else(|| h.hcas.iter().find(|c| c.device.as_deref() == Some(device)))
        .map(|c| (c.end(), c.lid))
        .ok_or_else(|| format!("{host} has no HCA {device:?} in the fabric"))
}

/// The links from `src` to `dst_lid`, each end named with its host and rail.
fn route(
    tracer: &routing::Tracer,
    hosts: &Hosts,
    src: End,
    dst_lid: u16,
) -> Result<Vec<ChannelRef>, String> {
    let path = tracer.trace(src, dst_lid).map_err(|e| e.to_string())?;
    let port = |h: &routing::Hop, port: Option<u8>| {
        let mut p = PortRef {
            node: h.node.clone(),
            port: port.unwrap_or(0),
            lid: 0,
            host: None,
            rail: None,
        };
        hosts.annotate(&mut p);
        p
    };
    Ok(path
        .hops
        .windows(2)
        .map(|w| ChannelRef {
            from: port(&w[0], w[0].out_port.or(Some(src.port))),
            to: port(&w[1], w[1].in_port),
        })
        .collect())
}

/// The error counters that rose at either end of `link`.
fn rises_at(deltas: &[PortDelta], link: &ChannelRef) -> Vec<String> {
    let ends = [link.from.key(), link.to.key()];
    deltas
        .iter()
        .filter(|d| ends.contains(&d.at.key()))
        .flat_map(|d| {
            d.counters
                .iter()
                .filter(|c| ERROR_COUNTERS.contains(&c.name))
                .filter_map(move |c| {
                    let rise = c.delta.filter(|n| *n > 0)?;
                    Some(format!(
                        "{}[{}] {} +{rise}",
                        d.at.node.name, d.at.port, c.name
                    ))
                })
        })
        .collect()
}

/// Findings at either end of `link`.
fn findings_at(findings: &[Finding], link: &ChannelRef) -> Vec<Finding> {
    let ends = [link.from.key(), link.to.key()];
    findings
        .iter()
        .filter(|f| {
            [&f.at, &f.remote]
                .into_iter()
                .flatten()
                .any(|p| ends.contains(&p.key()))
        })
        .cloned()
        .collect()
}
