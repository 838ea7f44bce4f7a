//! Hosts and rails: the fabric's channel adapters grouped into servers, each HCA port with
//! its rail and the leaf switch port it is cabled to.
//!
//! - A host is the CAs whose NodeDescription (or node-name-map name) names the same
//!   hostname (`"%h %d"`, see [`super::name`]); a CA whose description names no host
//!   joins the host of a named CA with its SystemImageGUID, else makes a host of its own
//!   SystemImageGUID (named by it).
//! - Not hosts: SHARP aggregation nodes ([`NodeKind::AggregationNode`]), routers, and a
//!   switch's own CA (its management HCA: it shares the switch's SystemImageGUID or
//!   GUID, or its NodeDescription).
//! - Every linked port of a host CA is an entry ([`Hca`]); a CA with no linked port (the
//!   local one, cut off) shows its first port.
//! - A leaf is a switch with host HCAs cabled to it; its rail is the rail of more than
//!   half of those HCAs (in a rail-optimised fabric all of them).

use std::collections::BTreeMap;

use ibscope_mad::attr::link::Rate;
use ibscope_mad::attr::{PhysState, PortState};
use ibscope_mad::codes::guid;
use serde::Serialize;

use super::name::{self, natural_cmp, Described, DeviceIndex, PciName};
use crate::model::refs::PortRef;
use crate::model::{End, Fabric, Node, NodeId, Port, PortKey};
use crate::namemap::{display_name, NameMap};

/// How a host's CAs were put together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Grouping {
    /// By the hostname in their NodeDescriptions (or node-name-map names).
    NodeDescription,
    /// By SystemImageGUID: their descriptions name no host.
    SystemImageGuid,
}

/// The leaf switch port an HCA is cabled to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeafPort {
    #[serde(skip)]
    pub node: NodeId,
    /// Display name (untrusted text).
    pub name: String,
    #[serde(with = "guid")]
    pub node_guid: u64,
    pub port: u8,
    /// The leaf's rail: that of more than half of the HCAs cabled to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rail: Option<u8>,
}

/// One port of a host's channel adapter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hca {
    #[serde(skip)]
    pub node: NodeId,
    #[serde(with = "guid")]
    pub node_guid: u64,
    #[serde(with = "guid")]
    pub system_image_guid: u64,
    /// The RDMA device name from the description (`mlx5_3`), when it names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rail: Option<u8>,
    pub port: u8,
    pub lid: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<PortState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phys_state: Option<PhysState>,
    /// The switch port at the far end of its link.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaf: Option<LeafPort>,
}

impl Hca {
    pub fn end(&self) -> End {
        End {
            node: self.node,
            port: self.port,
        }
    }
    pub fn key(&self) -> PortKey {
        PortKey {
            guid: self.node_guid,
            port: self.port,
        }
    }
    /// Active (a state not read, as in a topology file, counts: nothing says otherwise).
    pub fn is_up(&self) -> bool {
        self.state.map_or(true, |s| s == PortState::Active)
            && self.phys_state.map_or(true, |s| s == PhysState::LinkUp)
    }
    /// Cabled to a leaf of another rail.
    pub fn is_misaligned(&self) -> bool {
        match (self.rail, self.leaf.as_ref().and_then(|l| l.rail)) {
            (Some(own), Some(leaf)) => own != leaf,
            _ => false,
        }
    }
}

/// A server: its HCA ports, by rail.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Host {
    /// The hostname, or the SystemImageGUID's text for a host grouped by it (untrusted).
    pub name: String,
    pub grouped_by: Grouping,
    /// How its devices are named: their name without the index (`mlx5_`, `HCA-`), `pci`
    /// for PCI-location names; rails compare within one scheme.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    /// By rail (unknown last), then device and port.
    pub hcas: Vec<Hca>,
}

impl Host {
    /// The rails this host has an HCA on.
    pub fn rails(&self) -> impl Iterator<Item = u8> + '_ {
        let mut last = None;
        self.hcas.iter().filter_map(move |h| {
            let r = h.rail?;
            (last != Some(r)).then(|| {
                last = Some(r);
                r
            })
        })
    }
    /// The HCA ports on `rail`.
    pub fn on_rail(&self, rail: u8) -> impl Iterator<Item = &Hca> {
        self.hcas.iter().filter(move |h| h.rail == Some(rail))
    }
}

/// A switch with host HCAs cabled to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leaf {
    pub node: NodeId,
    pub rail: Option<u8>,
    /// HCA ports cabled to it, and those with a known rail.
    pub hcas: usize,
    pub with_rail: usize,
}

