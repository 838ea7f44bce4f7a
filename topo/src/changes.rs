//! What changed in a fabric: the cheap signs a long-running sweeper (the exporter) reads
//! between two discoveries to decide it must discover again, and the one matching of two
//! discoveries' links that `diff`, the journal and the TUI's Events view build on.

use std::collections::{BTreeMap, HashMap};

use ibscope_mad::attr::PortInfo;
use ibscope_mad::engine::Request;
use ibscope_mad::smp::{DrPath, SmpRoute};

use crate::counters::Sample;
use crate::discover::SmpExecutor;
use crate::{End, Fabric, LinkKey, PortKey};

/// Whether any switch port's logical state differs from the one discovery recorded: one
/// PortInfo per switch port (1..N) per sweep, over the discovery's directed routes. Covers
/// links going down and coming up; a back-to-back CA link is seen only through its
/// counters. (ibsim changes neither SwitchInfo.PortStateChange nor LinkDownedCounter on
/// Unlink, so this is the signal that works everywhere.) With --active-only this is also
/// what brings a port that came up onto the page.
pub fn port_states_changed<E: SmpExecutor>(exec: &mut E, fabric: &Fabric) -> bool {
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
                Request::get::<PortInfo>(&route, u32::from(p.number)),
            ));
        }
    }
    let mut changed = false;
    exec.execute(batch, &mut |known, result, _| {
        if let Ok(Ok(info)) = result.map(|r| r.decode::<PortInfo>()) {
            if Some(info.state()) != known {
                changed = true;
            }
        }
    });
    changed
}

/// A sign that the fabric changed under us: a port's LinkDownedCounter moved, or its PMA
/// started or stopped answering.
pub fn topology_changed(prev: &Sample, cur: &Sample) -> bool {
    let before: HashMap<PortKey, (bool, Option<u64>)> = prev
        .ports
        .iter()
        .map(|p| {
            (
                p.at.key(),
                (p.counters.is_some(), p.value("LinkDownedCounter")),
            )
        })
        .collect();
    cur.ports.iter().any(|p| match before.get(&p.at.key()) {
        Some(&(answered, downed)) => {
            answered != p.counters.is_some()
                || (downed.is_some()
                    && p.counters.is_some()
                    && downed != p.value("LinkDownedCounter"))
        }
        None => true,
    })
}

/// A link of two discoveries of one fabric, matched by its [`LinkKey`]: in the old one
/// only, the new one only, or both. Its ends in each are ordered as the key (smaller first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkChange {
    Gone { old: (End, End) },
    New { new: (End, End) },
    Kept { old: (End, End), new: (End, End) },
}

/// Every link of `old` and `new` once, in key order.
pub fn link_changes(old: &Fabric, new: &Fabric) -> Vec<(LinkKey, LinkChange)> {
    let ends = |fabric: &Fabric| -> BTreeMap<LinkKey, (End, End)> {
        fabric
            .links()
            .map(|l| {
                let key = l.key();
                let a_first = l.a_node.port_key(l.a.port) == key.0;
                (key, if a_first { (l.a, l.b) } else { (l.b, l.a) })
            })
            .collect()
    };
    let (mut before, after) = (ends(old), ends(new));
    let mut out: Vec<(LinkKey, LinkChange)> = after
        .into_iter()
        .map(|(key, new)| match before.remove(&key) {
            Some(old) => (key, LinkChange::Kept { old, new }),
            None => (key, LinkChange::New { new }),
        })
        .collect();
    out.extend(
        before
            .into_iter()
            .map(|(key, old)| (key, LinkChange::Gone { old })),
    );
    out.sort_unstable_by_key(|(key, _)| *key);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ibnd;
    use crate::test_fixtures::NET_SIM;

    fn key(a: (u64, u8), b: (u64, u8)) -> LinkKey {
        let at = |(guid, port)| PortKey { guid, port };
        LinkKey::new(at(a), at(b))
    }

    #[test]
    fn links_are_matched_by_their_ends_gone_new_and_kept_in_key_order() {
        let old = ibnd::parse(NET_SIM).unwrap();
        // Hca2 moved from Switch1 port 2 to Switch2 port 5.
        let moved = NET_SIM
            .replace("[2]\t\"Hca2\"[2]\n", "")
            .replace(
                "[4]\t\"Switch1\"[4]\n\nHca",
                "[4]\t\"Switch1\"[4]\n[5]\t\"Hca2\"[2]\n\nHca",
            )
            .replace("[2]\t\"Switch1\"[2]", "[2]\t\"Switch2\"[5]");
        let new = ibnd::parse(&moved).unwrap();
        let guid = |f: &Fabric, name: &str| {
            f.nodes()
                .find(|(_, n)| n.description == name)
                .map(|(_, n)| n.guid)
                .unwrap()
        };
        let (s1, s2, h2) = (
            guid(&old, "Switch1"),
            guid(&old, "Switch2"),
            guid(&old, "Hca2"),
        );
        assert_eq!(guid(&new, "Hca2"), h2, "the same GUIDs on both sides");
        let got = link_changes(&old, &new);
        let kind = |c: &LinkChange| match c {
            LinkChange::Gone { .. } => "gone",
            LinkChange::New { .. } => "new",
            LinkChange::Kept { .. } => "kept",
        };
        let summary: Vec<(LinkKey, &str)> = got.iter().map(|(k, c)| (*k, kind(c))).collect();
        assert!(
            summary.contains(&(key((s1, 2), (h2, 2)), "gone")),
            "{summary:?}"
        );
        assert!(
            summary.contains(&(key((s2, 5), (h2, 2)), "new")),
            "{summary:?}"
        );
        assert_eq!(summary.iter().filter(|(_, k)| *k == "kept").count(), 3);
        assert_eq!(got.len(), 5);
        let keys: Vec<LinkKey> = got.iter().map(|(k, _)| *k).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted, "in key order");
        // Each side's ends in the key's order, in that side's fabric.
        for (k, change) in &got {
            let ends = match change {
                LinkChange::Gone { old: e } => (&old, *e),
                LinkChange::New { new: e } | LinkChange::Kept { new: e, .. } => (&new, *e),
            };
            let (fabric, (a, b)) = ends;
            assert_eq!(fabric.node(a.node).port_key(a.port), k.0);
            assert_eq!(fabric.node(b.node).port_key(b.port), k.1);
        }
    }
}
