//! SMP attribute layouts (IBA 14.2.5), as bit-offset tables. Every attribute sits in the
//! 64-byte SMP data area; layouts shorter than 64 bytes leave the rest reserved.

use crate::attr::link::{Speed, SpeedSet, Width, WidthSet};
use crate::attribute::{Attribute, SubnMgt};
use crate::error::DecodeError;
use crate::error::EncodeError;
use crate::wire::{Field, FieldValue, Nested};
use crate::wire_struct;

/// The codec of an SMP attribute that is 64 raw bytes, held in one array field: decode,
/// encode, nesting (a NodeRecord holds a NodeDescription) and the [`Attribute`] impl.
macro_rules! raw_64_codec {
    ($ty:ident . $raw:ident, $id:expr, $name:literal) => {
        impl $ty {
            pub const WIRE_LEN: usize = 64;
            pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
                crate::wire::need(buf, Self::WIRE_LEN, $name)?;
                Ok($ty {
                    $raw: Field::read(buf, 0, 8 * Self::WIRE_LEN)?,
                })
            }
            pub fn to_bytes(&self) -> [u8; 64] {
                self.$raw
            }
            pub fn encode_into(&self, buf: &mut [u8]) -> Result<(), EncodeError> {
                self.$raw.write(buf, 0, 8 * Self::WIRE_LEN, $name)
            }
        }

        impl Nested for $ty {
            const WIRE_LEN: usize = 64;
            fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
                Self::decode(buf)
            }
            fn encode_into(&self, buf: &mut [u8]) -> Result<(), EncodeError> {
                Self::encode_into(self, buf)
            }
            fn value(&self) -> FieldValue<'_> {
                FieldValue::Bytes(&self.$raw)
            }
        }

        impl Attribute for $ty {
            type Class = SubnMgt;
            const ID: u16 = $id;
            const NAME: &'static str = $name;
            fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
                Self::decode(payload)
            }
            fn encode_into(&self, payload: &mut [u8]) -> Result<(), EncodeError> {
                Self::encode_into(self, payload)
            }
        }
    };
}

crate::coded_enum! {
    /// NodeInfo NodeType (IBA 14.2.5.3).
    pub enum NodeType: u8 {
        Ca = 1, "Channel Adapter", "CA";
        Switch = 2, "Switch", "SW";
        Router = 3, "Router", "RT";
    }
}

wire_struct! {
    /// NodeInfo (IBA 14.2.5.3).
    pub struct NodeInfo (40) attribute(SubnMgt, 0x0011, "NodeInfo") {
        pub base_version: u8 = 0, 8, "BaseVers";
        pub class_version: u8 = 8, 8, "ClassVers";
        /// Raw NodeType code; see [`NodeInfo::kind`].
        pub node_type: u8 = 16, 8, "NodeType";
        pub num_ports: u8 = 24, 8, "NumPorts";
        #[serde(with = "crate::codes::guid")]
        pub system_image_guid: u64 = 32, 64, "SystemGuid";
        #[serde(with = "crate::codes::guid")]
        pub node_guid: u64 = 96, 64, "Guid";
        #[serde(with = "crate::codes::guid")]
        pub port_guid: u64 = 160, 64, "PortGuid";
        pub partition_cap: u16 = 224, 16, "PartCap";
        pub device_id: u16 = 240, 16, "DevId";
        pub revision: u32 = 256, 32, "Revision";
        /// The port the request entered by (0 for a switch's management port).
        pub local_port_num: u8 = 288, 8, "LocalPort";
        pub vendor_id: u32 = 296, 24, "VendorId";
    }
}

impl NodeInfo {
    pub fn kind(&self) -> NodeType {
        NodeType::from_code(self.node_type)
    }
    /// The node type's name, as smpquery prints it.
    pub fn node_type_name(&self) -> &'static str {
        self.kind().name()
    }
}

/// NodeDescription (IBA 14.2.5.2): 64 bytes of text, NUL-padded, chosen by whoever
/// administers the node: untrusted. The raw bytes are kept so nothing is lost; serde writes
/// `{"text": ..., "raw": [..64 bytes..]}` and reads either `raw` or, failing that, `text`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(into = "DescriptionRepr", try_from = "DescriptionRepr")]
pub struct NodeDescription {
    pub raw: [u8; 64],
}

#[derive(serde::Serialize, serde::Deserialize)]
struct DescriptionRepr {
    #[serde(default)]
    text: String,
    #[serde(default)]
    raw: Option<Vec<u8>>,
}

impl From<NodeDescription> for DescriptionRepr {
    fn from(d: NodeDescription) -> Self {
        DescriptionRepr {
            text: d.text(),
            raw: Some(d.raw.to_vec()),
        }
    }
}

impl TryFrom<DescriptionRepr> for NodeDescription {
    type Error = String;
    fn try_from(r: DescriptionRepr) -> Result<Self, String> {
        match r.raw {
            Some(bytes) if bytes.len() > 64 => Err(format!(
                "NodeDescription raw holds {} bytes, at most 64",
                bytes.len()
            )),
            Some(bytes) => {
                let mut raw = [0u8; 64];
                raw[..bytes.len()].copy_from_slice(&bytes);
                Ok(NodeDescription { raw })
            }
            None => Ok(NodeDescription::from_text(&r.text)),
        }
    }
}