/// Every host of a fabric.
#[derive(Debug, Clone, Default)]
pub struct Hosts {
    hosts: Vec<Host>,
    /// CA node GUID -> host.
    by_guid: foldhash::HashMap<u64, usize>,
    /// Switch node -> its leaf entry.
    leaves: BTreeMap<NodeId, Leaf>,
}

/// A CA on its way into a host.
struct Member<'a> {
    id: NodeId,
    node: &'a Node,
    device: Option<&'a str>,
}

impl Hosts {
    /// Group the fabric's host CAs into hosts, with `names` (a node-name map) taken as
    /// descriptions where given.
    pub fn group(fabric: &Fabric, names: Option<&NameMap>) -> Hosts {
        let (named, unnamed) = members(fabric, names);
        let mut hosts: Vec<(String, Grouping, Vec<Member>)> = Vec::new();
        let mut by_name: foldhash::HashMap<&str, usize> = Default::default();
        let mut by_image: foldhash::HashMap<u64, usize> = Default::default();
        for (host, m) in named {
            let i = *by_name.entry(host).or_insert_with(|| {
                hosts.push((host.to_string(), Grouping::NodeDescription, Vec::new()));
                hosts.len() - 1
            });
            if m.node.system_image_guid != 0 {
                by_image.entry(m.node.system_image_guid).or_insert(i);
            }
            hosts[i].2.push(m);
        }
        for m in unnamed {
            let image = match m.node.system_image_guid {
                0 => m.node.guid,
                g => g,
            };
            let i = *by_image.entry(image).or_insert_with(|| {
                hosts.push((guid::text(image), Grouping::SystemImageGuid, Vec::new()));
                hosts.len() - 1
            });
            hosts[i].2.push(m);
        }
        let pci_rails = pci_rails(&hosts);
        let mut out: Vec<Host> = hosts
            .into_iter()
            .map(|(name, grouped_by, members)| {
                let scheme = scheme_of(&members);
                let hcas = members
                    .iter()
                    .flat_map(|m| hca_ports(fabric, names, m, &pci_rails))
                    .collect();
                Host {
                    name,
                    grouped_by,
                    scheme,
                    hcas,
                }
            })
            .collect();
        // Named servers first, then those known only by their SystemImageGUID.
        out.sort_by(|a, b| {
            (a.grouped_by == Grouping::SystemImageGuid)
                .cmp(&(b.grouped_by == Grouping::SystemImageGuid))
                .then_with(|| natural_cmp(&a.name, &b.name))
        });
        let mut hosts = Hosts {
            by_guid: Default::default(),
            leaves: BTreeMap::new(),
            hosts: out,
        };
        hosts.set_leaf_rails();
        for (i, h) in hosts.hosts.iter_mut().enumerate() {
            h.hcas.sort_by(|a, b| {
                (a.rail.is_none(), a.rail, &a.device, a.port).cmp(&(
                    b.rail.is_none(),
                    b.rail,
                    &b.device,
                    b.port,
                ))
            });
            for hca in &h.hcas {
                hosts.by_guid.insert(hca.node_guid, i);
            }
        }
        hosts
    }

    /// Count each leaf's HCAs by rail, give it the rail of more than half, and copy that
    /// rail into every HCA's [`LeafPort`].
    fn set_leaf_rails(&mut self) {
        let mut counts: BTreeMap<NodeId, (usize, BTreeMap<u8, usize>)> = BTreeMap::new();
        for hca in self.hosts.iter().flat_map(|h| &h.hcas) {
            if let Some(leaf) = &hca.leaf {
                let entry = counts.entry(leaf.node).or_default();
                entry.0 += 1;
                if let Some(r) = hca.rail {
                    *entry.1.entry(r).or_default() += 1;
                }
            }
        }
        for (node, (hcas, by_rail)) in counts {
            let with_rail: usize = by_rail.values().sum();
            let rail = by_rail
                .iter()
                .find(|(_, &n)| 2 * n > with_rail)
                .map(|(&r, _)| r);
            self.leaves.insert(
                node,
                Leaf {
                    node,
                    rail,
                    hcas,
                    with_rail,
                },
            );
        }
        for hca in self.hosts.iter_mut().flat_map(|h| h.hcas.iter_mut()) {
            if let Some(leaf) = hca.leaf.as_mut() {
                leaf.rail = self.leaves.get(&leaf.node).and_then(|l| l.rail);
            }
        }
    }

