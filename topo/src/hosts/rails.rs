//! What is wrong with the hosts' rails: a rail down or missing, a rail slower than the
//! host's others, an HCA cabled to a leaf of another rail, two HCAs with each other's
//! cables. The findings policy (`crate::findings`) words them; this finds them.
//!
//! Expectations come from the fabric itself:
//! - the rails a host should have: those more than half of the hosts of its device naming
//!   scheme have (`mlx5_0`..`mlx5_7` on most servers: 8 rails). A host all of whose HCAs
//!   sit on leaves of other rails (a management server cabled wherever there was room) is
//!   held to none;
//! - where an HCA belongs: in a rail-optimised fabric a server's HCAs sit on the same port
//!   of the leaves of one group, one leaf per rail. Its port is the one most of its HCAs
//!   use; its rail-r leaf is the rail-r leaf that the hosts sharing its other leaves use
//!   ("leaf-mates"). Two HCAs each at the other's place are swapped.

use std::collections::BTreeMap;

use ibscope_mad::attr::link::Rate;

use super::group::{Hca, Host, Hosts};
use crate::model::{End, Fabric, NodeId};

/// An HCA port: (host index, index in the host's `hcas`).
pub type HcaRef = (usize, usize);

/// A rail of a host's norm that is not up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RailDown {
    pub host: usize,
    pub rail: u8,
    /// Its HCA port, when the HCA is in the fabric (then it is not Active).
    pub hca: Option<usize>,
    /// The device name: its own, or the one the host's naming scheme gives the rail.
    pub device: Option<String>,
    /// For an HCA not in the fabric: the leaf port its leaf-mates say it belongs on, when
    /// that port has no link now.
    pub expected: Option<End>,
    /// Rails of the norm the host has up, and the norm's size.
    pub up: usize,
    pub norm: usize,
    /// The other hosts on its leaves, and how many of them have this rail up: none of
    /// them means their leaf of this rail is gone, not this host's HCA alone.
    pub mates: usize,
    pub mates_with_rail: usize,
}

/// One thing wrong with a host's rails.
#[derive(Debug, Clone, PartialEq)]
pub enum RailIssue {
    Down(RailDown),
    /// Runs below `reference`, the rate most of the host's other rails run at.
    Slow {
        hca: HcaRef,
        reference: Rate,
    },
    /// On a leaf whose rail is not its own (and no partner to swap with).
    Misaligned {
        hca: HcaRef,
    },
    /// Each at the other's place: swapping their cables puts both right.
    Swapped {
        a: HcaRef,
        b: HcaRef,
    },
}

impl RailIssue {
    /// The host the issue is about (the first of a swapped pair).
    pub fn host(&self) -> usize {
        match self {
            RailIssue::Down(d) => d.host,
            RailIssue::Slow { hca, .. } | RailIssue::Misaligned { hca } => hca.0,
            RailIssue::Swapped { a, .. } => a.0,
        }
    }
}

/// A place on the fabric: leaf switch and port.
type Place = (NodeId, u8);

/// The most common value with more votes than any other, if there is one.
fn strict_mode<T: Ord + Copy>(values: impl IntoIterator<Item = T>) -> Option<T> {
    let mut counts: BTreeMap<T, usize> = BTreeMap::new();
    for v in values {
        *counts.entry(v).or_default() += 1;
    }
    let mut ranked: Vec<(usize, T)> = counts.into_iter().map(|(v, n)| (n, v)).collect();
    ranked.sort_by_key(|r| std::cmp::Reverse(r.0));
    match ranked.as_slice() {
        [(n, v), rest @ ..] if rest.first().map_or(true, |(m, _)| m < n) => Some(*v),
        _ => None,
    }
}

/// Where each host's HCAs belong.
struct Positions {
    /// The leaf port number most of a host's HCAs use.
    port: Vec<Option<u8>>,
    /// The hosts on each leaf.
    on_leaf: BTreeMap<NodeId, Vec<usize>>,
    /// Hosts with an HCA of known rail.
    railed: Vec<bool>,
    /// (leaf, rail) -> the rail-`rail` leaf its hosts use most.
    companion: BTreeMap<(NodeId, u8), NodeId>,
}