impl Default for NodeDescription {
    fn default() -> Self {
        NodeDescription { raw: [0; 64] }
    }
}

raw_64_codec!(NodeDescription.raw, 0x0010, "NodeDescription");

impl NodeDescription {
    /// Text truncated to 64 bytes (possibly inside a UTF-8 sequence, as a node would).
    pub fn from_text(text: &str) -> Self {
        let mut raw = [0u8; 64];
        let b = text.as_bytes();
        let n = b.len().min(64);
        raw[..n].copy_from_slice(&b[..n]);
        NodeDescription { raw }
    }
    /// The bytes up to the first NUL.
    pub fn as_bytes(&self) -> &[u8] {
        let end = self.raw.iter().position(|&b| b == 0).unwrap_or(64);
        &self.raw[..end]
    }
    /// The text up to the first NUL, invalid UTF-8 replaced. Not yet safe for a terminal:
    /// control characters pass through (escape before display).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(self.as_bytes()).into_owned()
    }
}

wire_struct! {
    /// PortInfo (IBA 14.2.5.6), every field. On a switch only port 0 carries the LID and
    /// the M_Key/GID fields; external ports report them as 0.
    pub struct PortInfo (64) attribute(SubnMgt, 0x0015, "PortInfo") {
        pub m_key: u64 = 0, 64, "Mkey";
        pub gid_prefix: u64 = 64, 64, "GidPrefix";
        pub lid: u16 = 128, 16, "Lid";
        pub master_sm_lid: u16 = 144, 16, "SMLid";
        /// See [`capability`].
        pub capability_mask: u32 = 160, 32, "CapMask";
        pub diag_code: u16 = 192, 16, "DiagCode";
        pub m_key_lease_period: u16 = 208, 16, "MkeyLeasePeriod";
        pub local_port_num: u8 = 224, 8, "LocalPort";
        /// Bit mask as in [`WidthSet`]; 0xff means "set to supported" in a Set.
        pub link_width_enabled: u8 = 232, 8, "LinkWidthEnabled";
        pub link_width_supported: u8 = 240, 8, "LinkWidthSupported";
        pub link_width_active: u8 = 248, 8, "LinkWidthActive";
        /// 1 = SDR, 2 = DDR, 4 = QDR (a mask).
        pub link_speed_supported: u8 = 256, 4, "LinkSpeedSupported";
        /// See [`PortState`].
        pub port_state: u8 = 260, 4, "LinkState";
        /// See [`PhysState`].
        pub port_phys_state: u8 = 264, 4, "PhysLinkState";
        pub link_down_default_state: u8 = 268, 4, "LinkDownDefState";
        pub m_key_protect_bits: u8 = 272, 2, "ProtectBits";
        pub lmc: u8 = 277, 3, "LMC";
        pub link_speed_active: u8 = 280, 4, "LinkSpeedActive";
        pub link_speed_enabled: u8 = 284, 4, "LinkSpeedEnabled";
        /// MTU code; see [`mtu_bytes`].
        pub neighbor_mtu: u8 = 288, 4, "NeighborMTU";
        pub master_sm_sl: u8 = 292, 4, "SMSL";
        pub vl_cap: u8 = 296, 4, "VLCap";
        pub init_type: u8 = 300, 4, "InitType";
        pub vl_high_limit: u8 = 304, 8, "VLHighLimit";
        pub vl_arbitration_high_cap: u8 = 312, 8, "VLArbHighCap";
        pub vl_arbitration_low_cap: u8 = 320, 8, "VLArbLowCap";
        pub init_type_reply: u8 = 328, 4, "InitReply";
        pub mtu_cap: u8 = 332, 4, "MtuCap";
        pub vl_stall_count: u8 = 336, 3, "VLStallCount";
        pub hoq_life: u8 = 339, 5, "HoqLife";
        pub operational_vls: u8 = 344, 4, "OperVLs";
        pub partition_enforcement_inbound: bool = 348, 1, "PartEnforceInb";
        pub partition_enforcement_outbound: bool = 349, 1, "PartEnforceOutb";
        pub filter_raw_inbound: bool = 350, 1, "FilterRawInb";
        pub filter_raw_outbound: bool = 351, 1, "FilterRawOutb";
        pub m_key_violations: u16 = 352, 16, "MkeyViolations";
        pub p_key_violations: u16 = 368, 16, "PkeyViolations";
        pub q_key_violations: u16 = 384, 16, "QkeyViolations";
        pub guid_cap: u8 = 400, 8, "GuidCap";
        pub client_reregister: bool = 408, 1, "ClientReregister";
        pub multicast_pkey_trap_suppression_enabled: u8 = 409, 2, "McastPkeyTrapSuppressionEnabled";
        pub subnet_timeout: u8 = 411, 5, "SubnetTimeout";
        pub resp_time_value: u8 = 419, 5, "RespTimeVal";
        pub local_phy_errors: u8 = 424, 4, "LocalPhysErr";
        pub overrun_errors: u8 = 428, 4, "OverrunErr";
        pub max_credit_hint: u16 = 432, 16, "MaxCreditHint";
        /// 1 = XDR; valid only with CapabilityMask2 IsExtendedSpeeds2Supported.
        pub link_speed_ext_active2: u8 = 449, 2, "LinkSpeedExtActive2";
        pub link_speed_ext_supported2: u8 = 451, 2, "LinkSpeedExtSupported2";
        pub link_speed_ext_enabled2: u8 = 453, 3, "LinkSpeedExtEnabled2";
        pub link_round_trip_latency: u32 = 456, 24, "RoundTrip";
        /// See [`capability2`].
        pub capability_mask2: u16 = 480, 16, "CapabilityMask2";
        /// 1 = FDR, 2 = EDR, 4 = HDR, 8 = NDR; valid only with IsExtendedSpeedsSupported.
        pub link_speed_ext_active: u8 = 496, 4, "LinkSpeedExtActive";
        pub link_speed_ext_supported: u8 = 500, 4, "LinkSpeedExtSupported";
        /// A mask as `link_speed_ext_supported`; 30 = extended speeds disabled, 31 = "set to
        /// supported".
        pub link_speed_ext_enabled: u8 = 507, 5, "LinkSpeedExtEnabled";
    }
}

