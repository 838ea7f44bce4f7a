//! SMP attribute layouts (IBA 14.2.5), as bit-offset tables.

use crate::attr::link::{Speed, SpeedSet, Width, WidthSet};
use crate::error::DecodeError;
use crate::wire_struct;

/// NodeInfo NodeType.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum NodeType {
    Ca,
    Switch,
    Router,
    Unknown(u8),
}

wire_struct! {
    /// NodeInfo (IBA 14.2.5.3).
    pub struct NodeInfo (40) {
        pub base_version: u8 = 0, 8;
        pub class_version: u8 = 8, 8;
        pub node_type: u8 = 16, 8;
        pub num_ports: u8 = 24, 8;
        pub system_image_guid: u64 = 32, 64;
        pub node_guid: u64 = 96, 64;
        pub port_guid: u64 = 160, 64;
        pub partition_cap: u16 = 224, 16;
        pub device_id: u16 = 240, 16;
        pub revision: u32 = 256, 32;
        pub local_port_num: u8 = 288, 8;
        pub vendor_id: u32 = 296, 24;
    }
}

impl NodeInfo {
    pub fn kind(&self) -> NodeType {
        match self.node_type {
            1 => NodeType::Ca,
            2 => NodeType::Switch,
            3 => NodeType::Router,
            other => NodeType::Unknown(other),
        }
    }
}

/// NodeDescription (IBA 14.2.5.2): 64 bytes of text, NUL-padded. Untrusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDescription {
    pub raw: [u8; 64],
}

impl Default for NodeDescription {
    fn default() -> Self {
        NodeDescription { raw: [0; 64] }
    }
}

impl NodeDescription {
    pub const WIRE_LEN: usize = 64;
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        crate::wire::need(buf, 64, "NodeDescription")?;
        let mut raw = [0u8; 64];
        raw.copy_from_slice(&buf[..64]);
        Ok(NodeDescription { raw })
    }
    pub fn from_text(text: &str) -> Self {
        let mut raw = [0u8; 64];
        let b = text.as_bytes();
        let n = b.len().min(64);
        raw[..n].copy_from_slice(&b[..n]);
        NodeDescription { raw }
    }
    pub fn to_bytes(&self) -> [u8; 64] {
        self.raw
    }
    /// The text up to the first NUL, invalid UTF-8 replaced. Not yet safe for a terminal.
    pub fn text(&self) -> String {
        let end = self.raw.iter().position(|&b| b == 0).unwrap_or(64);
        String::from_utf8_lossy(&self.raw[..end]).into_owned()
    }
}

wire_struct! {
    /// PortInfo (IBA 14.2.5.6), every field.
    pub struct PortInfo (64) {
        pub m_key: u64 = 0, 64;
        pub gid_prefix: u64 = 64, 64;
        pub lid: u16 = 128, 16;
        pub master_sm_lid: u16 = 144, 16;
        pub capability_mask: u32 = 160, 32;
        pub diag_code: u16 = 192, 16;
        pub m_key_lease_period: u16 = 208, 16;
        pub local_port_num: u8 = 224, 8;
        pub link_width_enabled: u8 = 232, 8;
        pub link_width_supported: u8 = 240, 8;
        pub link_width_active: u8 = 248, 8;
        pub link_speed_supported: u8 = 256, 4;
        pub port_state: u8 = 260, 4;
        pub port_phys_state: u8 = 264, 4;
        pub link_down_default_state: u8 = 268, 4;
        pub m_key_protect_bits: u8 = 272, 2;
        pub lmc: u8 = 277, 3;
        pub link_speed_active: u8 = 280, 4;
        pub link_speed_enabled: u8 = 284, 4;
        pub neighbor_mtu: u8 = 288, 4;
        pub master_sm_sl: u8 = 292, 4;
        pub vl_cap: u8 = 296, 4;
        pub init_type: u8 = 300, 4;
        pub vl_high_limit: u8 = 304, 8;
        pub vl_arbitration_high_cap: u8 = 312, 8;
        pub vl_arbitration_low_cap: u8 = 320, 8;
        pub init_type_reply: u8 = 328, 4;
        pub mtu_cap: u8 = 332, 4;
        pub vl_stall_count: u8 = 336, 3;
        pub hoq_life: u8 = 339, 5;
        pub operational_vls: u8 = 344, 4;
        pub partition_enforcement_inbound: bool = 348, 1;
        pub partition_enforcement_outbound: bool = 349, 1;
        pub filter_raw_inbound: bool = 350, 1;
        pub filter_raw_outbound: bool = 351, 1;
        pub m_key_violations: u16 = 352, 16;
        pub p_key_violations: u16 = 368, 16;
        pub q_key_violations: u16 = 384, 16;
        pub guid_cap: u8 = 400, 8;
        pub client_reregister: bool = 408, 1;
        pub multicast_pkey_trap_suppression_enabled: u8 = 409, 2;
        pub subnet_timeout: u8 = 411, 5;
        pub resp_time_value: u8 = 419, 5;
        pub local_phy_errors: u8 = 424, 4;
        pub overrun_errors: u8 = 428, 4;
        pub max_credit_hint: u16 = 432, 16;
        pub link_round_trip_latency: u32 = 456, 24;
        pub capability_mask2: u16 = 480, 16;
        pub link_speed_ext_active: u8 = 496, 4;
        pub link_speed_ext_supported: u8 = 500, 4;
        pub link_speed_ext_enabled: u8 = 507, 5;
    }
}

