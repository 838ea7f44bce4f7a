//! Every fabric's latest discovery, held in memory, so that each fabric's page counts the
//! planes-disagree findings `check -C all` reports for it (planes of multi-plane HCA
//! ports: one port GUID in several fabrics).

use std::sync::{Arc, Mutex};

use ibscope_topo::findings::{self, Finding};
use ibscope_topo::hosts::planes::PlaneView;
use ibscope_topo::hosts::Hosts;
use ibscope_topo::namemap::NameMap;
use ibscope_topo::Fabric;

/// A fabric as its last discovery found it.
struct Seen {
    name: String,
    fabric: Arc<Fabric>,
    hosts: Arc<Hosts>,
}

/// The fabrics' discoveries by slot.
pub struct Discoveries {
    names: Option<NameMap>,
    seen: Mutex<Vec<Option<Seen>>>,
}

impl Discoveries {
    pub fn new(slots: usize, names: Option<NameMap>) -> Discoveries {
        Discoveries {
            names,
            seen: Mutex::new((0..slots).map(|_| None).collect()),
        }
    }

    /// FabricSlot `slot` (called `name`) discovered `fabric`.
    pub fn update(&self, slot: usize, name: &str, fabric: Arc<Fabric>, hosts: Arc<Hosts>) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = seen.get_mut(slot) {
            let name = name.to_string();
            *s = Some(Seen {
                name,
                fabric,
                hosts,
            });
        }
    }

    /// The planes-disagree findings of the fabric called `name`, from every fabric's
    /// latest discovery.
    pub fn findings_of(&self, name: &str) -> Vec<Finding> {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let views: Vec<PlaneView> = seen
            .iter()
            .flatten()
            .map(|s| PlaneView {
                name: &s.name,
                fabric: &s.fabric,
                hosts: &s.hosts,
            })
            .collect();
        let mut found = findings::planes_disagree(&views, self.names.as_ref()).findings;
        found.retain(|f| f.fabric.as_deref() == Some(name));
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibscope_mad::attr::link::{Rate, Width};
    use ibscope_topo::gen::{self, RailsSpec};

    fn plane(slow: bool) -> Arc<Fabric> {
        let spec = RailsSpec {
            hosts_per_leaf: 2,
            ..RailsSpec::new(4, 2, 8)
        };
        let mut f = ibscope_topo::ibnd::parse(&gen::rails(&spec).unwrap()).unwrap();
        gen::bring_up(&mut f, Rate::parse("4xHDR").unwrap());
        if slow {
            let id = f
                .nodes()
                .find(|(_, n)| n.description == "gpu-0002 mlx5_1")
                .unwrap()
                .0;
            f.node_mut(id).port_mut(1).unwrap().width_active = Some(Width::X1);
        }
        Arc::new(f)
    }

    #[test]
    fn the_plane_that_disagrees_gets_the_findings() {
        let planes = Discoveries::new(3, None);
        let add = |slot, name, fabric: Arc<Fabric>| {
            let hosts = Arc::new(Hosts::group(&fabric, None));
            planes.update(slot, name, fabric, hosts);
        };
        add(1, "beta", plane(true));
        assert!(planes.findings_of("beta").is_empty(), "alone");
        add(0, "alpha", plane(false));
        assert_eq!(planes.findings_of("beta").len(), 1);
        assert!(planes.findings_of("alpha").is_empty());
        add(1, "beta", plane(false));
        assert!(planes.findings_of("beta").is_empty());
    }
}