/// PortInfo CapabilityMask bits (IBA 14.2.5.6, as smpquery names them).
pub mod capability {
    pub const IS_SM: u32 = 1 << 1;
    pub const IS_NOTICE_SUPPORTED: u32 = 1 << 2;
    pub const IS_TRAP_SUPPORTED: u32 = 1 << 3;
    pub const IS_OPTIONAL_IPD_SUPPORTED: u32 = 1 << 4;
    pub const IS_AUTOMATIC_MIGRATION_SUPPORTED: u32 = 1 << 5;
    pub const IS_SL_MAPPING_SUPPORTED: u32 = 1 << 6;
    pub const IS_MKEY_NVRAM: u32 = 1 << 7;
    pub const IS_PKEY_NVRAM: u32 = 1 << 8;
    pub const IS_LED_INFO_SUPPORTED: u32 = 1 << 9;
    pub const IS_SM_DISABLED: u32 = 1 << 10;
    pub const IS_SYSTEM_IMAGE_GUID_SUPPORTED: u32 = 1 << 11;
    pub const IS_PKEY_SWITCH_EXTERNAL_PORT_TRAP_SUPPORTED: u32 = 1 << 12;
    pub const IS_CABLE_INFO_SUPPORTED: u32 = 1 << 13;
    pub const IS_EXTENDED_SPEEDS_SUPPORTED: u32 = 1 << 14;
    pub const IS_CAPABILITY_MASK2_SUPPORTED: u32 = 1 << 15;
    pub const IS_COMMUNICATION_MANAGEMENT_SUPPORTED: u32 = 1 << 16;
    pub const IS_SNMP_TUNNELING_SUPPORTED: u32 = 1 << 17;
    pub const IS_REINIT_SUPPORTED: u32 = 1 << 18;
    pub const IS_DEVICE_MANAGEMENT_SUPPORTED: u32 = 1 << 19;
    pub const IS_VENDOR_CLASS_SUPPORTED: u32 = 1 << 20;
    pub const IS_DR_NOTICE_SUPPORTED: u32 = 1 << 21;
    pub const IS_CAPABILITY_MASK_NOTICE_SUPPORTED: u32 = 1 << 22;
    pub const IS_BOOT_MANAGEMENT_SUPPORTED: u32 = 1 << 23;
    pub const IS_LINK_ROUND_TRIP_LATENCY_SUPPORTED: u32 = 1 << 24;
    pub const IS_CLIENT_REREGISTRATION_SUPPORTED: u32 = 1 << 25;
    pub const IS_OTHER_LOCAL_CHANGES_NOTICE_SUPPORTED: u32 = 1 << 26;
    pub const IS_LINK_SPEED_WIDTH_PAIRS_TABLE_SUPPORTED: u32 = 1 << 27;
}

/// PortInfo CapabilityMask2 bits (IBA 14.2.5.6).
pub mod capability2 {
    pub const IS_SET_NODE_DESCRIPTION_SUPPORTED: u16 = 1 << 0;
    pub const IS_PORT_INFO_EXTENDED_SUPPORTED: u16 = 1 << 1;
    pub const IS_VIRTUALIZATION_SUPPORTED: u16 = 1 << 2;
    pub const IS_SWITCH_PORT_STATE_TABLE_SUPPORTED: u16 = 1 << 3;
    pub const IS_LINK_WIDTH_2X_SUPPORTED: u16 = 1 << 4;
    pub const IS_LINK_SPEED_HDR_SUPPORTED: u16 = 1 << 5;
    pub const IS_LINK_SPEED_NDR_SUPPORTED: u16 = 1 << 10;
    /// LinkSpeedExtActive2/Supported2/Enabled2 mean something.
    pub const IS_EXTENDED_SPEEDS_2_SUPPORTED: u16 = 1 << 11;
    pub const IS_LINK_SPEED_XDR_SUPPORTED: u16 = 1 << 12;
}

crate::coded_enum! {
    /// PortState (IBA 14.2.5.6). NoChange (0) is what a Set writes to leave it alone; a Get
    /// never answers it.
    pub enum PortState: u8 {
        NoChange = 0, "NoChange", "-";
        Down = 1, "Down", "Down";
        Init = 2, "Initialize", "Init";
        Armed = 3, "Armed", "Armed";
        Active = 4, "Active", "Active";
        ActiveDefer = 5, "ActiveDefer", "Defer";
    }
}

