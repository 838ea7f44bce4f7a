//! Planes: one HCA port seen in several fabrics.
//!
//! A multi-plane ("planarized") HCA port shows the host one local umad device per plane,
//! all with the port's one port GUID (rdma-core's libibumad/umad.c,
//! `umad_get_smi_gsi_pairs` and `count_ports_by_guid`, treats a port GUID that several
//! local ports share as a planarized port), and each plane is a subnet of its own with
//! its own subnet manager. So when several fabrics are swept, a host CA port GUID found
//! in more than one of them is one HCA port's planes. A host's planes are the fabrics any
//! of its planed ports is in; a port of that host found in only some of them has lost the
//! others (its link is down, so the plane's sweep never reached it).
//!
//! What disagrees ([`check`]): a plane whose port is not Active while another is, a plane
//! slower than the port's fastest, a plane the port is missing from.

use std::collections::BTreeMap;

use ibscope_mad::attr::link::Rate;
use ibscope_mad::attr::{PhysState, PortState};
use ibscope_mad::codes::guid;
use serde::Serialize;

use super::group::{Hosts, LeafPort};
use super::rails::HcaRef;
use crate::model::Fabric;

/// One swept fabric, as the plane grouping reads it.
#[derive(Clone, Copy)]
pub struct PlaneView<'a> {
    /// The fabric's name (its plane's name).
    pub name: &'a str,
    pub fabric: &'a Fabric,
    pub hosts: &'a Hosts,
}

impl<'a> PlaneView<'a> {
    pub fn new(name: &'a str, fabric: &'a Fabric, hosts: &'a Hosts) -> PlaneView<'a> {
        PlaneView {
            name,
            fabric,
            hosts,
        }
    }

    /// The fabric's identity as documents show it: the one its discovery recorded, else
    /// its name alone.
    pub fn id(&self) -> crate::model::FabricId {
        crate::model::FabricId::of(self.fabric, self.name)
            .unwrap_or_else(|| crate::model::FabricId::named(self.name))
    }
}

/// A swept fabric as commands keep it: its name, the fabric, its hosts.
impl<'a> From<&'a (String, Fabric, Hosts)> for PlaneView<'a> {
    fn from((name, fabric, hosts): &'a (String, Fabric, Hosts)) -> PlaneView<'a> {
        PlaneView::new(name, fabric, hosts)
    }
}

/// One plane of a host's HCA port: the port as that plane's fabric shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plane {
    /// The fabric (plane).
    pub fabric: crate::model::FabricId,
    /// Index of the fabric among those swept (command-line order).
    #[serde(skip)]
    pub view: usize,
    /// The HCA port in that fabric's hosts.
    #[serde(skip)]
    pub hca: HcaRef,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    pub lid: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<PortState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phys_state: Option<PhysState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaf: Option<LeafPort>,
    /// Active and LinkUp (a state not read counts as up).
    #[serde(skip)]
    pub up: bool,
}

/// One HCA port of a host with its planes: (host, rail, plane).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanedPort {
    /// The host (untrusted text).
    pub host: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rail: Option<u8>,
    #[serde(with = "guid")]
    pub port_guid: u64,
    /// In fabric order.
    pub planes: Vec<Plane>,
    /// Planes of its host this port is not in (fabric names).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// The fabric indexes of `missing`.
    #[serde(skip)]
    pub missing_views: Vec<usize>,
}