/// PortInfo CapabilityMask bits used by ibscope (IBA 14.2.5.6, table 146).
pub mod capability {
    pub const IS_SM: u32 = 1 << 1;
    pub const IS_EXTENDED_SPEEDS_SUPPORTED: u32 = 1 << 14;
    pub const IS_CAPABILITY_MASK2_SUPPORTED: u32 = 1 << 15;
}

/// PortState (IBA 14.2.5.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PortState {
    NoChange,
    Down,
    Init,
    Armed,
    Active,
    Unknown(u8),
}

/// PortPhysicalState (IBA 14.2.5.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PhysState {
    NoChange,
    Sleep,
    Polling,
    Disabled,
    PortConfigurationTraining,
    LinkUp,
    LinkErrorRecovery,
    PhyTest,
    Unknown(u8),
}

impl PortInfo {
    fn extended_speeds(&self) -> bool {
        self.capability_mask & capability::IS_EXTENDED_SPEEDS_SUPPORTED != 0
    }
    pub fn width_active(&self) -> Option<Width> {
        Width::from_active(self.link_width_active)
    }
    pub fn widths_supported(&self) -> WidthSet {
        WidthSet(self.link_width_supported)
    }
    /// 0xff in LinkWidthEnabled means "set to LinkWidthSupported".
    pub fn widths_enabled(&self) -> WidthSet {
        if self.link_width_enabled == 0xff {
            self.widths_supported()
        } else {
            WidthSet(self.link_width_enabled)
        }
    }
    /// Active lane speed: LinkSpeedExtActive when the port has extended speeds and uses one.
    pub fn speed_active(&self) -> Option<Speed> {
        let ext = if self.extended_speeds() {
            self.link_speed_ext_active
        } else {
            0
        };
        Speed::from_active(self.link_speed_active, ext)
    }
    pub fn speeds_supported(&self) -> SpeedSet {
        SpeedSet {
            base: self.link_speed_supported,
            ext: if self.extended_speeds() {
                self.link_speed_ext_supported
            } else {
                0
            },
        }
    }
    /// 15 in LinkSpeedEnabled / 30-31 in LinkSpeedExtEnabled mean "set to supported".
    pub fn speeds_enabled(&self) -> SpeedSet {
        let base = if self.link_speed_enabled == 15 {
            self.link_speed_supported
        } else {
            self.link_speed_enabled
        };
        let ext = if !self.extended_speeds() {
            0
        } else if self.link_speed_ext_enabled >= 30 {
            self.link_speed_ext_supported
        } else {
            self.link_speed_ext_enabled & 0xf
        };
        SpeedSet { base, ext }
    }
    pub fn state(&self) -> PortState {
        match self.port_state {
            0 => PortState::NoChange,
            1 => PortState::Down,
            2 => PortState::Init,
            3 => PortState::Armed,
            4 => PortState::Active,
            o => PortState::Unknown(o),
        }
    }
    pub fn phys_state(&self) -> PhysState {
        match self.port_phys_state {
            0 => PhysState::NoChange,
            1 => PhysState::Sleep,
            2 => PhysState::Polling,
            3 => PhysState::Disabled,
            4 => PhysState::PortConfigurationTraining,
            5 => PhysState::LinkUp,
            6 => PhysState::LinkErrorRecovery,
            7 => PhysState::PhyTest,
            o => PhysState::Unknown(o),
        }
    }
}

/// MTU code (1..=5) to bytes.
pub fn mtu_bytes(code: u8) -> Option<u32> {
    match code {
        1..=5 => Some(128 << code),
        _ => None,
    }
}