crate::coded_enum! {
    /// PortPhysicalState (IBA 14.2.5.6). NoChange (0) as for [`PortState`].
    pub enum PhysState: u8 {
        NoChange = 0, "NoChange", "-";
        Sleep = 1, "Sleep", "Sleep";
        Polling = 2, "Polling", "Polling";
        Disabled = 3, "Disabled", "Disabled";
        PortConfigurationTraining = 4, "PortConfigurationTraining", "Training";
        LinkUp = 5, "LinkUp", "LinkUp";
        LinkErrorRecovery = 6, "LinkErrorRecovery", "ErrRecov";
        PhyTest = 7, "PhyTest", "PhyTest";
    }
}

crate::coded_enum! {
    /// PortInfo LinkDownDefaultState (IBA 14.2.5.6): the physical state a port falls to
    /// when its link goes down.
    pub enum LinkDownDefaultState: u8 {
        NoChange = 0, "NoChange", "-";
        Sleep = 1, "Sleep", "Sleep";
        Polling = 2, "Polling", "Polling";
    }
}

crate::coded_enum! {
    /// PortInfo VLCap and OperationalVLs (IBA 14.2.5.6): how many data VLs, as smpquery
    /// names them.
    pub enum VlCount: u8 {
        Vl0 = 1, "VL0", "1";
        Vl0To1 = 2, "VL0-1", "2";
        Vl0To3 = 3, "VL0-3", "4";
        Vl0To7 = 4, "VL0-7", "8";
        Vl0To14 = 5, "VL0-14", "15";
    }
}

impl PortInfo {
    /// This PortInfo with the capability masks a switch's port 0 gives for every port of
    /// the switch: on its external ports CapabilityMask and CapabilityMask2 are reserved
    /// (IBA 14.2.5.6, PortInfo), 0 in practice, so whether their LinkSpeedExt* fields
    /// mean anything is port 0's to say (infiniband-diags reads them from port 0 too).
    /// Decode an external switch port's speeds from what this returns.
    pub fn with_capabilities_of(&self, port0: &PortInfo) -> PortInfo {
        PortInfo {
            capability_mask: port0.capability_mask,
            capability_mask2: port0.capability_mask2,
            ..self.clone()
        }
    }

