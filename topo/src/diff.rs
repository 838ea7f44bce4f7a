//! What changed between two snapshots of a fabric: nodes by GUID, links as unordered pairs
//! of (GUID, port), and for links present in both, the ports' active width/speed and
//! logical/physical state. A fact unknown in either snapshot (an ibnetdiscover file has no
//! port states) is not compared.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use crate::escape;
use crate::model::{Fabric, Node, NodeKind, Port};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeSummary {
    #[serde(with = "ibscope_mad::codes::guid")]
    pub guid: u64,
    pub kind: NodeKind,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct EndRef {
    #[serde(with = "ibscope_mad::codes::guid")]
    pub guid: u64,
    pub port: u8,
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
    #[serde(with = "ibscope_mad::codes::guid")]
    pub guid: u64,
    pub port: u8,
    pub description: String,
    /// "width_active", "speed_active", "state" or "phys_state".
    pub field: &'static str,
    pub old: String,
    pub new: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DescriptionChange {
    #[serde(with = "ibscope_mad::codes::guid")]
    pub guid: u64,
    pub old: String,
    pub new: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FabricDiff {
    pub nodes_added: Vec<NodeSummary>,
    pub nodes_removed: Vec<NodeSummary>,
    pub descriptions_changed: Vec<DescriptionChange>,
    pub links_added: Vec<LinkEnds>,
    pub links_removed: Vec<LinkEnds>,
    pub port_changes: Vec<PortChange>,
}

impl FabricDiff {
    pub fn is_empty(&self) -> bool {
        self.nodes_added.is_empty()
            && self.nodes_removed.is_empty()
            && self.descriptions_changed.is_empty()
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

type Key = ((u64, u8), (u64, u8));

fn links(f: &Fabric) -> BTreeMap<Key, LinkEnds> {
    f.links()
        .map(|l| {
            let mut a = EndRef {
                guid: l.a_node.guid,
                port: l.a.port,
                description: l.a_node.description.clone(),
            };
            let mut b = EndRef {
                guid: l.b_node.guid,
                port: l.b.port,
                description: l.b_node.description.clone(),
            };
            if (b.guid, b.port) < (a.guid, a.port) {
                std::mem::swap(&mut a, &mut b);
            }
            (((a.guid, a.port), (b.guid, b.port)), LinkEnds { a, b })
        })
        .collect()
}

fn port_of(f: &Fabric, guid: u64, number: u8) -> Option<(&Node, &Port)> {
    let node = f.node(f.node_by_guid(guid)?);
    Some((node, node.port(number)?))
}

fn compare_port(old: &Port, new: &Port, node: &Node, out: &mut Vec<PortChange>) {
    let mut push = |field: &'static str, o: String, n: String| {
        out.push(PortChange {
            guid: node.guid,
            port: old.number,
            description: node.description.clone(),
            field,
            old: o,
            new: n,
        })
    };
    if let (Some(o), Some(n)) = (old.width_active, new.width_active) {
        if o != n {
            push("width_active", o.to_string(), n.to_string());
        }
    }
    if let (Some(o), Some(n)) = (old.speed_active, new.speed_active) {
        if o != n {
            push("speed_active", o.to_string(), n.to_string());
        }
    }
    if let (Some(o), Some(n)) = (old.state, new.state) {
        if o != n {
            push("state", o.to_string(), n.to_string());
        }
    }
    if let (Some(o), Some(n)) = (old.phys_state, new.phys_state) {
        if o != n {
            push("phys_state", o.to_string(), n.to_string());
        }
    }
}

/// Compare two snapshots; results are sorted by GUID (and port).
pub fn diff(old: &Fabric, new: &Fabric) -> FabricDiff {
    let mut d = FabricDiff::default();
    for (_, n) in old.nodes() {
        match new.node_by_guid(n.guid) {
            None => d.nodes_removed.push(summary(n)),
            Some(id) => {
                let m = new.node(id);
                if m.description != n.description {
                    d.descriptions_changed.push(DescriptionChange {
                        guid: n.guid,
                        old: n.description.clone(),
                        new: m.description.clone(),
                    });
                }
            }
        }
    }
    for (_, n) in new.nodes() {
        if old.node_by_guid(n.guid).is_none() {
            d.nodes_added.push(summary(n));
        }
    }
    let lo = links(old);
    let ln = links(new);
    let old_keys: BTreeSet<&Key> = lo.keys().collect();
    let new_keys: BTreeSet<&Key> = ln.keys().collect();
    d.links_removed = old_keys
        .difference(&new_keys)
        .map(|k| lo[*k].clone())
        .collect();
    d.links_added = new_keys
        .difference(&old_keys)
        .map(|k| ln[*k].clone())
        .collect();
    for key in old_keys.intersection(&new_keys) {
        for &(guid, port) in [&key.0, &key.1] {
            if let (Some((_, o)), Some((node, n))) =
                (port_of(old, guid, port), port_of(new, guid, port))
            {
                compare_port(o, n, node, &mut d.port_changes);
            }
        }
    }
    d.nodes_added.sort_by_key(|n| n.guid);
    d.nodes_removed.sort_by_key(|n| n.guid);
    d.descriptions_changed.sort_by_key(|c| c.guid);
    d
}

struct End<'a>(&'a EndRef);

impl fmt::Display for End<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:#018x}[{}] \"{}\"",
            self.0.guid,
            self.0.port,
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
        for l in &self.links_removed {
            writeln!(f, "- link {} <-> {}", End(&l.a), End(&l.b))?;
        }
        for l in &self.links_added {
            writeln!(f, "+ link {} <-> {}", End(&l.a), End(&l.b))?;
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
            (d.links_removed[0].a.guid, d.links_removed[0].b.guid),
            (0x100002, 0x200000)
        );
        assert_eq!(d.links_added.len(), 1);
        assert_eq!((d.links_added[0].a.port, d.links_added[0].b.port), (1, 5));
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
}