impl Positions {
    fn new(hosts: &[Host]) -> Positions {
        let port = hosts
            .iter()
            .map(|h| {
                strict_mode(
                    h.hcas
                        .iter()
                        .filter_map(|c| c.leaf.as_ref().map(|l| l.port)),
                )
            })
            .collect();
        let mut on_leaf: BTreeMap<NodeId, Vec<usize>> = BTreeMap::new();
        for (h, host) in hosts.iter().enumerate() {
            for leaf in host.hcas.iter().filter_map(|c| c.leaf.as_ref()) {
                let v = on_leaf.entry(leaf.node).or_default();
                if v.last() != Some(&h) {
                    v.push(h);
                }
            }
        }
        let mut votes: BTreeMap<(NodeId, u8), BTreeMap<NodeId, usize>> = BTreeMap::new();
        for h in hosts {
            let aligned: Vec<(NodeId, u8)> = h
                .hcas
                .iter()
                .filter(|c| is_aligned(c))
                .filter_map(|c| Some((c.leaf.as_ref()?.node, c.rail?)))
                .collect();
            for &(from, _) in &aligned {
                for &(to, rail) in &aligned {
                    *votes
                        .entry((from, rail))
                        .or_default()
                        .entry(to)
                        .or_default() += 1;
                }
            }
        }
        let companion = votes
            .into_iter()
            .filter_map(|(k, v)| {
                let best = v
                    .into_iter()
                    .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))?;
                Some((k, best.0))
            })
            .collect();
        Positions {
            port,
            on_leaf,
            railed: hosts.iter().map(|h| h.rails().next().is_some()).collect(),
            companion,
        }
    }

    /// The other hosts on host `h`'s leaves that have rails.
    fn mates(&self, h: usize, host: &Host) -> Vec<usize> {
        let mut mates: Vec<usize> = host
            .hcas
            .iter()
            .filter_map(|c| self.on_leaf.get(&c.leaf.as_ref()?.node))
            .flatten()
            .copied()
            .filter(|&m| m != h && self.railed[m])
            .collect();
        mates.sort_unstable();
        mates.dedup();
        mates
    }

    /// The rail-`rail` leaf for host `h`: what the leaf-mates on its aligned leaves use.
    fn leaf(&self, host: &Host, rail: u8) -> Option<NodeId> {
        strict_mode(
            host.hcas
                .iter()
                .filter(|c| is_aligned(c))
                .filter_map(|c| self.companion.get(&(c.leaf.as_ref()?.node, rail)).copied()),
        )
    }

    /// Where host `h`'s rail-`rail` HCA belongs.
    fn place(&self, h: usize, host: &Host, rail: u8) -> Option<Place> {
        Some((self.leaf(host, rail)?, self.port[h]?))
    }
}

/// On a leaf of its own rail.
fn is_aligned(c: &Hca) -> bool {
    matches!((c.rail, c.leaf.as_ref().and_then(|l| l.rail)), (Some(a), Some(b)) if a == b)
}

fn place_of(c: &Hca) -> Option<Place> {
    c.leaf.as_ref().map(|l| (l.node, l.port))
}

/// Every rail issue of every host, by host.
pub fn check(fabric: &Fabric, hosts: &Hosts) -> Vec<RailIssue> {
    let list = hosts.hosts();
    let positions = Positions::new(list);
    let mut issues = Vec::new();
    issues.extend(down_rails(fabric, list, &positions));
    issues.extend(slow_rails(list));
    issues.extend(misplaced(list, &positions));
    issues.sort_by_key(|i| i.host());
    issues
}

/// What a naming scheme's hosts have: the rails more than half of them have, and the
/// most common number of rails (ties: the larger).
struct Norm {
    rails: Vec<u8>,
    count: usize,
}