    /// Whether the LinkSpeedExt* fields mean anything on this port.
    pub fn has_extended_speeds(&self) -> bool {
        self.capability_mask & capability::IS_EXTENDED_SPEEDS_SUPPORTED != 0
    }
    /// Whether the LinkSpeedExt*2 fields mean anything: CapabilityMask2 is valid
    /// (IsCapabilityMask2Supported) and says IsExtendedSpeeds2Supported; as libibnetdisc,
    /// only on a port with extended speeds.
    pub fn has_extended_speeds2(&self) -> bool {
        self.has_extended_speeds()
            && self.capability_mask & capability::IS_CAPABILITY_MASK2_SUPPORTED != 0
            && self.capability_mask2 & capability2::IS_EXTENDED_SPEEDS_2_SUPPORTED != 0
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
    /// The (LinkSpeedExt, LinkSpeedExt2) values of a field pair, each 0 where the port's
    /// capability bits say it means nothing.
    fn ext_fields(&self, ext: u8, ext2: u8) -> (u8, u8) {
        (
            if self.has_extended_speeds() { ext } else { 0 },
            if self.has_extended_speeds2() { ext2 } else { 0 },
        )
    }
    /// Active lane speed: LinkSpeedExtActive2 when set, then LinkSpeedExtActive, then
    /// LinkSpeedActive (each only where its capability bit is set). `None` for 0 or a code
    /// no speed has. FDR10 is not visible here (Mellanox's vendor attribute carries it).
    pub fn speed_active(&self) -> Option<Speed> {
        let (ext, ext2) = self.ext_fields(self.link_speed_ext_active, self.link_speed_ext_active2);
        Speed::from_active(self.link_speed_active, ext, ext2)
    }
    pub fn speeds_supported(&self) -> SpeedSet {
        let (ext, ext2) = self.ext_fields(
            self.link_speed_ext_supported,
            self.link_speed_ext_supported2,
        );
        SpeedSet::from_masks(self.link_speed_supported, 0, ext, ext2)
    }
    /// 15 in LinkSpeedEnabled and 31 in LinkSpeedExtEnabled (7 in LinkSpeedExtEnabled2)
    /// mean "set to supported"; 30 in LinkSpeedExtEnabled means extended speeds are
    /// disabled.
    pub fn speeds_enabled(&self) -> SpeedSet {
        let base = if self.link_speed_enabled == 15 {
            self.link_speed_supported
        } else {
            self.link_speed_enabled
        };
        let (ext, ext2) =
            self.ext_fields(self.link_speed_ext_enabled, self.link_speed_ext_enabled2);
        let ext = match ext {
            31 => self.link_speed_ext_supported,
            30 => 0,
            mask => mask,
        };
        let ext2 = match ext2 {
            7 => self.link_speed_ext_supported2,
            mask => mask,
        };
        SpeedSet::from_masks(base, 0, ext, ext2)
    }
    pub fn state(&self) -> PortState {
        PortState::from_code(self.port_state)
    }
    pub fn phys_state(&self) -> PhysState {
        PhysState::from_code(self.port_phys_state)
    }
    /// Active MTU in bytes (NeighborMTU).
    pub fn mtu_active_bytes(&self) -> Option<u32> {
        mtu_bytes(self.neighbor_mtu)
    }
}

/// PortInfo LinkSpeedActive's QDR bit: the value behind which Mellanox hardware hides FDR10.
const LINK_SPEED_QDR: u8 = 4;

impl PortInfo {
    /// Whether this port's speed may be FDR10, which only Mellanox's vendor attribute
    /// ([`MlnxExtPortInfo`]) tells: physically up, LinkSpeedActive QDR and no extended
    /// speed active. libibnetdisc asks for the vendor attribute in exactly this case (on
    /// the devices [`MlnxExtPortInfo::answered_by`] names).
    pub fn may_run_fdr10(&self) -> bool {
        self.phys_state() == PhysState::LinkUp
            && self.link_speed_active == LINK_SPEED_QDR
            && self.link_speed_ext_active == 0
            && self.link_speed_ext_active2 == 0
    }
    /// [`PortInfo::speed_active`] with the port's [`MlnxExtPortInfo`], when read: an
    /// extended speed wins, then FDR10, then LinkSpeedActive (as ibnetdiscover and
    /// iblinkinfo print it).
    pub fn speed_active_with(&self, mlnx: Option<&MlnxExtPortInfo>) -> Option<Speed> {
        let (ext, ext2) = self.ext_fields(self.link_speed_ext_active, self.link_speed_ext_active2);
        if ext == 0 && ext2 == 0 && mlnx.is_some_and(|m| m.fdr10(m.link_speed_active)) {
            return Some(Speed::Fdr10);
        }
        self.speed_active()
    }
    /// [`PortInfo::speeds_supported`] and FDR10 where the vendor attribute supports it.
    pub fn speeds_supported_with(&self, mlnx: Option<&MlnxExtPortInfo>) -> SpeedSet {
        let mut set = self.speeds_supported();
        if mlnx.is_some_and(|m| m.fdr10(m.link_speed_supported)) {
            set.insert(Speed::Fdr10);
        }
        set
    }
    /// [`PortInfo::speeds_enabled`] and FDR10 where the vendor attribute enables it.
    pub fn speeds_enabled_with(&self, mlnx: Option<&MlnxExtPortInfo>) -> SpeedSet {
        let mut set = self.speeds_enabled();
        if mlnx.is_some_and(|m| m.fdr10(m.link_speed_enabled)) {
            set.insert(Speed::Fdr10);
        }
        set
    }
}

wire_struct! {
    /// Mellanox's ExtendedPortInfo, a vendor-specific SMP attribute (ID 0xFF90, the port in
    /// the modifier): how FDR10 (10.3125 Gb/s per lane, 64b/66b) is negotiated, which the
    /// standard PortInfo fields cannot express. Layout as rdma-core's libibmad field table
    /// (IB_MLNX_EXT_PORT_*) gives it; the speed fields are masks whose bit 0 is FDR10.
    pub struct MlnxExtPortInfo (16) attribute(SubnMgt, 0xff90, "MlnxExtPortInfo") {
        pub state_change_enable: u8 = 24, 8, "StateChangeEnable";
        pub link_speed_supported: u8 = 56, 8, "LinkSpeedSupported";
        pub link_speed_enabled: u8 = 88, 8, "LinkSpeedEnabled";
        pub link_speed_active: u8 = 120, 8, "LinkSpeedActive";
    }
}

impl MlnxExtPortInfo {
    /// Whether `mask` (one of the speed fields) has FDR10's bit, as [`SPEEDS`] places it.
    ///
    /// [`SPEEDS`]: crate::attr::link::SPEEDS
    pub fn fdr10(&self, mask: u8) -> bool {
        mask & Speed::Fdr10.facts().bit != 0
    }

