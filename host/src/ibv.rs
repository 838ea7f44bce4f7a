//! What libibverbs reports of a device and its ports, as plain data, and how its codes map
//! onto the shared vocabulary (`PortState`, `PhysState`, `Width`, `Speed`). Kept apart from
//! the FFI (`verbs`, behind the feature of that name) so that the mapping and the merge with
//! sysfs are tested on any machine.

use ibscope_mad::attr::link::{Speed, Width};
use ibscope_mad::attr::{PhysState, PortState};

use crate::model::{DevicePort, Gid, LinkLayer};

/// One device as libibverbs lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct VerbsDevice {
    pub name: String,
    /// `Err`: it could not be opened or queried (the reason, with errno's text).
    pub facts: Result<VerbsFacts, String>,
}

/// `ibv_query_device` and the ports' `ibv_query_port` / `ibv_query_gid`.
#[derive(Debug, Clone, PartialEq)]
pub struct VerbsFacts {
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub fw_ver: String,
    pub vendor_part_id: u32,
    pub ports: Vec<VerbsPort>,
}

/// `struct ibv_port_attr`'s fields that matter here, as raw codes.
#[derive(Debug, Clone, PartialEq)]
pub struct VerbsPort {
    pub port: u8,
    /// `enum ibv_port_state`: the IB PortState codes.
    pub state: u32,
    /// The IB PortPhysicalState code.
    pub phys_state: u8,
    /// `IBV_LINK_LAYER_*`: 0 unspecified (old kernels: InfiniBand), 1 InfiniBand, 2 Ethernet.
    pub link_layer: u8,
    /// `IBV_WIDTH_*`: the IB LinkWidth bits (1 1x, 2 4x, 4 8x, 8 12x, 16 2x).
    pub active_width: u8,
    /// `IBV_SPEED_*` up to NDR; see [`VERBS_SPEEDS`].
    pub active_speed: u8,
    /// Set (non-zero) where the speed does not fit `active_speed` (XDR), else 0.
    pub active_speed_ex: u32,
    pub lid: u16,
    pub sm_lid: u16,
    /// Non-zero GID table entries: (index, GID).
    pub gids: Vec<(u32, [u8; 16])>,
}

/// rdma-core's `enum ibv_port_speed` (verbs.h; the kernel's `enum ib_port_speed`): one bit
/// per speed. XDR (256) only fits `active_speed_ex`.
pub const VERBS_SPEEDS: [(u32, Speed); 9] = [
    (1, Speed::Sdr),
    (2, Speed::Ddr),
    (4, Speed::Qdr),
    (8, Speed::Fdr10),
    (16, Speed::Fdr),
    (32, Speed::Edr),
    (64, Speed::Hdr),
    (128, Speed::Ndr),
    (256, Speed::Xdr),
];

/// The active speed: `active_speed_ex` when set, else `active_speed` (as ibv_devinfo reads
/// them). `None` for 0 or a code the table lacks.
pub fn speed(active_speed: u8, active_speed_ex: u32) -> Option<Speed> {
    let code = if active_speed_ex != 0 {
        active_speed_ex
    } else {
        u32::from(active_speed)
    };
    VERBS_SPEEDS
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, s)| *s)
}

/// `IBV_WIDTH_*` are the IB LinkWidthActive bits.
pub fn width(active_width: u8) -> Option<Width> {
    Width::from_active(active_width)
}

/// `IBV_LINK_LAYER_*`.
pub fn link_layer(code: u8) -> LinkLayer {
    match code {
        0 | 1 => LinkLayer::InfiniBand,
        2 => LinkLayer::Ethernet,
        _ => LinkLayer::Unknown,
    }
}

