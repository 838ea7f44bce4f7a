//! The local ports that are planes of one multi-plane HCA port, as libibumad lists them.

use ibscope_mad::engine::LocalPort;
use ibscope_mad::umad;
use ibscope_topo::hosts::name::natural_cmp;

/// "mlx5_0:1".
pub fn port_name(ca: &str, port: u8) -> String {
    format!("{ca}:{port}")
}

/// The local ports that are planes of one multi-plane HCA port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPlanes {
    pub port_guid: u64,
    /// "CA:port" of each plane, plane 0 first (CA names in natural order, then port).
    pub planes: Vec<String>,
    /// "CA:port" of the port's GSI-only device (IsSMDisabled), which carries no SMPs.
    pub gsi: Vec<String>,
}

/// Local InfiniBand ports that share one port GUID: a planarized HCA port shows one umad
/// device per plane with the port's GUID, the planes able to send SMPs and one GSI device
/// with IsSMDisabled set (rdma-core's libibumad/umad.c: `count_ports_by_guid` counts the
/// ports of each GUID, `umad_get_smi_gsi_pairs` calls a GUID counted more than once a
/// planarized port and tells its SMI and GSI devices apart by `is_smi_disabled`). Only
/// GUIDs shared by at least two ports are listed; `planes` may hold a single SMI device
/// when the port merely has its GSI device apart.
pub fn local_planes(cas: &[(String, Vec<LocalPort>)]) -> Vec<LocalPlanes> {
    let mut ports: Vec<&LocalPort> = cas
        .iter()
        .flat_map(|(_, ps)| ps.iter())
        .filter(|p| umad::is_ib(p) && p.port_guid != 0)
        .collect();
    ports.sort_by(|a, b| natural_cmp(&a.ca_name, &b.ca_name).then(a.port_num.cmp(&b.port_num)));
    let mut out: Vec<LocalPlanes> = Vec::new();
    for p in &ports {
        if out.iter().any(|g| g.port_guid == p.port_guid) {
            continue;
        }
        let same: Vec<&&LocalPort> = ports
            .iter()
            .filter(|q| q.port_guid == p.port_guid)
            .collect();
        if same.len() < 2 {
            continue;
        }
        let names = |gsi: bool| {
            same.iter()
                .filter(|q| q.sm_disabled == gsi)
                .map(|q| port_name(&q.ca_name, q.port_num))
                .collect()
        };
        out.push(LocalPlanes {
            port_guid: p.port_guid,
            planes: names(false),
            gsi: names(true),
        });
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ibscope_mad::attr::PortState;

    /// A host with one two-plane HCA port as libibumad lists it: mlx5_0 and mlx5_1, the
    /// planes (SMI devices), and mlx5_2, the GSI device (IsSMDisabled), all with port GUID
    /// 0x...a1; mlx5_10 an ordinary port.
    pub(crate) fn planarized() -> Vec<(String, Vec<LocalPort>)> {
        let dev = |ca: &str, guid: u64, sm_disabled: bool| {
            let p = LocalPort {
                port_guid: guid,
                sm_disabled,
                ..LocalPort::listed(ca, 1, PortState::Active, "InfiniBand")
            };
            (ca.to_string(), vec![p])
        };
        // libibumad's order is the kernel's: not the plane order.
        vec![
            dev("mlx5_10", 0xb1, false),
            dev("mlx5_2", 0xa1, true),
            dev("mlx5_1", 0xa1, false),
            dev("mlx5_0", 0xa1, false),
        ]
    }

    #[test]
    fn ports_sharing_a_port_guid_are_one_ports_planes() {
        let cas = planarized();
        assert_eq!(
            local_planes(&cas),
            vec![LocalPlanes {
                port_guid: 0xa1,
                planes: vec!["mlx5_0:1".into(), "mlx5_1:1".into()],
                gsi: vec!["mlx5_2:1".into()],
            }]
        );
        // No shared GUID, no planes; a GSI device apart from one SMI device is no plane.
        assert_eq!(local_planes(&cas[..1]), vec![]);
        let pair = local_planes(&cas[1..3]);
        assert_eq!(pair[0].planes, ["mlx5_1:1"]);
    }
}