    /// Whether a node answers this attribute: the Mellanox/NVIDIA switch and HCA device IDs
    /// (SwitchX, Switch-IB, Switch-IB 2, Quantum; ConnectX-3 to ConnectX-6 and their
    /// virtual functions, Connect-IB, BlueField) and Bull's OEM versions of them under
    /// vendor ID 0x119f: the list libibnetdisc and infiniband-diags check before asking
    /// (is_mlnx_ext_port_info_supported). Other devices are not asked.
    pub fn answered_by(vendor_id: u32, device_id: u16) -> bool {
        const BULL: u32 = 0x119f;
        let switch = matches!(
            device_id,
            0xc738..=0xc73b | 0xc839 | 0xcb20 | 0xcf08 | 0xcf09 | 0xd2f0
        );
        let hca = matches!(device_id, 0x1003..=0x101b | 0xa2d2);
        let bull_switch = matches!(
            device_id,
            0x1b02 | 0x1b50 | 0x1ba0 | 0x1bd0..=0x1bd5 | 0x1bf0
        );
        let bull_hca = matches!(
            device_id,
            0x1b33
                | 0x1b73
                | 0x1b40
                | 0x1b41
                | 0x1b60
                | 0x1b61
                | 0x1b83
                | 0x1b93
                | 0x1b94
                | 0x1bb4
                | 0x1bb5
                | 0x1bc4..=0x1bc6
        );
        switch || hca || (vendor_id == BULL && (bull_switch || bull_hca))
    }
}

crate::coded_enum! {
    /// PortInfoExtended FECModeActive (IBA 14.2.5.21; rdma-core's IB_PORT_EXT_*_MODE_ACTIVE).
    pub enum FecMode: u16 {
        NoFec = 0, "No FEC", "none";
        FireCode = 1, "Firecode FEC", "FC";
        RsFec = 2, "RS-FEC", "RS";
        LowLatencyRsFec = 3, "Low Latency RS-FEC", "LLRS";
        RsFec2 = 4, "RS-FEC2", "RS2";
    }
}

wire_struct! {
    /// PortInfoExtended (IBA 14.2.5.21, SMP attribute 0x33), valid where PortInfo
    /// CapabilityMask2 has IsPortInfoExtendedSupported: which forward error correction a
    /// port runs, and which it supports and enables per speed.
    pub struct PortInfoExtended (22) attribute(SubnMgt, 0x0033, "PortInfoExtended") {
        /// Bit 0: IsFECModeSupported (the FEC fields mean something).
        pub capability_mask: u32 = 0, 32, "CapMask";
        /// See [`FecMode`].
        pub fec_mode_active: u16 = 32, 16, "FECModeActive";
        pub fdr_fec_mode_supported: u16 = 48, 16, "FDRFECModeSupported";
        pub fdr_fec_mode_enabled: u16 = 64, 16, "FDRFECModeEnabled";
        pub edr_fec_mode_supported: u16 = 80, 16, "EDRFECModeSupported";
        pub edr_fec_mode_enabled: u16 = 96, 16, "EDRFECModeEnabled";
        pub hdr_fec_mode_supported: u16 = 112, 16, "HDRFECModeSupported";
        pub hdr_fec_mode_enabled: u16 = 128, 16, "HDRFECModeEnabled";
        pub ndr_fec_mode_supported: u16 = 144, 16, "NDRFECModeSupported";
        pub ndr_fec_mode_enabled: u16 = 160, 16, "NDRFECModeEnabled";
    }
}

impl PortInfoExtended {
    /// CapMask IsFECModeSupported.
    pub const IS_FEC_MODE_SUPPORTED: u32 = 1 << 0;

    pub fn fec_mode(&self) -> FecMode {
        FecMode::from_code(self.fec_mode_active)
    }
    /// FEC modes are supported and RS-FEC (or RS-FEC2) is active: the case in
    /// which perfquery reads PortExtendedSpeedsCounters in its RS-FEC layout.
    pub fn rs_fec_active(&self) -> bool {
        self.capability_mask & Self::IS_FEC_MODE_SUPPORTED != 0
            && matches!(self.fec_mode(), FecMode::RsFec | FecMode::RsFec2)
    }
}

/// MTU code (1..=5) to bytes: 1 = 256 .. 5 = 4096.
pub fn mtu_bytes(code: u8) -> Option<u32> {
    match code {
        1..=5 => Some(128 << code),
        _ => None,
    }
}

wire_struct! {
    /// SwitchInfo (IBA 14.2.5.4), every field.
    pub struct SwitchInfo (20) attribute(SubnMgt, 0x0012, "SwitchInfo") {
        pub linear_fdb_cap: u16 = 0, 16, "LinearFdbCap";
        pub random_fdb_cap: u16 = 16, 16, "RandomFdbCap";
        pub multicast_fdb_cap: u16 = 32, 16, "McastFdbCap";
        /// Highest LID programmed in the LFT.
        pub linear_fdb_top: u16 = 48, 16, "LinearFdbTop";
        pub default_port: u8 = 64, 8, "DefPort";
        pub default_multicast_primary_port: u8 = 72, 8, "DefMcastPrimPort";
        pub default_multicast_not_primary_port: u8 = 80, 8, "DefMcastNotPrimPort";
        pub life_time_value: u8 = 88, 5, "LifeTime";
        pub port_state_change: bool = 93, 1, "StateChange";
        pub optimized_sl_to_vl_mapping_programming: u8 = 94, 2, "OptSLtoVLMapping";
        pub lids_per_port: u16 = 96, 16, "LidsPerPort";
        pub partition_enforcement_cap: u16 = 112, 16, "PartEnforceCap";
        pub inbound_enforcement_cap: bool = 128, 1, "InboundPartEnf";
        pub outbound_enforcement_cap: bool = 129, 1, "OutboundPartEnf";
        pub filter_raw_inbound_cap: bool = 130, 1, "FilterRawInbound";
        pub filter_raw_outbound_cap: bool = 131, 1, "FilterRawOutbound";
        pub enhanced_port0: bool = 132, 1, "EnhancedPort0";
        pub multicast_fdb_top: u16 = 144, 16, "MulticastFDBTop";
    }
}

/// One 64-entry block of the LinearForwardingTable (IBA 14.2.5.10). The block number is the
/// attribute modifier (not in the payload); entry i is the egress port of LID `64 * block + i`.
/// Serde writes the 64 ports as a list.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(into = "Vec<u8>", try_from = "Vec<u8>")]
pub struct LinearForwardingTableBlock {
    pub ports: [u8; 64],
}

impl Default for LinearForwardingTableBlock {
    fn default() -> Self {
        LinearForwardingTableBlock {
            ports: [Self::UNSET; 64],
        }
    }
}

impl From<LinearForwardingTableBlock> for Vec<u8> {
    fn from(b: LinearForwardingTableBlock) -> Self {
        b.ports.to_vec()
    }
}

impl TryFrom<Vec<u8>> for LinearForwardingTableBlock {
    type Error = String;
    fn try_from(v: Vec<u8>) -> Result<Self, String> {
        let ports: [u8; 64] = v
            .try_into()
            .map_err(|v: Vec<u8>| format!("LFT block holds {} entries, need 64", v.len()))?;
        Ok(LinearForwardingTableBlock { ports })
    }
}

raw_64_codec!(
    LinearForwardingTableBlock.ports,
    0x0019,
    "LinearForwardingTable"
);

impl LinearForwardingTableBlock {
    /// LIDs per block.
    pub const LIDS_PER_BLOCK: u32 = 64;
    /// Entry meaning "no route" (OpenSM fills unused LIDs with it; IBA calls ports above
    /// NumPorts invalid).
    pub const UNSET: u8 = 0xff;