fn norms(hosts: &[Host]) -> BTreeMap<&str, Norm> {
    type Tally = (usize, BTreeMap<u8, usize>, BTreeMap<usize, usize>);
    let mut tallies: BTreeMap<&str, Tally> = BTreeMap::new();
    for h in hosts {
        let Some(scheme) = h.scheme.as_deref() else {
            continue;
        };
        let entry = tallies.entry(scheme).or_default();
        entry.0 += 1;
        let mut n = 0;
        for r in h.rails() {
            *entry.1.entry(r).or_default() += 1;
            n += 1;
        }
        *entry.2.entry(n).or_default() += 1;
    }
    tallies
        .into_iter()
        .map(|(s, (n, rails, counts))| {
            let rails = rails
                .into_iter()
                .filter(|&(_, c)| 2 * c > n)
                .map(|(r, _)| r)
                .collect();
            let count = counts
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)))
                .map_or(0, |(c, _)| c);
            (s, Norm { rails, count })
        })
        .collect()
}

/// Rails of the norm a host lacks or has not up.
fn down_rails(fabric: &Fabric, hosts: &[Host], positions: &Positions) -> Vec<RailIssue> {
    let norms = norms(hosts);
    let mut out = Vec::new();
    for (h, host) in hosts.iter().enumerate() {
        let Some(norm) = host.scheme.as_deref().and_then(|s| norms.get(s)) else {
            continue;
        };
        // A host cabled only to other rails' leaves is not one of the rail servers.
        if host.hcas.iter().all(Hca::is_misaligned) {
            continue;
        }
        let up_rails = || host.rails().filter(|&r| host.on_rail(r).any(Hca::is_up));
        // As many rails up as most hosts have (a lab of one-HCA servers, some named
        // HCA-1 and some HCA-2, is no cluster of two-rail servers).
        if up_rails().count() >= norm.count {
            continue;
        }
        let up = norm
            .rails
            .iter()
            .filter(|&&r| host.on_rail(r).any(Hca::is_up))
            .count();
        for &rail in &norm.rails {
            if host.on_rail(rail).any(Hca::is_up) {
                continue;
            }
            let present = host.hcas.iter().position(|c| c.rail == Some(rail));
            let device = match present {
                Some(i) => host.hcas[i].device.clone(),
                None => device_for(host, rail),
            };
            let expected = match present {
                Some(_) => None,
                None => positions
                    .place(h, host, rail)
                    .map(|(node, port)| End { node, port })
                    .filter(|&e| fabric.peer(e).is_none()),
            };
            let mates = positions.mates(h, host);
            let mates_with_rail = mates
                .iter()
                .filter(|&&m| hosts[m].on_rail(rail).any(Hca::is_up))
                .count();
            out.push(RailIssue::Down(RailDown {
                host: h,
                rail,
                hca: present,
                device,
                expected,
                up,
                norm: norm.rails.len(),
                mates: mates.len(),
                mates_with_rail,
            }));
        }
    }
    out
}

/// The device name a host's naming scheme gives `rail` (`mlx5_` and 3: `mlx5_3`).
fn device_for(host: &Host, rail: u8) -> Option<String> {
    let scheme = host.scheme.as_deref()?;
    (scheme != "pci").then(|| format!("{scheme}{rail}"))
}

/// HCAs up at a rate below what most of their host's up HCAs run at (ties: the higher).
fn slow_rails(hosts: &[Host]) -> Vec<RailIssue> {
    let mut out = Vec::new();
    for (h, host) in hosts.iter().enumerate() {
        let rates: Vec<(usize, Rate)> = host
            .hcas
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_up() && c.rail.is_some())
            .filter_map(|(i, c)| Some((i, c.rate?)))
            .collect();
        if rates.len() < 2 {
            continue;
        }
        let mut counts: BTreeMap<Rate, usize> = BTreeMap::new();
        for (_, r) in &rates {
            *counts.entry(*r).or_default() += 1;
        }
        let Some((&reference, _)) = counts.iter().max_by(|a, b| {
            a.1.cmp(b.1)
                .then(a.0.data_gbps().total_cmp(&b.0.data_gbps()))
        }) else {
            continue;
        };
        for &(i, r) in &rates {
            if r.is_below(reference) {
                out.push(RailIssue::Slow {
                    hca: (h, i),
                    reference,
                });
            }
        }
    }
    out
}