wire_struct! {
    /// SwitchInfo (IBA 14.2.5.4).
    pub struct SwitchInfo (20) {
        pub linear_fdb_cap: u16 = 0, 16;
        pub random_fdb_cap: u16 = 16, 16;
        pub multicast_fdb_cap: u16 = 32, 16;
        pub linear_fdb_top: u16 = 48, 16;
        pub default_port: u8 = 64, 8;
        pub default_multicast_primary_port: u8 = 72, 8;
        pub default_multicast_not_primary_port: u8 = 80, 8;
        pub life_time_value: u8 = 88, 5;
        pub port_state_change: bool = 93, 1;
        pub optimized_sl_to_vl_mapping_programming: u8 = 94, 2;
        pub lids_per_port: u16 = 96, 16;
        pub partition_enforcement_cap: u16 = 112, 16;
        pub inbound_enforcement_cap: bool = 128, 1;
        pub outbound_enforcement_cap: bool = 129, 1;
        pub filter_raw_inbound_cap: bool = 130, 1;
        pub filter_raw_outbound_cap: bool = 131, 1;
        pub enhanced_port0: bool = 132, 1;
        pub multicast_fdb_top: u16 = 144, 16;
    }
}

/// One 64-entry block of the LinearForwardingTable (IBA 14.2.5.10); the attribute
/// modifier is the block number, entry i is the egress port of LID `64 * block + i`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinearForwardingTableBlock {
    pub ports: [u8; 64],
}

impl LinearForwardingTableBlock {
    pub const WIRE_LEN: usize = 64;
    /// Port value meaning "no route" as OpenSM programs it.
    pub const UNSET: u8 = 0xff;
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        crate::wire::need(buf, 64, "LinearForwardingTable")?;
        let mut ports = [0u8; 64];
        ports.copy_from_slice(&buf[..64]);
        Ok(LinearForwardingTableBlock { ports })
    }
    pub fn to_bytes(&self) -> [u8; 64] {
        self.ports
    }
    /// Egress port for `lid` if it falls in block `block`.
    pub fn port_for(&self, block: u32, lid: u16) -> Option<u8> {
        let first = block.checked_mul(64)?;
        let idx = u32::from(lid).checked_sub(first)?;
        self.ports.get(idx as usize).copied()
    }
}

wire_struct! {
    /// SMInfo (IBA 14.2.5.13).
    pub struct SmInfo (24) {
        pub guid: u64 = 0, 64;
        pub sm_key: u64 = 64, 64;
        pub act_count: u32 = 128, 32;
        pub priority: u8 = 160, 4;
        pub sm_state: u8 = 164, 4;
    }
}

