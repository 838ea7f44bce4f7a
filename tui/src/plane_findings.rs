//! Planes across the fabrics the UI watches: a host CA port found in more than one of
//! them is one HCA port's planes, and a plane that disagrees (not Active, slower, or
//! missing) is a `planes-disagree` finding on that plane's fabric, as `ibscope -C all
//! check` reports it. topo decides (`hosts::planes`, `findings::planes_disagree`); this
//! only gathers each fabric's latest sweep.

use std::sync::Arc;

use ibscope_topo::findings::{self, FindingKind};
use ibscope_topo::hosts::planes::PlaneView;
use ibscope_topo::hosts::Hosts;
use ibscope_topo::Fabric;

use super::state::AppState;

/// Work the planes out again over every named fabric's latest sweep and give each
/// sweep its fabric's planes-disagree findings, in place of the ones it had. With fewer
/// than two such fabrics there are no planes, and nothing changes.
pub fn refresh(states: &mut [AppState]) {
    let swept: Vec<(usize, String, Arc<Fabric>)> = states
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let name = s.status.fabric.as_ref()?.name.clone();
            Some((i, name, s.sweep.as_ref()?.fabric.clone()))
        })
        .collect();
    if swept.len() < 2 {
        return;
    }
    let found = {
        let names = states[swept[0].0].names.as_ref();
        let hosts: Vec<Hosts> = swept
            .iter()
            .map(|(_, _, f)| Hosts::group(f, names))
            .collect();
        let views: Vec<PlaneView> = swept
            .iter()
            .zip(&hosts)
            .map(|((_, name, fabric), hosts)| PlaneView::new(name, fabric, hosts))
            .collect();
        findings::planes_disagree(&views, names).findings
    };
    for (i, name, _) in &swept {
        let Some(sweep) = states[*i].sweep.as_mut() else {
            continue;
        };
        sweep
            .findings
            .retain(|f| f.kind != FindingKind::PlanesDisagree);
        sweep.findings.extend(
            found
                .iter()
                .filter(|f| f.fabric_name() == Some(name.as_str()))
                .cloned(),
        );
    }
}