impl VerbsPort {
    /// The port in the shared vocabulary. GID types and network interfaces are not in
    /// `ibv_query_gid`: they come from `sysfs`, the same port as read there, by index.
    pub fn to_port(&self, sysfs: Option<&DevicePort>) -> DevicePort {
        let layer = link_layer(self.link_layer);
        let state = Some(
            u8::try_from(self.state).map_or(PortState::Unknown(u8::MAX), PortState::from_code),
        );
        let mut port = DevicePort {
            port: self.port,
            link_layer: layer,
            state,
            phys_state: Some(PhysState::from_code(self.phys_state)),
            width: None,
            speed: None,
            lid: None,
            sm_lid: None,
            gids: Vec::new(),
        };
        if port.link_up() {
            port.width = width(self.active_width);
            port.speed = speed(self.active_speed, self.active_speed_ex);
            // A code this library's headers cannot express (XDR without active_speed_ex):
            // the kernel's sysfs rate names it.
            if port.width.is_none() || port.speed.is_none() {
                port.width = port.width.or(sysfs.and_then(|p| p.width));
                port.speed = port.speed.or(sysfs.and_then(|p| p.speed));
            }
        }
        if layer != LinkLayer::Ethernet {
            port.lid = Some(self.lid);
            port.sm_lid = Some(self.sm_lid);
        }
        port.gids = self
            .gids
            .iter()
            .map(|&(index, gid)| {
                let known = sysfs.and_then(|p| p.gids.iter().find(|g| g.index == index));
                Gid {
                    gid_type: known.and_then(|g| g.gid_type),
                    netdev: known.and_then(|g| g.netdev.clone()),
                    ..Gid::new(index, gid, layer)
                }
            })
            .collect();
        port
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::GidType;

    #[test]
    fn speeds_follow_rdma_core() {
        assert_eq!(speed(1, 0), Some(Speed::Sdr));
        assert_eq!(speed(8, 0), Some(Speed::Fdr10));
        assert_eq!(speed(16, 0), Some(Speed::Fdr));
        assert_eq!(speed(32, 0), Some(Speed::Edr));
        assert_eq!(speed(64, 0), Some(Speed::Hdr));
        assert_eq!(speed(128, 0), Some(Speed::Ndr));
        // XDR does not fit the u8: the kernel reports it in active_speed_ex only.
        assert_eq!(speed(0, 256), Some(Speed::Xdr));
        assert_eq!(speed(128, 256), Some(Speed::Xdr));
        assert_eq!(speed(0, 0), None);
        assert_eq!(speed(3, 0), None);
        // Every speed of the shared table has a verbs code, in rank order.
        let ranks: Vec<Speed> = VERBS_SPEEDS.iter().map(|(_, s)| *s).collect();
        assert_eq!(ranks, Speed::ALL);
        assert_eq!(width(2), Some(Width::X4));
        assert_eq!(width(16), Some(Width::X2));
        assert_eq!(width(0), None);
        assert_eq!(link_layer(0), LinkLayer::InfiniBand);
        assert_eq!(link_layer(2), LinkLayer::Ethernet);
        assert_eq!(link_layer(7), LinkLayer::Unknown);
    }

    fn raw_port() -> VerbsPort {
        VerbsPort {
            port: 1,
            state: 4,
            phys_state: 5,
            link_layer: 2,
            active_width: 2,
            active_speed: 32,
            active_speed_ex: 0,
            lid: 0,
            sm_lid: 0,
            gids: vec![(3, [0xfe; 16])],
        }
    }

    #[test]
    fn a_port_in_the_shared_vocabulary() {
        let sysfs = DevicePort {
            gids: vec![Gid {
                gid_type: Some(GidType::RoceV2),
                netdev: Some("enp65s0f0np0".into()),
                ..Gid::new(3, [0xfe; 16], LinkLayer::Ethernet)
            }],
            ..raw_port().to_port(None)
        };
        let port = raw_port().to_port(Some(&sysfs));
        assert_eq!(port.state, Some(PortState::Active));
        assert_eq!(port.phys_state, Some(PhysState::LinkUp));
        assert_eq!(port.rate().unwrap().to_string(), "4xEDR");
        assert_eq!(port.link_layer, LinkLayer::Ethernet);
        assert_eq!(port.lid, None);
        assert_eq!(port.gids[0].gid_type, Some(GidType::RoceV2));
        assert_eq!(port.gids[0].netdev.as_deref(), Some("enp65s0f0np0"));

        let down = VerbsPort {
            state: 1,
            phys_state: 2,
            link_layer: 1,
            lid: 0,
            ..raw_port()
        };
        let port = down.to_port(None);
        assert_eq!(port.state, Some(PortState::Down));
        assert_eq!(port.rate(), None, "no rate without a link");
        assert_eq!(port.lid, Some(0));
        assert_eq!(port.gids[0].gid_type, None);
        let odd = VerbsPort {
            state: 1000,
            ..raw_port()
        };
        assert_eq!(odd.to_port(None).state, Some(PortState::Unknown(255)));

        // XDR where the library has no active_speed_ex: the speed code is 0 and sysfs's
        // rate ("800 Gb/sec (4X XDR)") supplies it.
        let xdr = VerbsPort {
            active_speed: 0,
            link_layer: 1,
            ..raw_port()
        };
        assert_eq!(xdr.to_port(None).rate(), None);
        let sysfs = DevicePort {
            width: Some(Width::X4),
            speed: Some(Speed::Xdr),
            ..xdr.to_port(None)
        };
        assert_eq!(
            xdr.to_port(Some(&sysfs)).rate().unwrap().to_string(),
            "4xXDR"
        );
    }
}