/// HCAs away from where they belong: swapped pairs, and the misaligned rest.
fn misplaced(hosts: &[Host], positions: &Positions) -> Vec<RailIssue> {
    // Every HCA with a place that differs from where it belongs.
    let mut away: Vec<(HcaRef, Place, Place)> = Vec::new();
    for (h, host) in hosts.iter().enumerate() {
        for (i, c) in host.hcas.iter().enumerate() {
            let (Some(rail), Some(at)) = (c.rail, place_of(c)) else {
                continue;
            };
            if let Some(belongs) = positions.place(h, host, rail) {
                if belongs != at {
                    away.push(((h, i), at, belongs));
                }
            }
        }
    }
    let by_place: BTreeMap<Place, usize> = away
        .iter()
        .enumerate()
        .map(|(k, (_, at, _))| (*at, k))
        .collect();
    let mut paired = vec![false; away.len()];
    let mut out = Vec::new();
    for k in 0..away.len() {
        if paired[k] {
            continue;
        }
        let (a, at, belongs) = away[k];
        let partner = by_place
            .get(&belongs)
            .copied()
            .filter(|&j| j != k && !paired[j] && away[j].2 == at);
        if let Some(j) = partner {
            paired[k] = true;
            paired[j] = true;
            out.push(RailIssue::Swapped { a, b: away[j].0 });
        }
    }
    let in_pairs: std::collections::BTreeSet<HcaRef> = away
        .iter()
        .zip(&paired)
        .filter(|(_, &p)| p)
        .map(|((r, _, _), _)| *r)
        .collect();
    for (h, host) in hosts.iter().enumerate() {
        for (i, c) in host.hcas.iter().enumerate() {
            if c.is_misaligned() && !in_pairs.contains(&(h, i)) {
                out.push(RailIssue::Misaligned { hca: (h, i) });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{self, RailsSpec};
    use crate::model::{FabricFile, FileLink};
    use ibscope_mad::attr::link::Width;
    use ibscope_mad::attr::PortState;

    /// `hosts` servers x `rails` rails, 4 a leaf, brought up at 4xHDR, as a file to edit.
    fn rail_file(hosts: usize, rails: u8) -> FabricFile {
        let spec = RailsSpec {
            hosts_per_leaf: 4,
            ..RailsSpec::new(hosts, rails, 64)
        };
        let mut f = crate::ibnd::parse(&gen::rails(&spec).unwrap()).unwrap();
        gen::bring_up(&mut f, Rate::parse("4xHDR").unwrap());
        f.to_file()
    }

    fn guid(file: &FabricFile, description: &str) -> u64 {
        file.nodes
            .iter()
            .find(|n| n.description == description)
            .unwrap_or_else(|| panic!("no node {description:?}"))
            .guid
    }

    /// The link at (guid, port): its index and the far end.
    fn link_at(file: &FabricFile, g: u64) -> (usize, (u64, u8)) {
        file.links
            .iter()
            .enumerate()
            .find_map(|(i, l)| {
                if l.a_guid == g {
                    Some((i, (l.b_guid, l.b_port)))
                } else if l.b_guid == g {
                    Some((i, (l.a_guid, l.a_port)))
                } else {
                    None
                }
            })
            .unwrap()
    }

    /// Swap the cables of two HCAs (one port each).
    fn swap(file: &mut FabricFile, a: &str, b: &str) {
        let (ga, gb) = (guid(file, a), guid(file, b));
        let (ia, pa) = link_at(file, ga);
        let (ib, pb) = link_at(file, gb);
        file.links[ia] = FileLink {
            a_guid: ga,
            a_port: 1,
            b_guid: pb.0,
            b_port: pb.1,
        };
        file.links[ib] = FileLink {
            a_guid: gb,
            a_port: 1,
            b_guid: pa.0,
            b_port: pa.1,
        };
    }

    /// Take an HCA out of the fabric (its link went down: discovery no longer reaches it).
    fn remove(file: &mut FabricFile, description: &str) {
        let g = guid(file, description);
        let (i, _) = link_at(file, g);
        file.links.remove(i);
        file.nodes.retain(|n| n.guid != g);
    }

    fn analyse(file: FabricFile) -> (Fabric, Hosts, Vec<RailIssue>) {
        let f = Fabric::from_file(file).unwrap();
        let hosts = Hosts::group(&f, None);
        let issues = check(&f, &hosts);
        (f, hosts, issues)
    }

    fn hca_name(hosts: &Hosts, r: HcaRef) -> String {
        let h = &hosts.hosts()[r.0];
        format!("{} {}", h.name, h.hcas[r.1].device.as_deref().unwrap())
    }

    #[test]
    fn rail_ranges_read_as_written() {
        assert_eq!(
            super::super::rail_ranges(&[0, 1, 2, 3, 5, 7, 8]),
            "0-3,5,7-8"
        );
        assert_eq!(super::super::rail_ranges(&[]), "");
    }

    #[test]
    fn a_healthy_rail_fabric() {
        let (f, hosts, issues) = analyse(rail_file(10, 4));
        assert_eq!(issues, []);
        assert_eq!(hosts.len(), 10);
        assert_eq!(hosts.rails(), [0, 1, 2, 3]);
        let h = &hosts.hosts()[9];
        assert_eq!(h.name, "gpu-0010");
        assert_eq!(h.scheme.as_deref(), Some("mlx5_"));
        assert_eq!(h.rails().collect::<Vec<_>>(), [0, 1, 2, 3]);
        for (r, hca) in h.hcas.iter().enumerate() {
            let leaf = hca.leaf.as_ref().unwrap();
            assert_eq!(leaf.name, format!("MF0;leaf-r{r}-003:MQM9700/U1"));
            assert_eq!((leaf.port, leaf.rail), (2, Some(r as u8)));
            assert_eq!(hca.rate, Rate::parse("4xHDR"));
        }
        // 3 leaves a rail; no spine has HCAs.
        assert_eq!(hosts.leaves().count(), 12);
        assert!(hosts.leaves().all(|l| l.rail.is_some()));
        assert_eq!(hosts.find("gpu-0003"), Some(2));
        assert_eq!(hosts.find("gpu-0003.cluster"), Some(2));
        let key = f
            .node(f.nodes_by_description("gpu-0003 mlx5_2")[0])
            .port_key(1);
        assert_eq!(hosts.label(key), Some(("gpu-0003", Some(2))));
    }

    #[test]
    fn a_missing_hca_is_a_rail_down_at_its_free_leaf_port() {
        let mut file = rail_file(10, 4);
        remove(&mut file, "gpu-0006 mlx5_2");
        let (f, hosts, issues) = analyse(file);
        let [RailIssue::Down(d)] = issues.as_slice() else {
            panic!("{issues:?}")
        };
        assert_eq!(hosts.hosts()[d.host].name, "gpu-0006");
        assert_eq!((d.rail, d.hca, d.up, d.norm), (2, None, 3, 4));
        // gpu-0005, 0007 and 0008 share its leaves, and have rail 2.
        assert_eq!((d.mates, d.mates_with_rail), (3, 3));
        assert_eq!(d.device.as_deref(), Some("mlx5_2"));
        let e = d.expected.expect("the leaf port it belongs on");
        assert_eq!(f.node(e.node).description, "MF0;leaf-r2-002:MQM9700/U1");
        assert_eq!(e.port, 2);
    }

    #[test]
    fn a_port_not_active_is_a_rail_down() {
        let mut file = rail_file(6, 2);
        let g = guid(&file, "gpu-0002 mlx5_1");
        let node = file.nodes.iter_mut().find(|n| n.guid == g).unwrap();
        node.ports[0].state = Some(PortState::Init);
        let (_, hosts, issues) = analyse(file);
        let [RailIssue::Down(d)] = issues.as_slice() else {
            panic!("{issues:?}")
        };
        assert_eq!(hosts.hosts()[d.host].name, "gpu-0002");
        assert_eq!((d.rail, d.up, d.norm, d.expected), (1, 1, 2, None));
        assert!(d.hca.is_some());
    }

    #[test]
    fn a_slower_rail() {
        let mut file = rail_file(6, 4);
        let g = guid(&file, "gpu-0004 mlx5_3");
        let node = file.nodes.iter_mut().find(|n| n.guid == g).unwrap();
        node.ports[0].width_active = Some(Width::X1);
        let (_, hosts, issues) = analyse(file);
        let [RailIssue::Slow { hca, reference }] = issues.as_slice() else {
            panic!("{issues:?}")
        };
        assert_eq!(hca_name(&hosts, *hca), "gpu-0004 mlx5_3");
        assert_eq!(reference.to_string(), "4xHDR");
    }

    #[test]
    fn swapped_cables_between_rails_of_one_host() {
        let mut file = rail_file(8, 4);
        swap(&mut file, "gpu-0003 mlx5_1", "gpu-0003 mlx5_2");
        let (_, hosts, issues) = analyse(file);
        let [RailIssue::Swapped { a, b }] = issues.as_slice() else {
            panic!("{issues:?}")
        };
        assert_eq!(hca_name(&hosts, *a), "gpu-0003 mlx5_1");
        assert_eq!(hca_name(&hosts, *b), "gpu-0003 mlx5_2");
    }

    #[test]
    fn swapped_cables_between_two_hosts() {
        // Across rails and hosts.
        let mut file = rail_file(8, 4);
        swap(&mut file, "gpu-0002 mlx5_1", "gpu-0007 mlx5_3");
        let (_, hosts, issues) = analyse(file);
        let [RailIssue::Swapped { a, b }] = issues.as_slice() else {
            panic!("{issues:?}")
        };
        assert_eq!(hca_name(&hosts, *a), "gpu-0002 mlx5_1");
        assert_eq!(hca_name(&hosts, *b), "gpu-0007 mlx5_3");
        // On one rail: no leaf of another rail, but each sits at the other's port.
        let mut file = rail_file(8, 4);
        swap(&mut file, "gpu-0001 mlx5_0", "gpu-0003 mlx5_0");
        let (_, hosts, issues) = analyse(file);
        let [RailIssue::Swapped { a, b }] = issues.as_slice() else {
            panic!("{issues:?}")
        };
        assert_eq!(hca_name(&hosts, *a), "gpu-0001 mlx5_0");
        assert_eq!(hca_name(&hosts, *b), "gpu-0003 mlx5_0");
    }

    #[test]
    fn a_cable_on_a_free_port_of_another_rail_is_misaligned() {
        // 6 hosts, 4 a leaf: ports 3 and 4 of each second leaf are free.
        let mut file = rail_file(6, 4);
        let g = guid(&file, "gpu-0005 mlx5_1");
        let leaf = guid(&file, "MF0;leaf-r3-002:MQM9700/U1");
        let (i, _) = link_at(&file, g);
        file.links[i] = FileLink {
            a_guid: g,
            a_port: 1,
            b_guid: leaf,
            b_port: 4,
        };
        let (_, hosts, issues) = analyse(file);
        let [RailIssue::Misaligned { hca }] = issues.as_slice() else {
            panic!("{issues:?}")
        };
        assert_eq!(hca_name(&hosts, *hca), "gpu-0005 mlx5_1");
    }
}