/// Every host CA port found in more than one fabric, and the ports of those hosts that
/// are missing from some of their host's planes; by host, rail, port GUID.
pub fn group(views: &[PlaneView]) -> Vec<PlanedPort> {
    // port GUID -> (host name, rail, planes)
    let mut seen: BTreeMap<u64, (String, Option<u8>, Vec<Plane>)> = BTreeMap::new();
    for (v, view) in views.iter().enumerate() {
        for (h, host) in view.hosts.hosts().iter().enumerate() {
            for (i, hca) in host.hcas.iter().enumerate() {
                let node = view.fabric.node(hca.node);
                let Some(port_guid) = node.port(hca.port).map(|p| p.guid).filter(|&g| g != 0)
                else {
                    continue;
                };
                let entry = seen
                    .entry(port_guid)
                    .or_insert_with(|| (host.name.clone(), hca.rail, Vec::new()));
                if entry.2.iter().any(|p| p.view == v) {
                    continue; // one plane per fabric
                }
                entry.2.push(Plane {
                    fabric: view.id(),
                    view: v,
                    hca: (h, i),
                    device: hca.device.clone(),
                    lid: hca.lid,
                    rate: hca.rate,
                    state: hca.state,
                    phys_state: hca.phys_state,
                    leaf: hca.leaf.clone(),
                    up: hca.is_up(),
                });
            }
        }
    }
    // A host's planes: the fabrics its multi-fabric ports are in.
    let mut host_planes: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (host, _, planes) in seen.values() {
        if planes.len() > 1 {
            let list = host_planes.entry(host.as_str()).or_default();
            list.extend(planes.iter().map(|p| p.view));
            list.sort_unstable();
            list.dedup();
        }
    }
    let mut out: Vec<PlanedPort> = seen
        .iter()
        .filter_map(|(&port_guid, (host, rail, planes))| {
            let of_host = host_planes.get(host.as_str())?;
            let missing_views: Vec<usize> = of_host
                .iter()
                .copied()
                .filter(|v| !planes.iter().any(|p| p.view == *v))
                .collect();
            Some(PlanedPort {
                host: host.clone(),
                rail: *rail,
                port_guid,
                planes: planes.clone(),
                missing: missing_views
                    .iter()
                    .map(|&v| views[v].name.to_string())
                    .collect(),
                missing_views,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        (&a.host, a.rail.is_none(), a.rail, a.port_guid).cmp(&(
            &b.host,
            b.rail.is_none(),
            b.rail,
            b.port_guid,
        ))
    });
    out
}

/// One way a port's planes disagree. `port` indexes the [`group`] list, `plane` its
/// `planes`.
#[derive(Debug, Clone, PartialEq)]
pub enum PlaneIssue {
    /// Not Active while another plane of the port is.
    NotActive { port: usize, plane: usize },
    /// Slower than the port's fastest plane.
    Slower {
        port: usize,
        plane: usize,
        reference: Rate,
    },
    /// The port is not in this plane (fabric index) its host has.
    Missing { port: usize, view: usize },
}

/// What disagrees among each port's planes.
pub fn check(ports: &[PlanedPort]) -> Vec<PlaneIssue> {
    let mut issues = Vec::new();
    for (n, port) in ports.iter().enumerate() {
        let any_up = port.planes.iter().any(|p| p.up);
        let fastest = port
            .planes
            .iter()
            .filter(|p| p.up)
            .filter_map(|p| p.rate)
            .max_by(|a, b| a.data_gbps().total_cmp(&b.data_gbps()));
        for (i, plane) in port.planes.iter().enumerate() {
            if !plane.up {
                if any_up {
                    issues.push(PlaneIssue::NotActive { port: n, plane: i });
                }
            } else if let (Some(rate), Some(reference)) = (plane.rate, fastest) {
                if rate.data_gbps() < reference.data_gbps() {
                    issues.push(PlaneIssue::Slower {
                        port: n,
                        plane: i,
                        reference,
                    });
                }
            }
        }
        if any_up {
            for &view in &port.missing_views {
                issues.push(PlaneIssue::Missing { port: n, view });
            }
        }
    }
    issues
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{self, RailsSpec};
    use crate::model::FabricFile;
    use ibscope_mad::attr::link::Width;

    /// One plane: 4 servers x 2 rails at 4xHDR, as a file to edit. Every plane generated
    /// so has the same GUIDs, as a planarized HCA port's planes do.
    fn plane_file() -> FabricFile {
        let spec = RailsSpec {
            hosts_per_leaf: 2,
            ..RailsSpec::new(4, 2, 8)
        };
        let mut f = crate::ibnd::parse(&gen::rails(&spec).unwrap()).unwrap();
        gen::bring_up(&mut f, Rate::parse("4xHDR").unwrap());
        f.to_file()
    }

    fn plane() -> Fabric {
        Fabric::from_file(plane_file()).unwrap()
    }

    fn guid(f: &Fabric, description: &str) -> u64 {
        f.nodes()
            .find(|(_, n)| n.description == description)
            .unwrap_or_else(|| panic!("no {description}"))
            .1
            .port(1)
            .unwrap()
            .guid
    }

    fn port1(f: &mut Fabric, id: crate::model::NodeId) -> &mut crate::model::Port {
        f.node_mut(id)
            .ports
            .iter_mut()
            .find(|p| p.number == 1)
            .unwrap()
    }

    fn groups(fabrics: &[&Fabric]) -> Vec<PlanedPort> {
        let hosts: Vec<Hosts> = fabrics.iter().map(|f| Hosts::group(f, None)).collect();
        let names = ["p0", "p1", "p2"];
        let views: Vec<PlaneView> = fabrics
            .iter()
            .zip(&hosts)
            .enumerate()
            .map(|(i, (f, h))| PlaneView::new(names[i], f, h))
            .collect();
        group(&views)
    }

    #[test]
    fn the_same_port_guid_in_two_fabrics_is_one_ports_planes() {
        let (a, b) = (plane(), plane());
        let ports = groups(&[&a, &b]);
        assert_eq!(ports.len(), 8, "4 servers x 2 rails");
        assert_eq!(
            (ports[0].host.as_str(), ports[0].rail, ports[1].rail),
            ("gpu-0001", Some(0), Some(1))
        );
        for p in &ports {
            let names: Vec<&str> = p.planes.iter().map(|p| p.fabric.name.as_str()).collect();
            assert_eq!(names, ["p0", "p1"]);
            assert!(p.missing.is_empty());
        }
        assert_eq!(check(&ports), vec![]);
        // One fabric alone: nothing is planed.
        assert!(groups(&[&a]).is_empty());
    }

    #[test]
    fn a_plane_down_slower_or_missing_disagrees() {
        let (a, mut b) = (plane(), plane());
        let node = |f: &Fabric, d: &str| f.nodes().find(|(_, n)| n.description == d).unwrap().0;
        // Plane p1 of gpu-0001 rail 0: Down; of gpu-0002 rail 1: 1x.
        let down = node(&b, "gpu-0001 mlx5_0");
        port1(&mut b, down).state = Some(PortState::Down);
        let slow = node(&b, "gpu-0002 mlx5_1");
        port1(&mut b, slow).width_active = Some(Width::X1);
        let ports = groups(&[&a, &b]);
        let at = |g: u64| ports.iter().position(|p| p.port_guid == g).unwrap();
        let issues = check(&ports);
        assert_eq!(
            issues,
            vec![
                PlaneIssue::NotActive {
                    port: at(guid(&a, "gpu-0001 mlx5_0")),
                    plane: 1
                },
                PlaneIssue::Slower {
                    port: at(guid(&a, "gpu-0002 mlx5_1")),
                    plane: 1,
                    reference: Rate::parse("4xHDR").unwrap()
                },
            ]
        );

        // A third plane gpu-0003's rail 1 is not in (its link down: the sweep never
        // reached it): missing there, and only there.
        let mut file = plane_file();
        let gone = file
            .nodes
            .iter()
            .find(|n| n.description == "gpu-0003 mlx5_1")
            .unwrap()
            .guid;
        file.nodes.retain(|n| n.guid != gone);
        file.links.retain(|l| l.a_guid != gone && l.b_guid != gone);
        let c = Fabric::from_file(file).unwrap();
        let ports = groups(&[&a, &plane(), &c]);
        let at = |g: u64| ports.iter().position(|p| p.port_guid == g).unwrap();
        let missing = at(guid(&a, "gpu-0003 mlx5_1"));
        assert_eq!(
            check(&ports),
            vec![PlaneIssue::Missing {
                port: missing,
                view: 2
            }]
        );
        assert_eq!(ports[missing].missing, ["p2"]);
    }

    #[test]
    fn a_plane_not_active_is_a_finding_on_its_fabric_naming_the_switch_port() {
        let (a, mut b) = (plane(), plane());
        let id = b
            .nodes()
            .find(|(_, n)| n.description == "gpu-0004 mlx5_1")
            .unwrap()
            .0;
        port1(&mut b, id).state = Some(PortState::Init);
        let (ha, hb) = (Hosts::group(&a, None), Hosts::group(&b, None));
        let views = [PlaneView::new("p0", &a, &ha), PlaneView::new("p1", &b, &hb)];
        let found = crate::findings::planes_disagree(&views, None).findings;
        assert_eq!(found.len(), 1, "{found:?}");
        let f = &found[0];
        assert_eq!(f.kind, crate::findings::FindingKind::PlanesDisagree);
        assert_eq!(
            (f.fabric_name(), f.host.as_deref(), f.rail),
            (Some("p1"), Some("gpu-0004"), Some(1))
        );
        let leaf = b.peer(crate::model::End { node: id, port: 1 }).unwrap();
        // The HCA port and its leaf port are the finding's ends, its host and rail lead.
        let want = format!(
            "[planes-disagree] gpu-0004 rail 1: \"gpu-0004 mlx5_1\" ({}) port 1 (lid {}) <-> \
             \"{}\" ({}) port {} (lid {}): plane p1 (port GUID {}) is {}, not Active, while p0 \
             is Active",
            guid::text(b.node(id).guid),
            b.node(id).port(1).unwrap().lid,
            b.node(leaf.node).description,
            guid::text(b.node(leaf.node).guid),
            leaf.port,
            b.node(leaf.node).lid().unwrap(),
            guid::text(guid(&a, "gpu-0004 mlx5_1")),
            crate::health::state_text(Some(PortState::Init), None),
        );
        assert_eq!(f.text_line(), want);
        assert_eq!(f.at.as_ref().unwrap().node.guid, b.node(id).guid);
    }
}
