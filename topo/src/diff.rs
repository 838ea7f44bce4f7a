//! What changed between two snapshots of a fabric, all of it: behind `ibscope diff` and
//! every round-trip test (links matched by [`crate::changes::link_changes`]).
//!
//! Nodes are matched by GUID (added, removed, description, kind or port count changed),
//! links by their [`LinkKey`] (added, removed), ports known on both sides by their GUID,
//! and for links present in both, the ports' active width/speed and logical/physical
//! state. A fact unknown in either snapshot (an ibnetdiscover file has no port states) is
//! not compared.

use std::fmt;

use ibscope_mad::codes::guid;
use serde::Serialize;

use crate::changes::{link_changes, LinkChange};
use crate::escape;
use crate::model::{Fabric, LinkKey, Node, NodeKind, Port, PortKey};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeSummary {
    #[serde(with = "guid")]
    pub guid: u64,
    pub kind: NodeKind,
    pub description: String,
}

/// One end of a link: the port and its node's description.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct EndRef {
    #[serde(flatten)]
    pub at: PortKey,
    pub description: String,
}

/// One link, ends ordered by (GUID, port).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct LinkEnds {
    pub a: EndRef,
    pub b: EndRef,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PortChange {
    #[serde(with = "guid")]
    pub guid: u64,
    pub port: u8,
    pub description: String,
    /// "width_active", "speed_active", "state", "phys_state" or "guid".
    pub field: &'static str,
    pub old: String,
    pub new: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DescriptionChange {
    #[serde(with = "guid")]
    pub guid: u64,
    pub old: String,
    pub new: String,
}

/// A node whose kind or port count changed while its GUID stayed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeChange {
    #[serde(with = "guid")]
    pub guid: u64,
    pub description: String,
    /// "kind" or "num_ports".
    pub field: &'static str,
    pub old: String,
    pub new: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FabricDiff {
    pub nodes_added: Vec<NodeSummary>,
    pub nodes_removed: Vec<NodeSummary>,
    pub descriptions_changed: Vec<DescriptionChange>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes_changed: Vec<NodeChange>,
    pub links_added: Vec<LinkEnds>,
    pub links_removed: Vec<LinkEnds>,
    pub port_changes: Vec<PortChange>,
}

impl FabricDiff {
    pub fn is_empty(&self) -> bool {
        self.nodes_added.is_empty()
            && self.nodes_removed.is_empty()
            && self.descriptions_changed.is_empty()
            && self.nodes_changed.is_empty()
            && self.links_added.is_empty()
            && self.links_removed.is_empty()
            && self.port_changes.is_empty()
    }
}

fn summary(n: &Node) -> NodeSummary {
    NodeSummary {
        guid: n.guid,
        kind: n.kind,
        description: n.description.clone(),
    }
}

/// A link as the diff names it: each end's port and its node's description.
fn link_ends(f: &Fabric, key: LinkKey) -> LinkEnds {
    let end = |at: PortKey| EndRef {
        at,
        description: f
            .node_by_guid(at.guid)
            .map(|id| f.node(id).description.clone())
            .unwrap_or_default(),
    };
    LinkEnds {
        a: end(key.0),
        b: end(key.1),
    }
}

fn port_of(f: &Fabric, at: PortKey) -> Option<(&Node, &Port)> {
    let node = f.node(f.node_by_guid(at.guid)?);
    Some((node, node.port(at.port)?))
}

/// A change of one port fact, when it is known on both sides and differs.
fn changed<T: PartialEq + ToString>(
    field: &'static str,
    old: Option<T>,
    new: Option<T>,
) -> Option<(&'static str, String, String)> {
    match (old, new) {
        (Some(o), Some(n)) if o != n => Some((field, o.to_string(), n.to_string())),
        _ => None,
    }
}

fn port_change(
    node: &Node,
    port: u8,
    (field, old, new): (&'static str, String, String),
) -> PortChange {
    PortChange {
        guid: node.guid,
        port,
        description: node.description.clone(),
        field,
        old,
        new,
    }
}

/// What changed on a linked port: active width and speed, logical and physical state.
fn compare_port(old: &Port, new: &Port, node: &Node, out: &mut Vec<PortChange>) {
    let changes = [
        changed("width_active", old.width_active, new.width_active),
        changed("speed_active", old.speed_active, new.speed_active),
        changed("state", old.state, new.state),
        changed("phys_state", old.phys_state, new.phys_state),
    ];
    out.extend(
        changes
            .into_iter()
            .flatten()
            .map(|c| port_change(node, old.number, c)),
    );
}

/// Kind, port count and port GUIDs of a node present in both snapshots.
fn compare_node(old: &Node, new: &Node, d: &mut FabricDiff, guids: &mut Vec<PortChange>) {
    if new.description != old.description {
        d.descriptions_changed.push(DescriptionChange {
            guid: old.guid,
            old: old.description.clone(),
            new: new.description.clone(),
        });
    }
    let node_facts = [
        changed("kind", Some(old.kind), Some(new.kind)),
        changed("num_ports", Some(old.num_ports), Some(new.num_ports)),
    ];
    for (field, o, n) in node_facts.into_iter().flatten() {
        d.nodes_changed.push(NodeChange {
            guid: old.guid,
            description: old.description.clone(),
            field,
            old: o,
            new: n,
        });
    }
    for p in &old.ports {
        let Some(q) = new.port(p.number) else {
            continue;
        };
        if p.guid != 0 && q.guid != 0 && p.guid != q.guid {
            let c = ("guid", guid::text(p.guid), guid::text(q.guid));
            guids.push(port_change(old, p.number, c));
        }
    }
}

/// Compare two snapshots; results are sorted by GUID (and port).
pub fn diff(old: &Fabric, new: &Fabric) -> FabricDiff {
    let mut d = FabricDiff::default();
    let mut guid_changes = Vec::new();
    for (_, n) in old.nodes() {
        match new.node_by_guid(n.guid) {
            None => d.nodes_removed.push(summary(n)),
            Some(id) => compare_node(n, new.node(id), &mut d, &mut guid_changes),
        }
    }
    for (_, n) in new.nodes() {
        if old.node_by_guid(n.guid).is_none() {
            d.nodes_added.push(summary(n));
        }
    }
    for (key, change) in link_changes(old, new) {
        match change {
            LinkChange::Gone { .. } => d.links_removed.push(link_ends(old, key)),
            LinkChange::New { .. } => d.links_added.push(link_ends(new, key)),
            LinkChange::Kept { .. } => {
                for at in [key.0, key.1] {
                    if let (Some((_, o)), Some((node, n))) = (port_of(old, at), port_of(new, at)) {
                        compare_port(o, n, node, &mut d.port_changes);
                    }
                }
            }
        }
    }
    guid_changes.sort_by_key(|c| (c.guid, c.port));
    d.port_changes.extend(guid_changes);
    d.nodes_added.sort_by_key(|n| n.guid);
    d.nodes_removed.sort_by_key(|n| n.guid);
    d.descriptions_changed.sort_by_key(|c| c.guid);
    d.nodes_changed.sort_by_key(|c| c.guid);
    d
}

struct EndText<'a>(&'a EndRef);

impl fmt::Display for EndText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:#018x}[{}] \"{}\"",
            self.0.at.guid,
            self.0.at.port,
            escape::for_terminal(&self.0.description)
        )
    }
}