    /// The block (attribute modifier) that holds `lid`.
    pub fn block_of(lid: u16) -> u32 {
        u32::from(lid) / Self::LIDS_PER_BLOCK
    }
    /// Egress port for `lid`, where this is block `block`: `None` if `lid` lies in another
    /// block or its entry is [`Self::UNSET`].
    pub fn port_for(&self, block: u32, lid: u16) -> Option<u8> {
        let first = block.checked_mul(Self::LIDS_PER_BLOCK)?;
        let idx = u32::from(lid).checked_sub(first)?;
        let port = *self.ports.get(usize::try_from(idx).ok()?)?;
        (port != Self::UNSET).then_some(port)
    }
    /// `(lid, port)` for every set entry, where this is block `block`.
    pub fn routes(&self, block: u32) -> impl Iterator<Item = (u32, u8)> + '_ {
        let first = block.saturating_mul(Self::LIDS_PER_BLOCK);
        self.ports
            .iter()
            .enumerate()
            .filter(|(_, &p)| p != Self::UNSET)
            .map(move |(i, &p)| (first.saturating_add(i as u32), p))
    }
}

crate::coded_enum! {
    /// SMInfo SMState (IBA 14.2.5.13).
    pub enum SmState: u8 {
        NotActive = 0, "NotActive", "NotActive";
        Discovering = 1, "Discovering", "Discovering";
        Standby = 2, "Standby", "Standby";
        Master = 3, "Master", "Master";
    }
}

wire_struct! {
    /// SMInfo (IBA 14.2.5.13).
    pub struct SmInfo (24) attribute(SubnMgt, 0x0020, "SMInfo") {
        #[serde(with = "crate::codes::guid")]
        pub guid: u64 = 0, 64, "SmInfoGuid";
        pub sm_key: u64 = 64, 64, "SmInfoKey";
        /// Incremented by the master SM as it works: a stuck value means a stuck SM.
        pub act_count: u32 = 128, 32, "SmActivity";
        pub priority: u8 = 160, 4, "SmPriority";
        /// See [`SmState`].
        pub sm_state: u8 = 164, 4, "SmState";
    }
}

