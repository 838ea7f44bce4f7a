//! Whether the fabric changed since it was discovered: the cheap signs a long-running
//! sweeper (the exporter, the TUI) reads between two discoveries to decide it must
//! discover again.

use std::collections::HashMap;

use ibscope_mad::attr::PortInfo;
use ibscope_mad::engine::Request;
use ibscope_mad::smp::{DrPath, SmpRoute};

use crate::counters::Sample;
use crate::discover::SmpExecutor;
use crate::{Fabric, PortKey};

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