/// One line per change, `+` added, `-` removed, `~` changed; descriptions escaped.
impl fmt::Display for FabricDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return writeln!(f, "no changes");
        }
        for n in &self.nodes_removed {
            let d = escape::for_terminal(&n.description);
            writeln!(f, "- node {:#018x} {} \"{d}\"", n.guid, n.kind.as_str())?;
        }
        for n in &self.nodes_added {
            let d = escape::for_terminal(&n.description);
            writeln!(f, "+ node {:#018x} {} \"{d}\"", n.guid, n.kind.as_str())?;
        }
        for c in &self.descriptions_changed {
            writeln!(
                f,
                "~ node {:#018x} description \"{}\" -> \"{}\"",
                c.guid,
                escape::for_terminal(&c.old),
                escape::for_terminal(&c.new)
            )?;
        }
        for c in &self.nodes_changed {
            writeln!(
                f,
                "~ node {:#018x} \"{}\" {}: {} -> {}",
                c.guid,
                escape::for_terminal(&c.description),
                c.field,
                c.old,
                c.new
            )?;
        }
        for l in &self.links_removed {
            writeln!(f, "- link {} <-> {}", EndText(&l.a), EndText(&l.b))?;
        }
        for l in &self.links_added {
            writeln!(f, "+ link {} <-> {}", EndText(&l.a), EndText(&l.b))?;
        }
        for c in &self.port_changes {
            writeln!(
                f,
                "~ port {:#018x}[{}] \"{}\" {}: {} -> {}",
                c.guid,
                c.port,
                escape::for_terminal(&c.description),
                c.field,
                c.old,
                c.new
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ibnd;
    use crate::test_fixtures::{NET_IBND, NET_SIM};
    use ibscope_mad::attr::link::Speed;

    const BASE: &str = "Switch 8 \"sw1\"\n[1] \"h1\"[1] # \"h1\" lid 2 4xHDR\n\
[2] \"h2\"[1] # \"h2\" lid 3 4xHDR\n[3] \"sw2\"[3] # \"sw2\" lid 4 4xHDR\n\n\
Switch 8 \"sw2\"\n[3] \"sw1\"[3] # \"sw1\" lid 1 4xHDR\n\n\
Hca 1 \"h1\"\n[1] \"sw1\"[1] # lid 2 lmc 0 \"sw1\" lid 1 4xHDR\n\n\
Hca 1 \"h2\"\n[1] \"sw1\"[2] # lid 3 lmc 0 \"sw1\" lid 1 4xHDR\n";

    #[test]
    fn identical_is_empty() {
        let a = ibnd::parse(BASE).unwrap();
        let d = diff(&a, &a.clone());
        assert!(d.is_empty());
        assert_eq!(d.to_string(), "no changes\n");
    }

    #[test]
    fn finds_every_kind_of_change() {
        let old = ibnd::parse(BASE).unwrap();
        // h2 unplugged and replaced by h3 (a new GUID) on sw2; sw1-sw2 link degraded to
        // 1x; h1 renamed with a hostile description.
        let new_text = "Switch 8 \"sw1\"\n[1] \"h1\"[1] # \"h1\" lid 2 4xHDR\n\
[3] \"sw2\"[3] # \"sw2\" lid 4 1xHDR\n\n\
Switch 8 \"sw2\"\n[3] \"sw1\"[3] # \"sw1\" lid 1 1xHDR\n[5] \"h3\"[1]\n\n\
Hca 1 \"h1\" # \"h1\x1b[2J\"\n[1] \"sw1\"[1] # lid 2 lmc 0 \"sw1\" lid 1 4xHDR\n\n\
caguid=0x100010\nHca 1 \"h3\"\n[1] \"sw2\"[5]\n";
        let mut new = ibnd::parse(new_text).unwrap();
        // Port states known in both snapshots: one went from Active to Init.
        let mut old = old;
        for f in [&mut old, &mut new] {
            let id = f.node_by_guid(0x100000).unwrap();
            f.node_mut(id).port_mut(1).unwrap().state = Some(ibscope_mad::attr::PortState::Active);
        }
        let id = new.node_by_guid(0x100000).unwrap();
        new.node_mut(id).port_mut(1).unwrap().state = Some(ibscope_mad::attr::PortState::Init);

        let d = diff(&old, &new);
        assert_eq!(d.nodes_removed.len(), 1);
        assert_eq!(d.nodes_removed[0].guid, 0x100002);
        assert_eq!(d.nodes_added.len(), 1);
        assert_eq!(d.nodes_added[0].guid, 0x100010);
        assert_eq!(d.descriptions_changed.len(), 1);
        assert_eq!(d.links_removed.len(), 1);
        assert_eq!(
            (d.links_removed[0].a.at.guid, d.links_removed[0].b.at.guid),
            (0x100002, 0x200000)
        );
        assert_eq!(d.links_added.len(), 1);
        assert_eq!(
            (d.links_added[0].a.at.port, d.links_added[0].b.at.port),
            (1, 5)
        );
        let widths: Vec<_> = d
            .port_changes
            .iter()
            .filter(|c| c.field == "width_active")
            .map(|c| (c.guid, c.port, c.old.as_str(), c.new.as_str()))
            .collect();
        assert_eq!(
            widths,
            vec![(0x200000, 3, "4x", "1x"), (0x200001, 3, "4x", "1x")]
        );
        let states: Vec<_> = d
            .port_changes
            .iter()
            .filter(|c| c.field == "state")
            .collect();
        assert_eq!(states.len(), 1);
        assert_eq!(
            (states[0].old.as_str(), states[0].new.as_str()),
            ("Active", "Initialize")
        );
        assert!(!d.is_empty());

        let text = d.to_string();
        assert!(!text.contains('\x1b'), "{text}");
        assert!(
            text.contains("- node 0x0000000000100002 ca \"h2\""),
            "{text}"
        );
        assert!(text.contains("~ port 0x0000000000200000[3] \"sw1\" width_active: 4x -> 1x"));
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["links_added"][0]["b"]["port"], 5);
    }

    #[test]
    fn unknown_facts_are_not_changes() {
        let old = ibnd::parse(BASE).unwrap();
        let mut new = old.clone();
        let id = new.node_by_guid(0x100000).unwrap();
        let p = new.node_mut(id).port_mut(1).unwrap();
        p.width_active = None;
        p.speed_active = Some(Speed::Edr);
        let d = diff(&old, &new);
        assert_eq!(d.port_changes.len(), 1);
        assert_eq!(d.port_changes[0].field, "speed_active");
    }
    #[test]
    fn ibsim_file_and_its_ibnetdiscover_output_are_the_same_fabric() {
        // Measured: ibnetdiscover under ibsim on NET_SIM prints exactly NET_IBND's GUIDs.
        let sim = ibnd::parse(NET_SIM).unwrap();
        let disc = ibnd::parse(NET_IBND).unwrap();
        let d = diff(&sim, &disc);
        assert!(d.is_empty(), "{d}");
        let hca1 = sim.node(sim.node_by_guid(0x100000).unwrap());
        assert_eq!(hca1.description, "Hca1");
        assert_eq!(hca1.port(1).unwrap().guid, 0x100001);
    }

    #[test]
    fn kind_port_count_and_port_guid_changes() {
        let old = ibnd::parse(BASE).unwrap();
        let mut new = old.clone();
        let sw = new.node_by_guid(0x200000).unwrap();
        new.node_mut(sw).num_ports = 36;
        let h1 = new.node_by_guid(0x100000).unwrap();
        new.node_mut(h1).kind = NodeKind::Router;
        new.node_mut(h1).port_mut(1).unwrap().guid = 0x777;
        let d = diff(&old, &new);
        let nodes: Vec<_> = d
            .nodes_changed
            .iter()
            .map(|c| (c.guid, c.field, c.old.as_str(), c.new.as_str()))
            .collect();
        assert_eq!(
            nodes,
            vec![
                (0x100000, "kind", "ca", "router"),
                (0x200000, "num_ports", "8", "36")
            ]
        );
        let guids: Vec<_> = d
            .port_changes
            .iter()
            .filter(|c| c.field == "guid")
            .collect();
        assert_eq!(guids.len(), 1);
        assert_eq!(
            (guids[0].old.as_str(), guids[0].new.as_str()),
            ("0x0000000000100001", "0x0000000000000777")
        );
        let text = d.to_string();
        assert!(
            text.contains("~ node 0x0000000000200000 \"sw1\" num_ports: 8 -> 36"),
            "{text}"
        );
        // Unchanged snapshots serialize without the node-change list.
        let same = serde_json::to_value(diff(&old, &old)).unwrap();
        assert!(same.get("nodes_changed").is_none());
    }
}