    /// Every host: named ones in natural order of their names, then those grouped by
    /// SystemImageGUID.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }
    pub fn len(&self) -> usize {
        self.hosts.len()
    }
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }
    /// Every switch with host HCAs cabled to it.
    pub fn leaves(&self) -> impl Iterator<Item = &Leaf> {
        self.leaves.values()
    }
    pub fn leaf(&self, node: NodeId) -> Option<&Leaf> {
        self.leaves.get(&node)
    }
    /// Every rail some HCA is on, ascending.
    pub fn rails(&self) -> Vec<u8> {
        let mut rails: Vec<u8> = self
            .hosts
            .iter()
            .flat_map(|h| h.hcas.iter().filter_map(|c| c.rail))
            .collect();
        rails.sort_unstable();
        rails.dedup();
        rails
    }

    /// The host named `name`: exactly, or by its short name (`gpu-1` finds
    /// `gpu-1.cluster.example`, and the other way round).
    pub fn find(&self, name: &str) -> Option<usize> {
        let short = |s: &str| s.split('.').next().unwrap_or(s).to_string();
        self.hosts.iter().position(|h| h.name == name).or_else(|| {
            let want = short(name);
            let mut hits = self
                .hosts
                .iter()
                .enumerate()
                .filter(|(_, h)| short(&h.name) == want)
                .map(|(i, _)| i);
            match (hits.next(), hits.next()) {
                (Some(i), None) => Some(i),
                _ => None,
            }
        })
    }

    /// The host of a CA node (by GUID).
    pub fn host_of(&self, node_guid: u64) -> Option<&Host> {
        self.by_guid.get(&node_guid).map(|&i| &self.hosts[i])
    }

    /// The host and HCA entry of a CA port.
    pub fn hca(&self, key: PortKey) -> Option<(&Host, &Hca)> {
        let host = self.host_of(key.guid)?;
        let hca = host.hcas.iter().find(|h| h.key() == key)?;
        Some((host, hca))
    }

    /// Host name and rail of a port of a host CA (any of its ports, linked or not).
    pub fn label(&self, key: PortKey) -> Option<(&str, Option<u8>)> {
        let host = self.host_of(key.guid)?;
        let rail = host
            .hcas
            .iter()
            .find(|h| h.node_guid == key.guid)
            .and_then(|h| h.rail);
        Some((host.name.as_str(), rail))
    }

    /// Fill in a port reference's host and rail, when it is a host CA's port.
    pub fn annotate(&self, at: &mut PortRef) {
        if let Some((host, rail)) = self.label(at.key()) {
            at.host = Some(host.to_string());
            at.rail = rail;
        }
    }

    /// Fill in the host and rail of both ends of every link of a health report, and of
    /// its ports not Active.
    pub fn annotate_health(&self, report: &mut crate::health::HealthReport) {
        for l in &mut report.links {
            self.annotate(&mut l.a.at);
            self.annotate(&mut l.b.at);
        }
        for p in report
            .up_not_active
            .iter_mut()
            .chain(report.down.iter_mut())
        {
            self.annotate(&mut p.at);
            if let Some(r) = p.remote.as_mut() {
                self.annotate(r);
            }
        }
    }

    /// Fill in the host and rail of every port of a counter sample (and of its far end).
    pub fn annotate_sample(&self, sample: &mut crate::counters::Sample) {
        for p in &mut sample.ports {
            self.annotate(&mut p.at);
            if let Some(r) = p.remote.as_mut() {
                self.annotate(r);
            }
        }
    }
}

