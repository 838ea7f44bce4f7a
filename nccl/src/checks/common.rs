//! What the log's rules share: the evidence of a finding, the job's network connections
//! and GPUs per host, a process's network.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ibscope_topo::findings::{Evidence, Finding, FindingKind};

use crate::log::{Connection, NcclLog, NetDevice, Place, Process, ProcessId, Rank, Transport};

/// At most this many lines are cited per finding.
const CITED: usize = 8;

/// A finding about `host` (when one), citing `at`.
pub(crate) fn finding(
    log: &NcclLog,
    kind: FindingKind,
    message: String,
    host: Option<&str>,
    at: impl IntoIterator<Item = Place>,
) -> Finding {
    let mut f = Finding::new(kind, message);
    f.host = host.map(str::to_string);
    f.evidence = cite(log, at);
    f
}

/// The lines of `at`, in file order, each once, at most [`CITED`].
pub(crate) fn cite(log: &NcclLog, at: impl IntoIterator<Item = Place>) -> Vec<Evidence> {
    let places: BTreeSet<Place> = at.into_iter().filter(|p| p.line > 0).collect();
    places
        .into_iter()
        .take(CITED)
        .map(|p| log.evidence(p))
        .collect()
}

/// `1, 3, 5` (at most 8, then `...`).
pub(crate) fn list<T: ToString>(items: impl IntoIterator<Item = T>) -> String {
    let mut s: Vec<String> = Vec::new();
    let mut more = false;
    for (i, x) in items.into_iter().enumerate() {
        if i == 8 {
            more = true;
            break;
        }
        s.push(x.to_string());
    }
    if more {
        s.push("...".into());
    }
    s.join(", ")
}

/// GPUs of the job on each host (CUDA devices of its ranks).
pub(crate) fn gpus_per_host(log: &NcclLog) -> BTreeMap<&str, BTreeSet<u32>> {
    let mut out: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
    for r in log.ranks.values() {
        out.entry(r.process.host.as_str())
            .or_default()
            .insert(r.cuda_dev);
    }
    out
}

/// The rank whose GPU memory a network connection reads or writes: its PXN proxy's when
/// proxied (the data crosses NVLink to the GPU beside the HCA), else its own.
pub(crate) fn gpu_rank(c: &Connection) -> u32 {
    match c.transport {
        Transport::Net { proxy: Some(p), .. } => p,
        _ => c.own_rank(),
    }
}

/// The HCAs a host's processes list (`NET/IB : Using`): the longest list of them.
pub(crate) fn host_devices<'a>(index: &Index<'a>, host: &str) -> &'a [NetDevice] {
    index
        .on(host)
        .iter()
        .map(|(_, p)| p.net_devices.as_slice())
        .max_by_key(|d| d.len())
        .unwrap_or_default()
}

/// The hosts of the job: those its ranks and processes name, each once.
pub(crate) fn hosts(log: &NcclLog) -> BTreeSet<&str> {
    log.processes
        .keys()
        .map(|p| p.host.as_str())
        .chain(log.ranks.values().map(|r| r.process.host.as_str()))
        .collect()
}

/// What the rules look up, built once for all of them: each process's connection lines and
/// ranks, each host's processes.
pub struct Index<'a> {
    connections: HashMap<&'a ProcessId, Vec<&'a Connection>>,
    /// Network connections with their own rank's HCA.
    net: Vec<(&'a Connection, &'a NetDevice)>,
    ranks: HashMap<&'a ProcessId, Vec<&'a Rank>>,
    hosts: BTreeMap<&'a str, Vec<(&'a ProcessId, &'a Process)>>,
}

impl<'a> Index<'a> {
    pub fn new(log: &'a NcclLog) -> Index<'a> {
        let mut connections: HashMap<&ProcessId, Vec<&Connection>> = HashMap::new();
        for c in &log.connections {
            connections.entry(&c.printed_by).or_default().push(c);
        }
        let mut ranks: HashMap<&ProcessId, Vec<&Rank>> = HashMap::new();
        for r in log.ranks.values() {
            ranks.entry(&r.process).or_default().push(r);
        }
        let mut hosts: BTreeMap<&str, Vec<(&ProcessId, &Process)>> = BTreeMap::new();
        let mut net = Vec::new();
        for (id, p) in &log.processes {
            hosts.entry(id.host.as_str()).or_default().push((id, p));
            for c in connections.get(id).into_iter().flatten() {
                if let Transport::Net { device, .. } = c.transport {
                    if let Some(d) = p.net_devices.iter().find(|d| d.index == device) {
                        net.push((*c, d));
                    }
                }
            }
        }
        Index {
            connections,
            net,
            ranks,
            hosts,
        }
    }
    /// The connections `id` printed.
    pub fn of(&self, id: &ProcessId) -> &[&'a Connection] {
        self.connections.get(id).map_or(&[], Vec::as_slice)
    }
    /// The network connections of the log with their own rank's host and HCA.
    pub fn net_ends(&self) -> impl Iterator<Item = (&'a Connection, &'a str, &'a NetDevice)> + '_ {
        self.net
            .iter()
            .map(|(c, d)| (*c, c.printed_by.host.as_str(), *d))
    }
    /// Whether `id` printed a network connection.
    pub fn has_net(&self, id: &ProcessId) -> bool {
        self.of(id)
            .iter()
            .any(|c| matches!(c.transport, Transport::Net { .. }))
    }
    /// The ranks process `id` runs.
    pub fn ranks_of(&self, id: &ProcessId) -> &[&'a Rank] {
        self.ranks.get(id).map_or(&[], Vec::as_slice)
    }
    /// The processes on `host`.
    pub fn on(&self, host: &str) -> &[(&'a ProcessId, &'a Process)] {
        self.hosts.get(host).map_or(&[], Vec::as_slice)
    }
}