impl SmInfo {
    pub fn state_name(&self) -> &'static str {
        match self.sm_state {
            0 => "NotActive",
            1 => "Discovering",
            2 => "Standby",
            3 => "Master",
            _ => "Unknown",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NodeInfo of ibsim's Switch1 in fabrics/net, laid out by hand from IBA 14.2.5.3 with
    /// the values smpquery printed for it (8 ports, GUID 0x200000, revision 0xa1).
    #[test]
    fn golden_node_info() {
        let mut b = [0u8; 40];
        b[0] = 1;
        b[1] = 1;
        b[2] = 2;
        b[3] = 8;
        b[4..12].copy_from_slice(&0x200000u64.to_be_bytes());
        b[12..20].copy_from_slice(&0x200000u64.to_be_bytes());
        b[20..28].copy_from_slice(&0x200000u64.to_be_bytes());
        b[28..30].copy_from_slice(&8u16.to_be_bytes());
        b[32..36].copy_from_slice(&0xa1u32.to_be_bytes());
        b[36] = 0;
        b[37..40].copy_from_slice(&[0x00, 0x02, 0xc9]);
        let n = NodeInfo::decode(&b).unwrap();
        assert_eq!(n.kind(), NodeType::Switch);
        assert_eq!(n.num_ports, 8);
        assert_eq!(n.node_guid, 0x200000);
        assert_eq!(n.partition_cap, 8);
        assert_eq!(n.revision, 0xa1);
        assert_eq!(n.vendor_id, 0x0002c9);
        assert_eq!(n.to_bytes(), b);
        assert!(NodeInfo::decode(&b[..39]).is_err());
    }

    /// PortInfo of Hca1 port 1 on fabrics/net as smpquery printed it: LID 2, SMLid 1,
    /// CapMask 0x50c048, 4X of 1/2/4/8/12X, SDR of 2.5/5/10, Active/LinkUp, MTU 2048.
    #[test]
    fn golden_port_info() {
        let mut b = [0u8; 64];
        b[8..16].copy_from_slice(&0xfe80000000000000u64.to_be_bytes());
        b[16..18].copy_from_slice(&2u16.to_be_bytes());
        b[18..20].copy_from_slice(&1u16.to_be_bytes());
        b[20..24].copy_from_slice(&0x0050c048u32.to_be_bytes());
        b[26..28].copy_from_slice(&4089u16.to_be_bytes());
        b[28] = 1; // LocalPortNum
        b[29] = 2; // LinkWidthEnabled 4X
        b[30] = 0x1f; // supported 1X|4X|8X|12X|2X
        b[31] = 2; // active 4X
        b[32] = 0x74; // LinkSpeedSupported 7 | PortState Active
        b[33] = 0x52; // PhysState LinkUp | LinkDownDefault Polling
        b[34] = 0x00; // protect bits, LMC 0
        b[35] = 0x11; // LinkSpeedActive SDR | Enabled SDR
        b[36] = 0x40; // NeighborMTU 2048 | MasterSMSL 0
        b[37] = 0x40; // VLCap VL0-7
        b[39] = 8; // VLArbitrationHighCap
        b[40] = 8; // VLArbitrationLowCap
        b[41] = 0x04; // InitTypeReply 0 | MTUCap 2048
        b[42] = 0xe0; // VLStallCount 7, HOQLife 0
        b[43] = 0x40; // OperationalVLs VL0-7
        b[50] = 32; // GUIDCap
        b[51] = 31; // SubnetTimeout
        b[60..62].copy_from_slice(&0x30u16.to_be_bytes());
        let p = PortInfo::decode(&b).unwrap();
        assert_eq!(p.lid, 2);
        assert_eq!(p.master_sm_lid, 1);
        assert_eq!(p.capability_mask, 0x50c048);
        assert_eq!(p.m_key_lease_period, 4089);
        assert_eq!(p.width_active(), Some(Width::X4));
        assert_eq!(p.widths_supported().best(), Some(Width::X12));
        assert_eq!(p.speed_active(), Some(Speed::Sdr));
        assert_eq!(p.speeds_supported().best(), Some(Speed::Qdr));
        assert_eq!(p.state(), PortState::Active);
        assert_eq!(p.phys_state(), PhysState::LinkUp);
        assert_eq!(p.link_down_default_state, 2);
        assert_eq!(mtu_bytes(p.neighbor_mtu), Some(2048));
        assert_eq!(p.vl_cap, 4);
        assert_eq!(p.vl_stall_count, 7);
        assert_eq!(p.operational_vls, 4);
        assert_eq!(p.guid_cap, 32);
        assert_eq!(p.subnet_timeout, 31);
        assert_eq!(p.capability_mask2, 0x30);
        assert_eq!(p.link_speed_ext_active, 0);
        assert_eq!(p.to_bytes(), b);
    }

    #[test]
    fn extended_speed_needs_capability() {
        let mut p = PortInfo {
            link_speed_active: 4,
            link_speed_ext_active: 4,
            ..Default::default()
        };
        assert_eq!(p.speed_active(), Some(Speed::Qdr));
        p.capability_mask = capability::IS_EXTENDED_SPEEDS_SUPPORTED;
        assert_eq!(p.speed_active(), Some(Speed::Hdr));
        let b = p.to_bytes();
        assert_eq!(b[62] >> 4, 4);
    }

    #[test]
    fn golden_switch_info_and_lft() {
        let mut b = [0u8; 20];
        b[0..2].copy_from_slice(&0xc000u16.to_be_bytes());
        b[6..8].copy_from_slice(&4u16.to_be_bytes());
        b[16] = 0x08; // EnhancedPort0
        let s = SwitchInfo::decode(&b).unwrap();
        assert_eq!(s.linear_fdb_cap, 0xc000);
        assert_eq!(s.linear_fdb_top, 4);
        assert!(s.enhanced_port0);
        assert_eq!(s.to_bytes(), b);
        let mut l = [0xffu8; 64];
        l[2] = 1;
        let blk = LinearForwardingTableBlock::decode(&l).unwrap();
        assert_eq!(blk.port_for(0, 2), Some(1));
        assert_eq!(blk.port_for(1, 2), None);
        assert_eq!(blk.port_for(1, 65), Some(0xff));
    }

    #[test]
    fn golden_sm_info_and_desc() {
        let mut b = [0u8; 24];
        b[0..8].copy_from_slice(&0x200000u64.to_be_bytes());
        b[16..20].copy_from_slice(&7u32.to_be_bytes());
        b[20] = 0xf3; // priority 15, Master
        let s = SmInfo::decode(&b).unwrap();
        assert_eq!((s.guid, s.act_count, s.priority), (0x200000, 7, 15));
        assert_eq!(s.state_name(), "Master");
        let d = NodeDescription::from_text("Hca1");
        assert_eq!(
            NodeDescription::decode(&d.to_bytes()).unwrap().text(),
            "Hca1"
        );
        assert!(NodeDescription::decode(&[0u8; 10]).is_err());
    }
}