/// Ascending rails as ranges: `0-7`, `0-3,5`.
pub fn rail_ranges(rails: &[u8]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < rails.len() {
        let mut j = i;
        while j + 1 < rails.len() && rails[j + 1] == rails[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            rails[i].to_string()
        } else {
            format!("{}-{}", rails[i], rails[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// The fabric's host CAs: those whose description names a host (with it), the others.
fn members<'a>(
    fabric: &'a Fabric,
    names: Option<&'a NameMap>,
) -> (Vec<(&'a str, Member<'a>)>, Vec<Member<'a>>) {
    let mut switch_ids: foldhash::HashSet<u64> = Default::default();
    let mut switch_names: foldhash::HashSet<&str> = Default::default();
    for (_, sw) in fabric.switches() {
        switch_ids.insert(sw.guid);
        if sw.system_image_guid != 0 {
            switch_ids.insert(sw.system_image_guid);
        }
        switch_names.insert(sw.description.as_str());
    }
    let mut named = Vec::new();
    let mut unnamed = Vec::new();
    for (id, node) in fabric.nodes() {
        if !node.kind.is_host_ca() {
            continue;
        }
        let switch_own = (node.system_image_guid != 0
            && switch_ids.contains(&node.system_image_guid))
            || switch_names.contains(node.description.as_str());
        if switch_own {
            continue;
        }
        match name::describe(display_name(node, names)) {
            Described::HostDevice { host, device } => named.push((
                host,
                Member {
                    id,
                    node,
                    device: Some(device),
                },
            )),
            Described::HostOnly(host) => named.push((
                host,
                Member {
                    id,
                    node,
                    device: None,
                },
            )),
            Described::Other => unnamed.push(Member {
                id,
                node,
                device: None,
            }),
        }
    }
    (named, unnamed)
}

/// A device name's scheme: the name without its index, or `pci`.
fn scheme(device: &str) -> Option<String> {
    match name::device_index(device) {
        DeviceIndex::Index(_) => Some(
            device
                .trim_end_matches(|c: char| c.is_ascii_digit())
                .to_string(),
        ),
        DeviceIndex::Pci(_) => Some("pci".into()),
        DeviceIndex::None => None,
    }
}

/// The scheme most of a host's devices follow.
fn scheme_of(members: &[Member]) -> Option<String> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for s in members.iter().filter_map(|m| m.device.and_then(scheme)) {
        *counts.entry(s).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|(s, _)| s)
}

/// The rail of each PCI-location device address: within each host the devices ranked by
/// address; each address takes the rank most hosts give it (lowest on a tie), so a host
/// missing one device does not shift its others.
fn pci_rails(hosts: &[(String, Grouping, Vec<Member>)]) -> BTreeMap<PciName, u8> {
    let mut votes: BTreeMap<PciName, BTreeMap<usize, usize>> = BTreeMap::new();
    for (_, _, members) in hosts {
        let mut addresses: Vec<PciName> = members
            .iter()
            .filter_map(|m| m.device.and_then(PciName::parse))
            .collect();
        addresses.sort_unstable();
        addresses.dedup();
        for (rank, a) in addresses.into_iter().enumerate() {
            *votes.entry(a).or_default().entry(rank).or_default() += 1;
        }
    }
    votes
        .into_iter()
        .filter_map(|(a, ranks)| {
            let (rank, _) = ranks
                .into_iter()
                .max_by(|x, y| x.1.cmp(&y.1).then(y.0.cmp(&x.0)))?;
            Some((a, u8::try_from(rank).ok()?))
        })
        .collect()
}

/// A member CA's entries: each linked port (or its first port when none is linked).
fn hca_ports(
    fabric: &Fabric,
    names: Option<&NameMap>,
    m: &Member,
    pci_rails: &BTreeMap<PciName, u8>,
) -> Vec<Hca> {
    let rail = m.device.and_then(|d| match name::device_index(d) {
        DeviceIndex::Index(i) => Some(i),
        DeviceIndex::Pci(p) => pci_rails.get(&p).copied(),
        DeviceIndex::None => None,
    });
    // Each linked port with its far end, looked up once.
    let linked: Vec<(&Port, Option<End>)> = m
        .node
        .ports
        .iter()
        .filter(|p| p.number != 0)
        .filter_map(|p| {
            let end = End {
                node: m.id,
                port: p.number,
            };
            fabric.peer(end).map(|peer| (p, Some(peer)))
        })
        .collect();
    let ports = if linked.is_empty() {
        m.node
            .ports
            .iter()
            .find(|p| p.number != 0)
            .map(|p| (p, None))
            .into_iter()
            .collect()
    } else {
        linked
    };
    ports
        .into_iter()
        .map(|(p, peer)| {
            let leaf = peer.and_then(|e| {
                let sw = fabric.node(e.node);
                sw.is_switch().then(|| LeafPort {
                    node: e.node,
                    name: display_name(sw, names).to_string(),
                    node_guid: sw.guid,
                    port: e.port,
                    rail: None,
                })
            });
            Hca {
                node: m.id,
                node_guid: m.node.guid,
                system_image_guid: m.node.system_image_guid,
                device: m.device.map(str::to_string),
                rail,
                port: p.number,
                lid: p.lid,
                rate: p.rate_active(),
                state: p.state,
                phys_state: p.phys_state,
                leaf,
            }
        })
        .collect()
}