impl SmInfo {
    pub fn state(&self) -> SmState {
        SmState::from_code(self.sm_state)
    }
    pub fn state_name(&self) -> &'static str {
        self.state().name()
    }
    pub fn is_master(&self) -> bool {
        self.state() == SmState::Master
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // Extended capability but no extended speed in use: the base field decides.
        p.link_speed_ext_active = 0;
        assert_eq!(p.speed_active(), Some(Speed::Qdr));
    }

    /// An external switch port: CapabilityMask 0 (reserved), an XDR link in the second
    /// extended field; its port 0 says both extended fields are valid.
    #[test]
    fn a_switch_port_decodes_with_port_0_capabilities() {
        let external = PortInfo {
            link_speed_active: 4,
            link_speed_ext_active: 8,
            link_speed_ext_active2: 1,
            ..Default::default()
        };
        assert_eq!(
            external.speed_active(),
            Some(Speed::Qdr),
            "alone: base speed only"
        );
        let port0 = PortInfo {
            capability_mask: capability::IS_EXTENDED_SPEEDS_SUPPORTED
                | capability::IS_CAPABILITY_MASK2_SUPPORTED,
            capability_mask2: capability2::IS_EXTENDED_SPEEDS_2_SUPPORTED,
            link_speed_active: 1,
            ..Default::default()
        };
        let decoded = external.with_capabilities_of(&port0);
        assert_eq!(decoded.speed_active(), Some(Speed::Xdr));
        assert_eq!(decoded.link_speed_active, 4, "only the masks are port 0's");
    }

    #[test]
    fn speeds_enabled_special_codes() {
        let mut p = PortInfo {
            capability_mask: capability::IS_EXTENDED_SPEEDS_SUPPORTED,
            link_speed_supported: 7,
            link_speed_enabled: 15,
            link_speed_ext_supported: 3,
            link_speed_ext_enabled: 31,
            link_width_supported: 0x1f,
            link_width_enabled: 0xff,
            ..Default::default()
        };
        assert_eq!(p.speeds_enabled(), SpeedSet::from_masks(7, 0, 3, 0));
        assert_eq!(p.widths_enabled(), WidthSet(0x1f));
        p.link_speed_ext_enabled = 30;
        assert_eq!(p.speeds_enabled().best(), Some(Speed::Qdr));
        p.link_speed_ext_enabled = 2;
        assert_eq!(p.speeds_enabled().best(), Some(Speed::Edr));
        p.capability_mask = 0;
        assert_eq!(p.speeds_enabled().best(), Some(Speed::Qdr));
        assert_eq!(p.speeds_supported().best(), Some(Speed::Qdr));
    }

    /// XDR as IBA 1.7 and rdma-core's field table put it: LinkSpeedExtActive2 at bits
    /// 449-450, Supported2 451-452, Enabled2 453-455, valid with CapabilityMask2 bit 11.
    /// Bytes written by hand from those offsets.
    #[test]
    fn xdr_from_the_second_extended_field() {
        let mut b = [0u8; 64];
        b[20..24].copy_from_slice(&0x0000_c000u32.to_be_bytes()); // ext speeds + cap mask 2
        b[32] = (4 << 4) | 4; // LinkSpeedSupported QDR, PortState Active
        b[35] = 0x44; // LinkSpeedActive QDR, LinkSpeedEnabled QDR
        b[56] = 0b0010_1011; // Active2 1, Supported2 1, Enabled2 3
        b[60..62].copy_from_slice(&(1u16 << 11).to_be_bytes()); // IsExtendedSpeeds2Supported
        b[62] = 0x88; // LinkSpeedExtActive NDR, LinkSpeedExtSupported NDR
        b[63] = 8; // LinkSpeedExtEnabled NDR
        let p = PortInfo::decode(&b).unwrap();
        assert_eq!(
            (
                p.link_speed_ext_active2,
                p.link_speed_ext_supported2,
                p.link_speed_ext_enabled2
            ),
            (1, 1, 3)
        );
        assert!(p.has_extended_speeds2());
        assert_eq!(p.state(), PortState::Active);
        assert_eq!(p.speed_active(), Some(Speed::Xdr));
        assert_eq!(p.speeds_supported().best(), Some(Speed::Xdr));
        assert_eq!(p.speeds_enabled().best(), Some(Speed::Xdr));
        assert_eq!(p.to_bytes(), b);
        // Without the CapabilityMask2 bit the second field means nothing: NDR.
        let mut q = p.clone();
        q.capability_mask2 = 0;
        assert_eq!(q.speed_active(), Some(Speed::Ndr));
        assert_eq!(q.speeds_supported().best(), Some(Speed::Ndr));
    }

    #[test]
    fn states_and_codes() {
        for code in 0..=255u8 {
            assert_eq!(PortState::from_code(code).code(), code);
            assert_eq!(PhysState::from_code(code).code(), code);
            assert_eq!(NodeType::from_code(code).code(), code);
        }
        assert_eq!(PortState::from_code(4), PortState::Active);
        assert_eq!(PhysState::from_code(5), PhysState::LinkUp);
        assert_eq!(
            PhysState::from_code(4),
            PhysState::PortConfigurationTraining
        );
        assert_eq!(SmState::from_code(2), SmState::Standby);
        assert_eq!(PortState::Init.name(), "Initialize");
        assert_eq!(PortState::parse("init"), Some(PortState::Init));
        assert_eq!(NodeType::Ca.name(), "Channel Adapter");
        assert_eq!(mtu_bytes(1), Some(256));
        assert_eq!(mtu_bytes(5), Some(4096));
        assert_eq!(mtu_bytes(0), None);
        assert_eq!(mtu_bytes(6), None);
    }

    #[test]
    fn node_description_text_and_serde() {
        let mut raw = [0u8; 64];
        raw[..4].copy_from_slice(b"ab\xffc");
        raw[5] = b'x'; // after the NUL: kept raw, not in the text
        let d = NodeDescription::decode(&raw).unwrap();
        assert_eq!(d.text(), "ab\u{fffd}c");
        assert_eq!(d.as_bytes(), b"ab\xffc");
        let full = NodeDescription::decode(&[b'z'; 64]).unwrap();
        assert_eq!(full.text().len(), 64);
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["text"], "ab\u{fffd}c");
        let back: NodeDescription = serde_json::from_value(json).unwrap();
        assert_eq!(back, d);
        let from_text: NodeDescription =
            serde_json::from_value(serde_json::json!({"text": "Hca1"})).unwrap();
        assert_eq!(from_text.text(), "Hca1");
        assert!(serde_json::from_value::<NodeDescription>(
            serde_json::json!({"raw": vec![1u8; 65]})
        )
        .is_err());
        assert!(NodeDescription::decode(&[0u8; 63]).is_err());
        assert!(d.encode_into(&mut [0u8; 63]).is_err());
    }

    #[test]
    fn lft_helpers() {
        let mut ports = [LinearForwardingTableBlock::UNSET; 64];
        ports[1] = 0;
        ports[2] = 1;
        let blk = LinearForwardingTableBlock { ports };
        assert_eq!(blk.port_for(0, 2), Some(1));
        assert_eq!(blk.port_for(0, 1), Some(0));
        assert_eq!(blk.port_for(0, 3), None);
        assert_eq!(blk.port_for(1, 2), None);
        assert_eq!(blk.port_for(u32::MAX, 2), None);
        assert_eq!(LinearForwardingTableBlock::block_of(65), 1);
        assert_eq!(blk.routes(2).collect::<Vec<_>>(), vec![(129, 0), (130, 1)]);
        let v = serde_json::to_value(&blk).unwrap();
        assert_eq!(v.as_array().map(|a| a.len()), Some(64));
        assert_eq!(
            serde_json::from_value::<LinearForwardingTableBlock>(v).unwrap(),
            blk
        );
        assert!(LinearForwardingTableBlock::decode(&[0u8; 63]).is_err());
    }
}
