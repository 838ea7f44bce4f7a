//! Planes under `serve -C all`: the one finding no fabric's sweeper can make alone. Each
//! sweeper hands over its fabric as discovered (after every discovery); here the
//! latest of each is kept, the planes of all are worked out as `check -C all` does
//! (topo's `hosts::planes` and `findings::planes_disagree`), and each fabric's page gets
//! its count of planes-disagree findings in place of the 0 its sweeper wrote (in its
//! findings family, the only one inflated and compressed again for it). A fabric
//! lost keeps its last discovery, as its page keeps its last sample.

use std::sync::{Arc, Mutex};

use ibscope_topo::findings::{self, FindingKind};
use ibscope_topo::hosts::planes::PlaneView;
use ibscope_topo::hosts::Hosts;
use ibscope_topo::namemap::NameMap;
use ibscope_topo::Fabric;

/// One fabric's latest discovery, by slot.
struct Seen {
    name: String,
    fabric: Fabric,
    hosts: Hosts,
}

/// The latest discovery of every fabric and each one's planes-disagree count.
pub struct Planes {
    names: Option<NameMap>,
    state: Mutex<(Vec<Option<Seen>>, Vec<usize>)>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Planes {
    pub fn new(slots: usize, names: Option<NameMap>) -> Arc<Planes> {
        Arc::new(Planes {
            names,
            state: Mutex::new(((0..slots).map(|_| None).collect(), vec![0; slots])),
        })
    }

    /// Slot `slot` (fabric `name`) was discovered again, as `fabric`. Every fabric's count
    /// is worked out again.
    pub fn update(&self, slot: usize, name: &str, fabric: Fabric) {
        let hosts = Hosts::group(&fabric, self.names.as_ref());
        let mut state = lock(&self.state);
        let (seen, counts) = &mut *state;
        if let Some(s) = seen.get_mut(slot) {
            *s = Some(Seen {
                name: name.to_string(),
                fabric,
                hosts,
            });
        }
        let views: Vec<(usize, PlaneView)> = seen
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let s = s.as_ref()?;
                Some((
                    i,
                    PlaneView {
                        name: &s.name,
                        fabric: &s.fabric,
                        hosts: &s.hosts,
                    },
                ))
            })
            .collect();
        counts.iter_mut().for_each(|c| *c = 0);
        let only: Vec<PlaneView> = views.iter().map(|(_, v)| *v).collect();
        let found = findings::planes_disagree(&only, self.names.as_ref()).findings;
        for (i, v) in &views {
            counts[*i] = found
                .iter()
                .filter(|f| f.fabric.as_deref() == Some(v.name))
                .count();
        }
    }

    /// Slot `slot`'s count of planes-disagree findings.
    pub fn disagreeing(&self, slot: usize) -> usize {
        lock(&self.state).1.get(slot).copied().unwrap_or(0)
    }

    /// `page` (slot `slot`'s) with its planes-disagree findings counted: the value of that
    /// series is replaced where it stands, without copying the rest of the page.
    pub fn patch(&self, slot: usize, mut page: String) -> String {
        let count = self.disagreeing(slot);
        if count == 0 {
            return page;
        }
        let kind = format!("kind=\"{}\"", FindingKind::PlanesDisagree.name());
        // Where each such series' value (and its newline) stands.
        let mut values = Vec::new();
        let mut start = 0;
        for line in page.split_inclusive('\n') {
            if let Some((series, _)) = line.rsplit_once(' ') {
                if line.starts_with("ibscope_findings{") && series.contains(&kind) {
                    values.push(start + series.len() + 1..start + line.len());
                }
            }
            start += line.len();
        }
        let value = format!("{count}\n");
        for range in values.into_iter().rev() {
            page.replace_range(range, &value);
        }
        page
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibscope_mad::attr::link::{Rate, Width};
    use ibscope_topo::gen::{self, RailsSpec};

    /// One plane of 4 servers x 2 rails (the same GUIDs every time), as its sweeper hands
    /// it over; `slow` puts gpu-0002's rail 1 at 1x.
    fn plane(slow: bool) -> Fabric {
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
        f
    }

    const PAGE: &str = "# TYPE ibscope_findings gauge\n\
        ibscope_findings{fabric=\"beta\",kind=\"degraded-link\",severity=\"error\"} 1\n\
        ibscope_findings{fabric=\"beta\",kind=\"planes-disagree\",severity=\"error\"} 0\n\
        ibscope_up{fabric=\"beta\"} 1\n";

    #[test]
    fn the_plane_that_disagrees_gets_the_count_on_its_page() {
        let planes = Planes::new(3, None);
        planes.update(1, "beta", plane(true));
        // One fabric alone has no planes.
        assert_eq!(planes.patch(1, PAGE.to_string()), PAGE);
        planes.update(0, "alpha", plane(false));
        assert_eq!(
            planes.patch(1, PAGE.to_string()),
            PAGE.replace(
                "\"planes-disagree\",severity=\"error\"} 0",
                "\"planes-disagree\",severity=\"error\"} 1"
            )
        );
        let alpha = PAGE.replace("beta", "alpha");
        assert_eq!(planes.patch(0, alpha.clone()), alpha);
        // Beta discovered again at 4x: the planes agree.
        planes.update(1, "beta", plane(false));
        assert_eq!(planes.patch(1, PAGE.to_string()), PAGE);
    }
}
